//! The prune's reads, run inside SQLite: each scan calls a function of this module for every
//! row, which loads the blob into (or strikes the row's hashes off) the [`BlobSet`], or, on a
//! helper before the set is loaded, keeps the row's hashes ([`Collected`]), instead of handing
//! every row back through `sqlite3_step` and the column API. On a file of 100,000 runs
//! that is some 700,000 rows per prune, and the round trip per row cost more than reading it.
//!
//! A function exists on its connection only while its [`Registration`] lives, and is
//! `SQLITE_DIRECTONLY`, so no view or trigger can call it. It reaches the set or striker of
//! the scan running through a slot that SQLite owns (and frees when the function is removed or
//! the connection closes); the slot is empty outside a scan, and a call then fails. Removing a
//! function makes SQLite re-prepare the connection's cached statements on their next use.

use std::cell::Cell;
use std::collections::hash_map::{Entry, HashMap};
use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use rusqlite::{ffi, Connection, Statement};

use super::blob_set::{BlobSet, Striker};
use crate::error::Result;

const LOAD: &CStr = c"piw_prune_load";
const STRIKE: &CStr = c"piw_prune_strike";
const COLLECT: &CStr = c"piw_prune_collect";
const FLAGS: c_int = ffi::SQLITE_UTF8 | ffi::SQLITE_DIRECTONLY;

/// Above this many expected blobs the set starts smaller and grows while loading, so that an
/// odd row id range cannot make it allocate without bound.
const LARGEST_INITIAL_SET: i64 = 1 << 18;

/// A table whose columns refer to blobs, as a scan reads it.
pub struct TableScan {
    pub table: String,
    pub columns: Vec<String>,
    /// Read in descending row id order.
    pub newest_first: bool,
    /// Whether `rowid` names the table's row ids (it has them, and no column is called so),
    /// so that it can be read in row id ranges.
    pub ranged: bool,
}

/// Every blob of the file `conn` reads, in a new set.
pub fn load(conn: &Connection) -> Result<BlobSet> {
    let highest: Option<i64> =
        conn.query_row("SELECT max(rowid) FROM blobs", [], |row| row.get(0))?;
    let expected = highest.map_or(0, |rowid| rowid.clamp(0, LARGEST_INITIAL_SET));
    let mut set = BlobSet::with_capacity(expected as usize);
    let load = Registration::new(conn, LOAD, 2, load_blob)?;
    // In key order, from the covering primary-key index: the set fills front to back.
    load.with_target(&mut set, || {
        let mut statement = conn.prepare(
            "SELECT 1 FROM blobs WHERE piw_prune_load(rowid, blob_hash) ORDER BY blob_hash",
        )?;
        statement.query([])?.next()?;
        Ok(())
    })?;
    Ok(set)
}

/// Rows of each table read newest first that are read before any table is read in full.
const NEWEST_ROWS: usize = 256;

/// The referencing values a part read before there was a set to strike them off: BLOBs of a
/// hash's length, and any others (only a file that bypassed the schema's checks has those).
#[derive(Default)]
pub struct Collected {
    pub hashes: Vec<[u8; 32]>,
    pub others: Vec<Vec<u8>>,
}

impl Collected {
    pub fn len(&self) -> usize {
        self.hashes.len() + self.others.len()
    }

    /// Strikes every value collected.
    pub fn strike_into(&self, striker: &mut Striker<'_>) {
        for hash in &self.hashes {
            striker.strike(hash);
        }
        for other in &self.others {
            striker.strike(other);
        }
        striker.flush();
    }
}

/// A connection that strikes values off a set (or collects them) as it reads: the functions
/// are registered on it while this lives, with the statements it prepared for each table.
pub struct StrikingConnection<'c> {
    conn: &'c Connection,
    /// Before the registrations: statements are finalized before the functions are removed.
    parts: HashMap<(usize, bool, bool), Statement<'c>>,
    strike: Registration<'c>,
    /// Registered on first use: only helpers collect.
    collect: Option<Registration<'c>>,
}

