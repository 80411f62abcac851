// Controller methods (putResource … listEvents) given what a JavaScript caller can pass but the
// types forbid: null and missing objects, arrays and objects where a string belongs, numbers
// where a token or text belongs, edge numbers. The answers are the reference's: the TypeErrors
// its own property reads and method calls throw, Node's argument errors (with `code`), and
// better-sqlite3's binding rules (arrays spread into positional values, a plain object is a bag
// of named parameters) — each thrown at the statement where the reference throws it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { failure } from './support/failure';

const { SqliteControllerStore } = require('../index.js');

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const TOKEN_TYPE =
  'The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received type number (5)';
const BUFFER_TYPE =
  'The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object. Received type number (5)';

let dir: string;
let store: any;
let uid: string;
let held: any;

function sql(text: string, ...params: unknown[]): any {
  const statement = store.state.connection.prepare(text);
  return statement.reader ? statement.all(...params) : statement.run(...params);
}

const nullRead = (name: string) => ({ name: 'TypeError', message: `Cannot read properties of null (reading '${name}')` });
const undefinedRead = (name: string) => ({
  name: 'TypeError',
  message: `Cannot read properties of undefined (reading '${name}')`,
});
const tooFew = { name: 'RangeError', message: 'Too few parameter values were provided' };
const tooMany = { name: 'RangeError', message: 'Too many parameter values were provided' };

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-controller-hostile-')));
  fs.mkdirSync(path.join(dir, 'project'));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project') });
  uid = store.putResource({ controller: 'jobs', key: 'alpha', spec: { n: 1 }, initialStatus: {} }).metadata.uid;
  held = store.claimNext({ controllers: ['jobs'], ownerId: 'w1', leaseMs: 60_000 });
});

