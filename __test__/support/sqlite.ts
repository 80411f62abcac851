// The replayer's own SQLite connection (better-sqlite3, as the reference uses): `sql` steps and
// dumps never go through the implementation under test.

import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';

import { Mismatch } from './compare';
import { TextBlob } from './values';

const BUSY_TIMEOUT_MS = 5000;

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** Opens `file`, enables foreign keys, runs one statement, closes; returns `changes`. */
export function runSql(file: string, sql: string, params: unknown[]): number {
  const db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  try {
    db.pragma('foreign_keys = ON');
    return db.prepare(sql).run(...params).changes;
  } finally {
    db.close();
  }
}

export type Dump = Record<string, Record<string, unknown>[]>;

/** What a dump reads through: better-sqlite3's API, or a store's `state.connection`. */
export type DumpConnection = {
  prepare(sql: string): { get(...params: unknown[]): unknown; all(...params: unknown[]): unknown[]; run(...params: unknown[]): { changes: number } };
  defaultSafeIntegers(toggle?: boolean): unknown;
};

function tableOrder(db: DumpConnection, table: string): string {
  const listed = db.prepare('SELECT wr FROM pragma_table_list WHERE schema = ? AND name = ?').get('main', table) as
    | { wr: number | bigint }
    | undefined;
  if (listed === undefined || Number(listed.wr) === 0) return 'rowid';
  // WITHOUT ROWID tables have no insertion order; their primary key order is what a scan gives.
  const keys = db
    .prepare('SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk')
    .all(table) as { name: string }[];
  return keys.map((key) => quote(key.name)).join(', ');
}

function cell(table: string, column: string, value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value;
  }
  if (table === 'blobs' && column === 'content' && Buffer.isBuffer(value)) {
    return new TextBlob(value.toString('utf8'), value);
  }
  return value;
}

/**
 * Every table of `file` in sqlite_schema rowid order (sqlite_sequence included where SQLite put
 * it), each as `SELECT * FROM "<table>" ORDER BY rowid` rows with columns in table order.
 * INTEGER → number (bigint if unsafe), BLOB → Buffer, `blobs.content` → TextBlob.
 */
export function dumpDatabase(file: string): Dump {
  const db = new Database(file, { fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
  try {
    return dumpConnection(db);
  } finally {
    db.close();
  }
}

/** {@link dumpDatabase} through an open connection (left with safe integers on). */
export function dumpConnection(db: DumpConnection): Dump {
  db.defaultSafeIntegers(true);
  const tables = db
    .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY rowid")
    .all() as { name: string }[];
  const dump: Dump = {};
  for (const { name } of tables) {
    const rows = db.prepare(`SELECT * FROM ${quote(name)} ORDER BY ${tableOrder(db, name)}`).all() as Record<
      string,
      unknown
    >[];
    dump[name] = rows.map((row) => {
      const out: Record<string, unknown> = {};
      for (const [column, value] of Object.entries(row)) {
        Object.defineProperty(out, column, {
          value: cell(name, column, value),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    });
  }
  return dump;
}

/** Every `blobs` row must be content-addressed: blob_hash = sha256(content). */
export function checkBlobHashes(dump: Dump): void {
  const blobs = dump.blobs ?? [];
  blobs.forEach((row, index) => {
    const content = row.content;
    const hash = row.blob_hash;
    if (!(content instanceof TextBlob) || !Buffer.isBuffer(hash)) return;
    const digest = createHash('sha256').update(content.bytes).digest();
    if (!digest.equals(hash)) {
      throw new Mismatch(
        `tables.blobs[${index}].blob_hash`,
        'blob_hash is not the SHA-256 of content',
        { $buffer: digest.toString('hex') },
        hash,
      );
    }
  });
}
