'use strict';
// What the forked workers of the cross-process specs share (xproc-worker.js, trust-worker.js):
// - `serve(handle)`: answers the spec's messages one at a time, in order (`{ id, op, … }` in,
//   `{ id, value }` or `{ id, error }` out), ends the process when the spec goes away (a crash
//   included), and disconnects after `close`;
// - `onCopy(copy, options, read)`: a store opened on `copy` (a backup the worker made), `read`
//   of it, then the store closed and the copy's files removed.

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');

function serve(handle) {
  let queue = Promise.resolve();
  process.on('message', (message) => {
    queue = queue.then(async () => {
      try {
        process.send({ id: message.id, value: await handle(message) });
      } catch (error) {
        process.send({ id: message.id, error: { message: String(error?.message ?? error), stack: String(error?.stack ?? '') } });
      }
      if (message.op === 'close') process.disconnect();
    });
  });
  process.on('disconnect', () => process.exit(0));
}

function onCopy(copy, options, read) {
  const { SqliteControllerStore } = require(path.join(ROOT, 'index.js'));
  const store = new SqliteControllerStore(copy, options);
  try {
    return read(store);
  } finally {
    store.close();
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(copy + suffix, { force: true });
  }
}

module.exports = { ROOT, serve, onCopy };
