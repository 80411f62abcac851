// Issue 34: the run index answers only what it can prove. Its `-runlog` journal was believed
// without proof; each case here is one of the issue's, done as it describes, and after each
// step every poll (revision, view pages, run lists) and a host's claim of every native store
// must equal what that store's own connection answers through SQL:
// 1. a stale journal — its writer killed with -9, or a foreign connection closing last — then a
//    foreign commit and `PRAGMA wal_checkpoint(TRUNCATE)` in the next session;
// 2. a symbolic link at the journal's name: never followed, its target untouched;
// 3. a journal pre-created by another user (uid 65534) with mode 0666, holding entries of an
//    earlier session: never used, written or deleted, and the store says why once;
// 4. an older copy of the state file renamed over its name while stores in two processes are
//    open and polling: no answer mixes the two files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Forked } from './support/forked';

const { SqliteControllerStore } = require('../index.js');
const { indexAndSql, iso, attempt } = require('./workers/xproc-actions.js');
const { addRunThroughApi } = require('../bench/scale-build.js');

const T0 = Date.parse('2026-12-06T00:00:00.000Z');
const folders: string[] = [];
const forked: Forked[] = [];

afterAll(async () => {
  await Promise.all(forked.map((worker) => worker.kill()));
  for (const folder of folders) fs.rmSync(folder, { recursive: true, force: true });
});

function folder(label: string): { dir: string; file: string; project: string; runlog: string } {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `piw-trust-${label}-`)));
  folders.push(dir);
  const project = path.join(dir, 'project');
  fs.mkdirSync(project);
  const file = path.join(dir, 'state.sqlite');
  return { dir, file, project, runlog: `${file}-runlog` };
}

function spawn(name: string, env: NodeJS.ProcessEnv = {}): Forked {
  const worker = new Forked(name, env);
  forked.push(worker);
  return worker;
}

/** A host's claim as Pi's host polls: no session, a fresh token each time. */
let claims = 0;
// (`claims` also numbers the oracle's copies.)
const hostClaim = (now: number) => ({ runnerId: 'host-x', claimToken: `host-claim-${(claims += 1)}`, leaseMs: 5_000, now: iso(now) });

/** Answers a host's claim through SQL alone: a process with `PIW_RUN_INDEX=off`. */
let oracle: Forked | undefined;
function claimOracle(): Forked {
  oracle ??= spawn('oracle', { PIW_RUN_INDEX: 'off' });
  return oracle;
}

/**
 * Every poll of `stores` (in this process) through the index equals the same poll through
 * SQL on the store's own connection; and a host's claim through the index takes the run the
 * same claim takes through SQL alone on a copy of what the store's connection sees.
 */
async function expectProven(stores: Record<string, any>, project: string, now: number, what: string): Promise<void> {
  for (const [name, store] of Object.entries(stores)) {
    const { sql, index } = indexAndSql(store);
    expect({ at: `${what}, store ${name}`, ...index }).toEqual({ at: `${what}, store ${name}`, ...sql });
    const copy = path.join(os.tmpdir(), `piw-trust-claim-${process.pid}-${(claims += 1)}.sqlite`);
    await store.state.backup(copy);
    const args = hostClaim(now);
    const want = await claimOracle().call('claimOnCopy', { copy, scope: name === 'all' ? null : project, args });
    expect({ at: `${what}, store ${name}, host claim`, ...attempt(() => store.claimNextWorkflowRun(args)) }).toEqual({
      at: `${what}, store ${name}, host claim`,
      ...want,
    });
  }
}

/** As `expectProven`, for the stores of another process. */
async function expectWorkerProven(worker: Forked, now: number, what: string): Promise<void> {
  const answers = await worker.call('check');
  for (const [name, { sql, index }] of Object.entries(answers as Record<string, any>)) {
    expect({ at: `${what}, ${worker.name} store ${name}`, ...index }).toEqual({ at: `${what}, ${worker.name} store ${name}`, ...sql });
    const copy = path.join(os.tmpdir(), `piw-trust-claim-${process.pid}-${(claims += 1)}.sqlite`);
    const scope = await worker.call('backup', { to: copy, store: name });
    const args = hostClaim(now);
    const want = await claimOracle().call('claimOnCopy', { copy, scope, args });
    const got = await worker.call('claim', { store: name, args });
    expect({ at: `${what}, ${worker.name} store ${name}, host claim`, ...got }).toEqual({ at: `${what}, ${worker.name} store ${name}, host claim`, ...want });
  }
}

/**
 * A first session that leaves journal entries behind: a native writer's lifecycles, with a
 * foreign `TRUNCATE` checkpoint after each of its steps (so that entries start at frame 0 in
 * many slots, which the old journal chained whatever the salt).
 */
