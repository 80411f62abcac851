//! The prune's reads, run inside SQLite: each scan calls a function of this module for every
//! row, which loads the blob into (or strikes the row's hashes off) the [`BlobSet`], instead of
//! handing every row back through `sqlite3_step` and the column API. On a file of 100,000 runs
//! that is some 700,000 rows per prune, and the round trip per row cost more than reading it.
//!
//! The functions exist on the connection only while a [`Scan`] lives (registered when it is
//! made, removed when it is dropped), `SQLITE_DIRECTONLY` so no view or trigger can call them;
//! SQL run through the store never sees them. Removing a function makes SQLite re-prepare the
//! connection's cached statements on their next use, once per prune.

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use rusqlite::{ffi, Connection};

use super::blob_set::BlobSet;
use crate::error::Result;

const LOAD: &CStr = c"piw_prune_load";
const STRIKE: &CStr = c"piw_prune_strike";
const FLAGS: c_int = ffi::SQLITE_UTF8 | ffi::SQLITE_DIRECTONLY;

/// Above this many expected blobs the set starts smaller and grows while loading, so that an
/// odd row id range cannot make it allocate without bound.
const LARGEST_INITIAL_SET: usize = 1 << 18;

/// The scan functions registered on a connection, with the set they fill and strike from.
pub struct Scan<'c> {
    conn: &'c Connection,
    /// Owned by this scan (from `Box::into_raw`); SQLite calls the functions with it, and only
    /// while one of this scan's statements steps, on this thread.
    set: *mut BlobSet,
}

impl<'c> Scan<'c> {
    /// Registers the functions on `conn` and loads every blob.
    pub fn load(conn: &'c Connection) -> Result<Scan<'c>> {
        let highest: Option<i64> =
            conn.query_row("SELECT max(rowid) FROM blobs", [], |row| row.get(0))?;
        let expected = highest.map_or(0, |rowid| rowid.clamp(0, LARGEST_INITIAL_SET as i64));
        let set = Box::into_raw(Box::new(BlobSet::with_capacity(expected as usize)));
        let scan = Scan { conn, set };
        scan.register(LOAD, 2, Some(load_blob))?;
        scan.register(STRIKE, -1, Some(strike_values))?;
        // In key order, from the covering primary-key index: the set fills front to back.
        scan.run("SELECT 1 FROM blobs WHERE piw_prune_load(rowid, blob_hash) ORDER BY blob_hash")?;
        Ok(scan)
    }

    /// Whether every blob is known to be referenced.
    pub fn is_empty(&self) -> bool {
        // SAFETY: `set` is live while the scan is, and no statement of it is stepping.
        unsafe { &*self.set }.is_empty()
    }

    /// Strikes off the blobs `table` refers to through `columns`, reading its rows newest
    /// first when `newest_first`, and stopping once none is left.
    pub fn strike(&self, table: &str, columns: &[String], newest_first: bool) -> Result<()> {
        let list = columns
            .iter()
            .map(|column| quote_identifier(column))
            .collect::<Vec<_>>()
            .join(", ");
        let order = if newest_first {
            " ORDER BY rowid DESC"
        } else {
            ""
        };
        self.run(&format!(
            "SELECT 1 FROM {} WHERE piw_prune_strike({list}){order} LIMIT 1",
            quote_identifier(table)
        ))?;
        // SAFETY: as in `is_empty`.
        unsafe { &mut *self.set }.flush();
        Ok(())
    }

    /// The row ids of the blobs nothing referenced, ascending; removes the functions.
    pub fn into_rowids(mut self) -> Result<Vec<i64>> {
        self.unregister()?;
        // SAFETY: from `Box::into_raw` in `load`; no function can reach it any more, and the
        // null left behind tells `drop` it is gone.
        let set = unsafe { Box::from_raw(std::mem::replace(&mut self.set, ptr::null_mut())) };
        Ok(set.into_rowids())
    }

    fn run(&self, sql: &str) -> Result<()> {
        let mut statement = self.conn.prepare(sql)?;
        statement.query([])?.next()?;
        Ok(())
    }

    fn unregister(&self) -> Result<()> {
        self.register(LOAD, 2, None)?;
        self.register(STRIKE, -1, None)
    }

    fn register(&self, name: &CStr, arguments: c_int, function: Option<Function>) -> Result<()> {
        let data = if function.is_some() {
            self.set.cast::<c_void>()
        } else {
            ptr::null_mut()
        };
        // SAFETY: the handle is the live connection's; `data` outlives the registration (see
        // `drop`), and the functions only use it as the `BlobSet` it is.
        let code = unsafe {
            ffi::sqlite3_create_function_v2(
                self.conn.handle(),
                name.as_ptr(),
                arguments,
                FLAGS,
                data,
                function,
                None,
                None,
                None,
            )
        };
        match code {
            ffi::SQLITE_OK => Ok(()),
            code => Err(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None).into()),
        }
    }
}

