// The query-plan changes of issue 13 must pick and list exactly what the reference's single
// statements pick and list: ties on equal timestamps, other projects in the file, runs deleted
// behind the store's back and raw SQL writes between two calls (as another process or the
// workflow engine makes them) included.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const T0 = Date.parse('2026-09-02T00:00:00.000Z');
const LATER = new Date(T0 + 3_600_000).toISOString();
const DIGEST = `sha256:${'cd'.repeat(32)}`;

/** The reference's claimNextWorkflowRun selection, as one statement (its clause order). */
const CLAIM_SELECT = `SELECT r.run_id FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
  JOIN run_queue q ON q.run_id = r.run_id
  LEFT JOIN run_bindings b ON b.run_id = r.run_id
  JOIN leases l ON l.resource_id = r.resource_id
  WHERE %PROJECT% q.status IN ('queued', 'parked', 'starting', 'running')
    AND q.available_at <= ?
    AND (l.owner_id IS NULL OR l.expires_at <= ? OR l.owner_id = ?)
    AND (q.affinity_runner_id IS NULL OR q.affinity_runner_id = ? OR q.status IN ('parked', 'starting', 'running'))
    AND NOT (q.status = 'parked' AND (r.status = 'waiting' OR r.paused = 1))
    AND NOT EXISTS (SELECT 1 FROM interactive_requests i WHERE i.run_id = r.run_id AND i.status = 'pending')
    AND (q.error_code IS NULL OR q.error_code <> 'workflowSourceChanged')
    AND %SESSION%
  ORDER BY q.available_at, q.created_at LIMIT 1`;

let dir: string;
let store: any;
let other: any;
let global: any;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-scale-eq-')));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
  other = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { state: store.state, projectPath: path.join(dir, 'other') });
  global = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { state: store.state, global: true });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function reserve(into: any, runId: string, session: string, now: number, options: Record<string, unknown> = {}): void {
  into.reserveWorkflowRun({
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo' },
    input: { runId },
    runnerId: session,
    originSessionId: session,
    now: new Date(now).toISOString(),
    ...options,
  });
}

/** A run claimed, running and parked again (lease released), so any runner may take it. */
function parked(into: any, runId: string, session: string, now: number): void {
  reserve(into, runId, session, now);
  const claim = { runId, runnerId: session, claimToken: `t-${runId}`, leaseMs: 1000, now: new Date(now).toISOString() };
  into.claimWorkflowRun(claim);
  into.markWorkflowRunRunning(claim);
  into.parkWorkflowRun(claim);
}

/** Many candidates of every kind, in groups sharing available_at and created_at. */
function populate(): void {
  for (let index = 0; index < 40; index += 1) {
    const at = T0 + ((index * 37) % 4) * 1000;
    const into = index % 5 === 4 ? other : store;
    const id = `run-${String(index).padStart(2, '0')}-${(index * 7919) % 89}`;
    if (index % 4 === 0) reserve(into, id, `host-1`, at, { executionMode: 'headless', originSessionId: `s-${index}` });
    else if (index % 4 === 1) parked(into, id, 'session-a', at);
    else if (index % 4 === 2) reserve(into, id, `s-${index}`, at);
    else reserve(into, id, `s-${index}`, at, { executionMode: 'headless', runnerId: `s-${index}` });
  }
  const connection = store.state.connection;
  // runs.created_at apart from the queue's, and a row id order apart from the time order.
  connection.prepare('UPDATE runs SET created_at = created_at + (rowid % 3) * 500 WHERE rowid % 4 = 1').run();
  connection.prepare('UPDATE run_queue SET available_at = ? WHERE rowid % 3 = 0').run(T0);
}

function expectedPick(which: any, options: { runnerId: string; sessionId?: string | null }): string | undefined {
  const connection = store.state.connection;
  const projectId = which === global ? undefined : connection.prepare('SELECT project_id FROM projects WHERE canonical_path = ?').get(which === other ? path.join(dir, 'other') : dir)?.project_id;
  const now = Date.parse(LATER);
  const params: unknown[] = [];
  if (projectId !== undefined) params.push(projectId);
  params.push(now, now, options.runnerId, options.runnerId);
  let session = "(b.execution_mode = 'headless' OR q.status <> 'queued')";
  if ('sessionId' in options) {
    session = 'b.origin_session_id = ?';
    params.push(options.sessionId);
  }
  const sql = CLAIM_SELECT.replace('%PROJECT%', projectId === undefined ? '' : 'r.project_id = ? AND').replace('%SESSION%', session);
  return connection.prepare(sql).get(...params)?.run_id;
}

