// The state database file itself: what a new database contains (fixtures/schema.json), that the
// reference's own file opens read-only without being touched and read-write, and how foreign or
// broken files are refused. Only the constructor and close are used.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';

import { assertUtc, jestClock } from './support/clock';
import { conformancePaths } from './support/paths';
import { Bindings } from './support/placeholders';
import { expectError, loadTrace, replayTrace, Step, StoreClass, Trace } from './support/replayer';
import { dumpDatabase } from './support/sqlite';
import { FIXTURE_TRACE } from './support/traces';

assertUtc();

const { SqliteControllerStore } = require('../index.js') as { SqliteControllerStore: StoreClass };

const paths = conformancePaths();
const RESET =
  'Pi Workflows durable state is incompatible. Move or remove the old workflow state, then create a new state.sqlite database.';
const NOW = 1791158400032; // 2026-10-05T00:00:00.032Z

type SchemaFixture = {
  pragmas: Record<string, number | string>;
  schemaMeta: Record<string, unknown> & { schema_digest_hex: string };
  schemaShapeSha256: string;
  initialRows: { workflow_host_state: Record<string, unknown>[] };
  sqlite_schema: { type: string; name: string; tbl_name: string; sql: string | null }[];
};

function readSchemaFixture(): SchemaFixture {
  return JSON.parse(fs.readFileSync(path.join(paths.fixtures, 'schema.json'), 'utf8')) as SchemaFixture;
}

