// The read-write open prunes on a connection and thread of its own (src/state/prune/at_open.rs):
// nothing reached through the API may see the file unpruned — not the store itself, not a store
// opened right after it in this process — and the file is pruned once close() returns.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');
const Database = require('better-sqlite3');

const ORPHANS = 30_000;

let dir: string;
let file: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-open-prune-')));
  file = path.join(dir, 'state.sqlite');
  const store = new SqliteControllerStore(file, { projectPath: dir });
  store.reserveWorkflowRun({
    runId: 'run-1',
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: `sha256:${'ab'.repeat(32)}`,
    definitionSnapshot: { name: 'echo' },
    input: { n: 1 },
    runnerId: 'session-1',
    originSessionId: 'session-1',
  });
  store.close();
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Adds `ORPHANS` blobs nothing refers to, behind the store's back; the blob count before. */
function addOrphans(): number {
  const db = new Database(file);
  const before = db.prepare('SELECT count(*) AS n FROM blobs').get().n;
  db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
     SELECT randomblob(32), 'text/plain', 1, x'41', 0 FROM n`,
  ).run(ORPHANS);
  db.close();
  return before;
}

const blobCount = (store: any) => store.state.connection.prepare('SELECT count(*) AS n FROM blobs').get().n;

test('the store and a store opened right after it see the pruned file at once', () => {
  const referenced = addOrphans();
  const store = new SqliteControllerStore(file, { projectPath: dir });
  const reader = new SqliteControllerStore(file, { projectPath: dir, readOnly: true });
  try {
    expect(blobCount(reader)).toBe(referenced);
    expect(blobCount(store)).toBe(referenced);
    expect(store.getWorkflowRun('run-1')?.input).toEqual({ n: 1 });
  } finally {
    reader.close();
    store.close();
  }
});

test('the first call after the constructor sees the pruned file, and so does another connection after close()', () => {
  const referenced = addOrphans();
  const store = new SqliteControllerStore(file, { projectPath: dir });
  expect(store.state.pruneUnreferencedBlobs()).toBe(0);
  store.close();
  const again = addOrphans();
  expect(again).toBe(referenced);
  new SqliteControllerStore(file, { projectPath: dir }).close();
  const db = new Database(file, { readonly: true });
  try {
    expect(db.prepare('SELECT count(*) AS n FROM blobs').get().n).toBe(referenced);
  } finally {
    db.close();
  }
});

test('a store on a new project registers it after the prune, as the reference does', () => {
  const referenced = addOrphans();
  const elsewhere = path.join(dir, 'elsewhere');
  const store = new SqliteControllerStore(file, { projectPath: elsewhere });
  try {
    expect(store.state.connection.prepare('SELECT count(*) AS n FROM projects WHERE canonical_path = ?').get(elsewhere).n).toBe(1);
    expect(blobCount(store)).toBe(referenced);
  } finally {
    store.close();
  }
});

test('an open that cannot take the write lock fails as before', async () => {
  // The lock is held by another process (locks of one process do not exclude each other).
  const holder = spawn(process.execPath, [
    '-e',
    `const db = new (require(${JSON.stringify(require.resolve('better-sqlite3'))}))(${JSON.stringify(file)});
     db.exec('BEGIN IMMEDIATE'); process.stdout.write('locked'); setTimeout(() => {}, 60_000);`,
  ]);
  try {
    await new Promise<void>((resolve, reject) => {
      holder.stdout.on('data', () => resolve());
      holder.on('exit', () => reject(new Error('the lock holder exited')));
    });
    expect(() => new SqliteControllerStore(file, { projectPath: dir })).toThrow('database is locked');
  } finally {
    holder.kill();
  }
}, 30_000);

/**
 * Adds `events` events, each referring to a blob of its own, and as many blobs nothing refers
 * to, behind the store's back: a file large enough for the prune to read in ranges with helper
 * connections (src/state/prune/parts.rs).
 */
function addEventsAndOrphans(events: number): void {
  const db = new Database(file);
  db.pragma('foreign_keys = OFF');
  const resource = db.prepare('SELECT resource_id AS id FROM runs LIMIT 1').get().id;
  db.transaction(() => {
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ? * 2)
       INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
       SELECT randomblob(32), 'text/plain', 1, x'41', 0 FROM n`,
    ).run(events);
    // Every other one of the new blobs (the highest row ids).
    db.prepare(
      `INSERT INTO events(event_id, resource_id, resource_revision, event_type, actor_type,
                          payload_hash, recorded_at)
       SELECT 'bulk-' || rowid, ?, 1000 + rowid, 'bulk.note', 'system', blob_hash, 0
       FROM blobs WHERE rowid % 2 = 0 ORDER BY rowid DESC LIMIT ?`,
    ).run(resource, events);
  })();
  db.close();
}

const fileBlobCount = () => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT count(*) AS n FROM blobs').get().n;
  } finally {
    db.close();
  }
};

test('an open of a large file prunes exactly the unreferenced blobs, helpers reading beside it', () => {
  const referenced = fileBlobCount();
  addEventsAndOrphans(40_000);
  expect(fileBlobCount()).toBe(referenced + 80_000);
  new SqliteControllerStore(file, { projectPath: dir }).close();
  expect(fileBlobCount()).toBe(referenced + 40_000);
  const db = new Database(file, { readonly: true });
  try {
    const dangling = db
      .prepare('SELECT count(*) AS n FROM events e WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.blob_hash = e.payload_hash)')
      .get().n;
    expect(dangling).toBe(0);
    // Past the size below which the prune reads each table whole, on its own connection.
    expect(db.pragma('page_count', { simple: true })).toBeGreaterThan(2_048);
  } finally {
    db.close();
  }
}, 60_000);
