//! What proves that the state file has no blob that nothing refers to, so that a read-write
//! open may skip its prune's read of the whole file (`prune::at_open`). The journal's header
//! holds one [`BlobMark`], of one of two kinds:
//! - **a position**: a writer's prune found nothing there, in the WAL as it stood; the file
//!   is clean now when every commit from there to now is a journaled one that says it left no
//!   blob unreferenced (`blob_refs`), chaining exactly as a catch-up's, at the same schema;
//! - **a close stamp**: the file's last connection closed it clean. The WAL is gone then, and
//!   with it every position, so the stamp names the file as it was left: a hash of its device,
//!   inode, size and modification time (`identity::fingerprint`). Every commit reaches the file
//!   through a checkpoint, which writes it and so moves its modification time; a commit not yet
//!   checkpointed is in a WAL. So the file is still as the stamp left it when the fingerprint is
//!   the same and the WAL holds no frame.
//!
//! A stamp is left only when the close proves there was nothing after the clean position it
//! saw: its read snapshot's position chains from the mark as above, and the WAL, which the last
//! close checkpoints and deletes, holds no frame past that position (read on a descriptor held
//! across the close: [`wal_ends_at`]). Anything short of that — another connection still open,
//! a commit after the snapshot, a gap in the chain — leaves no stamp (the journal goes, as it
//! always did), and the next open reads the file.
//!
//! The limits: a change made by another program between the close's checkpoint and the stat
//! after it (microseconds) is taken for the close's own; a change within the same tick of the
//! kernel's coarse clock as the close's checkpoint, with the file's size unchanged, leaves the
//! fingerprint unchanged on kernels without fine-grained timestamps (before Linux 6.13); and so
//! does a different file of the same size copied into place with the same modification time,
//! to the nanosecond (`cp -p` keeps the copy's own). The change time would tell those apart,
//! but every open moves it: its final `chmod`, as the reference's, changes no byte and still
//! counts as a change. A wrong belief can only keep an unreferenced blob in the file until a
//! later open's prune reads it: a proof only ever skips a prune, it never makes one delete.

use std::fs::File;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::file_io::read_at;
use super::identity::fingerprint;
use super::journal::{BlobMark, Journal, Slot};
use super::position::{self, follows, WalPosition};

/// At most this many commits since the last blob mark are checked; past it, the open's prune
/// reads the file.
const MAX_MARK_COMMITS: u32 = 1024;

/// The position of a log nothing was written to yet: every WAL SQLite creates anew starts
/// there, so a mark there would name every later log too. The file itself names it instead (a
/// close stamp, whose chain starts here).
const UNWRITTEN: WalPosition = WalPosition {
    commit: 0,
    frames: 0,
    salt: [0, 0],
};

/// Whether the file, as the write transaction open on `conn` (just begun, nothing changed yet)
/// sees it, provably has no blob that nothing refers to (see the module header). When it does
/// not, the mark goes: only the prune that follows may leave another.
pub fn known_clean(journal: &Journal, conn: &Connection, file: &Path) -> bool {
    let proven = proven_clean(journal, conn, file);
    if !proven {
        journal.clear_blob_mark();
    }
    proven
}

fn proven_clean(journal: &Journal, conn: &Connection, file: &Path) -> bool {
    let Some(mark) = journal.blob_mark() else {
        return false;
    };
    let Some(schema) = schema_version(conn) else {
        return false;
    };
    // SAFETY: the connection holds the write lock, outside any statement.
    let Some(now) = (unsafe { position::of_shared_memory(conn.handle()) }) else {
        return false;
    };
    mark.schema == schema && holds_at(journal, &mark, now, file)
}

/// Whether `mark` (at the connection's schema) proves the file clean at `now`.
fn holds_at(journal: &Journal, mark: &BlobMark, now: WalPosition, file: &Path) -> bool {
    match mark.closed_fingerprint() {
        Some(stamp) if now == UNWRITTEN => fingerprint(file) == Some(stamp),
        // This log's commits, from its start: a stamp that did not name the file this log
        // began from was cleared by the open that found so, before any commit of this package
        // in it (every read-write open checks first); another program's commit is a gap.
        Some(_) => chains_clean(journal, UNWRITTEN, mark.schema, now),
        None => chains_clean(journal, mark.position, mark.schema, now),
    }
}

/// Records that the prune in `conn`'s write transaction found no blob to delete, at the
/// position the transaction sees (the write lock is held: nothing else can commit); at an
/// unwritten log, as a stamp of the file.
pub fn mark_clean(journal: &Journal, conn: &Connection, file: &Path) {
    let Some(schema) = schema_version(conn) else {
        return;
    };
    // SAFETY: as in `known_clean`.
    let Some(position) = (unsafe { position::of_shared_memory(conn.handle()) }) else {
        return;
    };
    if position != UNWRITTEN {
        journal.set_blob_mark(&BlobMark { position, schema });
    } else if let Some(stamp) = fingerprint(file) {
        journal.set_blob_mark(&BlobMark::at_close(stamp, schema));
    }
}

