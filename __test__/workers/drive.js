'use strict';
// The worker_threads scenarios of __test__/worker-threads.spec.ts, each in its own process so
// "the main thread never loaded the addon" is really true. Usage: node drive.js <scenario> <dir>.
// Prints one JSON line with what happened; exits non-zero on any failure.
//
//   shared       the main thread and 4 workers load the addon at once, each with its own store
//                on one file, and compete for the same work queue
//   worker-only  the addon is loaded only in workers (3 at once, then 1 more to verify)
//   terminate    workers killed mid-write (one inside an open transaction) and one that never
//                closes its store; then the main thread loads the addon and writes

const path = require('node:path');
const { Worker } = require('node:worker_threads');

const ENTRY = path.join(__dirname, '..', '..', 'index.js');
const JOB = path.join(__dirname, 'job.js');
const RESOURCES = 12;
const RUNS = 3;

function startWorker(data) {
  return new Worker(JOB, { workerData: { entry: ENTRY, ...data } });
}

/** Resolves with the worker's result (or rejects with its error) once it has exited. */
function finished(worker) {
  return new Promise((resolve, reject) => {
    let outcome;
    worker.on('message', (message) => {
      if (message.result !== undefined || message.error !== undefined) outcome = message;
    });
    worker.on('error', reject);
    worker.on('exit', (code) => {
      if (outcome?.error !== undefined) reject(Object.assign(new Error(outcome.error.message), outcome.error));
      else if (outcome === undefined) reject(new Error(`worker exited with code ${code} and no result`));
      else resolve({ ...outcome.result, exitCode: code });
    });
  });
}

function message(worker, predicate) {
  return new Promise((resolve, reject) => {
    worker.on('message', (value) => {
      if (predicate(value)) resolve(value);
    });
    worker.on('error', reject);
  });
}

function exited(worker) {
  return new Promise((resolve) => worker.on('exit', resolve));
}

function setup(dir) {
  return { file: path.join(dir, 'state', 'state.sqlite'), project: dir };
}

async function competing(dir, ids, mainJoins) {
  const { file, project } = setup(dir);
  const counter = new SharedArrayBuffer(8);
  const total = ids.length + (mainJoins ? 1 : 0);
  const share = { file, project, resources: RESOURCES, runs: RUNS, counter, total };
  const workers = ids.map((id) => finished(startWorker({ job: 'runJob', id, ...share })));
  const participants = [...workers];
  if (mainJoins) participants.push(require('./job.js').runJob({ entry: ENTRY, id: 'main', ...share }));
  return Promise.all(participants);
}

function shareReport(participants) {
  return participants.map(({ id, created, claimed, completed, exitCode }) => ({
    id,
    created: created.length,
    claimed,
    completed: completed.length,
    exitCode,
  }));
}

async function shared(dir) {
  // The main thread loads the addon before any worker does.
  const { SqliteControllerStore } = require(ENTRY);
  const { file, project } = setup(dir);
  new SqliteControllerStore(file, { projectPath: project }).close();
  const participants = await competing(dir, ['w1', 'w2', 'w3', 'w4'], true);
  const store = new SqliteControllerStore(file, { projectPath: project });
  try {
    store.state.integrityCheck();
    return { participants: shareReport(participants), summary: require('./job.js').summarize(store) };
  } finally {
    store.close();
  }
}

async function workerOnly(dir) {
  const participants = await competing(dir, ['w1', 'w2', 'w3'], false);
  const summary = await finished(startWorker({ job: 'verify', ...setup(dir) }));
  const loadedHere = Object.keys(require.cache).some((file) => file.endsWith('.node') || file === ENTRY);
  return { participants: shareReport(participants), summary, loadedInMainThread: loadedHere };
}

async function terminate(dir) {
  const { file, project } = setup(dir);
  const outcomes = {};
  for (const inTransaction of [false, true]) {
    const worker = startWorker({ job: 'writeForever', file, project, inTransaction });
    await message(worker, (value) => value.started === true);
    const [code] = await Promise.all([exited(worker), worker.terminate()]);
    outcomes[inTransaction ? 'terminatedInTransaction' : 'terminated'] = code;
  }
  // A worker that finishes its work and exits without closing its store.
  const counter = new SharedArrayBuffer(8);
  const unclosed = await finished(
    startWorker({ job: 'runJob', id: 'unclosed', file, project, resources: 2, runs: 1, counter, total: 1, close: false }),
  );
  outcomes.unclosed = { claimed: unclosed.claimed.length, completed: unclosed.completed.length };

  const { SqliteControllerStore } = require(ENTRY);
  const store = new SqliteControllerStore(file, { projectPath: project });
  try {
    const started = Date.now();
    // The transaction of the terminated worker must be gone: this write would otherwise wait
    // out the busy timeout and fail with "database is locked".
    store.putResource({ controller: 'after', key: 'k', spec: {}, initialStatus: {} });
    outcomes.writeAfterMs = Date.now() - started;
    store.state.integrityCheck();
    outcomes.busyEvents = store.listEvents({ controller: 'busy', limit: 100_000 }).length;
    outcomes.after = store.getResource({ controller: 'after', key: 'k' })?.metadata.generation;
  } finally {
    store.close();
  }
  return outcomes;
}

const scenarios = { shared, 'worker-only': workerOnly, terminate };
const [, , scenario, dir] = process.argv;
scenarios[scenario](dir).then(
  (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
  (error) => {
    // Exit at once: the other participants may be waiting at a barrier the failed one never hit.
    process.stderr.write(`${error.stack ?? error}\n`);
    process.exit(1);
  },
);
