//! Run state transitions: parking, pausing and resuming, the recovery parks (source change,
//! ambiguous effect), the terminal transitions (complete, fail, cancel — with the cancellation
//! of a run's dependents), deletion and the origin-session binding.

use crate::sql::{params, params_from_iter, Db};
use serde_json::{json, Value};

use super::claims::{
    has_pending_interaction, inconsistent, live_claim_of, live_claim_row_of, options_now,
    release_live_lease, run_holder,
};
use super::row::{run_row_of, RunRow};
use crate::controller::rows::put_caller_text;
use crate::error::{Result, StoreError};
use crate::js::{
    bind_params, canonical_literal, message_error, params_for, token_hash_js, Bound, Js, Param,
};
use crate::state::blobs::{put_json, put_text, BlobHash};
use crate::state::ids::random_uuid;
use crate::state::json::canonical;
use crate::state::leases::{self, Actor, Fence, Holder, HolderKind};
use crate::state::revisions::{
    advance_resource_revision, bump_resource, bump_resource_revision, insert_event_params,
    resource_revision, EventBase, Payload,
};
use crate::state::viewer::{
    record_bump_and_viewer_deltas, record_run_resource_deltas, record_viewer_deltas, SUMMARY_REPLAY,
};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// The `events` row and viewer deltas every transition ends with: bump, the event attributed
/// to `actor`, then the explicit summary/replay deltas of `viewer_run_id` (the row's id, or
/// the `options.runId` the reference reads again for them: [`run_id_read_again`]).
fn record_transition(
    conn: &Db,
    row: &RunRow,
    event: (&str, &Value),
    actor: Actor<'_>,
    now: i64,
    viewer_run_id: &str,
) -> Result<()> {
    let revision = advance_resource_revision(conn, &row.resource_id, now)?;
    let payload = canonical(event.1);
    let insert_event = || {
        let event = (row.resource_id.as_str(), revision, event.0);
        leases::insert_attributed_event_of(conn, event, actor, &payload, now, Payload::Repeated)
            .map(drop)
    };
    // The bump's viewer revision is of the row's run (`runs.resource_id` is unique).
    if viewer_run_id == row.run_id
        && record_bump_and_viewer_deltas(conn, &row.run_id, SUMMARY_REPLAY, now, insert_event)?
            .is_some()
    {
        return Ok(());
    }
    record_run_resource_deltas(conn, &row.resource_id, now)?;
    insert_event()?;
    record_viewer_deltas(conn, viewer_run_id, SUMMARY_REPLAY, now)?;
    Ok(())
}

/// The run id the reference passes on where it reads `options.runId` again (its viewer deltas,
/// its dependents): the caller's string; a value that is not one found the row by SQLite's
/// conversion, so the row's id stands for it.
fn run_id_read_again<'a>(value: Js<'a>, row_run_id: &'a str) -> &'a str {
    value.as_str().unwrap_or(row_run_id)
}

pub fn release_by_call(store: &Store, call: &Call, status: &str) -> Result<bool> {
    // `releaseRunClaim(options.runId, options.claimToken, status, options.now)`: the reads in
    // argument order.
    let options = Js::arg(call, 0);
    let run_id = options.get("runId")?;
    let claim_token = options.get("claimToken")?;
    let now = options_now(call)?;
    release_run_claim(store, run_id, claim_token, status, now)
}

/// Sets the queue status (`parked`, or `done` with `finished_at`) and releases the caller's live
/// claim. The caller's values are bound and hashed as the reference does (`workflowRunRow`,
/// then `verifyWorkflowRunClaim`).
fn release_run_claim(
    store: &Store,
    run_id: Js<'_>,
    claim_token: Js<'_>,
    status: &str,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        // `verifyWorkflowRunClaim` reads the row `workflowRunRow` has just read, by the same
        // bound value, in the same transaction: the one read answers both.
        let Some(row) = run_row_of(conn, run_id)? else {
            return Ok(false);
        };
        let Some(row) = live_claim_of(row, claim_token, now)? else {
            return Ok(false);
        };
        let token_hash = token_hash_js(claim_token)?;
        let finished_at = (status == "done").then_some(now);
        conn.prepare_cached(
            "UPDATE run_queue SET status = ?, updated_at = ?, finished_at = ? WHERE run_id = ?",
        )?
        .execute(params![status, now, finished_at, row.run_id])?;
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
        let event_type = format!("run.queue_{status}");
        record_transition(
            conn,
            &row,
            (&event_type, &json!({ "status": status })),
            Actor::Holder(&lease),
            now,
            &row.run_id,
        )?;
        Ok(true)
    })
}

