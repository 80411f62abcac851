// beginWorkflowRunInteractionTimeout (0.16.1), settleRunEffect and the legacy stubs.

import { BUMP, Fixture, T0, iso, resourceIdFor } from './runs-lifecycle-fixture';

const LEASE = 60_000;
const DEADLINE = T0 + 100;

let fx: Fixture;
beforeEach(() => {
  fx = new Fixture();
});
afterEach(() => {
  jest.useRealTimers();
  fx.dispose();
});

function thrown(operation: () => unknown): any {
  try {
    operation();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('beginWorkflowRunInteractionTimeout', () => {
  /** A parked waiting run whose pending request has a started model turn and a due deadline. */
  function seedExpired(runId = 'run-a', target = 'session-t'): void {
    fx.insertRun({ runId, queueStatus: 'parked', runStatus: 'waiting', originSessionId: target });
    fx.insertInteraction(runId, `${runId}-req`, { targetSessionId: target, deadlineAt: DEADLINE, turn: 'started' });
    fx.store.claimWorkflowRunForControl({
      runId,
      runnerId: 'host-1',
      claimToken: 'token-1',
      leaseMs: LEASE,
      now: iso(T0),
    });
  }

  const begin = (options: Record<string, unknown> = {}) =>
    fx.store.beginWorkflowRunInteractionTimeout({
      runId: 'run-a',
      targetSessionId: 'session-t',
      claimToken: 'token-1',
      now: iso(DEADLINE),
      ...options,
    });

  test('cancels the request, resumes the run and rejects validating submissions', () => {
    seedExpired();
    fx.insertSubmission('run-a-req', 'sub-1');
    fx.insertSubmission('run-a-req', 'sub-2', 'accepted');
    expect(begin()).toBe(true);
    expect(fx.get('SELECT status, revision, updated_at FROM interactive_requests')).toEqual({
      status: 'cancelled',
      revision: 2,
      updated_at: DEADLINE,
    });
    expect(fx.runRow('run-a')).toMatchObject({
      status: 'running',
      status_detail: 'finishing expired interaction deadline',
      finished_at: null,
      updated_at: DEADLINE,
    });
    expect(fx.queue('run-a')).toMatchObject({ status: 'starting', error_code: null, finished_at: null });
    const submissions = fx.all('SELECT submission_id, outcome, receipt_hash FROM interactive_submissions ORDER BY submission_id');
    expect(submissions.map((row) => row.outcome)).toEqual(['rejected', 'accepted']);
    expect(fx.blobText(submissions[0].receipt_hash)).toBe(
      '{"error":"Workflow node model-turn deadline expired","status":"rejected"}',
    );
    expect(submissions[1].receipt_hash).toBeNull();
    expect(fx.runEvents('run-a')[1]).toEqual({
      revision: 3,
      type: 'run.interaction_timeout_started',
      actorType: 'host',
      actorId: 'host-1',
      generation: 1,
      payload: '{"attemptId":"attempt-run-a-req","requestId":"run-a-req"}',
      recordedAt: DEADLINE,
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, ['summary', 'replay', 'conversation']]);
    // The claim is kept.
    expect(fx.lease('run-a').owner_id).toBe('host-1');
    expect(begin()).toBe(false);
  });

  test('needs the live claim and a due deadline', () => {
    seedExpired();
    expect(begin({ claimToken: 'wrong' })).toBe(false);
    expect(begin({ now: iso(DEADLINE - 1) })).toBe(false);
    expect(begin({ now: iso(T0 + LEASE) })).toBe(false);
    expect(begin({ runId: 'missing' })).toBe(false);
    expect(() => begin({ now: 'soon' })).toThrow('Invalid timestamp');
  });

  test('only requests aimed at the target session', () => {
    seedExpired();
    expect(begin({ targetSessionId: 'session-other' })).toBe(false);
    expect(begin()).toBe(true);
  });

  test('a paused run, a turn that ended, or a non-step message does not time out', () => {
    seedExpired();
    fx.run("UPDATE runs SET paused = 1 WHERE run_id = 'run-a'");
    expect(begin()).toBe(false);
    fx.run("UPDATE runs SET paused = 0 WHERE run_id = 'run-a'");
    fx.run(`UPDATE workflow_turns SET state = 'ended', stop_reason = 'completed', ended_at = ?`, T0);
    expect(begin()).toBe(false);
    fx.run(`UPDATE workflow_turns SET state = 'started', stop_reason = NULL, ended_at = NULL`);
    fx.run("UPDATE workflow_messages SET kind = 'decision'");
    expect(begin()).toBe(false);
    fx.run("UPDATE workflow_messages SET kind = 'step'");
    expect(begin()).toBe(true);
  });

  test('no deadline or no turn at all is not expired', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'waiting', originSessionId: 'session-t' });
    fx.insertInteraction('run-a', 'req-no-turn', { targetSessionId: 'session-t', deadlineAt: DEADLINE });
    fx.insertInteraction('run-a', 'req-no-deadline', {
      targetSessionId: 'session-t',
      attemptStatus: 'interrupted',
      turn: 'started',
    });
    fx.store.claimWorkflowRunForControl({ runId: 'run-a', runnerId: 'host-1', claimToken: 'token-1', leaseMs: LEASE, now: iso(T0) });
    expect(begin()).toBe(false);
  });

  test('the earliest deadline wins, then the request id', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'waiting', originSessionId: 'session-t' });
    fx.insertInteraction('run-a', 'req-b', { targetSessionId: 'session-t', deadlineAt: DEADLINE - 5, turn: 'started' });
    fx.insertInteraction('run-a', 'req-a', {
      targetSessionId: 'session-t',
      deadlineAt: DEADLINE,
      turn: 'started',
      attemptStatus: 'interrupted',
    });
    fx.insertInteraction('run-a', 'req-c', {
      targetSessionId: 'session-t',
      deadlineAt: DEADLINE - 5,
      turn: 'started',
      attemptStatus: 'interrupted',
    });
    fx.store.claimWorkflowRunForControl({ runId: 'run-a', runnerId: 'host-1', claimToken: 'token-1', leaseMs: LEASE, now: iso(T0) });
    expect(begin()).toBe(true);
    expect(fx.all("SELECT request_id FROM interactive_requests WHERE status = 'cancelled'")).toEqual([
      { request_id: 'req-b' },
    ]);
  });

  test('a run that is no longer waiting is inconsistent and rolls back', () => {
    seedExpired();
    fx.run("UPDATE runs SET status = 'running', finished_at = NULL WHERE run_id = 'run-a'");
    expect(thrown(() => begin()).message).toBe('Workflow run run-a changed during interaction timeout');
    expect(fx.get('SELECT status FROM interactive_requests')).toEqual({ status: 'pending' });
  });

  test("another active run of the target's origin session hits the unique index", () => {
    seedExpired('run-a', 'session-t');
    fx.insertRun({ runId: 'run-b', originSessionId: 'session-t' });
    const error = thrown(() => begin());
    expect([error.constructor.name, error.code, error.message]).toEqual([
      'SqliteError',
      'SQLITE_CONSTRAINT_UNIQUE',
      'UNIQUE constraint failed: run_queue.origin_session_id',
    ]);
    expect(fx.get('SELECT status FROM interactive_requests')).toEqual({ status: 'pending' });
  });

  test('read-only stores cannot begin a timeout', () => {
    seedExpired();
    const readOnly = fx.open({ readOnly: true });
    try {
      expect(() =>
        readOnly.beginWorkflowRunInteractionTimeout({ runId: 'run-a', targetSessionId: 'session-t', claimToken: 'token-1' }),
      ).toThrow('Cannot mutate a read-only Pi Workflows database');
    } finally {
      readOnly.close();
    }
  });
});

