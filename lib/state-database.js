'use strict';
// `StateDatabase`: the reference's state database object, over one native connection that the
// stores built on it share.

const os = require('node:os');
const fs = require('node:fs');
const path = require('node:path');

const { canonicalJson, normalizeJson } = require('./canonical-json.js');
const { Connection } = require('./connection.js');
const { binding, checked, parsed, created } = require('./native.js');
const { workflowStatePath } = require('./paths.js');

const NATIVE = Symbol('pi-workflows-native.state');

class StateDatabase {
  constructor(options = {}) {
    const filePath = path.resolve(options.filePath ?? workflowStatePath(options.homeDir));
    // The reference's first file-system call on the path refuses a NUL byte with Node's own
    // TypeError (ERR_INVALID_ARG_VALUE); any fs call validates the path the same way.
    if (filePath.includes('\0')) fs.accessSync(filePath);
    const mode = options.mode ?? 'read-write';
    const native = created(() =>
      binding.NativeState.open(
        JSON.stringify({
          filePath,
          mode,
          checkLegacyState: options.checkLegacyState ?? options.filePath === undefined,
          homeDir: options.homeDir ?? os.homedir(),
          now: Date.now(),
        }),
      ),
    );
    Object.defineProperties(this, {
      filePath: { value: filePath, enumerable: true },
      mode: { value: mode, enumerable: true },
      connection: { value: new Connection(native, filePath, mode === 'read-only'), enumerable: true },
      [NATIVE]: { value: native },
    });
  }

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
    return this.putBlob(Buffer.from(canonicalJson(value), 'utf8'), 'application/json', now);
  }

  putText(value, now = Date.now()) {
    return this.putBlob(Buffer.from(value, 'utf8'), 'text/plain', now);
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
    this.connection._assertOpen();
    checked(this[NATIVE].backupTo(path.resolve(destination)));
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

module.exports = { StateDatabase, nativeStateOf, workflowStatePath };
