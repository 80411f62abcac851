'use strict';
// `StateDatabase`: the reference's state database object, over one native connection that the
// stores built on it share. Its file-system steps (existence, legacy check, folders, modes) are
// done here with Node's `fs`, in the reference's order, so that their failures are Node's errors;
// the core opens, creates and verifies the file.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { canonicalJson, normalizeJson } = require('./canonical-json.js');
const { Connection } = require('./connection.js');
const { binding, checked, parsed, created } = require('./native.js');
const { SqliteError } = require('./errors.js');
const { workflowStatePath, assertNoLegacyState, RESET_INSTRUCTION } = require('./paths.js');

const NATIVE = Symbol('pi-workflows-native.state');
// The core's spelling of the two media types `blobs.media_type` holds.
const [MEDIA_JSON, MEDIA_TEXT] = binding.NativeState.mediaTypes();

class StateDatabase {
  constructor(options = {}) {
    const filePath = path.resolve(options.filePath ?? workflowStatePath(options.homeDir));
    const mode = options.mode ?? 'read-write';
    const readWrite = mode !== 'read-only';
    // The reference's file-system steps, with Node's `fs` so that their failures are Node's
    // errors (`EACCES: permission denied, mkdir '…'` with errno, code, syscall and path).
    const existed = fs.existsSync(filePath);
    if (!readWrite && !existed) {
      throw new Error(`Pi Workflows state database does not exist: ${filePath}`);
    }
    if (!existed && readWrite) {
      if (options.checkLegacyState ?? options.filePath === undefined) {
        withFilePath(filePath, () => assertNoLegacyState(filePath, options.homeDir ?? os.homedir()));
      }
      createPrivateFolder(path.dirname(filePath));
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
    const native = withFilePath(filePath, () =>
      created(() => binding.NativeState.open(JSON.stringify({ filePath: openPath, mode, now: Date.now() }))),
    );
    if (readWrite) {
      try {
        fs.chmodSync(filePath, 0o600);
      } catch (error) {
        // A failed prune is thrown instead, as the reference's (it prunes before this chmod).
        checked(native.close());
        throw error;
      }
    }
    Object.defineProperties(this, {
      filePath: { value: filePath, enumerable: true },
      mode: { value: mode, enumerable: true },
      connection: { value: new Connection(native, filePath, mode === 'read-only'), enumerable: true },
      [NATIVE]: { value: native },
    });
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

  putJson(value, now = Date.now()) {
    return this.putBlob(Buffer.from(canonicalJson(value), 'utf8'), MEDIA_JSON, now);
  }

  putText(value, now = Date.now()) {
    return this.putBlob(Buffer.from(value, 'utf8'), MEDIA_TEXT, now);
  }

  putBlob(content, mediaType, now = Date.now()) {
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
 */
function createPrivateFolder(dir) {
  if (fs.mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined) fs.chmodSync(dir, 0o700);
}

/**
 * Runs `open`; an error it throws carries the state file's path as a non-enumerable `filePath`
 * and in its stack's first line, leaving message and own enumerable properties the reference's.
 * Node's fs errors name their own path already.
 */
function withFilePath(filePath, open) {
  try {
    return open();
  } catch (error) {
    // An error of the open's prune names the file already (lib/errors.js).
    const named = error instanceof Object && ('path' in error || 'filePath' in error);
    if (error instanceof Object && !named && !String(error.message).includes(filePath)) {
      Object.defineProperty(error, 'filePath', { value: filePath, configurable: true, writable: true });
      if (typeof error.stack === 'string' && error.message !== '' && error.stack.includes(error.message)) {
        const at = error.stack.indexOf(error.message) + error.message.length;
        error.stack = `${error.stack.slice(0, at)} [state file: ${filePath}]${error.stack.slice(at)}`;
      }
    }
    throw error;
  }
}

/** The native connection of a StateDatabase (for the stores built on it). */
function nativeStateOf(state) {
  const native = state instanceof StateDatabase ? state[NATIVE] : undefined;
  if (native === undefined) {
    throw new TypeError('options.state must be a StateDatabase of pi-workflows-native');
  }
  return native;
}

module.exports = { StateDatabase, nativeStateOf, workflowStatePath, withFilePath };
