'use strict';
// Whether a synchronous call's arguments are plain data: values whose every read gives the same
// answer and runs no JavaScript, so that reading them all before the call (lib/wire.js's
// snapshot, as `store.async` does) cannot be told from the core reading them live, when and as
// often as the reference's code does. On a cluster such a write runs from its snapshot and its
// writes wait for the COMMIT (docs/cluster.md, "store.async holds from the BEGIN").
//
// Plain: strings, numbers, booleans, null and undefined, and arrays and objects of them whose
// prototype is Array.prototype or Object.prototype, that are extensible (an in-place change of a
// claim succeeds) and whose own properties are all enumerable, writable, configurable data
// properties under string keys (no getter, no symbol such as Symbol.toPrimitive, no array hole).
// Not plain: anything else (a bigint, a symbol, a function, a Proxy, a Date, a Buffer, a class
// instance, a null-prototype object, a cycle or a nesting deeper than MAX_DEPTH), and every
// argument while Object.prototype or Array.prototype differs from what it was when this module
// loaded (an inherited property, or a method the reference's code calls, replaced).

const { types } = require('node:util');

const MAX_DEPTH = 16;

/** Each own property of `prototype` as its descriptor's value, getter and setter. */
function propertiesOf(prototype) {
  return Reflect.ownKeys(prototype).map((key) => {
    const { value, get, set } = Reflect.getOwnPropertyDescriptor(prototype, key);
    return { key, value, get, set };
  });
}

const PROTOTYPES = [Object.prototype, Array.prototype].map((prototype) => ({
  prototype,
  properties: propertiesOf(prototype),
}));

/** Whether the prototypes plain data inherits from are as they were at load. */
function prototypesUnchanged() {
  return PROTOTYPES.every(({ prototype, properties }) => {
    const keys = Reflect.ownKeys(prototype);
    if (keys.length !== properties.length) return false;
    return properties.every(({ key, value, get, set }) => {
      const now = Reflect.getOwnPropertyDescriptor(prototype, key);
      return now !== undefined && now.value === value && now.get === get && now.set === set;
    });
  });
}

function isPlainProperty(descriptor) {
  return 'value' in descriptor && descriptor.writable && descriptor.enumerable && descriptor.configurable;
}

function isPlainValue(value, depth) {
  if (value === null) return true;
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'undefined':
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (depth >= MAX_DEPTH || types.isProxy(value) || !Object.isExtensible(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  const array = prototype === Array.prototype && Array.isArray(value);
  if (!array && prototype !== Object.prototype) return false;
  const keys = Reflect.ownKeys(value);
  if (array) {
    // Every index present (no hole) and nothing but the indices and `length`.
    if (keys.length !== value.length + 1) return false;
    for (let index = 0; index < value.length; index++) {
      const descriptor = Reflect.getOwnPropertyDescriptor(value, index);
      if (descriptor === undefined || !isPlainProperty(descriptor) || !isPlainValue(descriptor.value, depth + 1)) return false;
    }
    return true;
  }
  for (const key of keys) {
    if (typeof key !== 'string') return false;
    const descriptor = Reflect.getOwnPropertyDescriptor(value, key);
    if (!isPlainProperty(descriptor) || !isPlainValue(descriptor.value, depth + 1)) return false;
  }
  return true;
}

/** Whether every argument is plain data (see the module header). */
function arePlainArguments(args) {
  for (const arg of args) {
    if (!isPlainValue(arg, 0)) return false;
  }
  return prototypesUnchanged();
}

module.exports = { arePlainArguments };
