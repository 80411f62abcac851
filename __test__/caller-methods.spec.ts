// Where the reference calls a method of a caller's list — `options.statuses.map(() => "?")
// .join(", ")`, `params.push(...options.statuses)`, `exclusions.flatMap(…)`,
// `stmt.get(id, ...options.controllers, …)` — the store looks the method up on the caller's
// value and calls it as the reference does: an array-like without `map` is refused, an own
// `map`, `flatMap` or `Symbol.iterator` runs (and what it returns or throws is what the call
// sees), and V8's messages are the reference's. The expected outcomes were recorded from the
// reference (0.16.1, /work/ref) for the synchronous methods.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

const DIGEST = `sha256:${'a1'.repeat(32)}`;
const reservation = (runId: string, session: string) => ({
  runId,
  workflowName: 'echo',
  workflowSourceRef: 'builtin:echo',
  workflowSource: { kind: 'builtin', id: 'echo', revision: '1' },
  definitionDigest: DIGEST,
  definitionSnapshot: { name: 'echo' },
  input: {},
  runnerId: session,
  originSessionId: session,
});

/** The caller's list kinds, each made around one item. */
const KINDS: Record<string, (item: unknown) => unknown> = {
  arrayLike: (item) => ({ length: 1, 0: item }),
  // `length > 0` compares as JavaScript does: "1" > 0
  arrayLikeTextLength: (item) => ({ length: '1', 0: item }),
  ownMap: (item) => ({ length: 1, 0: item, map: () => ['?'] }),
  ownMapIter: (item) => ({
    length: 1,
    0: item,
    map: () => ({ join: () => '?' }),
    *[Symbol.iterator]() {
      yield item;
    },
  }),
  arrayOwnMap: (item) => Object.assign([item], { map: () => ['?', '?'] }),
  arrayOwnMapThrows: (item) =>
    Object.assign([item], {
      map: () => {
        throw new RangeError('own map');
      },
    }),
  arrayOwnIter: (item) =>
    Object.assign([item], {
      *[Symbol.iterator]() {
        yield typeof item === 'string' ? `${item}-it` : item;
      },
    }),
  arrayOwnFlatMap: (item) => Object.assign([item], { flatMap: () => ['jobs', 'k9'] }),
};

type Store = any;
/** A call site: prepares the store, then calls it with the caller's list. */
const SITES: Record<string, { setup(store: Store): void; call(store: Store, list: (item: unknown) => unknown): unknown }> = {
  'listWorkflowRuns statuses': {
    setup: (store) => store.reserveWorkflowRun(reservation('r1', 's1')),
    call: (store, list) => store.listWorkflowRuns({ statuses: list('queued') }),
  },
  'listWorkflowRuns excludeRunIds': {
    setup: (store) => store.reserveWorkflowRun(reservation('r1', 's1')),
    call: (store, list) => store.listWorkflowRuns({ excludeRunIds: list('r1') }),
  },
  'claimNextWorkflowRun excludeRunIds': {
    setup: (store) => store.reserveWorkflowRun(reservation('r1', 'host-1')),
    call: (store, list) => store.claimNextWorkflowRun({ runnerId: 'host-2', claimToken: 't', leaseMs: 1000, excludeRunIds: list('r1') }),
  },
  'claimNext controllers': {
    setup: (store) => store.putResource({ controller: 'jobs', key: 'k1', spec: {}, initialStatus: {} }),
    call: (store, list) => store.claimNext({ controllers: list('jobs'), ownerId: 'w', leaseMs: 1000 }),
  },
  'claimNext exclude': {
    setup: (store) => store.putResource({ controller: 'jobs', key: 'k1', spec: {}, initialStatus: {} }),
    call: (store, list) => store.claimNext({ controllers: ['jobs'], exclude: list({ controller: 'jobs', key: 'k1' }), ownerId: 'w', leaseMs: 1000 }),
  },
};

