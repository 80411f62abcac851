//! The prune against the reference's full anti-join: random tables, the early stop, the
//! helper connections (`tests/real_schema.rs`: the real schema after heavy use).

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
        let (pruned, steps) = prune_with_a_helper(&ours, &dir.file(&name), Some(interrupt_after));
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
mod real_schema;
