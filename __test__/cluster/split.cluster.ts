// One cluster per store (npm run test:cluster), against two separate clusters on loopback: a
// store given addresses from both refuses to open, and a store whose reconnection reaches the
// other cluster fails its next calls (`DQLITE_CLUSTER_MISMATCH`) instead of answering from that
// cluster's database, then answers from its own once that is back. Cluster B holds a state
// database of its own, so that a swapped store would have had something to answer.

import { TestCluster } from '../support/cluster';

const { SqliteControllerStore } = require('../../index.js');

const PROJECT = '/piw-split';
const ref = (key: string) => ({ controller: 'split', key });

let a: TestCluster;
let b: TestCluster;

beforeAll(async () => {
  a = await TestCluster.start(3);
  b = await TestCluster.start(1);
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

const urlOf = (addresses: string[], database: string) => `dqlite://${addresses.join(',')}/${database}`;

function put(store: { putResource(input: object): unknown }, key: string): void {
  store.putResource({ ...ref(key), spec: { key }, initialStatus: {} });
}

test('a store given addresses from two clusters refuses to open, naming each cluster', () => {
  const onB = new SqliteControllerStore(b.url('two'), { projectPath: PROJECT });
  put(onB, 'on-b');
  onB.close();
  for (const addresses of [
    [...a.addresses, ...b.addresses],
    [b.addresses[0], a.addresses[1]],
  ]) {
    const url = urlOf(addresses, 'two');
    let error: (Error & { code?: string; filePath?: string }) | undefined;
    try {
      new SqliteControllerStore(url, { projectPath: PROJECT }).close();
    } catch (thrown) {
      error = thrown as Error & { code?: string };
    }
    expect(error?.code).toBe('DQLITE_CLUSTER_MISMATCH');
    expect(error?.filePath).toBe(url);
    expect(error?.message).toContain('belong to different dqlite clusters');
    // B's address named with its cluster, every address among its cluster's members (id@address).
    expect(error?.message).toContain(`${b.addresses[0]} is in the cluster of [1@${b.addresses[0]}]`);
    for (const address of addresses) expect(error?.message).toContain(`@${address}`);
  }
});

test('a reconnection that reaches another cluster fails the call instead of answering', async () => {
  // B's database has a resource and the schema: a swapped store would answer from it.
  const onB = new SqliteControllerStore(b.url('swap'), { projectPath: PROJECT });
  put(onB, 'only-on-b');
  onB.close();
  // B's node is down when the store opens: it cannot be asked which cluster it is in.
  await b.command('kill 0');
  const store = new SqliteControllerStore(urlOf([...a.addresses, ...b.addresses], 'swap'), {
    projectPath: PROJECT,
    cluster: { reconnectDeadlineMs: 20_000 },
  });
  try {
    put(store, 'on-a');
    expect(store.listResources({ controller: 'split' }).map((r: { metadata: { key: string } }) => r.metadata.key)).toEqual(['on-a']);

    // All of A down, B back: the next calls reach B's leader and are refused.
    for (const node of [0, 1, 2]) await a.command(`kill ${node}`);
    await b.command('restart 0');
    await b.command('leader');
    for (const call of [
      () => store.getResource(ref('on-a')),
      () => store.listResources({ controller: 'split' }),
      () => put(store, 'lost'),
    ]) {
      expect(call).toThrow(expect.objectContaining({ code: 'DQLITE_CLUSTER_MISMATCH' }));
    }
    expect(() => store.getResource(ref('on-a'))).toThrow(/a reconnection reached another dqlite cluster/);

    // B's database is as it was: nothing was written to it.
    const checkB = new SqliteControllerStore(b.url('swap'), { projectPath: PROJECT });
    expect(checkB.listResources({ controller: 'split' }).map((r: { metadata: { key: string } }) => r.metadata.key)).toEqual(['only-on-b']);
    checkB.close();

    // A back: the same store answers from A again.
    for (const node of [0, 1, 2]) await a.command(`restart ${node}`);
    await a.command('voters 3');
    expect(store.getResource(ref('on-a'))?.spec).toEqual({ key: 'on-a' });
    expect(store.getResource(ref('lost'))).toBeUndefined();
  } finally {
    store.close();
  }
});
