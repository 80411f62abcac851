// Run claims and fencing through the public API: claimWorkflowRun and its two variants,
// claimNextWorkflowRun's selection rules, renewal, verification, authority and markRunning.

import { BUMP, Fixture, SUMMARY_REPLAY, T0, iso, resourceIdFor, sha256 } from './runs-lifecycle-fixture';

const LEASE = 60_000;

let fx: Fixture;
beforeEach(() => {
  fx = new Fixture();
});
afterEach(() => fx.dispose());

function claim(runId: string, runnerId = 'runner-1', token = 'token-1', now = T0, method = 'claimWorkflowRun') {
  return fx.store[method]({ runId, runnerId, claimToken: token, leaseMs: LEASE, now: iso(now) });
}

function claimNext(options: Record<string, unknown> = {}) {
  return fx.store.claimNextWorkflowRun({
    runnerId: 'runner-1',
    claimToken: 'token-next',
    leaseMs: LEASE,
    now: iso(T0 + 1000),
    ...options,
  });
}

describe('claimWorkflowRun', () => {
  test('claims a queued run: generation +1, starting, token hash, lease.claimed event', () => {
    fx.insertRun({ runId: 'run-a' });
    const record = claim('run-a', 'runner-1', 'token-1', T0 + 5);
    expect(Object.keys(record)).toEqual([
      'runId', 'workflowName', 'workflowSourceRef', 'workflowSource', 'initialized', 'definitionDigest',
      'input', 'launchOptions', 'status', 'runnerId', 'claimToken', 'claimGeneration', 'claimExpiresAt',
      'affinityRunnerId', 'originSessionId', 'executionMode', 'parentRunId', 'rootRunId', 'lineageKind',
      'restartNumber', 'parentTerminalFingerprint', 'errorCode', 'errorMessage', 'createdAt', 'updatedAt',
      'startedAt', 'finishedAt',
    ]);
    expect(record).toMatchObject({
      runId: 'run-a',
      status: 'starting',
      runnerId: 'runner-1',
      claimToken: 'token-1',
      claimGeneration: 1,
      claimExpiresAt: iso(T0 + 5 + LEASE),
      updatedAt: iso(T0 + 5),
      startedAt: null,
    });
    const lease = fx.lease('run-a');
    expect(lease).toMatchObject({ generation: 1, owner_type: 'session', owner_id: 'runner-1' });
    expect(lease.token_hash.equals(sha256('token-1'))).toBe(true);
    expect(fx.runEvents('run-a')).toEqual([
      {
        revision: 2,
        type: 'lease.claimed',
        actorType: 'session',
        actorId: 'runner-1',
        generation: 1,
        payload: JSON.stringify({ expiresAt: T0 + 5 + LEASE }),
        recordedAt: T0 + 5,
      },
    ]);
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP]);
  });

  test('a host- runner claims as host and clears the queue error', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', errorCode: 'effectAmbiguous' });
    const record = claim('run-a', 'host-1');
    expect(record).toMatchObject({ status: 'starting', errorCode: null, runnerId: 'host-1' });
    expect(fx.lease('run-a').owner_type).toBe('host');
    expect(fx.runEvents('run-a')[0]).toMatchObject({ actorType: 'host', actorId: 'host-1' });
  });

  test.each(['done', 'failed', 'cancelled'])('a %s queue cannot be claimed', (status) => {
    fx.insertRun({ runId: 'run-a', queueStatus: status, runStatus: 'completed' });
    expect(claim('run-a')).toBeUndefined();
    expect(fx.lease('run-a').generation).toBe(0);
  });

  test('an unknown run is undefined', () => {
    expect(claim('missing')).toBeUndefined();
  });

  test("another owner's live lease blocks; an expired one or the same runner does not", () => {
    fx.insertRun({ runId: 'run-a', lease: { ownerId: 'runner-2', token: 't2', expiresAt: T0 + 10 } });
    expect(claim('run-a', 'runner-1', 'token-1', T0 + 9)).toBeUndefined();
    expect(claim('run-a', 'runner-2', 'token-again', T0 + 9)).toMatchObject({ claimGeneration: 2 });
    expect(claim('run-a', 'runner-1', 'token-1', T0 + 9)).toBeUndefined();
    expect(claim('run-a', 'runner-1', 'token-1', T0 + 9 + LEASE)).toMatchObject({
      runnerId: 'runner-1',
      claimGeneration: 3,
    });
  });

  test('a pending interaction blocks a plain claim only', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'waiting' });
    fx.insertInteraction('run-a', 'req-1');
    expect(claim('run-a')).toBeUndefined();
    const validation = claim('run-a', 'runner-1', 'token-1', T0, 'claimWorkflowRunForInteractionValidation');
    expect(validation).toMatchObject({ status: 'starting', claimGeneration: 1 });
  });

  test('a control claim keeps the queue status and error', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'waiting', errorCode: 'x' });
    fx.insertInteraction('run-a', 'req-1');
    const record = claim('run-a', 'host-1', 'token-1', T0 + 3, 'claimWorkflowRunForControl');
    expect(record).toMatchObject({ status: 'parked', errorCode: 'x', claimGeneration: 1, runnerId: 'host-1' });
    expect(fx.queue('run-a').updated_at).toBe(T0);
  });

  test('the active-session index surfaces as SqliteError', () => {
    fx.insertRun({ runId: 'run-a', originSessionId: 's', queueStatus: 'running', runStatus: 'running' });
    fx.insertRun({ runId: 'run-b', originSessionId: 's', queueStatus: 'parked', runStatus: 'waiting' });
    let thrown: any;
    try {
      claim('run-b');
    } catch (error) {
      thrown = error;
    }
    expect(thrown.constructor.name).toBe('SqliteError');
    expect(thrown.code).toBe('SQLITE_CONSTRAINT_UNIQUE');
    expect(thrown.message).toBe('UNIQUE constraint failed: run_queue.origin_session_id');
    expect(fx.lease('run-b').generation).toBe(0);
  });

  test('invalid timestamps and read-only stores', () => {
    fx.insertRun({ runId: 'run-a' });
    expect(() =>
      fx.store.claimWorkflowRun({ runId: 'run-a', runnerId: 'r', claimToken: 't', leaseMs: 1, now: 'nope' }),
    ).toThrow('Invalid timestamp');
    const readOnly = fx.open({ readOnly: true });
    try {
      expect(() => readOnly.claimWorkflowRun({ runId: 'run-a', runnerId: 'r', claimToken: 't', leaseMs: 1 })).toThrow(
        'Cannot mutate a read-only Pi Workflows database',
      );
    } finally {
      readOnly.close();
    }
  });
});

