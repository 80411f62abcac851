// Writes held back to the COMMIT on a cluster (issue 36 item 4; docs/cluster.md, "What is sent
// together"): the run lifecycle's last writes go in the COMMIT's request, and a held statement
// that fails fails the call as it fails on a file. The failure here is the one a put can meet: a
// forged blob under the hash of the document the call stores (the reference's
// "Content-addressed blob conflict"), written through `state.connection` before the call.

import { clusterForSuite, type TestCluster } from '../support/cluster';
import { forge, openEngine, seen, type Connection, type Store } from './engines';

const { binding } = require('../../lib/native.js');
const { reservation } = require('../../bench/fixtures');

let cluster: TestCluster;

clusterForSuite((started) => (cluster = started));

const RUN = 'run-held';
const LIFECYCLE_CLAIM = { runId: RUN, runnerId: 'host-1', claimToken: 'token-1', leaseMs: 60_000 };
/** A lease whose end is past JavaScript's dates: the claim's record then fails (RangeError). */
const PAST_DATES = 8.64e15;

const open = (engine: 'file' | 'cluster') => openEngine(engine, cluster, 'held', '/held');

/** The viewer patch of the run's next presentation revision. */
function nextPatch(connection: Connection): string {
  const { presentation_revision: revision } = connection
    .prepare('SELECT presentation_revision FROM viewer_runs WHERE run_id = ?')
    .get(RUN);
  return `[{"op":"replace","path":"/presentationRevision","value":${revision + 1}}]`;
}

/** A call's value, or what a caller sees of what it threw. */
function outcomeOf(call: () => unknown): { value?: unknown; error?: object } {
  try {
    return { value: call() };
  } catch (error) {
    return { error: seen(error) };
  }
}

/** The rows a failed call must leave as they were. */
function snapshot(store: Store, connection: Connection): object {
  return {
    run: store.getWorkflowRun(RUN),
    events: connection.prepare('SELECT count(*) AS n FROM events').get().n,
    deltas: connection.prepare('SELECT count(*) AS n FROM viewer_deltas').get().n,
    viewer: connection.prepare('SELECT presentation_revision FROM viewer_runs').get().presentation_revision,
  };
}

/** The same options with `runId` behind a getter: not plain data, so the call reads them live. */
function live<T extends object>(plain: T): T {
  const { runId, ...rest } = plain as T & { runId: string };
  return Object.defineProperty(rest, 'runId', { get: () => runId, enumerable: true }) as T;
}

/**
 * Each lifecycle step on `engine`, the step named `failing` after forging what it stores; each
 * step's options made by `options` (plain, or `live`).
 */
function lifecycleWithForgery(
  engine: 'file' | 'cluster',
  failing: string,
  forged: (c: Connection) => string,
  leaseMs: number,
  options: <T extends object>(plain: T) => T,
): object {
  const { store, connection, close } = open(engine);
  const CLAIM = () => options({ ...LIFECYCLE_CLAIM, leaseMs });
  try {
    const steps: [string, () => unknown][] = [
      ['reserve', () => store.reserveWorkflowRun(options({ ...reservation(RUN, 'session-1'), runnerId: LIFECYCLE_CLAIM.runnerId }))],
      ['claim', () => store.claimWorkflowRun(CLAIM())],
      ['mark', () => store.markWorkflowRunRunning(CLAIM())],
      ['renew', () => store.renewWorkflowRunClaim(CLAIM())],
      ['complete', () => store.completeWorkflowRun(CLAIM())],
    ];
    for (const [name, step] of steps) {
      if (name !== failing) {
        step();
        continue;
      }
      forge(connection, forged(connection));
      const before = snapshot(store, connection);
      const { error } = outcomeOf(step);
      expect(error).toBeDefined();
      expect(snapshot(store, connection)).toEqual(before);
      return error as object;
    }
    throw new Error(`no step ${failing}`);
  } finally {
    close();
  }
}

const FORGERIES: [string, string, (connection: Connection) => string, number][] = [
  // The claim's viewer deltas: its bump's patch.
  ['claim', 'claim', nextPatch, 60_000],
  // The same, when the record that follows the writes fails too: the writes fail first.
  ['claim past the Date range', 'claim', nextPatch, PAST_DATES],
  // markWorkflowRunRunning's event payload.
  ['mark', 'mark', () => '{"status":"running"}', 60_000],
  // renewWorkflowRunClaim's viewer deltas.
  ['renew', 'renew', nextPatch, 60_000],
  // completeWorkflowRun's event payload (after its bump's deltas, before its own).
  ['complete', 'complete', () => '{"status":"done"}', 60_000],
];

