// Frozen nodes and paused holders (issue 35 item 5), on a three-node cluster of piw-dqlite-node.
//
// 1. A frozen leader: three hosts (failover-worker.js, default cluster options) run their loops
//    while the leader is SIGSTOPped for FREEZE_MS, twice. Its sockets stay open and silent, so a
//    host must abandon a request to it once another node leads (the client asks the others who
//    leads while a reply is late). Every host completes calls again within 10 s of the freeze —
//    before it ends —, every acknowledged call is there, no lease has two holders, and the old
//    leader, resumed, follows the new one and catches up: leadership is handed back to it, which
//    Raft does only once it holds every entry, and the final reads go through it.
// 2. A paused holder: a host holding a run claim and a controller claim (3 s leases, renewed every
//    250 ms) is SIGSTOPped past their expiry; another store takes both over and writes; the first
//    is resumed. None of its writes is granted after the takeover (counted), and it learns of the
//    loss through the reference's own answers (renewals answer false, the fenced write throws
//    "Controller claim is stale", completing the run or settling the claim answers false).

import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

import { clusterForSuite, type TestCluster, sleep } from '../support/cluster';
import { Entry, HOSTS, doubleHolders, errorCounts, missing, putResources, recoveries, startHost, unexpectedErrors } from './hosts';

const { SqliteControllerStore } = require('../../index.js');

/** piw-dqlite-node's election timeout at its default --latency-ms 100 (libdqlite: 15 × latency). */
const ELECTION_TIMEOUT_MS = 1_500;
/**
 * How long the leader stays frozen: more than 3 election timeouts, and longer than the 10 s within
 * which every host must be back, so that being back shows it left the frozen leader rather than
 * waited for it to wake.
 */
const FREEZE_MS = 12_000;
const RECOVERY_MS = 10_000;
const FREEZES = 2;
const LEASE_MS = 3_000;

let cluster: TestCluster;

clusterForSuite((started) => (cluster = started));

test('a leader frozen for 8 election timeouts: every host back within 10 s, nothing lost, the old leader catches up', async () => {
  expect(FREEZE_MS).toBeGreaterThanOrEqual(3 * ELECTION_TIMEOUT_MS);
  const url = cluster.url(`freeze-${Date.now().toString(36)}`);
  const setup = new SqliteControllerStore(url, { projectPath: '/piw-failover' });
  putResources(setup);
  setup.close();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-freeze-'));
  const stopFile = path.join(dir, 'stop');
  const entries: Entry[] = [];
  // The default cluster options: what a host gets without tuning.
  const hosts = HOSTS.map((worker) => startHost(url, worker, stopFile, {}, entries));
  const freezes: number[] = [];
  const elections: number[] = [];
  const rejoins: number[] = [];
  try {
    await sleep(3_000);
    for (let round = 0; round < FREEZES; round += 1) {
      const leader = Number(await cluster.command('leader'));
      const frozenAt = Date.now();
      freezes.push(frozenAt);
      await cluster.command(`freeze ${leader}`);
      // When the two others agree on a new leader.
      await cluster.command('leader');
      elections.push(Date.now() - frozenAt);
      await sleep(Math.max(0, frozenAt + FREEZE_MS - Date.now()));
      await cluster.command(`thaw ${leader}`);
      const thawedAt = Date.now();
      // It follows the new leader, then takes leadership back once it holds every entry.
      await cluster.command(`follows ${leader}`);
      await cluster.command(`transfer ${leader}`);
      rejoins.push(Date.now() - thawedAt);
      await sleep(3_000);
    }
  } finally {
    fs.writeFileSync(stopFile, '');
    await Promise.all(hosts);
    fs.rmSync(dir, { recursive: true, force: true });
  }

  // A host's first call completed after the others elected (a reply that left the leader just
  // before the freeze proves nothing), counted from the freeze.
  const elected = freezes.map((at, round) => at + elections[round]);
  const recovery = recoveries(entries, elected).map((round, index) => round.map((ms) => ms + elections[index]));
  // Read through the old leader of the last round, which leads again.
  const check = new SqliteControllerStore(url, { projectPath: '/piw-failover' });
  const lost = missing(check, entries);
  check.close();
  const acknowledged = entries.filter((entry) => entry.op !== 'error').length;
  const figures = {
    acknowledged,
    foundAfter: acknowledged - lost.length,
    runsCompleted: entries.filter((entry) => entry.op === 'completed').length,
    errors: errorCounts(entries),
    recoveryMs: recovery,
    electionMs: elections,
    rejoinedAndLeadingAgainMs: rejoins,
  };
  console.log(`freeze figures: ${JSON.stringify(figures)}`);
  for (const entry of unexpectedErrors(entries).slice(0, 20)) console.log(`error: ${JSON.stringify(entry)}`);
  expect(lost).toEqual([]);
  expect(doubleHolders(entries)).toEqual([]);
  for (const round of recovery) for (const ms of round) expect(ms).toBeLessThanOrEqual(RECOVERY_MS);
  expect(unexpectedErrors(entries)).toEqual([]);
}, 240_000);

