// Store calls made from inside another call's argument, as the re-entrancy traces record them
// (__test__/conformance-reentrancy/README.md): `{"$reenter": {via, call, value, rethrow?}}` in a
// call's `args` stands for an argument that, when the store reads or converts it, calls
// `stores[call.store][call.method](...call.args)` synchronously and then answers `value`:
//
// - `getter`  (a property value only): an accessor property; the call runs on every read;
// - `toString` / `valueOf` / `toJSON`: an object with that own method;
// - `proxy`: a Proxy of `value` whose `get` trap makes the call for every string key read.
//
// With `rethrow`, an error the nested call threw is thrown from the getter, method or trap
// instead of answering `value`. Every nested call's outcome is logged in order; the replayer
// compares the log with the step's `reentered` list once the outer call has settled.

import { Bindings } from './placeholders';
import { decode, DecodeHooks, Encoded } from './values';

export type Outcome = { threw: false; value: unknown } | { threw: true; error: unknown };

export type ReenterVia = 'getter' | 'toString' | 'valueOf' | 'toJSON' | 'proxy';

export type ReenterSpec = {
  via: ReenterVia;
  call: { store: string; method: string; args: Encoded[] };
  value: Encoded;
  rethrow?: boolean;
};

/** Whether an encoded value holds a `$reenter` tag anywhere. */
export function hasReentry(value: Encoded): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(hasReentry);
  return Object.entries(value).some(([key, item]) => key === '$reenter' || hasReentry(item));
}

/** The nested calls of one trace: the hooks `decode` uses, and the log of their outcomes. */
export class Reentries {
  outcomes: Outcome[] = [];

  constructor(
    private readonly storeOf: (id: string) => Record<string, unknown>,
    private readonly bindings: Bindings,
  ) {}

  readonly hooks: DecodeHooks = {
    reenter: (payload) => {
      const spec = payload as unknown as ReenterSpec;
      switch (spec.via) {
        case 'getter':
          return { getter: () => this.answer(spec) };
        case 'toString':
        case 'valueOf':
        case 'toJSON': {
          const answer = () => this.answer(spec);
          return { value: { [spec.via]: answer } };
        }
        case 'proxy': {
          const target = decode(spec.value, this.bindings, this.hooks) as object;
          const nested = () => this.answer(spec);
          return {
            value: new Proxy(target, {
              get(object, key, receiver) {
                if (typeof key === 'string') nested();
                return Reflect.get(object, key, receiver);
              },
            }),
          };
        }
        default:
          throw new Error(`unknown $reenter via ${JSON.stringify(spec.via)} (trace error)`);
      }
    },
  };

  /** Takes the outcomes logged so far (the outer call's). */
  take(): Outcome[] {
    const taken = this.outcomes;
    this.outcomes = [];
    return taken;
  }

  /** Runs the nested call, logs its outcome and answers `value` (or rethrows). */
  private answer(spec: ReenterSpec): unknown {
    const outcome = this.run(spec);
    this.outcomes.push(outcome);
    if (outcome.threw && spec.rethrow === true) throw outcome.error;
    return spec.via === 'proxy' ? undefined : decode(spec.value, this.bindings, this.hooks);
  }

  private run(spec: ReenterSpec): Outcome {
    const store = this.storeOf(spec.call.store);
    const method = store[spec.call.method];
    if (typeof method !== 'function') {
      return { threw: true, error: new Error(`the store has no method ${spec.call.method}`) };
    }
    try {
      const args = decode(spec.call.args, this.bindings, this.hooks) as unknown[];
      return { threw: false, value: method.apply(store, args) };
    } catch (error) {
      return { threw: true, error };
    }
  }
}
