// A new state file appears under its name only once its schema is complete, so a crash during
// creation can never leave a file that every later open refuses.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

let folder: string;

beforeEach(() => {
  folder = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-creation-')));
});

afterEach(() => {
  fs.rmSync(folder, { recursive: true, force: true });
});

test('creating a file leaves only the file (and its WAL companions) behind', () => {
  const file = path.join(folder, 'state', 'state.sqlite');
  const store = new SqliteControllerStore(file, { projectPath: folder });
  try {
    const names = fs.readdirSync(path.dirname(file));
    expect(names.filter((name) => !name.startsWith('state.sqlite'))).toEqual([]);
    expect(store.state.connection.prepare('SELECT schema_name FROM schema_meta').pluck().get()).toBe('pi-workflows-state');
    expect(store.state.connection.pragma('journal_mode', { simple: true })).toBe('wal');
  } finally {
    store.close();
  }
});

test('an abandoned half-created staging file is ignored and the real file is created', () => {
  const file = path.join(folder, 'state.sqlite');
  // What a crash in the middle of creation leaves: an incomplete hidden staging file.
  fs.writeFileSync(path.join(folder, '.state.sqlite.999-abandoned.creating'), '');
  const store = new SqliteControllerStore(file, { projectPath: folder });
  try {
    expect(store.listResources()).toEqual([]);
  } finally {
    store.close();
  }
});

test('many stores creating the same file at once all open the one file', async () => {
  const file = path.join(folder, 'shared', 'state.sqlite');
  const { execFile } = await import('node:child_process');
  const script = `
    const { SqliteControllerStore } = require(${JSON.stringify(path.join(__dirname, '..', 'index.js'))});
    const store = new SqliteControllerStore(process.argv[1], { projectPath: process.argv[2] });
    store.putResource({ controller: 'c', key: String(process.pid), spec: {}, initialStatus: {} });
    store.close();
  `;
  const runs = Array.from({ length: 6 }, () =>
    new Promise<void>((resolve, reject) =>
      execFile(process.execPath, ['-e', script, file, folder], (error) => (error ? reject(error) : resolve())),
    ),
  );
  await Promise.all(runs);
  const store = new SqliteControllerStore(file, { projectPath: folder });
  try {
    expect(store.listResources()).toHaveLength(6);
    store.state.integrityCheck();
  } finally {
    store.close();
  }
});
