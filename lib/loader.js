'use strict';
// Finds and loads the compiled addon (`pi-workflows-native.<triple>.node`).
//
// Hand-written instead of the loader `napi build --js` generates, for three reasons: the file is
// committed, so a checkout works without regenerating it; it knows exactly the triples this
// package publishes (and says so when the platform is not one of them); and when the binary is
// missing its error names the triple, the package that carries it, the command that installs it
// and why npm may have skipped it — "Cannot find native binding" alone leaves users guessing.
//
// Where it looks, in order:
//   1. `$PI_WORKFLOWS_NATIVE_PATH` — an explicit `.node` file (bundled apps, custom builds). When
//      set it is the only place tried, so a wrong path fails loudly instead of falling back.
//   2. `<package root>/pi-workflows-native.<triple>.node` — a local build (`npm run build`).
//   3. the platform package `pi-workflows-native-<triple>` — what `npm install` brings in as an
//      optional dependency of this package.

const fs = require('node:fs');
const path = require('node:path');

const BINARY_NAME = 'pi-workflows-native';
const PACKAGE_NAME = 'pi-workflows-native';
const PATH_VARIABLE = 'PI_WORKFLOWS_NATIVE_PATH';
const PACKAGE_ROOT = path.join(__dirname, '..');

/** The napi-rs platform suffixes with a published binary, and the Rust target each is built for. */
const TARGETS = {
  'linux-x64-gnu': 'x86_64-unknown-linux-gnu',
  'linux-x64-musl': 'x86_64-unknown-linux-musl',
  'linux-arm64-gnu': 'aarch64-unknown-linux-gnu',
  'linux-arm64-musl': 'aarch64-unknown-linux-musl',
  'darwin-x64': 'x86_64-apple-darwin',
  'darwin-arm64': 'aarch64-apple-darwin',
  'win32-x64-msvc': 'x86_64-pc-windows-msvc',
  'win32-arm64-msvc': 'aarch64-pc-windows-msvc',
};

/** Whether this Linux process runs on musl libc (Alpine) rather than glibc. */
function isMusl() {
  try {
    // /usr/bin/ldd is a script naming its libc on both; reading it is fast and never spawns.
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    // No ldd: ask Node's diagnostic report, which names the glibc it runs on (absent on musl).
  }
  const report = process.report;
  if (report === undefined || typeof report.getReport !== 'function') return false;
  const excludeNetwork = report.excludeNetwork;
  try {
    report.excludeNetwork = true; // the network part of a report can take seconds
    const { header } = report.getReport();
    return header.glibcVersionRuntime === undefined;
  } catch {
    return false;
  } finally {
    report.excludeNetwork = excludeNetwork;
  }
}

/** The napi-rs platform suffix (`linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`, …). */
function platformTriple(platform = process.platform, arch = process.arch, musl = undefined) {
  if (platform === 'linux') {
    const libc = (musl ?? isMusl()) ? 'musl' : 'gnu';
    return `${platform}-${arch}-${libc}`;
  }
  if (platform === 'win32') return `${platform}-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function describe(error) {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0];
}

function installAdvice(triple, version) {
  const platformPackage = `${PACKAGE_NAME}-${triple}`;
  return [
    `The binary ships in the package ${platformPackage}, an optional dependency of ${PACKAGE_NAME}.`,
    `Install it:  npm install ${platformPackage}@${version}`,
    'npm leaves it out when it ran with --omit=optional (or --no-optional), or when node_modules or',
    'package-lock.json were created on another OS, CPU or libc (https://github.com/npm/cli/issues/4828):',
    'then delete node_modules and package-lock.json and run npm install again on this machine.',
    `Or build it from source (needs Rust): clone ${PACKAGE_NAME}, run npm ci && npm run build, and set`,
    `${PATH_VARIABLE} to the ${BINARY_NAME}.${triple}.node file it writes.`,
  ];
}

/** The error thrown when no binary loads; `tried` lists every place looked at and what happened. */
function bindingError(triple, tried, version) {
  const supported = Object.hasOwn(TARGETS, triple);
  const lines = supported
    ? [`${PACKAGE_NAME}: cannot load the native binary for ${triple} (${TARGETS[triple]}).`]
    : [
        `${PACKAGE_NAME}: there is no prebuilt native binary for ${triple}.`,
        `Prebuilt binaries exist for: ${Object.keys(TARGETS).join(', ')}.`,
      ];
  lines.push('Tried:', ...tried.map((attempt) => `  - ${attempt}`));
  if (supported) {
    lines.push(...installAdvice(triple, version));
  } else {
    lines.push(
      `Build it from source (needs Rust): clone ${PACKAGE_NAME}, run npm ci && npm run build, and set`,
      `${PATH_VARIABLE} to the ${BINARY_NAME}.${triple}.node file it writes.`,
    );
  }
  const error = new Error(lines.join('\n'));
  error.code = 'ERR_PI_WORKFLOWS_NATIVE_BINDING';
  error.triple = triple;
  return error;
}

function isMissingModule(error, request) {
  return (
    error !== null &&
    typeof error === 'object' &&
    error.code === 'MODULE_NOT_FOUND' &&
    typeof error.message === 'string' &&
    error.message.includes(`'${request}'`)
  );
}

/**
 * Loads the addon. Every input is injectable so tests can ask what would happen on another
 * platform; callers use the defaults.
 */
function loadBinding({
  triple = platformTriple(),
  env = process.env,
  root = PACKAGE_ROOT,
  requireModule = require,
  resolveModule = require.resolve,
  exists = fs.existsSync,
  version = require('../package.json').version,
} = {}) {
  const tried = [];
  const explicit = env[PATH_VARIABLE];
  if (explicit !== undefined && explicit !== '') {
    const file = path.resolve(explicit);
    try {
      return requireModule(file);
    } catch (error) {
      tried.push(`${PATH_VARIABLE}=${file}: ${describe(error)}`);
      throw bindingError(triple, tried, version);
    }
  }

  const local = path.join(root, `${BINARY_NAME}.${triple}.node`);
  if (exists(local)) {
    try {
      return requireModule(local);
    } catch (error) {
      tried.push(`local build ${local}: found but failed to load: ${describe(error)}`);
    }
  } else {
    tried.push(`local build ${local}: not found`);
  }

  const platformPackage = `${PACKAGE_NAME}-${triple}`;
  let resolved;
  try {
    resolved = resolveModule(platformPackage);
  } catch (error) {
    tried.push(
      isMissingModule(error, platformPackage)
        ? `package ${platformPackage}: not installed`
        : `package ${platformPackage}: ${describe(error)}`,
    );
    throw bindingError(triple, tried, version);
  }
  try {
    return requireModule(resolved);
  } catch (error) {
    tried.push(`package ${platformPackage} (${resolved}): found but failed to load: ${describe(error)}`);
    throw bindingError(triple, tried, version);
  }
}

module.exports = { TARGETS, isMusl, platformTriple, loadBinding };
