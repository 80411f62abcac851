// putResource stores its blobs before its transaction (as the reference does), and every
// read-write open prunes blobs nothing refers to. A store opened by another process in between
// used to prune them and make putResource fail on the foreign key; the transaction now stores
// them again, so no interleaving can fail.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const { SqliteControllerStore } = require('../index.js');

const run = promisify(execFile);

test('putResource never loses its blobs to a concurrent open', async () => {
  const folder = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-prune-race-')));
  const file = path.join(folder, 'state.sqlite');
  try {
    new SqliteControllerStore(file, { projectPath: folder }).close();
    const script = (name: string) => path.join(__dirname, 'reliability', name);
    const [writer, opener] = await Promise.all([
      run(process.execPath, [script('prune-race-writer.js'), file, folder, '2500']),
      run(process.execPath, [script('prune-race-opener.js'), file, folder, '2500']),
    ]);
    const written = JSON.parse(writer.stdout);
    expect(JSON.parse(opener.stdout).opens).toBeGreaterThan(0);
    expect(written.errors).toEqual([]);
    expect(written.ok).toBeGreaterThan(0);
    const store = new SqliteControllerStore(file, { projectPath: folder });
    try {
      expect(store.listResources({ controller: 'race' })).toHaveLength(written.ok);
      store.state.integrityCheck();
    } finally {
      store.close();
    }
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
});
