// Regression cases for the divergences the differential fuzzer (../shared/difftest/, seed
// 20261101) finds between this package and the reference SqliteControllerStore of
// @osolmaz/pi-workflows 0.16.1: one `describe` per cause, under the fuzzer's cause id (classify.py),
// each case the smallest call that shows the cause, on the fuzzer's prepared state
// (support/divergences.ts). Baseline on fdb29f0: 18,581 cases, 1,494 divergent in 23 causes
// (C01 634, C05 220, C06 170, C08 117, C09 103, C07 49, C13 44, C12 30, C04 28, C14 22, C15 15,
// C17 15, C11 10, C02 7, C10 7, C16 6, C03 5, C20 3, C18 2, C19 2, C21 2, C23 2, C24 1; no C22).
// Every expected value below is the reference's observed answer, written out: what the call
// returned, or the class, name, message and own properties of what it threw, the caller's object
// after the call, and what the database holds afterwards.
//
// `test.failing` marks a case this package does not answer as the reference does yet: Jest counts
// it as passing while its assertion fails, and turns it red the day the behaviour is fixed. When
// one turns red, the fix has landed: make it a plain `test`. Each failing case fails on its own
// assertion (the divergence itself), never on its set-up. A plain `test` in a cause's block is a
// part of that case where the two already agree (the same error, before a rollback that differs),
// kept so that the fix does not trade one difference for another.
import vm from 'node:vm';

import { Fixture, NOW, RUN, dispose, outcome, prepare, rows, throws } from './support/divergences';

const { SqliteControllerStore } = require('../index.js');

let f: Fixture;
let store: any;

beforeEach(() => {
  f = prepare(SqliteControllerStore);
  store = f.store;
});

afterEach(() => dispose(f));

const boom = () => {
  throw new Error('boom');
};

function revoked(): any {
  const p = Proxy.revocable({}, {});
  p.revoke();
  return p.proxy;
}

/** The queue row of jobs/beta, and the number of events jobs/beta has. */
const betaState = () => ({
  queue: store.listQueue().find((q: any) => q.key === 'beta'),
  events: store.listEvents({ controller: 'jobs', key: 'beta' }).length,
});

const TOO_FEW = 'Too few parameter values were provided';
/** A lone high surrogate (built, not written as a literal, so no transpiler can replace it). */
const LONE = String.fromCharCode(0xd800);

describe('C01 every own enumerable property of every argument is read at entry; the reference reads only what its code path reads', () => {
  test('an extra argument with a throwing getter is never read: getWorkflowRun returns the run', () => {
    expect(outcome(() => store.getWorkflowRun('r-c', { get a() { return boom(); } })?.runId)).toEqual({ returns: 'r-c' });
  });

  test('a claim field the reference never reads (consecutiveErrors) may throw: renewClaim renews', () => {
    const claim = { ...f.S.claim, get consecutiveErrors() { return boom(); } };
    expect(outcome(() => store.renewClaim(claim, 5000))).toEqual({ returns: true });
  });

  test("recordRunEvent reads the record's workflowRef inside its transaction: a getter that throws rolls the event back", () => {
    const events = () => store.listRunEventsAfter(0, { limit: 1000 }).length;
    const before = events();
    const record = () => store.recordRunEvent({ runId: 'r-c', type: 't', get workflowRef() { return boom(); } });
    expect(outcome(record)).toEqual(throws('Error', 'boom'));
    expect(events()).toBe(before);
  });

  test("recordRunEvent's record holds the caller's own values, read once each, in the reference's order", () => {
    const reads: string[] = [];
    const payload = { a: 1 };
    const options: any = {};
    for (const [key, value] of Object.entries({ runId: 'r-c', workflowRef: 'w', type: 't', payload })) {
      Object.defineProperty(options, key, { get: () => (reads.push(key), value), enumerable: true });
    }
    const record = store.recordRunEvent(options);
    expect([record.runId, record.workflowRef, record.type, record.runnerId, record.payload === payload]).toEqual(['r-c', 'w', 't', null, true]);
    expect(reads.join(' ')).toBe('runId type payload runId workflowRef type payload');
  });

  test('a revoked Proxy as a bound value is bound as an empty bag of named parameters', () => {
    expect(outcome(() => store.getResourceByUid(revoked()))).toEqual(throws('RangeError', TOO_FEW));
  });
});

describe('C02 a revoked Proxy inside a JSON document throws the TypeError JavaScript throws, not a plain Error', () => {
  test('putResource with a revoked Proxy as spec', () => {
    const put = () => store.putResource({ controller: 'jobs', key: 'alpha', spec: revoked(), initialStatus: {} });
    expect(outcome(put)).toEqual(throws('TypeError', "Cannot perform 'IsArray' on a proxy that has been revoked"));
  });
});

describe('C03 a claim whose resourceVersion cannot be written back: the same TypeError, but the reference rolls the write back', () => {
  const frozen = "Cannot assign to read only property 'resourceVersion' of object '#<Object>'";
  const getterOnly = 'Cannot set property resourceVersion of #<Object> which has only a getter';
  const untouched = {
    queue: {
      controller: 'jobs',
      key: 'beta',
      availableAt: '2026-11-01T00:00:01.007Z',
      consecutiveErrors: 0,
      claimExpiresAt: '2026-11-01T00:10:05.007Z',
    },
    events: 2,
  };
  const withGetterOnlyVersion = (claim: any) => {
    const version = claim.resourceVersion;
    const copy = { ...claim };
    Object.defineProperty(copy, 'resourceVersion', { get: () => version, enumerable: true });
    return copy;
  };

  test('settleClaim of a frozen claim throws the TypeError of the assignment', () => {
    expect(outcome(() => store.settleClaim(Object.freeze({ ...f.S.claimB })))).toEqual(throws('TypeError', frozen));
  });

  test('settleClaim of a frozen claim leaves the lease, the queue row and the events as they were', () => {
    expect(betaState()).toEqual(untouched);
    expect(() => store.settleClaim(Object.freeze({ ...f.S.claimB }))).toThrow(frozen);
    expect(betaState()).toEqual(untouched);
  });

  test('requeueClaim of a claim with a getter-only resourceVersion throws the TypeError of the assignment', () => {
    const requeue = () => store.requeueClaim(withGetterOnlyVersion(f.S.claimB), { availableAt: NOW, error: 'oops' });
    expect(outcome(requeue)).toEqual(throws('TypeError', getterOnly));
  });

  test('requeueClaim of a claim with a getter-only resourceVersion leaves the queue row and the events as they were', () => {
    expect(() => store.requeueClaim(withGetterOnlyVersion(f.S.claimB), { availableAt: NOW, error: 'oops' })).toThrow(getterOnly);
    expect(betaState()).toEqual(untouched);
  });

  test('updateStatus with a frozen claim leaves the resource as it was', () => {
    const ref = { controller: 'jobs', key: 'alpha' };
    const before = store.getResource(ref);
    const update = () =>
      store.updateStatus({
        ref,
        expectedResourceVersion: before.metadata.resourceVersion,
        claim: Object.freeze({ ...f.S.claim }),
        status: { observedGeneration: 1, conditions: [], controllerStatus: { ok: true } },
      });
    expect(update).toThrow(frozen);
    expect(store.getResource(ref)).toEqual(before);
  });
});

