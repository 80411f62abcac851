'use strict';
// The actions and polls of the randomized cross-process run-index spec
// (`__test__/run-index-cross-process.spec.ts`), shared by the spec's own process and the
// processes it forks (`xproc-worker.js`), so that every side polls and writes the same way.
//
// - `polls(store)`: every run poll the run index answers (revision, view pages, run lists by
//   limit and status), each result or its error.
// - `nativeAction(store, rng, ctx)`: one step of a Pi process through the store's API (run
//   lifecycles, run events, controller resources), on the runs it knows (`ctx.runs`).
// - `sqlAction(db, rng, ctx)`: one raw-SQL step of another application or the reference, on
//   any SQLite connection with better-sqlite3's `prepare`/`exec` (better-sqlite3 itself in a
//   process of its own, or a store's `state.connection`), kept within the schema's CHECKs and
//   foreign keys: queue status/time/error changes, resource revisions, lease rows, runs
//   inserted and deleted, rowid changes, REPLACE, truncations with foreign keys off, rolled-back
//   transactions, pending interactions, VACUUM.
//
// Every `now` is the spec's logical clock (`ctx.now`, ms), coarse on purpose: equal timestamps
// make the lists' and the claim's tie-breaks (rowid order) matter.

const { createHash } = require('node:crypto');

const ACTIVE = ['queued', 'starting', 'running', 'parked'];
const TERMINAL = ['done', 'failed', 'cancelled'];
const QUEUE_STATUSES = [...ACTIVE, ...TERMINAL];
const DIGEST = `sha256:${'ab'.repeat(32)}`;

const iso = (ms) => new Date(ms).toISOString();
const sha256 = (text) => createHash('sha256').update(text).digest();

/** A call's value, or its error as data (so both sides of a comparison can fail alike). */
function attempt(operation) {
  try {
    const value = operation();
    return value === undefined ? { undefined: true } : { value };
  } catch (error) {
    return { error: String(error?.message ?? error), code: error?.code };
  }
}

/** Every run poll the run index answers, for one store. */
function polls(store) {
  return {
    revision: attempt(() => store.workflowRunListRevision()),
    firstPage: attempt(() => store.listWorkflowRunViews({ offset: 0, limit: 5 })),
    offsetPage: attempt(() => store.listWorkflowRunViews({ offset: 4, limit: 3 })),
    limited: attempt(() => store.listWorkflowRuns({ limit: 4 })),
    active: attempt(() => store.listWorkflowRuns({ statuses: ACTIVE, limit: 3 })),
    terminal: attempt(() => store.listWorkflowRuns({ statuses: TERMINAL })),
    queuedOrParked: attempt(() => store.listWorkflowRuns({ statuses: ['queued', 'parked'], limit: 6 })),
    all: attempt(() => store.listWorkflowRuns({})),
  };
}

/**
 * Every poll of `store` through SQL on its own connection, then as the index answers them:
 * `{ sql, index }`. Inside a transaction of the caller's the index is never used, so the first
 * pass reads through SQL at the same snapshot (nothing else writes between two steps of the
 * specs that use this).
 */
function indexAndSql(store) {
  const connection = store.state.connection;
  connection.exec('BEGIN');
  let sql;
  try {
    sql = polls(store);
  } finally {
    connection.exec('ROLLBACK');
  }
  return { sql, index: polls(store) };
}

/** Picks by weight: `[[value, weight], …]`. */
function weighted(rng, choices) {
  const total = choices.reduce((sum, [, weight]) => sum + weight, 0);
  let at = rng() * total;
  for (const [value, weight] of choices) {
    at -= weight;
    if (at < 0) return value;
  }
  return choices[choices.length - 1][0];
}

// ---- native writers --------------------------------------------------------------------------

/**
 * One API step of a writer. `ctx`: `{ name, now, runs: Map<runId, {session, mode, token?}>,
 * counter, stats }`; `ctx.runs` also takes the runs a host's claim gave the writer.
 */
