// lib/loader.js: which binary each platform gets, where it is looked for, and what the error says
// when none loads — checked for every published triple by injecting the platform and the
// filesystem instead of needing those machines.
import fs from 'node:fs';
import path from 'node:path';

const loader = require('../lib/loader.js');

const ROOT = path.join(__dirname, '..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

const PLATFORMS: Array<[string, string, boolean, string]> = [
  ['linux', 'x64', false, 'linux-x64-gnu'],
  ['linux', 'x64', true, 'linux-x64-musl'],
  ['linux', 'arm64', false, 'linux-arm64-gnu'],
  ['linux', 'arm64', true, 'linux-arm64-musl'],
  ['darwin', 'x64', false, 'darwin-x64'],
  ['darwin', 'arm64', false, 'darwin-arm64'],
  ['win32', 'x64', false, 'win32-x64-msvc'],
  ['win32', 'arm64', false, 'win32-arm64-msvc'],
];

test.each(PLATFORMS)('%s %s (musl: %s) loads the %s binary', (platform, arch, musl, triple) => {
  expect(loader.platformTriple(platform, arch, musl)).toBe(triple);
  expect(Object.keys(loader.TARGETS)).toContain(triple);
});

test('package.json, npm/ and the loader agree on the published triples', () => {
  const triples = Object.keys(loader.TARGETS);
  expect(manifest.napi.targets).toEqual(Object.values(loader.TARGETS));
  expect(fs.readdirSync(path.join(ROOT, 'npm')).sort()).toEqual([...triples].sort());
  for (const [platform, arch, musl, triple] of PLATFORMS) {
    const platformManifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', triple, 'package.json'), 'utf8'));
    expect(platformManifest).toMatchObject({
      name: `${manifest.name}-${triple}`,
      version: manifest.version,
      os: [platform],
      cpu: [arch],
      main: `${manifest.napi.binaryName}.${triple}.node`,
    });
    if (platform === 'linux') expect(platformManifest.libc).toEqual([musl ? 'musl' : 'glibc']);
  }
});

test('this machine is detected as what it is', () => {
  const expected = fs.existsSync('/usr/bin/ldd') && fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  expect(loader.isMusl()).toBe(process.platform === 'linux' && expected);
});

/** loadBinding against a fake filesystem: `files` maps a path to what requiring it gives or throws. */
function load(options: {
  triple?: string;
  env?: Record<string, string>;
  files?: Record<string, unknown>;
  installed?: Record<string, string>;
}) {
  const files = options.files ?? {};
  const installed = options.installed ?? {};
  return loader.loadBinding({
    triple: options.triple ?? 'linux-x64-gnu',
    env: options.env ?? {},
    root: '/pkg',
    version: '9.9.9',
    exists: (file: string) => Object.hasOwn(files, file),
    resolveModule: (request: string) => {
      if (Object.hasOwn(installed, request)) return installed[request];
      throw Object.assign(new Error(`Cannot find module '${request}'\nRequire stack: …`), { code: 'MODULE_NOT_FOUND' });
    },
    requireModule: (file: string) => {
      const value = files[file];
      if (value instanceof Error) throw value;
      if (value === undefined) throw new Error(`Cannot find module '${file}'`);
      return value;
    },
  });
}

function loadError(options: Parameters<typeof load>[0]): Error & { code?: string; triple?: string } {
  try {
    load(options);
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected loadBinding to throw');
}

test('a local build next to the package comes first (development checkouts)', () => {
  const local = { from: 'local' };
  const packaged = { from: 'package' };
  expect(
    load({
      files: { '/pkg/pi-workflows-native.linux-x64-gnu.node': local, '/nm/p.node': packaged },
      installed: { 'pi-workflows-native-linux-x64-gnu': '/nm/p.node' },
    }),
  ).toBe(local);
});

test('otherwise the platform package that npm installed as an optional dependency', () => {
  const packaged = { from: 'package' };
  expect(
    load({
      triple: 'darwin-arm64',
      files: { '/nm/p.node': packaged },
      installed: { 'pi-workflows-native-darwin-arm64': '/nm/p.node' },
    }),
  ).toBe(packaged);
});

test('PI_WORKFLOWS_NATIVE_PATH is the only place tried when set', () => {
  const custom = { from: 'custom' };
  const file = path.resolve('/opt/app/addon.node');
  expect(
    load({
      env: { PI_WORKFLOWS_NATIVE_PATH: '/opt/app/addon.node' },
      files: { [file]: custom, '/pkg/pi-workflows-native.linux-x64-gnu.node': {} },
    }),
  ).toBe(custom);
  const error = loadError({
    env: { PI_WORKFLOWS_NATIVE_PATH: '/opt/app/missing.node' },
    files: { '/pkg/pi-workflows-native.linux-x64-gnu.node': {} },
  });
  expect(error.message).toContain(`PI_WORKFLOWS_NATIVE_PATH=${path.resolve('/opt/app/missing.node')}: Cannot find module`);
});

test('a missing platform package: the triple, where it looked, the install command and why npm skips it', () => {
  const error = loadError({});
  expect(error.code).toBe('ERR_PI_WORKFLOWS_NATIVE_BINDING');
  expect(error.triple).toBe('linux-x64-gnu');
  expect(error.message).toBe(
    [
      'pi-workflows-native: cannot load the native binary for linux-x64-gnu (x86_64-unknown-linux-gnu).',
      'Tried:',
      `  - local build ${path.join('/pkg', 'pi-workflows-native.linux-x64-gnu.node')}: not found`,
      '  - package pi-workflows-native-linux-x64-gnu: not installed',
      'The binary ships in the package pi-workflows-native-linux-x64-gnu, an optional dependency of pi-workflows-native.',
      'Install it:  npm install pi-workflows-native-linux-x64-gnu@9.9.9',
      'npm leaves it out when it ran with --omit=optional (or --no-optional), or when node_modules or',
      'package-lock.json were created on another OS, CPU or libc (https://github.com/npm/cli/issues/4828):',
      'then delete node_modules and package-lock.json and run npm install again on this machine.',
      'Or build it from source (needs Rust): clone pi-workflows-native, run npm ci && npm run build, and set',
      'PI_WORKFLOWS_NATIVE_PATH to the pi-workflows-native.linux-x64-gnu.node file it writes.',
    ].join('\n'),
  );
});

test('a binary that is present but does not load says why (wrong libc, architecture, Node-API)', () => {
  const error = loadError({
    triple: 'linux-arm64-musl',
    files: {
      '/pkg/pi-workflows-native.linux-arm64-musl.node': new Error('Error relocating: symbol not found'),
      '/nm/p.node': new Error('/nm/p.node: invalid ELF header\nmore detail'),
    },
    installed: { 'pi-workflows-native-linux-arm64-musl': '/nm/p.node' },
  });
  expect(error.message).toContain('found but failed to load: Error relocating: symbol not found');
  expect(error.message).toContain(
    'package pi-workflows-native-linux-arm64-musl (/nm/p.node): found but failed to load: /nm/p.node: invalid ELF header',
  );
  expect(error.message).not.toContain('more detail');
});

test('an unsupported platform lists the supported ones and how to build from source', () => {
  const error = loadError({ triple: 'freebsd-x64' });
  expect(error.message.split('\n').slice(0, 2)).toEqual([
    'pi-workflows-native: there is no prebuilt native binary for freebsd-x64.',
    `Prebuilt binaries exist for: ${Object.keys(loader.TARGETS).join(', ')}.`,
  ]);
  expect(error.message).toContain('run npm ci && npm run build, and set');
  expect(error.message).not.toContain('npm install pi-workflows-native-freebsd-x64');
});

test('the CI workflow builds and tests every published triple', () => {
  const workflow = fs.readFileSync(path.join(ROOT, '.github', 'workflows', 'CI.yml'), 'utf8');
  for (const target of manifest.napi.targets) {
    expect(workflow).toContain(`target: ${target}\n            build: npm run build -- --target ${target}`);
    // …and once more in a test job (a matrix entry or a list item).
    expect(workflow.split(target).length - 1).toBeGreaterThanOrEqual(3);
  }
});
