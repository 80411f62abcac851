// The performance rewrites must give what the reference's single statements give: the run-view
// page (two steps instead of one sorted join, including the order of equal created_at) and the
// blob prune (hash set instead of a temporary table).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const T0 = Date.parse('2026-09-02T00:00:00.000Z');
const DIGEST = `sha256:${'cd'.repeat(32)}`;

const VIEW_SELECT = `SELECT r.run_id FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
  JOIN run_queue q ON q.run_id = r.run_id
  LEFT JOIN run_bindings b ON b.run_id = r.run_id
  LEFT JOIN run_sources source ON source.run_id = r.run_id AND source.mount_path = ''
  LEFT JOIN blobs error ON error.blob_hash = q.error_hash
  ORDER BY q.created_at DESC LIMIT ? OFFSET ?`;

let dir: string;
let store: any;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-perf-eq-')));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function reserve(index: number, now: number): void {
  const runId = `run-${String(index).padStart(3, '0')}-${(index * 7919) % 97}`;
  store.reserveWorkflowRun({
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo' },
    input: { index },
    runnerId: `session-${index}`,
    originSessionId: `session-${index}`,
    now: new Date(now).toISOString(),
  });
}

describe('listWorkflowRunViews', () => {
  it('pages exactly like the single sorted statement, ties included', () => {
    // Runs in groups sharing created_at, inserted out of time order.
    for (let index = 0; index < 90; index += 1) reserve(index, T0 + ((index * 37) % 7) * 1000);
    // Row id gaps, and queue rows left without their run (foreign keys off, as another writer could).
    store.state.connection.exec('PRAGMA foreign_keys = OFF');
    for (const index of [5, 17, 40]) {
      const runId = `run-${String(index).padStart(3, '0')}-${(index * 7919) % 97}`;
      store.state.connection.prepare('DELETE FROM runs WHERE run_id = ?').run(runId);
    }
    store.state.connection.exec('PRAGMA foreign_keys = ON');
    const single = store.state.connection.prepare(VIEW_SELECT);
    for (const [offset, limit] of [[0, 50], [3, 10], [20, 20], [80, 50], [0, 200], [100, 5], [7, 0], [0, -1]]) {
      const expected = single.all(limit, offset).map((row: { run_id: string }) => row.run_id);
      const page = store.listWorkflowRunViews({ offset, limit });
      expect([offset, limit, page.runs.map((view: { runId: string }) => view.runId)]).toEqual([offset, limit, expected]);
    }
  });
});

const RUN_SELECT = `SELECT r.run_id, r.resource_id, d.workflow_name, r.workflow_ref, r.status, r.paused, r.definition_digest,
  d.definition_hash, r.input_hash, r.launch_options_hash, q.status, q.available_at, q.affinity_runner_id,
  q.consecutive_errors, q.error_code, q.error_hash, b.origin_session_id, b.execution_mode, r.parent_run_id,
  r.root_run_id, r.lineage_kind, r.restart_number, r.parent_terminal_fingerprint, q.created_at, q.updated_at,
  q.started_at, q.finished_at, l.generation, l.owner_id, l.expires_at
  FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
  JOIN run_queue q ON q.run_id = r.run_id
  LEFT JOIN run_bindings b ON b.run_id = r.run_id
  JOIN leases l ON l.resource_id = r.resource_id`;

