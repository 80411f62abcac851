'use strict';
// `node hold-lock.js <file> <projectPath> <ms>`: takes the state file's write lock (BEGIN
// IMMEDIATE on the store's own connection), prints LOCKED, holds it for <ms>, rolls back.

const { openStore } = require('./common.js');

const [file, projectPath, ms] = process.argv.slice(2);
const store = openStore(file, projectPath);
store.state.connection.exec('BEGIN IMMEDIATE');
process.stdout.write('LOCKED\n');
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(ms));
store.state.connection.exec('ROLLBACK');
store.close();
