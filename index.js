'use strict';
// pi-workflows-native: the thin JS layer over the Rust core.
//
// It does only what JavaScript must do to stay exact: parse timestamps with JavaScript's own
// Date, canonicalise caller JSON, read Date.now() on every call (so fake timers work), build
// results and errors in the caller's realm, and apply in-place changes to the caller's claim.

const fs = require('node:fs');
const path = require('node:path');

const { jsonEnvelope } = require('./lib/canonical-json.js');
const errors = require('./lib/errors.js');
const { METHODS } = require('./lib/methods.js');
const { binding, created } = require('./lib/native.js');
const { workflowStatePath } = require('./lib/paths.js');
const { StateDatabase, nativeStateOf } = require('./lib/state-database.js');

function canonicalProjectPath(value) {
  try {
    return fs.realpathSync.native(value);
  } catch {
    return path.resolve(value);
  }
}

/** `new Date(value ?? now)` as epoch ms, or null when invalid (the core throws "Invalid timestamp"). */
function timeValue(value) {
  const time = (value === undefined ? new Date() : new Date(value)).getTime();
  return Number.isFinite(time) ? time : null;
}

/** `Date.parse(value)` as epoch ms, or null for NaN (SQLite then sees NULL, as in the reference). */
function dateValue(value) {
  const time = Date.parse(value);
  return Number.isFinite(time) ? time : null;
}

function replaceAt(wire, copied, { index, property }, convert) {
  if (property === undefined) {
    wire[index] = convert(wire[index]);
    return;
  }
  const target = wire[index];
  if (target === null || typeof target !== 'object') return;
  if (!copied.has(index)) {
    wire[index] = { ...target };
    copied.add(index);
  }
  wire[index][property] = convert(target[property]);
}

function valueAt(args, { index, property }) {
  const arg = args[index];
  if (property === undefined) return arg;
  return arg === null || arg === undefined ? undefined : arg[property];
}

/** The arguments as the core reads them; the caller's objects are never modified. */
function wireArguments(spec, args) {
  const wire = Array.from(args);
  const copied = new Set();
  for (const at of spec.time) replaceAt(wire, copied, at, timeValue);
  for (const at of spec.date) replaceAt(wire, copied, at, dateValue);
  for (const at of spec.json) replaceAt(wire, copied, at, jsonEnvelope);
  return JSON.stringify(wire);
}

/** Decodes the core's reply (see src/lib.rs) and applies its in-place claim changes. */
function readReply(spec, args, reply) {
  if (reply === '') return undefined;
  const tag = reply.charCodeAt(0);
  if (tag === 33 /* ! */) throw errors.errorFromWire(JSON.parse(reply.slice(1)));
  let value;
  if (tag === 126 /* ~ */) {
    const envelope = JSON.parse(reply.slice(1));
    const claim = valueAt(args, spec.claim);
    for (const [key, changed] of Object.entries(envelope.claim)) claim[key] = changed;
    value = envelope.value;
  } else {
    value = JSON.parse(reply);
  }
  if (spec.echo !== undefined && value !== undefined) value.payload = valueAt(args, spec.echo) ?? {};
  return value;
}

class SqliteControllerStore {
  #native;
  #ownsState;
  #closed = false;

  constructor(filePath = workflowStatePath(), options = {}) {
    this.#ownsState = options.state === undefined;
    const state =
      options.state ??
      new StateDatabase({
        filePath,
        mode: options.readOnly === true ? 'read-only' : 'read-write',
        checkLegacyState: filePath === workflowStatePath(),
      });
    Object.defineProperties(this, {
      filePath: { value: state.filePath, enumerable: true },
      state: { value: state, enumerable: true },
    });
    const projectPath =
      options.global === true
        ? null
        : canonicalProjectPath(options.projectPath === undefined ? process.cwd() : options.projectPath);
    this.#native = created(() =>
      binding.NativeStore.open(nativeStateOf(state), projectPath, Date.now()),
    );
  }

  close() {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsState) this.state.close();
  }

  /** Runs one core method; shared by every public method below. */
  _invoke(method, args) {
    const spec = METHODS[method];
    return readReply(spec, args, this.#native.call(method, wireArguments(spec, args), Date.now()));
  }
}

const implemented = new Set(binding.implementedMethods());
for (const method of Object.keys(METHODS)) {
  if (!implemented.has(method)) continue;
  Object.defineProperty(SqliteControllerStore.prototype, method, {
    value: {
      [method](...args) {
        return this._invoke(method, args);
      },
    }[method],
    writable: true,
    configurable: true,
  });
}

const { ResourceConflictError, ResourceNotFoundError, EffectRequestConflictError, WorkflowRequestConflictError } =
  errors;

// Shorthand properties only: Node's ESM loader finds a CommonJS module's named exports by
// reading this literal, and stops at the first value that is not a plain identifier.
module.exports = {
  SqliteControllerStore,
  StateDatabase,
  workflowStatePath,
  ResourceConflictError,
  ResourceNotFoundError,
  EffectRequestConflictError,
  WorkflowRequestConflictError,
};
