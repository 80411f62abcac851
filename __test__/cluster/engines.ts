// The same calls on a file and on a cluster (held-writes.cluster.ts, async-held-writes.cluster.ts):
// a fresh database of either engine with a store and a read-write connection on it, what a
// caller sees of an error, and a forged blob that makes a later put of a document conflict.

import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import type { TestCluster } from '../support/cluster';

const { SqliteControllerStore, StateDatabase } = require('../../index.js');

export type Store = InstanceType<typeof SqliteControllerStore>;
export type Rows = { all(...values: unknown[]): Record<string, unknown>[]; get(...values: unknown[]): any; run(...values: unknown[]): unknown };
export type Connection = { prepare(sql: string): Rows };
export type Engine = 'file' | 'cluster';

let databases = 0;

/**
 * A store (on `projectPath`) and a read-write connection on a fresh database of `engine`: a
 * file in a temporary folder, or a database named after `name` on `cluster`.
 */
export function openEngine(
  engine: Engine,
  cluster: TestCluster,
  name: string,
  projectPath: string,
): { store: Store; connection: Connection; close(): void } {
  let address: string;
  let folder: string | undefined;
  if (engine === 'file') {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), `piw-${name}-`));
    address = path.join(folder, 'state.sqlite');
  } else {
    databases += 1;
    address = cluster.url(`${name}-${Date.now().toString(36)}-${databases}`);
  }
  const store = new SqliteControllerStore(address, { projectPath });
  const state = new StateDatabase({ filePath: address });
  return {
    store,
    connection: state.connection,
    close() {
      state.close();
      store.close();
      if (folder !== undefined) fs.rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** What a caller sees of a thrown error. */
export function seen(error: unknown): object {
  const own = Object.fromEntries(Object.entries(error as object));
  return { class: (error as Error).constructor.name, name: (error as Error).name, message: (error as Error).message, own };
}

/** Stores other bytes under the hash of `text`: a later put of `text` conflicts. */
export function forge(connection: Connection, text: string): void {
  const hash = crypto.createHash('sha256').update(text).digest();
  const other = Buffer.from(`${text} `);
  connection
    .prepare('INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at) VALUES (?, ?, ?, ?, 0)')
    .run(hash, 'application/json', other.length, other);
}
