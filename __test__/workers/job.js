'use strict';
// One participant's share of the worker_threads test (see drive.js): it loads the package in its
// own thread, opens its own store on the shared state file, creates controller resources, waits
// until every participant has created theirs, then competes for the work queue and takes its own
// workflow runs from reservation to completion. Runs as a worker, or in the main thread via
// runJob(). No console output here: a worker's console goes through the main thread.

const { isMainThread, parentPort, workerData } = require('node:worker_threads');

/**
 * Waits until all `total` participants reached barrier `slot`: blocks in a worker, polls in the
 * main thread (which must keep its event loop turning for the workers' messages).
 */
async function barrier(counters, slot, total) {
  Atomics.add(counters, slot, 1);
  while (Atomics.load(counters, slot) < total) {
    if (isMainThread) await new Promise((resolve) => setTimeout(resolve, 2));
    else Atomics.wait(counters, slot, Atomics.load(counters, slot), 50);
  }
}

function createResources(store, id, count) {
  const created = [];
  for (let i = 0; i < count; i += 1) {
    const key = `${id}-${i}`;
    store.putResource({
      controller: 'jobs',
      key,
      spec: { owner: id, index: i },
      initialStatus: { phase: 'new' },
    });
    created.push(key);
  }
  return created;
}

/** Claims until the queue is empty; every claim is reconciled and settled. */
function drainQueue(store, id) {
  const claimed = [];
  for (;;) {
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: `owner-${id}`, leaseMs: 60_000 });
    if (claim === undefined) return claimed;
    store.updateStatus({
      ref: { controller: 'jobs', key: claim.key },
      expectedResourceVersion: claim.resourceVersion,
      claim,
      status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'done', by: id } },
    });
    if (!store.settleClaim(claim)) throw new Error(`settleClaim failed for ${claim.key}`);
    claimed.push(claim.key);
  }
}

function completeRuns(store, id, count) {
  const completed = [];
  for (let i = 0; i < count; i += 1) {
    const runId = `run-${id}-${i}`;
    const session = `session-${id}`;
    store.reserveWorkflowRun({
      runId,
      workflowName: 'echo',
      workflowSourceRef: 'builtin:echo',
      workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
      definitionDigest: `sha256:${'ab'.repeat(32)}`,
      definitionSnapshot: { name: 'echo' },
      input: { participant: id, index: i },
      runnerId: session,
      originSessionId: session,
    });
    const token = `token-${id}-${i}`;
    const claimed = store.claimWorkflowRun({ runId, runnerId: session, claimToken: token, leaseMs: 60_000 });
    if (claimed?.status !== 'starting') throw new Error(`claimWorkflowRun failed for ${runId}`);
    if (!store.markWorkflowRunRunning({ runId, claimToken: token })) throw new Error(`not running: ${runId}`);
    if (!store.completeWorkflowRun({ runId, claimToken: token })) throw new Error(`not completed: ${runId}`);
    completed.push(store.getWorkflowRun(runId).status === 'done' ? runId : `${runId}:not-done`);
  }
  return completed;
}

/** Counts what every participant left in the file, read through a store of this thread. */
function summarize(store) {
  const resources = store.listResources({ controller: 'jobs' });
  return {
    resources: resources.length,
    done: resources.filter((resource) => resource.status.controllerStatus.phase === 'done').length,
    queue: store.listQueue().length,
    controllerEvents: store.listEvents({ controller: 'jobs', limit: 100_000 }).length,
    runsDone: store.listWorkflowRuns({ statuses: ['done'] }).length,
    runEvents: store.listRunEventsAfter(0, { limit: 100_000 }).length,
  };
}

async function runJob({ entry, file, project, id, resources, runs, counter, total, close = true }) {
  const { SqliteControllerStore } = require(entry);
  const counters = new Int32Array(counter);
  const store = new SqliteControllerStore(file, { projectPath: project });
  try {
    // Everyone opens before anyone writes, so that every thread's writes overlap with the
    // others'. (Opening in the middle of other threads' writes is safe too: the prune-race test,
    // reliability-prune-race.spec.ts, covers putResource against concurrent opens.)
    await barrier(counters, 0, total);
    const created = createResources(store, id, resources);
    await barrier(counters, 1, total);
    const claimed = drainQueue(store, id);
    const completed = completeRuns(store, id, runs);
    store.state.integrityCheck();
    return { id, created, claimed, completed };
  } finally {
    if (close) store.close();
  }
}

function verify({ entry, file, project }) {
  const { SqliteControllerStore } = require(entry);
  const store = new SqliteControllerStore(file, { projectPath: project });
  try {
    store.state.integrityCheck();
    return summarize(store);
  } finally {
    store.close();
  }
}

/**
 * Writes until terminated: controller events, or blobs inside a transaction it never commits
 * (`inTransaction`), so termination hits a thread that holds the file's write lock.
 */
function writeForever({ entry, file, project, inTransaction }) {
  const { SqliteControllerStore } = require(entry);
  const store = new SqliteControllerStore(file, { projectPath: project });
  store.putResource({ controller: 'busy', key: 'k', spec: {}, initialStatus: {} });
  const write = inTransaction
    ? (i) => store.state.putText(`tick ${i}`)
    : (i) => store.recordEvent({ controller: 'busy', key: 'k', type: 'tick', payload: { i } });
  const loop = () => {
    for (let i = 0; ; i += 1) {
      write(i);
      if (i === 10) parentPort.postMessage({ started: true });
    }
  };
  if (inTransaction) store.state.transaction(loop);
  else loop();
}

if (!isMainThread && workerData?.job !== undefined) {
  const jobs = { runJob, verify, writeForever };
  Promise.resolve(jobs[workerData.job](workerData)).then(
    (result) => parentPort.postMessage({ result }),
    (error) => parentPort.postMessage({ error: { name: error.name, message: error.message, stack: error.stack } }),
  );
}

module.exports = { runJob, verify, summarize };
