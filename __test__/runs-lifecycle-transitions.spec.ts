// Run state transitions through the public API: park/complete, pause/resume, the recovery parks,
// fail/cancel (with dependents), stale cancellation, deletion and the origin-session binding.

import { BUMP, Fixture, SUMMARY_REPLAY, T0, iso, resourceIdFor, sha256 } from './runs-lifecycle-fixture';

const LEASE = 60_000;

let fx: Fixture;
beforeEach(() => {
  fx = new Fixture();
});
afterEach(() => {
  jest.useRealTimers();
  fx.dispose();
});

function claim(runId: string, runnerId = 'runner-1', token = 'token-1', now = T0) {
  return fx.store.claimWorkflowRun({ runId, runnerId, claimToken: token, leaseMs: LEASE, now: iso(now) });
}

function thrown(operation: () => unknown): any {
  try {
    operation();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const RELEASED = {
  owner_type: null,
  owner_id: null,
  token_hash: null,
  acquired_at: null,
  heartbeat_at: null,
  expires_at: null,
};

describe('parkWorkflowRun and completeWorkflowRun', () => {
  beforeEach(() => {
    fx.insertRun({ runId: 'run-a' });
    claim('run-a');
  });

  test('parking releases the claim and records run.queue_parked', () => {
    expect(fx.store.parkWorkflowRun({ runId: 'run-a', claimToken: 'wrong', now: iso(T0 + 1) })).toBe(false);
    expect(fx.store.parkWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: iso(T0 + 1) })).toBe(true);
    expect(fx.queue('run-a')).toMatchObject({ status: 'parked', updated_at: T0 + 1, finished_at: null });
    expect(fx.lease('run-a')).toMatchObject({ generation: 1, ...RELEASED });
    expect(fx.runEvents('run-a')[1]).toEqual({
      revision: 3,
      type: 'run.queue_parked',
      actorType: 'session',
      actorId: 'runner-1',
      generation: 1,
      payload: '{"status":"parked"}',
      recordedAt: T0 + 1,
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, SUMMARY_REPLAY]);
    expect(fx.store.parkWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: iso(T0 + 2) })).toBe(false);
  });

  test('completion sets done with finished_at', () => {
    expect(fx.store.completeWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: iso(T0 + 4) })).toBe(true);
    expect(fx.queue('run-a')).toMatchObject({ status: 'done', finished_at: T0 + 4 });
    expect(fx.runEvents('run-a')[1]).toMatchObject({ type: 'run.queue_done', payload: '{"status":"done"}' });
  });

  test('an expired claim cannot park; bad timestamps throw', () => {
    expect(fx.store.parkWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: iso(T0 + LEASE) })).toBe(false);
    expect(fx.store.completeWorkflowRun({ runId: 'missing', claimToken: 'token-1' })).toBe(false);
    expect(() => fx.store.completeWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: 'x' })).toThrow(
      'Invalid timestamp',
    );
  });
});