describe('C04 a JSON document is stored before a later step throws: the reference leaves the orphan blob (the next open prunes it)', () => {
  const put = () => store.putResource({ controller: 'jobs', key: 'zeta', spec: { z: 1 }, initialStatus: new Set() });
  const specBlobs = () => rows(store, 'SELECT count(*) AS n FROM blobs WHERE content = ?', Buffer.from('{"z":1}'))[0].n;

  test('putResource with a Set as initialStatus throws', () => {
    expect(outcome(put)).toEqual(throws('Error', 'Only plain objects can be stored as canonical JSON'));
  });

  test('the spec blob it stored first stays', () => {
    expect(put).toThrow('Only plain objects can be stored as canonical JSON');
    expect(specBlobs()).toBe(1);
  });

  test('the spec blob stays when the initialStatus getter throws (C01)', () => {
    const options = {
      controller: 'jobs',
      key: 'zeta',
      spec: { z: 1 },
      get initialStatus() {
        return boom();
      },
    };
    expect(outcome(() => store.putResource(options))).toEqual(throws('Error', 'boom'));
    expect(specBlobs()).toBe(1);
  });
});

describe('C05 fields inherited from a prototype are read, as a property read reads them', () => {
  test('getResource of an object whose fields are on its prototype', () => {
    const ref = Object.create({ controller: 'jobs', key: 'alpha' });
    expect(outcome(() => store.getResource(ref)?.metadata.key)).toEqual({ returns: 'alpha' });
  });

  test('getResource of a class instance with accessor fields', () => {
    class Ref {
      get controller() {
        return 'jobs';
      }
      get key() {
        return 'alpha';
      }
    }
    expect(outcome(() => store.getResource(new Ref())?.metadata.key)).toEqual({ returns: 'alpha' });
  });
});

describe('C06 non-enumerable fields are read, as a property read reads them', () => {
  test('getResource of a ref whose key is non-enumerable', () => {
    const ref = { controller: 'jobs' };
    Object.defineProperty(ref, 'key', { value: 'alpha' });
    expect(outcome(() => store.getResource(ref)?.metadata.key)).toEqual({ returns: 'alpha' });
  });
});

describe('C07 functions are objects: their fields and .length are read, not treated as an opaque value', () => {
  test('getResource of a function carrying the ref fields', () => {
    const ref = Object.assign(function ref() {}, { controller: 'jobs', key: 'alpha' });
    expect(outcome(() => store.getResource(ref)?.metadata.key)).toEqual({ returns: 'alpha' });
  });

  test('claimNext with a class as controllers (length 0): nothing to claim', () => {
    expect(outcome(() => store.claimNext({ controllers: class K {}, ownerId: 'w9', leaseMs: 1000 }))).toEqual({ returns: undefined });
  });
});

describe('C08 a field is read as many times as the reference reads it: a getter that changes between reads', () => {
  test('claimWorkflowRun reads now once: a now valid on the first read only claims the run', () => {
    let reads = 0;
    const options = {
      runId: 'r-q',
      runnerId: 'session-r-q',
      claimToken: 'k',
      leaseMs: 1000,
      get now() {
        return reads++ ? 'bad' : NOW;
      },
    };
    expect(outcome(() => store.claimWorkflowRun(options)?.status)).toEqual({ returns: 'starting' });
  });

  test('requeueClaim reads availableAt once: an availableAt valid on the first read only requeues at it', () => {
    let reads = 0;
    const options = {
      get availableAt() {
        return reads++ ? 'bad' : '2026-11-02T00:00:00Z';
      },
      error: 'oops',
    };
    expect(outcome(() => store.requeueClaim(f.S.claimB, options))).toEqual({ returns: true });
    expect(betaState().queue).toEqual({
      controller: 'jobs',
      key: 'beta',
      availableAt: '2026-11-02T00:00:00.000Z',
      consecutiveErrors: 1,
    });
  });

  test('recordEvent reads claim.generation twice: a generation stale on the first read only is accepted', () => {
    const claim = { ...f.S.claim };
    const generation = claim.generation;
    let reads = 0;
    Object.defineProperty(claim, 'generation', { get: () => (reads++ ? generation + 1 : generation), enumerable: true });
    const record = () => store.recordEvent({ controller: 'jobs', key: 'alpha', claim, type: 't' }).type;
    expect(outcome(record)).toEqual({ returns: 't' });
  });
});

