//! The controller work queue and its claims: enqueueing, claiming the earliest
//! due item under a fresh lease generation, renewing, settling or requeueing a claim, and
//! listing the queue.

use crate::sql::{params_from_iter, Db};
use serde_json::{json, Value};

use super::rows::claim::{claim_row, release_lease, ClaimFence, ClaimRow, CLAIM_COLUMNS};
use super::rows::queue_item::enqueue_controller_row;
use super::rows::{
    bump_controller_resource, controller_row, lookup_controller_row, put_caller_text, text_lossy,
    ControllerRow, ResourceRef, CONTROLLER_COLUMNS,
};
use crate::error::{Result, StoreError};
use crate::js::{
    assign, assign_text, bind_params, bind_params_for, date_parse, timestamp, token_hash, Js,
    LeaseSum, Method, Param, Spread, Walk,
};
use crate::state::ids::random_token;
use crate::state::json::canonical;
use crate::state::leases::Actor;
use crate::state::leases::{self, Holder, HolderKind, CONTROLLER_TAKEABLE};
use crate::state::revisions::Payload;
use crate::store::Store;
use crate::time::{iso, js_iso};
use crate::wire::{Call, Reply};

pub fn enqueue(store: &Store, call: &Call) -> Result<Reply> {
    let reference = ResourceRef::of(Js::arg(call, 0));
    let row = lookup_controller_row(store, reference)?.ok_or_else(|| reference.not_found())?;
    let available_at = timestamp(call, Js::arg(call, 1))?;
    enqueue_controller_row(
        store.conn()?,
        &row.controller_resource_id,
        available_at,
        call.clock,
    )?;
    Ok(Reply::undefined())
}

/// One item of `exclusions.map(() => …)` in claimNext's SQL.
const EXCLUSION: &str = "AND NOT (c.controller_name = ? AND c.resource_key = ?)";

pub fn claim_next(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let controllers = options.get("controllers")?;
    if controllers.get("length")?.as_number() == Some(0.0) {
        return Ok(Reply::undefined());
    }
    let now = timestamp(call, options.get("now")?)?;
    // `options.controllers.map(() => "?")`: the list read again.
    let Some((marks, _)) = options
        .get("controllers")?
        .sql_marks_as("options.controllers")?
    else {
        return Err(StoreError::Type(
            "options.controllers.map is not a function".into(),
        ));
    };
    // `options.exclude ?? []`; `exclusions.map(() => "AND NOT …")` for the SQL (one clause an
    // item: a hole joins as ""), then `exclusions.flatMap((ref) => [ref.controller, ref.key])`,
    // a second walk over the list. Both skip a sparse list's holes. A caller's own `map` or
    // `flatMap` runs instead (src/js/lists.rs).
    let mut excluded = Vec::new();
    let mut exclusion_sql = None;
    match options.get("exclude")? {
        Js::Undefined | Js::Null => {}
        exclude => {
            let mapped = match exclude.method_kind("exclusions", "map")? {
                Method::Array => exclude.items_with_holes()?.map(|_| ()),
                Method::Caller => {
                    exclusion_sql = Some(exclude.caller_map_join("exclusions", EXCLUSION, "\n")?);
                    Some(())
                }
                Method::Missing(error) => return Err(error),
            };
            let flat_map = exclude.method_kind("exclusions", "flatMap")?;
            // Another receiver of `map` (a typed array maps to a list of 0s) is refused at
            // `exclusions.flatMap`, which only arrays have.
            if mapped.is_none() {
                if let Method::Missing(error) = flat_map {
                    return Err(error);
                }
                return Err(StoreError::Type("exclusions.map is not a function".into()));
            }
            match flat_map {
                Method::Missing(error) => return Err(error),
                Method::Caller => excluded = exclude.caller_flat_map_refs("exclusions")?,
                Method::Array => {
                    exclude.walk_as(Walk::FlatMap, |item| {
                        if let Some(exclusion) = item {
                            let (controller, key) = ResourceRef::of(exclusion).parts()?;
                            excluded.push(controller);
                            excluded.push(key);
                        }
                        Ok(())
                    })?;
                }
            }
        }
    }
    let claim = store.write(|conn| {
        let sql = (marks.as_str(), exclusion_sql.as_deref());
        let Some(row) = next_due_row(store, conn, (options, sql), &excluded, now)? else {
            return Ok(None);
        };
        take_lease(call, conn, &row, options, now)
    })?;
    let Some((claim, owner_handle)) = claim else {
        return Ok(Reply::undefined());
    };
    let mut reply = Reply::value(claim);
    // The record's `ownerId` is the caller's own value, read inside the transaction (below).
    if let Some(handle) = owner_handle {
        reply.echo.push(("ownerId", handle));
    }
    Ok(reply)
}

