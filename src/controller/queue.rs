//! The controller work queue and its claims: enqueueing, claiming the earliest
//! due item under a fresh lease generation, renewing, settling or requeueing a claim, and
//! listing the queue.

use rusqlite::{params_from_iter, Connection};
use serde_json::{json, Value};

use super::rows::claim::{claim_row, release_lease, ClaimFence, ClaimRow, CLAIM_COLUMNS};
use super::rows::queue_item::enqueue_controller_row;
use super::rows::{
    bump_controller_resource, lookup_controller_row, put_caller_text, text_lossy, ControllerRow,
    ResourceRef, CONTROLLER_COLUMNS,
};
use super::time_at;
use crate::error::{Result, StoreError};
use crate::js::token_hash;
use crate::js::{bind_params, length_of, read, same_number, thrown_error, Bound, Js, Param};
use crate::state::ids::random_token;
use crate::state::json::canonical;
use crate::state::leases::{self, Holder, HolderKind, CONTROLLER_TAKEABLE};
use crate::state::revisions::{insert_event, EventDraft};
use crate::store::Store;
use crate::time::{iso, js_iso};
use crate::wire::{Call, Reply};

/// The lease expiry `now + leaseMs` and its `new Date(…).toISOString()`, which the JS layer
/// computed with JavaScript's own `+` and `Date` (a string `leaseMs` makes the sum a string,
/// which only JavaScript's date parser reads) and sent in place of `leaseMs`.
struct LeaseSum<'a> {
    /// The sum as a wire value (a number, or a string).
    sum: Js<'a>,
    /// `new Date(sum).toISOString()`, or what it threw.
    iso: Result<String>,
}

impl<'a> LeaseSum<'a> {
    /// The sum the JS layer sent (`{$lease: {sum, iso}}`, or `{$lease: {$error}}` when `+`
    /// threw, thrown here where the reference adds); without it (the JS layer does not reach
    /// a property of a primitive, so `leaseMs` is `undefined`) `now + undefined`, NaN.
    fn of(lease_ms: Option<&'a Value>) -> Result<LeaseSum<'a>> {
        let Some(envelope) = lease_ms.and_then(|value| value.get("$lease")) else {
            return Ok(LeaseSum {
                sum: Js::Number(f64::NAN),
                iso: Err(invalid_time_value()),
            });
        };
        if let Some(error) = envelope.get("$error").and_then(Value::as_object) {
            return Err(thrown_error(error));
        }
        let iso = match envelope.get("iso") {
            Some(Value::String(iso)) => Ok(iso.clone()),
            other => Err(other
                .and_then(|thrown| thrown.get("$error"))
                .and_then(Value::as_object)
                .map_or_else(invalid_time_value, thrown_error)),
        };
        Ok(LeaseSum {
            sum: Js::opt(envelope.get("sum")),
            iso,
        })
    }

    /// The sum as better-sqlite3 binds it (a double, NaN becoming NULL, or text).
    fn bound(&self) -> Result<Bound<'a>> {
        self.sum.bind()
    }

    /// Canonical JSON of `{expiresAt: sum}`.
    fn payload(&self) -> Result<String> {
        Ok(canonical(&json!({ "expiresAt": self.sum.json_value()? })))
    }

    /// `new Date(sum).toISOString()`.
    fn iso(&self) -> Result<String> {
        self.iso.clone()
    }
}

fn invalid_time_value() -> StoreError {
    StoreError::Range("Invalid time value".into())
}

pub fn enqueue(store: &Store, call: &Call) -> Result<Reply> {
    let reference = ResourceRef::of(call.args.first());
    let row = lookup_controller_row(store, reference)?.ok_or_else(|| reference.not_found())?;
    let available_at = time_at(call.args.get(1), call)?;
    enqueue_controller_row(
        store.conn()?,
        &row.controller_resource_id,
        available_at,
        call.clock,
    )?;
    Ok(Reply::undefined())
}

