// better-sqlite3 13 beside the store (issue 38). @osolmaz/pi-workflows 0.16.1 depends on
// better-sqlite3 ^13 (and needs Node ≥ 22), so in Pi the TypeScript store and Pi's other stores
// open the state file with better-sqlite3 13 while this package writes it. The rest of the suite
// compares with the dev dependency, better-sqlite3 12; here the other side is 13:
// - `store.state.connection` gives 13's answers: every scenario of connection.spec.ts
//   (support/connection-parity.ts), the SQLite release a known difference (13 bundles 3.54.1,
//   the addon 3.53.2, better-sqlite3 12's: vendor/README.md);
// - 13 writes, the store reads: a state file 13 creates as the reference does, fills with the
//   reference's rows for 200 runs (bench/scale-build.js, the SQL scale-builder.spec checks
//   against the API) and with rows of the tables Pi's other stores keep (the host's lease, an
//   interactive request, a human decision and its resolution); a store opens it (the schema
//   verified, the open's blob prune) and reads every row as 13 wrote it;
// - the store writes, 13 reads: a file the store wrote through the API, which 13 opens as the
//   reference opens a file read-only and reads row for row as the store does, with the reference's
//   schema and pragmas, integrity and foreign keys intact;
// - both at once: a process writing raw SQL through 13 (workers/xproc-worker.js) and this
//   process's stores running lifecycles on the same file, the writes overlapping; neither waits
//   out the busy timeout, both read the same rows, and the stores' run index answers every poll
//   as stores opened afterwards do.
//
// It runs when PIW_BETTER_SQLITE3_13 names an installed better-sqlite3 13: `npm run
// test:node-versions` installs the fixture project __test__/fixtures/better-sqlite3-13 and names
// it on Node 22 and 24. Without it the suite is skipped (13 needs Node ≥ 22: on Node 20 loading it
// crashes the process).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import type BetterSqlite3 from 'better-sqlite3';

import { describeConnectionParity } from './support/connection-parity';
import { conformancePaths } from './support/paths';
import { createStateFile } from './support/reference-state';
import { dumpConnection } from './support/sqlite';
import { Worker } from './support/worker';

const { SqliteControllerStore } = require('../index.js');
const { addRunThroughApi, buildFast } = require('../bench/scale-build.js');
const { random } = require('./reliability/common.js');
const { nativeAction, polls, sqlAction } = require('./workers/xproc-actions.js');

const MODULE = process.env.PIW_BETTER_SQLITE3_13;
if (MODULE !== undefined && Number(process.versions.node.split('.')[0]) < 22) {
  throw new Error(`PIW_BETTER_SQLITE3_13 is set, but better-sqlite3 13 needs Node ≥ 22 (this is ${process.version})`);
}
const Database13: typeof BetterSqlite3 = MODULE === undefined ? (undefined as never) : require(MODULE);
const suite = MODULE === undefined ? describe.skip : describe;

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const RUNS = 200;
const sha256 = (text: string) => createHash('sha256').update(text).digest();

let dir: string;
let project: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-bs13-')));
  project = path.join(dir, 'project');
  fs.mkdirSync(project);
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A blob as every store writes one: content-addressed, inserted once. */
function blob(db: BetterSqlite3.Database, text: string, mediaType = 'application/json'): Buffer {
  const content = Buffer.from(text);
  const hash = sha256(text);
  db.prepare(
    `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT(blob_hash) DO NOTHING`,
  ).run(hash, mediaType, content.length, content, T0);
  return hash;
}

/**
 * Rows of the tables Pi's other stores keep, on run `runId`: the host's lease in
 * workflow_host_state, and a human decision (its resource, the attempt that asked, the decision,
 * its resolution) with every document a blob.
 */
