// The re-entrancy traces (__test__/conformance-reentrancy/README.md): store calls made from
// inside another call's argument (getters, Proxy traps, toString/valueOf/toJSON), recorded from
// the reference and replayed through the synchronous methods with the conformance replayer.
// `store.async` reads its arguments as a snapshot (once each, before it queues), so the
// reference's read counts do not apply to it: its re-entrant calls are held to that rule below.

import path from 'node:path';

import { assertUtc, jestClock } from './support/clock';
import { IN_REPO_CONFORMANCE, REPO_ROOT } from './support/paths';
import { loadTrace, replayTrace, StoreClass } from './support/replayer';

assertUtc();

const { SqliteControllerStore } = require('../index.js') as { SqliteControllerStore: StoreClass };

const DIR = path.join(REPO_ROOT, '__test__', 'conformance-reentrancy', 'traces');
const TRACES = ['reenter-resources', 'reenter-runs'];

describe('re-entrant calls through the synchronous methods', () => {
  it.each(TRACES)('%s', (name) => {
    const trace = loadTrace(path.join(DIR, `${name}.json`));
    replayTrace(trace, { Store: SqliteControllerStore, clock: jestClock, conformanceRoot: IN_REPO_CONFORMANCE });
  });
});

// `store.async` reads its arguments once, as a snapshot, before it queues the call
// (docs/differences.md): a store call made from inside an argument runs then, on the caller's
// thread, once per property read — never refused as busy, never waiting for itself.
describe('re-entrant calls from inside a store.async argument', () => {
  const fs = require('node:fs') as typeof import('node:fs');
  const os = require('node:os') as typeof import('node:os');
  let dir: string;
  let store: any;
  const put = (key: string) => ({ controller: 'jobs', key, spec: { n: 1 }, initialStatus: {} });
  const name = (record: any) => record?.metadata?.key;

  beforeEach(() => {
    dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-reenter-async-')));
    store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
    store.putResource(put('k1'));
  });

  afterEach(() => {
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs a read nested in a write when the arguments are read, then the write', async () => {
    const nested: unknown[] = [];
    const pending = store.async.putResource({
      ...put('ignored'),
      get key() {
        nested.push(name(store.getResource({ controller: 'jobs', key: 'k1' })));
        return 'k2';
      },
    });
    expect(nested).toEqual(['k1']);
    expect(name(await pending)).toBe('k2');
  });

  it('runs a write nested in a read while an earlier async call is queued, in call order', async () => {
    const first = store.async.putResource(put('k3'));
    const nested: unknown[] = [];
    const read = store.async.getResource({
      controller: 'jobs',
      get key() {
        nested.push(name(store.putResource(put('k4'))));
        return 'k4';
      },
    });
    expect(nested).toEqual(['k4']);
    expect([name(await first), name(await read)]).toEqual(['k3', 'k4']);
    expect(store.listResources({ controller: 'jobs' }).map(name)).toEqual(['k1', 'k3', 'k4']);
  });
});
