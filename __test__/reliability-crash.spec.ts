// Crashes: a writer killed with SIGKILL at random moments; after each kill the file reopens with
// integrity, every acknowledged write, and nothing half-applied (see reliability/crash.js). The
// long version (100+ kills) runs under `npm run soak`.
import fs from 'node:fs';
import path from 'node:path';

const { runCrashes, checkInvariants } = require('./reliability/crash.js');
const { openStore, runReservation, tempDir } = require('./reliability/common.js');

const KILLS = Number(process.env.PIW_CRASH_KILLS ?? 20);

test(`${KILLS} SIGKILLs of a writer: every reopen is whole and keeps every acknowledged write`, async () => {
  const report = await runCrashes({ kills: KILLS, seed: 20260902 });
  expect(report.problems).toEqual([]);
  expect(report.survived).toBe(KILLS);
  expect(report.acknowledged).toBeGreaterThan(KILLS);
}, 120_000);

test('the half-applied checks see a broken file', () => {
  const dir = tempDir('crash-invariants');
  const projectPath = path.join(dir, 'project');
  fs.mkdirSync(projectPath);
  const store = openStore(path.join(dir, 'state.sqlite'), projectPath);
  try {
    store.putResource({ controller: 'crash', key: 'k', spec: {}, initialStatus: {} });
    store.reserveWorkflowRun(runReservation('r1'));
    expect(checkInvariants(store)).toEqual([]);
    const sql = (text: string) => store.state.connection.prepare(text).run();
    sql("DELETE FROM run_bindings WHERE run_id = 'r1'");
    sql("UPDATE resources SET revision = revision + 1 WHERE resource_type = 'controller'");
    sql('DELETE FROM controller_queue');
    expect(checkInvariants(store)).toEqual([expect.stringMatching(/^run without binding/), expect.stringMatching(/^revision without its event/)]);
  } finally {
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
