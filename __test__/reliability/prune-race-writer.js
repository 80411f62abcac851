'use strict';
// Child process: puts new controller resources for `ms` milliseconds; prints the counts.
const { SqliteControllerStore } = require('../../index.js');

const [file, project, ms] = process.argv.slice(2);
const store = new SqliteControllerStore(file, { projectPath: project });
const result = { ok: 0, failed: 0, errors: [] };
const end = Date.now() + Number(ms);
for (let i = 0; Date.now() < end; i += 1) {
  try {
    store.putResource({ controller: 'race', key: `k-${i}`, spec: { i }, initialStatus: { i } });
    result.ok += 1;
  } catch (error) {
    result.failed += 1;
    if (result.errors.length < 3) result.errors.push(error.message);
  }
}
store.close();
process.stdout.write(JSON.stringify(result));