describe('C08b a field the reference reads at several points is read at each of them', () => {
  /** `object[name]` as a getter giving `first` on its first read and `later` on every other. */
  function changing(object: any, name: string, first: unknown, later: unknown): any {
    let reads = 0;
    Object.defineProperty(object, name, { get: () => (reads++ ? later : first), enumerable: true });
    return object;
  }

  test('parkWorkflowRunForSourceChange verifies the claim of the run id read a second time', () => {
    const options = changing({ claimToken: 'tok-r', detail: 'd' }, 'runId', 'r-r', 'r-r-2');
    expect(outcome(() => store.parkWorkflowRunForSourceChange(options))).toEqual({ returns: false });
  });

  test('parkWorkflowRunForSourceChange releases the lease with the claim token read a second time', () => {
    const options = changing({ runId: 'r-r', detail: 'd' }, 'claimToken', 'tok-r', 'tok-r-2');
    expect(outcome(() => store.parkWorkflowRunForSourceChange(options))).toEqual(
      throws('Error', 'Workflow run r-r claim changed during source recovery'),
    );
  });

  test('renewWorkflowRunClaim records the viewer deltas of the run id read a second time', () => {
    const options = changing({ claimToken: 'tok-c', leaseMs: 5000 }, 'runId', 'r-c', 'r-c-2');
    expect(outcome(() => store.renewWorkflowRunClaim(options))).toEqual(
      throws('Error', 'Viewer projection does not exist for workflow run: r-c-2'),
    );
  });

  test('cancelStaleWorkflowRun updates the queue row of the run id read a second time', () => {
    const options = changing({}, 'runId', 'r-q', 'r-q-2');
    expect(outcome(() => store.cancelStaleWorkflowRun(options))).toEqual(
      throws('Error', 'Workflow run r-q-2 has inconsistent queue state'),
    );
  });

  // In the fuzzer's state the reference lists 5 runs, and ['queued', 'queued', 'queued', 'queued'].
  test('listWorkflowRuns tests the length of statuses read a second time: an empty list filters nothing', () => {
    const unfiltered = store.listWorkflowRuns({ limit: 5 }).map((r: any) => r.runId);
    const options = changing({ limit: 5 }, 'statuses', ['parked'], []);
    expect(outcome(() => store.listWorkflowRuns(options).map((r: any) => r.runId))).toEqual({ returns: unfiltered });
  });

  test('listWorkflowRuns binds the status items the spread reads, after map read them', () => {
    const queued = store.listWorkflowRuns({ statuses: ['queued'] }).map((r: any) => r.runId);
    expect(queued.length).toBeGreaterThan(0);
    const statuses = changing([], '0', 'parked', 'queued');
    expect(outcome(() => store.listWorkflowRuns({ statuses }).map((r: any) => r.runId))).toEqual({ returns: queued });
  });

  test('reserveEffect looks the existing effect up by the resourceUid read a second time', () => {
    const options = changing({ key: 'e2', claim: f.S.claim, generation: 1, kind: 'k', requestFingerprint: 'fp' }, 'resourceUid', f.S.uid, `${f.S.uid}-2`);
    expect(outcome(() => store.reserveEffect(options))).toEqual(throws('Error', `Effect record not found: ${f.S.uid}-2/e2`));
  });

  test('updateEffect reads the effect row by the resourceUid read a second time', () => {
    const options = changing({ key: 'e1', claim: f.S.claim, state: 'applied' }, 'resourceUid', f.S.uid, `${f.S.uid}-2`);
    expect(outcome(() => store.updateEffect(options))).toEqual(throws('Error', `Effect record not found: ${f.S.uid}-2/e1`));
  });

  test('completeWorkflow stores the error read a third time, after the undefined and null tests', () => {
    const update = changing({ state: 'failed', runId: 'r-q' }, 'error', 'e', 'e-2');
    expect(outcome(() => store.completeWorkflow(f.S.reqId, update).error)).toEqual({ returns: 'e-2' });
  });

  test('completeWorkflow tests "running" on the state read a second time', () => {
    const update = changing({ runId: 'r-q' }, 'state', 'running', 'succeeded');
    expect(outcome(() => store.completeWorkflow(f.S.reqId, update).state)).toEqual({ returns: 'succeeded' });
  });

  test("claimNext's lease.claimed event is attributed to the ownerId read a second time", () => {
    const options = changing({ controllers: ['jobs'], leaseMs: 1000 }, 'ownerId', 'w9', 'w9-2');
    expect(store.claimNext(options).ownerId).toBe('w9-2');
    expect(rows(store, "SELECT actor_id AS a FROM events WHERE event_type = 'lease.claimed' ORDER BY event_seq DESC LIMIT 1")).toEqual([
      { a: 'w9-2' },
    ]);
  });

  /** actor_id and lease_generation of the newest event. */
  const lastActor = () => rows(store, 'SELECT actor_id AS a, lease_generation AS g FROM events ORDER BY event_seq DESC LIMIT 1');

  test("updateStatus's event is attributed to the claim's ownerId and generation read again", () => {
    const ref = { controller: 'jobs', key: 'alpha' };
    const update = (claim: any) => store.updateStatus({ ref, expectedResourceVersion: store.getResource(ref).metadata.resourceVersion, claim, status: {} });
    update(changing({ ...f.S.claim }, 'ownerId', 'w1', 'w1-2'));
    expect(lastActor()).toEqual([{ a: 'w1-2', g: 1 }]);
    update(changing({ ...f.S.claim }, 'generation', 1, 2));
    expect(lastActor()).toEqual([{ a: 'w1', g: 2 }]);
  });

  test("updateEffect's event has the claim's generation read again", () => {
    store.reserveEffect({ key: 'e1', resourceUid: f.S.uid, claim: f.S.claim, generation: 1, kind: 'k', requestFingerprint: 'fp' });
    const claim = changing({ ...f.S.claim }, 'generation', 1, 2);
    store.updateEffect({ resourceUid: f.S.uid, key: 'e1', claim, state: 'applied' });
    expect(lastActor()).toEqual([{ a: 'w1', g: 2 }]);
  });

  test("reserveEffect's event reads options.claim again: a claim that became {} gives no actor", () => {
    const options = changing({ key: 'e2', resourceUid: f.S.uid, generation: 1, kind: 'k', requestFingerprint: 'fp' }, 'claim', f.S.claim, {});
    expect(store.reserveEffect(options).created).toBe(true);
    expect(lastActor()).toEqual([{ a: null, g: null }]);
  });

  test('recordEvent checks the claim read after its undefined test', () => {
    const options = changing({ controller: 'jobs', key: 'alpha', type: 't' }, 'claim', f.S.claim, {});
    expect(outcome(() => store.recordEvent(options))).toEqual(throws('Error', 'Controller claim targets another resource'));
  });

  test('claimNextWorkflowRun binds the runnerId read twice in the selection and claims with a third read', () => {
    const reads = ['x', 'session-r-q', 'session-r-q-3'];
    const options = { sessionId: 'session-r-q', claimToken: 'k', leaseMs: 1000, get runnerId() { return reads.shift(); } };
    expect(outcome(() => store.claimNextWorkflowRun(options)?.runnerId)).toEqual({ returns: 'session-r-q-3' });
    expect(reads).toEqual([]);
  });

  test('reserveWorkflow inserts the requestKey read after the lookup', () => {
    const options = changing({ resourceUid: f.S.uid, claim: f.S.claim, workflow: 'child', inputFingerprint: 'ab'.repeat(32) }, 'requestKey', 'w3', 'w3-2');
    expect(outcome(() => store.reserveWorkflow(options).record.requestKey)).toEqual({ returns: 'w3-2' });
  });

  test('reserveWorkflow looks the existing request up by the resourceUid read a second time', () => {
    const options = changing({ claim: f.S.claim, requestKey: 'w1', workflow: 'child', inputFingerprint: 'ab'.repeat(32) }, 'resourceUid', f.S.uid, `${f.S.uid}-2`);
    expect(outcome(() => store.reserveWorkflow(options))).toEqual(
      throws('SqliteError', 'UNIQUE constraint failed: controller_workflows.controller_resource_id, controller_workflows.request_key', {
        code: 'SQLITE_CONSTRAINT_UNIQUE',
      }),
    );
  });

  test("reserveWorkflowRun writes the source row from the kind read again after the check", () => {
    const workflowSource = changing({ id: 'echo', revision: 'rev-1' }, 'kind', 'builtin', 'file');
    expect(outcome(() => store.reserveWorkflowRun(RUN('n-9', { workflowSource })))).toEqual(
      throws('SqliteError', 'NOT NULL constraint failed: run_sources.source_ref', { code: 'SQLITE_CONSTRAINT_NOTNULL' }),
    );
  });

  test('enqueueWorkflowRun reserves from a copy of its options: each field is read once', () => {
    const options = changing({ ...RUN('n-9'), claimToken: 'c', leaseMs: 1000 }, 'originSessionId', 'session-n-9', 'session-n-9-2');
    expect(store.enqueueWorkflowRun(options).originSessionId).toBe('session-n-9');
    expect(rows(store, "SELECT actor_id AS a FROM events WHERE event_type = 'run.queued' ORDER BY event_seq DESC LIMIT 1")).toEqual([
      { a: 'session-n-9' },
    ]);
  });

  test('enqueueWorkflowRun leaves out of the copy a parentRunId undefined at its test', () => {
    const options = changing({ ...RUN('n-9'), claimToken: 'c', leaseMs: 1000 }, 'parentRunId', undefined, 'r-q');
    expect(outcome(() => store.enqueueWorkflowRun(options).parentRunId)).toEqual({ returns: null });
  });

  test('putResource looks the resource up, and creates it, by the controller read after its check', () => {
    const options = changing({ key: 'zeta', spec: { z: 1 }, initialStatus: {} }, 'controller', 'jobs', 'jobs-2');
    const { controller, key, resourceVersion } = store.putResource(options).metadata;
    expect({ controller, key, resourceVersion }).toEqual({ controller: 'jobs-2', key: 'zeta', resourceVersion: 1 });
  });

  test("putResource's record is the resource the controller read last names", () => {
    const reads = ['jobs', 'jobs-x', 'jobs-x', 'jobs-x', 'other'];
    const record = store.putResource({ key: 'gamma', spec: { z: 1 }, initialStatus: {}, get controller() { return reads.shift(); } });
    expect([record.metadata.controller, record.spec, reads]).toEqual(['other', { n: 3 }, []]);
    expect(store.listResources({ controller: 'jobs-x' }).map((r: any) => r.metadata.key)).toEqual(['gamma']);
  });

  test('putResource fails on a record read naming a missing resource, its writes rolled back', () => {
    const reads = ['jobs', 'jobs', 'other'];
    const put = () => store.putResource({ key: 'alpha', spec: { n: 1 }, initialStatus: {}, get controller() { return reads.shift(); } });
    expect(outcome(put)).toEqual(
      throws('ResourceNotFoundError', 'Controller resource not found: other/alpha', { name: 'ResourceNotFoundError' }),
    );
    expect(reads).toEqual([]);
  });

  /** `object` with each own field a getter that logs its name in `reads`. */
  function logged(object: any, reads: string[]): any {
    for (const key of Object.keys(object)) {
      const value = object[key];
      Object.defineProperty(object, key, { get: () => (reads.push(key), value), enumerable: true });
    }
    return object;
  }

  test('reserveWorkflowRun reads runId at each use: a run id that changes after its check names the run', () => {
    const run = store.reserveWorkflowRun(changing(RUN('n-9'), 'runId', 'n-9', 'n-9-2'));
    expect([run.runId, run.rootRunId, store.getWorkflowRun('n-9')]).toEqual(['n-9-2', 'n-9-2', undefined]);
  });

  // The reference's reads, logged the same way.
  test('reserveWorkflowRun reads the fields of a root run in the order and number the reference reads them', () => {
    const reads: string[] = [];
    store.reserveWorkflowRun(logged(RUN('n-9', { launchOptions: { a: 1 }, executionMode: 'interactive', now: NOW }), reads));
    expect(reads.join(' ')).toBe(
      'runId now definitionDigest runId runId runId definitionSnapshot workflowSource input launchOptions workflowName ' +
        'runId runId workflowSourceRef runId runId runId originSessionId executionMode runId runnerId originSessionId ' +
        'originSessionId runId',
    );
  });

  test('prepareOrAdoptWorkflowRun reads the fields of an existing run in the order and number the reference reads them', () => {
    const reads: string[] = [];
    const adopt = () => store.prepareOrAdoptWorkflowRun(logged({ ...RUN('r-q'), claimToken: 'c', leaseMs: 1000 }, reads)).state;
    expect(outcome(adopt)).toEqual({ returns: 'adopted' });
    expect(reads.join(' ')).toBe('runId definitionDigest runId runId workflowName workflowSourceRef workflowSource input originSessionId');
  });

  test('claimNextWorkflowRun reads its options in the order and number the reference reads them', () => {
    const reads: string[] = [];
    const options = { runnerId: 'session-r-q', sessionId: 'session-r-q', claimToken: 'k', leaseMs: 1000, now: NOW, excludeRunIds: ['r-x'] };
    expect(store.claimNextWorkflowRun(logged(options, reads))?.runId).toBe('r-q');
    expect(reads.join(' ')).toBe(
      'now runnerId runnerId sessionId sessionId excludeRunIds excludeRunIds excludeRunIds excludeRunIds runnerId claimToken leaseMs',
    );
  });

  test('listEvents binds the controller read a second time, after its undefined test', () => {
    const options = changing({}, 'controller', 'jobs', 'jobs-2');
    expect(outcome(() => store.listEvents(options).length)).toEqual({ returns: 0 });
  });

  test('listResources binds the controller read a second time, after its undefined test', () => {
    const options = changing({}, 'controller', 'jobs', 'jobs-2');
    expect(outcome(() => store.listResources(options).length)).toEqual({ returns: 0 });
  });

  test('recordRunEvent binds and returns the runnerId read after its startsWith test', () => {
    const options = changing({ runId: 'r-c', workflowRef: 'w', type: 't' }, 'runnerId', 'host-1', 'host-1-2');
    expect(store.recordRunEvent(options).runnerId).toBe('host-1-2');
    expect(rows(store, 'SELECT actor_type AS t, actor_id AS a FROM events ORDER BY event_seq DESC LIMIT 1')).toEqual([
      { t: 'host', a: 'host-1-2' },
    ]);
  });

  test('updateFinalizers returns the resource of the ref read a second time', () => {
    const options = changing({ expectedResourceVersion: f.S.rvBeta, finalizers: ['x'] }, 'ref', { controller: 'jobs', key: 'beta' }, {
      controller: 'jobs',
      key: 'alpha',
    });
    expect(outcome(() => store.updateFinalizers(options).metadata.key)).toEqual({ returns: 'alpha' });
  });

  test('claimNext binds an ownerId array as better-sqlite3 spreads it, in the lease and the event', () => {
    expect(outcome(() => store.claimNext({ controllers: ['jobs'], ownerId: ['w9'], leaseMs: 1000 })?.key)).toEqual({ returns: 'delta' });
  });

  test('claimNext refuses a typed array of exclusions at flatMap, after its map', () => {
    const claim = () => store.claimNext({ controllers: ['jobs'], ownerId: 'w9', leaseMs: 1000, exclude: new Uint8Array([1]) });
    expect(outcome(claim)).toEqual(throws('TypeError', 'exclusions.flatMap is not a function'));
  });

  test('claimNext maps the controllers read a second time: an empty list claims nothing', () => {
    const options = changing({ ownerId: 'w9', leaseMs: 1000 }, 'controllers', ['jobs'], []);
    expect(outcome(() => store.claimNext(options))).toEqual({ returns: undefined });
  });
});

