// Run reservation through the public API: reserveWorkflowRun (validation order, every lineage
// rule and error, the rows it writes), prepareOrAdoptWorkflowRun and enqueueWorkflowRun.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

type Row = Record<string, any>;

const T0 = Date.parse('2026-09-15T00:00:00.005Z');
const DIGEST = 'a1'.repeat(32);
const FINGERPRINT = 'c3'.repeat(32);
const iso = (ms: number) => new Date(ms).toISOString();
const sha256 = (text: string | Buffer) => createHash('sha256').update(text).digest();
const runResourceId = (runId: string) =>
  `run-${createHash('sha256').update(`run\0${runId}`).digest('hex').slice(0, 40)}`;

let dir: string;
let file: string;
let projectPath: string;
let store: any;

const open = (options: Record<string, unknown> = {}) =>
  new SqliteControllerStore(file, { projectPath, ...options });

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-reserve-')));
  file = path.join(dir, 'state.sqlite');
  projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
  store = open();
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Raw SQL on the store's own connection (`state.connection`, better-sqlite3-compatible). */
function withDb<T>(operation: (db: any) => T): T {
  return operation(store.state.connection);
}

const rows = (sql: string, ...params: unknown[]) => withDb((db) => db.prepare(sql).all(...params) as Row[]);
const exec = (sql: string, ...params: unknown[]) => withDb((db) => db.prepare(sql).run(...params).changes);

function options(runId: string, extra: Record<string, unknown> = {}): Record<string, any> {
  return {
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1' },
    definitionDigest: `sha256:${DIGEST}`,
    definitionSnapshot: { name: 'echo', nodes: { start: { type: 'agent' } } },
    input: { task: `task for ${runId}` },
    runnerId: 'session-1',
    originSessionId: 'session-1',
    now: iso(T0),
    ...extra,
  };
}

const reserve = (runId: string, extra: Record<string, unknown> = {}) =>
  store.reserveWorkflowRun(options(runId, extra));

