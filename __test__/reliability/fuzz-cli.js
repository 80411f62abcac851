'use strict';
// `node fuzz-cli.js <calls> <seed>`: one fuzzing process for the soak script. Prints progress
// lines and, at the end, `RESULT <json>`; exits 1 when a property failed.

const { runFuzz } = require('./fuzz.js');

const calls = Number(process.argv[2] ?? 100_000);
const seed = Number(process.argv[3] ?? 1);
let reported = 0;
try {
  const report = runFuzz({
    calls,
    seed,
    onProgress(stats) {
      if (stats.calls - reported >= 50_000) {
        reported = stats.calls;
        process.stdout.write(`progress ${stats.calls}\n`);
      }
    },
  });
  const messages = [...report.messages].sort((a, b) => b[1] - a[1]);
  process.stdout.write(`RESULT ${JSON.stringify({ ...report, messages })}\n`);
} catch (error) {
  process.stdout.write(`FAILED ${JSON.stringify({ seed, message: String(error.message ?? error) })}\n`);
  process.exitCode = 1;
}
