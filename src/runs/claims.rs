//! The run claim methods: claiming by id (the take itself is [`super::take`]) and the next
//! claimable run (its selection rules, answered from the run index's candidates where it can),
//! renewing, verifying, the fencing authority, and the claim-guarded `MARK_RUNNING` move.

use crate::sql::{params, params_from_iter, OptionalExtension};
use serde_json::{json, Value};

use super::checks::{live_claim_of, live_claim_row_of, options_now, runner_owner_type};
use super::machine::moves::{Move, Table, MARK_RUNNING};
use super::machine::status::status_sql;
use super::row::{rowid_list, run_row_of, run_row_with_revisions_of, RUN_SELECT};
use super::take::{claim_run, ClaimOptions, RunClaim};
use crate::error::Result;
use crate::js::{greater_than, lease_sum, params_for, token_hash_js, Js, Param, Spread};
use crate::state::json::canonical;
use crate::state::leases::{self, bound_text, Actor, Holder, HolderKind, RUN_TAKEABLE};
use crate::state::revisions::bump_known_run_revision;
use crate::state::viewer::{record_known_viewer_deltas, SUMMARY_REPLAY};
use crate::store::{in_read_transaction, Store};
use crate::wire::{Call, Reply};

pub fn claim_by_id(store: &Store, call: &Call, options: ClaimOptions) -> Result<Reply> {
    let now = options_now(call)?;
    let args = Js::arg(call, 0);
    let claim = RunClaim {
        run_id: args.get_or_undefined("runId")?,
        runner_id: args.get_or_undefined("runnerId")?,
        claim_token: args.get_or_undefined("claimToken")?,
        lease_ms: args.get_or_undefined("leaseMs")?,
    };
    let record = claim_run(store, &claim, now, options)?;
    Ok(Reply::maybe_text(record).echo_object("claimToken", claim.claim_token))
}

/// What `claimNextWorkflowRun`'s selection reads of the caller's options, read once in the
/// reference's order: `options.runnerId` twice, `options.sessionId !== undefined` then its
/// value, `options.excludeRunIds !== undefined && .length > 0`, `.map(() => "?")` and the spread.
struct NextRunArguments<'a> {
    runner_id: Js<'a>,
    runner_again: Js<'a>,
    /// `None` when `sessionId` is undefined.
    session_id: Option<Js<'a>>,
    /// The `NOT IN (…)` marks and the spread values, when there are exclusions.
    exclusion: Option<(String, Vec<Js<'a>>)>,
}