describe('claimNextWorkflowRun selection', () => {
  test('nothing to claim is undefined', () => {
    expect(claimNext()).toBeUndefined();
  });

  test('only queued/parked/starting/running queues that are due', () => {
    fx.insertRun({ runId: 'done', queueStatus: 'done', runStatus: 'completed', executionMode: 'headless' });
    fx.insertRun({ runId: 'later', executionMode: 'headless', availableAt: T0 + 2000 });
    expect(claimNext()).toBeUndefined();
    expect(claimNext({ now: iso(T0 + 2000) })).toMatchObject({ runId: 'later', claimToken: 'token-next' });
  });

  test('the lease must be free, expired or already ours', () => {
    fx.insertRun({
      runId: 'held',
      executionMode: 'headless',
      lease: { ownerId: 'runner-2', token: 't', expiresAt: T0 + 5000 },
    });
    expect(claimNext()).toBeUndefined();
    expect(claimNext({ runnerId: 'runner-2' })).toMatchObject({ runId: 'held', runnerId: 'runner-2' });
    expect(claimNext({ now: iso(T0 + 5000 + LEASE) })).toMatchObject({ runId: 'held', runnerId: 'runner-1' });
  });

  test('affinity binds queued runs only', () => {
    fx.insertRun({ runId: 'queued', executionMode: 'headless', affinityRunnerId: 'runner-2' });
    fx.insertRun({ runId: 'started', queueStatus: 'starting', runStatus: 'running', affinityRunnerId: 'runner-2', createdAt: T0 + 1 });
    expect(claimNext()).toMatchObject({ runId: 'started' });
    expect(claimNext({ runnerId: 'runner-2', claimToken: 'x' })).toMatchObject({ runId: 'queued' });
  });

  test('no affinity is claimable by anyone', () => {
    fx.insertRun({ runId: 'free', executionMode: 'headless', affinityRunnerId: null });
    expect(claimNext({ runnerId: 'runner-9' })).toMatchObject({ runId: 'free', runnerId: 'runner-9' });
  });

  test('parked runs that wait or are paused are skipped', () => {
    fx.insertRun({ runId: 'waiting', queueStatus: 'parked', runStatus: 'waiting' });
    fx.insertRun({ runId: 'paused', queueStatus: 'parked', runStatus: 'running', paused: 1 });
    expect(claimNext()).toBeUndefined();
    fx.insertRun({ runId: 'parked', queueStatus: 'parked', runStatus: 'running' });
    expect(claimNext()).toMatchObject({ runId: 'parked', status: 'starting' });
  });

  test('a pending interaction or a source change is skipped', () => {
    fx.insertRun({ runId: 'asking', queueStatus: 'running', runStatus: 'running' });
    fx.insertInteraction('asking', 'req-1', { attemptStatus: 'running' });
    fx.insertRun({ runId: 'changed', queueStatus: 'parked', runStatus: 'running', errorCode: 'workflowSourceChanged' });
    expect(claimNext()).toBeUndefined();
    fx.insertRun({ runId: 'other-error', queueStatus: 'parked', runStatus: 'running', errorCode: 'effectAmbiguous' });
    expect(claimNext()).toMatchObject({ runId: 'other-error', errorCode: null });
  });

  test('project-scoped unless the store is global', () => {
    fx.run(`INSERT INTO projects(project_id, canonical_path, created_at) VALUES ('project-other', '/other', 0)`);
    fx.insertRun({ runId: 'elsewhere', executionMode: 'headless', projectId: 'project-other' });
    fx.insertRun({ runId: 'unscoped', executionMode: 'headless', projectId: null, createdAt: T0 + 1 });
    expect(claimNext()).toBeUndefined();
    const global = fx.open({ global: true });
    try {
      const first = global.claimNextWorkflowRun({ runnerId: 'runner-1', claimToken: 'g', leaseMs: LEASE, now: iso(T0 + 1000) });
      expect(first).toMatchObject({ runId: 'elsewhere' });
      const second = global.claimNextWorkflowRun({
        runnerId: 'runner-1',
        claimToken: 'g',
        leaseMs: LEASE,
        now: iso(T0 + 1000),
        excludeRunIds: ['elsewhere'],
      });
      expect(second).toMatchObject({ runId: 'unscoped' });
    } finally {
      global.close();
    }
  });

  test('with sessionId the origin must match; without, only headless or started runs', () => {
    fx.insertRun({ runId: 'interactive', originSessionId: 's-1' });
    expect(claimNext()).toBeUndefined();
    expect(claimNext({ sessionId: 's-2' })).toBeUndefined();
    expect(claimNext({ sessionId: 's-1' })).toMatchObject({ runId: 'interactive', originSessionId: 's-1' });
  });

  test('a sessionId selects started runs of that session only', () => {
    fx.insertRun({ runId: 'started', originSessionId: 's-1', queueStatus: 'running', runStatus: 'running' });
    fx.insertRun({ runId: 'headless', executionMode: 'headless', originSessionId: 's-2', createdAt: T0 + 1 });
    expect(claimNext({ sessionId: 's-2' })).toMatchObject({ runId: 'headless', originSessionId: null });
    expect(claimNext({ sessionId: 's-3' })).toBeUndefined();
    expect(claimNext()).toMatchObject({ runId: 'started' });
  });

  test('excludeRunIds and the available_at, created_at order', () => {
    fx.insertRun({ runId: 'c', executionMode: 'headless', availableAt: T0 - 10, createdAt: T0 + 3 });
    fx.insertRun({ runId: 'b', executionMode: 'headless', availableAt: T0 - 10, createdAt: T0 + 2 });
    fx.insertRun({ runId: 'a', executionMode: 'headless', availableAt: T0, createdAt: T0 + 1 });
    expect(claimNext({ excludeRunIds: [] })).toMatchObject({ runId: 'b' });
    expect(claimNext({ runnerId: 'r2', excludeRunIds: ['b'] })).toMatchObject({ runId: 'c' });
    expect(claimNext({ runnerId: 'r3', excludeRunIds: ['b', 'c'] })).toMatchObject({ runId: 'a' });
    expect(claimNext({ runnerId: 'r4' })).toBeUndefined();
  });

  test('invalid timestamps throw before selecting', () => {
    expect(() => claimNext({ now: 'never' })).toThrow('Invalid timestamp');
  });
});

