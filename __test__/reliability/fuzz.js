'use strict';
// Hostile input: a property-based fuzzer over every public store method.
//
// fast-check generates call sequences as pure data ("recipes"); the runner turns each recipe
// into a real argument list at call time, drawing live values (claims, uids, tokens, sequence
// numbers) from what earlier calls in the same sequence returned, so calls reach deep paths as
// well as the argument checks. Arguments are a mix of valid values and hostile ones: wrong
// types, missing and extra fields, huge strings, NaN and infinities, negative leases, unknown
// enum values, SQL-looking strings, lone surrogates, deep JSON, cycles, throwing getters,
// proxies, symbols, BigInt.
//
// The properties, for every call:
// - it returns, or throws an `Error` with a non-empty message that is not a caught panic
//   ("internal error"); the process never dies;
// - a call that throws leaves the database as it was (every table, row for row), except for
//   new unreferenced blobs, which the reference leaves too (its `putJson` runs before the
//   transaction) and the next open prunes; and except for the methods listed in
//   `LEAVES_TRACE`, whose reference commits one transaction before a later one throws;
// - after each sequence `integrityCheck()` passes.

const fs = require('node:fs');
const path = require('node:path');

const fc = require('fast-check');

const { openStore, rows, tableDigests, tempDir } = require('./common.js');

class Recipe {
  constructor(kind, data) {
    this.kind = kind;
    this.data = data;
  }
}
const recipe = (kind, data) => new Recipe(kind, data);
const OMIT = recipe('omit');

// Methods whose reference commits a first transaction before a later step can throw:
// enqueueWorkflowRun reserves the run, then claims it in a second transaction ("could not be
// claimed"); settleRunEffect settles each effect in its own transaction.
const LEAVES_TRACE = new Set(['enqueueWorkflowRun', 'settleRunEffect']);

// ---------------------------------------------------------------------------------------------
// Hostile values

const SQLISH = [
  "'; DROP TABLE runs; --",
  "' OR '1'='1",
  '" OR 1=1 --',
  "x') UNION SELECT blob_hash, content FROM blobs --",
  'fz-a%',
  '_',
  '%',
  '*/ SELECT 1; /*',
  'NULL',
];
const HOSTILE_CONSTANTS = [
  undefined,
  null,
  NaN,
  Infinity,
  -Infinity,
  -0,
  0,
  -1,
  -60_000,
  1.5,
  0.1,
  2 ** 31,
  2 ** 53 + 2,
  Number.MAX_SAFE_INTEGER,
  -Number.MAX_SAFE_INTEGER,
  1e308,
  -1e308,
  2 ** 63,
  2 ** 64,
  5e-324,
  '',
  ' ',
  '0',
  '-1',
  'NaN',
  'null',
  'undefined',
  'true',
  '1e400',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff\ud800',
  'x\udc00y',
  'héllo',
  '🙂',
  '\u202e\u2066',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  'bogus',
  'PENDING',
  'pending ',
  'indeterminate',
  'ambiguous',
  'run.park_queue ',
  '2026-13-45T99:99:99Z',
  'Invalid Date',
  '+275760-09-13T00:00:00.001Z',
  '+275760-09-13T00:00:00.000Z',
  '-271821-04-20T00:00:00.000Z',
  '1970-01-01T00:00:00.000Z',
  '0000-01-01',
  true,
  false,
  [],
  {},
  [[]],
  [null],
  { controller: null, key: null },
  ...SQLISH,
];
const SPECIALS = [
  'circular',
  'throwingGetter',
  'proxy',
  'symbol',
  'function',
  'date',
  'invalidDate',
  'buffer',
  'typedArray',
  'map',
  'set',
  'classInstance',
  'toJSONThrows',
  'toJSONSwaps',
  'nullProto',
  'sparse',
  'manyItems',
  'boxedString',
  'protoPollution',
  // Lists whose methods are the caller's: the store must call them where the reference does
  // (src/js/lists.rs), never read them as arrays.
  'arrayLike',
  'ownMap',
  'ownJoin',
  'ownIterator',
  'arrayOwnMap',
  'arrayOwnIterator',
  'arrayOwnMapThrows',
];

