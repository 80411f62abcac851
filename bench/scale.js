'use strict';
// `npm run bench:scale`: what the calls Pi polls cost as the state file grows (issue 13).
//
// Builds state files of 1,000, 10,000 and 100,000 runs through the public API — 90% of runs
// terminal, 5% parked (for a workflow source change), 5% queued for their own interactive
// session, plus runs/10 controller resources, all settled — once per build of the addon: the
// files are kept under <root>/piw-scale-<hash of the .node file>/ and reused while that binary
// is the one loaded. One build grows the file and snapshots it at each size.
//
// Then, per size, on a fresh copy of that file: µs/op (median) of each call, each timed right
// after a write (a run event recorded through the same store), so nothing an earlier call kept
// can be reused unless it knows the file has not changed in a way that matters. The last column
// is the growth from the smallest to the largest size; a call that reads only what it returns
// stays near 1×.
//
// Environment: PIW_SCALE_SIZES (default 1000,10000,100000), PIW_SCALE_ROOT (default /dev/shm,
// else the temp folder), PIW_SCALE_REBUILD=1 to build again, PIW_SCALE_ITERATIONS (default 40),
// PIW_SCALE_CACHE=<folder> to measure on files another build made (the file format is the same).
// Run against another build with PI_WORKFLOWS_NATIVE_PATH=/path/to/file.node.

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SqliteControllerStore } = require('..');

const SIZES = (process.env.PIW_SCALE_SIZES ?? '1000,10000,100000').split(',').map(Number);
const ROOT = process.env.PIW_SCALE_ROOT ?? (fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());
const ITERATIONS = Number(process.env.PIW_SCALE_ITERATIONS ?? 40);
const PROJECT = '/piw-scale/project';
const { reservation } = require('./fixtures');

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

const runKind = (index) => (index % 20 === 0 ? 'queued' : index % 20 === 1 ? 'parked' : 'terminal');

/** Adds run `index` (and, every tenth run, one settled controller resource). */
function addRun(store, index) {
  const runId = `run-${index}`;
  const session = `session-${index}`;
  store.reserveWorkflowRun(reservation(runId, session));
  const kind = runKind(index);
  if (kind !== 'queued') {
    const claim = { runId, runnerId: session, claimToken: `token-${index}`, leaseMs: 30_000 };
    store.claimWorkflowRun(claim);
    store.markWorkflowRunRunning(claim);
    if (kind === 'parked') store.parkWorkflowRunForSourceChange({ ...claim, detail: 'source changed' });
    else store.completeWorkflowRun(claim);
  }
  if (index % 10 === 0) {
    const ref = { controller: 'jobs', key: `job-${index / 10}` };
    store.putResource({ ...ref, spec: { n: index }, initialStatus: { phase: 'new' } });
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'builder', leaseMs: 30_000 });
    store.recordEvent({ ...ref, claim, type: 'bench.reconciled', payload: { n: index } });
    store.settleClaim(claim);
  }
}

