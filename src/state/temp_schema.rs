//! Whether a connection's TEMP schema holds anything: a table or view there shadows a `main`
//! one of the same name for that connection alone, so what reads `main` by unqualified names
//! (the run index's mirror, the prune's helper connections) must not stand in for it then.

use std::ffi::{c_uint, c_void, CStr};

use rusqlite::{ffi, Connection, OptionalExtension};

use crate::error::Result;

/// Whether the TEMP schema holds anything (a table or view there could shadow a main one).
pub fn is_used(conn: &Connection) -> Result<bool> {
    if !is_open(conn, c"temp") {
        return Ok(false);
    }
    Ok(conn
        .prepare_cached("SELECT 1 FROM temp.sqlite_master LIMIT 1")?
        .query_row([], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether the database `name` is open (the TEMP one opens with its first object).
fn is_open(conn: &Connection, name: &CStr) -> bool {
    let mut version: c_uint = 0;
    // SAFETY: the handle is open for the borrow of `conn`; the opcode writes one unsigned int.
    let code = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            name.as_ptr(),
            ffi::SQLITE_FCNTL_DATA_VERSION,
            (&mut version as *mut c_uint).cast::<c_void>(),
        )
    };
    code == ffi::SQLITE_OK
}
