//! Controller effects: idempotent reservation of an external side effect per
//! resource and key, its state updates under the resource's claim, and reads.

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row};
use serde_json::{json, Map, Value};

use super::js::{bind_params, read, same_number, same_text, same_value, Js, Param};
use super::rows::{
    bump_controller_resource, insert_claim_event, put_caller_text, require_claim_row_by_uid,
};
use super::rows::{not_found_error, opt_text_lossy, text_lossy, ControllerRow};
use super::time_at;
use crate::error::{Result, StoreError};
use crate::state::blobs::{put_json, read_text};
use crate::state::ids::{effect_id_for, resource_id_for};
use crate::state::json::canonical;
use crate::state::leases::insert_lease;
use crate::state::revisions::resource_revision;
use crate::store::Store;
use crate::time::iso;
use crate::wire::{Call, Reply};

/// An effect joined with its source controller resource and payload.
struct EffectRow {
    effect_id: String,
    resource_uid: String,
    generation: i64,
    kind: String,
    state: String,
    /// `json_extract(payload, '$.requestFingerprint')`, of whatever type it has.
    request_fingerprint: Value,
    started_at: i64,
    completed_at: Option<i64>,
    external_ref: Option<String>,
    error_hash: Option<Vec<u8>>,
}

/// The reference's `effectSelect`; `clause` follows the joins.
fn effect_select(clause: &str) -> String {
    format!(
        "SELECT e.effect_id, c.uid, c.generation, e.effect_type, e.status,
                json_extract(CAST(b.content AS TEXT), '$.requestFingerprint'),
                e.created_at, e.settled_at, e.external_ref, e.error_hash
         FROM effects e
         JOIN controller_resources c ON c.resource_id = e.source_resource_id
         JOIN blobs b ON b.blob_hash = e.payload_hash {clause}"
    )
}

impl EffectRow {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<EffectRow> {
        Ok(EffectRow {
            effect_id: row.get(0)?,
            resource_uid: row.get(1)?,
            generation: row.get(2)?,
            kind: text_lossy(row, 3)?,
            state: row.get(4)?,
            request_fingerprint: sql_to_json(row.get(5)?),
            started_at: row.get(6)?,
            completed_at: row.get(7)?,
            external_ref: opt_text_lossy(row, 8)?,
            error_hash: row.get(9)?,
        })
    }
}

/// A SQLite value as better-sqlite3 hands it to JavaScript.
fn sql_to_json(value: SqlValue) -> Value {
    match value {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) => i.into(),
        SqlValue::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        SqlValue::Text(text) => text.into(),
        SqlValue::Blob(bytes) => bytes.into(),
    }
}

fn effect_row(
    conn: &Connection,
    uid: Option<&Value>,
    key: Option<&Value>,
) -> Result<Option<EffectRow>> {
    let mut statement =
        conn.prepare_cached(&effect_select("WHERE c.uid = ? AND e.idempotency_key = ?"))?;
    let bound = bind_params(&[Param::Caller(uid), Param::Caller(key)])?;
    Ok(statement
        .query_row(params_from_iter(bound), EffectRow::from_row)
        .optional()?)
}

fn require_effect_row(
    conn: &Connection,
    uid: Option<&Value>,
    key: Option<&Value>,
) -> Result<EffectRow> {
    effect_row(conn, uid, key)?
        .ok_or_else(|| not_found_error("Effect record not found: ", &[uid, key]))
}

fn effect_key(conn: &Connection, effect_id: &str) -> Result<String> {
    conn.prepare_cached("SELECT idempotency_key FROM effects WHERE effect_id = ?")?
        .query_row([effect_id], |row| text_lossy(row, 0))
        .optional()?
        .ok_or_else(|| StoreError::plain(format!("Effect is missing: {effect_id}")))
}

/// The stored `ambiguous` is reported as `indeterminate`, and back.
fn record_state(status: &str) -> &str {
    if status == "ambiguous" {
        "indeterminate"
    } else {
        status
    }
}

/// `EffectRecord`: `completedAt`, `externalRef` and `error` exist only when set.
fn map_effect(conn: &Connection, row: &EffectRow) -> Result<Value> {
    let mut record = Map::new();
    record.insert("key".into(), effect_key(conn, &row.effect_id)?.into());
    record.insert("resourceUid".into(), row.resource_uid.clone().into());
    record.insert("generation".into(), row.generation.into());
    record.insert("kind".into(), row.kind.clone().into());
    record.insert("state".into(), record_state(&row.state).into());
    record.insert("requestFingerprint".into(), row.request_fingerprint.clone());
    record.insert("startedAt".into(), iso(row.started_at).into());
    if let Some(completed_at) = row.completed_at {
        record.insert("completedAt".into(), iso(completed_at).into());
    }
    if let Some(external_ref) = &row.external_ref {
        record.insert("externalRef".into(), external_ref.clone().into());
    }
    if let Some(hash) = &row.error_hash {
        record.insert(
            "error".into(),
            read_text(conn, hash)?.unwrap_or_default().into(),
        );
    }
    Ok(Value::Object(record))
}