/** Claims until nothing is left, checking each pick against the single statement first. */
function drain(which: any, options: { runnerId: string; sessionId?: string | null }, between?: (step: number) => void): string[] {
  const picks: string[] = [];
  for (let step = 0; step < 100; step += 1) {
    between?.(step);
    const expected = expectedPick(which, options);
    const claimed = which.claimNextWorkflowRun({ ...options, claimToken: `c-${step}`, leaseMs: 60_000, now: LATER });
    expect([step, claimed?.runId]).toEqual([step, expected]);
    if (claimed === undefined) return picks;
    picks.push(claimed.runId);
    // Settled, so the next poll looks further (a runner may take its own claim again).
    expect(which.completeWorkflowRun({ runId: claimed.runId, claimToken: `c-${step}`, now: LATER })).toBe(true);
  }
  throw new Error('claimNextWorkflowRun never ran out of runs');
}

describe('claimNextWorkflowRun', () => {
  it('picks what the single statement picks, ties included, for a host, a session and the global view', () => {
    populate();
    expect(drain(store, { runnerId: 'session-a', sessionId: 'session-a' }).length).toBeGreaterThan(3);
    expect(drain(store, { runnerId: 'host-1' }).length).toBeGreaterThan(3);
    expect(drain(other, { runnerId: 'host-1' }).length).toBeGreaterThan(0);
    expect(drain(store, { runnerId: 'x', sessionId: null })).toEqual([]);
  });

  it('picks what the single statement picks in the global view, for a session and a host', () => {
    populate();
    expect(drain(global, { runnerId: 'session-a', sessionId: 'session-a' }).length).toBeGreaterThan(3);
    expect(drain(global, { runnerId: 'host-1' }).length).toBeGreaterThan(3);
  });

  it('sees raw SQL writes and deletions between two polls', () => {
    populate();
    const connection = store.state.connection;
    const picks = drain(store, { runnerId: 'host-1' }, (step) => {
      if (step === 1) {
        // A queued interactive run made headless and affinity-free behind the store's back.
        connection.prepare("UPDATE run_bindings SET execution_mode = 'headless' WHERE run_id IN (SELECT run_id FROM run_queue WHERE status = 'queued')").run();
        connection.prepare("UPDATE run_queue SET affinity_runner_id = NULL WHERE status = 'queued' AND rowid % 2 = 0").run();
      }
      if (step === 2) {
        connection.exec('PRAGMA foreign_keys = OFF');
        connection.prepare("DELETE FROM runs WHERE run_id IN (SELECT run_id FROM run_queue WHERE status = 'parked' LIMIT 2)").run();
        connection.exec('PRAGMA foreign_keys = ON');
      }
      if (step === 3) connection.prepare("UPDATE run_queue SET error_code = 'workflowSourceChanged' WHERE status = 'parked' AND rowid % 2 = 1").run();
      if (step === 4) {
        // Another connection (its own state) adds a run that ties with the earliest ones.
        const second = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
        reserve(second, 'run-zz-late', 'host-1', T0, { executionMode: 'headless', originSessionId: 's-late' });
        second.close();
      }
    });
    expect(picks.length).toBeGreaterThan(3);
    expect(picks).toContain('run-zz-late');
  });
});

const LIST_SELECT = `SELECT r.run_id FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
  JOIN run_queue q ON q.run_id = r.run_id
  LEFT JOIN run_bindings b ON b.run_id = r.run_id
  JOIN leases l ON l.resource_id = r.resource_id`;

describe('listWorkflowRuns with statuses', () => {
  it('lists what the single statement lists, ties included, for a project and the global view', () => {
    populate();
    const connection = store.state.connection;
    // Equal created_at across statuses, so ties meet runs of different statuses.
    connection.prepare('UPDATE run_queue SET created_at = ? WHERE rowid % 2 = 0').run(T0);
    const projectId = connection.prepare('SELECT project_id FROM projects WHERE canonical_path = ?').get(dir).project_id;
    const single = (where: string, params: unknown[], limit: number) =>
      connection
        .prepare(`${LIST_SELECT} ${where} ORDER BY q.created_at DESC LIMIT ?`)
        .all(...params, limit)
        .map((row: { run_id: string }) => row.run_id);
    const ids = (runs: { runId: string }[]) => runs.map((run) => run.runId);
    const active = ['queued', 'parked', 'starting', 'running'];
    const marks = (items: unknown[]) => items.map(() => '?').join(', ');
    for (const statuses of [active, ['parked'], ['queued', 'done'], ['running', 'queued']]) {
      for (const limit of [1, 3, 7, 100]) {
        const scoped = single(`WHERE r.project_id = ? AND q.status IN (${marks(statuses)})`, [projectId, ...statuses], limit);
        expect([statuses, limit, ids(store.listWorkflowRuns({ statuses, limit }))]).toEqual([statuses, limit, scoped]);
        const all = single(`WHERE q.status IN (${marks(statuses)})`, statuses, limit);
        expect([statuses, limit, ids(global.listWorkflowRuns({ statuses, limit }))]).toEqual([statuses, limit, all]);
      }
    }
    const excluded = single('WHERE r.project_id = ? AND q.status IN (?) AND r.run_id NOT IN (?)', [projectId, 'queued', 'run-02-85'], 100);
    expect(ids(store.listWorkflowRuns({ statuses: ['queued'], excludeRunIds: ['run-02-85'] }))).toEqual(excluded);
  });
});

