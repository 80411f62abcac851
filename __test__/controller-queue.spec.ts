// The controller work queue through the public API: enqueue, claimNext, renewClaim,
// settleClaim, requeueClaim and listQueue, including lease expiry and generation fencing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { failure } from './support/failure';

const { SqliteControllerStore, ResourceNotFoundError } = require('../index.js');

const T0 = Date.parse('2026-09-02T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

let dir: string;
let store: any;

function open(options: Record<string, unknown> = {}): any {
  return new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project'), ...options });
}

function sql(text: string, ...params: unknown[]): any {
  const statement = store.state.connection.prepare(text);
  return statement.reader ? statement.get(...params) : statement.run(...params);
}

function put(controller: string, key: string, now?: string): void {
  store.putResource({ controller, key, spec: { key }, initialStatus: {}, ...(now === undefined ? {} : { now }) });
}

function claimNext(ownerId = 'w1', options: Record<string, unknown> = {}): any {
  return store.claimNext({ controllers: ['alpha', 'beta'], ownerId, leaseMs: 10_000, ...options });
}

const ref = (controller: string, key: string) => ({ controller, key });

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-controller-queue-')));
  fs.mkdirSync(path.join(dir, 'project'));
  store = open();
});

afterEach(() => {
  store.close();
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('enqueue', () => {
  test('keeps the earliest availability and bumps the queue version', () => {
    put('alpha', 'k1');
    store.enqueue(ref('alpha', 'k1'), iso(T0 + 10_000));
    expect(store.listQueue()[0].availableAt).toBe(iso(T0));
    store.enqueue(ref('alpha', 'k1'), iso(T0 - 10_000));
    store.enqueue(ref('alpha', 'k1'));
    expect(store.listQueue()).toEqual([{ controller: 'alpha', key: 'k1', availableAt: iso(T0 - 10_000), consecutiveErrors: 0 }]);
    expect(sql('SELECT queue_version AS v, updated_at AS u FROM controller_queue')).toEqual({ v: 4, u: T0 });
  });

  test('an unknown resource is reported before an invalid timestamp', () => {
    put('alpha', 'k1');
    expect(() => store.enqueue(ref('alpha', 'missing'), 'soon')).toThrow(ResourceNotFoundError);
    expect(failure(() => store.enqueue(ref('alpha', 'k1'), 'soon')).message).toBe('Invalid timestamp');
    expect(failure(() => store.enqueue(ref('alpha', 'k1'), '')).message).toBe('Invalid timestamp');
  });
});

describe('claimNext', () => {
  test('claims the earliest due item by available_at, controller and key', () => {
    put('beta', 'k2');
    put('alpha', 'k2');
    put('alpha', 'k1');
    put('alpha', 'later', '2026-09-03T00:00:00Z');
    const first = claimNext();
    expect(first).toEqual({
      controller: 'alpha',
      key: 'k1',
      ownerId: 'w1',
      token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      generation: 1,
      queueVersion: 1,
      resourceVersion: 2,
      consecutiveErrors: 0,
      expiresAt: iso(T0 + 10_000),
    });
    expect(store.listEvents({ limit: 1 })).toMatchObject([{ type: 'lease.claimed', payload: { expiresAt: T0 + 10_000 } }]);
    expect(claimNext('w2', { exclude: [ref('alpha', 'k2'), ref('zzz', 'none')] })).toMatchObject({ controller: 'beta', key: 'k2' });
    expect(claimNext('w3')).toMatchObject({ controller: 'alpha', key: 'k2' });
    expect(claimNext('w4')).toBeUndefined();
    const due = { now: '2026-09-03T00:00:00Z', exclude: [ref('alpha', 'k1'), ref('alpha', 'k2'), ref('beta', 'k2')] };
    expect(claimNext('w4', due)).toMatchObject({ key: 'later' });
  });

  test('no controllers means no claim, before the timestamp is read', () => {
    put('alpha', 'k1');
    expect(store.claimNext({ controllers: [], ownerId: 'w', leaseMs: 1, now: 'bad' })).toBeUndefined();
    expect(store.claimNext({ controllers: ['nobody'], ownerId: 'w', leaseMs: 1 })).toBeUndefined();
    expect(failure(() => claimNext('w', { now: 'bad' })).message).toBe('Invalid timestamp');
  });

  test('an expired lease is taken over with the next generation, fencing the old claim', () => {
    put('alpha', 'k1');
    const old = claimNext('w1');
    expect(claimNext('w2')).toBeUndefined();
    jest.setSystemTime(T0 + 10_000);
    const taken = claimNext('w2');
    expect(taken).toMatchObject({ ownerId: 'w2', generation: 2, resourceVersion: 3 });
    expect(store.renewClaim(old, 10_000)).toBe(false);
    expect(store.settleClaim(old)).toBe(false);
    expect(store.requeueClaim(old, { availableAt: iso(T0) })).toBe(false);
    expect(failure(() => store.recordEvent({ ...ref('alpha', 'k1'), claim: old, type: 'x' })).message).toBe(
      'Controller claim is stale',
    );
  });

  test('needs a writable store with a project', () => {
    put('alpha', 'k1');
    const global = open({ global: true });
    const readOnly = open({ readOnly: true });
    try {
      expect(failure(() => global.claimNext({ controllers: ['alpha'], ownerId: 'w', leaseMs: 1 })).message).toBe(
        'Controller project is not registered in the state database',
      );
      expect(failure(() => readOnly.claimNext({ controllers: ['alpha'], ownerId: 'w', leaseMs: 1 })).message).toBe(
        'Cannot mutate a read-only Pi Workflows database',
      );
    } finally {
      global.close();
      readOnly.close();
    }
  });
});

describe('renewClaim', () => {
  test('extends only an unexpired exact lease and updates claim.expiresAt', () => {
    put('alpha', 'k1');
    const held = claimNext();
    jest.setSystemTime(T0 + 1_000);
    expect(store.renewClaim(held, 20_000)).toBe(true);
    expect(held.expiresAt).toBe(iso(T0 + 21_000));
    const forged = { ...held, token: 'nope' };
    expect(store.renewClaim(forged, 20_000)).toBe(false);
    expect(forged.expiresAt).toBe(iso(T0 + 21_000));
    expect(store.renewClaim({ ...held, key: 'missing' }, 20_000)).toBe(false);
    expect(failure(() => store.renewClaim(held, 20_000, 'bad')).message).toBe('Invalid timestamp');
    expect(store.renewClaim(held, 5_000, iso(T0 + 21_000))).toBe(false);
    expect(store.listQueue()[0].claimExpiresAt).toBe(iso(T0 + 21_000));
  });

  test('binds the claim generation as SQL does: the string "1" matches generation 1', () => {
    put('alpha', 'k1');
    const held = claimNext();
    const loose = { ...held, generation: '1' };
    expect(store.renewClaim(loose, 30_000)).toBe(true);
    expect(loose.expiresAt).toBe(iso(T0 + 30_000));
  });

  test('a read-only store fails in SQLite', () => {
    put('alpha', 'k1');
    const held = claimNext();
    const readOnly = open({ readOnly: true });
    try {
      expect(failure(() => readOnly.renewClaim(held, 1_000))).toEqual({
        name: 'SqliteError',
        message: 'attempt to write a readonly database',
        code: 'SQLITE_READONLY',
      });
    } finally {
      readOnly.close();
    }
  });
});

describe('settleClaim and requeueClaim', () => {
  test('settling with an unchanged queue version removes the item and releases the lease', () => {
    put('alpha', 'k1');
    const held = claimNext();
    expect(store.settleClaim(held)).toBe(true);
    expect(held.resourceVersion).toBe(3);
    expect(store.listQueue()).toEqual([]);
    expect(sql('SELECT owner_id AS o, generation AS g FROM leases')).toEqual({ o: null, g: 1 });
    expect(store.listEvents({ limit: 1 })).toMatchObject([{ type: 'lease.released', payload: {} }]);
    expect(store.settleClaim(held)).toBe(false);
  });

  test('work enqueued during the claim survives settling', () => {
    put('alpha', 'k1');
    const held = claimNext();
    store.enqueue(ref('alpha', 'k1'));
    expect(store.settleClaim(held, iso(T0 + 1))).toBe(true);
    expect(store.listQueue()).toHaveLength(1);
    expect(claimNext()).toMatchObject({ generation: 2, queueVersion: 2 });
  });

  test('an expired claim still settles until another owner takes over', () => {
    put('alpha', 'k1');
    const held = claimNext();
    expect(store.settleClaim(held, iso(T0 + 60_000))).toBe(true);
    expect(failure(() => store.settleClaim(held, 'later')).message).toBe('Invalid timestamp');
  });

  test('requeueClaim moves the item, counts the error and releases the lease', () => {
    put('alpha', 'k1');
    const held = claimNext();
    expect(store.requeueClaim(held, { availableAt: iso(T0 + 5_000), error: 'boom' })).toBe(true);
    expect(held.resourceVersion).toBe(3);
    expect(store.listQueue()).toEqual([{ controller: 'alpha', key: 'k1', availableAt: iso(T0 + 5_000), consecutiveErrors: 1 }]);
    expect(sql(`SELECT CAST(b.content AS TEXT) AS error FROM controller_queue q JOIN blobs b ON b.blob_hash = q.last_error_hash`)).toEqual({
      error: 'boom',
    });
    expect(claimNext()).toBeUndefined();
    const again = claimNext('w2', { now: iso(T0 + 5_000) });
    expect(again).toMatchObject({ consecutiveErrors: 1, queueVersion: 2, generation: 2 });
    expect(store.requeueClaim(again, { availableAt: iso(T0) }, iso(T0 + 5_000))).toBe(true);
    expect(store.listQueue()[0].consecutiveErrors).toBe(2);
  });

  test('an unparseable availableAt reaches SQLite as NULL', () => {
    put('alpha', 'k1');
    const held = claimNext();
    expect(failure(() => store.requeueClaim(held, { availableAt: 'whenever' }))).toEqual({
      name: 'SqliteError',
      message: 'NOT NULL constraint failed: controller_queue.available_at',
      code: 'SQLITE_CONSTRAINT_NOTNULL',
    });
    expect(held.resourceVersion).toBe(2);
    expect(store.requeueClaim({ ...held, ownerId: 'w9' }, { availableAt: 'whenever' })).toBe(false);
  });

  test('a missing queue row is an error once the claim checks out', () => {
    put('alpha', 'k1');
    const held = claimNext();
    sql('DELETE FROM controller_queue');
    expect(failure(() => store.settleClaim(held)).message).toBe('Controller queue item is missing');
    expect(failure(() => store.requeueClaim(held, { availableAt: iso(T0) })).message).toBe('Controller queue item is missing');
    expect(store.settleClaim({ ...held, token: 'forged' })).toBe(false);
  });
});

describe('listQueue', () => {
  test('shows claimExpiresAt only while leased; needs a project', () => {
    put('beta', 'k1');
    put('alpha', 'k1', iso(T0 + 1));
    claimNext('w1', { controllers: ['beta'] });
    expect(store.listQueue()).toEqual([
      { controller: 'beta', key: 'k1', availableAt: iso(T0), consecutiveErrors: 0, claimExpiresAt: iso(T0 + 10_000) },
      { controller: 'alpha', key: 'k1', availableAt: iso(T0 + 1), consecutiveErrors: 0 },
    ]);
    const global = open({ global: true });
    try {
      expect(failure(() => global.listQueue()).message).toBe('Controller project is not registered in the state database');
    } finally {
      global.close();
    }
    store.close();
    expect(failure(() => store.listQueue()).name).toBe('TypeError');
  });
});