describe('pauseParkedWorkflowRun and resumePausedInteraction', () => {
  const pause = (now = T0 + 10) => fx.store.pauseParkedWorkflowRun({ runId: 'run-a', now: iso(now) });
  const resume = (now = T0 + 20) => fx.store.resumePausedInteraction({ runId: 'run-a', now: iso(now) });

  test('pauses a parked ownerless waiting run with a pending interaction, then resumes it', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'waiting' });
    expect(pause()).toBe(false);
    fx.insertInteraction('run-a', 'req-1');
    expect(resume()).toBe(false);
    expect(pause()).toBe(true);
    expect(fx.runRow('run-a')).toMatchObject({ paused: 1, status_detail: 'paused', updated_at: T0 + 10 });
    expect(pause(T0 + 11)).toBe(true);
    expect(fx.runEvents('run-a')).toEqual([
      {
        revision: 2,
        type: 'run.paused',
        actorType: 'control',
        actorId: null,
        generation: null,
        payload: '{"status":"parked"}',
        recordedAt: T0 + 10,
      },
    ]);
    expect(resume()).toBe(true);
    expect(fx.runRow('run-a')).toMatchObject({
      paused: 0,
      status_detail: 'waiting for origin-session input',
      updated_at: T0 + 20,
    });
    expect(fx.runEvents('run-a')[1]).toMatchObject({
      type: 'run.resumed',
      actorType: 'control',
      payload: '{"status":"waiting"}',
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, SUMMARY_REPLAY, BUMP, SUMMARY_REPLAY]);
    expect(resume()).toBe(false);
  });

  test('a live lease, another queue status or a terminal run state blocks pausing', () => {
    fx.insertRun({
      runId: 'run-a',
      queueStatus: 'parked',
      runStatus: 'waiting',
      lease: { ownerId: 'host-1', token: 't', expiresAt: T0 + 100 },
    });
    fx.insertInteraction('run-a', 'req-1');
    expect(pause(T0 + 99)).toBe(false);
    expect(pause(T0 + 100)).toBe(true);
    fx.insertRun({ runId: 'run-b', queueStatus: 'running', runStatus: 'running' });
    fx.insertInteraction('run-b', 'req-2', { attemptStatus: 'running' });
    expect(fx.store.pauseParkedWorkflowRun({ runId: 'run-b', now: iso(T0) })).toBe(false);
    fx.insertRun({ runId: 'run-c', queueStatus: 'parked', runStatus: 'queued' });
    fx.insertInteraction('run-c', 'req-3', { attemptStatus: 'pending' });
    expect(fx.store.pauseParkedWorkflowRun({ runId: 'run-c', now: iso(T0) })).toBe(false);
    expect(fx.store.pauseParkedWorkflowRun({ runId: 'missing' })).toBe(false);
  });

  test('resuming needs a waiting run and no live lease', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'running', paused: 1 });
    fx.insertInteraction('run-a', 'req-1', { attemptStatus: 'running' });
    expect(resume()).toBe(false);
    fx.insertRun({
      runId: 'run-b',
      queueStatus: 'parked',
      runStatus: 'waiting',
      paused: 1,
      lease: { ownerId: 'host-1', token: 't', expiresAt: T0 + 100 },
    });
    fx.insertInteraction('run-b', 'req-2');
    expect(fx.store.resumePausedInteraction({ runId: 'run-b', now: iso(T0 + 99) })).toBe(false);
    expect(fx.store.resumePausedInteraction({ runId: 'run-b', now: iso(T0 + 100) })).toBe(true);
    expect(() => fx.store.resumePausedInteraction({ runId: 'run-b', now: 'bad' })).toThrow('Invalid timestamp');
  });
});

describe('parkWorkflowRunForSourceChange', () => {
  beforeEach(() => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'running', runStatus: 'running' });
    claim('run-a', 'host-1', 'token-1');
  });

  test('parks with workflowSourceChanged, the detail as error, and releases the claim', () => {
    const park = (token: string, detail: string) =>
      fx.store.parkWorkflowRunForSourceChange({ runId: 'run-a', claimToken: token, detail, now: iso(T0 + 7) });
    expect(park('wrong', 'x')).toBe(false);
    expect(park('token-1', 'source moved')).toBe(true);
    const queue = fx.queue('run-a');
    expect(queue).toMatchObject({
      status: 'parked',
      error_code: 'workflowSourceChanged',
      available_at: T0 + 7,
      updated_at: T0 + 7,
      finished_at: null,
    });
    expect(fx.blobText(queue.error_hash)).toBe('source moved');
    expect(fx.runRow('run-a')).toMatchObject({ status: 'running', status_detail: 'source moved' });
    expect(fx.lease('run-a')).toMatchObject(RELEASED);
    expect(fx.runEvents('run-a')[1]).toEqual({
      revision: 3,
      type: 'run.source_changed',
      actorType: 'host',
      actorId: 'host-1',
      generation: 1,
      payload: '{"code":"workflowSourceChanged","status":"parked"}',
      recordedAt: T0 + 7,
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, SUMMARY_REPLAY]);
    // The parked run is not picked up again until it is claimed explicitly.
    expect(
      fx.store.claimNextWorkflowRun({ runnerId: 'host-1', claimToken: 'n', leaseMs: 1, now: iso(T0 + 8) }),
    ).toBeUndefined();
  });

  test('the detail is cut to 8,192 UTF-16 code units', () => {
    const detail = `${'a'.repeat(8_191)}😀tail`;
    expect(
      fx.store.parkWorkflowRunForSourceChange({ runId: 'run-a', claimToken: 'token-1', detail, now: iso(T0 + 1) }),
    ).toBe(true);
    const expected = `${'a'.repeat(8_191)}\uFFFD`;
    expect(fx.runRow('run-a').status_detail).toBe(expected);
    expect(fx.blobText(fx.queue('run-a').error_hash)).toBe(expected);
  });

  test('a missing detail fails like String.prototype.slice on undefined, after the claim check', () => {
    expect(fx.store.parkWorkflowRunForSourceChange({ runId: 'run-a', claimToken: 'wrong', now: iso(T0) })).toBe(false);
    const error = thrown(() => fx.store.parkWorkflowRunForSourceChange({ runId: 'run-a', claimToken: 'token-1', now: iso(T0) }));
    expect([error.constructor.name, error.message]).toEqual(['TypeError', "Cannot read properties of undefined (reading 'slice')"]);
    expect(fx.lease('run-a').owner_id).toBe('host-1');
  });

  test('a terminal durable run state is inconsistent and rolls back', () => {
    fx.run(`UPDATE runs SET status = 'completed', finished_at = ? WHERE run_id = 'run-a'`, T0);
    const error = thrown(() =>
      fx.store.parkWorkflowRunForSourceChange({ runId: 'run-a', claimToken: 'token-1', detail: 'd', now: iso(T0 + 1) }),
    );
    expect(error.message).toBe('Workflow run run-a has inconsistent source-change state');
    expect(fx.lease('run-a').owner_id).toBe('host-1');
  });
});