describe('C09 lone surrogates are kept as JavaScript keeps them, in messages and in stored text', () => {
  test('the key in a not-found message', () => {
    expect(outcome(() => store.requestDeletion({ controller: 'jobs', key: LONE }))).toEqual(
      throws('ResourceNotFoundError', `Controller resource not found: jobs/${LONE}`, { name: 'ResourceNotFoundError' }),
    );
  });

  test('an ownerId stored in a lease and read back', () => {
    const claim = () => store.claimNext({ controllers: ['jobs'], ownerId: LONE, leaseMs: 1000 })?.ownerId;
    expect(outcome(claim)).toEqual({ returns: LONE });
  });

  test('an errorCode in the failed-run event payload', () => {
    store.failWorkflowRun({ runId: 'r-q', errorCode: LONE, errorMessage: 'm' });
    expect(store.listRunEventsAfter(0, { limit: 1000 }).at(-1).payload.code).toBe(LONE);
  });

  test('a run id in the invalid-run-id message', () => {
    expect(outcome(() => store.reserveWorkflowRun(RUN(`n-9${LONE}`)))).toEqual(throws('Error', `Invalid workflow run id: n-9${LONE}`));
  });

  test("a run id in recordRunEvent's not-found message", () => {
    const record = () => store.recordRunEvent({ runId: LONE, workflowRef: 'w', type: 't' });
    expect(outcome(record)).toEqual(throws('Error', `Workflow run not found: ${LONE}`));
  });

  test('an effect key in the not-found message', () => {
    const update = () => store.updateEffect({ resourceUid: f.S.uid, key: `e${LONE}`, claim: f.S.claim, state: 'applied' });
    expect(outcome(update)).toEqual(throws('Error', `Effect record not found: ${f.S.uid}/e${LONE}`));
  });

  test("a runnerId in recordRunEvent's record is the caller's string", () => {
    expect(store.recordRunEvent({ runId: 'r-c', workflowRef: 'w', type: 't', runnerId: `host-1${LONE}` }).runnerId).toBe(`host-1${LONE}`);
  });

  test("a claimToken in the claim is the caller's string", () => {
    const claim = store.claimWorkflowRun({ runId: 'r-q', runnerId: 'session-r-q', claimToken: `k${LONE}`, leaseMs: 1000 });
    expect(claim.claimToken).toBe(`k${LONE}`);
  });

  // Stored as WTF-8 (as V8 writes a lone surrogate for SQLite), read back as V8 decodes those
  // bytes: one U+FFFD for each byte of the surrogate's sequence.
  test('a workflow source id stored and read back', () => {
    const run = store.reserveWorkflowRun(RUN('n-9', { workflowSource: { kind: 'builtin', id: `e${LONE}`, revision: 'r' } }));
    expect(run.workflowSource.root.id).toBe('e\ufffd\ufffd\ufffd');
  });

  test('a runnerId stored in the lease and read back', () => {
    const run = store.enqueueWorkflowRun({ ...RUN('n-9'), runnerId: `s${LONE}`, claimToken: 'c', leaseMs: 1000 });
    expect(run.runnerId).toBe('s\ufffd\ufffd\ufffd');
  });

  test('an originSessionId stored, then read back by getWorkflowRun', () => {
    store.reserveWorkflowRun(RUN('n-9', { originSessionId: `s${LONE}` }));
    expect(store.getWorkflowRun('n-9').originSessionId).toBe('s\ufffd\ufffd\ufffd');
    expect(rows(store, "SELECT hex(actor_id) AS a FROM events WHERE event_type = 'run.queued' ORDER BY event_seq DESC LIMIT 1")).toEqual([
      { a: '73EDA080' },
    ]);
  });

  test('a controlId stored in the control lease, then bound again for its release and the event', () => {
    expect(outcome(() => store.cancelStaleWorkflowRun({ runId: 'r-q', controlId: `c${LONE}` }))).toEqual({ returns: true });
    expect(rows(store, "SELECT hex(actor_id) AS a FROM events WHERE event_type = 'run.queue_cancelled' ORDER BY event_seq DESC LIMIT 1")).toEqual([
      { a: '63EDA080' },
    ]);
  });

  test('a finalizers string is iterated by code point, a lone surrogate one of them, stored as its WTF-8', () => {
    const finalizers = `a${String.fromCharCode(0xdc00)}b${LONE}`;
    const update = () => store.updateFinalizers({ ref: { controller: 'jobs', key: 'beta' }, expectedResourceVersion: f.S.rvBeta, finalizers });
    expect(update().metadata.finalizers).toEqual(['a', '\ufffd\ufffd\ufffd', 'b', '\ufffd\ufffd\ufffd']);
    expect(rows(store, 'SELECT hex(finalizer) AS f FROM controller_finalizers ORDER BY rowid DESC LIMIT 4')).toEqual(
      ['EDA080', '62', 'EDB080', '61'].map((hex) => ({ f: hex })),
    );
  });

  // JSON.stringify escapes it in the payload; json_extract decodes the escape to its WTF-8.
  test("a requestFingerprint read back from the effect's payload", () => {
    const reserve = () => store.reserveEffect({ key: 'e2', resourceUid: f.S.uid, claim: f.S.claim, generation: 1, kind: 'k', requestFingerprint: `fp${LONE}` });
    expect(outcome(() => reserve().record.requestFingerprint)).toEqual({ returns: 'fp\ufffd\ufffd\ufffd' });
  });

  test('a JSON document keeps it: JSON.stringify escapes it, JSON.parse reads it back', () => {
    expect(store.putResource({ controller: 'jobs', key: 'zeta', spec: { a: LONE }, initialStatus: {} }).spec).toEqual({ a: LONE });
  });

  test('a digest with one fails the digest test', () => {
    expect(outcome(() => store.reserveWorkflowRun(RUN('n-9', { definitionDigest: `sha256:${LONE}` })))).toEqual(
      throws('Error', 'Expected a SHA-256 digest'),
    );
  });
});

