//! Terminal moves: the claimant fails or cancels a run (`FAIL`, `CANCEL`; an ownerless queued
//! or starting run without a token), and the control plane cancels one whose claim is absent
//! or expired (`CANCEL_STALE`); a cancellation ends the run's dependents with it.

use crate::sql::params;
use serde_json::json;

use super::checks::{
    inconsistent, inconsistent_at, options_now, release_live_lease, run_id_read_again,
};
use super::machine::dependents::cancel_dependents;
use super::machine::moves::{Move, Table, CANCEL, CANCEL_STALE, FAIL};
use super::machine::status::{QueueStatus, RunStatus};
use super::row::run_row_of;
use crate::controller::rows::put_caller_text;
use crate::error::{Result, StoreError};
use crate::js::{canonical_literal, token_hash_js, Bound, Js, Param};
use crate::state::blobs::put_text;
use crate::state::ids::random_uuid;
use crate::state::json::canonical;
use crate::state::leases::{self, Actor, Fence, Holder, HolderKind};
use crate::state::revisions::{bump_resource, bump_resource_revision, resource_revision, Payload};
use crate::state::viewer::{record_viewer_deltas, SUMMARY_REPLAY};
use crate::store::Store;
use crate::wire::Call;

/// What a terminal transition records: the caller's `errorCode` and `errorMessage` for a
/// failure, as the reference binds and stores them.
struct Terminal<'a> {
    mv: &'static Move,
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
        mv: &FAIL,
        code: options.get("errorCode")?,
        error: options.get("errorMessage")?,
    };
    let now = options_now(call)?;
    terminal_run(store, call, run_id, claim_token, &terminal, now)
}

const CANCELLED: Terminal<'static> = Terminal {
    mv: &CANCEL,
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
            let ownerless_start = matches!(
                row.queue_status(),
                Some(QueueStatus::Queued | QueueStatus::Starting)
            );
            if !(ownerless_start && lease.owner_id.is_none()) {
                return Ok(false);
            }
            None
        } else {
            let mut presented = None;
            let live = lease.claim().holds_unexpired(now, || {
                Ok::<_, StoreError>(*presented.insert(token_hash_js(claim_token)?))
            })?;
            if !live {
                return Ok(false);
            }
            presented
        };
        let revision = resource_revision(conn, &row.resource_id)?;
        let error_hash = put_caller_text(conn, terminal.error, now)?;
        let mv = terminal.mv;
        let code = crate::js::bind_all(&[terminal.code], 1)?;
        let queue = mv.apply(
            conn,
            Table::Queue,
            params![code[0], &error_hash[..], now, now, run_id],
        )?;
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
        mv.apply(conn, Table::Run, params![&error_hash[..], now, now, run_id])?;
        let status = mv.run.map_or(RunStatus::Failed, |(_, to)| to);
        if status == RunStatus::Cancelled {
            let actor_id = lease.owner_id.as_deref().unwrap_or("workflow-control");
            cancel_dependents(conn, run_id, actor_id.as_bytes(), &error_hash, now)?;
        }
        bump_resource(conn, &row.resource_id, revision, now)?;
        let payload = canonical_literal(
            call,
            &[
                ("status", Js::String(status.as_str())),
                ("code", terminal.code),
                ("error", terminal.error),
            ],
        )?;
        leases::insert_attributed_event(
            conn,
            &row.resource_id,
            revision + 1,
            mv.event,
            Actor::Holder(&lease),
            &payload,
            now,
        )?;
        record_viewer_deltas(conn, run_id, SUMMARY_REPLAY, now)?;
        Ok(true)
    })
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
        let expires = Param::int(leases::system_lease_expiry(now));
        if !leases::take(
            conn,
            &row.resource_id,
            &system,
            lease.generation,
            expires,
            now,
        )? {
            return Ok(false);
        }
        // The owner id as SQLite stored it (a number becomes its text, '5.0'; lone surrogates
        // stay WTF-8), for the statements and the event that bind controlId again.
        let stored_owner = leases::stored_owner_id(conn, &row.resource_id)?.unwrap_or_default();
        let control_id = stored_owner.as_slice();
        let error_hash = put_text(conn, "Workflow run cancelled", now)?;
        let queue = CANCEL_STALE.apply_bound(
            conn,
            Table::Queue,
            &[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::int(now),
                Param::Js(run_id_again()?),
            ],
        )?;
        if queue != 1 {
            return Err(inconsistent_at(
                run_id_again()?,
                "has inconsistent queue state",
            ));
        }
        let run = CANCEL_STALE.apply_bound(
            conn,
            Table::Run,
            &[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::int(now),
                Param::Js(run_id_again()?),
            ],
        )?;
        if run != 1 {
            return Err(inconsistent_at(
                run_id_again()?,
                "has inconsistent durable state",
            ));
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
        if !leases::release(
            conn,
            &row.resource_id,
            &system,
            generation_param,
            fence,
            now,
        )? {
            return Err(inconsistent_at(
                run_id_again()?,
                "control claim changed during cancellation",
            ));
        }
        let revision = bump_resource_revision(conn, &row.resource_id, now)?;
        let payload = json!({ "status": "cancelled", "code": "cancelled", "staleControl": true });
        let actor = Actor::ControlLease {
            control_id,
            generation,
        };
        let event = (row.resource_id.as_str(), revision, CANCEL_STALE.event);
        let payload = canonical(&payload);
        leases::insert_attributed_event_of(conn, event, actor, &payload, now, Payload::Repeated)?;
        let viewed = run_id_again()?;
        record_viewer_deltas(conn, run_id_read_again(viewed, run_id), SUMMARY_REPLAY, now)?;
        Ok(true)
    })
}