describe('renew, verify, authority', () => {
  beforeEach(() => {
    fx.insertRun({ runId: 'run-a' });
    claim('run-a', 'runner-1', 'token-1', T0);
  });

  test('renewal extends an unexpired exact claim and records summary/replay deltas', () => {
    const renew = (token: string, now: number) =>
      fx.store.renewWorkflowRunClaim({ runId: 'run-a', claimToken: token, leaseMs: 1000, now: iso(now) });
    expect(renew('wrong', T0 + 10)).toBe(false);
    expect(renew('token-1', T0 + 10)).toBe(true);
    expect(fx.lease('run-a')).toMatchObject({ heartbeat_at: T0 + 10, expires_at: T0 + 1010, generation: 1 });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, SUMMARY_REPLAY]);
    expect(renew('token-1', T0 + 1010)).toBe(false);
    expect(renew('token-1', T0 + 1009)).toBe(true);
    expect(fx.runEvents('run-a')).toHaveLength(1);
    expect(fx.store.renewWorkflowRunClaim({ runId: 'missing', claimToken: 'x', leaseMs: 1 })).toBe(false);
  });

  test('renewal of an ownerless run is false', () => {
    fx.store.parkWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: iso(T0) });
    expect(fx.store.renewWorkflowRunClaim({ runId: 'run-a', claimToken: 'token-1', leaseMs: 1, now: iso(T0) })).toBe(
      false,
    );
  });

  test('verification needs the exact token before expiry', () => {
    const verify = (token: string, now: number) =>
      fx.store.verifyWorkflowRunClaim({ runId: 'run-a', claimToken: token, now: iso(now) });
    expect(verify('token-1', T0 + LEASE - 1)).toBe(true);
    expect(verify('token-1', T0 + LEASE)).toBe(false);
    expect(verify('token-2', T0)).toBe(false);
    expect(fx.store.verifyWorkflowRunClaim({ runId: 'missing', claimToken: 'x' })).toBe(false);
    expect(() => fx.store.verifyWorkflowRunClaim({ runId: 'run-a', claimToken: 'x', now: 'bad' })).toThrow(
      'Invalid timestamp',
    );
  });

  test('authority ignores expiry and reports a fixed 30 s lease', () => {
    expect(fx.store.workflowRunAuthority('run-a', 'token-1')).toEqual({
      actor: { type: 'session', id: 'runner-1' },
      ownerType: 'session',
      ownerId: 'runner-1',
      token: 'token-1',
      generation: 1,
      leaseMs: 30_000,
    });
    expect(Object.keys(fx.store.workflowRunAuthority('run-a', 'token-1'))).toEqual([
      'actor', 'ownerType', 'ownerId', 'token', 'generation', 'leaseMs',
    ]);
    expect(fx.store.workflowRunAuthority('run-a', 'token-2')).toBeUndefined();
    expect(fx.store.workflowRunAuthority('missing', 'token-1')).toBeUndefined();
    claim('run-a', 'host-7', 'token-h', T0 + LEASE);
    expect(fx.store.workflowRunAuthority('run-a', 'token-h')).toMatchObject({
      actor: { type: 'host', id: 'host-7' },
      ownerType: 'host',
      generation: 2,
    });
  });

  test('markWorkflowRunRunning sets running once started, keeps the lease, records the holder', () => {
    const mark = (token: string, now: number) =>
      fx.store.markWorkflowRunRunning({ runId: 'run-a', claimToken: token, now: iso(now) });
    expect(mark('wrong', T0 + 1)).toBe(false);
    expect(mark('token-1', T0 + 1)).toBe(true);
    expect(mark('token-1', T0 + 2)).toBe(true);
    expect(fx.queue('run-a')).toMatchObject({ status: 'running', started_at: T0 + 1, updated_at: T0 + 2 });
    expect(fx.lease('run-a').owner_id).toBe('runner-1');
    const events = fx.runEvents('run-a');
    expect(events[1]).toEqual({
      revision: 3,
      type: 'run.queue_running',
      actorType: 'session',
      actorId: 'runner-1',
      generation: 1,
      payload: '{"status":"running"}',
      recordedAt: T0 + 1,
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, BUMP]);
    expect(mark('token-1', T0 + LEASE)).toBe(false);
  });
});

test('resource ids follow the reference', () => {
  expect(resourceIdFor('run', 'x')).toMatch(/^run-[0-9a-f]{40}$/);
});
