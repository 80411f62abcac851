// `npm ci` is quiet on every Node the project supports for development (package.json
// `devEngines`): no locked package refuses those Nodes (EBADENGINE), and every locked package
// with an install script is approved in `allowScripts` (npm 11 warns about the others and skips
// their scripts). And the Node lines `engines` and `devEngines` name are the ones CI tests.
import fs from 'node:fs';
import path from 'node:path';

const semver = require('semver');
const { NODES } = require('../scripts/test-node-versions.js');

const ROOT = path.join(__dirname, '..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
const locked = Object.entries(lock.packages as Record<string, Record<string, any>>).filter(([key]) => key !== '');

/** The oldest version of each major line a range allows: `^20.19.0 || ^22.13.0 || >=24` → 20.19.0, 22.13.0, 24.0.0. */
function lowestOfEachLine(range: string): string[] {
  return new semver.Range(range).set.map((comparators: { semver: { version: string } }[]) => {
    const lowest = semver.minVersion(new semver.Range(comparators.map(String).join(' ')));
    return lowest.version;
  });
}

test('the supported development Node is stated in devEngines, and this Node is one of them', () => {
  expect(manifest.devEngines.runtime).toMatchObject({ name: 'node', onFail: 'warn' });
  expect(lowestOfEachLine(manifest.devEngines.runtime.version)).toEqual(['20.19.0', '22.13.0', '24.0.0']);
  expect(semver.satisfies(process.version, manifest.devEngines.runtime.version)).toBe(true);
});

test('no package npm installs on this machine refuses the oldest of each supported Node line', () => {
  const nodes = lowestOfEachLine(manifest.devEngines.runtime.version);
  const installed = locked.filter(([key]) => fs.existsSync(path.join(ROOT, key)));
  expect(installed.length).toBeGreaterThan(100);
  const refusing = installed.flatMap(([key, entry]) =>
    nodes
      .filter((node) => entry.engines?.node !== undefined && !semver.satisfies(node, entry.engines.node))
      .map((node) => `${key.replace(/^.*node_modules\//, '')} (${entry.engines.node}) refuses ${node}`),
  );
  expect(refusing).toEqual([]);
});

test('every locked package with an install script is approved in allowScripts', () => {
  const withScripts = locked.filter(([, entry]) => entry.hasInstallScript).map(([key]) => key.replace(/^.*node_modules\//, ''));
  expect(withScripts).toEqual(['better-sqlite3']);
  expect(Object.keys(manifest.allowScripts).sort()).toEqual(withScripts.sort());
  expect(Object.values(manifest.allowScripts).every((allowed) => allowed === true)).toBe(true);
});

test('engines and devEngines name the Node lines CI tests: 20 by npm test, the others by test:node-versions', () => {
  // .ci/run runs `npm test` on the machine's Node 20, then the suite again on each release
  // scripts/test-node-versions.js pins.
  expect(manifest.engines.node).toBe(manifest.devEngines.runtime.version);
  const lines = lowestOfEachLine(manifest.engines.node).map((version) => semver.major(version));
  expect(lines).toEqual([20, ...NODES.map(({ version }: { version: string }) => semver.major(version))]);
  for (const { version } of NODES) expect([version, semver.satisfies(version, manifest.engines.node)]).toEqual([version, true]);
});
