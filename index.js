'use strict';
// pi-workflows-native: the thin JS layer over the Rust core.
//
// It does only what JavaScript must do to stay exact: parse timestamps with JavaScript's own
// Date, canonicalise caller JSON, read Date.now() on every call (so fake timers work; on a
// cluster plus the host's offset from the leader's clock, lib/cluster-clock.js), build
// results and errors in the caller's realm, and apply in-place changes to the caller's claim.

const fs = require('node:fs');
const path = require('node:path');

const { jsonEnvelope } = require('./lib/canonical-json.js');
const computed = require('./lib/computed.js');
const errors = require('./lib/errors.js');
const { METHODS } = require('./lib/methods.js');
const { arePlainArguments } = require('./lib/plain-arguments.js');
const { encodeArguments, encodeError } = require('./lib/wire.js');
const { binding, created } = require('./lib/native.js');
const { workflowStatePath } = require('./lib/paths.js');
const { StateDatabase, clusterClockOf, currentTime, nativeStateOf, withFilePath } = require('./lib/state-database.js');
const stacks = require('./lib/stacks.js');

function canonicalProjectPath(value) {
  try {
    return fs.realpathSync.native(value);
  } catch {
    return path.resolve(value);
  }
}

/** What JavaScript threw while the JS layer read a value; the core throws it where the reference would. */
function thrown(error) {
  return { $error: encodeError(error) };
}

/**
 * `new Date(value ?? now)` as epoch ms, null when invalid (the core throws "Invalid timestamp"), or
 * what it threw; `offset` moves the current time onto a cluster's clock (lib/cluster-clock.js).
 */
function timeValue(value, offset = 0) {
  try {
    const time = (value === undefined ? new Date() : new Date(value)).getTime();
    if (!Number.isFinite(time)) return null;
    return value === undefined ? time + offset : time;
  } catch (error) {
    return thrown(error);
  }
}

/** `Date.parse(value)` as epoch ms, null for NaN (SQLite then sees NULL, as in the reference), or what it threw. */
function dateValue(value) {
  try {
    const time = Date.parse(value);
    return Number.isFinite(time) ? time : null;
  } catch (error) {
    return thrown(error);
  }
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

/**
 * `now + leaseMs` and `new Date(now + leaseMs).toISOString()` as the reference computes them
 * (the sum may be a string, whose date only JavaScript's parser can tell), in place of leaseMs:
 * by lib/computed.js's `add` and `iso`, the functions a live call's core calls for them.
 * `now` is the converted time; when it is not a number the core throws before it reads this.
 */
function replaceLease(wire, copied, { now, ms }) {
  const time = valueAt(wire, now);
  if (typeof time !== 'number') return;
  replaceAt(wire, copied, ms, (leaseMs) => {
    let sum;
    try {
      sum = computed.add(time, leaseMs);
    } catch (error) {
      return { $lease: thrown(error) };
    }
    let iso;
    try {
      iso = computed.iso(sum);
    } catch (error) {
      iso = thrown(error);
    }
    return { $lease: { sum, iso } };
  });
}

function valueAt(args, { index, property }) {
  const arg = args[index];
  if (property === undefined) return arg;
  return arg === null || arg === undefined ? undefined : arg[property];
}

/**
 * A `store.async` call's arguments as the core reads them (lib/wire.js), read now; the caller's
 * objects are never modified.
 */
function wireArguments(spec, args, offset) {
  // Most calls convert nothing: the arguments are sent as they are, without a copy.
  if (spec.plain) return encodeArguments(args);
  const wire = Array.from(args);
  const copied = new Set();
  const time = offset === 0 ? timeValue : (value) => timeValue(value, offset);
  for (const at of spec.time) replaceAt(wire, copied, at, time);
  for (const at of spec.date) replaceAt(wire, copied, at, dateValue);
  for (const at of spec.json) replaceAt(wire, copied, at, jsonEnvelope);
  if (spec.lease !== undefined) replaceLease(wire, copied, spec.lease);
  return encodeArguments(wire);
}

/** Decodes the core's reply (see src/addon/mod.rs) and applies its in-place claim changes. */
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
  // The caller's own values the record holds: handed back by a live call that read them
  // (src/addon/store.rs), each under its path in the record; else read here.
  if (args.$echo === undefined) {
    if (spec.echo !== undefined && value !== undefined) value.payload = valueAt(args, spec.echo) ?? {};
    if (spec.echoProps !== undefined && value !== undefined) {
      for (const name of spec.echoProps) value[name] = args[0][name];
    }
  } else if (value !== undefined) {
    for (const [at, echoed] of Object.entries(args.$echo)) {
      const names = at.split('.');
      let target = value;
      for (const name of names.slice(0, -1)) target = target[name];
      target[names[names.length - 1]] = echoed;
    }
  }
  return value;
}