/// Pauses a parked, ownerless run that waits on a pending interaction (idempotent).
pub fn pause_parked(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    store.write(|conn| {
        // `options.runId` is read inside the reference's transaction.
        let run_id = Js::arg(call, 0).get_or_undefined("runId")?;
        let Some(row) = run_row_of(conn, run_id)? else {
            return Ok(false);
        };
        let run_id = row.run_id.as_str();
        if row.status != "parked" {
            return Ok(false);
        }
        let lease = row.lease();
        if lease.is_live(now) || !has_pending_interaction(conn, run_id)? {
            return Ok(false);
        }
        if row.paused == 1 {
            return Ok(true);
        }
        if !matches!(row.run_status.as_str(), "running" | "waiting") {
            return Ok(false);
        }
        let changed = conn
            .prepare_cached(
                "UPDATE runs SET paused = 1, status_detail = 'paused', updated_at = ?
                 WHERE run_id = ? AND paused = 0 AND status IN ('running', 'waiting')",
            )?
            .execute(params![now, run_id])?;
        if changed != 1 {
            return Ok(false);
        }
        record_transition(
            conn,
            &row,
            ("run.paused", &json!({ "status": "parked" })),
            Actor::Control(None),
            now,
            &row.run_id,
        )?;
        Ok(true)
    })
}

/// Lifts the pause of a parked, waiting, ownerless run that still has a pending interaction.
pub fn resume_paused(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    store.write(|conn| {
        // `options.runId` is read inside the reference's transaction.
        let run_id = Js::arg(call, 0).get_or_undefined("runId")?;
        let Some(row) = run_row_of(conn, run_id)? else {
            return Ok(false);
        };
        let run_id = row.run_id.as_str();
        if row.status != "parked" || row.run_status != "waiting" || row.paused != 1 {
            return Ok(false);
        }
        let lease = row.lease();
        if lease.is_live(now) || !has_pending_interaction(conn, run_id)? {
            return Ok(false);
        }
        let changed = conn
            .prepare_cached(
                "UPDATE runs
                 SET paused = 0, status_detail = 'waiting for origin-session input', updated_at = ?
                 WHERE run_id = ? AND status = 'waiting' AND paused = 1",
            )?
            .execute(params![now, run_id])?;
        if changed != 1 {
            return Ok(false);
        }
        record_transition(
            conn,
            &row,
            ("run.resumed", &json!({ "status": "waiting" })),
            Actor::Control(None),
            now,
            &row.run_id,
        )?;
        Ok(true)
    })
}

/// The first 8,192 UTF-16 code units, as `String.prototype.slice(0, 8192)` gives them (a split
/// surrogate pair leaves a lone surrogate, which becomes U+FFFD when stored as UTF-8).
fn truncate_detail(detail: &str) -> String {
    const LIMIT: usize = 8_192;
    if detail.len() <= LIMIT {
        return detail.to_owned();
    }
    let units: Vec<u16> = detail.encode_utf16().take(LIMIT).collect();
    String::from_utf16_lossy(&units)
}

/// `options.detail.slice(0, 8_192)`, read where the reference reads it: a string is cut here;
/// any other receiver with a `slice` method (an array, a boxed string, a byte view, a string
/// with lone surrogates) is sliced by JavaScript itself, and what it returns is what the
/// reference stores and binds.
fn sliced_detail<'a>(call: &'a Call, options: Js<'a>, cut: &'a mut String) -> Result<Js<'a>> {
    match options.get("detail")?.method("options.detail", "slice")? {
        Js::String(text) => {
            *cut = truncate_detail(text);
            Ok(Js::String(cut.as_str()))
        }
        other => match call.cx() {
            Some(cx) => cx.invoke(other, "slice", &[Js::Number(0.0), Js::Number(8_192.0)]),
            None => Err(StoreError::Type(
                "options.detail.slice is not a function".into(),
            )),
        },
    }
}

