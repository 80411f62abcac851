'use strict';
// A short tour of the store against a state file in a temporary folder: a controller resource
// reconciled through the work queue, then a workflow run from reservation to completion.
// Run with `npm run demo` (which builds the addon first). The state file is kept, and the last
// lines say how to look into it and how to delete it.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const { SqliteControllerStore } = require(ROOT);

function show(title, value) {
  process.stdout.write(`\n== ${title}\n${JSON.stringify(value, null, 2)}\n`);
}

function main() {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-workflows-native-demo-'));
  const file = path.join(folder, 'state', 'state.sqlite');
  const store = new SqliteControllerStore(file, { projectPath: folder });
  try {
    process.stdout.write(`state file: ${store.filePath}\n`);

    const resource = store.putResource({
      controller: 'deployments',
      key: 'web',
      spec: { image: 'web:1.2.3', replicas: 2 },
      initialStatus: { phase: 'new' },
    });
    show('putResource', resource);

    const claim = store.claimNext({ controllers: ['deployments'], ownerId: 'demo-worker', leaseMs: 30_000 });
    show('claimNext', claim);
    const updated = store.updateStatus({
      ref: { controller: 'deployments', key: 'web' },
      expectedResourceVersion: claim.resourceVersion,
      claim,
      status: { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } },
    });
    show('updateStatus', updated);
    show('settleClaim', store.settleClaim(claim));
    show('listEvents', store.listEvents({ controller: 'deployments', key: 'web', limit: 10 }));

    const digest = 'sha256:' + 'ab'.repeat(32);
    const run = store.reserveWorkflowRun({
      runId: 'demo-run-1',
      workflowName: 'echo',
      workflowSourceRef: 'builtin:echo',
      workflowSource: { kind: 'builtin', id: 'echo', revision: 'r1' },
      definitionDigest: digest,
      definitionSnapshot: { name: 'echo' },
      input: { message: 'hello' },
      runnerId: 'session-demo',
      originSessionId: 'session-demo',
    });
    show('reserveWorkflowRun', run);
    const claimed = store.claimWorkflowRun({
      runId: run.runId,
      runnerId: 'session-demo',
      claimToken: 'demo-token',
      leaseMs: 30_000,
    });
    show('claimWorkflowRun', claimed);
    store.markWorkflowRunRunning({ runId: run.runId, claimToken: 'demo-token' });
    store.completeWorkflowRun({ runId: run.runId, claimToken: 'demo-token' });
    show('getWorkflowRunView after completion', store.getWorkflowRunView(run.runId));
    show('listRunEventsAfter(0)', store.listRunEventsAfter(0, { limit: 20 }));
    store.state.integrityCheck();
    process.stdout.write('\nintegrity check: ok\n');
  } finally {
    store.close();
  }
  process.stdout.write(afterword(file, folder));
}

/** How to open the state file the demo leaves behind, and how to remove it. */
function afterword(file, folder) {
  const read = `const { SqliteControllerStore } = require(${JSON.stringify(ROOT)}); const store = new SqliteControllerStore(${JSON.stringify(file)}, { readOnly: true, projectPath: ${JSON.stringify(folder)} }); console.log(store.listWorkflowRuns(), store.listResources()); store.close();`;
  return [
    '',
    `The state file is kept: ${file}`,
    'Read it back with the store (read-only):',
    `  node -e '${read}'`,
    'or with the sqlite3 shell, if you have it:',
    `  sqlite3 -readonly ${file} '.tables'`,
    'Delete it when done:',
    `  rm -r ${folder}`,
    '',
  ].join('\n');
}

main();
