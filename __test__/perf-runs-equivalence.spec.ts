// The run write paths reuse what they already hold instead of reading it again (the run row
// with its lease, the claim's record, the blobs a reservation just stored) and let single
// statements do what the reference does in two (viewer revision, resource revision). These
// specs pin the results to what a fresh read of the file gives.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const T0 = Date.parse('2026-09-03T00:00:00.000Z');
const DIGEST = `sha256:${'ef'.repeat(32)}`;

let dir: string;
let store: any;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-perf-runs-')));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function at(ms: number): string {
  return new Date(ms).toISOString();
}

function reserve(runId: string, extra: Record<string, unknown> = {}): any {
  return store.reserveWorkflowRun({
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo', steps: [{ id: 'a' }] },
    input: { runId },
    runnerId: 'session-1',
    originSessionId: `origin-${runId}`,
    now: at(T0),
    ...extra,
  });
}

function claim(runId: string, now: number, token = `token-${runId}`): any {
  return { runId, runnerId: 'session-1', claimToken: token, leaseMs: 30_000, now: at(now) };
}

function rows(sql: string, ...params: unknown[]): any[] {
  return store.state.connection.prepare(sql).all(...params);
}

describe('viewer revisions', () => {
  it('keeps the last 256 revisions of deltas, deleting only once revisions fall out', () => {
    reserve('run-viewer');
    store.claimWorkflowRun(claim('run-viewer', T0));
    const checkpoints = new Set([2, 3, 255, 256, 257, 258, 300]);
    for (let step = 1; step <= 300; step += 1) {
      expect(store.renewWorkflowRunClaim(claim('run-viewer', T0 + step))).toBe(true);
      const [viewer] = rows(
        'SELECT presentation_revision AS revision, retained_from_revision AS retained FROM viewer_runs WHERE run_id = ?',
        'run-viewer',
      );
      const revision = step + 2;
      expect(viewer).toEqual({ revision, retained: Math.max(1, revision - 255) });
      if (!checkpoints.has(step)) continue;
      const kept = rows(
        'SELECT presentation_revision AS revision, count(*) AS deltas FROM viewer_deltas WHERE run_id = ? GROUP BY presentation_revision ORDER BY presentation_revision',
        'run-viewer',
      );
      // Revision 1 (the reservation) has no deltas; the claim's has four, each renewal's two.
      const first = Math.max(2, viewer.retained);
      expect(kept.map((row) => row.revision)).toEqual(
        Array.from({ length: revision - first + 1 }, (_, index) => first + index),
      );
      expect(kept.map((row) => row.deltas)).toEqual(kept.map((row) => (row.revision === 2 ? 4 : 2)));
    }
    // Completion records two revisions (its resource's bump, then summary and replay) in one
    // change of the viewer row: each keeps its deltas, and retention follows the last.
    expect(store.completeWorkflowRun(claim('run-viewer', T0 + 301))).toBe(true);
    const kept = rows(
      'SELECT presentation_revision AS revision, group_concat(target_type) AS targets FROM viewer_deltas WHERE run_id = ? GROUP BY presentation_revision ORDER BY presentation_revision',
      'run-viewer',
    );
    expect(kept[0].revision).toBe(304 - 255);
    expect(kept.slice(-3)).toEqual([
      { revision: 302, targets: 'summary,replay' },
      { revision: 303, targets: 'summary,graph,replay,inspector' },
      { revision: 304, targets: 'summary,replay' },
    ]);
    expect(rows('SELECT presentation_revision AS revision, retained_from_revision AS retained FROM viewer_runs WHERE run_id = ?', 'run-viewer')).toEqual([
      { revision: 304, retained: 49 },
    ]);
  });

  it('still fails on a run without a viewer projection', () => {
    reserve('run-no-viewer');
    store.claimWorkflowRun(claim('run-no-viewer', T0));
    store.state.connection.prepare('DELETE FROM viewer_runs WHERE run_id = ?').run('run-no-viewer');
    expect(() => store.renewWorkflowRunClaim(claim('run-no-viewer', T0 + 1))).toThrow(
      'Viewer projection does not exist for workflow run: run-no-viewer',
    );
    // A bump of the run resource (claim, markRunning) writes no deltas then, and succeeds.
    expect(store.markWorkflowRunRunning(claim('run-no-viewer', T0 + 2))).toBe(true);
    expect(rows('SELECT count(*) AS n FROM viewer_deltas WHERE run_id = ?', 'run-no-viewer')).toEqual([{ n: 0 }]);
  });
});

