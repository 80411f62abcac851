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
//!   changes.
//! - Another open of the same file in this process (any thread) waits for the pending prune
//!   before it opens, so even a read-only store opened right after a read-write one sees the
//!   pruned file.
//! - The prune deletes the same rows in the same single transaction as before (see
//!   `prune.rs`), with `synchronous = FULL`: the bytes written are the same.
//!
//! A failure after the lock was taken (an I/O error, a full disk) is returned by the first use
//! of the state instead of by the constructor; the transaction is rolled back, so nothing of it
//! is in the file.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};

use rusqlite::Connection;

use super::prune;
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

/// Page cache sizes of the prune's connection: while it reads, while it deletes.
pub struct CacheSizes {
    pub scan: i64,
    pub delete: i64,
}

/// Starts the prune of `path` on `conn` (a connection of its own, configured): takes the
/// write lock here, on the caller's thread (an error taking it is the open's error), then
/// hands the connection, in its transaction, to a thread that reads, deletes and commits.
pub fn start(
    path: &Path,
    conn: Connection,
    cache: CacheSizes,
    open_helper: impl Fn() -> Option<Connection> + Send + Sync + 'static,
) -> Result<Arc<PendingPrune>> {
    conn.pragma_update(None, "cache_size", cache.scan)?;
    let enforced: bool = conn.query_row("PRAGMA foreign_keys", [], |row| row.get(0))?;
    if enforced {
        // See `prune::without_foreign_keys`: the connection is the prune's alone.
        conn.pragma_update(None, "foreign_keys", "OFF")?;
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
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
    let spawned = std::thread::Builder::new()
        .name("piw-open-prune".into())
        .spawn(move || {
            // A panic must still wake the waiters (and the connection rolls back when dropped).
            let outcome =
                std::panic::catch_unwind(AssertUnwindSafe(|| run(&conn, &cache, open_helper)))
                    .unwrap_or_else(|_| {
                        Err(StoreError::plain("The blob prune of the open panicked"))
                    });
            drop(conn);
            deregister(&thread_key, &mine);
            mine.finish(outcome);
        });
    match spawned {
        Ok(_) => Ok(pending),
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
    conn: &Connection,
    cache: &CacheSizes,
    open_helper: impl Fn() -> Option<Connection> + Sync,
) -> Result<()> {
    let outcome = (|| {
        let rowids = prune::unreferenced_rowids(conn, open_helper)?;
        // The delete with the full cache, so that it never spills pages before its commit.
        conn.pragma_update(None, "cache_size", cache.delete)?;
        prune::delete_blobs(conn, &rowids)?;
        conn.execute_batch("COMMIT")?;
        Ok(())
    })();
    if outcome.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    outcome
}
