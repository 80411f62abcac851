// Controller events through the public API: recordEvent with and without a claim, and
// listEvents filtering, limits and scoping.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { failure } from './support/failure';

const { SqliteControllerStore, ResourceNotFoundError } = require('../index.js');

const T0 = Date.parse('2026-09-05T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

let dir: string;
let store: any;

function open(options: Record<string, unknown> = {}): any {
  return new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project'), ...options });
}

function sql(text: string): any[] {
  return store.state.connection.prepare(text).all();
}

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-controller-events-')));
  fs.mkdirSync(path.join(dir, 'project'));
  store = open();
  store.putResource({ controller: 'alpha', key: 'one', spec: {}, initialStatus: {} });
  store.putResource({ controller: 'alpha', key: 'two', spec: {}, initialStatus: {} });
  store.putResource({ controller: 'beta', key: 'one', spec: {}, initialStatus: {} });
});

afterEach(() => {
  store.close();
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('recordEvent', () => {
  test('without a claim the control plane is the actor; the payload is the caller object', () => {
    const payload = { z: 1, a: { b: [true] } };
    const event = store.recordEvent({ controller: 'alpha', key: 'one', type: 'note', payload, now: '2026-09-05T01:00:00Z' });
    expect(event).toEqual({
      seq: 4,
      recordedAt: '2026-09-05T01:00:00.000Z',
      controller: 'alpha',
      key: 'one',
      type: 'note',
      payload,
    });
    expect(event.payload).toBe(payload);
    expect(store.getResource({ controller: 'alpha', key: 'one' }).metadata.resourceVersion).toBe(2);
    expect(sql(`SELECT actor_type AS actor, actor_id AS id, lease_generation AS generation, resource_revision AS revision
                FROM events WHERE event_seq = 4`)).toEqual([{ actor: 'control', id: null, generation: null, revision: 2 }]);
    expect(store.listEvents({ limit: 1 })[0].payload).toEqual({ a: { b: [true] }, z: 1 });
  });

  test('a forged payload blob fails before a type that cannot be bound, as the put comes first', () => {
    const forged = require('node:crypto').createHash('sha256').update('{"f":1}').digest();
    store.state.connection.prepare('INSERT INTO blobs VALUES (?, ?, 1, ?, ?)').run(forged, 'application/json', Buffer.from('x'), T0);
    const call = () => failure(() => store.recordEvent({ controller: 'alpha', key: 'one', type: true, payload: { f: 1 } }));
    expect(call()).toMatchObject({ name: 'Error', message: 'Content-addressed blob conflict' });
    store.state.connection.prepare('DELETE FROM blobs WHERE blob_hash = ?').run(forged);
    expect(call()).toMatchObject({ name: 'TypeError', message: 'SQLite3 can only bind numbers, strings, bigints, buffers, and null' });
    expect(sql('SELECT count(*) AS n FROM events')).toEqual([{ n: 3 }]);
  });

  test('a missing payload is {}', () => {
    expect(store.recordEvent({ controller: 'alpha', key: 'two', type: 'bare' }).payload).toEqual({});
    expect(store.listEvents({ limit: 1 })[0].payload).toEqual({});
  });

  test('with a claim the holder is the actor and claim.resourceVersion follows', () => {
    const held = store.claimNext({ controllers: ['alpha'], ownerId: 'w1', leaseMs: 10_000 });
    const event = store.recordEvent({ controller: held.controller, key: held.key, claim: held, type: 'progress' });
    expect(held.resourceVersion).toBe(3);
    expect(event.recordedAt).toBe(iso(T0));
    expect(sql(`SELECT actor_type AS actor, actor_id AS id, lease_generation AS generation FROM events ORDER BY event_seq DESC LIMIT 1`)).toEqual([
      { actor: 'controller', id: 'w1', generation: 1 },
    ]);
  });

  test('error branches, in the reference order', () => {
    const held = store.claimNext({ controllers: ['alpha'], ownerId: 'w1', leaseMs: 10_000 });
    expect(failure(() => store.recordEvent({ controller: 'gamma', key: 'x', type: 't', now: 'never' })).message).toBe('Invalid timestamp');
    expect(() => store.recordEvent({ controller: 'gamma', key: 'x', type: 't' })).toThrow(ResourceNotFoundError);
    expect(failure(() => store.recordEvent({ controller: 'beta', key: 'one', claim: held, type: 't', payload: { n: NaN } })).message).toBe(
      'Controller claim targets another resource',
    );
    const stale = { ...held, ownerId: 'w2' };
    expect(failure(() => store.recordEvent({ controller: held.controller, key: held.key, claim: stale, type: 't' })).message).toBe(
      'Controller claim is stale',
    );
    expect(stale.resourceVersion).toBe(2);
    expect(failure(() => store.recordEvent({ controller: 'beta', key: 'one', type: 't', payload: { n: NaN } })).message).toBe(
      'JSON numbers must be finite',
    );
    expect(failure(() => store.recordEvent({ controller: 'beta', key: 'one', type: 't', payload: { f: undefined, g: [undefined] } })).message).toBe(
      'Unsupported JSON value type: undefined',
    );
    expect(store.getResource({ controller: 'beta', key: 'one' }).metadata.resourceVersion).toBe(1);
  });
  test('a type that is not a string is bound as better-sqlite3 binds it', () => {
    const record = (type: unknown) => store.recordEvent({ controller: 'alpha', key: 'one', type, payload: { t: 1 } });
    const stored = () => sql('SELECT event_type AS type FROM events ORDER BY event_seq DESC LIMIT 1')[0].type;
    expect(record(['a'])).toMatchObject({ seq: 4, type: ['a'], payload: { t: 1 } });
    expect(stored()).toBe('a');
    expect(record(5).type).toBe(5);
    expect(stored()).toBe('5.0');
    expect(record(10n).type).toBe(10n);
    expect(stored()).toBe('10');
    for (const [type, name, message] of [
      [null, 'SqliteError', 'NOT NULL constraint failed: events.event_type'],
      [undefined, 'SqliteError', 'NOT NULL constraint failed: events.event_type'],
      [['a', 'b'], 'RangeError', 'Too many parameter values were provided'],
      [[], 'RangeError', 'Too few parameter values were provided'],
      [{}, 'RangeError', 'Too few parameter values were provided'],
      [true, 'TypeError', 'SQLite3 can only bind numbers, strings, bigints, buffers, and null'],
    ]) {
      expect(failure(() => record(type))).toMatchObject({ name, message });
    }
    // Nothing of a failed call stays: the next event takes the next seq and revision.
    expect(record('ok')).toMatchObject({ seq: 7, type: 'ok' });
    expect(store.getResource({ controller: 'alpha', key: 'one' }).metadata.resourceVersion).toBe(5);
  });
});

describe('listEvents', () => {
  beforeEach(() => {
    for (let i = 0; i < 120; i += 1) {
      const [controller, key] = [['alpha', 'one'], ['alpha', 'two'], ['beta', 'one']][i % 3];
      store.recordEvent({ controller, key, type: `tick.${i}`, payload: { i } });
    }
  });

  test('newest first, 100 by default, with controller and key filters', () => {
    const all = store.listEvents();
    expect(all).toHaveLength(100);
    expect(all[0]).toEqual({ seq: 123, recordedAt: iso(T0), controller: 'beta', key: 'one', type: 'tick.119', payload: { i: 119 } });
    expect(store.listEvents({ controller: 'alpha', key: 'two', limit: 2 }).map((e: any) => e.type)).toEqual(['tick.118', 'tick.115']);
    expect(store.listEvents({ key: 'one', limit: 1000 })).toHaveLength(82);
    expect(store.listEvents({ controller: 'beta' }).every((e: any) => e.controller === 'beta')).toBe(true);
  });

  test('limit is bound as given: 0, -1 for all, and a fraction fails in SQLite', () => {
    expect(store.listEvents({ limit: 0 })).toEqual([]);
    expect(store.listEvents({ limit: -1 })).toHaveLength(123);
    expect(store.listEvents({ limit: null })).toHaveLength(100);
    expect(failure(() => store.listEvents({ limit: 2.5 }))).toEqual({
      name: 'SqliteError',
      message: 'datatype mismatch',
      code: 'SQLITE_MISMATCH',
    });
  });

  test('scoped to the project unless global', () => {
    fs.mkdirSync(path.join(dir, 'other'));
    const other = open({ projectPath: path.join(dir, 'other') });
    const global = open({ global: true });
    try {
      other.putResource({ controller: 'alpha', key: 'one', spec: {}, initialStatus: {} });
      expect(other.listEvents({ limit: -1 })).toHaveLength(1);
      expect(store.listEvents({ limit: -1 })).toHaveLength(123);
      expect(global.listEvents({ limit: -1 })).toHaveLength(124);
      expect(failure(() => global.recordEvent({ controller: 'alpha', key: 'one', type: 't' })).name).toBe('ResourceNotFoundError');
    } finally {
      other.close();
      global.close();
    }
  });
});
