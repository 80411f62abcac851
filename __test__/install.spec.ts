// The package as users meet it: `npm pack` (the JS package plus this machine's platform
// package, as a release publishes them), `npm install` of the tarballs into a fresh project with
// no Rust toolchain reachable and no network (an empty npm cache and --offline), then a
// TypeScript file compiled against the installed types and run with node. Also: what a user sees
// when npm left the platform package out.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(__dirname, '..');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const FIXTURE = path.join(__dirname, 'fixtures', 'install', 'consumer.ts');
const { npm } = require('../scripts/pack.js');

type Packed = { tarball: string; files: string[] };
type Packages = { triple: string; root: Packed; platform: Packed };

let work: string;
let packages: Packages;
let manifest: Record<string, any>;

/** PATH without any folder that holds cargo or rustc, so nothing at install time can compile. */
function pathWithoutRust(): string {
  const rustTools = ['cargo', 'rustc', 'cargo.exe', 'rustc.exe'];
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => dir !== '' && !rustTools.some((tool) => fs.existsSync(path.join(dir, tool))))
    .join(path.delimiter);
}

function installEnv(): NodeJS.ProcessEnv {
  const nowhere = path.join(work, 'no-rust');
  return {
    ...process.env,
    PATH: pathWithoutRust(),
    CARGO_HOME: nowhere,
    RUSTUP_HOME: nowhere,
    npm_config_cache: path.join(work, 'npm-cache'),
    npm_config_offline: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    npm_config_loglevel: 'error',
    PI_WORKFLOWS_NATIVE_PATH: '',
  };
}

/** A fresh project with `tarballs` installed the way a user installs packages. */
function freshProject(name: string, tarballs: string[]): string {
  const project = path.join(work, name);
  fs.mkdirSync(project, { recursive: true });
  fs.writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({ name, version: '1.0.0', private: true }, null, 2),
  );
  npm(['install', ...tarballs], { cwd: project, env: installEnv(), stdio: 'pipe' });
  return project;
}

let installed: string | undefined;

/** The project with both tarballs installed (made once, by whichever test needs it first). */
function installedProject(): string {
  installed ??= freshProject('consumer', [packages.root.tarball, packages.platform.tarball]);
  return installed;
}

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-workflows-native-install-'));
  const output = execFileSync(process.execPath, [path.join(ROOT, 'scripts', 'pack.js'), '--out', work, '--json'], {
    encoding: 'utf8',
  });
  packages = JSON.parse(output);
  manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
});

afterAll(() => {
  if (work !== undefined) fs.rmSync(work, { recursive: true, force: true });
});

test('the JS package holds only JavaScript and types; the binary is in the platform package', () => {
  expect(packages.root.files).toEqual([
    'LICENSE',
    'README.md',
    'index.d.ts',
    'index.js',
    ...fs
      .readdirSync(path.join(ROOT, 'lib'))
      .filter((file) => file.endsWith('.js'))
      .map((file) => `lib/${file}`)
      .sort(),
    'package.json',
  ]);
  const binary = `${manifest.napi.binaryName}.${packages.triple}.node`;
  expect(packages.platform.files).toEqual(['LICENSE', 'README.md', 'package.json', binary]);
  const platformManifest = JSON.parse(
    fs.readFileSync(path.join(ROOT, 'npm', packages.triple, 'package.json'), 'utf8'),
  );
  expect(platformManifest).toMatchObject({
    name: `${manifest.name}-${packages.triple}`,
    version: manifest.version,
    main: binary,
    files: [binary],
  });
  // Nothing runs at install time: no lifecycle script, no binding.gyp for npm to build.
  for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) {
    expect(manifest.scripts?.[hook]).toBeUndefined();
    expect(platformManifest.scripts?.[hook]).toBeUndefined();
  }
});

/** A file of a packed tarball, as npm would unpack it. */
function fromTarball(tarball: string, file: string): Buffer {
  return execFileSync('tar', ['-xOzf', tarball, `package/${file}`]);
}