describe('C10 a large number bound to a TEXT column is written as better-sqlite3 writes it', () => {
  test("2 ** 53 as originSessionId reads back '9007199254740992.0'", () => {
    store.setWorkflowRunOriginSession('r-q', 2 ** 53);
    expect(store.getWorkflowRun('r-q').originSessionId).toBe('9007199254740992.0');
  });
});

describe('C11 holes in an array are skipped by .map, not densified', () => {
  test('listWorkflowRuns with a holey statuses array builds an invalid IN list', () => {
    // eslint-disable-next-line no-sparse-arrays
    const list = () => store.listWorkflowRuns({ statuses: [, 'parked'] });
    expect(outcome(list)).toEqual(throws('SqliteError', 'near ",": syntax error', { code: 'SQLITE_ERROR' }));
  });
});

describe('C12 undefined or a primitive in place of an options object: the default parameter, and the reference order of checks', () => {
  test('listResources(undefined) lists every resource, as listResources() does', () => {
    expect(outcome(() => store.listResources(undefined).map((r: any) => r.metadata.key))).toEqual({
      returns: store.listResources().map((r: any) => r.metadata.key),
    });
  });

  test("reserveWorkflowRun('x') fails on the first string method of a missing field, not on the timestamp", () => {
    expect(outcome(() => store.reserveWorkflowRun('x'))).toEqual(
      throws('TypeError', "Cannot read properties of undefined (reading 'startsWith')"),
    );
  });
});

describe('C13 a non-string where text is expected is converted as Buffer.from and String methods convert it', () => {
  test('a Date as a child workflow error is stored as its string', () => {
    const update = () => store.updateWorkflow(f.S.reqId, { runId: 'r-q', state: 'running', error: new Date(0) }, f.S.claim).error;
    expect(outcome(update)).toEqual({ returns: 'Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)' });
  });

  test('an array as a source-change detail parks the run', () => {
    const park = () => store.parkWorkflowRunForSourceChange({ runId: 'r-r', claimToken: 'tok-r', detail: ['a'] });
    expect(outcome(park)).toEqual({ returns: true });
  });

  test('an empty array as a source-change detail is sliced, then binds no parameter', () => {
    const park = () => store.parkWorkflowRunForSourceChange({ runId: 'r-r', claimToken: 'tok-r', detail: [] });
    expect(outcome(park)).toEqual(throws('RangeError', TOO_FEW));
  });

  test('a boxed String as a source-change detail is sliced into its string', () => {
    const park = () => store.parkWorkflowRunForSourceChange({ runId: 'r-r', claimToken: 'tok-r', detail: new String('moved') });
    expect(outcome(park)).toEqual({ returns: true });
  });

  test('a Uint8Array as a source-change detail is sliced, stored as text, then refused by the TEXT column', () => {
    const park = () => store.parkWorkflowRunForSourceChange({ runId: 'r-r', claimToken: 'tok-r', detail: new Uint8Array([65]) });
    expect(outcome(park)).toEqual(
      throws('SqliteError', 'cannot store BLOB value in TEXT column runs.status_detail', { code: 'SQLITE_CONSTRAINT_DATATYPE' }),
    );
  });

  test("an array as a failed run's errorMessage is stored as Buffer.from makes it", () => {
    expect(store.failWorkflowRun({ runId: 'r-q', errorCode: 'E', errorMessage: ['a', 'b'] })).toBe(true);
    expect(store.getWorkflowRun('r-q').errorMessage).toBe('\u0000\u0000');
  });

  test("a boxed String as a failed run's errorMessage is stored, then refused by the event's canonical JSON", () => {
    const fail = () => store.failWorkflowRun({ runId: 'r-q', errorCode: 'E', errorMessage: new String('m') });
    expect(outcome(fail)).toEqual(throws('Error', 'Only plain objects can be stored as canonical JSON'));
  });
});

