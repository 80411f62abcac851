'use strict';
// Which SqliteControllerStore bench:scale and its child processes use: `native` (this package,
// or PI_WORKFLOWS_NATIVE_PATH through the loader) or `ts`, the TypeScript reference of 0.16.1,
// loaded from $PIW_REF/bench/impl.mjs — a folder outside this repository (the reference's code
// never comes into it); without PIW_REF there is no reference to measure.

const path = require('node:path');
const { pathToFileURL } = require('node:url');

async function loadStore(impl) {
  if (impl === 'native') return require('..').SqliteControllerStore;
  if (impl !== 'ts') throw new Error(`unknown implementation ${impl}`);
  const ref = process.env.PIW_REF;
  if (!ref) throw new Error('the reference needs PIW_REF=<folder of the TypeScript reference>');
  const { loadImpl } = await import(pathToFileURL(path.join(ref, 'bench', 'impl.mjs')).href);
  return (await loadImpl({ impl: 'ts' })).SqliteControllerStore;
}

/** The polls issue 21 measures, by name: each takes (store, i) and returns the call's result. */
const CLAIM_TOKEN = 'bench-token';
const POLLS = {
  workflowRunListRevision: (store) => store.workflowRunListRevision(),
  'listWorkflowRunViews first page': (store) => store.listWorkflowRunViews({ offset: 0, limit: 50 }),
  'listWorkflowRuns({limit: 100})': (store) => store.listWorkflowRuns({ limit: 100 }),
  'listWorkflowRuns, active statuses': (store) =>
    store.listWorkflowRuns({ statuses: ['queued', 'parked', 'starting', 'running'], limit: 100 }),
  'claimNextWorkflowRun, host, nothing claimable': (store) =>
    store.claimNextWorkflowRun({ runnerId: 'host-bench', claimToken: CLAIM_TOKEN, leaseMs: 30_000 }),
  // As bench/scale-writes.js's host writer polls: its own claimed run excluded.
  'claimNextWorkflowRun, host, excludeRunIds, nothing claimable': (store) =>
    store.claimNextWorkflowRun({ runnerId: 'host-bench', claimToken: CLAIM_TOKEN, leaseMs: 30_000, excludeRunIds: ['run-1'] }),
  'claimNextWorkflowRun with sessionId, nothing claimable': (store) =>
    store.claimNextWorkflowRun({ runnerId: 'session-idle', sessionId: 'session-idle', claimToken: CLAIM_TOKEN, leaseMs: 30_000 }),
};

// Not a poll: a call into the store's native code that reads no SQL and no index (in the
// reference too: better-sqlite3's getter). Timed as the polls are, it is the floor under their
// "× own" ratios: what any call costs more after other processes ran than right after its own
// write (cold caches, a just-woken process) with nothing to catch up on.
const FLOOR = {
  'floor: state.connection.inTransaction': (store) => store.state.connection.inTransaction,
};

module.exports = { loadStore, POLLS, FLOOR, PROJECT: '/piw-scale/project' };
