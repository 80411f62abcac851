'use strict';
// `npm run bench:scale`: what the calls Pi polls cost as the state file grows (issues 13 and 21).
//
// State files of 1,000, 10,000 and 100,000 runs (any sizes up to 1,000,000 and more with
// PIW_SCALE_SIZES) — 90% of runs terminal, 5% parked (for a workflow source change), 5% queued
// for their own interactive session, plus runs/10 settled controller resources — are written by
// the fast SQL builder (bench/scale-build.js; __test__/scale-builder.spec.ts checks its rows
// equal the public API's on 200 runs; PIW_SCALE_BUILDER=api builds through the API as before).
// They are kept under <root>/piw-scale-<hash of the .node file>/ and reused while that binary is
// loaded; one build grows one file and snapshots it at each size.
//
// Per size, on a fresh copy of that file, µs/op (median), in these tables:
// 1. every call, each timed right after a write by the same store (a run event), as issue 13;
// 2. with --writers N (or PIW_SCALE_WRITERS=N): the polls, each timed after N other processes
//    (bench/scale-writer.js, each with its own store on the file: writer 1 the host — renews its
//    claim, looks for work —, the others sessions — record run events, reserve/claim/complete
//    their own runs —, and from N = 5 on the last a viewer that only reads) have each written and
//    acknowledged: every timed poll comes after at least one foreign commit since the previous
//    one; "×own" is that cost over table 1's, "×same" over the same poll after the same writes
//    (bench/scale-writes.js) made by the poller's own store, in its process, with no other
//    process running between its polls, and "×apart" over that poll while the N other processes
//    make the same writes on copies of the file of their own (so only who wrote the poller's
//    file differs). The three are measured interleaved, sample by sample, each on a file of its
//    own. The last row, a
//    native call that reads nothing (bench/scale-impl.js FLOOR), is timed the same way: its
//    ratios are what merely running after other processes costs any call, the floor under the
//    polls' ratios. Each size has two columns: wall time, and the CPU time the poller's thread
//    spent in the call (its thread CPU clock, through the addon's `threadCpuTimeNs`; the median
//    of the same samples), which leaves out the time it was descheduled while the writers ran —
//    what is left of "×same" there is work (cold caches, the catch-up), not waiting;
// 3. with --reference (or PIW_REF set): the same polls on the TypeScript reference store loaded
//    from $PIW_REF (outside this repository; without PIW_REF these rows are skipped with a note),
//    with reference writers when N > 0, back to back on the same files; "native ×" is the
//    reference's cost over the native one;
// 4. the first poll of a new process (bench/scale-probe.js): open + first call of each poll in a
//    fresh process, and its RSS growth from before the open to after that call (the memory the
//    open and the first poll added: index, page cache);
// 5. a host's claimNextWorkflowRun on PIW_SCALE_CLAIM_BASE (10,000) terminal runs with 0 and with
//    5,000 queued runs it may not take (2,500 other sessions' interactive runs, 2,500 headless
//    runs with another runner's affinity), after its own write;
// 6. the polls right after one commit by another application (bench/scale-foreign.js): the SQL
//    poll, then each of six polls after the commit — how many pay for the index's rebuild;
// 7. open + close (read-write) of a store, native and (with PIW_REF) the reference interleaved on
//    copies of their own: while the file stays open elsewhere, after a run event recorded by
//    another store of this process, and after a write of another process (a host renewing its
//    claim: a short-lived process — a CLI command, a session — beside a running host); and on a
//    file nobody else holds (alone: every close is the file's last);
// 8. a host's claim in the file's mix (nothing it may take), after its own write and after
//    another process's write (a session recording a run event), native and the reference
//    interleaved, each on a copy of its own;
// 9. the run index's memory: RSS growth of a fresh process polling until its index is built
//    (bench/scale-memory.js), minus the same polls' with PIW_RUN_INDEX=off, per run.
// The growth column is largest size / smallest size; a poll that reads only what it returns
// stays near 1×.
//
// Options (environment): PIW_SCALE_SIZES (default 1000,10000,100000), PIW_SCALE_WRITERS (0),
// PIW_SCALE_ITERATIONS (40 samples), PIW_SCALE_BUDGET_S (60: a row stops sampling after this many
// seconds, with at least 3 samples — for 1,000,000 runs), PIW_SCALE_ROOT (default /dev/shm when it
// has room, else the temp folder), PIW_SCALE_REBUILD=1, PIW_SCALE_CACHE=<folder> (files another
// build made), PIW_SCALE_BUILDER=fast|api, PIW_SCALE_CLAIM_BASE, PIW_SCALE_ONLY=own,writers,
// reference,first,claim,foreign,open,hostclaim,memory (tables to run; the default leaves out
// memory, which takes a minute a size), PIW_REF. Flags: --writers N, --reference.
// Run against another build with PI_WORKFLOWS_NATIVE_PATH=/path/to/file.node.

