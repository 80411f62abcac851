// The calls the re-entrancy traces record (record.ts runs them on the reference): store calls
// made from inside another call's argument — a getter, a Proxy trap, `toString`/`valueOf` or
// `toJSON` — reads and writes nested in reads and writes, nested calls that throw (caught by the
// argument, or rethrown into the outer call). Each trace ends with a dump of the file.

import { Encoded } from '../support/values';

export type CaseStep =
  | { do: 'open'; store: string; file: string; options: Encoded; mkdirs?: string[] }
  | { do: 'call'; store: string; method: string; args: Encoded[] }
  | { do: 'tick'; ms: number }
  | { do: 'close'; store: string }
  | { do: 'dump'; file: string };

export type Case = { name: string; description: string; clockStart: number; steps: CaseStep[] };

const FILE = '$DIR/state.sqlite';
const open: CaseStep = { do: 'open', store: 'a', file: FILE, options: { projectPath: '$DIR/project' }, mkdirs: ['$DIR/project'] };
const end: CaseStep[] = [{ do: 'close', store: 'a' }, { do: 'dump', file: FILE }];

const call = (method: string, ...args: Encoded[]): CaseStep => ({ do: 'call', store: 'a', method, args });
const tick = (ms = 1000): CaseStep => ({ do: 'tick', ms });

type Via = 'getter' | 'toString' | 'valueOf' | 'toJSON' | 'proxy';

/** An argument that calls `method(...args)` on store `a` when read, then answers `value`. */
const reenter = (via: Via, value: Encoded, method: string, args: Encoded[], rethrow = false): Encoded => ({
  $reenter: { via, call: { store: 'a', method, args }, value, ...(rethrow ? { rethrow: true } : {}) },
});

const put = (key: Encoded, spec: Encoded = { n: 1 }, extra: Record<string, Encoded> = {}): Encoded => ({
  controller: 'jobs',
  key,
  spec,
  initialStatus: { phase: 'new' },
  ...extra,
});
const ref = (key: Encoded): Encoded => ({ controller: 'jobs', key });

const DIGEST = `sha256:${'a1'.repeat(32)}`;
const reservation = (runId: Encoded, session: string, extra: Record<string, Encoded> = {}): Encoded => ({
  runId,
  workflowName: 'echo',
  workflowSourceRef: 'builtin:echo',
  workflowSource: { kind: 'builtin', id: 'echo', revision: 'rev-1' },
  definitionDigest: DIGEST,
  definitionSnapshot: {
    schema: 'pi-workflows.definition-snapshot.v1',
    name: 'echo',
    startAt: 'start',
    nodes: { start: { type: 'agent' } },
    edges: [],
  },
  input: { task: 'task' },
  runnerId: session,
  originSessionId: session,
  ...extra,
});

