// `store.async`: every store method as a Promise that runs on a libuv worker thread. The records,
// errors and in-place claim changes must be those of the synchronous method, calls must run in
// call order, and the event loop must keep turning while SQLite works.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore, ResourceConflictError } = require('../index.js');

const ROOT = path.join(__dirname, '..');
const T0 = Date.parse('2026-09-02T00:00:00.000Z');
const DIGEST = `sha256:${'ab'.repeat(32)}`;
const REAL_TIMERS = ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] as const;

let dir: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-async-')));
});

afterEach(() => {
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

function open(name: string): any {
  return new SqliteControllerStore(path.join(dir, name, 'state.sqlite'), { projectPath: path.join(dir, 'project') });
}

/** Random ids and tokens replaced by their order of first appearance, so two runs compare. */
function masked(value: unknown, seen = new Map<string, string>()): unknown {
  const mask = (text: string) =>
    text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|^[A-Za-z0-9_-]{43}$/g, (random) => {
      if (!seen.has(random)) seen.set(random, `<random ${seen.size}>`);
      return seen.get(random) as string;
    });
  if (typeof value === 'string') return mask(value);
  if (Array.isArray(value)) return value.map((item) => masked(item, seen));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, masked(item, seen)]));
  }
  return value;
}

type Outcome = { ok: unknown } | { error: { name: string; message: string; code?: unknown; isConflict: boolean } };

async function outcome(run: () => unknown): Promise<Outcome> {
  try {
    return { ok: await run() };
  } catch (error) {
    const e = error as Error & { code?: unknown };
    return { error: { name: e.constructor.name, message: e.message, code: e.code, isConflict: e instanceof ResourceConflictError } };
  }
}

/**
 * A scenario touching controller resources, the work queue, effects, events and a run's whole
 * lifecycle, with a frozen clock. `call(name, ...args)` is the sync or the async method.
 */
async function scenario(call: (method: string, ...args: unknown[]) => unknown): Promise<unknown[]> {
  const results: unknown[] = [];
  const step = async (method: string, ...args: unknown[]) => {
    results.push([method, await outcome(() => call(method, ...args))]);
    return (results[results.length - 1] as [string, { ok?: any }])[1].ok;
  };
  const ref = { controller: 'jobs', key: 'a' };
  await step('putResource', { ...ref, spec: { n: 1 }, initialStatus: { phase: 'new' } });
  await step('putResource', { controller: 'jobs', key: 'b', spec: { n: 2 }, initialStatus: {} });
  await step('getResource', ref);
  const claim = await step('claimNext', { controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000 });
  const resource = await step('updateStatus', {
    ref,
    expectedResourceVersion: claim.resourceVersion,
    claim,
    status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
  });
  results.push(['claim after updateStatus', { ...claim }]);
  await step('updateStatus', { ref, expectedResourceVersion: 1, claim, status: { observedGeneration: 1, conditions: [], controllerStatus: {} } });
  await step('recordEvent', { ...ref, claim, type: 'job.noted', payload: { z: 1, a: [true, null] } });
  const effect = { key: 'e1', resourceUid: resource.metadata.uid, claim, generation: 1, kind: 'mail', requestFingerprint: 'f' };
  await step('reserveEffect', effect);
  await step('updateEffect', { ...effect, state: 'applied' });
  await step('listEffects', resource.metadata.uid);
  await step('settleClaim', claim);
  await step('listEvents', { limit: 10 });
  await step('listResources', { controller: 'jobs' });
  await step('getResource', { controller: 'jobs', key: 'missing' });

  const runClaim = { runId: 'run-1', runnerId: 'session-1', claimToken: 'token-1', leaseMs: 30_000 };
  await step('reserveWorkflowRun', {
    runId: 'run-1',
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo', steps: [{ id: 'a' }] },
    input: { message: 'hello' },
    runnerId: 'session-1',
    originSessionId: 'session-1',
  });
  await step('claimWorkflowRun', runClaim);
  await step('markWorkflowRunRunning', runClaim);
  await step('renewWorkflowRunClaim', runClaim);
  await step('recordRunEvent', { runId: 'run-1', claim: runClaim, type: 'run.note', payload: { b: 2 } });
  await step('completeWorkflowRun', runClaim);
  await step('completeWorkflowRun', runClaim);
  await step('claimWorkflowRun', { ...runClaim, runId: 'run-missing' });
  await step('getWorkflowRun', 'run-1');
  await step('getWorkflowRunView', 'run-1');
  await step('listWorkflowRunViews', { offset: 0, limit: 10 });
  await step('listWorkflowRuns', { limit: 10 });
  await step('listRunEventsAfter', 0, { limit: 10 });
  // An object binds as named parameters in better-sqlite3: 'Too few parameter values'.
  await step('getWorkflowRun', {});
  return results;
}

