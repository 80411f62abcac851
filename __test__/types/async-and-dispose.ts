// Type-level test of this package's additions (compiled with the rest of __test__/types):
// `store.async` keeps every method's generics and arguments and resolves to its result, and a
// store is Disposable / AsyncDisposable (`using`, `await using`). Compiles only when they hold.
import type * as Ours from '../../index';
import { SqliteError } from '../../index';

type Same<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
function same<T extends true>(): T | void {}
declare function value<T>(): T;

type Spec = { image: string; replicas: number };
type Status = { phase: 'new' | 'ready' };
type Store = Ours.SqliteControllerStore;
type Async = Store['async'];
type Method = Exclude<keyof Async, 'close'>;

// Exactly the store's methods, plus `close`.
same<Same<Method, Exclude<keyof Store, 'filePath' | 'state' | 'async' | 'close' | typeof Symbol.dispose | typeof Symbol.asyncDispose>>>();
// Every method: the same parameters, a Promise of the same result (generics at their defaults).
type Promised = {
  [K in Method]: Same<Parameters<Async[K]>, Parameters<Store[K]>> extends true
    ? Same<ReturnType<Async[K]>, Promise<ReturnType<Store[K]>>>
    : false;
};
same<Same<Promised[Method], true>>();
same<Same<Async['close'], () => Promise<void>>>();

declare const store: Store;
const ref = { controller: 'deployments', key: 'web' };
export async function generics() {
  // Explicit type arguments compile (TS2558 with the old mapped type) and reach the result.
  const read = await store.async.getResource<Spec, Status>(ref);
  same<Same<typeof read, Ours.ControllerResource<Spec, Status> | undefined>>();
  const listed = await store.async.listResources<Spec, Status>({ controller: 'deployments' });
  same<Same<typeof listed, Ours.ControllerResource<Spec, Status>[]>>();
  // Inferred type arguments too.
  const created = await store.async.putResource({ ...ref, spec: { image: 'web:1', replicas: 2 }, initialStatus: { phase: 'new' as const } });
  same<Same<typeof created, Ours.ControllerResource<{ image: string; replicas: number }, { phase: 'new' }>>>();
  const updated = await store.async.updateStatus<Status>({
    ref,
    expectedResourceVersion: 1,
    claim: value<Ours.ControllerQueueClaim>(),
    status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
  });
  same<Same<typeof updated, Ours.ControllerResource<unknown, Status>>>();
  // The same as the synchronous method's, for both.
  same<Same<ReturnType<typeof store.async.getResource<Spec, Status>>, Promise<ReturnType<typeof store.getResource<Spec, Status>>>>>();
  // @ts-expect-error arguments are checked as the synchronous method checks them
  await store.async.getResource<Spec, Status>({ controller: 'deployments' });
  // @ts-expect-error the methods cannot be replaced
  // eslint-disable-next-line no-self-assign -- a compile-time check that the slot is read-only; never run
  store.async.getResource = store.async.getResource;
}

// Disposal: `using` and `await using` (TS2850 before), and the members' types.
declare function open(): Store;
export function syncBlock() {
  using disposable = open();
  return disposable.getResource(ref)?.metadata.uid;
}
export async function asyncBlock() {
  await using disposable = open();
  return (await disposable.async.getResource(ref))?.metadata.uid;
}
same<Same<Store[typeof Symbol.dispose], () => void>>();
same<Same<Store[typeof Symbol.asyncDispose], () => Promise<void>>>();
export const disposable: Disposable = value<Store>();
export const asyncDisposable: AsyncDisposable = value<Store>();

// SqliteError is exported, with its `code`.
export function sqliteCode(error: unknown): string | undefined {
  return error instanceof SqliteError ? error.code : undefined;
}