const crypto = require('node:crypto');
const { fork, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SqliteControllerStore } = require('..');
const { reservation } = require('./fixtures');
const { addRunThroughApi, buildFast } = require('./scale-build');
const { loadStore, POLLS, FLOOR, PROJECT } = require('./scale-impl');
const { writerFor, writerRoles } = require('./scale-writes');
const { POLLS_AFTER, pollsAfterForeignCommit } = require('./scale-foreign');

/** The polls, and the floor under their ratios (see scale-impl.js). */
const TIMED = { ...POLLS, ...FLOOR };

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(`--${name}`);
const option = (name) => (flag(name) ? argv[argv.indexOf(`--${name}`) + 1] : undefined);
const SIZES = (process.env.PIW_SCALE_SIZES ?? '1000,10000,100000').split(',').map(Number);
const WRITERS = Number(option('writers') ?? process.env.PIW_SCALE_WRITERS ?? 0);
const REFERENCE = flag('reference') || Boolean(process.env.PIW_REF);
const ITERATIONS = Number(process.env.PIW_SCALE_ITERATIONS ?? 40);
const BUDGET_MS = Number(process.env.PIW_SCALE_BUDGET_S ?? 60) * 1000;
const CLAIM_BASE = Number(process.env.PIW_SCALE_CLAIM_BASE ?? 10_000);
const ONLY = new Set((process.env.PIW_SCALE_ONLY ?? 'own,writers,reference,first,claim,foreign,open,hostclaim').split(','));

/** /dev/shm when it has room for the largest file (about 3 kB a run) and two copies of it. */
function root() {
  if (process.env.PIW_SCALE_ROOT) return process.env.PIW_SCALE_ROOT;
  if (!fs.existsSync('/dev/shm')) return os.tmpdir();
  const free = fs.statfsSync('/dev/shm');
  return free.bavail * free.bsize > Math.max(...SIZES) * 3_000 * 4 ? '/dev/shm' : os.tmpdir();
}
const ROOT = root();

/** The .node file this process loads (the loader's first two places). */
function binaryPath() {
  if (process.env.PI_WORKFLOWS_NATIVE_PATH) return process.env.PI_WORKFLOWS_NATIVE_PATH;
  const local = fs.readdirSync(path.join(__dirname, '..')).find((name) => name.endsWith('.node'));
  return path.join(__dirname, '..', local);
}

function binaryKey() {
  const hash = crypto.createHash('sha256').update(fs.readFileSync(binaryPath())).digest('hex');
  return hash.slice(0, 16);
}

const better = () => require('better-sqlite3');

/** The cached state file of each size, built (growing one file) when missing. */
function stateFiles() {
  const cache = process.env.PIW_SCALE_CACHE ?? path.join(ROOT, `piw-scale-${binaryKey()}`);
  const file = (size) => path.join(cache, `runs-${size}.sqlite`);
  const metaFile = path.join(cache, 'build.json');
  const meta = fs.existsSync(metaFile) ? JSON.parse(fs.readFileSync(metaFile, 'utf8')) : {};
  const missing = [...SIZES].sort((a, b) => a - b).filter((size) => process.env.PIW_SCALE_REBUILD === '1' || !fs.existsSync(file(size)));
  if (missing.length === 0) return { file, meta, cache };
  fs.mkdirSync(cache, { recursive: true });
  const api = process.env.PIW_SCALE_BUILDER === 'api';
  const building = path.join(cache, 'building.sqlite');
  fs.rmSync(building, { force: true });
  new SqliteControllerStore(building, { projectPath: PROJECT }).close();
  const start = process.hrtime.bigint();
  let built = 0;
  const base = Date.now() - 3_600_000 - Math.max(...missing) * 10;
  for (const size of missing) {
    if (api) {
      const store = new SqliteControllerStore(building, { projectPath: PROJECT });
      for (; built < size; built += 1) addRunThroughApi(store, built);
      store.close();
    } else {
      buildFast(better(), building, size, { from: built, base });
      built = size;
    }
    fs.copyFileSync(building, file(size));
    meta[size] = { seconds: Number(process.hrtime.bigint() - start) / 1e9, builder: api ? 'api' : 'fast' };
    process.stderr.write(`built ${size} runs (${meta[size].builder}) in ${meta[size].seconds.toFixed(1)} s\n`);
  }
  fs.rmSync(building, { force: true });
  fs.writeFileSync(metaFile, JSON.stringify(meta));
  return { file, meta, cache };
}