/// The earliest due queue item of these controllers whose lease is free or expired, with its
/// lease and queue item.
fn next_due_row(
    store: &Store,
    conn: &Db,
    (options, (placeholders, exclusion_sql)): (Js<'_>, (&str, Option<&str>)),
    excluded: &[Js<'_>],
    now: i64,
) -> Result<Option<ClaimRow>> {
    // `controllers.map(() => "?").join(", ")`: a hole joins as "" (SQLite refuses the list).
    let exclusion_sql = match exclusion_sql {
        Some(text) => text.to_owned(),
        None => vec![EXCLUSION; excluded.len() / 2].join("\n"),
    };
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
    // `...options.controllers`: the list read again, its items too.
    let controllers = options
        .get("controllers")?
        .sql_spread_as("options.controllers", Spread::Among)?;
    let mut params = Vec::with_capacity(controllers.len() + excluded.len() + 3);
    params.push(Param::text(project_id));
    params.extend(controllers.into_iter().map(Param::Js));
    params.extend(excluded.iter().map(|value| Param::Js(*value)));
    params.push(Param::int(now));
    params.push(Param::int(now));
    let bound = bind_params_for(&statement, &params)?;
    let mut rows = statement.query(params_from_iter(bound))?;
    Ok(match rows.next()? {
        Some(ref row) => Some(ClaimRow::from_row(row)?),
        None => None,
    })
}

/// Takes the next lease generation of `due` with a fresh token; returns the claim. The lease
/// and queue item were read with the row (nothing below changes the queue item).
fn take_lease(
    call: &Call,
    conn: &Db,
    due: &ClaimRow,
    options: Js<'_>,
    now: i64,
) -> Result<Option<(Value, Option<crate::js::Raw>)>> {
    let row = &due.row;
    let lease = due
        .lease
        .as_ref()
        .ok_or_else(|| StoreError::plain(format!("Lease is missing: {}", row.resource_id)))?;
    let token = random_token();
    let generation = lease.generation + 1;
    let expires = LeaseSum::of(call, now, options.get("leaseMs")?)?;
    let owner_id = options.get("ownerId")?;
    let token_hash = token_hash(&token);
    let holder = Holder {
        kind: HolderKind::Controller,
        owner_id: Param::Js(owner_id),
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
    // `insertEvent(…, options.ownerId, …)`: the owner read again, bound as better-sqlite3
    // binds it (a number is stored as its text, `5.0`, as in the lease row).
    let actor = bind_params(&[Param::Js(options.get("ownerId")?)])?;
    let payload = canonical(&json!({ "expiresAt": expires.json_value()? }));
    let event = (
        row.resource_id.as_str(),
        row.resource_version + 1,
        "lease.claimed",
    );
    let actor = Actor::Taker {
        owner_type: "controller",
        owner_id: Param::Own(actor[0].clone()),
        generation,
    };
    leases::insert_attributed_event_of(conn, event, actor, &payload, now, Payload::Fresh)?;
    let queue_version = due.require_queue_version()?;
    // `ownerId: options.ownerId` of the record, built inside the reference's transaction: read
    // a third time here (a live call hands the caller's value back as it is; `store.async`'s
    // JS layer puts its snapshot's there, `echo_props`).
    let (owner_again, owner_handle) = match options {
        Js::Live(object) => object.get_with_handle("ownerId")?,
        _ => (owner_id, None),
    };
    Ok(Some((
        json!({
            "controller": row.controller_name,
            "key": row.resource_key,
            "ownerId": owner_again.as_str().map_or(Value::Null, Value::from),
            "token": token,
            "generation": generation,
            "queueVersion": queue_version,
            "resourceVersion": row.resource_version + 1,
            "consecutiveErrors": due.consecutive_errors.unwrap_or(0),
            "expiresAt": expires.iso()?,
        }),
        owner_handle,
    )))
}

/// Extends an unexpired lease held exactly by `claim` (no transaction, as in the reference).
pub fn renew_claim(store: &Store, call: &Call) -> Result<Reply> {
    let claim = Js::arg(call, 0);
    let now = timestamp(call, Js::arg(call, 2))?;
    let expires = LeaseSum::of(call, now, Js::arg(call, 1))?;
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
    // written (renewClaim has no transaction), and so does a claim that cannot be assigned.
    let iso = expires.iso()?;
    if assign_text(claim, "expiresAt", &iso)? {
        return Ok(Reply::value(true));
    }
    Ok(Reply::value(true).set_claim("expiresAt", iso))
}

/// `settleClaim` (`requeue` undefined) and `requeueClaim`: a claim that no longer holds the
/// lease (even an expired one is accepted) makes this return false.
pub fn settle_claim(
    store: &Store,
    call: &Call,
    requeue: Option<Js<'_>>,
    now_value: Js<'_>,
) -> Result<Reply> {
    let now = timestamp(call, now_value)?;
    let claim = Js::arg(call, 0);
    let (settled, resource_version) = store.write(|conn| {
        let reference = ResourceRef::copied(claim)?;
        let Some(claimed) = claim_row(conn, store.project_id(), reference)? else {
            return Ok((false, None));
        };
        // Any failure of the check (a token Node cannot hash, too) means "not settled".
        if claimed.assert_claim(claim, now, false).is_err() {
            return Ok((false, None));
        }
        let row = &claimed.row;
        let current = claimed.require_queue_version()?;
        match requeue {
            None => {
                if claim.get("queueVersion")?.strict_eq_number(current as f64) {
                    conn.prepare_cached(
                        "DELETE FROM controller_queue WHERE controller_resource_id = ?",
                    )?
                    .execute_deferred([&row.controller_resource_id])?;
                }
            }
            Some(requeue) => requeue_row(call, conn, row, requeue, now)?,
        }
        // `releaseLease` looks the resource up again, `{controller: claim.controller, key:
        // claim.key}`, and releases nothing when that finds none (a getter changed). The names
        // of the row in hand find that row: only other values are looked up.
        let (controller, key) = ResourceRef::copied(claim)?.parts()?;
        let same_names = controller.as_str() == Some(row.controller_name.as_str())
            && key.as_str() == Some(row.resource_key.as_str());
        if !same_names
            && controller_row(
                conn,
                store.project_id(),
                ResourceRef::Parts(controller, key),
            )?
            .is_none()
        {
            return Ok((true, None));
        }
        // Neither queue change touches the revision read with the row.
        let released = release_lease(conn, &row.resource_id, row.resource_version, claim, now)?;
        // `claim.resourceVersion = revision + 1`, inside the transaction as in the reference.
        match released {
            Some(version) if assign(claim, "resourceVersion", version as f64)? => Ok((true, None)),
            released => Ok((true, released)),
        }
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
    call: &Call,
    conn: &Db,
    row: &ControllerRow,
    requeue: Js<'_>,
    now: i64,
) -> Result<()> {
    // `requeue.error === undefined ? null : putText(requeue.error)`: two reads.
    let error_hash = if requeue.get("error")?.is_undefined() {
        None
    } else {
        Some(put_caller_text(conn, requeue.get("error")?, now)?)
    };
    let mut statement = conn.prepare_cached(
        "UPDATE controller_queue
         SET available_at = ?, queue_version = queue_version + 1,
             consecutive_errors = consecutive_errors + 1,
             last_error_hash = ?, updated_at = ? WHERE controller_resource_id = ?",
    )?;
    // `epoch(requeue.availableAt)`: `Date.parse` (NaN binds as NULL).
    let available_at = date_parse(call, requeue.get("availableAt")?)?;
    statement.execute(params_from_iter(bind_params(&[
        available_at,
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

/// `requeueClaim` (a row of the method table).
pub fn requeue_claim(store: &Store, call: &Call) -> Result<Reply> {
    // `requeue === undefined` settles without requeueing; `null` is read (and throws).
    let requeue = Some(Js::arg(call, 1)).filter(|options| !options.is_undefined());
    settle_claim(store, call, requeue, Js::arg(call, 2))
}