type HolderEntry = { t: number; op: string; started?: number; granted?: boolean; value?: unknown; code?: string; message?: string };

test('a holder paused past its leases: taken over, none of its writes granted after, and it learns so', async () => {
  const url = cluster.url(`paused-${Date.now().toString(36)}`);
  const runId = 'paused-run';
  const ref = { controller: 'paused', key: 'held' };
  const taker = new SqliteControllerStore(url, { projectPath: '/piw-paused' });
  taker.putResource({ ...ref, spec: {}, initialStatus: {} });

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-paused-'));
  const stopFile = path.join(dir, 'stop');
  const log: HolderEntry[] = [];
  const holder: ChildProcess = spawn(
    process.execPath,
    [path.join(__dirname, 'holder-worker.js'), url, stopFile, runId, ref.controller, ref.key, String(LEASE_MS)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  readline.createInterface({ input: holder.stdout! }).on('line', (line) => log.push(JSON.parse(line) as HolderEntry));
  const exited = new Promise((resolve) => holder.once('exit', resolve));
  let takenOverAt = 0;
  let takerVersion = 0;
  try {
    // Holding both, and renewing.
    const until = Date.now() + 30_000;
    while (log.filter((entry) => entry.op === 'renewRun' && entry.granted).length < 3 && Date.now() < until) await sleep(100);
    expect(log.find((entry) => entry.op === 'held')).toMatchObject({ run: runId, key: ref.key });
    holder.kill('SIGSTOP');
    const pausedAt = Date.now();
    await sleep(LEASE_MS + 1_000);
    // Another host takes both over once the leases expired.
    let claim;
    let run;
    for (let i = 0; i < 50 && (claim === undefined || run === undefined); i += 1) {
      claim ??= taker.claimNext({ controllers: [ref.controller], ownerId: 'taker', leaseMs: 60_000 });
      run ??= taker.claimWorkflowRun({ runId, runnerId: 'host-taker', claimToken: 'taker-token', leaseMs: 60_000 });
      if (claim === undefined || run === undefined) await sleep(200);
    }
    expect(claim).toBeDefined();
    expect(run).toBeDefined();
    const version = taker.getResource(ref).metadata.resourceVersion;
    takerVersion = taker.updateStatus({
      ref,
      expectedResourceVersion: version,
      claim,
      status: { observedGeneration: 1, conditions: [], controllerStatus: { writer: 'taker' } },
    }).metadata.resourceVersion;
    takenOverAt = Date.now();
    console.log(`paused holder: taken over ${takenOverAt - pausedAt} ms after the pause`);
    holder.kill('SIGCONT');
    await sleep(3_000);
  } finally {
    holder.kill('SIGCONT');
    fs.writeFileSync(stopFile, '');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  }

  const after = log.filter((entry) => entry.started !== undefined && entry.started > takenOverAt);
  const grantedAfter = after.filter((entry) => entry.granted);
  const grantedBefore = log.filter((entry) => entry.granted && (entry.started ?? 0) <= takenOverAt);
  const figures = {
    callsBeforeTakeover: grantedBefore.length,
    callsAfterTakeover: after.length,
    grantedAfterTakeover: grantedAfter.length,
    answersAfter: [...new Set(after.map((entry) => `${entry.op}: ${entry.message ?? JSON.stringify(entry.value)}`))],
  };
  console.log(`paused holder figures: ${JSON.stringify(figures)}`);
  expect(after.length).toBeGreaterThan(0);
  expect(grantedAfter).toEqual([]);
  // It learnt it lost both claims, from the reference's own answers.
  expect(after.some((entry) => entry.op === 'renewRun' && entry.value === false)).toBe(true);
  expect(after.some((entry) => entry.op === 'renewClaim' && entry.value === false)).toBe(true);
  expect(after.some((entry) => entry.op === 'updateStatus' && entry.message === 'Controller claim is stale')).toBe(true);
  expect(after.find((entry) => entry.op === 'completeRun')).toMatchObject({ value: false, granted: false });
  expect(after.find((entry) => entry.op === 'settleClaim')).toMatchObject({ value: false, granted: false });
  // And the database agrees: the taker's write is the last, the run is the taker's, not done.
  const resource = taker.getResource(ref);
  expect(resource.metadata.resourceVersion).toBe(takerVersion);
  expect(resource.status.controllerStatus).toEqual({ writer: 'taker' });
  expect(taker.verifyWorkflowRunClaim({ runId, claimToken: 'taker-token' })).toBe(true);
  expect(taker.verifyWorkflowRunClaim({ runId, claimToken: 'holder-token' })).toBe(false);
  expect(taker.getWorkflowRun(runId).status).not.toBe('done');
  taker.close();
}, 120_000);
