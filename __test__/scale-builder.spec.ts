// bench:scale's fast builder (bench/scale-build.js) writes its state files with SQL; the bench's
// numbers mean something only if those files hold what the public API would have written. Every
// table of a 200-run file built each way is dumped and compared row by row (in rowid order, so
// the order of insertion too), with what is random or a clock reading in the API path replaced:
// UUIDs, epoch-millisecond timestamps, and each blob hash by its blob's content (timestamps
// replaced there as well). Blob sets are compared as sets of such contents: the API path may
// share one `{expiresAt}` blob between two claims in the same millisecond.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const Database = require('better-sqlite3');
const { SqliteControllerStore } = require('../index.js');
const { addRunThroughApi, buildFast } = require('../bench/scale-build.js');

const RUNS = 200;
const PROJECT = '/piw-scale/project';
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const EPOCH_MS = /\b1\d{12}\b/g;

let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-scale-builder-'));
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Every table of `file`, normalised as the header says, plus the pragmas a store checks. */
function dump(file: string): Record<string, unknown> {
  const db = new Database(file, { readonly: true });
  try {
    const contents = new Map<string, string>();
    for (const row of db.prepare('SELECT blob_hash, media_type, content FROM blobs').all() as any[]) {
      contents.set(row.blob_hash.toString('hex'), `${row.media_type}|${row.content.toString('utf8').replace(EPOCH_MS, 'T')}`);
    }
    const value = (item: unknown): unknown => {
      if (Buffer.isBuffer(item)) {
        const hex = item.toString('hex');
        return contents.has(hex) ? `blob:${contents.get(hex)}` : `hex:${hex}`;
      }
      if (typeof item === 'number' && item > 1e12) return 'T';
      if (typeof item === 'string') return item.replace(UUID, 'U');
      return item;
    };
    const out: Record<string, unknown> = {
      pragmas: ['application_id', 'user_version', 'journal_mode'].map((name) => db.pragma(name, { simple: true })),
      blobs: [...new Set(contents.values())].sort(),
    };
    const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all() as any[];
    for (const { name } of tables) {
      if (name === 'blobs') continue;
      const rows = db.prepare(`SELECT rowid AS _rowid, * FROM "${name}" ORDER BY rowid`).all() as any[];
      out[name] = rows.map((row) => Object.fromEntries(Object.entries(row).map(([key, item]) => [key, value(item)])));
    }
    return out;
  } finally {
    db.close();
  }
}

test(`the fast builder writes the rows the public API writes (${RUNS} runs, every table)`, () => {
  const api = path.join(dir, 'api.sqlite');
  let store = new SqliteControllerStore(api, { projectPath: PROJECT });
  for (let index = 0; index < RUNS; index += 1) addRunThroughApi(store, index);
  store.close();

  const fast = path.join(dir, 'fast.sqlite');
  store = new SqliteControllerStore(fast, { projectPath: PROJECT });
  store.close();
  buildFast(Database, fast, RUNS);
  // A store opens the built file (schema check, open prune) and sees the same runs.
  store = new SqliteControllerStore(fast, { projectPath: PROJECT });
  expect(store.workflowRunListRevision().total).toBe(RUNS);
  store.close();

  const expected = dump(api);
  const actual = dump(fast);
  expect(Object.keys(actual)).toEqual(Object.keys(expected));
  for (const table of Object.keys(expected)) expect({ table, rows: actual[table] }).toEqual({ table, rows: expected[table] });
});