function sha256File(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Sorted-key JSON without whitespace (the schemaShapeRule's canonical JSON). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(record[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

function thrownBy(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

let dir: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-state-')));
  jestClock.freeze(NOW);
});

afterEach(() => {
  jestClock.release();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a new state database', () => {
  const schema = readSchemaFixture();
  let file: string;

  beforeEach(() => {
    file = path.join(dir, 'nested', 'deeper', 'state.sqlite');
    fs.mkdirSync(path.join(dir, 'project'));
    new SqliteControllerStore(file, { projectPath: path.join(dir, 'project') }).close();
  });

  const inspect = <T>(read: (db: Database.Database) => T): T => {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return read(db);
    } finally {
      db.close();
    }
  };

  it('lists exactly the sqlite_schema rows of fixtures/schema.json, in rowid order', () => {
    const rows = inspect((db) => db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid').all());
    expect(rows).toEqual(schema.sqlite_schema);
    expect(rows.map((row) => Object.keys(row as object).join())).toEqual(
      schema.sqlite_schema.map(() => 'type,name,tbl_name,sql'),
    );
  });

  it('has the schema shape digest of the fixture', () => {
    const rows = inspect((db) =>
      db
        .prepare(
          "SELECT type, name, tbl_name AS tableName, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
        )
        .all(),
    );
    expect(createHash('sha256').update(canonical(rows)).digest('hex')).toBe(schema.schemaShapeSha256);
  });

  it('has the pragmas of the fixture', () => {
    const pragmas = inspect((db) =>
      Object.fromEntries(
        Object.keys(schema.pragmas).map((name) => [name, db.pragma(name, { simple: true })] as const),
      ),
    );
    expect(pragmas).toEqual(schema.pragmas);
  });

  it('has the schema_meta row, stamped with the creating call’s Date.now()', () => {
    const rows = inspect((db) => db.prepare('SELECT * FROM schema_meta ORDER BY rowid').all()) as Record<
      string,
      unknown
    >[];
    expect(rows).toHaveLength(1);
    const { schema_digest, ...rest } = rows[0];
    expect(Buffer.isBuffer(schema_digest) && schema_digest.toString('hex')).toBe(schema.schemaMeta.schema_digest_hex);
    expect(Object.keys(rows[0])).toEqual([
      'id',
      'schema_name',
      'schema_version',
      'schema_digest',
      'app_version',
      'created_at',
      'updated_at',
    ]);
    expect(rest).toEqual({
      id: schema.schemaMeta.id,
      schema_name: schema.schemaMeta.schema_name,
      schema_version: schema.schemaMeta.schema_version,
      app_version: schema.schemaMeta.app_version,
      created_at: NOW,
      updated_at: NOW,
    });
  });

  it('has the initial workflow_host_state row', () => {
    const rows = inspect((db) => db.prepare('SELECT * FROM workflow_host_state ORDER BY rowid').all());
    expect(rows).toEqual(schema.initialRows.workflow_host_state);
    expect(rows.map((row) => Object.keys(row as object))).toEqual(
      schema.initialRows.workflow_host_state.map((row) => Object.keys(row)),
    );
  });

  it('is private: file 0600, new directories 0700', () => {
    const umask = process.umask();
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(fs.statSync(path.join(dir, 'nested')).mode & 0o777).toBe(0o700 & ~umask);
  });

  it('opens again read-write and read-only without changing its schema', () => {
    new SqliteControllerStore(file, { projectPath: path.join(dir, 'project') }).close();
    new SqliteControllerStore(file, { readOnly: true, global: true }).close();
    const rows = inspect((db) => db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid').all());
    expect(rows).toEqual(schema.sqlite_schema);
  });
});

describe('the reference database file (fixtures/state-0.16.1.sqlite)', () => {
  const PROJECT = '/piw-conformance/project-main';
  let copy: string;

  beforeEach(() => {
    // The fixture's project paths must not exist, so they canonicalise with path.resolve.
    expect(fs.existsSync('/piw-conformance')).toBe(false);
    copy = path.join(dir, 'state.sqlite');
    fs.writeFileSync(copy, fs.readFileSync(path.join(paths.fixtures, 'state-0.16.1.sqlite')));
  });

  it('opens read-only and leaves the file bytes unchanged', () => {
    const before = sha256File(copy);
    for (const options of [{ readOnly: true, projectPath: PROJECT }, { readOnly: true, global: true }]) {
      const store = new SqliteControllerStore(copy, options);
      store.close();
      store.close();
    }
    expect(sha256File(copy)).toBe(before);
  });

  it('opens read-write, prunes only unreferenced blobs and makes the file 0600', () => {
    const before = dumpDatabase(copy);
    new SqliteControllerStore(copy, { projectPath: PROJECT }).close();
    const after = dumpDatabase(copy);
    expect(fs.statSync(copy).mode & 0o777).toBe(0o600);
    expect(Object.keys(after)).toEqual(Object.keys(before));
    for (const table of Object.keys(before)) {
      if (table !== 'blobs') expect({ table, rows: after[table] }).toEqual({ table, rows: before[table] });
    }
    expect(after.blobs.length).toBeLessThan(before.blobs.length);
  });

  it('replays the fixture trace’s opens, closes and final dump (its read calls left out)', () => {
    const trace = loadTrace(path.join(paths.fixtures, FIXTURE_TRACE));
    const reads = /^(get|list|find|is|verify|workflowRun)/;
    const calls = trace.steps.filter((step) => step.do === 'call') as Extract<Step, { do: 'call' }>[];
    expect(calls.filter((step) => !reads.test(step.method))).toEqual([]);
    jestClock.release(); // replayTrace freezes its own clock
    replayTrace(
      { ...trace, steps: trace.steps.filter((step) => step.do !== 'call') },
      { Store: SqliteControllerStore, clock: jestClock, conformanceRoot: paths.root },
    );
    jestClock.freeze(NOW);
  });
});

describe('files that are not a Pi Workflows state database', () => {
  const project = () => path.join(dir, 'project');
  const open = (file: string, options: Record<string, unknown> = { projectPath: project() }) =>
    thrownBy(() => new SqliteControllerStore(file, options));

  it('refuses a missing file read-only', () => {
    const file = path.join(dir, 'missing.sqlite');
    expectError(
      { name: 'Error', message: `Pi Workflows state database does not exist: ${file}` },
      open(file, { readOnly: true, projectPath: project() }),
      new Bindings(),
    );
    expect(fs.existsSync(file)).toBe(false);
  });

  it('refuses a non-SQLite file with SQLite’s own error', () => {
    const file = path.join(dir, 'junk.sqlite');
    fs.writeFileSync(file, 'this is not a database, it is a text file that is long enough to matter\n'.repeat(3));
    const expected = { name: 'SqliteError', message: 'file is not a database', props: { code: 'SQLITE_NOTADB' } };
    expectError(expected, open(file), new Bindings());
    expectError(expected, open(file, { readOnly: true, global: true }), new Bindings());
  });

  it('refuses an empty file and a foreign SQLite schema with the reset instruction', () => {
    const empty = path.join(dir, 'empty.sqlite');
    fs.writeFileSync(empty, '');
    const foreign = path.join(dir, 'foreign.sqlite');
    const db = new Database(foreign);
    db.exec('CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)');
    db.close();
    for (const file of [empty, foreign]) {
      // A read-only open leaves the file alone; a read-write one may switch it to WAL first, as
      // the reference configures the connection before it verifies the schema.
      const before = sha256File(file);
      expectError({ name: 'Error', message: RESET }, open(file, { readOnly: true, global: true }), new Bindings());
      expect(sha256File(file)).toBe(before);
      expectError({ name: 'Error', message: RESET }, open(file), new Bindings());
    }
  });

  it('refuses a state database whose pragmas, schema_meta or schema objects changed', () => {
    const tampering = [
      'PRAGMA user_version = 2',
      'PRAGMA application_id = 1',
      "UPDATE schema_meta SET app_version = '0.14.1'",
      'CREATE INDEX extra_idx ON runs(title)',
    ];
    for (const [index, sql] of tampering.entries()) {
      const file = path.join(dir, `tamper-${index}.sqlite`);
      new SqliteControllerStore(file, { global: true }).close();
      const db = new Database(file);
      db.exec(sql);
      db.close();
      expectError({ name: 'Error', message: RESET }, open(file), new Bindings());
      expectError({ name: 'Error', message: RESET }, open(file, { readOnly: true, global: true }), new Bindings());
    }
  });

  it('replays the open/verify part of store-open-reopen-verify (its two read calls left out)', () => {
    const trace = loadTrace(path.join(paths.traces, 'store-open-reopen-verify.json'));
    const from = trace.steps.findIndex((step) => step.do === 'writeFile');
    const tail = trace.steps.slice(from);
    const calls = tail.filter((step) => step.do === 'call') as Extract<Step, { do: 'call' }>[];
    expect(calls.map((step) => step.method)).toEqual(['listResources', 'workflowRunListRevision']);
    // The clock where the tail starts: the dropped steps' ticks still count.
    const ticks = trace.steps
      .slice(0, from)
      .reduce((sum, step) => sum + (step.do === 'tick' ? step.ms : 0), 0);
    const partial: Trace = {
      ...trace,
      clockStart: trace.clockStart + ticks,
      steps: tail.filter((step) => step.do !== 'call'),
    };
    jestClock.release();
    replayTrace(partial, { Store: SqliteControllerStore, clock: jestClock, conformanceRoot: paths.root });
    jestClock.freeze(NOW);
  });
});
