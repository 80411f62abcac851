// File hygiene: read-only stores never write, claim tokens exist only as hashes, and the state
// file (with its WAL and shared-memory files) is private: 0600 in a 0700 folder.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const { SqliteControllerStore, StateDatabase } = require('../index.js');
const { fileDigest, runReservation, tempDir } = require('./reliability/common.js');

let dir: string;
let file: string;
let projectPath: string;

beforeEach(() => {
  dir = tempDir('files');
  file = path.join(dir, 'state.sqlite');
  projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const open = (options: Record<string, unknown> = {}) => new SqliteControllerStore(file, { projectPath, ...options });
const mode = (target: string) => (fs.statSync(target).mode & 0o777).toString(8);

/** A file with one of everything: resources, a claim, an effect, a child workflow, runs, events. */
function populate(store: any): { controllerToken: string; runToken: string } {
  store.putResource({ controller: 'c', key: 'k', spec: { a: 1 }, initialStatus: {} });
  store.putResource({ controller: 'c', key: 'k2', spec: { a: 2 }, initialStatus: {} });
  const claim = store.claimNext({ controllers: ['c'], ownerId: 'owner', leaseMs: 60_000 });
  const resource = store.getResource({ controller: 'c', key: claim.key });
  store.reserveEffect({ key: 'e', resourceUid: resource.metadata.uid, claim, generation: 1, kind: 'mail', requestFingerprint: 'fp' });
  store.reserveWorkflow({ resourceUid: resource.metadata.uid, claim, requestKey: 'q', workflow: 'child', inputFingerprint: 'a1'.repeat(32) });
  store.recordEvent({ controller: 'c', key: claim.key, claim, type: 'note', payload: { x: 1 } });
  store.reserveWorkflowRun(runReservation('run-1'));
  const runToken = 'run-token-that-must-never-be-stored-in-clear';
  store.claimWorkflowRun({ runId: 'run-1', runnerId: 'setup', claimToken: runToken, leaseMs: 60_000 });
  store.markWorkflowRunRunning({ runId: 'run-1', claimToken: runToken });
  store.recordRunEvent({ runId: 'run-1', workflowRef: 'builtin:echo', type: 'progress', payload: { y: 2 } });
  store.reserveWorkflowRun(runReservation('run-2'));
  return { controllerToken: claim.token, runToken };
}

/** Every read method of the store, with arguments that find something. */
function readEverything(store: any): void {
  const resource = store.getResource({ controller: 'c', key: 'k' });
  store.getResourceByUid(resource.metadata.uid);
  store.listResources();
  store.listResources({ controller: 'c' });
  store.listQueue();
  store.getEffect(resource.metadata.uid, 'e');
  store.listEffects(resource.metadata.uid);
  store.getWorkflow(resource.metadata.uid, 'q');
  store.listWorkflows(resource.metadata.uid);
  store.listEvents({});
  store.listEvents({ controller: 'c', key: 'k', limit: 5 });
  store.getWorkflowRun('run-1');
  store.getWorkflowRunView('run-1');
  store.workflowRunListRevision();
  store.listWorkflowRunViews({ offset: 0, limit: 10 });
  store.workflowRunProjectPath('run-1');
  store.listWorkflowRuns({});
  store.findSessionReservation('session-run-1');
  store.findSessionReservationView('session-run-1');
  store.isWorkflowRunPaused('run-1');
  store.verifyWorkflowRunClaim({ runId: 'run-1', claimToken: 'x' });
  store.workflowRunAuthority('run-1', 'x');
  store.listRunEventsAfter(0, { limit: 100 });
  store.state.integrityCheck();
  store.state.connection.prepare('SELECT COUNT(*) FROM events').get();
}

/** Every write method, each of which must be refused by a read-only store. */
const WRITES: Array<[string, unknown[]]> = [
  ['putResource', [{ controller: 'c', key: 'new', spec: {}, initialStatus: {} }]],
  ['requestDeletion', [{ controller: 'c', key: 'k' }]],
  ['updateFinalizers', [{ ref: { controller: 'c', key: 'k' }, expectedResourceVersion: 1, finalizers: [] }]],
  ['enqueue', [{ controller: 'c', key: 'k' }]],
  ['claimNext', [{ controllers: ['c'], ownerId: 'o', leaseMs: 1000 }]],
  ['recordEvent', [{ controller: 'c', key: 'k', type: 'note' }]],
  ['reserveWorkflowRun', [runReservation('run-3')]],
  ['claimWorkflowRun', [{ runId: 'run-2', runnerId: 'setup', claimToken: 't', leaseMs: 1000 }]],
  ['claimNextWorkflowRun', [{ runnerId: 'setup', claimToken: 't', leaseMs: 1000 }]],
  ['cancelWorkflowRun', [{ runId: 'run-2' }]],
  ['setWorkflowRunOriginSession', ['run-2', 'other-session']],
  ['recordRunEvent', [{ runId: 'run-1', workflowRef: 'x', type: 'y' }]],
];

describe('read-only stores never write', () => {
  test('the file bytes are unchanged after every read and every refused write (clean file)', () => {
    const writer = open();
    populate(writer);
    writer.close();
    const before = fileDigest(file);
    const wal = fileDigest(`${file}-wal`);

    const reader = open({ readOnly: true });
    readEverything(reader);
    for (const [method, args] of WRITES) {
      expect(() => reader[method](...args)).toThrow(/read-only|readonly/);
    }
    // Nothing to settle: returns without writing, as in the reference.
    expect(reader.settleRunEffect('run-1', 'run.park_queue')).toBeUndefined();
    expect(() => reader.state.putJson({ a: 1 })).toThrow(/read-only|readonly/);
    expect(() => reader.state.pruneUnreferencedBlobs()).toThrow(/read-only|readonly/);
    expect(() => reader.state.connection.prepare("DELETE FROM blobs").run()).toThrow();
    reader.close();

    expect(fileDigest(file)).toBe(before);
    // A read-only connection may create SQLite's empty WAL and shared-memory index; it never
    // writes content into the WAL.
    const walAfter = fileDigest(`${file}-wal`);
    expect(walAfter === wal || fs.statSync(`${file}-wal`).size === 0).toBe(true);
  });

  test('a read-only store next to a live writer changes neither the file nor the WAL', () => {
    const writer = open();
    populate(writer);
    const before = fileDigest(file);
    const walBefore = fileDigest(`${file}-wal`);
    const reader = open({ readOnly: true });
    readEverything(reader);
    for (const [method, args] of WRITES) {
      expect(() => reader[method](...args)).toThrow(/read-only|readonly/);
    }
    reader.close();
    expect(fileDigest(file)).toBe(before);
    expect(fileDigest(`${file}-wal`)).toBe(walBefore);
    writer.close();
  });

  test('a read-only StateDatabase refuses transactions and blob writes', () => {
    open().close();
    const before = fileDigest(file);
    const state = new StateDatabase({ filePath: file, mode: 'read-only' });
    expect(() => state.transaction(() => 1)).toThrow('Cannot mutate a read-only Pi Workflows database');
    expect(() => state.putText('x')).toThrow('Cannot write a blob through a read-only Pi Workflows database');
    state.close();
    expect(fileDigest(file)).toBe(before);
  });
});

describe('claim tokens exist only as hashes', () => {
  function bytesOfEveryFile(): Buffer {
    return Buffer.concat(
      fs
        .readdirSync(dir)
        .filter((name) => name.startsWith('state.sqlite'))
        .map((name) => fs.readFileSync(path.join(dir, name))),
    );
  }

  test('neither controller nor run tokens appear in the file or its WAL, only their sha256', () => {
    const store = open();
    const { controllerToken, runToken } = populate(store);
    const check = () => {
      const bytes = bytesOfEveryFile();
      for (const token of [controllerToken, runToken]) {
        expect(bytes.includes(Buffer.from(token, 'utf8'))).toBe(false);
        expect(bytes.includes(Buffer.from(token, 'utf16le'))).toBe(false);
      }
    };
    check(); // while open: the data sits in the WAL
    const hashes = store.state.connection
      .prepare('SELECT token_hash FROM leases WHERE token_hash IS NOT NULL')
      .all()
      .map((row: { token_hash: Buffer }) => row.token_hash.toString('hex'));
    expect(hashes).toEqual(
      expect.arrayContaining([
        crypto.createHash('sha256').update(controllerToken).digest('hex'),
        crypto.createHash('sha256').update(runToken).digest('hex'),
      ]),
    );
    store.close();
    check(); // after the checkpoint into the main file
  });
});

describe('files are private', () => {
  test('a new state file is 0600 in a 0700 folder, and so are its WAL and shared-memory files', () => {
    const nested = path.join(dir, 'home', '.pi', 'agent', 'workflows', 'state.sqlite');
    const store = new SqliteControllerStore(nested, { projectPath });
    store.putResource({ controller: 'c', key: 'k', spec: {}, initialStatus: {} });
    expect(mode(path.dirname(nested))).toBe('700');
    expect(mode(nested)).toBe('600');
    expect(mode(`${nested}-wal`)).toBe('600');
    expect(mode(`${nested}-shm`)).toBe('600');
    store.close();
    expect(mode(nested)).toBe('600');
  });

  test('a backup is 0600', async () => {
    const store = open();
    populate(store);
    const target = path.join(dir, 'backups', 'copy.sqlite');
    await store.state.backup(target);
    store.close();
    expect(mode(target)).toBe('600');
    expect(mode(path.dirname(target))).toBe('700');
  });
});
