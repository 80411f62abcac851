// The performance rewrites must give what the reference's single statements give: the run-view
// page (two steps instead of one sorted join, including the order of equal created_at) and the
// blob prune (hash set instead of a temporary table).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-var-requires
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
