// Type-level test: index.d.ts declares the reference's public types (./reference.d.ts). Compiled
// with `tsc --noEmit -p __test__/types` by __test__/types.spec.ts; it passes when it compiles.
//
// Three kinds of checks, from strongest to weakest:
//   Same<A, B>      TypeScript's own identity relation (the `<G>() => G extends X` trick): no
//                   extra optional field, no `any`, no widened literal slips through.
//   two-way         a value of our type assigned to the reference's, and back.
//   one-way         only where a difference is intended and documented in the README
//                   ("Differences from the reference"): `state.connection`.
import type * as Ours from '../../index';
import type * as Ref from './reference';

type Same<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
/** Compiles only when `T` is `true`. */
function same<T extends true>(): T | void {}
/** The public surface of a class instance type (private members are nominal, so they go). */
type Public<T> = { [K in keyof T]: T[K] };
declare function value<T>(): T;

// ---- plain types: identical, and assignable both ways -------------------------------------
type Spec = { image: string; replicas: number };
type Status = { phase: 'new' | 'ready' };

same<Same<Ours.JsonPrimitive, Ref.JsonPrimitive>>();
same<Same<Ours.JsonValue, Ref.JsonValue>>();
same<Same<Ours.JsonObject, Ref.JsonObject>>();
same<Same<Ours.ControllerConditionStatus, Ref.ControllerConditionStatus>>();
same<Same<Ours.ControllerCondition, Ref.ControllerCondition>>();
same<Same<Ours.ChildWorkflowState, Ref.ChildWorkflowState>>();
same<Same<Ours.ChildWorkflowReference, Ref.ChildWorkflowReference>>();
same<Same<Ours.ControllerResourceStatus<Status>, Ref.ControllerResourceStatus<Status>>>();
same<Same<Ours.ControllerResource, Ref.ControllerResource>>();
same<Same<Ours.ControllerResource<Spec, Status>, Ref.ControllerResource<Spec, Status>>>();
same<Same<Ours.ControllerResourceRef, Ref.ControllerResourceRef>>();
same<Same<Ours.EffectState, Ref.EffectState>>();
same<Same<Ours.EffectRecord, Ref.EffectRecord>>();
same<Same<Ours.ChildWorkflowRecord, Ref.ChildWorkflowRecord>>();
same<Same<Ours.ControllerQueueClaim, Ref.ControllerQueueClaim>>();
same<Same<Ours.ControllerEvent, Ref.ControllerEvent>>();
same<Same<Ours.QueueRequeueOptions, Ref.QueueRequeueOptions>>();
same<Same<Ours.QueueItem, Ref.QueueItem>>();
same<Same<Ours.EffectReservation, Ref.EffectReservation>>();
same<Same<Ours.WorkflowReservation, Ref.WorkflowReservation>>();
same<Same<Ours.WorkflowRecordUpdate, Ref.WorkflowRecordUpdate>>();
same<Same<Ours.WorkflowRunLaunchStatus, Ref.WorkflowRunLaunchStatus>>();
same<Same<Ours.WorkflowRunReservationOptions, Ref.WorkflowRunReservationOptions>>();
same<Same<Ours.WorkflowRunClaimOptions, Ref.WorkflowRunClaimOptions>>();
same<Same<Ours.WorkflowRunQueueViewRecord, Ref.WorkflowRunQueueViewRecord>>();
same<Same<Ours.WorkflowRunQueueRecord, Ref.WorkflowRunQueueRecord>>();
same<Same<Ours.WorkflowRunPreparationResult, Ref.WorkflowRunPreparationResult>>();
same<Same<Ours.RunEventRecord, Ref.RunEventRecord>>();
same<Same<Ours.StateDatabaseMode, Ref.StateDatabaseMode>>();
same<Same<Omit<Ours.OpenStateDatabaseOptions, 'cluster'>, Ref.OpenStateDatabaseOptions>>();
// This package's addition (docs/cluster.md): the timeouts of a `dqlite://` address.
same<Same<Ours.OpenStateDatabaseOptions['cluster'], Ours.ClusterOptions | undefined>>();
same<Same<Ours.BlobRecord, Ref.BlobRecord>>();

