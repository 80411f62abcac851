// The WAL-append VFS (src/state/vfs.rs) under the conditions its safety argument is about: a
// user may set `synchronous = NORMAL` or `OFF` through `store.state.connection`, so no WAL sync
// comes between writing a commit and publishing it. A writer process (every other round with a
// tiny page cache, so that transactions spill frames and read them back before they commit)
// reserves runs and acknowledges each; another
// process must see every acknowledged run at once, and after a SIGKILL at a random moment the
// file must reopen whole with every acknowledged run in it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const { openStore, random, rows, tempDir } = require('./reliability/common.js');

const COMMON = path.join(__dirname, 'reliability', 'common.js');

const WRITER = `
const fs = require('node:fs');
const { openStore, runReservation } = require(${JSON.stringify(COMMON)});
const [file, projectPath, synchronous, round, cacheSize] = process.argv.slice(1);
const store = openStore(file, projectPath);
store.state.connection.exec('PRAGMA synchronous = ' + synchronous);
if (cacheSize !== 'default') store.state.connection.exec('PRAGMA cache_size = ' + cacheSize);
if (store.state.connection.pragma('synchronous', { simple: true }) !== { NORMAL: 1, OFF: 0 }[synchronous]) process.exit(3);
for (let index = 0; ; index += 1) {
  const runId = 'r' + round + '-' + index;
  store.reserveWorkflowRun(runReservation(runId, { input: { pad: 'x'.repeat((index % 7) * 3000) } }));
  fs.writeSync(1, runId + '\\n');
}
`;

interface Round {
  acknowledged: string[];
  unseen: string[];
}

/** Runs one writer until `killAfter` acknowledgements (or its time is up), checking each at once. */
function writeAndKill(file: string, projectPath: string, synchronous: string, round: number, killAfter: number, reader: any): Promise<Round> {
  return new Promise((resolve, reject) => {
    const cacheSize = round % 2 === 0 ? 'default' : '10';
    const child = spawn(process.execPath, ['-e', WRITER, file, projectPath, synchronous, String(round), cacheSize], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const acknowledged: string[] = [];
    const unseen: string[] = [];
    let pending = '';
    let stderr = '';
    const deadline = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const runId of lines) {
        acknowledged.push(runId);
        if (rows(reader, 'SELECT 1 FROM runs WHERE run_id = ?', runId).length !== 1) unseen.push(runId);
      }
      if (acknowledged.length >= killAfter) child.kill('SIGKILL');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(deadline);
      if (signal !== 'SIGKILL') reject(new Error(`writer exited with ${code}: ${stderr}`));
      else resolve({ acknowledged, unseen });
    });
  });
}

test.each(['NORMAL', 'OFF'])(
  'synchronous=%s: every acknowledged commit is visible to another process at once and survives SIGKILL',
  async (synchronous) => {
    const dir = tempDir(`vfs-${synchronous.toLowerCase()}`);
    const projectPath = path.join(dir, 'project');
    fs.mkdirSync(projectPath);
    const file = path.join(dir, 'state.sqlite');
    const next = random(synchronous === 'NORMAL' ? 11 : 12);
    openStore(file, projectPath).close();
    const everything: string[] = [];
    try {
      for (let round = 0; round < 6; round += 1) {
        const reader = openStore(file, projectPath);
        let outcome: Round;
        try {
          outcome = await writeAndKill(file, projectPath, synchronous, round, next.int(20, 150), reader);
        } finally {
          reader.close();
        }
        expect(outcome.unseen).toEqual([]);
        expect(outcome.acknowledged.length).toBeGreaterThan(0);
        everything.push(...outcome.acknowledged);
        const reopened = openStore(file, projectPath);
        try {
          reopened.state.integrityCheck();
          const present = new Set(rows(reopened, 'SELECT run_id FROM runs').map((row: { run_id: string }) => row.run_id));
          expect(everything.filter((runId) => !present.has(runId))).toEqual([]);
        } finally {
          reopened.close();
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
  120_000,
);
