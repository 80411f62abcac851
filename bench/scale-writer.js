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
const { writerFor } = require('./scale-writes');

const [file, role, impl, numberText, sizeText] = process.argv.slice(2);

async function main() {
  const Store = await loadStore(impl);
  const store = new Store(file, { projectPath: PROJECT });
  const write = writerFor(store, role, Number(numberText), Number(sizeText));
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
