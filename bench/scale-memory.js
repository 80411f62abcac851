'use strict';
// bench:scale's table 9 (issue 36): the run index's memory. A fresh process opens a store on the
// file and polls (listWorkflowRuns, the revision, a host's claim) every 100 ms until a poll is
// answered from the index (it takes under 5 ms: the SQL poll reads the whole history), at most
// 60 s; prints {rssBeforeMiB, rssAfterMiB, polls, indexed} as JSON on stdout. Run once with the
// index and once with PIW_RUN_INDEX=off (the same number of polls): the difference in RSS growth
// is the index's memory, the SQLite page cache and the rest being the same in both.
//   argv: <file> <polls: how many, or 0 to poll until indexed>

const { loadStore, POLLS, PROJECT } = require('./scale-impl');

const [file, pollsText] = process.argv.slice(2);

async function main() {
  const Store = await loadStore('native');
  const mib = () => process.memoryUsage().rss / 2 ** 20;
  const rssBeforeMiB = mib();
  const store = new Store(file, { projectPath: PROJECT });
  const wanted = Number(pollsText);
  const until = Date.now() + 60_000;
  let polls = 0;
  let indexed = false;
  while (wanted > 0 ? polls < wanted : !indexed && Date.now() < until) {
    const start = process.hrtime.bigint();
    POLLS['listWorkflowRuns({limit: 100})'](store, polls);
    POLLS.workflowRunListRevision(store, polls);
    POLLS['claimNextWorkflowRun, host, nothing claimable'](store, polls);
    indexed = Number(process.hrtime.bigint() - start) / 1e6 < 5;
    polls += 1;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const rssAfterMiB = mib();
  store.close();
  process.stdout.write(`${JSON.stringify({ rssBeforeMiB, rssAfterMiB, polls, indexed })}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
