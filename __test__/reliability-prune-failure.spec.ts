// A read-write open's blob prune that fails after the constructor returned (issue 21, defect
// 2). The prune runs beside the caller (src/state/prune/at_open.rs); here its commit cannot be
// written: a child process lowers its own file-size limit right before the constructor (see
// reliability/prune-full-disk.js), so the commit's WAL writes fail as on a full disk. The
// reference prunes inside its constructor, which then throws SqliteError('disk I/O error',
// 'SQLITE_IOERR_WRITE'); here the first call that uses the state throws that error, once,
// marked as the open's prune's (`openPrune`, `filePath`, a note in the stack's first line),
// and every call after it works: the prune rolled back, no blob is gone.
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const { openStore, rows, tempDir } = require('./reliability/common.js');

const run = promisify(execFile);
const CHILD = path.join(__dirname, 'reliability', 'prune-full-disk.js');
/** Unreferenced blobs in the file: their delete writes about 120 KiB to the WAL, over LIMIT. */
const UNREFERENCED = 2000;
/** The resource's spec and status, and the empty JSON, are referenced and stay. */
const REFERENCED = 3;
/** Room for the shared-memory file (32 KiB, the WAL's index), not for the prune's commit. */
const LIMIT = 48 * 1024;

const hasPrlimit = (() => {
  try {
    execFileSync('prlimit', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

let dir: string;
let template: string;
let projectPath: string;
let file: string;

beforeAll(() => {
  dir = tempDir('prune-failure', { memory: true });
  projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
  template = path.join(dir, 'template.sqlite');
  const store = openStore(template, projectPath);
  store.putResource({ controller: 'c', key: 'k', spec: { a: 1 }, initialStatus: {} });
  store.state.transaction(() => {
    for (let index = 0; index < UNREFERENCED; index += 1) store.state.putText(`unreferenced ${index} ${'x'.repeat(1000)}`);
  });
  store.close();
  // Closed cleanly: the whole file, no WAL beside it, and none of its blobs pruned yet.
  expect(fs.readdirSync(dir).sort()).toEqual(['project', 'template.sqlite']);
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

let round = 0;
beforeEach(() => {
  round += 1;
  file = path.join(dir, `state-${round}.sqlite`);
  fs.copyFileSync(template, file);
});

afterEach(() => {
  for (const name of fs.readdirSync(dir)) if (name.startsWith(`state-${round}.`)) fs.rmSync(path.join(dir, name));
});

async function firstUse(use: string, project = projectPath): Promise<any> {
  const { stdout } = await run(process.execPath, [CHILD, file, project, use, String(LIMIT)]);
  return JSON.parse(stdout);
}

/** The blobs of the file, read without pruning them. */
function blobsOnFile(): number {
  const reader = openStore(file, projectPath, { readOnly: true });
  try {
    return rows(reader, 'SELECT COUNT(*) AS n FROM blobs')[0].n;
  } finally {
    reader.close();
  }
}

/** The reference constructor's error, and what marks it as the open's prune's. */
const pruneError = () => ({
  threw: {
    name: 'SqliteError',
    message: 'disk I/O error',
    code: 'SQLITE_IOERR_WRITE',
    ownKeys: ['code'],
    openPrune: true,
    filePath: file,
    header: `SqliteError: disk I/O error [the blob prune of the read-write open of ${file} failed and was rolled back]`,
  },
});

/** Everything after the report: the same use again, a read, every blob, a write, a close. */
const worksAfter = (again: unknown) => ({
  open: true,
  again,
  read: { returned: ['k'] },
  blobs: { returned: UNREFERENCED + REFERENCED },
  write: { returned: ['after', 'k'] },
  close: {},
});

(hasPrlimit ? describe : describe.skip)('a failed open prune is reported once, by the first use of the state', () => {
  test.each([
    ['a store read', 'read', { returned: ['k'] }],
    ['a store.async call', 'async', { returned: ['k'] }],
    ['connection.prepare', 'prepare', { returned: 1 }],
    ['connection.exec', 'exec', { returned: 'ok' }],
    ['a StateDatabase method', 'stateMethod', {}],
  ])('first use %s: throws the prune error, then the state works', async (_label, use, again) => {
    expect(await firstUse(use)).toEqual({ first: pruneError(), ...worksAfter(again) });
  });

  test.each([
    ['store.close()', 'close', {}],
    // The same promise again (close.spec.ts): the same report, not a second one.
    ['store.async.close()', 'asyncClose', 'the prune error'],
    ['state.close()', 'stateClose', {}],
  ])('first use %s: closes the file, then throws the prune error; closing again is quiet', async (_label, use, again) => {
    expect(await firstUse(use)).toEqual({
      first: pruneError(),
      open: false,
      again: again === 'the prune error' ? pruneError() : again,
      closeAgain: {},
      stateCloseAgain: {},
    });
    expect(blobsOnFile()).toBe(UNREFERENCED + REFERENCED);
  });

  test('connection.inTransaction answers without taking the report: the next call throws it', async () => {
    expect(await firstUse('inTransaction')).toEqual({
      first: { returned: false },
      next: pruneError(),
      ...worksAfter({ returned: false }),
    });
  });

  test('the constructor of a store for a new project (its upsert waits for the prune) throws it', async () => {
    const newProject = path.join(dir, `project-${round}`);
    fs.mkdirSync(newProject);
    expect(await firstUse('read', newProject)).toEqual({ constructor: pruneError() });
    expect(blobsOnFile()).toBe(UNREFERENCED + REFERENCED);
  });
});
