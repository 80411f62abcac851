// Type-level check: code typed against better-sqlite3's `Database` compiles against
// `store.state.connection` for the members the native connection offers.
import path from 'node:path';

import ts from 'typescript';

test('a better-sqlite3-typed snippet compiles against store.state.connection', () => {
  const file = path.join(__dirname, 'connection-types', 'better-sqlite3-snippet.ts');
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    esModuleInterop: true,
    module: ts.ModuleKind.CommonJS,
    target: ts.ScriptTarget.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    types: ['node'],
  });
  const diagnostics = ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  expect(diagnostics).toEqual([]);
});
