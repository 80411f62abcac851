// The run lists answer from the run index (src/state/run_index/): every change, made through
// the store, through the raw connection, by another process, or uncommitted inside the caller's
// transaction, must show in the next call.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const T0 = Date.parse('2026-09-02T00:00:00.000Z');

let dir: string;
let file: string;
let store: any;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-read-cache-')));
  file = path.join(dir, 'state.sqlite');
  store = new SqliteControllerStore(file, { projectPath: dir });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function reservation(index: number) {
  return {
    runId: `run-${index}`,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: `sha256:${'cd'.repeat(32)}`,
    definitionSnapshot: { name: 'echo' },
    input: { index },
    runnerId: `session-${index}`,
    originSessionId: `session-${index}`,
    now: new Date(T0 + index * 1000).toISOString(),
  };
}

const ids = (runs: { runId: string }[]) => runs.map((run) => run.runId);

function lists() {
  const views = store.listWorkflowRunViews({ offset: 0, limit: 10 });
  return {
    revision: views.revision,
    views: ids(views.runs),
    runs: ids(store.listWorkflowRuns({ limit: 10 })),
    total: store.workflowRunListRevision().total,
  };
}

describe('run list cache', () => {
  it('shows every change in the next call', () => {
    for (let index = 0; index < 3; index += 1) store.reserveWorkflowRun(reservation(index));
    expect(lists()).toEqual({ revision: expect.any(String), views: ['run-2', 'run-1', 'run-0'], runs: ['run-2', 'run-1', 'run-0'], total: 3 });
    const before = lists().revision;

    // Through the store.
    store.reserveWorkflowRun(reservation(3));
    expect(lists().views).toEqual(['run-3', 'run-2', 'run-1', 'run-0']);
    expect(lists().revision).not.toBe(before);

    // Through the raw connection, in autocommit.
    store.state.connection.prepare('UPDATE run_queue SET created_at = ? WHERE run_id = ?').run(T0 + 99_000, 'run-0');
    expect(lists().views).toEqual(['run-0', 'run-3', 'run-2', 'run-1']);
    expect(lists().runs).toEqual(['run-0', 'run-3', 'run-2', 'run-1']);

    // Uncommitted, inside the caller's transaction; then rolled back.
    const connection = store.state.connection;
    connection.exec('BEGIN');
    connection.prepare('UPDATE run_queue SET created_at = ? WHERE run_id = ?').run(T0 + 199_000, 'run-1');
    expect(lists().views).toEqual(['run-1', 'run-0', 'run-3', 'run-2']);
    connection.exec('ROLLBACK');
    expect(lists().views).toEqual(['run-0', 'run-3', 'run-2', 'run-1']);

    // By another process.
    const script = `
      const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
      const db = new Database(${JSON.stringify(file)});
      db.pragma('busy_timeout = 5000');
      db.prepare('UPDATE run_queue SET created_at = ? WHERE run_id = ?').run(${T0 + 299_000}, 'run-2');
      db.prepare('UPDATE resources SET revision = revision + 5 WHERE resource_id = (SELECT resource_id FROM runs WHERE run_id = ?)').run('run-3');
      db.close();`;
    const revision = lists().revision;
    execFileSync(process.execPath, ['-e', script]);
    expect(lists().views).toEqual(['run-2', 'run-0', 'run-3', 'run-1']);
    expect(lists().runs).toEqual(['run-2', 'run-0', 'run-3', 'run-1']);
    expect(lists().revision).not.toBe(revision);
  });

  it('keeps no record whose error message is missing: a blob inserted later shows', () => {
    for (let index = 0; index < 2; index += 1) store.reserveWorkflowRun(reservation(index));
    const connection = store.state.connection;
    const hash = Buffer.alloc(32, 7);
    const first = (runs: { runId: string; errorMessage: unknown }[]) => runs.find((run) => run.runId === 'run-0')?.errorMessage;
    // The record's and the view's.
    const message = () => {
      const messages = [first(store.listWorkflowRuns({ limit: 10 })), first(store.listWorkflowRunViews({ offset: 0, limit: 10 }).runs)];
      expect(messages[1]).toBe(messages[0]);
      return messages[0];
    };
    connection.exec('PRAGMA foreign_keys = OFF');
    try {
      connection.prepare('UPDATE run_queue SET error_hash = ? WHERE run_id = ?').run(hash, 'run-0');
    } finally {
      connection.exec('PRAGMA foreign_keys = ON');
    }
    expect(message()).toBeNull();
    expect(message()).toBeNull();
    // Inserting a blob changes no run's rows; only the record reads it.
    connection
      .prepare("INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (?, 'text/plain', 5, ?, 0)")
      .run(hash, Buffer.from('found'));
    expect(message()).toBe('found');
  });

  it('pages a kept order like the statement, and filters without it', () => {
    for (let index = 0; index < 7; index += 1) store.reserveWorkflowRun(reservation(index));
    const page = (offset: number, limit: number) => ids(store.listWorkflowRunViews({ offset, limit }).runs);
    expect(page(2, 3)).toEqual(['run-4', 'run-3', 'run-2']);
    expect(page(6, 5)).toEqual(['run-0']);
    expect(page(9, 5)).toEqual([]);
    expect(page(0, 0)).toEqual([]);
    expect(page(1, -1)).toEqual(['run-5', 'run-4', 'run-3', 'run-2', 'run-1', 'run-0']);
    expect(ids(store.listWorkflowRuns({ limit: 2 }))).toEqual(['run-6', 'run-5']);
    expect(ids(store.listWorkflowRuns({}))).toHaveLength(7);
    expect(ids(store.listWorkflowRuns({ limit: -1 }))).toHaveLength(7);
    expect(ids(store.listWorkflowRuns({ limit: 3, excludeRunIds: ['run-6'] }))).toEqual(['run-5', 'run-4', 'run-3']);
  });
});
