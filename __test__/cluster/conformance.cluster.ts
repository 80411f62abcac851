// The public conformance traces replayed against a three-node dqlite cluster (npm run
// test:cluster): every trace whose steps do not depend on the local file system, with the same
// results as on a file — each call's record or error, the arguments changed in place, the
// engine SQL of a step (through `state.connection`, which runs on the cluster) and the final
// dump of every table (read back from the cluster). Each trace gets a database of its own.
//
// Excluded (pinned below with the reason): the traces that create, corrupt or copy files, or
// expect an open to fail for a reason only a file has, and the hostile-input traces that pass
// text with a NUL character (the dqlite wire protocol sends text as C strings).

import { assertUtc, jestClock } from '../support/clock';
import { conformancePaths } from '../support/paths';
import { replayTrace, ReplayTarget, StoreClass, Trace } from '../support/replayer';
import { DumpConnection } from '../support/sqlite';
import { traceEntries } from '../support/traces';
import { clusterForSuite, type TestCluster } from '../support/cluster';

assertUtc();

const { SqliteControllerStore, StateDatabase } = require('../../index.js') as {
  SqliteControllerStore: StoreClass;
  StateDatabase: new (options: { filePath: string; mode?: string }) => { connection: DumpConnection; close(): void };
};

/**
 * Why a trace cannot run on a cluster: the steps that depend on the local file system, and text
 * with U+0000, which the dqlite wire protocol cannot carry (sent and received as C strings).
 */
export function fileSystemSteps(trace: Trace): string[] {
  const reasons = new Set<string>();
  for (const step of trace.steps) {
    if (step.do === 'writeFile') reasons.add('writes files at the state path (foreign, corrupt or legacy state)');
    if (step.do === 'copyFixture') reasons.add('opens a copy of a state file the reference wrote');
    if (step.do === 'open' && step.throws?.message.includes('does not exist') === true) {
      reasons.add('opens a state file that does not exist');
    }
  }
  return [...reasons];
}

/**
 * The hostile-input traces that store or look up text with a NUL character (U+0000): the dqlite
 * wire protocol sends and receives text as C strings, so the store refuses such a value with
 * `code: 'DQLITE_UNSUPPORTED_VALUE'` instead of cutting it. Each is replayed all the same and
 * must fail exactly there (so this list can only shrink).
 */
const NUL_TEXT = new Set([
  'hostile-child-workflows',
  'hostile-effects',
  'hostile-events',
  'hostile-resources',
  'hostile-run-events',
  'hostile-run-reads',
  'hostile-run-reserve',
  'hostile-run-transitions',
]);

const paths = conformancePaths();
const entries = traceEntries(paths).filter((entry): entry is { file: string; trace: Trace } => 'trace' in entry);
let cluster: TestCluster;
let traceNumber = 0;
const run = `r${Date.now().toString(36)}`;

clusterForSuite((started) => (cluster = started));

describe('conformance on a dqlite cluster', () => {
  const excluded = entries.filter(({ trace }) => fileSystemSteps(trace).length > 0);
  it('excludes only the traces that depend on the local file system', () => {
    expect(
      Object.fromEntries(excluded.map(({ trace }) => [trace.name, fileSystemSteps(trace)])),
    ).toEqual({
      'fixture-state-0.16.1': ['opens a copy of a state file the reference wrote'],
      'hostile-store': ['writes files at the state path (foreign, corrupt or legacy state)'],
      'store-open-reopen-verify': ['writes files at the state path (foreign, corrupt or legacy state)'],
      'store-read-only': ['opens a state file that does not exist'],
    });
  });

  for (const { trace } of entries) {
    if (fileSystemSteps(trace).length > 0) continue;
    const title = NUL_TEXT.has(trace.name) ? `${trace.name} (refuses text with NUL, as documented)` : trace.name;
    it(title, () => {
      traceNumber += 1;
      const databases = new Map<string, string>();
      const connections = new Map<string, { connection: DumpConnection; close(): void }>();
      const target: ReplayTarget = {
        address(file) {
          let url = databases.get(file);
          if (url === undefined) {
            url = cluster.url(`${run}-${traceNumber}-${databases.size}`);
            databases.set(file, url);
          }
          return url;
        },
        connection(address) {
          let state = connections.get(address);
          if (state === undefined) {
            // Read-only: as the file replay's dump, it must not prune what a read-write open would.
            state = new StateDatabase({ filePath: address, mode: 'read-only' });
            connections.set(address, state);
          }
          return state.connection;
        },
      };
      try {
        const replay = () =>
          replayTrace(trace, { Store: SqliteControllerStore, clock: jestClock, conformanceRoot: paths.root, target });
        if (NUL_TEXT.has(trace.name)) expect(replay).toThrow('(dqlite cannot store it)');
        else replay();
      } finally {
        for (const state of connections.values()) state.close();
      }
    });
  }
});
