// The host processes of the fault suites (failover-worker.js: run lifecycles and controller
// claim/settle loops, one JSON line per acknowledged call or error) and what their logs show:
// every acknowledged call still there, no lease held by two holders, when each host answered
// again after a fault.

import { ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

export type Entry = { t: number; worker: string; op: string; [field: string]: unknown };

export const HOSTS = ['host-a', 'host-b', 'host-c'];
/** The controller and the number of resources the hosts claim from. */
export const CONTROLLER = 'failover';
export const RESOURCES = 4;

/** Starts one host on `url` with these cluster options; resolves when it exits. */
export function startHost(url: string, worker: string, stopFile: string, cluster: object, entries: Entry[]): Promise<number | null> {
  const child: ChildProcess = spawn(process.execPath, [path.join(__dirname, 'failover-worker.js'), url, worker, stopFile, JSON.stringify(cluster)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  readline.createInterface({ input: child.stdout! }).on('line', (line) => entries.push(JSON.parse(line) as Entry));
  return new Promise((resolve) => child.once('exit', resolve));
}

/** The resources the hosts claim from, put by a store of its own. */
export function putResources(store: { putResource(options: object): unknown }): void {
  for (let i = 0; i < RESOURCES; i += 1) {
    store.putResource({ controller: CONTROLLER, key: `r${i}`, spec: { i }, initialStatus: {} });
  }
}

/** For each fault instant, how long each host took to complete a call after it. */
export function recoveries(entries: Entry[], instants: number[]): number[][] {
  return instants.map((at) =>
    HOSTS.map((worker) => {
      const next = entries.find((entry) => entry.worker === worker && entry.op !== 'error' && entry.t > at);
      return next === undefined ? Infinity : next.t - at;
    }),
  );
}

type Store = {
  getWorkflowRun(runId: string): { status: string } | undefined;
  getResource(ref: object): { metadata: { resourceVersion: number } };
};

/** The acknowledged calls `check` does not find. */
export function missing(check: Store, entries: Entry[]): string[] {
  const out: string[] = [];
  for (const entry of entries.filter((e) => e.op === 'reserved')) {
    if (check.getWorkflowRun(entry.runId as string) === undefined) out.push(`reserved ${entry.runId}`);
  }
  for (const entry of entries.filter((e) => e.op === 'completed')) {
    if (check.getWorkflowRun(entry.runId as string)?.status !== 'done') out.push(`completed ${entry.runId}`);
  }
  return out;
}

/**
 * Leases held by two holders: two acknowledged claims with the same lease generation, or, in
 * commit order (resource versions), a fenced write of an older holder after a newer one's.
 */
export function doubleHolders(entries: Entry[]): string[] {
  const out: string[] = [];
  const claims = new Map<string, string>();
  for (const entry of entries.filter((e) => e.op === 'claimed')) {
    const at = `${entry.key}#${entry.generation}`;
    if (claims.has(at)) out.push(`${at}: ${claims.get(at)} and ${entry.worker}`);
    claims.set(at, entry.worker);
  }
  for (let i = 0; i < RESOURCES; i += 1) {
    const writes = entries
      .filter((entry) => entry.op === 'written' && entry.key === `r${i}`)
      .sort((a, b) => (a.version as number) - (b.version as number));
    for (let w = 1; w < writes.length; w += 1) {
      if ((writes[w].generation as number) < (writes[w - 1].generation as number)) {
        out.push(`r${i}: generation ${writes[w].generation} wrote after ${writes[w - 1].generation}`);
      }
    }
  }
  return out;
}

/** The errors by code. */
export function errorCounts(entries: Entry[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const entry of entries.filter((e) => e.op === 'error')) counts[String(entry.code)] = (counts[String(entry.code)] ?? 0) + 1;
  return counts;
}

/**
 * The errors a fault of the leader may cause: an unknown outcome of a write, or the fenced write
 * of a holder a newer one superseded (its lease expired meanwhile). Anything else is listed.
 */
export function unexpectedErrors(entries: Entry[]): Entry[] {
  const superseded = (entry: Entry) => entry.what === 'fenced' && entry.message === 'Controller claim is stale';
  return entries.filter((entry) => entry.op === 'error' && entry.code !== 'DQLITE_OUTCOME_UNKNOWN' && !superseded(entry));
}
