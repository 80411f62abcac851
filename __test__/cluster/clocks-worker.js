'use strict';
// One host of the clocks suite (clocks.cluster.ts), run under libfaketime with its wall clock
// moved: controller claims (claimNext, renewClaim, settleClaim) and run claims
// (claimNextWorkflowRun, renewWorkflowRunClaim, completeWorkflowRun) held for a few renewals
// each, with a fenced write every round, and now and then a pause past the lease (a GC pause, a
// suspended VM) after which the paused holder tries its fenced writes again. One JSON line per
// event on stdout, timed by CLOCK_MONOTONIC (`process.hrtime`), which libfaketime leaves alone and
// every process on the machine shares: the suite's global timeline.
const { SqliteControllerStore } = require('../../index.js');
const { reservation } = require('../../bench/fixtures.js');

const [url, worker, index, durationMs, leaseMs] = process.argv.slice(2);
const LEASE_MS = Number(leaseMs);
/** A renewal every fifth of the lease. */
const TICK_MS = LEASE_MS / 5;
/** Rounds a claim is held (a fenced write and a renewal each) before it is settled. */
const ROUNDS = 4;
/** A pause every PAUSE_EVERY ticks, the hosts' pauses a third of that apart; long enough for
 * another host to take the paused holder's leases. */
const PAUSE_EVERY = 15;
const PAUSE_MS = LEASE_MS * 2.5;
const MAX_TICKS = 500;

const mono = () => Number(process.hrtime.bigint()) / 1e6;
const log = (entry) => process.stdout.write(`${JSON.stringify({ worker, mono: mono(), ...entry })}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
process.on('warning', (warning) => log({ op: 'warning', code: warning.code, message: warning.message }));

const store = new SqliteControllerStore(url, { projectPath: '/piw-clocks' });
// A store without a cluster clock (the code before it) has the host believe its own clock.
const offset = () => store.state.clusterClock?.offsetMs ?? 0;
/**
 * Until when, on the global timeline, this holder believes it holds a lease expiring at
 * `expiresAt`: when its own clock, moved by the store's offset, reaches it.
 */
const believedUntil = (expiresAt) => mono() + (Date.parse(expiresAt) - (Date.now() + offset()));

function attempt(what, call) {
  try {
    return { ok: true, value: call() };
  } catch (error) {
    return { ok: false, message: String(error.message).slice(0, 200), code: error.code };
  }
}

/** A call whose failure is not the test's subject (logged, the loop goes on). */
function quiet(what, call) {
  const outcome = attempt(what, call);
  if (!outcome.ok) log({ op: 'error', what, message: outcome.message, code: outcome.code });
  return outcome.ok ? outcome.value : undefined;
}

const controller = {
  held: undefined,
  claim() {
    const claim = quiet('claimNext', () => store.claimNext({ controllers: ['clocks'], ownerId: worker, leaseMs: LEASE_MS }));
    if (claim === undefined) return;
    this.held = { claim, holder: `${worker}#${claim.generation}`, rounds: 0 };
    this.log('held', { how: 'claim', until: believedUntil(claim.expiresAt) });
  },
  log(op, fields) {
    const { claim, holder } = this.held;
    log({ op, kind: 'controller', lease: claim.key, holder, generation: claim.generation, ...fields });
  },
  write(after) {
    const { claim } = this.held;
    const written = attempt('updateStatus', () =>
      store.updateStatus({
        ref: { controller: 'clocks', key: claim.key },
        expectedResourceVersion: claim.resourceVersion,
        claim,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { worker } },
      }),
    );
    this.log('write', { after, ok: written.ok, message: written.message });
  },
  settle(op) {
    const { claim } = this.held;
    const settled = attempt('settleClaim', () => store.settleClaim(claim));
    this.log(op, { ok: settled.ok && settled.value === true, message: settled.message });
    quiet('enqueue', () => store.enqueue({ controller: 'clocks', key: claim.key }));
    this.held = undefined;
  },
  tick() {
    if (this.held === undefined) return this.claim();
    this.write('round');
    this.held.rounds += 1;
    if (this.held.rounds >= ROUNDS) return this.settle('released');
    const { claim } = this.held;
    const renewed = attempt('renewClaim', () => store.renewClaim(claim, LEASE_MS));
    if (renewed.ok && renewed.value === true) {
      this.log('held', { how: 'renew', until: believedUntil(claim.expiresAt) });
    } else {
      this.log('lost', { message: renewed.message });
      this.held = undefined;
    }
  },
};

