'use strict';
// The reference TypeScript store (Node 20, better-sqlite3 12, median of 5) measured on this kind
// of machine, as given in the performance issue: µs per operation.

const REFERENCE = {
  'run lifecycle, 5 calls': { 'temp folder': 4724, '/dev/shm': 3065 },
  'reserve / claim / markRunning / renew / complete': {
    'temp folder': [1064, 1088, 928, 531, 1105],
    '/dev/shm': [693, 730, 610, 311, 740],
  },
  'controller loop: claimNext+updateStatus+recordEvent+settleClaim': { 'temp folder': 2351, '/dev/shm': 1438 },
  putResource: { 'temp folder': 877, '/dev/shm': 408 },
  'getWorkflowRun / getWorkflowRunView / getResource': {
    'temp folder': [131, 60, 70],
    '/dev/shm': [136, 59, 69],
  },
  'listWorkflowRunViews(50) / listWorkflowRuns(100)': {
    'temp folder': [13156, 12681],
    '/dev/shm': [12507, 12391],
  },
  // The reference computes these lists afresh on every call, changed database or not.
  'the same, each right after a write': {
    'temp folder': [13156, 12681],
    '/dev/shm': [12507, 12391],
  },
  'listEvents(100) / listRunEventsAfter(0, 100)': {
    'temp folder': [2514, 1668],
    '/dev/shm': [2609, 1682],
  },
  'open + close, populated database': { 'temp folder': 29056, '/dev/shm': 30248 },
  'one commit (BEGIN IMMEDIATE, 1 INSERT, COMMIT)': { 'temp folder': 162, '/dev/shm': 10 },
  // The reference's commit figure is better-sqlite3 doing exactly this: the bench repeats it
  // here to show how this machine compares with the one the figures come from.
  'machine check: that commit through better-sqlite3': { 'temp folder': 162, '/dev/shm': 10 },
};

module.exports = { REFERENCE };
