//! Pruning of unreferenced blobs (`pruneUnreferencedBlobs`, also run by every read-write open):
//! a blob goes when no foreign-key column targeting `blobs.blob_hash` holds its hash.
//!
//! The blobs are loaded first and struck off as the referencing columns are read; once every
//! blob is known to be referenced, nothing could go, so the remaining rows need not be read.
//! The long append-only tables are read last, where that early stop saves the most: in a
//! typical file their rows repeat a few hashes that other tables, or their own first rows,
//! already accounted for. Which blobs go is exactly the full anti-join's answer either way.
//!
//! The deletes run with foreign-key enforcement off ([`without_foreign_keys`]): with it on,
//! every deleted blob made SQLite look for children in each referencing column, the unindexed
//! ones by a full scan — unreferenced blobs × rows, hours for a file with 50,000 superseded
//! blobs. The checks are redundant here: the set was computed in the same write transaction
//! from every column whose foreign key targets `blobs.blob_hash`, so no row refers to a blob
//! that goes, and no constraint could fail or cascade. The rows deleted and the pages written
//! are the same; only the child lookups are gone.

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::error::Result;

/// Referencing tables read after all others (in this order): many rows, few distinct hashes.
const READ_LAST: &[&str] = &[
    "session_entries",
    "session_events",
    "viewer_session_checkpoints",
    "events",
    "viewer_deltas",
];

/// Deletes every blob no foreign-key column refers to; returns how many went. The caller holds
/// the write transaction.
pub fn prune_unreferenced(conn: &Connection) -> Result<usize> {
    let rowids = unreferenced_rowids(conn)?;
    delete_blobs(conn, &rowids)
}

/// The row ids of the blobs no foreign-key column refers to, ascending.
pub fn unreferenced_rowids(conn: &Connection) -> Result<Vec<i64>> {
    let mut candidates = Candidates::load(conn)?;
    if !candidates.is_empty() {
        for (table, columns) in blob_references(conn)? {
            strike_referenced(conn, &table, &columns, &mut candidates)?;
            if candidates.is_empty() {
                break;
            }
        }
    }
    Ok(candidates.into_rowids())
}

/// Runs `prune` (which opens its own write transaction) with `PRAGMA foreign_keys` off, and
/// turns enforcement back on afterwards, whatever the outcome. Inside a caller's transaction
/// the pragma cannot change, so enforcement stays as it is there.
pub fn without_foreign_keys<T>(conn: &Connection, prune: impl FnOnce() -> Result<T>) -> Result<T> {
    let enforced: bool = conn.query_row("PRAGMA foreign_keys", [], |row| row.get(0))?;
    if !enforced || !conn.is_autocommit() {
        return prune();
    }
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    let outcome = prune();
    let restored = conn.pragma_update(None, "foreign_keys", "ON");
    let value = outcome?;
    restored?;
    Ok(value)
}

/// Deletes the blobs with these row ids (in this order); returns how many.
pub fn delete_blobs(conn: &Connection, rowids: &[i64]) -> Result<usize> {
    let mut delete = conn.prepare_cached("DELETE FROM blobs WHERE rowid = ?")?;
    for rowid in rowids {
        delete.execute([rowid])?;
    }
    Ok(rowids.len())
}

/// Strikes off the candidates `table` refers to through `columns`, stopping when none is left.
fn strike_referenced(
    conn: &Connection,
    table: &str,
    columns: &[String],
    candidates: &mut Candidates,
) -> Result<()> {
    let list = columns
        .iter()
        .map(|column| quote_identifier(column))
        .collect::<Vec<_>>()
        .join(", ");
    let mut statement = conn.prepare(&format!("SELECT {list} FROM {}", quote_identifier(table)))?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        for index in 0..columns.len() {
            // Only BLOB values equal a blob_hash (a STRICT BLOB column).
            if let ValueRef::Blob(hash) = row.get_ref(index)? {
                candidates.strike(hash);
            }
        }
        if candidates.is_empty() {
            break;
        }
    }
    Ok(())
}

/// The blobs not yet known to be referenced, with their row ids.
///
/// Hashes of the schema's length (`CHECK (length(blob_hash) = 32)`) are kept sorted, with the
/// start of each range of leading bits: SHA-256 digests are uniform, so a lookup compares one
/// or two entries, and the table is a few flat arrays rather than a hash map.
struct Candidates {
    hashes: Vec<[u8; 32]>,
    rowids: Vec<i64>,
    referenced: Vec<bool>,
    /// `starts[b]..starts[b + 1]`: the entries whose leading `bits` bits are `b`.
    starts: Vec<u32>,
    bits: u32,
    /// Sorted hashes not yet referenced.
    remaining: usize,
    /// Any other BLOB hash (only a file that bypassed the check could hold one).
    odd: Vec<(Vec<u8>, i64)>,
    /// Hashes that are no BLOB equal no referencing value: those blobs always go.
    unmatchable: Vec<i64>,
}

