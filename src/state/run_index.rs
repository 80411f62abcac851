//! The run index: an in-memory mirror of what the run polls read of every run (its queue row,
//! resource revision, definition, lease and binding), kept exact per connection so that
//! `workflowRunListRevision`, the first pages of the run lists and the host's
//! `claimNextWorkflowRun` need not read the whole history after each write.
//!
//! How it stays exact, at the snapshot of the read transaction it is used in:
//! - This connection's writes: SQLite's update hook reports each changed row (table, rowid) of
//!   the six mirrored tables; the next read re-reads the runs those rows belong to (before and
//!   after the change) by rowid. A rolled-back write only causes a harmless re-read.
//! - What the update hook does not report: rows deleted by REPLACE conflict resolution and by
//!   the truncate optimization (`DELETE` without `WHERE`, possible only while foreign keys are
//!   off, since every mirrored table takes part in a foreign key). A statement trace flags
//!   every writing statement that could do either — its text mentions `replace`, it runs while
//!   foreign keys are off, or it is a trigger (the schema has none) — and the index is rebuilt.
//! - Other connections' commits (another process, the open's prune): `PRAGMA data_version`
//!   moves; the index is rebuilt (once a few polls took the SQL path, see [`Rebuild`]). So
//!   is it after more changed rows than [`MAX_PENDING`] between two reads. A schema change of this connection (DDL, VACUUM renumbering
//!   rowids) moves `schema_version`: the index is never used again on this connection.
//! - Not used at all inside the caller's own transaction (uncommitted changes), while the TEMP
//!   schema holds anything (it could shadow a main table), or while statements are recorded
//!   for the bench (the recorder owns the connection's trace).

mod mirror;

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{ffi, Connection};

use super::temp_schema;
use crate::error::Result;
pub use mirror::{Current, ListRevision};
use mirror::{Mirror, Table};

/// What the hooks saw since the last read.
#[derive(Default)]
struct Pending {
    rows: Vec<(Table, i64)>,
    /// A change the update hook may not have reported: rebuild.
    unreported: bool,
}

/// The hooks' shared state; its address is the hooks' context.
#[derive(Default)]
struct Hooks {
    pending: Mutex<Pending>,
}

impl Hooks {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The run index of one connection (see the module header).
pub struct RunIndex {
    /// `None`: not installed (statement recording owns the trace); never used.
    hooks: Option<Box<Hooks>>,
    mirror: Mutex<Mirror>,
}

/// Who reads, which decides how many of its polls take the SQL path after another
/// connection's commit before one rebuilds the index: about a rebuild's cost in such polls, so
/// that a poller sharing its file with a busy writer pays at most about twice what the SQL
/// costs (and a quiet file pays one rebuild).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuild {
    /// A run list or its revision: its SQL reads every run, about half a rebuild.
    List,
    /// A host's claim: its SQL reads the unfinished runs (a tenth of a typical file).
    Claim,
}

impl Rebuild {
    fn deferred_polls(self) -> u32 {
        match self {
            Rebuild::List => 2,
            Rebuild::Claim => 128,
        }
    }
}

/// How many changed rows are kept for re-reading between two reads (see `on_update`).
const MAX_PENDING: usize = 50_000;

impl RunIndex {
    /// Installs the hooks on `conn` (unless `recording`, or `PIW_RUN_INDEX=off` in the
    /// environment: every poll then reads through SQL, which tests compare the index with).
    /// The index must be dropped after the connection is closed: the hooks point at it.
    pub fn install(conn: &Connection, recording: bool) -> RunIndex {
        let hooks = (!recording && !switched_off()).then(|| {
            let hooks = Box::new(Hooks::default());
            let context = (&*hooks as *const Hooks).cast_mut().cast::<c_void>();
            // SAFETY: the handle is live; the context outlives the connection (see above).
            unsafe {
                ffi::sqlite3_update_hook(conn.handle(), Some(on_update), context);
                ffi::sqlite3_trace_v2(
                    conn.handle(),
                    ffi::SQLITE_TRACE_STMT as c_uint,
                    Some(on_statement),
                    context,
                );
            }
            hooks
        });
        RunIndex {
            hooks,
            // The first build is not deferred: it serves the connection's whole life.
            mirror: Mutex::new(Mirror::new()),
        }
    }