let reserved = 0;
const runs = {
  held: undefined,
  claim() {
    reserved += 1;
    const runId = `${worker}-run-${reserved}`;
    quiet('reserveWorkflowRun', () => store.reserveWorkflowRun({ ...reservation(runId, `${runId}-session`), runnerId: worker, executionMode: 'headless' }));
    const claimToken = `${runId}-token-${mono()}`;
    const run = quiet('claimNextWorkflowRun', () => store.claimNextWorkflowRun({ runnerId: worker, claimToken, leaseMs: LEASE_MS }));
    if (run === undefined) return;
    this.held = { runId: run.runId, claimToken, holder: `${worker}#${run.claimGeneration}`, generation: run.claimGeneration, rounds: 0 };
    this.log('held', { how: 'claim', until: believedUntil(run.claimExpiresAt) });
  },
  log(op, fields) {
    const { runId, holder, generation } = this.held;
    log({ op, kind: 'run', lease: runId, holder, generation, ...fields });
  },
  write(after) {
    const { runId, claimToken } = this.held;
    const written = attempt('markWorkflowRunRunning', () => store.markWorkflowRunRunning({ runId, claimToken }));
    this.log('write', { after, ok: written.ok && written.value === true, message: written.message });
  },
  settle(op) {
    const { runId, claimToken } = this.held;
    const completed = attempt('completeWorkflowRun', () => store.completeWorkflowRun({ runId, claimToken }));
    this.log(op, { ok: completed.ok && completed.value === true, message: completed.message });
    this.held = undefined;
  },
  tick() {
    if (this.held === undefined) return this.claim();
    this.write('round');
    this.held.rounds += 1;
    if (this.held.rounds >= ROUNDS) return this.settle('released');
    const { runId, claimToken, generation } = this.held;
    const renewed = attempt('renewWorkflowRunClaim', () => store.renewWorkflowRunClaim({ runId, claimToken, leaseMs: LEASE_MS }));
    // The expiry the renewal stored (the call returns only true or false).
    const run = renewed.ok && renewed.value === true ? quiet('getWorkflowRun', () => store.getWorkflowRun(runId)) : undefined;
    if (run !== undefined && run.claimGeneration === generation) {
      this.log('held', { how: 'renew', until: believedUntil(run.claimExpiresAt) });
    } else {
      this.log('lost', { message: renewed.message });
      this.held = undefined;
    }
  },
};

async function main() {
  log({ op: 'clock', reading: store.state.clusterClock ?? null, hostNow: Date.now() });
  const deadline = mono() + Number(durationMs);
  for (let tick = 0; tick < MAX_TICKS && mono() < deadline; tick += 1) {
    if (tick % PAUSE_EVERY === (Number(index) * PAUSE_EVERY) / 3 + 3) {
      log({ op: 'pause' });
      await sleep(PAUSE_MS);
      log({ op: 'resume' });
      // The paused holder carries on where it was: its fenced writes must be refused if
      // another holder took its lease meanwhile.
      for (const kind of [controller, runs]) {
        if (kind.held === undefined) continue;
        kind.write('pause');
        kind.settle('settledAfterPause');
      }
    }
    controller.tick();
    runs.tick();
    await sleep(TICK_MS);
  }
  log({ op: 'clock', reading: store.state.clusterClock ?? null, hostNow: Date.now() });
  store.close();
}

main().catch((error) => {
  log({ op: 'fatal', message: String(error.stack) });
  process.exitCode = 1;
});
