//! The store itself: a state database bound to one project (or the global view), and the table
//! that routes each public method to the module that owns it.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::state::ids::project_id_for;
use crate::state::{Mode, OpenOptions, StateDb};
use crate::wire::{Call, Reply};

pub struct StoreOptions {
    pub state: OpenOptions,
    /// The canonical project path (`realpath`, else `path.resolve`, done by the JS layer);
    /// `None` for the global view.
    pub project_path: Option<String>,
}

pub struct Store {
    pub state: StateDb,
    project_id: Option<String>,
}

impl Store {
    pub fn open(options: StoreOptions) -> Result<Store> {
        let now = options.state.now;
        let state = StateDb::open(options.state)?;
        let project_id = match options.project_path {
            None => None,
            Some(path) => match state.mode {
                Mode::ReadWrite => Some(ensure_project(state.conn()?, &path, now)?),
                Mode::ReadOnly => find_project(state.conn()?, &path)?,
            },
        };
        Ok(Store { state, project_id })
    }

    pub fn conn(&self) -> Result<&Connection> {
        self.state.conn()
    }

    /// One `BEGIN IMMEDIATE` transaction (see [`StateDb::write`]).
    pub fn write<T>(&self, operation: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.state.write(operation)
    }

    pub fn is_read_only(&self) -> bool {
        self.state.mode == Mode::ReadOnly
    }

    /// The project id, `None` for the global view or an unregistered read-only project.
    pub fn project_id(&self) -> Option<&str> {
        self.project_id.as_deref()
    }

    /// The project id, required by project-scoped mutations.
    pub fn require_project_id(&self) -> Result<&str> {
        self.project_id().ok_or_else(|| {
            StoreError::plain("Controller project is not registered in the state database")
        })
    }

    pub fn close(&mut self) {
        self.state.close();
    }
}

fn ensure_project(conn: &Connection, canonical_path: &str, now: i64) -> Result<String> {
    let project_id = project_id_for(canonical_path);
    conn.prepare_cached(
        "INSERT INTO projects(project_id, canonical_path, created_at)
         VALUES (?, ?, ?) ON CONFLICT(project_id) DO NOTHING",
    )?
    .execute(params![project_id, canonical_path, now])?;
    Ok(project_id)
}

fn find_project(conn: &Connection, canonical_path: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT project_id FROM projects WHERE canonical_path = ?")?
        .query_row([canonical_path], |row| row.get(0))
        .optional()?)
}

/// Every public method the core implements, for the JS layer to expose.
pub fn implemented_methods() -> Vec<&'static str> {
    let mut methods = Vec::new();
    methods.extend(crate::controller::methods());
    methods.extend(crate::runs::methods());
    methods
}

pub fn dispatch(store: &Store, method: &str, call: &Call) -> Result<Reply> {
    if let Some(reply) = crate::controller::dispatch(store, method, call) {
        return reply;
    }
    if let Some(reply) = crate::runs::dispatch(store, method, call) {
        return reply;
    }
    Err(StoreError::plain(format!("Unknown store method: {method}")))
}