function hostileArbitrary({ maxString }) {
  const loneSurrogates = fc
    .array(fc.oneof(fc.integer({ min: 0xd800, max: 0xdfff }), fc.integer({ min: 0x20, max: 0x7e })), { maxLength: 8 })
    .map((codes) => String.fromCharCode(...codes));
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...HOSTILE_CONSTANTS) },
    { weight: 2, arbitrary: fc.string({ maxLength: 20 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
    { weight: 1, arbitrary: loneSurrogates },
    { weight: 2, arbitrary: fc.double() },
    { weight: 1, arbitrary: fc.integer() },
    { weight: 1, arbitrary: fc.bigInt() },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    {
      weight: 2,
      arbitrary: fc.anything({
        maxDepth: 3,
        withBigInt: true,
        withBoxedValues: true,
        withDate: true,
        withMap: true,
        withNullPrototype: true,
        withSet: true,
        withSparseArray: true,
        withTypedArray: true,
      }),
    },
    { weight: 3, arbitrary: fc.constantFrom(...SPECIALS).map((kind) => recipe(kind)) },
    { weight: 1, arbitrary: fc.integer({ min: 1000, max: maxString }).map((size) => recipe('big', size)) },
    { weight: 1, arbitrary: fc.integer({ min: 100, max: 3000 }).map((depth) => recipe('deep', depth)) },
  );
}

// ---------------------------------------------------------------------------------------------
// Argument shapes

function shapes({ maxString }) {
  const hostile = hostileArbitrary({ maxString });
  /** A valid value most of the time; otherwise hostile, or absent. */
  const field = (valid) =>
    fc.oneof({ weight: 12, arbitrary: valid }, { weight: 3, arbitrary: hostile }, { weight: 1, arbitrary: fc.constant(OMIT) });
  /** An options object built field by field, sometimes with extra fields, sometimes replaced whole. */
  const object = (fields) =>
    fc.oneof(
      {
        weight: 14,
        arbitrary: fc
          .tuple(
            fc.record(Object.fromEntries(Object.entries(fields).map(([name, valid]) => [name, field(valid)]))),
            fc.array(fc.tuple(fc.oneof(fc.constantFrom('__proto__', 'constructor', 'extra', 'now'), fc.string({ maxLength: 6 })), hostile), {
              maxLength: 2,
            }),
          )
          .map(([record, extra]) => recipe('object', [...Object.entries(record), ...extra])),
      },
      { weight: 1, arbitrary: hostile },
    );
  const pool = (name) => fc.nat(50).map((index) => recipe('pool', { name, index }));

  const controller = fc.constantFrom('fz-a', 'fz-b');
  const key = fc.constantFrom('k0', 'k1', 'k2', 'k3');
  const ref = object({ controller, key });
  const now = fc.oneof(fc.constant(OMIT), fc.integer({ min: -5_000, max: 120_000 }).map((offset) => recipe('now', offset)));
  const leaseMs = fc.oneof(fc.integer({ min: 1, max: 120_000 }), fc.constantFrom(50, 30_000));
  const json = fc.jsonValue({ maxDepth: 3 });
  const jsonObject = fc.dictionary(fc.string({ maxLength: 6 }), json, { maxKeys: 4 });
  const claim = fc.oneof(
    { weight: 4, arbitrary: pool('claims') },
    { weight: 1, arbitrary: fc.tuple(fc.nat(50), fc.constantFrom('token', 'generation', 'ownerId', 'key', 'controller', 'queueVersion', 'resourceVersion', 'expiresAt'), hostile).map(([index, name, value]) => recipe('mutatedClaim', { index, name, value })) },
  );
  const version = fc.oneof(pool('versions'), fc.nat(12));
  const uid = fc.oneof({ weight: 4, arbitrary: pool('uids') }, { weight: 1, arbitrary: fc.uuid() });
  const effectKey = fc.oneof(pool('effectKeys'), fc.constantFrom('e0', 'e1'));
  const requestKey = fc.constantFrom('q0', 'q1');
  const requestId = fc.oneof({ weight: 4, arbitrary: pool('requestIds') }, { weight: 1, arbitrary: fc.uuid() });
  const runId = fc.oneof({ weight: 3, arbitrary: fc.constantFrom('fr-0', 'fr-1', 'fr-2', 'fr-3') }, { weight: 1, arbitrary: pool('runs') });
  const runnerId = fc.constantFrom('runner-a', 'host-b');
  const sessionId = fc.constantFrom('s-0', 's-1', 's-2');
  const token = fc.constantFrom('tok-0', 'tok-1', 'tok-2');
  const hex64 = fc.constantFrom('a1'.repeat(32), 'B2'.repeat(32), 'sha256:' + 'c3'.repeat(32), 'abc');
  const text = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('detail', 'boom'));
  const int = fc.integer({ min: -2, max: 12 });
  const condition = object({
    type: fc.constantFrom('Ready', 'Synced'),
    status: fc.constantFrom(true, false, 'unknown'),
    reason: text,
    message: text,
    observedGeneration: int,
    lastTransitionTime: fc.constant('2026-09-01T00:00:00.000Z'),
  });
  const status = object({
    observedGeneration: int,
    conditions: fc.array(condition, { maxLength: 2 }),
    controllerStatus: json,
  });
  const finalizers = fc.array(fc.constantFrom('f1', 'f2', 'f3'), { maxLength: 3 });
  const source = fc.oneof(
    fc.constant({ kind: 'builtin', id: 'echo', revision: 'rev-1' }),
    fc.constant({ root: { kind: 'file', path: '/w/main.ts', hash: 'h' }, mounted: [{ mountPath: ['sub'], workflowName: 'sub', source: { kind: 'builtin', id: 'sub', revision: 'r' } }] }),
  );
  const reservationFields = {
    runId,
    workflowName: fc.constantFrom('echo', 'main'),
    workflowSourceRef: fc.constantFrom('builtin:echo', 'file:/w/main.ts'),
    workflowSource: source,
    definitionDigest: hex64,
    definitionSnapshot: fc.oneof(json, fc.constant({ composition: { mounts: [{ path: ['sub'], workflow: 'sub' }] } })),
    input: json,
    launchOptions: json,
    runnerId,
    originSessionId: sessionId,
    executionMode: fc.constantFrom('interactive', 'headless'),
    parentRunId: fc.oneof(fc.constant(OMIT), runId),
    lineageKind: fc.oneof(fc.constant(OMIT), fc.constantFrom('continuation', 'restart')),
    restartNumber: fc.oneof(fc.constant(OMIT), fc.nat(3)),
    parentTerminalFingerprint: fc.oneof(fc.constant(OMIT), hex64),
    now,
  };
  const reservation = object(reservationFields);
  const claimedReservation = object({ ...reservationFields, claimToken: token, leaseMs });
  const runClaim = object({ runId, runnerId, claimToken: token, leaseMs, now });
  const runToken = object({ runId, claimToken: token, now });
  const runOnly = object({ runId, now });
  const seq = fc.oneof(pool('seqs'), fc.nat(30));
  const launchStatus = fc.constantFrom('queued', 'starting', 'running', 'parked', 'done', 'failed', 'cancelled');
  const childUpdate = object({
    runId: fc.oneof(runId, fc.constant(null)),
    state: fc.constantFrom('pending', 'running', 'waiting', 'succeeded', 'failed', 'interrupted'),
    attempt: int,
    error: fc.oneof(text, fc.constant(null)),
  });

  return {
    putResource: [object({ controller, key, spec: json, initialStatus: json, now })],
    getResource: [ref],
    getResourceByUid: [uid],
    listResources: [object({ controller })],
    updateStatus: [object({ ref, expectedResourceVersion: version, claim, status, finalizers, now })],
    requestDeletion: [ref, now],
    updateFinalizers: [object({ ref, expectedResourceVersion: version, finalizers, now })],
    deleteResource: [ref, version, claim],
    enqueue: [ref, now],
    claimNext: [
      object({
        controllers: fc.constantFrom(['fz-a'], ['fz-a', 'fz-b'], ['fz-b'], []),
        ownerId: fc.constantFrom('o1', 'o2'),
        leaseMs,
        now,
        exclude: fc.array(ref, { maxLength: 2 }),
      }),
    ],
    renewClaim: [claim, leaseMs, now],
    settleClaim: [claim, now],
    requeueClaim: [claim, object({ availableAt: now, error: text }), now],
    listQueue: [],
    reserveEffect: [object({ key: effectKey, resourceUid: uid, claim, generation: int, kind: fc.constantFrom('mail', 'charge'), requestFingerprint: text, now })],
    getEffect: [uid, effectKey],
    updateEffect: [
      object({
        resourceUid: uid,
        key: effectKey,
        claim,
        state: fc.constantFrom('pending', 'applied', 'rejected', 'indeterminate'),
        externalRef: text,
        error: text,
        now,
      }),
    ],
    listEffects: [uid],
    reserveWorkflow: [object({ resourceUid: uid, claim, requestKey, workflow: fc.constantFrom('child', 'other'), inputFingerprint: hex64 })],
    getWorkflow: [uid, requestKey],
    getWorkflowByRequestId: [requestId],
    updateWorkflow: [requestId, childUpdate, claim],
    completeWorkflow: [requestId, childUpdate],
    listWorkflows: [uid],
    recordEvent: [object({ controller, key, claim: fc.oneof(fc.constant(OMIT), claim), type: text, payload: jsonObject, now })],
    listEvents: [object({ controller, key, limit: fc.integer({ min: -1, max: 200 }) })],
    reserveWorkflowRun: [reservation],
    prepareOrAdoptWorkflowRun: [claimedReservation],
    enqueueWorkflowRun: [claimedReservation],
    getWorkflowRun: [runId],
    getWorkflowRunView: [runId],
    workflowRunListRevision: [],
    listWorkflowRunViews: [object({ offset: int, limit: int })],
    workflowRunProjectPath: [runId],
    listWorkflowRuns: [object({ statuses: fc.array(launchStatus, { maxLength: 3 }), excludeRunIds: fc.array(runId, { maxLength: 2 }), limit: int })],
    findSessionReservation: [sessionId],
    findSessionReservationView: [sessionId],
    isWorkflowRunPaused: [runId],
    claimWorkflowRun: [runClaim],
    claimWorkflowRunForInteractionValidation: [runClaim],
    claimWorkflowRunForControl: [runClaim],
    claimNextWorkflowRun: [
      object({ runnerId, sessionId: fc.oneof(fc.constant(OMIT), sessionId), claimToken: token, leaseMs, now, excludeRunIds: fc.array(runId, { maxLength: 2 }) }),
    ],
    renewWorkflowRunClaim: [object({ runId, claimToken: token, leaseMs, now })],
    verifyWorkflowRunClaim: [runToken],
    workflowRunAuthority: [runId, token],
    markWorkflowRunRunning: [runToken],
    parkWorkflowRun: [runToken],
    pauseParkedWorkflowRun: [runOnly],
    resumePausedInteraction: [runOnly],
    parkWorkflowRunForSourceChange: [object({ runId, claimToken: token, detail: text, now })],
    parkWorkflowRunForAmbiguousEffect: [runToken],
    failWorkflowRun: [object({ runId, claimToken: fc.oneof(fc.constant(OMIT), token), errorCode: text, errorMessage: text, now })],
    cancelWorkflowRun: [object({ runId, claimToken: fc.oneof(fc.constant(OMIT), token), now })],
    cancelStaleWorkflowRun: [object({ runId, controlId: fc.oneof(fc.constant(OMIT), text), claimToken: fc.oneof(fc.constant(OMIT), token), now })],
    deleteWorkflowRun: [object({ runId, claimToken: token })],
    completeWorkflowRun: [runToken],
    setWorkflowRunOriginSession: [runId, sessionId],
    beginWorkflowRunInteractionTimeout: [object({ runId, targetSessionId: sessionId, claimToken: token, now })],
    recordRunEvent: [object({ runId, workflowRef: fc.constantFrom('builtin:echo', 'x'), type: text, payload: jsonObject, runnerId: fc.oneof(fc.constant(OMIT), runnerId), now })],
    listRunEventsAfter: [seq, object({ limit: fc.integer({ min: -1, max: 200 }) })],
    settleRunEffect: [runId, fc.constantFrom('run.park_queue', 'run.settle_queue')],
    repairCanonicalWorkflowSourceRun: [],
    claimLegacyWorkflowSourceRun: [],
    hostile,
  };
}

