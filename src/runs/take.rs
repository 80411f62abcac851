//! A runner takes a run's lease (`CLAIM`): the claim read (the run, its pending interaction
//! and its record's documents in one statement), the liveness judgement, the take, the queue
//! move to `starting` (none for a control claim), the `lease.claimed` event and the record.

use crate::sql::{params, params_from_iter, Db, OptionalExtension};
use serde_json::json;

use std::sync::OnceLock;

use super::checks::runner_owner_type;
use super::machine::moves::{Table, CLAIM};
use super::machine::status::{status_sql, QueueStatus};
use super::records::{
    map_run_record_with_token, map_workflow_run_with, run_record_select, OwnedRecordReads,
    RecordReads,
};
use super::row::{
    known_revisions, with_columns, with_known_revisions, RunRow, RUN_COLUMN_COUNT, RUN_SELECT,
};
use crate::error::Result;
use crate::js::{bind_all, lease_sum, params_for, token_hash_js, Js, Param, Sum};
use crate::state::blobs::JsonReads;
use crate::state::json::canonical;
use crate::state::leases::{self, Holder, HolderKind};
use crate::state::leases::{insert_attributed_event_of, Actor};
use crate::state::revisions::{bump_known_run_revision, KnownRevisions, Payload};
use crate::store::Store;
use crate::time::js_iso;

/// Which checks a claim skips.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaimOptions {
    /// Claim even while an interactive request is pending.
    pub allow_pending_interaction: bool,
    /// Leave `run_queue.status` as it is (a control claim).
    pub preserve_queue_status: bool,
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

/// One claim attempt in its own transaction.
pub fn claim_run(
    store: &Store,
    claim: &RunClaim<'_>,
    now: i64,
    options: ClaimOptions,
) -> Result<Option<String>> {
    store.write(|conn| claim_run_in_transaction(conn, claim, now, options))
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
        known,
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
    let expires_sum = lease_sum(now, claim.lease_ms)?;
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
    // From here to the COMMIT: SQL, and JavaScript only for a `claimToken` object (below).
    conn.hold_writes_until_commit();
    if !options.preserve_queue_status {
        CLAIM.apply_unread(conn, Table::Queue, params![now, row.run_id])?;
    }
    let revision = bump_known_run_revision(conn, (&row.resource_id, &row.run_id), known, now)?;
    let actor = Actor::Taker {
        owner_type,
        owner_id: Param::Own(bound[0].clone()),
        generation,
    };
    let payload = canonical(&json!({ "expiresAt": expires_sum.json_value()? }));
    let event = (row.resource_id.as_str(), revision, CLAIM.event);
    insert_attributed_event_of(conn, event, actor, &payload, now, Payload::Fresh)?;
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
            status: QueueStatus::Starting.as_str().to_owned(),
            error_code: None,
            error_hash: None,
            updated_at: now,
            ..claimed
        }
    };
    if matches!(claim.claim_token, Js::Live(_)) {
        // Its `toString` runs where the reference's runs: after the writes.
        conn.send_held()?;
    }
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
    /// On a cluster, the revisions the claim's bookkeeping advances.
    known: KnownRevisions,
}

/// [`ClaimRead`] of the run `run_id` (the caller's value, bound as better-sqlite3 binds it).
/// The pending test joins on the row's own `run_id`: the row was found by that value, so it
/// finds what the reference's `WHERE run_id = ?` with the same value finds.
fn claim_read_of(conn: &Db, run_id: Js<'_>) -> Result<Option<ClaimRead>> {
    static SQL: OnceLock<String> = OnceLock::new();
    static CLUSTER_SQL: OnceLock<String> = OnceLock::new();
    let on_cluster = conn.remote().is_some();
    // The run's columns, then whether an interaction is pending, then (on a cluster) the
    // revisions the claim advances, then its record's (read from the end).
    let with_pending = || {
        with_columns(
            RUN_SELECT,
            concat!(
                ",\n    EXISTS (SELECT 1 FROM interactive_requests i
                   WHERE i.run_id = r.run_id AND i.status = ",
                status_sql!(pending),
                ")"
            ),
        )
    };
    let record = |select: &str| run_record_select(select, true, "WHERE r.run_id = ?");
    let sql = match on_cluster {
        true => CLUSTER_SQL.get_or_init(|| record(&with_known_revisions(&with_pending()))),
        false => SQL.get_or_init(|| record(&with_pending())),
    };
    let mut statement = conn.prepare_cached(sql)?;
    let params = params_for(&statement, &[run_id])?;
    Ok(statement
        .query_row(params_from_iter(&params), |row| {
            Ok(ClaimRead {
                row: RunRow::from_row(row)?,
                pending_interaction: row.get::<_, i64>(RUN_COLUMN_COUNT)? != 0,
                record_reads: RecordReads::from_row(row, true)?.to_owned(),
                known: match on_cluster {
                    true => known_revisions(row, RUN_COLUMN_COUNT + 1)?,
                    false => KnownRevisions::default(),
                },
            })
        })
        .optional()?)
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
