//! The controller work queue and its claims (methods 10–15): enqueueing, claiming the earliest
//! due item under a fresh lease generation, renewing, settling or requeueing a claim, and
//! listing the queue.

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection};
use serde_json::{json, Value};

use super::js::{bind, prop, same_number, template, token_hash_of};
use super::rows::{
    bump_controller_resource, claim_row, enqueue_controller_row, lookup_controller_row,
    put_caller_text, release_lease, ClaimRow, ControllerRow, ResourceRef, CLAIM_COLUMNS,
    CONTROLLER_COLUMNS,
};
use crate::error::{Result, StoreError};
use crate::state::ids::{random_token, token_hash};
use crate::state::json::canonical;
use crate::state::revisions::{insert_event, EventDraft};
use crate::store::Store;
use crate::time::{iso, js_iso};
use crate::wire::{field, time, Call, Reply};

/// The methods implemented here.
pub const METHODS: &[&str] = &[
    "enqueue",
    "claimNext",
    "renewClaim",
    "settleClaim",
    "requeueClaim",
    "listQueue",
];

/// Runs `method` when this module implements it (see `METHODS`); `None` otherwise.
pub fn dispatch(store: &Store, method: &str, call: &Call) -> Option<Result<Reply>> {
    Some(match method {
        "enqueue" => enqueue(store, call),
        "claimNext" => claim_next(store, call),
        "renewClaim" => renew_claim(store, call),
        "settleClaim" => settle_claim(store, call, None, call.arg(1)),
        "requeueClaim" => {
            let requeue = Some(call.arg(1)).filter(|options| !options.is_null());
            settle_claim(store, call, requeue, call.arg(2))
        }
        "listQueue" => list_queue(store, call),
        _ => return None,
    })
}

/// `now + leaseMs` in JavaScript arithmetic, bound as better-sqlite3 binds the sum (NaN
/// becomes NULL); the whole number of milliseconds when it is one. Also returns the sum, which
/// the reference turns into `expiresAt` with `new Date(sum).toISOString()`.
fn lease_expiry(now: i64, lease_ms: Option<&Value>) -> (SqlValue, f64) {
    let sum = now as f64 + lease_ms.and_then(Value::as_f64).unwrap_or(f64::NAN);
    let bound = if sum.is_nan() {
        SqlValue::Null
    } else if sum.fract() == 0.0 && sum.abs() < 9.0e15 {
        SqlValue::Integer(sum as i64)
    } else {
        SqlValue::Real(sum)
    };
    (bound, sum)
}

fn enqueue(store: &Store, call: &Call) -> Result<Reply> {
    let reference = ResourceRef::of(call.arg(0));
    let row = lookup_controller_row(store, reference)?.ok_or_else(|| reference.not_found())?;
    let available_at = time(call.arg(1))?;
    enqueue_controller_row(
        store.conn()?,
        &row.controller_resource_id,
        available_at,
        call.clock,
    )?;
    Ok(Reply::undefined())
}

fn claim_next(store: &Store, call: &Call) -> Result<Reply> {
    let options = call.arg(0);
    let controllers = field(options, "controllers")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if controllers.is_empty() {
        return Ok(Reply::undefined());
    }
    let now = time(field(options, "now"))?;
    let exclusions = field(options, "exclude")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let claim = store.write(|conn| {
        let project_id = store.require_project_id()?;
        let Some(row) = next_due_row(conn, project_id, controllers, exclusions, now)? else {
            return Ok(None);
        };
        take_lease(conn, &row, options, now)
    })?;
    Ok(Reply::maybe(claim))
}