const RUNS = '[r1]';
const NONE = '[]';
const CLAIMED = 'claim of jobs/k1';
const TOO_FEW = 'RangeError: Too few parameter values were provided';
const OWN_MAP = 'RangeError: own map';
const SPREAD = 'TypeError: Spread syntax requires ...iterable[Symbol.iterator] to be a function';

// site → kind → the reference's outcome
const EXPECTED: Record<string, Record<string, string>> = {
  'listWorkflowRuns statuses': {
    arrayLike: 'TypeError: options.statuses.map is not a function',
    arrayLikeTextLength: 'TypeError: options.statuses.map is not a function',
    ownMap: SPREAD,
    ownMapIter: RUNS,
    arrayOwnMap: TOO_FEW,
    arrayOwnMapThrows: OWN_MAP,
    arrayOwnIter: NONE,
    arrayOwnFlatMap: RUNS,
  },
  'listWorkflowRuns excludeRunIds': {
    arrayLike: 'TypeError: options.excludeRunIds.map is not a function',
    arrayLikeTextLength: 'TypeError: options.excludeRunIds.map is not a function',
    ownMap: SPREAD,
    ownMapIter: NONE,
    arrayOwnMap: TOO_FEW,
    arrayOwnMapThrows: OWN_MAP,
    arrayOwnIter: RUNS,
    arrayOwnFlatMap: NONE,
  },
  'claimNextWorkflowRun excludeRunIds': {
    arrayLike: 'TypeError: options.excludeRunIds.map is not a function',
    arrayLikeTextLength: 'TypeError: options.excludeRunIds.map is not a function',
    ownMap: SPREAD,
    ownMapIter: 'undefined',
    arrayOwnMap: TOO_FEW,
    arrayOwnMapThrows: OWN_MAP,
    arrayOwnIter: 'undefined',
    arrayOwnFlatMap: 'undefined',
  },
  'claimNext controllers': {
    arrayLike: 'TypeError: options.controllers.map is not a function',
    arrayLikeTextLength: 'TypeError: options.controllers.map is not a function',
    ownMap: 'TypeError: object is not iterable (cannot read property Symbol(Symbol.iterator))',
    ownMapIter: CLAIMED,
    arrayOwnMap: TOO_FEW,
    arrayOwnMapThrows: OWN_MAP,
    arrayOwnIter: 'undefined',
    arrayOwnFlatMap: CLAIMED,
  },
  'claimNext exclude': {
    arrayLike: 'TypeError: exclusions.map is not a function',
    arrayLikeTextLength: 'TypeError: exclusions.map is not a function',
    ownMap: 'TypeError: exclusions.flatMap is not a function',
    ownMapIter: 'TypeError: exclusions.flatMap is not a function',
    arrayOwnMap: 'SqliteError: near "?": syntax error',
    arrayOwnMapThrows: OWN_MAP,
    arrayOwnIter: 'undefined',
    arrayOwnFlatMap: CLAIMED,
  },
};

function outcome(run: () => unknown): string {
  let result: any;
  try {
    result = run();
  } catch (error) {
    const e = error as Error;
    return `${e.constructor.name}: ${e.message}`;
  }
  if (result === undefined) return 'undefined';
  if (Array.isArray(result)) return `[${result.map((run: { runId: string }) => run.runId).join(', ')}]`;
  if (typeof result.token === 'string') return `claim of ${result.controller}/${result.key}`;
  return JSON.stringify(result);
}

let dir: string;
let store: Store;

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-caller-methods-')));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe.each(Object.keys(SITES))('%s', (site) => {
  it.each(Object.keys(KINDS))('with %s', (kind) => {
    SITES[site].setup(store);
    expect(outcome(() => SITES[site].call(store, KINDS[kind]))).toBe(EXPECTED[site][kind]);
  });
});

it("rethrows the very error a caller's own map throws", () => {
  const thrown = new RangeError('mine');
  const statuses = Object.assign(['queued'], {
    map: () => {
      throw thrown;
    },
  });
  let caught: unknown;
  try {
    store.listWorkflowRuns({ statuses });
  } catch (error) {
    caught = error;
  }
  expect(caught).toBe(thrown);
});
