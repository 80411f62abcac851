'use strict';
// The state files of `npm run bench:scale`, two ways that must give the same rows:
//
// - addRunThroughApi(store, index): run `index` through the public API, as a Pi session makes it
//   (90% terminal, 5% parked for a workflow source change, 5% queued for their own interactive
//   session, and every tenth run one settled controller resource);
// - buildFast(file, size, options): the same rows written straight with SQL through better-sqlite3
//   in one transaction (about a minute for 1,000,000 runs instead of hours), on a file a store
//   created (so the schema, the pragmas and the project row are the store's own).
//
// The rows are equal up to what is random or a clock reading in the API path: event ids,
// controller uids and ids, timestamps, and so the hashes of the `{expiresAt}` payload blobs
// (__test__/scale-builder.spec.ts compares every table of both on 200 runs). The fast builder's
// clock is synthetic: run i starts at base + 10·i ms, an hour or more before the build.

const crypto = require('node:crypto');
const { reservation } = require('./fixtures');

const runKind = (index) => (index % 20 === 0 ? 'queued' : index % 20 === 1 ? 'parked' : 'terminal');

/** Adds run `index` (and, every tenth run, one settled controller resource) through the API. */
function addRunThroughApi(store, index, kindOf = runKind) {
  const runId = `run-${index}`;
  const session = `session-${index}`;
  store.reserveWorkflowRun(reservation(runId, session));
  const kind = kindOf(index);
  if (kind !== 'queued') {
    const claim = { runId, runnerId: session, claimToken: `token-${index}`, leaseMs: 30_000 };
    store.claimWorkflowRun(claim);
    store.markWorkflowRunRunning(claim);
    if (kind === 'parked') store.parkWorkflowRunForSourceChange({ ...claim, detail: 'source changed' });
    else store.completeWorkflowRun(claim);
  }
  if (index % 10 === 0) {
    const ref = { controller: 'jobs', key: `job-${index / 10}` };
    store.putResource({ ...ref, spec: { n: index }, initialStatus: { phase: 'new' } });
    const claim = store.claimNext({ controllers: ['jobs'], ownerId: 'builder', leaseMs: 30_000 });
    store.recordEvent({ ...ref, claim, type: 'bench.reconciled', payload: { n: index } });
    store.settleClaim(claim);
  }
}

const sha256 = (value) => crypto.createHash('sha256').update(value).digest();
const resourceIdFor = (type, key) => `${type}-${sha256(`${type}\0${key}`).toString('hex').slice(0, 40)}`;
/** JSON as the store writes it: keys sorted (the values here are flat or already in key order). */
const canonical = (value) =>
  JSON.stringify(value, (_key, item) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(Object.keys(item).sort().map((key) => [key, item[key]]))
      : item,
  );

/**
 * Writes runs `from`..`size - 1` into `file` (a state file a store created and closed) with SQL.
 * `Database` is better-sqlite3; `kindOf(index)` picks each run's kind (default: the API mix).
 */
