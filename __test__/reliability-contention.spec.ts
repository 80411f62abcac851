// Contention: 8 processes on one state file, claiming, renewing, settling and completing over a
// shared pool of 200 controller resources and 200 workflow runs (see reliability/contention.js).
// The long version runs under `npm run soak`.

// eslint-disable-next-line @typescript-eslint/no-var-requires
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