/** A call: a method and its argument recipes (valid shapes with hostile parts, or all hostile). */
function callArbitrary(options = {}) {
  const { maxString = 20_000, includeClose = true } = options;
  const all = shapes({ maxString });
  const { hostile } = all;
  const methods = Object.keys(all).filter((name) => name !== 'hostile');
  const shaped = fc.oneof(
    ...methods.map((method) =>
      fc
        .tuple(fc.tuple(...all[method].map((arg) => arg)), fc.array(hostile, { maxLength: 1 }), fc.nat(9))
        .map(([args, extra, cut]) => ({
          method,
          // Sometimes fewer arguments than declared, sometimes an extra one.
          args: cut === 0 ? args.slice(0, Math.max(0, args.length - 1)) : cut === 1 ? [...args, ...extra] : args,
        })),
    ),
  );
  const arbitraries = [
    { weight: 30, arbitrary: shaped },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...methods), fc.array(hostile, { maxLength: 3 })).map(([method, args]) => ({ method, args })) },
  ];
  if (includeClose) arbitraries.push({ weight: 1, arbitrary: fc.constant({ method: 'close', args: [] }) });
  return fc.oneof(...arbitraries);
}

// ---------------------------------------------------------------------------------------------
// Turning recipes into values

function deep(depth) {
  let value = 'bottom';
  for (let level = 0; level < depth; level += 1) value = level % 2 === 0 ? [value] : { d: value };
  return value;
}