impl<'c> StrikingConnection<'c> {
    pub fn new(conn: &'c Connection) -> Result<StrikingConnection<'c>> {
        Ok(StrikingConnection {
            conn,
            parts: HashMap::new(),
            strike: Registration::new(conn, STRIKE, -1, strike_values)?,
            collect: None,
        })
    }

    /// Strikes what the newest [`NEWEST_ROWS`] rows of `scan` refer to, until the set is empty.
    pub fn newest_rows(&mut self, striker: &mut Striker<'_>, scan: &TableScan) -> Result<()> {
        let list = column_list(scan);
        let sql = format!(
            "SELECT 1 FROM (SELECT {list} FROM {} ORDER BY rowid DESC LIMIT {NEWEST_ROWS})
             WHERE {}({list}) LIMIT 1",
            quote_identifier(&scan.table),
            STRIKE.to_string_lossy()
        );
        let outcome = self.strike.with_target(striker, || {
            self.conn.prepare(&sql)?.query([])?.next()?;
            Ok(())
        });
        striker.flush();
        outcome
    }

    /// Strikes what the rows of table `index` (of `tables`) with row ids in `range` (all rows
    /// without one) refer to, until the set is empty.
    pub fn part(
        &mut self,
        striker: &mut Striker<'_>,
        tables: &[TableScan],
        index: usize,
        range: Option<(i64, i64)>,
    ) -> Result<()> {
        let statement = statement(&mut self.parts, self.conn, tables, index, range, false)?;
        let outcome = self
            .strike
            .with_target(striker, || run_part(statement, range));
        striker.flush();
        outcome
    }

    /// Adds to `into` every referencing value of the rows [`StrikingConnection::part`] reads.
    pub fn collect_part(
        &mut self,
        into: &mut Collected,
        tables: &[TableScan],
        index: usize,
        range: Option<(i64, i64)>,
    ) -> Result<()> {
        let collect = match &mut self.collect {
            Some(registration) => registration,
            empty => empty.insert(Registration::new(self.conn, COLLECT, -1, collect_values)?),
        };
        let statement = statement(&mut self.parts, self.conn, tables, index, range, true)?;
        collect.with_target(into, || run_part(statement, range))
    }
}

/// The statement reading a part of table `index`, prepared on first use.
fn statement<'m, 'c>(
    parts: &'m mut HashMap<(usize, bool, bool), Statement<'c>>,
    conn: &'c Connection,
    tables: &[TableScan],
    index: usize,
    range: Option<(i64, i64)>,
    collect: bool,
) -> Result<&'m mut Statement<'c>> {
    Ok(match parts.entry((index, range.is_some(), collect)) {
        Entry::Occupied(prepared) => prepared.into_mut(),
        Entry::Vacant(slot) => {
            slot.insert(conn.prepare(&part_sql(&tables[index], range.is_some(), collect))?)
        }
    })
}

/// Steps a part's statement to its first row: the end of its rows, or the set's emptying.
fn run_part(statement: &mut Statement<'_>, range: Option<(i64, i64)>) -> Result<()> {
    let mut rows = match range {
        Some((low, high)) => statement.query([low, high])?,
        None => statement.query([])?,
    };
    rows.next()?;
    Ok(())
}

fn part_sql(scan: &TableScan, ranged: bool, collect: bool) -> String {
    let range = if ranged {
        "rowid BETWEEN ?1 AND ?2 AND "
    } else {
        ""
    };
    let order = if scan.newest_first {
        " ORDER BY rowid DESC"
    } else {
        ""
    };
    let function = if collect { COLLECT } else { STRIKE }.to_string_lossy();
    format!(
        "SELECT 1 FROM {} WHERE {range}{function}({}){order} LIMIT 1",
        quote_identifier(&scan.table),
        column_list(scan)
    )
}

fn column_list(scan: &TableScan) -> String {
    let columns: Vec<String> = scan.columns.iter().map(|c| quote_identifier(c)).collect();
    columns.join(", ")
}

/// A function registered on a connection while this lives.
struct Registration<'c> {
    conn: &'c Connection,
    name: &'static CStr,
    arguments: c_int,
    /// What the function works on during [`Registration::run`]; null otherwise. From
    /// `Box::into_raw`, owned by SQLite (see [`free_slot`]), live while the function is.
    slot: *const Cell<*mut c_void>,
}

type Function =
    unsafe extern "C" fn(*mut ffi::sqlite3_context, c_int, *mut *mut ffi::sqlite3_value);