/// Canonical JSON of `{key, resourceUid, generation, kind, requestFingerprint}` from the
/// caller's values, without the ones the caller left undefined.
fn reservation_payload(options: Option<&Value>) -> Result<String> {
    let mut payload = Map::new();
    // Checked in sorted key order, as canonical JSON walks them.
    for name in [
        "generation",
        "key",
        "kind",
        "requestFingerprint",
        "resourceUid",
    ] {
        if let Some(value) = read(options, name)? {
            payload.insert(name.into(), Js::of(value).json_value()?);
        }
    }
    Ok(canonical(&Value::Object(payload)))
}

pub fn reserve_effect(store: &Store, call: &Call) -> Result<Reply> {
    let options = call.args.first();
    let now = time_at(read(options, "now")?, call)?;
    let uid = read(options, "resourceUid")?;
    let key = read(options, "key")?;
    let reservation = store.write(|conn| {
        let claimed = require_claim_row_by_uid(conn, uid)?;
        let lease = claimed.assert_claim(read(options, "claim")?, now, true)?;
        let source = claimed.row;
        let effect_id = effect_id_for(&source.resource_id, &Js::opt(key).template()?);
        if let Some(existing) = effect_row(conn, uid, key)? {
            let same_request = same_number(existing.generation, read(options, "generation")?)
                && same_text(&existing.kind, read(options, "kind")?)
                && same_value(
                    &existing.request_fingerprint,
                    read(options, "requestFingerprint")?,
                );
            if !same_request {
                return Err(StoreError::EffectRequestConflict {
                    key: key.cloned().unwrap_or(Value::Null),
                });
            }
            return Ok(json!({ "record": map_effect(conn, &existing)?, "created": false }));
        }
        let effect_resource_id = resource_id_for("effect", &effect_id);
        let payload_hash = put_json(conn, &reservation_payload(options)?, now)?;
        conn.prepare_cached(
            "INSERT INTO resources(
               resource_id, resource_type, aggregate_key, revision, created_at, updated_at
             ) VALUES (?, 'effect', ?, 1, ?, ?)",
        )?
        .execute(params![effect_resource_id, effect_id, now, now])?;
        insert_lease(conn, &effect_resource_id)?;
        let mut statement = conn.prepare_cached(
            "INSERT INTO effects(
               effect_id, resource_id, source_resource_id, source_revision, effect_type,
               idempotency_key, payload_hash, owner_scope, status, attempt_count,
               created_at, updated_at
             ) VALUES (?, ?, ?, ?, ?, ?, ?, 'controller', 'pending', 0, ?, ?)",
        )?;
        statement.execute(params_from_iter(bind_params(&[
            Param::text(&effect_id),
            Param::text(&effect_resource_id),
            Param::text(&source.resource_id),
            Param::int(source.resource_version),
            Param::Caller(read(options, "kind")?),
            Param::Caller(key),
            Param::blob(&payload_hash[..]),
            Param::int(now),
            Param::int(now),
        ])?))?;
        insert_claim_event(conn, &effect_resource_id, 1, "effect.reserved", &lease, now)?;
        let record = match reserved_record(options, &source, now)? {
            Some(record) => record,
            None => map_effect(conn, &require_effect_row(conn, uid, key)?)?,
        };
        Ok(json!({ "record": record, "created": true }))
    })?;
    Ok(Reply::value(reservation))
}

/// The record of the effect `reserveEffect` just inserted, from the values it inserted, when
/// they read back as they are: a string `key` and `kind` (the `key` column and `kind` of the
/// record), and a string or absent/null `requestFingerprint` (what `json_extract` gives of the
/// stored payload). `None` otherwise: the record is then read back.
fn reserved_record(
    options: Option<&Value>,
    source: &ControllerRow,
    now: i64,
) -> Result<Option<Value>> {
    let (Some(Value::String(key)), Some(Value::String(kind))) =
        (read(options, "key")?, read(options, "kind")?)
    else {
        return Ok(None);
    };
    let fingerprint = match read(options, "requestFingerprint")? {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(text)) => Value::String(text.clone()),
        Some(_) => return Ok(None),
    };
    let mut record = Map::new();
    record.insert("key".into(), key.as_str().into());
    record.insert("resourceUid".into(), source.uid.clone().into());
    record.insert("generation".into(), source.generation.into());
    record.insert("kind".into(), kind.as_str().into());
    record.insert("state".into(), "pending".into());
    record.insert("requestFingerprint".into(), fingerprint);
    record.insert("startedAt".into(), iso(now).into());
    Ok(Some(Value::Object(record)))
}

