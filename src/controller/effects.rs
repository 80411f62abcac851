//! Controller effects: idempotent reservation of an external side effect per resource and key,
//! its state updates under the resource's claim, and reads. Every `EffectRecord` is written by
//! `EffectRecord::write`, from a row or from what a write stored.

use std::borrow::Cow;
use std::sync::LazyLock;

use crate::sql::{params, params_from_iter, Db, OptionalExtension, Row};
use rusqlite::types::ValueRef;
use serde_json::Value;

use super::rows::claim::require_claim_row_by_uid;
use super::rows::{bump_controller_resource, put_caller_text};
use super::rows::{error_argument, not_found_error, opt_text_lossy, text_lossy, ControllerRow};
use crate::error::{Result, StoreError};
use crate::js::{bind_params, canonical_literal, timestamp, Js, Param};
use crate::state::blobs::{put_json, read_text};
use crate::state::ids::{effect_id_for, resource_id_for};
use crate::state::leases::insert_lease;
use crate::state::leases::{insert_attributed_event, Actor};
use crate::state::revisions::resource_revision;
use crate::store::Store;
use crate::wire::{json_text, Call, ObjectWriter, Reply};

/// An effect joined with its source controller resource and payload.
struct EffectRow {
    effect_id: String,
    /// `idempotency_key`, the record's `key` (the reference reads it with a statement of its
    /// own, by `effect_id`: the same row, so the same value).
    key: String,
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

/// The reference's `effectSelect` with the key; `clause` follows the joins.
fn effect_select(clause: &str) -> String {
    effect_select_with("", clause)
}

/// [`effect_select`] with `columns` (`, …`) after the record's.
fn effect_select_with(columns: &str, clause: &str) -> String {
    format!(
        "SELECT e.effect_id, e.idempotency_key, c.uid, c.generation, e.effect_type, e.status,
                json_extract(CAST(b.content AS TEXT), '$.requestFingerprint'),
                e.created_at, e.settled_at, e.external_ref, e.error_hash{columns}
         FROM effects e
         JOIN controller_resources c ON c.resource_id = e.source_resource_id
         JOIN blobs b ON b.blob_hash = e.payload_hash {clause}"
    )
}

impl EffectRow {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<EffectRow> {
        Ok(EffectRow {
            effect_id: row.get(0)?,
            key: text_lossy(row, 1)?,
            resource_uid: row.get(2)?,
            generation: row.get(3)?,
            kind: text_lossy(row, 4)?,
            state: row.get(5)?,
            request_fingerprint: sql_to_json(row.get_ref(6)?),
            started_at: row.get(7)?,
            completed_at: row.get(8)?,
            external_ref: opt_text_lossy(row, 9)?,
            error_hash: row.get(10)?,
        })
    }

    /// The record of this row; its error is read from its blob.
    fn write_record(&self, conn: &Db, out: &mut String) -> Result<()> {
        let error = match &self.error_hash {
            Some(hash) => Some(read_text(conn, hash)?.unwrap_or_default()),
            None => None,
        };
        EffectRecord {
            error: error.as_deref(),
            ..self.record()
        }
        .write(out);
        Ok(())
    }

    /// The record's fields held by the row (all but the error, which is in a blob).
    fn record(&self) -> EffectRecord<'_> {
        EffectRecord {
            key: &self.key,
            resource_uid: &self.resource_uid,
            generation: self.generation,
            kind: &self.kind,
            status: &self.state,
            request_fingerprint: Cow::Borrowed(&self.request_fingerprint),
            started_at: self.started_at,
            completed_at: self.completed_at,
            external_ref: self.external_ref.as_deref(),
            error: None,
        }
    }
}

/// A SQLite value as better-sqlite3 hands it to JavaScript (text as V8 decodes it: the WTF-8
/// of a lone surrogate, which `json_extract` writes for a `\ud800` escape, is a U+FFFD for
/// each byte).
fn sql_to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(text) => String::from_utf8_lossy(text).into(),
        ValueRef::Blob(bytes) => bytes.into(),
    }
}

