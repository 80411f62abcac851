//! Run claims and fencing: taking, renewing and verifying a run's lease. Every claim bumps the
//! lease generation (the fencing token) and stores only the SHA-256 of the caller's token.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::records::{map_workflow_run, with_claim_token};
use super::row::{require_workflow_run_row, workflow_run_row};
use crate::error::Result;
use crate::state::ids::token_hash;
use crate::state::json::canonical;
use crate::state::revisions::{
    bump_resource, insert_event, require_lease, resource_revision, EventDraft,
};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// The claim methods implemented here.
pub const METHODS: &[&str] = &[];

pub fn dispatch(_store: &Store, method: &str, _call: &Call) -> Option<Result<Reply>> {
    match method {
        _ => None,
    }
}

/// Which checks a claim skips.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaimOptions {
    /// Claim even while an interactive request is pending.
    pub allow_pending_interaction: bool,
    /// Leave `run_queue.status` as it is (a control claim).
    pub preserve_queue_status: bool,
}

/// `host` for runners named `host-…`, else `session`.
pub fn runner_owner_type(runner_id: &str) -> &'static str {
    if runner_id.starts_with("host-") {
        "host"
    } else {
        "session"
    }
}

pub fn has_pending_interaction(conn: &Connection, run_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM interactive_requests WHERE run_id = ? AND status = 'pending' LIMIT 1",
        )?
        .query_row([run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// One claim attempt in its own transaction.
pub fn claim_run(
    store: &Store,
    claim: &RunClaim<'_>,
    now: i64,
    options: ClaimOptions,
) -> Result<Option<Value>> {
    store.write(|conn| claim_run_in_transaction(conn, claim, now, options))
}

/// Who claims a run, with which token, for how long.
#[derive(Debug, Clone, Copy)]
pub struct RunClaim<'a> {
    pub run_id: &'a str,
    pub runner_id: &'a str,
    pub claim_token: &'a str,
    pub lease_ms: i64,
}

/// Claims the run for `runner_id` unless it is terminal, has a pending interaction (unless
/// allowed), or another owner's lease is live. Returns the run record with `claimToken`.
pub fn claim_run_in_transaction(
    conn: &Connection,
    claim: &RunClaim<'_>,
    now: i64,
    options: ClaimOptions,
) -> Result<Option<Value>> {
    let Some(row) = workflow_run_row(conn, claim.run_id)? else {
        return Ok(None);
    };
    if row.is_queue_terminal() {
        return Ok(None);
    }
    if !options.allow_pending_interaction && has_pending_interaction(conn, claim.run_id)? {
        return Ok(None);
    }
    let lease = require_lease(conn, &row.resource_id)?;
    let held_by_other = lease
        .owner_id
        .as_deref()
        .is_some_and(|owner| owner != claim.runner_id)
        && lease.expires_at.is_some_and(|expires| expires > now);
    if held_by_other {
        return Ok(None);
    }
    let generation = lease.generation + 1;
    let expires_at = now + claim.lease_ms;
    let owner_type = runner_owner_type(claim.runner_id);
    let changed = conn
        .prepare_cached(
            "UPDATE leases SET generation = ?, owner_type = ?, owner_id = ?, token_hash = ?,
                    acquired_at = ?, heartbeat_at = ?, expires_at = ?
             WHERE resource_id = ? AND generation = ?",
        )?
        .execute(params![
            generation,
            owner_type,
            claim.runner_id,
            &token_hash(claim.claim_token)[..],
            now,
            now,
            expires_at,
            row.resource_id,
            lease.generation
        ])?;
    if changed != 1 {
        return Ok(None);
    }
    if !options.preserve_queue_status {
        conn.prepare_cached(
            "UPDATE run_queue
             SET status = 'starting', error_code = NULL, error_hash = NULL, updated_at = ?
             WHERE run_id = ?",
        )?
        .execute(params![now, claim.run_id])?;
    }
    let revision = resource_revision(conn, &row.resource_id)?;
    bump_resource(conn, &row.resource_id, revision, now)?;
    insert_event(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision: revision + 1,
            event_type: "lease.claimed",
            actor_type: owner_type,
            actor_id: Some(claim.runner_id),
            payload: &canonical(&json!({ "expiresAt": expires_at })),
            now,
            lease_generation: Some(generation),
        },
    )?;
    let record = map_workflow_run(conn, &require_workflow_run_row(conn, claim.run_id)?)?;
    Ok(Some(with_claim_token(record, claim.claim_token)))
}
