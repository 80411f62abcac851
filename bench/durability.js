'use strict';
// `npm run bench:durability`: the figures behind issue 12 that are timings, not tests.
//
// 1. open-prune: how long a read-write open takes on a file with many superseded blobs (a
//    resource whose spec was replaced N times in one long-lived process), N up to 50,000.
// 2. wal-shim: the run lifecycle (reserve, claim, markRunning, renew, complete) and the
//    controller loop (claimNext, updateStatus, recordEvent, settleClaim) with the WAL-append
//    shim on and off (`PIW_WAL_SHIM=off`), on and off back to back in alternating child
//    processes, on the temp folder (fsync-bound) and /dev/shm (CPU-bound). Each round gives
//    one off/on ratio per row; the table shows their geometric mean with a 95 % confidence
//    interval (t over the rounds' log ratios). Plus the pwrite64/fdatasync calls per operation
//    counted with `strace -c` when strace is installed.
//
//   node bench/durability.js [--superseded 1000,4000,50000] [--runs 1000] [--rounds 3]

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const SHM = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();

function options() {
  const values = { superseded: '1000,4000,50000', runs: 1000, rounds: 3 };
  const args = process.argv.slice(2);
  for (let index = 0; index < args.length; index += 2) {
    const name = args[index].replace(/^--/, '');
    if (!(name in values)) throw new Error(`unknown option --${name}`);
    values[name] = typeof values[name] === 'number' ? Number(args[index + 1]) : args[index + 1];
  }
  return values;
}

/** Two-sided 95 % t quantiles by degrees of freedom (1..30; beyond: 2.0). */
const T95 = [12.71, 4.3, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.2, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11, 2.1, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04];

/** Geometric mean of `ratios` and its 95 % confidence interval, as [mean, low, high]. */
function ratioInterval(ratios) {
  const logs = ratios.map(Math.log);
  const mean = logs.reduce((sum, value) => sum + value, 0) / logs.length;
  if (logs.length < 2) return [Math.exp(mean), NaN, NaN];
  const variance = logs.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (logs.length - 1);
  const half = (T95[logs.length - 2] ?? 2.0) * Math.sqrt(variance / logs.length);
  return [Math.exp(mean), Math.exp(mean - half), Math.exp(mean + half)];
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function openStore(folder) {
  const { SqliteControllerStore } = require('..');
  return new SqliteControllerStore(path.join(folder, 'state.sqlite'), { projectPath: folder });
}

/** Child: writes `count` superseded specs, then times the reopen (which prunes them). */
function childPrune(folder, count) {
  const store = openStore(folder);
  for (let version = 0; version < count; version += 1) {
    store.putResource({ controller: 'bench', key: 'respecced', spec: { version }, initialStatus: {} });
  }
  const connection = store.state.connection;
  const before = connection.prepare('SELECT count(*) AS n FROM blobs').get().n;
  store.close();
  const started = process.hrtime.bigint();
  const reopened = openStore(folder);
  const openMs = Number(process.hrtime.bigint() - started) / 1e6;
  const after = reopened.state.connection.prepare('SELECT count(*) AS n FROM blobs').get().n;
  reopened.close();
  return { count, blobsBefore: before, blobsAfter: after, openMs };
}

/** CPU time (user + system) of this process since `start` (a `process.cpuUsage()`), µs. */
function cpuSince(start) {
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

/** Child: `runs` run lifecycles; µs per store call. */
function childLifecycle(folder, runs) {
  const store = openStore(folder);
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  for (let index = 0; index < runs; index += 1) {
    const runId = `run-${index}`;
    const claim = { runId, runnerId: 'bench', claimToken: `token-${index}`, leaseMs: 30_000 };
    store.reserveWorkflowRun({
      runId,
      workflowName: 'echo',
      workflowSourceRef: 'builtin:echo',
      workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
      definitionDigest: `sha256:${'ab'.repeat(32)}`,
      definitionSnapshot: { name: 'echo', steps: [{ id: 'a', kind: 'prompt' }] },
      input: { message: `hello ${runId}` },
      runnerId: 'bench',
      originSessionId: `session-${index}`,
    });
    store.claimWorkflowRun(claim);
    store.markWorkflowRunRunning(claim);
    store.renewWorkflowRunClaim(claim);
    store.completeWorkflowRun(claim);
  }
  const micros = Number(process.hrtime.bigint() - started) / 1000;
  const cpuMicros = cpuSince(cpu);
  store.close();
  return { runs, calls: runs * 5, microsPerCall: micros / (runs * 5), cpuMicrosPerCall: cpuMicros / (runs * 5) };
}

/** Child: `resources` resources, then controller loops until none is left; µs per loop. */
function childLoop(folder, resources) {
  const store = openStore(folder);
  for (let index = 0; index < resources; index += 1) {
    store.putResource({ controller: 'jobs', key: `job-${index}`, spec: { n: index }, initialStatus: { phase: 'new' } });
  }
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  let loops = 0;
  for (;;) {
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000 });
    if (claim === undefined) break;
    const ref = { controller: claim.controller, key: claim.key };
    store.updateStatus({
      ref,
      expectedResourceVersion: claim.resourceVersion,
      claim,
      status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
    });
    store.recordEvent({ controller: ref.controller, key: ref.key, claim, type: 'bench.reconciled', payload: { n: loops } });
    store.settleClaim(claim);
    loops += 1;
  }
  const micros = Number(process.hrtime.bigint() - started) / 1000;
  const cpuMicros = cpuSince(cpu);
  store.close();
  return { loops, microsPerCall: micros / loops, cpuMicrosPerCall: cpuMicros / loops };
}

