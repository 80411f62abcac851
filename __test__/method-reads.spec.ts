// A method whose row in src/methods/table.rs says it only reads (`Access::Read`) changes nothing:
// on a cluster such a method runs again after a COMMIT whose acknowledgement was lost
// (src/sql/retry.rs), which is safe only if it wrote nothing. Every public and hostile trace is
// replayed with each call of such a method checked against its connection's total_changes(),
// and each of them is called by some trace, so a write marked as a read fails here.

import { assertUtc, jestClock } from './support/clock';
import { conformancePaths } from './support/paths';
import { replayTrace, StoreClass, StoreInstance } from './support/replayer';
import { traceEntries } from './support/traces';

assertUtc();

const { SqliteControllerStore } = require('../index.js') as { SqliteControllerStore: StoreClass };
const { binding } = require('../lib/native.js');

const table: { name: string; reads: boolean }[] = JSON.parse(binding.methodTable());
const reads = table.filter((method) => method.reads).map((method) => method.name);
const paths = conformancePaths();

/** The rows of SQLite changed through the store's connection so far, or undefined when it is closed. */
function totalChanges(store: StoreInstance): number | undefined {
  const { connection } = store.state as { connection: { open: boolean; prepare(sql: string): { pluck(): { get(): number } } } };
  return connection.open ? connection.prepare('SELECT total_changes()').pluck().get() : undefined;
}

/** The store class with every read checked; `called` collects the reads the traces made. */
function checkedStore(called: Set<string>, writes: Set<string>): StoreClass {
  class Checked extends (SqliteControllerStore as unknown as new (...args: unknown[]) => StoreInstance) {}
  for (const name of reads) {
    const read = (SqliteControllerStore.prototype as unknown as Record<string, (...args: unknown[]) => unknown>)[name];
    Object.defineProperty(Checked.prototype, name, {
      value: {
        [name](this: StoreInstance, ...args: unknown[]) {
          const before = totalChanges(this);
          try {
            return read.apply(this, args);
          } finally {
            called.add(name);
            const after = totalChanges(this);
            if (before !== undefined && after !== undefined && after !== before) writes.add(`${name} changed rows`);
          }
        },
      }[name],
      writable: true,
      configurable: true,
    });
  }
  return Checked as unknown as StoreClass;
}

test('no method marked as a read changes the database in any trace', () => {
  const called = new Set<string>();
  const writes = new Set<string>();
  const Store = checkedStore(called, writes);
  for (const entry of traceEntries(paths)) {
    if ('error' in entry) throw entry.error;
    try {
      replayTrace(entry.trace, { Store, clock: jestClock, conformanceRoot: paths.root });
    } catch {
      // A trace that differs is the conformance suite's to report; what its reads did is checked here.
    }
  }
  expect([...writes]).toEqual([]);
  expect(reads.filter((name) => !called.has(name))).toEqual([]);
});
