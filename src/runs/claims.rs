//! Run claims and fencing: taking, renewing and verifying a run's lease. Every claim bumps the
//! lease generation (the fencing token) and stores only the SHA-256 of the caller's token.
//!
//! Also the claim-guarded queue status change (`markWorkflowRunRunning`) and the small helpers
//! the transitions share: the current claim check and the `lease.ownerType ?? "system"` event.

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::records::map_workflow_run_with;
use super::row::{nonterminal_run_row, workflow_run_row, RunRow, RUN_SELECT};
use crate::error::{Result, StoreError};
use crate::state::blobs::JsonReads;
use crate::state::ids::token_hash;
use crate::state::json::canonical;
use crate::state::revisions::{bump_resource_revision, insert_event, EventDraft, Lease};
use crate::state::viewer::{record_viewer_deltas, SUMMARY_REPLAY};
use crate::store::Store;
use crate::time::js_iso;
use crate::wire::{field, int, text, texts, time, Call, Reply};

/// The claim methods implemented here.
pub const METHODS: &[&str] = &[
    "claimWorkflowRun",
    "claimWorkflowRunForInteractionValidation",
    "claimWorkflowRunForControl",
    "claimNextWorkflowRun",
    "renewWorkflowRunClaim",
    "verifyWorkflowRunClaim",
    "workflowRunAuthority",
    "markWorkflowRunRunning",
];

/// Runs `method` when this module implements it (see `METHODS`); `None` otherwise.
pub fn dispatch(store: &Store, method: &str, call: &Call) -> Option<Result<Reply>> {
    let reply = match method {
        "claimWorkflowRun" => claim_by_id(store, call, ClaimOptions::default()),
        "claimWorkflowRunForInteractionValidation" => claim_by_id(
            store,
            call,
            ClaimOptions {
                allow_pending_interaction: true,
                preserve_queue_status: false,
            },
        ),
        "claimWorkflowRunForControl" => claim_by_id(
            store,
            call,
            ClaimOptions {
                allow_pending_interaction: true,
                preserve_queue_status: true,
            },
        ),
        "claimNextWorkflowRun" => claim_next(store, call),
        "renewWorkflowRunClaim" => renew(store, call),
        "verifyWorkflowRunClaim" => verify(store, call),
        "workflowRunAuthority" => authority(store, call),
        "markWorkflowRunRunning" => mark_running(store, call),
        _ => return None,
    };
    Some(reply)
}

/// `epoch(validTimestamp(options.now))`, read from the first argument.
pub fn options_now(call: &Call) -> Result<i64> {
    time(field(call.arg(0), "now"))
}

fn claim_by_id(store: &Store, call: &Call, options: ClaimOptions) -> Result<Reply> {
    let now = options_now(call)?;
    let args = call.arg(0);
    let claim = RunClaim {
        run_id: text(field(args, "runId"), "runId")?,
        runner_id: text(field(args, "runnerId"), "runnerId")?,
        claim_token: text(field(args, "claimToken"), "claimToken")?,
        lease_ms: int(field(args, "leaseMs"), "leaseMs")?,
    };
    Ok(Reply::maybe_text(claim_run(store, &claim, now, options)?))
}