function child(args, env = {}, wrap = []) {
  const command = wrap.length > 0 ? wrap[0] : process.execPath;
  const argv = [...wrap.slice(1), ...(wrap.length > 0 ? [process.execPath] : []), __filename, 'child', ...args];
  const run = spawnSync(command, argv, { env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (run.status !== 0) throw new Error(`child ${args.join(' ')} failed: ${run.stderr.slice(-3000)}`);
  const line = run.stdout.split('\n').find((text) => text.startsWith('RESULT '));
  return { result: JSON.parse(line.slice(7)), stderr: run.stderr };
}

function inFolder(root, body) {
  const folder = fs.mkdtempSync(path.join(root, 'piw-durability-'));
  try {
    return body(folder);
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** Calls per syscall name from `strace -c` output. */
function straceCounts(text) {
  const counts = {};
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields.length >= 5 && /^\d/.test(fields[0]) && /^[a-z_0-9]+$/.test(fields[fields.length - 1])) {
      counts[fields[fields.length - 1]] = Number(fields[3]);
    }
  }
  return counts;
}

function main() {
  if (process.argv[2] === 'child') {
    const [, , , kind, folder, count] = process.argv;
    const children = { prune: childPrune, lifecycle: childLifecycle, loop: childLoop };
    const result = children[kind](folder, Number(count));
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
    return;
  }
  const opts = options();
  console.log('open-prune: a read-write open of a file with N superseded specs (/dev/shm)');
  console.log('| superseded | blobs before | blobs after | open (ms) |');
  console.log('| ---: | ---: | ---: | ---: |');
  for (const count of opts.superseded.split(',').map(Number)) {
    const { result } = inFolder(SHM, (folder) => child(['prune', folder, String(count)]));
    console.log(`| ${count} | ${result.blobsBefore} | ${result.blobsAfter} | ${result.openMs.toFixed(1)} |`);
  }

  console.log(`\nwal-shim: on and off back to back, ${opts.rounds} alternating rounds`);
  console.log('Wall time includes the fsyncs and whatever else the machine runs; CPU time (user + system) is');
  console.log("this process's own work, kernel write calls included.");
  console.log('| folder | row | clock | shim on (median) | shim off (median) | off / on (geometric mean) | 95 % interval |');
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: |');
  const rows = [
    ['run lifecycle, µs/call', 'lifecycle', (onDisk) => (onDisk ? Math.max(50, Math.round(opts.runs / 5)) : opts.runs)],
    ['controller loop, µs/loop', 'loop', (onDisk) => (onDisk ? Math.max(20, Math.round(opts.runs / 10)) : Math.round(opts.runs / 2))],
  ];
  for (const [label, root] of [['temp folder (fsync)', os.tmpdir()], ['/dev/shm', SHM]]) {
    for (const [row, kind, size] of rows) {
      const samples = { on: [], off: [] };
      for (let round = 0; round < opts.rounds; round += 1) {
        for (const mode of round % 2 === 0 ? ['on', 'off'] : ['off', 'on']) {
          const env = mode === 'off' ? { PIW_WAL_SHIM: 'off' } : {};
          const count = size(root !== SHM);
          const { result } = inFolder(root, (folder) => child([kind, folder, String(count)], env));
          samples[mode].push(result);
        }
      }
      for (const [clock, field] of [['wall', 'microsPerCall'], ['cpu', 'cpuMicrosPerCall']]) {
        const on = samples.on.map((result) => result[field]);
        const off = samples.off.map((result) => result[field]);
        const [mean, low, high] = ratioInterval(on.map((value, round) => off[round] / value));
        console.log(
          `| ${label} | ${row} | ${clock} | ${median(on).toFixed(1)} | ${median(off).toFixed(1)} | ${mean.toFixed(3)} | ${low.toFixed(3)}–${high.toFixed(3)} |`,
        );
      }
    }
  }

  if (spawnSync('strace', ['-V']).status === 0) {
    const runs = Math.max(50, Math.round(opts.runs / 5));
    console.log(`\nwal-shim syscalls (strace -c, ${runs} runs × 5 calls on /dev/shm, open and close included)`);
    console.log('| shim | pwrite64 / call | fdatasync+fsync / call |');
    console.log('| --- | ---: | ---: |');
    for (const mode of ['on', 'off']) {
      const env = mode === 'off' ? { PIW_WAL_SHIM: 'off' } : {};
      const { stderr } = inFolder(SHM, (folder) =>
        child(['lifecycle', folder, String(runs)], env, ['strace', '-f', '-c', '-e', 'trace=pwrite64,fdatasync,fsync']),
      );
      const counts = straceCounts(stderr);
      const calls = runs * 5;
      const syncs = (counts.fdatasync ?? 0) + (counts.fsync ?? 0);
      console.log(`| ${mode} | ${((counts.pwrite64 ?? 0) / calls).toFixed(2)} | ${(syncs / calls).toFixed(2)} |`);
    }
  }
}

main();
