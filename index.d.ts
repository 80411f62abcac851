/// <reference types="node" />
/**
 * pi-workflows-native: a native (Rust, napi-rs) drop-in replacement for the
 * `SqliteControllerStore` of `@osolmaz/pi-workflows` 0.16.1.
 *
 * These declarations are the reference's public types, unchanged (checked by
 * `__test__/types/assignments.ts`), with one documented difference: `StateDatabase.connection`
 * is a subset of better-sqlite3's `Database` over the store's own SQLite connection.
 *
 * Conventions used throughout:
 * - A `now?: string` (or `nowValue?: string`) option is any value `new Date(value)` accepts; it
 *   defaults to the current time, and an invalid one throws `Error("Invalid timestamp")`.
 * - Timestamps in records are ISO strings (`Date.prototype.toISOString()`).
 * - Optional record fields are absent (not `undefined`) when unset; fields typed `| null` are
 *   `null`.
 * - A "claim" is the {@link ControllerQueueClaim} returned by
 *   {@link SqliteControllerStore.claimNext}; methods that take one check it is still the live
 *   lease and throw `Error("Controller claim is stale")` otherwise.
 *
 * @packageDocumentation
 */

// ---- JSON ---------------------------------------------------------------------------------

/** A JSON scalar. */
export type JsonPrimitive = string | number | boolean | null;
/** Any JSON value. Values read back from the store have their object keys sorted. */
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object (event payloads). */
export type JsonObject = { [key: string]: JsonValue };

// ---- controller resources (the reference's src/controllers/types.ts) -----------------------

/** The status of a {@link ControllerCondition}, as in Kubernetes. */
export type ControllerConditionStatus = true | false | 'unknown';

/** One condition in a controller resource's status. */
export type ControllerCondition = {
  type: string;
  status: ControllerConditionStatus;
  reason: string;
  message?: string;
  /** The resource generation the condition was computed for. */
  observedGeneration: number;
  lastTransitionTime: string;
};

/** The state of a child workflow a controller started. */
export type ChildWorkflowState = 'pending' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'interrupted';

/** A controller resource's pointer to the child workflow it waits on. */
export type ChildWorkflowReference = {
  requestId: string;
  runId?: string;
  state: ChildWorkflowState;
  attempt: number;
};

/** The status part of a controller resource; `controllerStatus` is the controller's own data. */
export type ControllerResourceStatus<TStatus> = {
  observedGeneration: number;
  conditions: ControllerCondition[];
  controllerStatus: TStatus;
  workflowRun?: ChildWorkflowReference;
};

/** A controller resource: Kubernetes-style metadata, the desired `spec` and the observed `status`. */
export type ControllerResource<TSpec = unknown, TStatus = unknown> = {
  metadata: {
    /** A random UUID given when the resource is created; never reused. */
    uid: string;
    controller: string;
    key: string;
    /** Bumped by every change to the resource, its queue item, lease or events. */
    resourceVersion: number;
    /** Bumped when the spec changes. */
    generation: number;
    /** Present once {@link SqliteControllerStore.requestDeletion} was called. */
    deletionTimestamp?: string;
    finalizers: string[];
  };
  spec: TSpec;
  status: ControllerResourceStatus<TStatus>;
};

/** Names a controller resource within the store's project. */
export type ControllerResourceRef = { controller: string; key: string };

/** The state of an idempotent effect; `indeterminate` means the outcome is unknown. */
export type EffectState = 'pending' | 'applied' | 'rejected' | 'indeterminate';

/** An idempotent side effect of a controller resource, keyed by `resourceUid` and `key`. */
export type EffectRecord = {
  key: string;
  resourceUid: string;
  generation: number;
  kind: string;
  state: EffectState;
  requestFingerprint: string;
  startedAt: string;
  /** Present once the effect left `pending`. */
  completedAt?: string;
  externalRef?: string;
  error?: string;
};

/** A child workflow a controller resource requested. */
export type ChildWorkflowRecord = ChildWorkflowReference & {
  resourceUid: string;
  requestKey: string;
  /** Lowercase hex of the 32-byte input fingerprint. */
  inputFingerprint: string;
  workflow: string;
  error?: string;
};

/**
 * A claim on a controller resource's queue item: a lease with a fencing token. Methods that take
 * a claim may update `resourceVersion` and `expiresAt` in place, as the reference does.
 */
export type ControllerQueueClaim = {
  controller: string;
  key: string;
  ownerId: string;
  /** A random base64url token; only its SHA-256 is stored. */
  token: string;
  /** The lease generation, incremented by every claim (the fencing number). */
  generation: number;
  queueVersion: number;
  resourceVersion: number;
  consecutiveErrors: number;
  expiresAt: string;
};

/** An event recorded against a controller resource. */
export type ControllerEvent = {
  seq: number;
  recordedAt: string;
  controller: string;
  key: string;
  type: string;
  payload: JsonObject;
};

// ---- the store interface (the reference's src/controllers/store.ts) ------------------------

/** Options of {@link SqliteControllerStore.requeueClaim}. */
export type QueueRequeueOptions = {
  /** When the item becomes due again. */
  availableAt: string;
  /** Stored as the item's last error. */
  error?: string;
};

/** One item of the controller work queue ({@link SqliteControllerStore.listQueue}). */
export type QueueItem = {
  controller: string;
  key: string;
  availableAt: string;
  consecutiveErrors: number;
  /** Present while a claim holds the item. */
  claimExpiresAt?: string;
};

/** The result of {@link SqliteControllerStore.reserveEffect}; `created` is false on reuse. */
export type EffectReservation = { record: EffectRecord; created: boolean };

/** The result of {@link SqliteControllerStore.reserveWorkflow}; `created` is false on reuse. */
export type WorkflowReservation = { record: ChildWorkflowRecord; created: boolean };

/** A child workflow's new state, for {@link SqliteControllerStore.updateWorkflow} and `completeWorkflow`. */
export type WorkflowRecordUpdate = {
  runId?: string | null;
  state: ChildWorkflowRecord['state'];
  attempt?: number;
  error?: string | null;
};

/**
 * The controller-runtime part of the store (the reference's `ControllerStore`). Every method is
 * documented on {@link SqliteControllerStore}, which implements it.
 */
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

// ---- workflow runs (the reference's src/controllers/sqlite.ts) -----------------------------

/** The queue status of a workflow run. `done`, `failed` and `cancelled` are terminal. */
export type WorkflowRunLaunchStatus = 'queued' | 'starting' | 'running' | 'parked' | 'done' | 'failed' | 'cancelled';

/** Options of {@link SqliteControllerStore.reserveWorkflowRun}. */
export type WorkflowRunReservationOptions = {
  /** `^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`. */
  runId: string;
  /** The workflow's name. */
  workflowName: string;
  /** Where the definition comes from, e.g. `builtin:echo`. */
  workflowSourceRef: string;
  /** `{ kind: 'builtin' | 'file', id, revision }` or `{ root, mounted: [...] }`. */
  workflowSource: unknown;
  /** 64 hex digits, optionally prefixed with `sha256:`. */
  definitionDigest: string;
  /** The workflow definition as it will run (JSON). */
  definitionSnapshot: unknown;
  /** The run's input (JSON). */
  input: unknown;
  /** Options of the launch (JSON), stored as given. */
  launchOptions?: unknown;
  /** The runner the queued run has affinity to. */
  runnerId: string;
  /** The Pi session that owns the run; at most one active run per session. */
  originSessionId: string;
  /** Defaults to `interactive`. */
  executionMode?: 'interactive' | 'headless';
  /** Makes this run a continuation or restart of `parentRunId` (same origin session). */
  parentRunId?: string;
  /** Defaults to `continuation` when `parentRunId` is given; not allowed without it. */
  lineageKind?: 'continuation' | 'restart';
  /** A restart's number: the parent's plus one (the default). */
  restartNumber?: number;
  /** Required for a restart: the terminal parent's fingerprint (64 hex, optional `sha256:`). */
  parentTerminalFingerprint?: string;
  /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
  now?: string;
};