function buildFast(Database, file, size, { from = 0, kindOf = runKind, base } = {}) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');
  const { projectId } = db.prepare('SELECT project_id AS projectId FROM projects').get();
  const start = base ?? Date.now() - 3_600_000 - size * 10;
  const blobs = new Set(db.prepare('SELECT blob_hash AS h FROM blobs').all().map(({ h }) => h.toString('hex')));
  const putBlob = db.prepare(
    'INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(blob_hash) DO NOTHING',
  );
  const blob = (content, mediaType, now) => {
    const bytes = Buffer.from(content, 'utf8');
    const hash = sha256(bytes);
    const key = hash.toString('hex');
    if (!blobs.has(key)) {
      blobs.add(key);
      putBlob.run(hash, mediaType, bytes.length, bytes, now);
    }
    return hash;
  };
  const json = (value, now) => blob(canonical(value), 'application/json', now);
  const sql = {
    definition: db.prepare(
      'INSERT INTO workflow_definitions(definition_digest, workflow_name, definition_hash, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(definition_digest) DO NOTHING',
    ),
    resource: db.prepare(
      'INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    lease: db.prepare('INSERT INTO leases(resource_id, generation) VALUES (?, ?)'),
    run: db.prepare(
      `INSERT INTO runs(run_id, resource_id, project_id, root_run_id, restart_number, definition_digest, workflow_ref,
         launch_options_hash, status, paused, status_detail, input_hash, created_at, updated_at)
       VALUES (?, ?, ?, ?, 0, ?, 'builtin:echo', ?, 'queued', 0, ?, ?, ?, ?)`,
    ),
    viewerRun: db.prepare(
      'INSERT INTO viewer_runs(run_id, presentation_revision, retained_from_revision, updated_at) VALUES (?, ?, 1, ?)',
    ),
    source: db.prepare(
      "INSERT INTO run_sources(run_id, mount_path, source_type, source_ref, source_revision) VALUES (?, '', 'builtin', 'echo', 'r1')",
    ),
    binding: db.prepare(
      "INSERT INTO run_bindings(run_id, origin_session_id, execution_mode, created_at) VALUES (?, ?, 'interactive', ?)",
    ),
    queue: db.prepare(
      `INSERT INTO run_queue(run_id, status, available_at, affinity_runner_id, origin_session_id, consecutive_errors,
         error_code, error_hash, created_at, updated_at, started_at, finished_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`,
    ),
    event: db.prepare(
      `INSERT INTO events(event_id, resource_id, resource_revision, event_type, actor_type, actor_id, lease_generation,
         payload_hash, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    delta: db.prepare(
      `INSERT INTO viewer_deltas(run_id, presentation_revision, delta_index, target_type, target_key, patch_hash, recorded_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    controller: db.prepare(
      `INSERT INTO controller_resources(controller_resource_id, resource_id, project_id, controller_name, resource_key, uid,
         generation, spec_hash, status_hash, created_at, updated_at) VALUES (?, ?, ?, 'jobs', ?, ?, 1, ?, ?, ?, ?)`,
    ),
  };
  const event = (resourceId, revision, type, actorType, actorId, generation, payload, now) =>
    sql.event.run(`event-${crypto.randomUUID()}`, resourceId, revision, type, actorType, actorId, generation, payload, now);
  const BUMP = [
    ['summary', ''],
    ['graph', ''],
    ['replay', ''],
    ['inspector', 'run'],
  ];
  const SETTLE = [
    ['summary', ''],
    ['replay', ''],
  ];
  const deltas = (runId, revision, targets, now) => {
    const patch = json([{ op: 'replace', path: '/presentationRevision', value: revision }], now);
    targets.forEach(([type, key], index) => sql.delta.run(runId, revision, index, type, key, patch, now));
  };
  const fixture = reservation('run-0', 'session-0');
  const digest = Buffer.from(fixture.definitionDigest.slice('sha256:'.length), 'hex');

  db.transaction(() => {
    for (let index = from; index < size; index += 1) {
      const t = start + index * 10;
      const runId = `run-${index}`;
      const session = `session-${index}`;
      const resourceId = resourceIdFor('run', runId);
      const kind = kindOf(index);
      // reserveWorkflowRun, at t
      const definitionHash = json(fixture.definitionSnapshot, t);
      const inputHash = json({ message: `hello ${runId}` }, t);
      const launchHash = json({}, t);
      sql.definition.run(digest, fixture.workflowName, definitionHash, t);
      const claimed = kind !== 'queued';
      const last = t + 3; // completeWorkflowRun / parkWorkflowRunForSourceChange
      sql.resource.run(resourceId, 'run', runId, claimed ? 4 : 1, t, claimed ? last : t);
      sql.lease.run(resourceId, claimed ? 1 : 0);
      const parked = kind === 'parked';
      sql.run.run(runId, resourceId, projectId, runId, digest, launchHash, parked ? 'source changed' : null, inputHash, t, parked ? last : t);
      sql.viewerRun.run(runId, claimed ? 5 : 1, claimed ? last : t);
      sql.source.run(runId);
      sql.binding.run(runId, session, t);
      const errorHash = parked ? blob('source changed', 'text/plain', last) : null;
      if (!claimed) sql.queue.run(runId, 'queued', t, session, session, null, null, t, t, null, null);
      else if (parked)
        sql.queue.run(runId, 'parked', last, session, session, 'workflowSourceChanged', errorHash, t, last, t + 2, null);
      else sql.queue.run(runId, 'done', t, session, session, null, null, t, last, t + 2, last);
      event(resourceId, 1, 'run.queued', 'session', session, null, launchHash, t);
      if (claimed) {
        // claimWorkflowRun at t + 1, markWorkflowRunRunning at t + 2, the release at t + 3
        deltas(runId, 2, BUMP, t + 1);
        event(resourceId, 2, 'lease.claimed', 'session', session, 1, json({ expiresAt: t + 1 + 30_000 }, t + 1), t + 1);
        deltas(runId, 3, BUMP, t + 2);
        event(resourceId, 3, 'run.queue_running', 'session', session, 1, json({ status: 'running' }, t + 2), t + 2);
        deltas(runId, 4, BUMP, last);
        const settled = parked ? { code: 'workflowSourceChanged', status: 'parked' } : { status: 'done' };
        event(resourceId, 4, parked ? 'run.source_changed' : 'run.queue_done', 'session', session, 1, json(settled, last), last);
        deltas(runId, 5, SETTLE, last);
      }
      if (index % 10 === 0) {
        // putResource at t + 5, claimNext at t + 6, recordEvent + settleClaim at t + 7
        const c = t + 5;
        const key = `job-${index / 10}`;
        const controllerResourceId = `controller-resource-${crypto.randomUUID()}`;
        const controllerId = resourceIdFor('controller', `${projectId}:jobs:${key}`);
        const spec = json({ n: index }, c);
        const status = json({ observedGeneration: 0, conditions: [], controllerStatus: { phase: 'new' } }, c);
        sql.resource.run(controllerId, 'controller', controllerResourceId, 4, c, c + 2);
        sql.lease.run(controllerId, 1);
        sql.controller.run(controllerResourceId, controllerId, projectId, key, crypto.randomUUID(), spec, status, c, c);
        event(controllerId, 1, 'resource.created', 'control', null, null, json({ generation: 1 }, c), c);
        event(controllerId, 2, 'lease.claimed', 'controller', 'builder', 1, json({ expiresAt: c + 1 + 30_000 }, c + 1), c + 1);
        event(controllerId, 3, 'bench.reconciled', 'controller', 'builder', 1, spec, c + 2);
        event(controllerId, 4, 'lease.released', 'controller', 'builder', 1, json({}, c + 2), c + 2);
      }
    }
  })();
  db.close();
}

module.exports = { runKind, addRunThroughApi, buildFast };
