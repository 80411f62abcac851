// Replays one `piw-conformance-trace/1` trace against a `SqliteControllerStore` class, exactly as
// __test__/conformance/README.md defines the steps. Stops at the first difference and throws a
// `TraceFailure` naming the step, the method and a compact diff.
//
// One step loop serves both faces of the store: `replayTrace` calls the synchronous methods,
// `replayTraceAsync` calls `store.async[method]` and compares once its Promise settles (results,
// errors and in-place claim changes alike). The loop is a generator that yields each store call
// and is resumed with its outcome, so the two drivers share every step and every comparison.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { expectMatch, Mismatch } from './compare';
import { Bindings } from './placeholders';
import { hasReentry, Outcome, Reentries } from './reentry';
import { checkBlobHashes, dumpConnection, DumpConnection, dumpDatabase, runSql } from './sqlite';
import { constructorName, decode, Encoded, isErrorLike, show } from './values';

export const TRACE_FORMAT = 'piw-conformance-trace/1';

export type ExpectedError = { name: string; message: string; props?: Encoded };

export type Step =
  | { do: 'open'; store: string; file: string; options: Encoded; mkdirs?: string[]; throws?: ExpectedError }
  | {
      do: 'call';
      store: string;
      method: string;
      args: Encoded[];
      returns?: Encoded;
      throws?: ExpectedError;
      argsAfter?: Encoded[];
      /** The outcomes of the calls made from inside `args` (support/reentry.ts), in order. */
      reentered?: ({ returns: Encoded } | { throws: ExpectedError })[];
    }
  | { do: 'tick'; ms: number }
  | { do: 'close'; store: string }
  | { do: 'sql'; store?: string; file: string; sql: string; params: Encoded[]; changes: number }
  | { do: 'writeFile'; file: string; text: string }
  | { do: 'symlink'; path: string; target: string }
  | { do: 'copyFixture'; from: string; file: string }
  | { do: 'dump'; file: string; tables: Encoded };

export type Trace = {
  format: string;
  name: string;
  description?: string;
  clockStart: number;
  clockStartIso?: string;
  methods: string[];
  steps: Step[];
};

export type StoreInstance = { close(): void } & Record<string, unknown>;
export type StoreClass = new (filePath: string, options?: unknown) => StoreInstance;

/** The frozen clock the replayer drives (the spec backs it with Jest's fake Date). */
export type Clock = {
  freeze(now: number): void;
  set(now: number): void;
  release(): void;
};

export type ReplayOptions = {
  Store: StoreClass;
  clock: Clock;
  /** The conformance directory; `copyFixture.from` is relative to it. */
  conformanceRoot: string;
  /** Keep the temporary directory (its path is added to a failure message). */
  keepDir?: boolean;
  /** A diagnostic: go on past differences and report every differing step at the end. */
  allSteps?: boolean;
  /**
   * Replay on another engine than a local file (the cluster suite): each state file the trace
   * names becomes `target.address(file)`, and the engine SQL and dumps of a step go through
   * `target.connection(address)` instead of opening the file.
   */
  target?: ReplayTarget;
};

/** Where a trace's state files live when they are not local files. */
export type ReplayTarget = {
  /** The address the store opens instead of `file` (the same one for the same file). */
  address(file: string): string;
  /** A better-sqlite3-like connection to `address`, open until the trace ends. */
  connection(address: string): DumpConnection;
};

/** A trace step did not do what the reference did. */
export class TraceFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TraceFailure';
  }
}

/** Methods the trace calls that the store class does not have (constructor/close excluded). */
export function missingMethods(trace: Trace, Store: StoreClass): string[] {
  const proto = Store.prototype as Record<string, unknown>;
  return trace.methods.filter(
    (method) => method !== 'constructor' && method !== 'close' && typeof proto[method] !== 'function',
  );
}

export function loadTrace(file: string): Trace {
  const trace = JSON.parse(fs.readFileSync(file, 'utf8')) as Trace;
  if (trace.format !== TRACE_FORMAT) {
    throw new Error(`${file}: format ${JSON.stringify(trace.format)}, expected ${TRACE_FORMAT}`);
  }
  if (typeof trace.name !== 'string' || !Array.isArray(trace.steps) || !Array.isArray(trace.methods)) {
    throw new Error(`${file}: not a conformance trace (name, methods, steps)`);
  }
  if (!Number.isSafeInteger(trace.clockStart)) throw new Error(`${file}: clockStart is not an integer`);
  if (trace.clockStartIso !== undefined && new Date(trace.clockStart).toISOString() !== trace.clockStartIso) {
    throw new Error(`${file}: clockStart ${trace.clockStart} is not clockStartIso ${trace.clockStartIso}`);
  }
  return trace;
}

