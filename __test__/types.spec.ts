// index.d.ts against the reference's declarations: `tsc --noEmit` on __test__/types must pass
// (assignments.ts: identical types, assignable both ways; negative.ts: the checks catch
// differences). And the 64 methods the types list are the 64 the class has at run time.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const { SqliteControllerStore } = require('../index.js');

const ROOT = path.join(__dirname, '..');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

test('tsc accepts index.d.ts as the reference types, in both directions', () => {
  const compiled = spawnSync(process.execPath, [TSC, '--noEmit', '-p', path.join(__dirname, 'types')], {
    encoding: 'utf8',
  });
  expect(compiled.stdout + compiled.stderr).toBe('');
  expect(compiled.status).toBe(0);
});

test('the methods the type test lists are exactly the public methods of the class', () => {
  const source = fs.readFileSync(path.join(__dirname, 'types', 'assignments.ts'), 'utf8');
  const union = source.split('type Methods =')[1].split(';')[0];
  const typed = [...union.matchAll(/'(\w+)'/g)].map((match) => match[1]);
  expect(typed).toHaveLength(64);
  // `async` (every method as a Promise) is this package's addition, typed on its own.
  const runtime = Object.getOwnPropertyNames(SqliteControllerStore.prototype).filter(
    (name) => name !== 'constructor' && name !== 'async' && !name.startsWith('_'),
  );
  expect([...runtime].sort()).toEqual([...typed].sort());
});
