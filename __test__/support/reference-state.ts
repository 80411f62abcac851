// A new state file made as the reference's StateDatabase makes one (@osolmaz/pi-workflows 0.16.1,
// src/state/database.ts), through any better-sqlite3: the file 0600, its pragmas, then in one
// exclusive transaction the schema (src/state/schema.sql, the reference's text byte for byte),
// application_id, user_version and the schema_meta row.
import fs from 'node:fs';
import path from 'node:path';

import type BetterSqlite3 from 'better-sqlite3';

import { REPO_ROOT } from './paths';

const SCHEMA_SQL = fs.readFileSync(path.join(REPO_ROOT, 'src', 'state', 'schema.sql'), 'utf8');
const SCHEMA_DIGEST = '0469f429aad9046cacf63bf9df4ef8c98277ba633103a2478d9fc40226666327';
const APPLICATION_ID = 0x50495746;

/**
 * Opens `file` with `Database` and creates the state in it, stamped `now`, leaving the exclusive
 * transaction open: until the caller commits, other connections see an empty file.
 */
export function beginStateFile(Database: typeof BetterSqlite3, file: string, now: number): BetterSqlite3.Database {
  const db = new Database(file, { timeout: 5000 });
  fs.chmodSync(file, 0o600);
  db.pragma('foreign_keys = ON');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('wal_autocheckpoint = 1000');
  db.pragma('journal_size_limit = 67108864');
  db.exec('BEGIN EXCLUSIVE');
  db.exec(SCHEMA_SQL);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.pragma('user_version = 1');
  db.prepare('INSERT INTO schema_meta VALUES (1, ?, 1, ?, ?, ?, ?)').run(
    'pi-workflows-state',
    Buffer.from(SCHEMA_DIGEST, 'hex'),
    '0.14.0',
    now,
    now,
  );
  return db;
}

/** {@link beginStateFile}, committed and closed. */
export function createStateFile(Database: typeof BetterSqlite3, file: string, now: number): void {
  const db = beginStateFile(Database, file, now);
  db.exec('COMMIT');
  db.close();
}