/// An `EffectRecord`'s values as the effect row holds them (`status` is the stored one), from
/// a read or from what a write has just stored.
struct EffectRecord<'a> {
    key: &'a str,
    resource_uid: &'a str,
    generation: i64,
    kind: &'a str,
    status: &'a str,
    request_fingerprint: Cow<'a, Value>,
    started_at: i64,
    completed_at: Option<i64>,
    external_ref: Option<&'a str>,
    error: Option<&'a str>,
}

impl EffectRecord<'_> {
    /// The one writer of `EffectRecord`, as JSON text: `completedAt`, `externalRef` and
    /// `error` exist only when set.
    fn write(&self, out: &mut String) {
        let mut record = ObjectWriter::new(out);
        record
            .str("key", self.key)
            .str("resourceUid", self.resource_uid)
            .int("generation", self.generation)
            .str("kind", self.kind)
            .str("state", record_state(self.status));
        match &*self.request_fingerprint {
            Value::String(text) => record.str("requestFingerprint", text),
            other => record.raw("requestFingerprint", &json_text(other)),
        };
        record.time("startedAt", self.started_at);
        if let Some(completed_at) = self.completed_at {
            record.time("completedAt", completed_at);
        }
        if let Some(external_ref) = self.external_ref {
            record.str("externalRef", external_ref);
        }
        if let Some(error) = self.error {
            record.str("error", error);
        }
        record.finish();
    }
}

fn effect_row(conn: &Db, uid: Js<'_>, key: Js<'_>) -> Result<Option<EffectRow>> {
    let mut statement =
        conn.prepare_cached(&effect_select("WHERE c.uid = ? AND e.idempotency_key = ?"))?;
    let bound = bind_params(&[Param::Js(uid), Param::Js(key)])?;
    Ok(statement
        .query_row(params_from_iter(bound), EffectRow::from_row)
        .optional()?)
}

fn require_effect_row(conn: &Db, uid: Js<'_>, key: Js<'_>) -> Result<EffectRow> {
    effect_row(conn, uid, key)?
        .ok_or_else(|| not_found_error("Effect record not found: ", &[uid, key]))
}

/// [`require_effect_row`] with the revision of the effect's own resource, read in the same
/// statement: the row's `resource_id` and that resource's revision, when they are a text and
/// an integer.
fn require_effect_row_and_revision(
    conn: &Db,
    uid: Js<'_>,
    key: Js<'_>,
) -> Result<(EffectRow, Option<String>, Option<i64>)> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        effect_select_with(
            ", e.resource_id, r.revision",
            "LEFT JOIN resources r ON r.resource_id = e.resource_id
             WHERE c.uid = ? AND e.idempotency_key = ?",
        )
    });
    let bound = bind_params(&[Param::Js(uid), Param::Js(key)])?;
    conn.prepare_cached(&SQL)?
        .query_row(params_from_iter(bound), |row| {
            let resource_id = row.get_ref(11)?.as_str().ok().map(str::to_owned);
            let revision = row.get_ref(12)?.as_i64().ok();
            Ok((EffectRow::from_row(row)?, resource_id, revision))
        })
        .optional()?
        .ok_or_else(|| not_found_error("Effect record not found: ", &[uid, key]))
}

