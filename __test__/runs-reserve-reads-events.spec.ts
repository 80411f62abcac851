// Run reads and views (getWorkflowRun[View], list revision and views, project path, lists,
// session reservations, paused flag) and run events (recordRunEvent, listRunEventsAfter).

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

type Row = Record<string, any>;

const T0 = Date.parse('2026-09-20T00:00:00.000Z');
const DIGEST = 'a1'.repeat(32);
const iso = (ms: number) => new Date(ms).toISOString();
const runResourceId = (runId: string) =>
  `run-${createHash('sha256').update(`run\0${runId}`).digest('hex').slice(0, 40)}`;

let dir: string;
let file: string;
let projectPath: string;
let store: any;

const open = (options: Record<string, unknown> = {}) =>
  new SqliteControllerStore(file, { projectPath, ...options });

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-reads-')));
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

const exec = (sql: string, ...params: unknown[]) => withDb((db) => db.prepare(sql).run(...params).changes);
const rows = (sql: string, ...params: unknown[]) => withDb((db) => db.prepare(sql).all(...params) as Row[]);

function reserve(runId: string, at: number, extra: Record<string, unknown> = {}, target = store): any {
  return target.reserveWorkflowRun({
    runId,
    workflowName: 'echo',
    workflowSourceRef: `ref:${runId}`,
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo' },
    input: { runId },
    runnerId: `runner-${runId}`,
    originSessionId: `session-${runId}`,
    now: iso(at),
    ...extra,
  });
}

