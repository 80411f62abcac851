'use strict';
// `npm run bench:durability`: the figures behind issue 12 that are timings, not tests.
//
// 1. open-prune: how long a read-write open takes on a file with many superseded blobs (a
//    resource whose spec was replaced N times in one long-lived process), N up to 50,000.
//    (The WAL-append shim's on/off comparison was here until it was removed: commit 629877d
//    has it, docs/performance.md "The WAL-append shim, removed" its last figures.)
//
//   node bench/durability.js [--superseded 1000,4000,50000]

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const SHM = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();

function options() {
  const values = { superseded: '1000,4000,50000' };
  const args = process.argv.slice(2);
  for (let index = 0; index < args.length; index += 2) {
    const name = args[index].replace(/^--/, '');
    if (!(name in values)) throw new Error(`unknown option --${name}`);
    values[name] = args[index + 1];
  }
  return values;
}

function openStore(folder) {
  const { SqliteControllerStore } = require('..');
  return new SqliteControllerStore(path.join(folder, 'state.sqlite'), { projectPath: folder });
}

/** Child: writes `count` superseded specs, then times the reopen (which prunes them). */
function childPrune(folder, count) {
  const store = openStore(folder);
  for (let version = 0; version < count; version += 1) {
    store.putResource({ controller: 'bench', key: 'respecced', spec: { version }, initialStatus: {} });
  }
  const connection = store.state.connection;
  const before = connection.prepare('SELECT count(*) AS n FROM blobs').get().n;
  store.close();
  const started = process.hrtime.bigint();
  const reopened = openStore(folder);
  const openMs = Number(process.hrtime.bigint() - started) / 1e6;
  const after = reopened.state.connection.prepare('SELECT count(*) AS n FROM blobs').get().n;
  reopened.close();
  return { count, blobsBefore: before, blobsAfter: after, openMs };
}

function child(args) {
  const run = spawnSync(process.execPath, [__filename, 'child', ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (run.status !== 0) throw new Error(`child ${args.join(' ')} failed: ${run.stderr.slice(-3000)}`);
  const line = run.stdout.split('\n').find((text) => text.startsWith('RESULT '));
  return JSON.parse(line.slice(7));
}

function inFolder(root, body) {
  const folder = fs.mkdtempSync(path.join(root, 'piw-durability-'));
  try {
    return body(folder);
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

function main() {
  if (process.argv[2] === 'child') {
    const [, , , folder, count] = process.argv;
    const result = childPrune(folder, Number(count));
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
    return;
  }
  const opts = options();
  console.log('open-prune: a read-write open of a file with N superseded specs (/dev/shm)');
  console.log('| superseded | blobs before | blobs after | open (ms) |');
  console.log('| ---: | ---: | ---: | ---: |');
  for (const count of opts.superseded.split(',').map(Number)) {
    const result = inFolder(SHM, (folder) => child([folder, String(count)]));
    console.log(`| ${count} | ${result.blobsBefore} | ${result.blobsAfter} | ${result.openMs.toFixed(1)} |`);
  }
}

main();
