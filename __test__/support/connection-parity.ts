// "state.connection behaves like better-sqlite3": one suite, two providers. Every scenario runs
// against a better-sqlite3 connection (on a file of its own) and against `store.state.connection`,
// and the two must give the same results (values, types, errors). connection.spec.ts runs it with
// the dev dependency, better-sqlite3 12, whose SQLite the addon is built on (vendor/README.md);
// better-sqlite3-13.spec.ts with better-sqlite3 13, what Pi has beside the store.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import type BetterSqlite3 from 'better-sqlite3';

const { SqliteControllerStore } = require('../../index.js');

type Db = BetterSqlite3.Database;
type Outcome = { value?: unknown; error?: { name: string; message: string; code?: unknown } };

export type ParityOptions = {
  /**
   * Why this better-sqlite3 bundles another SQLite release than the addon's. Its version test is
   * then a `test.failing`: it passes while the versions differ and turns red the day they agree.
   */
  knownSqliteVersionDifference?: string;
};

function outcome(run: () => unknown): Outcome {
  try {
    return { value: run() };
  } catch (error) {
    const e = error as Error & { code?: unknown };
    return { error: { name: e.name, message: e.message, ...(e.code === undefined ? {} : { code: e.code }) } };
  }
}

/** Registers the suite: `store.state.connection` against a connection of `Database`. */
export function describeConnectionParity(Database: typeof BetterSqlite3, options: ParityOptions = {}): void {
  let folder: string;
  let reference: Db;
  let store: { state: { connection: Db }; close(): void };

  beforeAll(() => {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-connection-'));
    reference = new Database(path.join(folder, 'reference.sqlite'));
    reference.pragma('foreign_keys = ON');
    store = new SqliteControllerStore(path.join(folder, 'state.sqlite'), { projectPath: folder });
    for (const db of [reference, store.state.connection]) {
      db.exec(`CREATE TABLE items (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, size REAL, data BLOB, big INTEGER
      ) STRICT`);
    }
  });

  afterAll(() => {
    reference.close();
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  });

  /** Runs `scenario` on both providers and returns the (equal) outcome. */
  function same(scenario: (db: Db) => unknown): Outcome {
    const expected = outcome(() => scenario(reference));
    const actual = outcome(() => scenario(store.state.connection));
    expect(actual).toEqual(expected);
    return expected;
  }

  describe('state.connection behaves like better-sqlite3', () => {
    test('run reports changes and lastInsertRowid', () => {
      const result = same((db) => db.prepare('INSERT INTO items(name, size) VALUES (?, ?)').run('a', 1.5));
      expect(result.value).toEqual({ changes: 1, lastInsertRowid: 1 });
    });

    test('positional, array and named parameters', () => {
      same((db) => db.prepare('INSERT INTO items(name, size) VALUES (?, ?)').run(['b', 2]));
      same((db) => db.prepare('INSERT INTO items(name, size) VALUES (@name, :size)').run({ name: 'c', size: 3 }));
      const rows = same((db) => db.prepare('SELECT id, name, size FROM items ORDER BY id').all());
      expect(rows.value).toEqual([
        { id: 1, name: 'a', size: 1.5 },
        { id: 2, name: 'b', size: 2 },
        { id: 3, name: 'c', size: 3 },
      ]);
    });

    test('get, pluck, raw and iterate', () => {
      expect(same((db) => db.prepare('SELECT name FROM items WHERE id = ?').get(2)).value).toEqual({ name: 'b' });
      expect(same((db) => db.prepare('SELECT name FROM items WHERE id = ?').get(99)).value).toBeUndefined();
      expect(same((db) => db.prepare('SELECT name FROM items ORDER BY id').pluck().all()).value).toEqual(['a', 'b', 'c']);
      expect(same((db) => db.prepare('SELECT id, name FROM items ORDER BY id').raw().get()).value).toEqual([1, 'a']);
      expect(same((db) => [...db.prepare('SELECT id FROM items ORDER BY id').pluck().iterate()]).value).toEqual([1, 2, 3]);
    });

    test('BLOBs come back as Buffers and BigInts round-trip with safeIntegers', () => {
      same((db) =>
        db.prepare('UPDATE items SET data = ?, big = ? WHERE id = 1').run(Buffer.from([0, 1, 255]), 9007199254740993n),
      );
      const blob = same((db) => db.prepare('SELECT data FROM items WHERE id = 1').pluck().get());
      expect(Buffer.isBuffer(blob.value)).toBe(true);
      expect((blob.value as Buffer).toString('hex')).toBe('0001ff');
      const big = same((db) => db.prepare('SELECT big FROM items WHERE id = 1').pluck().safeIntegers().get());
      expect(big.value).toBe(9007199254740993n);
      same((db) => db.prepare('INSERT INTO items(name) VALUES (?)').safeIntegers().run('d'));
    });

    test('types of bound numbers, NULLs and typeof()', () => {
      const result = same((db) => db.prepare('SELECT typeof(?) AS a, typeof(?) AS b, typeof(?) AS c, typeof(?) AS d').get(1, 1.5, null, 2n));
      expect(result.value).toEqual({ a: 'real', b: 'real', c: 'null', d: 'integer' });
    });

    test('SQLite errors carry the same message and code', () => {
      const unique = same((db) => db.prepare('INSERT INTO items(name) VALUES (?)').run('a'));
      expect(unique.error).toEqual({ name: 'SqliteError', message: 'UNIQUE constraint failed: items.name', code: 'SQLITE_CONSTRAINT_UNIQUE' });
      const syntax = same((db) => db.prepare('SELEC nonsense'));
      expect(syntax.error?.code).toBe('SQLITE_ERROR');
      same((db) => db.prepare('SELECT missing FROM items'));
      same((db) => db.prepare('INSERT INTO items(name, size) VALUES (?, ?)').run('x'));
      same((db) => db.prepare('SELECT 1').run());
      same((db) => db.prepare('INSERT INTO items(name) VALUES (?)').run(true as unknown as string));
    });

    test('expand, bind and busy', () => {
      const expanded = same((db) => db.prepare('SELECT id, name, 1 + 1 AS two FROM items WHERE id = 1').expand().get());
      expect(expanded.value).toEqual({ items: { id: 1, name: 'a' }, $: { two: 2 } });
      const bound = same((db) => db.prepare('SELECT name FROM items WHERE id = ?').bind(2).pluck().get());
      expect(bound.value).toBe('b');
      same((db) => db.prepare('SELECT name FROM items WHERE id = ?').bind(2).get(3));
      same((db) => db.prepare('SELECT name FROM items WHERE id = ?').bind(2).bind(3));
      expect(same((db) => db.prepare('SELECT 1').busy).value).toBe(false);
    });

    test('columns() describes result columns', () => {
      const result = same((db) => db.prepare('SELECT id, name AS label, 1 + 1 AS two FROM items').columns());
      expect((result.value as Array<{ name: string }>).map((column) => column.name)).toEqual(['id', 'label', 'two']);
    });

    test('pragma setters return no rows and take effect; its options are checked as better-sqlite3 checks them', () => {
      // A setter has no result columns; pragma() reads it anyway (better-sqlite3's "pragma mode").
      expect(same((db) => db.pragma('recursive_triggers = 1')).value).toEqual([]);
      expect(same((db) => db.pragma('recursive_triggers', { simple: true })).value).toBe(1);
      expect(same((db) => db.pragma('recursive_triggers = 0', { simple: true })).value).toBeUndefined();
      expect(same((db) => db.pragma('recursive_triggers', null as never)).value).toEqual([{ recursive_triggers: 0 }]);
      expect(same((db) => db.pragma('recursive_triggers', 5 as never)).error?.message).toBe(
        'Expected second argument to be an options object',
      );
      expect(same((db) => db.pragma('recursive_triggers', { simple: 1 } as never)).error?.message).toBe(
        'Expected the "simple" option to be a boolean',
      );
      same((db) => db.pragma(7 as never));
      // prepare() takes one argument: a second one does not turn a write into a reader.
      same((db) => (db.prepare as (source: string, extra: unknown) => BetterSqlite3.Statement)('PRAGMA recursive_triggers = 0', true).all());
    });

    test('pluck, raw and expand only for statements that return data; toggles only booleans', () => {
      const write = 'INSERT INTO items(name) VALUES (?)';
      for (const mode of ['pluck', 'raw', 'expand'] as const) {
        expect(same((db) => db.prepare(write)[mode]()).error?.message).toBe(
          `The ${mode}() method is only for statements that return data`,
        );
        expect(same((db) => db.prepare('SELECT 1 AS one')[mode](1 as never)).error?.message).toBe(
          'Expected first argument to be a boolean',
        );
        same((db) => db.prepare('SELECT 1 AS one')[mode](undefined as never));
      }
      same((db) => db.prepare('SELECT 1 AS one').safeIntegers('yes' as never));
      same((db) => db.defaultSafeIntegers(0 as never) && null);
      expect(same((db) => db.prepare('SELECT 1 AS one').raw(true).raw(false).pluck(false).get()).value).toEqual({ one: 1 });
    });

    test('exec, pragma and transaction functions', () => {
      same((db) => db.exec('CREATE TABLE IF NOT EXISTS notes (body TEXT) STRICT; INSERT INTO notes VALUES (\'x\');') && null);
      expect(same((db) => db.pragma('foreign_keys', { simple: true })).value).toBe(1);
      same((db) => db.pragma('table_info(notes)'));
      const insert = (db: Db) => db.transaction((body: string) => db.prepare('INSERT INTO notes VALUES (?)').run(body));
      same((db) => insert(db)('y'));
      same((db) => {
        try {
          db.transaction(() => {
            db.prepare('INSERT INTO notes VALUES (?)').run('rolled back');
            throw new Error('abort');
          })();
        } catch {
          // the transaction is rolled back
        }
        return [db.inTransaction, db.prepare('SELECT body FROM notes ORDER BY rowid').pluck().all()];
      });
      const nested = same((db) =>
        db.transaction(() => {
          db.prepare('INSERT INTO notes VALUES (?)').run('outer');
          try {
            db.transaction(() => {
              db.prepare('INSERT INTO notes VALUES (?)').run('inner');
              throw new Error('inner abort');
            })();
          } catch {
            // only the savepoint is rolled back
          }
          return db.prepare('SELECT body FROM notes ORDER BY rowid').pluck().all();
        })(),
      );
      expect(nested.value).toEqual(['x', 'y', 'outer']);
    });

    test('a transaction function: its shape, and a promise returned rolls it back', () => {
      const shape = same((db) => {
        // better-sqlite3's types leave out what is checked here.
        const transaction = db.transaction(() => 1) as unknown as Record<string, Record<string, unknown>> & (() => number);
        const variants = ['default', 'deferred', 'immediate', 'exclusive'] as const;
        return {
          name: transaction.name,
          length: transaction.length,
          keys: Object.keys(transaction),
          own: Reflect.ownKeys(transaction),
          database: transaction.database === (db as unknown),
          shared: variants.every((v) => variants.every((w) => transaction[v][w] === transaction[w])),
          descriptor: { ...Object.getOwnPropertyDescriptor(transaction, 'immediate'), value: undefined },
        };
      });
      expect((shape.value as { keys: string[] }).keys).toEqual(['database']);
      const promised = same((db) => {
        const count = () => db.prepare('SELECT count(*) FROM items').pluck().get();
        const before = count();
        let error: unknown;
        try {
          db.transaction(() => {
            db.prepare('INSERT INTO items(name) VALUES (?)').run('promised');
            return Promise.resolve(1);
          })();
        } catch (caught) {
          error = caught instanceof Error ? `${caught.name}: ${caught.message}` : caught;
        }
        return { error, rolledBack: count() === before, inTransaction: db.inTransaction };
      });
      expect(promised.value).toEqual({
        error: 'TypeError: Transaction function cannot return a promise',
        rolledBack: true,
        inTransaction: false,
      });
    });

    const known = options.knownSqliteVersionDifference;
    (known === undefined ? test : test.failing)(
      known === undefined ? 'the same SQLite version' : `the same SQLite version (known to differ: ${known})`,
      () => {
        same((db) => db.prepare('SELECT sqlite_version()').pluck().get());
      },
    );

    test('SQLite built with the options that change what SQL means', () => {
      // REAL to TEXT: 3.50 wrote 2 ** 53 as '9.00719925474099e+15'.
      expect(same((db) => db.prepare('SELECT CAST(? AS TEXT)').pluck().get(2 ** 53)).value).toBe('9007199254740992.0');
      expect(same((db) => db.prepare('SELECT "no such column"')).error?.code).toBe('SQLITE_ERROR');
      expect(same((db) => db.prepare("SELECT x'61' LIKE 'a'").pluck().get()).value).toBe(0);
      expect(same((db) => db.prepare('SELECT sqrt(16) + ln(1) + floor(pi())').pluck().get()).value).toBe(7);
      expect(same((db) => db.prepare('SELECT median(size) FROM items').pluck().get()).error).toBeUndefined();
      same((db) => db.exec('CREATE TABLE IF NOT EXISTS queue (n INTEGER) STRICT; INSERT INTO queue VALUES (1), (2), (3);') && null);
      expect(same((db) => db.prepare('DELETE FROM queue ORDER BY n LIMIT 2').run()).value).toEqual({
        changes: 2,
        lastInsertRowid: expect.any(Number),
      });
      expect(same((db) => db.prepare('UPDATE queue SET n = 9 LIMIT 1').run().changes).value).toBe(1);
      for (const module of ['fts4(body)', 'geopoly()', 'fts5(body)', 'rtree(id, x0, x1)']) {
        same((db) => db.exec(`CREATE VIRTUAL TABLE temp.v USING ${module}; DROP TABLE temp.v;`) && null);
      }
    });

    test('prepare takes one statement, and judges what follows it as better-sqlite3 does', () => {
      const sources = [
        'SELECT 1; SELECT 2',
        'SELECT 1; SELECT * FROM no_such_table',
        'SELECT 1; garbage(',
        'SELECT 1; /',
        'SELECT 1; -',
        'SELECT 1; \u00a0',
        '',
        '  ;',
        '-- a comment alone',
        'SELECT 1;',
        'SELECT 1; -- trailing',
        'SELECT 1; /* a */ -- b\n ; \f\v',
        'SELECT 1 /* unterminated',
        'SELECT 1;\0 SELECT 2',
      ];
      for (const source of sources) same((db) => db.prepare(source).pluck().get() ?? null);
      expect(same((db) => db.prepare('SELECT 1; SELECT 2')).error).toEqual({
        name: 'RangeError',
        message: 'The supplied SQL string contains more than one statement',
      });
      expect(same((db) => db.prepare(' ; -- nothing')).error).toEqual({
        name: 'RangeError',
        message: 'The supplied SQL string contains no statements',
      });
    });

    test('reads see the store and the store sees connection writes', () => {
      const conn = store.state.connection;
      const projects = conn.prepare('SELECT canonical_path FROM projects').pluck().all();
      expect(projects).toEqual([fs.realpathSync(folder)]);
      expect(conn.open).toBe(true);
      expect(conn.readonly).toBe(false);
      expect(conn.name).toBe(path.join(folder, 'state.sqlite'));
    });
  });
}
