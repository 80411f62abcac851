//! The claim checks and small rules the run methods share: `options.now`, whether a token is
//! the run's live claim (`verifyWorkflowRunClaim`), the runner's holder and the release of its
//! live lease, a pending interaction, the runner's owner type, and the reference's
//! `Workflow run <id> …` consistency errors.

use crate::sql::{Db, OptionalExtension};

use super::machine::status::status_sql;
use super::row::{run_row_of, RunRow};
use crate::error::{Result, StoreError};
use crate::js::{message_error, token_hash_js, Js, Param};
use crate::state::leases::{self, bound_text, Fence, Holder, HolderKind, Lease};
use crate::wire::Call;

/// `epoch(validTimestamp(options.now))`, read from the first argument (V8's TypeError when
/// `options` is null or undefined).
pub fn options_now(call: &Call) -> Result<i64> {
    crate::js::timestamp(call, Js::arg(call, 0).get("now")?)
}

/// `verifyWorkflowRunClaim({runId, claimToken, now})` for caller values: the run's row when
/// the token is its current, unexpired claim. The token is hashed only when the lease has one
/// (Node then refuses a token that is not a string or bytes).
pub fn live_claim_row_of(
    conn: &Db,
    run_id: Js<'_>,
    claim_token: Js<'_>,
    now: i64,
) -> Result<Option<RunRow>> {
    match run_row_of(conn, run_id)? {
        Some(row) => live_claim_of(row, claim_token, now),
        None => Ok(None),
    }
}

/// [`live_claim_row_of`] for a row already read in this transaction.
pub fn live_claim_of(row: RunRow, claim_token: Js<'_>, now: i64) -> Result<Option<RunRow>> {
    let live = row.claim().holds_live(now, || token_hash_js(claim_token))?;
    Ok(live.then_some(row))
}

/// The holder of a run's `lease` presenting the token of `token_hash`.
pub fn run_holder<'a>(lease: &'a Lease, token_hash: &'a [u8]) -> Holder<'a> {
    Holder {
        kind: HolderKind::Runner(bound_text(lease.owner_type.as_deref())),
        owner_id: bound_text(lease.owner_id.as_deref()),
        token_hash,
    }
}

/// Clears the lease when the token of `token_hash` still holds it at `generation` and is unexpired at `now`;
/// false when it did not.
pub fn release_live_lease(
    conn: &Db,
    resource_id: &str,
    token_hash: &[u8; 32],
    generation: i64,
    now: i64,
) -> Result<bool> {
    let holder = Holder {
        kind: HolderKind::Runner(Param::null()),
        owner_id: Param::null(),
        token_hash,
    };
    leases::release(
        conn,
        resource_id,
        &holder,
        Param::int(generation),
        Fence::LiveToken,
        now,
    )
}

/// `Workflow run <id> <what>`: an internal-consistency failure the reference throws.
pub fn inconsistent(run_id: &str, what: &str) -> StoreError {
    StoreError::plain(format!("Workflow run {run_id} {what}"))
}

/// Whether the run has an `interactive_requests` row in `pending`.
pub fn has_pending_interaction(conn: &Db, run_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(concat!(
            "SELECT 1 FROM interactive_requests WHERE run_id = ? AND status = ",
            status_sql!(pending),
            " LIMIT 1"
        ))?
        .query_row([run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// `host` for runners named `host-…`, else `session`.
pub fn runner_owner_type(runner_id: &str) -> &'static str {
    if runner_id.starts_with("host-") {
        "host"
    } else {
        "session"
    }
}

/// `this.workflowRunRow(options.runId)`, then `verifyWorkflowRunClaim({ runId: options.runId,
/// claimToken: options.claimToken, now })`: the live claim's row, read inside the
/// transaction with the reference's reads of the caller's fields (the run id twice); `None`
/// when the run is missing or the claim is not live.
pub fn claimed_row(conn: &Db, options: Js<'_>, now: i64) -> Result<Option<RunRow>> {
    let first = options.get("runId")?;
    let Some(row) = run_row_of(conn, first)? else {
        return Ok(None);
    };
    let run_id = options.get("runId")?;
    let claim_token = options.get("claimToken")?;
    // The same string read twice finds the same row: only another value is looked up again.
    match (first, run_id) {
        (Js::String(first), Js::String(again)) if first == again => {
            live_claim_of(row, claim_token, now)
        }
        _ => live_claim_row_of(conn, run_id, claim_token, now),
    }
}

/// `Workflow run ${options.runId} <what>`, the run id read for the message.
pub fn inconsistent_of(options: Js<'_>, what: &str) -> StoreError {
    match options.get("runId") {
        Ok(run_id) => inconsistent_at(run_id, what),
        Err(error) => error,
    }
}

/// `Workflow run ${runId} <what>`.
pub fn inconsistent_at(run_id: Js<'_>, what: &str) -> StoreError {
    message_error(&[
        Js::String("Workflow run "),
        run_id,
        Js::String(" "),
        Js::String(what),
    ])
}

/// The run id the reference passes on where it reads `options.runId` again (its viewer deltas,
/// its dependents): the caller's string; a value that is not one found the row by SQLite's
/// conversion, so the row's id stands for it.
pub fn run_id_read_again<'a>(value: Js<'a>, row_run_id: &'a str) -> &'a str {
    value.as_str().unwrap_or(row_run_id)
}