describe('C14 a boxed or valueOf number as leaseMs is coerced by now + leaseMs', () => {
  test('claimWorkflowRun with leaseMs { valueOf: () => 1000 }', () => {
    const options = { runId: 'r-q', runnerId: 'session-r-q', claimToken: 'k', leaseMs: { valueOf: () => 1000 } };
    expect(outcome(() => store.claimWorkflowRun(options)?.claimExpiresAt)).toEqual({ returns: '2026-11-01T00:01:01.007Z' });
  });
});

describe('C15 array-likes and iterables where an array is expected are used through their own iteration', () => {
  test('updateFinalizers with a Uint8Array of finalizers stores each element as bound text', () => {
    const update = () =>
      store.updateFinalizers({
        ref: { controller: 'jobs', key: 'beta' },
        expectedResourceVersion: f.S.rvBeta,
        finalizers: new Uint8Array([1, 2]),
      }).metadata.finalizers;
    expect(outcome(update)).toEqual({ returns: ['1.0', '2.0'] });
  });
});

describe('C15c finalizers are [...new Set(finalizers)] of the caller\'s own iteration', () => {
  const update = (finalizers: unknown) => () =>
    store.updateFinalizers({ ref: { controller: 'jobs', key: 'beta' }, expectedResourceVersion: f.S.rvBeta, finalizers }).metadata
      .finalizers;

  test('a Set has no length: the list is refused as not unique', () => {
    expect(outcome(update(new Set(['a'])))).toEqual(throws('Error', 'Controller finalizers must be unique'));
  });

  test('a boxed String iterates its characters', () => {
    expect(outcome(update(new String('ab')))).toEqual({ returns: ['a', 'b'] });
  });

  test('a Proxy whose get trap throws throws that (C99)', () => {
    const proxy = new Proxy(['a'], {
      get() {
        throw new Error('trap');
      },
    });
    expect(outcome(update(proxy))).toEqual(throws('Error', 'trap'));
  });

  test('a revoked Proxy throws the TypeError of its iteration (C01)', () => {
    expect(outcome(update(revoked()))).toEqual(throws('TypeError', "Cannot perform 'get' on a proxy that has been revoked"));
  });
});

describe('C15b a typed array where a list becomes an SQL IN list: its own map makes the placeholders, its spread the values', () => {
  const TOO_MANY = 'Too many parameter values were provided';
  test('listWorkflowRuns with a Uint8Array of statuses', () => {
    expect(outcome(() => store.listWorkflowRuns({ statuses: new Uint8Array([1]) }))).toEqual(throws('RangeError', TOO_MANY));
  });

  test('claimNext with a Uint8Array of controllers', () => {
    const claim = () => store.claimNext({ controllers: new Uint8Array([1, 2]), ownerId: 'w9', leaseMs: 1000 });
    expect(outcome(claim)).toEqual(throws('RangeError', TOO_MANY));
  });

  test('claimNextWorkflowRun with a Uint8Array of excluded run ids', () => {
    const claim = () => store.claimNextWorkflowRun({ runnerId: 'host-1', claimToken: 'k', leaseMs: 1000, excludeRunIds: new Uint8Array([1]) });
    expect(outcome(claim)).toEqual(throws('RangeError', TOO_MANY));
  });
});

describe('C16 a boxed String where a string is expected has its String methods and fails at binding', () => {
  test('reserveWorkflowRun with an invalid definitionDigest new String(...) fails the digest test', () => {
    const reserve = () => store.reserveWorkflowRun(RUN('n-9', { definitionDigest: new String('sha256:zz') }));
    expect(outcome(reserve)).toEqual(throws('Error', 'Expected a SHA-256 digest'));
  });

  test('reserveWorkflowRun with a valid definitionDigest new String(...) reserves the run', () => {
    const digest = `sha256:${'a1'.repeat(32)}`;
    expect(store.reserveWorkflowRun(RUN('n-9', { definitionDigest: new String(digest) })).definitionDigest).toBe(digest);
  });

  test('claimWorkflowRun with runnerId new String(...)', () => {
    const options = { runId: 'r-q', runnerId: new String('session-r-q'), claimToken: 'k', leaseMs: 1000 };
    expect(outcome(() => store.claimWorkflowRun(options))).toEqual(
      throws('TypeError', 'SQLite3 can only bind numbers, strings, bigints, buffers, and null'),
    );
  });
});

describe("C17 Node's argument error describes a null-prototype object as Node does", () => {
  test('verifyWorkflowRunClaim with a null-prototype claimToken', () => {
    const verify = () => store.verifyWorkflowRunClaim({ runId: 'r-c', claimToken: Object.create(null) });
    expect(outcome(verify)).toEqual(
      throws(
        'TypeError',
        'The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received [Object: null prototype] {}',
        { code: 'ERR_INVALID_ARG_TYPE' },
      ),
    );
  });
});

describe('C18 requeueClaim: an availableAt whose conversion throws throws that conversion error', () => {
  test('a Symbol availableAt', () => {
    const requeue = () => store.requeueClaim(f.S.claimB, { availableAt: Symbol() });
    expect(outcome(requeue)).toEqual(throws('TypeError', 'Cannot convert a Symbol value to a string'));
  });

  test('an availableAt whose toString throws', () => {
    const availableAt = {
      toString() {
        throw new Error('ts boom');
      },
    };
    expect(outcome(() => store.requeueClaim(f.S.claimB, { availableAt }))).toEqual(throws('Error', 'ts boom'));
  });
});

describe('C19 JSON the store assembles from argument values is canonical JSON of them', () => {
  test('an own __proto__ key of a requestFingerprint object is dropped', () => {
    const reserve = () =>
      store.reserveEffect({
        key: 'e2',
        resourceUid: f.S.uid,
        claim: f.S.claim,
        generation: 1,
        kind: 'k',
        requestFingerprint: JSON.parse('{"__proto__":{"x":1},"a":1}'),
      }).record.requestFingerprint;
    expect(outcome(reserve)).toEqual({ returns: '{"a":1}' });
  });

  test('[undefined] as a failed run errorCode is rejected', () => {
    const fail = () => store.failWorkflowRun({ runId: 'r-q', errorCode: [undefined], errorMessage: 'm' });
    expect(outcome(fail)).toEqual(throws('Error', 'Unsupported JSON value type: undefined'));
  });
});

