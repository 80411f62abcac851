//! Pruning of unreferenced blobs (`pruneUnreferencedBlobs`, also run by every read-write open):
//! a blob goes when no foreign-key column targeting `blobs.blob_hash` holds its hash.
//!
//! The blobs are loaded first and struck off as the referencing columns are read; once every
//! blob is known to be referenced, nothing could go, so the remaining rows need not be read.
//! The long append-only tables are read last, newest rows first, where that early stop saves
//! the most: in a typical file their rows repeat a few hashes that other tables, or their own
//! newest rows, already accounted for (a blob only such a table refers to is most often one of
//! the newest, and only the newest rows can refer to it). Which blobs go is exactly the full
//! anti-join's answer whatever the order. The reads run inside SQLite (`scan`, over the
//! hash set of `blob_set`), in row id ranges that, on a large file, several connections read at
//! once (`parts`). `at_open` runs the prune of every read-write open on a thread of its own.
//!
//! The deletes run with foreign-key enforcement off ([`without_foreign_keys`]): with it on,
//! every deleted blob made SQLite look for children in each referencing column, the unindexed
//! ones by a full scan — unreferenced blobs × rows, hours for a file with 50,000 superseded
//! blobs. The checks are redundant here: the set was computed in the same write transaction
//! from every column whose foreign key targets `blobs.blob_hash`, so no row refers to a blob
//! that goes, and no constraint could fail or cascade. The rows deleted and the pages written
//! are the same; only the child lookups are gone.

pub mod at_open;
mod blob_set;
mod parts;
mod scan;

use rusqlite::Connection;

use crate::error::Result;
use scan::TableScan;

/// Referencing tables read after all others (in this order), newest rows first: many rows, few
/// distinct hashes, and the newest blobs are the ones only the newest rows can refer to.
/// `run_queue` (a row per run, the last error's hash, most often none) strikes a handful of
/// blobs from thousands of pages, which its newest rows most often hold: read after `events`,
/// its full read is then not needed; before `viewer_deltas`, so that if it is, the far longer
/// table is the one that can stop early.
const READ_LAST: &[&str] = &[
    "session_entries",
    "session_events",
    "viewer_session_checkpoints",
    "events",
    "run_queue",
    "viewer_deltas",
];

/// Deletes every blob no foreign-key column refers to; returns how many went. The caller holds
/// the write transaction.
pub fn prune_unreferenced(
    conn: &Connection,
    open_helper: impl Fn() -> Option<Connection> + Sync,
) -> Result<usize> {
    let rowids = unreferenced_rowids(conn, open_helper)?;
    delete_blobs(conn, &rowids)
}