/// `this.workflowRunRow(options.runId)`, then `verifyWorkflowRunClaim({ runId: options.runId,
/// claimToken: options.claimToken, now })`: the live claim's row, read inside the
/// transaction with the reference's reads of the caller's fields (the run id twice); `None`
/// when the run is missing or the claim is not live.
fn claimed_row(conn: &Db, options: Js<'_>, now: i64) -> Result<Option<RunRow>> {
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
fn inconsistent_of(options: Js<'_>, what: &str) -> StoreError {
    match options.get("runId") {
        Ok(run_id) => inconsistent_at(run_id, what),
        Err(error) => error,
    }
}

/// `Workflow run ${runId} <what>`.
fn inconsistent_at(run_id: Js<'_>, what: &str) -> StoreError {
    message_error(&[
        Js::String("Workflow run "),
        run_id,
        Js::String(" "),
        Js::String(what),
    ])
}

/// Parks a claimed run whose workflow source changed, keeping the detail as the queue error.
pub fn park_for_source_change(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    let options = Js::arg(call, 0);
    store.write(|conn| {
        let Some(row) = claimed_row(conn, options, now)? else {
            return Ok(false);
        };
        let lease = row.lease();
        let mut cut = String::new();
        let detail = sliced_detail(call, options, &mut cut)?;
        let error_hash = put_caller_text(conn, detail, now)?;
        // The updates bind `options.runId` as they read it.
        let run = conn
            .prepare_cached(
                "UPDATE runs SET status_detail = ?, updated_at = ?, finished_at = NULL
                 WHERE run_id = ? AND status NOT IN ('completed', 'failed', 'timed_out', 'cancelled')",
            )?
            .execute(params_from_iter(bind_params(&[
                Param::Js(detail),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ])?))?;
        let queue = conn
            .prepare_cached(
                "UPDATE run_queue
                 SET status = 'parked', error_code = 'workflowSourceChanged', error_hash = ?,
                     available_at = ?, updated_at = ?, finished_at = NULL
                 WHERE run_id = ? AND status IN ('queued', 'starting', 'running', 'parked')",
            )?
            .execute(params_from_iter(bind_params(&[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ])?))?;
        if run != 1 || queue != 1 {
            return Err(inconsistent_of(options, "has inconsistent source-change state"));
        }
        let token_hash = token_hash_js(options.get("claimToken")?)?;
        if !release_live_lease(conn, &row.resource_id, &token_hash, lease.generation, now)? {
            return Err(inconsistent_of(options, "claim changed during source recovery"));
        }
        let payload = json!({ "status": "parked", "code": "workflowSourceChanged" });
        let viewed = options.get("runId")?;
        record_transition(
            conn,
            &row,
            ("run.source_changed", &payload),
            Actor::Holder(&lease),
            now,
            run_id_read_again(viewed, &row.run_id),
        )?;
        Ok(true)
    })
}

const AMBIGUOUS_EFFECT_DETAIL: &str = "effect outcome is ambiguous; explicit recovery is required";

/// Parks a claimed, running run whose effect outcome is unknown; its attempts wait too.
pub fn park_for_ambiguous_effect(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    let options = Js::arg(call, 0);
    store.write(|conn| {
        let Some(row) = claimed_row(conn, options, now)? else {
            return Ok(false);
        };
        let lease = row.lease();
        let error_hash = put_text(conn, AMBIGUOUS_EFFECT_DETAIL, now)?;
        // The updates bind `options.runId` as they read it, each its own read.
        conn.prepare_cached(
            "UPDATE node_attempts SET status = 'waiting', updated_at = ?
             WHERE run_id = ? AND status IN ('pending', 'running')",
        )?
        .execute(params_from_iter(bind_params(&[
            Param::int(now),
            Param::Js(options.get("runId")?),
        ])?))?;
        let run = conn
            .prepare_cached(
                "UPDATE runs SET status = 'waiting', status_detail = ?, updated_at = ?,
                        finished_at = ?
                 WHERE run_id = ? AND status = 'running'",
            )?
            .execute(params_from_iter(bind_params(&[
                Param::text(AMBIGUOUS_EFFECT_DETAIL),
                Param::int(now),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ])?))?;
        let queue = conn
            .prepare_cached(
                "UPDATE run_queue
                 SET status = 'parked', error_code = 'effectAmbiguous', error_hash = ?,
                     updated_at = ?
                 WHERE run_id = ? AND status IN ('starting', 'running', 'parked')",
            )?
            .execute(params_from_iter(bind_params(&[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ])?))?;
        if run != 1 || queue != 1 {
            return Err(inconsistent_of(
                options,
                "has inconsistent ambiguous-effect state",
            ));
        }
        let token_hash = token_hash_js(options.get("claimToken")?)?;
        if !release_live_lease(conn, &row.resource_id, &token_hash, lease.generation, now)? {
            return Err(inconsistent_of(
                options,
                "claim changed during effect recovery",
            ));
        }
        let payload = json!({ "status": "waiting", "code": "effectAmbiguous" });
        let viewed = options.get("runId")?;
        record_transition(
            conn,
            &row,
            ("run.effect_ambiguous", &payload),
            Actor::Holder(&lease),
            now,
            run_id_read_again(viewed, &row.run_id),
        )?;
        Ok(true)
    })
}

/// What a terminal transition records: the caller's `errorCode` and `errorMessage` for a
/// failure, as the reference binds and stores them.
struct Terminal<'a> {
    status: &'a str,
    code: Js<'a>,
    error: Js<'a>,
}

