// `store.async` on a cluster holds every write it does not read (docs/cluster.md, "What is sent
// together"): a snapshot call runs no JavaScript, so from its BEGIN each write whose count it
// does not need waits for the next read (sent together with it) or the COMMIT. The rows, the
// records and the errors must stay a file's: the same calls on both engines leave the same
// tables, and a held write that fails (a forged blob under the hash of a document the call
// stores) fails the call as it does on a file, before anything the call did after it.

import { clusterForSuite, type TestCluster } from '../support/cluster';
import { forge, openEngine, seen, type Connection, type Engine, type Store } from './engines';

const { binding } = require('../../lib/native.js');
const { reservation } = require('../../bench/fixtures');

let cluster: TestCluster;

clusterForSuite((started) => (cluster = started));

const NOW = 1_800_000_000_000;
const HOST = { runnerId: 'host-1', leaseMs: 60_000 };

const open = (engine: Engine) => openEngine(engine, cluster, 'async-held', '/async-held');

async function outcomeOf(call: () => Promise<unknown>): Promise<{ value?: unknown; error?: object }> {
  try {
    return { value: await call() };
  } catch (error) {
    return { error: seen(error) };
  }
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/**
 * What differs between two runs of the same calls: random ids (UUIDs), numbered in their order
 * of appearance, and the hashes of blobs that hold one, named by their masked content.
 */
type Masks = { ids: Map<string, string>; blobs: Map<string, string> };

/** `value` with its random ids and blob hashes replaced (see `Masks`), and a claim's token. */
function masked(value: unknown, masks: Masks): unknown {
  if (Buffer.isBuffer(value)) return masks.blobs.get(value.toString('hex')) ?? masked(value.toString('latin1'), masks);
  if (typeof value === 'string') {
    return value.replace(UUID, (id) => {
      if (!masks.ids.has(id)) masks.ids.set(id, `<id ${masks.ids.size}>`);
      return masks.ids.get(id) as string;
    });
  }
  if (Array.isArray(value)) return value.map((item) => masked(item, masks));
  if (value !== null && typeof value === 'object') {
    // A claim's token is random too (claimNext makes one).
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, key === 'token' ? '<token>' : masked(item, masks)]));
  }
  return value;
}

/**
 * Every row of every table but `projects` and `schema_meta` (their times are the open's
 * clock), masked, so that two engines' files compare equal when they hold the same rows.
 */
function tables(connection: Connection, masks: Masks = { ids: new Map(), blobs: new Map() }): object {
  for (const { blob_hash: hash, content } of connection.prepare('SELECT blob_hash, content FROM blobs ORDER BY rowid').all()) {
    masks.blobs.set((hash as Buffer).toString('hex'), `<blob ${masked(content, masks) as string}>`);
  }
  const names = connection
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('projects', 'schema_meta') ORDER BY name")
    .all()
    .map((row) => row.name as string);
  return Object.fromEntries(
    names.map((name) => [name, masked(connection.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all().map(Object.values), masks)]),
  );
}

/** A scenario's outcomes and the tables it leaves, run through `store.async` on `engine`. */
async function asyncRun(engine: Engine, scenario: (store: Store) => (() => Promise<unknown>)[]) {
  const { store, connection, close } = open(engine);
  try {
    const outcomes = [];
    for (const step of scenario(store.async)) outcomes.push(await outcomeOf(step));
    const masks = { ids: new Map<string, string>(), blobs: new Map<string, string>() };
    return { tables: tables(connection, masks), outcomes: masked(outcomes, masks) };
  } finally {
    close();
  }
}