describe('the run polls through the run index (src/state/run_index/)', () => {
  /** What the polls return; inside the caller's transaction they take the SQL path. */
  function polls(which: any) {
    const ids = (runs: { runId: string }[]) => runs.map((run) => run.runId);
    const views = which.listWorkflowRunViews({ offset: 0, limit: 5 });
    return {
      revision: which.workflowRunListRevision(),
      views: { ...views, runs: ids(views.runs) },
      page: ids(which.listWorkflowRunViews({ offset: 3, limit: 4 }).runs),
      runs: ids(which.listWorkflowRuns({ limit: 4 })),
      active: ids(which.listWorkflowRuns({ statuses: ['queued', 'parked', 'starting', 'running'], limit: 3 })),
      done: ids(which.listWorkflowRuns({ statuses: ['done', 'parked'] })),
      all: which.listWorkflowRuns({}),
    };
  }

  function viaSql(which: any) {
    const connection = store.state.connection;
    connection.exec('BEGIN');
    try {
      return polls(which);
    } finally {
      connection.exec('COMMIT');
    }
  }

  it('answers as the SQL path after random writes through the API, raw SQL and other connections', () => {
    const file = path.join(dir, 'state.sqlite');
    const second = new SqliteControllerStore(file, { projectPath: dir });
    const connection = store.state.connection;
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const runIds = () => connection.prepare('SELECT run_id FROM runs ORDER BY run_id').all().map((row: { run_id: string }) => row.run_id);
    const anyRun = () => {
      const all = runIds();
      return all[random(all.length)];
    };
    let next = 0;
    for (let step = 0; step < 90; step += 1) {
      const at = T0 + random(3) * 1000;
      const action = random(12);
      if (action <= 2) {
        next += 1;
        const into = [store, other, second, global][random(4)];
        if (into === global) reserve(store, `run-${next}`, `s-${next}`, at, { executionMode: 'headless' });
        else if (random(2) === 0) reserve(into, `run-${next}`, `s-${next}`, at, { executionMode: 'headless' });
        else parked(into, `run-${next}`, `s-${next}`, at);
      } else if (action === 3) {
        // A host's claim, checked against the single statement, then finished or deleted.
        const expected = expectedPick(store, { runnerId: 'host-1' });
        const claimed = store.claimNextWorkflowRun({ runnerId: 'host-1', claimToken: `c-${step}`, leaseMs: 60_000, now: LATER });
        expect([step, claimed?.runId]).toEqual([step, expected]);
        if (claimed !== undefined) {
          const done = { runId: claimed.runId, claimToken: `c-${step}`, now: LATER };
          expect(random(2) === 0 ? store.completeWorkflowRun(done) : store.deleteWorkflowRun(done)).toBe(true);
        }
      } else if (action === 4) {
        connection.prepare('UPDATE run_queue SET created_at = ?, updated_at = updated_at + 1 WHERE run_id = ?').run(at, anyRun());
      } else if (action === 5) {
        connection.prepare('UPDATE resources SET revision = revision + 1 WHERE resource_id = (SELECT resource_id FROM runs WHERE run_id = ?)').run(anyRun());
      } else if (action === 6) {
        // REPLACE: the replaced row's run keeps its queue row under a new rowid; or another
        // run's queue row goes, its active session taken.
        const queue = "SELECT run_id, ?, available_at, affinity_runner_id, %SESSION%, 0, NULL, NULL, ?, ?, NULL, NULL FROM run_queue WHERE run_id = ?";
        const victim = "(SELECT origin_session_id FROM run_queue WHERE status IN ('queued', 'starting', 'running') AND run_id <> ? LIMIT 1)";
        const runId = anyRun();
        if (random(2) === 0) connection.prepare(`INSERT OR REPLACE INTO run_queue ${queue.replace('%SESSION%', 'origin_session_id')}`).run('parked', at, at, runId);
        else connection.prepare(`REPLACE INTO run_queue ${queue.replace('%SESSION%', `coalesce(${victim}, origin_session_id)`)}`).run(runId, 'queued', at, at, runId);
      } else if (action === 7) {
        // Behind the foreign keys' back: truncations and a deleted run.
        connection.exec('PRAGMA foreign_keys = OFF');
        const which = random(3);
        if (which === 0) connection.exec('DELETE FROM run_bindings');
        else if (which === 1) connection.exec('DELETE FROM leases');
        else connection.prepare('DELETE FROM runs WHERE run_id = ?').run(anyRun());
        connection.exec('PRAGMA foreign_keys = ON');
      } else if (action === 8) {
        connection.exec('BEGIN');
        connection.prepare('DELETE FROM runs WHERE run_id = ?').run(anyRun());
        connection.prepare('UPDATE run_queue SET created_at = ?').run(T0);
        connection.exec('ROLLBACK');
      } else if (action === 9) {
        // Another connection's raw SQL.
        second.state.connection.prepare("UPDATE run_queue SET status = 'parked', created_at = ? WHERE run_id = ?").run(at, anyRun());
      } else if (action === 10) {
        // TEMP shadowing: the polls read the TEMP table, as the SQL does.
        connection.exec('CREATE TEMP TABLE run_bindings AS SELECT * FROM main.run_bindings LIMIT 1');
        for (const which of [store, other, global]) expect(polls(which)).toEqual(viaSql(which));
        connection.exec('DROP TABLE temp.run_bindings');
      } else {
        connection.prepare("UPDATE leases SET generation = generation + 1 WHERE resource_id = (SELECT resource_id FROM runs WHERE run_id = ?)").run(anyRun());
      }
      for (const which of [store, other, global]) expect([step, polls(which)]).toEqual([step, viaSql(which)]);
      expect(polls(second)).toEqual(viaSql(store));
    }
    expect(runIds().length).toBeGreaterThan(10);
    const readOnly = new SqliteControllerStore(file, { projectPath: dir, readOnly: true });
    expect(polls(readOnly)).toEqual(viaSql(store));
    second.state.connection.prepare('UPDATE run_queue SET created_at = ?').run(T0);
    expect(polls(readOnly)).toEqual(viaSql(store));
    readOnly.close();
    second.close();
  });

  it('sees the deletions the update hook does not report: REPLACE victims and truncations', () => {
    const connection = store.state.connection;
    for (let index = 0; index < 6; index += 1) reserve(store, `run-${index}`, `s-${index}`, T0 + (index % 2) * 1000, { executionMode: 'headless' });
    const check = () => expect(polls(store)).toEqual(viaSql(store));
    check();
    // run-1's queue row takes run-0's active session: run-0's row is REPLACE's victim.
    connection.prepare("REPLACE INTO run_queue SELECT run_id, status, available_at, affinity_runner_id, 's-0', 0, NULL, NULL, created_at, updated_at, NULL, NULL FROM run_queue WHERE run_id = 'run-1'").run();
    expect(polls(store).runs).not.toContain('run-0');
    check();
    connection.exec('PRAGMA foreign_keys = OFF');
    connection.exec('DELETE FROM leases');
    connection.exec('PRAGMA foreign_keys = ON');
    expect(polls(store).runs).toEqual([]);
    check();
  });

  it('sees another process write between two polls', () => {
    const file = path.join(dir, 'state.sqlite');
    for (let index = 0; index < 6; index += 1) reserve(store, `run-${index}`, `s-${index}`, T0 + (index % 2) * 1000);
    const before = polls(store);
    expect(before).toEqual(viaSql(store));
    const script = `
      const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
      const db = new Database(${JSON.stringify(file)});
      db.pragma('busy_timeout = 5000');
      db.prepare("UPDATE run_queue SET created_at = ?, updated_at = ?, status = 'parked' WHERE run_id = ?").run(${T0 + 5000}, ${T0 + 5000}, 'run-0');
      db.prepare('DELETE FROM run_bindings WHERE run_id = ?').run('run-1');
      db.close();`;
    execFileSync(process.execPath, ['-e', script]);
    const after = polls(store);
    expect(after).toEqual(viaSql(store));
    expect(after.runs[0]).toBe('run-0');
    expect(after.revision).not.toEqual(before.revision);
  });
});
