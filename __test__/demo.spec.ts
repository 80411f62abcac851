// `npm run demo` leaves its state file for the newcomer to look at, and the command it prints to
// read it back works.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const DEMO = path.join(__dirname, '..', 'demo', 'demo.js');

test('the demo keeps its state file and prints a command that reads it', () => {
  const output = execFileSync(process.execPath, [DEMO], { encoding: 'utf8' });
  const file = /^The state file is kept: (.+)$/m.exec(output)?.[1];
  const folder = /^ {2}rm -r (.+)$/m.exec(output)?.[1];
  expect(file).toBeDefined();
  expect(folder).toBeDefined();
  try {
    expect(fs.existsSync(file as string)).toBe(true);
    expect(path.dirname(path.dirname(file as string))).toBe(folder);
    const script = /^ {2}node -e '(.+)'$/m.exec(output)?.[1];
    expect(script).toBeDefined();
    const read = execFileSync(process.execPath, ['-e', script as string], { encoding: 'utf8' });
    expect(read).toContain("runId: 'demo-run-1'");
    expect(read).toContain("key: 'web'");
  } finally {
    fs.rmSync(folder as string, { recursive: true, force: true });
  }
});