function stepTitle(step: Step, index: number): string {
  switch (step.do) {
    case 'call':
      return `step ${index} call ${step.store}.${step.method}`;
    case 'open':
    case 'close':
      return `step ${index} ${step.do} ${step.store}`;
    default:
      return `step ${index} ${step.do}`;
  }
}

function errorSummary(error: unknown): string {
  if (!isErrorLike(error)) return `non-error ${show(error)}`;
  const value = error as Error & Record<string, unknown>;
  const props = Object.keys(value).filter((key) => key !== 'stack' && key !== 'message');
  const extra = props.length === 0 ? '' : ` ${show(Object.fromEntries(props.map((key) => [key, value[key]])))}`;
  return `${constructorName(error)}: ${value.message}${extra}`;
}

function stackHead(error: unknown): string {
  const stack = isErrorLike(error) ? (error as Error).stack : undefined;
  if (typeof stack !== 'string') return '';
  const lines = stack.split('\n').slice(1, 6).join('\n');
  return lines === '' ? '' : `\n${lines}`;
}

/** Compares a thrown value with `throws` ({name, message, props?}), in that walk order. */
export function expectError(expected: ExpectedError, thrown: unknown, bindings: Bindings): void {
  if (!isErrorLike(thrown)) {
    throw new Mismatch('throws', 'expected an Error to be thrown', expected, thrown);
  }
  const error = thrown as Error & Record<string, unknown>;
  const name = constructorName(error);
  if (name !== expected.name) {
    throw new Mismatch('throws.name', `constructor ${name} (${errorSummary(error)})`, expected.name, name);
  }
  expectMatch(expected.message, error.message, bindings, 'throws.message');
  const props: Record<string, unknown> = {};
  for (const key of Object.keys(error)) {
    if (key !== 'stack' && key !== 'message') props[key] = error[key];
  }
  expectMatch(expected.props ?? {}, props, bindings, 'throws.props');
}

type Context = {
  options: ReplayOptions;
  dir: string;
  bindings: Bindings;
  stores: Map<string, StoreInstance>;
  opened: StoreInstance[];
  now: number;
  reentries: Reentries;
};

/** The store face a replay drives. */
export type Face = 'sync' | 'async';

/** A store call the step loop yields to its driver: run it, resume the loop with its outcome. */
type Pending = () => unknown;

type SqlConnection = { open: boolean; prepare(sql: string): { run(...params: unknown[]): { changes: number } } };

/**
 * The open `state.connection` of a store on `file` (the step's own store first). Engine SQL must
 * go through it while a store has the file open: a second SQLite library in the same process
 * (better-sqlite3's) would release the store's POSIX locks and delete its WAL when it closes.
 */
function openConnectionOn(context: Context, file: string, storeId: string | undefined): SqlConnection | undefined {
  const named = storeId === undefined ? undefined : context.stores.get(storeId);
  const candidates = [named, ...context.opened].filter((store) => store !== undefined);
  for (const store of candidates) {
    const state = store.state as { filePath?: string; connection?: SqlConnection } | undefined;
    if (state?.filePath === file && state.connection?.open === true) return state.connection;
  }
  return undefined;
}

/** Replays the whole trace through the synchronous methods; throws a TraceFailure at the first difference. */
export function replayTrace(trace: Trace, options: ReplayOptions): void {
  const steps = replaySteps(trace, options, 'sync');
  let next = steps.next();
  while (!next.done) next = steps.next(settle(next.value));
}

/**
 * Replays the whole trace through `store.async`: each call's Promise settles before its
 * comparison and before the next step; rejects with a TraceFailure at the first difference.
 */
export async function replayTraceAsync(trace: Trace, options: ReplayOptions): Promise<void> {
  const steps = replaySteps(trace, options, 'async');
  let next = steps.next();
  while (!next.done) next = steps.next(await settleAsync(next.value));
}

function settle(pending: Pending): Outcome {
  try {
    return { threw: false, value: pending() };
  } catch (error) {
    return { threw: true, error };
  }
}

async function settleAsync(pending: Pending): Promise<Outcome> {
  try {
    return { threw: false, value: await pending() };
  } catch (error) {
    return { threw: true, error };
  }
}