describe('rows inserted on condition that their blob is stored', () => {
  // Event payloads that repeat and viewer patches are not put when the blob is there,
  // identical: the row is inserted on that condition, and the blob put only when it was not.
  const RUNNING = '{"status":"running"}';
  const PATCH_3 = '[{"op":"replace","path":"/presentationRevision","value":3}]';
  const blob = (text: string) => rows('SELECT rowid, created_at, content FROM blobs WHERE content = ?', Buffer.from(text));
  const hashOf = (text: string) => require('node:crypto').createHash('sha256').update(text).digest();

  it('fails as the put does when a blob under the same hash differs', () => {
    for (const [runId, text] of [['run-forged-payload', RUNNING], ['run-forged-patch', PATCH_3]]) {
      reserve(runId);
      store.claimWorkflowRun(claim(runId, T0 + 1));
      // Stored before (another run) but forged since: the put's comparison must still run.
      if (blob(text).length === 0) store.state.connection.prepare('INSERT INTO blobs VALUES (?, ?, ?, ?, ?)').run(hashOf(text), 'application/json', 1, Buffer.from('x'), T0);
      else store.state.connection.prepare('UPDATE blobs SET content = ?, byte_length = 1 WHERE blob_hash = ?').run(Buffer.from('x'), hashOf(text));
      const before = rows('SELECT count(*) AS events FROM events');
      const call = () => (text === RUNNING ? store.markWorkflowRunRunning(claim(runId, T0 + 2)) : store.renewWorkflowRunClaim(claim(runId, T0 + 2)));
      expect(call).toThrow('Content-addressed blob conflict');
      expect(rows('SELECT count(*) AS events FROM events')).toEqual(before);
      store.state.connection.prepare('DELETE FROM blobs WHERE blob_hash = ?').run(hashOf(text));
    }
  });

  it('puts a blob that is missing again, where the put would have, and reuses one that is there', () => {
    reserve('run-a');
    store.claimWorkflowRun(claim('run-a', T0 + 1));
    expect(blob(RUNNING)).toEqual([]);
    store.markWorkflowRunRunning(claim('run-a', T0 + 2));
    const [first] = blob(RUNNING);
    expect(first.created_at).toBe(T0 + 2);
    reserve('run-b');
    store.claimWorkflowRun(claim('run-b', T0 + 3));
    store.markWorkflowRunRunning(claim('run-b', T0 + 4));
    expect(blob(RUNNING)).toEqual([first]);
    // Gone (foreign keys off, as another writer could), it is put again at the next use.
    store.state.connection.exec('PRAGMA foreign_keys = OFF');
    store.state.connection.prepare('DELETE FROM blobs WHERE rowid = ?').run(first.rowid);
    store.state.connection.exec('PRAGMA foreign_keys = ON');
    reserve('run-c');
    store.claimWorkflowRun(claim('run-c', T0 + 5));
    const last = rows('SELECT max(rowid) AS rowid FROM blobs')[0].rowid;
    store.markWorkflowRunRunning(claim('run-c', T0 + 6));
    const [again] = blob(RUNNING);
    expect(again.created_at).toBe(T0 + 6);
    expect(again.rowid).toBeGreaterThan(last);
    const events = rows(
      `SELECT e.payload_hash FROM events e JOIN runs r ON r.resource_id = e.resource_id
       WHERE e.event_type = 'run.queue_running' ORDER BY e.event_seq`,
    );
    expect(events.map((event) => Buffer.compare(event.payload_hash, hashOf(RUNNING)))).toEqual([0, 0, 0]);
  });
});