describe('parkWorkflowRunForAmbiguousEffect', () => {
  test('parks a running run as waiting with effectAmbiguous; its active attempts wait', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'running', runStatus: 'running' });
    fx.insertAttempt('run-a', 'att-1', { status: 'running' });
    fx.insertAttempt('run-a', 'att-0', { status: 'completed' });
    claim('run-a');
    expect(
      fx.store.parkWorkflowRunForAmbiguousEffect({ runId: 'run-a', claimToken: 'token-1', now: iso(T0 + 3) }),
    ).toBe(true);
    const queue = fx.queue('run-a');
    expect(queue).toMatchObject({ status: 'parked', error_code: 'effectAmbiguous', updated_at: T0 + 3 });
    expect(fx.blobText(queue.error_hash)).toBe('effect outcome is ambiguous; explicit recovery is required');
    expect(fx.runRow('run-a')).toMatchObject({
      status: 'waiting',
      status_detail: 'effect outcome is ambiguous; explicit recovery is required',
      finished_at: T0 + 3,
    });
    expect(fx.all('SELECT attempt_id, status, updated_at FROM node_attempts ORDER BY attempt_id')).toEqual([
      { attempt_id: 'att-0', status: 'completed', updated_at: T0 },
      { attempt_id: 'att-1', status: 'waiting', updated_at: T0 + 3 },
    ]);
    expect(fx.lease('run-a')).toMatchObject(RELEASED);
    expect(fx.runEvents('run-a')[1]).toMatchObject({
      type: 'run.effect_ambiguous',
      actorType: 'session',
      actorId: 'runner-1',
      generation: 1,
      payload: '{"code":"effectAmbiguous","status":"waiting"}',
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, SUMMARY_REPLAY]);
  });

  test('a run that is not running is inconsistent; a stale claim is false', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'queued', runStatus: 'queued' });
    claim('run-a');
    expect(
      fx.store.parkWorkflowRunForAmbiguousEffect({ runId: 'run-a', claimToken: 'other', now: iso(T0) }),
    ).toBe(false);
    expect(
      thrown(() => fx.store.parkWorkflowRunForAmbiguousEffect({ runId: 'run-a', claimToken: 'token-1', now: iso(T0) }))
        .message,
    ).toBe('Workflow run run-a has inconsistent ambiguous-effect state');
  });
});

