//! The store as each method sees it: the state database, locked for the call, bound to one
//! project (or the global view); registering that project; one read snapshot for a record read.
//! It names no domain module: the router is crate::methods.

use crate::sql::{params, Db, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::state::ids::project_id_for;
use crate::state::{Mode, StateDb};

/// A store method's view: the locked state database and the project it is bound to.
pub struct Store<'a> {
    /// The state database, locked for the duration of the call.
    pub state: &'a StateDb,
    project_id: Option<&'a str>,
    /// The call's arguments are a snapshot: nothing it does runs JavaScript ([`Store::write`]).
    runs_no_javascript: bool,
}

impl<'a> Store<'a> {
    /// Binds `state` to `project_id` (`None` for the global view).
    pub fn new(state: &'a StateDb, project_id: Option<&'a str>) -> Store<'a> {
        Store {
            state,
            project_id,
            runs_no_javascript: false,
        }
    }

    /// The same store for a call that reads a snapshot of its arguments (`store.async`, on a
    /// worker thread): no getter, coercion or assignment of the caller's can run during it.
    pub fn running_no_javascript(self) -> Store<'a> {
        Store {
            runs_no_javascript: true,
            ..self
        }
    }

    /// The open connection, or the closed-connection TypeError.
    pub fn conn(&self) -> Result<&'a Db> {
        self.state.conn()
    }

    /// One `BEGIN IMMEDIATE` transaction: [`StateDb::write`]. A call that runs no JavaScript
    /// makes `Db::hold_writes_until_commit`'s promise from the start: on a cluster every
    /// write whose count it does not read then waits for the next read or the COMMIT.
    pub fn write<T>(&self, operation: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        if !self.runs_no_javascript {
            return self.state.write(operation);
        }
        self.state.write(|conn| {
            conn.hold_writes_until_commit();
            operation(conn)
        })
    }

    /// Whether the state database was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.state.mode == Mode::ReadOnly
    }

    /// The project id, `None` for the global view or an unregistered read-only project.
    pub fn project_id(&self) -> Option<&'a str> {
        self.project_id
    }

    /// The project id, required by project-scoped mutations.
    pub fn require_project_id(&self) -> Result<&'a str> {
        self.project_id.ok_or_else(|| {
            StoreError::plain("Controller project is not registered in the state database")
        })
    }
}

/// The project id for a canonical project path: registered on a read-write database (with
/// `now` as its creation time), looked up (possibly absent) on a read-only one.
pub fn resolve_project(state: &StateDb, canonical_path: &str, now: i64) -> Result<Option<String>> {
    if state.mode == Mode::ReadOnly {
        return Ok(state
            .conn()?
            .prepare_cached("SELECT project_id FROM projects WHERE canonical_path = ?")?
            .query_row([canonical_path], |row| row.get(0))
            .optional()?);
    }
    let project_id = project_id_for(canonical_path);
    // A registered project: the upsert would change nothing (its conflict target is
    // `project_id`), so it is not run, and the constructor need not wait for the open's blob
    // prune (`projects` is a table the prune never changes).
    let registered = state
        .conn_before_prune()?
        .prepare_cached("SELECT 1 FROM projects WHERE project_id = ?")?
        .query_row([&project_id], |_| Ok(()))
        .optional()?
        .is_some();
    if registered {
        return Ok(Some(project_id));
    }
    let conn = state.conn()?;
    conn.prepare_cached(
        "INSERT INTO projects(project_id, canonical_path, created_at)
         VALUES (?, ?, ?) ON CONFLICT(project_id) DO NOTHING",
    )?
    .execute(params![project_id, canonical_path, now])?;
    Ok(Some(project_id))
}

/// Runs `read` in one read transaction (one snapshot for its statements) unless the caller's
/// own transaction is open. A record read with several statements takes the file lock
/// once instead of once per statement. A failed read reports its own error: the transaction
/// is rolled back if it is still open (a cluster's is gone with a lost connection, SQLite
/// rolls back some failures itself), and that rollback's own failure is not the caller's.
pub fn in_read_transaction<T>(conn: &Db, read: impl FnOnce() -> Result<T>) -> Result<T> {
    if !conn.is_autocommit() {
        return read();
    }
    conn.prepare_cached("BEGIN")?.execute([])?;
    let outcome = read();
    if outcome.is_err() {
        if !conn.is_autocommit() {
            let _ = conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut end| end.execute([]));
        }
        return outcome;
    }
    conn.prepare_cached("COMMIT")?.execute([])?;
    outcome
}
