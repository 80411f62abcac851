//! Interaction deadlines (0.16.1): when the model turn answering a parked run's interactive
//! request has outlived its node attempt's deadline, the claimed run gives up on the request
//! and resumes, so the engine can finish the expired attempt.

use crate::sql::{params, params_from_iter, Db, OptionalExtension};
use serde_json::json;

use super::checks::{inconsistent, live_claim_row_of, options_now};
use super::machine::moves::{Table, INTERACTION_TIMEOUT};
use super::machine::status::status_sql;
use super::row::run_row_of;
use crate::error::Result;
use crate::js::{message_error, params_for, Js};
use crate::state::blobs::put_json;
use crate::state::json::canonical;
use crate::state::leases::{self, Actor};
use crate::state::revisions::{bump_resource_revision, Payload};
use crate::state::viewer::{record_viewer_deltas, ViewerDraft};
use crate::store::Store;
use crate::wire::Call;

const TIMEOUT_VIEWS: &[ViewerDraft] = &[("summary", ""), ("replay", ""), ("conversation", "")];

const DEADLINE_EXPIRED: &str = "Workflow node model-turn deadline expired";

/// The request (and its attempt) whose deadline passed while its model turn was running.
struct ExpiredInteraction {
    request_id: String,
    attempt_id: String,
}

/// The earliest-deadline pending request of an unpaused run, aimed at `target_session_id`,
/// whose attempt deadline is due and whose step message has a started turn.
fn expired_interaction(
    conn: &Db,
    run_id: Js<'_>,
    target_session_id: Js<'_>,
    now: i64,
) -> Result<Option<ExpiredInteraction>> {
    let mut statement = conn.prepare_cached(concat!(
        "SELECT i.request_id, i.attempt_id
             FROM interactive_requests i
             JOIN node_attempts a ON a.attempt_id = i.attempt_id
             JOIN runs r ON r.run_id = i.run_id
             WHERE i.run_id = ? AND i.target_session_id = ?
               AND i.status = ",
        status_sql!(pending),
        " AND r.paused = 0
               AND a.deadline_at IS NOT NULL AND a.deadline_at <= ?
               AND EXISTS (
                 SELECT 1 FROM workflow_messages m
                 JOIN workflow_turns t ON t.workflow_message_id = m.workflow_message_id
                 WHERE m.source_id = i.request_id AND m.kind = 'step' AND t.state = 'started'
               )
             ORDER BY a.deadline_at, i.request_id LIMIT 1"
    ))?;
    // `.get(options.runId, options.targetSessionId, now)`, bound as given.
    let params = params_for(
        &statement,
        &[run_id, target_session_id, Js::Number(now as f64)],
    )?;
    Ok(statement
        .query_row(params_from_iter(&params), |row| {
            Ok(ExpiredInteraction {
                request_id: row.get(0)?,
                attempt_id: row.get(1)?,
            })
        })
        .optional()?)
}

/// Cancels the request and moves the waiting run and its parked queue entry back to work.
fn resume_from_expired(
    conn: &Db,
    run_id: &str,
    interaction: &ExpiredInteraction,
    now: i64,
) -> Result<()> {
    let mv = &INTERACTION_TIMEOUT;
    let request = mv.apply(
        conn,
        Table::Request,
        params![now, interaction.request_id, run_id],
    )?;
    let run = mv.apply(conn, Table::Run, params![now, run_id])?;
    let queue = mv.apply(conn, Table::Queue, params![now, run_id])?;
    if request != 1 || run != 1 || queue != 1 {
        return Err(inconsistent(run_id, "changed during interaction timeout"));
    }
    Ok(())
}

pub fn begin_timeout(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    let args = Js::arg(call, 0);
    store.write(|conn| {
        if live_claim_row_of(
            conn,
            args.get_or_undefined("runId")?,
            args.get_or_undefined("claimToken")?,
            now,
        )?
        .is_none()
        {
            return Ok(false);
        }
        // `this.requireWorkflowRunRow(options.runId)`, then `.get(options.runId,
        // options.targetSessionId, now)`: the run id read again for each.
        let run_id = args.get_or_undefined("runId")?;
        let Some(row) = run_row_of(conn, run_id)? else {
            return Err(message_error(&[
                Js::String("Workflow run not found: "),
                run_id,
            ]));
        };
        let run_id = row.run_id.as_str();
        let bound_run_id = args.get_or_undefined("runId")?;
        let target_session_id = args.get_or_undefined("targetSessionId")?;
        let Some(interaction) = expired_interaction(conn, bound_run_id, target_session_id, now)?
        else {
            return Ok(false);
        };
        resume_from_expired(conn, run_id, &interaction, now)?;
        let receipt = canonical(&json!({ "status": "rejected", "error": DEADLINE_EXPIRED }));
        let receipt_hash = put_json(conn, &receipt, now)?;
        conn.prepare_cached(
            "UPDATE interactive_submissions SET outcome = 'rejected', receipt_hash = ?
             WHERE request_id = ? AND outcome = 'validating'",
        )?
        .execute(params![&receipt_hash[..], interaction.request_id])?;
        // No lease was written since the claim check read it.
        let lease = row.lease();
        let revision = bump_resource_revision(conn, &row.resource_id, now)?;
        let payload = json!({
            "requestId": interaction.request_id,
            "attemptId": interaction.attempt_id,
        });
        leases::insert_attributed_event_of(
            conn,
            (&row.resource_id, revision, INTERACTION_TIMEOUT.event),
            Actor::Holder(&lease),
            &canonical(&payload),
            now,
            Payload::Fresh,
        )?;
        record_viewer_deltas(conn, run_id, TIMEOUT_VIEWS, now)?;
        Ok(true)
    })
}
