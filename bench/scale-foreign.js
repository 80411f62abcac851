'use strict';
// bench:scale's table 6 (issue 36): the polls right after one commit made by a connection that
// is not this package's (better-sqlite3 in a process of its own — another application, or the
// TypeScript store during a migration). Such a commit has no journal entry: the run index is
// built again off the caller's path while the polls read through SQL. What matters is how many
// polls pay for it: each of `POLLS_AFTER` polls in a row is timed, with the whole-history SQL
// poll (the same call inside a transaction of the caller's, where the index is never used) and
// the last build's time beside them.

const { execFileSync } = require('node:child_process');
const path = require('node:path');

const POLLS_AFTER = 6;

/** One UPDATE of the queue by better-sqlite3, in a process of its own. */
function foreignCommit(file) {
  const script = `const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
    const db = new Database(${JSON.stringify(file)});
    db.pragma('busy_timeout = 5000');
    db.prepare('UPDATE run_queue SET updated_at = updated_at + 1 WHERE rowid = (SELECT min(rowid) FROM run_queue)').run();
    db.close();`;
  execFileSync(process.execPath, ['-e', script], { cwd: path.dirname(file) });
}

/** The calling thread's CPU time in µs (the addon's clock), or -1 where there is none. */
function threadCpu() {
  const { binding } = require('../lib/native.js');
  return typeof binding.threadCpuTimeNs === 'function' ? binding.threadCpuTimeNs() / 1000 : -1;
}

/**
 * Microseconds `poll` took, wall and CPU of this thread: a poll that waited for the background
 * build and answered from the index spent its wall time waiting, not reading.
 */
function time(poll) {
  const cpu = threadCpu();
  const start = process.hrtime.bigint();
  poll();
  return { wall: Number(process.hrtime.bigint() - start) / 1000, cpu: threadCpu() - cpu };
}

/**
 * On `store` (its index already built once): the SQL poll's cost, then the cost of each of
 * the polls after one foreign commit, `pause` ms apart (a host polls every few hundred ms).
 */
async function pollsAfterForeignCommit(store, file, pause = 50) {
  const poll = () => store.listWorkflowRuns({ limit: 100 });
  const connection = store.state.connection;
  connection.exec('BEGIN');
  const sql = time(poll).wall;
  connection.exec('ROLLBACK');
  foreignCommit(file);
  const after = [];
  for (let n = 0; n < POLLS_AFTER; n += 1) {
    after.push(time(poll));
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
  return { sql, after };
}

module.exports = { POLLS_AFTER, pollsAfterForeignCommit };