describe('claim records', () => {
  // The claim's record is built from the row read before the claim plus what the claim wrote;
  // it must equal a fresh read of the claimed run.
  function expectFresh(record: any, token: string): void {
    expect(record).toEqual({ ...store.getWorkflowRun(record.runId), claimToken: token });
    expect(Object.keys(record)).toEqual(Object.keys(store.getWorkflowRun(record.runId)));
  }

  it('equals a fresh read after a first claim, a re-claim and a host claim', () => {
    reserve('run-a');
    expectFresh(store.claimWorkflowRun(claim('run-a', T0 + 1)), 'token-run-a');
    expectFresh(store.claimWorkflowRun(claim('run-a', T0 + 2, 'again')), 'again');
    reserve('run-host', { originSessionId: 'origin-host' });
    const host = { ...claim('run-host', T0 + 3, 'host-token'), runnerId: 'host-1' };
    const record = store.claimWorkflowRun(host);
    expect(record.runnerId).toBe('host-1');
    expectFresh(record, 'host-token');
  });

  it('clears the queue error a source-change park left, as a fresh read shows', () => {
    reserve('run-parked');
    store.claimWorkflowRun(claim('run-parked', T0 + 1));
    expect(
      store.parkWorkflowRunForSourceChange({
        runId: 'run-parked',
        claimToken: 'token-run-parked',
        detail: 'source moved',
        now: at(T0 + 2),
      }),
    ).toBe(true);
    const record = store.claimWorkflowRun(claim('run-parked', T0 + 3, 'after-park'));
    expect(record).toMatchObject({ status: 'starting', errorCode: null, errorMessage: null });
    expectFresh(record, 'after-park');
  });

  it('keeps the queue status, error and times of a control claim', () => {
    reserve('run-control');
    store.claimWorkflowRun(claim('run-control', T0 + 1));
    store.markWorkflowRunRunning(claim('run-control', T0 + 2));
    store.parkWorkflowRunForSourceChange({
      runId: 'run-control',
      claimToken: 'token-run-control',
      detail: 'x'.repeat(10_000),
      now: at(T0 + 3),
    });
    const record = store.claimWorkflowRunForControl(claim('run-control', T0 + 4, 'control'));
    expect(record).toMatchObject({ status: 'parked', errorCode: 'workflowSourceChanged' });
    expect(record.errorMessage).toHaveLength(8_192);
    expectFresh(record, 'control');
    // An expired claim of another runner is taken over.
    const other = { ...claim('run-control', T0 + 40_000, 'late'), runnerId: 'session-2' };
    expectFresh(store.claimWorkflowRunForInteractionValidation(other), 'late');
  });

  it('equals a fresh read through claimNext, prepare-or-adopt and enqueue', () => {
    reserve('run-headless', { executionMode: 'headless', originSessionId: 'origin-headless' });
    const next = store.claimNextWorkflowRun({
      runnerId: 'session-1',
      claimToken: 'next',
      leaseMs: 30_000,
      now: at(T0 + 1),
    });
    expect(next.runId).toBe('run-headless');
    expect(next.originSessionId).toBeNull();
    expectFresh(next, 'next');
    const prepared = store.prepareOrAdoptWorkflowRun({
      runId: 'run-prepared',
      workflowName: 'echo',
      workflowSourceRef: 'builtin:echo',
      workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
      definitionDigest: DIGEST,
      definitionSnapshot: { name: 'echo', steps: [{ id: 'a' }] },
      input: null,
      runnerId: 'session-1',
      originSessionId: 'origin-prepared',
      claimToken: 'prepared',
      leaseMs: 30_000,
      now: at(T0 + 2),
    });
    expect(prepared.state).toBe('claimed');
    expectFresh(prepared.run, 'prepared');
    const enqueued = store.enqueueWorkflowRun({
      runId: 'run-enqueued',
      workflowName: 'echo',
      workflowSourceRef: 'builtin:echo',
      workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
      definitionDigest: DIGEST,
      definitionSnapshot: { name: 'echo', steps: [{ id: 'a' }] },
      input: { n: 1 },
      launchOptions: { model: 'm' },
      runnerId: 'session-1',
      originSessionId: 'origin-enqueued',
      claimToken: 'enqueued',
      leaseMs: 30_000,
      now: at(T0 + 3),
    });
    expectFresh(enqueued, 'enqueued');
  });
});