/// From `from` to `now`, only journaled commits that say they left no blob unreferenced,
/// chaining exactly as a catch-up's (docs/run-index.md, "What a reader believes").
fn chains_clean(journal: &Journal, from: WalPosition, schema: u32, now: WalPosition) -> bool {
    let count = now.commit.wrapping_sub(from.commit);
    if count > MAX_MARK_COMMITS {
        return false;
    }
    let (mut frames, mut salt) = (from.frames, from.salt);
    if count > 0 {
        let first = from.commit.wrapping_add(1);
        for slot in journal.read_ahead(first, count) {
            let Some(Slot::Written(entry)) = slot else {
                return false;
            };
            if !follows(&entry.base, frames, salt) || entry.blobs_clean != Some(schema as u16) {
                return false;
            }
            frames = entry.after_frames;
            salt = entry.after_salt.unwrap_or(entry.base.salt);
        }
    }
    follows(&now, frames, salt)
}

/// What a close that may be the file's last saw just before it closed: the file clean at
/// `at`, and the WAL it read, held open.
pub struct BeforeClose {
    at: WalPosition,
    schema: u32,
    wal: File,
}

/// Before `conn` (outside any transaction) closes: whether the file is clean as of a read
/// snapshot taken now, with the WAL held open to tell, after the close, whether anything was
/// committed past it.
pub fn before_close(journal: &Journal, conn: &Connection, file: &Path) -> Option<BeforeClose> {
    if !conn.is_autocommit() {
        return None;
    }
    let mark = journal.blob_mark()?;
    conn.execute_batch("BEGIN").ok()?;
    let seen = (|| {
        let schema = schema_version(conn)?;
        let at = position::of_snapshot(conn)?;
        let clean = mark.schema == schema && holds_at(journal, &mark, at, file);
        clean.then_some((at, schema))
    })();
    let _ = conn.execute_batch("COMMIT");
    let (at, schema) = seen?;
    // Opened while the connection is: the WAL's name cannot be deleted before its close.
    let wal = open_no_follow(&wal_path(file))?;
    Some(BeforeClose { at, schema, wal })
}

/// After the file's last close (the caller saw SQLite delete the WAL): when nothing was
/// committed past what `before` saw, leaves a close stamp in the journal and returns `true`.
pub fn stamp_after_close(journal: &Journal, before: BeforeClose, file: &Path) -> bool {
    if !wal_ends_at(&before.wal, before.at) {
        return false;
    }
    let Some(stamp) = fingerprint(file) else {
        return false;
    };
    journal.stamp_closed(&BlobMark::at_close(stamp, before.schema))
}

/// Whether the WAL in `wal` holds no frame past `at` (the position of a snapshot taken while
/// it was in use): no frame under `at`'s salt at the next index, and, when `at` had frames,
/// the log not restarted under another salt (a restart comes only after frames under `at`'s,
/// which the first test sees, or after a checkpoint of `at`'s, which leaves the header's salt
/// another).
fn wal_ends_at(wal: &File, at: WalPosition) -> bool {
    let mut header = [0u8; 32];
    if read_at(wal, &mut header, 0).is_err() {
        // No header: no frame was ever written to it.
        return at.frames == 0;
    }
    let salt = |bytes: &[u8]| {
        let word = |from: usize| u32::from_ne_bytes(bytes[from..from + 4].try_into().unwrap());
        [word(0), word(4)]
    };
    if at.frames > 0 && salt(&header[16..24]) != at.salt {
        return false;
    }
    let page_size = u64::from(u32::from_be_bytes(header[8..12].try_into().unwrap()));
    let page_size = if page_size == 1 { 65_536 } else { page_size };
    let next = 32 + u64::from(at.frames) * (24 + page_size);
    let mut frame = [0u8; 24];
    match read_at(wal, &mut frame, next) {
        Ok(()) => salt(&frame[8..16]) != at.salt,
        Err(error) => error.kind() == std::io::ErrorKind::UnexpectedEof,
    }
}

/// SQLite's WAL beside `file`.
pub fn wal_path(file: &Path) -> PathBuf {
    let mut wal = file.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// SQLite's file, read only, never through a symbolic link.
fn open_no_follow(path: &Path) -> Option<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    let file = options.open(path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

fn schema_version(conn: &Connection) -> Option<u32> {
    conn.query_row("PRAGMA main.schema_version", [], |row| row.get::<_, i64>(0))
        .ok()
        .map(|version| version as u32)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::test_support::Scratch;

    /// The position of a read snapshot taken now.
    fn snapshot(conn: &Connection) -> WalPosition {
        conn.execute_batch("BEGIN").unwrap();
        conn.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0))
            .unwrap();
        let at = position::of_snapshot(conn).unwrap();
        conn.execute_batch("COMMIT").unwrap();
        at
    }

    #[test]
    fn the_wal_ends_at_a_snapshot_until_a_frame_comes_after_it() {
        let scratch = Scratch::new("clean-proof-wal-ends");
        let file = scratch.file("state.sqlite");
        let conn = Connection::open(&file).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x)")
            .unwrap();
        let wal = open_no_follow(&wal_path(&file)).unwrap();
        let at = snapshot(&conn);
        assert!(at.frames > 0);
        assert!(wal_ends_at(&wal, at));
        conn.execute_batch("INSERT INTO t VALUES (1)").unwrap();
        assert!(!wal_ends_at(&wal, at), "a commit after it");
        // The log checkpointed and restarted: a commit after it starts a new salt at frame 0.
        let at = snapshot(&conn);
        assert!(wal_ends_at(&wal, at));
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        assert!(!wal_ends_at(&wal, at), "the frames it saw are gone");
        conn.execute_batch("INSERT INTO t VALUES (2)").unwrap();
        assert!(!wal_ends_at(&wal, at), "a restarted log");
        let at = snapshot(&conn);
        assert!(wal_ends_at(&wal, at));
    }
}
