// The README's API status table must be the one generated from what the class really has.
import fs from 'node:fs';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const { apiTable } = require('../scripts/api-table.js');
// eslint-disable-next-line @typescript-eslint/no-var-requires
const { SqliteControllerStore } = require('../index.js');

test('README API table matches the methods the class has', () => {
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const table = readme.split('<!-- api-table:start -->')[1]?.split('<!-- api-table:end -->')[0]?.trim();
  const present = new Set(Object.getOwnPropertyNames(SqliteControllerStore.prototype));
  expect(table).toBe(apiTable(present));
});