pub fn fail(store: &Store, call: &Call) -> Result<bool> {
    // `terminalRun(options.runId, options.claimToken, "failed", options.errorCode,
    // options.errorMessage, options.now)`: the reads in argument order.
    let options = Js::arg(call, 0);
    let run_id = options.get("runId")?;
    let claim_token = options.get("claimToken")?;
    let terminal = Terminal {
        status: "failed",
        code: options.get("errorCode")?,
        error: options.get("errorMessage")?,
    };
    let now = options_now(call)?;
    terminal_run(store, call, run_id, claim_token, &terminal, now)
}

const CANCELLED: Terminal<'static> = Terminal {
    status: "cancelled",
    code: Js::String("cancelled"),
    error: Js::String("Workflow run cancelled"),
};

/// Cancels through the claim (or an unclaimed queued/starting run); without a token, falls
/// back to the stale-claim cancellation.
pub fn cancel(store: &Store, call: &Call) -> Result<bool> {
    let options = Js::arg(call, 0);
    let run_id = options.get("runId")?;
    let claim_token = options.get("claimToken")?;
    let now = options_now(call)?;
    let cancelled = terminal_run(store, call, run_id, claim_token, &CANCELLED, now)?;
    // `options.claimToken !== undefined`, then `cancelStaleWorkflowRun({ runId: options.runId,
    // ...(options.now === undefined ? {} : { now: options.now }) })`: the fields read again
    // into an object literal, whose reads then give the same values.
    if cancelled || !options.get("claimToken")?.is_undefined() {
        return Ok(cancelled);
    }
    let run_id = options.get("runId")?;
    let now = match options.get("now")? {
        Js::Undefined => call.clock,
        _ => crate::js::timestamp(call, options.get("now")?)?,
    };
    cancel_stale(
        store,
        &|| Ok(run_id),
        Js::String("workflow-control"),
        Js::String(&random_uuid()),
        now,
    )
}

