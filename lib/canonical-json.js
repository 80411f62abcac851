'use strict';
// Canonical JSON exactly as the reference computes it: `JSON.stringify` of the value with object
// keys sorted (default sort), `undefined` properties dropped, `-0` as `0`, and the same
// rejections. Done here because only JavaScript knows JavaScript values exactly (plain objects,
// prototypes, number formatting).

function normalizeJson(value) {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error('JSON numbers must be finite');
    return Object.is(value, -0) ? 0 : value;
  }
  if (Array.isArray(value)) return value.map((item) => normalizeJson(item));
  if (typeof value === 'object') {
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new Error('Only plain objects can be stored as canonical JSON');
    }
    const output = {};
    for (const key of Object.keys(value).sort()) {
      const item = value[key];
      if (item === undefined) continue;
      output[key] = normalizeJson(item);
    }
    return output;
  }
  throw new Error(`Unsupported JSON value type: ${typeof value}`);
}

function canonicalJson(value) {
  return JSON.stringify(normalizeJson(value));
}

/**
 * The envelope the core expects for a caller-supplied JSON document: its canonical text, or the
 * error canonicalisation raised (thrown later by the core, where the reference stores it).
 */
function jsonEnvelope(value) {
  if (value === undefined) return { $u: true };
  try {
    return { $c: canonicalJson(value) };
  } catch (error) {
    const message = typeof error?.message === 'string' ? error.message : String(error);
    return error instanceof RangeError ? { $e: message, $r: true } : { $e: message };
  }
}

module.exports = { canonicalJson, normalizeJson, jsonEnvelope };
