// listEvents searches the newest events in growing ranges of sequence numbers, then the rest from
// the resource side (issue 13): it must list exactly what the reference's single statement lists,
// for project-scoped and global stores, every filter, controller events dense near the end of
// the log or buried under many run events, gaps in the sequence, events of deleted resources and
// another process's writes between two calls.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const T0 = Date.parse('2026-09-02T00:00:00.000Z');
const DIGEST = `sha256:${'cd'.repeat(32)}`;

let dir: string;
let file: string;
let store: any;
let other: any;
let global: any;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-events-eq-')));
  file = path.join(dir, 'state.sqlite');
  store = new SqliteControllerStore(file, { projectPath: dir });
  other = new SqliteControllerStore(file, { state: store.state, projectPath: path.join(dir, 'other') });
  global = new SqliteControllerStore(file, { state: store.state, global: true });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const KEYS: [any, string, string][] = [];

function put(into: any, controller: string, key: string): void {
  into.putResource({ controller, key, spec: { key }, initialStatus: {}, now: T0 });
  KEYS.push([into, controller, key]);
}

function note(into: any, controller: string, key: string, n: number): void {
  into.recordEvent({ controller, key, type: `note.${n}`, payload: { n }, now: T0 + n });
}

/** `count` run events in one statement, on one run resource (revisions after its own). */
function runEvents(count: number): void {
  store.reserveWorkflowRun({
    runId: `run-${count}-${Math.random().toString(36).slice(2, 8)}`,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo' },
    input: { count },
    runnerId: 'session-1',
    originSessionId: `session-${count}-${Math.random()}`,
    now: new Date(T0).toISOString(),
  });
  store.state.connection
    .prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       INSERT INTO events(event_id, resource_id, resource_revision, event_type, actor_type, recorded_at)
       SELECT 'bulk-' || (SELECT resource_id FROM resources WHERE resource_type = 'run' ORDER BY rowid DESC LIMIT 1) || '-' || i,
              (SELECT resource_id FROM resources WHERE resource_type = 'run' ORDER BY rowid DESC LIMIT 1),
              1000 + i, 'bulk', 'system', ? FROM n`,
    )
    .run(count, T0);
}

function projectId(which: any): string | undefined {
  if (which === global) return undefined;
  const canonical = which === other ? path.join(dir, 'other') : dir;
  return store.state.connection.prepare('SELECT project_id FROM projects WHERE canonical_path = ?').get(canonical)?.project_id;
}

/** The reference's listEvents statement: sequence numbers, newest first. */
function single(which: any, options: { controller?: string; key?: string; limit?: number }): number[] {
  const clauses = ["r.resource_type = 'controller'"];
  const params: unknown[] = [];
  const project = projectId(which);
  if (project !== undefined) {
    clauses.push('c.project_id = ?');
    params.push(project);
  }
  if (options.controller !== undefined) {
    clauses.push('c.controller_name = ?');
    params.push(options.controller);
  }
  if (options.key !== undefined) {
    clauses.push('c.resource_key = ?');
    params.push(options.key);
  }
  return store.state.connection
    .prepare(
      `SELECT e.event_seq FROM events e JOIN resources r ON r.resource_id = e.resource_id
       JOIN controller_resources c ON c.resource_id = r.resource_id
       WHERE ${clauses.join(' AND ')} ORDER BY e.event_seq DESC LIMIT ?`,
    )
    .all(...params, options.limit ?? 100)
    .map((row: { event_seq: number }) => row.event_seq);
}

/** Every store, filter and limit against the single statement; whole records against the
 * reference's own path (a limit above the ranges' takes it). */
function expectAllEqual(): void {
  const filters = [{}, { controller: 'alpha' }, { controller: 'alpha', key: 'a2' }, { key: 'b1' }, { controller: 'none' }];
  for (const which of [store, other, global]) {
    for (const filter of filters) {
      for (const limit of [1, 2, 7, 33, 100, 1000, 10_000, -1, 0, undefined]) {
        const options = limit === undefined ? filter : { ...filter, limit };
        const listed = which.listEvents(options);
        expect([options, listed.map((event: { seq: number }) => event.seq)]).toEqual([options, single(which, options)]);
        if (limit !== undefined && limit > 0 && limit <= 1000) {
          expect(listed).toEqual(which.listEvents({ ...filter, limit: 10_001 }).slice(0, limit));
        }
      }
    }
  }
}

function controllerEvents(from: number, to: number): void {
  for (let n = from; n < to; n += 1) {
    const [into, controller, key] = KEYS[(n * 7) % KEYS.length];
    note(into, controller, key, n);
  }
}

beforeEach(() => {
  KEYS.length = 0;
  for (const key of ['a1', 'a2', 'a3']) put(store, 'alpha', key);
  put(store, 'beta', 'b1');
  put(other, 'alpha', 'a2');
  put(other, 'beta', 'b1');
});

describe('listEvents over ranges of the log', () => {
  it('lists what the single statement lists when the controller events are the newest', () => {
    runEvents(500);
    controllerEvents(0, 400);
    expectAllEqual();
  });

  it('lists what the single statement lists when run events bury the controller events', () => {
    controllerEvents(0, 150);
    runEvents(3_000);
    controllerEvents(150, 180);
    // More run events than the ranges cover: the rest is searched from the resource side.
    runEvents(12_000);
    controllerEvents(180, 183);
    runEvents(20);
    expectAllEqual();
  });

  it('lists what the single statement lists with gaps in the sequence and events of deleted resources', () => {
    controllerEvents(0, 200);
    runEvents(2_000);
    controllerEvents(200, 260);
    const connection = store.state.connection;
    connection.prepare("DELETE FROM events WHERE event_seq % 3 = 0 AND event_type <> 'bulk'").run();
    connection.prepare("DELETE FROM events WHERE event_type = 'bulk' AND event_seq % 5 <> 0").run();
    connection.exec('PRAGMA foreign_keys = OFF');
    // A controller row gone (its events now match nothing), and a resource row gone.
    connection.prepare("DELETE FROM controller_resources WHERE controller_name = 'alpha' AND resource_key = 'a3'").run();
    connection.prepare(
      "DELETE FROM resources WHERE resource_id = (SELECT resource_id FROM controller_resources WHERE controller_name = 'beta' AND project_id = ?)",
    ).run(projectId(store));
    connection.exec('PRAGMA foreign_keys = ON');
    // Sequence numbers at the bottom of the range, as raw SQL can write them.
    for (const [seq, revision] of [['-9223372036854775808', 100_000], ['-5', 100_001]]) {
      connection
        .prepare(
          `INSERT INTO events(event_seq, event_id, resource_id, resource_revision, event_type, actor_type, recorded_at)
           SELECT ${seq}, 'low-${revision}', resource_id, ${revision}, 'low', 'control', recorded_at
           FROM events WHERE event_type LIKE 'note.%' ORDER BY event_seq LIMIT 1`,
        )
        .run();
    }
    expectAllEqual();
  });

  it('sees another process\'s events between two calls', () => {
    controllerEvents(0, 50);
    runEvents(9_000);
    expectAllEqual();
    const second = new SqliteControllerStore(file, { projectPath: dir });
    try {
      second.recordEvent({ controller: 'alpha', key: 'a1', type: 'late', payload: { late: true }, now: T0 });
      expect(store.listEvents({ limit: 1 })[0]).toMatchObject({ controller: 'alpha', key: 'a1', type: 'late', payload: { late: true } });
      runEvents(100);
      second.recordEvent({ controller: 'beta', key: 'b1', type: 'later', now: T0 });
      expectAllEqual();
      expect(store.listEvents({ limit: 2 }).map((event: { type: string }) => event.type)).toEqual(['later', 'late']);
    } finally {
      second.close();
    }
  });

  it('lists nothing from a log without controller events, or without events at all', () => {
    const empty = new SqliteControllerStore(path.join(dir, 'empty.sqlite'), { projectPath: dir });
    try {
      empty.state.connection.prepare('DELETE FROM events').run();
      expect(empty.listEvents({ limit: 10 })).toEqual([]);
    } finally {
      empty.close();
    }
    runEvents(9_000);
    expect(store.listEvents({ controller: 'none', limit: 5 })).toEqual([]);
    expectAllEqual();
  });
});