/// Ends a nonterminal run as `failed` or `cancelled`. Without a token (`undefined`) only an
/// ownerless queued or starting run qualifies; with one, the claim must be live.
fn terminal_run(
    store: &Store,
    call: &Call,
    run_id: Js<'_>,
    claim_token: Js<'_>,
    terminal: &Terminal<'_>,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        let Some(row) = run_row_of(conn, run_id)?.filter(|row| !row.is_queue_terminal()) else {
            return Ok(false);
        };
        let run_id = row.run_id.as_str();
        let lease = row.lease();
        let token_hash = if claim_token.is_undefined() {
            if !(matches!(row.status.as_str(), "queued" | "starting") && lease.owner_id.is_none()) {
                return Ok(false);
            }
            None
        } else {
            let mut presented = None;
            let live = leases::holds_unexpired(
                lease.owner_id.as_deref(),
                lease.token_hash.as_deref(),
                lease.expires_at,
                now,
                || Ok::<_, StoreError>(*presented.insert(token_hash_js(claim_token)?)),
            )?;
            if !live {
                return Ok(false);
            }
            presented
        };
        let revision = resource_revision(conn, &row.resource_id)?;
        let error_hash = put_caller_text(conn, terminal.error, now)?;
        let mut update = conn.prepare_cached(
            "UPDATE run_queue
             SET status = ?, error_code = ?, error_hash = ?, updated_at = ?, finished_at = ?
             WHERE run_id = ? AND status NOT IN ('done', 'failed', 'cancelled')",
        )?;
        let code = crate::js::bind_all(&[terminal.code], 1)?;
        let queue = update.execute(params![
            terminal.status,
            code[0],
            &error_hash[..],
            now,
            now,
            run_id
        ])?;
        if queue != 1 {
            return Ok(false);
        }
        if let Some(token_hash) = token_hash {
            if !release_live_lease(conn, &row.resource_id, &token_hash, lease.generation, now)? {
                return Err(inconsistent(
                    run_id,
                    "claim changed during terminal transition",
                ));
            }
        }
        conn.prepare_cached(
            "UPDATE runs
             SET status = ?, paused = 0, status_detail = NULL, error_hash = ?,
                 updated_at = ?, finished_at = ?
             WHERE run_id = ?",
        )?
        .execute(params![terminal.status, &error_hash[..], now, now, run_id])?;
        if terminal.status == "cancelled" {
            let actor_id = lease.owner_id.as_deref().unwrap_or("workflow-control");
            cancel_dependents(conn, run_id, actor_id.as_bytes(), &error_hash, now)?;
        }
        bump_resource(conn, &row.resource_id, revision, now)?;
        let event_type = format!("run.queue_{}", terminal.status);
        let payload = canonical_literal(
            call,
            &[
                ("status", Js::String(terminal.status)),
                ("code", terminal.code),
                ("error", terminal.error),
            ],
        )?;
        leases::insert_attributed_event(
            conn,
            &row.resource_id,
            revision + 1,
            &event_type,
            Actor::Holder(&lease),
            &payload,
            now,
        )?;
        record_viewer_deltas(conn, run_id, SUMMARY_REPLAY, now)?;
        Ok(true)
    })
}

/// A run-scoped effect still pending or applying when its run is cancelled.
struct OpenEffect {
    effect_id: String,
    resource_id: String,
    status: String,
    attempt_count: i64,
}

fn open_run_effects(conn: &Db, run_id: &str) -> Result<Vec<OpenEffect>> {
    let effects = conn
        .prepare_cached(
            "SELECT e.effect_id, e.resource_id, e.status, e.attempt_count
             FROM effects e JOIN runs r ON r.resource_id = e.source_resource_id
             WHERE r.run_id = ? AND e.owner_scope = 'run' AND e.status IN ('pending', 'applying')
             ORDER BY e.effect_id",
        )?
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
fn cancel_dependents(
    conn: &Db,
    run_id: &str,
    actor_id: &[u8],
    error_hash: &BlobHash,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE node_attempts
         SET status = 'cancelled', error_hash = COALESCE(error_hash, ?),
             updated_at = ?, finished_at = COALESCE(finished_at, ?)
         WHERE run_id = ? AND status IN ('pending', 'running', 'waiting', 'interrupted')",
    )?
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
    conn.prepare_cached(
        "UPDATE interactive_requests
         SET status = 'cancelled', revision = revision + 1, updated_at = ?
         WHERE run_id = ? AND status = 'pending'",
    )?
    .execute(params![now, run_id])?;
    Ok(())
}

