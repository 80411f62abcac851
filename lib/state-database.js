'use strict';
// `StateDatabase`: the reference's state database object, over one native connection that the
// stores built on it share. Its file-system steps (existence, legacy check, folders, modes) are
// done here with Node's `fs`, in the reference's order, so that their failures are Node's errors;
// the core opens, creates and verifies the file.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { canonicalJson, normalizeJson } = require('./canonical-json.js');
const { ClusterClock } = require('./cluster-clock.js');
const { Connection } = require('./connection.js');
const { binding, checked, parsed, created } = require('./native.js');
const { SqliteError } = require('./errors.js');
const { workflowStatePath, assertNoLegacyState, RESET_INSTRUCTION } = require('./paths.js');

const NATIVE = Symbol('pi-workflows-native.state');
/** A cluster state's ClusterClock (lib/cluster-clock.js); a file's has none. */
const CLOCK = Symbol('pi-workflows-native.clock');
// The core's spelling of the two media types `blobs.media_type` holds.
const [MEDIA_JSON, MEDIA_TEXT] = binding.NativeState.mediaTypes();

/** Whether `filePath` names a dqlite cluster (`dqlite://host:port,…/database`) instead of a file. */
function isClusterAddress(filePath) {
  return typeof filePath === 'string' && filePath.startsWith('dqlite://');
}

const CLUSTER_OPTIONS = ['connectTimeoutMs', 'requestTimeoutMs', 'reconnectDeadlineMs', 'maxReplyRows', 'maxReplyBytes'];

/** `options.cluster` checked: positive integers (milliseconds, or the reply limits), nothing else. */
function clusterOptions(given) {
  if (given === undefined) return {};
  if (given === null || typeof given !== 'object') throw new TypeError('options.cluster must be an object');
  const out = {};
  for (const [name, value] of Object.entries(given)) {
    if (!CLUSTER_OPTIONS.includes(name)) {
      throw new TypeError(`Unknown cluster option ${JSON.stringify(name)} (known: ${CLUSTER_OPTIONS.join(', ')})`);
    }
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value <= 0) {
      const unit = name.endsWith('Ms') ? 'milliseconds' : name === 'maxReplyRows' ? 'rows' : 'bytes';
      throw new TypeError(`options.cluster.${name} must be a positive integer (${unit})`);
    }
    out[name] = value;
  }
  return out;
}

/**
 * Says once per file, as a Node warning, why its run index is off: the file at the journal's
 * name is not this package's or not private (docs/troubleshooting.md, "PIW_RUNLOG_REFUSED").
 * The store works on: its polls read through SQL, as the reference's do.
 */
const warnedRunlogs = new Set();
function warnOfRefusedRunlog(reason) {
  if (reason === null || reason === undefined || warnedRunlogs.has(reason)) return;
  warnedRunlogs.add(reason);
  process.emitWarning(`pi-workflows-native: the run index is off: ${reason}`, {
    code: 'PIW_RUNLOG_REFUSED',
    detail:
      'The store reads every run poll through SQL instead (correct, slower). If you did not put that file there, ' +
      'find out who did; then remove it (it holds nothing the state file lacks) and reopen the store.',
  });
}

