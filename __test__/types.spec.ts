// index.d.ts against the reference's declarations: `tsc --noEmit` on __test__/types must pass
// (assignments.ts: identical types, assignable both ways; negative.ts: the checks catch
// differences). And index.d.ts, the core's method table (src/methods/table.rs) and the class at
// run time have the reference's 64 methods, in the reference's order, each declared where the
// table's row says the reference declares it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import ts from 'typescript';

const { SqliteControllerStore } = require('../index.js');
const { binding } = require('../lib/native.js');
const { asyncStoreBlock, currentBlock, FILE } = require('../scripts/async-types.js');

const ROOT = path.join(__dirname, '..');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

test('tsc accepts index.d.ts as the reference types, in both directions', () => {
  const compiled = spawnSync(process.execPath, [TSC, '--noEmit', '-p', path.join(__dirname, 'types')], {
    encoding: 'utf8',
  });
  expect(compiled.stdout + compiled.stderr).toBe('');
  expect(compiled.status).toBe(0);
});

/** The public methods a declared class or interface `name` in `file` has, in declaration order. */
function declaredMethods(file: string, name: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const declared = source.statements.find(
    (statement): statement is ts.ClassDeclaration | ts.InterfaceDeclaration =>
      (ts.isClassDeclaration(statement) || ts.isInterfaceDeclaration(statement)) && statement.name?.text === name,
  );
  if (declared === undefined) throw new Error(`${file} declares no class or interface ${name}`);
  const members: readonly (ts.ClassElement | ts.TypeElement)[] = declared.members;
  return members
    .filter((member): member is ts.MethodDeclaration | ts.MethodSignature => ts.isMethodDeclaration(member) || ts.isMethodSignature(member))
    .filter((member) => ts.isIdentifier(member.name))
    .filter((member) => !(ts.canHaveModifiers(member) && ts.getModifiers(member)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)))
    .map((member) => (member.name as ts.Identifier).text);
}

test('index.d.ts, the core\'s method table and the class list the reference\'s methods, in its order', () => {
  // `close` is the JS layer's own; every other method is a row of src/methods/table.rs.
  const reference = declaredMethods(path.join(__dirname, 'types', 'reference.d.ts'), 'SqliteControllerStore');
  expect(reference).toHaveLength(64);
  expect(reference[0]).toBe('close');
  const table = JSON.parse(binding.methodTable()).map((method: { name: string }) => method.name);
  // `async` (every method as a Promise) is this package's addition, typed on its own.
  const runtime = Object.getOwnPropertyNames(SqliteControllerStore.prototype).filter(
    (name) => name !== 'constructor' && name !== 'async',
  );
  expect({
    'index.d.ts': declaredMethods(FILE, 'SqliteControllerStore'),
    'src/methods/table.rs': ['close', ...table],
    'SqliteControllerStore.prototype': runtime,
  }).toEqual({
    'index.d.ts': reference,
    'src/methods/table.rs': reference,
    'SqliteControllerStore.prototype': reference,
  });
});

test('the methods a row says the reference declares on ControllerStore are that interface\'s, here and there', () => {
  // The rest are declared on the class alone (the run methods).
  const rows: { name: string; declared: string }[] = JSON.parse(binding.methodTable());
  expect(new Set(rows.map((row) => row.declared))).toEqual(new Set(['ControllerStore', 'SqliteControllerStore']));
  const onInterface = ['close', ...rows.filter((row) => row.declared === 'ControllerStore').map((row) => row.name)];
  expect({
    'index.d.ts': declaredMethods(FILE, 'ControllerStore'),
    'reference.d.ts': declaredMethods(path.join(__dirname, 'types', 'reference.d.ts'), 'ControllerStore'),
  }).toEqual({ 'index.d.ts': onInterface, 'reference.d.ts': onInterface });
});

test('AsyncStore in index.d.ts is the one scripts/async-types.js generates from the class', () => {
  const text = fs.readFileSync(FILE, 'utf8');
  // Run `node scripts/async-types.js` after changing a method of SqliteControllerStore.
  expect(currentBlock(text)).toBe(asyncStoreBlock(text));
});

test('store.async generics and `using` compile under the module and lib settings users pick', () => {
  const file = path.join(__dirname, 'types', 'async-and-dispose.ts');
  // The commonjs/ES2022 case, with every declaration checked, is the tsc run above; here only the
  // consumer file is checked (skipLibCheck), which is what differs between the settings.
  const base: ts.CompilerOptions = { strict: true, noEmit: true, skipLibCheck: true, types: ['node'] };
  const settings: Record<string, ts.CompilerOptions> = {
    'node16': { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16, target: ts.ScriptTarget.ES2022 },
    'nodenext, ESNext': { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ESNext },
    'bundler': { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, target: ts.ScriptTarget.ES2022 },
    'lib with esnext.disposable': {
      module: ts.ModuleKind.CommonJS,
      moduleResolution: ts.ModuleResolutionKind.Node10,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    },
  };
  const failures = Object.entries(settings).flatMap(([name, options]) =>
    ts
      .getPreEmitDiagnostics(ts.createProgram([file], { ...base, ...options }))
      .map((d) => `${name}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`),
  );
  expect(failures).toEqual([]);
});
