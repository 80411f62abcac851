'use strict';
// `npm run pack:local [-- --out DIR] [-- --json]`: the two tarballs a release publishes for this machine,
// made the way the `publish` job of .github/workflows/CI.yml makes them on a version tag
// (`napi artifacts`, then `napi pre-publish`):
//
//   pi-workflows-native-<version>.tgz           the JS package (npm's own file selection), with
//                                               the optionalDependencies `napi pre-publish` adds:
//                                               one platform package per target in package.json
//   pi-workflows-native-<triple>-<version>.tgz  npm/<triple>/ plus the built .node file
//
// The JS package's package.json is the published manifest (`publishedManifest`): the
// repository's without the fields that only developing it uses (scripts, devDependencies, the
// install-time policies, the napi build config). `node scripts/pack.js --write-published-manifest`
// rewrites package.json so in place: the publish job runs it right before `npm publish`.
//
// Prints the two tarball paths and the `npm install` line that installs them (what the README's
// quick start shows); with `--json`, `{ triple, root, platform }` instead, each package as
// `{ tarball, files }` (the absolute tarball path and the paths inside it). Needs a built binary
// for this machine at the package root (`npm run build`); compiles nothing.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { TARGETS, platformTriple } = require('../lib/loader.js');

const ROOT = path.join(__dirname, '..');

/**
 * Runs npm with `args`: through the npm-cli.js that started us when there is one (no shell, so
 * it also works on Windows, where Node refuses to spawn npm.cmd without a shell), else `npm`.
 */
function npm(args, options = {}) {
  const cli = process.env.npm_execpath;
  if (cli !== undefined && /npm-cli\.c?js$/.test(cli)) {
    return execFileSync(process.execPath, [cli, ...args], options);
  }
  const windows = process.platform === 'win32';
  return execFileSync(windows ? 'npm.cmd' : 'npm', args, { ...options, shell: windows });
}

function npmPack(cwd, destination, dryRun = false) {
  const args = ['pack', '--json', '--ignore-scripts', '--pack-destination', destination];
  if (dryRun) args.push('--dry-run');
  const output = npm(args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return JSON.parse(output)[0];
}

/** The platform suffix of every Rust target in package.json's napi config, in its order. */
function publishedTriples(manifest) {
  const byRustTarget = new Map(Object.entries(TARGETS).map(([triple, target]) => [target, triple]));
  return manifest.napi.targets.map((target) => {
    const triple = byRustTarget.get(target);
    if (triple === undefined) throw new Error(`lib/loader.js does not know the napi target ${target}`);
    return triple;
  });
}

/** Fields of package.json that only developing the package uses; none is published. */
const DEV_ONLY = ['scripts', 'devDependencies', 'overrides', 'allowScripts', 'devEngines', 'napi'];

/** The manifest a release publishes: `manifest` without DEV_ONLY, plus `extra` fields. */
function publishedManifest(manifest, extra = {}) {
  const published = Object.fromEntries(Object.entries(manifest).filter(([key]) => !DEV_ONLY.includes(key)));
  return { ...published, ...extra };
}

function writeJson(file, value) {
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** The JS package with its optionalDependencies wired as `napi pre-publish` does. */
function packRoot(manifest, work, out) {
  const stage = path.join(work, 'root');
  const listing = npmPack(ROOT, work, true);
  for (const { path: file } of listing.files) {
    fs.mkdirSync(path.dirname(path.join(stage, file)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, file), path.join(stage, file));
  }
  const optionalDependencies = Object.fromEntries(
    publishedTriples(manifest).map((triple) => [`${manifest.name}-${triple}`, manifest.version]),
  );
  writeJson(path.join(stage, 'package.json'), publishedManifest(manifest, { optionalDependencies }));
  return npmPack(stage, out);
}

/** npm/<triple>/ with the built binary copied in (what `napi artifacts` does in CI). */
function packPlatform(manifest, triple, work, out) {
  const binary = `${manifest.napi.binaryName}.${triple}.node`;
  const built = path.join(ROOT, binary);
  if (!fs.existsSync(built)) throw new Error(`${binary} is not built; run npm run build first`);
  const stage = path.join(work, triple);
  fs.mkdirSync(stage, { recursive: true });
  for (const file of fs.readdirSync(path.join(ROOT, 'npm', triple))) {
    fs.copyFileSync(path.join(ROOT, 'npm', triple, file), path.join(stage, file));
  }
  fs.copyFileSync(built, path.join(stage, binary));
  return npmPack(stage, out);
}

/** What a human reads: the two paths, and the command that installs both (README, Quick start). */
function report({ triple, root, platform }) {
  return [
    `Packed pi-workflows-native for ${triple}:`,
    `  ${root.tarball}`,
    `  ${platform.tarball}`,
    'Install both in your project:',
    `  npm install ${root.tarball} ${platform.tarball}`,
    '',
  ].join('\n');
}

function main() {
  if (process.argv.includes('--write-published-manifest')) {
    const file = path.join(ROOT, 'package.json');
    writeJson(file, publishedManifest(JSON.parse(fs.readFileSync(file, 'utf8'))));
    return;
  }
  const at = process.argv.indexOf('--out');
  const out = path.resolve(at === -1 ? path.join(ROOT, 'target', 'packages') : process.argv[at + 1]);
  fs.mkdirSync(out, { recursive: true });
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const triple = platformTriple();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-workflows-native-pack-'));
  try {
    const described = (packed) => ({
      tarball: path.join(out, packed.filename),
      files: packed.files.map((file) => file.path).sort(),
    });
    const root = described(packRoot(manifest, work, out));
    const platform = described(packPlatform(manifest, triple, work, out));
    const packed = { triple, root, platform };
    process.stdout.write(process.argv.includes('--json') ? `${JSON.stringify(packed)}\n` : report(packed));
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (require.main === module) main();

module.exports = { npm, report, publishedManifest, DEV_ONLY };
