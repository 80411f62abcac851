// docs/api.md documents every public method, each with a signature, its errors and an example,
// and every example in docs/api.md and in the guides (docs/interactions.md, docs/claims.md) runs
// as written against this package and passes its own assertions.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore } = require('../index.js');

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