function* replaySteps(trace: Trace, options: ReplayOptions, face: Face): Generator<Pending, void, Outcome> {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-conformance-')));
  const bindings = new Bindings(dir);
  const stores = new Map<string, StoreInstance>();
  const context: Context = {
    options,
    dir,
    bindings,
    stores,
    opened: [],
    now: trace.clockStart,
    reentries: new Reentries((id) => storeFor({ stores } as Context, id), bindings),
  };
  options.clock.freeze(trace.clockStart);
  let failed = false;
  const failures: string[] = [];
  try {
    for (const [index, step] of trace.steps.entries()) {
      try {
        if (step.do === 'call') yield* callMethod(context, step, face);
        else runStep(context, step);
      } catch (error) {
        failed = true;
        const message = failureMessage(trace, step, index, error, context);
        if (!options.allSteps) throw new TraceFailure(message);
        failures.push(message);
      }
    }
    if (failures.length > 0) {
      throw new TraceFailure(`${failures.length} of ${trace.steps.length} steps differ\n\n${failures.join('\n\n')}`);
    }
  } finally {
    for (const store of context.opened) {
      try {
        store.close();
      } catch {
        // already reported by the trace, or closing twice: cleanup only
      }
    }
    options.clock.release();
    if (!(options.keepDir && failed)) fs.rmSync(dir, { recursive: true, force: true });
  }
}

function failureMessage(trace: Trace, step: Step, index: number, error: unknown, context: Context): string {
  const head = `trace ${trace.name}, ${stepTitle(step, index)} (of ${trace.steps.length}, clock ${new Date(
    context.now,
  ).toISOString()})`;
  const where = context.options.keepDir ? `\n  temp dir kept: ${context.dir}` : '';
  if (error instanceof Mismatch) {
    return `${head}: ${error.reason}\n${error.render()}${dumpRowContext(step, error)}${where}`;
  }
  const message = error instanceof StepError ? error.message : `replayer error: ${errorSummary(error)}${stackHead(error)}`;
  return `${head}: ${message}${where}`;
}

