'use strict';
// Prints the closing line CI reads (`Summary: N passed, N failed[, N skipped]`) after Jest's own
// summary, and the conformance tally the replayer leaves in its results.

class SummaryReporter {
  onRunComplete(_contexts, results) {
    let conformance = { passed: 0, failed: 0, skipped: 0 };
    for (const file of results.testResults) {
      for (const test of file.testResults) {
        if (test.ancestorTitles[0] !== 'conformance') continue;
        if (test.status === 'passed') conformance.passed += 1;
        else if (test.status === 'failed') conformance.failed += 1;
        else conformance.skipped += 1;
      }
    }
    const total = conformance.passed + conformance.failed + conformance.skipped;
    if (total > 0) {
      process.stdout.write(
        `conformance: ${conformance.passed} passed, ${conformance.failed} failed, ` +
          `${conformance.skipped} skipped of ${total} traces\n`,
      );
    }
    const skipped = results.numPendingTests + results.numTodoTests;
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(
      `Summary: ${results.numPassedTests} passed, ${failed} failed` +
        (skipped > 0 ? `, ${skipped} skipped` : '') +
        '\n',
    );
  }
}

module.exports = SummaryReporter;