pub fn claim_next(store: &Store, call: &Call) -> Result<Reply> {
    let options = call.args.first();
    let controllers = read(options, "controllers")?;
    if length_of(controllers)? == Some(0.0) {
        return Ok(Reply::undefined());
    }
    let now = time_at(read(options, "now")?, call)?;
    let Some(Value::Array(controllers)) = controllers else {
        return Err(StoreError::Type(
            "options.controllers.map is not a function".into(),
        ));
    };
    let exclusions = match read(options, "exclude")? {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(items)) => items.as_slice(),
        Some(_) => return Err(StoreError::Type("exclusions.map is not a function".into())),
    };
    let mut excluded = Vec::with_capacity(exclusions.len() * 2);
    for exclusion in exclusions {
        let (controller, key) = ResourceRef::of(Some(exclusion)).parts()?;
        excluded.push(controller);
        excluded.push(key);
    }
    let claim = store.write(|conn| {
        let Some(row) = next_due_row(store, conn, controllers, &excluded, now)? else {
            return Ok(None);
        };
        take_lease(conn, &row, options, now)
    })?;
    Ok(Reply::maybe(claim))
}

/// The earliest due queue item of these controllers whose lease is free or expired, with its
/// lease and queue item.
fn next_due_row(
    store: &Store,
    conn: &Connection,
    controllers: &[Value],
    excluded: &[Option<&Value>],
    now: i64,
) -> Result<Option<ClaimRow>> {
    let placeholders = vec!["?"; controllers.len()].join(", ");
    let exclusion_sql =
        vec!["AND NOT (c.controller_name = ? AND c.resource_key = ?)"; excluded.len() / 2]
            .join("\n");
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
           AND {CONTROLLER_TAKEABLE}
         ORDER BY q.available_at, c.controller_name, c.resource_key
         LIMIT 1"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let project_id = store.require_project_id()?;
    let mut params = Vec::with_capacity(controllers.len() + excluded.len() + 3);
    params.push(Param::text(project_id));
    params.extend(
        controllers
            .iter()
            .map(|controller| Param::Caller(Some(controller))),
    );
    params.extend(excluded.iter().map(|value| Param::Caller(*value)));
    params.push(Param::int(now));
    params.push(Param::int(now));
    let mut rows = statement.query(params_from_iter(bind_params(&params)?))?;
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
    options: Option<&Value>,
    now: i64,
) -> Result<Option<Value>> {
    let row = &due.row;
    let lease = due
        .lease
        .as_ref()
        .ok_or_else(|| StoreError::plain(format!("Lease is missing: {}", row.resource_id)))?;
    let token = random_token();
    let generation = lease.generation + 1;
    let expires = LeaseSum::of(read(options, "leaseMs")?)?;
    let owner_id = read(options, "ownerId")?;
    let token_hash = token_hash(&token);
    let holder = Holder {
        kind: HolderKind::Controller,
        owner_id: Param::Caller(owner_id),
        token_hash: &token_hash,
    };
    let expires_at = Param::Own(expires.bound()?);
    if !leases::take(
        conn,
        &row.resource_id,
        &holder,
        lease.generation,
        expires_at,
        now,
    )? {
        return Ok(None);
    }
    bump_controller_resource(conn, &row.resource_id, row.resource_version, now)?;
    // The event's actor is the owner as SQLite stored it (a number bound as a double is
    // stored as its text, `5.0`), which the lease row now holds.
    let stored_owner = match owner_id {
        Some(Value::String(owner)) => owner.clone(),
        _ => leases::require_lease(conn, &row.resource_id)?
            .owner_id
            .unwrap_or_default(),
    };
    insert_event(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision: row.resource_version + 1,
            event_type: "lease.claimed",
            actor_type: "controller",
            actor_id: Some(&stored_owner),
            payload: &expires.payload()?,
            now,
            lease_generation: Some(generation),
        },
    )?;
    let queue_version = due.require_queue_version()?;
    Ok(Some(json!({
        "controller": row.controller_name,
        "key": row.resource_key,
        "ownerId": owner_id.cloned().unwrap_or(Value::Null),
        "token": token,
        "generation": generation,
        "queueVersion": queue_version,
        "resourceVersion": row.resource_version + 1,
        "consecutiveErrors": due.consecutive_errors.unwrap_or(0),
        "expiresAt": expires.iso()?,
    })))
}