afterEach(() => {
  store.close();
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('resources', () => {
  test('a missing or null options object fails on its first property read', () => {
    expect(failure(() => store.putResource(null))).toEqual(nullRead('controller'));
    expect(failure(() => store.putResource())).toEqual(undefinedRead('controller'));
    expect(failure(() => store.getResource())).toEqual(undefinedRead('controller'));
    expect(failure(() => store.deleteResource({ controller: 'jobs', key: 'alpha' }))).toEqual(undefinedRead('controller'));
    expect(failure(() => store.deleteResource({ controller: 'jobs', key: 'alpha' }, 1, null))).toEqual(nullRead('controller'));
  });

  test('a key is validated by its length as JavaScript compares it', () => {
    const put = (key: unknown) => () => store.putResource({ controller: 'jobs', key, spec: {}, initialStatus: {} });
    const invalid = { name: 'Error', message: 'resource key is invalid' };
    expect(failure(put({ length: '600' }))).toEqual(invalid);
    expect(failure(put({ length: 0 }))).toEqual(invalid);
    expect(failure(put('x'.repeat(513)))).toEqual(invalid);
    // No length, or "0" (not === 0): valid, and bound as better-sqlite3 binds it.
    expect(put(5)().metadata.key).toBe('5.0');
    expect(failure(put({ length: '0' }))).toEqual(tooFew);
  });

  test('error messages interpolate the values as JavaScript writes them', () => {
    const notFound = (key: string) => ({ name: 'ResourceNotFoundError', message: `Controller resource not found: jobs/${key}` });
    expect(failure(() => store.enqueue({ controller: 'jobs' }))).toEqual(notFound('undefined'));
    expect(failure(() => store.requestDeletion({ controller: 'jobs', key: NaN }))).toEqual(notFound('NaN'));
    expect(failure(() => store.enqueue({ controller: 'jobs', key: 5n }))).toEqual(notFound('5'));
    expect(failure(() => store.reserveEffect({ resourceUid: undefined, claim: held, key: 'e' }))).toEqual({
      name: 'Error',
      message: 'Controller resource not found: undefined',
    });
    expect(failure(() => store.reserveEffect({ resourceUid: uid, claim: held, key: Symbol('k') }))).toEqual({
      name: 'TypeError',
      message: 'Cannot convert a Symbol value to a string',
    });
  });

  test('an array is bound as its items: one item stands for itself, more are too many values', () => {
    const created = store.putResource({ controller: ['jobs'], key: 'k', spec: {}, initialStatus: {} });
    expect(created.metadata).toMatchObject({ controller: 'jobs', key: 'k', resourceVersion: 1 });
    expect(store.getResource({ controller: 'jobs', key: ['alpha'] }).metadata.uid).toBe(uid);
    expect(store.listResources({ controller: ['jobs'] }).map((r: any) => r.metadata.key)).toEqual(['alpha', 'k']);
    expect(failure(() => store.getResource({ controller: 'jobs', key: [] }))).toEqual(tooFew);
    expect(failure(() => store.getResource({ controller: 'jobs', key: ['alpha', 'x'] }))).toEqual(tooMany);
    expect(failure(() => store.getResource({ controller: 'jobs', key: [['alpha']] }))).toEqual({
      name: 'TypeError',
      message: 'SQLite3 can only bind numbers, strings, bigints, buffers, and null',
    });
  });

  test('a plain object is a bag of named parameters, so the positional value is missing', () => {
    expect(failure(() => store.getResourceByUid({}))).toEqual(tooFew);
    expect(failure(() => store.getResourceByUid({ uid }))).toEqual(tooFew);
    expect(failure(() => store.getResource({ controller: {}, key: {} }))).toEqual({
      name: 'TypeError',
      message: 'You cannot specify named parameters in two different objects',
    });
  });
  test("a number token fails in Node's hash with its code", () => {
    const claim = { ...held, token: 5 };
    const status = { observedGeneration: 1, conditions: [], controllerStatus: {} };
    expect(failure(() => store.updateStatus({ ref: { controller: 'jobs', key: 'alpha' }, expectedResourceVersion: 2, claim, status }))).toEqual({
      name: 'TypeError',
      message: TOKEN_TYPE,
      code: 'ERR_INVALID_ARG_TYPE',
    });
    expect(failure(() => store.renewClaim(claim, 1000))).toEqual({ name: 'TypeError', message: TOKEN_TYPE, code: 'ERR_INVALID_ARG_TYPE' });
    // settleClaim treats any failure of the claim check as "not settled".
    expect(store.settleClaim(claim)).toBe(false);
  });

  test('finalizers are spread into a Set: strings by code point, objects never equal, others not iterable', () => {
    const ref = { controller: 'jobs', key: 'alpha' };
    const update = (finalizers: unknown) => () => store.updateFinalizers({ ref, expectedResourceVersion: 2, finalizers });
    expect(failure(update(5))).toEqual({
      name: 'TypeError',
      message: 'number 5 is not iterable (cannot read property Symbol(Symbol.iterator))',
    });
    expect(failure(update(undefined))).toEqual(undefinedRead('length'));
    // Two objects are two items (not "must be unique"); the first binds as a named bag.
    expect(failure(update([{}, {}]))).toEqual(tooFew);
    // One code point, two UTF-16 code units.
    expect(failure(update('\u{1f600}'))).toEqual({ name: 'Error', message: 'Controller finalizers must be unique' });
    expect(store.updateFinalizers({ ref, expectedResourceVersion: 2, finalizers: 'ab' }).metadata.finalizers).toEqual(['a', 'b']);
  });
});

describe('queue', () => {
  test('claimNext reads controllers, exclusions and options as the reference does', () => {
    expect(failure(() => store.claimNext({}))).toEqual(undefinedRead('length'));
    expect(failure(() => store.claimNext({ controllers: 'jobs', ownerId: 'w2', leaseMs: 1000 }))).toEqual({
      name: 'TypeError',
      message: 'options.controllers.map is not a function',
    });
    expect(failure(() => store.claimNext({ controllers: ['jobs'], ownerId: 'w2', leaseMs: 1000, exclude: [null] }))).toEqual(
      nullRead('controller'),
    );
  });

  test('a string leaseMs makes the expiry a string: stored, then an invalid date inside the transaction', () => {
    store.putResource({ controller: 'jobs', key: 'beta', spec: {}, initialStatus: {} });
    expect(failure(() => store.claimNext({ controllers: ['jobs'], ownerId: 'w2', leaseMs: '1000' }))).toEqual({
      name: 'RangeError',
      message: 'Invalid time value',
    });
    // Rolled back: beta is still unclaimed.
    expect(sql("SELECT owner_id FROM leases l JOIN controller_resources c ON c.resource_id = l.resource_id WHERE c.resource_key = 'beta'")).toEqual([
      { owner_id: null },
    ]);
    // renewClaim has no transaction: the expiry is written, then the date fails.
    expect(failure(() => store.renewClaim(held, '1000'))).toEqual({ name: 'RangeError', message: 'Invalid time value' });
    expect(sql("SELECT expires_at FROM leases WHERE owner_id = 'w1'")).toEqual([{ expires_at: Number(`${T0}1000`) }]);
    expect(held.expiresAt).toBe(iso(T0 + 60_000));
  });

  test("the expiry is JavaScript's now + leaseMs, dated by JavaScript's own parser", () => {
    store.putResource({ controller: 'jobs', key: 'beta', spec: {}, initialStatus: {} });
    store.enqueue({ controller: 'jobs', key: 'beta' }, '1970-01-01T00:00:00.000Z');
    // now is 0: "0" + "1000" is "01000", which JavaScript reads as the year 1000.
    const epoch = '1970-01-01T00:00:00.000Z';
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'w2', leaseMs: '1000', now: epoch });
    expect(claim).toMatchObject({ key: 'beta', expiresAt: '1000-01-01T00:00:00.000Z' });
    expect(sql("SELECT payload_hash FROM events WHERE event_type = 'lease.claimed' ORDER BY event_seq DESC LIMIT 1")).toHaveLength(1);
    expect(sql("SELECT CAST(b.content AS TEXT) AS payload FROM events e JOIN blobs b ON b.blob_hash = e.payload_hash WHERE e.event_type = 'lease.claimed' ORDER BY e.event_seq DESC LIMIT 1")).toEqual([
      { payload: '{"expiresAt":"01000"}' },
    ]);
    // A bigint cannot be added to a number: thrown where the reference adds (beta's lease,
    // stored as 1000, has expired), nothing claimed; with nothing due there is no sum at all.
    const mix = { name: 'TypeError', message: 'Cannot mix BigInt and other types, use explicit conversions' };
    expect(failure(() => store.claimNext({ controllers: ['jobs'], ownerId: 'w3', leaseMs: 1000n }))).toEqual(mix);
    expect(store.claimNext({ controllers: ['other'], ownerId: 'w3', leaseMs: 1000n })).toBeUndefined();
    expect(failure(() => store.renewClaim(held, 1000n))).toEqual(mix);
  });

  test('a number ownerId is bound as a double: SQLite stores its text as "5.0"', () => {
    store.putResource({ controller: 'jobs', key: 'beta', spec: {}, initialStatus: {} });
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 5, leaseMs: 1000 });
    expect(claim).toMatchObject({ key: 'beta', ownerId: 5 });
    expect(sql("SELECT actor_id FROM events WHERE event_type = 'lease.claimed' ORDER BY event_seq DESC LIMIT 1")).toEqual([
      { actor_id: '5.0' },
    ]);
  });

  test("the claim's ownerId and the event's controller, key and type are the caller's own values", () => {
    store.putResource({ controller: 'jobs', key: 'beta', spec: {}, initialStatus: {} });
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 5n, leaseMs: 1000 });
    expect(claim.ownerId).toBe(5n);
    // A bigint binds as an INTEGER, stored in the TEXT column as "5".
    expect(sql("SELECT owner_id FROM leases WHERE owner_id = '5'")).toEqual([{ owner_id: '5' }]);
    const event = store.recordEvent({ controller: 'jobs', key: 'alpha', type: 7n });
    expect(event).toMatchObject({ controller: 'jobs', key: 'alpha', type: 7n });
    expect(sql('SELECT event_type FROM events ORDER BY event_seq DESC LIMIT 1')).toEqual([{ event_type: '7' }]);
  });

  test('requeueClaim with undefined options settles; with null it reads null', () => {
    expect(failure(() => store.requeueClaim(held, null))).toEqual(nullRead('error'));
    expect(store.requeueClaim(held, undefined)).toBe(true);
    expect(store.listQueue()).toEqual([]);
  });

  test('renewClaim on a null claim', () => {
    expect(failure(() => store.renewClaim(null, 1000))).toEqual(nullRead('controller'));
  });
});