/// `stored === caller` for the request fingerprint read from the payload (`json_extract`: a
/// string, number or null; objects and arrays are never identical to a caller's).
fn same_stored(stored: &Value, caller: Js<'_>) -> bool {
    match stored {
        Value::Null => caller == Js::Null,
        Value::Bool(b) => caller == Js::Bool(*b),
        Value::Number(n) => n.as_f64().is_some_and(|n| caller.strict_eq_number(n)),
        Value::String(text) => caller.strict_eq_str(text),
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// The stored `ambiguous` is reported as `indeterminate`, and back.
fn record_state(status: &str) -> &str {
    if status == "ambiguous" {
        "indeterminate"
    } else {
        status
    }
}

/// `{record, created}` of a reservation, `record` written by `write_record`.
fn reservation_text(
    created: bool,
    write_record: impl FnOnce(&mut String) -> Result<()>,
) -> Result<String> {
    let mut out = String::with_capacity(320);
    let mut reservation = ObjectWriter::new(&mut out);
    write_record(reservation.key("record"))?;
    reservation.bool("created", created).finish();
    Ok(out)
}

/// `canonicalJson({key, resourceUid, generation, kind, requestFingerprint})` of the caller's
/// values, read in the literal's order.
fn reservation_payload(call: &Call, options: Js<'_>) -> Result<String> {
    let mut fields = Vec::with_capacity(5);
    for name in [
        "key",
        "resourceUid",
        "generation",
        "kind",
        "requestFingerprint",
    ] {
        fields.push((name, options.get(name)?));
    }
    canonical_literal(call, &fields)
}

pub fn reserve_effect(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let now = timestamp(call, options.get("now")?)?;
    // Each use reads `options.resourceUid` and `options.key` again, as the reference's
    // expressions do: the claimed row, the effect id, the existing row, the error, the
    // payload, the insert and the record read back.
    let reservation = store.write(|conn| {
        let claimed = require_claim_row_by_uid(conn, options.get("resourceUid")?)?;
        claimed.assert_claim(options.get("claim")?, now, true)?;
        let source = claimed.row;
        let effect_id = effect_id_for(&source.resource_id, &options.get("key")?.template()?);
        if let Some(existing) = effect_row(conn, options.get("resourceUid")?, options.get("key")?)?
        {
            let same_request = options
                .get("generation")?
                .strict_eq_number(existing.generation as f64)
                && options.get("kind")?.strict_eq_str(&existing.kind)
                && same_stored(
                    &existing.request_fingerprint,
                    options.get("requestFingerprint")?,
                );
            if !same_request {
                return Err(match error_argument(call, options.get("key")?) {
                    Ok(key) => StoreError::EffectRequestConflict { key },
                    Err(thrown) => thrown,
                });
            }
            return reservation_text(false, |out| existing.write_record(conn, out));
        }
        let effect_resource_id = resource_id_for("effect", &effect_id);
        let payload_hash = put_json(conn, &reservation_payload(call, options)?, now)?;
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
            Param::Js(options.get("kind")?),
            Param::Js(options.get("key")?),
            Param::blob(&payload_hash[..]),
            Param::int(now),
            Param::int(now),
        ])?))?;
        insert_attributed_event(
            conn,
            &effect_resource_id,
            1,
            "effect.reserved",
            Actor::claim(|| options.get("claim"))?,
            "{}",
            now,
        )?;
        match reserved_record(call, options, &source, now)? {
            Some(record) => reservation_text(true, |out| {
                record.write(out);
                Ok(())
            }),
            None => {
                let (uid, key) = (options.get("resourceUid")?, options.get("key")?);
                let row = require_effect_row(conn, uid, key)?;
                reservation_text(true, |out| row.write_record(conn, out))
            }
        }
    })?;
    Ok(Reply::json_text(reservation))
}

/// The record of the effect `reserveEffect` just inserted, from the values it inserted, when
/// they read back as they are: a string `key` and `kind` (the `key` column and `kind` of the
/// record), and a string or absent/null `requestFingerprint` (what `json_extract` gives of the
/// stored payload). `None` otherwise: the record is then read back.
fn reserved_record<'a>(
    call: &Call,
    options: Js<'a>,
    source: &'a ControllerRow,
    now: i64,
) -> Result<Option<EffectRecord<'a>>> {
    // A live call reads the record back: reading the caller's fields again would be reads the
    // reference does not make.
    if call.cx().is_some() {
        return Ok(None);
    }
    let (Js::String(key), Js::String(kind)) = (options.get("key")?, options.get("kind")?) else {
        return Ok(None);
    };
    let request_fingerprint = match options.get("requestFingerprint")? {
        Js::Undefined | Js::Null => Cow::Owned(Value::Null),
        Js::String(text) => Cow::Owned(Value::String(text.into())),
        _ => return Ok(None),
    };
    Ok(Some(EffectRecord {
        key,
        resource_uid: &source.uid,
        generation: source.generation,
        kind,
        status: "pending",
        request_fingerprint,
        started_at: now,
        completed_at: None,
        external_ref: None,
        error: None,
    }))
}

