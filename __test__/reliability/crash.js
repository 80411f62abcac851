'use strict';
// Crashes: a writer (crash-writer.js) is killed with SIGKILL at a random moment, again and
// again, on one state file. After each kill the file is reopened read-write, as the next Pi
// session would, and checked:
//
// - `integrityCheck()` passes (SQLite integrity and foreign keys);
// - every write the writer reported as returned (`R` lines) is in the file;
// - nothing is half-applied: each method's rows are all there or all absent, which the
//   cross-table invariants below state for every method the writer uses (a resource without
//   its lease, a controller resource without its queue/created event, a run without its queue,
//   binding, viewer or source rows, an effect resource without its effect, a revision without
//   its event, ...).

const fs = require('node:fs');
const path = require('node:path');

const { openStore, random, rows, runNode, tempDir } = require('./common.js');

const WRITER = path.join(__dirname, 'crash-writer.js');
const CONTROLLER = 'crash';

/** Queries that must return no row on a file where every transaction is whole. */
const INVARIANTS = {
  'resource without lease': `SELECT r.resource_id FROM resources r LEFT JOIN leases l USING (resource_id) WHERE l.resource_id IS NULL`,
  'controller resource row without resources row': `SELECT c.controller_resource_id FROM controller_resources c LEFT JOIN resources r USING (resource_id) WHERE r.resource_id IS NULL`,
  'controller resource without controller row': `SELECT r.resource_id FROM resources r LEFT JOIN controller_resources c USING (resource_id) WHERE r.resource_type = 'controller' AND c.resource_id IS NULL`,
  'controller resource without its created event': `SELECT c.resource_id FROM controller_resources c WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.resource_id = c.resource_id AND e.resource_revision = 1 AND e.event_type = 'resource.created')`,
  'run resource without run row': `SELECT r.resource_id FROM resources r LEFT JOIN runs USING (resource_id) WHERE r.resource_type = 'run' AND runs.resource_id IS NULL`,
  'run without queue row': `SELECT run_id FROM runs LEFT JOIN run_queue q USING (run_id) WHERE q.run_id IS NULL`,
  'run without binding': `SELECT run_id FROM runs LEFT JOIN run_bindings b USING (run_id) WHERE b.run_id IS NULL`,
  'run without viewer row': `SELECT run_id FROM runs LEFT JOIN viewer_runs v USING (run_id) WHERE v.run_id IS NULL`,
  'run without root source': `SELECT run_id FROM runs WHERE NOT EXISTS (SELECT 1 FROM run_sources s WHERE s.run_id = runs.run_id AND s.mount_path = '')`,
  'run without its queued event': `SELECT r.run_id FROM runs r WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.resource_id = r.resource_id AND e.resource_revision = 1 AND e.event_type = 'run.queued')`,
  'effect resource without effect row': `SELECT r.resource_id FROM resources r LEFT JOIN effects f USING (resource_id) WHERE r.resource_type = 'effect' AND f.resource_id IS NULL`,
  'revision without its event': `SELECT r.resource_id FROM resources r WHERE r.revision <> (SELECT COUNT(*) FROM events e WHERE e.resource_id = r.resource_id) OR r.revision <> COALESCE((SELECT MAX(resource_revision) FROM events e WHERE e.resource_id = r.resource_id), 0)`,
  'done run without finish time': `SELECT run_id FROM run_queue WHERE status = 'done' AND finished_at IS NULL`,
  'held lease on a finished run': `SELECT q.run_id FROM run_queue q JOIN runs r USING (run_id) JOIN leases l ON l.resource_id = r.resource_id WHERE q.status = 'done' AND l.owner_id IS NOT NULL`,
};

function checkInvariants(store) {
  const problems = [];
  for (const [name, sql] of Object.entries(INVARIANTS)) {
    const found = rows(store, sql);
    if (found.length > 0) problems.push(`${name}: ${JSON.stringify(found.slice(0, 3))}`);
  }
  return problems;
}

const resourceIdOf = (store, key) =>
  rows(store, 'SELECT resource_id FROM controller_resources WHERE controller_name = ? AND resource_key = ?', CONTROLLER, key)[0]?.resource_id;
const runResourceOf = (store, runId) => rows(store, 'SELECT resource_id FROM runs WHERE run_id = ?', runId)[0]?.resource_id;

function hasEvent(store, resourceId, where, ...params) {
  return rows(store, `SELECT 1 AS found FROM events WHERE resource_id = ? AND ${where}`, resourceId, ...params).length > 0;
}