/** For a dump difference inside a row, both rows in full (they say which row it is). */
function dumpRowContext(step: Step, mismatch: Mismatch): string {
  if (step.do !== 'dump') return '';
  const match = /^tables(?:\.(\w+)|\[("(?:[^"\\]|\\.)*")\])\[(\d+)\]/.exec(mismatch.at);
  if (match === null || mismatch.context === undefined) return '';
  const table = match[1] ?? JSON.parse(match[2]);
  const row = Number(match[3]);
  const expectedRows = (step.tables as Record<string, Encoded[]>)[table];
  const actualRows = (mismatch.context as Record<string, unknown[]>)[table];
  return (
    `\n  expected row: ${JSON.stringify(expectedRows?.[row]) ?? 'none'}` +
    `\n  actual row:   ${show(actualRows?.[row], 1200)}`
  );
}

/** A step failure that is not a value difference (already phrased for the reader). */
class StepError extends Error {}

function fail(message: string): never {
  throw new StepError(message);
}

function storeFor(context: Context, id: string): StoreInstance {
  const store = context.stores.get(id);
  if (store === undefined) fail(`store id ${JSON.stringify(id)} was never opened (trace error)`);
  return store;
}

function runStep(context: Context, step: Step): void {
  const { bindings } = context;
  switch (step.do) {
    case 'open':
      return openStore(context, step);
    case 'call':
      fail('a call step runs through the step loop (replayer error)');
      break;
    case 'tick':
      if (!(Number.isSafeInteger(step.ms) && step.ms >= 0)) fail(`tick by ${step.ms} ms (trace error)`);
      context.now += step.ms;
      context.options.clock.set(context.now);
      return;
    case 'close':
      try {
        storeFor(context, step.store).close();
      } catch (error) {
        fail(`close() threw ${errorSummary(error)}${stackHead(error)}`);
      }
      return;
    case 'sql': {
      const target = context.options.target;
      const file = target === undefined ? bindings.substitute(step.file) : target.address(bindings.substitute(step.file));
      const params = decode(step.params, bindings) as unknown[];
      let changes: number;
      try {
        const connection = openConnectionOn(context, file, step.store);
        const sql = bindings.substitute(step.sql);
        if (connection !== undefined) changes = connection.prepare(sql).run(...params).changes;
        else if (target !== undefined) changes = target.connection(file).prepare(sql).run(...params).changes;
        else changes = runSql(file, sql, params);
      } catch (error) {
        fail(`engine SQL failed: ${errorSummary(error)}\n  sql: ${step.sql}\n  params: ${show(params)}`);
      }
      if (changes !== step.changes) {
        throw new Mismatch('changes', `engine SQL changed ${changes} rows: ${step.sql.slice(0, 200)}`, step.changes, changes);
      }
      return;
    }
    case 'writeFile':
      fs.writeFileSync(bindings.substitute(step.file), bindings.substitute(step.text), 'utf8');
      return;
    case 'symlink':
      fs.symlinkSync(bindings.substitute(step.target), bindings.substitute(step.path));
      return;
    case 'copyFixture': {
      // Copy the bytes, not the mode: the recorded fixture may be read-only on disk and the trace
      // opens the copy read-write.
      const from = path.resolve(context.options.conformanceRoot, step.from);
      fs.writeFileSync(bindings.substitute(step.file), fs.readFileSync(from));
      return;
    }
    case 'dump': {
      const target = context.options.target;
      const file = bindings.substitute(step.file);
      if (target === undefined && !fs.existsSync(file)) fail(`dump: ${file} does not exist`);
      const actual = target === undefined ? dumpDatabase(file) : dumpConnection(target.connection(target.address(file)));
      try {
        expectMatch(step.tables, actual, bindings, 'tables');
        checkBlobHashes(actual);
      } catch (error) {
        if (error instanceof Mismatch) error.context = actual;
        throw error;
      }
      return;
    }
    default:
      fail(`unknown step kind ${JSON.stringify((step as { do: unknown }).do)} (trace error)`);
  }
}

function openStore(context: Context, step: Extract<Step, { do: 'open' }>): void {
  const { bindings } = context;
  for (const dir of step.mkdirs ?? []) fs.mkdirSync(bindings.substitute(dir), { recursive: true });
  const target = context.options.target;
  const file = target === undefined ? bindings.substitute(step.file) : target.address(bindings.substitute(step.file));
  const options = decode(step.options, bindings);
  let store: StoreInstance;
  try {
    store = new context.options.Store(file, options);
  } catch (error) {
    if (step.throws === undefined) {
      fail(`constructor threw ${errorSummary(error)}${stackHead(error)}`);
    }
    expectError(step.throws, error, bindings);
    return;
  }
  context.opened.push(store);
  if (step.throws !== undefined) {
    fail(`constructor returned, expected it to throw ${step.throws.name}: ${step.throws.message}`);
  }
  context.stores.set(step.store, store);
}

function* callMethod(
  context: Context,
  step: Extract<Step, { do: 'call' }>,
  face: Face,
): Generator<Pending, void, Outcome> {
  const { bindings, reentries } = context;
  const store = storeFor(context, step.store);
  const reenters = hasReentry(step.args);
  const args = decode(step.args, bindings, reenters ? reentries.hooks : undefined) as unknown[];
  const methods = face === 'sync' ? store : (store.async as Record<string, unknown> | undefined);
  const method = methods?.[step.method];
  if (typeof method !== 'function') fail(`the store has no ${face === 'sync' ? '' : 'async '}method ${step.method}`);
  reentries.take();
  const outcome: Outcome = yield () => method.apply(methods, args);
  const nested = reentries.take();
  if (reenters || step.reentered !== undefined) expectReentered(step.reentered ?? [], nested, bindings);
  if (step.throws !== undefined) {
    if (!outcome.threw) {
      throw new Mismatch('throws', 'expected the call to throw, it returned', step.throws, outcome.value);
    }
    expectError(step.throws, outcome.error, bindings);
  } else {
    if (outcome.threw) {
      fail(
        `expected a result, but the call threw ${errorSummary(outcome.error)}${stackHead(outcome.error)}\n` +
          `  expected returns: ${JSON.stringify(step.returns)?.slice(0, 400)}`,
      );
    }
    if (!('returns' in step)) fail('call step has neither returns nor throws (trace error)');
    expectMatch(step.returns as Encoded, outcome.value, bindings, 'returns');
  }
  // An argument that calls the store when read is not read again to compare it.
  if (reenters) return;
  if (step.argsAfter !== undefined) {
    expectMatch(step.argsAfter, args, bindings, 'argsAfter');
  } else {
    try {
      expectMatch(step.args, args, bindings, 'args');
    } catch (error) {
      if (!(error instanceof Mismatch)) throw error;
      throw new Mismatch(error.at, `argument changed in place: ${error.reason}`, error.expected, error.actual);
    }
  }
}

/** The nested calls' outcomes against the step's `reentered` list. */
function expectReentered(
  expected: NonNullable<Extract<Step, { do: 'call' }>['reentered']>,
  actual: Outcome[],
  bindings: Bindings,
): void {
  if (expected.length !== actual.length) {
    throw new Mismatch(
      'reentered',
      `${actual.length} nested calls, the reference made ${expected.length}`,
      expected,
      actual.map((outcome) => (outcome.threw ? { threw: errorSummary(outcome.error) } : { returned: outcome.value })),
    );
  }
  expected.forEach((want, index) => {
    const got = actual[index];
    const at = `reentered[${index}]`;
    if ('throws' in want) {
      if (!got.threw) throw new Mismatch(at, 'expected the nested call to throw, it returned', want.throws, got.value);
      expectError(want.throws, got.error, bindings);
    } else {
      if (got.threw) {
        throw new Mismatch(at, `the nested call threw ${errorSummary(got.error)}`, want.returns, undefined);
      }
      expectMatch(want.returns, got.value, bindings, at);
    }
  });
}