/// The record of the effect `updateEffect` just updated, from `row` (read before the update)
/// and the values it wrote, when they read back as they are: a string `state` and `error` (or
/// none), a string or absent/null `externalRef`. `None` otherwise.
fn updated_record<'a>(
    call: &Call,
    options: Js<'a>,
    row: &'a EffectRow,
    now: i64,
) -> Option<EffectRecord<'a>> {
    // As in `reserved_record`: a live call reads the record back.
    if call.cx().is_some() {
        return None;
    }
    let state = options.get("state").ok()?.as_str()?;
    let external_ref = match options.get("externalRef").ok()? {
        Js::Undefined | Js::Null => None,
        Js::String(text) => Some(text),
        _ => return None,
    };
    let error = match options.get("error").ok()? {
        Js::Undefined => None,
        Js::String(text) => Some(text),
        _ => return None,
    };
    Some(EffectRecord {
        status: stored_status(state),
        completed_at: (state != "pending").then_some(now),
        external_ref,
        error,
        ..row.record()
    })
}

/// The `status` column of a record `state`.
fn stored_status(state: &str) -> &str {
    if state == "indeterminate" {
        "ambiguous"
    } else {
        state
    }
}

pub fn get_effect(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let Some(row) = effect_row(conn, Js::arg(call, 0), Js::arg(call, 1))? else {
        return Ok(Reply::undefined());
    };
    let mut out = String::with_capacity(256);
    row.write_record(conn, &mut out)?;
    Ok(Reply::json_text(out))
}

pub fn update_effect(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let now = timestamp(call, options.get("now")?)?;
    let record = store.write(|conn| {
        // Each use reads the field again, as the reference's expressions do.
        let claimed = require_claim_row_by_uid(conn, options.get("resourceUid")?)?;
        claimed.assert_claim(options.get("claim")?, now, true)?;
        let (row, row_resource_id, row_revision) = require_effect_row_and_revision(
            conn,
            options.get("resourceUid")?,
            options.get("key")?,
        )?;
        let effect_resource_id = resource_id_for("effect", &row.effect_id);
        // The reference reads the revision of the resource id it computes: the one the row
        // names (`reserveEffect` inserts them so), read with the row; another writer's row
        // that names another, or none, is looked up by the computed id.
        let revision = match row_revision {
            Some(revision) if row_resource_id.as_deref() == Some(&effect_resource_id) => revision,
            _ => resource_revision(conn, &effect_resource_id)?,
        };
        let error_hash = if options.get("error")?.is_undefined() {
            None
        } else {
            Some(put_caller_text(conn, options.get("error")?, now)?)
        };
        let mut statement = conn.prepare_cached(
            "UPDATE effects
             SET status = ?, external_ref = ?, error_hash = ?, updated_at = ?, settled_at = ?
             WHERE effect_id = ?",
        )?;
        let state = options.get("state")?;
        let stored_status = match state {
            Js::String(state) => Param::text(stored_status(state)),
            other => Param::Js(other),
        };
        // `options.externalRef ?? null`
        let external_ref = options.get("externalRef")?.or(Js::Null);
        let pending = options.get("state")?.strict_eq_str("pending");
        statement.execute(params_from_iter(bind_params(&[
            stored_status,
            Param::Js(external_ref),
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
        let event_type = format!("effect.{}", options.get("state")?.template()?);
        insert_attributed_event(
            conn,
            &effect_resource_id,
            revision + 1,
            &event_type,
            Actor::claim(|| options.get("claim"))?,
            "{}",
            now,
        )?;
        let mut out = String::with_capacity(256);
        match updated_record(call, options, &row, now) {
            Some(record) => record.write(&mut out),
            None => {
                let (uid, key) = (options.get("resourceUid")?, options.get("key")?);
                require_effect_row(conn, uid, key)?.write_record(conn, &mut out)?
            }
        }
        Ok(out)
    })?;
    Ok(Reply::json_text(record))
}

pub fn list_effects(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let mut statement = conn.prepare_cached(&effect_select(
        "WHERE c.uid = ? ORDER BY e.created_at, e.effect_id",
    ))?;
    let bound = bind_params(&[Param::Js(Js::arg(call, 0))])?;
    let rows = statement
        .query_map(params_from_iter(bound), EffectRow::from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut out = String::with_capacity(16 + rows.len() * 256);
    out.push('[');
    for (index, row) in rows.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        row.write_record(conn, &mut out)?;
    }
    out.push(']');
    Ok(Reply::json_text(out))
}