/// The record of the effect `updateEffect` just updated, from `row` (read before the update)
/// and the values it wrote, when they read back as they are: a string `key`, `state` and
/// `error` (or none), a string or absent/null `externalRef`. `None` otherwise.
fn updated_record(
    options: Option<&Value>,
    source: &ControllerRow,
    row: &EffectRow,
    now: i64,
) -> Option<Value> {
    let key = read(options, "key").ok()??.as_str()?;
    let state = read(options, "state").ok()??.as_str()?;
    let stored_state = if state == "indeterminate" {
        "ambiguous"
    } else {
        state
    };
    let external_ref = match read(options, "externalRef").ok()? {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.as_str()),
        Some(_) => return None,
    };
    let error = match read(options, "error").ok()? {
        None => None,
        Some(Value::String(text)) => Some(text.as_str()),
        Some(_) => return None,
    };
    let mut record = Map::new();
    record.insert("key".into(), key.into());
    record.insert("resourceUid".into(), row.resource_uid.clone().into());
    record.insert("generation".into(), source.generation.into());
    record.insert("kind".into(), row.kind.clone().into());
    record.insert("state".into(), record_state(stored_state).into());
    record.insert("requestFingerprint".into(), row.request_fingerprint.clone());
    record.insert("startedAt".into(), iso(row.started_at).into());
    if state != "pending" {
        record.insert("completedAt".into(), iso(now).into());
    }
    if let Some(external_ref) = external_ref {
        record.insert("externalRef".into(), external_ref.into());
    }
    if let Some(error) = error {
        record.insert("error".into(), error.into());
    }
    Some(Value::Object(record))
}

pub fn get_effect(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let row = effect_row(conn, call.args.first(), call.args.get(1))?;
    Ok(Reply::maybe(
        row.map(|row| map_effect(conn, &row)).transpose()?,
    ))
}

pub fn update_effect(store: &Store, call: &Call) -> Result<Reply> {
    let options = call.args.first();
    let now = time_at(read(options, "now")?, call)?;
    let record = store.write(|conn| {
        let uid = read(options, "resourceUid")?;
        let claimed = require_claim_row_by_uid(conn, uid)?;
        let lease = claimed.assert_claim(read(options, "claim")?, now, true)?;
        let source = claimed.row;
        let key = read(options, "key")?;
        let row = require_effect_row(conn, uid, key)?;
        let effect_resource_id = resource_id_for("effect", &row.effect_id);
        let revision = resource_revision(conn, &effect_resource_id)?;
        let error_hash = read(options, "error")?
            .map(|error| put_caller_text(conn, Some(error), now))
            .transpose()?;
        let mut statement = conn.prepare_cached(
            "UPDATE effects
             SET status = ?, external_ref = ?, error_hash = ?, updated_at = ?, settled_at = ?
             WHERE effect_id = ?",
        )?;
        let state = read(options, "state")?;
        let stored_status = match state {
            Some(Value::String(state)) if state == "indeterminate" => Param::text("ambiguous"),
            other => Param::Caller(other),
        };
        // `options.externalRef ?? null`
        let external_ref = read(options, "externalRef")?.filter(|value| !value.is_null());
        let pending = state.and_then(Value::as_str) == Some("pending");
        statement.execute(params_from_iter(bind_params(&[
            stored_status,
            Param::Caller(external_ref),
            error_hash
                .as_ref()
                .map_or(Param::null(), |hash| Param::blob(&hash[..])),
            Param::int(now),
            if pending {
                Param::null()
            } else {
                Param::int(now)
            },
            Param::text(&row.effect_id),
        ])?))?;
        bump_controller_resource(conn, &effect_resource_id, revision, now)?;
        let event_type = format!("effect.{}", Js::opt(state).template()?);
        insert_claim_event(
            conn,
            &effect_resource_id,
            revision + 1,
            &event_type,
            &lease,
            now,
        )?;
        match updated_record(options, &source, &row, now) {
            Some(record) => Ok(record),
            None => map_effect(conn, &require_effect_row(conn, uid, key)?),
        }
    })?;
    Ok(Reply::value(record))
}

pub fn list_effects(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let mut statement = conn.prepare_cached(&effect_select(
        "WHERE c.uid = ? ORDER BY e.created_at, e.effect_id",
    ))?;
    let bound = bind_params(&[Param::Caller(call.args.first())])?;
    let rows = statement
        .query_map(params_from_iter(bound), EffectRow::from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let records = rows
        .iter()
        .map(|row| map_effect(conn, row))
        .collect::<Result<Vec<_>>>()?;
    Ok(Reply::value(records))
}
