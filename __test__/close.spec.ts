// Shutting a store down with store.async calls in flight (README, "Closing"):
// - `close()` closes at once, as before: queued asynchronous calls then reject with the closed
//   error (synchronous callers see no change).
// - `await store.async.close()` and `Symbol.asyncDispose` wait for every call already queued,
//   then close; calls made once that close has begun reject with the reference's closed error.
// - `Symbol.dispose` is `close()`, so `using` / `await using` work.
// And `SqliteError`, exported so `instanceof` works on SQLite's errors.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore, StateDatabase, SqliteError } = require('../index.js');

const CLOSED = 'The database connection is not open';
const DIGEST = `sha256:${'ab'.repeat(32)}`;

let dir: string;
let file: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-close-'));
  file = path.join(dir, 'state.sqlite');
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function open(options: Record<string, unknown> = {}): any {
  return new SqliteControllerStore(file, { projectPath: dir, ...options });
}

function queuePuts(store: any, count: number): Promise<unknown>[] {
  return Array.from({ length: count }, (_, index) =>
    store.async.putResource({ controller: 'jobs', key: `k${index}`, spec: { index }, initialStatus: {} }),
  );
}

function resourceCount(): number {
  const store = open({ readOnly: true });
  try {
    return store.listResources({ controller: 'jobs' }).length;
  } finally {
    store.close();
  }
}

async function settled(promises: Promise<unknown>[]) {
  const outcomes = await Promise.allSettled(promises);
  return outcomes.map((outcome) =>
    outcome.status === 'fulfilled' ? 'ok' : `${(outcome.reason as Error).name}: ${(outcome.reason as Error).message}`,
  );
}

