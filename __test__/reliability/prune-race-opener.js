'use strict';
// Child process: opens and closes read-write stores (each open prunes unreferenced blobs).
const { SqliteControllerStore } = require('../../index.js');

const [file, project, ms] = process.argv.slice(2);
let opens = 0;
const end = Date.now() + Number(ms);
while (Date.now() < end) {
  new SqliteControllerStore(file, { projectPath: project }).close();
  opens += 1;
}
process.stdout.write(JSON.stringify({ opens }));
