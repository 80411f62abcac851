'use strict';
// Stack traces that start at the caller.
//
// An error the store raises is built a few calls deep (errorFromWire, readReply, #invoke), so its
// stack would begin with this package's frames. `fromCaller` re-captures the stack above the
// public method, so the first frame is the caller's line. An error raised by the caller's own
// code while the store reads the arguments (a getter, a `toJSON`) is left as it is: its top frame
// is the caller's code, which is what it should show.
//
// `store.async` rejections are settled on a later turn, when the caller's synchronous frames are
// gone. By default their stack is trimmed the same way and keeps V8's `at async …` frames of the
// awaiting callers (free). With `asyncCallSites: true` each call records its call site (a stack
// capture, several µs per call: too slow to be the default) and a rejection carries that stack.

const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const OWN_FILES = [path.join(ROOT, 'index.js:'), path.join(ROOT, 'lib') + path.sep];

function isOwnFrame(line) {
  return OWN_FILES.some((prefix) => line.includes(prefix));
}

/** Frames of the runtime itself (`JSON.stringify`, `node:internal/…`), neither ours nor the caller's. */
function isRuntimeFrame(line) {
  return line.includes('(<anonymous>)') || line.includes('(native)') || /\(node:|at node:/.test(line);
}

/** Whether the first frame of `error.stack` that is not the runtime's is this package's. */
function raisedHere(error) {
  if (error === null || typeof error !== 'object') return false;
  const stack = error.stack;
  if (typeof stack !== 'string') return false;
  for (const line of stack.split('\n')) {
    if (!line.startsWith('    at ')) continue;
    if (isRuntimeFrame(line)) continue;
    return isOwnFrame(line);
  }
  return false;
}

/** A stack's first lines: the error's name and message (with any note added to them), no frames. */
function stackHeader(stack) {
  const cut = stack.indexOf('\n    at ');
  return cut === -1 ? stack : stack.slice(0, cut);
}

/**
 * `error` with its stack re-captured above `publicFunction` (the frame the caller called). The
 * header is kept as it was, so a note added to it (the state file of an open error) survives.
 */
function fromCaller(error, publicFunction) {
  if (!raisedHere(error) || !Object.isExtensible(error)) return error;
  const header = stackHeader(error.stack);
  Error.captureStackTrace(error, publicFunction);
  error.stack = header + error.stack.slice(stackHeader(error.stack).length);
  return error;
}

/** The stack of the moment of the call, for `asyncCallSites` (frames above `publicFunction` omitted). */
function callSite(publicFunction) {
  const site = {};
  Error.captureStackTrace(site, publicFunction);
  return site;
}

/** A rejection's error with the frames of its call site (from `callSite`) after its own message. */
function withCallSite(error, site) {
  if (!raisedHere(error) || !Object.isExtensible(error)) return error;
  const header = stackHeader(error.stack);
  const frames = site.stack.indexOf('\n');
  Object.defineProperty(error, 'stack', {
    value: frames === -1 ? header : header + site.stack.slice(frames),
    writable: true,
    configurable: true,
    enumerable: false,
  });
  return error;
}

module.exports = { fromCaller, callSite, withCallSite };
