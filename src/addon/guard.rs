//! One call at a time on a connection: its mutex, the nested call a caller's getter makes while
//! a call holds it (run on the outer call's connection, as the reference's nested call runs on
//! its one better-sqlite3 connection), and panics turned into the error wire form after the
//! open transaction is rolled back.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, MutexGuard};

use crate::error::{Result, StoreError};
use crate::state::{SharedState, StateDb};
use crate::wire::encode_error;

thread_local! {
    /// The states whose lock this thread holds for a call now running, with the state each
    /// call runs on (see [`reentered`]).
    static HELD: std::cell::RefCell<Vec<(usize, *const StateDb)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The state this thread is already running a call on, when it is `state`: a getter, a Proxy
/// trap or a coercion of a live call's arguments called the same database again. Its mutex is
/// held by that call (waiting for it would never end), so the nested call runs on the same
/// connection, as the reference's nested call runs on its one better-sqlite3 connection: a
/// read sees the outer call's uncommitted rows, and a write's `BEGIN IMMEDIATE` inside the
/// outer transaction fails and leaves it open (`StateDb::write`), as the reference's does.
pub(super) fn reentered(state: &SharedState) -> Option<*const StateDb> {
    let key = Arc::as_ptr(state) as usize;
    HELD.with(|held| {
        held.borrow()
            .iter()
            .rev()
            .find(|(held, _)| *held == key)
            .map(|(_, db)| *db)
    })
}

/// better-sqlite3's TypeError for a connection in use (what closing it from inside one of its
/// own calls answers here: the outer call still holds the connection).
pub(super) fn busy() -> StoreError {
    StoreError::Type("This database connection is busy executing a query".into())
}

/// Marks `state` as held by this thread, running on `db`, for as long as it lives.
struct Held(usize);

impl Held {
    fn mark(state: &SharedState, db: &StateDb) -> Held {
        let key = Arc::as_ptr(state) as usize;
        HELD.with(|held| held.borrow_mut().push((key, db as *const StateDb)));
        Held(key)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|(key, _)| *key == self.0) {
                held.remove(at);
            }
        });
    }
}

/// Runs `read` on `state`: on the state of the call this thread is inside (a re-entrant call,
/// see [`reentered`]) or with its lock taken.
pub(super) fn with_state<T>(state: &SharedState, read: impl FnOnce(&StateDb) -> T) -> T {
    match reentered(state) {
        // SAFETY: the outer call's guard lives until its `Held` mark is dropped, on this thread,
        // after this nested call returns; both calls only take `&StateDb`.
        Some(db) => read(unsafe { &*db }),
        None => read(&lock(state)),
    }
}

/// Runs `operation` on the locked state (or, re-entered, on the state of the call this thread
/// is inside), turning errors and panics into the error wire form.
pub(super) fn guarded(
    state: &SharedState,
    operation: impl FnOnce(&StateDb) -> Result<String>,
) -> String {
    match reentered(state) {
        // SAFETY: as in [`with_state`].
        Some(db) => run_guarded(state, unsafe { &*db }, operation),
        None => run_guarded(state, &lock(state), operation),
    }
}

fn run_guarded(
    state: &SharedState,
    db: &StateDb,
    operation: impl FnOnce(&StateDb) -> Result<String>,
) -> String {
    let _held = Held::mark(state, db);
    let outcome = catch_unwind(AssertUnwindSafe(|| db.as_one_call(|| operation(db))));
    match outcome {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => encode_error(&error),
        Err(panic) => {
            // The connection as it is: a prune failure not reported yet stays for the next call.
            if let Ok(conn) = db.conn_before_prune() {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
            }
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            encode_error(&StoreError::plain(format!(
                "pi-workflows-native internal error: {detail}"
            )))
        }
    }
}

pub(super) fn lock(state: &SharedState) -> MutexGuard<'_, StateDb> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
