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
