'use strict';
// A writer that is killed with SIGKILL at a random moment: `node crash-writer.js <config-json>`.
//
// It opens the state file (the open itself may be interrupted: WAL recovery, blob pruning) and
// performs mixed writes until it dies. Before each call it prints `B <json>` and after the call
// returned `R <json>` with what it was told, on stdout with a synchronous write, so every `R`
// line the parent read is a write the store acknowledged.

const fs = require('node:fs');

const { openStore, random, runReservation } = require('./common.js');

const { file, projectPath, iteration, seed } = JSON.parse(process.argv[2]);
const next = random(seed);
const CONTROLLER = 'crash';
const owner = `writer-${iteration}`;

function say(tag, value) {
  fs.writeSync(1, `${tag} ${JSON.stringify(value)}\n`);
}

let sequence = 0;
/** Runs one store call between its `B` and `R` lines; `report` picks what the parent checks. */
function step(kind, target, run, report = () => ({})) {
  sequence += 1;
  const id = `${iteration}.${sequence}`;
  say('B', { id, kind, ...target });
  const value = run();
  say('R', { id, kind, ...target, ...report(value) });
  return value;
}

const padding = (size) => 'x'.repeat(size);
const keys = [];
const runs = [];
let counter = 0;
let store;

const operations = {
  putNew() {
    const key = `i${iteration}-k${(counter += 1)}`;
    step('put', { key }, () =>
      store.putResource({ controller: CONTROLLER, key, spec: { key, pad: padding(next.int(0, 3000)) }, initialStatus: { n: 0 } }),
      (resource) => ({ uid: resource.metadata.uid }),
    );
    keys.push(key);
  },
  putUpdate() {
    if (keys.length === 0) return;
    const key = next.pick(keys);
    step('respec', { key }, () =>
      store.putResource({ controller: CONTROLLER, key, spec: { key, v: (counter += 1) }, initialStatus: { n: 0 } }),
      (resource) => ({ generation: resource.metadata.generation }),
    );
  },
  claimCycle() {
    const claim = step('claim', {}, () => store.claimNext({ controllers: [CONTROLLER], ownerId: owner, leaseMs: 60_000 }),
      (value) => (value === undefined ? { none: true } : { key: value.key, generation: value.generation }));
    if (claim === undefined) return;
    const ref = { controller: CONTROLLER, key: claim.key };
    step('status', { key: claim.key }, () =>
      store.updateStatus({
        ref,
        expectedResourceVersion: claim.resourceVersion,
        claim,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { n: (counter += 1), pad: padding(next.int(0, 5000)) } },
      }),
      (resource) => ({ version: resource.metadata.resourceVersion }),
    );
    const resource = store.getResource(ref);
    if (next.chance(0.5)) {
      const effectKey = `effect-${(counter += 1)}`;
      step('effect', { uid: resource.metadata.uid, effectKey }, () =>
        store.reserveEffect({
          key: effectKey,
          resourceUid: resource.metadata.uid,
          claim,
          generation: resource.metadata.generation,
          kind: 'crash.effect',
          requestFingerprint: `fp-${effectKey}`,
        }),
      );
    }
    if (next.chance(0.8)) {
      step('settle', { key: claim.key, generation: claim.generation }, () => store.settleClaim(claim), (settled) => ({ settled }));
    }
  },
  recordEvent() {
    if (keys.length === 0) return;
    const key = next.pick(keys);
    step('event', { key }, () =>
      store.recordEvent({ controller: CONTROLLER, key, type: 'crash.note', payload: { n: (counter += 1), pad: padding(next.int(0, 20_000)) } }),
      (event) => ({ seq: event.seq }),
    );
  },
  reserveRun() {
    const runId = `i${iteration}-r${(counter += 1)}`;
    step('reserve', { runId }, () => store.reserveWorkflowRun(runReservation(runId, { input: { pad: padding(next.int(0, 4000)) } })));
    runs.push(runId);
  },
  runCycle() {
    const runId = runs.pop();
    if (runId === undefined) return;
    const claimToken = `token-${runId}`;
    const run = step('runClaim', { runId }, () => store.claimWorkflowRun({ runId, runnerId: 'setup', claimToken, leaseMs: 60_000 }),
      (value) => ({ generation: value?.claimGeneration ?? null }));
    if (run === undefined) return;
    step('runRunning', { runId }, () => store.markWorkflowRunRunning({ runId, claimToken }), (ok) => ({ ok }));
    step('runEvent', { runId }, () =>
      store.recordRunEvent({ runId, workflowRef: 'builtin:echo', type: 'crash.progress', runnerId: 'setup', payload: { pad: padding(next.int(0, 8000)) } }),
      (event) => ({ seq: event.seq }),
    );
    if (next.chance(0.7)) step('runDone', { runId }, () => store.completeWorkflowRun({ runId, claimToken }), (ok) => ({ ok }));
  },
  requestDeletion() {
    if (keys.length === 0) return;
    const key = next.pick(keys);
    step('delete', { key }, () => store.requestDeletion({ controller: CONTROLLER, key }));
  },
};

const weighted = [
  ['putNew', 3],
  ['putUpdate', 1],
  ['claimCycle', 3],
  ['recordEvent', 2],
  ['reserveRun', 2],
  ['runCycle', 2],
  ['requestDeletion', 0.3],
].flatMap(([name, weight]) => Array(Math.round(weight * 10)).fill(name));

say('O', { iteration });
store = openStore(file, projectPath);
say('S', { iteration });
for (;;) operations[next.pick(weighted)]();
