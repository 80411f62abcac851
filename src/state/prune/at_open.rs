//! The read-write open's blob prune, off the caller's path: on a connection of its own, in a
//! thread of its own, so that the constructor returns once the prune holds the write lock
//! instead of once it has read the whole file.
//!
//! Why no call made through the API can tell the difference:
//! - The prune takes the write lock (`BEGIN IMMEDIATE`, with the same busy timeout) before the
//!   open returns, and the open fails with that error when it cannot, exactly as before. From
//!   then on no other connection can write until it commits; readers elsewhere see the file as
//!   it was, as they did while a synchronous prune ran.
//! - Every use of the opened state ([`super::StateDb::conn`], `close`, dropping it) first waits
//!   for the prune to commit, so every call sees the pruned file. The one read that does not
//!   wait is the constructor's project lookup, which reads `projects`, a table the prune never
//!   changes; the getters `connection.open` and `connection.inTransaction` read only the state
//!   of the store's own connection, which the prune (on its own connection) never touches.
//! - Another open of the same file in this process (any thread) waits for the pending prune
//!   before it opens, so even a read-only store opened right after a read-write one sees the
//!   pruned file.
//! - The prune deletes the same rows in the same single transaction as before (see
//!   `prune.rs`), with `synchronous = FULL`: the bytes written are the same.
//!
//! A failure after the lock was taken (an I/O error, a full disk) is rolled back, so nothing of
//! it is in the file, and reported once, by the first use of the state instead of by the
//! constructor, as [`StoreError::OpenPrune`]: the error the reference's constructor would have
//! thrown (same class, message and SQLite `code`), which the JS layer marks as the prune's
//! (non-enumerable `openPrune` and `filePath`, a note in the stack's first line). The first use
//! is whichever call waits for the prune first: a store method or `store.async` call, a
//! `state` or `state.connection` method or statement, the constructor of a store whose project
//! is new (its upsert), or `close()`, which closes the connection and then throws it, so the
//! file is never left open and the report never dropped. Every call after it works as usual
//! (the state's own connection never saw the prune). Two reads do not wait and so never take
//! the report: the getters `connection.open` and `connection.inTransaction` (the prune's
//! transaction is on its own connection; a getter never throws, as in better-sqlite3, and
//! `if (db.inTransaction) db.exec('ROLLBACK')` in a `catch` must not replace the error being
//! handled). A state dropped without `close` has no caller left to tell: dropping waits and
//! ignores the outcome.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};

use rusqlite::Connection;

use super as prune;
use crate::error::{Result, StoreError};

/// A prune started by an open, until it committed or failed.
pub struct PendingPrune {
    outcome: Mutex<Option<Result<()>>>,
    finished: Condvar,
}

