// Where the conformance data lives. The traces directory is `$PIW_CONFORMANCE_DIR` when set,
// otherwise `../shared/conformance/traces` relative to the repository root (the `shared/`
// folder is a sibling of the checkout). Fixtures and the hostile-input traces (`hostile/`) sit
// next to the traces directory.

import fs from 'node:fs';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');

export type ConformancePaths = {
  /** The conformance directory (`copyFixture.from` is relative to it). */
  root: string;
  traces: string;
  fixtures: string;
  /** The hostile-input traces (bad and unusual arguments, closed and read-only stores). */
  hostile: string;
};

/**
 * Resolves the data directories. `PIW_CONFORMANCE_DIR` names the traces directory; if it names
 * the conformance directory instead (it holds `traces/`), that is accepted too.
 */
export function conformancePaths(env: NodeJS.ProcessEnv = process.env): ConformancePaths {
  let traces = env.PIW_CONFORMANCE_DIR
    ? path.resolve(env.PIW_CONFORMANCE_DIR)
    : path.resolve(REPO_ROOT, '..', 'shared', 'conformance', 'traces');
  const nested = path.join(traces, 'traces');
  if (fs.existsSync(nested) && fs.statSync(nested).isDirectory()) traces = nested;
  const root = path.dirname(traces);
  return { root, traces, fixtures: path.join(root, 'fixtures'), hostile: path.join(root, 'hostile') };
}

/** Throws a loud error unless `dir` is an existing directory. */
export function requireDirectory(dir: string, what: string): void {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
    throw new Error(
      `${what} not found: ${dir} (set PIW_CONFORMANCE_DIR or check out shared/ next to the repository)`,
    );
  }
}