describe('failWorkflowRun', () => {
  test('with the live claim: failed, error, claim released, holder event', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'running', runStatus: 'running' });
    claim('run-a');
    const fail = (token: string | undefined, now: number) =>
      fx.store.failWorkflowRun({
        runId: 'run-a',
        ...(token === undefined ? {} : { claimToken: token }),
        errorCode: 'boom',
        errorMessage: 'It broke',
        now: iso(now),
      });
    expect(fail(undefined, T0 + 1)).toBe(false);
    expect(fail('wrong', T0 + 1)).toBe(false);
    expect(fail('token-1', T0 + 2)).toBe(true);
    const queue = fx.queue('run-a');
    expect(queue).toMatchObject({ status: 'failed', error_code: 'boom', finished_at: T0 + 2 });
    expect(fx.blobText(queue.error_hash)).toBe('It broke');
    const run = fx.runRow('run-a');
    expect(run).toMatchObject({ status: 'failed', paused: 0, status_detail: null, finished_at: T0 + 2 });
    expect(run.error_hash.equals(queue.error_hash)).toBe(true);
    expect(fx.lease('run-a')).toMatchObject(RELEASED);
    expect(fx.runEvents('run-a')[1]).toEqual({
      revision: 3,
      type: 'run.queue_failed',
      actorType: 'session',
      actorId: 'runner-1',
      generation: 1,
      payload: '{"code":"boom","error":"It broke","status":"failed"}',
      recordedAt: T0 + 2,
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, SUMMARY_REPLAY]);
    expect(fail('token-1', T0 + 3)).toBe(false);
  });

  test('without a token only an ownerless queued or starting run fails, as system', () => {
    fx.insertRun({ runId: 'run-a' });
    expect(
      fx.store.failWorkflowRun({ runId: 'run-a', errorCode: 'c', errorMessage: 'm', now: iso(T0 + 1) }),
    ).toBe(true);
    expect(fx.runEvents('run-a')[0]).toMatchObject({ actorType: 'system', actorId: null, generation: null });
    fx.insertRun({ runId: 'run-b', queueStatus: 'parked', runStatus: 'waiting' });
    expect(fx.store.failWorkflowRun({ runId: 'run-b', errorCode: 'c', errorMessage: 'm' })).toBe(false);
    fx.insertRun({ runId: 'run-c', queueStatus: 'starting', runStatus: 'running', lease: { ownerId: 'r', token: 't', expiresAt: T0 - 1 } });
    expect(fx.store.failWorkflowRun({ runId: 'run-c', errorCode: 'c', errorMessage: 'm' })).toBe(false);
  });
});