pub fn cancel_stale_by_call(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    let options = Js::arg(call, 0);
    let control_id = options
        .get_or_undefined("controlId")?
        .or(Js::String("workflow-control"));
    let uuid;
    let claim_token = match options.get_or_undefined("claimToken")? {
        token if token.is_nullish() => {
            uuid = random_uuid();
            Js::String(&uuid)
        }
        token => token,
    };
    cancel_stale(
        store,
        &|| options.get_or_undefined("runId"),
        control_id,
        claim_token,
        now,
    )
}

/// Cancels a nonterminal run whose claim is absent or expired, under a short system lease
/// taken (and released) for the purpose. `controlId` and the token are the caller's values,
/// bound and hashed as the reference does; `run_id` reads the run id each time the reference
/// reads `options.runId` (the lookup, then each update that binds it).
fn cancel_stale<'a>(
    store: &Store,
    run_id: &dyn Fn() -> Result<Js<'a>>,
    control_id: Js<'_>,
    claim_token: Js<'_>,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        let Some(row) = run_row_of(conn, run_id()?)?.filter(|row| !row.is_queue_terminal()) else {
            return Ok(false);
        };
        let run_id_again = run_id;
        let run_id = row.run_id.as_str();
        let lease = row.lease();
        if lease.is_live(now) {
            return Ok(false);
        }
        let generation = lease.generation + 1;
        let hash = token_hash_js(claim_token)?;
        let owner = crate::js::bind_all(&[control_id], 1)?;
        let system = Holder {
            kind: HolderKind::System,
            owner_id: Param::Own(owner[0].clone()),
            token_hash: &hash,
        };
        let expires = Param::int(now + 30_000);
        if !leases::take(conn, &row.resource_id, &system, lease.generation, expires, now)? {
            return Ok(false);
        }
        // The owner id as SQLite stored it (a number becomes its text, '5.0'; lone surrogates
        // stay WTF-8), for the statements and the event that bind controlId again.
        let stored_owner = leases::stored_owner_id(conn, &row.resource_id)?.unwrap_or_default();
        let control_id = stored_owner.as_slice();
        let error_hash = put_text(conn, "Workflow run cancelled", now)?;
        let queue = conn
            .prepare_cached(
                "UPDATE run_queue
                 SET status = 'cancelled', error_code = 'cancelled', error_hash = ?,
                     updated_at = ?, finished_at = ?
                 WHERE run_id = ? AND status NOT IN ('done', 'failed', 'cancelled')",
            )?
            .execute(params_from_iter(bind_params(&[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::int(now),
                Param::Js(run_id_again()?),
            ])?))?;
        if queue != 1 {
            return Err(inconsistent_at(run_id_again()?, "has inconsistent queue state"));
        }
        let run = conn
            .prepare_cached(
                "UPDATE runs
                 SET status = 'cancelled', paused = 0, status_detail = NULL, error_hash = ?,
                     updated_at = ?, finished_at = ?
                 WHERE run_id = ? AND status NOT IN ('completed', 'failed', 'timed_out', 'cancelled')",
            )?
            .execute(params_from_iter(bind_params(&[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::int(now),
                Param::Js(run_id_again()?),
            ])?))?;
        if run != 1 {
            return Err(inconsistent_at(run_id_again()?, "has inconsistent durable state"));
        }
        // `cancelWorkflowRunDependents(options.runId, …)` and, last, `recordViewerDeltas(…,
        // options.runId, …)`: two more reads.
        let dependents_of = run_id_again()?;
        cancel_dependents(
            conn,
            run_id_read_again(dependents_of, run_id),
            control_id,
            &error_hash,
            now,
        )?;
        let system = Holder {
            owner_id: Param::Own(Bound::Text(control_id.into())),
            ..system
        };
        let fence = Fence::LiveSystemOwner;
        let generation_param = Param::int(generation);
        if !leases::release(conn, &row.resource_id, &system, generation_param, fence, now)? {
            return Err(inconsistent_at(
                run_id_again()?,
                "control claim changed during cancellation",
            ));
        }
        let revision = bump_resource_revision(conn, &row.resource_id, now)?;
        let payload = json!({ "status": "cancelled", "code": "cancelled", "staleControl": true });
        let event = EventBase {
            resource_id: &row.resource_id,
            revision,
            actor_type: "control",
            payload: &canonical(&payload),
            now,
        };
        insert_event_params(
            conn,
            &event,
            [
                Param::text("run.queue_cancelled"),
                Param::Own(Bound::Text(control_id.into())),
                Param::int(generation),
            ],
            Payload::Repeated,
        )?;
        let viewed = run_id_again()?;
        record_viewer_deltas(conn, run_id_read_again(viewed, run_id), SUMMARY_REPLAY, now)?;
        Ok(true)
    })
}

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
        let live = leases::holds_unexpired(
            row.owner_id.as_deref(),
            row.token_hash.as_deref(),
            row.claim_expires_at,
            now,
            || token_hash_js(options.get_or_undefined("claimToken")?),
        )?;
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

