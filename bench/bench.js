'use strict';
// `npm run bench`: the store's public API under the workloads of the performance issue, on the
// normal temp folder (fsync-bound) and on /dev/shm (CPU-bound), median of 5 repetitions.
// Prints a table with µs/op, ops/s, the reference's figures for the same workload and the
// speedup, plus peak RSS. Scale down with PIW_BENCH_SCALE=0.1 for a quick look.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SqliteControllerStore } = require('..');
const { REFERENCE } = require('./reference.js');

const SCALE = Number(process.env.PIW_BENCH_SCALE ?? 1);
const REPETITIONS = Number(process.env.PIW_BENCH_REPETITIONS ?? 5);
const scaled = (n) => Math.max(1, Math.round(n * SCALE));

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const SOURCE = { kind: 'builtin', id: 'echo', revision: 'r1' };

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Accumulates the time spent in each named operation. */
class Timer {
  constructor() {
    this.totals = new Map();
  }

  time(name, operation) {
    const start = process.hrtime.bigint();
    const result = operation();
    const elapsed = Number(process.hrtime.bigint() - start) / 1000;
    const entry = this.totals.get(name) ?? { micros: 0, count: 0 };
    entry.micros += elapsed;
    entry.count += 1;
    this.totals.set(name, entry);
    return result;
  }

  perOp(name) {
    const entry = this.totals.get(name);
    return entry === undefined ? NaN : entry.micros / entry.count;
  }
}

function freshFolder(root) {
  return fs.mkdtempSync(path.join(root, 'piw-bench-'));
}

function openStore(folder) {
  return new SqliteControllerStore(path.join(folder, 'state.sqlite'), { projectPath: folder });
}

function reservation(runId, session) {
  return {
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: SOURCE,
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo', steps: [{ id: 'a', kind: 'prompt' }] },
    input: { message: `hello ${runId}` },
    runnerId: session,
    originSessionId: session,
  };
}