export const records = {
  resourceToRef: value<Ours.ControllerResource<Spec, Status>>() satisfies Ref.ControllerResource<Spec, Status>,
  resourceFromRef: value<Ref.ControllerResource<Spec, Status>>() satisfies Ours.ControllerResource<Spec, Status>,
  claimToRef: value<Ours.ControllerQueueClaim>() satisfies Ref.ControllerQueueClaim,
  claimFromRef: value<Ref.ControllerQueueClaim>() satisfies Ours.ControllerQueueClaim,
  effectToRef: value<Ours.EffectRecord>() satisfies Ref.EffectRecord,
  effectFromRef: value<Ref.EffectRecord>() satisfies Ours.EffectRecord,
  workflowToRef: value<Ours.ChildWorkflowRecord>() satisfies Ref.ChildWorkflowRecord,
  workflowFromRef: value<Ref.ChildWorkflowRecord>() satisfies Ours.ChildWorkflowRecord,
  eventToRef: value<Ours.ControllerEvent>() satisfies Ref.ControllerEvent,
  eventFromRef: value<Ref.ControllerEvent>() satisfies Ours.ControllerEvent,
  queueItemToRef: value<Ours.QueueItem>() satisfies Ref.QueueItem,
  queueItemFromRef: value<Ref.QueueItem>() satisfies Ours.QueueItem,
  runToRef: value<Ours.WorkflowRunQueueRecord>() satisfies Ref.WorkflowRunQueueRecord,
  runFromRef: value<Ref.WorkflowRunQueueRecord>() satisfies Ours.WorkflowRunQueueRecord,
  viewToRef: value<Ours.WorkflowRunQueueViewRecord>() satisfies Ref.WorkflowRunQueueViewRecord,
  viewFromRef: value<Ref.WorkflowRunQueueViewRecord>() satisfies Ours.WorkflowRunQueueViewRecord,
  preparationToRef: value<Ours.WorkflowRunPreparationResult>() satisfies Ref.WorkflowRunPreparationResult,
  preparationFromRef: value<Ref.WorkflowRunPreparationResult>() satisfies Ours.WorkflowRunPreparationResult,
  runEventToRef: value<Ours.RunEventRecord>() satisfies Ref.RunEventRecord,
  runEventFromRef: value<Ref.RunEventRecord>() satisfies Ours.RunEventRecord,
  reservationToRef: value<Ours.WorkflowRunReservationOptions>() satisfies Ref.WorkflowRunReservationOptions,
  reservationFromRef: value<Ref.WorkflowRunReservationOptions>() satisfies Ours.WorkflowRunReservationOptions,
  claimOptionsToRef: value<Ours.WorkflowRunClaimOptions>() satisfies Ref.WorkflowRunClaimOptions,
  claimOptionsFromRef: value<Ref.WorkflowRunClaimOptions>() satisfies Ours.WorkflowRunClaimOptions,
  blobToRef: value<Ours.BlobRecord>() satisfies Ref.BlobRecord,
  blobFromRef: value<Ref.BlobRecord>() satisfies Ours.BlobRecord,
};

// ---- SqliteControllerStore: exactly the reference's 64 public methods ----------------------
// (types.spec.ts checks the same names, in order, against the class at run time and the core's
// method table.)
type OurStore = Ours.SqliteControllerStore;
type RefStore = Ref.SqliteControllerStore;
type Methods = Exclude<keyof RefStore, 'filePath' | 'state'>;
// This package's additions: `async` (every method as a Promise, see AsyncStore) and disposal
// (both checked in async-and-dispose.ts).
type Additions = 'async' | typeof Symbol.dispose | typeof Symbol.asyncDispose;
same<Same<keyof OurStore, keyof RefStore | Additions>>();
// Every method, generics included, is the reference's method.
same<Same<Pick<OurStore, Methods | 'filePath'>, Pick<RefStore, Methods | 'filePath'>>>();
same<Same<OurStore['putResource'], RefStore['putResource']>>();
same<Same<OurStore['getResource'], RefStore['getResource']>>();
same<Same<OurStore['listResources'], RefStore['listResources']>>();
same<Same<OurStore['updateStatus'], RefStore['updateStatus']>>();

// Code written against the reference's ControllerStore interface takes our store as it is.
export const asControllerStore: Ref.ControllerStore = value<OurStore>();
export const asOurControllerStore: Ours.ControllerStore = value<Ref.ControllerStore>();
same<Same<Ours.ControllerStore, Ref.ControllerStore>>();
// The public surface, both ways, apart from `state` (below) and the additions.
export const storeToRef: Omit<Public<RefStore>, 'state'> = value<OurStore>();
export const storeFromRef: Omit<Public<OurStore>, 'state' | Additions> = value<RefStore>();
// `store.async.m(...)` takes m's arguments and resolves to m's result.
same<Same<Parameters<OurStore['async']['listEvents']>, Parameters<RefStore['listEvents']>>>();
same<Same<ReturnType<OurStore['async']['listEvents']>, Promise<ReturnType<RefStore['listEvents']>>>>();

// Generic methods keep their inference.
declare const store: OurStore;
const created = store.putResource({ controller: 'c', key: 'k', spec: { image: 'x', replicas: 1 }, initialStatus: { phase: 'new' as const } });
same<Same<typeof created, Ours.ControllerResource<{ image: string; replicas: number }, { phase: 'new' }>>>();
same<Same<ReturnType<typeof store.getResource<Spec, Status>>, Ref.ControllerResource<Spec, Status> | undefined>>();
same<Same<ReturnType<typeof store.listResources>, Ref.ControllerResource[]>>();

