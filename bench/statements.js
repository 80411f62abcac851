'use strict';
// `node bench/statements.js [--sql]`: the SQL statements each write method of the bench's
// workloads runs (statement recording, src/trace.rs), per call: the run lifecycle (reserve,
// claim, mark running, renew, complete) and one controller loop iteration (claimNext,
// updateStatus, recordEvent, settleClaim), plus putResource, reserveEffect and updateEffect.
// Counts are those of a call in the steady state (the third of each), BEGIN and COMMIT
// included, with the tables they write and how many are above one statement a written table,
// one read and BEGIN/COMMIT; `--sql` also lists each statement's template.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SqliteControllerStore } = require('..');
const { binding } = require('../lib/native.js');
const { reservation } = require('./fixtures');

const ROUNDS = 3;

/** Parses a trace into per-label lists of statement templates. */
function statementsByLabel(trace) {
  const templates = new Map();
  const byLabel = new Map();
  let label = '';
  for (const line of fs.readFileSync(trace, 'utf8').split('\n')) {
    const [kind, ...fields] = line.split('\t');
    if (kind === 'T') templates.set(fields[0], JSON.parse(fields[1]));
    else if (kind === 'M') label = JSON.parse(fields[0]);
    else if (kind === 'S' && label !== '') {
      if (!byLabel.has(label)) byLabel.set(label, []);
      byLabel.get(label).push(templates.get(fields[1]));
    }
  }
  return byLabel;
}

/** Runs `work(timed)` with statements recorded; `timed(label, fn)` labels a call's statements. */
function recorded(work) {
  const folder = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'piw-statements-'));
  const trace = path.join(folder, 'statements.trace');
  binding.recordStatements(trace);
  // Recording hooks connections opened once it is on.
  const store = new SqliteControllerStore(path.join(folder, 'state.sqlite'), { projectPath: folder });
  try {
    work(store, (label, operation) => {
      binding.recordMark(label);
      try {
        return operation();
      } finally {
        binding.recordMark('');
      }
    });
  } finally {
    store.close();
    binding.recordStatements(null);
  }
  const result = statementsByLabel(trace);
  fs.rmSync(folder, { recursive: true, force: true });
  return result;
}

function lifecycle(store, timed) {
  for (let index = 0; index < ROUNDS; index += 1) {
    const round = index === ROUNDS - 1 ? '' : `#${index} `;
    const runId = `run-${index}`;
    const claim = { runId, runnerId: `session-${index}`, claimToken: `token-${index}`, leaseMs: 30_000 };
    timed(`${round}reserveWorkflowRun`, () => store.reserveWorkflowRun(reservation(runId, claim.runnerId)));
    timed(`${round}claimWorkflowRun`, () => store.claimWorkflowRun(claim));
    timed(`${round}markWorkflowRunRunning`, () => store.markWorkflowRunRunning(claim));
    timed(`${round}renewWorkflowRunClaim`, () => store.renewWorkflowRunClaim(claim));
    timed(`${round}completeWorkflowRun`, () => store.completeWorkflowRun(claim));
  }
}

function controllerLoop(store, timed) {
  for (let index = 0; index < ROUNDS; index += 1) {
    const round = index === ROUNDS - 1 ? '' : `#${index} `;
    const ref = { controller: 'jobs', key: `job-${index}` };
    timed(`${round}putResource`, () => store.putResource({ ...ref, spec: { n: index }, initialStatus: { phase: 'new' } }));
  }
  for (let index = 0; index < ROUNDS; index += 1) {
    const round = index === ROUNDS - 1 ? '' : `#${index} `;
    const claim = timed(`${round}claimNext`, () => store.claimNext({ controllers: ['jobs'], ownerId: 'worker', leaseMs: 30_000 }));
    const ref = { controller: claim.controller, key: claim.key };
    const status = { observedGeneration: 1, conditions: [], controllerStatus: { phase: 'ready' } };
    const resource = timed(`${round}updateStatus`, () =>
      store.updateStatus({ ref, expectedResourceVersion: claim.resourceVersion, claim, status }),
    );
    timed(`${round}recordEvent`, () =>
      store.recordEvent({ controller: ref.controller, key: ref.key, claim, type: 'bench.reconciled', payload: { n: index } }),
    );
    const effect = { key: `effect-${index}`, resourceUid: resource.metadata.uid, claim, generation: 1, kind: 'bench', requestFingerprint: 'f' };
    timed(`${round}reserveEffect`, () => store.reserveEffect(effect));
    timed(`${round}updateEffect`, () => store.updateEffect({ ...effect, state: 'applied' }));
    timed(`${round}settleClaim`, () => store.settleClaim(claim));
  }
}

const GROUPS = [
  ['run lifecycle', lifecycle, ['reserveWorkflowRun', 'claimWorkflowRun', 'markWorkflowRunRunning', 'renewWorkflowRunClaim', 'completeWorkflowRun']],
  ['controller loop', controllerLoop, ['claimNext', 'updateStatus', 'recordEvent', 'settleClaim']],
];

/**
 * What a method's statements are: the tables they write (INSERT/UPDATE/DELETE), how many
 * writes and reads (SELECT) there are, and how many statements are above one a written table,
 * one read and BEGIN/COMMIT — what a write needs without statements that write several tables.
 */
function shape(statements) {
  const tables = new Set();
  let writes = 0;
  let reads = 0;
  for (const sql of statements) {
    const written = /^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([A-Za-z_]+)/i.exec(sql);
    if (written !== null) {
      tables.add(written[1]);
      writes += 1;
    } else if (/^\s*SELECT\b/i.test(sql)) reads += 1;
  }
  const above = statements.length - (tables.size + Math.min(reads, 1) + 2);
  const plural = (count, word) => `${count} ${word}${count === 1 ? '' : 's'}`;
  return `${plural(writes, 'write')} of ${plural(tables.size, 'table')}, ${plural(reads, 'read')}; ${above} above one a table + a read + BEGIN/COMMIT`;
}

function main() {
  const showSql = process.argv.includes('--sql');
  for (const [name, work, total] of GROUPS) {
    const byLabel = recorded(work);
    let sum = 0;
    for (const [label, statements] of byLabel) {
      if (label.startsWith('#')) continue;
      if (total.includes(label)) sum += statements.length;
      process.stdout.write(`${label}: ${statements.length} (${shape(statements)})\n`);
      if (showSql) for (const sql of statements) process.stdout.write(`    ${sql.replace(/\s+/g, ' ').slice(0, 220)}\n`);
    }
    process.stdout.write(`${name} (${total.join(' + ')}): ${sum}\n\n`);
  }
}

main();