class StateDatabase {
  constructor(options = {}) {
    if (isClusterAddress(options.filePath)) {
      // A dqlite cluster: no file-system step; the core connects, creates the schema in an
      // empty database and verifies it as a file's.
      const url = options.filePath;
      const mode = options.mode ?? 'read-write';
      const cluster = { ...clusterOptions(options.cluster), url };
      const native = withFilePath(url, () =>
        created(() => binding.NativeState.open(JSON.stringify({ cluster, mode, now: Date.now() }))),
      );
      Object.defineProperties(this, {
        filePath: { value: url, enumerable: true },
        mode: { value: mode, enumerable: true },
        connection: { value: new Connection(native, url, mode === 'read-only'), enumerable: true },
        [NATIVE]: { value: native },
        [CLOCK]: { value: new ClusterClock(native) },
      });
      return;
    }
    const filePath = path.resolve(options.filePath ?? workflowStatePath(options.homeDir));
    const mode = options.mode ?? 'read-write';
    const readWrite = mode !== 'read-only';
    // The reference's file-system steps, with Node's `fs` so that their failures are Node's
    // errors (`EACCES: permission denied, mkdir '…'` with errno, code, syscall and path).
    const existed = fs.existsSync(filePath);
    if (!readWrite && !existed) {
      const error = new Error(`Pi Workflows state database does not exist: ${filePath}`);
      if (tildeIn(options.filePath)) throw withHint(error, tildeHint(options.filePath));
      throw clusterAddressIn(options.filePath) ? withHint(error, clusterAddressHint(options.filePath)) : error;
    }
    if (!existed && readWrite) {
      refuseUnexpandedTilde(options.filePath, filePath);
      refuseClusterAddressWithoutScheme(options.filePath, filePath);
      if (options.checkLegacyState ?? options.filePath === undefined) {
        withFilePath(filePath, () => assertNoLegacyState(filePath, options.homeDir ?? os.homedir()));
      }
      withFilePath(filePath, () => createPrivateFolder(path.dirname(filePath)));
    }
    // SQLite would open the name up to the NUL (the reference did, and then failed its chmod of
    // the full name): Node's own refusal of the name, before anything is created.
    if (readWrite && filePath.includes('\0')) fs.chmodSync(filePath, 0o600);
    // better-sqlite3 opens the name trimmed of white space (after path.resolve only trailing
    // white space can be left); the steps above and the chmod below use the full name.
    const openPath = filePath.trim();
    if (openPath !== filePath && !fs.existsSync(openPath)) {
      withFilePath(filePath, () => refuseMissingTrimmedName(filePath, existed, readWrite));
    }
    if (existed) withFilePath(filePath, () => (readWrite ? requireWritable(openPath) : refuseForeignSidecars(openPath)));
    const native = withFilePath(filePath, () => {
      try {
        return created(() => binding.NativeState.open(JSON.stringify({ filePath: openPath, mode, now: Date.now() })));
      } catch (error) {
        throw explainNativeOpenError(error, openPath);
      }
    });
    if (readWrite) {
      try {
        fs.chmodSync(filePath, 0o600);
      } catch (error) {
        // A failed prune is thrown instead, as the reference's (it prunes before this chmod).
        checked(native.close());
        throw error.code === 'EPERM' ? withHint(error, foreignOwnerHint(filePath)) : error;
      }
    }
    Object.defineProperties(this, {
      filePath: { value: filePath, enumerable: true },
      mode: { value: mode, enumerable: true },
      connection: { value: new Connection(native, filePath, mode === 'read-only'), enumerable: true },
      [NATIVE]: { value: native },
    });
    warnOfRefusedRunlog(native.runlogRefusal);
  }

  /** Closes the connection; then throws a failure of the open's blob prune no call reported yet. */
  close() {
    this.connection.close();
  }

  /** BEGIN IMMEDIATE … COMMIT around `operation`; ROLLBACK when it throws. Not re-entrant. */
  transaction(operation) {
    if (this.mode === 'read-only') {
      throw new Error('Cannot mutate a read-only Pi Workflows database');
    }
    this.connection.exec('BEGIN IMMEDIATE');
    try {
      const result = operation();
      this.connection.exec('COMMIT');
      return result;
    } catch (error) {
      if (this.connection.inTransaction) this.connection.exec('ROLLBACK');
      throw error;
    }
  }

  /**
   * On a dqlite cluster, this host's offset from the leader's clock, which every call that
   * passes no `now` adds to `Date.now()` (docs/cluster.md, "Clocks"); `null` for a file.
   */
  get clusterClock() {
    return this[CLOCK]?.reading() ?? null;
  }

  putJson(value, now = currentTime(this)) {
    return this.putBlob(Buffer.from(canonicalJson(value), 'utf8'), MEDIA_JSON, now);
  }

