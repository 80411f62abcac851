//! Which file a connection has open. Everything the index takes from outside its own
//! connection — journal entries, a build made on another connection — must describe that very
//! file; a file's name alone does not say so (a backup restored by renaming a copy over the
//! name leaves the open connections on the old file, while every later open gets the new one).
//!
//! SQLite's unix VFS tells whether the name still leads to the file a connection opened
//! (`SQLITE_FCNTL_HAS_MOVED`: it compares the name's inode with the descriptor's). A connection
//! whose name still leads to its file, checked right after the name was looked up, has that
//! file open: its device and inode identify it.

use std::ffi::{c_int, c_void, CStr};
use std::path::Path;

use rusqlite::{ffi, Connection};

/// The state file a connection has open, identified by device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateFile {
    /// A hash of its device and inode.
    pub id: u64,
    /// Its owner and permission bits, when it was identified.
    pub uid: u32,
    pub mode: u32,
}

impl StateFile {
    /// The file `conn` has open under `path`, or `None` when that cannot be established (the
    /// name leads elsewhere now).
    pub fn of(conn: &Connection, path: &Path) -> Option<StateFile> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let metadata = std::fs::metadata(path).ok()?;
            // Looked up first, then checked: the name led to the connection's file after the
            // lookup, so the lookup found it.
            if !unmoved(conn) {
                return None;
            }
            Some(StateFile {
                id: super::file_io::fnv(&[
                    &metadata.dev().to_le_bytes(),
                    &metadata.ino().to_le_bytes(),
                ]),
                uid: metadata.uid(),
                mode: metadata.mode() & 0o7777,
            })
        }
        // Elsewhere a file cannot be renamed over while SQLite has it open (it opens without
        // FILE_SHARE_DELETE), so the name always leads to the connection's file.
        #[cfg(not(unix))]
        {
            let _ = (conn, path);
            Some(StateFile {
                id: 0,
                uid: 0,
                mode: 0,
            })
        }
    }
}

impl StateFile {
    /// Whether `path` names this file now (its device and inode).
    pub fn is_named_by(&self, path: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(path).is_ok_and(|metadata| {
                super::file_io::fnv(&[&metadata.dev().to_le_bytes(), &metadata.ino().to_le_bytes()])
                    == self.id
            })
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            true
        }
    }
}

/// Whether the name `conn`'s main database was opened under still leads to the file it has
/// open. `false` when the VFS cannot tell.
pub fn unmoved(conn: &Connection) -> bool {
    const MAIN: &CStr = c"main";
    let mut moved: c_int = 0;
    // SAFETY: the handle is live; the file control writes one int.
    let code = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            MAIN.as_ptr(),
            ffi::SQLITE_FCNTL_HAS_MOVED,
            (&mut moved as *mut c_int).cast::<c_void>(),
        )
    };
    code == ffi::SQLITE_OK && moved == 0
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn a_file_renamed_over_the_name_is_another_file() {
        let scratch = Scratch::new("identity");
        let file = scratch.file("state.sqlite");
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch("CREATE TABLE t(x)").unwrap();
        let first = StateFile::of(&conn, &file).expect("identified");
        assert_eq!(StateFile::of(&conn, &file), Some(first));
        // A copy renamed over the name: the connection stays on its file, which has no name now.
        std::fs::copy(&file, scratch.file("copy.sqlite")).unwrap();
        std::fs::rename(scratch.file("copy.sqlite"), &file).unwrap();
        assert!(!unmoved(&conn));
        assert_eq!(StateFile::of(&conn, &file), None);
        let other = Connection::open(&file).unwrap();
        let second = StateFile::of(&other, &file).expect("identified");
        assert_ne!(second.id, first.id);
    }
}

/// A hash of the file at `path`'s device, inode, size and modification time: what a write to
/// it changes (see `clean_proof`; not the change time, which each open's final `chmod` moves);
/// `None` when it cannot be read.
pub fn fingerprint(path: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(path).ok()?;
        let words = [
            metadata.dev(),
            metadata.ino(),
            metadata.size(),
            metadata.mtime() as u64,
            metadata.mtime_nsec() as u64,
        ]
        .map(u64::to_le_bytes);
        let parts: Vec<&[u8]> = words.iter().map(|word| &word[..]).collect();
        Some(super::file_io::fnv(&parts))
    }
    // Elsewhere no close stamp is believed.
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}