describe('listWorkflowRuns', () => {
  it('orders exactly like the single sorted statement, ties included, with and without a project', () => {
    for (let index = 0; index < 60; index += 1) reserve(index, T0 + ((index * 37) % 5) * 1000);
    // Another project's runs in the same file, and runs.created_at apart from the queue's.
    const other = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { state: store.state, projectPath: path.join(dir, 'other') });
    const global = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { state: store.state, global: true });
    const before = store;
    store = other;
    for (let index = 60; index < 80; index += 1) reserve(index, T0 + ((index * 37) % 5) * 1000);
    store = before;
    const connection = store.state.connection;
    connection.prepare('UPDATE runs SET created_at = created_at + (rowid % 3) WHERE rowid % 4 = 0').run();
    const projectId = connection.prepare('SELECT project_id FROM projects WHERE canonical_path = ?').get(dir).project_id;
    const single = (where: string, ...params: unknown[]) =>
      connection
        .prepare(`${RUN_SELECT} ${where} ORDER BY q.created_at DESC LIMIT 1000`)
        .all(...params)
        .map((row: { run_id: string }) => row.run_id);
    const ids = (runs: { runId: string }[]) => runs.map((run) => run.runId);
    const cases: [any, Record<string, unknown>, string, unknown[]][] = [
      [store, {}, 'WHERE r.project_id = ?', [projectId]],
      [store, { statuses: ['queued'] }, 'WHERE r.project_id = ? AND q.status IN (?)', [projectId, 'queued']],
      [store, { excludeRunIds: ['run-003-86'] }, 'WHERE r.project_id = ? AND r.run_id NOT IN (?)', [projectId, 'run-003-86']],
      [global, {}, '', []],
    ];
    for (const [which, options, where, params] of cases) {
      const expected = single(where, ...params);
      expect(expected.length).toBeGreaterThan(0);
      expect(ids(which.listWorkflowRuns(options))).toEqual(expected);
      expect(ids(which.listWorkflowRuns({ ...options, limit: 7 }))).toEqual(expected.slice(0, 7));
    }
  });
});

describe('listEvents', () => {
  it('lists exactly what the single statement lists, when the newest events are runs\' too', () => {
    const put = (key: string) => store.putResource({ controller: key.startsWith('a') ? 'alpha' : 'beta', key, spec: { key }, initialStatus: {} });
    const note = (key: string, n: number) =>
      store.recordEvent({ controller: key.startsWith('a') ? 'alpha' : 'beta', key, type: 'note', payload: { n } });
    for (const key of ['a1', 'a2', 'b1']) put(key);
    for (let n = 0; n < 30; n += 1) note(['a1', 'a2', 'b1'][n % 3], n);
    // Then many run events: the controller events are no longer among the newest.
    for (let index = 0; index < 40; index += 1) reserve(index, T0);
    note('b1', 99);
    const projectId = store.state.connection.prepare('SELECT project_id FROM projects WHERE canonical_path = ?').get(dir).project_id;
    const single = (extra: string, params: unknown[], limit: number) =>
      store.state.connection
        .prepare(
          `SELECT e.event_seq FROM events e JOIN resources r ON r.resource_id = e.resource_id
           JOIN controller_resources c ON c.resource_id = r.resource_id
           WHERE r.resource_type = 'controller' AND c.project_id = ? ${extra} ORDER BY e.event_seq DESC LIMIT ?`,
        )
        .all(projectId, ...params, limit)
        .map((row: { event_seq: number }) => row.event_seq);
    const seqs = (events: { seq: number }[]) => events.map((event) => event.seq);
    for (const limit of [1, 2, 5, 20, 33, 100, 1000]) {
      expect([limit, seqs(store.listEvents({ limit }))]).toEqual([limit, single('', [], limit)]);
      expect([limit, seqs(store.listEvents({ controller: 'alpha', limit }))]).toEqual([limit, single('AND c.controller_name = ?', ['alpha'], limit)]);
      expect([limit, seqs(store.listEvents({ controller: 'alpha', key: 'a2', limit }))]).toEqual([
        limit,
        single('AND c.controller_name = ? AND c.resource_key = ?', ['alpha', 'a2'], limit),
      ]);
    }
    expect(seqs(store.listEvents({}))).toEqual(single('', [], 100));
    expect(seqs(store.listEvents({ limit: -1 }))).toEqual(single('', [], -1));
    expect(() => store.listEvents({ limit: 2.5 })).toThrow('datatype mismatch');
  });
});

