'use strict';
// `npm run bench`: the store's public API under the workloads of the performance issue, on the
// normal temp folder (fsync-bound) and on /dev/shm (CPU-bound), median of 5 repetitions.
// Prints, per folder, a table with µs/op, ops/s, the floor (pure SQLite doing the same work:
// see bench/floor) and how far above it the store is, the reference's figures and the speedup,
// plus peak RSS. Scale down with PIW_BENCH_SCALE=0.1 for a quick look; the write workloads on
// the temp folder (one fsync per transaction) run at PIW_BENCH_DISK_SCALE (default 0.1) of it.
//
// The floor: each workload runs once more with statement recording on (src/trace.rs), and
// bench/floor replays the recorded statements through rusqlite on a fresh copy of the same
// starting database, timing the same labelled operations.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { binding } = require('../lib/native.js');
const { REFERENCE } = require('./reference.js');
const { loadStore } = require('./scale-impl.js');

const SCALE = Number(process.env.PIW_BENCH_SCALE ?? 1);
const DISK_SCALE = Number(process.env.PIW_BENCH_DISK_SCALE ?? 0.1);
const REPETITIONS = Number(process.env.PIW_BENCH_REPETITIONS ?? 5);
const FLOOR = path.join(__dirname, '..', 'target', 'release', 'piw-floor');
const SHM = '/dev/shm';
const scaled = (n, factor = 1) => Math.max(1, Math.round(n * SCALE * factor));

/** Whether the running workload's statements are being recorded (marks label them). */
let recording = false;
const mark = (label) => recording && binding.recordMark(label);

const { reservation } = require('./fixtures');

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Accumulates the time spent in each named operation. */
class Timer {
  constructor() {
    this.totals = new Map();
  }

  /** Times `operation` under `name`; `counted: false` adds time to an operation already counted. */
  time(name, operation, counted = true) {
    mark(name);
    const start = process.hrtime.bigint();
    const result = operation();
    const elapsed = Number(process.hrtime.bigint() - start) / 1000;
    mark('');
    const entry = this.totals.get(name) ?? { micros: 0, count: 0 };
    entry.micros += elapsed;
    if (counted) entry.count += 1;
    this.totals.set(name, entry);
    return result;
  }

  perOp(name) {
    const entry = this.totals.get(name);
    return entry === undefined ? NaN : entry.micros / entry.count;
  }

  counts() {
    return Object.fromEntries([...this.totals].map(([name, entry]) => [name, entry.count]));
  }
}

function freshFolder(root) {
  return fs.mkdtempSync(path.join(root, 'piw-bench-'));
}

/** A `Store` on `folder`'s database, for the project at `projectPath` (default: the folder). */
function openStore(Store, folder, projectPath = folder) {
  return new Store(path.join(folder, 'state.sqlite'), { projectPath });
}

