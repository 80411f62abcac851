//! The pre-update hook's API (SQLITE_ENABLE_PREUPDATE_HOOK; libsqlite3-sys has no bindings for
//! it without bindgen).

use std::ffi::{c_char, c_int, c_void};

use rusqlite::ffi;

extern "C" {
    pub fn sqlite3_preupdate_hook(
        db: *mut ffi::sqlite3,
        callback: Option<
            unsafe extern "C" fn(
                *mut c_void,
                *mut ffi::sqlite3,
                c_int,
                *const c_char,
                *const c_char,
                ffi::sqlite3_int64,
                ffi::sqlite3_int64,
            ),
        >,
        context: *mut c_void,
    ) -> *mut c_void;
    pub fn sqlite3_preupdate_old(
        db: *mut ffi::sqlite3,
        column: c_int,
        value: *mut *mut ffi::sqlite3_value,
    ) -> c_int;
    pub fn sqlite3_preupdate_new(
        db: *mut ffi::sqlite3,
        column: c_int,
        value: *mut *mut ffi::sqlite3_value,
    ) -> c_int;
}