describe('await store.async.close()', () => {
  it('waits for the 50 calls already queued, then closes', async () => {
    const store = open();
    const puts = queuePuts(store, 50);
    await store.async.close();
    expect(await settled(puts)).toEqual(Array(50).fill('ok'));
    expect(store.state.connection.open).toBe(false);
    expect(resourceCount()).toBe(50);
  });

  it('rejects calls made after it began with the closed error, and is idempotent', async () => {
    const store = open();
    const puts = queuePuts(store, 5);
    const closing = store.async.close();
    const late = store.async.getResource({ controller: 'jobs', key: 'k0' });
    await expect(late).rejects.toThrow(CLOSED);
    await expect(late).rejects.toBeInstanceOf(TypeError);
    expect(store.async.close()).toBe(closing);
    await closing;
    expect(await settled(puts)).toEqual(Array(5).fill('ok'));
    store.close();
    await expect(store.async.close()).resolves.toBeUndefined();
    expect(() => store.getResource({ controller: 'jobs', key: 'k0' })).toThrow(CLOSED);
  });

  it('waits for failing calls too, and resolves', async () => {
    const store = open();
    const outcomes = settled([
      store.async.putResource({ controller: 'jobs', key: '', spec: {}, initialStatus: {} }),
      store.async.putResource({ controller: 'jobs', key: 'ok', spec: {}, initialStatus: {} }),
    ]);
    await store.async.close();
    expect(await outcomes).toEqual(['Error: resource key is invalid', 'ok']);
    expect(resourceCount()).toBe(1);
  });

  it('leaves a shared state database open, after the calls of every store on it', async () => {
    const state = new StateDatabase({ filePath: file });
    const first = new SqliteControllerStore(file, { projectPath: dir, state });
    const second = new SqliteControllerStore(file, { projectPath: dir, state });
    try {
      const puts = [...queuePuts(first, 3), second.async.putResource({ controller: 'jobs', key: 'other', spec: {}, initialStatus: {} })];
      await first.async.close();
      expect(await settled(puts)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(state.connection.open).toBe(true);
      await expect(second.async.listResources({ controller: 'jobs' })).resolves.toHaveLength(4);
    } finally {
      state.close();
    }
  });
});

describe('close()', () => {
  it('keeps its behaviour: closes at once, queued asynchronous calls reject with the closed error', async () => {
    const store = open();
    const puts = queuePuts(store, 3);
    store.close();
    const outcomes = await settled(puts);
    // The first call may already be on its worker thread; close() waits for it (the connection
    // is locked while a call runs), and every call behind it fails.
    expect(outcomes.slice(1)).toEqual([`TypeError: ${CLOSED}`, `TypeError: ${CLOSED}`]);
    expect(outcomes[0] === 'ok' || outcomes[0] === `TypeError: ${CLOSED}`).toBe(true);
    expect(resourceCount()).toBe(outcomes.filter((outcome) => outcome === 'ok').length);
  });
});

describe('disposal', () => {
  // Node 20 and 22 define Symbol.dispose on their main realm only, so Jest's test context lacks
  // it (as Node 18.0–18.17 does; Node 24's V8 has it everywhere); TypeScript's `using` helpers
  // need it. A Jest setup file would define it the way Node does, with the registered symbol the
  // store's methods are keyed by.
  const symbols = Symbol as unknown as { dispose?: symbol; asyncDispose?: symbol };
  beforeAll(() => {
    symbols.dispose ??= Symbol.for('nodejs.dispose');
    symbols.asyncDispose ??= Symbol.for('nodejs.asyncDispose');
  });

  it('Symbol.dispose closes (using)', () => {
    let outside: any;
    {
      using store = open();
      outside = store;
      store.putResource({ controller: 'jobs', key: 'k', spec: {}, initialStatus: {} });
    }
    expect(outside.state.connection.open).toBe(false);
    expect(resourceCount()).toBe(1);
  });

  it('Symbol.asyncDispose waits for queued calls (await using)', async () => {
    let puts: Promise<unknown>[] = [];
    let outside: any;
    {
      await using store = open();
      outside = store;
      puts = queuePuts(store, 20);
    }
    expect(outside.state.connection.open).toBe(false);
    expect(await settled(puts)).toEqual(Array(20).fill('ok'));
    expect(resourceCount()).toBe(20);
  });

  it('uses the well-known symbols, or the registered ones Node falls back to', () => {
    // From Node 24, V8 has Symbol.dispose and Symbol.asyncDispose, in every realm; before, this
    // realm has the registered ones of the beforeAll above, as Node's main realm does.
    const native = Number(process.versions.node.split('.')[0]) >= 24;
    expect(Symbol.dispose === Symbol.for('nodejs.dispose')).toBe(!native);
    expect(Symbol.asyncDispose === Symbol.for('nodejs.asyncDispose')).toBe(!native);
    const store = open();
    try {
      expect(typeof store[Symbol.dispose]).toBe('function');
      expect(typeof store[Symbol.asyncDispose]).toBe('function');
      // Not enumerable own data, not among the 64 methods' names.
      expect(Object.keys(store)).toEqual(['filePath', 'state']);
    } finally {
      store.close();
    }
  });

  it("are Node's own Symbol.dispose and Symbol.asyncDispose in the main realm", () => {
    const script = `const { SqliteControllerStore } = require(${JSON.stringify(path.join(__dirname, '..'))});
      const store = new SqliteControllerStore(${JSON.stringify(file)}, { projectPath: ${JSON.stringify(dir)} });
      const methods = [typeof store[Symbol.dispose], typeof store[Symbol.asyncDispose]];
      store[Symbol.dispose]();
      console.log(JSON.stringify([...methods, store.state.connection.open]));`;
    const output = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual(['function', 'function', false]);
  });
});

describe('SqliteError', () => {
  const run = (runId: string) => ({
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo' },
    input: {},
    runnerId: 'session-1',
    originSessionId: 'session-1',
  });

  it('is exported, and SQLite failures are its instances with name, code and message as before', async () => {
    const store = open();
    try {
      store.reserveWorkflowRun(run('run-1'));
      let error: any;
      try {
        store.reserveWorkflowRun(run('run-2'));
      } catch (thrown) {
        error = thrown;
      }
      expect(error).toBeInstanceOf(SqliteError);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe('SqliteError');
      expect(error.code).toBe('SQLITE_CONSTRAINT_UNIQUE');
      expect(error.message).toMatch(/^UNIQUE constraint failed: /);
      expect(Object.keys(error)).toEqual(['code']);
      expect(Object.prototype.hasOwnProperty.call(error, 'name')).toBe(false);
      await expect(store.async.reserveWorkflowRun(run('run-3'))).rejects.toBeInstanceOf(SqliteError);
      expect(() => store.state.connection.exec('SELECT * FROM missing')).toThrow(SqliteError);
      // The reference's other errors are not SqliteErrors.
      expect(() => store.getWorkflowRun(1)).not.toThrow(SqliteError);
    } finally {
      store.close();
    }
  });
});
