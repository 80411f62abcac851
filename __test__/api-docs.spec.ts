// docs/api.md documents every public method, each with a signature (index.d.ts's: the same
// parameters, options and result), its errors and an example, and every example in docs/api.md
// and in the guides (docs/interactions.md, docs/claims.md) runs as written against this package
// and passes its own assertions. docs/cluster.md's "Lost acknowledgements" says of every method
// what its row in the core's method table says: whether it only reads.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import ts from 'typescript';

const { SqliteControllerStore } = require('../index.js');
const { binding } = require('../lib/native.js');

const ROOT = path.join(__dirname, '..');
const DOCS = ['api.md', 'interactions.md', 'claims.md'];
const read = (name: string) => fs.readFileSync(path.join(ROOT, 'docs', name), 'utf8');

/**
 * The ```js blocks of a page: the examples, and the helper files (a block right after
 * `<!-- name.js -->`), which are saved under that name for the examples to require.
 */
function blocks(text: string): { helpers: Map<string, string>; examples: string[] } {
  const helpers = new Map<string, string>();
  const examples: string[] = [];
  for (const match of text.matchAll(/(?:<!-- ([\w-]+\.js) -->\n)?```js\n([\s\S]*?)```/g)) {
    if (match[1] !== undefined) helpers.set(match[1], match[2]);
    else examples.push(match[2]);
  }
  return { helpers, examples };
}

const api = read('api.md');
const setup = blocks(api).helpers.get('setup.js') as string;
const publicMethods = [
  'constructor',
  ...Object.getOwnPropertyNames(SqliteControllerStore.prototype).filter((name) => name !== 'constructor' && name !== 'async'),
];