describe('effects and child workflows', () => {
  test('a number where text belongs fails in Buffer.from with its code', () => {
    store.reserveEffect({ key: 'e1', resourceUid: uid, claim: held, generation: 1, kind: 'k', requestFingerprint: 'f' });
    expect(failure(() => store.updateEffect({ resourceUid: uid, key: 'e1', claim: held, state: 'pending', error: 5 }))).toEqual({
      name: 'TypeError',
      message: BUFFER_TYPE,
      code: 'ERR_INVALID_ARG_TYPE',
    });
    expect(failure(() => store.reserveWorkflow({ resourceUid: uid, claim: held, requestKey: 'w', workflow: 'c', inputFingerprint: 5 }))).toEqual({
      name: 'TypeError',
      message: BUFFER_TYPE,
      code: 'ERR_INVALID_ARG_TYPE',
    });
  });

  test("a conflict's key is formatted from the caller's own value", () => {
    const effect = { resourceUid: uid, claim: held, generation: 1, kind: 'k', requestFingerprint: 'f' };
    store.reserveEffect({ ...effect, key: '5' });
    // 5n binds as the INTEGER 5, which matches the TEXT key "5"; JSON.stringify(5n) throws.
    expect(failure(() => store.reserveEffect({ ...effect, key: 5n, kind: 'other' }))).toEqual({
      name: 'TypeError',
      message: 'Do not know how to serialize a BigInt',
    });
    store.reserveEffect({ ...effect, key: 'a\ud800' });
    expect(failure(() => store.reserveEffect({ ...effect, key: 'a\ud800', kind: 'other' }))).toEqual({
      name: 'EffectRequestConflictError',
      message: 'Effect key "a\\ud800" was reused with a different request',
    });
  });

  test('objects and arrays as ids, null claims and null updates', () => {
    expect(failure(() => store.listEffects({ uid }))).toEqual(tooFew);
    expect(failure(() => store.getWorkflowByRequestId({ id: 'x' }))).toEqual(tooFew);
    const fp = 'ab'.repeat(32);
    expect(failure(() => store.reserveWorkflow({ resourceUid: uid, claim: null, requestKey: 'w', workflow: 'c', inputFingerprint: fp }))).toEqual(
      nullRead('controller'),
    );
    const { record } = store.reserveWorkflow({ resourceUid: uid, claim: held, requestKey: 'w', workflow: 'c', inputFingerprint: fp });
    expect(store.listWorkflows([uid]).map((w: any) => w.requestId)).toEqual([record.requestId]);
    expect(failure(() => store.updateWorkflow(record.requestId, null, held))).toEqual(nullRead('error'));
    expect(failure(() => store.updateWorkflow(record.requestId, { state: 'running' }, null))).toEqual(nullRead('controller'));
    expect(failure(() => store.completeWorkflow(record.requestId, null))).toEqual(nullRead('state'));
    // The event payload {requestId, runId, state} is canonical JSON of the caller's values.
    expect(failure(() => store.completeWorkflow(record.requestId, { state: 'failed', runId: 5n }))).toEqual({
      name: 'Error',
      message: 'Unsupported JSON value type: bigint',
    });
    expect(store.getWorkflowByRequestId(record.requestId).state).toBe('pending');
  });
  test('an array fingerprint is Buffer.from(array): one byte per item', () => {
    const bytes = Array.from({ length: 32 }, (_, index) => (index === 0 ? 256 + 0xab : index === 1 ? '0x10' : 0xab));
    const { record } = store.reserveWorkflow({ resourceUid: uid, claim: held, requestKey: 'w', workflow: 'c', inputFingerprint: bytes });
    expect(record.inputFingerprint).toBe('ab10' + 'ab'.repeat(30));
  });
});