impl Candidates {
    fn load(conn: &Connection) -> Result<Candidates> {
        let mut entries: Vec<([u8; 32], i64)> = Vec::new();
        let mut odd = Vec::new();
        let mut unmatchable = Vec::new();
        // In key order, from the covering primary-key index: the sort below finds it sorted.
        let mut statement =
            conn.prepare_cached("SELECT rowid, blob_hash FROM blobs ORDER BY blob_hash")?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            match row.get_ref(1)? {
                ValueRef::Blob(hash) => match <[u8; 32]>::try_from(hash) {
                    Ok(hash) => entries.push((hash, rowid)),
                    Err(_) => odd.push((hash.to_vec(), rowid)),
                },
                _ => unmatchable.push(rowid),
            }
        }
        entries.sort_unstable_by_key(|entry| entry.0);
        let bits = (usize::BITS - entries.len().leading_zeros()).clamp(1, 20);
        let mut starts = vec![0u32; (1 << bits) + 1];
        for (hash, _) in &entries {
            starts[bucket(hash, bits) + 1] += 1;
        }
        for index in 1..starts.len() {
            starts[index] += starts[index - 1];
        }
        let (hashes, rowids): (Vec<[u8; 32]>, Vec<i64>) = entries.into_iter().unzip();
        Ok(Candidates {
            referenced: vec![false; hashes.len()],
            remaining: hashes.len(),
            hashes,
            rowids,
            starts,
            bits,
            odd,
            unmatchable,
        })
    }

    /// Whether no blob is left that a reference could still keep.
    fn is_empty(&self) -> bool {
        self.remaining == 0 && self.odd.is_empty()
    }

    /// `hash` is referenced: its blob stays.
    fn strike(&mut self, hash: &[u8]) {
        match <&[u8; 32]>::try_from(hash) {
            Ok(hash) => {
                let bucket = bucket(hash, self.bits);
                let range = self.starts[bucket] as usize..self.starts[bucket + 1] as usize;
                if let Some(offset) = self.hashes[range.clone()].iter().position(|h| h == hash) {
                    let index = range.start + offset;
                    if !self.referenced[index] {
                        self.referenced[index] = true;
                        self.remaining -= 1;
                    }
                }
            }
            Err(_) if !self.odd.is_empty() => self.odd.retain(|(odd, _)| odd[..] != *hash),
            Err(_) => {}
        }
    }

    /// The row ids of the blobs nothing referenced, ascending (the reference's delete order).
    fn into_rowids(self) -> Vec<i64> {
        let mut rowids: Vec<i64> = self
            .rowids
            .iter()
            .zip(&self.referenced)
            .filter(|(_, referenced)| !**referenced)
            .map(|(rowid, _)| *rowid)
            .chain(self.odd.into_iter().map(|(_, rowid)| rowid))
            .chain(self.unmatchable)
            .collect();
        rowids.sort_unstable();
        rowids
    }
}

/// The leading `bits` bits of a hash.
fn bucket(hash: &[u8; 32], bits: u32) -> usize {
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&hash[..8]);
    (u64::from_be_bytes(prefix) >> (64 - bits)) as usize
}

/// Each table other than `blobs` with the columns whose foreign key targets `blobs.blob_hash`,
/// in schema order except for [`READ_LAST`] tables, which come last.
fn blob_references(conn: &Connection) -> Result<Vec<(String, Vec<String>)>> {
    let mut statement = conn.prepare_cached(
        "SELECT m.name, f.\"from\"
         FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'blobs'
           AND f.\"table\" = 'blobs' AND f.\"to\" = 'blob_hash'",
    )?;
    let mut rows = statement.query([])?;
    let mut references: Vec<(String, Vec<String>)> = Vec::new();
    while let Some(row) = rows.next()? {
        let table: String = row.get(0)?;
        let column: String = row.get(1)?;
        match references.last_mut() {
            Some((last, columns)) if *last == table => columns.push(column),
            _ => references.push((table, vec![column])),
        }
    }
    references.sort_by_key(|(table, _)| READ_LAST.iter().position(|last| last == table));
    Ok(references)
}

