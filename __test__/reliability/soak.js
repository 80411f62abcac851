'use strict';
// The long reliability runs (`npm run soak`): contention, crashes, hostile input (JS and Rust).
//
//   node __test__/reliability/soak.js [--contention-seconds 60] [--kills 100]
//        [--fuzz-calls 1000000] [--fuzz-processes 2] [--rust-cases 100000] [--seed 1]
//        [--report soak-report.json] [--only contention,crash,fuzz,rust,faults]
//
// Prints the figures of each part and exits non-zero when any property failed.

const childProcess = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { runContention } = require('./contention.js');
const { runCrashes } = require('./crash.js');
const { ROOT, runNode } = require('./common.js');

function options() {
  const values = {
    'contention-seconds': 60,
    kills: 100,
    'fuzz-calls': 1_000_000,
    'fuzz-processes': 2,
    'rust-cases': 100_000,
    seed: 1,
    report: null,
    only: 'contention,crash,fuzz,rust,faults',
  };
  const args = process.argv.slice(2);
  for (let index = 0; index < args.length; index += 2) {
    const name = args[index].replace(/^--/, '');
    if (!(name in values)) throw new Error(`unknown option --${name}`);
    values[name] = typeof values[name] === 'number' ? Number(args[index + 1]) : args[index + 1];
  }
  values.only = new Set(String(values.only).split(','));
  return values;
}

function log(line) {
  process.stdout.write(`[soak ${new Date().toISOString()}] ${line}\n`);
}

async function fuzz({ calls, processes, seed }) {
  const share = Math.ceil(calls / processes);
  const runs = await Promise.all(
    Array.from({ length: processes }, (_, index) =>
      runNode(path.join(__dirname, 'fuzz-cli.js'), [String(share), String(seed * 100 + index)], {
        timeoutMs: 6 * 3600 * 1000,
        onLine(line) {
          if (line.startsWith('progress')) log(`fuzz process ${index}: ${line}`);
        },
      }),
    ),
  );
  const report = { calls: 0, returned: 0, rejected: 0, sequences: 0, problems: [], messages: {} };
  for (const [index, run] of runs.entries()) {
    const result = run.stdout.split('\n').find((line) => line.startsWith('RESULT '));
    const failed = run.stdout.split('\n').find((line) => line.startsWith('FAILED '));
    if (run.signal !== null || (result === undefined && failed === undefined)) {
      report.problems.push(`fuzz process ${index} died (${run.signal ?? run.code}): ${run.stderr.slice(-2000)}`);
      continue;
    }
    if (failed !== undefined) {
      report.problems.push(`fuzz process ${index}: ${JSON.parse(failed.slice(7)).message.slice(0, 4000)}`);
      continue;
    }
    const part = JSON.parse(result.slice(7));
    for (const key of ['calls', 'returned', 'rejected', 'sequences']) report[key] += part[key];
    for (const [message, count] of part.messages) report.messages[message] = (report.messages[message] ?? 0) + count;
  }
  report.distinctRejections = Object.keys(report.messages).length;
  report.messages = Object.fromEntries(Object.entries(report.messages).sort((a, b) => b[1] - a[1]).slice(0, 40));
  return report;
}

function rustFuzz({ cases }) {
  const started = Date.now();
  const run = childProcess.spawnSync('cargo', ['test', '--quiet', '--lib', 'fuzz_tests'], {
    cwd: ROOT,
    env: { ...process.env, PIW_RUST_FUZZ_CASES: String(cases) },
    encoding: 'utf8',
    timeout: 6 * 3600 * 1000,
  });
  const problems = run.status === 0 ? [] : [`cargo test fuzz_tests failed (${run.status ?? run.signal}): ${(run.stdout + run.stderr).slice(-4000)}`];
  return { cases, elapsedMs: Date.now() - started, problems };
}

/** The full fault sweep (every fault point, not the quick sample of `npm test`). */
function faultSweep() {
  const started = Date.now();
  const run = childProcess.spawnSync(
    'cargo',
    ['test', '--quiet', '--lib', 'fault_sweep_tests', '--', '--nocapture', '--test-threads', '1'],
    { cwd: ROOT, env: { ...process.env, PIW_FAULT_SWEEP: 'full' }, encoding: 'utf8', timeout: 6 * 3600 * 1000 },
  );
  const figures = run.stdout
    .split('\n')
    .map((line) => line.replace(/^(test \S+ \.\.\. |\.+)/, ''))
    .filter((line) => line.startsWith('fault sweep') || line.startsWith('  '));
  const problems = run.status === 0 ? [] : [`cargo test fault_sweep_tests failed (${run.status ?? run.signal}): ${(run.stdout + run.stderr).slice(-4000)}`];
  return { figures, elapsedMs: Date.now() - started, problems };
}

async function main() {
  const opts = options();
  const report = { started: new Date().toISOString() };
  if (opts.only.has('contention')) {
    log(`contention: 8 processes × ${opts['contention-seconds']} s`);
    report.contention = await runContention({ processes: 8, seconds: opts['contention-seconds'], seed: opts.seed });
    log(`contention: ${JSON.stringify(report.contention)}`);
  }
  if (opts.only.has('crash')) {
    log(`crashes: ${opts.kills} SIGKILLs`);
    report.crash = await runCrashes({ kills: opts.kills, seed: opts.seed });
    log(`crashes: ${JSON.stringify(report.crash)}`);
  }
  if (opts.only.has('fuzz')) {
    log(`fuzz: ${opts['fuzz-calls']} calls in ${opts['fuzz-processes']} processes`);
    report.fuzz = await fuzz({ calls: opts['fuzz-calls'], processes: opts['fuzz-processes'], seed: opts.seed });
    log(`fuzz: ${report.fuzz.calls} calls, ${report.fuzz.returned} returned, ${report.fuzz.rejected} rejected, problems ${JSON.stringify(report.fuzz.problems)}`);
  }
  if (opts.only.has('rust')) {
    log(`rust fuzz: ${opts['rust-cases']} cases`);
    report.rust = rustFuzz({ cases: opts['rust-cases'] });
    log(`rust fuzz: ${JSON.stringify(report.rust)}`);
  }
  if (opts.only.has('faults')) {
    log('fault sweep: every write, sync, truncate and lock failed in turn');
    report.faults = faultSweep();
    for (const line of report.faults.figures) log(line);
  }
  report.finished = new Date().toISOString();
  const problems = ['contention', 'crash', 'fuzz', 'rust', 'faults'].flatMap((part) => (report[part]?.problems ?? []).map((problem) => `${part}: ${problem}`));
  report.ok = problems.length === 0;
  if (opts.report) fs.writeFileSync(opts.report, `${JSON.stringify(report, null, 2)}\n`);
  log(report.ok ? 'all reliability properties held' : `FAILED:\n${problems.join('\n')}`);
  const figures = [
    report.contention && `contention: ${report.contention.processes} processes × ${report.contention.operations} operations (${report.contention.claims} claims)`,
    report.crash && `crashes: ${report.crash.survived}/${report.crash.kills} kills survived, ${report.crash.acknowledged} acknowledged writes checked`,
    report.fuzz && `fuzz: ${report.fuzz.calls} JS calls`,
    report.rust && `rust fuzz: ${report.rust.cases} core calls`,
    report.faults && `faults: ${report.faults.figures.filter((line) => line.startsWith('fault sweep')).length} sweeps`,
  ].filter(Boolean);
  log(figures.join('; '));
  process.exitCode = report.ok ? 0 : 1;
}

main().catch((error) => {
  log(`soak crashed: ${error.stack}`);
  process.exitCode = 1;
});
