// Controller effects through the public API: reserveEffect, getEffect, updateEffect and
// listEffects, with the idempotency rules and every error branch.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { failure } from './support/failure';

const { SqliteControllerStore, EffectRequestConflictError } = require('../index.js');

const T0 = Date.parse('2026-09-03T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

let dir: string;
let store: any;
let uid: string;
let held: any;

function sql(text: string, ...params: unknown[]): any {
  return store.state.connection.prepare(text).all(...params);
}

function reserve(options: Record<string, unknown> = {}): any {
  return store.reserveEffect({
    key: 'send-1',
    resourceUid: uid,
    claim: held,
    generation: 1,
    kind: 'email.send',
    requestFingerprint: 'fp-1',
    ...options,
  });
}

function update(options: Record<string, unknown>): any {
  return store.updateEffect({ resourceUid: uid, key: 'send-1', claim: held, ...options });
}

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-controller-effects-')));
  fs.mkdirSync(path.join(dir, 'project'));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: path.join(dir, 'project') });
  uid = store.putResource({ controller: 'mailer', key: 'welcome', spec: {}, initialStatus: {} }).metadata.uid;
  store.putResource({ controller: 'mailer', key: 'other', spec: {}, initialStatus: {}, now: iso(T0 + 1) });
  held = store.claimNext({ controllers: ['mailer'], ownerId: 'mail-worker', leaseMs: 60_000 });
});

