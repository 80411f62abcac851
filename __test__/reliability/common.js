'use strict';
// Shared pieces of the reliability suites (contention, crashes, hostile input, file hygiene):
// a seeded random source, temporary folders, child processes with bounded lifetimes, fixtures
// (controller resources and headless workflow runs) and a row-level digest of a state file.
//
// Everything here uses only the public API. Rows are read through `store.state.connection` of
// an open store, never through a second SQLite library in the same process (see HELPERS.md).

const childProcess = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const { SqliteControllerStore } = require(path.join(ROOT, 'index.js'));

/** mulberry32: small, fast, and the same sequence for the same seed. */
function random(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  next.pick = (items) => items[Math.floor(next() * items.length)];
  next.chance = (p) => next() < p;
  return next;
}

/** A fresh folder; `memory` puts it on tmpfs when there is one (fsync is free there). */
function tempDir(label, { memory = false } = {}) {
  const root = memory && fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  return fs.realpathSync(fs.mkdtempSync(path.join(root, `piw-rel-${label}-`)));
}

const iso = (ms) => new Date(ms).toISOString();
const nowIso = () => new Date().toISOString();

function openStore(file, projectPath, options = {}) {
  return new SqliteControllerStore(file, { projectPath, ...options });
}

/** Runs one SQL statement on an open store's own connection. */
function rows(store, sql, ...params) {
  return store.state.connection.prepare(sql).all(...params);
}

const CONTROLLER = 'reliability';
const resourceKey = (index) => `item-${String(index).padStart(4, '0')}`;
const runIdOf = (index) => `run-${String(index).padStart(4, '0')}`;

/** The reservation options of headless run `index` (its own origin session). */
function runReservation(index, extra = {}) {
  const runId = typeof index === 'string' ? index : runIdOf(index);
  return {
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1' },
    definitionDigest: 'a1'.repeat(32),
    definitionSnapshot: { name: 'echo', startAt: 'start', nodes: { start: { type: 'agent' } }, edges: [] },
    input: { task: `task for ${runId}` },
    runnerId: 'setup',
    originSessionId: `session-${runId}`,
    executionMode: 'headless',
    ...extra,
  };
}

/**
 * A pool of `resources` controller resources and `runs` headless runs, every run parked once
 * (claimed by `setup`, then parked) so that any runner may claim it.
 */
function seedPool(store, { resources, runs }) {
  for (let index = 0; index < resources; index += 1) {
    store.putResource({ controller: CONTROLLER, key: resourceKey(index), spec: { index }, initialStatus: { seen: 0 } });
  }
  for (let index = 0; index < runs; index += 1) {
    const runId = runIdOf(index);
    store.reserveWorkflowRun(runReservation(index));
    const claimed = store.claimWorkflowRun({ runId, runnerId: 'setup', claimToken: `setup-${runId}`, leaseMs: 60_000 });
    if (claimed === undefined) throw new Error(`setup could not claim ${runId}`);
    if (!store.parkWorkflowRun({ runId, claimToken: `setup-${runId}` })) throw new Error(`setup could not park ${runId}`);
  }
}

/** Spawns `node script args…`; resolves with {code, signal, stdout, stderr}. Killed after `timeoutMs`. */
function runNode(script, args, { timeoutMs = 120_000, onLine } = {}) {
  return new Promise((resolve) => {
    const child = childProcess.spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let pending = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (onLine === undefined) return;
      pending += chunk;
      let newline;
      while ((newline = pending.indexOf('\n')) >= 0) {
        onLine(pending.slice(0, newline), child);
        pending = pending.slice(newline + 1);
      }
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, pid: child.pid });
    });
  });
}

/**
 * Every row of every table (blobs reduced to their hash) in rowid/primary-key order, as one
 * sha256 per table. Used to prove a rejected call changed nothing.
 */
function tableDigests(store) {
  const tables = rows(store, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  const digests = {};
  for (const { name } of tables) {
    const quoted = `"${name.replaceAll('"', '""')}"`;
    const statement = store.state.connection.prepare(
      name === 'blobs' ? `SELECT blob_hash FROM ${quoted} ORDER BY blob_hash` : `SELECT * FROM ${quoted}`,
    );
    const hash = crypto.createHash('sha256');
    for (const row of statement.raw(true).all()) {
      hash.update(JSON.stringify(row, (key, value) => (value && value.type === 'Buffer' ? Buffer.from(value.data).toString('hex') : value)));
      hash.update('\n');
    }
    digests[name] = hash.digest('hex');
  }
  return digests;
}

/** The sha256 of a file's bytes, or null when it does not exist. */
function fileDigest(file) {
  try {
    return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  } catch (error) {
    if (error.code === 'ENOENT') return null;
    throw error;
  }
}

const isBusy = (error) =>
  error !== null && typeof error === 'object' && (error.code === 'SQLITE_BUSY' || /database is locked/.test(String(error.message)));

module.exports = {
  ROOT,
  SqliteControllerStore,
  CONTROLLER,
  random,
  tempDir,
  iso,
  nowIso,
  openStore,
  rows,
  resourceKey,
  runIdOf,
  runReservation,
  seedPool,
  runNode,
  tableDigests,
  fileDigest,
  isBusy,
};
