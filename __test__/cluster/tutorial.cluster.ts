// docs/cluster.md's tutorial, run as written (npm run test:cluster): its `<!-- tutorial: NAME -->`
// shell blocks, in order, in one bash session (so `$leader` and the background nodes carry over
// from block to block, as in a reader's terminal), in an empty folder where `tutorial.js` is
// saved and this package is installed (a symbolic link). Only the ports change: three free ones
// in place of 9301-9303, so that a busy port or a second run cannot get in the way. Between
// blocks the test waits, bounded, for what the text says happens (the joiners' log lines, the
// stopped node's exit), and checks what each block printed.

import { ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { REPO_ROOT } from '../support/paths';
import { sleep } from '../support/cluster';

const DOC = fs.readFileSync(path.join(REPO_ROOT, 'docs', 'cluster.md'), 'utf8');
const NODE_PROGRAM = path.resolve(process.env.PIW_DQLITE_NODE ?? path.join(REPO_ROOT, 'target', 'debug', 'piw-dqlite-node'));
const WAIT_MS = 60_000;

/** The tutorial's shell blocks, by name, in the page's order; and its `tutorial.js`. */
function tutorial(): { blocks: [string, string][]; script: string } {
  const blocks = [...DOC.matchAll(/<!-- tutorial: ([\w-]+) -->\n```sh\n([\s\S]*?)```/g)].map((m) => [m[1], m[2]] as [string, string]);
  const script = /<!-- tutorial\.js -->\n```js\n([\s\S]*?)```/.exec(DOC)?.[1];
  if (script === undefined) throw new Error('docs/cluster.md has no <!-- tutorial.js --> block');
  return { blocks, script };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `ok` every 100 ms until it holds or `WAIT_MS` passes; fails with `what` and `context()`. */
async function waitFor(what: string, ok: () => boolean, context: () => string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await sleep(100);
  }
}

/** One bash session fed block by block; each block's stdout and exit status. */
class Shell {
  private out = '';
  private err = '';
  readonly child: ChildProcessWithoutNullStreams;

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    // Its own process group, so that the nodes it starts in the background can all be stopped.
    this.child = spawn('bash', [], { cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (chunk) => (this.out += String(chunk)));
    this.child.stderr.on('data', (chunk) => (this.err += String(chunk)));
  }

  async run(name: string, block: string): Promise<string> {
    const marker = `__tutorial_block_${name}_done__`;
    const start = this.out.length;
    this.child.stdin.write(`${block}\necho "${marker} $?"\n`);
    const done = new RegExp(`${marker} (\\d+)\\n`);
    await waitFor(`block "${name}"`, () => done.test(this.out.slice(start)), () => this.transcript());
    const output = this.out.slice(start);
    const status = Number(done.exec(output)?.[1]);
    if (status !== 0) throw new Error(`block "${name}" exited ${status}\n${this.transcript()}`);
    return output.slice(0, output.indexOf(marker));
  }

  transcript(): string {
    return `--- stdout:\n${this.out.slice(-3000)}\n--- stderr:\n${this.err.slice(-3000)}`;
  }

  /** SIGKILL the session and everything it started. */
  kill(): void {
    try {
      process.kill(-(this.child.pid as number), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

let folder: string;
let shell: Shell | undefined;

afterAll(() => {
  shell?.kill();
  if (folder !== undefined) fs.rmSync(folder, { recursive: true, force: true });
});

test('the tutorial names its blocks in order', () => {
  expect(tutorial().blocks.map(([name]) => name)).toEqual(['start', 'look', 'store', 'stop', 'restart', 'crash', 'end']);
});

test('the tutorial runs as written: three nodes, a store, a planned stop and a crash of the leader', async () => {
  const ports = [await freePort(), await freePort(), await freePort()];
  const local = (text: string) => text.replace(/\b930([123])\b/g, (_, n: string) => String(ports[Number(n) - 1]));
  const address = (i: number) => `127.0.0.1:${ports[i]}`;
  const { blocks, script } = tutorial();
  const block = (name: string) => local(blocks.find(([n]) => n === name)?.[1] ?? '');

  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-tutorial-'));
  fs.mkdirSync(path.join(folder, 'node_modules'));
  fs.symlinkSync(REPO_ROOT, path.join(folder, 'node_modules', 'pi-workflows-native'), 'dir');
  fs.writeFileSync(path.join(folder, 'tutorial.js'), local(script));
  const PATH = [path.dirname(NODE_PROGRAM), path.dirname(process.execPath), process.env.PATH].join(path.delimiter);
  shell = new Shell(folder, { ...process.env, PATH });
  const sh = shell;
  const log = (i: number) => {
    const file = path.join(folder, `node-${ports[i]}.log`);
    return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  };
  const logs = () => `${[0, 1, 2].map((i) => `--- node-${ports[i]}.log:\n${log(i)}`).join('\n')}\n${sh.transcript()}`;
  const pid = (i: number) => Number(fs.readFileSync(path.join(folder, `node-${ports[i]}.pid`), 'utf8'));
  const running = (i: number) => {
    try {
      process.kill(pid(i), 0);
      return true;
    } catch {
      return false;
    }
  };
  const index = (leader: string) => ports.findIndex((port) => leader === `127.0.0.1:${port}`);

  await sh.run('start', block('start'));
  const joined = (i: number) => log(i).includes('joined the cluster as voter') && log(i).includes('the leader is now');
  await waitFor('both joiners to join and see the leader', () => [1, 2].every(joined), logs);

  const look = (await sh.run('look', block('look'))).trim().split('\n');
  expect(look[0]).toBe(address(0));
  expect(look).toContain(`1|${address(0)}|voter`);
  for (const i of [1, 2]) expect(look.some((line) => line.endsWith(`|${address(i)}|voter`))).toBe(true);
  expect(look).toContain(`piw-dqlite-node: leadership gained: this node (${address(0)}) leads`);
  expect(look.filter((line) => line === `piw-dqlite-node: the leader is now ${address(0)}`)).toHaveLength(2);

  expect(await sh.run('store', block('store'))).toBe("{ image: 'web:1' }\n");

  // The planned stop: node 1 leads (above), hands leadership over and exits.
  const stopped = await sh.run('stop', block('stop'));
  expect(stopped.endsWith("{ image: 'web:1' }\n")).toBe(true);
  await waitFor('the stopped leader to exit', () => !running(0), logs);
  expect(log(0)).toMatch(/leadership handed to 127\.0\.0\.1:\d+\n(.*\n)*piw-dqlite-node: stopped\n$/);
  await waitFor('another node to gain leadership', () => [1, 2].some((i) => log(i).includes('leadership gained')), logs);

  // Back with no flag, serving and seeing the leader again.
  await sh.run('restart', block('restart'));
  await waitFor('the restarted node to see a leader', () => /serving at[^\n]*\n(.*\n)*piw-dqlite-node: (the leader is now|leadership gained)/.test(log(0).split('stopped\n').pop() ?? ''), logs);
  expect(log(0)).not.toContain('holds no node yet');

  // The crash: the store answers through the new leader.
  const crash = (await sh.run('crash', block('crash'))).trim().split('\n');
  expect(crash[0]).toBe("{ image: 'web:1' }");
  const after = index(crash[crash.length - 1]);
  expect(after).toBeGreaterThanOrEqual(0);
  const crashed = [0, 1, 2].find((i) => !running(i));
  expect(crashed).toBeDefined();
  expect(after).not.toBe(crashed);

  await sh.run('end', block('end'));
  await waitFor('every node to stop', () => [0, 1, 2].every((i) => !running(i)), logs);
  for (const i of [0, 1, 2]) expect(log(i)).not.toMatch(/joining failed|holds no node yet|another cluster/);
  // Nothing but the nodes' folders, logs and process ids, and the script.
  expect(spawnSync('ls', [folder], { encoding: 'utf8' }).stdout.trim().split('\n').sort()).toEqual(
    ['node_modules', 'tutorial.js', ...ports.flatMap((port) => [`node-${port}`, `node-${port}.log`, `node-${port}.pid`])].sort(),
  );
}, 180_000);