/** Per state database: the tail of its queue of asynchronous calls (they run in call order). */
const asyncQueues = new WeakMap();

function asyncQueueOf(nativeState) {
  let queue = asyncQueues.get(nativeState);
  if (queue === undefined) {
    queue = { tail: Promise.resolve() };
    asyncQueues.set(nativeState, queue);
  }
  return queue;
}

// Node ≥ 18.18 / 20.4 defines both symbols (as these registered ones); older Nodes get the same
// registered symbols, which is what Node itself and TypeScript's `using` helpers fall back to.
const disposeSymbol = Symbol.dispose ?? Symbol.for('nodejs.dispose');
const asyncDisposeSymbol = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose');

/** better-sqlite3's error for a closed connection, which the reference raises after close(). */
function closedError() {
  return new TypeError('The database connection is not open');
}

class SqliteControllerStore {
  #native;
  #ownsState;
  #closed = false;
  #asyncQueue;
  #async;
  #asyncCallSites;
  /** On a cluster, its clock (lib/cluster-clock.js); `undefined` for a file. */
  #clock;
  /** Set by the awaitable close: later `store.async` calls reject. */
  #closing;

  constructor(filePath = workflowStatePath(), options = {}) {
    try {
      this.#open(filePath, options);
    } catch (error) {
      throw stacks.fromCaller(error, SqliteControllerStore);
    }
  }

  #open(filePath, options) {
    this.#ownsState = options.state === undefined;
    this.#asyncCallSites = options.asyncCallSites === true;
    const state =
      options.state ??
      new StateDatabase({
        filePath,
        mode: options.readOnly === true ? 'read-only' : 'read-write',
        checkLegacyState: filePath === workflowStatePath(),
        cluster: options.cluster,
      });
    Object.defineProperties(this, {
      filePath: { value: state.filePath, enumerable: true },
      state: { value: state, enumerable: true },
    });
    try {
      const projectPath =
        options.global === true
          ? null
          : canonicalProjectPath(options.projectPath === undefined ? process.cwd() : options.projectPath);
      const nativeState = nativeStateOf(state);
      this.#clock = clusterClockOf(state);
      this.#native = withFilePath(state.filePath, () =>
        created(() => binding.NativeStore.open(nativeState, projectPath, currentTime(state), this.#ownsState)),
      );
      this.#asyncQueue = asyncQueueOf(nativeState);
    } catch (error) {
      // The reference left its own connection open until garbage collection; nothing can use it.
      if (this.#ownsState) state.close();
      throw error;
    }
  }

  /**
   * Every store method as a Promise whose work (SQLite, fsync) runs on a libuv worker thread:
   * `await store.async.putResource(…)` resolves to what `store.putResource(…)` returns, or
   * rejects with what it throws. Arguments are read when the method is called (a default `now`
   * is the time of the call), the result is decoded and a claim updated in place on the main
   * thread. Asynchronous calls on one database run one at a time, in call order; a synchronous
   * call made meanwhile waits for the running one. `close()` here waits for the queued calls.
   */
  get async() {
    if (this.#async === undefined) {
      const methods = {};
      for (const spec of METHODS) {
        const call = {
          [spec.name]: (...args) => SqliteControllerStore.#invokeAsync(this, spec, args, call),
        }[spec.name];
        methods[spec.name] = call;
      }
      methods.close = () => this.#closeAsync();
      this.#async = Object.freeze(methods);
    }
    return this.#async;
  }

  /**
   * Closes the store (and its state, when the store opened it). Idempotent. A failure of the
   * open's blob prune that no call reported yet is thrown once the file is closed.
   */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.#ownsState) return;
    try {
      this.state.close();
    } catch (error) {
      throw stacks.fromCaller(error, SqliteControllerStore.prototype.close);
    }
  }

