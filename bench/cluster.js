'use strict';
// npm run bench:cluster — the cluster rows beside the file store's: one workflow-run lifecycle
// (reserve, claim, mark running, complete), a poll (claimNextWorkflowRun with nothing due) and a
// controller claimNext + settleClaim, on a state file in /dev/shm (or the temp folder) and on a
// local three-node dqlite cluster (crates/dqlite-wire's dqlite-test-cluster: loopback, every
// write replicated to a quorum); then the lifecycle and the controller row again through
// `store.async`, each call awaited. Median and p99 in µs over PIW_CLUSTER_ITERATIONS (300), and on
// the cluster the requests a row writes to the leader (its round trips; a write carries one
// request or several sent together).

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const { SqliteControllerStore } = require('../index.js');
const { binding } = require('../lib/native.js');
const { reservation } = require('./fixtures');

const ITERATIONS = Number(process.env.PIW_CLUSTER_ITERATIONS ?? 300);
const BINARY = path.join(__dirname, '..', 'target', 'debug', 'dqlite-test-cluster');

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p50: Math.round(at(0.5)), p99: Math.round(at(0.99)) };
}

/** µs `fn` took; its request writes are added to `requests` (when given). */
function time(fn, requests) {
  const writes = binding.clusterRequestWrites();
  const start = process.hrtime.bigint();
  fn();
  const elapsed = Number(process.hrtime.bigint() - start) / 1000;
  if (requests) requests.push(binding.clusterRequestWrites() - writes);
  return elapsed;
}

function rows(store, label) {
  store.putResource({ controller: 'bench', key: 'k', spec: {}, initialStatus: {} });
  const lifecycle = [];
  const poll = [];
  const claim = [];
  const requests = { lifecycle: [], poll: [], 'claimNext+settle+enqueue': [] };
  for (let i = 0; i < ITERATIONS; i += 1) {
    const runId = `${label}-${i}`;
    lifecycle.push(
      time(() => {
        store.reserveWorkflowRun({ ...reservation(runId, `${runId}-session`), runnerId: 'host' });
        store.claimWorkflowRun({ runId, runnerId: 'host', claimToken: `${runId}-t`, leaseMs: 30_000 });
        store.markWorkflowRunRunning({ runId, claimToken: `${runId}-t` });
        store.completeWorkflowRun({ runId, claimToken: `${runId}-t` });
      }, requests.lifecycle),
    );
    poll.push(
      time(() => store.claimNextWorkflowRun({ runnerId: 'host', claimToken: `poll-${i}`, leaseMs: 30_000 }), requests.poll),
    );
    claim.push(
      time(() => {
        const held = store.claimNext({ controllers: ['bench'], ownerId: 'host', leaseMs: 30_000 });
        if (held) store.settleClaim(held);
        store.enqueue({ controller: 'bench', key: 'k' });
      }, requests['claimNext+settle+enqueue']),
    );
  }
  const timed = { lifecycle: stats(lifecycle), poll: stats(poll), 'claimNext+settle+enqueue': stats(claim) };
  for (const [row, counts] of Object.entries(requests)) timed[row].requests = stats(counts).p50;
  return timed;
}

/** µs an awaited `fn` took; its request writes are added to `requests`. */
async function timeAsync(fn, requests) {
  const writes = binding.clusterRequestWrites();
  const start = process.hrtime.bigint();
  await fn();
  const elapsed = Number(process.hrtime.bigint() - start) / 1000;
  requests.push(binding.clusterRequestWrites() - writes);
  return elapsed;
}

/** The same lifecycle and controller rows through `store.async`, each call awaited in turn. */
async function asyncRows(store, label) {
  const s = store.async;
  await s.putResource({ controller: 'bench-async', key: 'k', spec: {}, initialStatus: {} });
  const lifecycle = [];
  const claim = [];
  const requests = { lifecycle: [], claim: [] };
  for (let i = 0; i < ITERATIONS; i += 1) {
    const runId = `${label}-async-${i}`;
    lifecycle.push(
      await timeAsync(async () => {
        await s.reserveWorkflowRun({ ...reservation(runId, `${runId}-session`), runnerId: 'host' });
        await s.claimWorkflowRun({ runId, runnerId: 'host', claimToken: `${runId}-t`, leaseMs: 30_000 });
        await s.markWorkflowRunRunning({ runId, claimToken: `${runId}-t` });
        await s.completeWorkflowRun({ runId, claimToken: `${runId}-t` });
      }, requests.lifecycle),
    );
    claim.push(
      await timeAsync(async () => {
        const held = await s.claimNext({ controllers: ['bench-async'], ownerId: 'host', leaseMs: 30_000 });
        if (held) await s.settleClaim(held);
        await s.enqueue({ controller: 'bench-async', key: 'k' });
      }, requests.claim),
    );
  }
  const timed = { 'lifecycle, store.async': stats(lifecycle), 'claimNext+settle+enqueue, store.async': stats(claim) };
  timed['lifecycle, store.async'].requests = stats(requests.lifecycle).p50;
  timed['claimNext+settle+enqueue, store.async'].requests = stats(requests.claim).p50;
  return timed;
}

async function main() {
  const root = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const dir = fs.mkdtempSync(path.join(root, 'piw-bench-cluster-'));
  const file = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
  const out = { file: { ...rows(file, 'file'), ...(await asyncRows(file, 'file')) } };
  file.close();
  fs.rmSync(dir, { recursive: true, force: true });

  const child = spawn(BINARY, ['3'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const first = await new Promise((resolve) => readline.createInterface({ input: child.stdout }).once('line', resolve));
  const { addresses } = JSON.parse(first);
  try {
    const cluster = new SqliteControllerStore(`dqlite://${addresses.join(',')}/bench`, { projectPath: '/bench' });
    out.cluster = { ...rows(cluster, 'cluster'), ...(await asyncRows(cluster, 'cluster')) };
    cluster.close();
  } finally {
    child.stdin.end('stop\n');
  }
  console.log(`µs per call (p50 / p99), ${ITERATIONS} iterations`);
  const delay = Number(process.env.PIW_DQLITE_DELAY_US ?? 0);
  const network = delay > 0 ? `loopback + ${delay} µs each way` : 'loopback';
  console.log(`| row | file | cluster (3 nodes, ${network}) | requests (cluster) |`);
  console.log('|---|---|---|---|');
  for (const row of Object.keys(out.file)) {
    const cell = (engine) => `${out[engine][row].p50} / ${out[engine][row].p99}`;
    console.log(`| ${row} | ${cell('file')} | ${cell('cluster')} | ${out.cluster[row].requests} |`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