    /// Records the schema the open verified: the index is used only while `schema_version`
    /// stays the same (no DDL, no VACUUM since).
    pub fn schema_verified(&self, conn: &Connection) -> Result<()> {
        let version: i64 = conn.query_row("PRAGMA main.schema_version", [], |row| row.get(0))?;
        self.lock().verified_schema = Some(version);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Mirror> {
        self.mirror
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The index brought up to the snapshot of the read transaction open on `conn`, or `None`
    /// when the caller must read through SQL. `own_transaction`: the transaction was begun for
    /// this read (the connection was in autocommit), so it holds no uncommitted changes.
    pub fn current<'a>(
        &'a self,
        conn: &Connection,
        own_transaction: bool,
        rebuild: Rebuild,
    ) -> Result<Option<Current<'a>>> {
        let Some(hooks) = &self.hooks else {
            return Ok(None);
        };
        if !own_transaction {
            return Ok(None);
        }
        // The first read takes the snapshot (a deferred BEGIN has not yet).
        let schema_version: i64 = conn
            .prepare_cached("PRAGMA main.schema_version")?
            .query_row([], |row| row.get(0))?;
        if temp_schema::is_used(conn)? {
            return Ok(None);
        }
        let data_version: i64 = conn
            .prepare_cached("PRAGMA main.data_version")?
            .query_row([], |row| row.get(0))?;
        let pending = std::mem::take(&mut *hooks.lock());
        let mut mirror = self.lock();
        if mirror.verified_schema != Some(schema_version) {
            mirror.verified_schema = None;
            return Ok(None);
        }
        let stale = mirror.built_at != Some(data_version) || pending.unreported;
        if stale {
            // Whatever is pending is part of this snapshot: a rebuild reads it.
            mirror.built_at = None;
            if mirror.stale_polls < rebuild.deferred_polls() {
                mirror.stale_polls += 1;
                return Ok(None);
            }
            mirror.rebuild(conn)?;
        } else if mirror.apply(conn, &pending.rows)? {
            mirror.rebuild(conn)?;
        }
        mirror.stale_polls = 0;
        mirror.built_at = Some(data_version);
        Ok(Some(Current(mirror)))
    }
}

/// `PIW_RUN_INDEX=off`, read once per process.
fn switched_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var_os("PIW_RUN_INDEX").is_some_and(|value| value == "off"))
}

/// SQLite's update hook: records changed rows of the mirrored tables of `main`.
unsafe extern "C" fn on_update(
    context: *mut c_void,
    _operation: c_int,
    database: *const c_char,
    table: *const c_char,
    rowid: ffi::sqlite3_int64,
) {
    if CStr::from_ptr(database).to_bytes() != b"main" {
        return;
    }
    if let Some(table) = Table::of(CStr::from_ptr(table).to_bytes()) {
        let hooks = &*(context as *const Hooks);
        let mut pending = hooks.lock();
        // A connection that writes much and polls little: past a bound, a rebuild is cheaper
        // than the re-reads (and the memory stays bounded).
        if pending.rows.len() >= MAX_PENDING {
            pending.rows.clear();
            pending.unreported = true;
        }
        if !pending.unreported {
            pending.rows.push((table, rowid));
        }
    }
}

/// The statement trace: flags a writing statement whose deletions the update hook may miss.
unsafe extern "C" fn on_statement(
    _event: c_uint,
    context: *mut c_void,
    statement: *mut c_void,
    text: *mut c_void,
) -> c_int {
    let statement = statement as *mut ffi::sqlite3_stmt;
    if ffi::sqlite3_stmt_readonly(statement) != 0 {
        return 0;
    }
    let text = CStr::from_ptr(text as *const c_char).to_bytes();
    let trigger = text.starts_with(b"-- TRIGGER");
    if trigger || mentions_replace(text) || !foreign_keys_on(ffi::sqlite3_db_handle(statement)) {
        let hooks = &*(context as *const Hooks);
        hooks.lock().unreported = true;
    }
    0
}

/// Whether `text` contains `replace` in any letter case. Runs on every writing statement, so
/// it compares a window only where an `r` is (recordRunEvent: 445k → 440k instructions).
fn mentions_replace(text: &[u8]) -> bool {
    const WORD: &[u8] = b"replace";
    text.iter().enumerate().any(|(at, &byte)| {
        byte | 0x20 == b'r'
            && text[at..]
                .get(..WORD.len())
                .is_some_and(|window| window.eq_ignore_ascii_case(WORD))
    })
}

/// Whether foreign key enforcement is on (read without running SQL).
unsafe fn foreign_keys_on(db: *mut ffi::sqlite3) -> bool {
    let mut on: c_int = 0;
    let code = ffi::sqlite3_db_config(
        db,
        ffi::SQLITE_DBCONFIG_ENABLE_FKEY,
        -1 as c_int,
        &mut on as *mut c_int,
    );
    // Unknown counts as off: the index is rebuilt.
    code == ffi::SQLITE_OK && on != 0
}

#[cfg(test)]
mod tests;