test('the published package.json has no dev-only field, and has exports, keywords and files', () => {
  const published = JSON.parse(fromTarball(packages.root.tarball, 'package.json').toString('utf8'));
  const { DEV_ONLY } = require('../scripts/pack.js');
  expect(DEV_ONLY).toEqual(expect.arrayContaining(['scripts', 'devDependencies']));
  for (const field of DEV_ONLY) expect(manifest[field]).toBeDefined(); // each is a field we have
  expect(Object.keys(published).filter((field) => DEV_ONLY.includes(field))).toEqual([]);
  expect(published).toEqual({
    ...Object.fromEntries(Object.entries(manifest).filter(([field]) => !DEV_ONLY.includes(field))),
    optionalDependencies: expect.any(Object),
  });
  expect(published.exports).toEqual({
    '.': { types: './index.d.ts', default: './index.js' },
    './package.json': './package.json',
  });
  expect(published.keywords).toEqual(expect.arrayContaining(['pi-workflows', 'sqlite']));
  expect(published.files).toEqual(['index.js', 'index.d.ts', 'lib/']);
  expect(fromTarball(packages.root.tarball, 'LICENSE').equals(fs.readFileSync(path.join(ROOT, 'LICENSE')))).toBe(true);
});

test('every platform package has the LICENSE and the repository of the JS package', () => {
  const triples = fs.readdirSync(path.join(ROOT, 'npm'));
  expect(triples.length).toBe(manifest.napi.targets.length);
  for (const triple of triples) {
    const folder = path.join(ROOT, 'npm', triple);
    const platformManifest = JSON.parse(fs.readFileSync(path.join(folder, 'package.json'), 'utf8'));
    expect([triple, platformManifest.repository, platformManifest.license]).toEqual([triple, manifest.repository, manifest.license]);
    expect([triple, fs.readFileSync(path.join(folder, 'LICENSE'), 'utf8')]).toEqual([
      triple,
      fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8'),
    ]);
  }
  // And what this machine's platform tarball holds.
  const packed = JSON.parse(fromTarball(packages.platform.tarball, 'package.json').toString('utf8'));
  expect(packed.repository).toEqual(manifest.repository);
  expect(fromTarball(packages.platform.tarball, 'LICENSE').equals(fs.readFileSync(path.join(ROOT, 'LICENSE')))).toBe(true);
});

test('publishedManifest drops the dev-only fields and keeps the others', () => {
  const { publishedManifest } = require('../scripts/pack.js');
  expect(publishedManifest({ name: 'x', scripts: { test: 'jest' }, devDependencies: {}, napi: {}, files: ['a'] })).toEqual({
    name: 'x',
    files: ['a'],
  });
});

test('npm install of the tarballs, then a TypeScript consumer compiles and runs a store', () => {
  // The install below runs where no Rust toolchain can be found.
  expect(spawnSync('cargo', ['--version'], { env: installEnv() }).error).toMatchObject({ code: 'ENOENT' });
  const project = installedProject();
  expect(fs.readdirSync(path.join(project, 'node_modules')).filter((name) => !name.startsWith('.')).sort()).toEqual([
    'pi-workflows-native',
    `pi-workflows-native-${packages.triple}`,
  ]);
  const lock = JSON.parse(fs.readFileSync(path.join(project, 'package-lock.json'), 'utf8'));
  expect(lock.packages['node_modules/pi-workflows-native'].optionalDependencies).toEqual(
    Object.fromEntries(
      fs.readdirSync(path.join(ROOT, 'npm')).map((triple) => [`pi-workflows-native-${triple}`, manifest.version]),
    ),
  );

  fs.mkdirSync(path.join(project, 'src'));
  fs.copyFileSync(FIXTURE, path.join(project, 'src', 'consumer.ts'));
  fs.writeFileSync(
    path.join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'commonjs',
        moduleResolution: 'node',
        strict: true,
        skipLibCheck: false,
        rootDir: 'src',
        outDir: 'dist',
        typeRoots: [path.join(ROOT, 'node_modules', '@types')],
        types: ['node'],
      },
      include: ['src'],
    }),
  );
  const compiled = spawnSync(process.execPath, [TSC, '-p', project], { encoding: 'utf8' });
  expect(compiled.stdout + compiled.stderr).toBe('');
  expect(compiled.status).toBe(0);

  const run = spawnSync(process.execPath, [path.join(project, 'dist', 'consumer.js'), project], {
    cwd: project,
    encoding: 'utf8',
    env: { ...installEnv(), PI_WORKFLOWS_NATIVE_PATH: '' },
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  expect(JSON.parse(run.stdout)).toEqual({
    resource: { generation: 1, phase: 'ready' },
    settled: true,
    notFound: 'ResourceNotFoundError: Controller resource not found: deployments/missing',
    run: { reserved: 'queued', claimed: 'starting', running: true, completed: true, finished: 'done' },
    events: ['run.queued', 'lease.claimed', 'run.queue_running', 'run.queue_done'],
  });
});