function runLifecycle(root) {
  const folder = freshFolder(root);
  const store = openStore(folder);
  const timer = new Timer();
  try {
    for (let index = 0; index < scaled(2000); index += 1) {
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
  const parts = ['reserve', 'claim', 'markRunning', 'renew', 'complete'].map((name) => timer.perOp(name));
  return { lifecycle: parts.reduce((a, b) => a + b, 0), parts };
}

function controllerLoop(root) {
  const folder = freshFolder(root);
  const store = openStore(folder);
  const timer = new Timer();
  let loops = 0;
  try {
    for (let index = 0; index < scaled(500); index += 1) {
      timer.time('putResource', () =>
        store.putResource({ controller: 'jobs', key: `job-${index}`, spec: { n: index }, initialStatus: { phase: 'new' } }),
      );
    }
    const start = process.hrtime.bigint();
    for (;;) {
      const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000 });
      if (claim === undefined) break;
      const ref = { controller: claim.controller, key: claim.key };
      const resource = store.updateStatus({
        ref,
        expectedResourceVersion: claim.resourceVersion,
        claim,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
      });
      store.recordEvent({ controller: ref.controller, key: ref.key, claim, type: 'bench.reconciled', payload: { n: loops } });
      if (loops % 10 === 0) {
        const effect = { key: `effect-${loops}`, resourceUid: resource.metadata.uid, claim, generation: 1, kind: 'bench', requestFingerprint: 'f' };
        timer.time('reserveEffect', () => store.reserveEffect(effect));
        timer.time('updateEffect', () => store.updateEffect({ ...effect, state: 'applied' }));
      }
      store.settleClaim(claim);
      loops += 1;
    }
    const micros = Number(process.hrtime.bigint() - start) / 1000;
    const effectMicros = (timer.totals.get('reserveEffect')?.micros ?? 0) + (timer.totals.get('updateEffect')?.micros ?? 0);
    return { loop: (micros - effectMicros) / loops, putResource: timer.perOp('putResource'), reserveEffect: timer.perOp('reserveEffect'), updateEffect: timer.perOp('updateEffect') };
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** A database with 5,000 runs in every state and 500 controller resources, built once. */
function populatedDatabase() {
  const root = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const folder = freshFolder(root);
  const store = openStore(folder);
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

function reads(source, root) {
  const folder = copyDatabase(source, root);
  const store = openStore(folder);
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
  } finally {
    store.close();
    fs.rmSync(folder, { recursive: true, force: true });
  }
  const names = ['getWorkflowRun', 'getWorkflowRunView', 'getResource', 'listWorkflowRunViews', 'listWorkflowRuns', 'listEvents', 'listRunEventsAfter'];
  return Object.fromEntries(names.map((name) => [name, timer.perOp(name)]));
}

function openClose(source, root) {
  const folder = copyDatabase(source, root);
  const timer = new Timer();
  try {
    for (let i = 0; i < 20; i += 1) timer.time('openClose', () => openStore(folder).close());
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return { openClose: timer.perOp('openClose') };
}

function oneCommit(root) {
  const folder = freshFolder(root);
  const store = openStore(folder);
  const timer = new Timer();
  try {
    const connection = store.state.connection;
    const insert = connection.prepare('INSERT INTO projects(project_id, canonical_path, created_at) VALUES (?, ?, ?)');
    for (let i = 0; i < scaled(1000); i += 1) {
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
  return { commit: timer.perOp('commit') };
}

/** Median over repetitions of each field of the measurement objects. */
function repeat(measure) {
  const samples = Array.from({ length: REPETITIONS }, () => measure());
  const result = {};
  for (const key of Object.keys(samples[0])) {
    const first = samples[0][key];
    result[key] = Array.isArray(first)
      ? first.map((_, index) => median(samples.map((sample) => sample[key][index])))
      : median(samples.map((sample) => sample[key]));
  }
  return result;
}

function measureAll(root, source) {
  const lifecycle = repeat(() => runLifecycle(root));
  const loop = repeat(() => controllerLoop(root));
  const read = repeat(() => reads(source, root));
  const open = repeat(() => openClose(source, root));
  const commit = repeat(() => oneCommit(root));
  return {
    'run lifecycle, 5 calls': lifecycle.lifecycle,
    'reserve / claim / markRunning / renew / complete': lifecycle.parts,
    'controller loop: claimNext+updateStatus+recordEvent+settleClaim': loop.loop,
    putResource: loop.putResource,
    'reserveEffect / updateEffect': [loop.reserveEffect, loop.updateEffect],
    'getWorkflowRun / getWorkflowRunView / getResource': [read.getWorkflowRun, read.getWorkflowRunView, read.getResource],
    'listWorkflowRunViews(50) / listWorkflowRuns(100)': [read.listWorkflowRunViews, read.listWorkflowRuns],
    'listEvents(100) / listRunEventsAfter(0, 100)': [read.listEvents, read.listRunEventsAfter],
    'open + close, populated database': open.openClose,
    'one commit (BEGIN IMMEDIATE, 1 INSERT, COMMIT)': commit.commit,
  };
}

const format = (value) => (Array.isArray(value) ? value.map(format).join(' / ') : Number.isFinite(value) ? value.toFixed(value < 100 ? 1 : 0) : '–');

function speedup(reference, measured) {
  if (reference === undefined) return '–';
  const ours = Array.isArray(measured) ? measured : [measured];
  const theirs = Array.isArray(reference) ? reference : [reference];
  return ours.map((value, index) => (Number.isFinite(value) ? `${(theirs[index] / value).toFixed(1)}×` : '–')).join(' / ');
}

function main() {
  const roots = [['temp folder', os.tmpdir()]];
  if (fs.existsSync('/dev/shm')) roots.push(['/dev/shm', '/dev/shm']);
  const source = populatedDatabase();
  const sizeMiB = fs.statSync(source.file).size / 1024 / 1024;
  process.stdout.write(`scale ${SCALE}, ${REPETITIONS} repetitions, populated database ${sizeMiB.toFixed(1)} MiB (${source.runs} runs)\n\n`);
  const results = roots.map(([label, root]) => [label, measureAll(root, source)]);
  fs.rmSync(source.folder, { recursive: true, force: true });

  const header = ['workload'];
  for (const [label] of results) header.push(`µs/op (${label})`, `reference`, `speedup`);
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const workload of Object.keys(results[0][1])) {
    const row = [workload];
    for (const [label, measured] of results) {
      const reference = REFERENCE[workload]?.[label];
      row.push(format(measured[workload]), reference === undefined ? '–' : format(reference), speedup(reference, measured[workload]));
    }
    lines.push(`| ${row.join(' | ')} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n\n`);
  process.stdout.write(`peak RSS: ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB\n`);
}

main();