describe('event payloads written straight as text', () => {
  it('come back as parsed and key-sorted values, whatever the stored text looks like', () => {
    store.putResource({ controller: 'alpha', key: 'a1', spec: {}, initialStatus: {} });
    store.recordEvent({ controller: 'alpha', key: 'a1', type: 'note', payload: { z: [1, { y: 2, x: 'é\u2028' }], a: null } });
    store.recordEvent({ controller: 'alpha', key: 'a1', type: 'note', payload: { only: 1 } });
    reserve(0, T0);
    store.recordRunEvent({ runId: 'run-000-0', type: 'run.note', payload: { b: 1, a: [] } });
    const connection = store.state.connection;
    // Stored text that is valid JSON but not canonical: keys out of order, escapes, spacing.
    const rewrite = (match: string, text: string) => {
      const hash = connection.prepare('SELECT blob_hash FROM blobs WHERE CAST(content AS TEXT) = ?').get(match).blob_hash;
      const bytes = Buffer.from(text);
      connection.prepare('UPDATE blobs SET content = ?, byte_length = ? WHERE blob_hash = ?').run(bytes, bytes.length, hash);
    };
    rewrite('{"only":1}', '{ "only" : 1.0, "\u0062": "\u00e9" }');
    rewrite('{"a":[],"b":1}', '{"b":1,"a":[],"b":2}');
    const controllerPayloads = store.listEvents({ controller: 'alpha', limit: 10 }).map((event: { payload: unknown }) => event.payload);
    expect(JSON.stringify(controllerPayloads)).toBe(
      JSON.stringify([{ b: 'é', only: 1 }, { a: null, z: [1, { x: 'é\u2028', y: 2 }] }, { generation: 1 }]),
    );
    const runPayloads = store.listRunEventsAfter(0, { limit: 100 }).map((event: { payload: unknown }) => event.payload);
    expect(JSON.stringify(runPayloads[runPayloads.length - 1])).toBe(JSON.stringify({ a: [], b: 2 }));
  });
});

describe('pruneUnreferencedBlobs', () => {
  it('deletes exactly the blobs no foreign-key column refers to', () => {
    for (let index = 0; index < 5; index += 1) reserve(index, T0);
    const connection = store.state.connection;
    const orphan = (text: string) => store.state.putText(text, T0);
    const orphans = ['a', 'b', 'c'].map(orphan);
    // A TEXT value equal to a hash's bytes refers to nothing (BLOB comparison).
    connection.prepare('UPDATE runs SET title = ? WHERE run_id = ?').run(orphans[0].toString('latin1'), 'run-000-0');
    const before = connection.prepare('SELECT count(*) AS n FROM blobs').get().n;
    expect(store.state.pruneUnreferencedBlobs()).toBe(3);
    expect(connection.prepare('SELECT count(*) AS n FROM blobs').get().n).toBe(before - 3);
    for (const hash of orphans) {
      expect(connection.prepare('SELECT count(*) AS n FROM blobs WHERE blob_hash = ?').get(hash).n).toBe(0);
    }
    // Everything left is referenced by some blob column, and a second prune finds nothing.
    const columns: [string, string][] = [];
    for (const { name } of connection.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'blobs'").all()) {
      for (const { from } of connection.prepare("SELECT \"from\" FROM pragma_foreign_key_list(?) WHERE \"table\" = 'blobs'").all(name)) {
        columns.push([name, from]);
      }
    }
    const referenced = columns.map(([table, column]) => `EXISTS (SELECT 1 FROM "${table}" t WHERE t."${column}" = b.blob_hash)`).join(' OR ');
    expect(connection.prepare(`SELECT count(*) AS n FROM blobs b WHERE NOT (${referenced})`).get().n).toBe(0);
    expect(store.state.pruneUnreferencedBlobs()).toBe(0);
  });
});