export const CASES: Case[] = [
  {
    name: 'reenter-resources',
    description:
      'Controller-resource calls made from inside another call\'s argument: a read inside a write (the getter of putResource\'s key), a write inside a write, a write inside a read, a read inside a read, nested calls that throw (caught, or rethrown into the outer call), through getters, Proxy traps, valueOf and toJSON.',
    clockStart: Date.parse('2026-10-01T00:00:00.000Z'),
    steps: [
      open,
      call('putResource', put('k1')),
      tick(),
      // a read inside a write
      call('putResource', put(reenter('getter', 'k2', 'getResource', [ref('k1')]))),
      tick(),
      // a write inside a write (spec and initialStatus getters)
      call('putResource', put('k3', reenter('getter', { n: 3 }, 'putResource', [put('k4')]))),
      tick(),
      call('putResource', { controller: 'jobs', key: 'k5', spec: {}, initialStatus: reenter('getter', {}, 'putResource', [put('k6')]) }),
      tick(),
      // a write inside a read, a read inside a read
      call('getResource', ref(reenter('getter', 'k7', 'putResource', [put('k7')]))),
      call('listResources', { controller: reenter('getter', 'jobs', 'listResources', [{ controller: 'jobs' }]) }),
      tick(),
      // nested calls that throw: caught by the getter, then rethrown into the outer call
      call('putResource', put(reenter('getter', 'k8', 'putResource', [put('')]))),
      call('putResource', put(reenter('getter', 'k9', 'putResource', [put('')], true))),
      call('getResource', ref(reenter('getter', 'k1', 'deleteResource', [ref('nope')], true))),
      tick(),
      // a Proxy whose every read makes a call; valueOf and toJSON
      call('putResource', reenter('proxy', put('k10'), 'getResource', [ref('k1')])),
      call('putResource', put('k11', reenter('toJSON', { j: 1 }, 'putResource', [put('k12')]))),
      call('putResource', put('k13', { n: reenter('toJSON', 1, 'getResource', [ref('k12')]) })),
      call('enqueue', { ...(ref('k1') as object), availableAt: reenter('valueOf', Date.parse('2026-10-01T00:00:30.000Z'), 'putResource', [put('k14')]) }),
      tick(),
      // the work queue: a claim read inside a claim, a write from inside a claim's getter
      call('claimNext', { controllers: ['jobs'], ownerId: reenter('getter', 'w1', 'listQueue', [{ controller: 'jobs' }]), leaseMs: 30000 }),
      call('claimNext', { controllers: reenter('getter', ['jobs'], 'putResource', [put('k15')]), ownerId: 'w2', leaseMs: 30000 }),
      // every read of ownerId is inside the transaction, the record's too: a nested write fails
      call('putResource', put('k16')),
      call('claimNext', { controllers: ['jobs'], ownerId: reenter('getter', 'w3', 'recordEvent', [{ controller: 'jobs', key: 'k1', type: 'owner' }]), leaseMs: 30000 }),
      call('listEvents', { controller: 'jobs', limit: reenter('valueOf', 3, 'recordEvent', [{ controller: 'jobs', key: 'k1', type: 'noted', payload: { from: 'valueOf' } }]) }),
      call('recordEvent', { controller: 'jobs', key: 'k2', type: reenter('getter', 'typed', 'recordEvent', [{ controller: 'jobs', key: 'k3', type: 'inner' }]) }),
      call('listEvents', { controller: 'jobs' }),
      call('listResources', { controller: 'jobs' }),
      ...end,
    ],
  },
  {
    name: 'reenter-runs',
    description:
      'Workflow-run calls made from inside another call\'s argument: reads and writes nested in reservations, claims, transitions and run lists (whose caller values are read while the reference holds no transaction, or inside its transaction), and nested calls that throw.',
    clockStart: Date.parse('2026-10-02T00:00:00.000Z'),
    steps: [
      open,
      call('reserveWorkflowRun', reservation('r1', 'session-1')),
      tick(),
      // a read inside a write, a write inside a write
      call('reserveWorkflowRun', reservation(reenter('getter', 'r2', 'getWorkflowRun', ['r1']), 'session-2')),
      call('reserveWorkflowRun', reservation('r3', 'session-3', { input: reenter('getter', { task: 't3' }, 'reserveWorkflowRun', [reservation('r4', 'session-4')]) })),
      tick(),
      // a write inside a read, a read inside a read
      call('listWorkflowRuns', { statuses: reenter('getter', ['queued'], 'reserveWorkflowRun', [reservation('r5', 'session-5')]) }),
      call('getWorkflowRun', reenter('toString', 'r2', 'listWorkflowRuns', [])),
      call('listWorkflowRunViews', { limit: reenter('getter', 2, 'workflowRunListRevision', []) }),
      tick(),
      // claims and transitions with nested writes and reads
      call('claimWorkflowRun', { runId: 'r1', runnerId: 'host-1', claimToken: 't1', leaseMs: reenter('getter', 30000, 'recordRunEvent', [{ runId: 'r2', type: 'noted', actor: { type: 'host', id: 'h' } }]) }),
      call('markWorkflowRunRunning', { runId: 'r1', claimToken: reenter('getter', 't1', 'verifyWorkflowRunClaim', [{ runId: 'r1', claimToken: 't1' }]) }),
      call('claimNextWorkflowRun', { runnerId: 'host-2', claimToken: 't2', leaseMs: 30000, excludeRunIds: reenter('getter', ['r5'], 'cancelWorkflowRun', [{ runId: 'r5' }]) }),
      tick(),
      call('failWorkflowRun', { runId: 'r1', claimToken: 't1', errorCode: 'E', errorMessage: reenter('getter', 'boom', 'completeWorkflowRun', [{ runId: 'r2', claimToken: 't2' }]) }),
      // nested calls that throw, caught and rethrown
      call('listWorkflowRuns', { statuses: reenter('proxy', ['failed', 'done'], 'reserveWorkflowRun', [reservation('bad id!', 'session-6')]) }),
      call('listRunEventsAfter', 0, { limit: reenter('getter', 5, 'reserveWorkflowRun', [reservation('bad id!', 'session-7')], true) }),
      call('listRunEventsAfter', 0, reenter('proxy', { limit: 50 }, 'isWorkflowRunPaused', ['r3'])),
      // reads the reference makes inside its transaction: a nested write fails there
      call('renewWorkflowRunClaim', { runId: reenter('getter', 'r3', 'recordEvent', [{ controller: 'jobs', key: 'k', type: 'x' }]), claimToken: 't', leaseMs: 1000 }),
      call('pauseParkedWorkflowRun', { runId: reenter('getter', 'r3', 'reserveWorkflowRun', [reservation('r8', 'session-8')]) }),
      call('resumePausedInteraction', { runId: reenter('getter', 'r3', 'reserveWorkflowRun', [reservation('r9', 'session-9')]) }),
      call('listWorkflowRuns', {}),
      ...end,
    ],
  },
];
