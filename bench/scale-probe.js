'use strict';
// bench:scale's "first poll of a new process": a fresh process opens a store on the file and
// makes one poll; prints {openUs, firstUs, rssBeforeMiB, rssAfterMiB} as JSON on stdout.
//   argv: <file> <impl: native | ts> <poll name (scale-impl.js POLLS)>
// rssAfterMiB - rssBeforeMiB is what the open and the first poll added to the process (the
// index a native store builds, SQLite's page cache, the loaded reference's code for ts).

const { loadStore, POLLS, PROJECT } = require('./scale-impl');

const [file, impl, poll] = process.argv.slice(2);

async function main() {
  const Store = await loadStore(impl);
  const mib = () => process.memoryUsage().rss / 2 ** 20;
  const rssBeforeMiB = mib();
  const start = process.hrtime.bigint();
  const store = new Store(file, { projectPath: PROJECT });
  const opened = process.hrtime.bigint();
  POLLS[poll](store, 0);
  const done = process.hrtime.bigint();
  const rssAfterMiB = mib();
  store.close();
  const openUs = Number(opened - start) / 1000;
  const firstUs = Number(done - opened) / 1000;
  process.stdout.write(`${JSON.stringify({ openUs, firstUs, rssBeforeMiB, rssAfterMiB })}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
