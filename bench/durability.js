'use strict';
// `npm run bench:durability`: the figures behind issue 12 that are timings, not tests.
//
// 1. open-prune: how long a read-write open takes on a file with many superseded blobs (a
//    resource whose spec was replaced N times in one long-lived process), N up to 50,000.
// 2. wal-shim: the run lifecycle (reserve, claim, markRunning, renew, complete) with the
//    WAL-append shim on and off (`PIW_WAL_SHIM=off`), back to back in alternating child
//    processes, on the temp folder (fsync-bound) and /dev/shm (CPU-bound); plus the
//    pwrite64/fdatasync calls per operation counted with `strace -c` when strace is installed.
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

/** Child: `runs` run lifecycles; µs per store call. */
function childLifecycle(folder, runs) {
  const store = openStore(folder);
  const started = process.hrtime.bigint();
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
  store.close();
  return { runs, calls: runs * 5, microsPerCall: micros / (runs * 5) };
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
    const result = kind === 'prune' ? childPrune(folder, Number(count)) : childLifecycle(folder, Number(count));
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

  console.log(`\nwal-shim: run lifecycle, ${opts.runs} runs × 5 calls, median of ${opts.rounds} alternating rounds`);
  console.log('| folder | shim on (µs/call) | shim off (µs/call) | off / on |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [label, root] of [['temp folder (fsync)', os.tmpdir()], ['/dev/shm', SHM]]) {
    const times = { on: [], off: [] };
    for (let round = 0; round < opts.rounds; round += 1) {
      for (const mode of round % 2 === 0 ? ['on', 'off'] : ['off', 'on']) {
        const env = mode === 'off' ? { PIW_WAL_SHIM: 'off' } : {};
        const runs = root === SHM ? opts.runs : Math.max(50, Math.round(opts.runs / 5));
        const { result } = inFolder(root, (folder) => child(['lifecycle', folder, String(runs)], env));
        times[mode].push(result.microsPerCall);
      }
    }
    const on = median(times.on);
    const off = median(times.off);
    console.log(`| ${label} | ${on.toFixed(1)} | ${off.toFixed(1)} | ${(off / on).toFixed(2)} |`);
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
