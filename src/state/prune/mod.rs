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
mod tests;