describe('settleRunEffect', () => {
  test('applies each pending effect of the type in its own transaction at Date.now()', () => {
    fx.insertRun({ runId: 'run-a' });
    const first = fx.insertRunEffect('run-a', 'eff-1', { type: 'run.park_queue' });
    const second = fx.insertRunEffect('run-a', 'eff-2', { type: 'run.park_queue' });
    const other = fx.insertRunEffect('run-a', 'eff-3', { type: 'run.settle_queue' });
    const applying = fx.insertRunEffect('run-a', 'eff-4', { type: 'run.park_queue', status: 'applying' });
    jest.useFakeTimers({ now: T0 + 500 });
    expect(fx.store.settleRunEffect('run-a', 'run.park_queue')).toBeUndefined();
    jest.useRealTimers();
    expect(fx.all('SELECT effect_id, status, updated_at, settled_at FROM effects ORDER BY effect_id')).toEqual([
      { effect_id: 'eff-1', status: 'applied', updated_at: T0 + 500, settled_at: T0 + 500 },
      { effect_id: 'eff-2', status: 'applied', updated_at: T0 + 500, settled_at: T0 + 500 },
      { effect_id: 'eff-3', status: 'pending', updated_at: T0, settled_at: null },
      { effect_id: 'eff-4', status: 'applying', updated_at: T0, settled_at: null },
    ]);
    for (const resourceId of [first, second]) {
      expect(fx.revision(resourceId)).toBe(2);
      expect(fx.events(resourceId)).toEqual([
        {
          revision: 2,
          type: 'effect.applied',
          actorType: 'system',
          actorId: null,
          generation: null,
          payload: '{"effectType":"run.park_queue","runId":"run-a"}',
          recordedAt: T0 + 500,
        },
      ]);
    }
    expect(fx.events(other)).toEqual([]);
    expect(fx.events(applying)).toEqual([]);
    // Effect resources are not runs: no viewer deltas.
    expect(fx.viewerDeltas('run-a')).toEqual([]);
    expect(fx.store.settleRunEffect('run-a', 'run.park_queue')).toBeUndefined();
    expect(fx.events(first)).toHaveLength(1);
  });

  test('nothing pending needs no write, even read-only; something pending does', () => {
    fx.insertRun({ runId: 'run-a' });
    const readOnly = fx.open({ readOnly: true });
    try {
      expect(readOnly.settleRunEffect('run-a', 'run.settle_queue')).toBeUndefined();
    } finally {
      readOnly.close();
    }
    fx.insertRunEffect('run-a', 'eff-1', { type: 'run.settle_queue' });
    const again = fx.open({ readOnly: true });
    try {
      expect(() => again.settleRunEffect('run-a', 'run.settle_queue')).toThrow(
        'Cannot mutate a read-only Pi Workflows database',
      );
    } finally {
      again.close();
    }
    expect(fx.store.settleRunEffect('missing', 'run.settle_queue')).toBeUndefined();
  });
});

describe('legacy stubs', () => {
  test('always throw, whatever the arguments, even once closed', () => {
    expect(() => fx.store.repairCanonicalWorkflowSourceRun()).toThrow(
      new Error('Legacy workflow source repair is not available after the SQLite cutover'),
    );
    expect(() => fx.store.repairCanonicalWorkflowSourceRun({ runId: 'x' })).toThrow(
      'Legacy workflow source repair is not available after the SQLite cutover',
    );
    expect(() => fx.store.claimLegacyWorkflowSourceRun()).toThrow(
      'Legacy workflow source claims are not available after the SQLite cutover',
    );
    const closed = fx.open();
    closed.close();
    const error = thrown(() => closed.claimLegacyWorkflowSourceRun());
    expect([error.constructor.name, error.message]).toEqual([
      'Error',
      'Legacy workflow source claims are not available after the SQLite cutover',
    ]);
    expect(resourceIdFor('run', 'x')).toMatch(/^run-/);
  });
});