async function firstSession(file: string, project: string): Promise<{ writer: Forked; raw: Forked; now: number }> {
  const writer = spawn('writer');
  await writer.call('native', { file, projectPath: project, seed: 7 });
  const raw = spawn('raw');
  await raw.call('raw', { file, seed: 8 });
  let now = T0;
  for (let step = 0; step < 40; step += 1) {
    now += 1_000;
    await writer.call('act', { now });
    await raw.call('exec', { sql: 'PRAGMA wal_checkpoint(TRUNCATE)' });
  }
  return { writer, raw, now };
}

/** The next session: native stores in this process, then foreign commits each checkpointed. */
async function nextSession(file: string, project: string, now: number): Promise<void> {
  const store = new SqliteControllerStore(file, { projectPath: project });
  const stores = { project: store, all: new SqliteControllerStore(file, { state: store.state, global: true }) };
  try {
    await expectProven(stores, project, now, 'opened');
    const raw = spawn('raw-2');
    await raw.call('raw', { file, seed: 9 });
    for (let step = 0; step < 12; step += 1) {
      now += 500;
      // A queued run made claimable (and the list revision moved by a millisecond), then the
      // log restarted: the shape of the 14–16 wrong polls.
      await raw.call('exec', {
        sql: `UPDATE run_queue SET available_at = 0, updated_at = updated_at + 1 WHERE rowid = (SELECT max(rowid) FROM run_queue WHERE status = 'queued');
              UPDATE run_queue SET updated_at = updated_at + 1 WHERE rowid = (SELECT min(rowid) FROM run_queue)`,
      });
      await raw.call('exec', { sql: 'PRAGMA wal_checkpoint(TRUNCATE)' });
      await expectProven(stores, project, now, `foreign commit ${step}`);
      await expectProven(stores, project, now, `foreign commit ${step}, again`);
    }
    await raw.close();
  } finally {
    store.close();
  }
}

describe('a journal of an earlier session is never believed', () => {
  test('after its writer was killed with -9', async () => {
    const { file, project, runlog } = folder('killed');
    const { writer, raw, now } = await firstSession(file, project);
    await raw.close();
    await writer.kill();
    expect(fs.existsSync(runlog)).toBe(true);
    await nextSession(file, project, now);
  });

  test('after a connection that is not this package closed last', async () => {
    const { file, project, runlog } = folder('foreign-last');
    const { writer, raw, now } = await firstSession(file, project);
    await writer.close();
    await raw.close();
    expect(fs.existsSync(runlog)).toBe(true);
    expect(fs.existsSync(`${file}-wal`)).toBe(false);
    await nextSession(file, project, now);
  });
});

/** The warnings this process emitted with `code` while `operation` ran. */
async function warningsDuring(code: string, operation: () => Promise<void> | void): Promise<string[]> {
  // Recorded, not printed.
  const spy = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  try {
    await operation();
    return spy.mock.calls.filter(([, options]: any[]) => options?.code === code).map(([message]) => String(message));
  } finally {
    spy.mockRestore();
  }
}

