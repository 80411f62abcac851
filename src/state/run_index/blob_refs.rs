//! Whether a commit can have left a blob that nothing refers to, so that the open's blob prune
//! (`prune::at_open`) may skip its read of the whole file when every commit since the last prune
//! that found nothing says it could not (`RunIndex::blobs_known_clean`).
//!
//! A blob becomes unreferenced only when a row stops referring to it (a referencing column
//! updated to another value, its row deleted — cascades and REPLACE victims included, which
//! the pre-update hook reports too) or when it is inserted and nothing refers to it. So a
//! transaction is *clean* when it did neither: no referencing value went, and each blob it
//! inserted is referred to by a row it wrote, which is checked with SQL on the writer's own
//! connection just before the commit (`confirm`; a statement rolled back after the pre-update
//! hook saw its row is then not taken for a reference). Anything the hook cannot judge — an
//! update of a `blobs` row, a value that is no BLOB, a table with hidden columns, no column
//! list — makes the transaction not clean: the next open reads the file as it always did.
//!
//! The referencing columns are those whose foreign key targets `blobs.blob_hash`, as the prune
//! itself finds them, read when the connection's schema was verified; a commit's entry carries
//! the schema version they were read at (16 bits), and a reader takes the entry as clean only
//! at that version.

use std::ffi::c_int;
use std::sync::OnceLock;

use rusqlite::{ffi, Connection};
use rustc_hash::FxHashMap;

use super::preupdate::{sqlite3_preupdate_new, sqlite3_preupdate_old};
use crate::error::Result;
use crate::state::schema::STATE_SCHEMA_SQL;

/// The columns referring to `blobs.blob_hash`, by table, read at schema version `schema`.
#[derive(Clone, Debug, PartialEq)]
pub struct RefColumns {
    tables: Vec<RefTable>,
    by_name: FxHashMap<Box<[u8]>, usize>,
    pub schema: u16,
}

#[derive(Clone, Debug, PartialEq)]
struct RefTable {
    name: String,
    /// `(index, name)` of each referencing column; `None`: the table has hidden columns, whose
    /// indexes the hook's would not match.
    columns: Option<Vec<(c_int, String)>>,
    /// While reading: the names of the referencing columns.
    referencing: Vec<String>,
}

impl RefColumns {
    /// The columns of a file whose schema objects were verified equal to the state schema's
    /// text at version `schema`: those of that text, read once per process (reading them from
    /// each file was a quarter of an open's instructions).
    pub fn of_state_schema(schema: i64) -> Option<RefColumns> {
        static EXPECTED: OnceLock<Option<RefColumns>> = OnceLock::new();
        let expected = EXPECTED.get_or_init(|| {
            let memory = Connection::open_in_memory().ok()?;
            memory.execute_batch(STATE_SCHEMA_SQL).ok()?;
            RefColumns::read(&memory).ok()
        });
        let mut columns = expected.clone()?;
        columns.schema = schema as u16;
        Some(columns)
    }

    pub fn read(conn: &Connection) -> Result<RefColumns> {
        let schema: i64 = conn.query_row("PRAGMA main.schema_version", [], |row| row.get(0))?;
        // The prune's own query (`prune::blob_references`), then each table's columns: one
        // join of the pragmas over every table cost twice as much, on every open.
        let mut statement = conn.prepare_cached(
            "SELECT m.name, f.\"from\"
             FROM sqlite_schema m, pragma_foreign_key_list(m.name, 'main') f
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'blobs'
               AND f.\"table\" = 'blobs' AND f.\"to\" = 'blob_hash'",
        )?;
        let mut referencing: Vec<(String, String)> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        referencing.sort();
        let mut columns_of =
            conn.prepare_cached("SELECT cid, name, hidden FROM pragma_table_xinfo(?, 'main')")?;
        let mut tables: Vec<RefTable> = Vec::new();
        for (name, column) in referencing {
            if tables.last().is_none_or(|last| last.name != name) {
                let mut columns = Vec::new();
                let mut hidden = false;
                let mut rows = columns_of.query([&name])?;
                while let Some(row) = rows.next()? {
                    hidden |= row.get::<_, i64>(2)? != 0;
                    columns.push((row.get::<_, c_int>(0)?, row.get::<_, String>(1)?));
                }
                tables.push(RefTable {
                    name,
                    columns: (!hidden).then_some(columns),
                    referencing: Vec::new(),
                });
            }
            let table = tables.last_mut().expect("pushed");
            table.referencing.push(column);
        }
        for table in &mut tables {
            let referencing = std::mem::take(&mut table.referencing);
            // SQLite's column names ignore ASCII case; a referencing column that matches no
            // column (or two) leaves the table untracked: every change to it counts.
            let found = |name: &String| {
                let columns = table.columns.iter().flatten();
                let matching = columns.filter(|(_, column)| column.eq_ignore_ascii_case(name));
                matching.map(|(at, _)| *at).collect::<Vec<_>>()
            };
            let indexes: Vec<Vec<c_int>> = referencing.iter().map(found).collect();
            table.columns = if indexes.iter().all(|at| at.len() == 1) {
                let wanted: Vec<c_int> = indexes.into_iter().flatten().collect();
                table.columns.take().map(|mut columns| {
                    columns.retain(|(at, _)| wanted.contains(at));
                    columns
                })
            } else {
                None
            };
        }
        let by_name = (tables.iter().enumerate())
            .map(|(at, table)| (Box::from(table.name.as_bytes()), at))
            .collect();
        Ok(RefColumns {
            tables,
            by_name,
            schema: schema as u16,
        })
    }
}

