//! Parking moves: the claimant parks or completes a run and lets go of it (`PARK`,
//! `COMPLETE`), and a parked run waiting on an interaction is paused and resumed (`PAUSE`,
//! `RESUME`).

use crate::sql::{params, Db};
use serde_json::json;

use super::checks::{has_pending_interaction, live_claim_of, options_now, run_holder};
use super::machine::moves::{Move, Table, COMPLETE, PARK, PAUSE, RESUME};
use super::machine::record;
use super::machine::status::{QueueStatus, RunStatus};
use super::row::{run_row_with_revisions_of, RunRow};
use crate::error::Result;
use crate::js::{token_hash_js, Js, Param};
use crate::state::leases::{self, Actor, Fence};
use crate::store::Store;
use crate::wire::Call;

pub fn release_by_call(store: &Store, call: &Call, status: &str) -> Result<bool> {
    // `releaseRunClaim(options.runId, options.claimToken, status, options.now)`: the reads in
    // argument order.
    let options = Js::arg(call, 0);
    let run_id = options.get("runId")?;
    let claim_token = options.get("claimToken")?;
    let now = options_now(call)?;
    let mv = match status {
        "done" => &COMPLETE,
        _ => &PARK,
    };
    release_run_claim(store, run_id, claim_token, mv, now)
}

/// Sets the queue status (`parked`, or `done` with `finished_at`) and releases the caller's live
/// claim. The caller's values are bound and hashed as the reference does (`workflowRunRow`,
/// then `verifyWorkflowRunClaim`).
fn release_run_claim(
    store: &Store,
    run_id: Js<'_>,
    claim_token: Js<'_>,
    mv: &Move,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        // `verifyWorkflowRunClaim` reads the row `workflowRunRow` has just read, by the same
        // bound value, in the same transaction: the one read answers both.
        let Some((row, known)) = run_row_with_revisions_of(conn, run_id)? else {
            return Ok(false);
        };
        let Some(row) = live_claim_of(row, claim_token, now)? else {
            return Ok(false);
        };
        let token_hash = token_hash_js(claim_token)?;
        let status = mv.queue.map_or(QueueStatus::Parked, |(_, to)| to);
        let finished_at = (status == QueueStatus::Done).then_some(now);
        mv.apply(conn, Table::Queue, params![now, finished_at, row.run_id])?;
        let lease = row.lease();
        let holder = run_holder(&lease, &token_hash);
        let generation = Param::int(lease.generation);
        if !leases::release(
            conn,
            &row.resource_id,
            &holder,
            generation,
            Fence::Token,
            now,
        )? {
            return Ok(false);
        }
        record(
            conn,
            (&row, known),
            (mv.event, &json!({ "status": status.as_str() })),
            Actor::Holder(&lease),
            now,
            &row.run_id,
        )?;
        Ok(true)
    })
}

/// Pauses a parked, ownerless run that waits on a pending interaction (idempotent).
pub fn pause_parked(store: &Store, call: &Call) -> Result<bool> {
    toggle_pause(store, call, &PAUSE, "parked", |conn, row, now| {
        if row.queue_status() != Some(QueueStatus::Parked) || !awaits_interaction(conn, row, now)? {
            return Ok(Some(false));
        }
        if row.paused == 1 {
            return Ok(Some(true));
        }
        Ok((!matches!(
            row.run_status(),
            Some(RunStatus::Running | RunStatus::Waiting)
        ))
        .then_some(false))
    })
}

/// Lifts the pause of a parked, waiting, ownerless run that still has a pending interaction.
pub fn resume_paused(store: &Store, call: &Call) -> Result<bool> {
    toggle_pause(store, call, &RESUME, "waiting", |conn, row, now| {
        let ready = row.queue_status() == Some(QueueStatus::Parked)
            && row.run_status() == Some(RunStatus::Waiting)
            && row.paused == 1
            && awaits_interaction(conn, row, now)?;
        Ok((!ready).then_some(false))
    })
}

/// Whether the run's lease is not live at `now` and the run has a pending interaction (asked
/// only then).
fn awaits_interaction(conn: &Db, row: &RunRow, now: i64) -> Result<bool> {
    Ok(!row.lease().is_live(now) && has_pending_interaction(conn, &row.run_id)?)
}

/// The frame pause and resume share: `options.runId` is read inside the reference's
/// transaction, `judge` answers for a row the move does not apply to (`Some`), then `mv` is
/// applied to the run and recorded with the run's new `status`.
fn toggle_pause(
    store: &Store,
    call: &Call,
    mv: &Move,
    status: &str,
    judge: impl FnOnce(&Db, &RunRow, i64) -> Result<Option<bool>>,
) -> Result<bool> {
    let now = options_now(call)?;
    store.write(|conn| {
        let run_id = Js::arg(call, 0).get_or_undefined("runId")?;
        let Some((row, known)) = run_row_with_revisions_of(conn, run_id)? else {
            return Ok(false);
        };
        if let Some(answer) = judge(conn, &row, now)? {
            return Ok(answer);
        }
        let changed = mv.apply(conn, Table::Run, params![now, row.run_id])?;
        if changed != 1 {
            return Ok(false);
        }
        record(
            conn,
            (&row, known),
            (mv.event, &json!({ "status": status })),
            Actor::Control(None),
            now,
            &row.run_id,
        )?;
        Ok(true)
    })
}
