// Failover: three client processes (three hosts) run workflow-run lifecycles and controller
// claim/settle loops while the leader node is SIGKILLed and restarted, three times. Afterwards
// every acknowledged call is in the database, no lease was held by two holders at once (a
// superseded holder's fenced write never lands after a newer holder's), and every client
// answered again within 10 s of each kill (or 2 s of the election, when Raft took longer).

import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

import { TestCluster } from '../support/cluster';

const { SqliteControllerStore } = require('../../index.js');

type Entry = { t: number; worker: string; op: string; [field: string]: unknown };

const KILLS = 3;
/** The hosts' cluster options (handed to failover-worker.js). */
const WORKER_CLUSTER = { reconnectDeadlineMs: 30_000, requestTimeoutMs: 5_000 };
const RECOVERY_MS = 10_000;
const RESOURCES = 4;

let cluster: TestCluster;

beforeAll(async () => {
  cluster = await TestCluster.start(3);
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function startWorker(url: string, worker: string, stopFile: string, entries: Entry[]): Promise<number | null> {
  const child: ChildProcess = spawn(process.execPath, [path.join(__dirname, 'failover-worker.js'), url, worker, stopFile, JSON.stringify(WORKER_CLUSTER)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  readline.createInterface({ input: child.stdout! }).on('line', (line) => entries.push(JSON.parse(line) as Entry));
  return new Promise((resolve) => child.once('exit', resolve));
}

test('three hosts through three leader kills: nothing acknowledged lost, no double holder, back within 10 s', async () => {
  const url = cluster.url(`failover-${Date.now().toString(36)}`);
  const setup = new SqliteControllerStore(url, { projectPath: '/piw-failover' });
  for (let i = 0; i < RESOURCES; i += 1) {
    setup.putResource({ controller: 'failover', key: `r${i}`, spec: { i }, initialStatus: {} });
  }
  setup.close();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-failover-'));
  const stopFile = path.join(dir, 'stop');
  const entries: Entry[] = [];
  const workers = ['host-a', 'host-b', 'host-c'].map((worker) => startWorker(url, worker, stopFile, entries));
  const kills: number[] = [];
  const elections: number[] = [];
  try {
    await sleep(3_000);
    for (let round = 0; round < KILLS; round += 1) {
      const leader = Number(await cluster.command('leader'));
      kills.push(Date.now());
      await cluster.command(`kill ${leader}`);
      // When the surviving nodes agree on a new leader (the harness polls them).
      await cluster.command('leader');
      elections.push(Date.now() - kills[kills.length - 1]);
      await sleep(Math.max(0, kills[kills.length - 1] + RECOVERY_MS - Date.now()));
      await cluster.command(`restart ${leader}`);
      await cluster.command('voters 3');
      await sleep(3_000);
    }
  } finally {
    fs.writeFileSync(stopFile, '');
    await Promise.all(workers);
    fs.rmSync(dir, { recursive: true, force: true });
  }

  const acked = (op: string) => entries.filter((entry) => entry.op === op);
  const errors = acked('error');
  // Every client answered again within 10 s of each kill.
  const recovery = kills.map((kill) =>
    ['host-a', 'host-b', 'host-c'].map((worker) => {
      const next = entries.find((entry) => entry.worker === worker && entry.op !== 'error' && entry.t > kill);
      return next === undefined ? Infinity : next.t - kill;
    }),
  );
  // Every acknowledged call is there: read by a store as patient as the hosts. (Its open took
  // 2-27 s, and failed, while the cluster's open prune was quadratic: each leader lost its
  // leadership running it. About 1 s now: checkOpenMs.)
  const checkStarted = Date.now();
  const check = new SqliteControllerStore(url, { projectPath: '/piw-failover', cluster: WORKER_CLUSTER });
  const checkOpenMs = Date.now() - checkStarted;
  const missing: string[] = [];
  for (const entry of acked('reserved')) {
    if (check.getWorkflowRun(entry.runId as string) === undefined) missing.push(`reserved ${entry.runId}`);
  }
  for (const entry of acked('completed')) {
    if (check.getWorkflowRun(entry.runId as string)?.status !== 'done') missing.push(`completed ${entry.runId}`);
  }
  const resources = new Map<string, number>();
  for (let i = 0; i < RESOURCES; i += 1) {
    resources.set(`r${i}`, check.getResource({ controller: 'failover', key: `r${i}` }).metadata.resourceVersion);
  }
  check.close();
  // No double holder: two acknowledged claims never got the same lease generation, and in commit
  // order (resource versions) the fenced writes of a resource never go back to an older holder.
  const doubleHolders: string[] = [];
  const claims = new Map<string, string>();
  for (const entry of acked('claimed')) {
    const at = `${entry.key}#${entry.generation}`;
    if (claims.has(at)) doubleHolders.push(`${at}: ${claims.get(at)} and ${entry.worker}`);
    claims.set(at, entry.worker);
  }
  for (const key of resources.keys()) {
    const writes = acked('written')
      .filter((entry) => entry.key === key)
      .sort((a, b) => (a.version as number) - (b.version as number));
    for (let i = 1; i < writes.length; i += 1) {
      if ((writes[i].generation as number) < (writes[i - 1].generation as number)) {
        doubleHolders.push(`${key}: generation ${writes[i].generation} wrote after ${writes[i - 1].generation}`);
      }
    }
  }
  const figures = {
    acknowledged: entries.length - errors.length,
    runsCompleted: acked('completed').length,
    fencedWrites: acked('written').length,
    errors: Object.fromEntries(
      [...new Set(errors.map((entry) => String(entry.code)))].map((code) => [code, errors.filter((e) => String(e.code) === code).length]),
    ),
    recoveryMs: recovery,
    electionMs: elections,
    checkOpenMs,
  };
  console.log(`failover figures: ${JSON.stringify(figures)}`);
  for (const entry of errors.slice(0, 20)) console.log(`error: ${JSON.stringify(entry)} (kills at ${JSON.stringify(kills)})`);
  expect(missing).toEqual([]);
  expect(doubleHolders).toEqual([]);
  expect(acked('completed').length).toBeGreaterThan(30);
  // Within 10 s of each kill; when the nodes' Raft itself took longer to elect (a split
  // vote runs a second randomised election timeout), within 2 s of the election.
  recovery.forEach((round, index) => {
    for (const ms of round) expect(ms).toBeLessThanOrEqual(Math.max(RECOVERY_MS, elections[index] + 2_000));
  });
  // The only errors a failover may cause: an unknown outcome of a write, or the fenced write of
  // a holder a newer one superseded (its lease expired while the cluster elected).
  const superseded = (entry: Entry) => entry.what === 'fenced' && entry.message === 'Controller claim is stale';
  expect(errors.filter((entry) => entry.code !== 'DQLITE_OUTCOME_UNKNOWN' && !superseded(entry))).toEqual([]);
}, 180_000);