afterEach(() => {
  store.close();
  jest.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('reserveEffect', () => {
  test('creates a pending effect with its own resource, lease, payload and event', () => {
    const reservation = reserve();
    expect(reservation).toEqual({
      record: {
        key: 'send-1',
        resourceUid: uid,
        generation: 1,
        kind: 'email.send',
        state: 'pending',
        requestFingerprint: 'fp-1',
        startedAt: iso(T0),
      },
      created: true,
    });
    expect(sql(`SELECT CAST(b.content AS TEXT) AS payload, e.owner_scope AS scope, e.source_revision AS revision
                FROM effects e JOIN blobs b ON b.blob_hash = e.payload_hash`)).toEqual([
      {
        payload: `{"generation":1,"key":"send-1","kind":"email.send","requestFingerprint":"fp-1","resourceUid":"${uid}"}`,
        scope: 'controller',
        revision: 2,
      },
    ]);
    expect(sql(`SELECT r.resource_type AS type, e.event_type AS event, e.actor_id AS actor, e.lease_generation AS generation
                FROM events e JOIN resources r ON r.resource_id = e.resource_id WHERE r.resource_type = 'effect'`)).toEqual([
      { type: 'effect', event: 'effect.reserved', actor: 'mail-worker', generation: 1 },
    ]);
  });

  test('reusing a key returns the record unless the generation, kind or fingerprint differ', () => {
    const created = reserve().record;
    expect(reserve()).toEqual({ record: created, created: false });
    for (const change of [{ generation: 2 }, { kind: 'email.other' }, { requestFingerprint: 'fp-2' }]) {
      expect(() => reserve(change)).toThrow(EffectRequestConflictError);
    }
    expect(failure(() => reserve({ generation: 2 }))).toEqual({
      name: 'EffectRequestConflictError',
      message: 'Effect key "send-1" was reused with a different request',
    });
  });

  test('compares the stored fingerprint with strict equality, keeping its JSON type', () => {
    expect(reserve({ key: 'n', requestFingerprint: 7 }).record.requestFingerprint).toBe(7);
    expect(reserve({ key: 'n', requestFingerprint: 7 }).created).toBe(false);
    expect(failure(() => reserve({ key: 'n', requestFingerprint: '7' })).name).toBe('EffectRequestConflictError');
    expect(failure(() => reserve({ key: 'n', generation: '1', requestFingerprint: 7 })).name).toBe('EffectRequestConflictError');
  });

  test('the effect reports the resource generation of today', () => {
    reserve();
    store.putResource({ controller: 'mailer', key: 'welcome', spec: { v: 2 }, initialStatus: {} });
    expect(store.getEffect(uid, 'send-1').generation).toBe(2);
  });

  test('error branches', () => {
    expect(failure(() => reserve({ resourceUid: 'bogus-uid', now: 'bad' })).message).toBe('Invalid timestamp');
    expect(failure(() => reserve({ resourceUid: 'bogus-uid' })).message).toBe('Controller resource not found: bogus-uid');
    const otherUid = store.getResource({ controller: 'mailer', key: 'other' }).metadata.uid;
    expect(failure(() => reserve({ resourceUid: otherUid })).message).toBe('Controller claim targets another resource');
    expect(failure(() => reserve({ claim: { ...held, token: 'forged' } })).message).toBe('Controller claim is stale');
    expect(failure(() => reserve({ now: iso(T0 + 60_000) })).message).toBe('Controller claim is stale');
    expect(failure(() => reserve({ generation: NaN })).message).toBe('JSON numbers must be finite');
    expect(sql('SELECT count(*) AS n FROM effects')).toEqual([{ n: 0 }]);
  });
});

describe('getEffect, updateEffect and listEffects', () => {
  test('updateEffect moves through every state', () => {
    reserve();
    const applied = update({ state: 'applied', externalRef: 'msg-42', now: iso(T0 + 1_000) });
    expect(applied).toEqual({
      key: 'send-1',
      resourceUid: uid,
      generation: 1,
      kind: 'email.send',
      state: 'applied',
      requestFingerprint: 'fp-1',
      startedAt: iso(T0),
      completedAt: iso(T0 + 1_000),
      externalRef: 'msg-42',
    });
    const rejected = update({ state: 'rejected', error: 'mailbox full' });
    expect(rejected).toMatchObject({ state: 'rejected', completedAt: iso(T0), error: 'mailbox full' });
    expect(rejected.externalRef).toBeUndefined();
    expect(update({ state: 'indeterminate' }).state).toBe('indeterminate');
    expect(sql('SELECT status FROM effects')).toEqual([{ status: 'ambiguous' }]);
    const pending = update({ state: 'pending' });
    expect(Object.keys(pending)).toEqual(['key', 'resourceUid', 'generation', 'kind', 'state', 'requestFingerprint', 'startedAt']);
    expect(store.getEffect(uid, 'send-1')).toEqual(pending);
    expect(sql(`SELECT e.event_type AS type, e.resource_revision AS revision FROM events e
                JOIN resources r ON r.resource_id = e.resource_id WHERE r.resource_type = 'effect' ORDER BY e.event_seq`)).toEqual([
      { type: 'effect.reserved', revision: 1 },
      { type: 'effect.applied', revision: 2 },
      { type: 'effect.rejected', revision: 3 },
      { type: 'effect.indeterminate', revision: 4 },
      { type: 'effect.pending', revision: 5 },
    ]);
  });

  test('updateEffect error branches', () => {
    reserve();
    expect(failure(() => update({ state: 'applied', now: '-' })).message).toBe('Invalid timestamp');
    expect(failure(() => update({ resourceUid: 'no-such-uid', state: 'applied' })).message).toBe(
      'Controller resource not found: no-such-uid',
    );
    expect(failure(() => update({ claim: { ...held, ownerId: 'intruder' }, state: 'applied' })).message).toBe(
      'Controller claim is stale',
    );
    expect(failure(() => update({ key: 'nope', state: 'applied' })).message).toBe(`Effect record not found: ${uid}/nope`);
    expect(failure(() => update({ state: 'done' }))).toMatchObject({ name: 'SqliteError', code: 'SQLITE_CONSTRAINT_CHECK' });
    expect(store.getEffect(uid, 'send-1').state).toBe('pending');
  });

  test('updateEffect bumps the resource whose id it computes, read with the row or looked up', () => {
    // The revision is read with the effect row where the row names the resource the reference
    // computes (`resourceIdFor('effect', effectId)`); a row naming another, or a missing
    // resource, is looked up by the computed id, as the reference reads it.
    const write = (text: string, ...params: unknown[]) => store.state.connection.prepare(text).run(...params);
    reserve();
    const [effect] = sql(`SELECT effect_id, resource_id FROM effects`);
    const revisionOf = (id: string) => sql(`SELECT revision FROM resources WHERE resource_id = ?`, id)[0]?.revision;
    const source = sql(`SELECT resource_id FROM controller_resources WHERE uid = ?`, uid)[0].resource_id;
    const sourceRevision = revisionOf(source);
    write(`UPDATE effects SET resource_id = ? WHERE effect_id = ?`, source, effect.effect_id);
    update({ state: 'applied' });
    expect(revisionOf(effect.resource_id)).toBe(2);
    expect(revisionOf(source)).toBe(sourceRevision);
    const events = sql(`SELECT resource_revision, event_type FROM events WHERE resource_id = ? ORDER BY event_seq`, effect.resource_id);
    expect(events).toEqual([
      { resource_revision: 1, event_type: 'effect.reserved' },
      { resource_revision: 2, event_type: 'effect.applied' },
    ]);
    store.state.connection.exec('PRAGMA foreign_keys = OFF');
    write(`UPDATE effects SET resource_id = ? WHERE effect_id = ?`, effect.resource_id, effect.effect_id);
    write(`UPDATE resources SET resource_id = 'moved' WHERE resource_id = ?`, effect.resource_id);
    expect(failure(() => update({ state: 'failed' })).message).toBe(`Resource is missing: ${effect.resource_id}`);
  });

  test('reads of unknown uids and keys', () => {
    reserve();
    expect(store.getEffect(uid, 'nope')).toBeUndefined();
    expect(store.getEffect('nope', 'send-1')).toBeUndefined();
    expect(store.listEffects('nope')).toEqual([]);
  });

  test('listEffects orders by creation time, then effect id', () => {
    reserve({ key: 'late', now: iso(T0 + 5) });
    reserve({ key: 'b' });
    reserve({ key: 'a' });
    const listed = store.listEffects(uid).map((record: any) => record.key);
    expect(listed[2]).toBe('late');
    const ids = sql(`SELECT idempotency_key AS key FROM effects WHERE created_at = ? ORDER BY effect_id`, T0);
    expect(listed.slice(0, 2)).toEqual(ids.map((row: any) => row.key));
  });

  test('records keep the stored type of every caller value, written and read alike', () => {
    // What reserveEffect and updateEffect return for each shape of caller value, in field
    // order: a fingerprint is what json_extract gives of the stored payload (true is 1, an
    // object its JSON text), `indeterminate` is stored as `ambiguous`, an empty error is kept.
    const done = iso(T0 + 1);
    const cases: [unknown, Record<string, unknown>, unknown, string, Record<string, unknown>][] = [
      ['f', { state: 'applied' }, 'f', 'applied', { completedAt: done }],
      [undefined, { state: 'indeterminate', externalRef: 'ext-1' }, null, 'indeterminate', { completedAt: done, externalRef: 'ext-1' }],
      [null, { state: 'ambiguous', externalRef: null }, null, 'indeterminate', { completedAt: done }],
      [7, { state: 'rejected', error: 'it failed \u2028' }, 7, 'rejected', { completedAt: done, error: 'it failed \u2028' }],
      [1.5, { state: 'pending' }, 1.5, 'pending', {}],
      [true, { state: 'applying', error: '' }, 1, 'applying', { completedAt: done, error: '' }],
      [{ b: [1], a: 'x' }, { state: 'cancelled', externalRef: 'x', error: 'e' }, '{"a":"x","b":[1]}', 'cancelled', { completedAt: done, externalRef: 'x', error: 'e' }],
      ['', { state: 'applied', externalRef: undefined }, '', 'applied', { completedAt: done }],
    ];
    for (const [index, [requestFingerprint, change, fingerprint, state, extra]] of cases.entries()) {
      const key = `effect-${index}`;
      const record = (recordState: string, fields: Record<string, unknown>) =>
        JSON.stringify({ key, resourceUid: uid, generation: 1, kind: 'k', state: recordState, requestFingerprint: fingerprint, startedAt: iso(T0), ...fields });
      const reserved = reserve({ key, kind: 'k', requestFingerprint, now: iso(T0) });
      expect(JSON.stringify(reserved)).toBe(`{"record":${record('pending', {})},"created":true}`);
      expect(JSON.stringify(update({ key, ...change, now: done }))).toBe(record(state, extra));
      expect(JSON.stringify(store.getEffect(uid, key))).toBe(record(state, extra));
    }
    const listed = new Map(store.listEffects(uid).map((record: any) => [record.key, record.requestFingerprint]));
    expect(listed).toEqual(new Map(cases.map((c, index) => [`effect-${index}`, c[2]])));
  });
});