function special(kind) {
  switch (kind) {
    case 'circular': {
      const value = { controller: 'fz-a', key: 'k0' };
      value.self = value;
      return value;
    }
    case 'throwingGetter':
      return Object.defineProperty({}, 'controller', {
        enumerable: true,
        get() {
          throw new Error('fuzz: throwing getter');
        },
      });
    case 'proxy':
      return new Proxy(
        {},
        {
          get() {
            throw new Error('fuzz: proxy get');
          },
          ownKeys() {
            throw new Error('fuzz: proxy ownKeys');
          },
        },
      );
    case 'symbol':
      return Symbol('fuzz');
    case 'function':
      return () => 'fuzz';
    case 'date':
      return new Date(0);
    case 'invalidDate':
      return new Date(NaN);
    case 'buffer':
      return Buffer.from('fz-a');
    case 'typedArray':
      return new Float64Array([NaN, 1]);
    case 'map':
      return new Map([['controller', 'fz-a']]);
    case 'set':
      return new Set(['fz-a']);
    case 'classInstance':
      return new (class Fuzz {
        constructor() {
          this.controller = 'fz-a';
          this.key = 'k0';
        }
      })();
    case 'toJSONThrows':
      return {
        toJSON() {
          throw new Error('fuzz: toJSON');
        },
      };
    case 'toJSONSwaps':
      return { toJSON: () => ({ controller: 'fz-b', key: 'k1' }) };
    case 'nullProto':
      return Object.assign(Object.create(null), { controller: 'fz-a', key: 'k0' });
    case 'sparse':
      // eslint-disable-next-line no-sparse-arrays -- a hole is the hostile input under test
      return ['fz-a', , 'fz-b'];
    case 'manyItems':
      return Array.from({ length: 40_000 }, (_, index) => `fz-${index}`);
    case 'boxedString':
      // eslint-disable-next-line no-new-wrappers -- a boxed String is the hostile input under test
      return new String('fz-a');
    case 'protoPollution':
      return JSON.parse('{"__proto__": {"polluted": true}, "controller": "fz-a", "key": "k0"}');
    case 'arrayLike':
      return { length: 2, 0: 'fz-a', 1: 'queued' };
    case 'ownMap':
      return { length: 1, 0: 'fz-a', map: () => ['?', '?'] };
    case 'ownJoin':
      return { length: 1, 0: 'fz-a', map: () => ({ join: () => '?' }), join: () => '?' };
    case 'ownIterator':
      return {
        length: 1,
        0: 'fz-a',
        map: () => ['?'],
        *[Symbol.iterator]() {
          yield 'fz-b';
        },
      };
    case 'arrayOwnMap':
      return Object.assign(['fz-a', 'queued'], { map: () => ['?'] });
    case 'arrayOwnIterator':
      return Object.assign(['fz-a'], {
        *[Symbol.iterator]() {
          yield 'fz-b';
          yield 'parked';
        },
      });
    case 'arrayOwnMapThrows':
      return Object.assign(['fz-a'], {
        map: () => {
          throw new RangeError('a caller map throws');
        },
      });
    default:
      throw new Error(`unknown special ${kind}`);
  }
}

