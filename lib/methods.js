'use strict';
// What the JS layer does for each public method before and after the core runs it.
//
// Paths are `argIndex` or `argIndex.property`:
// - time:  timestamps read with `new Date(value ?? now)`; sent as epoch ms, or null if invalid
// - date:  timestamps read with `Date.parse(value)`; sent as epoch ms, or null if NaN
// - json:  caller JSON documents; sent as canonical-JSON envelopes
// - claim: the claim object the method may update in place (resourceVersion, expiresAt)
// - echo:  the record property `payload` is the caller's own payload object (`?? {}`)
// - echoProps: record properties that are the caller's own `args[0][name]`, as they are
// - lease: `{now, ms}`: the lease expiry `now + leaseMs` (JavaScript's `+`, after `now` was
//          converted by `time`) and `new Date(that).toISOString()`, sent in place of `ms` as
//          `{$lease: {sum, iso}}`; what either threw is sent as `{$error}` in its place

const OPTIONS_NOW = ['0.now'];
const RUN_JSON = ['0.definitionSnapshot', '0.input', '0.launchOptions'];

const METHODS = {
  // B. controller resources
  putResource: { time: OPTIONS_NOW, json: ['0.spec', '0.initialStatus'] },
  getResource: {},
  getResourceByUid: {},
  listResources: {},
  updateStatus: { time: OPTIONS_NOW, json: ['0.status'], claim: '0.claim' },
  requestDeletion: { time: ['1'] },
  updateFinalizers: { time: OPTIONS_NOW },
  deleteResource: {},
  // C. work queue and claims
  enqueue: { time: ['1'] },
  claimNext: { time: OPTIONS_NOW, lease: { now: '0.now', ms: '0.leaseMs' }, echoProps: ['ownerId'] },
  renewClaim: { time: ['2'], claim: '0', lease: { now: '2', ms: '1' } },
  settleClaim: { time: ['1'], claim: '0' },
  requeueClaim: { time: ['2'], date: ['1.availableAt'], claim: '0' },
  listQueue: {},
  // D. effects
  reserveEffect: { time: OPTIONS_NOW },
  getEffect: {},
  updateEffect: { time: OPTIONS_NOW },
  listEffects: {},
  // E. child workflows
  reserveWorkflow: {},
  getWorkflow: {},
  getWorkflowByRequestId: {},
  updateWorkflow: {},
  completeWorkflow: {},
  listWorkflows: {},
  // F. controller events
  recordEvent: {
    time: OPTIONS_NOW,
    json: ['0.payload'],
    claim: '0.claim',
    echo: '0.payload',
    echoProps: ['controller', 'key', 'type'],
  },
  listEvents: {},
  // G. run reservation
  reserveWorkflowRun: { time: OPTIONS_NOW, json: RUN_JSON },
  prepareOrAdoptWorkflowRun: { time: OPTIONS_NOW, json: RUN_JSON },
  enqueueWorkflowRun: { time: OPTIONS_NOW, json: RUN_JSON },
  // H. run reads and views
  getWorkflowRun: {},
  getWorkflowRunView: {},
  workflowRunListRevision: {},
  listWorkflowRunViews: {},
  workflowRunProjectPath: {},
  listWorkflowRuns: {},
  findSessionReservation: {},
  findSessionReservationView: {},
  isWorkflowRunPaused: {},
  // I. run claims and fencing
  claimWorkflowRun: { time: OPTIONS_NOW },
  claimWorkflowRunForInteractionValidation: { time: OPTIONS_NOW },
  claimWorkflowRunForControl: { time: OPTIONS_NOW },
  claimNextWorkflowRun: { time: OPTIONS_NOW },
  renewWorkflowRunClaim: { time: OPTIONS_NOW },
  verifyWorkflowRunClaim: { time: OPTIONS_NOW },
  workflowRunAuthority: {},
  markWorkflowRunRunning: { time: OPTIONS_NOW },
  // J. run state transitions
  parkWorkflowRun: { time: OPTIONS_NOW },
  pauseParkedWorkflowRun: { time: OPTIONS_NOW },
  resumePausedInteraction: { time: OPTIONS_NOW },
  parkWorkflowRunForSourceChange: { time: OPTIONS_NOW },
  parkWorkflowRunForAmbiguousEffect: { time: OPTIONS_NOW },
  failWorkflowRun: { time: OPTIONS_NOW },
  cancelWorkflowRun: { time: OPTIONS_NOW },
  cancelStaleWorkflowRun: { time: OPTIONS_NOW },
  deleteWorkflowRun: {},
  completeWorkflowRun: { time: OPTIONS_NOW },
  setWorkflowRunOriginSession: {},
  // K. interactions
  beginWorkflowRunInteractionTimeout: { time: OPTIONS_NOW },
  // L. run events and run effects
  recordRunEvent: {
    time: OPTIONS_NOW,
    json: ['0.payload'],
    echo: '0.payload',
    echoProps: ['runId', 'workflowRef', 'type'],
  },
  listRunEventsAfter: {},
  settleRunEffect: {},
  // M. legacy stubs
  repairCanonicalWorkflowSourceRun: {},
  claimLegacyWorkflowSourceRun: {},
};

function parsePath(spec) {
  const [index, property] = spec.split('.');
  return { index: Number(index), property };
}

// Compile the path strings once.
for (const spec of Object.values(METHODS)) {
  for (const kind of ['time', 'date', 'json']) {
    spec[kind] = (spec[kind] ?? []).map(parsePath);
  }
  spec.claim = spec.claim === undefined ? undefined : parsePath(spec.claim);
  spec.echo = spec.echo === undefined ? undefined : parsePath(spec.echo);
  spec.lease = spec.lease === undefined ? undefined : { now: parsePath(spec.lease.now), ms: parsePath(spec.lease.ms) };
  // No argument to convert before the call (index.js then sends the arguments as they are).
  spec.plain = spec.time.length === 0 && spec.date.length === 0 && spec.json.length === 0;
}

module.exports = { METHODS };