describe('store.async', () => {
  it('exposes every store method and nothing else', async () => {
    const store = open('s');
    try {
      const methods = Object.getOwnPropertyNames(SqliteControllerStore.prototype).filter(
        (name) => name !== 'constructor' && name !== 'close' && !name.startsWith('_') && name !== 'async',
      );
      expect(methods.length).toBeGreaterThan(60);
      // Plus `close`, the awaitable close (see 'an awaitable close' below).
      expect(Object.keys(store.async).sort()).toEqual([...methods, 'close'].sort());
      expect(store.async).toBe(store.async);
      const pending = store.async.getResource({ controller: 'x', key: 'y' });
      expect(pending).toBeInstanceOf(Promise);
      await expect(pending).resolves.toBeUndefined();
    } finally {
      store.close();
    }
  });

  it('gives the records, errors and claim changes of the synchronous methods', async () => {
    jest.useFakeTimers({ now: T0, doNotFake: [...REAL_TIMERS] });
    const sync = open('sync');
    const viaAsync = open('async');
    try {
      const expected = await scenario((method, ...args) => sync[method](...args));
      const actual = await scenario((method, ...args) => viaAsync.async[method](...args));
      expect(JSON.stringify(masked(actual))).toBe(JSON.stringify(masked(expected)));
      // The scenario did hit its error branches, with the reference's classes.
      const errors = (expected as [string, Outcome][]).filter(([, result]) => 'error' in result);
      expect(errors.map(([method]) => method)).toEqual(['updateStatus', 'getWorkflowRun']);
      expect((errors[0][1] as { error: { isConflict: boolean } }).error.isConflict).toBe(true);
    } finally {
      sync.close();
      viaAsync.close();
    }
  });

  it('leaves the same rows in the file', async () => {
    jest.useFakeTimers({ now: T0, doNotFake: [...REAL_TIMERS] });
    const sync = open('sync');
    const viaAsync = open('async');
    const rows = (store: any) => {
      const connection = store.state.connection;
      const tables = connection
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .all()
        .map((row: { name: string }) => row.name);
      return Object.fromEntries(
        tables.map((table: string) => [
          table,
          connection
            .prepare(`SELECT * FROM "${table}" ORDER BY rowid`)
            .all()
            .map((row: Record<string, unknown>) =>
              Object.fromEntries(
                Object.entries(row).map(([key, value]) => [key, Buffer.isBuffer(value) ? value.toString('hex') : value]),
              ),
            ),
        ]),
      );
    };
    try {
      await scenario((method, ...args) => sync[method](...args));
      await scenario((method, ...args) => viaAsync.async[method](...args));
      const syncRows = rows(sync);
      const asyncRows = rows(viaAsync);
      // Hashes of random tokens and random-id JSON differ run to run; row counts and the rest do not.
      for (const table of Object.keys(syncRows)) {
        expect([table, asyncRows[table].length]).toEqual([table, syncRows[table].length]);
      }
      const stable = (all: Record<string, unknown[]>) => masked({ runs: all.runs, run_queue: all.run_queue, resources: all.resources });
      expect(JSON.stringify(stable(asyncRows))).toBe(JSON.stringify(stable(syncRows)));
    } finally {
      sync.close();
      viaAsync.close();
    }
  });

  it('runs calls in call order and rejects like the synchronous method throws', async () => {
    const store = open('s');
    try {
      const puts = Array.from({ length: 20 }, (_, index) =>
        store.async.putResource({ controller: 'jobs', key: `k${index}`, spec: { index }, initialStatus: {} }),
      );
      const invalid = store.async.putResource({ controller: 'jobs', key: '', spec: {}, initialStatus: {} });
      const records = await Promise.all(puts);
      expect(records.map((record: any) => record.metadata.key)).toEqual(puts.map((_, index) => `k${index}`));
      const byKey = (a: any, b: any) => (a.metadata.key < b.metadata.key ? -1 : 1);
      expect(store.listResources({ controller: 'jobs' })).toEqual([...records].sort(byKey));
      // Inserted in call order.
      const inserted = store.state.connection
        .prepare('SELECT resource_key FROM controller_resources ORDER BY rowid')
        .all()
        .map((row: { resource_key: string }) => row.resource_key);
      expect(inserted).toEqual(puts.map((_, index) => `k${index}`));
      const syncError = (() => {
        try {
          store.putResource({ controller: 'jobs', key: '', spec: {}, initialStatus: {} });
        } catch (error) {
          return error;
        }
        return undefined;
      })();
      await expect(invalid).rejects.toThrow((syncError as Error).message);
      await expect(invalid).rejects.toBeInstanceOf((syncError as Error).constructor);
      await expect(store.async.getWorkflowRun({})).rejects.toThrow('Too few parameter values were provided');
      // A number is bound as the reference binds it: no such run.
      await expect(store.async.getWorkflowRun(1)).resolves.toBeUndefined();
      store.close();
      await expect(store.async.getResource({ controller: 'jobs', key: 'k0' })).rejects.toThrow('The database connection is not open');
    } finally {
      store.close();
    }
  });

  it('keeps the event loop turning while a call waits on SQLite', async () => {
    const store = open('s');
    const file = path.join(dir, 's', 'state.sqlite');
    // Another process holds the write lock for 400 ms: the call waits in SQLite's busy handler.
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `const { StateDatabase } = require(${JSON.stringify(ROOT)});
         const db = new StateDatabase({ filePath: ${JSON.stringify(file)} });
         db.connection.exec('BEGIN IMMEDIATE');
         process.stdout.write('locked\\n');
         setTimeout(() => { db.connection.exec('COMMIT'); db.close(); }, 400);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout.on('data', (data: Buffer) => data.toString().includes('locked') && resolve());
        holder.on('exit', (code) => reject(new Error(`lock holder exited early (${code})`)));
      });
      let ticks = 0;
      const interval = setInterval(() => {
        ticks += 1;
      }, 10);
      const started = Date.now();
      try {
        const record = await store.async.putResource({ controller: 'jobs', key: 'slow', spec: {}, initialStatus: {} });
        expect(record.metadata.key).toBe('slow');
      } finally {
        clearInterval(interval);
      }
      const waited = Date.now() - started;
      expect(waited).toBeGreaterThanOrEqual(250);
      // A synchronous call would have blocked every one of these ticks.
      expect(ticks).toBeGreaterThanOrEqual(Math.floor(waited / 10 / 3));
      expect(store.getResource({ controller: 'jobs', key: 'slow' }).metadata.key).toBe('slow');
    } finally {
      holder.kill();
      store.close();
    }
  });
});
