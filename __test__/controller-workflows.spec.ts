// Child workflows of controllers through the public API: reserveWorkflow, the reads,
// updateWorkflow and completeWorkflow, with every error branch.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { failure } from './support/failure';

const { SqliteControllerStore, WorkflowRequestConflictError } = require('../index.js');

const T0 = Date.parse('2026-09-04T00:00:00.000Z');
const FP = '0f'.repeat(32);

let dir: string;
let store: any;
let uid: string;
let held: any;

function open(options: Record<string, unknown> = {}): any {
  return new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project'), ...options });
}

function sql(text: string, ...params: unknown[]): any {
  const statement = store.state.connection.prepare(text);
  return statement.reader ? statement.all(...params) : statement.run(...params);
}

/** The minimal rows of a workflow run, so `run_id` can refer to it. */
function insertRun(runId: string): void {
  const content = Buffer.from('{}');
  const blob = createHash('sha256').update(content).digest();
  const digest = createHash('sha256').update(runId).digest();
  sql(
    `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
     VALUES (?, 'application/json', 2, ?, ?) ON CONFLICT(blob_hash) DO NOTHING`,
    blob,
    content,
    T0,
  );
  sql(`INSERT INTO workflow_definitions(definition_digest, workflow_name, definition_hash, created_at) VALUES (?, 'demo', ?, ?)`, digest, blob, T0);
  sql(
    `INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at) VALUES (?, 'run', ?, 1, ?, ?)`,
    `run-resource-${runId}`,
    runId,
    T0,
    T0,
  );
  sql(
    `INSERT INTO runs(run_id, resource_id, root_run_id, definition_digest, workflow_ref, launch_options_hash,
                      status, input_hash, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'demo', ?, 'queued', ?, ?, ?)`,
    runId,
    `run-resource-${runId}`,
    runId,
    digest,
    blob,
    blob,
    T0,
    T0,
  );
}

function reserve(options: Record<string, unknown> = {}): any {
  return store.reserveWorkflow({ resourceUid: uid, claim: held, requestKey: 'build-1', workflow: 'build', inputFingerprint: FP, ...options });
}

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-controller-workflows-')));
  fs.mkdirSync(path.join(dir, 'project'));
  store = open();
  uid = store.putResource({ controller: 'builder', key: 'site', spec: {}, initialStatus: {} }).metadata.uid;
  store.putResource({ controller: 'builder', key: 'docs', spec: {}, initialStatus: {}, now: new Date(T0 + 1).toISOString() });
  held = store.claimNext({ controllers: ['builder'], ownerId: 'b1', leaseMs: 120_000 });
});