impl PendingPrune {
    /// Blocks until the prune has committed or failed; its outcome (every waiter gets it).
    pub fn wait(&self) -> Result<()> {
        let mut outcome = lock(&self.outcome);
        loop {
            if let Some(outcome) = outcome.as_ref() {
                return outcome.clone();
            }
            outcome = self
                .finished
                .wait(outcome)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn finish(&self, result: Result<()>) {
        *lock(&self.outcome) = Some(result);
        self.finished.notify_all();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The prunes of this process not yet finished, by file.
static PENDING: LazyLock<Mutex<HashMap<PathBuf, Vec<Arc<PendingPrune>>>>> =
    LazyLock::new(Default::default);

fn key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Waits for every prune this process started on `path` and has not finished.
pub fn wait_for_pending(path: &Path) {
    let pending: Vec<_> = lock(&PENDING).get(&key(path)).cloned().unwrap_or_default();
    for prune in pending {
        let _ = prune.wait();
    }
}

/// The prune's connection, and what it knows of the prunes before it (the run index's journal
/// keeps that, see `run_index::Journaled`).
pub trait PruneConnection: std::ops::Deref<Target = Connection> + Send + 'static {
    /// In the prune's write transaction, before it changed anything: the file provably has no
    /// blob that nothing refers to, so there is nothing to read.
    fn known_clean(&self) -> bool;
    /// The prune found nothing to delete (its write lock still held).
    fn found_nothing(&self);
}

/// Page cache sizes of the prune's connection: while it reads, while it deletes.
pub struct CacheSizes {
    pub scan: i64,
    pub delete: i64,
}

/// Starts the prune of `path` on `conn` (a connection of its own, configured): takes the
/// write lock here, on the caller's thread (an error taking it is the open's error), then
/// hands the connection, in its transaction, to a thread that reads, deletes and commits;
/// `None` when there is nothing to prune.
///
/// When the file provably has nothing to prune (see [`PruneConnection::known_clean`]), the
/// transaction ends at once and nothing is left running: a close does not wait for a read of
/// the whole file that could delete nothing.
pub fn start(
    path: &Path,
    conn: impl PruneConnection,
    cache: CacheSizes,
    open_helper: impl Fn() -> Option<Connection> + Send + Sync + 'static,
) -> Result<Option<Arc<PendingPrune>>> {
    conn.pragma_update(None, "cache_size", cache.scan)?;
    let enforced: bool = conn.query_row("PRAGMA foreign_keys", [], |row| row.get(0))?;
    if enforced {
        // See `prune::without_foreign_keys`: the connection is the prune's alone.
        conn.pragma_update(None, "foreign_keys", "OFF")?;
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    if conn.known_clean() {
        // Nothing was changed: a COMMIT would write nothing, but leave the next commit's
        // journal slot marked in flight (see `StateDb::start_prune`).
        conn.execute_batch("ROLLBACK")?;
        return Ok(None);
    }
    let pending = Arc::new(PendingPrune {
        outcome: Mutex::new(None),
        finished: Condvar::new(),
    });
    let key = key(path);
    lock(&PENDING)
        .entry(key.clone())
        .or_default()
        .push(pending.clone());
    let mine = pending.clone();
    let thread_key = key.clone();
    let file_path = path.to_path_buf();
    #[cfg(test)]
    let fault = crate::state::vfs::faults::take_next_prune();
    let spawned = std::thread::Builder::new()
        .name("piw-open-prune".into())
        .spawn(move || {
            #[cfg(test)]
            if let Some((point, n, kind)) = fault {
                crate::state::vfs::faults::arm(point, n, kind);
            }
            // A panic must still wake the waiters (and the connection rolls back when dropped).
            let outcome =
                std::panic::catch_unwind(AssertUnwindSafe(|| run(&conn, &cache, open_helper)))
                    .unwrap_or_else(|_| {
                        Err(StoreError::plain("The blob prune of the open panicked"))
                    })
                    .map_err(|error| StoreError::open_prune(error, &file_path));
            drop(conn);
            deregister(&thread_key, &mine);
            mine.finish(outcome);
        });
    match spawned {
        Ok(_) => Ok(Some(pending)),
        // The closure (and with it the connection, rolling its transaction back) is dropped.
        Err(error) => {
            deregister(&key, &pending);
            Err(StoreError::plain(error.to_string()))
        }
    }
}

fn deregister(key: &Path, prune: &Arc<PendingPrune>) {
    let mut pending = lock(&PENDING);
    if let Some(list) = pending.get_mut(key) {
        list.retain(|other| !Arc::ptr_eq(other, prune));
        if list.is_empty() {
            pending.remove(key);
        }
    }
}

/// The rest of the prune's transaction, begun by [`start`]: committed, or rolled back.
fn run(
    conn: &impl PruneConnection,
    cache: &CacheSizes,
    open_helper: impl Fn() -> Option<Connection> + Sync,
) -> Result<()> {
    let outcome = (|| {
        let rowids = prune::unreferenced_rowids(conn, open_helper)?;
        // The delete with the full cache, so that it never spills pages before its commit.
        conn.pragma_update(None, "cache_size", cache.delete)?;
        prune::delete_blobs(conn, &rowids)?;
        if rowids.is_empty() {
            conn.found_nothing();
            // Nothing changed: no commit (see `start`).
            conn.execute_batch("ROLLBACK")?;
        } else {
            conn.execute_batch("COMMIT")?;
        }
        Ok(())
    })();
    if outcome.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    outcome
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::error::StoreError;
    use crate::state::blobs::{put_blob, MEDIA_TEXT};
    use crate::state::vfs::{self, faults};
    use crate::state::{Mode, OpenOptions, StateDb};
    use crate::test_support::{open_read_write, Scratch};

    const NOW: i64 = 1_789_257_600_000;
    const UNREFERENCED: i64 = 50;

    /// A state file with blobs nothing refers to, which the next read-write open prunes.
    fn file_to_prune(dir: &Scratch) -> PathBuf {
        let file = dir.file("state.sqlite");
        let mut state = open_read_write(&file, NOW);
        state
            .write(|conn| {
                for index in 0..UNREFERENCED {
                    put_blob(conn, format!("blob {index}").as_bytes(), MEDIA_TEXT, NOW)?;
                }
                Ok(())
            })
            .unwrap();
        state.close().unwrap();
        file
    }

    /// A read-write open whose prune finds its first write failing with a full disk.
    fn open_with_a_full_disk(file: &Path) -> StateDb {
        vfs::use_for_thread(Some(faults::name()));
        faults::arm_next_prune(faults::Point::Write, 1, faults::Kind::Enospc);
        let state = open_read_write(file, NOW);
        vfs::use_default_for_thread();
        state
    }

    fn blob_count(state: &StateDb) -> i64 {
        state
            .conn()
            .unwrap()
            .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))
            .unwrap()
    }

    /// The prune's error, marked as the prune's of `file`: SQLite's own full-disk error.
    fn assert_full_disk_prune_error(error: StoreError, file: &Path) {
        match error {
            StoreError::OpenPrune { file_path, error } => {
                assert_eq!(file_path, file.to_string_lossy());
                assert!(
                    matches!(&*error, StoreError::Sqlite { code, .. } if code == "SQLITE_FULL"),
                    "{error}"
                );
            }
            other => panic!("not the open prune's error: {other}"),
        }
    }

    #[test]
    fn the_first_use_reports_a_failed_prune_once_and_the_state_works_after_it() {
        let dir = Scratch::new("open-prune-full");
        let file = file_to_prune(&dir);
        let mut state = open_with_a_full_disk(&file);
        assert_full_disk_prune_error(state.file_conn().unwrap_err(), &file);
        // Reported: every later use works, and the prune rolled back (no blob is gone).
        assert_eq!(blob_count(&state), UNREFERENCED);
        state
            .write(|conn| put_blob(conn, b"after", MEDIA_TEXT, NOW).map(drop))
            .unwrap();
        assert_eq!(blob_count(&state), UNREFERENCED + 1);
        state.close().unwrap();
    }

    #[test]
    fn a_close_that_is_the_first_use_closes_then_reports_a_failed_prune() {
        let dir = Scratch::new("open-prune-full-close");
        let file = file_to_prune(&dir);
        let mut state = open_with_a_full_disk(&file);
        assert_full_disk_prune_error(state.close().unwrap_err(), &file);
        assert!(!state.is_open());
        assert_eq!(state.file_conn().unwrap_err(), StoreError::closed());
        assert_eq!(state.close(), Ok(()));
        let reader = StateDb::open(OpenOptions {
            file_path: file,
            mode: Mode::ReadOnly,
            now: NOW,
        })
        .unwrap();
        assert_eq!(blob_count(&reader), UNREFERENCED);
    }

    #[test]
    fn a_prune_that_succeeds_reports_nothing() {
        let dir = Scratch::new("open-prune-ok");
        let file = file_to_prune(&dir);
        let mut state = open_read_write(&file, NOW);
        assert_eq!(blob_count(&state), 0);
        assert_eq!(state.close(), Ok(()));
    }

    /// The file's last close leaves a stamp that lets the next open skip its read.
    mod close_stamp {
        use super::*;

        fn journal(file: &Path) -> PathBuf {
            let mut name = file.as_os_str().to_owned();
            name.push("-runlog");
            PathBuf::from(name)
        }

        /// Opens and closes a store alone: whether its open read the file for its prune.
        fn open_close(file: &Path) -> bool {
            let mut state = open_read_write(file, NOW);
            let read = state.open_prune_pending();
            state.close().unwrap();
            read
        }

        /// A file whose last close left a stamp (its open's prune found nothing).
        fn stamped_file(dir: &Scratch) -> PathBuf {
            let file = file_to_prune(dir);
            // The prune that deleted something proves nothing; the next one found nothing.
            assert!(open_close(&file));
            assert!(!journal(&file).exists());
            assert!(open_close(&file));
            assert_eq!(std::fs::metadata(journal(&file)).unwrap().len(), 64);
            file
        }

        fn orphan_on(conn: &rusqlite::Connection) {
            conn.execute(
                "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
                 VALUES (randomblob(32), 'text/plain', 1, x'00', 0)",
                [],
            )
            .unwrap();
        }

        fn insert_orphan(file: &Path) {
            orphan_on(&rusqlite::Connection::open(file).unwrap());
        }

        fn blobs(file: &Path) -> i64 {
            let reader = rusqlite::Connection::open(file).unwrap();
            reader
                .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))
                .unwrap()
        }

        /// After another program's change, the next open reads the file and prunes the orphan.
        fn assert_read_and_pruned(file: &Path, clean: i64) {
            assert_eq!(blobs(file), clean + 1);
            assert!(open_close(file));
            assert_eq!(blobs(file), clean);
        }

        #[test]
        fn a_clean_last_close_leaves_a_stamp_the_next_open_believes() {
            let dir = Scratch::new("close-stamp");
            let file = stamped_file(&dir);
            assert!(!open_close(&file));
            assert!(!open_close(&file));
            // A writer of this package taking the stamped journal gets its slots back.
            let state = open_read_write(&file, NOW);
            let length = std::fs::metadata(journal(&file)).unwrap().len();
            assert_eq!(length, 64 + 4096 * 1024);
            drop(state);
            assert!(!open_close(&file));
        }

        #[test]
        fn a_commit_of_another_program_after_the_close_is_seen_and_pruned() {
            let dir = Scratch::new("close-stamp-foreign");
            let file = stamped_file(&dir);
            let clean = blobs(&file);
            insert_orphan(&file);
            assert_read_and_pruned(&file, clean);
        }

        #[test]
        fn a_commit_left_in_the_wal_is_seen_though_the_file_is_as_stamped() {
            let dir = Scratch::new("close-stamp-wal");
            let file = stamped_file(&dir);
            let clean = blobs(&file);
            let bytes = std::fs::read(&file).unwrap();
            let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
            // Another program's commit, left in its WAL as a crash leaves it: its connection
            // is not the last (`holder` is), so it does not checkpoint.
            let holder = rusqlite::Connection::open(&file).unwrap();
            holder
                .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get::<_, i64>(0))
                .unwrap();
            insert_orphan(&file);
            let wal = dir.file("state.sqlite-wal");
            let log = std::fs::read(&wal).unwrap();
            drop(holder);
            // The holder closed last and checkpointed: put the file back as it was, to the
            // nanosecond of its modification time, and the log as the crash left it.
            std::fs::write(&file, &bytes).unwrap();
            let reopened = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
            reopened.set_modified(modified).unwrap();
            drop(reopened);
            assert_eq!(
                std::fs::metadata(&file).unwrap().modified().unwrap(),
                modified
            );
            std::fs::write(&wal, log).unwrap();
            // (Counting the blobs first would checkpoint the log into the file.)
            assert!(open_close(&file));
            assert_eq!(blobs(&file), clean);
        }