/** The claim check's two files: CLAIM_BASE terminal runs, and the same + 5,000 it may not take. */
function claimFiles(cache) {
  const plain = path.join(cache, `claim-${CLAIM_BASE}-0.sqlite`);
  const blocked = path.join(cache, `claim-${CLAIM_BASE}-5000.sqlite`);
  if (fs.existsSync(plain) && fs.existsSync(blocked) && process.env.PIW_SCALE_REBUILD !== '1') return { plain, blocked };
  fs.rmSync(plain, { force: true });
  new SqliteControllerStore(plain, { projectPath: PROJECT }).close();
  buildFast(better(), plain, CLAIM_BASE, { kindOf: () => 'terminal' });
  fs.copyFileSync(plain, blocked);
  const store = new SqliteControllerStore(blocked, { projectPath: PROJECT });
  for (let k = 0; k < 2_500; k += 1) store.reserveWorkflowRun(reservation(`other-session-run-${k}`, `other-session-${k}`));
  for (let k = 0; k < 2_500; k += 1) {
    const run = reservation(`affinity-run-${k}`, `headless-session-${k}`);
    store.reserveWorkflowRun({ ...run, runnerId: 'host-other-runner', executionMode: 'headless' });
  }
  store.close();
  return { plain, blocked };
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * The CPU time the calling thread has used, in µs: the addon's thread clock
 * (`CLOCK_THREAD_CPUTIME_ID`, nanoseconds, this thread only), or — on a build without it
 * (PI_WORKFLOWS_NATIVE_PATH=older.node) or a platform without that clock — the process's
 * (`process.cpuUsage()`: every thread, microseconds).
 */
const cpuClock = (() => {
  const { binding } = require('../lib/native.js');
  if (typeof binding.threadCpuTimeNs === 'function' && binding.threadCpuTimeNs() >= 0) {
    return { kind: 'thread', now: () => binding.threadCpuTimeNs() / 1000 };
  }
  return {
    kind: 'process',
    now: () => {
      const { user, system } = process.cpuUsage();
      return user + system;
    },
  };
})();

/**
 * Median µs of `operation`, each time right after `write(i)` (untimed; may be async): `wall`,
 * the elapsed time, and `cpu`, the CPU time the thread spent in it (read just outside the wall
 * clock's two readings, so it includes one read of each clock; the time the thread was
 * descheduled is not in it). The medians of the same samples, taken apart.
 */
async function timed(write, operation, check) {
  return (await timedTogether({ only: { write, operation } }, check)).only;
}

/**
 * `timed` for several setups ({name: {write, operation}}) at once, interleaved: sample i of
 * each, one after the other, before sample i + 1 of any, so that what the machine does in the
 * meantime weighs on all of them alike. Medians by setup name.
 */
async function timedTogether(setups, check) {
  const samples = Object.fromEntries(Object.keys(setups).map((name) => [name, { walls: [], cpus: [] }]));
  const taken = Object.values(samples)[0].walls; // every setup has as many
  const began = Date.now();
  for (let i = 0; taken.length < ITERATIONS; i += 1) {
    const overBudget = Date.now() - began > BUDGET_MS;
    for (const [name, { write, operation }] of Object.entries(setups)) {
      await write(i);
      const cpuStart = cpuClock.now();
      const start = process.hrtime.bigint();
      const result = operation(i);
      const elapsed = Number(process.hrtime.bigint() - start) / 1000;
      const cpu = cpuClock.now() - cpuStart;
      if (check !== undefined && !check(result)) throw new Error(`unexpected result: ${JSON.stringify(result)?.slice(0, 300)}`);
      if (i >= 3 || overBudget) {
        samples[name].walls.push(elapsed);
        samples[name].cpus.push(cpu);
      }
    }
    if (overBudget && taken.length >= 3) break;
  }
  return Object.fromEntries(Object.entries(samples).map(([name, { walls, cpus }]) => [name, { wall: median(walls), cpu: median(cpus) }]));
}

/** Polls for a while (2 s, a poll every 20 ms), long enough for a background index build. */
async function settled(poll) {
  const until = Date.now() + 2_000;
  for (let i = 0; Date.now() < until; i += 1) {
    poll(i);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function copyOf(source) {
  const folder = fs.mkdtempSync(path.join(ROOT, 'piw-scale-run-'));
  const file = path.join(folder, 'state.sqlite');
  fs.copyFileSync(source, file);
  return { folder, file, bytes: fs.statSync(file).size };
}

const terminalOf = (size) => (i) => `run-${(((i * 7919) % size) - ((i * 7919) % size) % 20) + 2}`;
const nothing = (value) => value === undefined;
const pollCheck = (name) => (name.startsWith('claimNext') ? nothing : undefined);

/** Table 1: every call, timed after the same store's own write. */
async function measureOwn(source, size) {
  const { folder, file, bytes } = copyOf(source);
  const store = new SqliteControllerStore(file, { projectPath: PROJECT });
  const results = {};
  try {
    const terminal = terminalOf(size);
    const write = (i) =>
      store.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.touch', payload: { i } });
    for (const [name, poll] of Object.entries(TIMED)) results[name] = await timed(write, (i) => poll(store, i), pollCheck(name));
    const queuedSession = (i) => `session-${(((i * 7919) % size) - ((i * 7919) % size) % 20)}`;
    results.findSessionReservation = await timed(
      write,
      (i) => store.findSessionReservation(queuedSession(i)),
      (value) => value !== undefined,
    );
    let tail = 0;
    results['listRunEventsAfter(tail)'] = await timed(
      (i) => {
        for (let page; (page = store.listRunEventsAfter(tail, { limit: 1000 })).length > 0; ) tail = page.at(-1).seq;
        write(i);
      },
      () => store.listRunEventsAfter(tail, { limit: 100 }),
      (events) => events.length === 1,
    );
    results['claimNext, nothing claimable'] = await timed(
      write,
      () => store.claimNext({ controllers: ['jobs'], ownerId: 'bench', leaseMs: 30_000 }),
      nothing,
    );
    results.getWorkflowRun = await timed(write, (i) => store.getWorkflowRun(terminal(i)));
    results.getWorkflowRunView = await timed(write, (i) => store.getWorkflowRunView(terminal(i)));
    results['listEvents({limit: 100})'] = await timed(write, () => store.listEvents({ limit: 100 }));
    let opened;
    results['constructor (read-write)'] = await timed(
      write,
      () => {
        opened = new SqliteControllerStore(file, { projectPath: PROJECT });
      },
      () => {
        opened.close();
        return true;
      },
    );
    results['open + close (read-write)'] = await timed(write, () => new SqliteControllerStore(file, { projectPath: PROJECT }).close());
    results['open + close (read-only)'] = await timed(write, () =>
      new SqliteControllerStore(file, { projectPath: PROJECT, readOnly: true }).close(),
    );
    results['pruneUnreferencedBlobs (the open prune)'] = await timed(write, () => store.state.pruneUnreferencedBlobs());
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return { results, bytes };
}

/** Forks one writer on each of `files` (the same file, or each its own); resolves to { writeAll(i), close() }. */
async function startWriters(files, impl, size) {
  const roles = writerRoles(files.length);
  const next = (child) =>
    new Promise((resolve, reject) => {
      const onMessage = (message) => {
        child.off('exit', onExit);
        if (message.op === 'error') reject(new Error(`writer: ${message.message}`));
        else resolve(message);
      };
      const onExit = (code) => reject(new Error(`writer exited with ${code}`));
      child.once('message', onMessage);
      child.once('exit', onExit);
    });
  // One after another: opening a store takes the file exclusively (schema check, open prune), and
  // four reference stores opening at once on 100,000 runs outwait each other's busy timeout.
  const children = [];
  for (const [k, role] of roles.entries()) {
    const child = fork(path.join(__dirname, 'scale-writer.js'), [files[k], role, impl, String(k + 1), String(size)], { stdio: 'inherit' });
    children.push(child);
    await next(child);
  }
  return {
    async writeAll(i) {
      const done = children.map(next);
      for (const child of children) child.send({ op: 'write', i });
      await Promise.all(done);
    },
    async close() {
      await Promise.all(
        children.map(
          (child) =>
            new Promise((resolve) => {
              child.once('exit', resolve);
              child.send({ op: 'close' });
            }),
        ),
      );
    },
  };
}

/**
 * Who writes between two polls of tables 2 and 3 (`count` writers' writes; the poll's own write
 * when `count` is 0), by mode:
 * - `others`: `count` other processes, on the poller's file;
 * - `same`: the poller's own store (table 2's "×same": the same changes, no other process
 *   running between two polls);
 * - `apart`: the poller's own store, while the `count` other processes make the same writes on
 *   files of their own (table 2's "×apart": the same changes and the same other processes
 *   running between two polls; only who wrote the poller's file differs from `others`).
 * Resolves to { store, write(i), close() } on a fresh copy of `source`.
 */
async function pollSetup(source, size, impl, count, mode) {
  const Store = await loadStore(impl);
  const copies = [copyOf(source)];
  const file = copies[0].file;
  if (mode === 'apart') for (let k = 0; k < count; k += 1) copies.push(copyOf(source));
  const writerFiles = mode === 'apart' ? copies.slice(1).map((copy) => copy.file) : Array(count).fill(file);
  const writers = count > 0 && mode !== 'same' ? await startWriters(writerFiles, impl, size) : undefined;
  const store = new Store(file, { projectPath: PROJECT });
  const terminal = terminalOf(size);
  const ownWriters = mode === 'others' ? [] : writerRoles(count).map((role, k) => writerFor(store, role, k + 1, size));
  let sequence = 0; // as each writer process counts its writes across the rows
  const writeOwn = () => {
    for (const ownWrite of ownWriters) ownWrite(sequence);
    sequence += 1;
  };
  const writeFor = {
    others: (i) => writers.writeAll(i),
    same: writeOwn,
    apart: (i) => {
      writeOwn();
      return writers.writeAll(i);
    },
  };
  return {
    store,
    write: count === 0 ? (i) => store.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.touch', payload: { i } }) : writeFor[mode],
    async close() {
      store.close();
      await writers?.close();
      for (const copy of copies) fs.rmSync(copy.folder, { recursive: true, force: true });
    },
  };
}

/** Tables 2 and 3: the polls of `impl` in each of `modes` (see pollSetup), interleaved; results by mode, then poll. */
async function measurePolls(source, size, impl, count, modes = ['others']) {
  const setups = {};
  const results = Object.fromEntries(modes.map((mode) => [mode, {}]));
  try {
    for (const mode of modes) setups[mode] = await pollSetup(source, size, impl, count, mode);
    for (const [name, poll] of Object.entries(TIMED)) {
      const together = Object.fromEntries(Object.entries(setups).map(([mode, setup]) => [mode, { write: setup.write, operation: (i) => poll(setup.store, i) }]));
      const measured = await timedTogether(together, pollCheck(name));
      for (const mode of modes) {
        results[mode][name] = measured[mode];
        process.stderr.write(`  ${impl} ${size} ${mode} ${count} ${name}: ${Math.round(measured[mode].wall)} µs, CPU ${Math.round(measured[mode].cpu)} µs\n`);
      }
    }
  } finally {
    for (const setup of Object.values(setups)) await setup.close();
  }
  return results;
}

/** Table 4: a fresh process's open + first call of each poll, and its RSS growth. */
function measureFirst(source, impl) {
  const results = {};
  for (const name of Object.keys(POLLS)) {
    const { folder, file } = copyOf(source);
    try {
      const out = execFileSync(process.execPath, [path.join(__dirname, 'scale-probe.js'), file, impl, name], {
        env: process.env,
        encoding: 'utf8',
        maxBuffer: 1 << 20,
      });
      results[name] = JSON.parse(out.trim().split('\n').at(-1));
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  }
  return results;
}

/** Table 5: the host's claim with 0 and 5,000 queued runs it may not take. */
async function measureClaim(files, impl) {
  const Store = await loadStore(impl);
  const results = {};
  for (const [label, source] of [
    ['0 queued runs it may not take', files.plain],
    ['5,000 queued runs it may not take', files.blocked],
  ]) {
    const { folder, file } = copyOf(source);
    const store = new Store(file, { projectPath: PROJECT });
    try {
      const terminal = terminalOf(CLAIM_BASE);
      const write = (i) => store.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.touch' });
      const claim = (i) => POLLS['claimNextWorkflowRun, host, nothing claimable'](store, i);
      // A fresh store of more than 1,024 runs builds its run index in the background and
      // answers from SQL meanwhile: these cheap polls would all be timed before it is ready.
      await settled(claim);
      results[label] = await timed(write, claim, nothing);
    } finally {
      store.close();
      fs.rmSync(folder, { recursive: true, force: true });
    }
  }
  return results;
}

/** Table 6: the polls after one foreign commit (bench/scale-foreign.js). */
async function measureForeign(source) {
  const { folder, file } = copyOf(source);
  const store = new SqliteControllerStore(file, { projectPath: PROJECT });
  try {
    // Until the index answers (a poll under 5 ms), whatever the machine's load: the first
    // build of a large file may outlast `settled`'s 2 s, and a build still running at the
    // foreign commit would be of the file before it.
    const until = Date.now() + 120_000;
    for (let fast = false; !fast && Date.now() < until; ) {
      const start = process.hrtime.bigint();
      store.workflowRunListRevision();
      fast = Number(process.hrtime.bigint() - start) < 5e6;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return await pollsAfterForeignCommit(store, file);
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** The implementations to measure side by side: native, and the reference when PIW_REF is set. */
const IMPLS = ['native', ...(process.env.PIW_REF ? ['ts'] : [])];

/**
 * Table 7: open + close (read-write) by implementation and by who wrote before each sample while
 * the file stays open elsewhere: `own` another store of this process (a run event), `other`
 * another process (a host renewing its claim); and `alone`: nobody else holds the file.
 */
async function measureOpenClose(source, size) {
  const setups = {};
  const cleanup = [];
  try {
    for (const impl of IMPLS) {
      const Store = await loadStore(impl);
      const own = copyOf(source);
      const keeper = new Store(own.file, { projectPath: PROJECT });
      const terminal = terminalOf(size);
      cleanup.push(() => keeper.close(), () => fs.rmSync(own.folder, { recursive: true, force: true }));
      setups[`${impl} own`] = {
        write: (i) => keeper.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.touch', payload: { i } }),
        operation: () => new Store(own.file, { projectPath: PROJECT }).close(),
      };
      const other = copyOf(source);
      const writers = await startWriters([other.file], impl, size);
      cleanup.push(() => writers.close(), () => fs.rmSync(other.folder, { recursive: true, force: true }));
      setups[`${impl} other`] = {
        write: (i) => writers.writeAll(i),
        operation: () => new Store(other.file, { projectPath: PROJECT }).close(),
      };
      // Nobody else holds the file: each close is its last (a CLI command on a file no session has open).
      const alone = copyOf(source);
      cleanup.push(() => fs.rmSync(alone.folder, { recursive: true, force: true }));
      setups[`${impl} alone`] = {
        write: () => {},
        operation: () => new Store(alone.file, { projectPath: PROJECT }).close(),
      };
    }
    return await timedTogether(setups);
  } finally {
    for (const step of cleanup) await step();
  }
}

/**
 * Table 8: a host's claim (nothing it may take) by implementation and by who wrote before each
 * poll: `own` the polling store (a run event), `other` another process (a session's writes).
 */
async function measureHostClaim(source, size) {
  const setups = {};
  const cleanup = [];
  const claim = POLLS['claimNextWorkflowRun, host, nothing claimable'];
  try {
    for (const impl of IMPLS) {
      const Store = await loadStore(impl);
      const terminal = terminalOf(size);
      for (const who of ['own', 'other']) {
        const copy = copyOf(source);
        cleanup.push(() => fs.rmSync(copy.folder, { recursive: true, force: true }));
        let writers;
        if (who === 'other') {
          const child = fork(path.join(__dirname, 'scale-writer.js'), [copy.file, 'session', impl, '2', String(size)], { stdio: 'inherit' });
          await new Promise((resolve) => child.once('message', resolve));
          writers = {
            writeAll: (i) =>
              new Promise((resolve, reject) => {
                child.once('message', (message) => (message.op === 'error' ? reject(new Error(message.message)) : resolve()));
                child.send({ op: 'write', i });
              }),
            close: () =>
              new Promise((resolve) => {
                child.once('exit', resolve);
                child.send({ op: 'close' });
              }),
          };
          cleanup.unshift(() => writers.close());
        }
        const store = new Store(copy.file, { projectPath: PROJECT });
        cleanup.unshift(() => store.close());
        await settled((i) => claim(store, i));
        setups[`${impl} ${who}`] = {
          write:
            who === 'own'
              ? (i) => store.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.touch', payload: { i } })
              : (i) => writers.writeAll(i),
          operation: (i) => claim(store, i),
        };
      }
    }
    return await timedTogether(setups, nothing);
  } finally {
    for (const step of cleanup) await step();
  }
}

/** Table 9: the index's memory at `size` runs (bench/scale-memory.js), in bytes a run. */
function measureMemory(source, size) {
  const probe = (polls, env) => {
    const { folder, file } = copyOf(source);
    try {
      const out = execFileSync(process.execPath, [path.join(__dirname, 'scale-memory.js'), file, String(polls)], {
        env: { ...process.env, ...env },
        encoding: 'utf8',
        maxBuffer: 1 << 20,
      });
      return JSON.parse(out.trim().split('\n').at(-1));
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  };
  const on = probe(0, {});
  const off = probe(on.polls, { PIW_RUN_INDEX: 'off' });
  const growth = (p) => p.rssAfterMiB - p.rssBeforeMiB;
  return { on, off, indexMiB: growth(on) - growth(off), perRun: ((growth(on) - growth(off)) * 2 ** 20) / size };
}

const micros = (value) => (value === undefined ? '–' : value < 100 ? value.toFixed(1) : Math.round(value).toLocaleString('en-US'));
const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
const ratio = (a, b) => (a === undefined || b === undefined ? '–' : `${(a / b).toFixed(a / b < 10 ? 2 : 1)}×`);
const runs = (size) => `${size.toLocaleString('en-US')} runs`;

function table(title, header, rows) {
  const lines = [`${title}`, '', `| ${header.join(' | ')} |`, `|${header.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const row of rows) lines.push(`| ${row.join(' | ')} |`);
  return `${lines.join('\n')}\n\n`;
}

async function main() {
  const { file, meta, cache } = stateFiles();
  const first = SIZES[0];
  const last = SIZES.at(-1);
  const growth = `growth ${last / 1000}k/${first / 1000}k`;
  let out = '';
  const flush = () => {
    process.stdout.write(out);
    out = '';
  };
  out += `bench:scale on ${ROOT} (${path.basename(binaryPath())}, ${ITERATIONS} samples each, budget ${BUDGET_MS / 1000} s a row, writers ${WRITERS})\n\n`;
  const own = {};
  if (ONLY.has('own')) {
    for (const size of SIZES) own[size] = await measureOwn(file(size), size);
    const rows = Object.keys(own[first].results).map((name) => [
      name,
      ...SIZES.map((size) => micros(own[size].results[name].wall)),
      ratio(own[last].results[name].wall, own[first].results[name].wall),
    ]);
    rows.push(['file size', ...SIZES.map((size) => megabytes(own[size].bytes)), '']);
    rows.push(['build (cumulative)', ...SIZES.map((size) => (meta[size] ? `${meta[size].seconds.toFixed(1)} s ${meta[size].builder}` : '–')), '']);
    out += table('1. native, each call right after its own write, µs/op', ['call', ...SIZES.map(runs), growth], rows);
    flush();
  }
  const native = {};
  if (WRITERS > 0 && ONLY.has('writers')) {
    const same = {};
    const apart = {};
    for (const size of SIZES) {
      ({ others: native[size], same: same[size], apart: apart[size] } = await measurePolls(file(size), size, 'native', WRITERS, ['others', 'same', 'apart']));
    }
    const cell = (size, name, clock) => {
      const value = native[size][name][clock];
      const over = (base) => ratio(value, base?.[name]?.[clock]);
      return `${micros(value)} (${over(own[size]?.results)} own, ${over(same[size])} same, ${over(apart[size])} apart)`;
    };
    const rows = Object.keys(TIMED).map((name) => [
      name,
      ...SIZES.flatMap((size) => [cell(size, name, 'wall'), cell(size, name, 'cpu')]),
      ratio(native[last][name].wall, native[first][name].wall),
      ratio(native[last][name].cpu, native[first][name].cpu),
    ]);
    out += table(
      `2. native, each poll after ${WRITERS} other processes' commits, µs/op, wall and CPU time (${cpuClock.kind} clock) (× the same poll after its own write; × the same poll after the same writes made by its own store; × that, with the other processes writing the same on files apart)`,
      ['poll', ...SIZES.flatMap((size) => [`${runs(size)}, wall`, `${runs(size)}, CPU`]), `${growth}, wall`, `${growth}, CPU`],
      rows,
    );
    flush();
  }
  const reference = {};
  if (REFERENCE && !process.env.PIW_REF) {
    out += '3. reference: skipped — set PIW_REF to the folder of the TypeScript reference (outside this repository)\n\n';
  } else if (REFERENCE && ONLY.has('reference')) {
    for (const size of SIZES) reference[size] = (await measurePolls(file(size), size, 'ts', WRITERS)).others;
    const base = WRITERS > 0 ? native : Object.fromEntries(SIZES.map((size) => [size, own[size]?.results ?? {}]));
    const rows = Object.keys(TIMED).map((name) => [
      name,
      ...SIZES.map((size) => `${micros(reference[size][name].wall)} (native ${ratio(reference[size][name].wall, base[size]?.[name]?.wall)})`),
      ratio(reference[last][name].wall, reference[first][name].wall),
    ]);
    const after = WRITERS > 0 ? `after ${WRITERS} other (reference) processes' commits` : 'after its own write';
    out += table(`3. reference (TypeScript, $PIW_REF), each poll ${after}, µs/op (native × faster: reference / native)`, ['poll', ...SIZES.map(runs), growth], rows);
    flush();
  }
  if (ONLY.has('first')) {
    const impls = ['native', ...(REFERENCE && process.env.PIW_REF ? ['ts'] : [])];
    const firsts = {};
    for (const impl of impls) for (const size of SIZES) firsts[`${impl} ${size}`] = measureFirst(file(size), impl);
    const rows = [];
    for (const name of Object.keys(POLLS)) {
      for (const impl of impls) {
        rows.push([
          `${name}, ${impl}`,
          ...SIZES.map((size) => {
            const probe = firsts[`${impl} ${size}`][name];
            return `${micros(probe.openUs)} + ${micros(probe.firstUs)}`;
          }),
        ]);
      }
    }
    for (const impl of impls) {
      rows.push([
        `RSS growth, open → after the first poll (max over the polls), ${impl}`,
        ...SIZES.map((size) => `${Math.max(...Object.values(firsts[`${impl} ${size}`]).map((p) => p.rssAfterMiB - p.rssBeforeMiB)).toFixed(1)} MiB`),
      ]);
      rows.push([
        `RSS after the first poll (max), ${impl}`,
        ...SIZES.map((size) => `${Math.max(...Object.values(firsts[`${impl} ${size}`]).map((p) => p.rssAfterMiB)).toFixed(1)} MiB`),
      ]);
    }
    out += table('4. first poll of a new process: open + first call, µs (one sample each)', ['poll', ...SIZES.map(runs)], rows);
    flush();
  }
  if (ONLY.has('claim')) {
    const files = claimFiles(cache);
    const impls = ['native', ...(REFERENCE && process.env.PIW_REF ? ['ts'] : [])];
    const claims = {};
    for (const impl of impls) claims[impl] = await measureClaim(files, impl);
    const labels = Object.keys(claims.native);
    const rows = impls.map((impl) => [
      `claimNextWorkflowRun, host, ${impl}`,
      ...labels.map((label) => micros(claims[impl][label].wall)),
      ratio(claims[impl][labels[1]].wall, claims[impl][labels[0]].wall),
    ]);
    out += table(
      `5. a host's claim on ${CLAIM_BASE.toLocaleString('en-US')} terminal runs, after its own write, µs/op`,
      ['call', ...labels, '5,000 / 0'],
      rows,
    );
    flush();
  }
  if (ONLY.has('foreign')) {
    const rows = [];
    for (const size of SIZES) {
      const { sql, after } = await measureForeign(file(size));
      rows.push([runs(size), micros(sql), ...after.map(({ wall, cpu }) => `${micros(wall)} (CPU ${micros(cpu)})`)]);
    }
    out += table(
      '6. native, listWorkflowRuns({limit: 100}) after one commit by another application (better-sqlite3, another process), µs: the SQL poll, then each of the polls after the commit, 50 ms apart (wall, and the CPU time of the polling thread: a poll that waited for the build spent little)',
      ['file', 'SQL poll', ...Array.from({ length: POLLS_AFTER }, (_, n) => `poll ${n + 1}`)],
      rows,
    );
    flush();
  }
  if (ONLY.has('open')) {
    const opens = {};
    for (const size of SIZES) opens[size] = await measureOpenClose(file(size), size);
    const rows = Object.keys(opens[first]).map((name) => [
      name,
      ...SIZES.map((size) => {
        const { wall, cpu } = opens[size][name];
        const [impl, who] = name.split(' ');
        const reference = impl === 'native' ? opens[size][`ts ${who}`]?.wall : undefined;
        return `${micros(wall)} (CPU ${micros(cpu)}${reference === undefined ? '' : `; ref ${ratio(reference, wall)}`})`;
      }),
      `${ratio(opens[last][name].wall, opens[first][name].wall)} (CPU ${ratio(opens[last][name].cpu, opens[first][name].cpu)})`,
    ]);
    out += table(
      '7. open + close (read-write) while the file stays open elsewhere, after a write by another store of this process (own) or by another process (other), and on a file nobody else holds (alone), µs, wall (and the CPU time of the calling thread; native: × faster than the reference)',
      ['implementation, writer', ...SIZES.map(runs), growth],
      rows,
    );
    flush();
  }
  if (ONLY.has('hostclaim')) {
    const claims = {};
    for (const size of SIZES) claims[size] = await measureHostClaim(file(size), size);
    const rows = Object.keys(claims[first]).map((name) => [
      name,
      ...SIZES.map((size) => {
        const value = claims[size][name].wall;
        const [impl, who] = name.split(' ');
        const reference = impl === 'native' ? claims[size][`ts ${who}`]?.wall : undefined;
        return reference === undefined ? micros(value) : `${micros(value)} (ref ${ratio(reference, value)})`;
      }),
      ratio(claims[last][name].wall, claims[first][name].wall),
    ]);
    out += table(
      "8. a host's claimNextWorkflowRun in the file's mix (nothing it may take), after its own write (own) or another process's (other), µs/op (native: × faster than the reference)",
      ['implementation, writer', ...SIZES.map(runs), growth],
      rows,
    );
    flush();
  }
  if (ONLY.has('memory')) {
    const rows = [];
    for (const size of SIZES) {
      const memory = measureMemory(file(size), size);
      rows.push([
        runs(size),
        `${memory.indexMiB.toFixed(1)} MiB`,
        `${Math.round(memory.perRun)} B`,
        `${(memory.on.rssAfterMiB - memory.on.rssBeforeMiB).toFixed(1)} / ${(memory.off.rssAfterMiB - memory.off.rssBeforeMiB).toFixed(1)} MiB`,
        `${memory.on.polls}${memory.on.indexed ? '' : ' (not indexed)'}`,
      ]);
    }
    out += table(
      '9. the run index\'s memory: RSS growth of a fresh process polling until the index answers, minus the same polls with PIW_RUN_INDEX=off',
      ['file', 'index', 'a run', 'growth with / without', 'polls'],
      rows,
    );
    flush();
  }
  flush();
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