/** Reservation options plus the claim to take ({@link SqliteControllerStore.prepareOrAdoptWorkflowRun}). */
export type WorkflowRunClaimOptions = WorkflowRunReservationOptions & {
  /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
  claimToken: string;
  /** How long the claim lasts, in milliseconds from `now`. */
  leaseMs: number;
};

/** A workflow run as the run list shows it (no input, no claim). */
export type WorkflowRunQueueViewRecord = {
  runId: string;
  workflowName: string;
  workflowSourceRef: string;
  /** `{ root, mounted: [] }`. */
  workflowSource: unknown;
  /** False until the run's durable state left `queued`. */
  initialized: boolean;
  /** `sha256:<hex>`. */
  definitionDigest: string;
  runStateStatus: string;
  paused: boolean;
  status: WorkflowRunLaunchStatus;
  /** Null for headless runs. */
  originSessionId: string | null;
  executionMode: 'interactive' | 'headless';
  parentRunId: string | null;
  rootRunId: string;
  lineageKind: 'continuation' | 'restart' | null;
  restartNumber: number;
  /** Lowercase hex without prefix. */
  parentTerminalFingerprint: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
};

/** A workflow run with its queue state, input and current claim. */
export type WorkflowRunQueueRecord = {
  runId: string;
  workflowName: string;
  workflowSourceRef: string;
  /** `{ root, mounted: [...] }`, rebuilt from the stored sources. */
  workflowSource: unknown;
  initialized: boolean;
  /** `sha256:<hex>`. */
  definitionDigest: string;
  input: unknown;
  launchOptions: unknown;
  status: WorkflowRunLaunchStatus;
  /** The owner of the current lease. */
  runnerId: string | null;
  /** Set only on the record a claim returns. */
  claimToken: string | null;
  claimGeneration: number | null;
  claimExpiresAt: string | null;
  affinityRunnerId: string | null;
  /** Null for headless runs. */
  originSessionId: string | null;
  executionMode: 'interactive' | 'headless';
  parentRunId: string | null;
  rootRunId: string;
  lineageKind: 'continuation' | 'restart' | null;
  restartNumber: number;
  /** Lowercase hex without prefix. */
  parentTerminalFingerprint: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
};

/** The result of {@link SqliteControllerStore.prepareOrAdoptWorkflowRun}. */
export type WorkflowRunPreparationResult =
  | { state: 'claimed'; run: WorkflowRunQueueRecord & { claimToken: string } }
  | { state: 'adopted'; run: WorkflowRunQueueRecord };

/** An event recorded against a workflow run. */
export type RunEventRecord = {
  seq: number;
  recordedAt: string;
  runId: string;
  workflowRef: string;
  type: string;
  runnerId: string | null;
  payload: JsonObject;
};

// ---- the state database (the reference's src/state/database.ts) ----------------------------

/** How a {@link StateDatabase} is opened. */
export type StateDatabaseMode = 'read-write' | 'read-only';

/**
 * How a store talks to a dqlite cluster (a `dqlite://host:port,…/database` address in place of
 * the file path). This package's addition. No TLS: libdqlite 1.11 speaks plain TCP, so the
 * nodes must be reached over a trusted network (docs/cluster.md).
 */
export type ClusterOptions = {
  /**
   * How long connecting to a node and its first answer (who leads) may take, per node address,
   * in ms. Defaults to 2,000.
   */
  connectTimeoutMs?: number;
  /** How long a request to the leader may take, its whole reply included, in ms. Defaults to 10,000. */
  requestTimeoutMs?: number;
  /**
   * How long a call (the constructor included) may take in all, looking for a leader after a
   * failover included, before it fails with `code: 'DQLITE_UNAVAILABLE'`, in ms. Defaults to
   * 15,000.
   */
  reconnectDeadlineMs?: number;
  /** The most rows one reply may bring (else `code: 'DQLITE_REPLY_TOO_LARGE'`). Defaults to 250,000. */
  maxReplyRows?: number;
  /**
   * The most bytes one reply may bring, counted as its rows take them in memory (else `code:
   * 'DQLITE_REPLY_TOO_LARGE'`). Defaults to 33,554,432 (32 MiB).
   */
  maxReplyBytes?: number;
};

/**
 * This host's offset from the clock of a dqlite cluster's leader, as last measured (on the
 * open and on every reconnection). Every call that passes no `now` adds `offsetMs` to
 * `Date.now()`, so that one clock orders every host's leases (docs/cluster.md, "Clocks").
 * This package's addition.
 */
export type ClusterClockReading = {
  /** What the store adds to `Date.now()`: the leader's clock minus this host's, in ms. */
  offsetMs: number;
  /** The offset measured; `offsetMs` is 0 when this is within half the round trip (in step). */
  measuredOffsetMs: number;
  /** The round trip of the measurement kept (the shortest of three), in ms. */
  roundTripMs: number;
  /** The leader measured (`host:port`). */
  leader: string;
  /** How many leader connections were measured so far (1 after the open). */
  measurements: number;
};

/** Options of the {@link StateDatabase} constructor. */
export type OpenStateDatabaseOptions = {
  /**
   * Defaults to {@link workflowStatePath}(homeDir). `dqlite://host1:9001,host2:9001/name` opens
   * the database `name` of a dqlite cluster instead (see the README, "Running on several machines").
   */
  filePath?: string;
  /** For a `dqlite://` address: timeouts of the cluster connection. */
  cluster?: ClusterOptions;
  /** The home folder of the default path and of the legacy-state check; defaults to `os.homedir()`. */
  homeDir?: string;
  /** Defaults to `read-write`. Read-only requires the file to exist. */
  mode?: StateDatabaseMode;
  /** Refuse to create a new file next to pre-SQLite workflow state. Defaults to `filePath === undefined`. */
  checkLegacyState?: boolean;
};

/** A content-addressed blob; `hash` is the SHA-256 of `content`. */
export type BlobRecord = { hash: Buffer; mediaType: string; byteLength: number; content: Buffer };

/** better-sqlite3's `RunResult`. */
export type StateRunResult = { changes: number; lastInsertRowid: number | bigint };

/** A result column, as better-sqlite3's `Statement.columns()` describes it. */
export type StateColumnDefinition = {
  name: string;
  column: string | null;
  table: string | null;
  database: string | null;
  type: string | null;
};

/**
 * A prepared statement on {@link StateDatabase.connection}: the subset of better-sqlite3's
 * `Statement` this package implements, with the same signatures.
 */
export interface StateStatement<BindParameters extends unknown[] = unknown[], Result = unknown> {
  /** The connection that prepared it. */
  database: StateConnection;
  /** The SQL text. */
  source: string;
  /** True when the statement returns rows (use `get`/`all`/`iterate`, not `run`). */
  reader: boolean;
  /** True when the statement does not write to the database. */
  readonly: boolean;
  /** Always false: results are read completely before a call returns. */
  busy: boolean;
  /** Runs a statement that returns no rows; its changes and last rowid. */
  run(...params: BindParameters): StateRunResult;
  /** The first row, or undefined. */
  get(...params: BindParameters): Result | undefined;
  /** Every row. */
  all(...params: BindParameters): Result[];
  /** The rows one by one (read completely before the first is returned). */
  iterate(...params: BindParameters): IterableIterator<Result>;
  /** Return only the first column of each row. */
  pluck(toggleState?: boolean): this;
  /** Return rows keyed by table name (expressions under `$`). */
  expand(toggleState?: boolean): this;
  /** Return rows as arrays. */
  raw(toggleState?: boolean): this;
  /** Bind parameters once for every later execution. */
  bind(...params: BindParameters): this;
  /** The columns of the statement's rows. */
  columns(): StateColumnDefinition[];
  /** Return INTEGER columns as `bigint`. */
  safeIntegers(toggleState?: boolean): this;
}

