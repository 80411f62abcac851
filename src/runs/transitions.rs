//! The run transition methods' rows of the method table, by move family: parking, pausing
//! and resuming ([`super::parking`]), the recovery parks ([`super::recovery`]), failing and
//! cancelling ([`super::terminal`]); and the two that move no status: deletion and the
//! origin-session binding. The moves themselves are [`super::machine`]'s.

use crate::sql::params_from_iter;

use super::parking::release_by_call;
use super::row::run_row_of;
use crate::error::Result;
use crate::js::{params_for, token_hash_js, Js};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// Deletes the run's resource (the schema cascades the rest) under a live exact claim, judged
/// at the call's `Date.now()`.
pub fn delete(store: &Store, call: &Call) -> Result<bool> {
    let now = call.clock;
    let options = Js::arg(call, 0);
    store.write(|conn| {
        // Read inside the transaction, as the reference reads `options.runId`.
        let Some(row) = run_row_of(conn, options.get("runId")?)? else {
            return Ok(false);
        };
        let live = row.claim().holds_unexpired(now, || {
            token_hash_js(options.get_or_undefined("claimToken")?)
        })?;
        if !live {
            return Ok(false);
        }
        let deleted = conn
            .prepare_cached("DELETE FROM resources WHERE resource_id = ?")?
            .execute([&row.resource_id])?;
        Ok(deleted == 1)
    })
}

/// Binds the run to an origin session (interactive), outside any transaction, as the
/// reference does.
pub fn set_origin_session(store: &Store, call: &Call) -> Result<bool> {
    let mut statement = store.conn()?.prepare_cached(
        "INSERT INTO run_bindings(run_id, origin_session_id, execution_mode, created_at)
         VALUES (?, ?, 'interactive', ?)
         ON CONFLICT(run_id) DO UPDATE SET origin_session_id = excluded.origin_session_id",
    )?;
    // `.run(runId, originSessionId, now)`, each bound as better-sqlite3 binds it.
    let values = [
        Js::arg(call, 0),
        Js::arg(call, 1),
        Js::Number(call.clock as f64),
    ];
    let params = params_for(&statement, &values)?;
    let changed = statement.execute(params_from_iter(&params))?;
    Ok(changed == 1)
}

/// `parkWorkflowRun` (a row of the method table).
pub fn park_workflow_run(store: &Store, call: &Call) -> Result<Reply> {
    release_by_call(store, call, "parked").map(Reply::value)
}

/// `completeWorkflowRun` (a row of the method table).
pub fn complete_workflow_run(store: &Store, call: &Call) -> Result<Reply> {
    release_by_call(store, call, "done").map(Reply::value)
}