function materialize(value, context) {
  if (!(value instanceof Recipe)) return value;
  const { kind, data } = value;
  switch (kind) {
    case 'object': {
      const result = {};
      for (const [name, item] of data) {
        if (item === OMIT) continue;
        const materialized = materialize(item, context);
        if (name === '__proto__') Object.defineProperty(result, name, { value: materialized, enumerable: true, writable: true, configurable: true });
        else result[name] = materialized;
      }
      return result;
    }
    case 'pool': {
      const items = context.pools[data.name];
      return items.length === 0 ? undefined : items[data.index % items.length];
    }
    case 'mutatedClaim': {
      const claims = context.pools.claims;
      const base = claims.length === 0 ? { controller: 'fz-a', key: 'k0' } : claims[data.index % claims.length];
      return { ...base, [data.name]: materialize(data.value, context) };
    }
    case 'now':
      return new Date(context.base + data).toISOString();
    case 'big':
      return 'x'.repeat(data);
    case 'deep':
      return deep(data);
    case 'omit':
      return undefined;
    default:
      return special(kind);
  }
}

// ---------------------------------------------------------------------------------------------
// Running sequences

const emptyPools = () => ({ claims: [], uids: [], versions: [], effectKeys: [], requestIds: [], runs: [], seqs: [] });