/** A run lifecycle, a failed run and its restart, and a controller loop with an effect, at `NOW` on. */
function everyKindOfWrite(store: Store): (() => Promise<unknown>)[] {
  const claim = (runId: string) => ({ ...HOST, runId, claimToken: `token-${runId}`, now: NOW });
  const steps: (() => Promise<unknown>)[] = [
    () => store.reserveWorkflowRun({ ...reservation('run-a', 'session-a'), runnerId: HOST.runnerId, now: NOW }),
    () => store.claimWorkflowRun(claim('run-a')),
    () => store.markWorkflowRunRunning(claim('run-a')),
    () => store.renewWorkflowRunClaim(claim('run-a')),
    () => store.completeWorkflowRun(claim('run-a')),
    () => store.reserveWorkflowRun({ ...reservation('run-c', 'session-c'), runnerId: HOST.runnerId, now: NOW }),
    () => store.claimWorkflowRun(claim('run-c')),
    () => store.failWorkflowRun({ ...claim('run-c'), errorCode: 'boom', errorMessage: 'it broke' }),
    () =>
      store.reserveWorkflowRun({
        ...reservation('run-b', 'session-c'),
        runnerId: HOST.runnerId,
        parentRunId: 'run-c',
        lineageKind: 'restart',
        parentTerminalFingerprint: 'c3'.repeat(32),
        now: NOW + 1,
      }),
    () => store.putResource({ controller: 'jobs', key: 'job-1', spec: { n: 1 }, initialStatus: { phase: 'new' }, now: NOW }),
  ];
  let held: { controller: string; key: string; resourceVersion: number } | undefined;
  let uid: string | undefined;
  steps.push(async () => (held = await store.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000, now: NOW + 2 })));
  const ref = () => ({ controller: held!.controller, key: held!.key });
  const effect = () => ({ key: 'effect-1', resourceUid: uid, claim: held, generation: 1, kind: 'job.effect', requestFingerprint: 'f', now: NOW + 4 });
  steps.push(
    async () => {
      const updated = await store.updateStatus({
        ref: ref(),
        expectedResourceVersion: held!.resourceVersion,
        claim: held,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
        now: NOW + 3,
      });
      uid = (updated as { metadata: { uid: string } }).metadata.uid;
      return updated;
    },
    () => store.reserveEffect(effect()),
    () => store.updateEffect({ ...effect(), state: 'applied', externalRef: 'done' }),
    () => store.recordEvent({ ...ref(), claim: held, type: 'job.noted', payload: { n: 1 }, now: NOW + 4 }),
    () => store.recordEvent({ ...ref(), claim: held, type: 'job.noted', payload: { n: 2 }, now: NOW + 5 }),
    () => store.settleClaim(held, NOW + 6),
    () => store.putResource({ controller: 'jobs', key: 'job-1', spec: { n: 2 }, now: NOW + 7 }),
    () => store.getResource(ref()),
  );
  return steps;
}

test('store.async writes the same rows and answers the same records on a cluster as on a file', async () => {
  const onFile = await asyncRun('file', everyKindOfWrite);
  expect((onFile.outcomes as { error?: object }[]).filter((outcome) => outcome.error)).toEqual([]);
  expect(await asyncRun('cluster', everyKindOfWrite)).toEqual(onFile);
});

