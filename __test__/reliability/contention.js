'use strict';
// Contention: N processes share one state file and fight over a pool of controller resources
// and workflow runs (see contention-worker.js). Afterwards the file and the workers' logs are
// checked against each other:
//
// - fencing: per item, the lease history read from the event log (commit order) never hands a
//   claim to a second owner while the previous claim is live (not released, and not expired at
//   the new claim's `now`, after the last renewal a worker saw acknowledged); generations rise
//   by exactly one per claim and are never handed out twice;
// - durability: every acknowledged claim, settle/requeue/park/complete is in the file, with the
//   generation and owner the worker was told;
// - event log: per resource, revisions are 1..revision in commit order, without gaps;
// - `integrityCheck()` passes;
// - SQLITE_BUSY only ever surfaced as an error with that code (counted), never as a wrong result.

const fs = require('node:fs');
const path = require('node:path');

const { CONTROLLER, openStore, rows, runNode, seedPool, tempDir } = require('./common.js');

const WORKER = path.join(__dirname, 'contention-worker.js');

async function runContention({ processes = 8, seconds = 5, resources = 200, runs = 200, seed = 1, keep = false } = {}) {
  const dir = tempDir('contention');
  const file = path.join(dir, 'state.sqlite');
  const projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
  const setup = openStore(file, projectPath);
  seedPool(setup, { resources, runs });
  setup.close();

  const started = Date.now();
  const results = await Promise.all(
    Array.from({ length: processes }, (_, worker) => {
      const logFile = path.join(dir, `worker-${worker}.json`);
      const config = { worker, file, projectPath, seconds, seed: seed * 1000 + worker, logFile };
      return runNode(WORKER, [JSON.stringify(config)], { timeoutMs: (seconds + 120) * 1000 }).then((result) => ({
        ...result,
        logFile,
      }));
    }),
  );
  const elapsedMs = Date.now() - started;
  const problems = [];
  const logs = [];
  for (const [worker, result] of results.entries()) {
    if (result.code !== 0) {
      problems.push(`worker ${worker} exited with ${result.code ?? result.signal}: ${result.stderr.slice(0, 2000)}`);
      continue;
    }
    logs.push(JSON.parse(fs.readFileSync(result.logFile, 'utf8')));
  }
  for (const log of logs) {
    for (const error of log.errors.slice(0, 5)) {
      problems.push(`worker ${log.worker}: ${error.method} threw ${error.name}: ${error.message}`);
    }
  }

  const store = openStore(file, projectPath, { readOnly: true });
  let history;
  try {
    store.state.integrityCheck();
    history = readHistory(store);
  } finally {
    store.close();
  }
  problems.push(...checkRevisions(history), ...checkFencing(history, logs), ...checkAcknowledged(history, logs));

  const sum = (pick) => logs.reduce((total, log) => total + pick(log), 0);
  const report = {
    processes,
    seconds,
    elapsedMs,
    operations: sum((log) => log.operations),
    claims: sum((log) => log.claims.length),
    renewals: sum((log) => log.renewals.length),
    releases: sum((log) => log.releases.length),
    busy: sum((log) => log.busy),
    staleRejections: sum((log) => log.rejected),
    unexpectedErrors: sum((log) => log.errors.length),
    events: history.events.length,
    problems,
    dir,
  };
  if (!keep && problems.length === 0) fs.rmSync(dir, { recursive: true, force: true });
  return report;
}

/** The event log and the items it concerns, in commit order. */
function readHistory(store) {
  const items = new Map();
  for (const row of rows(store, 'SELECT resource_id, resource_key FROM controller_resources WHERE controller_name = ?', CONTROLLER)) {
    items.set(row.resource_id, { kind: 'resource', item: row.resource_key });
  }
  for (const row of rows(store, 'SELECT resource_id, run_id FROM runs')) {
    items.set(row.resource_id, { kind: 'run', item: row.run_id });
  }
  const events = rows(
    store,
    `SELECT e.event_seq AS seq, e.resource_id AS resourceId, e.resource_revision AS revision,
            e.event_type AS type, e.actor_id AS actorId, e.lease_generation AS generation,
            e.recorded_at AS recordedAt, CAST(b.content AS TEXT) AS payload
     FROM events e LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
     ORDER BY e.event_seq`,
  );
  const revisions = new Map(rows(store, 'SELECT resource_id, revision FROM resources').map((row) => [row.resource_id, row.revision]));
  const queue = new Map(rows(store, 'SELECT run_id, status FROM run_queue').map((row) => [row.run_id, row.status]));
  return { items, events, revisions, queue };
}

