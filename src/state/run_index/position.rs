//! Where the write-ahead log stands: the commit counter, last frame and salt of SQLite's
//! wal-index header, read for a reader's snapshot (`sqlite3_snapshot_get`, which copies that
//! header) or, by a writer holding the write lock, from the shared memory itself.
//!
//! The header's layout (sqlite3.c, `WalIndexHdr`, native byte order): `iVersion`, unused,
//! `iChange` (+1 per commit), `isInit`, `bigEndCksum`, `szPage`, `mxFrame`, `nPage`,
//! `aFrameCksum[2]`, `aSalt[2]`, `aCksum[2]` — 48 bytes. The bundled SQLite fixes it; the tests
//! check the fields against what the WAL file says.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use rusqlite::{ffi, Connection};

/// A state of the WAL: after commit number `commit`, `frames` frames under `salt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalPosition {
    pub commit: u32,
    pub frames: u32,
    pub salt: [u32; 2],
}

const HEADER_BYTES: usize = 48;
const MAIN: &CStr = c"main";

impl WalPosition {
    fn parse(header: &[u8; HEADER_BYTES]) -> WalPosition {
        let word = |at: usize| u32::from_ne_bytes(header[at..at + 4].try_into().unwrap());
        WalPosition {
            commit: word(8),
            frames: word(16),
            salt: [word(32), word(36)],
        }
    }
}

/// Whether a WAL at `next` is the one a commit left at `frames` under `salt`: the same frame
/// and the same salt, exactly. A position is believed only when it is the one before: SQLite
/// draws a WAL's salt at random when it starts the log and again whenever it restarts it, so
/// an entry of an earlier log — another session of the file's, one before a restart, one of
/// a copy — does not name this one's positions (docs/run-index.md, "What a reader believes").
/// The one position every log shares is the start of one nothing was written to yet (commit
/// 0, frame 0, salt 0): only a blob mark could outlive its log there (see `clean_proof`).
/// A log restarted by a checkpoint between two commits (`wal_checkpoint(RESTART)` or
/// `TRUNCATE`, which this package never runs) is a gap for that reason too.
pub fn follows(next: &WalPosition, frames: u32, salt: [u32; 2]) -> bool {
    next.frames == frames && next.salt == salt
}

/// The position of the read transaction open on `conn` (`None` outside WAL mode, outside a
/// transaction, or when it cannot be told).
pub fn of_snapshot(conn: &Connection) -> Option<WalPosition> {
    let mut snapshot: *mut ffi::sqlite3_snapshot = ptr::null_mut();
    // SAFETY: the handle is live; the snapshot is freed below.
    let code = unsafe { ffi::sqlite3_snapshot_get(conn.handle(), MAIN.as_ptr(), &mut snapshot) };
    if code != ffi::SQLITE_OK || snapshot.is_null() {
        return of_unwritten_wal(conn);
    }
    // SAFETY: a snapshot is a copy of the 48-byte header (sqlite3.c `sqlite3WalSnapshotGet`).
    let header = unsafe { ptr::read(snapshot as *const [u8; HEADER_BYTES]) };
    unsafe { ffi::sqlite3_snapshot_free(snapshot) };
    Some(WalPosition::parse(&header))
}

/// SQLite gives no snapshot of a WAL nothing was ever written to (every fresh open of a file
/// no one has written since). Such a read saw the file without a WAL; if the shared memory
/// still says no commit was made, that is where it stands (with the salt it says: a
/// checkpoint may have restarted the empty log).
fn of_unwritten_wal(conn: &Connection) -> Option<WalPosition> {
    let mode: String = conn
        .prepare_cached("PRAGMA main.journal_mode")
        .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
        .ok()?;
    if !mode.eq_ignore_ascii_case("wal") {
        return None;
    }
    // SAFETY: the handle is live, on its own thread, between statements.
    let shared = unsafe { of_shared_memory(conn.handle()) }?;
    (shared.commit == 0 && shared.frames == 0).then_some(shared)
}

/// The position in the wal-index's shared memory. Exact only while the caller holds the WAL
/// write lock (in a commit hook), or when checked against what it must be (see `hooks`).
///
/// # Safety
/// `db` is a live connection handle, used from its own thread and not inside a statement
/// that could unmap the wal-index.
pub unsafe fn of_shared_memory(db: *mut ffi::sqlite3) -> Option<WalPosition> {
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    let code = ffi::sqlite3_file_control(
        db,
        MAIN.as_ptr(),
        ffi::SQLITE_FCNTL_FILE_POINTER,
        (&mut file as *mut *mut ffi::sqlite3_file).cast::<c_void>(),
    );
    if code != ffi::SQLITE_OK || file.is_null() || (*file).pMethods.is_null() {
        return None;
    }
    let methods = &*(*file).pMethods;
    if methods.iVersion < 2 {
        return None;
    }
    let map = methods.xShmMap?;
    let mut region: *mut c_void = ptr::null_mut();
    // Region 0 is mapped already while the connection is in WAL mode; nothing is created.
    if map(file, 0, 32_768, 0 as c_int, &mut region) != ffi::SQLITE_OK || region.is_null() {
        return None;
    }
    // The header is kept twice; a writer changes the second copy first. Equal copies are one
    // header (the writer holding the lock is the caller, or the copies are re-checked).
    let first = ptr::read_volatile(region as *const [u8; HEADER_BYTES]);
    let second = ptr::read_volatile((region as *const [u8; HEADER_BYTES]).add(1));
    (first == second).then(|| WalPosition::parse(&first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn the_header_fields_are_the_wal_files() {
        let scratch = Scratch::new("wal-position");
        let file = scratch.file("state.sqlite");
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x)",
        )
        .unwrap();
        let position = || {
            conn.execute_batch("BEGIN").unwrap();
            let found = of_snapshot(&conn).unwrap();
            conn.execute_batch("COMMIT").unwrap();
            found
        };
        let before = position();
        conn.execute_batch("INSERT INTO t VALUES (1)").unwrap();
        let after = position();
        assert_eq!(after.commit, before.commit + 1);
        // Frames: the WAL file's length past its 32-byte header, in 24-byte-headed pages.
        let wal = std::fs::metadata(scratch.file("state.sqlite-wal"))
            .unwrap()
            .len();
        assert_eq!(u64::from(after.frames), (wal - 32) / (4096 + 24));
        let salt = std::fs::read(scratch.file("state.sqlite-wal")).unwrap();
        // The salt is kept as the file's bytes.
        let bytes = |at: usize| u32::from_ne_bytes(salt[at..at + 4].try_into().unwrap());
        assert_eq!(after.salt, [bytes(16), bytes(20)]);
        // The shared memory says the same between commits.
        assert_eq!(unsafe { of_shared_memory(conn.handle()) }, Some(after));
        // A restarted log: a new salt, frames from zero.
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        conn.execute_batch("INSERT INTO t VALUES (2)").unwrap();
        let restarted = position();
        assert_eq!(restarted.commit, after.commit + 1);
        assert_ne!(restarted.salt, after.salt);
        assert_eq!(restarted.frames, 1);
    }
}
