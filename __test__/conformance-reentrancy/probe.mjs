// A broad re-entrancy probe (not a test: it needs the reference): every method's realistic base
// arguments (../shared/difftest/methods.mjs), each field of the first argument turned into a
// getter that calls the store (a read, a controller write, a run write) and then answers the
// field's value. One line per case: the outer outcome, the nested outcomes, what the state then
// holds. Run it on the reference and on this package and diff the two outputs:
//
//   TZ=UTC PIW_DIFFTEST=<difftest dir> PIW_REF=<reference dir> node probe.mjs ref > ref.txt
//   TZ=UTC PIW_DIFFTEST=<difftest dir> PIW_NATIVE=<package dir> node probe.mjs native > native.txt
//   diff ref.txt native.txt
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const { buildState, METHODS, T0, CASE_CLOCK } = await import(pathToFileURL(path.join(process.env.PIW_DIFFTEST, 'methods.mjs')).href);
const which = process.argv[2];
let Store;
if (which === 'ref') {
  const { loadImpl } = await import(pathToFileURL(path.join(process.env.PIW_REF, 'bench', 'impl.mjs')).href);
  Store = (await loadImpl({ impl: 'ts' })).SqliteControllerStore;
} else Store = createRequire(import.meta.url)(process.env.PIW_NATIVE).SqliteControllerStore;
const RealDate = Date; let now = T0;
class FD extends RealDate { constructor(...a) { if (a.length === 0) super(now); else super(...a); } static now() { return now; } }
globalThis.Date = FD;
const seen = new Map();
const mask = (t) => t.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g, (r) => { if (!seen.has(r)) seen.set(r, `<r${seen.size}>`); return seen.get(r); });
const show = (f) => { try { const v = f(); return 'ok ' + mask(JSON.stringify(v) ?? 'undefined').slice(0, 300); } catch (e) { return `threw ${e?.constructor?.name}: ${mask(String(e?.message))}`; } };
const NESTED = {
  read: (s) => s.listResources({ controller: 'jobs' }).length,
  write: (s) => s.recordEvent({ controller: 'jobs', key: 'alpha', type: 'nested.write' }).type,
  run: (s) => s.recordRunEvent({ runId: 'r-a', type: 'nested', actor: { type: 'host', id: 'h' } })?.type,
};
const base = fs.mkdtempSync(path.join(os.tmpdir(), 'rp-'));
const fixture = path.join(base, 'fixture.sqlite');
{ now = T0; const s = new Store(fixture, { projectPath: '/piw-probe/project' }); globalThis.S = buildState(s, () => { now += 1000; }); s.close(); }
const S = globalThis.S;
let n = 0;
for (const [method, spec] of Object.entries(METHODS)) {
  if (method === 'close') continue;
  for (const [bi, make] of spec.bases.entries()) {
    const args0 = make(S);
    const fields = args0[0] && typeof args0[0] === 'object' && !Array.isArray(args0[0]) ? Object.keys(args0[0]) : [];
    for (const field of fields) for (const [kind, nested] of Object.entries(NESTED)) {
      const file = path.join(base, `c${n++}.sqlite`);
      fs.copyFileSync(fixture, file);
      now = CASE_CLOCK;
      const s = new Store(file, { projectPath: '/piw-probe/project' });
      const args = make(S); const arg = { ...args[0] }; const value = arg[field]; const log = [];
      Object.defineProperty(arg, field, { enumerable: true, configurable: true, get() { log.push(show(() => nested(s))); return value; } });
      args[0] = arg;
      const out = show(() => s[method](...args));
      const after = show(() => [s.listEvents({ limit: -1 }).length, s.listResources().map((r) => `${r.metadata.key}:${r.metadata.resourceVersion}`), s.listWorkflowRuns().map((r) => `${r.runId}:${r.status}`)]);
      console.log(`${method}#${bi}.${field} ${kind}: ${out} | nested ${log.length} ${[...new Set(log)].join(' ; ')} | ${after}`);
      try { s.close(); } catch {}
    }
  }
}
fs.rmSync(base, { recursive: true, force: true });
