// StateDatabase as a class of its own and as `store.state`: blobs, JSON, transactions, sharing
// between stores, pruning, integrity and backup.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore, StateDatabase } = require('../index.js');

let folder: string;
const file = () => path.join(folder, 'state', 'state.sqlite');

beforeEach(() => {
  folder = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-state-api-')));
});

afterEach(() => {
  fs.rmSync(folder, { recursive: true, force: true });
});

const resource = (key: string) => ({ controller: 'jobs', key, spec: { n: 1 }, initialStatus: { phase: 'new' } });

describe('StateDatabase', () => {
  test('content-addressed JSON and text blobs', () => {
    const state = new StateDatabase({ filePath: file() });
    try {
      expect(state.filePath).toBe(file());
      expect(state.mode).toBe('read-write');
      const hash = state.putJson({ b: 1, a: { d: [1, -0], c: 'x' } }, 5);
      expect(hash).toHaveLength(32);
      expect(Object.keys(state.readJson(hash))).toEqual(['a', 'b']);
      expect(state.readJson(hash)).toEqual({ a: { c: 'x', d: [1, 0] }, b: 1 });
      const blob = state.readBlob(hash);
      expect(blob.mediaType).toBe('application/json');
      expect(blob.content.toString('utf8')).toBe('{"a":{"c":"x","d":[1,0]},"b":1}');
      expect(blob.byteLength).toBe(blob.content.length);
      expect(state.putJson({ a: { c: 'x', d: [1, 0] }, b: 1 })).toEqual(hash);
      const text = state.putText('hello');
      expect(state.readBlob(text).mediaType).toBe('text/plain');
      expect(() => state.readJson(text)).toThrow('JSON blob is missing or has the wrong media type');
      expect(() => state.putBlob(Buffer.from('hello'), 'application/json')).toThrow('Content-addressed blob conflict');
      expect(state.readBlob(Buffer.alloc(32))).toBeUndefined();
      expect(() => state.putJson({ n: Number.NaN })).toThrow('JSON numbers must be finite');
      expect(() => state.putJson(new Date())).toThrow('Only plain objects can be stored as canonical JSON');
    } finally {
      state.close();
    }
  });

  test('a file has no cluster clock: its times are Date.now() itself', () => {
    const state = new StateDatabase({ filePath: file() });
    try {
      expect(state.clusterClock).toBeNull();
      const store = new SqliteControllerStore(file(), { state, projectPath: folder });
      jest.useFakeTimers({ now: Date.parse('2030-01-02T03:04:05.006Z'), doNotFake: ['nextTick', 'setImmediate'] });
      try {
        store.putResource(resource('r'));
        store.enqueue({ controller: 'jobs', key: 'r' });
        expect(store.claimNext({ controllers: ['jobs'], ownerId: 'me', leaseMs: 1_000 }).expiresAt).toBe('2030-01-02T03:04:06.006Z');
      } finally {
        jest.useRealTimers();
      }
    } finally {
      state.close();
    }
  });

  test('pruning removes exactly the blobs nothing refers to', () => {
    const state = new StateDatabase({ filePath: file() });
    try {
      state.putText('orphan one');
      state.putText('orphan two');
      expect(state.pruneUnreferencedBlobs()).toBe(2);
      expect(state.pruneUnreferencedBlobs()).toBe(0);
      state.integrityCheck();
    } finally {
      state.close();
    }
  });

  test('a read-only database refuses every write', () => {
    new StateDatabase({ filePath: file() }).close();
    const before = fs.readFileSync(file());
    const state = new StateDatabase({ filePath: file(), mode: 'read-only' });
    try {
      expect(() => state.transaction(() => 1)).toThrow('Cannot mutate a read-only Pi Workflows database');
      expect(() => state.putJson({})).toThrow('Cannot write a blob through a read-only Pi Workflows database');
      expect(() => state.pruneUnreferencedBlobs()).toThrow('Cannot prune blobs through a read-only Pi Workflows database');
      expect(() => state.connection.exec('CREATE TABLE x (a)')).toThrow('attempt to write a readonly database');
      expect(state.connection.readonly).toBe(true);
    } finally {
      state.close();
    }
    expect(fs.readFileSync(file()).equals(before)).toBe(true);
  });

  test('transaction commits, rolls back on a throw, and is not re-entrant for store methods (their BEGIN fails, the outer transaction goes on)', () => {
    const store = new SqliteControllerStore(file(), { projectPath: folder });
    try {
      const { state } = store;
      expect(state.transaction(() => state.putText('kept'))).toHaveLength(32);
      expect(() =>
        state.transaction(() => {
          state.putText('rolled back');
          throw new Error('abort');
        }),
      ).toThrow('abort');
      const texts = () => state.connection.prepare("SELECT CAST(content AS TEXT) FROM blobs WHERE media_type = 'text/plain'").pluck().all();
      expect(texts()).toEqual(['kept']);
      // A store write inside the caller's transaction: its BEGIN fails before the reference's
      // `try`, so the caller's transaction stays open and commits what it wrote.
      let inner: unknown;
      expect(
        state.transaction(() => {
          state.putText('outer write');
          try {
            store.putResource(resource('inside'));
          } catch (error) {
            inner = error;
          }
          return state.connection.inTransaction;
        }),
      ).toBe(true);
      expect((inner as Error).name).toBe('SqliteError');
      expect((inner as Error).message).toBe('cannot start a transaction within a transaction');
      expect(state.connection.inTransaction).toBe(false);
      expect(texts()).toEqual(['kept', 'outer write']);
      expect(store.getResource({ controller: 'jobs', key: 'inside' })).toBeUndefined();
    } finally {
      store.close();
    }
  });

  test('stores can share one StateDatabase; closing a store leaves it open', () => {
    const state = new StateDatabase({ filePath: file() });
    const a = new SqliteControllerStore('/ignored/path.sqlite', { state, projectPath: path.join(folder, 'a') });
    const b = new SqliteControllerStore(undefined, { state, projectPath: path.join(folder, 'b') });
    try {
      expect(a.state).toBe(state);
      expect(a.filePath).toBe(file());
      a.putResource(resource('k'));
      expect(b.getResource({ controller: 'jobs', key: 'k' })).toBeUndefined();
      a.close();
      expect(state.connection.open).toBe(true);
      b.putResource(resource('k'));
      expect(state.connection.prepare('SELECT count(*) FROM controller_resources').pluck().get()).toBe(2);
    } finally {
      b.close();
      state.close();
    }
    expect(() => b.listResources()).toThrow('The database connection is not open');
  });

  test('backup writes a verified 0600 copy', async () => {
    const store = new SqliteControllerStore(file(), { projectPath: folder });
    const copy = path.join(folder, 'backups', 'copy.sqlite');
    try {
      store.putResource(resource('k'));
      await store.state.backup(copy);
      await expect(store.state.backup(file())).rejects.toThrow('Backup destination must differ from the live database');
    } finally {
      store.close();
    }
    expect(fs.statSync(copy).mode & 0o777).toBe(0o600);
    const reopened = new SqliteControllerStore(copy, { readOnly: true, projectPath: folder });
    try {
      expect(reopened.getResource({ controller: 'jobs', key: 'k' }).spec).toEqual({ n: 1 });
    } finally {
      reopened.close();
    }
  });
});