  putText(value, now = currentTime(this)) {
    return this.putBlob(Buffer.from(value, 'utf8'), MEDIA_TEXT, now);
  }

  putBlob(content, mediaType, now = currentTime(this)) {
    this.connection._assertOpen();
    return Buffer.from(parsed(this[NATIVE].putBlob(content, mediaType, now)), 'hex');
  }

  readBlob(hash) {
    this.connection._assertOpen();
    const blob = parsed(this[NATIVE].readBlob(hash));
    if (blob === undefined) return undefined;
    return {
      hash: Buffer.from(blob.hash, 'hex'),
      mediaType: blob.mediaType,
      byteLength: blob.byteLength,
      content: Buffer.from(blob.content, 'hex'),
    };
  }

  readJson(hash) {
    this.connection._assertOpen();
    return normalizeJson(JSON.parse(parsed(this[NATIVE].readJsonText(hash))));
  }

  integrityCheck() {
    this.connection._assertOpen();
    checked(this[NATIVE].integrityCheck());
  }

  pruneUnreferencedBlobs() {
    if (this.mode === 'read-only') {
      throw new Error('Cannot prune blobs through a read-only Pi Workflows database');
    }
    this.connection._assertOpen();
    return parsed(this[NATIVE].pruneUnreferencedBlobs());
  }

  async backup(destination) {
    // The reference's order; its folder step is Node's, so its failure is Node's error.
    const target = path.resolve(destination);
    if (target === this.filePath) throw new Error('Backup destination must differ from the live database');
    fs.mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
    this.connection._assertOpen();
    checked(this[NATIVE].backupTo(target));
  }
}

/**
 * The reference's answers when the trimmed name better-sqlite3 opens does not exist, without
 * the file it left there: read-only, SQLite could not open it; read-write, SQLite created it and
 * then the final chmodSync of the full name failed (when that name did not exist either) or the
 * new, empty file was refused as not a state file.
 */
function refuseMissingTrimmedName(filePath, existed, readWrite) {
  if (!readWrite) throw new SqliteError('unable to open database file', 'SQLITE_CANTOPEN');
  if (!existed) fs.chmodSync(filePath, 0o600);
  throw new Error(RESET_INSTRUCTION);
}

/**
 * `fs.mkdirSync(dir, { recursive: true, mode: 0o700 })`, then 0700 on `dir` itself only when
 * this call created it (so a umask cannot loosen it). The reference also chmod-ed a folder
 * that already existed: the system temp folder, or a shared one (which then failed with EPERM).
 * Node's error when a file stands where a folder must be (EEXIST, ENOTDIR) gets a hint naming it.
 */
function createPrivateFolder(dir) {
  try {
    if (fs.mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined) fs.chmodSync(dir, 0o700);
  } catch (error) {
    const blocker = error.code === 'EEXIST' || error.code === 'ENOTDIR' ? fileInTheWay(dir) : undefined;
    if (blocker === undefined) throw error;
    const why =
      blocker === dir
        ? `${dir} is a file, not a folder, so the state file cannot be created in it.`
        : `${blocker} is a file, not a folder, so the state file's folder ${dir} cannot be created.`;
    throw withHint(error, `${why} Move or rename that file, or choose another state path.`);
  }
}

/** The nearest of `dir` and its ancestors that exists and is not a folder. */
function fileInTheWay(dir) {
  for (let at = dir; ; at = path.dirname(at)) {
    const stat = statOrUndefined(at); // missing, or below a file (ENOTDIR): look further up
    if (stat !== undefined && !stat.isDirectory()) return at;
    if (path.dirname(at) === at) return undefined;
  }
}

/** Whether a state path as the caller gave it starts with `~`, which only a shell expands. */
function tildeIn(given) {
  return typeof given === 'string' && /^~(?=$|[\\/])/.test(given);
}