/// The selection rules of `claimNextWorkflowRun`, in the reference's order, with their
/// parameters.
fn next_run_selection(
    store: &Store,
    args: &Value,
    runner_id: &str,
    now: i64,
) -> Result<(String, Vec<SqlValue>)> {
    let mut clauses = vec![
        "q.status IN ('queued', 'parked', 'starting', 'running')",
        "q.available_at <= ?",
        "(l.owner_id IS NULL OR l.expires_at <= ? OR l.owner_id = ?)",
        "(q.affinity_runner_id IS NULL OR q.affinity_runner_id = ? \
         OR q.status IN ('parked', 'starting', 'running'))",
        "NOT (q.status = 'parked' AND (r.status = 'waiting' OR r.paused = 1))",
        "NOT EXISTS (SELECT 1 FROM interactive_requests i \
         WHERE i.run_id = r.run_id AND i.status = 'pending')",
        "(q.error_code IS NULL OR q.error_code <> 'workflowSourceChanged')",
    ];
    let mut params = vec![
        SqlValue::Integer(now),
        SqlValue::Integer(now),
        SqlValue::Text(runner_id.into()),
        SqlValue::Text(runner_id.into()),
    ];
    if let Some(project_id) = store.project_id() {
        clauses.insert(0, "r.project_id = ?");
        params.insert(0, SqlValue::Text(project_id.into()));
    }
    // A present `sessionId` (even null) selects by origin session; only an absent one means
    // "headless or already started".
    match crate::args::prop(args, "sessionId") {
        Some(session_id) => {
            clauses.push("b.origin_session_id = ?");
            params.push(match session_id {
                Value::Null => SqlValue::Null,
                other => SqlValue::Text(text(other, "sessionId")?.into()),
            });
        }
        None => clauses.push("(b.execution_mode = 'headless' OR q.status <> 'queued')"),
    }
    let excluded = texts(field(args, "excludeRunIds"), "excludeRunIds")?;
    let exclusion;
    if !excluded.is_empty() {
        exclusion = format!("r.run_id NOT IN ({})", vec!["?"; excluded.len()].join(", "));
        clauses.push(&exclusion);
        params.extend(excluded.iter().map(|id| SqlValue::Text((*id).into())));
    }
    let sql = format!(
        "{RUN_SELECT} WHERE {} ORDER BY q.available_at, q.created_at LIMIT 1",
        clauses.join(" AND ")
    );
    Ok((sql, params))
}

/// Picks the next claimable run (outside a transaction, as the reference does), then claims it.
fn claim_next(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = call.arg(0);
    let runner_id = text(field(args, "runnerId"), "runnerId")?;
    let (sql, params) = next_run_selection(store, args, runner_id, now)?;
    let run_id: Option<String> = store
        .conn()?
        .prepare(&sql)?
        .query_row(params_from_iter(params), |row| row.get(0))
        .optional()?;
    let Some(run_id) = run_id else {
        return Ok(Reply::undefined());
    };
    let claim = RunClaim {
        run_id: &run_id,
        runner_id,
        claim_token: text(field(args, "claimToken"), "claimToken")?,
        lease_ms: int(field(args, "leaseMs"), "leaseMs")?,
    };
    Ok(Reply::maybe_text(claim_run(
        store,
        &claim,
        now,
        ClaimOptions::default(),
    )?))
}

/// Extends an unexpired exact claim; a renewal is a presentation change (summary, replay).
fn renew(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = call.arg(0);
    let run_id = text(field(args, "runId"), "runId")?;
    let claim_token = text(field(args, "claimToken"), "claimToken")?;
    let lease_ms = int(field(args, "leaseMs"), "leaseMs")?;
    let renewed = store.write(|conn| {
        let Some(row) = workflow_run_row(conn, run_id)? else {
            return Ok(false);
        };
        let Some(owner_id) = row.owner_id.as_deref() else {
            return Ok(false);
        };
        let lease = row.lease();
        let expires_at = stored_expiry(now, lease_ms)?;
        let changed = conn
            .prepare_cached(
                "UPDATE leases SET heartbeat_at = ?, expires_at = ?
                 WHERE resource_id = ? AND owner_type = ? AND owner_id = ?
                   AND token_hash = ? AND generation = ? AND expires_at > ?",
            )?
            .execute(params![
                now,
                expires_at,
                row.resource_id,
                lease.owner_type,
                owner_id,
                &token_hash(claim_token)[..],
                lease.generation,
                now
            ])?;
        if changed != 1 {
            return Ok(false);
        }
        record_viewer_deltas(conn, run_id, SUMMARY_REPLAY, now)?;
        Ok(true)
    })?;
    Ok(Reply::value(renewed))
}

/// `now + leaseMs` as the `leases.expires_at` integer; a sum beyond SQLite's integers fails as
/// the reference's double fails in the STRICT column (never wraps around).
fn stored_expiry(now: i64, lease_ms: i64) -> Result<i64> {
    now.checked_add(lease_ms).ok_or_else(|| StoreError::Sqlite {
        code: "SQLITE_CONSTRAINT_DATATYPE".into(),
        message: "cannot store REAL value in INTEGER column leases.expires_at".into(),
    })
}

