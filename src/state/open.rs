//! Opening a state file as the reference's `StateDatabase` constructor does (pragmas, schema
//! creation on a new file, verification, the read-write open's blob prune) and a cluster's
//! open; the connections the state opens to its file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension};

use super::{
    blobs, ids, open_connection, open_prune_helper, private_fs, prune, run_index, verify, Mode,
    OpenOptions, StateDb, BUSY_TIMEOUT_MS, CACHE_SIZE_KIB, JOURNAL_SIZE_LIMIT,
    PRUNE_SCAN_CACHE_PAGES,
};
use crate::error::{Result, StoreError};
use crate::sql::Db;

use super::schema::{
    schema_digest, RESET_INSTRUCTION, STATE_APPLICATION_ID, STATE_APP_VERSION, STATE_SCHEMA_NAME,
    STATE_SCHEMA_SQL, STATE_SCHEMA_VERSION,
};

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
        let verified_at: i64 =
            conn.query_row("PRAGMA main.schema_version", [], |row| row.get(0))?;
        verify::verify_schema(db)?;
        self.run_index.schema_verified(conn, Some(verified_at))?;
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
    /// [`StateDb::prune_unreferenced_blobs`] as an open runs it, on a connection and thread of
    /// its own (see `prune::at_open`): reading through a small page cache (see
    /// [`PRUNE_SCAN_CACHE_PAGES`]), deleting with the full one, so that a large delete never
    /// spills pages before its commit. Returns once the prune holds the write lock.
    fn start_prune(&self) -> Result<()> {
        // Proven clean, on the store's own connection: no connection, thread or read of its
        // own. The write lock is taken as the prune's would be (the open fails as it would),
        // and let go by a ROLLBACK: nothing changed, and a COMMIT would leave the next commit's
        // journal slot marked in flight (its commit hook runs; no frame follows to settle it).
        let own = self.file_conn()?;
        own.execute_batch("BEGIN IMMEDIATE")?;
        let clean = self.run_index.blobs_known_clean(own);
        own.execute_batch("ROLLBACK")?;
        if clean {
            return Ok(());
        }
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
        let conn = run_index::Journaled::new(conn, &self.file_path, &self.run_index);
        let started = prune::at_open::start(&self.file_path, conn, cache, move || {
            open_prune_helper(&file_path)
        })?;
        if let Some(pending) = started {
            *self
                .prune
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(pending);
            self.prune_pending.store(true, Ordering::Release);
        }
        Ok(())
    }
}

impl prune::at_open::PruneConnection for run_index::Journaled {
    fn known_clean(&self) -> bool {
        self.blobs_known_clean()
    }

    fn found_nothing(&self) {
        self.mark_blobs_clean();
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

/// better-sqlite3's error when SQLite cannot open or create the file.
pub(super) fn cannot_open() -> StoreError {
    StoreError::Sqlite {
        code: "SQLITE_CANTOPEN".into(),
        message: "unable to open database file".into(),
    }
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