describe('C20 a deep object bound as a SQL value is a bag of named parameters, not canonical JSON', () => {
  test('reserveEffect with a 30-level object as kind', () => {
    let kind: unknown = 1;
    for (let i = 0; i < 30; i += 1) kind = { d: kind };
    const reserve = () =>
      store.reserveEffect({ key: 'e2', resourceUid: f.S.uid, claim: f.S.claim, generation: 1, kind, requestFingerprint: 'fp' });
    expect(outcome(reserve)).toEqual(throws('RangeError', TOO_FEW));
  });
});

describe('C21 failWorkflowRun without errorCode stores a NULL code', () => {
  test('returns true and the run is failed with no code', () => {
    expect(outcome(() => store.failWorkflowRun({ runId: 'r-q', errorMessage: 'm' }))).toEqual({ returns: true });
    expect(store.getWorkflowRun('r-q')).toMatchObject({ status: 'failed', errorCode: null, errorMessage: 'm' });
  });
});

describe("C23 an object with a custom toString as a run id passes the reference's regex test, then fails binding", () => {
  test('reserveWorkflowRun', () => {
    expect(outcome(() => store.reserveWorkflowRun(RUN({ toString: () => 'n-9' })))).toEqual(throws('RangeError', TOO_FEW));
  });
});

describe("C24 a non-string claimToken is echoed in the claim as the caller's value", () => {
  test('claimWorkflowRun with a Uint8Array claimToken returns that Uint8Array', () => {
    const claimToken = new Uint8Array([1, 2, 3]);
    const claim = store.claimWorkflowRun({ runId: 'r-q', runnerId: 'session-r-q', claimToken, leaseMs: 1000 });
    expect(claim.claimToken).toBe(claimToken);
  });

  test('enqueueWorkflowRun with a Buffer claimToken returns that Buffer, in its place among the keys', () => {
    const claimToken = Buffer.from('ct');
    const run = store.enqueueWorkflowRun({ ...RUN('n-9'), claimToken, leaseMs: 1000 });
    expect(run.claimToken).toBe(claimToken);
    expect(Object.keys(run).indexOf('claimToken')).toBe(Object.keys(store.getWorkflowRun('r-c')).indexOf('claimToken'));
  });

  test("prepareOrAdoptWorkflowRun with a Uint8Array claimToken returns that Uint8Array as the claimed run's", () => {
    const claimToken = new Uint8Array([1]);
    const prepared = store.prepareOrAdoptWorkflowRun({ ...RUN('n-9'), claimToken, leaseMs: 1000 });
    expect([prepared.state, prepared.run.claimToken]).toEqual(['claimed', claimToken]);
    expect(prepared.run.claimToken).toBe(claimToken);
  });

  test('claimNextWorkflowRun with a Uint8Array claimToken returns that Uint8Array', () => {
    const claimToken = new Uint8Array([1]);
    const claim = store.claimNextWorkflowRun({ runnerId: 'session-r-q', sessionId: 'session-r-q', claimToken, leaseMs: 1000 });
    expect(claim?.claimToken).toBe(claimToken);
  });
});