/** The parameters of `F`, spelled as better-sqlite3 spells them so the two types relate. */
export type StateArgumentTypes<F extends (...params: any[]) => unknown> = F extends (...args: infer A) => unknown ? A : never;

/** better-sqlite3's `Transaction`: call it to run `F` in `BEGIN`…`COMMIT` (a savepoint when nested). */
export interface StateTransaction<F extends (...params: any[]) => unknown> {
  /** Runs `F` in `BEGIN` … `COMMIT` (a savepoint when nested), rolling back when it throws. */
  (...params: StateArgumentTypes<F>): ReturnType<F>;
  /** The same as calling the transaction. */
  default(...params: StateArgumentTypes<F>): ReturnType<F>;
  /** Runs `F` in `BEGIN DEFERRED` … `COMMIT`. */
  deferred(...params: StateArgumentTypes<F>): ReturnType<F>;
  /** Runs `F` in `BEGIN IMMEDIATE` … `COMMIT` (takes the write lock first). */
  immediate(...params: StateArgumentTypes<F>): ReturnType<F>;
  /** Runs `F` in `BEGIN EXCLUSIVE` … `COMMIT`. */
  exclusive(...params: StateArgumentTypes<F>): ReturnType<F>;
}

/**
 * The subset of better-sqlite3's `Database` that code around the store uses, over the store's
 * own SQLite connection: rows written here are seen by the next store call and the reverse.
 * Left out: `function`, `aggregate`, `table`, `loadExtension`, `serialize`, `unsafeMode` and
 * `backup` (use {@link StateDatabase.backup}).
 */
export interface StateConnection {
  /** Always false: state databases are files. */
  memory: boolean;
  /** True when the state database was opened read-only. */
  readonly: boolean;
  /** The database file's absolute path. */
  name: string;
  /** False once the connection is closed. */
  open: boolean;
  /**
   * True while a transaction is open. Never throws, and does not wait for the open's blob
   * prune (which runs on a connection of its own): a prune failure is left for the next call.
   */
  inTransaction: boolean;
  /**
   * Positional parameters as a tuple (`prepare<[string, number]>(sql)`); named parameters as a
   * one-element tuple: `prepare<[{ id: string }]>(sql)`.
   */
  prepare<BindParameters extends unknown[] = unknown[], Result = unknown>(
    source: string,
  ): StateStatement<BindParameters, Result>;
  /** Wraps `fn` in a transaction; see {@link StateTransaction}. */
  transaction<F extends (...params: any[]) => unknown>(fn: F): StateTransaction<F>;
  /** Runs every statement of `source` (no parameters, no rows). */
  exec(source: string): this;
  /** Runs `PRAGMA <source>`; its rows, or with `simple` the first column of the first row. */
  pragma(
    source: string,
    options?: {
      /** Return the first column of the first row instead of the rows. */
      simple?: boolean;
    },
  ): unknown;
  /** Return INTEGER columns as `bigint` from statements prepared after this call. */
  defaultSafeIntegers(toggleState?: boolean): this;
  /**
   * Closes the connection, and with it every store built on this state database. When the
   * open's blob prune failed and no call reported it yet, throws its error once closed (see
   * {@link OpenPruneError}).
   */
  close(): this;
}

/**
 * A failure of the read-write open's blob prune. The reference prunes inside its constructor,
 * which throws; here the prune runs beside the caller after the constructor returned, and its
 * failure (an I/O error, a full disk: it rolled back, nothing is lost) is thrown once, by the
 * first call that uses the state database: a store method or `store.async` call, a method or
 * statement of `state` / `state.connection`, or `close()` (which closes first). It is the error
 * the reference's constructor throws (`SqliteError`, SQLite's message and `code`), with these
 * two non-enumerable properties and a note after the message in the stack's first line. Every
 * call after it works.
 */
export interface OpenPruneError extends Error {
  /** SQLite's result code, e.g. `SQLITE_FULL` or `SQLITE_IOERR_WRITE`. */
  code?: string;
  /** Always true: marks the error as the open's blob prune's. Non-enumerable. */
  readonly openPrune: true;
  /** The absolute path of the state file whose prune failed. Non-enumerable. */
  readonly filePath: string;
}

/**
 * The reference's state database: one SQLite connection to a Pi Workflows `state.sqlite` file
 * (WAL, `synchronous=FULL`, foreign keys on, 5 s busy timeout). Opening creates the schema on a
 * new file, verifies it on every open (throwing the reference's "durable state is incompatible"
 * error on any difference) and, in read-write mode, prunes unreferenced blobs.
 */
export declare class StateDatabase {
  /** The resolved absolute path. */
  readonly filePath: string;
  /** How it was opened: `read-write` or `read-only`. */
  readonly mode: StateDatabaseMode;
  /** The store's own connection; see {@link StateConnection}. */
  readonly connection: StateConnection;
  /**
   * On a dqlite cluster, this host's offset from the leader's clock, which every call that
   * passes no `now` adds to `Date.now()` (a lease's `expiresAt` is on the cluster's clock:
   * compare it with `Date.now() + offsetMs`); `null` for a file. This package's addition.
   */
  readonly clusterClock: ClusterClockReading | null;
  constructor(options?: OpenStateDatabaseOptions);
  /**
   * Closes the connection, and with it every store built on this state database. When the
   * open's blob prune failed and no call reported it yet, throws its error once closed (see
   * {@link OpenPruneError}).
   */
  close(): void;
  /** Runs `operation` in `BEGIN IMMEDIATE` … `COMMIT`, rolling back when it throws. Not re-entrant. */
  transaction<T>(operation: () => T): T;
  /** Stores `value` as canonical JSON (sorted keys); returns its SHA-256. */
  putJson(value: unknown, now?: number): Buffer;
  /** Stores UTF-8 text; returns its SHA-256. */
  putText(value: string, now?: number): Buffer;
  /** Stores a blob (idempotent); returns its SHA-256. */
  putBlob(content: Buffer, mediaType: string, now?: number): Buffer;
  /** The blob with this SHA-256, or undefined. */
  readBlob(hash: Buffer): BlobRecord | undefined;
  /** Reads a JSON blob; objects come back with sorted keys. */
  readJson(hash: Buffer): JsonValue;
  /** `PRAGMA integrity_check` and `foreign_key_check`; throws when either finds a problem. */
  integrityCheck(): void;
  /** Deletes blobs no row references; returns how many. */
  pruneUnreferencedBlobs(): number;
  /** Copies the live database to `destination` with SQLite's online backup. */
  backup(destination: string): Promise<void>;
}

/** `<homeDir>/.pi/agent/workflows/state.sqlite`, the default state file (`homeDir` defaults to `os.homedir()`). */
export declare function workflowStatePath(homeDir?: string): string;

// ---- the store -----------------------------------------------------------------------------

/**
 * The durable store of Pi Workflows: controller resources with a work queue, leases and fencing
 * tokens, idempotent effects, child workflows and events; and the workflow-run queue with
 * continuation/restart lineage, claims, parking, cancellation and interaction timeouts.
 *
 * Every write is one `BEGIN IMMEDIATE` transaction and leaves the file exactly as the reference
 * leaves it, so this store and the TypeScript one can share a state file.
 *
 * @example
 * ```ts
 * import { SqliteControllerStore } from 'pi-workflows-native';
 * const store = new SqliteControllerStore('/tmp/state.sqlite', { projectPath: process.cwd() });
 * const resource = store.putResource({ controller: 'deployments', key: 'web', spec: { image: 'web:1' }, initialStatus: {} });
 * store.close();
 * ```
 */