describe('writes held back to the COMMIT fail as on a file', () => {
  const plain = <T extends object>(options: T): T => options;
  for (const [title, step, forged, leaseMs] of FORGERIES) {
    for (const [kind, options] of [['plain', plain], ['read live', live]] as const) {
      it(`${title}, arguments ${kind}: a forged blob is the reference's conflict, and nothing is written`, () => {
        const onFile = lifecycleWithForgery('file', step, forged, leaseMs, options);
        expect(onFile).toEqual({ class: 'Error', name: 'Error', message: 'Content-addressed blob conflict', own: {} });
        expect(lifecycleWithForgery('cluster', step, forged, leaseMs, options)).toEqual(onFile);
      });
    }
  }

  it("a claimToken object's toString runs as on a file: for the record, not after a failed write", () => {
    const claimed = (engine: 'file' | 'cluster', forged: boolean): object => {
      const { store, connection, close } = open(engine);
      try {
        store.reserveWorkflowRun({ ...reservation(RUN, 'session-1'), runnerId: LIFECYCLE_CLAIM.runnerId });
        if (forged) forge(connection, nextPatch(connection));
        // A token the hash takes as bytes, whose `toString` only the record calls.
        let calls = 0;
        class Token extends Uint8Array {
          override toString(): string {
            calls += 1;
            return 'token-1';
          }
        }
        const claimToken = new Token(Buffer.from('token-1'));
        let outcome: object;
        try {
          outcome = { claimed: store.claimWorkflowRun({ ...LIFECYCLE_CLAIM, claimToken }).claimToken === claimToken };
        } catch (error) {
          outcome = { error: seen(error) };
        }
        return { ...outcome, calls };
      } finally {
        close();
      }
    };
    for (const forged of [false, true]) {
      const onFile = claimed('file', forged);
      expect(onFile).toMatchObject(forged ? { calls: 0 } : { claimed: true, calls: 1 });
      expect(claimed('cluster', forged)).toEqual(onFile);
    }
  });

  it('a lease past the Date range alone is RangeError on both', () => {
    const refused = (engine: 'file' | 'cluster'): object => {
      const { store, close } = open(engine);
      try {
        store.reserveWorkflowRun({ ...reservation(RUN, 'session-1'), runnerId: LIFECYCLE_CLAIM.runnerId });
        const { error } = outcomeOf(() => store.claimWorkflowRun({ ...LIFECYCLE_CLAIM, leaseMs: PAST_DATES }));
        return { error, run: store.getWorkflowRun(RUN).leaseGeneration };
      } finally {
        close();
      }
    };
    const onFile = refused('file');
    expect(onFile).toMatchObject({ error: { class: 'RangeError', message: 'Invalid time value' } });
    expect(refused('cluster')).toEqual(onFile);
  });
});

describe("the lifecycle's last writes go with the COMMIT: requests written per call", () => {
  /** Requests each lifecycle call writes, its options made by `options` (the second round's). */
  const lifecycleWrites = (options: <T extends object>(plain: T) => T) => {
    const { store, close } = open('cluster');
    try {
      const writes = (call: () => unknown): number => {
        const before = binding.clusterRequestWrites();
        call();
        return binding.clusterRequestWrites() - before;
      };
      // Twice: the first lifecycle also prepares each statement on the leader.
      let counts: Record<string, number> = {};
      for (const round of [1, 2]) {
        const runId = `${RUN}-${round}`;
        const claim = () => options({ ...LIFECYCLE_CLAIM, runId });
        counts = {
          reserve: writes(() => store.reserveWorkflowRun(options({ ...reservation(runId, `session-${round}`), runnerId: LIFECYCLE_CLAIM.runnerId }))),
          claim: writes(() => store.claimWorkflowRun(claim())),
          mark: writes(() => store.markWorkflowRunRunning(claim())),
          renew: writes(() => store.renewWorkflowRunClaim(claim())),
          complete: writes(() => store.completeWorkflowRun(claim())),
        };
      }
      return counts;
    } finally {
      close();
    }
  };

  it('arguments read live (a getter): each statement whose result is read, then the held writes with the COMMIT', () => {
    // BEGIN with the first read (which also reads the revisions the call advances); then each
    // statement whose result is read (the lease taken or released, the queue moved); then the
    // held writes with the COMMIT. Before: claim 9, mark 7, renew 5, complete 9.
    expect(lifecycleWrites(live)).toEqual({ reserve: 13, claim: 3, mark: 3, renew: 3, complete: 4 });
  });

  it('plain arguments: run from their snapshot, every write held from the BEGIN', () => {
    // lib/plain-arguments.js: no read of them can run JavaScript, so the call runs as
    // `store.async` runs it (__test__/cluster/async-held-writes.cluster.ts).
    expect(lifecycleWrites((plain) => plain)).toEqual({ reserve: 3, claim: 3, mark: 3, renew: 3, complete: 4 });
  });
});

