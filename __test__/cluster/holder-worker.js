'use strict';
// The holder of the paused-holder case (freeze.cluster.ts): claims one workflow run and one
// controller resource with short leases, then keeps renewing both and writing fenced status until
// the stop file appears; then it tries to finish its work (complete the run, settle the claim).
// One JSON line per call on stdout: `started` (before the call) and `t` (after), whether the
// reference's answer granted the write (`granted`), and the error's message when it threw.
const fs = require('node:fs');

const { SqliteControllerStore } = require('../../index.js');
const { reservation } = require('../../bench/fixtures.js');

const [url, stopFile, runId, controller, key, leaseMs] = process.argv.slice(2);
const lease = Number(leaseMs);
const token = 'holder-token';
const store = new SqliteControllerStore(url, { projectPath: '/piw-paused' });
const log = (entry) => process.stdout.write(`${JSON.stringify({ t: Date.now(), ...entry })}\n`);

/** Runs one call; `granted(value)` says whether the reference's answer let it through. */
function attempt(op, call, granted = () => true) {
  const started = Date.now();
  try {
    const value = call();
    log({ op, started, granted: granted(value), value: typeof value === 'boolean' ? value : value === undefined ? null : 'record' });
    return value;
  } catch (error) {
    log({ op, started, granted: false, code: error.code ?? error.name, message: String(error.message).slice(0, 200) });
    return undefined;
  }
}

store.reserveWorkflowRun({ ...reservation(runId, `${runId}-session`), runnerId: 'host-holder' });
const run = store.claimWorkflowRun({ runId, runnerId: 'host-holder', claimToken: token, leaseMs: lease });
// Running: completing it is then up to the claim alone.
store.markWorkflowRunRunning({ runId, claimToken: token });
const claim = store.claimNext({ controllers: [controller], ownerId: 'holder', leaseMs: lease });
log({ op: 'held', run: run?.runId ?? null, key: claim?.key ?? null, generation: claim?.generation ?? null });

const ref = { controller, key };
let n = 0;
const sleep = new Int32Array(new SharedArrayBuffer(4));
while (!fs.existsSync(stopFile)) {
  n += 1;
  attempt('renewRun', () => store.renewWorkflowRunClaim({ runId, claimToken: token, leaseMs: lease }), (renewed) => renewed === true);
  attempt('renewClaim', () => store.renewClaim(claim, lease), (renewed) => renewed === true);
  // The current version, so that only the claim can refuse the write.
  const version = store.getResource(ref).metadata.resourceVersion;
  attempt('updateStatus', () =>
    store.updateStatus({
      ref,
      expectedResourceVersion: version,
      claim,
      status: { observedGeneration: 1, conditions: [], controllerStatus: { writer: 'holder', n } },
    }),
  );
  Atomics.wait(sleep, 0, 0, 250);
}
attempt('completeRun', () => store.completeWorkflowRun({ runId, claimToken: token }), (completed) => completed === true);
attempt('settleClaim', () => store.settleClaim(claim), (settled) => settled === true);
store.close();
