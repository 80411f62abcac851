'use strict';
// Child process: one read-write open of a state file whose blob prune cannot write its commit.
// Right before the constructor this process lowers its own file-size limit (RLIMIT_FSIZE, soft
// only, with util-linux's `prlimit`) below what the prune's commit writes to the WAL, so the
// prune fails there as on a full disk (Node ignores SIGXFSZ: the write fails with EFBIG); the
// constructor itself writes nothing. After the first use of the state the limit is raised
// again, as when space is freed. Prints what the first use and the calls after it did.
//
// argv: file, project path, the first use (a key of FIRST_USES), the limit in bytes.
const { execFileSync } = require('node:child_process');
const { openStore, rows } = require('./common.js');

const [file, projectPath, firstUse, limit] = process.argv.slice(2);

function limitFileSize(bytes) {
  execFileSync('prlimit', ['--pid', String(process.pid), `--fsize=${bytes}:`]);
}

/** What a caller can see of an error. */
function shape(error) {
  return {
    name: error.name,
    message: error.message,
    code: error.code,
    ownKeys: Object.keys(error),
    openPrune: error.openPrune,
    filePath: error.filePath,
    header: String(error.stack).split('\n')[0],
  };
}

async function outcome(use) {
  try {
    return { returned: await use() };
  } catch (error) {
    return { threw: shape(error) };
  }
}

const blobCount = (store) => rows(store, 'SELECT COUNT(*) AS n FROM blobs')[0].n;
const resourceKeys = (store) => store.listResources({ controller: 'c' }).map((resource) => resource.metadata.key);

const FIRST_USES = {
  read: (store) => resourceKeys(store),
  close: (store) => store.close(),
  asyncClose: (store) => store.async.close(),
  stateClose: (store) => store.state.close(),
  inTransaction: (store) => store.state.connection.inTransaction,
  async: async (store) => (await store.async.listResources({ controller: 'c' })).map((resource) => resource.metadata.key),
  prepare: (store) => store.state.connection.prepare('SELECT COUNT(*) AS n FROM resources').get().n,
  exec: (store) => store.state.connection.exec('SELECT 1') && 'ok',
  stateMethod: (store) => store.state.integrityCheck(),
};

const CLOSES = ['close', 'asyncClose', 'stateClose'];

async function main() {
  limitFileSize(limit);
  let store;
  const opened = await outcome(() => {
    store = openStore(file, projectPath);
  });
  if (opened.threw !== undefined) {
    // A project not registered yet: the constructor's upsert was the first use.
    limitFileSize('unlimited');
    process.stdout.write(JSON.stringify({ constructor: opened }));
    return;
  }
  const report = { first: await outcome(() => FIRST_USES[firstUse](store)) };
  // `inTransaction` does not wait for the prune: the read after it does, still at the limit.
  if (firstUse === 'inTransaction') report.next = await outcome(() => resourceKeys(store));
  limitFileSize('unlimited');
  report.open = store.state.connection.open;
  report.again = await outcome(() => FIRST_USES[firstUse](store));
  if (CLOSES.includes(firstUse)) {
    // Closed whatever it reported (the same close again reports nothing), and so are the
    // store and the state.
    report.closeAgain = await outcome(() => store.close());
    report.stateCloseAgain = await outcome(() => store.state.close());
  } else {
    // The calls after the first use (and the same use again, above): a read, the blobs (all
    // still there: the prune rolled back), a write, and a close.
    report.read = await outcome(() => resourceKeys(store));
    report.blobs = await outcome(() => blobCount(store));
    report.write = await outcome(() => {
      store.putResource({ controller: 'c', key: 'after', spec: {}, initialStatus: {} });
      return resourceKeys(store);
    });
    report.close = await outcome(() => store.close());
  }
  process.stdout.write(JSON.stringify(report));
}

main().catch((error) => {
  process.stderr.write(String(error.stack));
  process.exit(1);
});
