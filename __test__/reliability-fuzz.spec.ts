// Hostile input: a fixed-seed sample of the property-based fuzzer over every public method
// (see reliability/fuzz.js). `npm run soak` runs 1,000,000 calls.
import fc from 'fast-check';

const { runFuzz, callArbitrary } = require('./reliability/fuzz.js');
const { METHODS } = require('../lib/methods.js');

const CALLS = Number(process.env.PIW_FUZZ_CALLS ?? 3_000);

test(`${CALLS} hostile calls: no crash, every rejection a clean Error, rejected calls change nothing`, () => {
  const report = runFuzz({ calls: CALLS, seed: 20260903 });
  expect(report.calls).toBeGreaterThanOrEqual(CALLS);
  // A healthy mix: many calls get through to real writes, many are refused.
  expect(report.returned).toBeGreaterThan(CALLS / 5);
  expect(report.rejected).toBeGreaterThan(CALLS / 5);
}, 120_000);

test('the call generator covers every public method', () => {
  const seen = new Set((fc.sample(callArbitrary(), { seed: 1, numRuns: 5_000 }) as Array<{ method: string }>).map((call) => call.method));
  for (const { name } of METHODS) expect(seen).toContain(name);
  expect(seen).toContain('close');
});
