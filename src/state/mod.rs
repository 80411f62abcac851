//! The state database: opening (pragmas, schema creation, verification, blob pruning), the
//! write transaction, and the shared bookkeeping modules every store method builds on.

pub mod attribution;
pub mod blobs;
pub mod columns;
pub mod ids;
pub mod json;
pub mod leases;
pub mod liveness;
mod mode;
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

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::sql::Db;
pub use mode::Mode;
use schema::{
    schema_digest, RESET_INSTRUCTION, STATE_APPLICATION_ID, STATE_APP_VERSION, STATE_SCHEMA_NAME,
    STATE_SCHEMA_SQL, STATE_SCHEMA_VERSION,
};

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
    /// Opens the file as the reference's `StateDatabase` constructor does: pragmas, schema
    /// creation on a new file, verification, and (read-write) pruning of unreferenced blobs.
    /// The folder, the legacy check and the final `chmod` are the JS layer's (Node's `fs`).
    pub fn open(options: OpenOptions) -> Result<StateDb> {
        let file_path = options.file_path;
        let mode = options.mode;
        // What an earlier open of this file in this process left to prune comes first.
        prune::at_open::wait_for_pending(&file_path);
        let existed = private_fs::is_regular_file(&file_path, mode)?;
        if mode == Mode::ReadOnly && !existed {
            return Err(StoreError::plain(format!(
                "Pi Workflows state database does not exist: {}",
                file_path.display()
            )));
        }
        if !existed {
            let target = private_fs::creation_target(&file_path).ok_or_else(cannot_open)?;
            create_initialized_file(&target, options.now)?;
        }
        let state = StateDb::connect(file_path, mode)?;
        // A new file was initialised before it appeared under its name, so it counts as existing.
        match state.prepare(true, options.now) {
            Ok(()) => Ok(state),
            Err(error) => {
                drop(state);
                Err(error)
            }
        }
    }

    /// Opens the state database on a dqlite cluster (`dqlite://host:port,…/name`): the same
    /// schema text and `schema_meta` row as a file, created in one transaction when the
    /// database is empty, then verified as a file's is. No run index, journal or blob
    /// prune: those are the local file's (the run polls read through SQL). All of it is done
    /// or failed by `deadline`.
    pub fn open_cluster(
        url: &str,
        config: dqlite_wire::Config,
        mode: Mode,
        now: i64,
        deadline: std::time::Instant,
    ) -> Result<StateDb> {
        let remote =
            crate::sql::remote::Remote::open(url, config, mode == Mode::ReadOnly, deadline)?;
        // The open's `now` (the schema's creation time) is the cluster's, as a call's.
        let now = now.saturating_add(remote.clock().offset_ms());
        let state = StateDb {
            file_path: PathBuf::from(url),
            mode,
            connection: Some(Db::Remote(Box::new(remote))),
            trace_id: None,
            run_index: run_index::RunIndex::unused(Path::new(url)),
            prune: Mutex::new(None),
            prune_pending: AtomicBool::new(false),
        };
        {
            let remote = state.conn()?.remote().expect("a cluster connection");
            let _call = remote.call_scope(deadline);
            if mode == Mode::ReadWrite {
                state.prepare_schema(true, now)?;
            }
            verify::verify_schema(state.conn()?)?;
            if mode == Mode::ReadWrite {
                // As a file's read-write open prunes (synchronously here: it is one statement
                // on the leader).
                state.write(blobs::prune_through_sql)?;
            }
        }
        Ok(state)
    }

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

    /// Opens the connection without touching the file's contents.
    fn connect(file_path: PathBuf, mode: Mode) -> Result<StateDb> {
        let connection = open_connection(&file_path, mode)?;
        let trace_id = crate::trace::attach(&connection, mode == Mode::ReadOnly);
        let run_index = run_index::RunIndex::install(
            &connection,
            trace_id.is_some(),
            &file_path,
            mode == Mode::ReadWrite,
            open_reader,
        );
        Ok(StateDb {
            file_path,
            mode,
            connection: Some(Db::File(connection)),
            trace_id,
            run_index,
            prune: Mutex::new(None),
            prune_pending: AtomicBool::new(false),
        })
    }

    fn configure_read_write_conn(conn: &Connection) -> Result<()> {
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.query_row("PRAGMA wal_autocheckpoint = 1000", [], |_| Ok(()))?;
        conn.query_row(
            &format!("PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}"),
            [],
            |_| Ok(()),
        )?;
        Ok(())
    }

    fn configure_read_write(&self) -> Result<()> {
        StateDb::configure_read_write_conn(self.file_conn()?)
    }
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

