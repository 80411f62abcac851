// Records the controller write paths build from what they wrote (instead of reading the rows
// back) must equal the records the read methods give for the same rows afterwards, for every
// shape of caller value: each write's result is compared with the matching read.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

let dir: string;
let store: any;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-written-'));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ref = { controller: 'jobs', key: 'a' };

function claimed(): any {
  const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'w', leaseMs: 60_000 });
  expect(claim).toBeDefined();
  return claim;
}

// Documents whose canonical text is not in JSON.parse order (integer-like keys), a lone
// surrogate and nesting: the record must show them as the reads do.
const DOCUMENTS: unknown[] = [
  { phase: 'new' },
  { 10: 'ten', 9: 'nine', b: [1, { z: 1, a: 2 }] },
  { text: 'lone \ud800 surrogate', quote: '"\\\n' },
  'plain',
  null,
  [3, 2, 1],
];

test('putResource records equal getResource, created, unchanged and respecified', () => {
  for (const [index, spec] of DOCUMENTS.entries()) {
    const key = `k${index}`;
    const created = store.putResource({ controller: 'jobs', key, spec, initialStatus: spec });
    expect(JSON.stringify(created)).toBe(JSON.stringify(store.getResource({ controller: 'jobs', key })));
    const unchanged = store.putResource({ controller: 'jobs', key, spec, initialStatus: { ignored: true } });
    expect(JSON.stringify(unchanged)).toBe(JSON.stringify(store.getResource({ controller: 'jobs', key })));
    const changed = store.putResource({ controller: 'jobs', key, spec: { next: spec } });
    expect(changed.metadata.generation).toBe(2);
    expect(JSON.stringify(changed)).toBe(JSON.stringify(store.getResource({ controller: 'jobs', key })));
  }
});

test('putResource after deleteResource fails as before and keeps its blobs', () => {
  store.putResource({ ...ref, spec: { n: 1 } });
  const claim = claimed();
  store.requestDeletion(ref);
  expect(store.deleteResource(ref, claim.resourceVersion + 1, claim)).toBe(true);
  const blobs = () => store.state.connection.prepare('SELECT count(*) AS n FROM blobs').get().n;
  const before = blobs();
  expect(() => store.putResource({ ...ref, spec: { n: 'new spec' }, initialStatus: { s: 'new status' } })).toThrow(
    'UNIQUE constraint failed: resources.resource_id',
  );
  expect(blobs()).toBe(before + 2);
});

test('updateStatus records equal getResource, with and without finalizers', () => {
  store.putResource({ ...ref, spec: { n: 1 } });
  for (const [index, status] of DOCUMENTS.entries()) {
    const claim = claimed();
    const finalizers = index % 2 === 0 ? ['x.example/a', 'x.example/b'] : undefined;
    const updated = store.updateStatus({ ref, expectedResourceVersion: claim.resourceVersion, claim, status, finalizers });
    expect(claim.resourceVersion).toBe(updated.metadata.resourceVersion);
    expect(JSON.stringify(updated)).toBe(JSON.stringify(store.getResource(ref)));
    expect(store.settleClaim(claim)).toBe(true);
    store.enqueue(ref);
  }
});

test('recordEvent returns the seq listEvents shows', () => {
  store.putResource({ ...ref, spec: { n: 1 } });
  const claim = claimed();
  const first = store.recordEvent({ ...ref, claim, type: 'a', payload: { n: 1 } });
  const second = store.recordEvent({ ...ref, type: 'b' });
  const listed = store.listEvents({ ...ref, limit: 2 });
  expect(listed.map((event: any) => [event.seq, event.type])).toEqual([
    [second.seq, 'b'],
    [first.seq, 'a'],
  ]);
});

test('reads of a record in one statement equal the record read table by table', () => {
  const created = store.putResource({ ...ref, spec: { 10: 1, 9: 2 }, initialStatus: 'lone \udc00' });
  const finalizers = ['plain', 'quote " and \\ backslash', 'controls \u0001\t\n\u001f\u007f', 'line \u2028 sep', 'é 😀', ''];
  // updateFinalizers writes its record from the row, the blobs and the finalizers read apart.
  const written = store.updateFinalizers({ ref, expectedResourceVersion: created.metadata.resourceVersion, finalizers });
  expect(written.metadata.finalizers).toEqual(finalizers);
  const text = JSON.stringify(written);
  expect(JSON.stringify(store.getResource(ref))).toBe(text);
  expect(JSON.stringify(store.getResourceByUid(created.metadata.uid))).toBe(text);
  expect(JSON.stringify(store.listResources({ controller: 'jobs' }))).toBe(`[${text}]`);
});

test('listEvents payloads equal the payloads recorded, repeated ones included', () => {
  store.putResource({ ...ref, spec: { n: 1 } });
  const payloads = [{ b: 1, a: 2 }, { 10: 'x', 9: 'y' }, { s: 'lone \ud800' }, { b: 1, a: 2 }, undefined, null, 'text'];
  for (const payload of payloads) store.recordEvent({ ...ref, type: 'p', payload });
  const listed = store.listEvents({ ...ref, limit: payloads.length }).reverse();
  // JSON.stringify escapes the lone surrogate and JSON.parse reads it back: it round-trips.
  const expected = payloads.map((payload) => JSON.parse(JSON.stringify(payload ?? {})));
  expect(listed.map((event: any) => event.payload)).toEqual(expected);
});
