// The public declarations of @osolmaz/pi-workflows 0.16.1 that pi-workflows-native replaces,
// written from the interface page (shared/spec/API.md §1–§5, with the 0.16.1 changes of
// shared/seed) in the form `tsc --declaration` gives them: private members appear by name only.
// __test__/types/assignments.ts checks index.d.ts against this file in both directions.
import type Database from 'better-sqlite3';

// ---- src/controllers/types.ts -------------------------------------------------------------
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };
export type ControllerConditionStatus = true | false | 'unknown';
export type ControllerCondition = {
  type: string;
  status: ControllerConditionStatus;
  reason: string;
  message?: string;
  observedGeneration: number;
  lastTransitionTime: string;
};
export type ChildWorkflowState = 'pending' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'interrupted';
export type ChildWorkflowReference = { requestId: string; runId?: string; state: ChildWorkflowState; attempt: number };
export type ControllerResourceStatus<TStatus> = {
  observedGeneration: number;
  conditions: ControllerCondition[];
  controllerStatus: TStatus;
  workflowRun?: ChildWorkflowReference;
};
export type ControllerResource<TSpec = unknown, TStatus = unknown> = {
  metadata: {
    uid: string;
    controller: string;
    key: string;
    resourceVersion: number;
    generation: number;
    deletionTimestamp?: string;
    finalizers: string[];
  };
  spec: TSpec;
  status: ControllerResourceStatus<TStatus>;
};
export type ControllerResourceRef = { controller: string; key: string };
export type EffectState = 'pending' | 'applied' | 'rejected' | 'indeterminate';
export type EffectRecord = {
  key: string;
  resourceUid: string;
  generation: number;
  kind: string;
  state: EffectState;
  requestFingerprint: string;
  startedAt: string;
  completedAt?: string;
  externalRef?: string;
  error?: string;
};
export type ChildWorkflowRecord = ChildWorkflowReference & {
  resourceUid: string;
  requestKey: string;
  inputFingerprint: string;
  workflow: string;
  error?: string;
};
export type ControllerQueueClaim = {
  controller: string;
  key: string;
  ownerId: string;
  token: string;
  generation: number;
  queueVersion: number;
  resourceVersion: number;
  consecutiveErrors: number;
  expiresAt: string;
};
export type ControllerEvent = {
  seq: number;
  recordedAt: string;
  controller: string;
  key: string;
  type: string;
  payload: JsonObject;
};

