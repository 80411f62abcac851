//! What a cancelled run leaves open, ended with it: its attempts, its run-scoped effects (with
//! their events), unresolved decisions, validating submissions and pending interactive
//! requests ([`cancel_dependents`]; the `CANCEL` and `CANCEL_STALE` moves of [`super::moves`]).

use serde_json::json;

use super::status::status_sql;
use crate::error::{Result, StoreError};
use crate::js::Bound;
use crate::sql::{params, Db};
use crate::state::blobs::{put_json, BlobHash};
use crate::state::json::canonical;
use crate::state::leases::{self, Actor};
use crate::state::revisions::{bump_resource, resource_revision};

/// A run-scoped effect still pending or applying when its run is cancelled.
struct OpenEffect {
    effect_id: String,
    resource_id: String,
    status: String,
    attempt_count: i64,
}

fn open_run_effects(conn: &Db, run_id: &str) -> Result<Vec<OpenEffect>> {
    let effects = conn
        .prepare_cached(concat!(
            "SELECT e.effect_id, e.resource_id, e.status, e.attempt_count
             FROM effects e JOIN runs r ON r.resource_id = e.source_resource_id
             WHERE r.run_id = ? AND e.owner_scope = 'run' AND e.status IN ",
            status_sql!(effect_open),
            "
             ORDER BY e.effect_id"
        ))?
        .query_map([run_id], |row| {
            Ok(OpenEffect {
                effect_id: row.get(0)?,
                resource_id: row.get(1)?,
                status: row.get(2)?,
                attempt_count: row.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(effects)
}

/// Settles one open effect of a cancelled run: `applying` becomes `ambiguous` (its open attempt
/// is interrupted), `pending` becomes `cancelled`.
fn cancel_effect(
    conn: &Db,
    run_id: &str,
    effect: &OpenEffect,
    actor_id: &[u8],
    error_hash: &BlobHash,
    now: i64,
) -> Result<()> {
    let applying = effect.status == "applying";
    let status = if applying { "ambiguous" } else { "cancelled" };
    let revision = resource_revision(conn, &effect.resource_id)?;
    let changed = conn
        .prepare_cached(
            "UPDATE effects
             SET status = ?, next_attempt_at = NULL, error_hash = ?, updated_at = ?, settled_at = ?
             WHERE effect_id = ? AND status = ? AND attempt_count = ?",
        )?
        .execute(params![
            status,
            &error_hash[..],
            now,
            now,
            effect.effect_id,
            effect.status,
            effect.attempt_count
        ])?;
    if changed != 1 {
        return Err(StoreError::plain(format!(
            "Workflow effect {} changed during cancellation",
            effect.effect_id
        )));
    }
    if applying {
        conn.prepare_cached(
            "UPDATE effect_attempts
             SET finished_at = ?, outcome = 'interrupted', error_hash = ?
             WHERE effect_id = ? AND attempt_number = ? AND finished_at IS NULL",
        )?
        .execute(params![
            now,
            &error_hash[..],
            effect.effect_id,
            effect.attempt_count
        ])?;
    }
    bump_resource(conn, &effect.resource_id, revision, now)?;
    leases::insert_attributed_event(
        conn,
        &effect.resource_id,
        revision + 1,
        &format!("effect.{status}"),
        Actor::Control(Some(actor_id)),
        &canonical(&json!({ "runId": run_id, "reason": "workflowCancelled" })),
        now,
    )?;
    Ok(())
}

/// Everything a cancelled run leaves open: attempts, run-scoped effects, unresolved decisions,
/// validating submissions and pending interactive requests. `actor_id` is the text's bytes as
/// they were bound (a caller's lone surrogates stay WTF-8).
pub fn cancel_dependents(
    conn: &Db,
    run_id: &str,
    actor_id: &[u8],
    error_hash: &BlobHash,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(concat!(
        "UPDATE node_attempts
         SET status = ",
        status_sql!(cancelled),
        ", error_hash = COALESCE(error_hash, ?),
             updated_at = ?, finished_at = COALESCE(finished_at, ?)
         WHERE run_id = ? AND status IN ",
        status_sql!(attempt_cancellable)
    ))?
    .execute(params![&error_hash[..], now, now, run_id])?;
    for effect in open_run_effects(conn, run_id)? {
        cancel_effect(conn, run_id, &effect, actor_id, error_hash, now)?;
    }
    conn.prepare_cached(
        "INSERT INTO human_decision_resolutions(
           decision_id, outcome, provenance, response_hash, reason, channel,
           actor_id, request_digest, resolved_at
         )
         SELECT d.decision_id, 'cancelled', 'explicit_cancel', NULL,
                'Workflow run cancelled', NULL, ?, d.request_digest, ?
         FROM human_decisions d
         LEFT JOIN human_decision_resolutions r ON r.decision_id = d.decision_id
         WHERE d.run_id = ? AND r.decision_id IS NULL",
    )?
    .execute(params![Bound::Text(actor_id.into()), now, run_id])?;
    let receipt = canonical(&json!({ "status": "rejected", "error": "Workflow run cancelled" }));
    let receipt_hash = put_json(conn, &receipt, now)?;
    conn.prepare_cached(
        "UPDATE interactive_submissions SET outcome = 'rejected', receipt_hash = ?
         WHERE outcome = 'validating'
           AND request_id IN (SELECT request_id FROM interactive_requests WHERE run_id = ?)",
    )?
    .execute(params![&receipt_hash[..], run_id])?;
    conn.prepare_cached(concat!(
        "UPDATE interactive_requests
         SET status = ",
        status_sql!(cancelled),
        ", revision = revision + 1, updated_at = ?
         WHERE run_id = ? AND status = ",
        status_sql!(pending)
    ))?
    .execute(params![now, run_id])?;
    Ok(())
}