describe('a held write that fails fails the call as on a file, and nothing is written', () => {
  const lifecycle = (store: Store) => [
    () => store.reserveWorkflowRun({ ...reservation('run-a', 'session-a'), runnerId: HOST.runnerId, now: NOW }),
  ];
  const controller = (store: Store) => [
    () => store.putResource({ controller: 'jobs', key: 'job-1', spec: { n: 1 }, initialStatus: { phase: 'new' }, now: NOW }),
  ];
  let held: { resourceVersion: number };
  const claimed = (store: Store) => [
    ...controller(store),
    async () => (held = await store.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000, now: NOW + 1 })),
  ];
  const cases: [string, (store: Store) => (() => Promise<unknown>)[], string, (store: Store) => Promise<unknown>][] = [
    // reserveWorkflowRun's documents: its input, the first statement it holds.
    ['reserveWorkflowRun, its input', () => [], '{"task":"run-x"}', (store) =>
      store.reserveWorkflowRun({ ...reservation('run-x', 'session-x'), input: { task: 'run-x' }, now: NOW })],
    // The same, when a value bound after the puts fails too: the put's conflict comes first.
    ['reserveWorkflowRun, its input, then a name that cannot be bound', () => [], '{"task":"run-x"}', (store) =>
      store.reserveWorkflowRun({ ...reservation('run-x', 'session-x'), input: { task: 'run-x' }, workflowName: Symbol('x'), now: NOW })],
    ['putResource, its spec', () => [], '{"n":9}', (store) =>
      store.putResource({ controller: 'jobs', key: 'job-9', spec: { n: 9 }, initialStatus: {}, now: NOW })],
    ['updateStatus, its status', claimed, '{"conditions":[],"controllerStatus":{"phase":"forged"},"observedGeneration":1}', (store) =>
      store.updateStatus({
        ref: { controller: 'jobs', key: 'job-1' },
        expectedResourceVersion: held.resourceVersion,
        claim: held,
        status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'forged' } },
        now: NOW + 2,
      })],
    ['recordEvent, its payload', controller, '{"forged":true}', (store) =>
      store.recordEvent({ controller: 'jobs', key: 'job-1', type: 'job.noted', payload: { forged: true }, now: NOW + 1 })],
    ['claimWorkflowRun after a lifecycle began', lifecycle, '[{"op":"replace","path":"/presentationRevision","value":2}]', (store) =>
      store.claimWorkflowRun({ ...HOST, runId: 'run-a', claimToken: 'token-a', now: NOW + 1 })],
  ];
  for (const [title, before, forged, call] of cases) {
    it(title, async () => {
      const failed = async (engine: Engine) => {
        const { store, connection, close } = open(engine);
        try {
          for (const step of before(store.async)) await step();
          forge(connection, forged);
          const rows = tables(connection);
          const { error } = await outcomeOf(() => call(store.async));
          return { error, unchanged: JSON.stringify(tables(connection)) === JSON.stringify(rows) };
        } finally {
          close();
        }
      };
      const onFile = await failed('file');
      expect(onFile).toEqual({ error: { class: 'Error', name: 'Error', message: 'Content-addressed blob conflict', own: {} }, unchanged: true });
      expect(await failed('cluster')).toEqual(onFile);
    });
  }
});

test('requests written per store.async call: its reads, and its writes with the next read or the COMMIT', async () => {
  const { store, close } = open('cluster');
  try {
    const counts: Record<string, number> = {};
    const writes = async (name: string, call: () => Promise<unknown>) => {
      const before = binding.clusterRequestWrites();
      const value = await call();
      counts[name] = binding.clusterRequestWrites() - before;
      return value;
    };
    // Twice: the first round also prepares each statement on the leader.
    for (const round of [1, 2]) {
      const s = store.async;
      const runId = `run-${round}`;
      const claim = { ...HOST, runId, claimToken: `token-${round}` };
      await writes('reserve', () => s.reserveWorkflowRun({ ...reservation(runId, `session-${round}`), runnerId: HOST.runnerId }));
      await writes('claim', () => s.claimWorkflowRun(claim));
      await writes('mark', () => s.markWorkflowRunRunning(claim));
      await writes('renew', () => s.renewWorkflowRunClaim(claim));
      await writes('complete', () => s.completeWorkflowRun(claim));
      await writes('putResource', () => s.putResource({ controller: 'jobs', key: `job-${round}`, spec: { round }, initialStatus: {} }));
      const held = (await writes('claimNext', () => s.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000 }))) as {
        controller: string;
        key: string;
        resourceVersion: number;
      };
      const ref = { controller: held.controller, key: held.key };
      await writes('updateStatus', () =>
        s.updateStatus({ ref, expectedResourceVersion: held.resourceVersion, claim: held, status: { observedGeneration: 1, conditions: [], controllerStatus: { round } } }),
      );
      await writes('recordEvent', () => s.recordEvent({ ...ref, claim: held, type: 'job.noted', payload: { round } }));
      await writes('settleClaim', () => s.settleClaim(held));
    }
    // Synchronous calls (which read their arguments between statements) write reserve 13,
    // putResource 9, claimNext 6, updateStatus 5, recordEvent 5, settleClaim 6.
    expect(counts).toEqual({
      reserve: 3,
      claim: 3,
      mark: 3,
      renew: 3,
      complete: 4,
      putResource: 3,
      claimNext: 3,
      updateStatus: 2,
      recordEvent: 3,
      settleClaim: 3,
    });
  } finally {
    close();
  }
});
