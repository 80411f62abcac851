//! The state database: the open connection, its write transaction, waiting for the open's blob
//! prune, and closing; opening is `open`'s (pragmas, schema creation, verification, the prune),
//! the checks and the backup are `backup`'s. Also the shared bookkeeping modules every store
//! method builds on.

pub mod attribution;
mod backup;
pub mod blobs;
pub mod columns;
pub mod ids;
pub mod json;
pub mod leases;
pub mod liveness;
mod mode;
mod open;
mod private_fs;
mod prune;
pub mod revisions;
pub mod run_index;
pub mod schema;
mod temp_schema;
pub mod verify;
pub mod vfs;
pub mod viewer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, StoreError};
use crate::sql::Db;
pub use mode::Mode;

const BUSY_TIMEOUT_MS: u64 = 5_000;
const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;
const STATEMENT_CACHE_CAPACITY: usize = 256;
/// SQLite's page cache (negative: KiB). With the default 2 MiB, a database of a few thousand
/// runs no longer fits, and every read fetches its pages from the OS again.
const CACHE_SIZE_KIB: i64 = -32 * 1024;
/// The page cache (in pages) while the open's blob prune reads the referencing tables. Each
/// page is read once, so a few suffice; with the full cache every page read (a third of the
/// file) took a freshly allocated buffer, and the page faults of those allocations, repeated on
/// every open because closing returns the memory, cost more than the reads themselves.
const PRUNE_SCAN_CACHE_PAGES: i64 = 64;

/// How to open a state file. `file_path` is already absolute (the JS layer resolves it with
/// `path.resolve`, so relative paths behave exactly as in Node).
pub struct OpenOptions {
    /// Absolute path of the state file.
    pub file_path: PathBuf,
    /// Read-write or read-only.
    pub mode: Mode,
    /// `Date.now()` of the opening call, stored in `schema_meta` of a new file.
    pub now: i64,
}

/// A connection to `file_path` as the state opens it, without touching the file's contents.
fn open_connection(file_path: &Path, mode: Mode) -> Result<Connection> {
    {
        let flags = match mode {
            Mode::ReadWrite => {
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
            }
            Mode::ReadOnly => OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        };
        // SQLite's default VFS, or in tests the fault VFS a test chose.
        let connection = match vfs::for_connection() {
            Some(vfs) => Connection::open_with_flags_and_vfs(file_path, flags, vfs),
            None => Connection::open_with_flags(file_path, flags),
        }
        .map_err(|error| open_error(error, file_path))?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        Ok(connection)
    }
}

/// A read-only connection to the file for the blob prune's helper (see `prune::parts`), or
/// none if it cannot be opened: the prune then reads alone.
fn open_prune_helper(file_path: &Path) -> Option<Connection> {
    let conn = open_connection(file_path, Mode::ReadOnly).ok()?;
    conn.pragma_update(None, "cache_size", PRUNE_SCAN_CACHE_PAGES)
        .ok()?;
    Some(conn)
}

/// An open's SQLite error with SQLite's own message, as better-sqlite3 reports it: rusqlite
/// appends the path to it (the JS layer puts the path on the error separately).
fn open_error(error: rusqlite::Error, path: &Path) -> StoreError {
    let suffix = format!(": {}", path.to_string_lossy());
    match error {
        rusqlite::Error::SqliteFailure(failure, Some(message)) if message.ends_with(&suffix) => {
            let message = message[..message.len() - suffix.len()].to_string();
            rusqlite::Error::SqliteFailure(failure, Some(message)).into()
        }
        rusqlite::Error::SqliteFailure(failure, Some(message))
            if message == path.to_string_lossy() =>
        {
            rusqlite::Error::SqliteFailure(failure, None).into()
        }
        other => other.into(),
    }
}

/// A state database shared by a `StateDatabase` object and the stores built on it.
pub type SharedState = std::sync::Arc<std::sync::Mutex<StateDb>>;