/** Remembers what a successful call returned, for later calls to use. */
function harvest(method, args, value, pools) {
  const push = (name, item) => {
    if (item === undefined || item === null) return;
    const list = pools[name];
    list.push(item);
    if (list.length > 12) list.shift();
  };
  if (value === undefined || value === null || typeof value !== 'object') return;
  if (method === 'claimNext') {
    push('claims', value);
    push('versions', value.resourceVersion);
  }
  if (value.metadata !== undefined) {
    push('uids', value.metadata.uid);
    push('versions', value.metadata.resourceVersion);
  }
  if (value.record !== undefined) {
    if (method === 'reserveEffect') push('effectKeys', value.record.key);
    if (method === 'reserveWorkflow') push('requestIds', value.record.requestId);
  }
  if (typeof value.seq === 'number') push('seqs', value.seq);
  if (typeof value.runId === 'string') push('runs', value.runId);
  if (value.run !== undefined) push('runs', value.run.runId);
}

const totalChanges = (store) => rows(store, 'SELECT total_changes() AS n')[0].n;

function sameExceptNewBlobs(before, after) {
  const changed = Object.keys(before).filter((table) => table !== 'blobs' && before[table] !== after[table]);
  return changed;
}

/**
 * Runs one call sequence on a fresh state file; returns the problems found (empty when every
 * property held) and counts into `stats`.
 */
