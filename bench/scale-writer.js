'use strict';
// One of bench:scale's other processes (child_process.fork): its own store on the shared state
// file, writing in the Pi pattern each time the poller asks, then acknowledging, so the poller's
// next timed call comes after this process's commit.
//   argv: <file> <role: host | session | viewer> <impl: native | ts> <number> <runs in the file>
// host: holds a claim on its own headless run and renews it (a commit), then looks for work
//   (claimNextWorkflowRun, nothing claimable); session: records a run event on one of the file's
//   terminal runs, and every other time reserves, claims, starts and completes a run of its own
//   (four commits); viewer: reads the first page of the run list (no commit).

const { loadStore, PROJECT } = require('./scale-impl');
const { reservation } = require('./fixtures');

const [file, role, impl, numberText, sizeText] = process.argv.slice(2);
const number = Number(numberText);
const size = Number(sizeText);

async function main() {
  const Store = await loadStore(impl);
  const store = new Store(file, { projectPath: PROJECT });
  const runner = `host-writer-${number}`;
  const own = `writer-${number}-host-run`;
  const token = `writer-${number}-token`;
  if (role === 'host') {
    store.reserveWorkflowRun({ ...reservation(own, runner), executionMode: 'headless' });
    store.claimWorkflowRun({ runId: own, runnerId: runner, claimToken: token, leaseMs: 60_000 });
  }
  const terminal = (i) => `run-${(((i * 7919 + number * 104729) % size) - (((i * 7919 + number * 104729) % size) % 20)) + 2}`;
  const write = (i) => {
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
  let sequence = 0; // every write of this process, across the poller's rows
  process.on('message', (message) => {
    if (message.op === 'write') {
      const start = process.hrtime.bigint();
      try {
        write(sequence);
        sequence += 1;
      } catch (error) {
        process.send({ op: 'error', message: String(error?.stack ?? error) });
        return;
      }
      process.send({ op: 'done', i: message.i, us: Number(process.hrtime.bigint() - start) / 1000 });
    } else if (message.op === 'close') {
      store.close();
      process.disconnect();
    }
  });
  process.send({ op: 'ready' });
}

main().catch((error) => {
  process.send?.({ op: 'error', message: String(error?.stack ?? error) });
  process.exitCode = 1;
});