/** The cached state file of each size, built (growing one file) when missing. */
function stateFiles() {
  const cache = process.env.PIW_SCALE_CACHE ?? path.join(ROOT, `piw-scale-${binaryKey()}`);
  const file = (size) => path.join(cache, `runs-${size}.sqlite`);
  const metaFile = path.join(cache, 'build.json');
  const sizes = [...SIZES].sort((a, b) => a - b);
  if (process.env.PIW_SCALE_REBUILD !== '1' && sizes.every((size) => fs.existsSync(file(size)))) {
    const meta = fs.existsSync(metaFile) ? JSON.parse(fs.readFileSync(metaFile, 'utf8')) : {};
    return { file, meta, cache };
  }
  fs.rmSync(cache, { recursive: true, force: true });
  fs.mkdirSync(cache, { recursive: true });
  const building = path.join(cache, 'building.sqlite');
  const meta = {};
  const start = process.hrtime.bigint();
  let store = new SqliteControllerStore(building, { projectPath: PROJECT });
  let built = 0;
  for (const size of sizes) {
    for (; built < size; built += 1) addRun(store, built);
    store.close();
    fs.copyFileSync(building, file(size));
    meta[size] = Number(process.hrtime.bigint() - start) / 1e9;
    process.stderr.write(`built ${size} runs in ${meta[size].toFixed(1)} s\n`);
    store = new SqliteControllerStore(building, { projectPath: PROJECT });
  }
  store.close();
  fs.rmSync(building, { force: true });
  fs.writeFileSync(metaFile, JSON.stringify(meta));
  return { file, meta, cache };
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Median µs of `operation`, each time right after `write()` (untimed). */
function timed(write, operation, check) {
  const samples = [];
  for (let i = 0; i < ITERATIONS + 3; i += 1) {
    write(i);
    const start = process.hrtime.bigint();
    const result = operation(i);
    const elapsed = Number(process.hrtime.bigint() - start) / 1000;
    if (check !== undefined && !check(result)) throw new Error(`unexpected result: ${JSON.stringify(result)?.slice(0, 300)}`);
    if (i >= 3) samples.push(elapsed);
  }
  return median(samples);
}

function measureSize(source, size) {
  const folder = fs.mkdtempSync(path.join(ROOT, 'piw-scale-run-'));
  const file = path.join(folder, 'state.sqlite');
  fs.copyFileSync(source, file);
  const bytes = fs.statSync(file).size;
  const store = new SqliteControllerStore(file, { projectPath: PROJECT });
  const results = {};
  try {
    const terminal = (i) => `run-${(((i * 7919) % size) - ((i * 7919) % size) % 20) + 2}`;
    const write = (i) =>
      store.recordRunEvent({ runId: terminal(i), workflowRef: 'builtin:echo', type: 'bench.touch', payload: { i } });
    const nothing = (value) => value === undefined;
    const claimToken = 'bench-token';
    results['claimNextWorkflowRun, host, nothing claimable'] = timed(
      write,
      () => store.claimNextWorkflowRun({ runnerId: 'host-bench', claimToken, leaseMs: 30_000 }),
      nothing,
    );
    results['claimNextWorkflowRun with sessionId, nothing claimable'] = timed(
      write,
      () => store.claimNextWorkflowRun({ runnerId: 'session-idle', sessionId: 'session-idle', claimToken, leaseMs: 30_000 }),
      nothing,
    );
    results.workflowRunListRevision = timed(write, () => store.workflowRunListRevision());
    results['listWorkflowRunViews({offset: 0, limit: 50})'] = timed(write, () =>
      store.listWorkflowRunViews({ offset: 0, limit: 50 }),
    );
    results['listWorkflowRuns({limit: 100})'] = timed(write, () => store.listWorkflowRuns({ limit: 100 }));
    results['listWorkflowRuns, active statuses'] = timed(write, () =>
      store.listWorkflowRuns({ statuses: ['queued', 'parked', 'starting', 'running'], limit: 100 }),
    );
    const queuedSession = (i) => `session-${(((i * 7919) % size) - ((i * 7919) % size) % 20)}`;
    results.findSessionReservation = timed(
      write,
      (i) => store.findSessionReservation(queuedSession(i)),
      (value) => value !== undefined,
    );
    let tail = 0;
    results['listRunEventsAfter(tail)'] = timed(
      (i) => {
        for (let page; (page = store.listRunEventsAfter(tail, { limit: 1000 })).length > 0; ) tail = page.at(-1).seq;
        write(i);
      },
      () => store.listRunEventsAfter(tail, { limit: 100 }),
      (events) => events.length === 1,
    );
    results['claimNext, nothing claimable'] = timed(
      write,
      () => store.claimNext({ controllers: ['jobs'], ownerId: 'bench', leaseMs: 30_000 }),
      nothing,
    );
    results.getWorkflowRun = timed(write, (i) => store.getWorkflowRun(terminal(i)));
    results.getWorkflowRunView = timed(write, (i) => store.getWorkflowRunView(terminal(i)));
    results['listEvents({limit: 100})'] = timed(write, () => store.listEvents({ limit: 100 }));
    let opened;
    results['constructor (read-write)'] = timed(
      write,
      () => {
        opened = new SqliteControllerStore(file, { projectPath: PROJECT });
      },
      () => {
        opened.close();
        return true;
      },
    );
    results['open + close (read-write)'] = timed(write, () => new SqliteControllerStore(file, { projectPath: PROJECT }).close());
    results['open + close (read-only)'] = timed(write, () =>
      new SqliteControllerStore(file, { projectPath: PROJECT, readOnly: true }).close(),
    );
    results['pruneUnreferencedBlobs (the open prune)'] = timed(write, () => store.state.pruneUnreferencedBlobs());
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return { results, bytes };
}

const micros = (value) => (value < 100 ? value.toFixed(1) : Math.round(value).toLocaleString('en-US'));
const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

function main() {
  const { file, meta } = stateFiles();
  const measured = SIZES.map((size) => ({ size, ...measureSize(file(size), size) }));
  const first = measured[0];
  const last = measured.at(-1);
  const header = ['call (after a write), µs/op', ...measured.map(({ size }) => `${size.toLocaleString('en-US')} runs`)];
  header.push(`growth ${last.size / 1000}k/${first.size / 1000}k`);
  const lines = [`| ${header.join(' | ')} |`, `|${header.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const name of Object.keys(first.results)) {
    const growth = last.results[name] / first.results[name];
    lines.push(`| ${[name, ...measured.map(({ results }) => micros(results[name])), `${growth.toFixed(1)}×`].join(' | ')} |`);
  }
  lines.push(`| file size | ${measured.map(({ bytes }) => megabytes(bytes)).join(' | ')} | |`);
  const builds = SIZES.map((size) => (meta[size] === undefined ? '–' : `${meta[size].toFixed(1)} s`));
  lines.push(`| build through the API (cumulative) | ${builds.join(' | ')} | |`);
  process.stdout.write(`bench:scale on ${ROOT} (${path.basename(binaryPath())}, ${ITERATIONS} samples each)\n\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

main();