fn quote_identifier(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rusqlite::types::Value as Sql;
    use rusqlite::{params, Connection};

    use super::prune_unreferenced;

    /// Blobs and three referencing tables, one of them read last; no constraints, so that odd
    /// hashes and dangling references can be stored too.
    const SCHEMA: &str = "
        CREATE TABLE blobs (blob_hash BLOB PRIMARY KEY, content BLOB);
        CREATE TABLE runs (input_hash BLOB REFERENCES blobs(blob_hash),
                           error_hash BLOB REFERENCES blobs(blob_hash), title TEXT);
        CREATE TABLE viewer_deltas (patch_hash BLOB REFERENCES blobs(blob_hash));
        CREATE TABLE events (payload_hash BLOB REFERENCES blobs(blob_hash),
                             other BLOB REFERENCES projects(project_id));
        CREATE TABLE projects (project_id BLOB PRIMARY KEY);";

    /// The reference's prune: every referenced hash into a temporary table, then one anti-join.
    fn reference_prune(conn: &Connection) -> Vec<i64> {
        conn.execute_batch(
            "CREATE TEMP TABLE referenced_blobs(blob_hash BLOB PRIMARY KEY) WITHOUT ROWID;
             INSERT OR IGNORE INTO referenced_blobs SELECT input_hash FROM runs WHERE input_hash IS NOT NULL;
             INSERT OR IGNORE INTO referenced_blobs SELECT error_hash FROM runs WHERE error_hash IS NOT NULL;
             INSERT OR IGNORE INTO referenced_blobs SELECT patch_hash FROM viewer_deltas WHERE patch_hash IS NOT NULL;
             INSERT OR IGNORE INTO referenced_blobs SELECT payload_hash FROM events WHERE payload_hash IS NOT NULL;",
        )
        .unwrap();
        let mut statement = conn
            .prepare(
                "SELECT rowid FROM blobs WHERE NOT EXISTS (
                   SELECT 1 FROM referenced_blobs r WHERE r.blob_hash = blobs.blob_hash)
                 ORDER BY rowid",
            )
            .unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }

    fn remaining_rowids(conn: &Connection) -> Vec<i64> {
        let mut statement = conn
            .prepare("SELECT rowid FROM blobs ORDER BY rowid")
            .unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }

    /// A hash value from a small pool, so that references hit blobs often: 32-byte BLOBs, odd
    /// lengths (empty included), TEXT, and NULL.
    fn value(code: u8) -> Sql {
        match code % 8 {
            0 => Sql::Null,
            1 => Sql::Text(format!("t{}", code / 8 % 3)),
            2 => Sql::Blob(vec![code / 8 % 3; (code / 8 % 3) as usize]),
            _ => Sql::Blob(vec![(code / 8 % 5).wrapping_mul(61); 32]),
        }
    }

    fn database(blobs: &[u8], runs: &[(u8, u8)], deltas: &[u8], events: &[u8]) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", "OFF").unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        for code in blobs {
            // `blobs` is STRICT with a BLOB key in the state schema: no TEXT hash.
            let hash = match value(*code) {
                Sql::Text(_) => Sql::Null,
                hash => hash,
            };
            conn.execute("INSERT OR IGNORE INTO blobs(blob_hash) VALUES (?)", [hash])
                .unwrap();
        }
        for (input, error) in runs {
            conn.execute(
                "INSERT INTO runs(input_hash, error_hash, title) VALUES (?, ?, 'x')",
                params![value(*input), value(*error)],
            )
            .unwrap();
        }
        for code in deltas {
            conn.execute("INSERT INTO viewer_deltas VALUES (?)", [value(*code)])
                .unwrap();
        }
        for code in events {
            conn.execute(
                "INSERT INTO events VALUES (?, ?)",
                params![value(*code), value(0)],
            )
            .unwrap();
        }
        conn
    }

    proptest! {
        /// The same blobs go as with the reference's full anti-join, early stop or not.
        #[test]
        fn deletes_what_the_reference_deletes(
            blobs in proptest::collection::vec(any::<u8>(), 0..24),
            runs in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..8),
            deltas in proptest::collection::vec(any::<u8>(), 0..12),
            events in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let ours = database(&blobs, &runs, &deltas, &events);
            let theirs = database(&blobs, &runs, &deltas, &events);
            let gone = reference_prune(&theirs);
            prop_assert_eq!(prune_unreferenced(&ours).unwrap(), gone.len());
            prop_assert_eq!(remaining_rowids(&ours), remaining_rowids(&theirs).into_iter()
                .filter(|rowid| !gone.contains(rowid)).collect::<Vec<_>>());
        }
    }

    /// A blob referenced only by the last row of the table read last still stays.
    #[test]
    fn reads_to_the_last_row_while_a_blob_is_unaccounted_for() {
        let deltas: Vec<u8> = std::iter::repeat_n(3, 50).chain([11]).collect();
        let conn = database(&[3, 11, 19], &[], &deltas, &[]);
        assert_eq!(prune_unreferenced(&conn).unwrap(), 1);
        assert_eq!(remaining_rowids(&conn), [1, 2]);
    }

    /// A state file (the real schema) after heavy use: a resource whose spec and status were
    /// replaced many times, events, a run, and blobs nothing ever referred to.
    mod real_schema {
        use std::path::Path;

        use rusqlite::Connection;
        use serde_json::json;

        use crate::methods::dispatch;
        use crate::state::StateDb;
        use crate::store::{resolve_project, Store};
        use crate::test_support::{open_read_write, Scratch};
        use crate::wire::Call;

        const NOW: i64 = 1_789_257_600_000;

        fn open(file: &Path) -> StateDb {
            open_read_write(file, NOW)
        }

        fn call(store: &Store<'_>, method: &str, options: serde_json::Value) {
            dispatch(store, method, &Call::new(vec![options], NOW)).unwrap();
        }

        fn doc(value: serde_json::Value) -> serde_json::Value {
            json!({ "$c": crate::state::json::canonical(&value) })
        }

        /// Writes the heavy-use file: `respecs` specs of one resource, `events` events on it,
        /// `orphans` blobs nothing refers to.
        fn heavy_use(file: &Path, respecs: usize, events: usize, orphans: usize) {
            let state = open(file);
            state
                .conn()
                .unwrap()
                .pragma_update(None, "synchronous", "OFF")
                .unwrap();
            let project = resolve_project(&state, "/prune/project", NOW).unwrap();
            let store = Store::new(&state, project.as_deref());
            for version in 0..respecs {
                call(
                    &store,
                    "putResource",
                    json!({
                        "controller": "c", "key": "k", "now": NOW,
                        "spec": doc(json!({ "v": version })), "initialStatus": doc(json!({})),
                    }),
                );
            }
            for n in 0..events {
                call(
                    &store,
                    "recordEvent",
                    json!({
                        "controller": "c", "key": "k", "type": "note", "now": NOW,
                        "payload": doc(json!({ "n": n % 7 })),
                    }),
                );
            }
            let conn = state.conn().unwrap();
            let mut insert = conn
                .prepare(
                    "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
                     VALUES (?, 'text/plain', 1, x'00', ?)",
                )
                .unwrap();
            for n in 0..orphans as u32 {
                let mut hash = [0u8; 32];
                hash[..4].copy_from_slice(&n.to_be_bytes());
                hash[4] = 0xab;
                insert.execute(rusqlite::params![&hash[..], NOW]).unwrap();
            }
        }

        /// The reference's prune (`StateDatabase.pruneUnreferencedBlobs`): every column whose
        /// foreign key targets blobs into a temporary table, then one anti-join delete, with
        /// foreign keys enforced.
        fn reference_prune(conn: &Connection) -> usize {
            conn.pragma_update(None, "foreign_keys", "ON").unwrap();
            conn.execute_batch(
                "BEGIN IMMEDIATE;
                 CREATE TEMP TABLE referenced_blobs(blob_hash BLOB PRIMARY KEY) WITHOUT ROWID;",
            )
            .unwrap();
            let columns: Vec<(String, String)> = conn
                .prepare(
                    "SELECT m.name, f.\"from\" FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
                     WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'blobs'
                       AND f.\"table\" = 'blobs' AND f.\"to\" = 'blob_hash'",
                )
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            for (table, column) in columns {
                conn.execute(
                    &format!(
                        "INSERT OR IGNORE INTO referenced_blobs(blob_hash)
                         SELECT \"{column}\" FROM \"{table}\" WHERE \"{column}\" IS NOT NULL"
                    ),
                    [],
                )
                .unwrap();
            }
            let deleted = conn
                .execute(
                    "DELETE FROM blobs WHERE NOT EXISTS (
                       SELECT 1 FROM referenced_blobs r WHERE r.blob_hash = blobs.blob_hash)",
                    [],
                )
                .unwrap();
            conn.execute_batch("DROP TABLE referenced_blobs; COMMIT")
                .unwrap();
            deleted
        }

        /// Every table, row for row.
        fn dump(conn: &Connection) -> String {
            let tables: Vec<String> = conn
                .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            let mut out = String::new();
            for table in tables {
                let mut statement = conn
                    .prepare(&format!("SELECT * FROM \"{table}\" ORDER BY rowid"))
                    .unwrap();
                let columns = statement.column_count();
                let mut rows = statement.query([]).unwrap();
                while let Some(row) = rows.next().unwrap() {
                    out.push_str(&table);
                    for index in 0..columns {
                        out.push_str(&format!("|{:?}", row.get_ref(index).unwrap()));
                    }
                    out.push('\n');
                }
            }
            out
        }

        fn blob_count(conn: &Connection) -> i64 {
            conn.query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
                .unwrap()
        }

        /// An open prunes exactly the blobs the reference's open prunes, leaving every table as
        /// the reference leaves it, with foreign keys enforced again afterwards.
        #[test]
        fn an_open_prunes_what_the_reference_prunes() {
            let dir = Scratch::new("prune-equivalence");
            let ours = dir.file("ours.sqlite");
            let theirs = dir.file("theirs.sqlite");
            heavy_use(&ours, 400, 200, 1_500);
            std::fs::copy(&ours, &theirs).unwrap();
            let reference = Connection::open(&theirs).unwrap();
            let before = blob_count(&reference);
            let deleted = reference_prune(&reference);
            assert!(deleted >= 1_500 + 390, "{deleted} of {before} blobs go");

            let state = open(&ours);
            let conn = state.conn().unwrap();
            assert_eq!(blob_count(conn), before - deleted as i64);
            assert_eq!(dump(conn), dump(&reference));
            let enforced: bool = conn
                .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
                .unwrap();
            assert!(enforced, "foreign keys are enforced after the open");
            state.integrity_check().unwrap();
        }

        thread_local! {
            static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }

        extern "C" fn count_step(_: *mut std::ffi::c_void) -> std::ffi::c_int {
            STEPS.with(|steps| steps.set(steps.get() + 1));
            0
        }

        /// The prune's work grows with the rows of the file, not with unreferenced blobs ×
        /// referencing rows (issue 12: 50,000 superseded blobs did not open in 10 minutes).
        /// Counted in SQLite virtual-machine steps, which do not depend on the machine.
        #[test]
        fn the_prune_is_linear_in_the_rows_of_the_file() {
            let dir = Scratch::new("prune-linear");
            let file = dir.file("state.sqlite");
            heavy_use(&file, 10, 2_000, 2_000);
            let state = open(&file);
            let conn = state.conn().unwrap();
            heavy_orphans(conn, 2_000);
            let rows: i64 = conn
                .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
                .unwrap()
                .query_map([], |row| row.get::<_, String>(0))
                .unwrap()
                .map(|table| {
                    conn.query_row(
                        &format!("SELECT count(*) FROM \"{}\"", table.unwrap()),
                        [],
                        |row| row.get::<_, i64>(0),
                    )
                    .unwrap()
                })
                .sum();
            STEPS.with(|steps| steps.set(0));
            // SAFETY: the handle is live while `state` is; the callback takes no data.
            unsafe {
                rusqlite::ffi::sqlite3_progress_handler(
                    conn.handle(),
                    100,
                    Some(count_step),
                    std::ptr::null_mut(),
                );
            }
            assert_eq!(state.prune_unreferenced_blobs().unwrap(), 2_000);
            // SAFETY: as above; removes the handler.
            unsafe {
                rusqlite::ffi::sqlite3_progress_handler(
                    conn.handle(),
                    0,
                    None,
                    std::ptr::null_mut(),
                );
            }
            let instructions = STEPS.with(|steps| steps.get()) * 100;
            assert!(
                instructions < 200 * rows as u64,
                "{instructions} VM instructions for {rows} rows"
            );
            let enforced: bool = conn
                .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
                .unwrap();
            assert!(enforced);
        }

        /// Adds `count` blobs nothing refers to, after the open's prune.
        fn heavy_orphans(conn: &Connection, count: u32) {
            let mut insert = conn
                .prepare(
                    "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
                     VALUES (?, 'text/plain', 1, x'00', ?)",
                )
                .unwrap();
            for n in 0..count {
                let mut hash = [0u8; 32];
                hash[..4].copy_from_slice(&n.to_be_bytes());
                hash[4] = 0xcd;
                insert.execute(rusqlite::params![&hash[..], NOW]).unwrap();
            }
        }
    }
}
