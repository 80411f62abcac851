'use strict';

const os = require('node:os');
const path = require('node:path');

const DATABASE_FILE = 'state.sqlite';

/** `<home>/.pi/agent/workflows/state.sqlite`, the reference's default state file. */
function workflowStatePath(homeDir = os.homedir()) {
  return path.join(homeDir, '.pi', 'agent', 'workflows', DATABASE_FILE);
}

module.exports = { workflowStatePath };
