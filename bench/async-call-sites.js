'use strict';
// `node bench/async-call-sites.js`: what `asyncCallSites: true` costs. Times the synchronous part
// of a `store.async.getResource` call (argument encoding, queueing, and with the option the stack
// capture of the call site) — the part the caller's thread pays before the call goes to the
// thread pool — with and without the option, as the median over 25 batches of 2,000 calls on
// /dev/shm (or the temp folder). The issue's budget for capturing by default was 1 µs per call.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SqliteControllerStore } = require('..');

const BATCHES = 25;
const CALLS = 2000;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1];
}

async function issueCost(folder, options) {
  const store = new SqliteControllerStore(path.join(folder, 'state.sqlite'), { projectPath: folder, ...options });
  try {
    store.putResource({ controller: 'bench', key: 'k', spec: {}, initialStatus: {} });
    const ref = { controller: 'bench', key: 'k' };
    const perCall = [];
    for (let batch = 0; batch < BATCHES; batch += 1) {
      const pending = new Array(CALLS);
      const started = process.hrtime.bigint();
      for (let call = 0; call < CALLS; call += 1) pending[call] = store.async.getResource(ref);
      perCall.push(Number(process.hrtime.bigint() - started) / CALLS / 1000);
      await Promise.all(pending);
    }
    return median(perCall);
  } finally {
    store.close();
  }
}

async function main() {
  const base = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const folder = fs.mkdtempSync(path.join(base, 'piw-call-sites-'));
  try {
    const plain = await issueCost(folder, {});
    const traced = await issueCost(folder, { asyncCallSites: true });
    process.stdout.write(
      `store.async call, synchronous part (median µs/call): ${plain.toFixed(2)} default, ` +
        `${traced.toFixed(2)} with asyncCallSites: true (+${(traced - plain).toFixed(2)})\n`,
    );
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

main();