/** Whether the acknowledged write `entry` (an `R` line) is in the file; a message when not. */
function missing(store, entry) {
  const ref = { controller: CONTROLLER, key: entry.key };
  switch (entry.kind) {
    case 'put':
      return store.getResource(ref)?.metadata.uid === entry.uid ? null : 'resource is missing';
    case 'respec':
      return (store.getResource(ref)?.metadata.generation ?? 0) >= entry.generation ? null : 'spec update is missing';
    case 'claim':
      return entry.none || hasEvent(store, resourceIdOf(store, entry.key), "event_type = 'lease.claimed' AND lease_generation = ?", entry.generation)
        ? null
        : 'claim is missing';
    case 'status':
      return hasEvent(store, resourceIdOf(store, entry.key), "event_type = 'resource.status_updated' AND resource_revision = ?", entry.version)
        ? null
        : 'status update is missing';
    case 'effect':
      return store.getEffect(entry.uid, entry.effectKey) === undefined ? 'effect is missing' : null;
    case 'settle':
      return !entry.settled || hasEvent(store, resourceIdOf(store, entry.key), "event_type = 'lease.released' AND lease_generation = ?", entry.generation)
        ? null
        : 'settle is missing';
    case 'event':
      return rows(store, "SELECT 1 AS found FROM events WHERE event_seq = ? AND event_type = 'crash.note'", entry.seq).length === 1 ? null : 'event is missing';
    case 'reserve':
      return store.getWorkflowRun(entry.runId) === undefined ? 'run is missing' : null;
    case 'runClaim':
      return entry.generation === null || hasEvent(store, runResourceOf(store, entry.runId), "event_type = 'lease.claimed' AND lease_generation = ?", entry.generation)
        ? null
        : 'run claim is missing';
    case 'runRunning':
      return !entry.ok || ['running', 'done'].includes(store.getWorkflowRun(entry.runId)?.status) ? null : 'running status is missing';
    case 'runEvent':
      return rows(store, "SELECT 1 AS found FROM events WHERE event_seq = ? AND event_type = 'crash.progress'", entry.seq).length === 1 ? null : 'run event is missing';
    case 'runDone':
      return !entry.ok || store.getWorkflowRun(entry.runId)?.status === 'done' ? null : 'completion is missing';
    case 'delete':
      return store.getResource(ref)?.metadata.deletionTimestamp === undefined ? 'deletion request is missing' : null;
    default:
      return `unknown entry kind ${entry.kind}`;
  }
}

/** One writer life: spawn, kill at a random moment, collect what it reported. */
async function killOnce({ file, projectPath, iteration, next }) {
  const begun = new Map();
  const returned = [];
  let phase = 'spawned';
  // One kill in five lands while the store is opening (recovery, pruning, project upsert).
  const duringOpen = next.chance(0.2);
  const delay = duringOpen ? next.int(0, 60) : next.int(5, 300);
  let timer;
  const arm = (child) => {
    if (timer === undefined) timer = setTimeout(() => child.kill('SIGKILL'), delay);
  };
  const result = await runNode(WRITER, [JSON.stringify({ file, projectPath, iteration, seed: next.int(1, 2 ** 30) })], {
    timeoutMs: 60_000,
    onLine(line, child) {
      const tag = line[0];
      if (tag === 'O') {
        phase = 'opening';
        if (duringOpen) arm(child);
        return;
      }
      if (tag === 'S') {
        phase = 'writing';
        arm(child);
        return;
      }
      const entry = JSON.parse(line.slice(2));
      if (tag === 'B') begun.set(entry.id, entry);
      if (tag === 'R') {
        begun.delete(entry.id);
        returned.push(entry);
      }
    },
  });
  clearTimeout(timer);
  const inFlight = [...begun.values()];
  return { result, returned, inFlight, phase: inFlight.length > 0 ? `in ${inFlight[0].kind}` : phase };
}

async function runCrashes({ kills = 100, seed = 7, keep = false } = {}) {
  const dir = tempDir('crash');
  const file = path.join(dir, 'state.sqlite');
  const projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
  openStore(file, projectPath).close();
  const next = random(seed);
  const problems = [];
  const acknowledged = [];
  const phases = {};
  let survived = 0;
  for (let iteration = 1; iteration <= kills && problems.length === 0; iteration += 1) {
    const life = await killOnce({ file, projectPath, iteration, next });
    if (life.result.signal !== 'SIGKILL') {
      problems.push(`writer ${iteration} ended with ${life.result.code}: ${life.result.stderr.slice(0, 2000)}`);
      break;
    }
    phases[life.phase] = (phases[life.phase] ?? 0) + 1;
    acknowledged.push(...life.returned);
    let store;
    try {
      store = openStore(file, projectPath);
      store.state.integrityCheck();
      problems.push(...checkInvariants(store).map((problem) => `after kill ${iteration} (${life.phase}): ${problem}`));
      for (const entry of life.returned) {
        const gap = missing(store, entry);
        if (gap !== null) problems.push(`after kill ${iteration}: acknowledged ${entry.kind} ${JSON.stringify(entry)}: ${gap}`);
      }
    } catch (error) {
      problems.push(`after kill ${iteration} (${life.phase}): reopen failed: ${error.stack}`);
    } finally {
      store?.close();
    }
    if (problems.length === 0) survived += 1;
  }
  // Finally, everything ever acknowledged is still there.
  if (problems.length === 0) {
    const store = openStore(file, projectPath, { readOnly: true });
    try {
      store.state.integrityCheck();
      for (const entry of acknowledged) {
        const gap = missing(store, entry);
        if (gap !== null) problems.push(`at the end: acknowledged ${entry.kind} ${JSON.stringify(entry)}: ${gap}`);
      }
    } finally {
      store.close();
    }
  }
  const report = { kills, survived, acknowledged: acknowledged.length, phases, problems: problems.slice(0, 20), dir };
  if (!keep && problems.length === 0) fs.rmSync(dir, { recursive: true, force: true });
  return report;
}

module.exports = { runCrashes, checkInvariants, INVARIANTS };
