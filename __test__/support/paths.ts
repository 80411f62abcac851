// Where the conformance data lives. The traces directory is `$PIW_CONFORMANCE_DIR` when set,
// otherwise the repository's own copy, `__test__/conformance/traces` (README.md there defines
// the format). Fixtures and the hostile-input traces (`hostile/`) sit next to the traces
// directory.

import fs from 'node:fs';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');

/** The conformance data that ships in the repository. */
export const IN_REPO_CONFORMANCE = path.join(REPO_ROOT, '__test__', 'conformance');

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
    : path.join(IN_REPO_CONFORMANCE, 'traces');
  const nested = path.join(traces, 'traces');
  if (fs.existsSync(nested) && fs.statSync(nested).isDirectory()) traces = nested;
  const root = path.dirname(traces);
  return { root, traces, fixtures: path.join(root, 'fixtures'), hostile: path.join(root, 'hostile') };
}

/** Throws a loud error unless `dir` is an existing directory. */
export function requireDirectory(dir: string, what: string): void {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
    throw new Error(
      `${what} not found: ${dir} (PIW_CONFORMANCE_DIR names another trace set; unset, the suite reads __test__/conformance)`,
    );
  }
}