describe('a journal that is not private is never used, written or deleted', () => {
  test('a symbolic link at its name is not followed, and its target keeps every byte', async () => {
    const { dir, file, project, runlog } = folder('symlink');
    new SqliteControllerStore(file, { projectPath: project }).close();
    // The clean close's stamp (docs/run-index.md, "Across the last close") makes way for the link.
    expect(fs.statSync(runlog).size).toBe(64);
    fs.rmSync(runlog);
    const victim = path.join(dir, 'victim.txt');
    const bytes = Buffer.from('precious '.repeat(125).slice(0, 1120));
    fs.writeFileSync(victim, bytes);
    fs.symlinkSync(victim, runlog);
    let now = T0;
    const warnings = await warningsDuring('PIW_RUNLOG_REFUSED', async () => {
      const store = new SqliteControllerStore(file, { projectPath: project });
      const writer = spawn('symlink-writer');
      await writer.call('native', { file, projectPath: project, seed: 3 });
      const raw = spawn('symlink-raw');
      await raw.call('raw', { file, seed: 4 });
      try {
        for (let step = 0; step < 20; step += 1) {
          now += 1_000;
          await writer.call('act', { now });
          if (step % 4 === 3) await raw.call('act', { now });
          await expectProven({ project: store }, project, now, `step ${step}`);
        }
        await writer.close();
        await raw.close();
      } finally {
        store.close();
      }
    });
    expect(warnings).toEqual([`pi-workflows-native: the run index is off: ${runlog} is a symbolic link (a journal is never followed)`]);
    expect(fs.lstatSync(runlog).isSymbolicLink()).toBe(true);
    expect(fs.readFileSync(victim)).toEqual(bytes);
    expect(fs.statSync(victim).size).toBe(1120);
  });

  test("another user's world-writable journal, with entries of an earlier session, is refused", async () => {
    const { file, project, runlog } = folder('foreign-owner');
    // A genuine journal of this file, as another user could have kept it from an earlier
    // session, put back under the journal's name, owned by uid 65534 and writable by anyone.
    const writer = spawn('earlier');
    await writer.call('native', { file, projectPath: project, seed: 5 });
    let now = T0;
    for (let step = 0; step < 15; step += 1) await writer.call('act', { now: (now += 1_000) });
    const earlier = fs.readFileSync(runlog);
    await writer.close();
    // The last close took the journal along, or left a clean close's 64-byte stamp.
    if (fs.existsSync(runlog)) expect(fs.statSync(runlog).size).toBe(64);
    fs.rmSync(runlog, { force: true });
    fs.writeFileSync(runlog, earlier, { mode: 0o666 });
    fs.chmodSync(runlog, 0o666);
    const root = process.getuid?.() === 0;
    if (root) fs.chownSync(runlog, 65534, 65534);
    const before = fs.statSync(runlog);
    const warnings = await warningsDuring('PIW_RUNLOG_REFUSED', async () => {
      const store = new SqliteControllerStore(file, { projectPath: project });
      const other = spawn('later-writer');
      await other.call('native', { file, projectPath: project, seed: 6 });
      const raw = spawn('later-raw');
      await raw.call('raw', { file, seed: 7 });
      try {
        for (let step = 0; step < 20; step += 1) {
          now += 1_000;
          await other.call('act', { now });
          if (step % 3 === 2) await raw.call('act', { now });
          await expectProven({ project: store }, project, now, `step ${step}`);
          await expectWorkerProven(other, now, `step ${step}`);
        }
        // The other process was told too.
        expect((await other.call('warnings')).map((warning: any) => warning.code)).toEqual(['PIW_RUNLOG_REFUSED']);
        await other.close();
        await raw.close();
      } finally {
        store.close();
      }
    });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(root ? /is owned by uid 65534, the state file by uid 0$/ : /is writable by group or others \(mode 0666/);
    // Neither used, written nor deleted.
    const after = fs.statSync(runlog);
    expect([after.uid, after.mode & 0o777, after.size, after.mtimeMs, after.ino]).toEqual([before.uid, 0o666, before.size, before.mtimeMs, before.ino]);
    expect(fs.readFileSync(runlog)).toEqual(earlier);
  });
});

describe('a state file restored under open stores', () => {
  test('an older copy renamed over the name: every store keeps answering its own file', async () => {
    const { dir, file, project } = folder('restored');
    const store = new SqliteControllerStore(file, { projectPath: project });
    // Past the size the index is built in the poll at: builds happen in the background, on a
    // connection that opens the file by its name.
    for (let index = 0; index < 1_110; index += 1) addRunThroughApi(store, index);
    const copy = path.join(dir, 'backup.sqlite');
    await store.state.backup(copy);
    for (let index = 1_110; index < 1_120; index += 1) addRunThroughApi(store, index);
    const stores = { project: store, all: new SqliteControllerStore(file, { state: store.state, global: true }) };
    // Another Pi process and another application, both open before the restore.
    const other = spawn('open-before');
    await other.call('native', { file, projectPath: project, seed: 11 });
    const raw = spawn('raw-before');
    await raw.call('raw', { file, seed: 12 });
    let now = Date.now();
    await expectProven(stores, project, now, 'before the restore');
    await expectWorkerProven(other, now, 'before the restore');
    // The last runs reach the file itself, then the copy is put in its place.
    await raw.call('exec', { sql: 'PRAGMA wal_checkpoint(TRUNCATE)' });
    fs.renameSync(copy, file);
    try {
      for (let step = 0; step < 10; step += 1) {
        now += 1_000;
        // A commit no journal entry names (the file every open store has open).
        await raw.call('act', { now });
        // Long enough for a background build to finish and be offered to the next poll.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await expectProven(stores, project, now, `after the restore, poll ${step}`);
        await expectWorkerProven(other, now, `after the restore, poll ${step}`);
      }
      // The store's own file, not the copy: its 1,120 runs (less what the raw writer deleted).
      expect(store.listWorkflowRuns({}).length).toBeGreaterThan(1_110);
    } finally {
      await raw.close();
      await other.close();
      store.close();
    }
  });
});
