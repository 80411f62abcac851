//! One call at a time on a connection: its mutex, the nested call a caller's getter makes while
//! a call holds it (refused as better-sqlite3 refuses a connection in use), and panics turned
//! into the error wire form after the open transaction is rolled back.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, MutexGuard};

use crate::error::{Result, StoreError};
use crate::state::{SharedState, StateDb};
use crate::wire::encode_error;

thread_local! {
    /// The states whose lock this thread holds for a call now running (see [`reentered`]).
    static HELD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether this thread is already inside a call on `state`: a getter, a Proxy trap or a
/// coercion of a live call's arguments called the same database again. Its mutex is held by
/// that call; waiting for it would never end, so the nested use fails instead (better-sqlite3's
/// TypeError for a connection in use).
pub(super) fn reentered(state: &SharedState) -> bool {
    let key = Arc::as_ptr(state) as usize;
    HELD.with(|held| held.borrow().contains(&key))
}

pub(super) fn busy() -> StoreError {
    StoreError::Type("This database connection is busy executing a query".into())
}

/// Marks `state` as held by this thread for as long as it lives.
struct Held(usize);

impl Held {
    fn mark(state: &SharedState) -> Held {
        let key = Arc::as_ptr(state) as usize;
        HELD.with(|held| held.borrow_mut().push(key));
        Held(key)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|key| *key == self.0) {
                held.remove(at);
            }
        });
    }
}

/// Runs `operation` on the locked state, turning errors and panics into the error wire form.
pub(super) fn guarded(
    state: &SharedState,
    operation: impl FnOnce(&StateDb) -> Result<String>,
) -> String {
    if reentered(state) {
        return encode_error(&busy());
    }
    let guard = lock(state);
    let _held = Held::mark(state);
    let outcome = catch_unwind(AssertUnwindSafe(|| guard.as_one_call(|| operation(&guard))));
    match outcome {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => encode_error(&error),
        Err(panic) => {
            // The connection as it is: a prune failure not reported yet stays for the next call.
            if let Ok(conn) = guard.conn_before_prune() {
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
