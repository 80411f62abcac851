// The prepared state and the observers of __test__/divergences.spec.ts: a store holding resources
// under claim, a queued, a claimed and a running workflow run and a child-workflow request, built
// through the public API on a frozen clock (the clock, the ids and the order of the steps are the
// differential fuzzer's, so the answers written out in the spec are the ones it observed), and
// the two ways the spec looks at a call: what it returned or threw, and what the database holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { jestClock } from './clock';

export const T0 = Date.UTC(2026, 10, 1, 0, 0, 0, 7);
/** The clock while a case runs (the state was built one tick a step before it). */
export const CASE_CLOCK = T0 + 60_000;
/** An explicit `now` half a second after the case clock. */
export const NOW = new Date(CASE_CLOCK + 500).toISOString();
const DIGEST = 'sha256:' + 'a1'.repeat(32);
const FINGERPRINT = 'ab'.repeat(32);

/** reserveWorkflowRun's options for run `id` (a string, or whatever a hostile caller passes). */
export const RUN = (id: unknown, extra: Record<string, unknown> = {}) => ({
  runId: id,
  workflowName: 'echo',
  workflowSourceRef: 'builtin:echo',
  workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1' },
  definitionDigest: DIGEST,
  definitionSnapshot: {
    schema: 'pi-workflows.definition-snapshot.v1',
    name: 'echo',
    startAt: 'start',
    nodes: { start: { type: 'agent' } },
    edges: [],
  },
  input: { task: id },
  runnerId: `session-${id}`,
  originSessionId: `session-${id}`,
  ...extra,
});

/** What the prepared state hands the cases: the claims as claimNext returned them, and ids. */
export interface Prepared {
  uid: string;
  /** The claim on jobs/alpha (owner w1). */
  claim: any;
  /** The claim on jobs/beta (owner w2). */
  claimB: any;
  /** The child-workflow request w1 of jobs/alpha. */
  reqId: string;
  rvBeta: number;
}

export interface Fixture {
  dir: string;
  file: string;
  store: any;
  S: Prepared;
}

/**
 * Builds the state with a fresh store of `Store` in a temporary folder, closes it and opens a
 * new store on it at the case clock (as the fuzzer does: each case opens the prepared file).
 * Resources: jobs/alpha and jobs/beta claimed, other/gamma and jobs/delta free. Runs: r-q queued, r-c claimed with tok-c, r-r running with tok-r.
 */
export function prepare(Store: any): Fixture {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-divergences-')));
  const projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
  const file = path.join(dir, 'state.sqlite');
  let now = T0;
  jestClock.freeze(now);
  const tick = () => jestClock.set((now += 1000));
  const s = new Store(file, { projectPath });
  const S = {} as Prepared;
  S.uid = s.putResource({ controller: 'jobs', key: 'alpha', spec: { n: 1 }, initialStatus: { phase: 'new' } }).metadata.uid;
  tick();
  s.putResource({ controller: 'jobs', key: 'beta', spec: { n: 2 }, initialStatus: {} });
  tick();
  s.putResource({ controller: 'other', key: 'gamma', spec: { n: 3 }, initialStatus: {} });
  tick();
  s.putResource({ controller: 'jobs', key: 'delta', spec: { n: 4 }, initialStatus: { x: [1] } });
  tick();
  S.claim = s.claimNext({ controllers: ['jobs'], ownerId: 'w1', leaseMs: 600_000 });
  tick();
  S.claimB = s.claimNext({ controllers: ['jobs'], ownerId: 'w2', leaseMs: 600_000 });
  tick();
  S.reqId = s.reserveWorkflow({
    resourceUid: S.uid,
    claim: S.claim,
    requestKey: 'w1',
    workflow: 'child',
    inputFingerprint: FINGERPRINT,
  }).record.requestId;
  tick();
  s.reserveWorkflowRun(RUN('r-q'));
  tick();
  s.reserveWorkflowRun(RUN('r-c'));
  s.claimWorkflowRun({ runId: 'r-c', runnerId: 'session-r-c', claimToken: 'tok-c', leaseMs: 600_000 });
  tick();
  s.reserveWorkflowRun(RUN('r-r'));
  s.claimWorkflowRun({ runId: 'r-r', runnerId: 'session-r-r', claimToken: 'tok-r', leaseMs: 600_000 });
  s.markWorkflowRunRunning({ runId: 'r-r', claimToken: 'tok-r' });
  tick();
  S.rvBeta = s.getResource({ controller: 'jobs', key: 'beta' }).metadata.resourceVersion;
  s.close();
  jestClock.set(CASE_CLOCK);
  // The claims as a caller holds them: plain data, detached from the store that returned them.
  const prepared = JSON.parse(JSON.stringify(S)) as Prepared;
  return { dir, file, store: new Store(file, { projectPath }), S: prepared };
}

export function dispose(fixture: Fixture | undefined): void {
  try {
    fixture?.store.close();
  } finally {
    jestClock.release();
    if (fixture) fs.rmSync(fixture.dir, { recursive: true, force: true });
  }
}

/** A thrown value as a caller can see it: its class, name, message and other own properties. */
export interface Thrown {
  class: string | undefined;
  name: unknown;
  message: unknown;
  own: Record<string, unknown>;
}

export type Outcome = { returns: unknown } | { throws: Thrown };

/** What `run` returned, or what it threw (every own property but `stack` and `message`). */
export function outcome(run: () => unknown): Outcome {
  try {
    return { returns: run() };
  } catch (error) {
    const e = error as any;
    const own: Record<string, unknown> = {};
    for (const key of Object.getOwnPropertyNames(e)) if (key !== 'stack' && key !== 'message') own[key] = e[key];
    return { throws: { class: e?.constructor?.name, name: e?.name, message: e?.message, own } };
  }
}

/** The outcome of a throw of class `cls` with `message` and no own property but `extra`. */
export const throws = (cls: string, message: string, extra: Record<string, unknown> = {}): Outcome => ({
  throws: { class: cls, name: cls, message, own: extra },
});

/** Rows of a read-only query on the store's own connection. */
export function rows(store: any, text: string, ...params: unknown[]): any[] {
  return store.state.connection.prepare(text).all(...params);
}
