// One clock for a cluster's leases (issue 35, item 4): three hosts whose wall clocks are 60 s
// behind, in step with and 60 s ahead of the nodes' run controller and run claim loops on a
// three-node cluster, pausing now and then past their leases. A global observer (this process)
// records every interval in which a holder believed it held a lease: from its claim or renewal
// to the expiry it was given, on its own clock moved by the store's offset, or to its release.
// No two holders of a lease may overlap, and every write of a holder another one superseded
// must be refused.
//
// The hosts' clocks are moved with libfaketime (Debian's `faketime` package, LD_PRELOAD), not a
// hook in the package: it moves the whole process's wall clock, `Date.now()` and the core's
// reading of the system clock alike, as on a machine whose clock is off, and leaves
// CLOCK_MONOTONIC alone (FAKETIME_DONT_FAKE_MONOTONIC), which then serves as the timeline every
// process shares. Fake timers in each process would move `Date.now()` only: the store measures
// the system clock, so that a caller's fake timers stay on top of its offset.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

import { clusterForSuite, type TestCluster } from '../support/cluster';

const { SqliteControllerStore } = require('../../index.js');

type Entry = {
  worker: string;
  mono: number;
  op: string;
  kind?: string;
  lease?: string;
  holder?: string;
  generation?: number;
  until?: number;
  ok?: boolean;
  after?: string;
  message?: string;
  code?: string;
  reading?: { offsetMs: number; measuredOffsetMs: number; roundTripMs: number; leader: string } | null;
};

const HOSTS = [
  { worker: 'host-behind', skewMs: -60_000 },
  { worker: 'host-even', skewMs: 0 },
  { worker: 'host-ahead', skewMs: 60_000 },
];
const DURATION_MS = 25_000;
const LEASE_MS = 2_000;
const RESOURCES = 3;

/** libfaketime's library for this machine (Debian: /usr/lib/<triplet>/faketime/). */
function libfaketime(): string {
  const candidates = ['/usr/lib/faketime', ...fs.readdirSync('/usr/lib').map((dir) => path.join('/usr/lib', dir, 'faketime'))];
  for (const dir of candidates) {
    const library = path.join(dir, 'libfaketimeMT.so.1');
    if (fs.existsSync(library)) return library;
  }
  throw new Error('libfaketime is missing: apt-get install faketime (.ci/run installs it)');
}

let cluster: TestCluster;

clusterForSuite((started) => (cluster = started));

function startHost(url: string, index: number, entries: Entry[]): Promise<number | null> {
  const { worker, skewMs } = HOSTS[index];
  const child = spawn(
    process.execPath,
    [path.join(__dirname, 'clocks-worker.js'), url, worker, String(index), String(DURATION_MS), String(LEASE_MS)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        LD_PRELOAD: libfaketime(),
        FAKETIME: `${skewMs >= 0 ? '+' : ''}${skewMs / 1000}s`,
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      },
    },
  );
  readline.createInterface({ input: child.stdout }).on('line', (line) => entries.push(JSON.parse(line) as Entry));
  return new Promise((resolve) => child.once('exit', resolve));
}

/** A holder's belief in one lease: from its claim to its last expiry, or to its release. */
type Interval = { kind: string; lease: string; holder: string; generation: number; start: number; end: number };

function intervals(entries: Entry[]): Interval[] {
  const byHolder = new Map<string, Interval>();
  for (const entry of entries) {
    if (entry.kind === undefined) continue;
    const id = `${entry.kind}/${entry.lease}/${entry.holder}`;
    const interval = byHolder.get(id);
    if (entry.op === 'held') {
      if (interval === undefined) {
        byHolder.set(id, {
          kind: entry.kind,
          lease: entry.lease!,
          holder: entry.holder!,
          generation: entry.generation!,
          start: entry.mono,
          end: entry.until!,
        });
      } else {
        interval.end = Math.max(interval.end, entry.until!);
      }
    } else if (interval !== undefined && (entry.op === 'released' || entry.op === 'settledAfterPause') && entry.ok === true) {
      interval.end = Math.min(interval.end, entry.mono);
    }
  }
  return [...byHolder.values()];
}

function overlaps(all: Interval[]): { lease: string; first: string; second: string; ms: number }[] {
  const found = [];
  const byLease = new Map<string, Interval[]>();
  for (const interval of all) {
    const key = `${interval.kind}/${interval.lease}`;
    byLease.set(key, [...(byLease.get(key) ?? []), interval]);
  }
  for (const [lease, held] of byLease) {
    held.sort((a, b) => a.start - b.start);
    for (let i = 0; i < held.length; i += 1) {
      for (let j = i + 1; j < held.length && held[j].start < held[i].end; j += 1) {
        found.push({ lease, first: held[i].holder, second: held[j].holder, ms: Math.round(held[i].end - held[j].start) });
      }
    }
  }
  return found;
}