describe('cancellation', () => {
  /** A running run with every kind of dependent a cancellation settles. */
  function seedDependents(runId: string): Record<string, string> {
    fx.insertAttempt(runId, `${runId}-att-done`, { status: 'completed' });
    fx.insertInteraction(runId, `${runId}-req`, { attemptStatus: 'interrupted' });
    fx.insertAttempt(runId, `${runId}-att-live`, { status: 'running' });
    fx.insertSubmission(`${runId}-req`, `${runId}-sub-validating`);
    fx.insertSubmission(`${runId}-req`, `${runId}-sub-accepted`, 'accepted');
    fx.insertDecision(runId, `${runId}-dec-open`, `${runId}-att-live`);
    fx.insertDecision(runId, `${runId}-dec-done`, `${runId}-att-done`, true);
    return {
      pending: fx.insertRunEffect(runId, `${runId}-eff-b-pending`, { status: 'pending' }),
      applying: fx.insertRunEffect(runId, `${runId}-eff-a-applying`, { status: 'applying', attemptCount: 2 }),
      applied: fx.insertRunEffect(runId, `${runId}-eff-c-applied`, { status: 'applied' }),
      controllerScoped: fx.insertRunEffect(runId, `${runId}-eff-d-controller`, { ownerScope: 'controller' }),
    };
  }

  function expectDependentsCancelled(runId: string, actorId: string, now: number): void {
    const errorHash = fx.runRow(runId).error_hash;
    expect(fx.blobText(errorHash)).toBe('Workflow run cancelled');
    expect(
      fx.all('SELECT attempt_id, status, finished_at, error_hash FROM node_attempts WHERE run_id = ? ORDER BY attempt_id', runId),
    ).toEqual([
      { attempt_id: `attempt-${runId}-req`, status: 'cancelled', finished_at: now, error_hash: errorHash },
      { attempt_id: `${runId}-att-done`, status: 'completed', finished_at: null, error_hash: null },
      { attempt_id: `${runId}-att-live`, status: 'cancelled', finished_at: now, error_hash: errorHash },
    ]);
    expect(
      fx.all(
        `SELECT effect_id, status, settled_at, next_attempt_at FROM effects
         WHERE source_resource_id = ? ORDER BY effect_id`,
        resourceIdFor('run', runId),
      ),
    ).toEqual([
      { effect_id: `${runId}-eff-a-applying`, status: 'ambiguous', settled_at: now, next_attempt_at: null },
      { effect_id: `${runId}-eff-b-pending`, status: 'cancelled', settled_at: now, next_attempt_at: null },
      { effect_id: `${runId}-eff-c-applied`, status: 'applied', settled_at: null, next_attempt_at: T0 },
      { effect_id: `${runId}-eff-d-controller`, status: 'pending', settled_at: null, next_attempt_at: T0 },
    ]);
    expect(
      fx.all(
        'SELECT attempt_number, finished_at, outcome FROM effect_attempts WHERE effect_id = ? ORDER BY attempt_number',
        `${runId}-eff-a-applying`,
      ),
    ).toEqual([
      { attempt_number: 1, finished_at: T0, outcome: 'rejected' },
      { attempt_number: 2, finished_at: now, outcome: 'interrupted' },
    ]);
    for (const [effect, type] of [
      ['eff-a-applying', 'effect.ambiguous'],
      ['eff-b-pending', 'effect.cancelled'],
    ]) {
      expect(fx.events(resourceIdFor('effect', `${runId}-${effect}`))).toEqual([
        {
          revision: 2,
          type,
          actorType: 'control',
          actorId,
          generation: null,
          payload: JSON.stringify({ reason: 'workflowCancelled', runId }),
          recordedAt: now,
        },
      ]);
    }
    expect(
      fx.all('SELECT decision_id, outcome, provenance, reason, actor_id, resolved_at FROM human_decision_resolutions ORDER BY rowid'),
    ).toEqual([
      { decision_id: `${runId}-dec-done`, outcome: 'accepted', provenance: 'human', reason: null, actor_id: 'alice', resolved_at: T0 },
      {
        decision_id: `${runId}-dec-open`,
        outcome: 'cancelled',
        provenance: 'explicit_cancel',
        reason: 'Workflow run cancelled',
        actor_id: actorId,
        resolved_at: now,
      },
    ]);
    const submissions = fx.all('SELECT submission_id, outcome, receipt_hash FROM interactive_submissions ORDER BY submission_id');
    expect(submissions.map((row) => [row.submission_id, row.outcome])).toEqual([
      [`${runId}-sub-accepted`, 'accepted'],
      [`${runId}-sub-validating`, 'rejected'],
    ]);
    expect(fx.blobText(submissions[1].receipt_hash)).toBe('{"error":"Workflow run cancelled","status":"rejected"}');
    expect(fx.get('SELECT status, revision, updated_at FROM interactive_requests')).toEqual({
      status: 'cancelled',
      revision: 2,
      updated_at: now,
    });
  }

  test('cancelWorkflowRun with the claim cancels the run and all its dependents', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'running', runStatus: 'running', paused: 1 });
    seedDependents('run-a');
    fx.store.claimWorkflowRunForControl({ runId: 'run-a', runnerId: 'host-1', claimToken: 'token-1', leaseMs: LEASE, now: iso(T0) });
    expect(fx.store.cancelWorkflowRun({ runId: 'run-a', claimToken: 'token-1', now: iso(T0 + 5) })).toBe(true);
    expect(fx.queue('run-a')).toMatchObject({ status: 'cancelled', error_code: 'cancelled', finished_at: T0 + 5 });
    expect(fx.runRow('run-a')).toMatchObject({ status: 'cancelled', paused: 0, finished_at: T0 + 5 });
    expect(fx.lease('run-a')).toMatchObject(RELEASED);
    expectDependentsCancelled('run-a', 'host-1', T0 + 5);
    expect(fx.runEvents('run-a')[1]).toEqual({
      revision: 3,
      type: 'run.queue_cancelled',
      actorType: 'host',
      actorId: 'host-1',
      generation: 1,
      payload: '{"code":"cancelled","error":"Workflow run cancelled","status":"cancelled"}',
      recordedAt: T0 + 5,
    });
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, BUMP, SUMMARY_REPLAY]);
  });

  test('a wrong token is false without falling back', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'running', runStatus: 'running' });
    expect(fx.store.cancelWorkflowRun({ runId: 'run-a', claimToken: 'nope', now: iso(T0) })).toBe(false);
    expect(fx.queue('run-a').status).toBe('running');
  });

  test('an unclaimed queued run is cancelled by the plain path as workflow-control', () => {
    fx.insertRun({ runId: 'run-a' });
    seedDependents('run-a');
    expect(fx.store.cancelWorkflowRun({ runId: 'run-a', now: iso(T0 + 9) })).toBe(true);
    expectDependentsCancelled('run-a', 'workflow-control', T0 + 9);
    expect(fx.runEvents('run-a')).toEqual([
      expect.objectContaining({ type: 'run.queue_cancelled', actorType: 'system', actorId: null, generation: null }),
    ]);
    expect(fx.store.cancelWorkflowRun({ runId: 'run-a', now: iso(T0 + 10) })).toBe(false);
  });

  test('without a token a running run with an expired claim falls back to the stale cancellation', () => {
    fx.insertRun({
      runId: 'run-a',
      queueStatus: 'running',
      runStatus: 'running',
      lease: { ownerId: 'runner-1', token: 't', expiresAt: T0 + 10, generation: 4 },
    });
    expect(fx.store.cancelWorkflowRun({ runId: 'run-a', now: iso(T0 + 9) })).toBe(false);
    expect(fx.store.cancelWorkflowRun({ runId: 'run-a', now: iso(T0 + 10) })).toBe(true);
    expect(fx.lease('run-a')).toMatchObject({ generation: 5, ...RELEASED });
    expect(fx.runEvents('run-a')).toEqual([
      {
        revision: 2,
        type: 'run.queue_cancelled',
        actorType: 'control',
        actorId: 'workflow-control',
        generation: 5,
        payload: '{"code":"cancelled","staleControl":true,"status":"cancelled"}',
        recordedAt: T0 + 10,
      },
    ]);
  });
});

