// The query-plan changes of issue 13 must pick and list exactly what the reference's single
// statements pick and list: ties on equal timestamps, other projects in the file, runs deleted
// behind the store's back and raw SQL writes between two calls (as another process or the
// workflow engine makes them) included.
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