/// The earliest due queue item of these controllers whose lease is free or expired, with its
/// lease and queue item.
fn next_due_row(
    conn: &Connection,
    project_id: &str,
    controllers: &[Value],
    exclusions: &[Value],
    now: i64,
) -> Result<Option<ClaimRow>> {
    let placeholders = vec!["?"; controllers.len()].join(", ");
    let exclusion_sql =
        vec!["AND NOT (c.controller_name = ? AND c.resource_key = ?)"; exclusions.len()].join("\n");
    // Driven from the queue's (available_at, created_at) index: SQLite then sorts only the
    // items due first and stops, instead of sorting every item of the controllers for one row.
    // (project_id, controller_name, resource_key) is unique, so the order is total and the row
    // the same as with any plan.
    let sql = format!(
        "SELECT {CONTROLLER_COLUMNS}, {CLAIM_COLUMNS}
         FROM controller_queue q
         CROSS JOIN controller_resources c ON c.controller_resource_id = q.controller_resource_id
         JOIN resources r ON r.resource_id = c.resource_id
         JOIN leases l ON l.resource_id = c.resource_id
         WHERE c.project_id = ?
           AND c.controller_name IN ({placeholders})
           {exclusion_sql}
           AND q.available_at <= ?
           AND (l.owner_id IS NULL OR l.expires_at <= ?)
         ORDER BY q.available_at, c.controller_name, c.resource_key
         LIMIT 1"
    );
    let mut bound = vec![SqlValue::Text(project_id.to_string())];
    for controller in controllers {
        bound.push(bind(Some(controller))?);
    }
    for excluded in exclusions {
        bound.push(bind(prop(excluded, "controller"))?);
        bound.push(bind(prop(excluded, "key"))?);
    }
    bound.push(SqlValue::Integer(now));
    bound.push(SqlValue::Integer(now));
    let mut statement = conn.prepare_cached(&sql)?;
    let mut rows = statement.query(params_from_iter(bound))?;
    Ok(match rows.next()? {
        Some(row) => Some(ClaimRow::from_row(row)?),
        None => None,
    })
}

/// Takes the next lease generation of `due` with a fresh token; returns the claim. The lease
/// and queue item were read with the row (nothing below changes the queue item).
fn take_lease(
    conn: &Connection,
    due: &ClaimRow,
    options: &Value,
    now: i64,
) -> Result<Option<Value>> {
    let row = &due.row;
    let lease = due
        .lease
        .as_ref()
        .ok_or_else(|| StoreError::plain(format!("Lease is missing: {}", row.resource_id)))?;
    let token = random_token();
    let generation = lease.generation + 1;
    let owner_id = prop(options, "ownerId");
    let (expires_bound, expires_sum) = lease_expiry(now, prop(options, "leaseMs"));
    let changed = conn
        .prepare_cached(
            "UPDATE leases
             SET generation = ?, owner_type = 'controller', owner_id = ?, token_hash = ?,
                 acquired_at = ?, heartbeat_at = ?, expires_at = ?
             WHERE resource_id = ? AND generation = ?
               AND (owner_id IS NULL OR expires_at <= ?)",
        )?
        .execute(params![
            generation,
            bind(owner_id)?,
            &token_hash(&token)[..],
            now,
            now,
            expires_bound,
            row.resource_id,
            lease.generation,
            now
        ])?;
    if changed != 1 {
        return Ok(None);
    }
    // SQLite stored a whole number; one outside JavaScript's date range makes the reference's
    // `toISOString()` throw inside the transaction, so nothing is claimed.
    let expires_text = js_iso(expires_sum)?;
    let expires_at = expires_sum as i64;
    bump_controller_resource(conn, &row.resource_id, row.resource_version, now)?;
    let owner_text = owner_id.map(|value| template(Some(value)));
    insert_event(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision: row.resource_version + 1,
            event_type: "lease.claimed",
            actor_type: "controller",
            actor_id: owner_text.as_deref(),
            payload: &canonical(&json!({ "expiresAt": expires_at })),
            now,
            lease_generation: Some(generation),
        },
    )?;
    Ok(Some(json!({
        "controller": row.controller_name,
        "key": row.resource_key,
        "ownerId": owner_id.cloned().unwrap_or(Value::Null),
        "token": token,
        "generation": generation,
        "queueVersion": due.require_queue_version()?,
        "resourceVersion": row.resource_version + 1,
        "consecutiveErrors": due.consecutive_errors.unwrap_or(0),
        "expiresAt": expires_text,
    })))
}

/// Extends an unexpired lease held exactly by `claim` (no transaction, as in the reference).
fn renew_claim(store: &Store, call: &Call) -> Result<Reply> {
    let claim = call.arg(0);
    let now = time(call.arg(2))?;
    let (expires_bound, expires_sum) = lease_expiry(now, call.args.get(1));
    let Some(row) = lookup_controller_row(store, ResourceRef::of(claim))? else {
        return Ok(Reply::value(false));
    };
    let token_hash = token_hash_of(prop(claim, "token"))?;
    let changed = store
        .conn()?
        .prepare_cached(
            "UPDATE leases SET heartbeat_at = ?, expires_at = ?
             WHERE resource_id = ? AND owner_type = 'controller' AND owner_id = ?
               AND token_hash = ? AND generation = ? AND expires_at > ?",
        )?
        .execute(params![
            now,
            expires_bound,
            row.resource_id,
            bind(prop(claim, "ownerId"))?,
            &token_hash[..],
            bind(prop(claim, "generation"))?,
            now
        ])?;
    if changed != 1 {
        return Ok(Reply::value(false));
    }
    // As in the reference, an expiry outside JavaScript's date range throws after the renewal
    // was written (renewClaim has no transaction).
    Ok(Reply::value(true).set_claim("expiresAt", js_iso(expires_sum)?))
}

