//! The store as each method sees it: the state database, locked for the call, bound to one
//! project (or the global view), and the table that routes each public method to its module.

use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::state::ids::project_id_for;
use crate::state::{Mode, StateDb};
use crate::wire::{Call, Reply};

/// A store method's view: the locked state database and the project it is bound to.
pub struct Store<'a> {
    /// The state database, locked for the duration of the call.
    pub state: &'a StateDb,
    project_id: Option<&'a str>,
}

impl<'a> Store<'a> {
    /// Binds `state` to `project_id` (`None` for the global view).
    pub fn new(state: &'a StateDb, project_id: Option<&'a str>) -> Store<'a> {
        Store { state, project_id }
    }

    /// The open connection, or the closed-connection TypeError.
    pub fn conn(&self) -> Result<&'a Connection> {
        self.state.conn()
    }

    /// One `BEGIN IMMEDIATE` transaction: [`StateDb::write`].
    pub fn write<T>(&self, operation: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.state.write(operation)
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

type Dispatch = fn(&Store<'_>, &str, &Call) -> Option<Result<Reply>>;

/// Every module that implements public methods: its method names and its dispatcher.
const MODULES: &[(&[&str], Dispatch)] = {
    use crate::{controller, runs};
    &[
        (
            controller::resources::METHODS,
            controller::resources::dispatch,
        ),
        (controller::queue::METHODS, controller::queue::dispatch),
        (controller::effects::METHODS, controller::effects::dispatch),
        (
            controller::workflows::METHODS,
            controller::workflows::dispatch,
        ),
        (controller::events::METHODS, controller::events::dispatch),
        (runs::reserve::METHODS, runs::reserve::dispatch),
        (runs::reads::METHODS, runs::reads::dispatch),
        (runs::claims::METHODS, runs::claims::dispatch),
        (runs::transitions::METHODS, runs::transitions::dispatch),
        (runs::interaction::METHODS, runs::interaction::dispatch),
        (runs::run_events::METHODS, runs::run_events::dispatch),
        (runs::settle::METHODS, runs::settle::dispatch),
        (runs::legacy::METHODS, runs::legacy::dispatch),
    ]
};

/// Every public method the core implements, for the JS layer to expose; a call names its
/// method by its position in this list (see [`dispatch_at`]).
pub fn implemented_methods() -> Vec<&'static str> {
    METHOD_TABLE.iter().map(|(method, _)| *method).collect()
}

/// Every public method with its module's dispatcher, in [`implemented_methods`] order.
static METHOD_TABLE: LazyLock<Vec<(&'static str, Dispatch)>> = LazyLock::new(|| {
    MODULES
        .iter()
        .flat_map(|(methods, dispatch)| methods.iter().map(|method| (*method, *dispatch)))
        .collect()
});

/// Runs one public method; `Unknown store method` for any other name.
pub fn dispatch(store: &Store<'_>, method: &str, call: &Call) -> Result<Reply> {
    MODULES
        .iter()
        .find_map(|(_, dispatch)| dispatch(store, method, call))
        .unwrap_or_else(|| Err(unknown_method(method)))
}

/// Runs the public method at `index` of [`implemented_methods`], straight in its module:
/// the JS layer names methods by position, so no method name crosses napi as a string and no
/// module is tried in turn; the module's dispatcher still matches the name within its own list.
pub fn dispatch_at(store: &Store<'_>, index: u32, call: &Call) -> Result<Reply> {
    match METHOD_TABLE.get(index as usize) {
        Some((method, dispatch)) => {
            dispatch(store, method, call).unwrap_or_else(|| Err(unknown_method(method)))
        }
        None => Err(unknown_method(&format!("#{index}"))),
    }
}

fn unknown_method(method: &str) -> StoreError {
    StoreError::plain(format!("Unknown store method: {method}"))
}

/// Runs `read` in one read transaction (one snapshot for its statements) unless the caller's
/// own transaction is open. A record read with several statements takes the file lock
/// once instead of once per statement.
pub fn in_read_transaction<T>(conn: &Connection, read: impl FnOnce() -> Result<T>) -> Result<T> {
    if !conn.is_autocommit() {
        return read();
    }
    conn.prepare_cached("BEGIN")?.execute([])?;
    let outcome = read();
    let end = if outcome.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    conn.prepare_cached(end)?.execute([])?;
    outcome
}
