//! Run claims and fencing: taking, renewing and verifying a run's lease. Every claim bumps the
//! lease generation (the fencing token) and stores only the SHA-256 of the caller's token.
//!
//! Also the claim-guarded queue status change (`markWorkflowRunRunning`) and the small helpers
//! the transitions share: the current claim check and the `lease.ownerType ?? "system"` event.

use crate::sql::{params, params_from_iter, Db, OptionalExtension};
use serde_json::{json, Value};

use std::sync::OnceLock;

use super::records::{
    map_run_record_with_token, map_workflow_run_with, run_record_select, OwnedRecordReads,
    RecordReads,
};
use super::row::{rowid_list, run_row_of, RunRow, RUN_COLUMN_COUNT, RUN_SELECT};
use crate::error::{Result, StoreError};
use crate::js::{
    add_to_number, bind_all, greater_than, params_for, token_hash_js, Js, Param, Spread, Sum,
};
use crate::state::blobs::JsonReads;
use crate::state::json::canonical;
use crate::state::leases::{self, bound_text, Actor, Fence, Holder, HolderKind, Lease};
use crate::state::revisions::{bump_resource_revision, insert_event_binding, EventDraft};
use crate::state::viewer::{record_viewer_deltas, SUMMARY_REPLAY};
use crate::store::{in_read_transaction, Store};
use crate::time::js_iso;
use crate::wire::{Call, Reply};

/// `epoch(validTimestamp(options.now))`, read from the first argument (V8's TypeError when
/// `options` is null or undefined).
pub fn options_now(call: &Call) -> Result<i64> {
    crate::js::timestamp(call, Js::arg(call, 0).get("now")?)
}

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
    let status_test = format!("{status} IN ('queued', 'parked', 'starting', 'running')");
    let available_test = format!("{available} <= ?");
    let mut clauses = vec![
        status_test.as_str(),
        available_test.as_str(),
        "(l.owner_id IS NULL OR l.expires_at <= ? OR l.owner_id = ?)",
        "(q.affinity_runner_id IS NULL OR q.affinity_runner_id = ? \
         OR q.status IN ('parked', 'starting', 'running'))",
        "NOT (q.status = 'parked' AND (r.status = 'waiting' OR r.paused = 1))",
        "NOT EXISTS (SELECT 1 FROM interactive_requests i \
         WHERE i.run_id = r.run_id AND i.status = 'pending')",
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
        None => clauses.push("(b.execution_mode = 'headless' OR q.status <> 'queued')"),
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
        let Some(row) = run_row_of(conn, run_id)? else {
            return Ok(false);
        };
        let Some(owner_id) = row.owner_id.as_deref() else {
            return Ok(false);
        };
        let lease = row.lease();
        // The arguments of `.run(…)` in order: `now + options.leaseMs`, then the token's hash.
        let expires_at = add_to_number(now as f64, args.get_or_undefined("leaseMs")?)?;
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
        record_viewer_deltas(conn, &again, SUMMARY_REPLAY, now)?;
        Ok(true)
    })?;
    Ok(Reply::value(renewed))
}

/// What the STRICT `leases.expires_at` holds after binding `expires_at` (SQLite itself refused
/// what it cannot store); a string SQLite converted is read back.
fn stored_expiry(conn: &Db, resource_id: &str, expires_at: &Sum) -> Result<Option<i64>> {
    match expires_at {
        Sum::Number(n) if n.is_nan() => Ok(None),
        Sum::Number(n) => Ok(Some(*n as i64)),
        Sum::Text(_) => leases::stored_expires_at(conn, resource_id),
    }
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
    let live = leases::holds_live(
        row.owner_id.as_deref(),
        row.token_hash.as_deref(),
        row.claim_expires_at,
        now,
        || token_hash_js(claim_token),
    )?;
    Ok(live.then_some(row))
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
        "running",
        now,
    )?))
}

