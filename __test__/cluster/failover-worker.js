'use strict';
// One host of the failover suite (failover.cluster.ts): run lifecycles and controller
// claim/settle loops against the cluster until the stop file appears, one JSON line per
// acknowledged call (or per error) on stdout.
const fs = require('node:fs');

const { SqliteControllerStore } = require('../../index.js');
const { reservation } = require('../../bench/fixtures.js');

const [url, worker, stopFile, clusterOptions] = process.argv.slice(2);
const log = (entry) => process.stdout.write(`${JSON.stringify({ t: Date.now(), worker, ...entry })}\n`);
const store = new SqliteControllerStore(url, {
  projectPath: '/piw-failover',
  cluster: JSON.parse(clusterOptions),
});

function attempt(op, fields, call) {
  try {
    const value = call();
    log({ op, ...fields });
    return { ok: true, value };
  } catch (error) {
    log({ op: 'error', what: op, ...fields, code: error.code ?? error.name, message: String(error.message).slice(0, 200) });
    return { ok: false };
  }
}

let n = 0;
while (!fs.existsSync(stopFile)) {
  n += 1;
  const runId = `${worker}-run-${n}`;
  const token = `${runId}-token`;
  const reserved = attempt('reserved', { runId }, () =>
    store.reserveWorkflowRun({ ...reservation(runId, `${runId}-session`), runnerId: worker }),
  );
  if (reserved.ok && attempt('claimedRun', { runId }, () => store.claimWorkflowRun({ runId, runnerId: worker, claimToken: token, leaseMs: 60_000 })).ok) {
    if (attempt('running', { runId }, () => store.markWorkflowRunRunning({ runId, claimToken: token })).ok) {
      attempt('completed', { runId }, () => store.completeWorkflowRun({ runId, claimToken: token }));
    }
  }
  const claimed = attempt('claimNext', {}, () => store.claimNext({ controllers: ['failover'], ownerId: worker, leaseMs: 2_000 }));
  const claim = claimed.ok ? claimed.value : undefined;
  if (claim) {
    log({ op: 'claimed', key: claim.key, generation: claim.generation, token: claim.token });
    const fenced = attempt('fenced', { key: claim.key, generation: claim.generation }, () =>
      store.updateStatus({
        ref: { controller: 'failover', key: claim.key },
        expectedResourceVersion: claim.resourceVersion,
        claim,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { worker, n } },
      }),
    );
    if (fenced.ok) log({ op: 'written', key: claim.key, generation: claim.generation, version: fenced.value.metadata.resourceVersion });
    attempt('settled', { key: claim.key, generation: claim.generation }, () => store.settleClaim(claim));
    // Due again at once, for the next claim.
    attempt('enqueued', { key: claim.key }, () => store.enqueue({ controller: 'failover', key: claim.key }));
  }
}
store.close();