describe('cancelStaleWorkflowRun', () => {
  test('takes a system lease, cancels everything, releases, records the control event', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'waiting' });
    fx.insertAttempt('run-a', 'att-1', { status: 'waiting' });
    expect(
      fx.store.cancelStaleWorkflowRun({ runId: 'run-a', controlId: 'ctl-7', claimToken: 'ct', now: iso(T0 + 2) }),
    ).toBe(true);
    expect(fx.queue('run-a')).toMatchObject({ status: 'cancelled', error_code: 'cancelled', finished_at: T0 + 2 });
    expect(fx.runRow('run-a')).toMatchObject({ status: 'cancelled', status_detail: null, finished_at: T0 + 2 });
    expect(fx.lease('run-a')).toMatchObject({ generation: 1, ...RELEASED });
    expect(fx.get('SELECT status FROM node_attempts')).toEqual({ status: 'cancelled' });
    expect(fx.runEvents('run-a')).toEqual([
      {
        revision: 2,
        type: 'run.queue_cancelled',
        actorType: 'control',
        actorId: 'ctl-7',
        generation: 1,
        payload: '{"code":"cancelled","staleControl":true,"status":"cancelled"}',
        recordedAt: T0 + 2,
      },
    ]);
    expect(fx.viewerDeltas('run-a')).toEqual([BUMP, SUMMARY_REPLAY]);
    expect(fx.store.cancelStaleWorkflowRun({ runId: 'run-a' })).toBe(false);
  });

  test('a live lease, a terminal queue or an unknown run is false', () => {
    fx.insertRun({
      runId: 'run-a',
      queueStatus: 'running',
      runStatus: 'running',
      lease: { ownerId: 'runner-1', token: 't', expiresAt: T0 + 10 },
    });
    expect(fx.store.cancelStaleWorkflowRun({ runId: 'run-a', now: iso(T0 + 9) })).toBe(false);
    fx.insertRun({ runId: 'run-b', queueStatus: 'done', runStatus: 'completed' });
    expect(fx.store.cancelStaleWorkflowRun({ runId: 'run-b', now: iso(T0) })).toBe(false);
    expect(fx.store.cancelStaleWorkflowRun({ runId: 'missing', now: iso(T0) })).toBe(false);
  });

  test('a terminal durable state with a live queue is inconsistent and rolls back', () => {
    fx.insertRun({ runId: 'run-a', queueStatus: 'parked', runStatus: 'completed' });
    expect(thrown(() => fx.store.cancelStaleWorkflowRun({ runId: 'run-a', now: iso(T0) })).message).toBe(
      'Workflow run run-a has inconsistent durable state',
    );
    expect(fx.queue('run-a').status).toBe('parked');
    expect(fx.lease('run-a').generation).toBe(0);
    expect(thrown(() => fx.store.cancelWorkflowRun({ runId: 'run-a', now: iso(T0) })).message).toBe(
      'Workflow run run-a has inconsistent durable state',
    );
  });
});