function runSequence(calls, { dir, stats }) {
  const file = path.join(dir, `fuzz-${(stats.sequences += 1)}.sqlite`);
  const projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath, { recursive: true });
  const context = { base: Date.now(), pools: emptyPools() };
  const problems = [];
  let store = openStore(file, projectPath);
  let closedAt = null;
  let cached = { changes: -1, digests: null };
  try {
    for (const [index, call] of calls.entries()) {
      if (closedAt !== null && index - closedAt > 2) {
        store = openStore(file, projectPath);
        closedAt = null;
        cached = { changes: -1, digests: null };
      }
      let args;
      try {
        args = call.args.map((arg) => materialize(arg, context));
      } catch (error) {
        problems.push(`materializing ${call.method}: ${error.message}`);
        continue;
      }
      if (closedAt === null && cached.changes !== totalChanges(store)) {
        cached = { changes: totalChanges(store), digests: tableDigests(store), blobs: rows(store, 'SELECT COUNT(*) AS n FROM blobs')[0].n };
      }
      stats.calls += 1;
      let outcome;
      try {
        const value = call.method === 'close' ? store.close() : store[call.method](...args);
        outcome = { ok: true, value };
      } catch (error) {
        outcome = { ok: false, error };
      }
      if (call.method === 'close') {
        closedAt = index;
        continue;
      }
      if (outcome.ok) {
        stats.returned += 1;
        harvest(call.method, args, outcome.value, context.pools);
        continue;
      }
      stats.rejected += 1;
      const { error } = outcome;
      const describe = () => `${call.method}(${describeArgs(args)})`;
      if (!(error instanceof Error)) {
        problems.push(`${describe()} threw a non-Error: ${String(error)}`);
        continue;
      }
      const message = error.message;
      if (typeof message !== 'string' || message.trim() === '') problems.push(`${describe()} threw ${error.name} without a message`);
      else if (/internal error|panicked|RUST_BACKTRACE/.test(message)) problems.push(`${describe()} panicked: ${message}`);
      const category = `${error.name}: ${message.replace(/[0-9a-f]{8,}|\d+/g, '#').slice(0, 90)}`;
      stats.messages.set(category, (stats.messages.get(category) ?? 0) + 1);
      if (closedAt !== null) continue;
      if (totalChanges(store) !== cached.changes && !LEAVES_TRACE.has(call.method)) {
        const after = tableDigests(store);
        const changed = sameExceptNewBlobs(cached.digests, after);
        const blobs = rows(store, 'SELECT COUNT(*) AS n FROM blobs')[0].n;
        if (changed.length > 0 || blobs < cached.blobs) {
          problems.push(`${describe()} threw "${message}" but changed ${changed.join(', ') || 'blobs (deleted)'}`);
        }
        cached = { changes: totalChanges(store), digests: after, blobs };
      }
      if (problems.length > 0) break;
    }
    if (closedAt === null) store.state.integrityCheck();
  } finally {
    if (closedAt === null) store.close();
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
  }
  return problems;
}

function describeArgs(args) {
  try {
    const text = JSON.stringify(args, (key, value) => (typeof value === 'bigint' ? `${value}n` : typeof value === 'string' && value.length > 80 ? `${value.slice(0, 40)}…(${value.length})` : value));
    return text === undefined ? String(args) : text.slice(0, 400);
  } catch {
    return '<unprintable>';
  }
}

/**
 * Fuzzes `calls` calls in sequences of up to `sequenceLength`, with fast-check's `seed`.
 * Returns the figures; throws (with fast-check's counterexample, shrunk) when a property fails.
 */
function runFuzz({ calls = 2_000, seed = 42, sequenceLength = 60, maxString = 20_000, dir, onProgress } = {}) {
  // The fuzzer tests input handling, not durability: tmpfs spares it an fsync per commit.
  const workDir = dir ?? tempDir('fuzz', { memory: true });
  const stats = { calls: 0, returned: 0, rejected: 0, sequences: 0, messages: new Map() };
  const property = fc.property(fc.array(callArbitrary({ maxString }), { minLength: 1, maxLength: sequenceLength, size: 'max' }), (sequence) => {
    const problems = runSequence(sequence, { dir: workDir, stats });
    if (problems.length > 0) throw new Error(problems.join('\n'));
  });
  const started = Date.now();
  try {
    // Chunks of 50 sequences, each with its own seed derived from `seed`, until enough calls ran.
    for (let chunk = 0; stats.calls < calls; chunk += 1) {
      const result = fc.check(property, { seed: seed + chunk * 7919, numRuns: 50 });
      if (result.failed) throw new Error(`fuzz chunk ${chunk} (seed ${seed + chunk * 7919}) failed:\n${fc.defaultReportMessage(result)}`);
      if (onProgress !== undefined) onProgress(stats);
    }
  } finally {
    if (dir === undefined) fs.rmSync(workDir, { recursive: true, force: true });
  }
  return { ...stats, seed, elapsedMs: Date.now() - started };
}

module.exports = { runFuzz, runSequence, callArbitrary, materialize, LEAVES_TRACE };