// ---- src/controllers/store.ts -------------------------------------------------------------
export type QueueRequeueOptions = { availableAt: string; error?: string };
export type QueueItem = {
  controller: string;
  key: string;
  availableAt: string;
  consecutiveErrors: number;
  claimExpiresAt?: string;
};
export type EffectReservation = { record: EffectRecord; created: boolean };
export type WorkflowReservation = { record: ChildWorkflowRecord; created: boolean };
export type WorkflowRecordUpdate = {
  runId?: string | null;
  state: ChildWorkflowRecord['state'];
  attempt?: number;
  error?: string | null;
};
export interface ControllerStore {
  close(): void;
  putResource<TSpec, TStatus>(options: {
    controller: string;
    key: string;
    spec: TSpec;
    initialStatus: TStatus;
    now?: string;
  }): ControllerResource<TSpec, TStatus>;
  getResource<TSpec = unknown, TStatus = unknown>(ref: ControllerResourceRef): ControllerResource<TSpec, TStatus> | undefined;
  getResourceByUid(uid: string): ControllerResource | undefined;
  listResources<TSpec = unknown, TStatus = unknown>(options?: { controller?: string }): ControllerResource<TSpec, TStatus>[];
  updateStatus<TStatus>(options: {
    ref: ControllerResourceRef;
    expectedResourceVersion: number;
    claim: ControllerQueueClaim;
    status: ControllerResourceStatus<TStatus>;
    finalizers?: string[];
    now?: string;
  }): ControllerResource<unknown, TStatus>;
  requestDeletion(ref: ControllerResourceRef, now?: string): ControllerResource;
  updateFinalizers(options: {
    ref: ControllerResourceRef;
    expectedResourceVersion: number;
    finalizers: string[];
    now?: string;
  }): ControllerResource;
  deleteResource(ref: ControllerResourceRef, expectedResourceVersion: number, claim: ControllerQueueClaim): boolean;
  enqueue(ref: ControllerResourceRef, availableAt?: string): void;
  claimNext(options: {
    controllers: string[];
    ownerId: string;
    leaseMs: number;
    now?: string;
    exclude?: ControllerResourceRef[];
  }): ControllerQueueClaim | undefined;
  renewClaim(claim: ControllerQueueClaim, leaseMs: number, now?: string): boolean;
  settleClaim(claim: ControllerQueueClaim, now?: string): boolean;
  requeueClaim(claim: ControllerQueueClaim, options: QueueRequeueOptions, now?: string): boolean;
  listQueue(): QueueItem[];
  reserveEffect(options: {
    key: string;
    resourceUid: string;
    claim: ControllerQueueClaim;
    generation: number;
    kind: string;
    requestFingerprint: string;
    now?: string;
  }): EffectReservation;
  getEffect(resourceUid: string, key: string): EffectRecord | undefined;
  updateEffect(options: {
    resourceUid: string;
    key: string;
    claim: ControllerQueueClaim;
    state: EffectRecord['state'];
    externalRef?: string;
    error?: string;
    now?: string;
  }): EffectRecord;
  listEffects(resourceUid: string): EffectRecord[];
  reserveWorkflow(options: {
    resourceUid: string;
    claim: ControllerQueueClaim;
    requestKey: string;
    workflow: string;
    inputFingerprint: string;
  }): WorkflowReservation;
  getWorkflow(resourceUid: string, requestKey: string): ChildWorkflowRecord | undefined;
  getWorkflowByRequestId(requestId: string): ChildWorkflowRecord | undefined;
  updateWorkflow(requestId: string, update: WorkflowRecordUpdate, claim: ControllerQueueClaim): ChildWorkflowRecord;
  completeWorkflow(requestId: string, update: WorkflowRecordUpdate): ChildWorkflowRecord;
  listWorkflows(resourceUid: string): ChildWorkflowRecord[];
  recordEvent(options: {
    controller: string;
    key: string;
    claim?: ControllerQueueClaim;
    type: string;
    payload?: JsonObject;
    now?: string;
  }): ControllerEvent;
  listEvents(options?: { controller?: string; key?: string; limit?: number }): ControllerEvent[];
}

// ---- src/controllers/errors.ts ------------------------------------------------------------
export declare class ResourceConflictError extends Error {
  constructor(controller: string, key: string);
}
export declare class ResourceNotFoundError extends Error {
  constructor(controller: string, key: string);
}
export declare class EffectRequestConflictError extends Error {
  constructor(key: string);
}
export declare class WorkflowRequestConflictError extends Error {
  constructor(key: string);
}

// ---- src/state/database.ts ----------------------------------------------------------------
export type StateDatabaseMode = 'read-write' | 'read-only';
export type OpenStateDatabaseOptions = {
  filePath?: string;
  homeDir?: string;
  mode?: StateDatabaseMode;
  checkLegacyState?: boolean;
};
export type BlobRecord = { hash: Buffer; mediaType: string; byteLength: number; content: Buffer };
export declare function workflowStatePath(homeDir?: string): string;
export declare class StateDatabase {
  readonly filePath: string;
  readonly mode: StateDatabaseMode;
  readonly connection: Database.Database;
  constructor(options?: OpenStateDatabaseOptions);
  close(): void;
  transaction<T>(operation: () => T): T;
  putJson(value: unknown, now?: number): Buffer;
  putText(value: string, now?: number): Buffer;
  putBlob(content: Buffer, mediaType: string, now?: number): Buffer;
  readBlob(hash: Buffer): BlobRecord | undefined;
  readJson(hash: Buffer): JsonValue;
  integrityCheck(): void;
  pruneUnreferencedBlobs(): number;
  backup(destination: string): Promise<void>;
  private configure;
  private prepareSchema;
  private initialize;
  private verifySchema;
}

