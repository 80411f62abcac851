// The README says what is true: `npm run pack:local` prints what the Install section shows, and
// the quick start's scripts run as written and print what the README says they print.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { report } = require('../scripts/pack.js');

const ROOT = path.join(__dirname, '..');
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

function between(start: string, end: string): string | undefined {
  return readme.split(start)[1]?.split(end)[0]?.trim();
}

/** Whitespace-insensitive, so util.inspect's line breaking does not matter. */
function flat(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

test('README shows what npm run pack:local prints', () => {
  const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const out = '/path/to/pi-workflows-native/target/packages';
  const printed = report({
    triple: 'linux-x64-gnu',
    root: { tarball: `${out}/pi-workflows-native-${version}.tgz` },
    platform: { tarball: `${out}/pi-workflows-native-linux-x64-gnu-${version}.tgz` },
  });
  expect(between('<!-- pack-output:start -->', '<!-- pack-output:end -->')).toBe(`\`\`\`\n${printed}\`\`\``);
  // The quick start installs those same two files.
  const quickStart = readme.split('## Quick start')[1];
  expect(quickStart).toContain(
    `npm install /path/to/pi-workflows-native-${version}.tgz /path/to/pi-workflows-native-linux-x64-gnu-${version}.tgz`,
  );
});

describe('the quick start', () => {
  let project: string;
  const scripts = new Map<string, string>();
  for (const match of readme.matchAll(/`(\w+\.js)`\)?:\s*\n\s*```js\n([\s\S]*?)```/g)) scripts.set(match[1], match[2]);

  beforeAll(() => {
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-readme-'));
    fs.mkdirSync(path.join(project, 'node_modules'));
    fs.symlinkSync(ROOT, path.join(project, 'node_modules', 'pi-workflows-native'), 'dir');
  });

  afterAll(() => {
    fs.rmSync(project, { recursive: true, force: true });
  });

  function run(name: string): string {
    fs.writeFileSync(path.join(project, name), scripts.get(name) as string);
    return execFileSync(process.execPath, [name], { cwd: project, encoding: 'utf8' });
  }

  /** What a script's `// …` comments after its console.log calls say it prints. */
  function promised(source: string): string {
    const lines = source.split('\n');
    const expected: string[] = [];
    lines.forEach((line, index) => {
      if (!line.includes('console.log(')) return;
      const inline = /\);\s*\/\/ (.*)$/.exec(line);
      if (inline) expected.push(inline[1]);
      else if (lines[index + 1]?.startsWith('// ')) expected.push(lines[index + 1].slice(3));
    });
    return expected.join('\n');
  }

  it('has first.js, second.js and run.js', () => {
    expect([...scripts.keys()]).toEqual(['first.js', 'second.js', 'run.js']);
  });

  it('first.js prints the record the README shows', () => {
    const shown = /`node first\.js` prints your first record[^\n]*\n\s*```js\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(shown).toBeDefined();
    const uid = /uid: '([0-9a-f-]{36})'/;
    const output = run('first.js');
    expect(flat(output.replace(uid, "uid: '<uid>'"))).toBe(flat((shown as string).replace(uid, "uid: '<uid>'")));
  });

  it('second.js and run.js print what their comments say', () => {
    for (const name of ['second.js', 'run.js']) {
      const source = scripts.get(name) as string;
      expect([name, flat(run(name))]).toEqual([name, flat(promised(source))]);
    }
  });
});