/// One open state database: the connection, verified against the reference's schema.
pub struct StateDb {
    /// Absolute path of the state file.
    pub file_path: PathBuf,
    /// Read-write or read-only.
    pub mode: Mode,
    connection: Option<Db>,
    /// The connection's number in the bench's statement trace, when recording (see `trace`).
    trace_id: Option<u64>,
    /// What the run polls read of every run, kept up to date (see `run_index`). Declared after
    /// `connection`, so dropped after it: the connection's hooks point into it.
    pub run_index: run_index::RunIndex,
    /// The open's blob prune while it may still run (see `prune::at_open`); every use waits for it.
    prune: Mutex<Option<Arc<prune::at_open::PendingPrune>>>,
    prune_pending: AtomicBool,
}
impl StateDb {
    /// Runs `call` as the rest of the open (a constructor's project registration): on a cluster
    /// by the open's own deadline, so that the whole constructor ends by `reconnectDeadlineMs`.
    pub fn within_open<T>(&self, call: impl FnOnce() -> T) -> T {
        match &self.connection {
            Some(Db::Remote(remote)) => {
                let _call = remote.call_scope(remote.open_deadline());
                call()
            }
            _ => call(),
        }
    }

    /// Runs `call` (one call of the JS layer) so that on a cluster nothing in it waits or reads
    /// past `reconnectDeadlineMs` from now: every wait for a leader and every reply of its
    /// statements share that deadline, so a synchronous call never holds the event loop longer.
    pub fn as_one_call<T>(&self, call: impl FnOnce() -> T) -> T {
        match &self.connection {
            Some(Db::Remote(remote)) => {
                let _call =
                    remote.call_scope(std::time::Instant::now() + remote.reconnect_deadline());
                call()
            }
            _ => call(),
        }
    }

    /// The run index at the snapshot of the read transaction open on `conn`
    /// ([`run_index::RunIndex::current`]); `None` (read through SQL) on a cluster.
    pub fn run_index_current(
        &self,
        conn: &Db,
        own_transaction: bool,
    ) -> Result<Option<run_index::Current<'_>>> {
        match conn.file() {
            Some(file) => self.run_index.current(file, own_transaction),
            None => Ok(None),
        }
    }

    /// Why the run index is not used, when the file at its journal's name was refused (see
    /// `run_index::RunIndex::install`).
    pub fn runlog_refusal(&self) -> Option<String> {
        self.run_index.refusal()
    }

    /// Whether the state database is on a dqlite cluster rather than in a local file.
    pub fn is_cluster(&self) -> bool {
        self.cluster_reconnect_deadline().is_some()
    }

    /// The cluster's `reconnectDeadlineMs`; `None` for a file.
    pub fn cluster_reconnect_deadline(&self) -> Option<std::time::Duration> {
        match &self.connection {
            Some(Db::Remote(remote)) => Some(remote.reconnect_deadline()),
            _ => None,
        }
    }
}

impl StateDb {
    /// The open connection, or better-sqlite3's `TypeError` once closed. Waits for the open's
    /// blob prune first (see `prune::at_open`); its failure is this call's error.
    pub fn conn(&self) -> Result<&Db> {
        if self.prune_pending.load(Ordering::Acquire) {
            self.settle_prune()?;
        }
        self.conn_before_prune()
    }

    /// The connection without waiting for the open's prune (nor reporting its failure): only for
    /// reads of tables the prune never changes (everything but `blobs`) and for the state of
    /// the connection itself (whether a transaction is open: the prune's is on its own).
    pub fn conn_before_prune(&self) -> Result<&Db> {
        self.connection.as_ref().ok_or_else(StoreError::closed)
    }

    /// The local file's connection, for what only a file can do; on a cluster, the error that
    /// says so.
    pub fn file_conn(&self) -> Result<&Connection> {
        match self.conn()? {
            Db::File(conn) => Ok(conn),
            Db::Remote(_) => Err(StoreError::plain(
                "This operation needs a local Pi Workflows state file; it is not available on a dqlite cluster",
            )),
        }
    }

    /// Waits for the open's prune, if it may still run; its outcome, once: the first use of the
    /// state reports a failed prune (as [`StoreError::OpenPrune`]), every later one works.
    fn settle_prune(&self) -> Result<()> {
        let pending = self
            .prune
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        self.prune_pending.store(false, Ordering::Release);
        match pending {
            Some(pending) => pending.wait(),
            None => Ok(()),
        }
    }

