'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const DATABASE_FILE = 'state.sqlite';

/** `<home>/.pi/agent/workflows/state.sqlite`, the reference's default state file. */
function workflowStatePath(homeDir = os.homedir()) {
  return path.join(homeDir, '.pi', 'agent', 'workflows', DATABASE_FILE);
}

const RESET_INSTRUCTION =
  'Pi Workflows durable state is incompatible. Move or remove the old workflow state, then create a new state.sqlite database.';

/** Refuses to create a state file next to pre-SQLite workflow state (the reference's check). */
function assertNoLegacyState(databasePath, homeDir) {
  const root = path.dirname(databasePath);
  const legacy = ['runs', 'decisions', 'controllers'].map((name) => path.join(root, name));
  legacy.push(path.join(homeDir, '.config', 'pi-workflows', 'telegram-state.sqlite'));
  if (legacy.some((candidate) => fs.existsSync(candidate))) throw new Error(RESET_INSTRUCTION);
}

module.exports = { workflowStatePath, assertNoLegacyState, RESET_INSTRUCTION };