/// Sets the queue status under a live claim (the lease is kept), recording `run.queue_<status>`.
pub fn update_claimed_run_status(
    store: &Store,
    run_id: Js<'_>,
    claim_token: Js<'_>,
    status: &str,
    now: i64,
) -> Result<bool> {
    store.write(|conn| {
        let Some(row) = live_claim_row_of(conn, run_id, claim_token, now)? else {
            return Ok(false);
        };
        let run_id = row.run_id.as_str();
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
        leases::insert_attributed_event(
            conn,
            &row.resource_id,
            revision,
            &format!("run.queue_{status}"),
            Actor::Holder(&lease),
            &canonical(&json!({ "status": status })),
            now,
        )?;
        Ok(true)
    })
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
pub fn has_pending_interaction(conn: &Db, run_id: &str) -> Result<bool> {
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

/// Who claims a run, with which token, for how long: the caller's values, used as the
/// reference's `claimRunInTransaction` uses them.
#[derive(Debug, Clone, Copy)]
pub struct RunClaim<'a> {
    /// The run to claim.
    pub run_id: Js<'a>,
    /// The claimant; `host-…` runners get owner type `host`, others `session`.
    pub runner_id: Js<'a>,
    /// The caller's token; only its SHA-256 is stored.
    pub claim_token: Js<'a>,
    /// Lease duration from `now` (`now + leaseMs`).
    pub lease_ms: Js<'a>,
}

/// Claims the run for `runner_id` unless it is terminal, has a pending interaction (unless
/// allowed), or another owner's lease is live. Returns the run record with `claimToken`.
pub fn claim_run_in_transaction(
    conn: &Db,
    claim: &RunClaim<'_>,
    now: i64,
    options: ClaimOptions,
) -> Result<Option<String>> {
    let Some(read) = claim_read_of(conn, claim.run_id)? else {
        return Ok(None);
    };
    let ClaimRead {
        row,
        pending_interaction,
        record_reads,
    } = read;
    if row.is_queue_terminal() || (!options.allow_pending_interaction && pending_interaction) {
        return Ok(None);
    }
    let lease = row.lease();
    let held_by_other = lease.is_live(now)
        && lease
            .owner_id
            .as_deref()
            .is_some_and(|owner| !claim.runner_id.strict_eq_str(owner));
    if held_by_other {
        return Ok(None);
    }
    let generation = lease.generation + 1;
    // `now + leaseMs`, then the arguments of `.run(…)` in order.
    let expires_sum = add_to_number(now as f64, claim.lease_ms)?;
    let runner = claim.runner_id.method("runnerId", "startsWith")?;
    // What the lease and the event store, and the record reads back.
    let runner_text = runner.stored_text().unwrap_or_default();
    let runner_id: &str = &runner_text;
    let owner_type = runner_owner_type(match runner {
        Js::String(text) | Js::IllFormed { text, .. } => text,
        _ => "",
    });
    let token_hash = token_hash_js(claim.claim_token)?;
    let bound = bind_all(&[runner], 1)?;
    let holder = Holder {
        kind: HolderKind::Runner(Param::text(owner_type)),
        owner_id: Param::Own(bound[0].clone()),
        token_hash: &token_hash,
    };
    let expires = Param::Own(expires_sum.bind());
    if !leases::take(
        conn,
        &row.resource_id,
        &holder,
        lease.generation,
        expires,
        now,
    )? {
        return Ok(None);
    }
    let expires_at = stored_expiry(conn, &row.resource_id, &expires_sum)?.unwrap_or_default();
    if !options.preserve_queue_status {
        conn.prepare_cached(
            "UPDATE run_queue
             SET status = 'starting', error_code = NULL, error_hash = NULL, updated_at = ?
             WHERE run_id = ?",
        )?
        .execute(params![now, row.run_id])?;
    }
    let revision = bump_resource_revision(conn, &row.resource_id, now)?;
    insert_event_binding(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision,
            event_type: "lease.claimed",
            actor_type: owner_type,
            actor_id: None,
            payload: &canonical(&json!({ "expiresAt": expires_sum.json_value()? })),
            now,
            lease_generation: Some(generation),
        },
        &"lease.claimed",
        &bound[0],
    )?;
    // The record formats the expiry with `toISOString()` inside the transaction: one outside
    // JavaScript's date range is a RangeError and nothing is claimed.
    js_iso(expires_at as f64)?;
    let claimed = RunRow {
        lease_generation: generation,
        owner_type: Some(owner_type.to_owned()),
        owner_id: Some(runner_id.to_owned()),
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
    let claim_token = claim.claim_token.template_json()?;
    let reads = record_reads.borrowed();
    let record = match reads.is_complete(&claimed.borrowed()) {
        true => map_run_record_with_token(conn, &claimed.borrowed(), &reads, &claim_token)?,
        false => map_workflow_run_with(&mut JsonReads::new(conn), &claimed, Some(&claim_token))?,
    };
    Ok(Some(record))
}

/// A run as a claim reads it, in one statement: its row, whether an interaction of it is
/// pending, and what its record reads besides the row (documents and sources: a claim changes
/// none of them, and a blob never changes under its hash).
struct ClaimRead {
    row: RunRow,
    pending_interaction: bool,
    record_reads: OwnedRecordReads,
}

/// [`ClaimRead`] of the run `run_id` (the caller's value, bound as better-sqlite3 binds it).
/// The pending test joins on the row's own `run_id`: the row was found by that value, so it
/// finds what the reference's `WHERE run_id = ?` with the same value finds.
fn claim_read_of(conn: &Db, run_id: Js<'_>) -> Result<Option<ClaimRead>> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let with_pending = RUN_SELECT.replacen(
            "\n    FROM runs r",
            ",\n    EXISTS (SELECT 1 FROM interactive_requests i
                   WHERE i.run_id = r.run_id AND i.status = 'pending')\n    FROM runs r",
            1,
        );
        run_record_select(&with_pending, true, "WHERE r.run_id = ?")
    });
    let mut statement = conn.prepare_cached(sql)?;
    let params = params_for(&statement, &[run_id])?;
    Ok(statement
        .query_row(params_from_iter(&params), |row| {
            Ok(ClaimRead {
                row: RunRow::from_row(row)?,
                pending_interaction: row.get::<_, i64>(RUN_COLUMN_COUNT)? != 0,
                record_reads: RecordReads::from_row(row, true)?.to_owned(),
            })
        })
        .optional()?)
}

// The method table's rows (`crate::methods`): each reads the call's arguments and answers it.

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
