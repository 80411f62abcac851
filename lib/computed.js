'use strict';
// What the core asks JavaScript to compute during a live call (src/js/computed.rs, src/js/live/, src/js/lists.rs),
// at the point the reference's code evaluates it: `now + leaseMs` (JavaScript's `+`: `valueOf`, string
// concatenation), `new Date(sum).toISOString()`, `Date.parse`, and the reference's in-place changes of the
// caller's objects (a strict-mode assignment: a frozen claim or a getter-only property throws
// the TypeError the reference's assignment throws). Registered once, at load.

const { createHash } = require('node:crypto');
const { canonicalJson } = require('./canonical-json.js');

/** IsConstructor(value), without reading or calling anything of it. */
function isConstructor(value) {
  if (typeof value !== 'function') return false;
  try {
    new (new Proxy(value, { construct: () => ({}) }))();
    return true;
  } catch {
    return false;
  }
}

const ARRAY_SOURCE = Function.prototype.toString.call(Array);


/** Function bodies over `list` (the reference's expressions, from src/js/lists.rs), compiled once. */
const compiled = new Map();

module.exports = {
  // This realm's Array (the caller's: under Jest, the test's): a list whose `constructor` is it
  // makes a plain array without calling in here (src/js/live/object.rs, `species_create`).
  Array,
  // ArraySpeciesCreate(list, length) once `list.constructor` was read as `C` (ECMA-262, steps
  // 5 to 9), for a `C` other than undefined and this realm's Array: another realm's Array makes
  // a plain array; of any other object `Symbol.species` is read; a constructor found there is
  // called with the length, anything else but undefined and null is V8's TypeError.
  speciesCreate(C, length) {
    let species = C;
    if (isConstructor(species) && Function.prototype.toString.call(species) === ARRAY_SOURCE) return [];
    if (species !== null && (typeof species === 'object' || typeof species === 'function')) {
      species = species[Symbol.species];
      if (species === null) species = undefined;
    }
    if (species === undefined) return [];
    if (!isConstructor(species)) throw new TypeError('object.constructor[Symbol.species] is not a constructor');
    return new species(length);
  },
  // Coercions and tests of the caller's objects, done here so that what they throw (a revoked
  // Proxy's TypeError, "Cannot convert object to primitive value") is an error of this realm,
  // the caller's, as it is in the reference, and not of the addon's.
  isArray(value) {
    return Array.isArray(value);
  },
  string(value) {
    return `${value}`;
  },
  number(value) {
    return +value;
  },
  date(value) {
    return new Date(value).getTime();
  },
  get(object, key) {
    return object[key];
  },
  // `list.map(() => "?").join(", ")` and `[...list]` of a list that is not an array (a typed
  // array maps each "?" to 0).
  sqlMarks(list) {
    return list.map(() => '?').join(', ');
  },
  spread(list) {
    return [...list];
  },
  // Array.prototype's own methods of this realm: a caller's list with one of these is walked
  // by the core; any other method is the caller's, and runs (src/js/lists.rs).
  arrayMap: Array.prototype.map,
  arrayFlatMap: Array.prototype.flatMap,
  arrayIterator: Array.prototype[Symbol.iterator],
  iteratorSymbol: Symbol.iterator,
  // The reference's own source text over a caller's list, so that V8 words its errors as it
  // words the reference's.
  evaluate(source, list) {
    let run = compiled.get(source);
    if (run === undefined) {
      run = new Function('list', source);
      compiled.set(source, run);
    }
    return run(list);
  },
  uniqueItems(list) {
    return [...new Set(list)];
  },
  // A `{}` the reference's code writes (`options.payload ?? {}`), of this realm.
  emptyObject() {
    return {};
  },
  invoke(receiver, name, ...args) {
    return receiver[name](...args);
  },
  // Node's own APIs where the reference calls them with a caller's object (its coercions and
  // refusals are Node's).
  bufferFrom(value, encoding) {
    return Buffer.from(value, encoding);
  },
  tokenHash(value) {
    return createHash('sha256').update(value).digest();
  },
  add(a, b) {
    return a + b;
  },
  parse(value) {
    return Date.parse(value);
  },
  iso(value) {
    return new Date(value).toISOString();
  },
  assign(object, key, value) {
    object[key] = value;
  },
  stringify(value) {
    return JSON.stringify(value);
  },
  canonical(value) {
    return canonicalJson(value);
  },
  /** `canonicalJson({[name]: value, …})` of alternating names and values, in that order. */
  canonicalObject(...pairs) {
    const object = {};
    for (let index = 0; index < pairs.length; index += 2) object[pairs[index]] = pairs[index + 1];
    return canonicalJson(object);
  },
};