describe('docs/api.md', () => {
  const sections = new Map(
    [...api.matchAll(/^### (\w+)\n([\s\S]*?)(?=^##)/gm)].map((match) => [match[1], match[2]] as [string, string]),
  );
  // The last section runs to the end of the page.
  const last = /^### (\w+)\n((?:(?!^##)[\s\S])*)$/m.exec(api.slice(api.lastIndexOf('\n### ') + 1));
  if (last !== null) sections.set(last[1], last[2]);

  it('has one section per public method: the constructor and the 64 of the class', () => {
    expect(publicMethods.length).toBe(65);
    expect([...sections.keys()].sort()).toEqual([...publicMethods].sort());
  });

  it('gives each a signature, its errors and an example', () => {
    const incomplete = [...sections].filter(
      ([, body]) => !body.includes('```ts\n') || !body.includes('**Errors.**') || !body.includes('```js\n'),
    );
    expect(incomplete.map(([name]) => name)).toEqual([]);
  });

  it('has the setup the examples require', () => {
    expect(setup).toContain("require('pi-workflows-native')");
  });
});

/** A named type of index.d.ts (an alias), which the page may write out. */
const NAMED = Symbol('named type');

/**
 * What a signature says: each parameter's name, whether it is optional and its type; the
 * result. An object type is compared by its property names (the page leaves their types to
 * index.d.ts), a union member by member.
 */
function signature(method: ts.MethodDeclaration, source: ts.SourceFile): unknown {
  const shape = (type: ts.TypeNode): unknown => {
    if (ts.isUnionTypeNode(type)) return type.types.map(shape);
    if (ts.isTypeLiteralNode(type)) return type.members.map((member) => `${member.name?.getText(source)}${member.questionToken ? '?' : ''}`);
    if (ts.isTypeReferenceNode(type) && type.typeArguments === undefined && /^[A-Z]/.test(type.typeName.getText(source))) return NAMED;
    return type.getText(source).replace(/\s+/g, ' ');
  };
  const parameters = method.parameters.map((parameter) => ({
    name: parameter.name.getText(source),
    optional: parameter.questionToken !== undefined,
    type: parameter.type === undefined ? undefined : shape(parameter.type),
  }));
  return { name: method.name.getText(source), parameters, result: method.type === undefined ? undefined : shape(method.type) };
}

/** Whether the page's signature says what index.d.ts's does: a type the page leaves out, or writes in place of an alias, agrees. */
function agrees(page: unknown, declared: unknown): boolean {
  if (page === undefined || declared === NAMED) return true;
  if (Array.isArray(page) || Array.isArray(declared)) {
    return Array.isArray(page) && Array.isArray(declared) && page.length === declared.length && page.every((item, index) => agrees(item, declared[index]));
  }
  if (typeof page === 'object' && page !== null && typeof declared === 'object' && declared !== null) {
    const keys = new Set([...Object.keys(page), ...Object.keys(declared)]);
    return [...keys].every((key) => agrees((page as Record<string, unknown>)[key], (declared as Record<string, unknown>)[key]));
  }
  return page === declared;
}

/** The methods of the class `SqliteControllerStore` declared in index.d.ts. */
function declarations(): Map<string, unknown> {
  const file = path.join(ROOT, 'index.d.ts');
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const store = source.statements.find(
    (statement): statement is ts.ClassDeclaration => ts.isClassDeclaration(statement) && statement.name?.text === 'SqliteControllerStore',
  );
  const members: readonly ts.ClassElement[] = store?.members ?? [];
  const methods = members.filter(
    (member): member is ts.MethodDeclaration => ts.isMethodDeclaration(member) && ts.isIdentifier(member.name),
  );
  return new Map(methods.map((method) => [(method.name as ts.Identifier).text, signature(method, source)]));
}

describe('docs/api.md against index.d.ts', () => {
  it('gives each method the signature index.d.ts declares', () => {
    const declared = declarations();
    const written = [...api.matchAll(/^### (\w+)\n+```ts\n([\s\S]*?)```/gm)].filter(([, name]) => name !== 'constructor');
    expect(written.map(([, name]) => name).sort()).toEqual([...declared.keys()].sort());
    const differing = written.flatMap(([, name, text]) => {
      const source = ts.createSourceFile('page.ts', `declare class Page {\n${text.trim().replace(/;$/, '')};\n}`, ts.ScriptTarget.Latest, true);
      const method = (source.statements[0] as ts.ClassDeclaration).members[0] as ts.MethodDeclaration;
      const page = signature(method, source);
      return agrees(page, declared.get(name)) ? [] : [{ section: name, page, declared: declared.get(name) }];
    });
    expect(differing).toEqual([]);
  });
});

describe('docs/cluster.md, "Lost acknowledgements"', () => {
  it('lists every method with the kind its row in the method table says', () => {
    const text = read('cluster.md');
    const section = text.slice(text.indexOf('## Lost acknowledgements'));
    const kinds = Object.fromEntries(
      [...section.matchAll(/^\| `(\w+)` \| (read|write) \|/gm)].map((match) => [match[1], match[2]]),
    );
    const rows: { name: string; reads: boolean }[] = JSON.parse(binding.methodTable());
    expect(kinds).toEqual(Object.fromEntries(rows.map((row) => [row.name, row.reads ? 'read' : 'write'])));
  });
});

describe.each(DOCS)('the examples of docs/%s', (page) => {
  let project: string;
  const { helpers, examples } = blocks(read(page));

  beforeAll(() => {
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-api-docs-'));
    fs.mkdirSync(path.join(project, 'node_modules'));
    fs.symlinkSync(ROOT, path.join(project, 'node_modules', 'pi-workflows-native'), 'dir');
    fs.writeFileSync(path.join(project, 'setup.js'), setup);
    for (const [name, source] of helpers) fs.writeFileSync(path.join(project, name), source);
  });

  afterAll(() => {
    fs.rmSync(project, { recursive: true, force: true });
  });

  it('are there', () => {
    expect(examples.length).toBeGreaterThan(page === 'api.md' ? 64 : 1);
  });

  it.each(examples.map((source, index) => [index + 1, source.split('\n').find((line) => line.startsWith('//')) ?? '', source]))(
    'example %i runs and its assertions hold %s',
    (index, _, source) => {
      const file = path.join(project, `example-${index}.js`);
      fs.writeFileSync(file, source as string);
      const run = spawnSync(process.execPath, [file], { cwd: project, encoding: 'utf8', env: { ...process.env, TZ: 'UTC' } });
      expect({ stderr: run.stderr, status: run.status }).toEqual({ stderr: '', status: 0 });
    },
  );
});