  [disposeSymbol]() {
    this.close();
  }

  [asyncDisposeSymbol]() {
    return this.#closeAsync();
  }

  /**
   * Waits for every asynchronous call already queued on this database, then closes. Idempotent:
   * every call returns the same promise (which rejects with what `close()` threw, if it threw).
   */
  #closeAsync() {
    if (this.#closing === undefined) {
      this.#closing = this.#asyncQueue.tail.then(() => this.close());
    }
    return this.#closing;
  }

  /** Runs one core method (`spec`: its entry in lib/methods.js); shared by every public method. */
  static #invoke(store, spec, args) {
    if (store.#clock !== undefined && !spec.reads && arePlainArguments(args)) {
      // On a cluster, a write whose arguments no read can tell from their snapshot runs from
      // it, as `store.async` runs: its writes may then wait for the COMMIT (one round trip).
      const offset = store.#clock.offset();
      const wire = wireArguments(spec, args, offset);
      return readReply(spec, args, store.#native.callSnapshot(spec.index, wire, Date.now() + offset));
    }
    const clock = store.#clock === undefined ? Date.now() : store.#clock.now();
    // The core reads the caller's values itself, as the reference's code reads them.
    return readReply(spec, args, store.#native.callLive(spec.index, args, clock));
  }

  /** `#invoke` on a worker thread, queued behind this database's earlier asynchronous calls. */
  static #invokeAsync(store, spec, args, publicFunction) {
    if (store.#closing !== undefined) return Promise.reject(stacks.fromCaller(closedError(), publicFunction));
    const offset = store.#clock === undefined ? 0 : store.#clock.offset();
    let wire;
    try {
      // Read now: the call runs later, on another thread.
      wire = wireArguments(spec, args, offset);
    } catch (error) {
      return Promise.reject(stacks.fromCaller(error, publicFunction));
    }
    const clock = Date.now() + offset;
    const site = store.#asyncCallSites ? stacks.callSite(publicFunction) : undefined;
    const queue = store.#asyncQueue;
    const previous = queue.tail;
    let release;
    queue.tail = new Promise((resolve) => {
      release = resolve;
    });
    return SqliteControllerStore.#runQueued(previous, release, store.#native, wire, clock, spec, args, site);
  }

  // An async function, so that a rejection awaited by the caller carries V8's `at async` frames.
  // V8 follows a promise to its awaiter only when nothing else listens to it, so the queue waits
  // on `release` rather than on the returned promise.
  static async #runQueued(previous, release, native, wire, clock, spec, args, site) {
    await previous;
    try {
      return readReply(spec, args, await native.callAsync(spec.index, wire, clock));
    } catch (error) {
      throw site === undefined
        ? stacks.fromCaller(error, SqliteControllerStore.#runQueued)
        : stacks.withCallSite(error, site);
    } finally {
      release();
    }
  }

  // One prototype method per entry of the core's method table, in its order; nothing else is
  // exposed. A thrown error's stack starts at the caller's frame.
  static {
    for (const spec of METHODS) {
      const publicMethod = {
        [spec.name](...args) {
          try {
            return SqliteControllerStore.#invoke(this, spec, args);
          } catch (error) {
            throw stacks.fromCaller(error, publicMethod);
          }
        },
      }[spec.name];
      Object.defineProperty(this.prototype, spec.name, {
        value: publicMethod,
        writable: true,
        configurable: true,
      });
    }
  }
}

const {
  ResourceConflictError,
  ResourceNotFoundError,
  EffectRequestConflictError,
  WorkflowRequestConflictError,
  SqliteError,
} = errors;

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
  SqliteError,
};