/// Extends an unexpired lease held exactly by `claim` (no transaction, as in the reference).
pub fn renew_claim(store: &Store, call: &Call) -> Result<Reply> {
    let claim = call.args.first();
    let now = time_at(call.args.get(2), call)?;
    let expires = LeaseSum::of(call.args.get(1))?;
    let Some(row) = lookup_controller_row(store, ResourceRef::copied(claim)?)? else {
        return Ok(Reply::value(false));
    };
    let conn = store.conn()?;
    let fence = ClaimFence::read(claim)?;
    let expires_at = Param::Own(expires.bound()?);
    if !leases::renew(
        conn,
        &row.resource_id,
        &fence.holder(),
        fence.generation(),
        expires_at,
        now,
    )? {
        return Ok(Reply::value(false));
    }
    // As in the reference, an expiry JavaScript cannot date throws after the renewal was
    // written (renewClaim has no transaction).
    Ok(Reply::value(true).set_claim("expiresAt", expires.iso()?))
}

/// `settleClaim` (`requeue` undefined) and `requeueClaim`: a claim that no longer holds the
/// lease (even an expired one is accepted) makes this return false.
pub fn settle_claim(
    store: &Store,
    call: &Call,
    requeue: Option<Option<&Value>>,
    now_value: Option<&Value>,
) -> Result<Reply> {
    let now = time_at(now_value, call)?;
    let claim = call.args.first();
    let (settled, resource_version) = store.write(|conn| {
        let reference = ResourceRef::copied(claim)?;
        let Some(claimed) = claim_row(conn, store.project_id(), reference)? else {
            return Ok((false, None));
        };
        // Any failure of the check (a token Node cannot hash, too) means "not settled".
        let Ok(lease) = claimed.assert_claim(claim, now, false) else {
            return Ok((false, None));
        };
        let row = &claimed.row;
        let current = claimed.require_queue_version()?;
        match requeue {
            None => {
                if same_number(current, read(claim, "queueVersion")?) {
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
fn requeue_row(
    conn: &Connection,
    row: &ControllerRow,
    requeue: Option<&Value>,
    now: i64,
) -> Result<()> {
    let error_hash = read(requeue, "error")?
        .map(|error| put_caller_text(conn, Some(error), now))
        .transpose()?;
    let mut statement = conn.prepare_cached(
        "UPDATE controller_queue
         SET available_at = ?, queue_version = queue_version + 1,
             consecutive_errors = consecutive_errors + 1,
             last_error_hash = ?, updated_at = ? WHERE controller_resource_id = ?",
    )?;
    // The JS layer sent `Date.parse(availableAt)` (null for NaN, which binds as NULL).
    let available_at = read(requeue, "availableAt")?;
    statement.execute(params_from_iter(bind_params(&[
        Param::Caller(available_at),
        error_hash
            .as_ref()
            .map_or(Param::null(), |hash| Param::blob(&hash[..])),
        Param::int(now),
        Param::text(&row.controller_resource_id),
    ])?))?;
    Ok(())
}

pub fn list_queue(store: &Store, _call: &Call) -> Result<Reply> {
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
            item.insert("controller".into(), text_lossy(row, 0)?.into());
            item.insert("key".into(), text_lossy(row, 1)?.into());
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

// The method table's rows (`crate::methods`): each reads the call's arguments and answers it.

/// `settleClaim` (a row of the method table).
pub fn settle_claim_call(store: &Store, call: &Call) -> Result<Reply> {
    settle_claim(store, call, None, call.args.get(1))
}

/// `requeueClaim` (a row of the method table).
pub fn requeue_claim(store: &Store, call: &Call) -> Result<Reply> {
    // `requeue === undefined` settles without requeueing; `null` is read (and throws).
    let requeue = call
        .args
        .get(1)
        .filter(|options| !Js::of(options).is_undefined())
        .map(Some);
    settle_claim(store, call, requeue, call.args.get(2))
}