impl<'a> NextRunArguments<'a> {
    fn read(args: Js<'a>) -> Result<NextRunArguments<'a>> {
        let runner_id = args.get_or_undefined("runnerId")?;
        let runner_again = args.get_or_undefined("runnerId")?;
        // A present `sessionId` (even null) selects by origin session.
        let session_id = match args.get_or_undefined("sessionId")? {
            Js::Undefined => None,
            _ => Some(args.get_or_undefined("sessionId")?),
        };
        let mut exclusion = None;
        if !args.get_or_undefined("excludeRunIds")?.is_undefined()
            && greater_than(args.get_or_undefined("excludeRunIds")?.get("length")?, 0.0)?
        {
            let marks = args
                .get_or_undefined("excludeRunIds")?
                .sql_marks_as("options.excludeRunIds")?;
            // A hole of a sparse list joins as "" (as `.map` leaves it) and spreads as undefined.
            if let Some((marks, _)) = marks {
                let values = args
                    .get_or_undefined("excludeRunIds")?
                    .sql_spread_as("options.excludeRunIds", Spread::Push)?;
                exclusion = Some((marks, values));
            }
        }
        Ok(NextRunArguments {
            runner_id,
            runner_again,
            session_id,
            exclusion,
        })
    }

    /// Whether the index path may add its parameter: a string runner id, no session, and
    /// every value bound before it a string (the binder's reading cannot change), one for
    /// each mark (a caller's own `map` may make more or fewer: the statement must then run,
    /// to fail binding as the reference's does).
    fn plain(&self) -> bool {
        matches!(self.runner_id, Js::String(_))
            && self.session_id.is_none()
            && self.exclusion.as_ref().is_none_or(|(marks, values)| {
                values.iter().all(|value| matches!(value, Js::String(_)))
                    && *marks == vec!["?"; values.len()].join(", ")
            })
    }
}

/// The selection rules of `claimNextWorkflowRun`, in the reference's order, with their
/// parameters. With `candidates` (a JSON array of run rowids that holds every run the rules
/// can pick, see [`claim_next`]), only those runs are read.
fn next_run_selection<'a>(
    store: &'a Store,
    read: &NextRunArguments<'a>,
    now: i64,
    candidates: Option<&'a str>,
) -> (String, Vec<Js<'a>>) {
    // `+`: with candidates, the runs are read by rowid, not from the queue's claim index.
    let (status, available) = match candidates {
        Some(_) => ("+q.status", "+q.available_at"),
        None => ("q.status", "q.available_at"),
    };
    let status_test = format!("{status} IN {}", status_sql!(queue_claimable));
    let available_test = format!("{available} <= ?");
    let mut clauses = vec![
        status_test.as_str(),
        available_test.as_str(),
        RUN_TAKEABLE,
        concat!(
            "(q.affinity_runner_id IS NULL OR q.affinity_runner_id = ? OR q.status IN ",
            status_sql!(queue_started),
            ")"
        ),
        concat!(
            "NOT (q.status = ",
            status_sql!(parked),
            " AND (r.status = ",
            status_sql!(waiting),
            " OR r.paused = 1))"
        ),
        concat!(
            "NOT EXISTS (SELECT 1 FROM interactive_requests i WHERE i.run_id = r.run_id AND i.status = ",
            status_sql!(pending),
            ")"
        ),
        "(q.error_code IS NULL OR q.error_code <> 'workflowSourceChanged')",
    ];
    let now = now as f64;
    let mut params = vec![
        Js::Number(now),
        Js::Number(now),
        read.runner_id,
        read.runner_again,
    ];
    // `+r.project_id`: without statistics the planner would drive the search from
    // `runs_project_idx` and read every run of the project; the queue's claim index (or, with a
    // session, the bindings' session index) reads only the candidates. The project-index scan
    // it replaces met equal sort keys in (`r.created_at DESC`, rowid) order and sorted stably,
    // so the ORDER BY below names that order to keep the same winner of a tie.
    let scoped = store.project_id().is_some();
    if let Some(project_id) = store.project_id() {
        clauses.insert(0, "+r.project_id = ?");
        params.insert(0, Js::String(project_id));
    }
    // Only an undefined `sessionId` means "headless or already started".
    match read.session_id {
        None => clauses.push(concat!(
            "(b.execution_mode = ",
            status_sql!(headless),
            " OR q.status <> ",
            status_sql!(queued),
            ")"
        )),
        Some(session_id) => {
            clauses.push("b.origin_session_id = ?");
            params.push(session_id);
        }
    }
    let exclusion;
    if let Some((marks, values)) = &read.exclusion {
        exclusion = format!("r.run_id NOT IN ({marks})");
        clauses.push(&exclusion);
        params.extend(values.iter().copied());
    }
    if let Some(candidates) = candidates {
        clauses.push("r.rowid IN (SELECT value FROM json_each(?))");
        params.push(Js::String(candidates));
    }
    // Unscoped, equal (available_at, created_at) met each other in the claim index's order
    // (status ascending, then the queue's rowid) and the LIMIT's sort kept the first met: read
    // by rowid, the order must be named.
    let order = match (scoped, candidates.is_some()) {
        (true, _) => ", r.created_at DESC, r.rowid",
        (false, true) => ", q.status, q.rowid",
        (false, false) => "",
    };
    let sql = format!(
        "{RUN_SELECT} WHERE {} ORDER BY q.available_at, q.created_at{order} LIMIT 1",
        clauses.join(" AND "),
    );
    (sql, params)
}

