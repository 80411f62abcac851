// File-system errors at the open say why and what to do (issue 22): a `hint` property
// (non-enumerable, and a `hint:` line of the stack after the message), with the reference's
// class, message and own enumerable properties kept wherever the reference throws the same
// thing. Permission cases run the open in a child process as the user nobody (skipped unless
// this runs as root, which can switch to that user).
import childProcess from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const ROOT = path.resolve(__dirname, '..');
const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const whenRoot = asRoot ? test : test.skip;

let dir: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-hints-')));
  fs.chmodSync(dir, 0o755); // nobody may look inside
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

type Outcome = {
  opened?: true;
  name?: string;
  message?: string;
  props?: Record<string, unknown>;
  filePath?: string;
  hint?: string;
  header?: string;
};

/** Opens `file` in a child process (as `uid`, in `cwd`) and reports what happened. */
function openInChild(file: string, { readOnly = false, uid, cwd }: { readOnly?: boolean; uid?: number; cwd?: string }): Outcome {
  const script = `
    const { SqliteControllerStore } = require(${JSON.stringify(ROOT)});
    try {
      new SqliteControllerStore(${JSON.stringify(file)}, { global: true, readOnly: ${readOnly} }).close();
      console.log(JSON.stringify({ opened: true }));
    } catch (error) {
      console.log(JSON.stringify({
        name: error.name, message: error.message, props: { ...error }, filePath: error.filePath, hint: error.hint,
        header: error.stack.slice(0, error.stack.indexOf('\\n    at ')),
      }));
    }`;
  const child = childProcess.spawnSync(process.execPath, ['-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
    cwd: cwd ?? dir,
    ...(uid === undefined ? {} : { uid, gid: uid }),
  });
  if (child.error !== undefined) throw child.error;
  expect(child.stderr).toBe('');
  return JSON.parse(child.stdout.trim());
}

