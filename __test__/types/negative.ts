// The checks in assignments.ts have teeth: each line below is a difference they must catch.
// `@ts-expect-error` fails the compile when its line does *not* error.
import type * as Ours from '../../index';
import type * as Ref from './reference';

type Same<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
function same<T extends true>(): T | void {}
declare function value<T>(): T;

// @ts-expect-error a missing optional field
same<Same<Ours.EffectRecord, Omit<Ref.EffectRecord, 'error'>>>();
// @ts-expect-error an extra optional field (mutual assignability alone would miss it)
same<Same<Ours.EffectRecord, Ref.EffectRecord & { extra?: string }>>();
// @ts-expect-error `any` where the reference has `unknown`
same<Same<Ours.ControllerResource<any, any>, Ref.ControllerResource>>();
// @ts-expect-error `null` where the reference has an absent field
same<Same<Ours.QueueItem, Omit<Ref.QueueItem, 'claimExpiresAt'> & { claimExpiresAt: string | null }>>();
// @ts-expect-error a missing method
same<Same<keyof Ours.SqliteControllerStore, Exclude<keyof Ref.SqliteControllerStore, 'close'>>>();
// @ts-expect-error a changed generic default
same<Same<Ours.SqliteControllerStore['getResource'], <TSpec = string, TStatus = unknown>(ref: Ref.ControllerResourceRef) => Ref.ControllerResource<TSpec, TStatus> | undefined>>();
// @ts-expect-error the documented difference: our connection is only a subset of better-sqlite3's
export const connection: Ref.StateDatabase['connection'] = value<Ours.StateConnection>();