/** What two engines must agree on after `scenario`: its outcomes and the revisions it moved. */
function revisionsAfter(engine: 'file' | 'cluster', scenario: (store: Store, connection: Connection) => unknown[]): object {
  const { store, connection, close } = open(engine);
  try {
    const outcomes = scenario(store, connection).map((step) => outcomeOf(step as () => unknown));
    const rows = (sql: string) => (connection.prepare(sql) as unknown as { all(): unknown[] }).all();
    return {
      outcomes,
      resources: rows("SELECT resource_id, revision FROM resources WHERE resource_type = 'run' ORDER BY resource_id"),
      viewer: rows('SELECT run_id, presentation_revision, retained_from_revision FROM viewer_runs ORDER BY run_id'),
      deltas: rows('SELECT run_id, presentation_revision, count(*) AS n FROM viewer_deltas GROUP BY 1, 2 ORDER BY 1, 2'),
      events: rows('SELECT resource_id, resource_revision, event_type FROM events ORDER BY event_seq'),
    };
  } finally {
    close();
  }
}

describe('revisions known from the first read, written without reading them back', () => {
  const reserve = (store: Store, runId: string) =>
    store.reserveWorkflowRun({ ...reservation(runId, `session-${runId}`), runnerId: LIFECYCLE_CLAIM.runnerId });
  const claim = (runId: string) => ({ ...LIFECYCLE_CLAIM, runId });

  it('a run without its viewer projection: the moves fall back to reading it, as on a file', () => {
    const scenario = (store: Store, connection: Connection) => {
      reserve(store, RUN);
      connection.prepare('DELETE FROM viewer_runs WHERE run_id = ?').run(RUN);
      return [
        () => store.claimWorkflowRun(claim(RUN)).status,
        () => store.markWorkflowRunRunning(claim(RUN)),
        () => store.renewWorkflowRunClaim(claim(RUN)),
        () => store.completeWorkflowRun(claim(RUN)),
      ];
    };
    const onFile = revisionsAfter('file', scenario);
    expect(onFile).toMatchObject({
      outcomes: [{ value: 'starting' }, { value: true }, { error: { message: `Viewer projection does not exist for workflow run: ${RUN}` } }, {}],
    });
    expect(revisionsAfter('cluster', scenario)).toEqual(onFile);
  });

  it("renewWorkflowRunClaim whose runId reads as another run the second time: that run's deltas", () => {
    const scenario = (store: Store) => {
      reserve(store, RUN);
      reserve(store, 'run-other');
      store.claimWorkflowRun(claim(RUN));
      let reads = 0;
      const options = {
        ...claim(RUN),
        get runId() {
          reads += 1;
          return reads === 1 ? RUN : 'run-other';
        },
      };
      return [() => store.renewWorkflowRunClaim(options), () => reads];
    };
    const onFile = revisionsAfter('file', scenario);
    expect(onFile).toMatchObject({ outcomes: [{ value: true }, { value: 2 }] });
    expect(revisionsAfter('cluster', scenario)).toEqual(onFile);
  });

  it('a whole lifecycle, twice past the 256 revisions a run keeps: the same revisions and deltas', () => {
    const scenario = (store: Store) => {
      reserve(store, RUN);
      const steps: (() => unknown)[] = [() => store.claimWorkflowRun(claim(RUN)).status, () => store.markWorkflowRunRunning(claim(RUN))];
      for (let i = 0; i < 300; i += 1) steps.push(() => store.renewWorkflowRunClaim(claim(RUN)));
      steps.push(() => store.completeWorkflowRun(claim(RUN)));
      return steps;
    };
    const onFile = revisionsAfter('file', scenario) as { viewer: { presentation_revision: number }[] };
    expect(onFile.viewer[0].presentation_revision).toBeGreaterThan(300);
    expect(revisionsAfter('cluster', scenario)).toEqual(onFile);
  });
});
