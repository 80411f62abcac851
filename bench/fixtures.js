'use strict';
// What the benches reserve: one builtin echo workflow, the same for every run.

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const SOURCE = { kind: 'builtin', id: 'echo', revision: 'r1' };

/** The reserveWorkflowRun options of run `runId`, launched by `session`. */
function reservation(runId, session) {
  return {
    runId,
    workflowName: 'echo',
    workflowSourceRef: 'builtin:echo',
    workflowSource: SOURCE,
    definitionDigest: DIGEST,
    definitionSnapshot: { name: 'echo', steps: [{ id: 'a', kind: 'prompt' }] },
    input: { message: `hello ${runId}` },
    runnerId: session,
    originSessionId: session,
  };
}

module.exports = { reservation };
