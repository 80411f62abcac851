'use strict';
// Prints the README's API status table: every public method of the reference, in the
// reference's groups, marked by whether the native class has it. `node scripts/api-table.js`
// prints it; the README test checks the README carries exactly this table.

const { METHODS } = require('../lib/methods.js');

const GROUPS = [
  ['A. Lifecycle', ['close']],
  ['B. Controller resources', 8],
  ['C. Work queue and claims', 6],
  ['D. Effects', 4],
  ['E. Child workflows', 6],
  ['F. Controller events', 2],
  ['G. Run reservation', 3],
  ['H. Run reads and views', 9],
  ['I. Run claims and fencing', 8],
  ['J. Run state transitions', 11],
  ['K. Interactions', 1],
  ['L. Run events and run effects', 3],
  ['M. Legacy stubs', 2],
];

function apiTable(implemented) {
  const names = Object.keys(METHODS);
  const rows = ['| # | group | method | native |', '|---:|---|---|:---:|'];
  let next = 0;
  let number = 1;
  for (const [group, members] of GROUPS) {
    const methods = Array.isArray(members) ? members : names.slice(next, (next += members));
    for (const method of methods) {
      const done = method === 'close' || implemented.has(method);
      rows.push(`| ${number} | ${group} | \`${method}\` | ${done ? 'done' : '—'} |`);
      number += 1;
    }
  }
  return rows.join('\n');
}

module.exports = { apiTable };

if (require.main === module) {
  const { binding } = require('../lib/native.js');
  process.stdout.write(`${apiTable(new Set(binding.implementedMethods()))}\n`);
}