// The method table's rows (`crate::methods`): each reads the call's arguments and answers it.

/// `parkWorkflowRun` (a row of the method table).
pub fn park_workflow_run(store: &Store, call: &Call) -> Result<Reply> {
    release_by_call(store, call, "parked").map(Reply::value)
}

/// `pauseParkedWorkflowRun` (a row of the method table).
pub fn pause_parked_call(store: &Store, call: &Call) -> Result<Reply> {
    pause_parked(store, call).map(Reply::value)
}

/// `resumePausedInteraction` (a row of the method table).
pub fn resume_paused_call(store: &Store, call: &Call) -> Result<Reply> {
    resume_paused(store, call).map(Reply::value)
}

/// `parkWorkflowRunForSourceChange` (a row of the method table).
pub fn park_for_source_change_call(store: &Store, call: &Call) -> Result<Reply> {
    park_for_source_change(store, call).map(Reply::value)
}

/// `parkWorkflowRunForAmbiguousEffect` (a row of the method table).
pub fn park_for_ambiguous_effect_call(store: &Store, call: &Call) -> Result<Reply> {
    park_for_ambiguous_effect(store, call).map(Reply::value)
}

/// `failWorkflowRun` (a row of the method table).
pub fn fail_call(store: &Store, call: &Call) -> Result<Reply> {
    fail(store, call).map(Reply::value)
}

/// `cancelWorkflowRun` (a row of the method table).
pub fn cancel_call(store: &Store, call: &Call) -> Result<Reply> {
    cancel(store, call).map(Reply::value)
}

/// `cancelStaleWorkflowRun` (a row of the method table).
pub fn cancel_stale_call(store: &Store, call: &Call) -> Result<Reply> {
    cancel_stale_by_call(store, call).map(Reply::value)
}

/// `deleteWorkflowRun` (a row of the method table).
pub fn delete_call(store: &Store, call: &Call) -> Result<Reply> {
    delete(store, call).map(Reply::value)
}

/// `completeWorkflowRun` (a row of the method table).
pub fn complete_workflow_run(store: &Store, call: &Call) -> Result<Reply> {
    release_by_call(store, call, "done").map(Reply::value)
}

/// `setWorkflowRunOriginSession` (a row of the method table).
pub fn set_origin_session_call(store: &Store, call: &Call) -> Result<Reply> {
    set_origin_session(store, call).map(Reply::value)
}

#[cfg(test)]
mod tests {
    use super::truncate_detail;

    #[test]
    fn truncates_by_utf16_code_units() {
        assert_eq!(truncate_detail("short"), "short");
        let ascii = "a".repeat(9_000);
        assert_eq!(truncate_detail(&ascii).len(), 8_192);
        // 8,191 units, then an astral character split in half: the lone surrogate is replaced.
        let split = format!("{}{}", "a".repeat(8_191), "😀");
        assert_eq!(
            truncate_detail(&split),
            format!("{}\u{FFFD}", "a".repeat(8_191))
        );
        let wide = "é".repeat(8_192);
        assert_eq!(truncate_detail(&wide), wide);
    }
}
