//! The prune on a state file of the real schema after heavy use, against the reference's.

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
