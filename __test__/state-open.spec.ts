// The open path at the edges (issues 12, 14 and 16): folders that are not ours, files that are
// not regular files, dangling links, foreign and empty files, the files a read-only open leaves,
// Node's own errors for the file-system steps, a NUL in the name, and the path on open errors.
import childProcess from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';

import { beginStateFile } from './support/reference-state';

const { SqliteControllerStore, StateDatabase } = require('../index.js');

const INCOMPATIBLE =
  'Pi Workflows durable state is incompatible. Move or remove the old workflow state, then create a new state.sqlite database.';
const ROOT = path.resolve(__dirname, '..');

let dir: string;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-open-')));
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const open = (file: string, options: Record<string, unknown> = {}) =>
  new SqliteControllerStore(file, { global: true, ...options });
const modeOf = (target: string) => fs.statSync(target).mode & 0o7777;
const digest = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/** What `fn` throws, or fails the test when it returns. */
function thrown(fn: () => unknown): any {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

/** The error as the traces compare it: constructor name, message, own enumerable props. */
function shape(error: any) {
  const { stack, message, ...props } = Object.fromEntries(Object.entries(error));
  void stack;
  void message;
  return { name: error.constructor.name, message: error.message, props };
}

/** Opens `file` in a child process, so that a hanging open fails the test instead of Jest. */
function openInChild(file: string, readOnly: boolean): { name: string; message: string; code?: string } {
  const script = `
    const { SqliteControllerStore } = require(${JSON.stringify(ROOT)});
    try {
      new SqliteControllerStore(${JSON.stringify(file)}, { global: true, readOnly: ${readOnly} }).close();
      console.log(JSON.stringify({ name: 'opened', message: '' }));
    } catch (error) {
      console.log(JSON.stringify({ name: error.name, message: error.message, code: error.code }));
    }`;
  const child = childProcess.spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
  if (child.error !== undefined) throw new Error(`the open did not return: ${child.error.message}`);
  return JSON.parse(child.stdout.trim());
}

const asRoot = process.getuid?.() === 0;

/** Runs `script` (which prints one JSON line) in a child process as the user nobody. */
function asNobody(script: string): any {
  const child = childProcess.spawnSync(process.execPath, ['-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
    uid: 65534,
    gid: 65534,
  });
  if (child.error !== undefined) throw child.error;
  return JSON.parse(child.stdout.trim());
}

/** A script that opens `file` read-write and prints what happened, with the error's own props. */
function openScript(file: string): string {
  return `
    const { SqliteControllerStore } = require(${JSON.stringify(ROOT)});
    try {
      new SqliteControllerStore(${JSON.stringify(file)}, { global: true }).close();
      console.log(JSON.stringify({ opened: true }));
    } catch (error) {
      console.log(JSON.stringify({ message: error.message, props: { ...error } }));
    }`;
}

describe('folders', () => {
  test.each([0o755, 0o1777, 0o750])('an existing folder (mode %o) keeps its mode', (folderMode) => {
    const folder = path.join(dir, 'shared');
    fs.mkdirSync(folder);
    fs.chmodSync(folder, folderMode);
    open(path.join(folder, 'state.sqlite')).close();
    expect(modeOf(folder)).toBe(folderMode);
    expect(modeOf(path.join(folder, 'state.sqlite'))).toBe(0o600);
  });

  (asRoot ? test : test.skip)('another user opens a new state file in a shared (1777) folder', () => {
    const shared = path.join(dir, 'shared');
    fs.mkdirSync(shared);
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(shared, 0o1777);
    expect(asNobody(openScript(path.join(shared, 'state.sqlite')))).toEqual({ opened: true });
    expect(modeOf(shared)).toBe(0o1777);
    expect(fs.statSync(path.join(shared, 'state.sqlite')).uid).toBe(65534);
  });

  test('folders it creates are 0700, whatever the umask', () => {
    const previous = process.umask(0o022);
    try {
      open(path.join(dir, 'a', 'b', 'state.sqlite')).close();
    } finally {
      process.umask(previous);
    }
    expect(modeOf(path.join(dir, 'a', 'b'))).toBe(0o700);
    expect(modeOf(path.join(dir, 'a'))).toBe(0o700);
    expect(modeOf(dir)).toBe(0o700); // mkdtemp's own mode, untouched
  });

  test('the legacy check runs before any folder is created', () => {
    const home = path.join(dir, 'home');
    fs.mkdirSync(path.join(home, '.config', 'pi-workflows'), { recursive: true });
    fs.writeFileSync(path.join(home, '.config', 'pi-workflows', 'telegram-state.sqlite'), '');
    expect(() => new StateDatabase({ homeDir: home })).toThrow(INCOMPATIBLE);
    expect(fs.existsSync(path.join(home, '.pi'))).toBe(false);
  });
});

describe('files that are not regular files', () => {
  test('a FIFO opened read-only is refused instead of blocking forever', () => {
    const fifo = path.join(dir, 'state.sqlite');
    childProcess.execFileSync('mkfifo', [fifo]);
    expect(openInChild(fifo, true)).toEqual({
      name: 'Error',
      message: `Pi Workflows state database is not a regular file: ${fifo}`,
    });
    // Read-write, SQLite's first read fails; that is the reference's answer.
    expect(openInChild(fifo, false)).toEqual({ name: 'SqliteError', message: 'disk I/O error', code: 'SQLITE_IOERR_READ' });
  });

  test('a folder gets better-sqlite3 errors without the path in the message', () => {
    const folder = path.join(dir, 'state.sqlite');
    fs.mkdirSync(folder);
    expect(shape(thrown(() => open(folder)))).toEqual({
      name: 'SqliteError',
      message: 'unable to open database file',
      props: { code: 'SQLITE_CANTOPEN' },
    });
    expect(shape(thrown(() => open(folder, { readOnly: true })))).toEqual({
      name: 'SqliteError',
      message: 'disk I/O error',
      props: { code: 'SQLITE_IOERR_READ' },
    });
  });

  test('a socket cannot be opened, a device is refused and left alone', async () => {
    const socketPath = path.join(dir, 'socket.sqlite');
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      expect(shape(thrown(() => open(socketPath)))).toEqual({
        name: 'SqliteError',
        message: 'unable to open database file',
        props: { code: 'SQLITE_CANTOPEN' },
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const device = path.join(dir, 'device.sqlite');
    fs.symlinkSync('/dev/null', device);
    for (const readOnly of [false, true]) {
      expect(shape(thrown(() => open(device, { readOnly })))).toEqual({
        name: 'Error',
        message: `Pi Workflows state database is not a regular file: ${device}`,
        props: {},
      });
    }
    expect(fs.readdirSync(dir).sort()).toEqual(['device.sqlite']);
  });
});

describe('symbolic links', () => {
  test('a dangling link gets a complete, private state file at its target', () => {
    fs.mkdirSync(path.join(dir, 'in'));
    fs.mkdirSync(path.join(dir, 'out'));
    const link = path.join(dir, 'in', 'state.sqlite');
    fs.symlinkSync('../out/real.sqlite', link);
    const store = open(link, { projectPath: dir, global: false });
    store.putResource({ controller: 'c', key: 'k', spec: {}, initialStatus: {} });
    store.close();
    expect(fs.lstatSync(link).isSymbolicLink()).toBe(true);
    expect(modeOf(path.join(dir, 'out', 'real.sqlite'))).toBe(0o600);
    const again = open(link, { projectPath: dir, global: false });
    expect(again.listResources().map((resource: any) => resource.metadata.key)).toEqual(['k']);
    again.close();
    expect(fs.readdirSync(path.join(dir, 'out')).filter((name) => name.includes('.creating'))).toEqual([]);
  });

  test('a link into a missing folder or a loop is SQLite’s cannot-open, and nothing is created', () => {
    fs.symlinkSync('nowhere/real.sqlite', path.join(dir, 'dangling.sqlite'));
    fs.symlinkSync('loop-b', path.join(dir, 'loop-a'));
    fs.symlinkSync('loop-a', path.join(dir, 'loop-b'));
    for (const name of ['dangling.sqlite', 'loop-a']) {
      expect(shape(thrown(() => open(path.join(dir, name))))).toEqual({
        name: 'SqliteError',
        message: 'unable to open database file',
        props: { code: 'SQLITE_CANTOPEN' },
      });
    }
    expect(fs.readdirSync(dir).sort()).toEqual(['dangling.sqlite', 'loop-a', 'loop-b']);
  });
});

describe('files that are not ours are refused untouched', () => {
  test('another application’s SQLite file: not one byte changes, no -wal or -shm', () => {
    const file = path.join(dir, 'other.sqlite');
    const db = new Database(file);
    db.exec('CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES (1)');
    db.close();
    const before = digest(file);
    expect(shape(thrown(() => open(file)))).toEqual({ name: 'Error', message: INCOMPATIBLE, props: {} });
    expect(digest(file)).toBe(before);
    expect(fs.readdirSync(dir)).toEqual(['other.sqlite']);
  });

  test('another application’s file in WAL mode: refused, its bytes unchanged', () => {
    const file = path.join(dir, 'other.sqlite');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES (1)');
    db.close();
    const before = digest(file);
    expect(shape(thrown(() => open(file)))).toEqual({ name: 'Error', message: INCOMPATIBLE, props: {} });
    expect(digest(file)).toBe(before);
  });

  test('a file the reference is creating at this moment is waited for, not refused', async () => {
    // The reference creates a state file in place: WAL mode, then the schema in one exclusive
    // transaction; until it commits, the header reads as empty.
    const file = path.join(dir, 'state.sqlite');
    const creator = beginStateFile(Database, file, 1);
    const script = `
      const { SqliteControllerStore } = require(${JSON.stringify(ROOT)});
      console.log('opening');
      try {
        new SqliteControllerStore(${JSON.stringify(file)}, { global: true }).close();
        console.log('opened');
      } catch (error) {
        console.log(error.message);
      }`;
    const child = childProcess.spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    const done = new Promise<void>((resolve) => child.on('close', () => resolve()));
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk) => {
        output += chunk;
        if (output.includes('opening')) resolve();
      }),
    );
    // Long enough for the open to reach the file; the open waits up to its busy timeout.
    await new Promise((resolve) => setTimeout(resolve, 500));
    creator.exec('COMMIT');
    creator.close();
    await done;
    expect(output.trim().split('\n')).toEqual(['opening', 'opened']);
  });

  test('an empty file stays empty', () => {
    const file = path.join(dir, 'state.sqlite');
    fs.writeFileSync(file, '');
    expect(() => open(file)).toThrow(INCOMPATIBLE);
    expect(fs.statSync(file).size).toBe(0);
    expect(fs.readdirSync(dir)).toEqual(['state.sqlite']);
  });

  test('a file that is not a database keeps SQLite’s error', () => {
    const file = path.join(dir, 'state.sqlite');
    fs.writeFileSync(file, 'not a database\n');
    expect(shape(thrown(() => open(file)))).toEqual({
      name: 'SqliteError',
      message: 'file is not a database',
      props: { code: 'SQLITE_NOTADB' },
    });
    expect(fs.readFileSync(file, 'utf8')).toBe('not a database\n');
  });
});