/// The expiry of a new claim. The claim's record formats it with `toISOString()` inside the
/// reference's transaction, so one outside JavaScript's date range is a `RangeError` and
/// nothing is claimed.
fn lease_expires_at(now: i64, lease_ms: i64) -> Result<i64> {
    let expires_at = stored_expiry(now, lease_ms)?;
    js_iso(expires_at as f64)?;
    Ok(expires_at)
}

/// Whether `claim_token` is the run's current, unexpired claim at `now`.
pub fn holds_live_claim(
    conn: &Connection,
    run_id: &str,
    claim_token: &str,
    now: i64,
) -> Result<bool> {
    Ok(live_claim_row(conn, run_id, claim_token, now)?.is_some())
}

/// The run's row when `claim_token` is its current, unexpired claim at `now`; `None` otherwise
/// (a missing run included).
pub fn live_claim_row(
    conn: &Connection,
    run_id: &str,
    claim_token: &str,
    now: i64,
) -> Result<Option<RunRow>> {
    Ok(workflow_run_row(conn, run_id)?.filter(|row| row.holds_live_claim(claim_token, now)))
}

fn verify(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = call.arg(0);
    let run_id = text(field(args, "runId"), "runId")?;
    let claim_token = text(field(args, "claimToken"), "claimToken")?;
    Ok(Reply::value(holds_live_claim(
        store.conn()?,
        run_id,
        claim_token,
        now,
    )?))
}

/// The fencing authority of a claim token (expired or not); `leaseMs` is always 30 s.
fn authority(store: &Store, call: &Call) -> Result<Reply> {
    let run_id = text(call.arg(0), "runId")?;
    let claim_token = text(call.arg(1), "claimToken")?;
    let conn = store.conn()?;
    let Some(row) = workflow_run_row(conn, run_id)? else {
        return Ok(Reply::undefined());
    };
    let (Some(owner_id), Some(_)) = (row.owner_id.as_deref(), row.claim_expires_at) else {
        return Ok(Reply::undefined());
    };
    if !row.lease().token_matches(&token_hash(claim_token)) {
        return Ok(Reply::undefined());
    }
    let owner_type = runner_owner_type(owner_id);
    Ok(Reply::value(json!({
        "actor": { "type": owner_type, "id": owner_id },
        "ownerType": owner_type,
        "ownerId": owner_id,
        "token": claim_token,
        "generation": row.lease_generation,
        "leaseMs": 30_000,
    })))
}

fn mark_running(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = call.arg(0);
    let run_id = text(field(args, "runId"), "runId")?;
    let claim_token = text(field(args, "claimToken"), "claimToken")?;
    Ok(Reply::value(update_claimed_run_status(
        store,
        run_id,
        claim_token,
        "running",
        now,
    )?))
}

/// Sets the queue status under a live claim (the lease is kept), recording `run.queue_<status>`.
pub fn update_claimed_run_status(
    store: &Store,
    run_id: &str,
    claim_token: &str,
    status: &str,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        let Some(row) = live_claim_row(conn, run_id, claim_token, now)? else {
            return Ok(false);
        };
        let changed = conn
            .prepare_cached(
                "UPDATE run_queue SET status = ?, started_at = COALESCE(started_at, ?),
                        updated_at = ? WHERE run_id = ?",
            )?
            .execute(params![status, now, now, run_id])?;
        if changed != 1 {
            return Ok(false);
        }
        // The lease is as the claim check read it: only the queue row changed since.
        let lease = row.lease();
        let revision = bump_resource_revision(conn, &row.resource_id, now)?;
        insert_lease_holder_event(
            conn,
            &row,
            revision,
            &format!("run.queue_{status}"),
            &lease,
            &json!({ "status": status }),
            now,
        )?;
        Ok(true)
    })
}

