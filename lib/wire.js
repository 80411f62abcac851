'use strict';
// The argument wire of `store.async`: every JavaScript value a caller can pass, read on the
// caller's thread before the call is queued, as JSON the core decodes into what the reference's
// JavaScript saw (src/js/value.rs reads it; synchronous calls read the caller's values live).
//
// Values JSON represents exactly (finite numbers other than -0, well-formed strings, booleans,
// null, dense arrays and plain objects of those) are sent as `JSON.stringify` writes them.
// Everything else becomes a tagged object whose first key is "\u0000" (a key no user object on
// the wire can start with: a user key that starts with "\u0000" gets one more "\u0000" in front):
//
//   {"\0": "undefined"}                                  undefined (property, item or argument)
//   {"\0": "number", "v": "NaN"|"Infinity"|"-Infinity"|"-0"}
//   {"\0": "bigint", "v": "<decimal>"}
//   {"\0": "string", "v": "<lone surrogates as U+FFFD>", "wtf8": "<hex>"}   a string with lone
//        surrogates: "v" for reading, "wtf8" the bytes better-sqlite3 binds
//   {"\0": "bytes", "kind": "Buffer"|"Uint8Array"|…, "v": "<hex of the viewed bytes>", "text": String(value)}
//   {"\0": "symbol", "v": "<description>"}
//   {"\0": "function", "v": "<name>"}
//   {"\0": "object", "kind": "<constructor name>"|null, "text": String(value)|null, "props": {…}}
//        any object that is not a plain object, array or byte view (Date, Map, class instance,
//        boxed primitive, Object.create(proto)); "props" are its own enumerable properties
//
// Values the JS layer computes before the call (index.js: `new Date`, canonical JSON) are sent
// as envelopes at their own positions; an error JavaScript threw there is `encodeError(error)`,
// `{name, message, code?}`, which the core throws where the reference would.
//
// Objects nested deeper than MAX_DEPTH are sent as opaque objects (`props: {}`): the reference
// reads at most a few levels of its arguments; JSON documents are sent as envelopes anyway.

const TAG = '\u0000';
const MAX_DEPTH = 24;

const wellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (text) => text.isWellFormed()
    : (text) => !/[\ud800-\udfff]/.test(text) || isWellFormedSlow(text);

function isWellFormedSlow(text) {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return false;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return false;
  }
  return true;
}

function isPlainObject(value) {
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function safeString(value) {
  try {
    return String(value);
  } catch {
    return null;
  }
}

function constructorName(value) {
  try {
    const name = value.constructor?.name;
    return typeof name === 'string' ? name : null;
  } catch {
    return null;
  }
}

/** WTF-8 bytes (lone surrogates encoded as 3-byte sequences), as V8 hands them to SQLite. */
function wtf8Hex(text) {
  const bytes = [];
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00);
        i++;
      }
    }
    if (code < 0x80) bytes.push(code);
    else if (code < 0x800) bytes.push(0xc0 | (code >> 6), 0x80 | (code & 63));
    else if (code < 0x10000) bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
    else bytes.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 63), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
  }
  return Buffer.from(bytes).toString('hex');
}

function lossy(text) {
  return wellFormed(text) ? text : text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

function encodeKey(key) {
  const readable = lossy(key);
  return readable.charCodeAt(0) === 0 ? TAG + readable : readable;
}

function encodeProps(object, depth) {
  // No prototype: a key named __proto__ stays an ordinary property.
  const out = Object.create(null);
  if (depth >= MAX_DEPTH) return out;
  for (const key of Object.keys(object)) {
    let item;
    try {
      item = object[key];
    } catch {
      continue;
    }
    out[encodeKey(key)] = encode(item, depth + 1);
  }
  return out;
}

/** The wire form of one value (tags where JSON would lose something). */
function encode(value, depth = 0) {
  switch (typeof value) {
    case 'undefined':
      return { [TAG]: 'undefined' };
    case 'string':
      return wellFormed(value) ? value : { [TAG]: 'string', v: lossy(value), wtf8: wtf8Hex(value) };
    case 'number':
      if (Number.isFinite(value) && (value !== 0 || 1 / value > 0)) return value;
      return { [TAG]: 'number', v: Object.is(value, -0) ? '-0' : String(value) };
    case 'boolean':
      return value;
    case 'bigint':
      return { [TAG]: 'bigint', v: value.toString() };
    case 'symbol':
      return { [TAG]: 'symbol', v: value.description ?? '' };
    case 'function':
      return { [TAG]: 'function', v: typeof value.name === 'string' ? value.name : '' };
    default:
      break;
  }
  if (value === null) return null;
  if (Array.isArray(value)) {
    if (depth >= MAX_DEPTH) return { [TAG]: 'object', kind: 'Array', text: null, props: {} };
    const out = new Array(value.length);
    for (let i = 0; i < value.length; i++) out[i] = encode(value[i], depth + 1);
    return out;
  }
  if (ArrayBuffer.isView(value)) {
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    return { [TAG]: 'bytes', kind: constructorName(value), v: bytes.toString('hex'), text: safeString(value) };
  }
  if (isPlainObject(value) && depth < MAX_DEPTH) return encodeProps(value, depth);
  return {
    [TAG]: 'object',
    kind: isPlainObject(value) ? 'Object' : constructorName(value),
    text: safeString(value),
    props: encodeProps(value, depth),
  };
}

/** An error thrown while preparing a value, for the core to throw at the reference's point. */
function encodeError(error) {
  const out = { name: constructorName(error) ?? 'Error', message: String(error?.message ?? error) };
  if (typeof error?.code === 'string') out.code = error.code;
  return out;
}

/** The wire text of an argument list, every value checked and tagged where needed. */
function encodeArguments(args) {
  return JSON.stringify(Array.from(args, (arg) => encode(arg)));
}

module.exports = { TAG, encode, encodeArguments, encodeError };