function tildeHint(given) {
  const rest = given.replace(/^~[\\/]*/, '');
  return (
    'Node does not expand "~" (a shell does): the path is relative to the current folder. ' +
    `Give an absolute path, such as path.join(os.homedir(), ${JSON.stringify(rest)}), ` +
    "or no path at all for Pi Workflows' own file (workflowStatePath())."
  );
}

/**
 * A read-write open of `~/…` whose `~` folder does not exist in the current folder: the
 * reference creates `./~/…` and a state file there; here, an error that says why.
 */
function refuseUnexpandedTilde(given, filePath) {
  if (!tildeIn(given) || fs.existsSync(path.resolve('~'))) return;
  throw withHint(
    new Error(`Pi Workflows state path ${JSON.stringify(given)} starts with "~", which would create ${filePath}`),
    tildeHint(given),
  );
}

/** `host:port[,host:port…]/name`: a dqlite cluster address that lost its `dqlite://`. */
const CLUSTER_ADDRESS = /^(?:[\w.-]+|\[[\da-fA-F:.]+\]):\d{1,5}(?:,(?:[\w.-]+|\[[\da-fA-F:.]+\]):\d{1,5})*\/[^/\\]+$/;

/** Whether a state path as the caller gave it looks like a cluster address without its scheme. */
function clusterAddressIn(given) {
  return typeof given === 'string' && CLUSTER_ADDRESS.test(given);
}

function clusterAddressHint(given) {
  return (
    `For a dqlite cluster, pass ${JSON.stringify(`dqlite://${given}`)}. ` +
    'For a local state file of that name, create its folder first.'
  );
}

/**
 * A read-write open of `host:port,…/name` (a cluster address without `dqlite://`) whose first
 * folder does not exist: the reference creates a folder named after the addresses and a state
 * file in it, which no one means; here, an error that says what to pass.
 */
function refuseClusterAddressWithoutScheme(given, filePath) {
  if (!clusterAddressIn(given) || fs.existsSync(path.resolve(given.slice(0, given.indexOf('/'))))) return;
  throw withHint(
    new Error(
      `Pi Workflows state path ${JSON.stringify(given)} looks like a dqlite cluster address without "dqlite://", ` +
        `which would create ${filePath}`,
    ),
    clusterAddressHint(given),
  );
}

/**
 * A read-write open of a file this user cannot write: Node's EACCES of the check, with a hint
 * (SQLite would open it read-only without a word, and the open would fail later on a chmod).
 */
function requireWritable(file) {
  try {
    fs.accessSync(file, fs.constants.W_OK);
  } catch (error) {
    if (error.code !== 'EACCES' && error.code !== 'EPERM' && error.code !== 'EROFS') throw error;
    const stat = fs.statSync(file);
    throw withHint(
      error,
      `You cannot write this state file (owner uid ${stat.uid}, mode ${octal(stat.mode)}). ` +
        'To read it, open it with readOnly: true; to change it, run as its owner.',
    );
  }
}

/**
 * A read-only open of another user's state file that has no `-wal` or `-shm` beside it, in a
 * folder this user can write: SQLite would create them owned by this user (and with the main
 * file's mode), and the owner's stores could then no longer write them. Refused instead.
 */
function refuseForeignSidecars(file) {
  if (typeof process.geteuid !== 'function' || process.geteuid() === 0) return;
  const stat = fs.statSync(file);
  if (!stat.isFile() || stat.uid === process.geteuid()) return;
  const missing = ['-wal', '-shm'].filter((suffix) => !fs.existsSync(file + suffix));
  if (missing.length === 0) return;
  try {
    fs.accessSync(path.dirname(file), fs.constants.W_OK);
  } catch {
    return; // nothing can be created there: SQLite's own error follows, with its hint
  }
  throw withHint(
    new Error(
      `Pi Workflows state database belongs to another user (uid ${stat.uid}); a read-only open would ` +
        `create ${missing.map((suffix) => path.basename(file) + suffix).join(' and ')} beside it as uid ` +
        `${process.geteuid()}, which its owner could not write: ${file}`,
    ),
    sidecarHint(stat.uid),
  );
}