describe('reservation records', () => {
  // The record of a new reservation uses the documents it has just stored instead of reading
  // them back; it must equal a fresh read.
  function expectFresh(record: any): void {
    const fresh = store.getWorkflowRun(record.runId);
    expect(record).toEqual(fresh);
    expect(JSON.stringify(record)).toEqual(JSON.stringify(fresh));
  }

  it('equals a fresh read for absent, null and nested documents', () => {
    expectFresh(reserve('run-plain'));
    expectFresh(reserve('run-undefined-input', { input: undefined }));
    expectFresh(reserve('run-null-input', { input: null, launchOptions: null }));
    expectFresh(
      reserve('run-nested', {
        input: { z: [3, { b: 'é\u2028', a: null }], a: '\ud83d\ude00', m: 1.5e-7 },
        launchOptions: { thinking: 'high', model: { id: 'x', provider: 'p' } },
      }),
    );
  });

  it('shows the first snapshot of a digest, and mounted workflow names from it', () => {
    reserve('run-first', {
      definitionSnapshot: {
        name: 'echo',
        composition: { mounts: [{ mountPath: ['child'], workflowName: 'first-child' }] },
      },
    });
    const record = reserve('run-second', {
      definitionSnapshot: {
        name: 'echo',
        composition: { mounts: [{ mountPath: ['child'], workflowName: 'second-child' }] },
      },
      workflowSource: {
        root: { kind: 'builtin', id: 'echo', revision: 'r1' },
        mounted: [
          {
            mountPath: ['child'],
            workflowName: 'ignored',
            source: { kind: 'file', path: '/w/child.md', hash: 'h1' },
          },
        ],
      },
    });
    expect(record.workflowSource.mounted[0].workflowName).toBe('first-child');
    expectFresh(record);
  });

  it('puts its three documents in order, once each, and fails on a forged one before a later step fails', () => {
    reserve('run-same', { definitionSnapshot: {}, input: {}, launchOptions: {}, now: at(T0) });
    reserve('run-other', { definitionSnapshot: { b: 1 }, input: { a: 1 }, launchOptions: { c: 1 }, now: at(T0 + 1) });
    const texts = rows('SELECT CAST(content AS TEXT) AS text, created_at FROM blobs ORDER BY rowid');
    expect(texts).toEqual([
      { text: '{}', created_at: T0 },
      { text: '{"b":1}', created_at: T0 + 1 },
      { text: '{"a":1}', created_at: T0 + 1 },
      { text: '{"c":1}', created_at: T0 + 1 },
    ]);
    // A forged snapshot blob fails its put, which comes before the source check.
    const forged = require('node:crypto').createHash('sha256').update('{"d":1}').digest();
    store.state.connection.prepare('INSERT INTO blobs VALUES (?, ?, 1, ?, ?)').run(forged, 'application/json', Buffer.from('x'), T0);
    const bad = { definitionSnapshot: { d: 1 }, workflowSource: { kind: 'nope' } };
    expect(() => reserve('run-forged', bad)).toThrow('Content-addressed blob conflict');
    store.state.connection.prepare('DELETE FROM blobs WHERE blob_hash = ?').run(forged);
    expect(() => reserve('run-forged', bad)).toThrow(/source/i);
    expect(rows('SELECT count(*) AS n FROM blobs')).toEqual([{ n: 4 }]);
  });

  it('stores the queued event payload once, with the first created_at, whatever the documents', () => {
    const EMPTY = "x'44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'";
    const cases: [string, Record<string, unknown>][] = [
      ['run-default-options', {}],
      ['run-empty-options', { launchOptions: {} }],
      ['run-empty-input', { input: {}, launchOptions: { model: 'm' } }],
      ['run-empty-snapshot', { definitionSnapshot: {}, launchOptions: { model: 'm' } }],
      ['run-no-empty-document', { launchOptions: { model: 'm' } }],
    ];
    cases.forEach(([runId, extra], index) => {
      if (index === 0) expect(rows(`SELECT 1 FROM blobs WHERE blob_hash = ${EMPTY}`)).toEqual([]);
      reserve(runId, { ...extra, now: at(T0 + index) });
      const [event] = rows(
        `SELECT hex(payload_hash) AS hash FROM events WHERE event_type = 'run.queued'
         AND resource_id = (SELECT resource_id FROM runs WHERE run_id = ?)`,
        runId,
      );
      expect(event.hash).toBe(EMPTY.slice(2, -1).toUpperCase());
      expect(rows(`SELECT created_at, content FROM blobs WHERE blob_hash = ${EMPTY}`)).toEqual([
        { created_at: T0, content: Buffer.from('{}') },
      ]);
    });
  });
});