function writeOtherStores(db: BetterSqlite3.Database, runId: string): void {
  db.transaction(() => {
    db.prepare(
      `UPDATE workflow_host_state SET epoch = epoch + 1, host_id = ?, token_hash = ?, pid = ?, process_start_identity = ?,
         started_at = ?, heartbeat_at = ?, expires_at = ? WHERE id = 1`,
    ).run('host-13', sha256('host token'), 4242, 'boot-1:4242', T0, T0 + 500, T0 + 30_000);
    const decisionId = `decision-${runId}`;
    const resourceId = `decision-${sha256(`decision\0${decisionId}`).toString('hex').slice(0, 40)}`;
    db.prepare(
      "INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at) VALUES (?, 'decision', ?, 2, ?, ?)",
    ).run(resourceId, decisionId, T0, T0 + 1);
    db.prepare(
      `INSERT INTO node_attempts(attempt_id, run_id, node_id, attempt_number, node_type, status, created_at, updated_at)
       VALUES (?, ?, 'approve', 1, 'agent', 'waiting', ?, ?)`,
    ).run(`attempt-${decisionId}`, runId, T0, T0);
    const digest = sha256(`request ${decisionId}`);
    db.prepare(
      `INSERT INTO human_decisions(decision_id, resource_id, run_id, attempt_id, audience, title, subject_hash, presentation_hash,
         choices_hash, request_digest, presentation_revision, deadline_at, default_response_hash, request_hash, created_at)
       VALUES (?, ?, ?, ?, 'human', 'Ship it?', ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
    ).run(
      decisionId,
      resourceId,
      runId,
      `attempt-${decisionId}`,
      blob(db, '{"subject":"release"}'),
      blob(db, 'Ship the release?', 'text/plain'),
      blob(db, '["yes","no"]'),
      digest,
      T0 + 60_000,
      blob(db, '"no"'),
      blob(db, '{"request":1}'),
      T0,
    );
    db.prepare(
      `INSERT INTO human_decision_resolutions(decision_id, outcome, provenance, response_hash, reason, channel, actor_id,
         request_digest, resolved_at) VALUES (?, 'accepted', 'human', ?, NULL, 'tui', 'alice', ?, ?)`,
    ).run(decisionId, blob(db, '"yes"'), digest, T0 + 1);
  })();
}

/** One query per table of the state: every row as SQL literals (`quote()`), in rowid order. */
function tableQueries(db: BetterSqlite3.Database): string[] {
  const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").pluck().all() as string[];
  return tables.map((table) => {
    const columns = db.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').pluck().all(table) as string[];
    return `SELECT ${columns.map((column) => `quote("${column}")`).join(" || ',' || ")} AS line FROM "${table}" ORDER BY rowid`;
  });
}

suite('better-sqlite3 13 beside the store (PIW_BETTER_SQLITE3_13)', () => {
  test('PIW_BETTER_SQLITE3_13 is better-sqlite3 13', () => {
    expect(require(path.join(MODULE as string, 'package.json')).version).toMatch(/^13\./);
  });

  describeConnectionParity(Database13, {
    knownSqliteVersionDifference: 'better-sqlite3 13 bundles a newer SQLite than the addon, which has better-sqlite3 12’s',
  });

  test('a state file better-sqlite3 13 creates and fills as the reference and Pi’s other stores do: a store reads every row as written', () => {
    const file = path.join(dir, 'state.sqlite');
    createStateFile(Database13, file, T0);
    // The reference's first open of a project adds its project row; a store verifies the schema 13 made.
    new SqliteControllerStore(file, { projectPath: project }).close();
    buildFast(Database13, file, RUNS, { base: T0 });
    const db = new Database13(file, { timeout: 5000 });
    db.pragma('foreign_keys = ON');
    writeOtherStores(db, 'run-3');
    const interactions = { name: 'pi', now: T0, counter: 0, allow: { runsRowid: false, vacuum: false } };
    const rng = random(38);
    for (let asked = 0; asked < 3; asked += 1) sqlAction(db, rng, interactions, 'interaction');
    const written = dumpConnection(db);
    db.close();
    expect(written.human_decision_resolutions).toHaveLength(1);
    // Seed 38: a request asked and cancelled, another asked and left pending.
    expect(written.interactive_requests.map((request) => request.status)).toEqual(['cancelled', 'pending']);

    for (const options of [{ readOnly: true, projectPath: project }, { projectPath: project }]) {
      const store = new SqliteControllerStore(file, options);
      try {
        expect(store.workflowRunListRevision().total).toBe(RUNS);
        const statuses: Record<string, number> = {};
        for (const run of store.listWorkflowRuns({})) statuses[run.status] = (statuses[run.status] ?? 0) + 1;
        expect(statuses).toEqual({ done: RUNS * 0.9, parked: RUNS * 0.05, queued: RUNS * 0.05 });
        expect(store.getWorkflowRun('run-1')).toMatchObject({ status: 'parked', errorCode: 'workflowSourceChanged', input: { message: 'hello run-1' } });
        // Every row as 13 wrote it: the read-write open's prune kept every blob a row refers to.
        expect(dumpConnection(store.state.connection)).toEqual(written);
      } finally {
        store.close();
      }
    }
  });

  test('a file the store writes: better-sqlite3 13 opens it as the reference does read-only and reads every row as the store does', () => {
    const file = path.join(dir, 'state.sqlite');
    const store = new SqliteControllerStore(file, { projectPath: project });
    let written;
    try {
      for (let index = 0; index < RUNS; index += 1) addRunThroughApi(store, index);
      written = dumpConnection(store.state.connection);
    } finally {
      store.close();
    }
    const schema = JSON.parse(fs.readFileSync(path.join(conformancePaths().fixtures, 'schema.json'), 'utf8'));
    const db = new Database13(file, { readonly: true, fileMustExist: true, timeout: 5000 });
    try {
      db.pragma('foreign_keys = ON');
      db.pragma('query_only = ON');
      expect(db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid').all()).toEqual(schema.sqlite_schema);
      const pragmas = Object.fromEntries(Object.keys(schema.pragmas).map((name) => [name, db.pragma(name, { simple: true })]));
      expect(pragmas).toEqual(schema.pragmas);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(db.pragma('foreign_key_check')).toEqual([]);
      expect(dumpConnection(db)).toEqual(written);
      expect(written.runs).toHaveLength(RUNS);
    } finally {
      db.close();
    }
  });

  test('both at once: a process writing through better-sqlite3 13 and this process’s stores, writes overlapping', async () => {
    const file = path.join(dir, 'state.sqlite');
    const a = new SqliteControllerStore(file, { projectPath: project });
    const all = new SqliteControllerStore(file, { state: a.state, global: true });
    const raw = new Worker('raw (better-sqlite3 13)', { ...process.env });
    try {
      await raw.call('raw', { file, name: 'x', seed: 38, module: MODULE });
      const rng = random(3813);
      const host = { name: 'host', now: T0, counter: 0, runs: new Map(), stats: {} as Record<string, number> };
      const steps: string[] = [];
      for (let round = 0; round < 25; round += 1) {
        const now = T0 + round * 1000;
        // The other process's steps, sent at once: it runs them back to back while this one writes.
        const theirs = Promise.all(
          [0, 1, 2, 3, 4, 5].map((step) =>
            raw.call('act', { now, kind: step === 0 ? 'insertRun' : round === 20 && step === 3 ? 'vacuum' : undefined, allow: { runsRowid: false, vacuum: false } }),
          ),
        );
        host.now = now;
        for (let step = 0; step < 6; step += 1) steps.push(`host ${nativeAction(a, rng, host)}`);
        steps.push(...(await theirs).map((what: string) => `raw ${what}`));
      }
      // No write of either side gave up on the other's lock, and both sides did their share.
      expect(steps.filter((what) => /SQLITE_BUSY|database is locked/i.test(what))).toEqual([]);
      expect(steps.filter((what) => /^raw insertRun: insert run x-r\d+/.test(what)).length).toBeGreaterThan(10);
      expect(host.stats.reserve).toBeGreaterThan(5);
      expect(steps).toContain('raw VACUUM');

      // Both processes read the same rows.
      const queries = tableQueries(a.state.connection);
      expect(queries.length).toBeGreaterThan(40);
      for (const sql of queries) {
        const ours = a.state.connection.prepare(sql).pluck().all();
        const theirRows = (await raw.call('exec', { sql, reader: true })) as { line: string }[];
        expect({ sql, rows: theirRows.map((row) => row.line) }).toEqual({ sql, rows: ours });
      }
      const runIds = a.state.connection.prepare('SELECT run_id FROM runs').pluck().all() as string[];
      expect(runIds.some((id) => id.startsWith('x-'))).toBe(true);
      expect(runIds.some((id) => !id.startsWith('x-'))).toBe(true);
      expect(a.state.connection.pragma('integrity_check', { simple: true })).toBe('ok');

      // The run index followed the other process's commits: its polls are those of stores
      // opened now, on a connection of their own.
      const freshA = new SqliteControllerStore(file, { projectPath: project });
      const freshAll = new SqliteControllerStore(file, { state: freshA.state, global: true });
      try {
        expect(polls(a)).toEqual(polls(freshA));
        expect(polls(all)).toEqual(polls(freshAll));
        expect(polls(all).all.value.length).toBeGreaterThan(10);
      } finally {
        freshA.close();
      }
    } finally {
      await raw.call('close').catch(() => undefined);
      raw.kill();
      a.close();
    }
  }, 60_000);
});