/** What `fn` throws, or fails the test when it returns. */
function thrown(fn: () => unknown): any {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

/** A complete state file at `file`, made and closed by this (root) process. */
function stateFile(file: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  new SqliteControllerStore(file, { global: true }).close();
  // Only the file, as its owner's reference store leaves it (not this package's close stamp).
  fs.rmSync(`${file}-runlog`, { force: true });
  return file;
}

const entries = (folder: string) => fs.readdirSync(folder).sort();

test('withHint keeps the message and the enumerable properties, and shows the hint in the stack', () => {
  const file = path.join(dir, 'a-folder');
  fs.mkdirSync(file);
  const error = thrown(() => new SqliteControllerStore(file, { global: true }));
  expect(Object.keys(error)).toEqual(['code']);
  expect(Object.getOwnPropertyDescriptor(error, 'hint')).toMatchObject({ enumerable: false });
  const header = error.stack.split('\n    at ')[0];
  expect(header).toBe(`SqliteError: unable to open database file [state file: ${file}]\n  hint: ${error.hint}`);
});

describe('a read-only open in a folder this user cannot write', () => {
  whenRoot('keeps SQLite’s error, names the file, says why and what to do, creates nothing', () => {
    const folder = path.join(dir, 'theirs');
    const file = stateFile(path.join(folder, 'state.sqlite'));
    fs.chmodSync(folder, 0o755);
    fs.chmodSync(file, 0o644);
    const outcome = openInChild(file, { readOnly: true, uid: NOBODY });
    expect(outcome).toMatchObject({
      name: 'SqliteError',
      message: 'attempt to write a readonly database',
      props: { code: 'SQLITE_READONLY_DIRECTORY' },
      filePath: file,
    });
    expect(outcome.hint).toContain(`nor created in ${folder}, which you cannot write`);
    expect(outcome.hint).toContain('copy the file');
    expect(outcome.header).toBe(`SqliteError: attempt to write a readonly database [state file: ${file}]\n  hint: ${outcome.hint}`);
    expect(entries(folder)).toEqual(['state.sqlite']);
  });
});

describe('another user’s 0444 state file', () => {
  let folder: string;
  let file: string;
  let bytes: Buffer;

  beforeEach(() => {
    folder = path.join(dir, 'shared');
    file = stateFile(path.join(folder, 'state.sqlite'));
    fs.chmodSync(file, 0o444);
    fs.chmodSync(folder, 0o1777); // anyone may create files beside it
    bytes = fs.readFileSync(file);
  });

  whenRoot('read-write: EACCES before anything is opened, with a hint about readOnly, nothing changed', () => {
    const outcome = openInChild(file, { uid: NOBODY });
    expect(outcome).toMatchObject({
      name: 'Error',
      message: `EACCES: permission denied, access '${file}'`,
      props: { code: 'EACCES', syscall: 'access', path: file },
    });
    expect(outcome.message).not.toContain('chmod');
    expect(outcome.hint).toBe(
      'You cannot write this state file (owner uid 0, mode 0444). To read it, open it with readOnly: true; to change it, run as its owner.',
    );
    expect(entries(folder)).toEqual(['state.sqlite']);
    expect(fs.readFileSync(file).equals(bytes)).toBe(true);
    expect(fs.statSync(file).mode & 0o777).toBe(0o444);
  });

  whenRoot('read-only, with no -wal and -shm beside it: refused, so none is left owned by this user', () => {
    const outcome = openInChild(file, { readOnly: true, uid: NOBODY });
    expect(outcome).toMatchObject({
      name: 'Error',
      message:
        'Pi Workflows state database belongs to another user (uid 0); a read-only open would create ' +
        `state.sqlite-wal and state.sqlite-shm beside it as uid ${NOBODY}, which its owner could not write: ${file}`,
      props: {},
    });
    expect(outcome.hint).toContain('Open it as its owner (uid 0), or copy the file');
    expect(entries(folder)).toEqual(['state.sqlite']);
  });

  whenRoot('read-only, with the owner’s -wal and -shm there and readable: opens and reads', () => {
    // The owner's read-only open leaves them (as better-sqlite3's does); make them readable to all.
    new SqliteControllerStore(file, { global: true, readOnly: true }).close();
    expect(entries(folder)).toEqual(['state.sqlite', 'state.sqlite-shm', 'state.sqlite-wal']);
    for (const suffix of ['-wal', '-shm']) fs.chmodSync(file + suffix, 0o644);
    expect(openInChild(file, { readOnly: true, uid: NOBODY })).toEqual({ opened: true });
    for (const suffix of ['-wal', '-shm']) expect(fs.statSync(file + suffix).uid).toBe(0);
  });

  whenRoot('a file writable to all but not this user’s: the reference’s EPERM from chmod, with a hint', () => {
    fs.chmodSync(file, 0o666);
    const outcome = openInChild(file, { uid: NOBODY });
    expect(outcome).toMatchObject({ message: `EPERM: operation not permitted, chmod '${file}'`, props: { code: 'EPERM' } });
    expect(outcome.hint).toContain('The state file belongs to uid 0: a read-write open makes it private (mode 0600)');
    expect(outcome.hint).toContain('readOnly: true');
  });
});

describe('a path whose parent is a file', () => {
  test.each([
    ['the parent itself', ['state.sqlite'], 'EEXIST', 'mkdir'],
    ['a grandparent', ['sub', 'state.sqlite'], 'ENOTDIR', 'mkdir'],
  ])('%s: Node’s mkdir error, with filePath, [state file: …] and a hint naming the file', (_, rest, code, syscall) => {
    const blocker = path.join(dir, 'notes.txt');
    fs.writeFileSync(blocker, 'not a folder');
    const file = path.join(blocker, ...rest);
    const error = thrown(() => new SqliteControllerStore(file, { global: true }));
    expect(error).toMatchObject({ code, syscall });
    expect(error.message).toMatch(new RegExp(`^${code}: `));
    expect(Object.keys(error).sort()).toEqual(['code', 'errno', 'path', 'syscall']);
    expect(error.filePath).toBe(file);
    expect(error.hint).toContain(`${blocker} is a file, not a folder`);
    expect(error.hint).toContain('Move or rename that file, or choose another state path.');
    expect(error.stack.split('\n    at ')[0]).toBe(`Error: ${error.message} [state file: ${file}]\n  hint: ${error.hint}`);
    expect(fs.readFileSync(blocker, 'utf8')).toBe('not a folder');
  });
});

describe('a path that is a folder', () => {
  test.each([
    [false, 'unable to open database file', 'SQLITE_CANTOPEN'],
    [true, 'disk I/O error', 'SQLITE_IOERR_READ'],
  ])('readOnly %s: SQLite’s error, with a hint naming the file to give instead', (readOnly, message, code) => {
    const folder = path.join(dir, 'workflows');
    fs.mkdirSync(folder);
    const error = thrown(() => new SqliteControllerStore(folder, { global: true, readOnly }));
    expect(error).toMatchObject({ name: 'SqliteError', message, code });
    expect(error.filePath).toBe(folder);
    expect(error.hint).toBe(`${folder} is a folder. Give the path of the state file, such as ${path.join(folder, 'state.sqlite')}.`);
    expect(entries(folder)).toEqual([]);
  });
});

describe('a path that starts with "~"', () => {
  test('read-write: refused instead of creating ./~/…, with the absolute path to give', () => {
    const outcome = openInChild('~/x/state.sqlite', { cwd: dir });
    expect(outcome).toMatchObject({
      name: 'Error',
      message: `Pi Workflows state path "~/x/state.sqlite" starts with "~", which would create ${path.join(dir, '~', 'x', 'state.sqlite')}`,
      props: {},
    });
    expect(outcome.hint).toContain('Node does not expand "~"');
    expect(outcome.hint).toContain('path.join(os.homedir(), "x/state.sqlite")');
    expect(entries(dir)).toEqual([]);
  });

  test('read-only: the reference’s does-not-exist error, with the same hint', () => {
    const outcome = openInChild('~/x/state.sqlite', { cwd: dir, readOnly: true });
    expect(outcome.message).toBe(`Pi Workflows state database does not exist: ${path.join(dir, '~', 'x', 'state.sqlite')}`);
    expect(outcome.hint).toContain('Node does not expand "~"');
    expect(entries(dir)).toEqual([]);
  });

  test('a folder really named "~" in the current folder is opened like any other', () => {
    fs.mkdirSync(path.join(dir, '~'));
    expect(openInChild('~/state.sqlite', { cwd: dir })).toEqual({ opened: true });
    expect(entries(path.join(dir, '~'))).toContain('state.sqlite');
  });
});

describe('a cluster address without "dqlite://"', () => {
  const given = '127.0.0.1:9301,127.0.0.1:9302/pi-workflows';

  test('read-write: refused instead of creating ./127.0.0.1:9301,…/, with the address to pass', () => {
    const outcome = openInChild(given, { cwd: dir });
    expect(outcome).toMatchObject({
      name: 'Error',
      message: `Pi Workflows state path "${given}" looks like a dqlite cluster address without "dqlite://", which would create ${path.join(dir, given)}`,
      props: {},
    });
    expect(outcome.hint).toBe(`For a dqlite cluster, pass "dqlite://${given}". For a local state file of that name, create its folder first.`);
    expect(entries(dir)).toEqual([]);
  });

  test('read-only: the reference’s does-not-exist error, with the same hint', () => {
    const outcome = openInChild('10.0.0.1:9001/pi-workflows', { cwd: dir, readOnly: true });
    expect(outcome.message).toBe(`Pi Workflows state database does not exist: ${path.join(dir, '10.0.0.1:9001', 'pi-workflows')}`);
    expect(outcome.hint).toContain('pass "dqlite://10.0.0.1:9001/pi-workflows"');
    expect(entries(dir)).toEqual([]);
  });

  test('a folder of that name in the current folder is opened like any other', () => {
    fs.mkdirSync(path.join(dir, '127.0.0.1:9301,127.0.0.1:9302'));
    expect(openInChild(given, { cwd: dir })).toEqual({ opened: true });
    expect(entries(path.join(dir, '127.0.0.1:9301,127.0.0.1:9302'))).toContain('pi-workflows');
  });
});
