'use strict';
// `node bench/statement-fold.js`: whether writing several tables in one statement — an INSERT
// into a TEMP view whose INSTEAD OF trigger runs the statements — is faster than running them
// one by one (docs/performance.md, "Statements per write"). The write is the controller loop's
// bookkeeping (`recordEvent`'s): the resource revision's compare-and-set, the payload put and
// the event insert, on the store's schema in a WAL file on /dev/shm with `synchronous = FULL`,
// through better-sqlite3. Two rows: one transaction per write (what a store call does), and
// 1,000 writes per transaction (the statements alone). Medians of PIW_FOLD_ROUNDS (7) runs of
// PIW_FOLD_WRITES (3,000) writes each, the two forms interleaved. better-sqlite3 pays more per
// statement than rusqlite does, so a fold that does not win here does not win in the store.

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const Database = require('better-sqlite3');

const ROUNDS = Number(process.env.PIW_FOLD_ROUNDS ?? 7);
const WRITES = Number(process.env.PIW_FOLD_WRITES ?? 3000);
const SCHEMA = fs.readFileSync(path.join(__dirname, '..', 'src', 'state', 'schema.sql'), 'utf8');
const PUT = `INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
  VALUES (?, ?, ?, ?, ?) ON CONFLICT(blob_hash) DO UPDATE SET byte_length = -1
  WHERE NOT (media_type = excluded.media_type AND byte_length = excluded.byte_length AND content = excluded.content)`;
const FOLD = `
  CREATE TEMP VIEW piw_event(expected, resource_id, now, event_id, event_type, actor_type, actor_id,
    lease_generation, payload_hash, byte_length, content)
    AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL;
  CREATE TEMP TRIGGER piw_event_insert INSTEAD OF INSERT ON piw_event BEGIN
    UPDATE resources SET revision = revision + 1, updated_at = NEW.now
      WHERE resource_id = NEW.resource_id AND revision = NEW.expected;
    SELECT RAISE(ABORT, 'Resource revision conflict') WHERE changes() = 0;
    INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
      VALUES (NEW.payload_hash, 'application/json', NEW.byte_length, NEW.content, NEW.now)
      ON CONFLICT(blob_hash) DO UPDATE SET byte_length = -1
      WHERE NOT (media_type = excluded.media_type AND byte_length = excluded.byte_length AND content = excluded.content);
    INSERT INTO events(event_id, resource_id, resource_revision, event_type, actor_type, actor_id,
      lease_generation, payload_hash, recorded_at)
      VALUES (NEW.event_id, NEW.resource_id, NEW.expected + 1, NEW.event_type, NEW.actor_type,
        NEW.actor_id, NEW.lease_generation, NEW.payload_hash, NEW.now);
  END;`;

/** A fresh database with one controller resource; the TEMP view and trigger when `folded`. */
function open(file, folded) {
  for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(SCHEMA);
  db.prepare(
    `INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
     VALUES ('controller-1', 'controller', 'k', 1, 0, 0)`,
  ).run();
  if (folded) db.exec(FOLD);
  return db;
}

/** µs per write of `WRITES` writes, `perTransaction` writes in each transaction. */
function run(file, folded, perTransaction) {
  const db = open(file, folded);
  const cas = db.prepare('UPDATE resources SET revision = revision + 1, updated_at = ? WHERE resource_id = ? AND revision = ?');
  const put = db.prepare(PUT);
  const event = db.prepare(
    `INSERT INTO events(event_id, resource_id, resource_revision, event_type, actor_type, actor_id,
       lease_generation, payload_hash, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const fold = folded ? db.prepare('INSERT INTO piw_event VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)') : null;
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const start = process.hrtime.bigint();
  for (let index = 0; index < WRITES; index += 1) {
    const now = 1.8e12 + index;
    const payload = Buffer.from(JSON.stringify({ expiresAt: new Date(now).toISOString() }));
    const hash = crypto.createHash('sha256').update(payload).digest();
    const revision = index + 1;
    if (index % perTransaction === 0) begin.run();
    if (fold) {
      fold.run(revision, 'controller-1', now, `event-${index}`, 'lease.claimed', 'controller', 'o', 1, hash, payload.length, payload);
    } else {
      cas.run(now, 'controller-1', revision);
      put.run(hash, 'application/json', payload.length, payload, now);
      event.run(`event-${index}`, 'controller-1', revision + 1, 'lease.claimed', 'controller', 'o', 1, hash, now);
    }
    if (index % perTransaction === perTransaction - 1 || index === WRITES - 1) commit.run();
  }
  const micros = Number(process.hrtime.bigint() - start) / 1000 / WRITES;
  db.close();
  return micros;
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const root = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'piw-fold-'));
try {
  const file = path.join(root, 'state.sqlite');
  console.log('| write (CAS + payload put + event) | 3 statements, µs | 1 statement (TEMP view trigger), µs |');
  console.log('|---|---:|---:|');
  for (const [label, perTransaction] of [['one transaction per write', 1], ['1,000 writes per transaction', 1000]]) {
    const separate = [];
    const folded = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      separate.push(run(file, false, perTransaction));
      folded.push(run(file, true, perTransaction));
    }
    console.log(`| ${label} | ${median(separate).toFixed(1)} | ${median(folded).toFixed(1)} |`);
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