// ---- src/controllers/sqlite.ts ------------------------------------------------------------
export type WorkflowRunLaunchStatus = 'queued' | 'starting' | 'running' | 'parked' | 'done' | 'failed' | 'cancelled';
export type WorkflowRunReservationOptions = {
  runId: string;
  workflowName: string;
  workflowSourceRef: string;
  workflowSource: unknown;
  definitionDigest: string;
  definitionSnapshot: unknown;
  input: unknown;
  launchOptions?: unknown;
  runnerId: string;
  originSessionId: string;
  executionMode?: 'interactive' | 'headless';
  parentRunId?: string;
  lineageKind?: 'continuation' | 'restart';
  restartNumber?: number;
  parentTerminalFingerprint?: string;
  now?: string;
};
export type WorkflowRunClaimOptions = WorkflowRunReservationOptions & { claimToken: string; leaseMs: number };
export type WorkflowRunQueueViewRecord = {
  runId: string;
  workflowName: string;
  workflowSourceRef: string;
  workflowSource: unknown;
  initialized: boolean;
  definitionDigest: string;
  runStateStatus: string;
  paused: boolean;
  status: WorkflowRunLaunchStatus;
  originSessionId: string | null;
  executionMode: 'interactive' | 'headless';
  parentRunId: string | null;
  rootRunId: string;
  lineageKind: 'continuation' | 'restart' | null;
  restartNumber: number;
  parentTerminalFingerprint: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
};
export type WorkflowRunQueueRecord = {
  runId: string;
  workflowName: string;
  workflowSourceRef: string;
  workflowSource: unknown;
  initialized: boolean;
  definitionDigest: string;
  input: unknown;
  launchOptions: unknown;
  status: WorkflowRunLaunchStatus;
  runnerId: string | null;
  claimToken: string | null;
  claimGeneration: number | null;
  claimExpiresAt: string | null;
  affinityRunnerId: string | null;
  originSessionId: string | null;
  executionMode: 'interactive' | 'headless';
  parentRunId: string | null;
  rootRunId: string;
  lineageKind: 'continuation' | 'restart' | null;
  restartNumber: number;
  parentTerminalFingerprint: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
};
export type WorkflowRunPreparationResult =
  | { state: 'claimed'; run: WorkflowRunQueueRecord & { claimToken: string } }
  | { state: 'adopted'; run: WorkflowRunQueueRecord };
export type RunEventRecord = {
  seq: number;
  recordedAt: string;
  runId: string;
  workflowRef: string;
  type: string;
  runnerId: string | null;
  payload: JsonObject;
};