function sidecarHint(owner) {
  return (
    `Open it as its owner (uid ${owner}), or copy the file (with its -wal, if there is one) into a ` +
    'folder of yours while no store writes to it, and open the copy.'
  );
}

function foreignOwnerHint(file) {
  const stat = statOrUndefined(file);
  const owner = stat === undefined ? 'another user' : `uid ${stat.uid}`;
  return (
    `The state file belongs to ${owner}: a read-write open makes it private (mode 0600), which only ` +
    'its owner can do. Open it as its owner, or with readOnly: true to read it.'
  );
}

/** SQLite's open errors that have a cause the path shows: a folder, an unwritable folder. */
function explainNativeOpenError(error, file) {
  if (statOrUndefined(file)?.isDirectory()) {
    return withHint(
      error,
      `${file} is a folder. Give the path of the state file, such as ${path.join(file, 'state.sqlite')}.`,
    );
  }
  if (error?.code === 'SQLITE_READONLY_DIRECTORY') {
    return withHint(
      error,
      `Reading a state file needs its ${path.basename(file)}-wal and -shm files, and they can neither be ` +
        `found nor created in ${path.dirname(file)}, which you cannot write. Open it as a user who can ` +
        'write that folder, or copy the file (with its -wal, if there is one) into a folder of yours while ' +
        'no store writes to it, and open the copy.',
    );
  }
  return error;
}

/** `fs.statSync(file)`, or undefined for any error (missing, ENOTDIR, ELOOP, EACCES). */
function statOrUndefined(file) {
  try {
    return fs.statSync(file);
  } catch {
    return undefined;
  }
}

const octal = (mode) => `0${(mode & 0o777).toString(8)}`;

/**
 * `error` with `hint` (why, and what to do) as a non-enumerable property and as a line of its
 * stack after the message, so the message and the own enumerable properties stay the
 * reference's and a printed error still shows it.
 */
function withHint(error, hint) {
  Object.defineProperty(error, 'hint', { value: hint, configurable: true, writable: true });
  if (typeof error.stack === 'string' && error.message !== '' && error.stack.includes(error.message)) {
    const at = error.stack.indexOf(error.message) + error.message.length;
    error.stack = `${error.stack.slice(0, at)}\n  hint: ${hint}${error.stack.slice(at)}`;
  }
  return error;
}

/**
 * Runs `open`; an error it throws carries the state file's path as a non-enumerable `filePath`
 * and in its stack's first line, leaving message and own enumerable properties the reference's.
 * An error whose message names the state file already is left as it is.
 */
function withFilePath(filePath, open) {
  try {
    return open();
  } catch (error) {
    // An error of the open's prune names the file already (`filePath`, lib/errors.js).
    if (error !== null && typeof error === 'object' && !('filePath' in error) && !String(error.message).includes(filePath)) {
      Object.defineProperty(error, 'filePath', { value: filePath, configurable: true, writable: true });
      if (typeof error.stack === 'string' && error.message !== '' && error.stack.includes(error.message)) {
        const at = error.stack.indexOf(error.message) + error.message.length;
        error.stack = `${error.stack.slice(0, at)} [state file: ${filePath}]${error.stack.slice(at)}`;
      }
    }
    throw error;
  }
}

/** A cluster state's ClusterClock, `undefined` for a file's. */
function clusterClockOf(state) {
  return state[CLOCK];
}

/** The time of a call that passes no `now`: `Date.now()`, on a cluster moved onto its leader's clock. */
function currentTime(state) {
  const clock = state[CLOCK];
  return clock === undefined ? Date.now() : clock.now();
}

/** The native connection of a StateDatabase (for the stores built on it). */
function nativeStateOf(state) {
  const native = state instanceof StateDatabase ? state[NATIVE] : undefined;
  if (native === undefined) {
    throw new TypeError('options.state must be a StateDatabase of pi-workflows-native');
  }
  return native;
}

module.exports = { StateDatabase, clusterClockOf, currentTime, nativeStateOf, workflowStatePath, withFilePath };