afterEach(() => {
  store.close();
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('reserveWorkflow', () => {
  test('reserves a pending request, then adopts it', () => {
    const reservation = reserve();
    expect(reservation).toEqual({
      record: {
        requestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        resourceUid: uid,
        requestKey: 'build-1',
        inputFingerprint: FP,
        workflow: 'build',
        state: 'pending',
        attempt: 0,
      },
      created: true,
    });
    expect(reserve()).toEqual({ record: reservation.record, created: false });
    expect(sql('SELECT count(*) AS n FROM events')).toEqual([{ n: 3 }]);
  });

  test('a different workflow or fingerprint text conflicts, upper case included', () => {
    reserve();
    expect(failure(() => reserve({ workflow: 'deploy' }))).toEqual({
      name: 'WorkflowRequestConflictError',
      message: 'Workflow request key "build-1" was reused with different input',
    });
    expect(() => reserve({ inputFingerprint: '1f'.repeat(32) })).toThrow(WorkflowRequestConflictError);
    expect(() => reserve({ inputFingerprint: FP.toUpperCase() })).toThrow(WorkflowRequestConflictError);
  });

  test('decodes hex like Buffer.from: upper case accepted, stopping at the first invalid pair', () => {
    expect(reserve({ requestKey: 'upper', inputFingerprint: 'AB'.repeat(32) }).record.inputFingerprint).toBe('ab'.repeat(32));
    const check = { name: 'SqliteError', message: 'CHECK constraint failed: length(input_fingerprint) = 32', code: 'SQLITE_CONSTRAINT_CHECK' };
    expect(failure(() => reserve({ requestKey: 'bad', inputFingerprint: 'zz' }))).toEqual(check);
    expect(failure(() => reserve({ requestKey: 'short', inputFingerprint: 'ab'.repeat(31) }))).toEqual(check);
    expect(failure(() => reserve({ requestKey: 'stop', inputFingerprint: `${'ab'.repeat(31)}zzab` }))).toEqual(check);
    expect(reserve({ requestKey: 'odd', inputFingerprint: `${'cd'.repeat(32)}e` }).record.inputFingerprint).toBe('cd'.repeat(32));
  });

  test('error branches', () => {
    expect(failure(() => reserve({ resourceUid: 'bogus-uid' })).message).toBe('Controller resource not found: bogus-uid');
    const docs = store.getResource({ controller: 'builder', key: 'docs' }).metadata.uid;
    expect(failure(() => reserve({ resourceUid: docs })).message).toBe('Controller claim targets another resource');
    expect(failure(() => reserve({ claim: { ...held, generation: 2 } })).message).toBe('Controller claim is stale');
    jest.setSystemTime(T0 + 120_000);
    expect(failure(() => reserve()).message).toBe('Controller claim is stale');
  });
});

describe('reads, updateWorkflow and completeWorkflow', () => {
  test('getWorkflow, getWorkflowByRequestId and listWorkflows', () => {
    const first = reserve().record;
    jest.setSystemTime(T0 + 1);
    const second = reserve({ requestKey: 'build-0' }).record;
    expect(store.getWorkflow(uid, 'build-1')).toEqual(first);
    expect(store.getWorkflow(uid, 'nope')).toBeUndefined();
    expect(store.getWorkflowByRequestId(second.requestId)).toEqual(second);
    expect(store.getWorkflowByRequestId('nope')).toBeUndefined();
    expect(store.listWorkflows(uid)).toEqual([first, second]);
    expect(store.listWorkflows('nope')).toEqual([]);
  });

  test('updateWorkflow records a reserved run id, and the run id once the run exists', () => {
    const { requestId } = reserve().record;
    const running = store.updateWorkflow(requestId, { runId: 'run-1', state: 'running', attempt: 1, error: 'retrying' }, held);
    expect(running).toMatchObject({ runId: 'run-1', state: 'running', attempt: 1, error: 'retrying' });
    expect(sql('SELECT reserved_run_id AS reserved, run_id AS run FROM controller_workflows')).toEqual([{ reserved: 'run-1', run: null }]);
    insertRun('run-1');
    const waiting = store.updateWorkflow(requestId, { runId: 'run-1', state: 'waiting', error: null }, held);
    expect(Object.keys(waiting)).toEqual(['requestId', 'resourceUid', 'requestKey', 'inputFingerprint', 'workflow', 'runId', 'state', 'attempt']);
    expect(sql('SELECT reserved_run_id AS reserved, run_id AS run FROM controller_workflows')).toEqual([{ reserved: 'run-1', run: 'run-1' }]);
    expect(store.updateWorkflow(requestId, { runId: null, state: 'running' }, held)).toMatchObject({ runId: 'run-1', attempt: 1 });
  });

  test('updateWorkflow error branches', () => {
    const { requestId } = reserve().record;
    expect(failure(() => store.updateWorkflow('bogus-request', { state: 'running' }, held)).message).toBe(
      'Workflow request not found: bogus-request',
    );
    expect(failure(() => store.updateWorkflow(requestId, { state: 'running' }, { ...held, key: 'docs' })).message).toBe(
      'Controller claim targets another resource',
    );
    expect(failure(() => store.updateWorkflow(requestId, { state: 'running' }, { ...held, token: 'stale' })).message).toBe(
      'Controller claim is stale',
    );
    expect(failure(() => store.updateWorkflow(requestId, { state: 'done' }, held))).toMatchObject({
      name: 'SqliteError',
      code: 'SQLITE_CONSTRAINT_CHECK',
    });
  });

  test('completeWorkflow needs no claim, bumps the resource and records workflow_state_changed', () => {
    const { requestId } = reserve().record;
    store.updateWorkflow(requestId, { runId: 'run-7', state: 'running' }, held);
    jest.setSystemTime(T0 + 500_000);
    const done = store.completeWorkflow(requestId, { state: 'failed', error: 'exit 1', attempt: 2 });
    expect(done).toMatchObject({ runId: 'run-7', state: 'failed', attempt: 2, error: 'exit 1' });
    expect(store.getResource({ controller: 'builder', key: 'site' }).metadata.resourceVersion).toBe(3);
    expect(store.listEvents({ limit: 1 })).toEqual([
      {
        seq: expect.any(Number),
        recordedAt: new Date(T0 + 500_000).toISOString(),
        controller: 'builder',
        key: 'site',
        type: 'workflow_state_changed',
        payload: { requestId, runId: 'run-7', state: 'failed' },
      },
    ]);
  });

  test('completeWorkflow error branches', () => {
    const { requestId } = reserve().record;
    for (const state of ['pending', 'running']) {
      expect(failure(() => store.completeWorkflow(requestId, { state })).message).toBe(
        'Scheduler completion must report a settled child state',
      );
    }
    expect(failure(() => store.completeWorkflow('gone', { state: 'pending' })).message).toBe('Workflow request not found: gone');
    const interrupted = store.completeWorkflow(requestId, { state: 'interrupted', runId: 'unknown-run', error: null });
    expect(interrupted.state).toBe('interrupted');
    expect(interrupted.runId).toBeUndefined();
    store.updateWorkflow(requestId, { runId: 'run-1', state: 'running' }, held);
    for (const runId of ['run-2', null]) {
      expect(failure(() => store.completeWorkflow(requestId, { state: 'succeeded', runId })).message).toBe(
        'Scheduler completion run ID does not match the reserved child run',
      );
    }
    const readOnly = open({ readOnly: true });
    try {
      expect(failure(() => readOnly.completeWorkflow(requestId, { state: 'succeeded' })).message).toBe(
        'Cannot mutate a read-only Pi Workflows database',
      );
    } finally {
      readOnly.close();
    }
  });
});
