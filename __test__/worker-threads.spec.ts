// worker_threads: the addon loaded in the main thread and in several workers at once, and only
// in workers; each thread opens its own store on the same file. Each scenario runs in a fresh
// node process (__test__/workers/drive.js) so a crash shows up as a signal, not a broken Jest.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const DRIVER = path.join(__dirname, 'workers', 'drive.js');

type Share = { id: string; created: number; claimed: string[]; completed: number; exitCode?: number };

let dir: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-workflows-native-workers-'));
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs one scenario to completion (or kills it after 45 s) and returns its JSON report. */
function scenario(name: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DRIVER, name, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0 || stderr !== '') {
        reject(new Error(`${name}: exit ${code ?? signal}\n${stderr}${stdout}`));
        return;
      }
      resolve(JSON.parse(stdout));
    });
  });
}

/** Every resource was claimed exactly once, by someone; every participant did its share. */
function expectFairShares(participants: Share[], resources: number, runs: number) {
  const keys = participants.flatMap(({ id }) => Array.from({ length: resources }, (_, i) => `${id}-${i}`));
  const claimed = participants.flatMap((share) => share.claimed);
  expect([...claimed].sort()).toEqual([...keys].sort());
  for (const share of participants) {
    expect(share.created).toBe(resources);
    expect(share.completed).toBe(runs);
    if (share.exitCode !== undefined) expect(share.exitCode).toBe(0);
  }
}

test('main thread and 4 workers at once, one store each on the same file', async () => {
  const report = await scenario('shared');
  expect(report.participants.map((share: Share) => share.id)).toEqual(['w1', 'w2', 'w3', 'w4', 'main']);
  expectFairShares(report.participants, 12, 3);
  expect(report.summary).toEqual({
    resources: 60,
    done: 60,
    queue: 0,
    controllerEvents: 60 * 4, // created, lease.claimed, status_updated, lease.released
    runsDone: 15,
    runEvents: 15 * 4, // queued, lease.claimed, queue_running, queue_done
  });
});

test('the addon loaded only in workers', async () => {
  const report = await scenario('worker-only');
  expect(report.loadedInMainThread).toBe(false);
  expectFairShares(report.participants, 12, 3);
  expect(report.summary).toEqual({
    resources: 36,
    done: 36,
    queue: 0,
    controllerEvents: 36 * 4,
    runsDone: 9,
    runEvents: 9 * 4,
    exitCode: 0,
  });
});

test('workers terminated mid-write or exiting with the store open leave a usable file', async () => {
  const report = await scenario('terminate');
  expect(report).toMatchObject({ terminated: 1, terminatedInTransaction: 1, unclosed: { claimed: 2, completed: 1 } });
  // The terminated worker's open transaction was rolled back when its thread went away; a
  // leaked connection would have held the write lock for the 5 s busy timeout and then failed.
  expect(report.writeAfterMs).toBeLessThan(2_000);
  expect(report.busyEvents).toBeGreaterThanOrEqual(11);
  expect(report.after).toBe(1);
});
