'use strict';
// A process of the randomized cross-process run-index spec, forked with `serialization:
// 'advanced'` and driven over IPC: every message `{ id, op, ... }` is answered with
// `{ id, value }` or `{ id, error }`, one at a time (the spec waits for each answer, so the
// processes never write concurrently and every poll sees a settled file).
//
// The first message opens what the process works with:
// - `{ op: 'native', file, projects, name, seed }`: a Pi process. Stores on one state file
//   (`SqliteControllerStore`): `a` and `b` scoped to the two projects, `all` global, on one
//   connection. Started with `PIW_RUN_INDEX=off` it is the oracle: every poll reads through SQL.
// - `{ op: 'raw', file, name, seed, module? }`: another application on its own better-sqlite3
//   connection (`module`: the path of another better-sqlite3 to load than the dev dependency,
//   better-sqlite3 13 in `better-sqlite3-13.spec.ts`). No store is opened in this process (two
//   SQLite libraries in one process break each other's POSIX locks, see
//   `runs-lifecycle-fixture.ts`).
//
// Then:
// - `act { now }`: one random step (one to three `nativeAction`s on store `a`, or one
//   `sqlAction`), from the process's own seeded sequence; answers what it did.
// - `sql { now, kind?, allow }`: one raw-SQL step on the store's own connection (native only).
// - `polls`: `polls()` of `a`, `b` and `all`.
// - `claimOnCopy { target, args }`: what `claimNextWorkflowRun(args)` of store `target` picks,
//   without committing it here: an online backup of the file, a store of the same scope
//   opened on the copy, the claim there (answers the copy's list revision too).
// - `eval { store, method, args }`: one store call; `exec { sql, params, reader }`: one
//   statement on the store's own connection (raw: on the process's connection).
// - `close`.

const path = require('node:path');

const { random } = require('../reliability/common.js');
const { nativeAction, sqlAction, polls, attempt } = require('./xproc-actions.js');

const { ROOT, serve, onCopy } = require('./serve.js');

let mode;
let stores;
let db;
let rng;
let ctx;
let probes = 0;
let projects;
let file;

function openNative(message) {
  const { SqliteControllerStore } = require(path.join(ROOT, 'index.js'));
  file = message.file;
  projects = message.projects;
  const a = new SqliteControllerStore(file, { projectPath: projects.a });
  stores = {
    a,
    b: new SqliteControllerStore(file, { state: a.state, projectPath: projects.b }),
    all: new SqliteControllerStore(file, { state: a.state, global: true }),
  };
  mode = 'native';
}

function openRaw(message) {
  const Database = require(message.module ?? 'better-sqlite3');
  db = new Database(message.file);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  mode = 'raw';
}

async function handle(message) {
  switch (message.op) {
    case 'native':
    case 'raw':
      if (message.op === 'native') openNative(message);
      else openRaw(message);
      rng = random(message.seed);
      ctx = { name: message.name, now: 0, counter: 0, runs: new Map(), stats: {}, allow: message.allow ?? { runsRowid: true, vacuum: false } };
      return { pid: process.pid, runIndex: process.env.PIW_RUN_INDEX ?? null };
    case 'act':
      ctx.now = message.now;
      if (message.allow !== undefined) ctx.allow = message.allow;
      if (mode === 'raw') return sqlAction(db, rng, ctx, message.kind);
      // A session does a few calls in a row.
      return Array.from({ length: rng.int(1, 3) }, () => nativeAction(stores.a, rng, ctx)).join('; ');
    case 'sql': {
      ctx.now = message.now;
      const allow = ctx.allow;
      ctx.allow = message.allow;
      try {
        return sqlAction(stores.a.state.connection, rng, ctx, message.kind);
      } finally {
        ctx.allow = allow;
      }
    }
    case 'exec':
      // One statement on the store's own connection (or the raw one): `all` for a reader, else `run`.
      return (mode === 'raw' ? db : stores.a.state.connection).prepare(message.sql)[message.reader ? 'all' : 'run'](...(message.params ?? []));
    case 'polls':
      return { a: polls(stores.a), b: polls(stores.b), all: polls(stores.all) };
    case 'claimOnCopy': {
      probes += 1;
      const copy = path.join(path.dirname(file), `probe-${process.pid}-${probes}.sqlite`);
      await stores.a.state.backup(copy);
      const options = message.target === 'a' || message.target === 'b' ? { projectPath: projects[message.target] } : { global: true };
      return onCopy(copy, options, (store) => ({
        revision: store.workflowRunListRevision(),
        claim: attempt(() => store.claimNextWorkflowRun(message.args)),
      }));
    }
    case 'eval':
      return attempt(() => stores[message.store][message.method](...message.args));
    case 'stats':
      return ctx.stats;
    case 'close':
      if (mode === 'native') stores.a.close();
      if (mode === 'raw') db.close();
      return 'closed';
    default:
      throw new Error(`unknown op ${message.op}`);
  }
}

serve(handle);