function checkRevisions({ events, revisions }) {
  const problems = [];
  const seen = new Map();
  for (const event of events) {
    const expected = (seen.get(event.resourceId) ?? 0) + 1;
    if (event.revision !== expected) {
      problems.push(`event ${event.seq} of ${event.resourceId} has revision ${event.revision}, expected ${expected}`);
    }
    seen.set(event.resourceId, event.revision);
  }
  for (const [resourceId, revision] of revisions) {
    if ((seen.get(resourceId) ?? 0) !== revision) {
      problems.push(`${resourceId} is at revision ${revision} but its events end at ${seen.get(resourceId) ?? 0}`);
    }
  }
  return problems.slice(0, 20);
}

const RELEASES = {
  resource: new Set(['lease.released']),
  run: new Set(['run.queue_parked', 'run.queue_done']),
};

function keyOf(kind, item, generation) {
  return `${kind}\u0000${item}\u0000${generation}`;
}

/** Replays each item's lease history from the event log and checks it never overlaps. */
function checkFencing(history, logs) {
  const problems = [];
  // A renewal sets `expires_at = now + leaseMs` (it may shorten the lease); one claim's
  // renewals come from one worker, in order, so the last acknowledged one is the one in force.
  const renewedUntil = new Map();
  for (const log of logs) {
    for (const renewal of log.renewals) {
      renewedUntil.set(keyOf(renewal.kind, renewal.item, renewal.generation), renewal.expiresAt);
    }
  }
  const leases = new Map();
  for (const event of history.events) {
    const target = history.items.get(event.resourceId);
    if (target === undefined) continue;
    const { kind, item } = target;
    const lease = leases.get(event.resourceId) ?? { generation: 0, owner: null, expiresAt: -Infinity, released: true };
    if (event.type === 'lease.claimed') {
      if (event.generation !== lease.generation + 1) {
        problems.push(`${kind} ${item}: claim generation ${event.generation} follows ${lease.generation} (seq ${event.seq})`);
      }
      const previousExpiry = renewedUntil.get(keyOf(kind, item, lease.generation)) ?? lease.expiresAt;
      const sameOwner = kind === 'run' && lease.owner === event.actorId;
      if (!lease.released && !sameOwner && event.recordedAt < previousExpiry) {
        problems.push(
          `${kind} ${item}: generation ${event.generation} (${event.actorId}) claimed at ${event.recordedAt} while generation ` +
            `${lease.generation} (${lease.owner}) was live until ${previousExpiry} (seq ${event.seq})`,
        );
      }
      leases.set(event.resourceId, {
        generation: event.generation,
        owner: event.actorId,
        expiresAt: JSON.parse(event.payload).expiresAt,
        released: false,
      });
    } else if (RELEASES[kind].has(event.type)) {
      if (event.generation !== lease.generation || lease.released) {
        problems.push(
          `${kind} ${item}: ${event.type} by generation ${event.generation} while generation ${lease.generation} ` +
            `${lease.released ? 'was already released' : 'held it'} (seq ${event.seq})`,
        );
      }
      leases.set(event.resourceId, { ...lease, released: true });
    }
    if (problems.length >= 20) break;
  }
  return problems;
}

/** Every acknowledged claim and release is in the file as the worker was told. */
function checkAcknowledged(history, logs) {
  const problems = [];
  const claimEvents = new Map();
  const releaseEvents = new Map();
  for (const event of history.events) {
    const target = history.items.get(event.resourceId);
    if (target === undefined) continue;
    const key = keyOf(target.kind, target.item, event.generation);
    if (event.type === 'lease.claimed') claimEvents.set(key, event);
    else if (RELEASES[target.kind].has(event.type)) releaseEvents.set(key, event);
  }
  const handedOut = new Map();
  for (const log of logs) {
    for (const claim of log.claims) {
      const key = keyOf(claim.kind, claim.item, claim.generation);
      if (handedOut.has(key)) {
        problems.push(`${claim.kind} ${claim.item} generation ${claim.generation} was handed to ${handedOut.get(key)} and ${claim.owner}`);
      }
      handedOut.set(key, claim.owner);
      const event = claimEvents.get(key);
      if (event === undefined || event.actorId !== claim.owner || event.recordedAt !== claim.start) {
        problems.push(`acknowledged claim of ${claim.kind} ${claim.item} generation ${claim.generation} by ${claim.owner} is not in the file`);
      }
    }
    for (const release of log.releases) {
      const event = releaseEvents.get(keyOf(release.kind, release.item, release.generation));
      if (event === undefined || event.recordedAt !== release.now) {
        problems.push(`acknowledged ${release.how} of ${release.kind} ${release.item} generation ${release.generation} is not in the file`);
      }
      if (release.how === 'done' && history.queue.get(release.item) !== 'done') {
        problems.push(`acknowledged completion of run ${release.item} is not in the file (queue ${history.queue.get(release.item)})`);
      }
    }
  }
  return problems.slice(0, 20);
}

module.exports = { runContention, checkFencing, checkRevisions, checkAcknowledged };