test('hosts at -60 s, 0 and +60 s: no two holders of a lease at once, every superseded write refused', async () => {
  const url = cluster.url(`clocks-${Date.now().toString(36)}`);
  const setup = new SqliteControllerStore(url, { projectPath: '/piw-clocks' });
  for (let i = 0; i < RESOURCES; i += 1) {
    setup.putResource({ controller: 'clocks', key: `r${i}`, spec: { i }, initialStatus: {} });
  }
  setup.close();

  const entries: Entry[] = [];
  const exits = await Promise.all(HOSTS.map((_, index) => startHost(url, index, entries)));
  expect(exits).toEqual([0, 0, 0]);

  const held = intervals(entries);
  const found = overlaps(held);
  // A write is a superseded holder's when another holder claimed the same lease before it.
  const claimedAt = (kind: string, lease: string) =>
    entries.filter((entry) => entry.op === 'held' && entry.kind === kind && entry.lease === lease && entry.generation !== undefined);
  const writes = entries.filter((entry) => entry.op === 'write');
  const superseded = writes.filter((write) =>
    claimedAt(write.kind!, write.lease!).some(
      (claim) => claim.holder !== write.holder && claim.generation! > write.generation! && claim.mono < write.mono,
    ),
  );
  // A write refused while its holder believed it held the lease: someone else held it too.
  const refusedWhileHeld = writes.filter((write) => {
    const interval = held.find((i) => i.kind === write.kind && i.lease === write.lease && i.holder === write.holder);
    return write.ok === false && interval !== undefined && write.mono < interval.end;
  });
  const clocks = Object.fromEntries(
    HOSTS.map(({ worker }) => [worker, entries.filter((entry) => entry.worker === worker && entry.op === 'clock').map((entry) => entry.reading)]),
  );
  const warnings = entries.filter((entry) => entry.op === 'warning');
  const figures = {
    holders: held.length,
    controllerHolders: held.filter((i) => i.kind === 'controller').length,
    runHolders: held.filter((i) => i.kind === 'run').length,
    overlappingHolders: found.length,
    longestOverlapMs: Math.max(0, ...found.map((overlap) => overlap.ms)),
    pauses: entries.filter((entry) => entry.op === 'pause').length,
    writes: writes.length,
    writesRefusedWhileHeld: refusedWhileHeld.length,
    supersededWrites: superseded.length,
    supersededWritesRefused: superseded.filter((write) => write.ok === false).length,
    supersededRefusedAs: [...new Set(superseded.map((write) => `${write.kind}: ${write.message ?? 'returned false'}`))],
    errors: entries.filter((entry) => entry.op === 'error' || entry.op === 'fatal').length,
    clocks,
    warnings: warnings.map((warning) => `${warning.worker}: ${warning.code}`),
  };
  console.log(`clocks figures: ${JSON.stringify(figures)}`);
  for (const overlap of found.slice(0, 10)) console.log(`overlap: ${JSON.stringify(overlap)}`);
  for (const entry of entries.filter((e) => e.op === 'error' || e.op === 'fatal').slice(0, 10)) console.log(`error: ${JSON.stringify(entry)}`);

  expect(found).toEqual([]);
  expect(refusedWhileHeld).toEqual([]);
  // Takeovers happened (leases of paused holders), and every later write of the holders they
  // superseded was refused.
  expect(superseded.length).toBeGreaterThan(0);
  expect(superseded.filter((write) => write.ok !== false)).toEqual([]);
  expect(figures.controllerHolders).toBeGreaterThan(10);
  expect(figures.runHolders).toBeGreaterThan(10);
  expect(figures.errors).toBe(0);
  // Each host measured its own offset: the leader's clock minus the host's, to within half the
  // round trip (and the millisecond of each clock reading).
  HOSTS.forEach(({ worker, skewMs }) => {
    for (const reading of clocks[worker]) {
      expect(reading).not.toBeNull();
      expect(Math.abs(reading!.offsetMs + skewMs)).toBeLessThanOrEqual(reading!.roundTripMs / 2 + 1);
    }
  });
  expect(clocks['host-even'].map((reading) => reading!.offsetMs)).toEqual([0, 0]);
  // The hosts 60 s off said so, once each (one leader); the host in step did not.
  expect(warnings.map((warning) => `${warning.worker}: ${warning.code}`).sort()).toEqual([
    'host-ahead: PIW_CLUSTER_CLOCK_OFFSET',
    'host-behind: PIW_CLUSTER_CLOCK_OFFSET',
  ]);
}, 120_000);

test('a new leader after a failover is measured again', async () => {
  const store = new SqliteControllerStore(cluster.url(`clocks-failover-${Date.now().toString(36)}`), {
    projectPath: '/piw-clocks',
    cluster: { reconnectDeadlineMs: 30_000 },
  });
  try {
    const before = store.state.clusterClock;
    expect(before).toMatchObject({ offsetMs: 0, measurements: 1 });
    const leader = Number(await cluster.command('leader'));
    expect(before.leader).toBe(cluster.addresses[leader]);
    await cluster.command(`kill ${leader}`);
    // The next call waits for the new leader, and measures it before anything else.
    store.putResource({ controller: 'clocks', key: 'after-failover', spec: {}, initialStatus: {} });
    const after = store.state.clusterClock;
    expect(after.measurements).toBeGreaterThan(1);
    expect(after.leader).not.toBe(before.leader);
    // One machine: every node's clock is this host's.
    expect(after.offsetMs).toBe(0);
    await cluster.command(`restart ${leader}`);
    await cluster.command('voters 3');
  } finally {
    store.close();
  }
}, 120_000);

test("fake timers stay the base of a cluster store's time", () => {
  const store = new SqliteControllerStore(cluster.url(`clocks-fake-${Date.now().toString(36)}`), { projectPath: '/piw-clocks' });
  try {
    store.putResource({ controller: 'clocks', key: 'faked', spec: {}, initialStatus: {} });
    jest.useFakeTimers({ now: Date.parse('2030-01-02T03:04:05.006Z'), doNotFake: ['nextTick', 'setImmediate'] });
    try {
      // This host is in step with the nodes (one machine): the offset is 0, the fake clock exact.
      expect(store.state.clusterClock.offsetMs).toBe(0);
      const claim = store.claimNext({ controllers: ['clocks'], ownerId: 'faked', leaseMs: 1_000 });
      expect(claim.expiresAt).toBe('2030-01-02T03:04:06.006Z');
      jest.advanceTimersByTime(5_000);
      expect(store.renewClaim(claim, 1_000)).toBe(false);
    } finally {
      jest.useRealTimers();
    }
  } finally {
    store.close();
  }
});
