'use strict';
// A process of the run-index trust specs (`__test__/run-index-trust.spec.ts`,
// `__test__/run-index-model.spec.ts`): one connection to a state file, driven by messages.
//
// - `native { file, projectPath, seed, name }`: a native store on the project and a global one
//   on the same connection; `raw { file, seed, name }`: a better-sqlite3 connection (another
//   application, or the TypeScript store).
// - `act { now, kind? }`: one random step (`xproc-actions.js`): API calls for a native store,
//   raw SQL for better-sqlite3.
// - `exec { sql }`: statements on the connection (a checkpoint, say).
// - `check`: every poll of both stores, through SQL on the store's own connection (inside a
//   transaction of the caller's) and then through the index: `{ sql, index }` per store.
// - `backup { to, store }` (a copy of what the connection sees; answers the store's scope),
//   `claim { store, args }` (a host's claim through the index), and for an oracle process
//   started with `PIW_RUN_INDEX=off`, `claimOnCopy { copy, scope, args }` (the same claim
//   through SQL alone, on the copy).
// - `warnings`: the process warnings so far; `close`.
// Killing the process (SIGKILL) is the spec's own step.

const path = require('node:path');

const { ROOT, serve, onCopy } = require('./serve.js');
const { random } = require('../reliability/common.js');
const { nativeAction, sqlAction, indexAndSql, attempt } = require('./xproc-actions.js');

const warnings = [];
process.on('warning', (warning) => warnings.push({ code: warning.code, message: warning.message }));

let mode;
let db;
let stores;
let rng;
let ctx;
let projectPath;

async function handle(message) {
  switch (message.op) {
    case 'native': {
      const { SqliteControllerStore } = require(path.join(ROOT, 'index.js'));
      const project = new SqliteControllerStore(message.file, { projectPath: message.projectPath });
      stores = { project, all: new SqliteControllerStore(message.file, { state: project.state, global: true }) };
      projectPath = message.projectPath;
      mode = 'native';
      break;
    }
    case 'raw': {
      const Database = require('better-sqlite3');
      db = new Database(message.file);
      db.pragma('busy_timeout = 5000');
      db.pragma('foreign_keys = ON');
      mode = 'raw';
      break;
    }
    case 'act':
      ctx.now = message.now;
      if (mode === 'raw') return sqlAction(db, rng, ctx, message.kind);
      return nativeAction(stores.project, rng, ctx);
    case 'exec':
      return mode === 'raw' ? db.exec(message.sql) && 'done' : stores.project.state.connection.exec(message.sql) && 'done';
    case 'check':
      return { project: indexAndSql(stores.project), all: indexAndSql(stores.all) };
    case 'backup':
      // A copy of what the connection sees; answers the store's scope for `claimOnCopy`.
      await stores.project.state.backup(message.to);
      return message.store === 'all' ? null : projectPath;
    case 'claim':
      return attempt(() => stores[message.store].claimNextWorkflowRun(message.args));
    case 'claimOnCopy':
      // The oracle (`PIW_RUN_INDEX=off`): a host's claim on a copy, through SQL alone.
      return onCopy(message.copy, message.scope === null ? { global: true } : { projectPath: message.scope }, (store) =>
        attempt(() => store.claimNextWorkflowRun(message.args)),
      );
    case 'warnings':
      return warnings;
    case 'close':
      if (mode === 'native') stores.project.close();
      if (mode === 'raw') db.close();
      return 'closed';
    default:
      throw new Error(`unknown op ${message.op}`);
  }
  rng = random(message.seed ?? 1);
  ctx = { name: message.name ?? mode, now: 0, counter: 0, runs: new Map(), stats: {}, allow: { runsRowid: false, vacuum: false } };
  return { pid: process.pid };
}

serve(handle);