describe('readsDiff: the same answer, and the same traps run on the caller\'s objects in the same order', () => {
  /** A Proxy of `target` that logs each trap as the fuzzer does (`get key`, `has key`). */
  function recorded(target: object): { proxy: any; log: string[] } {
    const log: string[] = [];
    const proxy = new Proxy(target, {
      get(t, key, receiver) {
        log.push(`get ${String(key)}`);
        return Reflect.get(t, key, receiver);
      },
      has(t, key) {
        log.push(`has ${String(key)}`);
        return Reflect.has(t, key);
      },
    });
    return { proxy, log };
  }

  test('listWorkflowRuns: statuses.map reads the list\'s constructor (the species of its result)', () => {
    const { proxy, log } = recorded(['queued', 'parked']);
    expect(outcome(() => store.listWorkflowRuns({ statuses: proxy }).length)).toEqual({ returns: expect.any(Number) });
    // The reference's reads (seed 20261101, listWorkflowRuns#0#0.statuses#proxy-array).
    expect(log).toEqual([
      'get length', 'get map', 'get length', 'get constructor', 'has 0', 'get 0', 'has 1', 'get 1',
      'get Symbol(Symbol.iterator)', 'get length', 'get 0', 'get length', 'get 1', 'get length',
    ]);
  });

  test('claimNext: exclude is walked by map for the SQL, then again by flatMap for its values', () => {
    const { proxy, log } = recorded([{ controller: 'jobs', key: 'alpha' }]);
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'w', leaseMs: 1000, now: NOW, exclude: proxy });
    expect(claim?.key).not.toBe('alpha');
    // The reference's reads (seed 20261101, claimNext#0#0.exclude#proxy-array).
    expect(log).toEqual([
      'get map', 'get length', 'get constructor', 'has 0', 'get 0',
      'get flatMap', 'get length', 'get constructor', 'has 0', 'get 0',
    ]);
  });

  /** Each read `options[name]`, as the log of a recorded options object lists it. */
  const gets = (names: string[]) => names.map((name) => `get ${name}`);

  test('listWorkflowRuns reads limit three times: the test, the bound value, the LIMIT clause', () => {
    const { proxy, log } = recorded({ statuses: ['queued', 'parked'], excludeRunIds: ['r-h'], limit: 5 });
    expect(outcome(() => store.listWorkflowRuns(proxy).length)).toEqual({ returns: expect.any(Number) });
    expect(log).toEqual(gets([...Array(4).fill('statuses'), ...Array(4).fill('excludeRunIds'), 'limit', 'limit', 'limit']));
  });

  test('listWorkflowRuns: a limit that appears only for the LIMIT clause leaves it a value short', () => {
    let reads = 0;
    const options = { get limit() { return reads++ ? 5 : undefined; } };
    expect(outcome(() => store.listWorkflowRuns(options))).toEqual(throws('RangeError', TOO_FEW));
  });

  test('cancelStaleWorkflowRun reads runId where the reference does: five times', () => {
    const { proxy, log } = recorded({ runId: 'r-q', controlId: 'ctl-1', claimToken: 'ct-s', now: NOW });
    expect(outcome(() => store.cancelStaleWorkflowRun(proxy))).toEqual({ returns: true });
    expect(log).toEqual(gets(['now', 'controlId', 'claimToken', ...Array(5).fill('runId')]));
  });

  test('parkWorkflowRunForAmbiguousEffect binds options.runId in each update, read each time', () => {
    const { proxy, log } = recorded({ runId: 'r-r', claimToken: 'tok-r', now: NOW });
    expect(outcome(() => store.parkWorkflowRunForAmbiguousEffect(proxy))).toEqual(
      throws('Error', 'Workflow run r-r has inconsistent ambiguous-effect state'),
    );
    expect(log).toEqual(gets(['now', 'runId', 'runId', 'claimToken', 'runId', 'runId', 'runId', 'runId']));
  });

  test('parkWorkflowRunForSourceChange reads runId once more for the viewer deltas', () => {
    const { proxy, log } = recorded({ runId: 'r-r', claimToken: 'tok-r', detail: 'source changed', now: NOW });
    expect(outcome(() => store.parkWorkflowRunForSourceChange(proxy))).toEqual({ returns: true });
    expect(log).toEqual(gets(['now', 'runId', 'runId', 'claimToken', 'detail', 'runId', 'runId', 'claimToken', 'runId']));
  });

  test('recordEvent reads the record\'s controller, key, type and payload inside its transaction, in that order', () => {
    // The fuzzer's second base (recordEvent#1#0#proxy-base): no claim, no payload.
    const { proxy, log } = recorded({ controller: 'jobs', key: 'beta', type: 'plain' });
    expect(outcome(() => store.recordEvent(proxy).type)).toEqual({ returns: 'plain' });
    expect(log).toEqual(
      gets(['now', 'controller', 'key', 'claim', 'type', 'claim', 'claim', 'payload', 'claim', 'claim', 'controller', 'key', 'type', 'payload']),
    );
  });

  test('recordEvent with a claim reads options.claim again for the resourceVersion assignment', () => {
    // The fuzzer's first base (seed 20261102, recordEvent#0#0#proxy-base).
    const { proxy, log } = recorded({ controller: 'jobs', key: 'alpha', claim: { ...f.S.claim }, type: 'custom', payload: { x: 1 }, now: NOW });
    expect(outcome(() => store.recordEvent(proxy).type)).toEqual({ returns: 'custom' });
    expect(log).toEqual(
      gets(['now', 'controller', 'key', 'claim', 'claim', 'type', 'claim', 'claim', 'payload', 'claim', 'claim', 'claim',
        'controller', 'key', 'type', 'payload']),
    );
  });

  test('recordEvent: a getter that throws as the record is built rolls the event back', () => {
    let reads = 0;
    const before = betaState().events;
    const options = { controller: 'jobs', key: 'beta', type: 'plain', get payload() { if (reads++) boom(); return { a: 1 }; } };
    expect(outcome(() => store.recordEvent(options))).toEqual(throws('Error', 'boom'));
    expect(betaState().events).toBe(before);
  });

  test.each([
    [undefined, 'Cannot set properties of undefined (setting \'resourceVersion\')'],
    [null, 'Cannot set properties of null (setting \'resourceVersion\')'],
    [5, 'Cannot create property \'resourceVersion\' on number \'5\''],
  ])('recordEvent: a claim that reads %p for the resourceVersion assignment throws and rolls the event back', (last, message) => {
    // The reference reads options.claim seven times; the seventh is the assignment's target.
    let reads = 0;
    const claim = { ...f.S.claim };
    const options = { controller: 'jobs', key: 'alpha', type: 'plain', get claim() { reads += 1; return reads < 7 ? claim : last; } };
    const events = () => store.listEvents({ controller: 'jobs', key: 'alpha' }).length;
    const before = events();
    expect(outcome(() => store.recordEvent(options))).toEqual(throws('TypeError', message));
    expect(reads).toBe(7);
    expect(events()).toBe(before);
  });

  test.each([
    [undefined, 'Cannot set properties of undefined (setting \'resourceVersion\')'],
    [null, 'Cannot set properties of null (setting \'resourceVersion\')'],
  ])('updateStatus: a claim that reads %p for the resourceVersion assignment throws and rolls the status back', (last, message) => {
    // The reference reads options.claim four times; the fourth is the assignment's target.
    const claim = { ...f.S.claim };
    let reads = 0;
    const ref = { controller: 'jobs', key: 'alpha' };
    const before = store.getResource(ref).metadata.resourceVersion;
    const options = {
      ref,
      expectedResourceVersion: before,
      status: { observedGeneration: 1, conditions: [] },
      get claim() { reads += 1; return reads < 4 ? claim : last; },
    };
    expect(outcome(() => store.updateStatus(options))).toEqual(throws('TypeError', message));
    expect(reads).toBe(4);
    expect(store.getResource(ref).metadata.resourceVersion).toBe(before);
  });

  test('settleClaim looks the resource up again before it releases the lease', () => {
    const { proxy, log } = recorded({ ...f.S.claim });
    expect(outcome(() => store.settleClaim(proxy))).toEqual({ returns: true });
    expect(log).toEqual(
      gets(['controller', 'key', 'controller', 'key', 'ownerId', 'generation', 'token', 'queueVersion',
        'controller', 'key', 'ownerId', 'token', 'generation', 'ownerId', 'generation']),
    );
  });

  test('settleClaim: a key that names no resource on that lookup settles the queue and releases nothing', () => {
    const claim = { ...f.S.claim };
    const { key, resourceVersion } = claim;
    let reads = 0;
    Object.defineProperty(claim, 'key', { get: () => (reads++ < 2 ? key : 'nope'), enumerable: true });
    expect(outcome(() => store.settleClaim(claim))).toEqual({ returns: true });
    expect(claim.resourceVersion).toBe(resourceVersion);
    const types = store.listEvents({ controller: claim.controller, key }).map((event: any) => event.type);
    expect(types).not.toContain('lease.released');
  });

  test('claimNext: a throwing item stops flatMap\'s walk where JavaScript stops it', () => {
    const { proxy, log } = recorded([{ get controller() { return boom(); }, key: 'alpha' }, { controller: 'jobs', key: 'beta' }]);
    expect(outcome(() => store.claimNext({ controllers: ['jobs'], ownerId: 'w', leaseMs: 1000, now: NOW, exclude: proxy }))).toEqual(
      throws('Error', 'boom'),
    );
    expect(log.slice(log.indexOf('get flatMap'))).toEqual(['get flatMap', 'get length', 'get constructor', 'has 0', 'get 0']);
  });

  test('map and flatMap follow the list\'s species as ArraySpeciesCreate does', () => {
    // Checked on the reference: a species constructor is called with map's length, flatMap's 0.
    const made: number[] = [];
    class Spy extends Array {
      static get [Symbol.species](): any {
        return function Made(length: number) {
          made.push(length);
          return [];
        };
      }
    }
    expect(outcome(() => store.listWorkflowRuns({ statuses: Spy.from(['queued', 'done']) }).length)).toEqual({ returns: expect.any(Number) });
    expect(made).toEqual([2]);
    made.length = 0;
    const exclude = Spy.from([{ controller: 'a', key: 'b' }, { controller: 'c', key: 'd' }, { controller: 'e', key: 'f' }]);
    store.claimNext({ controllers: ['nothing-here'], ownerId: 'w', leaseMs: 1000, now: NOW, exclude });
    expect(made).toEqual([3, 0]);
  });

  test.each([
    ['a constructor that is not an object', 5],
    ['a species that is not a constructor', { [Symbol.species]: 5 }],
  ])('map of a list with %s throws V8\'s TypeError', (_, constructor) => {
    const statuses = Object.assign(['queued'], { constructor });
    expect(outcome(() => store.listWorkflowRuns({ statuses }))).toEqual(
      throws('TypeError', 'object.constructor[Symbol.species] is not a constructor'),
    );
  });

  test('a list of another realm, or whose species is undefined or null, maps as a plain array', () => {
    for (const statuses of [
      vm.runInNewContext("['queued']"),
      Object.assign(['queued'], { constructor: {} }),
      Object.assign(['queued'], { constructor: { [Symbol.species]: null } }),
    ]) {
      expect(outcome(() => store.listWorkflowRuns({ statuses }).length)).toEqual({ returns: expect.any(Number) });
    }
  });
});
