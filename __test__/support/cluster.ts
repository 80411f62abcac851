// A local dqlite cluster for the cluster suites: three nodes on loopback (`piw-dqlite-node` when
// PIW_DQLITE_NODE names it, as `npm run test:cluster` does, else `dqlite-demo`), started and
// stopped by `dqlite-test-cluster` (crates/dqlite-wire: it installs Debian's libdqlite0 and
// go-dqlite when the demo is missing, picks free 127.0.0.1 ports, and removes the nodes' data when
// it exits). The suite talks to it line by line: `leader`, `kill N`, `restart N`, `voters N`.

import { ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

import { REPO_ROOT } from './paths';

const BINARY = path.join(REPO_ROOT, 'target', 'debug', 'dqlite-test-cluster');

export class TestCluster {
  private readonly replies: string[] = [];
  private waiting: ((line: string) => void) | undefined;
  private stderr = '';

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    readonly addresses: string[],
    lines: readline.Interface,
  ) {
    lines.on('line', (line) => this.deliver(line));
  }

  /** Starts the nodes and waits until they formed a cluster (bounded by the harness: 60 s). */
  static async start(nodes = 3): Promise<TestCluster> {
    if (!fs.existsSync(BINARY)) {
      throw new Error(`${BINARY} is missing: cargo build -p dqlite-wire --bin dqlite-test-cluster`);
    }
    const child = spawn(BINARY, [String(nodes)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    const lines = readline.createInterface({ input: child.stdout });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`dqlite-test-cluster exited (${code}): ${stderr}`)));
    });
    const { addresses } = JSON.parse(first) as { addresses: string[] };
    const cluster = new TestCluster(child, addresses, lines);
    child.stderr.on('data', (chunk) => (cluster.stderr += String(chunk)));
    return cluster;
  }

  /** `dqlite://a,b,c/<database>`. */
  url(database: string): string {
    return `dqlite://${this.addresses.join(',')}/${database}`;
  }

  private deliver(line: string): void {
    const waiting = this.waiting;
    if (waiting === undefined) this.replies.push(line);
    else {
      this.waiting = undefined;
      waiting(line);
    }
  }

  /** Sends one command; resolves to its `ok` value, rejects on `error`. */
  async command(line: string): Promise<string> {
    this.child.stdin.write(`${line}\n`);
    const reply =
      this.replies.shift() ??
      (await new Promise<string>((resolve) => {
        this.waiting = resolve;
      }));
    if (reply.startsWith('error')) throw new Error(`${line}: ${reply}\n${this.stderr.slice(-2000)}`);
    return reply.replace(/^ok ?/, '');
  }

  /** Stops every node and removes their data. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin.end('stop\n');
    await exited;
  }
}

/**
 * A three-node (or `nodes`) cluster for a suite: started before its tests (handed to `started`)
 * and stopped after them, whatever happened.
 */
export function clusterForSuite(started: (cluster: TestCluster) => void, nodes = 3): void {
  let cluster: TestCluster | undefined;
  beforeAll(async () => {
    cluster = await TestCluster.start(nodes);
    started(cluster);
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