describe('read-only opens', () => {
  test('leave the same -wal (0 B) and -shm files as better-sqlite3 read-only, as the reference does', () => {
    const ours = path.join(dir, 'ours', 'state.sqlite');
    open(ours).close();
    fs.mkdirSync(path.join(dir, 'ref'));
    const reference = path.join(dir, 'ref', 'state.sqlite');
    fs.copyFileSync(ours, reference);
    // A clean last close leaves its stamp (docs/differences.md); a read-only open never reads it.
    expect(fs.readdirSync(path.dirname(ours))).toEqual(['state.sqlite', 'state.sqlite-runlog']);
    fs.rmSync(`${ours}-runlog`);

    open(ours, { readOnly: true }).close();
    const db = new Database(reference, { readonly: true, fileMustExist: true, timeout: 5000 });
    db.pragma('foreign_keys = ON');
    db.pragma('synchronous = FULL');
    db.prepare('SELECT count(*) FROM schema_meta').get();
    db.pragma('query_only = ON');
    db.close();

    const listing = (folder: string) =>
      fs
        .readdirSync(folder)
        .sort()
        .map((name) => [name, fs.statSync(path.join(folder, name)).size]);
    expect(listing(path.dirname(ours))).toEqual(listing(path.dirname(reference)));
    expect(listing(path.dirname(ours))).toEqual([
      ['state.sqlite', fs.statSync(ours).size],
      ['state.sqlite-shm', 32768],
      ['state.sqlite-wal', 0],
    ]);
  });
});