/// A read-only connection to the file for the run index's background build, or none if it
/// cannot be opened: the polls then go on reading through SQL.
fn open_reader(file_path: &Path) -> Option<Connection> {
    let conn = open_connection(file_path, Mode::ReadOnly).ok()?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))
        .ok()?;
    Some(conn)
}

/// A read-only connection to the file for the blob prune's helper (see `prune::parts`), or
/// none if it cannot be opened: the prune then reads alone.
fn open_prune_helper(file_path: &Path) -> Option<Connection> {
    let conn = open_connection(file_path, Mode::ReadOnly).ok()?;
    conn.pragma_update(None, "cache_size", PRUNE_SCAN_CACHE_PAGES)
        .ok()?;
    Some(conn)
}

impl StateDb {
    fn prepare(&self, existed: bool, now: i64) -> Result<()> {
        let db = self.conn()?;
        let conn = self.file_conn()?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "cache_size", CACHE_SIZE_KIB)?;
        match self.mode {
            Mode::ReadWrite => {
                verify::refuse_foreign_before_writing(db)?;
                self.configure_read_write()?;
                self.prepare_schema(!existed, now)?;
            }
            Mode::ReadOnly if existed => conn.pragma_update(None, "synchronous", "FULL")?,
            Mode::ReadOnly => {}
        }
        verify::verify_schema(db)?;
        self.run_index.schema_verified(conn)?;
        match self.mode {
            Mode::ReadOnly => conn.pragma_update(None, "query_only", "ON")?,
            Mode::ReadWrite => self.start_prune()?,
        }
        Ok(())
    }

    fn prepare_schema(&self, allow_initialize: bool, now: i64) -> Result<()> {
        let conn = self.conn()?;
        conn.execute_batch("BEGIN EXCLUSIVE")?;
        let outcome = (|| {
            let present = conn
                .query_row(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'",
                    [],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if !present {
                if !allow_initialize {
                    return Err(StoreError::plain(RESET_INSTRUCTION));
                }
                conn.execute_batch(STATE_SCHEMA_SQL)?;
                conn.execute_batch(&format!("PRAGMA application_id = {STATE_APPLICATION_ID}"))?;
                conn.execute_batch(&format!("PRAGMA user_version = {STATE_SCHEMA_VERSION}"))?;
                conn.execute(
                    "INSERT INTO schema_meta(
                       id, schema_name, schema_version, schema_digest, app_version, created_at, updated_at
                     ) VALUES (1, ?, ?, ?, ?, ?, ?)",
                    crate::sql::params![
                        STATE_SCHEMA_NAME,
                        STATE_SCHEMA_VERSION,
                        &schema_digest()[..],
                        STATE_APP_VERSION,
                        now,
                        now
                    ],
                )?;
            }
            conn.execute_batch("COMMIT")?;
            Ok(())
        })();
        if outcome.is_err() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        outcome
    }

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
        if let Some(local) = self.connection.take().map(|db| db.file().is_some()) {
            if let Some(id) = self.trace_id {
                crate::trace::detach(id);
            }
            if local && self.mode == Mode::ReadWrite {
                self.run_index.closed(&self.file_path);
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
        let outcome = operation(conn).and_then(|value| {
            if let Some(file) = conn.file() {
                self.run_index.capture(file);
            }
            conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(value)
        });
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

    /// [`StateDb::prune_unreferenced_blobs`] as an open runs it, on a connection and thread of
    /// its own (see `prune::at_open`): reading through a small page cache (see
    /// [`PRUNE_SCAN_CACHE_PAGES`]), deleting with the full one, so that a large delete never
    /// spills pages before its commit. Returns once the prune holds the write lock.
    fn start_prune(&self) -> Result<()> {
        let conn = open_connection(&self.file_path, Mode::ReadWrite)?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
        StateDb::configure_read_write_conn(&conn)?;
        let cache = prune::at_open::CacheSizes {
            scan: PRUNE_SCAN_CACHE_PAGES,
            delete: CACHE_SIZE_KIB,
        };
        let file_path = self.file_path.clone();
        // Its commit is journaled like the store's own: a commit that deletes no run row is
        // still one the other processes' run indexes must be told about, not a gap.
        let conn = run_index::Journaled::new(conn, &self.file_path);
        let pending = prune::at_open::start(&self.file_path, conn, cache, move || {
            open_prune_helper(&file_path)
        })?;
        *self
            .prune
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(pending);
        self.prune_pending.store(true, Ordering::Release);
        Ok(())
    }

    /// `PRAGMA integrity_check` and `PRAGMA foreign_key_check`, with the reference's errors.
    pub fn integrity_check(&self) -> Result<()> {
        let conn = self.file_conn()?;
        let result: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        if result != "ok" {
            return Err(StoreError::plain(format!(
                "Pi Workflows SQLite integrity check failed: {result}"
            )));
        }
        let violations = conn
            .prepare("PRAGMA foreign_key_check")?
            .query_map([], |_| Ok(()))?
            .count();
        if violations != 0 {
            return Err(StoreError::plain(
                "Pi Workflows SQLite foreign-key check failed",
            ));
        }
        Ok(())
    }
}

/// better-sqlite3's error when SQLite cannot open or create the file.
fn cannot_open() -> StoreError {
    StoreError::Sqlite {
        code: "SQLITE_CANTOPEN".into(),
        message: "unable to open database file".into(),
    }
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

/// Creates the empty database file owner-only before SQLite opens it: SQLite gives the WAL and
/// shared-memory files it creates next to it the main file's mode, so they start out private
/// too (chmod after opening, as the reference does, leaves them 0644 under the usual umask).
fn create_private_file(path: &Path) -> Result<()> {
    private_fs::create_file(path).map_err(|error| StoreError::plain(error.to_string()))
}

/// Creates a new state file complete with its schema, so that a crash can never leave a file
/// behind that every later open refuses as incompatible (an empty or half-created one). The
/// schema is written to a hidden file next to it, which is then hard-linked into place: the
/// name appears only once the file is whole, and if another process created it first, its file
/// wins and this one is discarded.
fn create_initialized_file(path: &Path, now: i64) -> Result<()> {
    let io = |error: std::io::Error| StoreError::plain(error.to_string());
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    let staging = path.with_file_name(format!(
        ".{name}.{}-{}.creating",
        std::process::id(),
        &ids::random_token()[..12]
    ));
    let created = (|| {
        // SQLite could not have created the file either: its error, as the reference gives it.
        private_fs::create_file(&staging).map_err(|_| cannot_open())?;
        let mut state = StateDb::connect(staging.clone(), Mode::ReadWrite)?;
        let initialized = state
            .configure_read_write()
            .and_then(|()| state.prepare_schema(true, now));
        // No prune was started on it: closing reports nothing.
        let closed = state.close();
        initialized.and(closed)?;
        match std::fs::hard_link(&staging, path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            // A file system without hard links: a rename, which only loses a same-instant race.
            Err(_) if !path.exists() => std::fs::rename(&staging, path).map_err(io),
            Err(error) => Err(io(error)),
        }
    })();
    for leftover in ["", "-wal", "-shm", "-journal"] {
        let mut file = staging.clone().into_os_string();
        file.push(leftover);
        let _ = std::fs::remove_file(file);
    }
    created
}

impl StateDb {
    /// Online backup of the live database into `destination` (created 0600, then verified by
    /// reopening it read-only).
    pub fn backup_to(&self, destination: &Path) -> Result<()> {
        let io = |error: std::io::Error| StoreError::plain(error.to_string());
        let absolute = std::path::absolute(destination).map_err(io)?;
        if absolute == self.file_path {
            return Err(StoreError::plain(
                "Backup destination must differ from the live database",
            ));
        }
        if let Some(parent) = absolute.parent() {
            private_fs::create_dirs(parent).map_err(io)?;
        }
        self.integrity_check()?;
        create_private_file(&absolute)?;
        {
            let mut target = Connection::open(&absolute)?;
            let backup = rusqlite::backup::Backup::new(self.file_conn()?, &mut target)?;
            backup.run_to_completion(256, std::time::Duration::from_millis(0), None)?;
        }
        private_fs::set_mode(&absolute, 0o600).map_err(io)?;
        let copy = StateDb::open(OpenOptions {
            file_path: absolute,
            mode: Mode::ReadOnly,
            now: 0,
        })?;
        copy.integrity_check()
    }
}

impl Drop for StateDb {
    /// Dropped without `close`: the open's prune still finishes first.
    fn drop(&mut self) {
        let _ = self.settle_prune();
        self.close_connection();
    }
}
