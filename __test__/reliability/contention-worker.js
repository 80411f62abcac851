'use strict';
// One contending process: `node contention-worker.js <config-json>`.
//
// Loops for a bounded time over the shared pool, as a Pi session would: claim the next
// controller item or the next workflow run, maybe renew it or change it under the claim, then
// settle/requeue/park/complete it or walk away and let the lease expire. Every call passes an
// explicit `now` (read just before the call) so the checker knows the logical time the store
// used. Writes its log (every acknowledged claim, renewal and release) to `logFile` as JSON.

const fs = require('node:fs');

const { CONTROLLER, random, openStore, isBusy } = require('./common.js');

const config = JSON.parse(process.argv[2]);
const { worker, file, projectPath, seconds, seed, logFile } = config;
const next = random(seed);
const ownerId = `owner-${worker}`;
// Half the runners are hosts, half sessions: the lease owner type follows the runner id.
const runnerId = worker % 2 === 0 ? `host-${worker}` : `session-runner-${worker}`;

const log = { worker, ownerId, runnerId, claims: [], renewals: [], releases: [], busy: 0, rejected: 0, errors: [], operations: 0 };
const store = openStore(file, projectPath);

// Rejections the reference makes too when a claim expired or another claim moved the resource.
const EXPECTED = /^Controller claim is stale$|changed during reconciliation$/;

/** One store call; SQLITE_BUSY is counted (a clear error, no effect), anything else is logged. */
function call(method, ...args) {
  log.operations += 1;
  try {
    return { ok: true, value: store[method](...args) };
  } catch (error) {
    if (isBusy(error)) {
      log.busy += 1;
    } else if (method === 'updateStatus' && EXPECTED.test(String(error?.message))) {
      log.rejected += 1;
    } else {
      log.errors.push({ method, name: error?.name, message: String(error?.message ?? error) });
    }
    return { ok: false };
  }
}

const leaseMs = () => next.int(40, 400);

function controllerCycle() {
  const lease = leaseMs();
  const start = Date.now();
  const claimed = call('claimNext', { controllers: [CONTROLLER], ownerId, leaseMs: lease, now: new Date(start).toISOString() });
  if (!claimed.ok || claimed.value === undefined) return;
  const claim = claimed.value;
  const item = claim.key;
  log.claims.push({ kind: 'resource', item, generation: claim.generation, owner: ownerId, start, expiresAt: Date.parse(claim.expiresAt) });
  for (let step = next.int(0, 3); step > 0; step -= 1) {
    const now = Date.now();
    const renewLease = leaseMs();
    const renewed = call('renewClaim', claim, renewLease, new Date(now).toISOString());
    if (renewed.ok && renewed.value === true) {
      log.renewals.push({ kind: 'resource', item, generation: claim.generation, now, expiresAt: now + renewLease });
    }
    if (next.chance(0.3)) {
      const at = Date.now();
      call('updateStatus', {
        ref: { controller: CONTROLLER, key: item },
        expectedResourceVersion: claim.resourceVersion,
        claim,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { seen: at, by: ownerId } },
        now: new Date(at).toISOString(),
      });
    }
  }
  const choice = next();
  const now = Date.now();
  const at = new Date(now).toISOString();
  if (choice < 0.7) {
    const settled = call('settleClaim', claim, at);
    if (settled.ok && settled.value === true) {
      log.releases.push({ kind: 'resource', item, generation: claim.generation, now, how: 'settled' });
    }
    // Keep the pool in circulation: settling removed the queue item.
    call('enqueue', { controller: CONTROLLER, key: item }, at);
  } else if (choice < 0.85) {
    const requeued = call('requeueClaim', claim, { availableAt: at, error: `requeued by ${ownerId}` }, at);
    if (requeued.ok && requeued.value === true) {
      log.releases.push({ kind: 'resource', item, generation: claim.generation, now, how: 'requeued' });
    }
  }
  // Otherwise walk away: the lease expires.
}

let tokens = 0;

function runCycle() {
  const lease = leaseMs();
  const claimToken = `token-${worker}-${seed}-${(tokens += 1)}`;
  const start = Date.now();
  const claimed = call('claimNextWorkflowRun', { runnerId, claimToken, leaseMs: lease, now: new Date(start).toISOString() });
  if (!claimed.ok || claimed.value === undefined) return;
  const run = claimed.value;
  const item = run.runId;
  log.claims.push({ kind: 'run', item, generation: run.claimGeneration, owner: runnerId, start, expiresAt: Date.parse(run.claimExpiresAt) });
  if (next.chance(0.5)) call('markWorkflowRunRunning', { runId: item, claimToken, now: new Date().toISOString() });
  for (let step = next.int(0, 2); step > 0; step -= 1) {
    const now = Date.now();
    const renewLease = leaseMs();
    const renewed = call('renewWorkflowRunClaim', { runId: item, claimToken, leaseMs: renewLease, now: new Date(now).toISOString() });
    if (renewed.ok && renewed.value === true) {
      log.renewals.push({ kind: 'run', item, generation: run.claimGeneration, now, expiresAt: now + renewLease });
    }
  }
  const choice = next();
  const now = Date.now();
  const at = new Date(now).toISOString();
  if (choice < 0.75) {
    const parked = call('parkWorkflowRun', { runId: item, claimToken, now: at });
    if (parked.ok && parked.value === true) log.releases.push({ kind: 'run', item, generation: run.claimGeneration, now, how: 'parked' });
  } else if (choice < 0.8) {
    const done = call('completeWorkflowRun', { runId: item, claimToken, now: at });
    if (done.ok && done.value === true) log.releases.push({ kind: 'run', item, generation: run.claimGeneration, now, how: 'done' });
  }
  // Otherwise walk away: the lease expires.
}

const deadline = Date.now() + seconds * 1000;
while (Date.now() < deadline) {
  if (next.chance(0.5)) controllerCycle();
  else runCycle();
}
store.close();
fs.writeFileSync(logFile, JSON.stringify(log));
