// Test fixture for the run lifecycle specs: a store on a fresh state file, plus the rows the
// reservation (and the workflow engine) would have written, inserted with better-sqlite3.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';

const { SqliteControllerStore } = require('../index.js');

export const T0 = Date.parse('2026-09-15T00:00:00.005Z');

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function sha256(text: string | Buffer): Buffer {
  return createHash('sha256').update(text).digest();
}

export function resourceIdFor(type: string, key: string): string {
  return `${type}-${createHash('sha256').update(`${type}\0${key}`).digest('hex').slice(0, 40)}`;
}

export type RunSeed = {
  runId: string;
  queueStatus?: string;
  runStatus?: string;
  paused?: 0 | 1;
  originSessionId?: string;
  executionMode?: 'interactive' | 'headless';
  affinityRunnerId?: string | null;
  availableAt?: number;
  createdAt?: number;
  projectId?: string | null;
  errorCode?: string | null;
  /** A live or expired lease: owner, token, expiry. */
  lease?: { ownerId: string; token: string; expiresAt: number; generation?: number };
};

export type Row = Record<string, any>;

export class Fixture {
  readonly dir: string;
  readonly file: string;
  readonly projectPath: string;
  store: any;

  constructor() {
    this.dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-lifecycle-')));
    this.file = path.join(this.dir, 'state.sqlite');
    this.projectPath = path.join(this.dir, 'project');
    fs.mkdirSync(this.projectPath);
    this.store = this.open();
  }

  open(options: Record<string, unknown> = {}): any {
    return new SqliteControllerStore(this.file, { projectPath: this.projectPath, ...options });
  }

  get projectId(): string {
    return `project-${sha256(this.projectPath).toString('hex').slice(0, 40)}`;
  }

