// Code typed against better-sqlite3's own `Database` type, the way tests around the reference
// store use `store.state.connection`; it must compile against pi-workflows-native unchanged.
import type BetterSqlite3 from 'better-sqlite3';

import { SqliteControllerStore } from '../../index';

type Db = BetterSqlite3.Database;
type Stmt<P extends unknown[], R> = BetterSqlite3.Statement<P, R>;

// Every member is typed by better-sqlite3's own declarations. Methods returning `this` are
// restated structurally: picking them from better-sqlite3 would pin `this` to its full Database
// (function, aggregate, loadExtension, …), which the native connection leaves out.
interface UsedStatement<P extends unknown[], R> {
  source: Stmt<P, R>['source'];
  reader: Stmt<P, R>['reader'];
  readonly: Stmt<P, R>['readonly'];
  busy: Stmt<P, R>['busy'];
  run: Stmt<P, R>['run'];
  get: Stmt<P, R>['get'];
  all: Stmt<P, R>['all'];
  iterate: Stmt<P, R>['iterate'];
  columns: Stmt<P, R>['columns'];
  pluck(toggleState?: boolean): UsedStatement<P, R>;
  expand(toggleState?: boolean): UsedStatement<P, R>;
  raw(toggleState?: boolean): UsedStatement<P, R>;
  bind(...params: P): UsedStatement<P, R>;
  safeIntegers(toggleState?: boolean): UsedStatement<P, R>;
}

interface UsedDatabase {
  memory: Db['memory'];
  readonly: Db['readonly'];
  name: Db['name'];
  open: Db['open'];
  inTransaction: Db['inTransaction'];
  prepare<P extends unknown[] = unknown[], R = unknown>(source: string): UsedStatement<P, R>;
  transaction: Db['transaction'];
  pragma: Db['pragma'];
  exec(source: string): UsedDatabase;
  close(): UsedDatabase;
  defaultSafeIntegers(toggleState?: boolean): UsedDatabase;
}

export function seedEngineRows(db: UsedDatabase, runId: string): number {
  const insert = db.prepare<[string, string, number]>(
    'INSERT INTO interactive_requests(request_id, run_id, created_at) VALUES (?, ?, ?)',
  );
  const seed = db.transaction((ids: string[]) => {
    let changes = 0;
    for (const id of ids) changes += insert.run(id, runId, Date.now()).changes;
    return changes;
  });
  const count = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM runs WHERE run_id = ?').get(runId)?.n ?? 0;
  const names: string[] = db.prepare('SELECT name FROM sqlite_schema').pluck().all() as string[];
  const mode = db.pragma('journal_mode', { simple: true });
  db.exec('SELECT 1');
  return seed.immediate(['a', 'b']) + count + names.length + (mode === 'wal' ? 1 : 0) + (db.inTransaction ? 1 : 0);
}

declare const store: SqliteControllerStore;
seedEngineRows(store.state.connection, 'run-1');