/// A run event attributed to the lease holder read before the change: actor
/// `lease.ownerType ?? "system"`, generation `lease.generation || undefined`.
pub fn insert_lease_holder_event(
    conn: &Connection,
    row: &RunRow,
    revision: i64,
    event_type: &str,
    lease: &Lease,
    payload: &Value,
    now: i64,
) -> Result<()> {
    insert_event(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision,
            event_type,
            actor_type: lease.owner_type.as_deref().unwrap_or("system"),
            actor_id: lease.owner_id.as_deref(),
            payload: &canonical(payload),
            now,
            lease_generation: lease.event_generation(),
        },
    )?;
    Ok(())
}

/// Clears the lease when `claim_token` still holds it at `generation` and is unexpired at `now`;
/// false when it did not.
pub fn release_live_lease(
    conn: &Connection,
    resource_id: &str,
    claim_token: &str,
    generation: i64,
    now: i64,
) -> Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE leases
             SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                 acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
             WHERE resource_id = ? AND token_hash = ? AND generation = ? AND expires_at > ?",
        )?
        .execute(params![
            resource_id,
            &token_hash(claim_token)[..],
            generation,
            now
        ])?;
    Ok(changed == 1)
}

/// `Workflow run <id> <what>`: an internal-consistency failure the reference throws.
pub fn inconsistent(run_id: &str, what: &str) -> StoreError {
    StoreError::plain(format!("Workflow run {run_id} {what}"))
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

/// Whether the run has an `interactive_requests` row in `pending`.
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
) -> Result<Option<String>> {
    store.write(|conn| claim_run_in_transaction(conn, claim, now, options))
}

/// Who claims a run, with which token, for how long.
#[derive(Debug, Clone, Copy)]
pub struct RunClaim<'a> {
    /// The run to claim.
    pub run_id: &'a str,
    /// The claimant; `host-…` runners get owner type `host`, others `session`.
    pub runner_id: &'a str,
    /// The caller's token; only its SHA-256 is stored.
    pub claim_token: &'a str,
    /// Lease duration from `now`.
    pub lease_ms: i64,
}

/// Claims the run for `runner_id` unless it is terminal, has a pending interaction (unless
/// allowed), or another owner's lease is live. Returns the run record with `claimToken`.
pub fn claim_run_in_transaction(
    conn: &Connection,
    claim: &RunClaim<'_>,
    now: i64,
    options: ClaimOptions,
) -> Result<Option<String>> {
    let Some(row) = nonterminal_run_row(conn, claim.run_id)? else {
        return Ok(None);
    };
    if !options.allow_pending_interaction && has_pending_interaction(conn, claim.run_id)? {
        return Ok(None);
    }
    let lease = row.lease();
    let held_by_other = lease
        .owner_id
        .as_deref()
        .is_some_and(|owner| owner != claim.runner_id)
        && lease.expires_at.is_some_and(|expires| expires > now);
    if held_by_other {
        return Ok(None);
    }
    let generation = lease.generation + 1;
    let expires_at = lease_expires_at(now, claim.lease_ms)?;
    let owner_type = runner_owner_type(claim.runner_id);
    let token_hash = token_hash(claim.claim_token);
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
            &token_hash[..],
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
    let revision = bump_resource_revision(conn, &row.resource_id, now)?;
    insert_event(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision,
            event_type: "lease.claimed",
            actor_type: owner_type,
            actor_id: Some(claim.runner_id),
            payload: &canonical(&json!({ "expiresAt": expires_at })),
            now,
            lease_generation: Some(generation),
        },
    )?;
    let claimed = RunRow {
        lease_generation: generation,
        owner_type: Some(owner_type.to_owned()),
        owner_id: Some(claim.runner_id.to_owned()),
        token_hash: Some(token_hash.to_vec()),
        claim_expires_at: Some(expires_at),
        ..row
    };
    let claimed = if options.preserve_queue_status {
        claimed
    } else {
        RunRow {
            status: "starting".to_owned(),
            error_code: None,
            error_hash: None,
            updated_at: now,
            ..claimed
        }
    };
    Ok(Some(map_workflow_run_with(
        &mut JsonReads::new(conn),
        &claimed,
        Some(claim.claim_token),
    )?))
}
