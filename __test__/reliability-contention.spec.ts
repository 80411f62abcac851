// Contention: 8 processes on one state file, claiming, renewing, settling and completing over a
// shared pool of 200 controller resources and 200 workflow runs (see reliability/contention.js).
// The long version runs under `npm run soak`.

const { runContention, checkFencing, checkRevisions } = require('./reliability/contention.js');

const SECONDS = Number(process.env.PIW_CONTENTION_SECONDS ?? 4);

test(`8 processes × ${SECONDS} s on one file: no overlapping claims, nothing acknowledged lost, gap-free events`, async () => {
  const report = await runContention({ processes: 8, seconds: SECONDS, resources: 200, runs: 200, seed: 20260901 });
  expect(report.problems).toEqual([]);
  expect(report.unexpectedErrors).toBe(0);
  // Both kinds of item were really fought over.
  expect(report.claims).toBeGreaterThan(100);
  expect(report.releases).toBeGreaterThan(50);
  expect(report.operations).toBeGreaterThan(500);
}, 120_000);

describe('the fencing checker is not vacuous', () => {
  const items = new Map([['res-1', { kind: 'resource', item: 'k1' }]]);
  const event = (seq: number, type: string, generation: number, actorId: string, recordedAt: number, expiresAt?: number) => ({
    seq,
    resourceId: 'res-1',
    revision: seq,
    type,
    actorId,
    generation,
    recordedAt,
    payload: JSON.stringify(expiresAt === undefined ? {} : { expiresAt }),
  });

  test('a second owner claiming a live lease is reported', () => {
    const events = [event(1, 'lease.claimed', 1, 'a', 1000, 2000), event(2, 'lease.claimed', 2, 'b', 1500, 2500)];
    expect(checkFencing({ items, events }, [])).toEqual([expect.stringMatching(/claimed at 1500 while generation 1 \(a\) was live until 2000/)]);
  });

  test('an acknowledged renewal extends the lease the next claim must respect', () => {
    const events = [event(1, 'lease.claimed', 1, 'a', 1000, 2000), event(2, 'lease.claimed', 2, 'b', 2100, 3000)];
    const renewal = { kind: 'resource', item: 'k1', generation: 1, now: 1900, expiresAt: 2500 };
    expect(checkFencing({ items, events }, [{ renewals: [renewal] }])).toHaveLength(1);
    expect(checkFencing({ items, events }, [])).toEqual([]);
  });

  test('a release by a superseded generation and a skipped generation are reported', () => {
    const events = [
      event(1, 'lease.claimed', 1, 'a', 1000, 2000),
      event(2, 'lease.claimed', 3, 'b', 2500, 3000),
      event(3, 'lease.released', 1, 'a', 2600),
    ];
    expect(checkFencing({ items, events }, [])).toEqual([
      expect.stringMatching(/claim generation 3 follows 1/),
      expect.stringMatching(/lease.released by generation 1 while generation 3 held it/),
    ]);
  });

  test('a revision gap is reported', () => {
    const events = [event(1, 'x', 1, 'a', 1), { ...event(2, 'y', 1, 'a', 2), revision: 3 }];
    expect(checkRevisions({ events, revisions: new Map([['res-1', 3]]) })).toEqual([expect.stringMatching(/has revision 3, expected 2/)]);
  });
});

describe('SQLITE_BUSY', () => {
  const { openStore, runNode, tableDigests, tempDir } = require('./reliability/common.js');
  const path = require('node:path');
  const fs = require('node:fs');

  /** Runs `attempt` while another process holds the write lock for `holdMs`. */
  async function whileLocked(holdMs: number, attempt: (store: any) => unknown) {
    const dir = tempDir('busy');
    const file = path.join(dir, 'state.sqlite');
    const projectPath = path.join(dir, 'project');
    fs.mkdirSync(projectPath);
    const store = openStore(file, projectPath);
    store.putResource({ controller: 'c', key: 'k', spec: {}, initialStatus: {} });
    let outcome: { value?: unknown; error?: any; waitedMs: number; unchanged: boolean } | undefined;
    const holder = runNode(path.join(__dirname, 'reliability', 'hold-lock.js'), [file, projectPath, String(holdMs)], {
      onLine(line: string) {
        if (line !== 'LOCKED') return;
        const before = tableDigests(store);
        const started = Date.now();
        try {
          outcome = { value: attempt(store), waitedMs: Date.now() - started, unchanged: false };
        } catch (error) {
          outcome = { error, waitedMs: Date.now() - started, unchanged: false };
        }
        outcome.unchanged = JSON.stringify(tableDigests(store)) === JSON.stringify(before);
      },
    });
    const exit = await holder;
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
    expect(exit.code).toBe(0);
    return outcome!;
  }

  test('a lock shorter than the 5 s busy timeout is waited out and the call succeeds', async () => {
    const outcome = await whileLocked(1_200, (store) => store.claimNext({ controllers: ['c'], ownerId: 'o', leaseMs: 60_000 }));
    expect(outcome.error).toBeUndefined();
    expect(outcome.value).toMatchObject({ key: 'k', generation: 1 });
    expect(outcome.waitedMs).toBeGreaterThanOrEqual(1_000);
  }, 30_000);

  test('a lock longer than the busy timeout surfaces as SqliteError SQLITE_BUSY and changes nothing', async () => {
    const outcome = await whileLocked(6_500, (store) => store.claimNext({ controllers: ['c'], ownerId: 'o', leaseMs: 60_000 }));
    expect(outcome.error).toBeInstanceOf(Error);
    expect(outcome.error).toMatchObject({ name: 'SqliteError', code: 'SQLITE_BUSY', message: 'database is locked' });
    expect(outcome.waitedMs).toBeGreaterThanOrEqual(4_900);
    expect(outcome.unchanged).toBe(true);
  }, 30_000);
});