// Constructors: same parameters except that `options.state` is this package's StateDatabase.
type OurOptions = NonNullable<ConstructorParameters<typeof Ours.SqliteControllerStore>[1]>;
type RefOptions = NonNullable<ConstructorParameters<typeof Ref.SqliteControllerStore>[1]>;
same<Same<ConstructorParameters<typeof Ours.SqliteControllerStore>[0], ConstructorParameters<typeof Ref.SqliteControllerStore>[0]>>();
same<Same<Omit<OurOptions, 'state' | 'asyncCallSites' | 'cluster'>, Omit<RefOptions, 'state'>>>();
// This package's addition (README, "Not blocking the event loop").
same<Same<OurOptions['asyncCallSites'], boolean | undefined>>();
same<Same<OurOptions['cluster'], Ours.ClusterOptions | undefined>>();
same<Same<OurOptions['state'], Ours.StateDatabase | undefined>>();
same<Same<ConstructorParameters<typeof Ours.StateDatabase>, [options?: Ours.OpenStateDatabaseOptions]>>();
same<Same<ConstructorParameters<typeof Ref.StateDatabase>, [options?: Ref.OpenStateDatabaseOptions]>>();
export const storeInstance: OurStore = new (value<typeof Ours.SqliteControllerStore>())('/tmp/state.sqlite', {
  projectPath: '/tmp',
  readOnly: false,
  global: false,
});

// ---- StateDatabase: the reference's, except `connection` ----------------------------------
type OurState = Ours.StateDatabase;
type RefState = Ref.StateDatabase;
// `clusterClock` is this package's addition (docs/cluster.md, "Clocks").
same<Same<Exclude<keyof OurState, 'clusterClock'>, keyof RefState>>();
same<Same<Omit<OurState, 'connection' | 'clusterClock'>, Omit<Public<RefState>, 'connection'>>>();
same<Same<OurState['clusterClock'], Ours.ClusterClockReading | null>>();
same<Same<OurStore['state'], OurState>>();
// `connection` is a subset of better-sqlite3's Database over the store's own SQLite connection
// (README, "Differences from the reference"). It declares nothing better-sqlite3 does not have,
// and its members have better-sqlite3's types (the generic `prepare` and the methods returning
// `this` are covered by __test__/connection-types.spec.ts).
type Db = RefState['connection'];
type DbStatement = import('better-sqlite3').Statement<[string], { n: number }>;
type OurStatement = Ours.StateStatement<[string], { n: number }>;
same<Same<Exclude<keyof Ours.StateConnection, keyof Db>, never>>();
same<Same<Exclude<keyof OurStatement, keyof DbStatement>, never>>();
same<Same<Pick<Ours.StateConnection, 'name' | 'open' | 'readonly' | 'memory' | 'inTransaction'>, Pick<Db, 'name' | 'open' | 'readonly' | 'memory' | 'inTransaction'>>>();
same<Same<Pick<OurStatement, 'source' | 'reader' | 'readonly' | 'busy'>, Pick<DbStatement, 'source' | 'reader' | 'readonly' | 'busy'>>>();
export const connectionMembers: Pick<Ours.StateConnection, 'transaction' | 'pragma'> = value<Db>();
export const statementMembers: Pick<OurStatement, 'run' | 'get' | 'all' | 'iterate' | 'columns'> = value<DbStatement>();
export const statementMembersBack: Pick<DbStatement, 'run' | 'get' | 'all' | 'iterate' | 'columns'> = value<OurStatement>();

// ---- functions and error classes ----------------------------------------------------------
same<Same<typeof Ours.workflowStatePath, typeof Ref.workflowStatePath>>();
same<Same<ConstructorParameters<typeof Ours.ResourceConflictError>, ConstructorParameters<typeof Ref.ResourceConflictError>>>();
same<Same<ConstructorParameters<typeof Ours.ResourceNotFoundError>, ConstructorParameters<typeof Ref.ResourceNotFoundError>>>();
same<Same<ConstructorParameters<typeof Ours.EffectRequestConflictError>, ConstructorParameters<typeof Ref.EffectRequestConflictError>>>();
same<Same<ConstructorParameters<typeof Ours.WorkflowRequestConflictError>, ConstructorParameters<typeof Ref.WorkflowRequestConflictError>>>();
same<Same<Ours.ResourceConflictError, Ref.ResourceConflictError>>();
same<Same<Ours.ResourceNotFoundError, Ref.ResourceNotFoundError>>();
same<Same<Ours.EffectRequestConflictError, Ref.EffectRequestConflictError>>();
same<Same<Ours.WorkflowRequestConflictError, Ref.WorkflowRequestConflictError>>();
export const errors: Ref.ResourceConflictError[] = [value<Ours.ResourceConflictError>()];
export const ourErrors: Ours.ResourceNotFoundError[] = [value<Ref.ResourceNotFoundError>()];