impl Drop for Scan<'_> {
    fn drop(&mut self) {
        // A set the functions may still reach (their removal failed: a statement still active,
        // which the scan never leaves) is leaked rather than left dangling.
        if !self.set.is_null() && self.unregister().is_ok() {
            // SAFETY: from `Box::into_raw` in `load`; no function can reach it any more.
            drop(unsafe { Box::from_raw(self.set) });
        }
    }
}

type Function =
    unsafe extern "C" fn(*mut ffi::sqlite3_context, c_int, *mut *mut ffi::sqlite3_value);

/// `piw_prune_load(rowid, blob_hash)`: adds the blob to the set; 0.
unsafe extern "C" fn load_blob(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    guarded(context, || {
        // SAFETY: SQLite passes `count` (here 2) valid values for this call.
        let values = unsafe { std::slice::from_raw_parts(values, count as usize) };
        // SAFETY: the user data is the scan's set (see `Scan::register`), used by nothing else
        // while its statement steps.
        let set = unsafe { &mut *ffi::sqlite3_user_data(context).cast::<BlobSet>() };
        // SAFETY: values of this call.
        let (rowid, hash) = unsafe { (ffi::sqlite3_value_int64(values[0]), blob(values[1])) };
        set.insert(rowid, hash);
        0
    })
}

/// `piw_prune_strike(hash, ...)`: strikes every BLOB argument off the set; 1 once the set is
/// empty (which ends the scan), else 0.
unsafe extern "C" fn strike_values(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    guarded(context, || {
        // SAFETY: as in `load_blob`.
        let values = unsafe { std::slice::from_raw_parts(values, count.max(0) as usize) };
        // SAFETY: as in `load_blob`.
        let set = unsafe { &mut *ffi::sqlite3_user_data(context).cast::<BlobSet>() };
        for value in values {
            // Only BLOB values equal a blob_hash (a STRICT BLOB column).
            // SAFETY: a value of this call.
            if let Some(hash) = unsafe { blob(*value) } {
                set.strike(hash);
            }
        }
        c_int::from(set.is_empty())
    })
}

/// The bytes of a BLOB value; `None` for any other type.
///
/// # Safety
/// `value` is a value of the current function call; the slice lives as long as the call.
unsafe fn blob<'v>(value: *mut ffi::sqlite3_value) -> Option<&'v [u8]> {
    // SAFETY: the caller's guarantee; blob before bytes, as SQLite's documentation asks.
    unsafe {
        if ffi::sqlite3_value_type(value) != ffi::SQLITE_BLOB {
            return None;
        }
        let bytes = ffi::sqlite3_value_blob(value).cast::<u8>();
        let length = ffi::sqlite3_value_bytes(value) as usize;
        Some(if bytes.is_null() || length == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(bytes, length)
        })
    }
}

/// Runs a function body; its integer result, or an error result if it panicked (nothing may
/// unwind into SQLite).
fn guarded(context: *mut ffi::sqlite3_context, body: impl FnOnce() -> c_int) {
    match catch_unwind(AssertUnwindSafe(body)) {
        // SAFETY: the context of the running call.
        Ok(result) => unsafe { ffi::sqlite3_result_int(context, result) },
        // SAFETY: as above; the message is a static C string.
        Err(_) => unsafe {
            ffi::sqlite3_result_error(context, c"the blob prune panicked".as_ptr(), -1)
        },
    }
}

fn quote_identifier(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}
