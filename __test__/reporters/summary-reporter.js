'use strict';
// Prints the closing line CI reads (`Summary: N passed, N failed[, N skipped]`) and the
// conformance tally. Jest prints its own summary after every reporter has run, so the lines are
// written when the process exits, which makes `Summary:` the very last line of the output.

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const lines = summaryLines(results);
    process.once('exit', () => process.stdout.write(lines));
  }
}

// Title suffix of a trace that does not replay yet (`it.failing`: "passed" means it failed as
// expected). Kept in step with __test__/support/known-failing.ts.
const KNOWN_FAILING_SUFFIX = ' [known failing]';

/** Tests under the top-level `conformance` describe, one per trace. */
function conformanceTally(results) {
  const tally = { passed: 0, failed: 0, skipped: 0, knownFailing: 0 };
  for (const file of results.testResults) {
    for (const test of file.testResults) {
      if (test.ancestorTitles[0] !== 'conformance') continue;
      if (test.title.endsWith(KNOWN_FAILING_SUFFIX) && test.status === 'passed') tally.knownFailing += 1;
      else if (test.status === 'passed') tally.passed += 1;
      else if (test.status === 'failed') tally.failed += 1;
      else tally.skipped += 1;
    }
  }
  return tally;
}

function summaryLines(results) {
  let text = '';
  const conformance = conformanceTally(results);
  const traces = conformance.passed + conformance.failed + conformance.skipped + conformance.knownFailing;
  if (traces > 0) {
    const known = conformance.knownFailing > 0 ? `, ${conformance.knownFailing} known failing` : '';
    text +=
      `conformance: ${conformance.passed} passed, ${conformance.failed} failed, ` +
      `${conformance.skipped} skipped${known} of ${traces} traces\n`;
  }
  const skipped = results.numPendingTests + results.numTodoTests;
  const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
  text += `Summary: ${results.numPassedTests} passed, ${failed} failed`;
  text += skipped > 0 ? `, ${skipped} skipped\n` : '\n';
  return text;
}

module.exports = SummaryReporter;
