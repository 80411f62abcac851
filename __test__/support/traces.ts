// Finds the traces to replay: every `traces/*.json` (sorted by file name), then the fixture trace
// `fixtures/state-0.16.1.expected.json`, then every `hostile/*.json`. Problems are returned as
// entries, so each becomes a failing test instead of silently shrinking the suite.

import fs from 'node:fs';
import path from 'node:path';

import { ConformancePaths } from './paths';
import { loadTrace, Trace } from './replayer';

export const FIXTURE_TRACE = 'state-0.16.1.expected.json';

export type TraceEntry = { file: string; trace: Trace } | { file: string; error: Error };

function jsonFiles(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .sort()
    .filter((name) => name.endsWith('.json'))
    .map((name) => path.join(dir, name));
}

export function traceEntries(paths: ConformancePaths): TraceEntry[] {
  const files: string[] = [];
  if (!fs.existsSync(paths.traces) || !fs.statSync(paths.traces).isDirectory()) {
    return [
      {
        file: paths.traces,
        error: new Error(
          `conformance traces directory not found: ${paths.traces} ` +
            '(PIW_CONFORMANCE_DIR names another trace set; unset, the suite reads __test__/conformance)',
        ),
      },
    ];
  }
  files.push(...jsonFiles(paths.traces));
  const entries: TraceEntry[] = [];
  if (files.length === 0) {
    entries.push({ file: paths.traces, error: new Error(`no *.json traces in ${paths.traces}`) });
  }
  files.push(path.join(paths.fixtures, FIXTURE_TRACE));
  if (!fs.existsSync(paths.hostile) || !fs.statSync(paths.hostile).isDirectory()) {
    entries.push({ file: paths.hostile, error: new Error(`hostile traces directory not found: ${paths.hostile}`) });
  } else {
    const hostile = jsonFiles(paths.hostile);
    if (hostile.length === 0) {
      entries.push({ file: paths.hostile, error: new Error(`no *.json traces in ${paths.hostile}`) });
    }
    files.push(...hostile);
  }
  const names = new Set<string>();
  for (const file of files) {
    try {
      if (!fs.existsSync(file)) throw new Error(`missing trace file ${file}`);
      const trace = loadTrace(file);
      if (names.has(trace.name)) throw new Error(`duplicate trace name ${trace.name} in ${file}`);
      names.add(trace.name);
      entries.push({ file, trace });
    } catch (error) {
      entries.push({ file, error: error as Error });
    }
  }
  return entries;
}