    /// Whether the open's prune was started and not yet waited for (an open whose file
    /// provably had nothing to prune starts none).
    #[cfg(test)]
    pub fn open_prune_pending(&self) -> bool {
        self.prune_pending.load(Ordering::Acquire)
    }

    /// Whether [`StateDb::close`] has not been called.
    pub fn is_open(&self) -> bool {
        self.connection.is_some()
    }

    /// Closes the connection (idempotent); later calls fail with the closed-connection TypeError.
    /// The open's blob prune is waited for first, so the file is pruned (or the prune rolled
    /// back) by the time it returns, as after a synchronous open; when the prune failed and no
    /// call reported it yet, the connection is closed all the same and its error returned.
    pub fn close(&mut self) -> Result<()> {
        let prune = self.settle_prune();
        self.close_connection();
        prune
    }

    fn close_connection(&mut self) {
        // The connection is closed (dropped) first, as before the trace and the run index hear
        // of it.
        let writer = self.mode == Mode::ReadWrite;
        let before = match (&self.connection, writer) {
            (Some(Db::File(conn)), true) => self.run_index.before_close(conn),
            _ => None,
        };
        if let Some(local) = self.connection.take().map(|db| db.file().is_some()) {
            if let Some(id) = self.trace_id {
                crate::trace::detach(id);
            }
            if local && writer {
                self.run_index.closed(&self.file_path, before);
            }
        }
    }

    /// Runs `operation` in one `BEGIN IMMEDIATE` transaction: committed when it succeeds, rolled
    /// back when it fails. Not re-entrant, exactly like the reference: a write inside an open
    /// transaction fails with SQLite's error and leaves that transaction as it is.
    pub fn write<T>(&self, operation: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        if self.mode == Mode::ReadOnly {
            return Err(StoreError::plain(
                "Cannot mutate a read-only Pi Workflows database",
            ));
        }
        let conn = self.conn()?;
        // BEGIN and COMMIT come from the statement cache: `execute_batch` would parse and
        // compile them again on every call. A failed BEGIN (inside a caller's own transaction,
        // or inside an outer store call that a getter of its arguments re-entered) leaves that
        // transaction open: the reference's BEGIN runs before its `try`.
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        // On a cluster, writes the operation held back (`Db::hold_writes_until_commit`) go with
        // the COMMIT: when the operation fails first, they are sent, and their failure, which
        // the reference meets before the operation's, wins. A put's conflict held back that
        // way fails as `CHECK` until `conflict_of_held_put` names it, and a held revision
        // compare-and-set that finds another revision until `conflict_of_held_revision` does.
        let outcome = operation(conn)
            .map_err(|error| match conn.send_held() {
                Ok(()) => error,
                Err(held) => held.into(),
            })
            .and_then(|value| {
                if let Some(file) = conn.file() {
                    self.run_index.capture(file);
                }
                conn.prepare_cached("COMMIT")?.execute([])?;
                Ok(value)
            })
            .map_err(blobs::conflict_of_held_put)
            .map_err(revisions::conflict_of_held_revision);
        if outcome.is_err() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        outcome
    }

    /// Deletes blobs that no foreign key references, in one transaction; returns how many.
    pub fn prune_unreferenced_blobs(&self) -> Result<usize> {
        if self.mode == Mode::ReadOnly {
            return Err(StoreError::plain(
                "Cannot prune blobs through a read-only Pi Workflows database",
            ));
        }
        if self.is_cluster() {
            return self.write(blobs::prune_through_sql);
        }
        let file_path = self.file_path.as_path();
        let open_helper = || open_prune_helper(file_path);
        prune::without_foreign_keys(self.file_conn()?, || {
            self.write(|conn| prune::prune_unreferenced(conn.file().expect("a file"), open_helper))
        })
    }
}

impl Drop for StateDb {
    /// Dropped without `close`: the open's prune still finishes first.
    fn drop(&mut self) {
        let _ = self.settle_prune();
        self.close_connection();
    }
}
