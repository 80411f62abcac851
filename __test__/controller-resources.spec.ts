// Controller resources through the public API: putResource, the reads, updateStatus,
// requestDeletion, updateFinalizers and deleteResource, with every error branch.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { failure } from './support/failure';

const { SqliteControllerStore, ResourceConflictError, ResourceNotFoundError } = require('../index.js');

const T0 = Date.parse('2026-09-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

let dir: string;
let file: string;
let store: any;

function open(options: Record<string, unknown> = {}): any {
  return new SqliteControllerStore(file, { projectPath: path.join(dir, 'project'), ...options });
}

function count(table: string): number {
  return store.state.connection.prepare(`SELECT count(*) AS n FROM ${table}`).get().n;
}

function put(key = 'web', spec: unknown = { image: 'v1' }, extra: Record<string, unknown> = {}): any {
  return store.putResource({ controller: 'deployments', key, spec, initialStatus: { phase: 'new' }, ...extra });
}

function claim(controller = 'deployments', leaseMs = 60_000): any {
  return store.claimNext({ controllers: [controller], ownerId: 'worker', leaseMs });
}

const status = { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } };

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-controller-resources-')));
  fs.mkdirSync(path.join(dir, 'project'));
  file = path.join(dir, 'state.sqlite');
  store = open();
});