describe('file-system errors are Node’s', () => {
  /** What Node's own `fs.mkdirSync(folder, { recursive: true })` throws. */
  function mkdirError(folder: string) {
    return shape(thrown(() => fs.mkdirSync(folder, { recursive: true, mode: 0o700 })));
  }

  test('a folder that cannot be created: the mkdir error with errno, code, syscall and path', () => {
    fs.writeFileSync(path.join(dir, 'not-a-dir'), 'x');
    const file = path.join(dir, 'not-a-dir', 'state.sqlite');
    const error = shape(thrown(() => open(file)));
    expect(error).toEqual(mkdirError(path.dirname(file)));
    expect(error).toEqual({
      name: 'Error',
      message: `EEXIST: file already exists, mkdir '${path.join(dir, 'not-a-dir')}'`,
      props: { errno: -17, code: 'EEXIST', syscall: 'mkdir', path: path.join(dir, 'not-a-dir') },
    });
  });

  test('a backup folder that cannot be created: the mkdir error, as a rejection', async () => {
    const store = open(path.join(dir, 'state.sqlite'));
    fs.writeFileSync(path.join(dir, 'not-a-dir'), 'x');
    const target = path.join(dir, 'not-a-dir', 'copy.sqlite');
    const error = await store.state.backup(target).then(
      () => {
        throw new Error('expected a rejection');
      },
      (rejection: unknown) => rejection,
    );
    store.close();
    expect(shape(error)).toEqual(mkdirError(path.dirname(target)));
    expect(shape(error).props).toMatchObject({ code: 'EEXIST', syscall: 'mkdir' });
  });

  (asRoot ? test : test.skip)('a folder another user may not write: EACCES from mkdir', () => {
    fs.chmodSync(dir, 0o755);
    const folder = path.join(dir, 'sub');
    expect(asNobody(openScript(path.join(folder, 'state.sqlite')))).toEqual({
      message: `EACCES: permission denied, mkdir '${folder}'`,
      props: { errno: -13, code: 'EACCES', syscall: 'mkdir', path: folder },
    });
  });

  (asRoot ? test : test.skip)('a state file of another user, writable to all: EPERM from the chmod', () => {
    fs.chmodSync(dir, 0o1777);
    const file = path.join(dir, 'state.sqlite');
    open(file).close();
    fs.chmodSync(file, 0o666);
    expect(asNobody(openScript(file))).toEqual({
      message: `EPERM: operation not permitted, chmod '${file}'`,
      props: { errno: -1, code: 'EPERM', syscall: 'chmod', path: file },
    });
    expect(modeOf(file)).toBe(0o666);
  });

  test('a folder name too long: ENAMETOOLONG from mkdir', () => {
    const file = path.join(dir, 'x'.repeat(300), 'state.sqlite');
    const error = shape(thrown(() => open(file)));
    expect(error).toEqual(mkdirError(path.dirname(file)));
    expect(error.props).toMatchObject({ code: 'ENAMETOOLONG', syscall: 'mkdir' });
    // Deeper under a file, Node's recursive mkdir reports ENOTDIR for the full folder.
    fs.writeFileSync(path.join(dir, 'file'), 'x');
    const nested = path.join(dir, 'file', 'sub', 'state.sqlite');
    expect(shape(thrown(() => open(nested)))).toEqual(mkdirError(path.dirname(nested)));
  });

  test('a NUL in the file name: Node’s path error, and nothing is created', () => {
    const file = `${dir}/c\0.sqlite`;
    expect(shape(thrown(() => open(file)))).toEqual({
      name: 'TypeError',
      message: `The argument 'path' must be a string, Uint8Array, or URL without null bytes. Received '${dir}/c\\x00.sqlite'`,
      props: { code: 'ERR_INVALID_ARG_VALUE' },
    });
    expect(fs.readdirSync(dir)).toEqual([]);
    // Read-only, the file does not exist (fs.existsSync of such a name is false).
    expect(() => open(file, { readOnly: true })).toThrow(`Pi Workflows state database does not exist: ${file}`);
  });

  test('trailing white space: better-sqlite3 opens the trimmed name, the chmod uses the full one', () => {
    const full = (name: string) => path.join(dir, name);
    // Neither name exists: the final chmod's ENOENT (the reference had created the trimmed file).
    expect(shape(thrown(() => open(full('a.sqlite '))))).toEqual({
      name: 'Error',
      message: `ENOENT: no such file or directory, chmod '${full('a.sqlite ')}'`,
      props: { errno: -2, code: 'ENOENT', syscall: 'chmod', path: full('a.sqlite ') },
    });
    expect(fs.readdirSync(dir)).toEqual([]);
    // Only the full name exists: read-only SQLite cannot open the trimmed one; read-write the
    // reference created it empty and refused it.
    fs.writeFileSync(full('c.sqlite '), '');
    expect(shape(thrown(() => open(full('c.sqlite '), { readOnly: true })))).toEqual({
      name: 'SqliteError',
      message: 'unable to open database file',
      props: { code: 'SQLITE_CANTOPEN' },
    });
    expect(shape(thrown(() => open(full('c.sqlite '))))).toEqual({ name: 'Error', message: INCOMPATIBLE, props: {} });
    expect(fs.readdirSync(dir)).toEqual(['c.sqlite ']);
    // Both exist: the store works on the trimmed one.
    open(full('b.sqlite'), { projectPath: dir, global: false }).close();
    fs.writeFileSync(full('b.sqlite\n'), '');
    const store = open(full('b.sqlite\n'), { projectPath: dir, global: false });
    expect(store.filePath).toBe(full('b.sqlite\n'));
    store.putResource({ controller: 'c', key: 'k', spec: {}, initialStatus: {} });
    store.close();
    expect(fs.statSync(full('b.sqlite\n')).size).toBe(0);
    const trimmed = open(full('b.sqlite'), { projectPath: dir, global: false });
    expect(trimmed.listResources()).toHaveLength(1);
    trimmed.close();
  });

  test('a NUL in the folder name: the mkdir path error', () => {
    const file = `${dir}/a\0b/state.sqlite`;
    expect(shape(thrown(() => open(file)))).toEqual(mkdirError(path.dirname(file)));
  });
});