/// The row ids of the blobs no foreign-key column refers to, ascending. On a large file,
/// `open_helper` gives more connections to it, which read part of the tables (see
/// `parts`); it is called while the caller's write transaction has changed nothing.
pub fn unreferenced_rowids(
    conn: &Connection,
    open_helper: impl Fn() -> Option<Connection> + Sync,
) -> Result<Vec<i64>> {
    let tables = blob_references(conn)?;
    Ok(parts::unreferenced(conn, &tables, open_helper)?.into_rowids())
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

/// Each table other than `blobs` with the columns whose foreign key targets `blobs.blob_hash`,
/// in schema order except for [`READ_LAST`] tables, which come last, newest rows first (when
/// they have row ids: raw SQL could make one that has none).
fn blob_references(conn: &Connection) -> Result<Vec<TableScan>> {
    let mut statement = conn.prepare_cached(
        "SELECT m.name, f.\"from\", t.wr,
           EXISTS (SELECT 1 FROM pragma_table_xinfo(m.name) c WHERE c.name = 'rowid' COLLATE NOCASE)
         FROM sqlite_schema m, pragma_foreign_key_list(m.name) f, pragma_table_list(m.name) t
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'blobs'
           AND f.\"table\" = 'blobs' AND f.\"to\" = 'blob_hash' AND t.schema = 'main'",
    )?;
    let mut rows = statement.query([])?;
    let mut references: Vec<TableScan> = Vec::new();
    while let Some(row) = rows.next()? {
        let table: String = row.get(0)?;
        let column: String = row.get(1)?;
        match references.last_mut() {
            Some(last) if last.table == table => last.columns.push(column),
            _ => {
                let without_rowid: bool = row.get(2)?;
                let rowid_is_a_column: bool = row.get(3)?;
                references.push(TableScan {
                    newest_first: !without_rowid && READ_LAST.contains(&table.as_str()),
                    ranged: !without_rowid && !rowid_is_a_column,
                    table,
                    columns: vec![column],
                })
            }
        }
    }
    references.sort_by_key(|scan| READ_LAST.iter().position(|last| *last == scan.table));
    Ok(references)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rusqlite::types::Value as Sql;
    use rusqlite::{params, Connection};

    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

    use super::prune_unreferenced;
    use crate::test_support::vm_steps;

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
        filled(
            Connection::open_in_memory().unwrap(),
            blobs,
            runs,
            deltas,
            events,
        )
    }

    fn filled(
        conn: Connection,
        blobs: &[u8],
        runs: &[(u8, u8)],
        deltas: &[u8],
        events: &[u8],
    ) -> Connection {
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
            prop_assert_eq!(prune_unreferenced(&ours, || None).unwrap(), gone.len());
            prop_assert_eq!(remaining_rowids(&ours), remaining_rowids(&theirs).into_iter()
                .filter(|rowid| !gone.contains(rowid)).collect::<Vec<_>>());
        }
    }

    /// A blob referenced only by the last row of the table read last still stays.
    #[test]
    fn reads_to_the_last_row_while_a_blob_is_unaccounted_for() {
        let deltas: Vec<u8> = std::iter::repeat_n(3, 50).chain([11]).collect();
        let conn = database(&[3, 11, 19], &[], &deltas, &[]);
        assert_eq!(prune_unreferenced(&conn, || None).unwrap(), 1);
        assert_eq!(remaining_rowids(&conn), [1, 2]);
    }

    /// Rows of the tables read last are read newest first: a blob only the newest row refers
    /// to is accounted for at once, and the scan stops without reading the older rows.
    #[test]
    fn reads_the_tables_read_last_newest_first() {
        let deltas: Vec<u8> = std::iter::repeat_n(3, 20_000).chain([11]).collect();
        let conn = database(&[3, 11], &[], &deltas, &[]);
        let ((), steps) = vm_steps(&conn, || {
            assert_eq!(prune_unreferenced(&conn, || None).unwrap(), 0)
        });
        // Reading the 20,001 rows oldest first takes several instructions per row.
        assert!(steps < 2_000, "{steps} VM instructions");
    }

    /// The newest rows of the tables read newest first are read before the other tables: the
    /// error blob the queue's rows repeat is struck before the full reads begin, and once the
    /// events are read the set is empty, so the older queue rows are never read.
    #[test]
    fn reads_only_the_newest_queue_rows_when_their_blob_is_there() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE blobs (blob_hash BLOB PRIMARY KEY, content BLOB);
             CREATE TABLE run_queue (error_hash BLOB REFERENCES blobs(blob_hash));
             CREATE TABLE events (payload_hash BLOB REFERENCES blobs(blob_hash));
             CREATE TABLE viewer_deltas (patch_hash BLOB REFERENCES blobs(blob_hash));
             INSERT INTO blobs(blob_hash) VALUES (CAST(printf('%032d', 1) AS BLOB)),
               (CAST(printf('%032d', 2) AS BLOB)), (CAST(printf('%032d', 3) AS BLOB));
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
             INSERT INTO run_queue SELECT CAST(printf('%032d', 1) AS BLOB) FROM n;
             INSERT INTO events VALUES (CAST(printf('%032d', 2) AS BLOB));
             INSERT INTO viewer_deltas VALUES (CAST(printf('%032d', 3) AS BLOB));",
        )
        .unwrap();
        let ((), steps) = vm_steps(&conn, || {
            assert_eq!(prune_unreferenced(&conn, || None).unwrap(), 0)
        });
        // Reading the 20,000 queue rows takes several instructions per row.
        assert!(steps < 20_000, "{steps} VM instructions");
    }

    /// Keys that are no digests (raw SQL can store any 32 bytes: here all sharing a 16-byte
    /// prefix) give the reference's answer, and quickly: when a key's leading bytes alone
    /// decided where it was looked for, each lookup passed all 30,000 (12 s in a debug build).
    #[test]
    fn keys_sharing_a_prefix_give_the_same_answer() {
        const MANY: &str = "
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000)
            INSERT INTO blobs(blob_hash) SELECT CAST(printf('%032d', i) AS BLOB) FROM n;
            WITH RECURSIVE n(i) AS (SELECT 3 UNION ALL SELECT i + 3 FROM n WHERE i < 30000)
            INSERT INTO events SELECT CAST(printf('%032d', i) AS BLOB), NULL FROM n;";
        let ours = database(&[], &[], &[], &[]);
        let theirs = database(&[], &[], &[], &[]);
        ours.execute_batch(MANY).unwrap();
        theirs.execute_batch(MANY).unwrap();
        let gone = reference_prune(&theirs);
        assert_eq!(gone.len(), 20_000);
        assert_eq!(prune_unreferenced(&ours, || None).unwrap(), gone.len());
        let left: Vec<i64> = (1..=30_000).filter(|rowid| rowid % 3 == 0).collect();
        assert_eq!(remaining_rowids(&ours), left);
    }

    /// A table read last that has no row ids (raw SQL can make one) is read in key order.
    #[test]
    fn reads_a_table_without_row_ids_in_key_order() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE blobs (blob_hash BLOB PRIMARY KEY, content BLOB);
             CREATE TABLE viewer_deltas (patch_hash BLOB PRIMARY KEY
               REFERENCES blobs(blob_hash)) WITHOUT ROWID;
             INSERT INTO blobs(blob_hash) VALUES (zeroblob(32)), (randomblob(32));
             INSERT INTO viewer_deltas VALUES (zeroblob(32));",
        )
        .unwrap();
        assert_eq!(prune_unreferenced(&conn, || None).unwrap(), 1);
        assert_eq!(remaining_rowids(&conn), [1]);
    }

    /// A file of the test schema large enough for the prune's helper: `rows` events, each
    /// referring to a blob of its own, and as many blobs nothing refers to.
    fn helped_file(dir: &crate::test_support::Scratch, name: &str, rows: u32) -> Connection {
        let conn = filled(
            Connection::open(dir.file(name)).unwrap(),
            &[],
            &[],
            &[],
            &[],
        );
        conn.execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows} * 2)
             INSERT INTO blobs(blob_hash) SELECT CAST(printf('%032d', i) AS BLOB) FROM n;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO events SELECT CAST(printf('%032d', i * 2) AS BLOB), NULL FROM n;
             INSERT INTO runs(input_hash, title) VALUES (CAST(printf('%032d', 1) AS BLOB), 'x');"
        ))
        .unwrap();
        conn
    }

    /// Prunes `ours` in a write transaction, with (at most) one helper connection to `file`
    /// whose VM steps are counted (and which is interrupted after `interrupt_after` of them);
    /// the blobs pruned, and the helper's steps.
    fn prune_with_a_helper(
        ours: &Connection,
        file: &std::path::Path,
        interrupt_after: Option<u64>,
    ) -> (usize, u64) {
        let helper = Connection::open(file).unwrap();
        let steps = count_steps(&helper, interrupt_after);
        let helper = std::sync::Mutex::new(Some(helper));
        ours.execute_batch("BEGIN IMMEDIATE").unwrap();
        let pruned = prune_unreferenced(ours, || helper.lock().unwrap().take()).unwrap();
        ours.execute_batch("COMMIT").unwrap();
        (pruned, steps.load(Relaxed))
    }

    /// The blobs of `theirs` the reference's prune keeps (it only lists those that go).
    fn kept_by_reference(theirs: &Connection, gone: &[i64]) -> Vec<i64> {
        let gone: std::collections::HashSet<i64> = gone.iter().copied().collect();
        let all = remaining_rowids(theirs);
        all.into_iter()
            .filter(|rowid| !gone.contains(rowid))
            .collect()
    }

    /// A progress handler on `conn` counting VM steps into `steps`; with `interrupt_after`,
    /// the statement running at that step fails (`SQLITE_INTERRUPT`).
    fn count_steps(conn: &Connection, interrupt_after: Option<u64>) -> &'static AtomicU64 {
        struct Counter {
            steps: AtomicU64,
            interrupt_after: u64,
        }
        extern "C" fn step(data: *mut std::ffi::c_void) -> std::ffi::c_int {
            // SAFETY: the leaked counter below, alive for the rest of the process.
            let counter = unsafe { &*data.cast::<Counter>() };
            let steps = counter.steps.fetch_add(1, Relaxed) + 1;
            std::ffi::c_int::from(steps >= counter.interrupt_after)
        }
        let counter: &'static Counter = Box::leak(Box::new(Counter {
            steps: AtomicU64::new(0),
            interrupt_after: interrupt_after.unwrap_or(u64::MAX),
        }));
        // SAFETY: the handle is live; the counter outlives the connection.
        unsafe {
            rusqlite::ffi::sqlite3_progress_handler(
                conn.handle(),
                1,
                Some(step),
                (counter as *const Counter).cast_mut().cast(),
            );
        }
        &counter.steps
    }

    /// With a helper connection reading part of the tables, the same blobs go, and the helper
    /// did read some of them.
    #[test]
    fn a_helper_reading_part_of_the_tables_changes_nothing() {
        let dir = crate::test_support::Scratch::new("prune-helper");
        let ours = helped_file(&dir, "ours.sqlite", 60_000);
        let theirs = helped_file(&dir, "theirs.sqlite", 60_000);
        let gone = reference_prune(&theirs);
        // Every odd blob but the run's.
        assert_eq!(gone.len(), 59_999);
        let kept = kept_by_reference(&theirs, &gone);
        let (pruned, steps) = prune_with_a_helper(&ours, &dir.file("ours.sqlite"), None);
        assert_eq!(pruned, gone.len());
        // A helper is used only beside a spare core.
        if std::thread::available_parallelism().map_or(1, |cores| cores.get()) > 1 {
            assert!(steps > 10_000, "the helper read rows");
        }
        assert!(remaining_rowids(&ours) == kept);
    }

    /// A helper that fails in the middle of a part (here: interrupted) leaves that part and
    /// the rest to the prune's connection: the blobs only its rows referred to stay.
    #[test]
    fn a_part_the_helper_failed_is_read_by_the_prune() {
        let dir = crate::test_support::Scratch::new("prune-helper-fails");
        let theirs = helped_file(&dir, "theirs.sqlite", 60_000);
        let gone = reference_prune(&theirs);
        let kept = kept_by_reference(&theirs, &gone);
        for interrupt_after in [1, 5_000, 60_000] {
            let name = format!("ours-{interrupt_after}.sqlite");
            let ours = helped_file(&dir, &name, 60_000);
            let (pruned, steps) =
                prune_with_a_helper(&ours, &dir.file(&name), Some(interrupt_after));
            assert_eq!(pruned, gone.len());
            if std::thread::available_parallelism().map_or(1, |cores| cores.get()) > 1 {
                assert!(steps >= interrupt_after);
            }
            assert!(
                remaining_rowids(&ours) == kept,
                "interrupted after {interrupt_after}"
            );
        }
    }

    /// What a helper collects before the set is loaded and strikes afterwards keeps the same
    /// blobs as striking at once: hashes and values of other lengths alike.
    #[test]
    fn values_collected_before_the_load_strike_as_read_ones_do() {
        use crate::state::prune::blob_set::Striker;
        use crate::state::prune::scan::{self, Collected, StrikingConnection, TableScan};

        let conn = database(&[3, 11, 19, 2, 10], &[], &[3, 2, 3], &[]);
        let tables = [TableScan {
            table: "viewer_deltas".into(),
            columns: vec!["patch_hash".into()],
            newest_first: false,
            ranged: true,
        }];
        let mut striking = StrikingConnection::new(&conn).unwrap();
        let mut collected = Collected::default();
        striking
            .collect_part(&mut collected, &tables, 0, Some((1, 2)))
            .unwrap();
        striking
            .collect_part(&mut collected, &tables, 0, None)
            .unwrap();
        assert_eq!((collected.hashes.len(), collected.others.len()), (3, 2));
        let set = scan::load(&conn).unwrap();
        collected.strike_into(&mut Striker::new(&set));
        drop(striking);
        let expected = reference_prune(&database(&[3, 11, 19, 2, 10], &[], &[3, 2, 3], &[]));
        assert_eq!(set.into_rowids(), expected);
    }

    /// Temporary tables can shadow the tables the prune reads, and only the prune's own
    /// connection sees them: then no helper is opened.
    #[test]
    fn no_helper_reads_beside_temporary_tables() {
        let dir = crate::test_support::Scratch::new("prune-helper-temp");
        let ours = helped_file(&dir, "ours.sqlite", 60_000);
        ours.execute_batch("CREATE TEMP TABLE events (payload_hash BLOB, other BLOB)")
            .unwrap();
        let asked = AtomicBool::new(false);
        ours.execute_batch("BEGIN IMMEDIATE").unwrap();
        let gone = prune_unreferenced(&ours, || {
            asked.store(true, Relaxed);
            None
        })
        .unwrap();
        ours.execute_batch("COMMIT").unwrap();
        assert!(!asked.load(Relaxed), "a helper was asked for");
        // The prune's connection reads the temporary `events` in place of the file's: empty,
        // so only the run's blob stays.
        assert_eq!(gone, 120_000 - 1);
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
        use crate::test_support::{open_read_write, vm_steps, Scratch};
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
                .file_conn()
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
            let conn = state.file_conn().unwrap();
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
            let conn = state.file_conn().unwrap();
            assert_eq!(blob_count(conn), before - deleted as i64);
            assert_eq!(dump(conn), dump(&reference));
            let enforced: bool = conn
                .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
                .unwrap();
            assert!(enforced, "foreign keys are enforced after the open");
            state.integrity_check().unwrap();
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
            let conn = state.file_conn().unwrap();
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
            let (pruned, instructions) = vm_steps(conn, || state.prune_unreferenced_blobs());
            assert_eq!(pruned.unwrap(), 2_000);
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