        #[test]
        fn a_backup_copied_over_the_file_is_not_the_stamped_file() {
            let dir = Scratch::new("close-stamp-restore");
            let file = stamped_file(&dir);
            let clean = blobs(&file);
            // A backup of the clean file, which another program then gave an orphan.
            let backup = dir.file("backup.sqlite");
            std::fs::copy(&file, &backup).unwrap();
            insert_orphan(&backup);
            assert!(!open_close(&file));
            // Restored in place: same device and inode, another content.
            std::fs::copy(&backup, &file).unwrap();
            assert_read_and_pruned(&file, clean);
        }

        #[test]
        fn a_close_that_is_not_the_last_leaves_no_stamp() {
            let dir = Scratch::new("close-stamp-shared");
            let file = file_to_prune(&dir);
            assert!(open_close(&file));
            assert!(!journal(&file).exists());
            // Another program holds the file while a store opens it (its prune finds nothing,
            // at a log nothing was written to: the same position in every WAL) and closes,
            // then commits and closes last. The store's mark must not pass for the next log's.
            let foreign = rusqlite::Connection::open(&file).unwrap();
            let clean = foreign
                .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get::<_, i64>(0))
                .unwrap();
            assert!(open_close(&file));
            orphan_on(&foreign);
            drop(foreign);
            assert_read_and_pruned(&file, clean);
        }
    }

    /// A store that keeps the file open (so that its WAL and journal stay) and can write
    /// through the API.
    mod known_clean {
        use serde_json::json;

        use super::*;
        use crate::methods::dispatch;
        use crate::store::{resolve_project, Store};
        use crate::wire::Call;

        fn call(state: &StateDb, method: &str, options: serde_json::Value) {
            let project = resolve_project(state, "/prune/known-clean", NOW).unwrap();
            let store = Store::new(state, project.as_deref());
            dispatch(&store, method, &Call::new(vec![options], NOW)).unwrap();
        }

        fn doc(value: serde_json::Value) -> serde_json::Value {
            json!({ "$c": crate::state::json::canonical(&value) })
        }

        fn put_spec(state: &StateDb, version: u32) {
            call(
                state,
                "putResource",
                json!({
                    "controller": "c", "key": "k", "now": NOW,
                    "spec": doc(json!({ "v": version })), "initialStatus": doc(json!({})),
                }),
            );
        }

        /// Opens and closes a store: whether its open read the file for its prune, and the
        /// blobs after it.
        fn open_close(file: &Path) -> (bool, i64) {
            let mut state = open_read_write(file, NOW);
            let read = state.open_prune_pending();
            let blobs = blob_count(&state);
            // Whether it read or not, a full prune finds nothing left.
            assert_eq!(state.prune_unreferenced_blobs(), Ok(0));
            state.close().unwrap();
            (read, blobs)
        }

        #[test]
        fn an_open_reads_the_file_only_when_a_commit_since_the_last_clean_prune_may_have_left_a_blob_unreferenced(
        ) {
            let dir = Scratch::new("open-prune-known-clean");
            let file = dir.file("state.sqlite");
            let keeper = open_read_write(&file, NOW);
            // The keeper's own prune found nothing (a new file); the first resource's blobs are
            // inserted with the row that refers to them.
            put_spec(&keeper, 0);
            let (read, blobs) = open_close(&file);
            assert!(!read);
            assert_eq!(open_close(&file), (false, blobs));
            // A commit that inserts a blob and the row that refers to it leaves none behind.
            call(
                &keeper,
                "recordEvent",
                json!({
                    "controller": "c", "key": "k", "type": "note", "now": NOW,
                    "payload": doc(json!({ "n": 1 })),
                }),
            );
            assert_eq!(open_close(&file), (false, blobs + 1));
            // A spec replaced leaves the old one unreferenced: read, and it goes.
            put_spec(&keeper, 1);
            let (read, blobs) = open_close(&file);
            assert!(read);
            // That prune deleted something, so the next one reads once more, then none.
            assert!(open_close(&file).0);
            assert!(!open_close(&file).0);
            // A blob inserted through the store's connection outside a store call (no row of
            // the transaction is checked to refer to it): read, and it goes.
            let conn = keeper.file_conn().unwrap();
            conn.execute(
                "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
                 VALUES (randomblob(32), 'text/plain', 1, x'00', 0)",
                [],
            )
            .unwrap();
            assert_eq!(open_close(&file), (true, blobs));
            assert!(open_close(&file).0);
            // Another application's commit (no journal entry): read, and its orphan goes.
            let foreign = rusqlite::Connection::open(&file).unwrap();
            foreign
                .execute(
                    "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
                     VALUES (randomblob(32), 'text/plain', 1, x'00', 0)",
                    [],
                )
                .unwrap();
            drop(foreign);
            assert_eq!(open_close(&file), (true, blobs));
            assert!(open_close(&file).0);
            assert!(!open_close(&file).0);
            // A reference taken away by raw SQL (a run of its own rows, cascades alike).
            conn.execute("DELETE FROM events", []).unwrap();
            assert!(open_close(&file).0);
            drop(keeper);
        }
    }
}
