'use strict';
// The reference's error classes. This file is evaluated in the caller's realm (inside Jest, the
// test file's), so `instanceof` works there, and `name` is an own enumerable property as in the
// reference.

class ResourceConflictError extends Error {
  constructor(controller, key) {
    super(`Controller resource ${controller}/${key} changed during reconciliation`);
    this.name = 'ResourceConflictError';
  }
}

class ResourceNotFoundError extends Error {
  constructor(controller, key) {
    super(`Controller resource not found: ${controller}/${key}`);
    this.name = 'ResourceNotFoundError';
  }
}

class EffectRequestConflictError extends Error {
  constructor(key) {
    super(`Effect key ${JSON.stringify(key)} was reused with a different request`);
    this.name = 'EffectRequestConflictError';
  }
}

class WorkflowRequestConflictError extends Error {
  constructor(key) {
    super(`Workflow request key ${JSON.stringify(key)} was reused with different input`);
    this.name = 'WorkflowRequestConflictError';
  }
}

// better-sqlite3's error shape: `name` on the prototype, `code` as an own property.
class SqliteError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}
Object.defineProperty(SqliteError.prototype, 'name', {
  value: 'SqliteError',
  writable: true,
  configurable: true,
  enumerable: false,
});

/** Node's argument errors carry `code` as an own enumerable property. */
function withCode(error, code) {
  if (code !== undefined) error.code = code;
  return error;
}

/** The first key of a tagged wire value (lib/wire.js). */
const TAG = '\u0000';

/** UTF-16 code units of WTF-8 bytes (a lone surrogate is a 3-byte sequence there). */
function fromWtf8(hex) {
  const bytes = [];
  for (let i = 0; i + 1 < hex.length; i += 2) bytes.push(parseInt(hex.slice(i, i + 2), 16));
  let out = '';
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    let code;
    let size;
    if (b < 0x80) [code, size] = [b, 1];
    else if (b < 0xe0) [code, size] = [((b & 0x1f) << 6) | (bytes[i + 1] & 0x3f), 2];
    else if (b < 0xf0) [code, size] = [((b & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6) | (bytes[i + 2] & 0x3f), 3];
    else {
      [code, size] = [((b & 0x07) << 18) | ((bytes[i + 1] & 0x3f) << 12) | ((bytes[i + 2] & 0x3f) << 6) | (bytes[i + 3] & 0x3f), 4];
    }
    out += String.fromCodePoint(code);
    i += size;
  }
  return out;
}

/**
 * A caller's value the core passed back as an error argument (lib/wire.js tags): the value
 * itself where it can be rebuilt, so the error class formats it as the reference's does
 * (`JSON.stringify(5n)` throws there as here).
 */
function callerValue(value) {
  if (value === null || typeof value !== 'object' || Object.keys(value)[0] !== TAG) return value;
  switch (value[TAG]) {
    case 'undefined':
      return undefined;
    case 'number':
      return Number(value.v);
    case 'bigint':
      return BigInt(value.v);
    case 'string':
      return fromWtf8(value.wtf8);
    default:
      return value;
  }
}

/**
 * Rebuilds the error the core reported (`{kind, message?, code?, args?, openPrune?}`). An error
 * of the read-write open's blob prune, reported by the first use of the state instead of by the
 * constructor (src/state/open_prune.rs), is the error the reference's constructor throws (same
 * class, message and own properties), marked as the prune's: non-enumerable `openPrune: true`
 * and `filePath`, and a note after the message in the stack's first line.
 */
function errorFromWire(wire) {
  const error = errorOfKind(wire);
  if (wire.openPrune !== undefined) {
    const note = ` [the blob prune of the read-write open of ${wire.openPrune} failed and was rolled back]`;
    for (const [key, value] of [
      ['openPrune', true],
      ['filePath', wire.openPrune],
    ]) {
      Object.defineProperty(error, key, { value, configurable: true, writable: true });
    }
    const { message, stack } = error;
    const firstLine = stack.indexOf('\n') === -1 ? stack.length : stack.indexOf('\n');
    const at = message !== '' && stack.includes(message) ? stack.indexOf(message) + message.length : firstLine;
    error.stack = `${stack.slice(0, at)}${note}${stack.slice(at)}`;
  }
  return error;
}

function errorOfKind(wire) {
  switch (wire.kind) {
    case 'TypeError':
      return withCode(new TypeError(wire.message), wire.code);
    case 'RangeError':
      return withCode(new RangeError(wire.message), wire.code);
    case 'SqliteError':
      return new SqliteError(wire.message, wire.code);
    case 'ResourceConflictError':
      // The core sends `${controller}` and `${key}`; a text with lone surrogates arrives tagged.
      return new ResourceConflictError(...wire.args.map(callerValue));
    case 'ResourceNotFoundError':
      return new ResourceNotFoundError(...wire.args.map(callerValue));
    case 'EffectRequestConflictError':
      return new EffectRequestConflictError(...wire.args.map(callerValue));
    case 'WorkflowRequestConflictError':
      return new WorkflowRequestConflictError(...wire.args.map(callerValue));
    default:
      // A message interpolating a caller's string with lone surrogates arrives as WTF-8.
      return withCode(new Error(wire.wtf8 === undefined ? wire.message : fromWtf8(wire.wtf8)), wire.code);
  }
}

module.exports = {
  ResourceConflictError,
  ResourceNotFoundError,
  EffectRequestConflictError,
  WorkflowRequestConflictError,
  SqliteError,
  errorFromWire,
};