afterEach(() => {
  store.close();
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('putResource', () => {
  test('creates a resource with generation 1, an initial status and a queue item', () => {
    const resource = store.putResource({
      controller: 'deployments',
      key: 'web',
      spec: { replicas: 2, image: 'v1' },
      initialStatus: { phase: 'new' },
    });
    expect(resource).toEqual({
      metadata: {
        uid: expect.stringMatching(/^[0-9a-f-]{36}$/),
        controller: 'deployments',
        key: 'web',
        resourceVersion: 1,
        generation: 1,
        finalizers: [],
      },
      spec: { image: 'v1', replicas: 2 },
      status: { conditions: [], controllerStatus: { phase: 'new' }, observedGeneration: 0 },
    });
    expect(Object.keys(resource.metadata)).toEqual(['uid', 'controller', 'key', 'resourceVersion', 'generation', 'finalizers']);
    expect(store.listQueue()).toEqual([{ controller: 'deployments', key: 'web', availableAt: iso(T0), consecutiveErrors: 0 }]);
    expect(store.listEvents()).toMatchObject([{ type: 'resource.created', payload: { generation: 1 } }]);
  });

  test('an identical spec changes nothing; a new spec bumps generation and revision', () => {
    const created = put('web', { image: 'v1' });
    expect(put('web', { image: 'v1' })).toEqual(created);
    const changed = put('web', { image: 'v2' }, { now: '2026-09-01T00:00:05Z' });
    expect(changed.metadata).toMatchObject({ uid: created.metadata.uid, resourceVersion: 2, generation: 2 });
    expect(changed.spec).toEqual({ image: 'v2' });
    expect(store.listEvents({ limit: 1 })).toMatchObject([{ type: 'resource.spec_updated', payload: { generation: 2 } }]);
  });

  test('an undefined initial status is left out of the status', () => {
    expect(store.putResource({ controller: 'c', key: 'k', spec: 'plain' }).status).toEqual({
      conditions: [],
      observedGeneration: 0,
    });
  });

  test('names and keys are 1–512 UTF-16 code units', () => {
    expect(failure(() => put(''))).toEqual({ name: 'Error', message: 'resource key is invalid' });
    expect(failure(() => store.putResource({ controller: '', key: 'k', spec: {} }))).toEqual({
      name: 'Error',
      message: 'controller is invalid',
    });
    expect(failure(() => put('k'.repeat(513))).message).toBe('resource key is invalid');
    expect(put('k'.repeat(512)).metadata.key).toHaveLength(512);
    expect(failure(() => put('😀'.repeat(257))).message).toBe('resource key is invalid');
    expect(put('😀'.repeat(256)).metadata.generation).toBe(1);
  });

  test('validation order: names, timestamp, then the spec and status documents', () => {
    expect(failure(() => store.putResource({ controller: '', key: '', spec: {}, now: 'bad' })).message).toBe(
      'controller is invalid',
    );
    expect(failure(() => put('k', { n: NaN }, { now: 'bad' })).message).toBe('Invalid timestamp');
    expect(failure(() => put('k', { n: NaN })).message).toBe('JSON numbers must be finite');
    expect(failure(() => put('k', new Date(0))).message).toBe('Only plain objects can be stored as canonical JSON');
    expect(failure(() => put('k', [undefined])).message).toBe('Unsupported JSON value type: undefined');
    expect(failure(() => put('k', {}, { initialStatus: { n: Infinity } })).message).toBe('JSON numbers must be finite');
  });

  test('a read-only store refuses before validating anything', () => {
    put();
    const readOnly = open({ readOnly: true });
    try {
      expect(failure(() => readOnly.putResource({ controller: '', key: '', spec: {} }))).toEqual({
        name: 'Error',
        message: 'Controller store is read-only',
      });
    } finally {
      readOnly.close();
    }
  });

  test('the global store stores the blobs, then fails inside the transaction', () => {
    const global = open({ global: true });
    try {
      const blobs = count('blobs');
      expect(failure(() => global.putResource({ controller: 'g', key: 'k', spec: { lost: true }, initialStatus: {} }))).toEqual({
        name: 'Error',
        message: 'Controller project is not registered in the state database',
      });
      expect(count('blobs')).toBe(blobs + 2);
      expect(count('controller_resources')).toBe(0);
    } finally {
      global.close();
    }
  });

  test('re-creating a deleted key hits the resources row left behind', () => {
    put();
    const held = claim();
    store.requestDeletion({ controller: 'deployments', key: 'web' });
    expect(store.deleteResource({ controller: 'deployments', key: 'web' }, 3, held)).toBe(true);
    expect(failure(() => put())).toEqual({
      name: 'SqliteError',
      message: 'UNIQUE constraint failed: resources.resource_id',
      code: 'SQLITE_CONSTRAINT_PRIMARYKEY',
    });
  });
});

describe('reads', () => {
  test('getResource, getResourceByUid and listResources', () => {
    const web = put('web');
    put('api');
    store.putResource({ controller: 'certificates', key: 'web', spec: {}, initialStatus: {} });
    expect(store.getResource({ controller: 'deployments', key: 'web' })).toEqual(web);
    expect(store.getResource({ controller: 'deployments', key: 'nope' })).toBeUndefined();
    expect(store.getResourceByUid(web.metadata.uid)).toEqual(web);
    expect(store.getResourceByUid('no-such-uid')).toBeUndefined();
    const keys = (list: any[]) => list.map((r) => `${r.metadata.controller}/${r.metadata.key}`);
    expect(keys(store.listResources())).toEqual(['certificates/web', 'deployments/api', 'deployments/web']);
    expect(keys(store.listResources({ controller: 'deployments' }))).toEqual(['deployments/api', 'deployments/web']);
    expect(store.listResources({ controller: 'nothing' })).toEqual([]);
  });

  test('another project sees nothing; the global store lists everything but reads no single resource', () => {
    const web = put('web');
    fs.mkdirSync(path.join(dir, 'other'));
    const other = open({ projectPath: path.join(dir, 'other') });
    const global = open({ global: true });
    try {
      other.putResource({ controller: 'deployments', key: 'web', spec: {}, initialStatus: {} });
      expect(store.listResources()).toHaveLength(1);
      expect(other.getResource({ controller: 'deployments', key: 'web' }).metadata.uid).not.toBe(web.metadata.uid);
      expect(global.listResources()).toHaveLength(2);
      expect(global.getResource({ controller: 'deployments', key: 'web' })).toBeUndefined();
      expect(global.getResourceByUid(web.metadata.uid)).toEqual(web);
    } finally {
      other.close();
      global.close();
    }
  });

  test('a closed store throws TypeError', () => {
    store.close();
    expect(failure(() => store.getResource({ controller: 'd', key: 'k' }))).toEqual({
      name: 'TypeError',
      message: 'The database connection is not open',
    });
  });
});

describe('updateStatus', () => {
  test('stores the status and finalizers under a live claim and updates claim.resourceVersion', () => {
    put();
    const held = claim();
    expect(held.resourceVersion).toBe(2);
    const updated = store.updateStatus({
      ref: { controller: 'deployments', key: 'web' },
      expectedResourceVersion: 2,
      claim: held,
      status,
      finalizers: ['z/hold', 'a/hold'],
    });
    expect(updated.metadata).toMatchObject({ resourceVersion: 3, finalizers: ['z/hold', 'a/hold'] });
    expect(updated.status).toEqual({ conditions: [], controllerStatus: { phase: 'ready' }, observedGeneration: 1 });
    expect(held.resourceVersion).toBe(3);
    expect(store.listEvents({ limit: 1 })).toMatchObject([{ type: 'resource.status_updated' }]);
    // Without `finalizers` the record shows those stored (read with the row); cleared, none.
    const ref = { controller: 'deployments', key: 'web' };
    const again = store.updateStatus({ ref, expectedResourceVersion: 3, claim: held, status: { phase: 'again' } });
    expect(again.metadata.finalizers).toEqual(['z/hold', 'a/hold']);
    expect(again).toEqual(store.getResource(ref));
    const cleared = store.updateStatus({ ref, expectedResourceVersion: 4, claim: held, status, finalizers: [] });
    expect(cleared.metadata.finalizers).toEqual([]);
    expect(cleared).toEqual(store.getResource(ref));
  });

  test('stores a status written before once, and fails on a forged one as the put does', () => {
    put();
    const held = claim();
    const ref = { controller: 'deployments', key: 'web' };
    const blob = (text: string) =>
      store.state.connection.prepare('SELECT rowid, created_at FROM blobs WHERE content = ?').all(Buffer.from(text));
    const again = { phase: 'again' };
    store.updateStatus({ ref, expectedResourceVersion: 2, claim: held, status: again, now: iso(T0 + 1) });
    const [first] = blob('{"phase":"again"}');
    expect(first.created_at).toBe(T0 + 1);
    store.updateStatus({ ref, expectedResourceVersion: 3, claim: held, status, now: iso(T0 + 2) });
    const updated = store.updateStatus({ ref, expectedResourceVersion: 4, claim: held, status: again, now: iso(T0 + 3) });
    expect(blob('{"phase":"again"}')).toEqual([first]);
    expect(updated.status).toEqual(again);
    expect(updated).toEqual(store.getResource(ref));
    const forged = require('node:crypto').createHash('sha256').update('{"phase":"forged"}').digest();
    store.state.connection.prepare('INSERT INTO blobs VALUES (?, ?, 1, ?, ?)').run(forged, 'application/json', Buffer.from('x'), T0);
    expect(() => store.updateStatus({ ref, expectedResourceVersion: 5, claim: held, status: { phase: 'forged' } })).toThrow(
      'Content-addressed blob conflict',
    );
    expect(store.getResource(ref).status).toEqual(again);
  });

  test('error branches, in the reference order', () => {
    put('web');
    put('api');
    const held = claim();
    const ref = { controller: 'deployments', key: held.key };
    const update = (options: Record<string, unknown>) =>
      failure(() => store.updateStatus({ ref, expectedResourceVersion: 2, claim: held, status, ...options }));
    expect(update({ ref: { controller: 'deployments', key: 'missing' }, now: 'bad' }).message).toBe('Invalid timestamp');
    expect(update({ ref: { controller: 'deployments', key: 'missing' } })).toEqual({
      name: 'ResourceNotFoundError',
      message: 'Controller resource not found: deployments/missing',
    });
    const otherKey = held.key === 'web' ? 'api' : 'web';
    expect(update({ ref: { controller: 'deployments', key: otherKey } }).message).toBe('Controller claim targets another resource');
    expect(update({ claim: { ...held, token: 'forged' } }).message).toBe('Controller claim is stale');
    expect(update({ claim: { ...held, generation: '1' } }).message).toBe('Controller claim is stale');
    expect(update({ expectedResourceVersion: 1 })).toEqual({
      name: 'ResourceConflictError',
      message: `Controller resource deployments/${held.key} changed during reconciliation`,
    });
    expect(update({ finalizers: ['x', 'x'] }).message).toBe('Controller finalizers must be unique');
    expect(update({ status: { observedGeneration: NaN } }).message).toBe('JSON numbers must be finite');
    expect(update({ now: iso(T0 + 60_000) }).message).toBe('Controller claim is stale');
    expect(held.resourceVersion).toBe(2);
    expect(() => store.updateStatus({ ref, expectedResourceVersion: 1, claim: held, status })).toThrow(ResourceConflictError);
  });

  test('a read-only store cannot write', () => {
    put();
    const held = claim();
    const readOnly = open({ readOnly: true });
    try {
      expect(
        failure(() =>
          readOnly.updateStatus({ ref: { controller: 'deployments', key: 'web' }, expectedResourceVersion: 2, claim: held, status }),
        ).message,
      ).toBe('Cannot mutate a read-only Pi Workflows database');
    } finally {
      readOnly.close();
    }
  });
});

describe('requestDeletion, updateFinalizers and deleteResource', () => {
  const ref = { controller: 'deployments', key: 'web' };

  test('requestDeletion sets the deletion timestamp once and requeues', () => {
    put();
    const requested = store.requestDeletion(ref, '2026-09-01T00:00:01Z');
    expect(Object.keys(requested.metadata)).toEqual([
      'uid',
      'controller',
      'key',
      'resourceVersion',
      'generation',
      'deletionTimestamp',
      'finalizers',
    ]);
    expect(requested.metadata).toMatchObject({ resourceVersion: 2, deletionTimestamp: '2026-09-01T00:00:01.000Z' });
    expect(store.requestDeletion(ref, '2026-09-01T00:00:09Z')).toEqual(requested);
    expect(store.listEvents({ limit: 1 })).toMatchObject([{ type: 'resource.deletion_requested' }]);
    expect(failure(() => store.requestDeletion({ controller: 'deployments', key: 'x' })).name).toBe('ResourceNotFoundError');
    expect(failure(() => store.requestDeletion(ref, 'never')).message).toBe('Invalid timestamp');
  });

  test('updateFinalizers replaces the list in order under an expected version', () => {
    put();
    const updated = store.updateFinalizers({ ref, expectedResourceVersion: 1, finalizers: ['b', 'a'] });
    expect(updated.metadata).toMatchObject({ resourceVersion: 2, finalizers: ['b', 'a'] });
    expect(store.updateFinalizers({ ref, expectedResourceVersion: 2, finalizers: [] }).metadata.finalizers).toEqual([]);
    expect(failure(() => store.updateFinalizers({ ref, expectedResourceVersion: 1, finalizers: [] })).name).toBe(
      'ResourceConflictError',
    );
    expect(failure(() => store.updateFinalizers({ ref, expectedResourceVersion: 3, finalizers: ['a', 'a'] })).message).toBe(
      'Controller finalizers must be unique',
    );
    expect(() =>
      store.updateFinalizers({ ref: { controller: 'deployments', key: 'x' }, expectedResourceVersion: 1, finalizers: [] }),
    ).toThrow(ResourceNotFoundError);
    expect(failure(() => store.updateFinalizers({ ref, expectedResourceVersion: 3, finalizers: [], now: 'x' })).message).toBe(
      'Invalid timestamp',
    );
  });

  test('deleteResource needs a deletion request and no finalizers; the resources row stays', () => {
    put();
    store.updateFinalizers({ ref, expectedResourceVersion: 1, finalizers: ['hold'] });
    const held = claim();
    expect(store.deleteResource(ref, 3, held)).toBe(false);
    store.requestDeletion(ref);
    expect(store.deleteResource(ref, 4, held)).toBe(false);
    store.updateFinalizers({ ref, expectedResourceVersion: 4, finalizers: [] });
    expect(failure(() => store.deleteResource(ref, 4, held)).name).toBe('ResourceConflictError');
    expect(failure(() => store.deleteResource(ref, 5, { ...held, ownerId: 'other' })).message).toBe('Controller claim is stale');
    expect(store.deleteResource(ref, 5, held)).toBe(true);
    expect(store.getResource(ref)).toBeUndefined();
    expect(count('resources')).toBe(1);
    expect(store.listQueue()).toEqual([]);
    expect(failure(() => store.deleteResource(ref, 5, held)).name).toBe('ResourceNotFoundError');
  });

  test('deleteResource checks the claim against the current clock', () => {
    put();
    put('api');
    const held = claim();
    store.requestDeletion(ref);
    const otherRef = { controller: 'deployments', key: held.key === 'web' ? 'api' : 'web' };
    expect(failure(() => store.deleteResource(otherRef, 1, held)).message).toBe('Controller claim targets another resource');
    jest.setSystemTime(T0 + 60_000);
    expect(failure(() => store.deleteResource({ ...ref, key: held.key }, 3, held)).message).toBe('Controller claim is stale');
  });
});