function expectError(operation: () => unknown, message: string | RegExp, name = 'Error'): void {
  let error: any;
  try {
    operation();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeDefined();
  expect(error.constructor.name).toBe(name);
  if (typeof message === 'string') expect(error.message).toBe(message);
  else expect(error.message).toMatch(message);
}

/** Puts a run into the given durable and queue states, as the engine and lifecycle would. */
function setState(runId: string, queueStatus: string, runStatus = 'queued'): void {
  const finished = ['waiting', 'completed', 'failed', 'timed_out', 'cancelled'].includes(runStatus);
  exec('UPDATE run_queue SET status = ? WHERE run_id = ?', queueStatus, runId);
  exec('UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ?', runStatus, finished ? T0 : null, runId);
}

function setOwner(runId: string, ownerId: string): void {
  exec(
    `UPDATE leases SET generation = generation + 1, owner_type = 'session', owner_id = ?, token_hash = ?,
            acquired_at = ?, heartbeat_at = ?, expires_at = ? WHERE resource_id = ?`,
    ownerId,
    sha256('token'),
    T0,
    T0,
    T0 + 1,
    runResourceId(runId),
  );
}

const RECORD_KEYS = [
  'runId', 'workflowName', 'workflowSourceRef', 'workflowSource', 'initialized', 'definitionDigest',
  'input', 'launchOptions', 'status', 'runnerId', 'claimToken', 'claimGeneration', 'claimExpiresAt',
  'affinityRunnerId', 'originSessionId', 'executionMode', 'parentRunId', 'rootRunId', 'lineageKind',
  'restartNumber', 'parentTerminalFingerprint', 'errorCode', 'errorMessage', 'createdAt', 'updatedAt',
  'startedAt', 'finishedAt',
];

describe('reserveWorkflowRun: root runs', () => {
  test('returns the queued record and writes every row in order', () => {
    const record = reserve('root-1', { launchOptions: { b: 1, a: 2 } });
    expect(Object.keys(record)).toEqual(RECORD_KEYS);
    expect(record).toEqual({
      runId: 'root-1',
      workflowName: 'echo',
      workflowSourceRef: 'builtin:echo',
      workflowSource: { root: { kind: 'builtin', id: 'echo', revision: 'rev-1' }, mounted: [] },
      initialized: false,
      definitionDigest: `sha256:${DIGEST}`,
      input: { task: 'task for root-1' },
      launchOptions: { a: 2, b: 1 },
      status: 'queued',
      runnerId: null,
      claimToken: null,
      claimGeneration: null,
      claimExpiresAt: null,
      affinityRunnerId: 'session-1',
      originSessionId: 'session-1',
      executionMode: 'interactive',
      parentRunId: null,
      rootRunId: 'root-1',
      lineageKind: null,
      restartNumber: 0,
      parentTerminalFingerprint: null,
      errorCode: null,
      errorMessage: null,
      createdAt: iso(T0),
      updatedAt: iso(T0),
      startedAt: null,
      finishedAt: null,
    });
    const resourceId = runResourceId('root-1');
    const [run] = rows('SELECT * FROM runs');
    expect(run).toMatchObject({
      run_id: 'root-1',
      resource_id: resourceId,
      parent_run_id: null,
      root_run_id: 'root-1',
      lineage_kind: null,
      restart_number: 0,
      status: 'queued',
      paused: 0,
      workflow_ref: 'builtin:echo',
      created_at: T0,
    });
    expect(rows('SELECT * FROM resources')).toEqual([
      expect.objectContaining({ resource_id: resourceId, resource_type: 'run', aggregate_key: 'root-1', revision: 1 }),
    ]);
    expect(rows('SELECT generation, owner_id FROM leases')).toEqual([{ generation: 0, owner_id: null }]);
    expect(rows('SELECT run_id, presentation_revision FROM viewer_runs')).toEqual([
      { run_id: 'root-1', presentation_revision: 1 },
    ]);
    expect(rows('SELECT * FROM run_bindings')).toEqual([
      { run_id: 'root-1', origin_session_id: 'session-1', execution_mode: 'interactive', created_at: T0 },
    ]);
    expect(rows('SELECT status, available_at, affinity_runner_id, origin_session_id FROM run_queue')).toEqual([
      { status: 'queued', available_at: T0, affinity_runner_id: 'session-1', origin_session_id: 'session-1' },
    ]);
    expect(rows('SELECT workflow_name, created_at FROM workflow_definitions')).toEqual([
      { workflow_name: 'echo', created_at: T0 },
    ]);
    expect(
      rows(`SELECT e.event_type, e.actor_type, e.actor_id, e.resource_revision, e.lease_generation,
                   CAST(b.content AS TEXT) AS payload
            FROM events e JOIN blobs b ON b.blob_hash = e.payload_hash`),
    ).toEqual([
      {
        event_type: 'run.queued',
        actor_type: 'session',
        actor_id: 'session-1',
        resource_revision: 1,
        lease_generation: null,
        payload: '{}',
      },
    ]);
    // Blobs in the reference's order: snapshot, input, launch options, then the event payload.
    expect(rows('SELECT CAST(content AS TEXT) AS text FROM blobs ORDER BY rowid').map((row) => row.text)).toEqual([
      '{"name":"echo","nodes":{"start":{"type":"agent"}}}',
      '{"task":"task for root-1"}',
      '{"a":2,"b":1}',
      '{}',
    ]);
  });

  test('defaults input to null and launch options to {}', () => {
    const record = reserve('root-2', { input: undefined });
    expect(record.input).toBeNull();
    expect(record.launchOptions).toEqual({});
  });

  test('file and mounted sources; mounted names come from the snapshot', () => {
    const source = {
      root: { kind: 'file', path: '/w/main.ts', hash: 'h-main' },
      mounted: [
        { mountPath: ['sub', 'leaf'], workflowName: 'caller-name', source: { kind: 'builtin', id: 'leaf', revision: 'r2' } },
        { mountPath: ['other'], workflowName: 'other', source: { kind: 'file', path: '/w/o.ts', hash: 'h-o' } },
      ],
    };
    const snapshot = { composition: { mounts: [{ mountPath: ['sub', 'leaf'], workflowName: 'leaf-workflow' }] } };
    const record = reserve('mounted-1', { workflowSource: source, definitionSnapshot: snapshot });
    expect(record.workflowSource).toEqual({
      root: { kind: 'file', path: '/w/main.ts', hash: 'h-main' },
      mounted: [
        { mountPath: ['other'], workflowName: 'other', source: { kind: 'file', path: '/w/o.ts', hash: 'h-o' } },
        { mountPath: ['sub', 'leaf'], workflowName: 'leaf-workflow', source: { kind: 'builtin', id: 'leaf', revision: 'r2' } },
      ],
    });
    expect(rows('SELECT mount_path, source_type, source_ref, source_revision FROM run_sources ORDER BY rowid')).toEqual([
      { mount_path: '', source_type: 'file', source_ref: '/w/main.ts', source_revision: 'h-main' },
      { mount_path: 'sub/leaf', source_type: 'builtin', source_ref: 'leaf', source_revision: 'r2' },
      { mount_path: 'other', source_type: 'file', source_ref: '/w/o.ts', source_revision: 'h-o' },
    ]);
  });

  test('headless runs hide their origin session', () => {
    const record = reserve('headless-1', { executionMode: 'headless' });
    expect(record).toMatchObject({ originSessionId: null, executionMode: 'headless' });
    expect(rows('SELECT origin_session_id FROM run_bindings')).toEqual([{ origin_session_id: 'session-1' }]);
  });

  test('the first definition stored for a digest keeps its workflow name', () => {
    reserve('first', { workflowName: 'first-name' });
    const second = reserve('second', { workflowName: 'second-name', originSessionId: 'session-2' });
    expect(second.workflowName).toBe('first-name');
  });

  test('digests: optional prefix, any case; anything else is rejected', () => {
    expect(reserve('d-1', { definitionDigest: DIGEST.toUpperCase() }).definitionDigest).toBe(`sha256:${DIGEST}`);
    for (const digest of ['sha256:', DIGEST.slice(1), `${DIGEST}0`, `sha256:${'g'.repeat(64)}`, `SHA256:${DIGEST}`]) {
      expectError(() => reserve('d-2', { definitionDigest: digest, originSessionId: 'session-2' }), 'Expected a SHA-256 digest');
    }
  });

  test('validation order: run id, then timestamp, then digest', () => {
    expectError(() => reserve('bad id', { now: 'nope', definitionDigest: 'x' }), 'Invalid workflow run id: bad id');
    expectError(() => reserve('ok', { now: 'nope', definitionDigest: 'x' }), 'Invalid timestamp');
    expectError(() => reserve('ok', { definitionDigest: 'x' }), 'Expected a SHA-256 digest');
    // Not a string: the reference fails on `value.startsWith`.
    const typeError = (value: unknown, message: string) =>
      expectError(() => reserve('ok', { definitionDigest: value }), message, 'TypeError');
    typeError(undefined, "Cannot read properties of undefined (reading 'startsWith')");
    typeError(null, "Cannot read properties of null (reading 'startsWith')");
    typeError(5, 'value.startsWith is not a function');
  });

  test('run ids: 1–200 characters, alphanumeric first', () => {
    expect(reserve('a'.repeat(200)).runId).toHaveLength(200);
    for (const runId of ['', 'a'.repeat(201), '-a', '.a', 'a b', 'a/b', 'ä', 'a\n']) {
      expectError(() => reserve(runId), `Invalid workflow run id: ${runId}`);
    }
  });

  test('duplicates, root lineage and restart metadata', () => {
    reserve('dup');
    expectError(() => reserve('dup', { originSessionId: 'session-2' }), 'Workflow run already reserved: dup');
    expectError(() => reserve('r', { lineageKind: 'continuation' }), 'A root workflow run cannot declare lineage');
    expectError(() => reserve('r', { restartNumber: 0 }), 'A root workflow run cannot declare restart metadata');
    expectError(
      () => reserve('r', { parentTerminalFingerprint: FINGERPRINT }),
      'A root workflow run cannot declare restart metadata',
    );
  });

  test('source, JSON and project errors; the one-active-run-per-session index', () => {
    expectError(() => reserve('s', { workflowSource: { kind: 'file', path: '/x' } }), 'Stored workflow source identity is invalid');
    expectError(() => reserve('s', { workflowSource: 'builtin:echo' }), 'Stored workflow source identity is invalid');
    expectError(
      () => reserve('s', { workflowSource: { root: { kind: 'builtin', id: 'x', revision: 'r' }, mounted: [{ mountPath: 'a' }] } }),
      'Stored workflow source identity is invalid',
    );
    // The snapshot is stored before the source is validated, the input after.
    expectError(() => reserve('s', { definitionSnapshot: undefined, workflowSource: null }), 'Unsupported JSON value type: undefined');
    expectError(() => reserve('s', { input: { n: NaN }, workflowSource: null }), 'Stored workflow source identity is invalid');
    expectError(() => reserve('s', { input: { n: NaN } }), 'JSON numbers must be finite');
    expectError(() => reserve('s', { launchOptions: new Date(0) }), 'Only plain objects can be stored as canonical JSON');
    reserve('active-1');
    expectError(
      () => reserve('active-2'),
      'UNIQUE constraint failed: run_queue.origin_session_id',
      'SqliteError',
    );
    const global = open({ global: true });
    try {
      expectError(
        () => global.reserveWorkflowRun(options('g-1', { originSessionId: 'session-g' })),
        'Controller project is not registered in the state database',
      );
    } finally {
      global.close();
    }
    const readOnly = open({ readOnly: true });
    try {
      expectError(() => readOnly.reserveWorkflowRun(options('ro-1')), 'Cannot mutate a read-only Pi Workflows database');
    } finally {
      readOnly.close();
    }
    expect(rows('SELECT run_id FROM runs')).toEqual([{ run_id: 'active-1' }]);
  });
});

describe('reserveWorkflowRun: lineage', () => {
  test('an unknown parent and a parent of another session', () => {
    expectError(() => reserve('child', { parentRunId: 'ghost' }), 'Workflow run not found: ghost');
    reserve('parent');
    setState('parent', 'parked', 'waiting');
    expectError(
      () => reserve('child', { parentRunId: 'parent', originSessionId: 'session-2' }),
      'Workflow parent belongs to another Pi session',
    );
  });

  test('restart rules', () => {
    reserve('parent');
    const restart = (extra: Record<string, unknown> = {}) =>
      reserve('restart-1', { parentRunId: 'parent', lineageKind: 'restart', parentTerminalFingerprint: FINGERPRINT, ...extra });
    expectError(() => restart(), 'Restart parent is not terminal');
    setState('parent', 'failed', 'waiting');
    expectError(() => restart(), 'Restart parent is not terminal');
    setState('parent', 'parked', 'completed');
    expectError(() => restart(), 'Restart parent is not terminal');
    setState('parent', 'failed', 'timed_out');
    expectError(() => restart({ parentTerminalFingerprint: undefined }), 'Restart requires the parent terminal fingerprint');
    expectError(() => restart({ parentTerminalFingerprint: 'abc' }), 'Expected a terminal fingerprint');
    expectError(
      () => restart({ parentTerminalFingerprint: null }),
      "Cannot read properties of null (reading 'startsWith')",
      'TypeError',
    );
    expectError(() => restart({ restartNumber: 2 }), 'Restart number does not follow its parent');
    expectError(() => restart({ restartNumber: 0 }), 'Restart number does not follow its parent');
    const record = restart({ parentTerminalFingerprint: `sha256:${FINGERPRINT.toUpperCase()}`, restartNumber: 1 });
    expect(record).toMatchObject({
      parentRunId: 'parent',
      rootRunId: 'parent',
      lineageKind: 'restart',
      restartNumber: 1,
      parentTerminalFingerprint: FINGERPRINT,
    });
    // One restart child per parent.
    expectError(
      () => reserve('restart-2', { parentRunId: 'parent', lineageKind: 'restart', parentTerminalFingerprint: FINGERPRINT, originSessionId: 'session-1' }),
      'UNIQUE constraint failed: runs.parent_run_id',
      'SqliteError',
    );
    // A restart of the restart keeps the root and counts on.
    setState('restart-1', 'done', 'completed');
    const second = reserve('restart-1b', { parentRunId: 'restart-1', lineageKind: 'restart', parentTerminalFingerprint: FINGERPRINT });
    expect(second).toMatchObject({ rootRunId: 'parent', restartNumber: 2 });
  });

  test('continuation rules', () => {
    reserve('parent');
    const continuation = (extra: Record<string, unknown> = {}) => reserve('cont-1', { parentRunId: 'parent', ...extra });
    expectError(() => continuation(), 'Continuation parent queue is queued');
    for (const status of ['starting', 'running', 'failed', 'cancelled']) {
      setState('parent', status);
      expectError(() => continuation(), `Continuation parent queue is ${status}`);
    }
    setState('parent', 'done');
    expectError(() => continuation(), 'Continuation parent already has a reserved continuation');
    setState('parent', 'parked', 'waiting');
    expectError(() => continuation({ parentTerminalFingerprint: FINGERPRINT }), 'Continuation lineage conflicts with restart metadata');
    expectError(() => continuation({ restartNumber: 1 }), 'Continuation lineage conflicts with restart metadata');
    expectError(
      () => continuation({ lineageKind: 'continuation', restartNumber: 1 }),
      'Continuation lineage conflicts with restart metadata',
    );
    // An owner blocks the continuation even when its lease has expired.
    setOwner('parent', 'session-1');
    expectError(() => continuation(), 'Continuation parent still has an active owner');
    exec(
      `UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL, acquired_at = NULL,
              heartbeat_at = NULL, expires_at = NULL WHERE resource_id = ?`,
      runResourceId('parent'),
    );
    const record = continuation({ restartNumber: 0, now: iso(T0 + 7) });
    expect(record).toMatchObject({ parentRunId: 'parent', rootRunId: 'parent', lineageKind: 'continuation', restartNumber: 0 });
    expect(rows('SELECT status, updated_at, finished_at FROM run_queue WHERE run_id = ?', 'parent')).toEqual([
      { status: 'done', updated_at: T0 + 7, finished_at: T0 + 7 },
    ]);
    const parentEvents = rows(
      `SELECT e.event_type, e.actor_type, e.actor_id, e.resource_revision, CAST(b.content AS TEXT) AS payload
       FROM events e JOIN blobs b ON b.blob_hash = e.payload_hash WHERE e.resource_id = ? ORDER BY e.event_seq`,
      runResourceId('parent'),
    );
    expect(parentEvents.at(-1)).toEqual({
      event_type: 'run.queue_done_for_continuation',
      actor_type: 'session',
      actor_id: 'session-1',
      resource_revision: 2,
      payload: '{"continuationRunId":"cont-1"}',
    });
    // The parent's bump recorded viewer deltas.
    expect(rows('SELECT presentation_revision FROM viewer_runs WHERE run_id = ?', 'parent')).toEqual([
      { presentation_revision: 2 },
    ]);
    // A grandchild inherits the root and the restart number.
    setState('cont-1', 'parked', 'waiting');
    expect(reserve('cont-2', { parentRunId: 'cont-1' })).toMatchObject({ rootRunId: 'parent', restartNumber: 0 });
  });

  test('a continuation of a restart child inherits its restart number', () => {
    reserve('parent');
    setState('parent', 'done', 'completed');
    reserve('restart-1', { parentRunId: 'parent', lineageKind: 'restart', parentTerminalFingerprint: FINGERPRINT });
    setState('restart-1', 'parked', 'waiting');
    expectError(() => reserve('c', { parentRunId: 'restart-1', restartNumber: 0 }), 'Continuation lineage conflicts with restart metadata');
    expect(reserve('c', { parentRunId: 'restart-1', restartNumber: 1 })).toMatchObject({
      rootRunId: 'parent',
      lineageKind: 'continuation',
      restartNumber: 1,
    });
  });

  test('a failing reservation leaves nothing behind', () => {
    reserve('parent');
    setState('parent', 'parked', 'waiting');
    // The parent queue is closed first, then the invalid source fails the whole transaction.
    expectError(() => reserve('child', { parentRunId: 'parent', workflowSource: {} }), 'Stored workflow source identity is invalid');
    expect(rows('SELECT status FROM run_queue WHERE run_id = ?', 'parent')).toEqual([{ status: 'parked' }]);
    expect(rows('SELECT COUNT(*) AS n FROM events')).toEqual([{ n: 1 }]);
  });
});

describe('prepareOrAdoptWorkflowRun', () => {
  const prepare = (runId: string, extra: Record<string, unknown> = {}) =>
    store.prepareOrAdoptWorkflowRun(options(runId, { claimToken: 'tok-1', leaseMs: 60_000, ...extra }));

  test('reserves and claims in one transaction, then adopts an identical run', () => {
    const claimed = prepare('p-1', { launchOptions: { x: 1 } });
    expect(Object.keys(claimed)).toEqual(['state', 'run']);
    expect(claimed.state).toBe('claimed');
    expect(claimed.run).toMatchObject({
      status: 'starting',
      runnerId: 'session-1',
      claimToken: 'tok-1',
      claimGeneration: 1,
      claimExpiresAt: iso(T0 + 60_000),
    });
    expect(rows('SELECT event_type FROM events ORDER BY event_seq').map((row) => row.event_type)).toEqual([
      'run.queued',
      'lease.claimed',
    ]);
    // Canonical comparisons: digest case and prefix, key order.
    const adopted = prepare('p-1', {
      definitionDigest: DIGEST.toUpperCase(),
      launchOptions: { x: 1 },
      input: { task: 'task for p-1' },
      claimToken: 'other',
      runnerId: 'someone-else',
      now: iso(T0 + 5),
    });
    expect(adopted.state).toBe('adopted');
    expect(adopted.run).toMatchObject({ runId: 'p-1', status: 'starting', runnerId: 'session-1', claimToken: null });
  });

  test('every identity field must match', () => {
    prepare('p-2', { launchOptions: {} });
    expect(prepare('p-2').state).toBe('adopted'); // launchOptions ?? {}
    const conflicts: Record<string, unknown>[] = [
      { workflowName: 'other' },
      { workflowSourceRef: 'builtin:other' },
      { definitionDigest: 'b2'.repeat(32) },
      { workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-2' } },
      { workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1', extra: true } },
      { input: { task: 'other' } },
      { input: undefined },
      { launchOptions: { x: 1 } },
      { originSessionId: 'session-2' },
      { executionMode: 'headless' },
      { parentTerminalFingerprint: FINGERPRINT },
    ];
    for (const extra of conflicts) {
      expectError(() => prepare('p-2', extra), 'Workflow run preparation conflicts: p-2');
    }
    expectError(() => prepare('p-2', { parentRunId: 'ghost' }), 'Workflow run not found: ghost');
    expectError(() => prepare('p-2', { parentTerminalFingerprint: 'zz' }), 'Expected a terminal fingerprint');
    // Comparisons short-circuit: a bad input is never canonicalised once the name differs.
    expectError(() => prepare('p-2', { workflowName: 'x', input: { n: NaN } }), 'Workflow run preparation conflicts: p-2');
    expectError(() => prepare('p-2', { input: { n: NaN } }), 'JSON numbers must be finite');
    expectError(() => prepare('p-2', { workflowSource: null }), 'Stored workflow source identity is invalid');
  });

  test('lineage through prepare, and restartNumber ignored unless restarting', () => {
    reserve('parent');
    setState('parent', 'parked', 'waiting');
    const child = prepare('child', { parentRunId: 'parent', originSessionId: 'session-1' });
    expect(child.run).toMatchObject({ lineageKind: 'continuation', rootRunId: 'parent', status: 'starting' });
    expect(prepare('child', { parentRunId: 'parent', lineageKind: 'continuation' }).state).toBe('adopted');
    expect(prepare('child', { parentRunId: 'parent', restartNumber: 5 }).state).toBe('adopted');
    expectError(() => prepare('child', { parentRunId: 'parent', lineageKind: 'restart' }), 'Workflow run preparation conflicts: child');
    expectError(() => prepare('child'), 'Workflow run preparation conflicts: child');
  });

  test('errors on the reservation path; nothing is written', () => {
    expectError(() => prepare('bad id'), 'Invalid workflow run id: bad id');
    expectError(() => prepare('p-3', { now: 'never' }), 'Invalid timestamp');
    expectError(() => prepare('p-3', { lineageKind: 'restart' }), 'A root workflow run cannot declare lineage');
    expect(rows('SELECT COUNT(*) AS n FROM runs')).toEqual([{ n: 0 }]);
  });
});

describe('enqueueWorkflowRun', () => {
  const enqueue = (runId: string, extra: Record<string, unknown> = {}) =>
    store.enqueueWorkflowRun(options(runId, { claimToken: 'tok-1', leaseMs: 60_000, ...extra }));

  test('reserves without the execution mode, then claims', () => {
    const record = enqueue('e-1', { executionMode: 'headless', launchOptions: undefined });
    expect(record).toMatchObject({
      executionMode: 'interactive',
      originSessionId: 'session-1',
      launchOptions: {},
      status: 'starting',
      claimToken: 'tok-1',
      claimGeneration: 1,
    });
    // The same runner claims again; another one is refused while the lease is live.
    expect(enqueue('e-1', { claimToken: 'tok-2', now: iso(T0 + 1) })).toMatchObject({ claimGeneration: 2, claimToken: 'tok-2' });
    expectError(() => enqueue('e-1', { runnerId: 'session-9', now: iso(T0 + 2) }), 'Workflow run could not be claimed: e-1');
    // Past the lease another runner may take it.
    expect(enqueue('e-1', { runnerId: 'host-9', now: iso(T0 + 1 + 60_000) })).toMatchObject({ runnerId: 'host-9', claimGeneration: 3 });
  });

  test('terminal runs and runs with a pending interaction cannot be claimed', () => {
    reserve('e-2');
    setState('e-2', 'done', 'completed');
    expectError(() => enqueue('e-2'), 'Workflow run could not be claimed: e-2');
    reserve('e-3', { originSessionId: 'session-3' });
    withDb((db) => {
      const contract = Buffer.from('{}');
      db.prepare(
        `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
         VALUES (?, 'application/json', 2, ?, ?) ON CONFLICT(blob_hash) DO NOTHING`,
      ).run(sha256(contract), contract, T0);
      db.prepare(
        `INSERT INTO node_attempts(attempt_id, run_id, node_id, attempt_number, node_type, status, created_at, updated_at)
         VALUES ('attempt-1', 'e-3', 'node-1', 1, 'agent', 'waiting', ?, ?)`,
      ).run(T0, T0);
      db.prepare(
        `INSERT INTO interactive_requests(request_id, run_id, attempt_id, target_session_id, kind,
                                          contract_hash, status, created_at, updated_at)
         VALUES ('request-1', 'e-3', 'attempt-1', 'session-3', 'agent', ?, 'pending', ?, ?)`,
      ).run(sha256(contract), T0, T0);
    });
    expectError(() => enqueue('e-3'), 'Workflow run could not be claimed: e-3');
  });

  test('lineage is forwarded; reservation errors surface', () => {
    reserve('parent');
    setState('parent', 'parked', 'waiting');
    expect(enqueue('child', { parentRunId: 'parent' })).toMatchObject({ parentRunId: 'parent', lineageKind: 'continuation' });
    expectError(() => enqueue('bad id'), 'Invalid workflow run id: bad id');
    expectError(() => enqueue('x', { parentRunId: 'ghost' }), 'Workflow run not found: ghost');
    // An existing run skips the reservation checks; the claim still validates the timestamp.
    expectError(() => enqueue('child', { now: 'never', definitionDigest: 'x' }), 'Invalid timestamp');
  });
});