/// Picks the next claimable run (in one read, as the reference does), then claims it.
///
/// A host's poll (no `sessionId`) reads only the run index's candidates: the runs whose own
/// columns pass the rules that depend on no argument and, for a string `runnerId`, the lease
/// rule. Each such test is one of the statement's conjuncts evaluated on the same snapshot, so
/// every run the statement can pick is a candidate; the statement still decides among them.
pub fn claim_next(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = Js::arg(call, 0);
    let read = NextRunArguments::read(args)?;
    let conn = store.conn()?;
    let pick = |candidates: Option<&str>| -> Result<Option<String>> {
        let (sql, params) = next_run_selection(store, &read, now, candidates);
        let mut statement = conn.prepare_cached(&sql)?;
        let params = params_for(&statement, &params)?;
        Ok(statement
            .query_row(params_from_iter(&params), |row| row.get(0))
            .optional()?)
    };
    let run_id = if read.plain() && conn.is_autocommit() {
        in_read_transaction(conn, || {
            let index = store.state.run_index_current(conn, true)?;
            let Some(index) = index else {
                return pick(None);
            };
            let runner = match read.runner_id {
                Js::String(runner) => Some(runner),
                _ => None,
            };
            let candidates = index.host_candidates(store.project_id(), runner, now);
            drop(index);
            if candidates.is_empty() {
                // Only a candidate can be picked: running the statement would read the file's
                // pages for nothing (after another process's commit, from a cold page cache).
                return Ok(None);
            }
            pick(Some(&rowid_list(&candidates)))
        })?
    } else {
        pick(None)?
    };
    let Some(run_id) = run_id else {
        return Ok(Reply::undefined());
    };
    // `this.claimRun(row.runId, options.runnerId, …)`: the runner id read a third time.
    let claim = RunClaim {
        run_id: Js::String(&run_id),
        runner_id: args.get_or_undefined("runnerId")?,
        claim_token: args.get_or_undefined("claimToken")?,
        lease_ms: args.get_or_undefined("leaseMs")?,
    };
    let record = claim_run(store, &claim, now, ClaimOptions::default())?;
    Ok(Reply::maybe_text(record).echo_object("claimToken", claim.claim_token))
}

/// Extends an unexpired exact claim; a renewal is a presentation change (summary, replay).
pub fn renew(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = Js::arg(call, 0);
    let renewed = store.write(|conn| {
        // `this.workflowRunRow(options.runId)`: read inside the transaction, as the reference
        // reads it (a getter that calls the store sees the transaction open).
        let run_id = args.get_or_undefined("runId")?;
        let Some((row, known)) = run_row_with_revisions_of(conn, run_id)? else {
            return Ok(false);
        };
        let Some(owner_id) = row.owner_id.as_deref() else {
            return Ok(false);
        };
        let lease = row.lease();
        // The arguments of `.run(…)` in order: `now + options.leaseMs`, then the token's hash.
        let expires_at = lease_sum(now, args.get_or_undefined("leaseMs")?)?;
        let token_hash = token_hash_js(args.get_or_undefined("claimToken")?)?;
        let holder = Holder {
            kind: HolderKind::Runner(bound_text(lease.owner_type.as_deref())),
            owner_id: Param::text(owner_id),
            token_hash: &token_hash,
        };
        let generation = Param::int(lease.generation);
        let expires_at = Param::Own(expires_at.bind());
        if !leases::renew(conn, &row.resource_id, &holder, generation, expires_at, now)? {
            return Ok(false);
        }
        // `recordViewerDeltas(this.state, options.runId, …)`: the run id read again.
        let again = args.get_or_undefined("runId")?;
        let again = match again.stored_text() {
            Some(text) => text,
            None => std::borrow::Cow::Owned(again.template()?),
        };
        conn.hold_writes_until_commit();
        // The revision read is of the row's run: another run id read again reads its own.
        let known = known.presentation.filter(|_| *again == row.run_id);
        record_known_viewer_deltas(conn, &again, known, SUMMARY_REPLAY, now)?;
        Ok(true)
    })?;
    Ok(Reply::value(renewed))
}