describe('a constructor that throws after opening', () => {
  test('closes the connection it opened: no -wal or -shm is left', () => {
    const file = path.join(dir, 'state.sqlite');
    open(file).close();
    expect(() => new SqliteControllerStore(file, { projectPath: 5 })).toThrow(
      'The "paths[0]" argument must be of type string. Received type number (5)',
    );
    // Only the file and the clean last close's stamp (docs/run-index.md, "Across the last close").
    expect(fs.readdirSync(dir).sort()).toEqual(['state.sqlite', 'state.sqlite-runlog']);
    expect(fs.statSync(`${file}-runlog`).size).toBe(64);
  });
});

describe('open errors name the state file without changing what the reference shows', () => {
  test('the incompatible-state error', () => {
    const file = path.join(dir, 'state.sqlite');
    fs.writeFileSync(file, '');
    const error = thrown(() => open(file));
    expect(shape(error)).toEqual({ name: 'Error', message: INCOMPATIBLE, props: {} });
    expect(error.filePath).toBe(file);
    expect(Object.keys(error)).toEqual([]);
    expect(error.stack.split('\n')[0]).toBe(`Error: ${INCOMPATIBLE} [state file: ${file}]`);
  });

  test('an SQLite open error', () => {
    const file = path.join(dir, 'state.sqlite');
    fs.mkdirSync(file);
    const error = thrown(() => open(file));
    expect(shape(error)).toEqual({ name: 'SqliteError', message: 'unable to open database file', props: { code: 'SQLITE_CANTOPEN' } });
    expect(error.filePath).toBe(file);
    expect(error.stack).toContain(`[state file: ${file}]`);
  });

  test('an error whose message has the path already is left as it is', () => {
    const file = path.join(dir, 'missing.sqlite');
    const error = thrown(() => open(file, { readOnly: true }));
    expect(error.message).toBe(`Pi Workflows state database does not exist: ${file}`);
    expect(error.filePath).toBeUndefined();
  });
});
