'use strict';
// What each writer of bench:scale's table 2 writes between two polls, by role: `writerFor(store,
// role, number, size)` sets the role up on `store` (the host reserves and claims its own run) and
// returns `write(i)`. bench/scale-writer.js runs one in another process; table 2's "×same" baseline
// runs all of them on the poller's own store, so that the two differ only in who writes.

const { reservation } = require('./fixtures');

function writerFor(store, role, number, size) {
  const runner = `host-writer-${number}`;
  const own = `writer-${number}-host-run`;
  const token = `writer-${number}-token`;
  if (role === 'host') {
    store.reserveWorkflowRun({ ...reservation(own, runner), executionMode: 'headless' });
    store.claimWorkflowRun({ runId: own, runnerId: runner, claimToken: token, leaseMs: 60_000 });
  }
  const terminal = (i) => `run-${(((i * 7919 + number * 104729) % size) - (((i * 7919 + number * 104729) % size) % 20)) + 2}`;
  return (i) => {
    if (role === 'host') {
      if (!store.renewWorkflowRunClaim({ runId: own, claimToken: token, leaseMs: 60_000 })) throw new Error('host renewal failed');
      store.claimNextWorkflowRun({ runnerId: runner, claimToken: `${token}-next`, leaseMs: 30_000, excludeRunIds: [own] });
    } else if (role === 'session') {
      store.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.writer', payload: { i, number } });
      if (i % 2 === 1) {
        const runId = `writer-${number}-run-${i}`;
        const session = `writer-${number}-session`;
        store.reserveWorkflowRun(reservation(runId, session));
        const claim = { runId, runnerId: session, claimToken: `${token}-${i}`, leaseMs: 30_000 };
        store.claimWorkflowRun(claim);
        store.markWorkflowRunRunning(claim);
        store.completeWorkflowRun(claim);
      }
    } else {
      store.listWorkflowRunViews({ offset: 0, limit: 50 });
    }
  };
}

/** The roles of `count` writers: the host first, sessions, and from 5 on a viewer last. */
function writerRoles(count) {
  return Array.from({ length: count }, (_, k) => (k === 0 ? 'host' : count >= 5 && k === count - 1 ? 'viewer' : 'session'));
}

module.exports = { writerFor, writerRoles };