/// `settleClaim` (no `requeue`) and `requeueClaim`: a claim that no longer holds the lease
/// (even an expired one is accepted) makes this return false.
fn settle_claim(
    store: &Store,
    call: &Call,
    requeue: Option<&Value>,
    now_value: &Value,
) -> Result<Reply> {
    let now = time(now_value)?;
    let claim = call.arg(0);
    let (settled, resource_version) = store.write(|conn| {
        let Some(claimed) = claim_row(conn, store.project_id(), ResourceRef::of(claim))? else {
            return Ok((false, None));
        };
        let Ok(lease) = claimed.assert_claim(claim, now, false) else {
            return Ok((false, None));
        };
        let row = &claimed.row;
        let current = claimed.require_queue_version()?;
        match requeue {
            None => {
                if same_number(current, prop(claim, "queueVersion")) {
                    conn.prepare_cached(
                        "DELETE FROM controller_queue WHERE controller_resource_id = ?",
                    )?
                    .execute([&row.controller_resource_id])?;
                }
            }
            Some(requeue) => requeue_row(conn, row, requeue, now)?,
        }
        // Neither queue change touches the revision read with the row.
        let released = release_lease(
            conn,
            &row.resource_id,
            row.resource_version,
            claim,
            &lease,
            now,
        )?;
        Ok((true, released))
    })?;
    let reply = Reply::value(settled);
    Ok(match resource_version {
        Some(version) => reply.set_claim("resourceVersion", version),
        None => reply,
    })
}

/// Moves the queue item to `requeue.availableAt` (SQL NULL when unparseable) and counts an
/// error.
fn requeue_row(conn: &Connection, row: &ControllerRow, requeue: &Value, now: i64) -> Result<()> {
    let error_hash = prop(requeue, "error")
        .map(|error| put_caller_text(conn, error, now))
        .transpose()?;
    conn.prepare_cached(
        "UPDATE controller_queue
         SET available_at = ?, queue_version = queue_version + 1,
             consecutive_errors = consecutive_errors + 1,
             last_error_hash = ?, updated_at = ? WHERE controller_resource_id = ?",
    )?
    .execute(params![
        bind(prop(requeue, "availableAt"))?,
        error_hash.as_ref().map(|hash| &hash[..]),
        now,
        row.controller_resource_id
    ])?;
    Ok(())
}

fn list_queue(store: &Store, _call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let project_id = store.require_project_id()?;
    let mut statement = conn.prepare_cached(
        "SELECT c.controller_name, c.resource_key, q.available_at, q.consecutive_errors,
                l.expires_at
         FROM controller_queue q
         JOIN controller_resources c ON c.controller_resource_id = q.controller_resource_id
         JOIN leases l ON l.resource_id = c.resource_id
         WHERE c.project_id = ? ORDER BY q.available_at, c.controller_name, c.resource_key",
    )?;
    let rows = statement
        .query_map([project_id], |row| {
            let mut item = serde_json::Map::new();
            item.insert("controller".into(), row.get::<_, String>(0)?.into());
            item.insert("key".into(), row.get::<_, String>(1)?.into());
            item.insert("availableAt".into(), iso(row.get(2)?).into());
            item.insert("consecutiveErrors".into(), row.get::<_, i64>(3)?.into());
            Ok((item, row.get::<_, Option<i64>>(4)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut items = Vec::with_capacity(rows.len());
    for (mut item, expires_at) in rows {
        // A renewal may have stored an expiry beyond JavaScript's dates; toISOString() throws.
        if let Some(expires_at) = expires_at {
            item.insert("claimExpiresAt".into(), js_iso(expires_at as f64)?.into());
        }
        items.push(Value::Object(item));
    }
    Ok(Reply::value(items))
}
