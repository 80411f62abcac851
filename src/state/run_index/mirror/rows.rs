//! The columns the run index reads of one run and its joins (`RUN_ROWS`), which runs a
//! commit's keys name, and a run's row as an image a writer sends other processes' indexes.

use std::collections::BTreeSet;

use rusqlite::types::{FromSql, FromSqlError, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::Result;
use crate::runs::machine::status::status_sql;
use crate::state::run_index::file_io::fnv;
use crate::state::run_index::journal::Key;

/// The columns of one run and its joins; `WHERE r.rowid = ?` for one run.
pub(super) const RUN_ROWS: &str = concat!(
    "SELECT r.rowid, r.project_id, r.created_at, r.status = ",
    status_sql!(waiting),
    ",
    r.paused = 1, q.rowid, q.status, q.available_at, q.created_at, q.updated_at,
    q.error_code IS 'workflowSourceChanged', q.affinity_runner_id, s.rowid, s.revision, d.rowid,
    l.rowid, l.owner_id, l.expires_at, b.rowid, b.execution_mode = 'headless'
    FROM runs r LEFT JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN resources s ON s.resource_id = r.resource_id
    LEFT JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    LEFT JOIN leases l ON l.resource_id = r.resource_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id"
);

/// The hash owners and affinities are kept as: 32 bits, since a collision only adds a claim
/// candidate (the claim's SQL still decides), and a run is 8 bytes smaller.
pub(super) fn text_hash(text: &[u8]) -> u32 {
    let hash = fnv(&[text]);
    (hash ^ (hash >> 32)) as u32
}

/// How many columns `RUN_ROWS` has.
const RUN_COLUMNS: usize = 20;

/// The columns of one `RUN_ROWS` row.
pub(super) type Columns<'a> = [ValueRef<'a>; RUN_COLUMNS];

pub(super) fn columns_of<'a>(row: &'a Row<'_>) -> rusqlite::Result<Columns<'a>> {
    let mut columns = [ValueRef::Null; RUN_COLUMNS];
    for (at, column) in columns.iter_mut().enumerate() {
        *column = row.get_ref(at)?;
    }
    Ok(columns)
}

/// Column `at` as a `T`, with the error `Row::get` would give.
pub(super) fn column<T: FromSql>(columns: &Columns<'_>, at: usize) -> rusqlite::Result<T> {
    T::column_result(columns[at]).map_err(|error| match error {
        FromSqlError::InvalidType => {
            rusqlite::Error::InvalidColumnType(at, String::new(), columns[at].data_type())
        }
        other => {
            rusqlite::Error::FromSqlConversionFailure(at, columns[at].data_type(), Box::new(other))
        }
    })
}

/// The rowids of the runs `keys` name, at the snapshot `conn` reads: run rowids as they are,
/// queue, binding, resource and lease rows by the run that joins them now (the one a row
/// joined before is named by its own key: the pre-update hook reports the old value too),
/// an added definition by the runs that had none (`orphans`).
pub(crate) fn affected_runs(
    conn: &Connection,
    keys: &BTreeSet<Key>,
    orphans: &BTreeSet<i64>,
) -> Result<BTreeSet<i64>> {
    let mut affected = BTreeSet::new();
    for key in keys {
        let (sql, text) = match key {
            Key::Run(rowid) => {
                affected.insert(*rowid);
                continue;
            }
            Key::DefinitionAdded => {
                affected.extend(orphans.iter().copied());
                continue;
            }
            Key::BlobChanged => continue,
            Key::RunId(text) => ("SELECT rowid FROM runs WHERE run_id = ?", text),
            Key::ResourceId(text) => ("SELECT rowid FROM runs WHERE resource_id = ?", text),
        };
        let text = ToSqlOutput::Borrowed(ValueRef::Text(text));
        let mut owners = conn.prepare_cached(sql)?;
        for owner in owners.query_map([text], |row| row.get::<_, i64>(0))? {
            affected.insert(owner?);
        }
    }
    Ok(affected)
}

/// `RUN_ROWS` for one run, as an image another process's index can apply (see
/// [`encode_image`]): `Some(None)` when the run is gone, `None` when no image can be made.
pub(crate) fn image_of(conn: &Connection, rowid: i64) -> Option<Option<Vec<u8>>> {
    let image = conn
        .prepare_cached(run_by_rowid_sql())
        .ok()?
        .query_row([rowid], |row| Ok(encode_image(&columns_of(row)?)))
        .optional()
        .ok()?;
    match image {
        None => Some(None),
        Some(image) => image.map(Some),
    }
}

pub(super) fn run_by_rowid_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| format!("{RUN_ROWS} WHERE r.rowid = ?"))
}

/// A row's columns as bytes: per column a tag (0 NULL, 1 integer, 2 text), then an integer's
/// 8 bytes or a text's 2-byte length and bytes. Other types (not in `RUN_ROWS` of the
/// reference's schema) and texts over 64 KiB make no image.
fn encode_image(columns: &Columns<'_>) -> Option<Vec<u8>> {
    let mut bytes = Vec::with_capacity(128);
    for column in columns {
        match column {
            ValueRef::Null => bytes.push(0),
            ValueRef::Integer(value) => {
                bytes.push(1);
                bytes.extend_from_slice(&value.to_le_bytes());
            }
            ValueRef::Text(text) if text.len() <= usize::from(u16::MAX) => {
                bytes.push(2);
                bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
                bytes.extend_from_slice(text);
            }
            _ => return None,
        }
    }
    Some(bytes)
}

pub(super) fn decode_image(mut bytes: &[u8]) -> Option<Columns<'_>> {
    let mut columns = [ValueRef::Null; RUN_COLUMNS];
    for column in columns.iter_mut() {
        let (&tag, rest) = bytes.split_first()?;
        bytes = rest;
        *column = match tag {
            0 => ValueRef::Null,
            1 => {
                let (value, rest) = bytes.split_first_chunk::<8>()?;
                bytes = rest;
                ValueRef::Integer(i64::from_le_bytes(*value))
            }
            2 => {
                let (length, rest) = bytes.split_first_chunk::<2>()?;
                let (text, rest) =
                    rest.split_at_checked(usize::from(u16::from_le_bytes(*length)))?;
                bytes = rest;
                ValueRef::Text(text)
            }
            _ => return None,
        };
    }
    bytes.is_empty().then_some(columns)
}