describe('deleteWorkflowRun', () => {
  test("needs a live exact claim at Date.now(); the resource's cascade removes the run", () => {
    fx.insertRun({ runId: 'run-a' });
    claim('run-a', 'runner-1', 'token-1', T0);
    jest.useFakeTimers({ now: T0 + LEASE });
    expect(fx.store.deleteWorkflowRun({ runId: 'run-a', claimToken: 'token-1' })).toBe(false);
    jest.setSystemTime(T0 + LEASE - 1);
    expect(fx.store.deleteWorkflowRun({ runId: 'run-a', claimToken: 'other' })).toBe(false);
    expect(fx.store.deleteWorkflowRun({ runId: 'missing', claimToken: 'token-1' })).toBe(false);
    // The run's events do not cascade: the reference's DELETE fails on them.
    const error = thrown(() => fx.store.deleteWorkflowRun({ runId: 'run-a', claimToken: 'token-1' }));
    expect([error.constructor.name, error.code, error.message]).toEqual([
      'SqliteError',
      'SQLITE_CONSTRAINT_FOREIGNKEY',
      'FOREIGN KEY constraint failed',
    ]);
    jest.useRealTimers();
    expect(fx.queue('run-a').status).toBe('starting');
    fx.run('DELETE FROM events WHERE resource_id = ?', resourceIdFor('run', 'run-a'));
    jest.useFakeTimers({ now: T0 + LEASE - 1 });
    expect(fx.store.deleteWorkflowRun({ runId: 'run-a', claimToken: 'token-1' })).toBe(true);
    jest.useRealTimers();
    expect(fx.get("SELECT COUNT(*) AS n FROM runs WHERE run_id = 'run-a'")).toEqual({ n: 0 });
    expect(fx.get('SELECT COUNT(*) AS n FROM run_queue')).toEqual({ n: 0 });
    expect(fx.get('SELECT COUNT(*) AS n FROM viewer_runs')).toEqual({ n: 0 });
    expect(fx.get('SELECT COUNT(*) AS n FROM resources')).toEqual({ n: 0 });
    expect(fx.store.deleteWorkflowRun({ runId: 'run-a', claimToken: 'token-1' })).toBe(false);
  });
});

describe('setWorkflowRunOriginSession', () => {
  test('upserts the binding as interactive with Date.now() and keeps the existing mode', () => {
    fx.insertRun({ runId: 'run-a', executionMode: 'headless' });
    jest.useFakeTimers({ now: T0 + 77 });
    expect(fx.store.setWorkflowRunOriginSession('run-a', 'session-new')).toBe(true);
    jest.useRealTimers();
    expect(fx.get("SELECT * FROM run_bindings WHERE run_id = 'run-a'")).toEqual({
      run_id: 'run-a',
      origin_session_id: 'session-new',
      execution_mode: 'headless',
      created_at: T0,
    });
    fx.run("DELETE FROM run_bindings WHERE run_id = 'run-a'");
    jest.useFakeTimers({ now: T0 + 78 });
    expect(fx.store.setWorkflowRunOriginSession('run-a', 'session-2')).toBe(true);
    jest.useRealTimers();
    expect(fx.get("SELECT * FROM run_bindings WHERE run_id = 'run-a'")).toEqual({
      run_id: 'run-a',
      origin_session_id: 'session-2',
      execution_mode: 'interactive',
      created_at: T0 + 78,
    });
  });

  test('an unknown run and a read-only store are SQLite errors', () => {
    const unknown = thrown(() => fx.store.setWorkflowRunOriginSession('missing', 's'));
    expect([unknown.constructor.name, unknown.code, unknown.message]).toEqual([
      'SqliteError',
      'SQLITE_CONSTRAINT_FOREIGNKEY',
      'FOREIGN KEY constraint failed',
    ]);
    fx.insertRun({ runId: 'run-a' });
    const readOnly = fx.open({ readOnly: true });
    try {
      const error = thrown(() => readOnly.setWorkflowRunOriginSession('run-a', 's'));
      expect([error.constructor.name, error.code, error.message]).toEqual([
        'SqliteError',
        'SQLITE_READONLY',
        'attempt to write a readonly database',
      ]);
    } finally {
      readOnly.close();
    }
  });
});

test('the stored token is only ever a hash', () => {
  fx.insertRun({ runId: 'run-a' });
  claim('run-a', 'runner-1', 'secret-token');
  expect(fx.lease('run-a').token_hash.equals(sha256('secret-token'))).toBe(true);
});