test('the installed package exports its entry point and package.json, nothing deeper', () => {
  const project = installedProject();
  const script = `
    const results = {};
    for (const id of ['pi-workflows-native', 'pi-workflows-native/package.json', 'pi-workflows-native/lib/loader.js']) {
      try { require(id); results[id] = 'ok'; } catch (error) { results[id] = error.code; }
    }
    console.log(JSON.stringify(results));`;
  const run = spawnSync(process.execPath, ['-e', script], { cwd: project, encoding: 'utf8', env: installEnv() });
  expect(run.stderr).toBe('');
  expect(JSON.parse(run.stdout)).toEqual({
    'pi-workflows-native': 'ok',
    'pi-workflows-native/package.json': 'ok',
    'pi-workflows-native/lib/loader.js': 'ERR_PACKAGE_PATH_NOT_EXPORTED',
  });
});

test('ES modules get every named export of the installed package', () => {
  const project = installedProject();
  const names = [
    'SqliteControllerStore',
    'StateDatabase',
    'workflowStatePath',
    'ResourceConflictError',
    'ResourceNotFoundError',
    'EffectRequestConflictError',
    'WorkflowRequestConflictError',
    'SqliteError',
  ];
  const source = `import { ${names.join(', ')} } from 'pi-workflows-native';
const store = new SqliteControllerStore(workflowStatePath(process.argv[1]), { projectPath: process.argv[1] });
const created = store.putResource({ controller: 'esm', key: 'k', spec: {}, initialStatus: {} });
store.close();
console.log(JSON.stringify({ generation: created.metadata.generation, classes: [${names.slice(3).join(', ')}].map((c) => c.name) }));`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', source, path.join(project, 'esm-home')], {
    cwd: project,
    encoding: 'utf8',
    env: installEnv(),
  });
  expect(run.stderr).toBe('');
  expect(JSON.parse(run.stdout)).toEqual({ generation: 1, classes: names.slice(3) });
});

test('without the platform package, loading names the triple, the package and the fix', () => {
  const project = freshProject('no-binary', [packages.root.tarball]);
  const loaded = spawnSync(process.execPath, ['-e', "require('pi-workflows-native')"], {
    cwd: project,
    encoding: 'utf8',
    env: installEnv(),
  });
  expect(loaded.status).not.toBe(0);
  const platformPackage = `pi-workflows-native-${packages.triple}`;
  expect(loaded.stderr).toContain(`cannot load the native binary for ${packages.triple}`);
  expect(loaded.stderr).toContain(`package ${platformPackage}: not installed`);
  expect(loaded.stderr).toContain(`npm install ${platformPackage}@${manifest.version}`);
  expect(loaded.stderr).toContain('ERR_PI_WORKFLOWS_NATIVE_BINDING');
});
