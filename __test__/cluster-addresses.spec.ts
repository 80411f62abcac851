// A `dqlite://` address that cannot work fails the constructor at once, with its own `code` and a
// message that says what is wrong — malformed addresses before any I/O, a port where nothing
// listens or where another service answers after one round — and a server that drips its replies
// cannot hold the constructor (and the event loop) past reconnectDeadlineMs. No cluster needed:
// the servers are small Node processes on 127.0.0.1 (the constructor blocks this one's loop).

import { ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import readline from 'node:readline';

const { SqliteControllerStore } = require('../index.js');

type Thrown = { code?: string; message: string };

/** What `new SqliteControllerStore(url, …)` throws, and how long it took. */
function open(url: string, cluster: object = {}): { error: Thrown; ms: number } {
  const started = Date.now();
  try {
    new SqliteControllerStore(url, { projectPath: '/piw-addresses', cluster }).close();
  } catch (error) {
    return { error: error as Thrown, ms: Date.now() - started };
  }
  throw new Error(`${url} opened`);
}

const servers: ChildProcess[] = [];

/** A Node process running `body` (a server that listens on 127.0.0.1:0); its port. */
async function server(body: string): Promise<number> {
  const script = `${body}\nserver.listen(0, '127.0.0.1', () => console.log(server.address().port));\nsetTimeout(() => process.exit(0), 60000);`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(child);
  const line = await new Promise<string>((resolve) => readline.createInterface({ input: child.stdout! }).once('line', resolve));
  return Number(line);
}

/** A port on 127.0.0.1 where nothing listens (bound, then closed). */
async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

afterAll(() => {
  for (const child of servers) child.kill();
});

describe('dqlite:// addresses that cannot work', () => {
  it.each([
    ['dqlite://', 'no node addresses and no database name'],
    ['dqlite:///pi-workflows', 'no node addresses'],
    ['dqlite://127.0.0.1:9001', 'no database name'],
    ['dqlite://127.0.0.1:99999/x', 'out of range (1 to 65535)'],
    ['dqlite://127.0.0.1:/x', 'has no port after'],
    ['dqlite://127.0.0.1:1:2/x', 'is not a host name or IP address'],
    ['dqlite://127.0.0.1:9001/pi workflows', "unsupported character ' '"],
  ])('%s fails at once with DQLITE_BAD_ADDRESS', (url, says) => {
    const { error, ms } = open(url);
    expect(error.code).toBe('DQLITE_BAD_ADDRESS');
    expect(error.message).toContain(`"${url}"`);
    expect(error.message).toContain(says);
    expect(ms).toBeLessThan(100);
  });

  it('a host name that does not resolve fails once, saying so', () => {
    const { error } = open('dqlite://piw-no-such-node.invalid:9001/x');
    expect(error.code).toBe('DQLITE_UNRESOLVED');
    expect(error.message).toContain('piw-no-such-node.invalid:9001 cannot be resolved');
  });

  it('every address refusing fails after one round, with a hint', async () => {
    const ports = [await closedPort(), await closedPort()];
    const { error, ms } = open(`dqlite://${ports.map((p) => `127.0.0.1:${p}`).join(',')}/x`);
    expect(error.code).toBe('DQLITE_REFUSED');
    expect(error.message).toContain('is the dqlite node running, and is the port right?');
    expect(ms).toBeLessThan(2_000);
  });

  it('an HTTP server where a node was expected is reported at once', async () => {
    const port = await server(`const server = require('node:http').createServer((req, res) => res.end('hello'));`);
    const { error, ms } = open(`dqlite://127.0.0.1:${port}/x`);
    expect(error.code).toBe('DQLITE_NOT_DQLITE');
    expect(error.message).toContain(`127.0.0.1:${port} does not answer the dqlite handshake`);
    expect(ms).toBeLessThan(2_000);
  });

  it('a server dripping one byte every 500 ms holds the constructor no longer than its deadline', async () => {
    const port = await server(
      `const server = require('node:net').createServer((socket) => {
        socket.on('error', () => {});
        const drip = setInterval(() => socket.write(Buffer.from([1])), 500);
        socket.on('close', () => clearInterval(drip));
      });`,
    );
    const { error, ms } = open(`dqlite://127.0.0.1:${port}/x`, { reconnectDeadlineMs: 3_000, requestTimeoutMs: 2_000 });
    expect(error.code).toBe('DQLITE_UNAVAILABLE');
    expect(ms).toBeLessThan(3_000 + 1_000);
  });

  it('the reply limits are options of their own', () => {
    expect(() => new SqliteControllerStore('dqlite://127.0.0.1:1/x', { cluster: { maxReplyRows: 0 } })).toThrow(
      'options.cluster.maxReplyRows must be a positive integer (rows)',
    );
    expect(() => new SqliteControllerStore('dqlite://127.0.0.1:1/x', { cluster: { maxReplyBytes: 1.5 } })).toThrow(
      'options.cluster.maxReplyBytes must be a positive integer (bytes)',
    );
  });
});