export declare class SqliteControllerStore implements ControllerStore {
  /** The state file's absolute path (`state.filePath`). */
  readonly filePath: string;
  /** The state database this store works on (shared when passed as `options.state`). */
  readonly state: StateDatabase;
  /**
   * Opens (creating if needed) the state file and registers the project.
   *
   * @param filePath Defaults to {@link workflowStatePath}(); ignored when `options.state` is given.
   *   A `dqlite://host1:9001,host2:9001/name` address opens the database `name` of a dqlite
   *   cluster instead of a file (`dqlite://` is required: a path of the form
   *   `host:port,…/name` is refused rather than made a local folder). A write whose
   *   acknowledgement the cluster lost in a failover throws an `Error` with
   *   `code: 'DQLITE_OUTCOME_UNKNOWN'` (it may or may not have been applied);
   *   `'DQLITE_UNAVAILABLE'` when no leader answered in time (nothing applied);
   *   `'DQLITE_CLUSTER_MISMATCH'` when the addresses belong to different clusters, or a
   *   reconnection reached another cluster than the one opened (nothing sent to it); the
   *   others and what to do: docs/troubleshooting.md, "Cluster".
   */
  constructor(
    filePath?: string,
    options?: {
      /** Open read-only; the project is looked up instead of registered. */
      readOnly?: boolean;
      /**
       * The project resources and runs belong to; defaults to `process.cwd()`, canonicalised
       * with `fs.realpathSync.native`.
       */
      projectPath?: string;
      /** Reuse an open {@link StateDatabase} of this package; `close()` then leaves it open. */
      state?: StateDatabase;
      /** Host-only global view. Project-scoped mutations still require projectPath. */
      global?: boolean;
      /**
       * For a `dqlite://host1:9001,host2:9001/name` address in place of `filePath`: timeouts of
       * the cluster connection. This package's addition. Hosts that share a queue pass the same
       * `projectPath`.
       */
      cluster?: ClusterOptions;
      /**
       * Record where each `store.async` call was made, so that a rejection's stack shows the
       * calling line even when the caller does not `await` it. Costs a stack capture (several
       * µs) per call, so it is off by default; without it a rejection's stack shows the awaiting
       * callers (`at async …`). This package's addition.
       */
      asyncCallSites?: boolean;
    },
  );
  /**
   * Closes the state database when this store opened it, at once. Idempotent. `store.async`
   * calls still queued then reject with `TypeError: The database connection is not open`; to
   * let them finish first, use `await store.async.close()`. When the open's blob prune failed
   * and no call reported it yet, throws its error once closed (see {@link OpenPruneError}).
   */
  close(): void;
  /** `close()`, so that `using store = new SqliteControllerStore(…)` closes it at the end of the block. */
  [Symbol.dispose](): void;
  /**
   * `store.async.close()`, so that `await using store = new SqliteControllerStore(…)` waits for
   * the queued asynchronous calls, then closes.
   */
  [Symbol.asyncDispose](): Promise<void>;

  /**
   * Every store method as a Promise whose work (SQLite, fsync) runs on a libuv worker thread,
   * with the same result or error as the synchronous method. Arguments are read at the call;
   * calls on one database run one at a time, in call order. `await store.async.close()` waits
   * for them, then closes.
   */
  readonly async: AsyncStore;