pub fn verify(store: &Store, call: &Call) -> Result<Reply> {
    let now = options_now(call)?;
    let args = Js::arg(call, 0);
    Ok(Reply::value(
        live_claim_row_of(
            store.conn()?,
            args.get_or_undefined("runId")?,
            args.get_or_undefined("claimToken")?,
            now,
        )?
        .is_some(),
    ))
}

/// The fencing authority of a claim token (expired or not); `leaseMs` is always 30 s.
pub fn authority(store: &Store, call: &Call) -> Result<Reply> {
    let claim_token = Js::arg(call, 1);
    let conn = store.conn()?;
    let Some(row) = run_row_of(conn, Js::arg(call, 0))? else {
        return Ok(Reply::undefined());
    };
    let (Some(owner_id), Some(_)) = (row.owner_id.as_deref(), row.claim_expires_at) else {
        return Ok(Reply::undefined());
    };
    let Some(lease_hash) = row.token_hash.as_deref() else {
        return Ok(Reply::undefined());
    };
    if lease_hash != token_hash_js(claim_token)? {
        return Ok(Reply::undefined());
    }
    let owner_type = runner_owner_type(owner_id);
    Ok(Reply::value(json!({
        "actor": { "type": owner_type, "id": owner_id },
        "ownerType": owner_type,
        "ownerId": owner_id,
        "token": claim_token.json_value().unwrap_or(Value::Null),
        "generation": row.lease_generation,
        "leaseMs": 30_000,
    })))
}

pub fn mark_running(store: &Store, call: &Call) -> Result<Reply> {
    // `updateClaimedRunStatus(options.runId, options.claimToken, "running", options.now)`:
    // the reads in argument order.
    let args = Js::arg(call, 0);
    let run_id = args.get("runId")?;
    let claim_token = args.get("claimToken")?;
    let now = options_now(call)?;
    Ok(Reply::value(update_claimed_run_status(
        store,
        run_id,
        claim_token,
        &MARK_RUNNING,
        now,
    )?))
}

/// Sets the queue status under a live claim (the lease is kept), recording `run.queue_<status>`.
pub fn update_claimed_run_status(
    store: &Store,
    run_id: Js<'_>,
    claim_token: Js<'_>,
    mv: &Move,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        let Some((row, known)) = run_row_with_revisions_of(conn, run_id)? else {
            return Ok(false);
        };
        let Some(row) = live_claim_of(row, claim_token, now)? else {
            return Ok(false);
        };
        let run_id = row.run_id.as_str();
        let changed = mv.apply(conn, Table::Queue, params![now, now, run_id])?;
        if changed != 1 {
            return Ok(false);
        }
        // The lease is as the claim check read it: only the queue row changed since.
        let lease = row.lease();
        conn.hold_writes_until_commit();
        let revision = bump_known_run_revision(conn, (&row.resource_id, run_id), known, now)?;
        leases::insert_attributed_event(
            conn,
            &row.resource_id,
            revision,
            mv.event,
            Actor::Holder(&lease),
            &canonical(&json!({ "status": mv.queue.map(|(_, to)| to.as_str()) })),
            now,
        )?;
        Ok(true)
    })
}

/// `claimWorkflowRun` (a row of the method table).
pub fn claim_workflow_run(store: &Store, call: &Call) -> Result<Reply> {
    claim_by_id(store, call, ClaimOptions::default())
}

/// `claimWorkflowRunForInteractionValidation` (a row of the method table).
pub fn claim_for_interaction_validation(store: &Store, call: &Call) -> Result<Reply> {
    let options = ClaimOptions {
        allow_pending_interaction: true,
        preserve_queue_status: false,
    };
    claim_by_id(store, call, options)
}

/// `claimWorkflowRunForControl` (a row of the method table).
pub fn claim_for_control(store: &Store, call: &Call) -> Result<Reply> {
    let options = ClaimOptions {
        allow_pending_interaction: true,
        preserve_queue_status: true,
    };
    claim_by_id(store, call, options)
}