impl<'c> Registration<'c> {
    fn new(
        conn: &'c Connection,
        name: &'static CStr,
        arguments: c_int,
        function: Function,
    ) -> Result<Registration<'c>> {
        let slot = Box::into_raw(Box::new(Cell::new(ptr::null_mut::<c_void>())));
        // SAFETY: the handle is the live connection's; SQLite owns the slot from here on and
        // frees it through `free_slot`, also when the call fails.
        let code = unsafe {
            ffi::sqlite3_create_function_v2(
                conn.handle(),
                name.as_ptr(),
                arguments,
                FLAGS,
                slot.cast(),
                Some(function),
                None,
                None,
                Some(free_slot),
            )
        };
        if code != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None).into());
        }
        Ok(Registration {
            conn,
            name,
            arguments,
            slot,
        })
    }

    /// Runs `body` with the function working on `target`.
    fn with_target<T, R>(&self, target: &mut T, body: impl FnOnce() -> Result<R>) -> Result<R> {
        // SAFETY: the slot lives while the function is registered, which it is until `drop`.
        let slot = unsafe { &*self.slot };
        slot.set((target as *mut T).cast());
        let outcome = body();
        slot.set(ptr::null_mut());
        outcome
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `run`; emptied before the removal frees it.
        unsafe { &*self.slot }.set(ptr::null_mut());
        // SAFETY: the live connection's handle. If the removal fails (a statement of the
        // connection still active), the function stays with its empty slot and fails if called.
        unsafe {
            ffi::sqlite3_create_function_v2(
                self.conn.handle(),
                self.name.as_ptr(),
                self.arguments,
                FLAGS,
                ptr::null_mut(),
                None,
                None,
                None,
                None,
            );
        }
    }
}

unsafe extern "C" fn free_slot(slot: *mut c_void) {
    // SAFETY: SQLite calls this once, with the slot `Registration::new` boxed.
    drop(unsafe { Box::from_raw(slot.cast::<Cell<*mut c_void>>()) });
}

/// `piw_prune_load(rowid, blob_hash)`: adds the blob to the set; 0.
unsafe extern "C" fn load_blob(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite calls the function with its own context and `count` (2) values.
    unsafe {
        call(context, |set: &mut BlobSet| {
            let values = std::slice::from_raw_parts(values, count as usize);
            set.insert(ffi::sqlite3_value_int64(values[0]), blob(values[1]));
            0
        })
    }
}

/// `piw_prune_strike(hash, ...)`: strikes every BLOB argument off the set; 1 once the set is
/// empty (which ends the scan), else 0.
unsafe extern "C" fn strike_values(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite calls the function with its own context and `count` values.
    unsafe {
        call(context, |striker: &mut Striker<'_>| {
            for hash in blob_arguments(values, count) {
                striker.strike(hash);
            }
            c_int::from(striker.is_done())
        })
    }
}

/// `piw_prune_collect(hash, ...)`: adds every BLOB argument to the collection; 0.
unsafe extern "C" fn collect_values(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite calls the function with its own context and `count` values.
    unsafe {
        call(context, |collected: &mut Collected| {
            for bytes in blob_arguments(values, count) {
                match <[u8; 32]>::try_from(bytes) {
                    Ok(hash) => collected.hashes.push(hash),
                    Err(_) => collected.others.push(bytes.to_vec()),
                }
            }
            0
        })
    }
}

/// Runs a function's body on the target in its slot; its integer result, or an error result
/// outside a scan or if the body panicked (nothing may unwind into SQLite).
///
/// # Safety
/// `context` is the running call's, registered by a [`Registration`] whose `run` sets a `T`.
unsafe fn call<T>(context: *mut ffi::sqlite3_context, body: impl FnOnce(&mut T) -> c_int) {
    // SAFETY: the user data is the registration's slot, live while the function is.
    let target = unsafe { &*ffi::sqlite3_user_data(context).cast::<Cell<*mut c_void>>() }.get();
    if target.is_null() {
        // SAFETY: the running call's context; a static message.
        unsafe { ffi::sqlite3_result_error(context, c"not available".as_ptr(), -1) };
        return;
    }
    // SAFETY: `run` set the slot to its `&mut T`, used by nothing else while its statement steps.
    let target = unsafe { &mut *target.cast::<T>() };
    match catch_unwind(AssertUnwindSafe(|| body(target))) {
        // SAFETY: the running call's context.
        Ok(result) => unsafe { ffi::sqlite3_result_int(context, result) },
        // SAFETY: as above; a static message.
        Err(_) => unsafe {
            ffi::sqlite3_result_error(context, c"the blob prune panicked".as_ptr(), -1)
        },
    }
}

/// The BLOB arguments of a function call, as bytes: only BLOB values equal a `blob_hash` (a
/// STRICT BLOB column).
///
/// # Safety
/// `values` and `count` are the running call's; the slices live as long as the call.
unsafe fn blob_arguments<'v>(
    values: *mut *mut ffi::sqlite3_value,
    count: c_int,
) -> impl Iterator<Item = &'v [u8]> {
    let values: &[*mut ffi::sqlite3_value] = if values.is_null() || count <= 0 {
        &[]
    } else {
        // SAFETY: the caller's guarantee; not null, `count` values.
        unsafe { std::slice::from_raw_parts(values, count as usize) }
    };
    // SAFETY: each is a value of the running call.
    values.iter().filter_map(|value| unsafe { blob(*value) })
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

pub fn quote_identifier(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}
