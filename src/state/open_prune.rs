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
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, LazyLock, Mutex, MutexGuard};

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

/// Starts the prune of `path` on `conn` (a connection of its own, configured) and returns once
/// it holds the write lock; an error taking it is the open's error.
pub fn start(path: &Path, conn: Connection, cache: CacheSizes) -> Result<Arc<PendingPrune>> {
    let pending = Arc::new(PendingPrune {
        outcome: Mutex::new(None),
        finished: Condvar::new(),
    });
    let key = key(path);
    lock(&PENDING)
        .entry(key.clone())
        .or_default()
        .push(pending.clone());
    let (locked_tx, locked_rx) = mpsc::channel::<Result<()>>();
    let mine = pending.clone();
    let thread_key = key.clone();
    let spawned = std::thread::Builder::new()
        .name("piw-open-prune".into())
        .spawn(move || {
            let mut locked = Some(locked_tx);
            let outcome = run(&conn, &cache, &mut locked);
            drop(conn);
            if let Some(locked) = locked {
                // Failed before taking the lock: the open reports it.
                let _ = locked.send(outcome.clone());
            }
            deregister(&thread_key, &mine);
            mine.finish(outcome);
        });
    if let Err(error) = spawned {
        deregister(&key, &pending);
        return Err(StoreError::plain(error.to_string()));
    }
    match locked_rx.recv() {
        Ok(Ok(())) => Ok(pending),
        Ok(Err(error)) => Err(error),
        // The thread ended without a word (a panic): its outcome says nothing either.
        Err(_) => Err(StoreError::plain("The blob prune of the open stopped")),
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

/// The prune's transaction; `locked` is told (and taken) once the write lock is held.
fn run(
    conn: &Connection,
    cache: &CacheSizes,
    locked: &mut Option<mpsc::Sender<Result<()>>>,
) -> Result<()> {
    conn.pragma_update(None, "cache_size", cache.scan)?;
    prune::without_foreign_keys(conn, || {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        if let Some(locked) = locked.take() {
            let _ = locked.send(Ok(()));
        }
        let outcome = (|| {
            let rowids = prune::unreferenced_rowids(conn)?;
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
    })
}