function nativeAction(store, rng, ctx) {
  const now = iso(ctx.now);
  const known = [...ctx.runs.keys()];
  const pickRun = (filter = () => true) => {
    const runs = known.filter((runId) => filter(ctx.runs.get(runId)));
    return runs.length === 0 ? undefined : rng.pick(runs);
  };
  const held = () => pickRun((run) => run.token !== undefined);
  const token = () => `${ctx.name}-t${(ctx.counter += 1)}`;
  // Mostly long enough to outlive the writer's next steps, sometimes not.
  const lease = () => rng.pick([2500, 20_000, 60_000, 60_000]);
  // A writer that knows few runs mostly starts new ones; one holding a claim mostly moves it on.
  const holding = known.some((runId) => ctx.runs.get(runId).token !== undefined);
  const lifecycle = [
    ['markRunning', 3],
    ['renew', 2],
    ['park', 2],
    ['parkSource', 1],
    ['parkAmbiguous', 1],
    ['complete', 3],
    ['fail', 1],
    ['cancel', 1],
    ['delete', 1],
  ];
  const kind = ctx.runs.size < 4 && rng.chance(0.6) ? 'reserve' : holding && rng.chance(0.5) ? weighted(rng, lifecycle) : weighted(rng, [
    ['reserve', 5],
    ['claim', 4],
    ['claimNext', 2],
    ['markRunning', 2],
    ['renew', 2],
    ['park', 2],
    ['parkSource', 1],
    ['parkAmbiguous', 1],
    ['complete', 2],
    ['fail', 1],
    ['cancel', 1],
    ['delete', 1],
    ['event', 2],
    ['pause', 1],
    ['resume', 1],
    ['origin', 1],
    ['resource', 2],
    ['controllerClaim', 2],
  ]);
  const done = (what, outcome) => {
    const ok = outcome.error === undefined && outcome.value !== false && !outcome.undefined;
    ctx.stats[kind] = (ctx.stats[kind] ?? 0) + (ok ? 1 : 0);
    return `${ctx.name} ${kind} ${what} -> ${outcome.error !== undefined ? `error ${outcome.error}` : outcome.undefined ? 'undefined' : outcome.value === true || outcome.value === false ? outcome.value : 'ok'}`;
  };
  const withToken = (method, extra = {}) => {
    const runId = held();
    if (runId === undefined) return `${ctx.name} ${kind}: nothing held`;
    const run = ctx.runs.get(runId);
    const outcome = attempt(() => store[method]({ runId, claimToken: run.token, now, ...extra }));
    if (outcome.value === true && ['parkWorkflowRun', 'parkWorkflowRunForSourceChange', 'parkWorkflowRunForAmbiguousEffect', 'completeWorkflowRun', 'failWorkflowRun', 'cancelWorkflowRun'].includes(method)) {
      run.token = undefined;
    }
    if (outcome.value === true && ['completeWorkflowRun', 'failWorkflowRun', 'cancelWorkflowRun'].includes(method)) run.ended = true;
    // A claim the store no longer honours (expired and taken, changed by raw SQL) is dropped.
    if (outcome.value === false || outcome.error !== undefined) run.token = undefined;
    if (outcome.value === true && method === 'deleteWorkflowRun') ctx.runs.delete(runId);
    return done(runId, outcome);
  };
  switch (kind) {
    case 'reserve': {
      ctx.counter += 1;
      const runId = `${ctx.name}-r${ctx.counter}`;
      const headless = rng.chance(0.5);
      // A continuation of a run this writer ended (its lineage rules want a terminal parent).
      const parent = rng.chance(0.25) ? pickRun((run) => run.ended === true) : undefined;
      const session = parent === undefined ? `${ctx.name}-s${ctx.counter}` : ctx.runs.get(parent).session;
      const options = {
        runId,
        workflowName: 'echo',
        workflowSourceRef: 'builtin:echo',
        workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
        definitionDigest: DIGEST,
        definitionSnapshot: { name: 'echo' },
        input: { runId },
        runnerId: headless && rng.chance(0.5) ? 'host-1' : session,
        originSessionId: session,
        executionMode: headless ? 'headless' : 'interactive',
        now,
        ...(parent === undefined ? {} : { parentRunId: parent }),
      };
      const outcome = attempt(() => store.reserveWorkflowRun(options));
      if (outcome.value !== undefined) ctx.runs.set(runId, { session, mode: options.executionMode });
      return done(runId, outcome);
    }
    case 'claim': {
      const runId = pickRun((run) => run.token === undefined);
      if (runId === undefined) return `${ctx.name} claim: no run`;
      const run = ctx.runs.get(runId);
      const claimToken = token();
      const runnerId = run.mode === 'headless' || rng.chance(0.3) ? `host-${ctx.name}` : run.session;
      const outcome = attempt(() => store.claimWorkflowRun({ runId, runnerId, claimToken, leaseMs: lease(), now }));
      if (outcome.value !== undefined) run.token = claimToken;
      return done(`${runId} by ${runnerId}`, outcome);
    }
    case 'claimNext': {
      const runId = pickRun((run) => run.token === undefined && run.mode === 'interactive');
      if (runId === undefined) return `${ctx.name} claimNext: no session`;
      const session = ctx.runs.get(runId).session;
      const claimToken = token();
      const outcome = attempt(() => store.claimNextWorkflowRun({ runnerId: session, sessionId: session, claimToken, leaseMs: lease(), now }));
      const claimed = outcome.value?.runId;
      if (claimed !== undefined && ctx.runs.has(claimed)) ctx.runs.get(claimed).token = claimToken;
      return done(`${session} -> ${claimed}`, outcome);
    }
    case 'markRunning':
      return withToken('markWorkflowRunRunning');
    case 'renew':
      return withToken('renewWorkflowRunClaim', { leaseMs: lease() });
    case 'park':
      return withToken('parkWorkflowRun');
    case 'parkSource':
      return withToken('parkWorkflowRunForSourceChange', { detail: 'source moved' });
    case 'parkAmbiguous':
      return withToken('parkWorkflowRunForAmbiguousEffect');
    case 'complete':
      return withToken('completeWorkflowRun');
    case 'fail':
      if (rng.chance(0.3)) {
        const runId = pickRun((run) => run.token === undefined);
        if (runId === undefined) return `${ctx.name} fail: no run`;
        return done(`${runId} unclaimed`, attempt(() => store.failWorkflowRun({ runId, errorCode: 'boom', errorMessage: 'it broke', now })));
      }
      return withToken('failWorkflowRun', { errorCode: 'boom', errorMessage: 'it broke' });
    case 'cancel':
      if (rng.chance(0.4)) {
        const runId = pickRun();
        if (runId === undefined) return `${ctx.name} cancel: no run`;
        const outcome = attempt(() => store.cancelStaleWorkflowRun({ runId, controlId: `control-${ctx.name}`, claimToken: token(), now }));
        if (outcome.value === true) ctx.runs.get(runId).token = undefined;
        return done(`${runId} stale`, outcome);
      }
      return withToken('cancelWorkflowRun');
    case 'delete':
      return withToken('deleteWorkflowRun');
    case 'event': {
      const runId = pickRun();
      if (runId === undefined) return `${ctx.name} event: no run`;
      const outcome = attempt(() =>
        store.recordRunEvent({ runId, workflowRef: 'echo', type: 'step.progress', payload: { at: ctx.now }, runnerId: ctx.runs.get(runId).session, now }),
      );
      return done(runId, outcome);
    }
    case 'pause': {
      const runId = pickRun((run) => run.token === undefined);
      if (runId === undefined) return `${ctx.name} pause: no run`;
      return done(runId, attempt(() => store.pauseParkedWorkflowRun({ runId, now })));
    }
    case 'resume': {
      const runId = pickRun();
      if (runId === undefined) return `${ctx.name} resume: no run`;
      return done(runId, attempt(() => store.resumePausedInteraction({ runId, now })));
    }
    case 'origin': {
      const runId = pickRun();
      if (runId === undefined) return `${ctx.name} origin: no run`;
      const run = ctx.runs.get(runId);
      return done(runId, attempt(() => store.setWorkflowRunOriginSession(runId, run.session)));
    }
    case 'resource': {
      const key = `k${rng.int(0, 4)}`;
      if (rng.chance(0.3)) {
        return done(key, attempt(() => store.recordEvent({ controller: 'xproc', key, type: 'note', payload: { at: ctx.now }, now })));
      }
      return done(key, attempt(() => store.putResource({ controller: 'xproc', key, spec: { v: rng.int(0, 3) }, initialStatus: { seen: 0 }, now })));
    }
    case 'controllerClaim': {
      const claimed = attempt(() => store.claimNext({ controllers: ['xproc'], ownerId: ctx.name, leaseMs: lease(), now }));
      const claim = claimed.value;
      if (claim === undefined) return done('none', claimed);
      const settle = rng.chance(0.5)
        ? attempt(() => store.settleClaim(claim, now))
        : attempt(() => store.requeueClaim(claim, { availableAt: iso(ctx.now + 1000), error: 'again' }, now));
      return done(claim.key, settle);
    }
    default:
      throw new Error(`unknown action ${kind}`);
  }
}

