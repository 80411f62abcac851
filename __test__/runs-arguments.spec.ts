// Run methods read their arguments as the reference's JavaScript does (issue 14): no up-front
// type checks; values are bound as better-sqlite3 binds them, combined with JavaScript's own
// operators, and refused with V8's and Node's own errors where the reference's code fails.

import fs from 'node:fs';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');
const { runReservation, tempDir } = require('./reliability/common.js');

let dir: string;
let store: any;

beforeEach(() => {
  dir = tempDir('run-arguments');
  fs.mkdirSync(path.join(dir, 'project'));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project') });
  store.reserveWorkflowRun(runReservation('r1'));
  store.reserveWorkflowRun(runReservation('r2'));
  store.claimWorkflowRun({ runId: 'r1', runnerId: 'session-1', claimToken: 't1', leaseMs: 60_000 });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The thrown error as its class name, message and own enumerable properties (`code`). */
const thrown = (run: () => unknown): Record<string, unknown> => {
  try {
    run();
  } catch (error) {
    return { ...(error as object), name: (error as Error).constructor.name, message: (error as Error).message };
  }
  throw new Error('expected a throw');
};

test('a run id that is not a string is bound, not refused', () => {
  expect(store.getWorkflowRun(5)).toBeUndefined();
  expect(store.getWorkflowRun(['r1']).runId).toBe('r1'); // better-sqlite3 spreads an array
  expect(thrown(() => store.getWorkflowRun({}))).toMatchObject({
    name: 'RangeError',
    message: 'Too few parameter values were provided',
  });
  expect(thrown(() => store.isWorkflowRunPaused(true))).toMatchObject({
    name: 'TypeError',
    message: 'SQLite3 can only bind numbers, strings, bigints, buffers, and null',
  });
  expect(store.failWorkflowRun({ runId: 5, errorCode: 'x', errorMessage: 'y' })).toBe(false);
});

test('leaseMs is added with JavaScript + and stored through the STRICT column', () => {
  // now + "1000" concatenates; SQLite converts the digits to an integer.
  expect(store.renewWorkflowRunClaim({ runId: 'r1', claimToken: 't1', leaseMs: '1000' })).toBe(true);
  expect(thrown(() => store.renewWorkflowRunClaim({ runId: 'r1', claimToken: 't1', leaseMs: 1.5 }))).toMatchObject({
    name: 'SqliteError',
    message: 'cannot store REAL value in INTEGER column leases.expires_at',
    code: 'SQLITE_CONSTRAINT_DATATYPE',
  });
});

test("the reference's own TypeErrors, with Node's code", () => {
  expect(thrown(() => store.claimWorkflowRun({ runId: 'r2', runnerId: 5, claimToken: 't', leaseMs: 1 }))).toMatchObject({
    name: 'TypeError',
    message: 'runnerId.startsWith is not a function',
  });
  const hashing = thrown(() => store.verifyWorkflowRunClaim({ runId: 'r1', claimToken: 5 }));
  expect(hashing).toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  expect(hashing.message).toMatch(/^The "data" argument must be of type string .* Received type number \(5\)$/);
  expect(thrown(() => store.parkWorkflowRun(null))).toMatchObject({
    name: 'TypeError',
    message: "Cannot read properties of null (reading 'runId')",
  });
  expect(thrown(() => store.renewWorkflowRunClaim(null))).toMatchObject({
    message: "Cannot read properties of null (reading 'now')",
  });
  expect(thrown(() => store.listWorkflowRuns({ excludeRunIds: 'r-q' }))).toMatchObject({
    name: 'TypeError',
    message: 'options.excludeRunIds.map is not a function',
  });
});

test('a closed store answers with the connection error before reading arguments', () => {
  store.close();
  expect(thrown(() => store.getWorkflowRun({}))).toMatchObject({
    name: 'TypeError',
    message: 'The database connection is not open',
  });
});

describe('reservation reads its arguments as the reference does', () => {
  const Database = require('better-sqlite3');
  const interactive = (runId: unknown, extra: Record<string, unknown> = {}) => ({
    ...runReservation('x', { executionMode: undefined, originSessionId: `session-${String(runId)}`, ...extra }),
    runId,
  });
  const rows = (sql: string): unknown[] => {
    store.close();
    const db = new Database(path.join(dir, 'state.sqlite'), { readonly: true });
    try {
      return db.prepare(sql).all();
    } finally {
      db.close();
    }
  };

  test('a number run id is bound as REAL (stored "5.0"), its resource id and messages use String(5)', () => {
    const run = store.reserveWorkflowRun(interactive(5));
    expect(run).toMatchObject({ runId: '5.0', rootRunId: '5.0', status: 'queued' });
    expect(thrown(() => store.reserveWorkflowRun(interactive(5)))).toMatchObject({
      message: 'Workflow run already reserved: 5',
    });
    // prepareOrAdopt finds the run by the bound value, then `rootRunId === options.runId` fails.
    expect(
      thrown(() => store.prepareOrAdoptWorkflowRun({ ...interactive(5), claimToken: 'c', leaseMs: 1000 })),
    ).toMatchObject({ message: 'Workflow run preparation conflicts: 5' });
    expect(store.enqueueWorkflowRun({ ...interactive(6), claimToken: 'c', leaseMs: 1000 })).toMatchObject({
      runId: '6.0',
      status: 'starting',
    });
    expect(rows("SELECT resource_id, aggregate_key FROM resources WHERE aggregate_key = '5.0'")).toEqual([
      // `run-` + SHA-256("run\0" + "5"), first 40 hex digits.
      { resource_id: 'run-7175deceda3ed03e54999fd7754a41d844eacc40', aggregate_key: '5.0' },
    ]);
  });

  test('a one-item array run id is spread by better-sqlite3 wherever it is bound', () => {
    expect(store.reserveWorkflowRun(interactive(['r9']))).toMatchObject({ runId: 'r9', rootRunId: 'r9' });
    expect(rows("SELECT run_id FROM viewer_runs WHERE run_id = 'r9'")).toEqual([{ run_id: 'r9' }]);
  });

  test('a number parentRunId finds its parent through the bound value; null is looked up too', () => {
    store.reserveWorkflowRun(interactive(5));
    expect(thrown(() => store.reserveWorkflowRun(interactive('child', { parentRunId: 5 })))).toMatchObject({
      message: 'Workflow parent belongs to another Pi session',
    });
    expect(thrown(() => store.reserveWorkflowRun(interactive('child', { parentRunId: null })))).toMatchObject({
      message: 'Workflow run not found: null',
    });
  });

  test('values are bound by better-sqlite3 rules: a boolean is refused, a number origin is stored as text', () => {
    expect(thrown(() => store.reserveWorkflowRun(interactive('flag', { workflowName: true })))).toMatchObject({
      name: 'TypeError',
      message: 'SQLite3 can only bind numbers, strings, bigints, buffers, and null',
    });
    expect(store.getWorkflowRun('flag')).toBeUndefined();
    store.reserveWorkflowRun(interactive('numbered', { originSessionId: 7 }));
    const events = store.listRunEventsAfter(0, { limit: 100 });
    expect(events[events.length - 1]).toMatchObject({ runId: 'numbered', type: 'run.queued', runnerId: '7.0' });
  });

  test("a lineageKind that is not a string is the caller's value, not \"continuation\"", () => {
    store.reserveWorkflowRun(interactive('parent'));
    store.claimWorkflowRun({ runId: 'parent', runnerId: 'session-p', claimToken: 'tp', leaseMs: 60_000 });
    store.parkWorkflowRun({ runId: 'parent', claimToken: 'tp' });
    const child = interactive('child', { parentRunId: 'parent', lineageKind: 5, originSessionId: 'session-parent' });
    expect(thrown(() => store.reserveWorkflowRun(child))).toMatchObject({ code: 'SQLITE_CONSTRAINT_CHECK' });
    expect(store.getWorkflowRun('parent').status).toBe('parked');
  });
});