  /**
   * Creates a controller resource (queued for reconciliation, event `resource.created`), or
   * updates its spec (generation + 1, requeued, event `resource.spec_updated`); an identical
   * spec changes nothing.
   *
   * @throws Error `"controller is invalid"` / `"resource key is invalid"` (1–512 characters).
   */
  putResource<TSpec, TStatus>(options: {
    /** The controller (1–512 characters). */
    controller: string;
    /** The resource key (1–512 characters). */
    key: string;
    /** The desired state (JSON); a change bumps `generation`. */
    spec: TSpec;
    /** `status.controllerStatus` of a new resource; ignored when it exists. */
    initialStatus: TStatus;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): ControllerResource<TSpec, TStatus>;
  /** A resource of this store's project, or undefined (always undefined in the global view). */
  getResource<TSpec = unknown, TStatus = unknown>(ref: ControllerResourceRef): ControllerResource<TSpec, TStatus> | undefined;
  /** A resource by uid, in any project. */
  getResourceByUid(uid: string): ControllerResource | undefined;
  /** Resources ordered by controller and key; of this project unless global. */
  listResources<TSpec = unknown, TStatus = unknown>(options?: {
    /** Only this controller's resources. */
    controller?: string;
  }): ControllerResource<TSpec, TStatus>[];
  /**
   * Replaces the status (and optionally the finalizers) under a live claim; sets
   * `options.claim.resourceVersion` to the new version.
   *
   * @throws {@link ResourceConflictError} when `expectedResourceVersion` is not the current version.
   * @throws {@link ResourceNotFoundError} when the resource does not exist.
   */
  updateStatus<TStatus>(options: {
    /** The resource. */
    ref: ControllerResourceRef;
    /** The `metadata.resourceVersion` last read; any other current version throws {@link ResourceConflictError}. */
    expectedResourceVersion: number;
    /** The live claim on the resource; its `resourceVersion` is updated in place. */
    claim: ControllerQueueClaim;
    /** The new status, replacing the old one. */
    status: ControllerResourceStatus<TStatus>;
    /** Also replace the finalizers (unique names). */
    finalizers?: string[];
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): ControllerResource<unknown, TStatus>;
  /** Marks the resource for deletion (once) and requeues it. */
  requestDeletion(ref: ControllerResourceRef, nowValue?: string): ControllerResource;
  /**
   * Replaces the finalizers.
   *
   * @throws {@link ResourceConflictError} on a version mismatch; Error `"Controller finalizers must be unique"`.
   */
  updateFinalizers(options: {
    /** The resource. */
    ref: ControllerResourceRef;
    /** The `metadata.resourceVersion` last read; any other current version throws {@link ResourceConflictError}. */
    expectedResourceVersion: number;
    /** The new finalizers (unique names). */
    finalizers: string[];
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): ControllerResource;
  /**
   * Deletes a resource whose deletion was requested and that has no finalizers left; returns
   * false otherwise.
   */
  deleteResource(ref: ControllerResourceRef, expectedResourceVersion: number, claim: ControllerQueueClaim): boolean;
  /** Queues the resource for reconciliation at `availableAt` (default now; an earlier time wins). */
  enqueue(ref: ControllerResourceRef, availableAt?: string): void;
  /**
   * Claims the earliest due, unclaimed (or expired) item of the given controllers; undefined
   * when none is due or `controllers` is empty.
   */
  claimNext(options: {
    /** The controllers whose queue items may be claimed. */
    controllers: string[];
    /** Who holds the claim (stored on the lease). */
    ownerId: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
    /** Resources not to claim. */
    exclude?: ControllerResourceRef[];
  }): ControllerQueueClaim | undefined;
  /** Extends a live claim by `leaseMs`; updates `claim.expiresAt`. False when the claim is gone. */
  renewClaim(claim: ControllerQueueClaim, leaseMs: number, nowValue?: string): boolean;
  /**
   * Finishes a claim: removes the queue item unless it was requeued meanwhile, releases the
   * lease, and updates `claim.resourceVersion`. False for a stale claim.
   */
  settleClaim(claim: ControllerQueueClaim, nowValue?: string): boolean;
  /** Releases a claim and requeues the item at `options.availableAt`, counting an error. */
  requeueClaim(claim: ControllerQueueClaim, options: QueueRequeueOptions, nowValue?: string): boolean;
  /** The project's queue, earliest first. */
  listQueue(): QueueItem[];

  /**
   * Reserves an idempotent effect (`pending`) under a live claim, or returns the existing one.
   *
   * @throws {@link EffectRequestConflictError} when `key` was used with another generation, kind or fingerprint.
   */
  reserveEffect(options: {
    /** The effect's key, unique per resource. */
    key: string;
    /** The resource's `metadata.uid`. */
    resourceUid: string;
    /** The live claim on the resource. */
    claim: ControllerQueueClaim;
    /** The resource generation the effect belongs to. */
    generation: number;
    /** What the effect is (free text). */
    kind: string;
    /** A fingerprint of the request; reusing `key` with another throws {@link EffectRequestConflictError}. */
    requestFingerprint: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): EffectReservation;
  /** An effect by its resource's uid and its key, or undefined. */
  getEffect(resourceUid: string, key: string): EffectRecord | undefined;
  /** Records an effect's outcome under a live claim (event `effect.<state>`). */
  updateEffect(options: {
    /** The resource's `metadata.uid`. */
    resourceUid: string;
    /** The effect's key. */
    key: string;
    /** The live claim on the resource. */
    claim: ControllerQueueClaim;
    /** The effect's outcome. */
    state: EffectRecord['state'];
    /** Where the effect can be found in the outside system. */
    externalRef?: string;
    /** Why the effect failed. */
    error?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): EffectRecord;
  /** A resource's effects, oldest first. */
  listEffects(resourceUid: string): EffectRecord[];

  /**
   * Reserves a child workflow request (`pending`) under a live claim, or returns the existing one.
   *
   * @param options.inputFingerprint 64 hex digits.
   * @throws {@link WorkflowRequestConflictError} when `requestKey` was used with another workflow or input.
   */
  reserveWorkflow(options: {
    /** The resource's `metadata.uid`. */
    resourceUid: string;
    /** The live claim on the resource. */
    claim: ControllerQueueClaim;
    /** The request's key, unique per resource. */
    requestKey: string;
    /** The workflow to run. */
    workflow: string;
    /** 64 hex digits: the fingerprint of the workflow's input. */
    inputFingerprint: string;
  }): WorkflowReservation;
  /** A child workflow by its resource's uid and its request key, or undefined. */
  getWorkflow(resourceUid: string, requestKey: string): ChildWorkflowRecord | undefined;
  /** A child workflow by its `requestId` (the id given at reservation), or undefined. */
  getWorkflowByRequestId(requestId: string): ChildWorkflowRecord | undefined;
  /** Updates a child workflow under a live claim (no event). */
  updateWorkflow(requestId: string, update: WorkflowRecordUpdate, claim: ControllerQueueClaim): ChildWorkflowRecord;
  /**
   * Settles a child workflow without a claim (the scheduler's report) and bumps its resource
   * (event `workflow_state_changed`).
   *
   * @throws Error `"Scheduler completion must report a settled child state"` for `pending`/`running`.
   */
  completeWorkflow(requestId: string, update: WorkflowRecordUpdate): ChildWorkflowRecord;
  /** A resource's child workflows. */
  listWorkflows(resourceUid: string): ChildWorkflowRecord[];

  /**
   * Records a custom event on a resource; with a claim it must be live and
   * `claim.resourceVersion` is updated.
   */
  recordEvent(options: {
    /** The controller (1–512 characters). */
    controller: string;
    /** The resource key (1–512 characters). */
    key: string;
    /** A live claim on the resource; its `resourceVersion` is updated in place. Without one the actor is `control`. */
    claim?: ControllerQueueClaim;
    /** The event type. */
    type: string;
    /** The event's data (default `{}`); the returned record holds this very object. */
    payload?: JsonObject;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): ControllerEvent;
  /** Controller events, newest first (`limit` defaults to 100). */
  listEvents(options?: {
    /** Only this controller's events. */
    controller?: string;
    /** Only this resource key's events. */
    key?: string;
    /** At most this many (default 100). */
    limit?: number;
  }): ControllerEvent[];

  /**
   * Queues a new workflow run (status `queued`, event `run.queued`), applying the lineage rules
   * for continuations and restarts.
   *
   * @throws Error `"Workflow run already reserved: <id>"`, `"Invalid workflow run id: <id>"`, the
   *   lineage errors, or SQLite's `UNIQUE constraint failed` when the origin session already has
   *   an active run.
   */
  reserveWorkflowRun(options: WorkflowRunReservationOptions): WorkflowRunQueueRecord;
  /**
   * Reserves and claims a run in one transaction (`claimed`), or adopts the existing run when it
   * matches the options (`adopted`).
   *
   * @throws Error `"Workflow run preparation conflicts: <id>"` when it exists with other options.
   */
  prepareOrAdoptWorkflowRun(options: WorkflowRunClaimOptions): WorkflowRunPreparationResult;
  /**
   * Reserves the run if it is missing, then claims it. Like the reference, the execution mode
   * is not forwarded: the run is interactive.
   *
   * @throws Error `"Workflow run could not be claimed: <id>"`.
   */
  enqueueWorkflowRun(options: WorkflowRunClaimOptions): WorkflowRunQueueRecord;
  /** A run with its queue state, input and current claim (any project), or undefined. */
  getWorkflowRun(runId: string): WorkflowRunQueueRecord | undefined;
  /** A run as the run list shows it (no input, no claim), or undefined. */
  getWorkflowRunView(runId: string): WorkflowRunQueueViewRecord | undefined;
  /** A cheap change detector for the run list (all projects). */
  workflowRunListRevision(): { total: number; revision: string };
  /** A page of the run list, newest first (all projects). */
  listWorkflowRunViews(options: {
    /** How many runs to skip, newest first. */
    offset: number;
    /** The page size. */
    limit: number;
  }): {
    total: number;
    revision: string;
    runs: WorkflowRunQueueViewRecord[];
  };
  /** The canonical path of the project a run belongs to. */
  workflowRunProjectPath(runId: string): string | undefined;
  /** Runs newest first; of this project unless global. */
  listWorkflowRuns(options?: {
    /** Only runs with one of these queue statuses. */
    statuses?: WorkflowRunLaunchStatus[];
    /** Runs to leave out. */
    excludeRunIds?: string[];
    /** At most this many. */
    limit?: number;
  }): WorkflowRunQueueRecord[];
  /** The newest non-terminal run of an origin session. */
  findSessionReservation(sessionId: string): WorkflowRunQueueRecord | undefined;
  /** {@link SqliteControllerStore.findSessionReservation}'s run as the run list shows it. */
  findSessionReservationView(sessionId: string): WorkflowRunQueueViewRecord | undefined;
  /**
   * Claims a run for `runnerId` (queue `starting`, event `lease.claimed`); undefined when it is
   * terminal, waits for a pending interaction, or another owner's lease is live. The returned
   * record carries `claimToken`.
   */
  claimWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): WorkflowRunQueueRecord | undefined;
  /** Schedule a worker that validates one pending interactive submission. */
  claimWorkflowRunForInteractionValidation(options: {
    /** The workflow run. */
    runId: string;
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): WorkflowRunQueueRecord | undefined;
  /** Take a short host claim without scheduling a parked interactive run. */
  claimWorkflowRunForControl(options: {
    /** The workflow run. */
    runId: string;
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): WorkflowRunQueueRecord | undefined;
  /**
   * Under a live claim, cancels the earliest expired pending interaction for
   * `targetSessionId` and resumes the run to finish it; false when there is none.
   */
  beginWorkflowRunInteractionTimeout(options: {
    /** The workflow run. */
    runId: string;
    /** The session whose expired pending interaction times out. */
    targetSessionId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Queue `running` under a live claim (event `run.queue_running`). */
  markWorkflowRunRunning(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Claims the next due run this runner (or session) may take. */
  claimNextWorkflowRun(options: {
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** Only runs this session originated; without it, only headless or already started runs qualify. */
    sessionId?: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
    /** Runs not to claim. */
    excludeRunIds?: string[];
  }): WorkflowRunQueueRecord | undefined;
  /** Extends a live run claim to `now + leaseMs`; false when `claimToken` does not hold the unexpired lease. */
  renewWorkflowRunClaim(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** True while `claimToken` holds the run's unexpired lease. */
  verifyWorkflowRunClaim(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time the lease must outlast; defaults to the current time. */
    now?: string;
  }): boolean;
  /** The actor and lease a claim token stands for (`leaseMs` is always 30000). */
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
  /** Queue `parked` and the lease released (event `run.queue_parked`). */
  parkWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Pauses a parked, unclaimed run that waits for an interaction. */
  pauseParkedWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Unpauses a paused run, which waits for its origin session's input again (event `run.resumed`). */
  resumePausedInteraction(options: {
    /** The workflow run. */
    runId: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Whether the run is paused ({@link SqliteControllerStore.pauseParkedWorkflowRun}); false when it does not exist. */
  isWorkflowRunPaused(runId: string): boolean;
  /** Parks the run with error `workflowSourceChanged` (detail cut to 8192 characters). */
  parkWorkflowRunForSourceChange(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** What changed (cut to 8192 characters). */
    detail: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Parks the run with error `effectAmbiguous`; its attempts wait for explicit recovery. */
  parkWorkflowRunForAmbiguousEffect(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /**
   * Ends a nonterminal run as `failed` with `errorCode` and `errorMessage` (event
   * `run.queue_failed`). With `claimToken` the claim must be live and is released; without one
   * only an unclaimed `queued` or `starting` run qualifies. False otherwise.
   */
  failWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The live claim on the run, released by the failure; without it only an unclaimed `queued` or `starting` run can fail. */
    claimToken?: string;
    /** Stored as the run's `errorCode`. */
    errorCode: string;
    /** Stored as the run's `errorMessage`. */
    errorMessage: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Cancels a run; without a token, falls back to {@link SqliteControllerStore.cancelStaleWorkflowRun}. */
  cancelWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The live claim on the run; without it the run is cancelled when unclaimed, or when its claim is expired. */
    claimToken?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Cancel a nonterminal run only when its claim is absent or expired. */
  cancelStaleWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** Who cancels (the lease owner recorded); defaults to `workflow-control`. */
    controlId?: string;
    /** The token of the short system lease taken to cancel; defaults to a random UUID. */
    claimToken?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Deletes a run and everything that belongs to it, under a live claim. */
  deleteWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
  }): boolean;
  /** Queue `done` and the lease released. */
  completeWorkflowRun(options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): boolean;
  /** Always throws, as in the reference (removed with the SQLite cutover). */
  repairCanonicalWorkflowSourceRun(): never;
  /** Always throws, as in the reference (removed with the SQLite cutover). */
  claimLegacyWorkflowSourceRun(): never;
  /** Records an event on a run (actor `host` for `host-…` runners, else `session`). */
  recordRunEvent(options: {
    /** The workflow run. */
    runId: string;
    /** The workflow reference stored with the event. */
    workflowRef: string;
    /** The event type. */
    type: string;
    /** The event's data (default `{}`); the returned record holds this very object. */
    payload?: JsonObject;
    /** Who records it: actor `host` for `host-…`, else `session`. */
    runnerId?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }): RunEventRecord;
  /** Run events after `seq`, oldest first (`limit` defaults to 100). */
  listRunEventsAfter(seq: number, options?: {
    /** At most this many (default 100). */
    limit?: number;
  }): RunEventRecord[];
  /** Applies the run's pending effects of this type, each in its own transaction. */
  settleRunEffect(runId: string, effectType: 'run.park_queue' | 'run.settle_queue'): void;
  /** Sets the run's origin session (upsert). */
  setWorkflowRunOriginSession(runId: string, originSessionId: string): boolean;
}

// <async-store:start> generated by scripts/async-types.js from SqliteControllerStore
/**
 * `store.async`: every method of {@link SqliteControllerStore}, with the same type parameters
 * and arguments, returning a Promise of its result; and `close`, which waits for the queued calls.
 */
export interface AsyncStore {
  /**
   * Creates a controller resource (queued for reconciliation, event `resource.created`), or
   * updates its spec (generation + 1, requeued, event `resource.spec_updated`); an identical
   * spec changes nothing.
   *
   * @throws Error `"controller is invalid"` / `"resource key is invalid"` (1–512 characters).
   */
  readonly putResource: <TSpec, TStatus>(options: {
    /** The controller (1–512 characters). */
    controller: string;
    /** The resource key (1–512 characters). */
    key: string;
    /** The desired state (JSON); a change bumps `generation`. */
    spec: TSpec;
    /** `status.controllerStatus` of a new resource; ignored when it exists. */
    initialStatus: TStatus;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<ControllerResource<TSpec, TStatus>>;
  /** A resource of this store's project, or undefined (always undefined in the global view). */
  readonly getResource: <TSpec = unknown, TStatus = unknown>(ref: ControllerResourceRef) => Promise<ControllerResource<TSpec, TStatus> | undefined>;
  /** A resource by uid, in any project. */
  readonly getResourceByUid: (uid: string) => Promise<ControllerResource | undefined>;
  /** Resources ordered by controller and key; of this project unless global. */
  readonly listResources: <TSpec = unknown, TStatus = unknown>(options?: {
    /** Only this controller's resources. */
    controller?: string;
  }) => Promise<ControllerResource<TSpec, TStatus>[]>;
  /**
   * Replaces the status (and optionally the finalizers) under a live claim; sets
   * `options.claim.resourceVersion` to the new version.
   *
   * @throws {@link ResourceConflictError} when `expectedResourceVersion` is not the current version.
   * @throws {@link ResourceNotFoundError} when the resource does not exist.
   */
  readonly updateStatus: <TStatus>(options: {
    /** The resource. */
    ref: ControllerResourceRef;
    /** The `metadata.resourceVersion` last read; any other current version throws {@link ResourceConflictError}. */
    expectedResourceVersion: number;
    /** The live claim on the resource; its `resourceVersion` is updated in place. */
    claim: ControllerQueueClaim;
    /** The new status, replacing the old one. */
    status: ControllerResourceStatus<TStatus>;
    /** Also replace the finalizers (unique names). */
    finalizers?: string[];
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<ControllerResource<unknown, TStatus>>;
  /** Marks the resource for deletion (once) and requeues it. */
  readonly requestDeletion: (ref: ControllerResourceRef, nowValue?: string) => Promise<ControllerResource>;
  /**
   * Replaces the finalizers.
   *
   * @throws {@link ResourceConflictError} on a version mismatch; Error `"Controller finalizers must be unique"`.
   */
  readonly updateFinalizers: (options: {
    /** The resource. */
    ref: ControllerResourceRef;
    /** The `metadata.resourceVersion` last read; any other current version throws {@link ResourceConflictError}. */
    expectedResourceVersion: number;
    /** The new finalizers (unique names). */
    finalizers: string[];
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<ControllerResource>;
  /**
   * Deletes a resource whose deletion was requested and that has no finalizers left; returns
   * false otherwise.
   */
  readonly deleteResource: (ref: ControllerResourceRef, expectedResourceVersion: number, claim: ControllerQueueClaim) => Promise<boolean>;
  /** Queues the resource for reconciliation at `availableAt` (default now; an earlier time wins). */
  readonly enqueue: (ref: ControllerResourceRef, availableAt?: string) => Promise<void>;
  /**
   * Claims the earliest due, unclaimed (or expired) item of the given controllers; undefined
   * when none is due or `controllers` is empty.
   */
  readonly claimNext: (options: {
    /** The controllers whose queue items may be claimed. */
    controllers: string[];
    /** Who holds the claim (stored on the lease). */
    ownerId: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
    /** Resources not to claim. */
    exclude?: ControllerResourceRef[];
  }) => Promise<ControllerQueueClaim | undefined>;
  /** Extends a live claim by `leaseMs`; updates `claim.expiresAt`. False when the claim is gone. */
  readonly renewClaim: (claim: ControllerQueueClaim, leaseMs: number, nowValue?: string) => Promise<boolean>;
  /**
   * Finishes a claim: removes the queue item unless it was requeued meanwhile, releases the
   * lease, and updates `claim.resourceVersion`. False for a stale claim.
   */
  readonly settleClaim: (claim: ControllerQueueClaim, nowValue?: string) => Promise<boolean>;
  /** Releases a claim and requeues the item at `options.availableAt`, counting an error. */
  readonly requeueClaim: (claim: ControllerQueueClaim, options: QueueRequeueOptions, nowValue?: string) => Promise<boolean>;
  /** The project's queue, earliest first. */
  readonly listQueue: () => Promise<QueueItem[]>;
  /**
   * Reserves an idempotent effect (`pending`) under a live claim, or returns the existing one.
   *
   * @throws {@link EffectRequestConflictError} when `key` was used with another generation, kind or fingerprint.
   */
  readonly reserveEffect: (options: {
    /** The effect's key, unique per resource. */
    key: string;
    /** The resource's `metadata.uid`. */
    resourceUid: string;
    /** The live claim on the resource. */
    claim: ControllerQueueClaim;
    /** The resource generation the effect belongs to. */
    generation: number;
    /** What the effect is (free text). */
    kind: string;
    /** A fingerprint of the request; reusing `key` with another throws {@link EffectRequestConflictError}. */
    requestFingerprint: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<EffectReservation>;
  /** An effect by its resource's uid and its key, or undefined. */
  readonly getEffect: (resourceUid: string, key: string) => Promise<EffectRecord | undefined>;
  /** Records an effect's outcome under a live claim (event `effect.<state>`). */
  readonly updateEffect: (options: {
    /** The resource's `metadata.uid`. */
    resourceUid: string;
    /** The effect's key. */
    key: string;
    /** The live claim on the resource. */
    claim: ControllerQueueClaim;
    /** The effect's outcome. */
    state: EffectRecord['state'];
    /** Where the effect can be found in the outside system. */
    externalRef?: string;
    /** Why the effect failed. */
    error?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<EffectRecord>;
  /** A resource's effects, oldest first. */
  readonly listEffects: (resourceUid: string) => Promise<EffectRecord[]>;
  /**
   * Reserves a child workflow request (`pending`) under a live claim, or returns the existing one.
   *
   * @param options.inputFingerprint 64 hex digits.
   * @throws {@link WorkflowRequestConflictError} when `requestKey` was used with another workflow or input.
   */
  readonly reserveWorkflow: (options: {
    /** The resource's `metadata.uid`. */
    resourceUid: string;
    /** The live claim on the resource. */
    claim: ControllerQueueClaim;
    /** The request's key, unique per resource. */
    requestKey: string;
    /** The workflow to run. */
    workflow: string;
    /** 64 hex digits: the fingerprint of the workflow's input. */
    inputFingerprint: string;
  }) => Promise<WorkflowReservation>;
  /** A child workflow by its resource's uid and its request key, or undefined. */
  readonly getWorkflow: (resourceUid: string, requestKey: string) => Promise<ChildWorkflowRecord | undefined>;
  /** A child workflow by its `requestId` (the id given at reservation), or undefined. */
  readonly getWorkflowByRequestId: (requestId: string) => Promise<ChildWorkflowRecord | undefined>;
  /** Updates a child workflow under a live claim (no event). */
  readonly updateWorkflow: (requestId: string, update: WorkflowRecordUpdate, claim: ControllerQueueClaim) => Promise<ChildWorkflowRecord>;
  /**
   * Settles a child workflow without a claim (the scheduler's report) and bumps its resource
   * (event `workflow_state_changed`).
   *
   * @throws Error `"Scheduler completion must report a settled child state"` for `pending`/`running`.
   */
  readonly completeWorkflow: (requestId: string, update: WorkflowRecordUpdate) => Promise<ChildWorkflowRecord>;
  /** A resource's child workflows. */
  readonly listWorkflows: (resourceUid: string) => Promise<ChildWorkflowRecord[]>;
  /**
   * Records a custom event on a resource; with a claim it must be live and
   * `claim.resourceVersion` is updated.
   */
  readonly recordEvent: (options: {
    /** The controller (1–512 characters). */
    controller: string;
    /** The resource key (1–512 characters). */
    key: string;
    /** A live claim on the resource; its `resourceVersion` is updated in place. Without one the actor is `control`. */
    claim?: ControllerQueueClaim;
    /** The event type. */
    type: string;
    /** The event's data (default `{}`); the returned record holds this very object. */
    payload?: JsonObject;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<ControllerEvent>;
  /** Controller events, newest first (`limit` defaults to 100). */
  readonly listEvents: (options?: {
    /** Only this controller's events. */
    controller?: string;
    /** Only this resource key's events. */
    key?: string;
    /** At most this many (default 100). */
    limit?: number;
  }) => Promise<ControllerEvent[]>;
  /**
   * Queues a new workflow run (status `queued`, event `run.queued`), applying the lineage rules
   * for continuations and restarts.
   *
   * @throws Error `"Workflow run already reserved: <id>"`, `"Invalid workflow run id: <id>"`, the
   *   lineage errors, or SQLite's `UNIQUE constraint failed` when the origin session already has
   *   an active run.
   */
  readonly reserveWorkflowRun: (options: WorkflowRunReservationOptions) => Promise<WorkflowRunQueueRecord>;
  /**
   * Reserves and claims a run in one transaction (`claimed`), or adopts the existing run when it
   * matches the options (`adopted`).
   *
   * @throws Error `"Workflow run preparation conflicts: <id>"` when it exists with other options.
   */
  readonly prepareOrAdoptWorkflowRun: (options: WorkflowRunClaimOptions) => Promise<WorkflowRunPreparationResult>;
  /**
   * Reserves the run if it is missing, then claims it. Like the reference, the execution mode
   * is not forwarded: the run is interactive.
   *
   * @throws Error `"Workflow run could not be claimed: <id>"`.
   */
  readonly enqueueWorkflowRun: (options: WorkflowRunClaimOptions) => Promise<WorkflowRunQueueRecord>;
  /** A run with its queue state, input and current claim (any project), or undefined. */
  readonly getWorkflowRun: (runId: string) => Promise<WorkflowRunQueueRecord | undefined>;
  /** A run as the run list shows it (no input, no claim), or undefined. */
  readonly getWorkflowRunView: (runId: string) => Promise<WorkflowRunQueueViewRecord | undefined>;
  /** A cheap change detector for the run list (all projects). */
  readonly workflowRunListRevision: () => Promise<{ total: number; revision: string }>;
  /** A page of the run list, newest first (all projects). */
  readonly listWorkflowRunViews: (options: {
    /** How many runs to skip, newest first. */
    offset: number;
    /** The page size. */
    limit: number;
  }) => Promise<
    {
    total: number;
    revision: string;
    runs: WorkflowRunQueueViewRecord[];
  }
  >;
  /** The canonical path of the project a run belongs to. */
  readonly workflowRunProjectPath: (runId: string) => Promise<string | undefined>;
  /** Runs newest first; of this project unless global. */
  readonly listWorkflowRuns: (options?: {
    /** Only runs with one of these queue statuses. */
    statuses?: WorkflowRunLaunchStatus[];
    /** Runs to leave out. */
    excludeRunIds?: string[];
    /** At most this many. */
    limit?: number;
  }) => Promise<WorkflowRunQueueRecord[]>;
  /** The newest non-terminal run of an origin session. */
  readonly findSessionReservation: (sessionId: string) => Promise<WorkflowRunQueueRecord | undefined>;
  /** {@link SqliteControllerStore.findSessionReservation}'s run as the run list shows it. */
  readonly findSessionReservationView: (sessionId: string) => Promise<WorkflowRunQueueViewRecord | undefined>;
  /**
   * Claims a run for `runnerId` (queue `starting`, event `lease.claimed`); undefined when it is
   * terminal, waits for a pending interaction, or another owner's lease is live. The returned
   * record carries `claimToken`.
   */
  readonly claimWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<WorkflowRunQueueRecord | undefined>;
  /** Schedule a worker that validates one pending interactive submission. */
  readonly claimWorkflowRunForInteractionValidation: (options: {
    /** The workflow run. */
    runId: string;
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<WorkflowRunQueueRecord | undefined>;
  /** Take a short host claim without scheduling a parked interactive run. */
  readonly claimWorkflowRunForControl: (options: {
    /** The workflow run. */
    runId: string;
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<WorkflowRunQueueRecord | undefined>;
  /**
   * Under a live claim, cancels the earliest expired pending interaction for
   * `targetSessionId` and resumes the run to finish it; false when there is none.
   */
  readonly beginWorkflowRunInteractionTimeout: (options: {
    /** The workflow run. */
    runId: string;
    /** The session whose expired pending interaction times out. */
    targetSessionId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Queue `running` under a live claim (event `run.queue_running`). */
  readonly markWorkflowRunRunning: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Claims the next due run this runner (or session) may take. */
  readonly claimNextWorkflowRun: (options: {
    /** The runner taking the claim: a session id, or `host-…` for a host. */
    runnerId: string;
    /** Only runs this session originated; without it, only headless or already started runs qualify. */
    sessionId?: string;
    /** The token of the new claim, chosen by the caller; only its SHA-256 is stored. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
    /** Runs not to claim. */
    excludeRunIds?: string[];
  }) => Promise<WorkflowRunQueueRecord | undefined>;
  /** Extends a live run claim to `now + leaseMs`; false when `claimToken` does not hold the unexpired lease. */
  readonly renewWorkflowRunClaim: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** How long the claim lasts, in milliseconds from `now`. */
    leaseMs: number;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** True while `claimToken` holds the run's unexpired lease. */
  readonly verifyWorkflowRunClaim: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time the lease must outlast; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** The actor and lease a claim token stands for (`leaseMs` is always 30000). */
  readonly workflowRunAuthority: (
    runId: string,
    claimToken: string,
  ) => Promise<
    | {
        actor: { type: 'session' | 'host'; id: string };
        ownerType: 'session' | 'host';
        ownerId: string;
        token: string;
        generation: number;
        leaseMs: number;
      }
    | undefined
  >;
  /** Queue `parked` and the lease released (event `run.queue_parked`). */
  readonly parkWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Pauses a parked, unclaimed run that waits for an interaction. */
  readonly pauseParkedWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Unpauses a paused run, which waits for its origin session's input again (event `run.resumed`). */
  readonly resumePausedInteraction: (options: {
    /** The workflow run. */
    runId: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Whether the run is paused ({@link SqliteControllerStore.pauseParkedWorkflowRun}); false when it does not exist. */
  readonly isWorkflowRunPaused: (runId: string) => Promise<boolean>;
  /** Parks the run with error `workflowSourceChanged` (detail cut to 8192 characters). */
  readonly parkWorkflowRunForSourceChange: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** What changed (cut to 8192 characters). */
    detail: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Parks the run with error `effectAmbiguous`; its attempts wait for explicit recovery. */
  readonly parkWorkflowRunForAmbiguousEffect: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /**
   * Ends a nonterminal run as `failed` with `errorCode` and `errorMessage` (event
   * `run.queue_failed`). With `claimToken` the claim must be live and is released; without one
   * only an unclaimed `queued` or `starting` run qualifies. False otherwise.
   */
  readonly failWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The live claim on the run, released by the failure; without it only an unclaimed `queued` or `starting` run can fail. */
    claimToken?: string;
    /** Stored as the run's `errorCode`. */
    errorCode: string;
    /** Stored as the run's `errorMessage`. */
    errorMessage: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Cancels a run; without a token, falls back to {@link SqliteControllerStore.cancelStaleWorkflowRun}. */
  readonly cancelWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The live claim on the run; without it the run is cancelled when unclaimed, or when its claim is expired. */
    claimToken?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Cancel a nonterminal run only when its claim is absent or expired. */
  readonly cancelStaleWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** Who cancels (the lease owner recorded); defaults to `workflow-control`. */
    controlId?: string;
    /** The token of the short system lease taken to cancel; defaults to a random UUID. */
    claimToken?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Deletes a run and everything that belongs to it, under a live claim. */
  readonly deleteWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
  }) => Promise<boolean>;
  /** Queue `done` and the lease released. */
  readonly completeWorkflowRun: (options: {
    /** The workflow run. */
    runId: string;
    /** The token of the live claim on the run. */
    claimToken: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<boolean>;
  /** Always throws, as in the reference (removed with the SQLite cutover). */
  readonly repairCanonicalWorkflowSourceRun: () => Promise<never>;
  /** Always throws, as in the reference (removed with the SQLite cutover). */
  readonly claimLegacyWorkflowSourceRun: () => Promise<never>;
  /** Records an event on a run (actor `host` for `host-…` runners, else `session`). */
  readonly recordRunEvent: (options: {
    /** The workflow run. */
    runId: string;
    /** The workflow reference stored with the event. */
    workflowRef: string;
    /** The event type. */
    type: string;
    /** The event's data (default `{}`); the returned record holds this very object. */
    payload?: JsonObject;
    /** Who records it: actor `host` for `host-…`, else `session`. */
    runnerId?: string;
    /** The time of the change: any value `new Date()` accepts; defaults to the current time. */
    now?: string;
  }) => Promise<RunEventRecord>;
  /** Run events after `seq`, oldest first (`limit` defaults to 100). */
  readonly listRunEventsAfter: (seq: number, options?: {
    /** At most this many (default 100). */
    limit?: number;
  }) => Promise<RunEventRecord[]>;
  /** Applies the run's pending effects of this type, each in its own transaction. */
  readonly settleRunEffect: (runId: string, effectType: 'run.park_queue' | 'run.settle_queue') => Promise<void>;
  /** Sets the run's origin session (upsert). */
  readonly setWorkflowRunOriginSession: (runId: string, originSessionId: string) => Promise<boolean>;
  /**
   * Waits for every asynchronous call already queued on this database (those of every store
   * sharing it included), then closes like {@link SqliteControllerStore.close}. Calls made on
   * `store.async` once it has begun reject with `TypeError: The database connection is not
   * open`. Idempotent: later calls return the same Promise. `Symbol.asyncDispose` calls it.
   */
  readonly close: () => Promise<void>;
}
// <async-store:end>

// ---- errors (the reference's src/controllers/errors.ts) ------------------------------------
// Created in the caller's realm, so `instanceof` works (also inside Jest). Every other failure
// is a plain `Error` (or `TypeError`, `RangeError`) with the reference's message, or a
// `SqliteError` for SQLite errors.

/** `Controller resource <controller>/<key> changed during reconciliation`. */
export declare class ResourceConflictError extends Error {
  constructor(controller: string, key: string);
}
/** `Controller resource not found: <controller>/<key>`. */
export declare class ResourceNotFoundError extends Error {
  constructor(controller: string, key: string);
}
/** `Effect key "<key>" was reused with a different request`. */
export declare class EffectRequestConflictError extends Error {
  constructor(key: string);
}
/** `Workflow request key "<key>" was reused with different input`. */
export declare class WorkflowRequestConflictError extends Error {
  constructor(key: string);
}
/**
 * A failure SQLite reported, in better-sqlite3's shape: `name` is `"SqliteError"` (from the
 * prototype), `code` SQLite's extended result code name such as `"SQLITE_CONSTRAINT_UNIQUE"`,
 * and the message SQLite's. This package's class (better-sqlite3 is not loaded), exported so
 * `error instanceof SqliteError` works.
 */
export declare class SqliteError extends Error {
  /** @param code SQLite's extended result code name. */
  constructor(message: string, code: string);
  /** SQLite's extended result code name, such as `"SQLITE_BUSY"` or `"SQLITE_CONSTRAINT_UNIQUE"`. */
  code: string;
}