// ---- raw SQL ---------------------------------------------------------------------------------

const SQL_KINDS = [
  ['queueStatus', 4],
  ['queueTimes', 3],
  ['queueError', 1],
  ['revision', 3],
  ['lease', 3],
  ['runStatus', 2],
  ['insertRun', 3],
  ['deleteRun', 1],
  ['rowid', 3],
  ['replace', 2],
  ['truncate', 1],
  ['rollback', 3],
  ['interaction', 2],
  ['source', 2],
  ['blob', 2],
];

/**
 * One raw-SQL step on `db`. `ctx`: `{ name, now, counter, allow: { runsRowid, vacuum } }`.
 * `allow.runsRowid` off leaves out `UPDATE runs SET rowid = …` (defect 1 of issue 21 on the
 * index's own connection); `allow.vacuum` adds VACUUM. Returns what it did.
 */
function sqlAction(db, rng, ctx, forced) {
  const kinds = SQL_KINDS.slice();
  if (ctx.allow.vacuum) kinds.push(['vacuum', 2]);
  // `forced`: a kind, or `rowid:<table>` for a rowid change of that table.
  const [kind, forcedTable] = (forced ?? weighted(rng, kinds)).split(':');
  const all = (sql, ...params) => db.prepare(sql).all(...params);
  const run = (sql, ...params) => db.prepare(sql).run(...params).changes;
  const runs = () => all('SELECT run_id, resource_id FROM runs ORDER BY run_id');
  const anyRun = () => {
    const rows = runs();
    return rows.length === 0 ? undefined : rng.pick(rows);
  };
  const now = ctx.now;
  // One write in its own transaction; a constraint it meets (the active-session index, a
  // rowid taken) leaves nothing, as it would for any application.
  const guarded = (what, write) => {
    try {
      return `${what}: ${write()}`;
    } catch (error) {
      if (!/constraint|UNIQUE|FOREIGN KEY|CHECK/i.test(String(error?.message))) throw error;
      return `${what}: refused (${error.message})`;
    }
  };
  const one = (which) => {
    let target = anyRun();
    switch (which) {
      case 'queueStatus': {
        if (target === undefined) return 'queueStatus: no run';
        const status = rng.pick(QUEUE_STATUSES);
        return guarded(`queue ${target.run_id} -> ${status}`, () =>
          run(
            `UPDATE run_queue SET status = ?, updated_at = ?, finished_at = CASE WHEN ? THEN ? ELSE NULL END WHERE run_id = ?`,
            status,
            now,
            TERMINAL.includes(status) ? 1 : 0,
            now,
            target.run_id,
          ),
        );
      }
      case 'queueTimes': {
        if (target === undefined) return 'queueTimes: no run';
        const shift = rng.pick([-2000, -500, 0, 500, 1000]);
        const column = rng.pick(['available_at', 'created_at', 'updated_at']);
        return guarded(`queue ${target.run_id} ${column} ${shift}`, () =>
          run(`UPDATE run_queue SET ${column} = ?, updated_at = max(updated_at, ?) WHERE run_id = ?`, now + shift, now, target.run_id),
        );
      }
      case 'queueError': {
        if (target === undefined) return 'queueError: no run';
        const code = rng.pick([null, 'workflowSourceChanged', 'effectAmbiguous']);
        return guarded(`queue ${target.run_id} error ${code}`, () => run('UPDATE run_queue SET error_code = ?, updated_at = ? WHERE run_id = ?', code, now, target.run_id));
      }
      case 'revision': {
        if (rng.chance(0.25)) {
          return guarded('controller revisions', () => run("UPDATE resources SET revision = revision + 1, updated_at = ? WHERE resource_type = 'controller'", now));
        }
        if (target === undefined) return 'revision: no run';
        return guarded(`revision ${target.run_id}`, () => run('UPDATE resources SET revision = revision + ?, updated_at = ? WHERE resource_id = ?', rng.int(1, 3), now, target.resource_id));
      }
      case 'lease': {
        // Half the time one of the runs at the front of the claim's order, where a lease
        // decides what a host's claim takes next.
        const front = all(
          `SELECT r.run_id, r.resource_id FROM runs r JOIN run_queue q ON q.run_id = r.run_id
           WHERE q.status IN ('queued', 'parked', 'starting', 'running') ORDER BY q.available_at, q.created_at, r.run_id LIMIT 3`,
        );
        if (front.length > 0 && rng.chance(0.5)) target = rng.pick(front);
        if (target === undefined) return 'lease: no run';
        const how = rng.pick(['take', 'take', 'clear', 'generation', 'expire']);
        if (how === 'take') {
          const owner = rng.pick(['host-1', 'host-raw', 'session-raw']);
          return guarded(`lease ${target.run_id} to ${owner}`, () =>
            run(
              `UPDATE leases SET generation = generation + 1, owner_type = ?, owner_id = ?, token_hash = ?,
                 acquired_at = ?, heartbeat_at = ?, expires_at = ? WHERE resource_id = ?`,
              owner.startsWith('host-') ? 'host' : 'session',
              owner,
              sha256(`raw-${ctx.counter++}`),
              now,
              now,
              now + rng.pick([-1000, 0, 1500, 5000]),
              target.resource_id,
            ),
          );
        }
        if (how === 'clear') {
          return guarded(`lease ${target.run_id} cleared`, () =>
            run(
              `UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL, acquired_at = NULL,
                 heartbeat_at = NULL, expires_at = NULL WHERE resource_id = ?`,
              target.resource_id,
            ),
          );
        }
        if (how === 'expire') {
          return guarded(`lease ${target.run_id} expired`, () => run('UPDATE leases SET expires_at = ? WHERE resource_id = ? AND expires_at IS NOT NULL', now - 1, target.resource_id));
        }
        return guarded(`lease ${target.run_id} generation`, () => run('UPDATE leases SET generation = generation + 1 WHERE resource_id = ?', target.resource_id));
      }
      case 'runStatus': {
        if (target === undefined) return 'runStatus: no run';
        const how = rng.pick(['waiting', 'running', 'paused', 'completed']);
        if (how === 'paused') return guarded(`run ${target.run_id} paused toggled`, () => run('UPDATE runs SET paused = 1 - paused, updated_at = ? WHERE run_id = ?', now, target.run_id));
        const finished = how !== 'running';
        return guarded(`run ${target.run_id} -> ${how}`, () =>
          run('UPDATE runs SET status = ?, finished_at = ?, updated_at = ? WHERE run_id = ?', how, finished ? now : null, now, target.run_id),
        );
      }
      case 'insertRun':
        return `insert ${insertRun(db, rng, ctx)}`;
      case 'deleteRun': {
        if (target === undefined) return 'deleteRun: no run';
        // Through the run (its rows cascade), or through its resource (which cascades to the run
        // unless events refer to the resource: then the foreign key refuses).
        if (rng.chance(0.5)) return guarded(`delete run ${target.run_id}`, () => run('DELETE FROM runs WHERE run_id = ?', target.run_id));
        return guarded(`delete resource of ${target.run_id}`, () => run('DELETE FROM resources WHERE resource_id = ?', target.resource_id));
      }
      case 'rowid': {
        if (target === undefined) return 'rowid: no run';
        const tables = [
          ['run_queue', 'run_id', target.run_id],
          ['run_bindings', 'run_id', target.run_id],
          ['resources', 'resource_id', target.resource_id],
          ['leases', 'resource_id', target.resource_id],
        ];
        if (ctx.allow.runsRowid || forcedTable === 'runs') tables.push(['runs', 'run_id', target.run_id], ['runs', 'run_id', target.run_id]);
        const [table, key, value] = forcedTable === undefined ? rng.pick(tables) : tables.find(([name]) => name === forcedTable);
        // The issue's statement (a collision is refused), or past the largest rowid, or down
        // into a gap a deletion or VACUUM left.
        const how = rng.pick(['+1000', 'max', 'low']);
        const to = how === '+1000' ? 'rowid + 1000' : how === 'max' ? `(SELECT max(rowid) FROM ${table}) + ${rng.int(1, 5)}` : `(SELECT coalesce(min(rowid), 1) FROM ${table}) - ${rng.int(1, 3)}`;
        return guarded(`rowid ${table} ${value} ${how}`, () => run(`UPDATE ${table} SET rowid = ${to} WHERE ${key} = ?`, value));
      }
      case 'replace': {
        if (target === undefined) return 'replace: no run';
        const how = rng.pick(['queue', 'binding', 'lease', 'victim']);
        if (how === 'queue') {
          return guarded(`replace queue ${target.run_id}`, () => run('INSERT OR REPLACE INTO run_queue SELECT * FROM run_queue WHERE run_id = ?', target.run_id));
        }
        if (how === 'binding') {
          return guarded(`replace binding ${target.run_id}`, () =>
            run(
              `REPLACE INTO run_bindings(run_id, origin_session_id, execution_mode, created_at)
               SELECT run_id, origin_session_id, CASE execution_mode WHEN 'headless' THEN 'interactive' ELSE 'headless' END, created_at
               FROM run_bindings WHERE run_id = ?`,
              target.run_id,
            ),
          );
        }
        if (how === 'lease') return guarded(`replace lease ${target.run_id}`, () => run('INSERT OR REPLACE INTO leases SELECT * FROM leases WHERE resource_id = ?', target.resource_id));
        // The replaced row takes another run's active session: REPLACE deletes that run's row.
        return guarded(`replace queue ${target.run_id} taking an active session`, () =>
          run(
            `REPLACE INTO run_queue(run_id, status, available_at, affinity_runner_id, origin_session_id, consecutive_errors,
                                    error_code, error_hash, created_at, updated_at, started_at, finished_at)
             SELECT run_id, 'queued', available_at, affinity_runner_id,
                    coalesce((SELECT origin_session_id FROM run_queue WHERE status IN ('queued', 'starting', 'running') AND run_id <> ? ORDER BY run_id LIMIT 1), origin_session_id),
                    0, NULL, NULL, created_at, ?, NULL, NULL
             FROM run_queue WHERE run_id = ?`,
            target.run_id,
            now,
            target.run_id,
          ),
        );
      }
      case 'source': {
        // A run's source row alone: no column the run polls filter or sort on, but the records.
        if (target === undefined) return 'source: no run';
        ctx.counter += 1;
        return guarded(`source ${target.run_id}`, () =>
          run("UPDATE run_sources SET source_revision = ? WHERE run_id = ? AND mount_path = ''", `raw-${ctx.counter}`, target.run_id),
        );
      }
      case 'blob': {
        // A document a record reads (input, launch options, definition snapshot, error) rewritten
        // in place: still JSON, no longer its hash's content.
        if (target === undefined) return 'blob: no run';
        const column = rng.pick(['r.input_hash', 'r.launch_options_hash', 'd.definition_hash', 'q.error_hash']);
        ctx.counter += 1;
        const content = Buffer.from(JSON.stringify({ raw: ctx.counter }));
        return guarded(`blob ${column} of ${target.run_id}`, () =>
          run(
            `UPDATE blobs SET content = ?, byte_length = ? WHERE blob_hash = (
               SELECT ${column} FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
               JOIN run_queue q ON q.run_id = r.run_id WHERE r.run_id = ?)`,
            content,
            content.length,
            target.run_id,
          ),
        );
      }
      case 'interaction': {
        if (target === undefined) return 'interaction: no run';
        const pending = all("SELECT request_id FROM interactive_requests WHERE status = 'pending' ORDER BY request_id");
        if (pending.length > 0 && rng.chance(0.5)) {
          const { request_id: requestId } = rng.pick(pending);
          return guarded(`interaction ${requestId} cancelled`, () => run("UPDATE interactive_requests SET status = 'cancelled', updated_at = ? WHERE request_id = ?", now, requestId));
        }
        ctx.counter += 1;
        const requestId = `${ctx.name}-i${ctx.counter}`;
        {
          run(
            `INSERT INTO node_attempts(attempt_id, run_id, node_id, attempt_number, node_type, status, created_at, updated_at)
             VALUES (?, ?, ?, 1, 'agent', 'waiting', ?, ?)`,
            `attempt-${requestId}`,
            target.run_id,
            `node-${requestId}`,
            now,
            now,
          );
          run(
            `INSERT INTO interactive_requests(request_id, run_id, attempt_id, target_session_id, kind, contract_hash, status, created_at, updated_at)
             VALUES (?, ?, ?, 'session-raw', 'agent', ?, 'pending', ?, ?)`,
            requestId,
            target.run_id,
            `attempt-${requestId}`,
            blob(db, JSON.stringify({ contract: requestId })),
            now,
            now,
          );
          return `interaction ${requestId} pending on ${target.run_id}`;
        }
      }
      default:
        throw new Error(`not a single write: ${which}`);
    }
  };
  const transaction = (body) => {
    db.exec('BEGIN IMMEDIATE');
    try {
      const what = body();
      db.exec('COMMIT');
      return what;
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
  };
  switch (kind) {
    case 'insertRun':
    case 'interaction':
      // Several statements: all or nothing.
      return guarded(kind, () => transaction(() => one(kind)));
    case 'rollback': {
      // Several writes, some that the update hook reports and some it does not, then ROLLBACK.
      db.exec('BEGIN IMMEDIATE');
      const done = [];
      try {
        for (let count = rng.int(1, 4); count > 0; count -= 1) {
          const which = rng.pick(['queueStatus', 'queueTimes', 'revision', 'lease', 'insertRun', 'deleteRun', 'rowid', 'replace', 'runStatus']);
          done.push(guarded(which, () => one(which)));
        }
      } finally {
        db.exec('ROLLBACK');
      }
      return `rolled back [${done.join('; ')}]`;
    }
    case 'truncate': {
      // DELETE without WHERE (the truncate optimization: no update hook), possible only with
      // foreign keys off; the rows come back but for a deterministic few, under new rowids.
      const table = rng.pick(['run_bindings', 'run_queue', 'leases']);
      const drop = rng.int(0, 9);
      db.exec('PRAGMA foreign_keys = OFF');
      try {
        return transaction(() => {
          db.exec(`CREATE TEMP TABLE xproc_keep AS SELECT * FROM main.${table}`);
          db.exec(`DELETE FROM main.${table}`);
          const kept = run(`INSERT INTO main.${table} SELECT * FROM temp.xproc_keep WHERE ${table === 'leases' ? 'resource_id' : 'run_id'} NOT LIKE '%${drop}'`);
          db.exec('DROP TABLE temp.xproc_keep');
          return `truncate ${table}, kept ${kept} (not ending in ${drop})`;
        });
      } finally {
        db.exec('PRAGMA foreign_keys = ON');
      }
    }
    case 'vacuum':
      db.exec('VACUUM');
      return 'VACUUM';
    default:
      return one(kind);
  }
}

/** A blob (idempotent), as the store writes it. */
function blob(db, text, mediaType = 'application/json') {
  const content = Buffer.from(text);
  const hash = sha256(content);
  db.prepare(
    `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (?, ?, ?, ?, 0)
     ON CONFLICT(blob_hash) DO NOTHING`,
  ).run(hash, mediaType, content.length, content);
  return hash;
}

/** The rows a root reservation writes (see `runs-lifecycle-fixture.ts`), in a random state. */
function insertRun(db, rng, ctx) {
  ctx.counter += 1;
  const runId = `${ctx.name}-r${ctx.counter}`;
  const now = ctx.now + rng.pick([-1000, 0, 0, 500]);
  const resourceId = `run-${sha256(runId).toString('hex').slice(0, 40)}`;
  const projects = db.prepare('SELECT project_id FROM projects ORDER BY canonical_path').all().map((row) => row.project_id);
  const project = projects.length === 0 || rng.chance(0.15) ? null : rng.pick(projects);
  const digest = sha256(`definition:${rng.int(0, 2)}`);
  db.prepare(
    `INSERT INTO workflow_definitions(definition_digest, workflow_name, definition_hash, created_at) VALUES (?, 'raw', ?, ?)
     ON CONFLICT(definition_digest) DO NOTHING`,
  ).run(digest, blob(db, JSON.stringify({ name: 'raw' })), now);
  db.prepare(`INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at) VALUES (?, 'run', ?, ?, ?, ?)`).run(
    resourceId,
    runId,
    rng.int(1, 3),
    now,
    now,
  );
  if (rng.chance(0.7)) {
    db.prepare('INSERT INTO leases(resource_id, generation) VALUES (?, 0)').run(resourceId);
  } else {
    const owner = rng.pick(['host-1', 'host-raw', 'session-raw']);
    db.prepare(
      `INSERT INTO leases(resource_id, generation, owner_type, owner_id, token_hash, acquired_at, heartbeat_at, expires_at)
       VALUES (?, 1, ?, ?, ?, ?, ?, ?)`,
    ).run(resourceId, owner.startsWith('host-') ? 'host' : 'session', owner, sha256(`lease-${runId}`), now, now, now + rng.pick([-500, 2000]));
  }
  const runStatus = rng.pick(['queued', 'queued', 'running', 'waiting', 'completed', 'failed']);
  const finished = !['queued', 'running'].includes(runStatus);
  db.prepare(
    `INSERT INTO runs(run_id, resource_id, project_id, root_run_id, definition_digest, workflow_ref, launch_options_hash,
                      status, paused, input_hash, created_at, updated_at, finished_at)
     VALUES (?, ?, ?, ?, ?, 'raw', ?, ?, ?, ?, ?, ?, ?)`,
  ).run(runId, resourceId, project, runId, digest, blob(db, '{}'), runStatus, rng.chance(0.15) ? 1 : 0, blob(db, JSON.stringify({ runId })), now, now, finished ? now : null);
  db.prepare('INSERT INTO viewer_runs(run_id, presentation_revision, retained_from_revision, updated_at) VALUES (?, 1, 1, ?)').run(runId, now);
  db.prepare(`INSERT INTO run_sources(run_id, mount_path, source_type, source_ref, source_revision) VALUES (?, '', 'builtin', 'raw', 'r1')`).run(runId);
  const session = `${runId}-s`;
  const mode = rng.chance(0.5) ? 'headless' : 'interactive';
  if (rng.chance(0.9)) {
    db.prepare('INSERT INTO run_bindings(run_id, origin_session_id, execution_mode, created_at) VALUES (?, ?, ?, ?)').run(runId, session, mode, now);
  }
  const status = rng.pick(['queued', 'queued', 'parked', 'starting', 'running', 'done', 'failed']);
  db.prepare(
    `INSERT INTO run_queue(run_id, status, available_at, affinity_runner_id, origin_session_id, created_at, updated_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(runId, status, now + rng.pick([-1000, 0, 2000]), rng.pick([null, null, 'host-1', session]), session, now, now, TERMINAL.includes(status) ? now : null);
  return `run ${runId} (${project === null ? 'no project' : 'project'}, ${status}/${runStatus}, ${mode})`;
}

module.exports = { ACTIVE, TERMINAL, iso, attempt, polls, indexAndSql, weighted, nativeAction, sqlAction };