// Every workload takes the store class first: this package's, or (PIW_REF) the reference's.
// `synchronous`: a value for that pragma, set on the store's connection once it is open (the
// fsync row: without the wait for the disk, what is left of a lifecycle on it).
function runLifecycle(Store, root, factor, synchronous) {
  const folder = freshFolder(root);
  const store = openStore(Store, folder);
  if (synchronous !== undefined) store.state.connection.pragma(`synchronous = ${synchronous}`);
  const timer = new Timer();
  try {
    for (let index = 0; index < scaled(2000, factor); index += 1) {
      const runId = `run-${index}`;
      const session = `session-${index}`;
      const claim = { runId, runnerId: session, claimToken: `token-${index}`, leaseMs: 30_000 };
      timer.time('reserve', () => store.reserveWorkflowRun(reservation(runId, session)));
      timer.time('claim', () => store.claimWorkflowRun(claim));
      timer.time('markRunning', () => store.markWorkflowRunRunning(claim));
      timer.time('renew', () => store.renewWorkflowRunClaim(claim));
      timer.time('complete', () => store.completeWorkflowRun(claim));
    }
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return timer;
}

const LIFECYCLE = ['reserve', 'claim', 'markRunning', 'renew', 'complete'];

function controllerLoop(Store, root, factor) {
  const folder = freshFolder(root);
  const store = openStore(Store, folder);
  const timer = new Timer();
  try {
    for (let index = 0; index < scaled(500, factor); index += 1) {
      timer.time('putResource', () =>
        store.putResource({ controller: 'jobs', key: `job-${index}`, spec: { n: index }, initialStatus: { phase: 'new' } }),
      );
    }
    for (let loops = 0; ; loops += 1) {
      // One loop: claimNext, updateStatus, recordEvent, settleClaim (effects are timed apart).
      const claim = timer.time('loop', () => store.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000 }), false);
      if (claim === undefined) break;
      const ref = { controller: claim.controller, key: claim.key };
      const resource = timer.time('loop', () => {
        const updated = store.updateStatus({
          ref,
          expectedResourceVersion: claim.resourceVersion,
          claim,
          status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
        });
        store.recordEvent({ controller: ref.controller, key: ref.key, claim, type: 'bench.reconciled', payload: { n: loops } });
        return updated;
      });
      if (loops % 10 === 0) {
        const effect = { key: `effect-${loops}`, resourceUid: resource.metadata.uid, claim, generation: 1, kind: 'bench', requestFingerprint: 'f' };
        timer.time('reserveEffect', () => store.reserveEffect(effect));
        timer.time('updateEffect', () => store.updateEffect({ ...effect, state: 'applied' }));
      }
      timer.time('loop', () => store.settleClaim(claim), false);
    }
    return timer;
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** A database with 5,000 runs in every state and 500 controller resources, built once. */
function populatedDatabase(Store) {
  const root = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const folder = freshFolder(root);
  const store = openStore(Store, folder);
  const runs = scaled(5000);
  for (let index = 0; index < runs; index += 1) {
    const runId = `run-${index}`;
    const session = `session-${index}`;
    const claim = { runId, runnerId: session, claimToken: `token-${index}`, leaseMs: 30_000 };
    store.reserveWorkflowRun(reservation(runId, session));
    if (index % 3 === 0) continue;
    store.claimWorkflowRun(claim);
    store.markWorkflowRunRunning(claim);
    if (index % 3 === 1) store.completeWorkflowRun(claim);
  }
  for (let index = 0; index < scaled(500); index += 1) {
    const ref = { controller: 'jobs', key: `job-${index}` };
    store.putResource({ ...ref, spec: { n: index }, initialStatus: { phase: 'new' } });
    store.recordEvent({ ...ref, type: 'bench.note', payload: { n: index } });
  }
  store.close();
  return { folder, file: path.join(folder, 'state.sqlite'), runs };
}

function copyDatabase(source, root) {
  const folder = freshFolder(root);
  fs.copyFileSync(source.file, path.join(folder, 'state.sqlite'));
  return folder;
}

function reads(Store, source, root) {
  const folder = copyDatabase(source, root);
  // The copy's project is the populated one, so project-scoped reads find its runs and resources.
  const store = openStore(Store, folder, source.folder);
  const timer = new Timer();
  const n = scaled(2000);
  const runId = (i) => `run-${(i * 7919) % source.runs}`;
  try {
    for (let i = 0; i < n; i += 1) timer.time('getWorkflowRun', () => store.getWorkflowRun(runId(i)));
    for (let i = 0; i < n; i += 1) timer.time('getWorkflowRunView', () => store.getWorkflowRunView(runId(i)));
    for (let i = 0; i < n; i += 1) {
      timer.time('getResource', () => store.getResource({ controller: 'jobs', key: `job-${(i * 31) % scaled(500)}` }));
    }
    for (let i = 0; i < scaled(100); i += 1) {
      timer.time('listWorkflowRunViews', () => store.listWorkflowRunViews({ offset: (i * 50) % source.runs, limit: 50 }));
      timer.time('listWorkflowRuns', () => store.listWorkflowRuns({ limit: 100 }));
      timer.time('listEvents', () => store.listEvents({ limit: 100 }));
      timer.time('listRunEventsAfter', () => store.listRunEventsAfter(0, { limit: 100 }));
    }
    // The same list reads right after a write (untimed), which the run index
    // (src/state/run_index.rs) takes in first, as for a viewer polling a busy database.
    const touch = (i) => store.recordEvent({ controller: 'jobs', key: 'job-0', type: 'bench.touch', payload: { i } });
    for (let i = 0; i < scaled(100); i += 1) {
      touch(i);
      timer.time('listWorkflowRunViews, changed', () => store.listWorkflowRunViews({ offset: (i * 50) % source.runs, limit: 50 }));
      touch(i);
      timer.time('listWorkflowRuns, changed', () => store.listWorkflowRuns({ limit: 100 }));
    }
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return timer;
}

function openClose(Store, source, root) {
  const folder = copyDatabase(source, root);
  const timer = new Timer();
  try {
    for (let i = 0; i < 20; i += 1) timer.time('openClose', () => openStore(Store, folder, source.folder).close());
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return timer;
}

function oneCommit(Store, root, factor) {
  const folder = freshFolder(root);
  const store = openStore(Store, folder);
  const timer = new Timer();
  try {
    const connection = store.state.connection;
    const insert = connection.prepare('INSERT INTO projects(project_id, canonical_path, created_at) VALUES (?, ?, ?)');
    for (let i = 0; i < scaled(1000, factor); i += 1) {
      timer.time('commit', () => {
        connection.exec('BEGIN IMMEDIATE');
        insert.run(`bench-${i}`, `/bench/${i}`, i);
        connection.exec('COMMIT');
      });
    }
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return timer;
}

/**
 * The same commit straight through better-sqlite3 (what the reference runs on): this machine
 * against the machine of the reference figures. No store involved; skipped without the package.
 */
function betterSqliteCommit(root, factor) {
  let Database;
  try {
    Database = require('better-sqlite3');
  } catch {
    return undefined;
  }
  const folder = freshFolder(root);
  const db = new Database(path.join(folder, 'plain.sqlite'));
  const timer = new Timer();
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE projects(project_id TEXT PRIMARY KEY, canonical_path TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL) STRICT');
    const insert = db.prepare('INSERT INTO projects(project_id, canonical_path, created_at) VALUES (?, ?, ?)');
    for (let i = 0; i < scaled(1000, factor); i += 1) {
      timer.time('commit', () => {
        db.exec('BEGIN IMMEDIATE');
        insert.run(`bench-${i}`, `/bench/${i}`, i);
        db.exec('COMMIT');
      });
    }
  } finally {
    db.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return timer;
}

/** The store classes measured: this package's, and the reference's when PIW_REF names it. */
const stores = { native: undefined, reference: undefined };

/** Per-operation µs of each timer's operations, the median over repetitions. */
function medians(timers) {
  const result = {};
  for (const name of timers[0].totals.keys()) result[name] = median(timers.map((timer) => timer.perOp(name)));
  return result;
}

/**
 * Per-operation µs of `workload(Store)`, median over repetitions, for this package and (with
 * PIW_REF) the reference, their repetitions interleaved so that both see the same machine.
 */
function repeat(workload) {
  const ours = [];
  const theirs = [];
  for (let i = 0; i < REPETITIONS; i += 1) {
    ours.push(workload(stores.native));
    if (stores.reference !== undefined) theirs.push(workload(stores.reference));
  }
  return { measured: medians(ours), here: theirs.length === 0 ? {} : medians(theirs) };
}

/**
 * The floor of a workload: records its statements in one extra run on /dev/shm, then replays
 * them on `root` with bench/floor; per-operation µs with the same operation counts.
 */
function floorOf(workload, root, seed) {
  if (!fs.existsSync(FLOOR)) return {};
  const traceFolder = freshFolder(fs.existsSync(SHM) ? SHM : os.tmpdir());
  const trace = path.join(traceFolder, 'statements.trace');
  let timer;
  binding.recordStatements(trace);
  recording = true;
  try {
    timer = workload(stores.native, path.dirname(traceFolder));
  } finally {
    recording = false;
    binding.recordStatements(null);
  }
  const replayFolder = freshFolder(root);
  try {
    const args = ['--trace', trace, '--db', path.join(replayFolder, 'state.sqlite'), '--repetitions', String(REPETITIONS)];
    if (seed !== undefined) args.push('--seed', seed);
    const replay = spawnSync(FLOOR, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
    if (replay.status !== 0) throw new Error(`piw-floor failed: ${replay.stderr}`);
    const { labels, errors } = JSON.parse(replay.stdout);
    if (errors > 0) process.stderr.write(`floor: ${errors} statements failed to replay\n`);
    const counts = timer.counts();
    return Object.fromEntries(Object.entries(labels).map(([name, { micros }]) => [name, micros / counts[name]]));
  } finally {
    fs.rmSync(traceFolder, { recursive: true, force: true });
    fs.rmSync(replayFolder, { recursive: true, force: true });
  }
}

/**
 * The run lifecycle in a new Node process per repetition (`--fresh-lifecycle`): what a
 * short-lived process (a CLI command, a test file) sees, whose C heap has not yet grown to the
 * workload as this process's has. µs per lifecycle, ours and (PIW_REF) the reference's.
 */
function freshLifecycle(root, factor) {
  const once = (kind) => {
    const args = [__filename, '--fresh-lifecycle', kind, root, String(factor)];
    const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
    if (child.status !== 0) throw new Error(`--fresh-lifecycle ${kind} failed: ${child.stderr}`);
    return JSON.parse(child.stdout);
  };
  const ours = [];
  const theirs = [];
  for (let i = 0; i < REPETITIONS; i += 1) {
    ours.push(once('native'));
    if (stores.reference !== undefined) theirs.push(once('ts'));
  }
  return { measured: median(ours), here: theirs.length === 0 ? NaN : median(theirs), floor: NaN };
}

async function freshLifecycleChild([kind, root, factor]) {
  const timer = runLifecycle(await loadStore(kind), root, Number(factor));
  process.stdout.write(JSON.stringify(sum(LIFECYCLE.map((name) => timer.perOp(name)))));
}

/** Measured (ours and the reference's here) and floor µs per operation of one workload on `root`. */
function measure(workload, root, seed) {
  return { ...repeat((Store) => workload(Store, root)), floor: floorOf(workload, root, seed) };
}

const sum = (values) => values.reduce((a, b) => a + b, 0);

/** The table rows: a label and, per row, the operation names whose µs it shows. */
function rows(root, source, factor) {
  const lifecycle = measure((Store, where) => runLifecycle(Store, where, factor), root);
  const fresh = freshLifecycle(root, factor);
  const noFsync = root === SHM ? undefined : repeat((Store) => runLifecycle(Store, root, factor, 'OFF'));
  const loop = measure((Store, where) => controllerLoop(Store, where, factor), root);
  const read = measure((Store, where) => reads(Store, source, where), root, source.file);
  const open = measure((Store, where) => openClose(Store, source, where), root, source.file);
  const commit = measure((Store, where) => oneCommit(Store, where, factor), root);
  const plain =
    betterSqliteCommit(root, factor) === undefined
      ? undefined
      : medians(Array.from({ length: REPETITIONS }, () => betterSqliteCommit(root, factor)));
  const pick = (result, names) => ({
    measured: names.map((name) => result.measured[name]),
    here: names.map((name) => result.here[name] ?? NaN),
    floor: names.map((name) => result.floor[name]),
  });
  const whole = (result, names) => ({
    measured: sum(names.map((name) => result.measured[name])),
    here: sum(names.map((name) => result.here[name] ?? NaN)),
    floor: sum(names.map((name) => result.floor[name] ?? NaN)),
  });
  // Write transactions per operation, for the "× its commits" column.
  const commits = (row, perOperation) => ({ ...row, commits: list(perOperation), commit: commit.measured.commit });
  return {
    'run lifecycle, 5 calls': commits(whole(lifecycle, LIFECYCLE), 5),
    'the same, in a fresh process each time': commits(fresh, 5),
    ...(noFsync && { 'the same, synchronous = OFF (no fsync: what is not the wait for the disk)': whole({ ...noFsync, floor: {} }, LIFECYCLE) }),
    'reserve / claim / markRunning / renew / complete': commits(pick(lifecycle, LIFECYCLE), [1, 1, 1, 1, 1]),
    'controller loop: claimNext+updateStatus+recordEvent+settleClaim': commits(pick(loop, ['loop']), 4),
    putResource: commits(pick(loop, ['putResource']), 1),
    'reserveEffect / updateEffect': commits(pick(loop, ['reserveEffect', 'updateEffect']), [1, 1]),
    'getWorkflowRun / getWorkflowRunView / getResource': pick(read, ['getWorkflowRun', 'getWorkflowRunView', 'getResource']),
    'listWorkflowRunViews(50) / listWorkflowRuns(100)': pick(read, ['listWorkflowRunViews', 'listWorkflowRuns']),
    'the same, each right after a write': pick(read, ['listWorkflowRunViews, changed', 'listWorkflowRuns, changed']),
    'listEvents(100) / listRunEventsAfter(0, 100)': pick(read, ['listEvents', 'listRunEventsAfter']),
    'open + close, populated database': pick(open, ['openClose']),
    'one commit (BEGIN IMMEDIATE, 1 INSERT, COMMIT)': pick(commit, ['commit']),
    'machine check: that commit through better-sqlite3': { measured: [plain?.commit ?? NaN], here: [NaN], floor: [NaN] },
  };
}

const list = (value) => (Array.isArray(value) ? value : [value]);
const joined = (values, formatOne) => list(values).map(formatOne).join(' / ');
const micros = (value) => (Number.isFinite(value) ? value.toFixed(value < 100 ? 1 : 0) : '–');
const perSecond = (value) => (Number.isFinite(value) && value > 0 ? Math.round(1e6 / value).toLocaleString('en-US') : '–');
const ratio = (numerator, denominator) => {
  const value = numerator / denominator;
  return Number.isFinite(value) ? `${value.toFixed(value < 10 ? 2 : 1)}×` : '–';
};

function table(label, results) {
  const measuredHere = stores.reference !== undefined;
  const header = ['workload', 'µs/op', 'ops/s', 'floor µs/op', '× floor', '× its commits', 'reference µs/op (recorded)', 'speedup vs recorded'];
  if (measuredHere) header.push('reference here µs/op', 'speedup vs reference here');
  const lines = [`| ${header.join(' | ')} |`, `|${header.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const [workload, { measured, here, floor, commits, commit }] of Object.entries(results)) {
    const reference = REFERENCE[workload]?.[label];
    const ours = list(measured);
    const floors = list(floor);
    const cells = [
      workload,
      joined(ours, micros),
      joined(ours, perSecond),
      joined(floors, micros),
      ours.map((value, i) => ratio(value, floors[i])).join(' / '),
      commits === undefined ? '–' : ours.map((value, i) => ratio(value, commits[i] * commit)).join(' / '),
      reference === undefined ? '–' : joined(reference, micros),
      reference === undefined ? '–' : ours.map((value, i) => ratio(list(reference)[i], value)).join(' / '),
    ];
    if (measuredHere) cells.push(joined(here, micros), ours.map((value, i) => ratio(list(here)[i], value)).join(' / '));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

async function main() {
  stores.native = await loadStore('native');
  if (process.env.PIW_REF) stores.reference = await loadStore('ts');
  const roots = [['temp folder', os.tmpdir(), DISK_SCALE]];
  if (fs.existsSync(SHM)) roots.push(['/dev/shm', SHM, 1]);
  const source = populatedDatabase(stores.native);
  const sizeMiB = fs.statSync(source.file).size / 1024 / 1024;
  process.stdout.write(
    `scale ${SCALE} (write workloads on the temp folder ×${DISK_SCALE}), ${REPETITIONS} repetitions, ` +
      `populated database ${sizeMiB.toFixed(1)} MiB (${source.runs} runs)` +
      `${fs.existsSync(FLOOR) ? '' : '; floor not built (cargo build --release -p piw-floor)'}` +
      `${stores.reference === undefined ? '; no PIW_REF: the reference only as recorded elsewhere' : '; the reference (PIW_REF) measured here, repetitions interleaved'}\n`,
  );
  try {
    for (const [label, root, factor] of roots) {
      const results = rows(root, source, factor);
      process.stdout.write(`\n${label} (${root}):\n\n${table(label, results)}\n`);
    }
  } finally {
    fs.rmSync(source.folder, { recursive: true, force: true });
  }
  process.stdout.write(`\npeak RSS: ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB\n`);
}

if (require.main === module) {
  const run = process.argv[2] === '--fresh-lifecycle' ? freshLifecycleChild(process.argv.slice(3)) : main();
  run.catch((error) => {
    process.stderr.write(`${error.stack ?? error}\n`);
    process.exitCode = 1;
  });
}

module.exports = { runLifecycle, controllerLoop, reads, openClose, oneCommit, populatedDatabase, floorOf };
