// Regression tests for the defects the reliability suites found (contention, crashes, hostile
// input, file hygiene). Each test names what broke.
import fs from 'node:fs';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');
const { runReservation, tableDigests, tempDir } = require('./reliability/common.js');

let dir: string;
let store: any;

beforeEach(() => {
  dir = tempDir('defects');
  fs.mkdirSync(path.join(dir, 'project'));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project') });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const nested = (depth: number): unknown => {
  let value: unknown = 'bottom';
  for (let level = 0; level < depth; level += 1) value = level % 2 === 0 ? [value] : { d: value };
  return value;
};

function failure(run: () => unknown): { name: string; message: string } {
  try {
    run();
  } catch (error) {
    return { name: (error as Error).name, message: (error as Error).message };
  }
  throw new Error('expected a throw');
}

describe('strings with lone surrogates are stored as better-sqlite3 and JSON.stringify store them', () => {
  // Broke: every argument and stored document with a lone surrogate was refused ("Invalid JSON
  // from the JS layer" / "Stored JSON is invalid"), where the reference stores it.
  test('in keys, specs, payloads and run inputs', () => {
    const created = store.putResource({ controller: 'c', key: 'k\udc00', spec: { a: 'x\ud800y' }, initialStatus: { s: '\udfff' } });
    // A string argument is bound as V8's bytes for it (ED B0 80), which read back as three
    // U+FFFD, exactly as better-sqlite3 does; stored JSON keeps the lone surrogate as
    // JSON.stringify's escape, which JSON.parse reads back (the reference's answers, observed).
    expect(created.metadata.key).toBe('k\ufffd\ufffd\ufffd');
    const stored = store.state.connection.prepare("SELECT hex(resource_key) AS h FROM controller_resources WHERE controller_name = 'c'");
    expect(stored.get()).toEqual({ h: '6BEDB080' });
    expect(created.spec).toEqual({ a: 'x\ud800y' });
    expect(created.status.controllerStatus).toEqual({ s: '\udfff' });
    expect(store.getResource({ controller: 'c', key: 'k\udc00' }).metadata.uid).toBe(created.metadata.uid);
    const event = store.recordEvent({ controller: 'c', key: 'k\udc00', type: 'note\ud800', payload: { p: '\ud800' } });
    expect(store.listEvents({ controller: 'c', key: 'k\udc00', limit: 1 })[0]).toMatchObject({ seq: event.seq, type: 'note\ufffd\ufffd\ufffd', payload: { p: '\ud800' } });
    const run = store.reserveWorkflowRun(runReservation('r1', { input: { task: 'a\udbff' } }));
    expect(run.input).toEqual({ task: 'a\udbff' });
    expect(store.getWorkflowRun('r1').input).toEqual({ task: 'a\udbff' });
    store.state.integrityCheck();
  });

  test('a well-formed surrogate pair is untouched', () => {
    const created = store.putResource({ controller: 'c', key: '🙂', spec: { a: '😀' }, initialStatus: {} });
    expect(created.metadata.key).toBe('🙂');
    expect(created.spec).toEqual({ a: '😀' });
  });
});

describe('JSON documents nested deeper than 128 levels round-trip', () => {
  // Broke: a spec or input nested deeper than serde_json's default limit (128) was refused with
  // "Stored JSON is invalid: recursion limit exceeded" after JavaScript had accepted it.
  test('a 1,500-level spec and run input', () => {
    const spec = nested(1_500);
    expect(store.putResource({ controller: 'c', key: 'deep', spec, initialStatus: {} }).spec).toEqual(spec);
    expect(store.getResource({ controller: 'c', key: 'deep' }).spec).toEqual(spec);
    const input = nested(700);
    store.reserveWorkflowRun(runReservation('deep-run', { input }));
    expect(store.getWorkflowRun('deep-run').input).toEqual(input);
  });

  test('deeper than JavaScript itself can canonicalise is a clean error that changes nothing', () => {
    const before = tableDigests(store);
    const error = failure(() => store.putResource({ controller: 'c', key: 'deeper', spec: nested(20_000), initialStatus: {} }));
    expect(error.message).toMatch(/call stack|nesting/);
    // The reference's canonicalJson overflows the same way: a RangeError.
    expect(error.name).toBe('RangeError');
    const { blobs: _blobs, ...rest } = tableDigests(store);
    const { blobs: _before, ...restBefore } = before;
    expect(rest).toEqual(restBefore);
  });
});

describe('lease expiries outside JavaScript dates are errors, never wrong claims', () => {
  beforeEach(() => {
    store.putResource({ controller: 'c', key: 'k', spec: {}, initialStatus: {} });
  });

  // Broke: claimNext with a lease that ends past 8.64e15 ms committed the claim and returned
  // expiresAt "+277718-…" or even "1970-01-01T00:00:00.000Z" (the sum was dropped as 0), where
  // the reference's toISOString() throws RangeError inside the transaction: nothing is claimed.
  test.each([8.7e15, Number.MAX_SAFE_INTEGER])('claimNext with leaseMs %d', (leaseMs) => {
    const before = tableDigests(store);
    expect(failure(() => store.claimNext({ controllers: ['c'], ownerId: 'o', leaseMs }))).toEqual({ name: 'RangeError', message: 'Invalid time value' });
    expect(tableDigests(store)).toEqual(before);
    expect(store.claimNext({ controllers: ['c'], ownerId: 'o', leaseMs: 1_000 }).generation).toBe(1);
  });

  test('claimNext with a lease beyond SQLite integers fails in SQLite, as in the reference', () => {
    expect(failure(() => store.claimNext({ controllers: ['c'], ownerId: 'o', leaseMs: 1e300 }))).toEqual({
      name: 'SqliteError',
      message: 'cannot store REAL value in INTEGER column leases.expires_at',
    });
  });

  // Broke: renewClaim returned true and left claim.expiresAt stale for such a lease; the
  // reference writes the renewal (no transaction) and then throws RangeError.
  test('renewClaim writes, then throws RangeError', () => {
    const claim = store.claimNext({ controllers: ['c'], ownerId: 'o', leaseMs: 1_000 });
    const expiresAt = claim.expiresAt;
    expect(failure(() => store.renewClaim(claim, 8.7e15))).toEqual({ name: 'RangeError', message: 'Invalid time value' });
    expect(claim.expiresAt).toBe(expiresAt);
    expect(failure(() => store.listQueue())).toEqual({ name: 'RangeError', message: 'Invalid time value' });
  });

  // Broke: run claims computed now + leaseMs in 64-bit integers: a huge lease wrapped around to
  // a negative expiry (release builds) or panicked (debug builds).
  test.each([
    [8.7e15, 'RangeError', 'Invalid time value'],
    [1e300, 'SqliteError', 'cannot store REAL value in INTEGER column leases.expires_at'],
    [2 ** 63, 'SqliteError', 'cannot store REAL value in INTEGER column leases.expires_at'],
  ])('claimWorkflowRun with leaseMs %d', (leaseMs, name, message) => {
    store.reserveWorkflowRun(runReservation('r1'));
    const before = tableDigests(store);
    expect(failure(() => store.claimWorkflowRun({ runId: 'r1', runnerId: 'setup', claimToken: 't', leaseMs }))).toEqual({ name, message });
    expect(tableDigests(store)).toEqual(before);
    expect(store.claimWorkflowRun({ runId: 'r1', runnerId: 'setup', claimToken: 't', leaseMs: 1_000 }).claimGeneration).toBe(1);
  });

  test('renewWorkflowRunClaim never wraps around; a stored far expiry makes reads throw as in the reference', () => {
    store.reserveWorkflowRun(runReservation('r1'));
    store.claimWorkflowRun({ runId: 'r1', runnerId: 'setup', claimToken: 't', leaseMs: 60_000 });
    expect(failure(() => store.renewWorkflowRunClaim({ runId: 'r1', claimToken: 't', leaseMs: 1e300 }))).toEqual({
      name: 'SqliteError',
      message: 'cannot store REAL value in INTEGER column leases.expires_at',
    });
    expect(store.verifyWorkflowRunClaim({ runId: 'r1', claimToken: 't' })).toBe(true);
    expect(store.renewWorkflowRunClaim({ runId: 'r1', claimToken: 't', leaseMs: 8.7e15 })).toBe(true);
    expect(failure(() => store.getWorkflowRun('r1'))).toEqual({ name: 'RangeError', message: 'Invalid time value' });
  });
});