function expectError(operation: () => unknown, message: string, name = 'Error'): void {
  let error: any;
  try {
    operation();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeDefined();
  expect(error.constructor.name).toBe(name);
  expect(error.message).toBe(message);
}

const VIEW_KEYS = [
  'runId', 'workflowName', 'workflowSourceRef', 'workflowSource', 'initialized', 'definitionDigest',
  'runStateStatus', 'paused', 'status', 'originSessionId', 'executionMode', 'parentRunId', 'rootRunId',
  'lineageKind', 'restartNumber', 'parentTerminalFingerprint', 'errorCode', 'errorMessage', 'createdAt',
  'updatedAt', 'startedAt', 'finishedAt',
];

describe('run reads', () => {
  test('getWorkflowRun and getWorkflowRunView', () => {
    expect(store.getWorkflowRun('missing')).toBeUndefined();
    expect(store.getWorkflowRunView('missing')).toBeUndefined();
    const record = reserve('r-1', T0, {
      workflowSource: {
        root: { kind: 'file', path: '/w.ts', hash: 'h' },
        mounted: [{ mountPath: ['m'], workflowName: 'm', source: { kind: 'builtin', id: 'm', revision: '1' } }],
      },
      executionMode: 'headless',
    });
    expect(store.getWorkflowRun('r-1')).toEqual(record);
    const view = store.getWorkflowRunView('r-1');
    expect(Object.keys(view)).toEqual(VIEW_KEYS);
    expect(view).toEqual({
      runId: 'r-1',
      workflowName: 'echo',
      workflowSourceRef: 'ref:r-1',
      workflowSource: { root: { kind: 'file', path: '/w.ts', hash: 'h' }, mounted: [] },
      initialized: false,
      definitionDigest: `sha256:${DIGEST}`,
      runStateStatus: 'queued',
      paused: false,
      status: 'queued',
      originSessionId: null,
      executionMode: 'headless',
      parentRunId: null,
      rootRunId: 'r-1',
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
  });

  test('error code and message come from the queue', () => {
    reserve('r-err', T0);
    withDb((db) => {
      const text = Buffer.from('it broke');
      const hash = createHash('sha256').update(text).digest();
      db.prepare(
        `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (?, 'text/plain', ?, ?, ?)`,
      ).run(hash, text.length, text, T0);
      db.prepare(`UPDATE run_queue SET status = 'failed', error_code = 'boom', error_hash = ? WHERE run_id = 'r-err'`).run(hash);
    });
    expect(store.getWorkflowRun('r-err')).toMatchObject({ status: 'failed', errorCode: 'boom', errorMessage: 'it broke' });
    expect(store.getWorkflowRunView('r-err')).toMatchObject({ errorCode: 'boom', errorMessage: 'it broke' });
  });

  test('a run without its root source cannot be read as a record', () => {
    reserve('r-src', T0);
    exec(`DELETE FROM run_sources WHERE run_id = 'r-src'`);
    expectError(() => store.getWorkflowRun('r-src'), 'Workflow run source is missing: r-src');
    expectError(() => store.listWorkflowRuns(), 'Workflow run source is missing: r-src');
    expectError(() => store.findSessionReservation('session-r-src'), 'Workflow run source is missing: r-src');
    // Views skip it.
    expect(store.getWorkflowRunView('r-src')).toBeUndefined();
  });

  test('list revision and paged views (newest first, not project-scoped)', () => {
    expect(store.workflowRunListRevision()).toEqual({ total: 0, revision: '0:0:0' });
    reserve('v-1', T0);
    reserve('v-2', T0 + 10);
    const other = open({ projectPath: path.join(dir, 'elsewhere') });
    reserve('v-3', T0 + 20, {}, other);
    other.close();
    expect(store.workflowRunListRevision()).toEqual({ total: 3, revision: `3:3:${T0 + 20}` });
    store.recordRunEvent({ runId: 'v-1', workflowRef: 'w', type: 't', now: iso(T0 + 30) });
    // The event bumps the revision, not the queue's updated_at.
    expect(store.workflowRunListRevision()).toEqual({ total: 3, revision: `3:4:${T0 + 20}` });
    const page = store.listWorkflowRunViews({ offset: 1, limit: 5 });
    expect(Object.keys(page)).toEqual(['total', 'revision', 'runs']);
    expect(page.total).toBe(3);
    expect(page.runs.map((run: any) => run.runId)).toEqual(['v-2', 'v-1']);
    expect(store.listWorkflowRunViews({ offset: 0, limit: 1 }).runs.map((run: any) => run.runId)).toEqual(['v-3']);
    expect(store.workflowRunProjectPath('v-3')).toBe(path.join(dir, 'elsewhere'));
    expect(store.workflowRunProjectPath('v-1')).toBe(projectPath);
    expect(store.workflowRunProjectPath('missing')).toBeUndefined();
  });

  test('listWorkflowRuns: project scope, statuses, exclusions, limit', () => {
    reserve('l-1', T0);
    reserve('l-2', T0 + 1);
    reserve('l-3', T0 + 2);
    const other = open({ projectPath: path.join(dir, 'elsewhere') });
    reserve('l-4', T0 + 3, {}, other);
    other.close();
    exec(`UPDATE run_queue SET status = 'parked' WHERE run_id = 'l-2'`);
    const ids = (options?: Record<string, unknown>, target = store) =>
      target.listWorkflowRuns(options).map((run: any) => run.runId);
    expect(ids()).toEqual(['l-3', 'l-2', 'l-1']);
    expect(ids({ statuses: ['parked'] })).toEqual(['l-2']);
    expect(ids({ statuses: [] })).toEqual(['l-3', 'l-2', 'l-1']);
    expect(ids({ statuses: ['queued', 'parked'], excludeRunIds: ['l-3'] })).toEqual(['l-2', 'l-1']);
    expect(ids({ limit: 2 })).toEqual(['l-3', 'l-2']);
    expect(ids({ limit: 0 })).toEqual([]);
    expect(ids({ limit: -1 })).toEqual(['l-3', 'l-2', 'l-1']);
    const global = open({ global: true });
    try {
      expect(ids({}, global)).toEqual(['l-4', 'l-3', 'l-2', 'l-1']);
      expect(global.getWorkflowRun('l-1').runId).toBe('l-1');
    } finally {
      global.close();
    }
  });

  test('findSessionReservation(View) and isWorkflowRunPaused', () => {
    reserve('s-1', T0, { originSessionId: 'shared' });
    exec(`UPDATE run_queue SET status = 'parked' WHERE run_id = 's-1'`);
    reserve('s-2', T0 + 5, { originSessionId: 'shared' });
    expect(store.findSessionReservation('shared').runId).toBe('s-2');
    expect(store.findSessionReservationView('shared').runId).toBe('s-2');
    exec(`UPDATE run_queue SET status = 'done' WHERE run_id = 's-2'`);
    expect(store.findSessionReservation('shared').runId).toBe('s-1');
    expect(store.findSessionReservationView('shared')).toMatchObject({ runId: 's-1', status: 'parked' });
    expect(store.findSessionReservation('nobody')).toBeUndefined();
    expect(store.findSessionReservationView('nobody')).toBeUndefined();
    expect(store.isWorkflowRunPaused('s-1')).toBe(false);
    exec(`UPDATE runs SET paused = 1, status = 'waiting', finished_at = ? WHERE run_id = 's-1'`, T0);
    expect(store.isWorkflowRunPaused('s-1')).toBe(true);
    expect(store.getWorkflowRunView('s-1')).toMatchObject({ paused: true, runStateStatus: 'waiting', initialized: true });
    expect(store.isWorkflowRunPaused('missing')).toBe(false);
  });
});

describe('run events', () => {
  test('recordRunEvent: actors, defaults, lease generation, echoed payload', () => {
    reserve('e-1', T0);
    const payload = { b: [1, { z: true, a: null }], a: 'x' };
    const first = store.recordRunEvent({
      runId: 'e-1',
      workflowRef: 'caller-ref',
      type: 'node.started',
      payload,
      runnerId: 'session-7',
      now: iso(T0 + 1),
    });
    expect(first).toEqual({
      seq: 2,
      recordedAt: iso(T0 + 1),
      runId: 'e-1',
      workflowRef: 'caller-ref',
      type: 'node.started',
      runnerId: 'session-7',
      payload,
    });
    expect(first.payload).toBe(payload);
    const second = store.recordRunEvent({ runId: 'e-1', workflowRef: 'w', type: 'host.log', runnerId: 'host-1', now: iso(T0 + 2) });
    expect(second).toMatchObject({ seq: 3, runnerId: 'host-1', payload: {} });
    const third = store.recordRunEvent({ runId: 'e-1', workflowRef: 'w', type: 'anonymous', now: iso(T0 + 3) });
    expect(third).toMatchObject({ seq: 4, runnerId: null });
    // A claim's generation is recorded with later events.
    store.enqueueWorkflowRun({
      ...store.getWorkflowRun('e-1'),
      workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1' },
      definitionSnapshot: { name: 'echo' },
      runnerId: 'session-7',
      claimToken: 'tok',
      leaseMs: 60_000,
      now: iso(T0 + 4),
    });
    store.recordRunEvent({ runId: 'e-1', workflowRef: 'w', type: 'claimed', now: iso(T0 + 5) });
    expect(
      rows(
        `SELECT e.event_type AS type, e.actor_type AS actorType, e.actor_id AS actorId,
                e.lease_generation AS generation, e.resource_revision AS revision,
                CAST(b.content AS TEXT) AS payload
         FROM events e JOIN blobs b ON b.blob_hash = e.payload_hash WHERE e.resource_id = ? ORDER BY e.event_seq`,
        runResourceId('e-1'),
      ),
    ).toEqual([
      { type: 'run.queued', actorType: 'session', actorId: 'session-e-1', generation: null, revision: 1, payload: '{}' },
      { type: 'node.started', actorType: 'session', actorId: 'session-7', generation: null, revision: 2, payload: '{"a":"x","b":[1,{"a":null,"z":true}]}' },
      { type: 'host.log', actorType: 'host', actorId: 'host-1', generation: null, revision: 3, payload: '{}' },
      { type: 'anonymous', actorType: 'session', actorId: null, generation: null, revision: 4, payload: '{}' },
      { type: 'lease.claimed', actorType: 'session', actorId: 'session-7', generation: 1, revision: 5, payload: `{"expiresAt":${T0 + 4 + 60_000}}` },
      { type: 'claimed', actorType: 'session', actorId: null, generation: 1, revision: 6, payload: '{}' },
    ]);
    // Every event bumped the run, which records viewer deltas.
    expect(rows(`SELECT presentation_revision FROM viewer_runs WHERE run_id = 'e-1'`)).toEqual([{ presentation_revision: 6 }]);
  });

  test('recordRunEvent errors: unknown run before timestamp, then timestamp, then JSON', () => {
    reserve('e-2', T0);
    expectError(() => store.recordRunEvent({ runId: 'ghost', workflowRef: 'w', type: 't', now: 'bad' }), 'Workflow run not found: ghost');
    expectError(() => store.recordRunEvent({ runId: 'e-2', workflowRef: 'w', type: 't', now: 'bad' }), 'Invalid timestamp');
    expectError(() => store.recordRunEvent({ runId: 'e-2', workflowRef: 'w', type: 't', payload: { n: Infinity } }), 'JSON numbers must be finite');
    const readOnly = open({ readOnly: true });
    try {
      expectError(() => readOnly.recordRunEvent({ runId: 'ghost', workflowRef: 'w', type: 't' }), 'Cannot mutate a read-only Pi Workflows database');
    } finally {
      readOnly.close();
    }
    expect(rows('SELECT COUNT(*) AS n FROM events')).toEqual([{ n: 1 }]);
  });

  test('listRunEventsAfter: ascending, paged, default limit 100, run events only', () => {
    reserve('p-1', T0);
    reserve('p-2', T0 + 1);
    for (let i = 0; i < 110; i += 1) {
      store.recordRunEvent({
        runId: i % 2 === 0 ? 'p-1' : 'p-2',
        workflowRef: 'ignored',
        type: `loop.${i}`,
        payload: { i },
        runnerId: i % 3 === 0 ? 'host-x' : undefined,
        now: iso(T0 + 10 + i),
      });
    }
    // A non-run event is never listed.
    withDb((db) => {
      const payload = Buffer.from('{}');
      db.prepare(
        `INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
         VALUES ('session-x', 'session', 'x', 1, ?, ?)`,
      ).run(T0, T0);
      db.prepare(
        `INSERT INTO events(event_id, resource_id, resource_revision, event_type, actor_type, actor_id,
                            lease_generation, payload_hash, recorded_at)
         VALUES ('event-x', 'session-x', 1, 'session.thing', 'system', NULL, NULL, ?, ?)`,
      ).run(createHash('sha256').update(payload).digest(), T0);
    });
    const all = store.listRunEventsAfter(0);
    expect(all).toHaveLength(100);
    expect(all[0]).toEqual({
      seq: 1,
      recordedAt: iso(T0),
      runId: 'p-1',
      workflowRef: 'ref:p-1',
      type: 'run.queued',
      runnerId: 'session-p-1',
      payload: {},
    });
    expect(all[2]).toEqual({
      seq: 3,
      recordedAt: iso(T0 + 10),
      runId: 'p-1',
      workflowRef: 'ref:p-1',
      type: 'loop.0',
      runnerId: 'host-x',
      payload: { i: 0 },
    });
    expect(store.listRunEventsAfter(100, { limit: 5 }).map((event: any) => event.seq)).toEqual([101, 102, 103, 104, 105]);
    const tail = store.listRunEventsAfter(105, {});
    expect(tail.map((event: any) => event.seq)).toEqual([106, 107, 108, 109, 110, 111, 112]);
    expect(store.listRunEventsAfter(0, { limit: 0 })).toEqual([]);
    expect(store.listRunEventsAfter(0, { limit: -1 })).toHaveLength(112);
  });
});