/// A BLOB value written into a referencing column: table (its index), column, row, value.
pub type Written = (usize, c_int, i64, Box<[u8]>);

/// What the open transaction did to blob references (see the module header).
#[derive(Default, Clone)]
pub struct BlobRefs {
    dirty: bool,
    /// The hashes of the blobs it inserted.
    inserted: Vec<Box<[u8]>>,
    /// The BLOB values it wrote into referencing columns: table, column, row.
    written: Vec<Written>,
    /// `confirm` found every inserted blob referred to, and nothing changed since.
    confirmed: bool,
}

/// A column's value before (`old`) or after the change: `None` for NULL, else whether it is a
/// BLOB and its bytes.
unsafe fn value(db: *mut ffi::sqlite3, column: c_int, old: bool) -> Option<(bool, Box<[u8]>)> {
    let mut value: *mut ffi::sqlite3_value = std::ptr::null_mut();
    let code = if old {
        sqlite3_preupdate_old(db, column, &mut value)
    } else {
        sqlite3_preupdate_new(db, column, &mut value)
    };
    if code != ffi::SQLITE_OK || value.is_null() {
        return Some((false, Box::default()));
    }
    match ffi::sqlite3_value_type(value) {
        ffi::SQLITE_NULL => None,
        ffi::SQLITE_BLOB => {
            let bytes = ffi::sqlite3_value_blob(value).cast::<u8>();
            let length = ffi::sqlite3_value_bytes(value);
            if bytes.is_null() || length <= 0 {
                return Some((true, Box::default()));
            }
            Some((
                true,
                Box::from(std::slice::from_raw_parts(bytes, length as usize)),
            ))
        }
        _ => Some((false, Box::default())),
    }
}

impl BlobRefs {
    /// A row of `table` changes (the pre-update hook's arguments).
    ///
    /// # Safety
    /// Called from the pre-update hook of `db`, with its arguments.
    pub unsafe fn note(
        &mut self,
        columns: Option<&RefColumns>,
        db: *mut ffi::sqlite3,
        operation: c_int,
        table: &[u8],
        new_rowid: i64,
    ) {
        self.confirmed = false;
        if self.dirty {
            return;
        }
        let Some(columns) = columns else {
            self.dirty = true;
            return;
        };
        if table == b"blobs" {
            match operation {
                ffi::SQLITE_INSERT => match value(db, 0, false) {
                    Some((true, hash)) => self.inserted.push(hash),
                    _ => self.dirty = true,
                },
                ffi::SQLITE_DELETE => {}
                _ => self.dirty = true,
            }
            return;
        }
        let Some(&at) = columns.by_name.get(table) else {
            return;
        };
        let Some(referencing) = &columns.tables[at].columns else {
            self.dirty = true;
            return;
        };
        for &(column, _) in referencing {
            let old = (operation != ffi::SQLITE_INSERT)
                .then(|| value(db, column, true))
                .flatten();
            let new = (operation != ffi::SQLITE_DELETE)
                .then(|| value(db, column, false))
                .flatten();
            if old.is_some() && (operation != ffi::SQLITE_UPDATE || old != new) {
                self.dirty = true;
                return;
            }
            if let Some((true, hash)) = new {
                self.written.push((at, column, new_rowid, hash));
            }
        }
    }

    /// A copy to [`confirm`] on the connection, unless the transaction is already known not
    /// to be clean (or needs nothing confirmed).
    pub fn to_confirm(&self) -> Option<BlobRefs> {
        (!self.dirty && !self.confirmed && !self.inserted.is_empty()).then(|| self.clone())
    }

    pub fn set_confirmed(&mut self) {
        self.confirmed = true;
    }

    /// Whether the transaction is clean (see the module header).
    pub fn is_clean(&self) -> bool {
        !self.dirty && (self.inserted.is_empty() || self.confirmed)
    }

    pub fn clear(&mut self) {
        *self = BlobRefs::default();
    }
}

/// Whether every blob `refs` inserted is referred to by a row it wrote, as the file is now on
/// `conn` (at the end of the writer's transaction).
pub fn confirm(conn: &Connection, columns: &RefColumns, refs: &BlobRefs) -> bool {
    refs.inserted.iter().all(|hash| {
        refs.written
            .iter()
            .filter(|(_, _, _, value)| value == hash)
            .any(|&(table, column, rowid, _)| {
                let table = &columns.tables[table];
                let Some(name) = (table.columns.iter().flatten())
                    .find(|(at, _)| *at == column)
                    .map(|(_, name)| name)
                else {
                    return false;
                };
                let sql = format!(
                    "SELECT 1 FROM main.{} WHERE rowid = ? AND {} = ?",
                    quote(&table.name),
                    quote(name)
                );
                conn.prepare_cached(&sql)
                    .and_then(|mut statement| statement.exists(rusqlite::params![rowid, &hash[..]]))
                    .unwrap_or(false)
            })
    })
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::RefColumns;
    use crate::test_support::{open_read_write, Scratch};

    #[test]
    fn the_state_schemas_columns_are_those_a_state_file_has() {
        let dir = Scratch::new("blob-refs-state-schema");
        let state = open_read_write(&dir.file("state.sqlite"), 1_789_257_600_000);
        let conn = state.file_conn().unwrap();
        let read = RefColumns::read(conn).unwrap();
        assert!(read.tables.len() > 5, "{read:?}");
        assert!(read.tables.iter().all(|table| table.columns.is_some()));
        let version: i64 = conn
            .query_row("PRAGMA schema_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(RefColumns::of_state_schema(version), Some(read));
    }
}