export declare class SqliteControllerStore implements ControllerStore {
  readonly filePath: string;
  readonly state: StateDatabase;
  private readonly ownsState;
  private readonly projectId;
  private closed;
  constructor(
    filePath?: string,
    options?: {
      readOnly?: boolean;
      projectPath?: string;
      state?: StateDatabase;
      /** Host-only global view. Project-scoped mutations still require projectPath. */
      global?: boolean;
    },
  );
  close(): void;
  putResource<TSpec, TStatus>(options: {
    controller: string;
    key: string;
    spec: TSpec;
    initialStatus: TStatus;
    now?: string;
  }): ControllerResource<TSpec, TStatus>;
  getResource<TSpec = unknown, TStatus = unknown>(ref: ControllerResourceRef): ControllerResource<TSpec, TStatus> | undefined;
  getResourceByUid(uid: string): ControllerResource | undefined;
  listResources<TSpec = unknown, TStatus = unknown>(options?: { controller?: string }): ControllerResource<TSpec, TStatus>[];
  updateStatus<TStatus>(options: {
    ref: ControllerResourceRef;
    expectedResourceVersion: number;
    claim: ControllerQueueClaim;
    status: ControllerResourceStatus<TStatus>;
    finalizers?: string[];
    now?: string;
  }): ControllerResource<unknown, TStatus>;
  requestDeletion(ref: ControllerResourceRef, nowValue?: string): ControllerResource;
  updateFinalizers(options: {
    ref: ControllerResourceRef;
    expectedResourceVersion: number;
    finalizers: string[];
    now?: string;
  }): ControllerResource;
  deleteResource(ref: ControllerResourceRef, expectedResourceVersion: number, claim: ControllerQueueClaim): boolean;
  enqueue(ref: ControllerResourceRef, availableAt?: string): void;
  claimNext(options: {
    controllers: string[];
    ownerId: string;
    leaseMs: number;
    now?: string;
    exclude?: ControllerResourceRef[];
  }): ControllerQueueClaim | undefined;
  renewClaim(claim: ControllerQueueClaim, leaseMs: number, nowValue?: string): boolean;
  settleClaim(claim: ControllerQueueClaim, nowValue?: string): boolean;
  requeueClaim(claim: ControllerQueueClaim, options: QueueRequeueOptions, nowValue?: string): boolean;
  listQueue(): QueueItem[];
  reserveEffect(options: {
    key: string;
    resourceUid: string;
    claim: ControllerQueueClaim;
    generation: number;
    kind: string;
    requestFingerprint: string;
    now?: string;
  }): EffectReservation;
  getEffect(resourceUid: string, key: string): EffectRecord | undefined;
  updateEffect(options: {
    resourceUid: string;
    key: string;
    claim: ControllerQueueClaim;
    state: EffectRecord['state'];
    externalRef?: string;
    error?: string;
    now?: string;
  }): EffectRecord;
  listEffects(resourceUid: string): EffectRecord[];
  reserveWorkflow(options: {
    resourceUid: string;
    claim: ControllerQueueClaim;
    requestKey: string;
    workflow: string;
    inputFingerprint: string;
  }): WorkflowReservation;
  getWorkflow(resourceUid: string, requestKey: string): ChildWorkflowRecord | undefined;
  getWorkflowByRequestId(requestId: string): ChildWorkflowRecord | undefined;
  updateWorkflow(requestId: string, update: WorkflowRecordUpdate, claim: ControllerQueueClaim): ChildWorkflowRecord;
  completeWorkflow(requestId: string, update: WorkflowRecordUpdate): ChildWorkflowRecord;
  listWorkflows(resourceUid: string): ChildWorkflowRecord[];
  recordEvent(options: {
    controller: string;
    key: string;
    claim?: ControllerQueueClaim;
    type: string;
    payload?: JsonObject;
    now?: string;
  }): ControllerEvent;
  listEvents(options?: { controller?: string; key?: string; limit?: number }): ControllerEvent[];
  reserveWorkflowRun(options: WorkflowRunReservationOptions): WorkflowRunQueueRecord;
  private reserveWorkflowRunInTransaction;
  prepareOrAdoptWorkflowRun(options: WorkflowRunClaimOptions): WorkflowRunPreparationResult;
  enqueueWorkflowRun(options: WorkflowRunClaimOptions): WorkflowRunQueueRecord;
  getWorkflowRun(runId: string): WorkflowRunQueueRecord | undefined;
  getWorkflowRunView(runId: string): WorkflowRunQueueViewRecord | undefined;
  workflowRunListRevision(): { total: number; revision: string };
  listWorkflowRunViews(options: { offset: number; limit: number }): {
    total: number;
    revision: string;
    runs: WorkflowRunQueueViewRecord[];
  };
  workflowRunProjectPath(runId: string): string | undefined;
  listWorkflowRuns(options?: {
    statuses?: WorkflowRunLaunchStatus[];
    excludeRunIds?: string[];
    limit?: number;
  }): WorkflowRunQueueRecord[];
  findSessionReservation(sessionId: string): WorkflowRunQueueRecord | undefined;
  findSessionReservationView(sessionId: string): WorkflowRunQueueViewRecord | undefined;
  claimWorkflowRun(options: {
    runId: string;
    runnerId: string;
    claimToken: string;
    leaseMs: number;
    now?: string;
  }): WorkflowRunQueueRecord | undefined;
  /** Schedule a worker that validates one pending interactive submission. */
  claimWorkflowRunForInteractionValidation(options: {
    runId: string;
    runnerId: string;
    claimToken: string;
    leaseMs: number;
    now?: string;
  }): WorkflowRunQueueRecord | undefined;
  /** Take a short host claim without scheduling a parked interactive run. */
  claimWorkflowRunForControl(options: {
    runId: string;
    runnerId: string;
    claimToken: string;
    leaseMs: number;
    now?: string;
  }): WorkflowRunQueueRecord | undefined;
  beginWorkflowRunInteractionTimeout(options: {
    runId: string;
    targetSessionId: string;
    claimToken: string;
    now?: string;
  }): boolean;
  markWorkflowRunRunning(options: { runId: string; claimToken: string; now?: string }): boolean;
  claimNextWorkflowRun(options: {
    runnerId: string;
    sessionId?: string;
    claimToken: string;
    leaseMs: number;
    now?: string;
    excludeRunIds?: string[];
  }): WorkflowRunQueueRecord | undefined;
  renewWorkflowRunClaim(options: { runId: string; claimToken: string; leaseMs: number; now?: string }): boolean;
  verifyWorkflowRunClaim(options: { runId: string; claimToken: string; now?: string }): boolean;
  workflowRunAuthority(
    runId: string,
    claimToken: string,
  ):
    | {
        actor: { type: 'session' | 'host'; id: string };
        ownerType: 'session' | 'host';
        ownerId: string;
        token: string;
        generation: number;
        leaseMs: number;
      }
    | undefined;
  parkWorkflowRun(options: { runId: string; claimToken: string; now?: string }): boolean;
  pauseParkedWorkflowRun(options: { runId: string; now?: string }): boolean;
  resumePausedInteraction(options: { runId: string; now?: string }): boolean;
  isWorkflowRunPaused(runId: string): boolean;
  parkWorkflowRunForSourceChange(options: { runId: string; claimToken: string; detail: string; now?: string }): boolean;
  parkWorkflowRunForAmbiguousEffect(options: { runId: string; claimToken: string; now?: string }): boolean;
  failWorkflowRun(options: {
    runId: string;
    claimToken?: string;
    errorCode: string;
    errorMessage: string;
    now?: string;
  }): boolean;
  cancelWorkflowRun(options: { runId: string; claimToken?: string; now?: string }): boolean;
  /** Cancel a nonterminal run only when its claim is absent or expired. */
  cancelStaleWorkflowRun(options: { runId: string; controlId?: string; claimToken?: string; now?: string }): boolean;
  deleteWorkflowRun(options: { runId: string; claimToken: string }): boolean;
  completeWorkflowRun(options: { runId: string; claimToken: string; now?: string }): boolean;
  repairCanonicalWorkflowSourceRun(): never;
  claimLegacyWorkflowSourceRun(): never;
  recordRunEvent(options: {
    runId: string;
    workflowRef: string;
    type: string;
    payload?: JsonObject;
    runnerId?: string;
    now?: string;
  }): RunEventRecord;
  listRunEventsAfter(seq: number, options?: { limit?: number }): RunEventRecord[];
  settleRunEffect(runId: string, effectType: 'run.park_queue' | 'run.settle_queue'): void;
  setWorkflowRunOriginSession(runId: string, originSessionId: string): boolean;
  private ensureProject;
  private findProject;
  private requireProjectId;
  private controllerRow;
  private requireControllerRow;
  private requireControllerRowByUid;
  private requireResource;
  private mapControllerResource;
  private finalizers;
  private replaceFinalizers;
  private enqueueControllerRow;
  private queueErrors;
  private queueVersion;
  private settleControllerClaim;
  private assertControllerClaim;
  private requireLease;
  private releaseLease;
  private resourceRevision;
  private bumpResource;
  private insertEvent;
  private effectRow;
  private requireEffectRow;
  private mapEffect;
  private effectKey;
  private workflowRow;
  private workflowRowById;
  private requireWorkflowRow;
  private mapWorkflow;
  private workflowRunRow;
  private requireWorkflowRunRow;
  private requireWorkflowRun;
  private assertWorkflowRunPreparationCompatible;
  private workflowRunViewRows;
  private mapWorkflowRun;
  private claimRun;
  private claimRunInTransaction;
  private updateClaimedRunStatus;
  private releaseRunClaim;
  private terminalRun;
  private cancelWorkflowRunDependents;
  private assertWritable;
}