describe('events', () => {
  test('a null claim is checked (only undefined means none); null options fail', () => {
    expect(failure(() => store.recordEvent({ controller: 'jobs', key: 'alpha', type: 't', claim: null }))).toEqual(nullRead('controller'));
    expect(failure(() => store.listEvents(null))).toEqual(nullRead('controller'));
  });

  test('limits SQLite cannot take as an integer are its datatype mismatch', () => {
    for (const limit of [1.5, Infinity, -Infinity, NaN, 1e21, 'x', [1.5]]) {
      expect(failure(() => store.listEvents({ limit }))).toEqual({ name: 'SqliteError', message: 'datatype mismatch', code: 'SQLITE_MISMATCH' });
    }
    expect(store.listEvents({ limit: '1' })).toHaveLength(1);
    expect(store.listEvents({ limit: [1] })).toHaveLength(1);
    expect(failure(() => store.listEvents({ limit: {} }))).toEqual(tooFew);
  });
});

// A getter that calls the same store during a call runs nested on the same connection, as in
// the reference (__test__/conformance-reentrancy/ holds the recorded cases), and the outer call
// goes on.
test('a getter that calls the store during a call runs that call nested', () => {
  let nested: unknown;
  const ref = {
    controller: 'jobs',
    get key() {
      nested = store.listResources().map((resource: { metadata: { key: string } }) => resource.metadata.key);
      return 'alpha';
    },
  };
  expect(store.getResource(ref)?.metadata.key).toBe('alpha');
  expect(nested).toEqual(store.listResources().map((resource: { metadata: { key: string } }) => resource.metadata.key));
  expect(store.listResources().length).toBeGreaterThan(0);
});