  dispose(): void {
    this.store.close();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /**
   * The store's own connection (`store.state.connection`). A second SQLite library must not
   * touch the file while the store holds it: POSIX locks are per process, so better-sqlite3's
   * last close deletes the WAL the store is still writing to, hiding its later commits.
   */
  private get connection(): Database.Database {
    return this.store.state.connection;
  }

  /** Groups fixture statements (one call of the fixture API). */
  private batch<T>(operation: () => T): T {
    return operation();
  }

  run(sql: string, ...params: unknown[]): number {
    return this.connection.prepare(sql).run(...params).changes;
  }

  all(sql: string, ...params: unknown[]): Row[] {
    return this.connection.prepare(sql).all(...params) as Row[];
  }

  get(sql: string, ...params: unknown[]): Row | undefined {
    return this.connection.prepare(sql).get(...params) as Row | undefined;
  }

  json(value: unknown): Buffer {
    return this.blob(Buffer.from(JSON.stringify(value)), 'application/json');
  }

  text(value: string): Buffer {
    return this.blob(Buffer.from(value), 'text/plain');
  }

  private blob(content: Buffer, mediaType: string): Buffer {
    const hash = sha256(content);
    this.run(
      `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
       VALUES (?, ?, ?, ?, ?) ON CONFLICT(blob_hash) DO NOTHING`,
      hash,
      mediaType,
      content.length,
      content,
      T0,
    );
    return hash;
  }

  /** The rows a root reservation writes (without its `run.queued` event), then the seed's state. */
  insertRun(seed: RunSeed): string {
    return this.batch(() => {
      const resourceId = resourceIdFor('run', seed.runId);
      const createdAt = seed.createdAt ?? T0;
      const snapshot = this.json({ name: 'demo' });
      const digest = sha256(`definition:${seed.runId}`);
      const input = this.json({ n: 1 });
      const launch = this.json({});
      const runStatus = seed.runStatus ?? 'queued';
      const finished = ['waiting', 'completed', 'failed', 'timed_out', 'cancelled'].includes(runStatus);
      this.run(
        `INSERT INTO workflow_definitions(definition_digest, workflow_name, definition_hash, created_at)
         VALUES (?, 'demo', ?, ?)`,
        digest,
        snapshot,
        createdAt,
      );
      this.run(
        `INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
         VALUES (?, 'run', ?, 1, ?, ?)`,
        resourceId,
        seed.runId,
        createdAt,
        createdAt,
      );
      const lease = seed.lease;
      if (lease === undefined) {
        this.run('INSERT INTO leases(resource_id, generation) VALUES (?, 0)', resourceId);
      } else {
        this.run(
          `INSERT INTO leases(resource_id, generation, owner_type, owner_id, token_hash,
                              acquired_at, heartbeat_at, expires_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          resourceId,
          lease.generation ?? 1,
          lease.ownerId.startsWith('host-') ? 'host' : 'session',
          lease.ownerId,
          sha256(lease.token),
          createdAt,
          createdAt,
          lease.expiresAt,
        );
      }
      this.run(
        `INSERT INTO runs(run_id, resource_id, project_id, root_run_id, definition_digest, workflow_ref,
                          launch_options_hash, status, paused, input_hash, created_at, updated_at,
                          finished_at)
         VALUES (?, ?, ?, ?, ?, 'demo', ?, ?, ?, ?, ?, ?, ?)`,
        seed.runId,
        resourceId,
        seed.projectId === undefined ? this.projectId : seed.projectId,
        seed.runId,
        digest,
        launch,
        runStatus,
        seed.paused ?? 0,
        input,
        createdAt,
        createdAt,
        finished ? createdAt : null,
      );
      this.run(
        `INSERT INTO viewer_runs(run_id, presentation_revision, retained_from_revision, updated_at)
         VALUES (?, 1, 1, ?)`,
        seed.runId,
        createdAt,
      );
      this.run(
        `INSERT INTO run_sources(run_id, mount_path, source_type, source_ref, source_revision)
         VALUES (?, '', 'builtin', 'demo', 'r1')`,
        seed.runId,
      );
      const origin = seed.originSessionId ?? `session-${seed.runId}`;
      this.run(
        `INSERT INTO run_bindings(run_id, origin_session_id, execution_mode, created_at)
         VALUES (?, ?, ?, ?)`,
        seed.runId,
        origin,
        seed.executionMode ?? 'interactive',
        createdAt,
      );
      this.run(
        `INSERT INTO run_queue(run_id, status, available_at, affinity_runner_id, origin_session_id,
                               error_code, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        seed.runId,
        seed.queueStatus ?? 'queued',
        seed.availableAt ?? createdAt,
        seed.affinityRunnerId ?? null,
        origin,
        seed.errorCode ?? null,
        createdAt,
        createdAt,
      );
      return resourceId;
    });
  }

  insertAttempt(
    runId: string,
    attemptId: string,
    options: { status?: string; deadlineAt?: number | null; errorHash?: Buffer | null } = {},
  ): void {
    return this.batch(() => {
      this.run(
        `INSERT INTO node_attempts(attempt_id, run_id, node_id, attempt_number, node_type, status,
                                   error_hash, deadline_at, created_at, updated_at)
         VALUES (?, ?, ?, 1, 'agent', ?, ?, ?, ?, ?)`,
        attemptId,
        runId,
        `node-${attemptId}`,
        options.status ?? 'waiting',
        options.errorHash ?? null,
        options.deadlineAt ?? null,
        T0,
        T0,
      );
    });
  }

  /** A pending interactive request (and its attempt) aimed at `targetSessionId`. */
  insertInteraction(
    runId: string,
    requestId: string,
    options: {
      targetSessionId?: string;
      status?: 'pending' | 'cancelled';
      deadlineAt?: number | null;
      attemptStatus?: string;
      turn?: 'started' | 'ended' | 'none';
      messageKind?: string;
    } = {},
  ): void {
    return this.batch(() => {
      const attemptId = `attempt-${requestId}`;
      const target = options.targetSessionId ?? `session-${runId}`;
      this.insertAttempt(runId, attemptId, {
        status: options.attemptStatus ?? 'waiting',
        deadlineAt: options.deadlineAt ?? null,
      });
      this.run(
        `INSERT INTO interactive_requests(request_id, run_id, attempt_id, target_session_id, kind,
                                          contract_hash, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, 'agent', ?, ?, ?, ?)`,
        requestId,
        runId,
        attemptId,
        target,
        this.json({ contract: requestId }),
        options.status ?? 'pending',
        T0,
        T0,
      );
      if ((options.turn ?? 'none') === 'none') return;
      const messageId = `message-${requestId}`;
      const order = (this.get('SELECT COUNT(*) AS n FROM workflow_messages')?.n ?? 0) + 1;
      this.run(
        `INSERT INTO workflow_messages(workflow_message_id, run_id, target_session_id, kind, source_id,
                                       content_hash, order_number, status, pi_session_entry_id,
                                       created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'sent', 'entry-1', ?, ?)`,
        messageId,
        runId,
        target,
        options.messageKind ?? 'step',
        requestId,
        this.text(`step ${requestId}`),
        order,
        T0,
        T0,
      );
      const ended = options.turn === 'ended';
      this.run(
        `INSERT INTO workflow_turns(workflow_turn_id, workflow_message_id, run_id, target_session_id,
                                    state, stop_reason, started_at, ended_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        `turn-${requestId}`,
        messageId,
        runId,
        target,
        ended ? 'ended' : 'started',
        ended ? 'completed' : null,
        T0,
        ended ? T0 : null,
      );
    });
  }

  insertSubmission(requestId: string, submissionId: string, outcome = 'validating'): void {
    return this.batch(() => {
      this.run(
        `INSERT INTO interactive_submissions(submission_id, request_id, idempotency_key,
                                             request_revision, payload_hash, outcome, submitted_at)
         VALUES (?, ?, ?, 1, ?, ?, ?)`,
        submissionId,
        requestId,
        submissionId,
        this.json({ answer: submissionId }),
        outcome,
        T0,
      );
    });
  }

  /** A run-scoped effect with its own resource and lease. */
  insertRunEffect(
    runId: string,
    effectId: string,
    options: { type?: string; status?: string; attemptCount?: number; ownerScope?: string } = {},
  ): string {
    return this.batch(() => {
      const resourceId = resourceIdFor('effect', effectId);
      this.run(
        `INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
         VALUES (?, 'effect', ?, 1, ?, ?)`,
        resourceId,
        effectId,
        T0,
        T0,
      );
      this.run('INSERT INTO leases(resource_id, generation) VALUES (?, 0)', resourceId);
      const attemptCount = options.attemptCount ?? 0;
      this.run(
        `INSERT INTO effects(effect_id, resource_id, source_resource_id, source_revision, effect_type,
                             idempotency_key, payload_hash, owner_scope, status, attempt_count,
                             next_attempt_at, created_at, updated_at)
         VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        effectId,
        resourceId,
        resourceIdFor('run', runId),
        options.type ?? 'run.park_queue',
        effectId,
        this.json({ effect: effectId }),
        options.ownerScope ?? 'run',
        options.status ?? 'pending',
        attemptCount,
        T0,
        T0,
        T0,
      );
      for (let attempt = 1; attempt <= attemptCount; attempt += 1) {
        this.run(
          `INSERT INTO effect_attempts(effect_id, attempt_number, owner_id, lease_generation,
                                       started_at, finished_at, outcome)
           VALUES (?, ?, 'worker', 1, ?, ?, ?)`,
          effectId,
          attempt,
          T0,
          attempt < attemptCount ? T0 : null,
          attempt < attemptCount ? 'rejected' : null,
        );
      }
      return resourceId;
    });
  }

  /** A human decision of the run (needs an attempt), optionally already resolved. */
  insertDecision(runId: string, decisionId: string, attemptId: string, resolved = false): void {
    return this.batch(() => {
      const resourceId = resourceIdFor('decision', decisionId);
      this.run(
        `INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
         VALUES (?, 'decision', ?, 1, ?, ?)`,
        resourceId,
        decisionId,
        T0,
        T0,
      );
      const blob = this.json({ decision: decisionId });
      const digest = sha256(`decision:${decisionId}`);
      this.run(
        `INSERT INTO human_decisions(decision_id, resource_id, run_id, attempt_id, audience, title,
                                     subject_hash, presentation_hash, choices_hash, request_digest,
                                     presentation_revision, request_hash, created_at)
         VALUES (?, ?, ?, ?, 'human', 'Approve?', ?, ?, ?, ?, 1, ?, ?)`,
        decisionId,
        resourceId,
        runId,
        attemptId,
        blob,
        blob,
        blob,
        digest,
        blob,
        T0,
      );
      if (!resolved) return;
      this.run(
        `INSERT INTO human_decision_resolutions(decision_id, outcome, provenance, response_hash,
                                                reason, channel, actor_id, request_digest, resolved_at)
         VALUES (?, 'accepted', 'human', ?, NULL, 'tui', 'alice', ?, ?)`,
        decisionId,
        blob,
        digest,
        T0,
      );
    });
  }

  lease(runId: string): Row {
    return this.get('SELECT * FROM leases WHERE resource_id = ?', resourceIdFor('run', runId))!;
  }

  queue(runId: string): Row {
    return this.get('SELECT * FROM run_queue WHERE run_id = ?', runId)!;
  }

  runRow(runId: string): Row {
    return this.get('SELECT * FROM runs WHERE run_id = ?', runId)!;
  }

  revision(resourceId: string): number {
    return this.get('SELECT revision FROM resources WHERE resource_id = ?', resourceId)!.revision;
  }

  /** Events of a resource in order, with their payload text. */
  events(resourceId: string): Row[] {
    return this.all(
      `SELECT e.resource_revision AS revision, e.event_type AS type, e.actor_type AS actorType,
              e.actor_id AS actorId, e.lease_generation AS generation,
              CAST(b.content AS TEXT) AS payload, e.recorded_at AS recordedAt
       FROM events e LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
       WHERE e.resource_id = ? ORDER BY e.event_seq`,
      resourceId,
    );
  }

  runEvents(runId: string): Row[] {
    return this.events(resourceIdFor('run', runId));
  }

  /** Viewer delta targets of a run, grouped by presentation revision. */
  viewerDeltas(runId: string): string[][] {
    const rows = this.all(
      `SELECT presentation_revision AS revision, target_type AS type, target_key AS key
       FROM viewer_deltas WHERE run_id = ? ORDER BY presentation_revision, delta_index`,
      runId,
    );
    const groups = new Map<number, string[]>();
    for (const row of rows) {
      const group = groups.get(row.revision) ?? [];
      group.push(row.key === '' ? row.type : `${row.type}:${row.key}`);
      groups.set(row.revision, group);
    }
    return [...groups.values()];
  }

  blobText(hash: Buffer | null): string | null {
    if (hash === null) return null;
    return this.get('SELECT CAST(content AS TEXT) AS text FROM blobs WHERE blob_hash = ?', hash)!.text;
  }
}

/** What `bumpResource` writes for a run, followed by the explicit summary/replay deltas. */
export const BUMP = ['summary', 'graph', 'replay', 'inspector:run'];
export const SUMMARY_REPLAY = ['summary', 'replay'];
