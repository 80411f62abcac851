// Issue 36, item 2: a file's last close that proves it has no unreferenced blob leaves a stamp
// (`<file>-runlog`, 64 bytes) that spares the next open its prune's read of the whole file
// (docs/run-index.md, "Across the last close"). Through the public constructor and close, as a
// CLI command opens a file nobody else holds: the stamp must survive every clean cycle, and a
// change by another program must still be pruned.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';

const { SqliteControllerStore } = require('../index.js');

let dir: string;
let file: string;
let runlog: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-stamp-')));
  file = path.join(dir, 'state.sqlite');
  runlog = `${file}-runlog`;
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const openClose = () => new SqliteControllerStore(file, { projectPath: dir }).close();
const stampSize = () => (fs.existsSync(runlog) ? fs.statSync(runlog).size : null);

function withRaw<T>(operation: (db: Database.Database) => T): T {
  const db = new Database(file);
  try {
    return operation(db);
  } finally {
    db.close();
  }
}

const blobCount = () => withRaw((db) => db.prepare('SELECT count(*) AS n FROM blobs').get() as { n: number }).n;
const insertOrphan = () =>
  withRaw((db) =>
    db
      .prepare("INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (randomblob(32), 'text/plain', 1, x'00', 0)")
      .run(),
  );

test('every clean open and close keeps the stamp, whatever the open does to the file’s metadata', () => {
  const store = new SqliteControllerStore(file, { projectPath: dir });
  store.putResource({ controller: 'c', key: 'k', spec: { n: 1 }, initialStatus: { phase: 'new' } });
  store.recordEvent({ controller: 'c', key: 'k', type: 'note', payload: { n: 1 } });
  store.close();
  expect(stampSize()).toBe(64);
  // Each open ends with the reference's chmod of the file, which moves its change time: the
  // stamp must not depend on it (it did, and every other close removed the journal).
  for (let cycle = 0; cycle < 4; cycle += 1) {
    openClose();
    expect([cycle, stampSize()]).toEqual([cycle, 64]);
  }
});

test('another program’s commit after the last close is pruned by the next open', () => {
  openClose();
  expect(stampSize()).toBe(64);
  const before = blobCount();
  insertOrphan();
  expect(blobCount()).toBe(before + 1);
  openClose();
  expect(blobCount()).toBe(before);
  // That prune deleted a blob, so it proved nothing; the next one finds nothing and stamps.
  openClose();
  openClose();
  expect(stampSize()).toBe(64);
});

test('a commit that may leave a blob unreferenced takes the journal along at the last close', () => {
  const store = new SqliteControllerStore(file, { projectPath: dir });
  store.putResource({ controller: 'c', key: 'k', spec: { n: 1 }, initialStatus: { phase: 'new' } });
  // The spec replaced: its first version is nothing's now.
  store.putResource({ controller: 'c', key: 'k', spec: { n: 2 }, initialStatus: { phase: 'new' } });
  store.close();
  expect(stampSize()).toBeNull();
});
