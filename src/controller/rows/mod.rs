//! The controller resource row and what every controller method builds on: lookups by
//! reference and by uid, the `ControllerResource` record, finalizers, the work-queue row, and
//! the claim checks that fence writes by lease generation and token.
//!
//! Split by concern: [`documented`] (the whole record in one read), [`finalizers`],
//! [`queue_item`] (the work-queue row) and [`claim`] (the claim checks and fences); callers
//! import from the submodule that owns the item.

pub mod claim;
pub mod documented;
pub mod finalizers;
pub mod queue_item;

use std::sync::LazyLock;

use crate::sql::{params_from_iter, Db, OptionalExtension, Row};
use rusqlite::types::ValueRef;
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::js::{bind_params, buffer_from, Encoding, Js, Param};
use crate::state::blobs::{put_blob, put_text, BlobHash, JsonReads, MEDIA_TEXT};
use crate::state::revisions::compare_and_set_revision;
use crate::store::Store;
use crate::wire::{json_text, ObjectWriter};

/// A `controller_resources` row joined with its resource revision.
#[derive(Debug, Clone)]
pub struct ControllerRow {
    /// `controller_resources.controller_resource_id` (`controller-resource-<uuid>`).
    pub controller_resource_id: String,
    /// The `resources` row the controller resource belongs to.
    pub resource_id: String,
    /// `resources.revision`, returned as `metadata.resourceVersion`.
    pub resource_version: i64,
    /// `controller_name`.
    pub controller_name: String,
    /// `resource_key`.
    pub resource_key: String,
    /// The public `uid` (a random UUID).
    pub uid: String,
    /// Bumped on every spec change.
    pub generation: i64,
    /// Blob hash of the canonical spec JSON.
    pub spec_hash: Vec<u8>,
    /// Blob hash of the canonical status JSON.
    pub status_hash: Vec<u8>,
    /// Epoch ms of `requestDeletion`, or `None`.
    pub deletion_requested_at: Option<i64>,
}

/// The reference's `controllerSelect`; `clause` follows the join.
/// The columns [`ControllerRow::from_row`] reads, over `controller_resources c` and
/// `resources r`.
pub const CONTROLLER_COLUMNS: &str = "c.controller_resource_id, c.resource_id, r.revision,
    c.controller_name, c.resource_key, c.uid, c.generation,
    c.spec_hash, c.status_hash, c.deletion_requested_at";

/// `SELECT` of [`CONTROLLER_COLUMNS`] over `controller_resources c JOIN resources r`, then
/// `clause`.
pub fn controller_select(clause: &str) -> String {
    format!(
        "SELECT {CONTROLLER_COLUMNS}
         FROM controller_resources c JOIN resources r ON r.resource_id = c.resource_id {clause}"
    )
}

impl ControllerRow {
    /// Reads a row selected by [`controller_select`].
    pub fn from_row(row: &Row<'_>) -> rusqlite::Result<ControllerRow> {
        Ok(ControllerRow {
            controller_resource_id: row.get(0)?,
            resource_id: row.get(1)?,
            resource_version: row.get(2)?,
            controller_name: text_lossy(row, 3)?,
            resource_key: text_lossy(row, 4)?,
            uid: row.get(5)?,
            generation: row.get(6)?,
            spec_hash: row.get(7)?,
            status_hash: row.get(8)?,
            deletion_requested_at: row.get(9)?,
        })
    }
}

/// A TEXT column as better-sqlite3 hands it to JavaScript: bytes that are not UTF-8 (a lone
/// surrogate of a caller's string is bound as V8's 3-byte sequence) become U+FFFD per maximal
/// invalid subpart, as V8 decodes them; any other type fails as `row.get::<String>` does.
pub fn text_lossy(row: &Row<'_>, index: usize) -> rusqlite::Result<String> {
    match row.get_ref(index)? {
        ValueRef::Text(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        _ => row.get(index),
    }
}

/// [`text_lossy`] of a nullable column.
pub fn opt_text_lossy(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<String>> {
    match row.get_ref(index)? {
        ValueRef::Null => Ok(None),
        _ => text_lossy(row, index).map(Some),
    }
}

/// A `{controller, key}` reference as the caller gave it: either the object itself, whose
/// properties are read where the reference reads them (reading them from `null` or `undefined`
/// throws there, not before), or the two values already read (`{controller: claim.controller,
/// key: claim.key}` built by the reference before the lookup).
#[derive(Debug, Clone, Copy)]
pub enum ResourceRef<'a> {
    /// The caller's reference object.
    Object(Js<'a>),
    /// `controller` and `key`, already read.
    Parts(Js<'a>, Js<'a>),
}

impl<'a> ResourceRef<'a> {
    /// The caller's reference object.
    pub fn of(object: Js<'a>) -> ResourceRef<'a> {
        ResourceRef::Object(object)
    }

    /// `{controller: object.controller, key: object.key}`: both read now.
    pub fn copied(object: Js<'a>) -> Result<ResourceRef<'a>> {
        let (controller, key) = ResourceRef::Object(object).parts()?;
        Ok(ResourceRef::Parts(controller, key))
    }

    /// `ref.controller`, then `ref.key`.
    pub fn parts(self) -> Result<(Js<'a>, Js<'a>)> {
        match self {
            ResourceRef::Object(object) => Ok((object.get("controller")?, object.get("key")?)),
            ResourceRef::Parts(controller, key) => Ok((controller, key)),
        }
    }

    /// Both values when they are strings (stored and read back as they are).
    pub fn texts(self) -> Option<(&'a str, &'a str)> {
        match self.parts() {
            Ok((Js::String(controller), Js::String(key))) => Some((controller, key)),
            _ => None,
        }
    }

    /// `new ResourceNotFoundError(ref.controller, ref.key)` (or the TypeError of those reads,
    /// or of the constructor's template string).
    pub fn not_found(self) -> StoreError {
        match self.templated() {
            Ok((controller, key)) => StoreError::ResourceNotFound { controller, key },
            Err(error) => error,
        }
    }

    /// `new ResourceConflictError(ref.controller, ref.key)` (as [`ResourceRef::not_found`]).
    pub fn conflict(self) -> StoreError {
        match self.templated() {
            Ok((controller, key)) => StoreError::ResourceConflict { controller, key },
            Err(error) => error,
        }
    }

    /// `${controller}` and `${key}` as the error classes' messages interpolate them, sent as
    /// strings (the JS layer's template of a string is the string): `undefined`, NaN or a
    /// bigint would not survive as a plain JSON value.
    fn templated(self) -> Result<(Value, Value)> {
        let (controller, key) = self.parts()?;
        // A string with lone surrogates travels tagged (its WTF-8), so the message keeps them.
        let text = |value: Js<'_>| -> Result<Value> {
            Ok(match value {
                Js::IllFormed { .. } => value.to_wire(),
                other => Value::String(other.template()?),
            })
        };
        Ok((text(controller)?, text(key)?))
    }
}

/// The clause that selects a reference's row in a project (bound: project, controller, key).
pub(super) const BY_REFERENCE: &str =
    "WHERE c.project_id = ? AND c.controller_name = ? AND c.resource_key = ?";

/// The one row `sql` (a select ending in [`BY_REFERENCE`]) finds for a reference in this
/// project, read by `read`; always `None` without a project.
pub(super) fn query_by_reference<T>(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
    sql: &str,
    read: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    let Some(project_id) = project_id else {
        return Ok(None);
    };
    let mut statement = conn.prepare_cached(sql)?;
    let (controller, key) = reference.parts()?;
    let bound = bind_params(&[
        Param::text(project_id),
        Param::Js(controller),
        Param::Js(key),
    ])?;
    Ok(statement
        .query_row(params_from_iter(bound), read)
        .optional()?)
}

/// The clause that selects a row by uid in any project.
pub(super) const BY_UID: &str = "WHERE c.uid = ?";

/// The one row `sql` (a select ending in [`BY_UID`]) finds for a uid in any project, read by
/// `read`.
pub(super) fn query_by_uid<T>(
    conn: &Db,
    uid: Js<'_>,
    sql: &str,
    read: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    let mut statement = conn.prepare_cached(sql)?;
    let bound = bind_params(&[Param::Js(uid)])?;
    Ok(statement
        .query_row(params_from_iter(bound), read)
        .optional()?)
}

/// [`controller_select`] by reference and by uid, written once.
static CONTROLLER_BY_REFERENCE: LazyLock<String> =
    LazyLock::new(|| controller_select(BY_REFERENCE));
static CONTROLLER_BY_UID: LazyLock<String> = LazyLock::new(|| controller_select(BY_UID));

/// The row for a reference in this project; always `None` without a project.
pub fn controller_row(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<Option<ControllerRow>> {
    query_by_reference(
        conn,
        project_id,
        reference,
        &CONTROLLER_BY_REFERENCE,
        ControllerRow::from_row,
    )
}

/// [`controller_row`] outside a transaction: without a project the reference answers
/// before it touches the connection (so even a closed store gives `None`).
pub fn lookup_controller_row(
    store: &Store,
    reference: ResourceRef<'_>,
) -> Result<Option<ControllerRow>> {
    match store.project_id() {
        None => Ok(None),
        project_id => controller_row(store.conn()?, project_id, reference),
    }
}

/// The row for a reference, or `ResourceNotFoundError`.
pub fn require_controller_row(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<ControllerRow> {
    controller_row(conn, project_id, reference)?.ok_or_else(|| reference.not_found())
}

/// The row with this uid in any project.
pub fn controller_row_by_uid(conn: &Db, uid: Js<'_>) -> Result<Option<ControllerRow>> {
    query_by_uid(conn, uid, &CONTROLLER_BY_UID, ControllerRow::from_row)
}

/// The row of a uid in any project, or `Controller resource not found: <uid>`.
pub fn require_controller_row_by_uid(conn: &Db, uid: Js<'_>) -> Result<ControllerRow> {
    controller_row_by_uid(conn, uid)?.ok_or_else(|| uid_not_found(uid))
}

/// The record of a reference (JSON text), or `ResourceNotFoundError`.
pub fn require_resource(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<String> {
    let row = require_controller_row(conn, project_id, reference)?;
    map_controller_resource(conn, &row)
}

/// `ControllerResource` as JSON text: `deletionTimestamp` exists only once deletion was
/// requested. Written straight as text, the stored spec and status embedded as they are.
pub fn map_controller_resource(conn: &Db, row: &ControllerRow) -> Result<String> {
    let mut json = JsonReads::new(conn);
    let spec = json.get_text(&row.spec_hash)?;
    let status = json.get_text(&row.status_hash)?;
    let finalizers = finalizers(conn, &row.controller_resource_id)?;
    Ok(controller_record(row, &spec, &status, &finalizers))
}

/// `ControllerResource` of `row`, given its spec and status as record text (what
/// `JsonReads::get_text` gives for their blobs) and its finalizers.
pub fn controller_record(
    row: &ControllerRow,
    spec: &str,
    status: &str,
    finalizers: &[String],
) -> String {
    let mut metadata = String::with_capacity(256);
    let mut fields = ObjectWriter::new(&mut metadata);
    fields
        .str("uid", &row.uid)
        .str("controller", &row.controller_name)
        .str("key", &row.resource_key)
        .int("resourceVersion", row.resource_version)
        .int("generation", row.generation);
    if let Some(requested_at) = row.deletion_requested_at {
        fields.time("deletionTimestamp", requested_at);
    }
    fields
        .raw("finalizers", &json_text(&Value::from(finalizers)))
        .finish();
    let mut out = String::with_capacity(metadata.len() + spec.len() + status.len() + 32);
    ObjectWriter::new(&mut out)
        .raw("metadata", &metadata)
        .raw("spec", spec)
        .raw("status", status)
        .finish();
    out
}

/// The resource's finalizers in `position` order.
pub fn finalizers(conn: &Db, controller_resource_id: &str) -> Result<Vec<String>> {
    let mut statement = conn.prepare_cached(
        "SELECT finalizer FROM controller_finalizers
         WHERE controller_resource_id = ? ORDER BY position",
    )?;
    let rows = statement.query_map([controller_resource_id], |row| text_lossy(row, 0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// `Controller resource not found: <uid>`.
pub fn uid_not_found(uid: Js<'_>) -> StoreError {
    not_found_error("Controller resource not found: ", &[uid])
}

/// `new Error(`<prefix>${a}/${b}…`)`, or the TypeError the template string throws.
pub fn not_found_error(prefix: &str, parts: &[Js<'_>]) -> StoreError {
    let mut pieces = vec![Js::String(prefix)];
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            pieces.push(Js::String("/"));
        }
        pieces.push(*part);
    }
    crate::js::message_error(&pieces)
}

/// A caller value as the argument of an error class whose message `JSON.stringify`s it
/// (`EffectRequestConflictError(key)`), in the wire form the JS layer rebuilds it from (so a
/// bigint's TypeError is thrown there); a live object is stringified now by JavaScript (what
/// its `toJSON` or a getter throws is thrown) and sent as that JSON.
pub fn error_argument(call: &crate::wire::Call, value: Js<'_>) -> Result<Value> {
    let (Some(cx), Js::Live(_)) = (call.cx(), value) else {
        return Ok(value.to_wire());
    };
    Ok(match cx.helper("stringify", &[value])? {
        Js::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        _ => Value::Null,
    })
}

/// Whether `reference` names `row` (its controller and key, read as a lookup reads them, are
/// the row's strings).
pub fn names_row(reference: ResourceRef<'_>, row: &ControllerRow) -> Result<bool> {
    let (controller, key) = reference.parts()?;
    Ok(controller.strict_eq_str(&row.controller_name) && key.strict_eq_str(&row.resource_key))
}

/// Compare-and-set of a controller or effect resource's revision (never a run's: run resources
/// are `run-…`), without [`bump_resource`](crate::state::revisions::bump_resource)'s look for a run.
pub fn bump_controller_resource(
    conn: &Db,
    resource_id: &str,
    expected: i64,
    now: i64,
) -> Result<()> {
    debug_assert!(!resource_id.starts_with("run-"));
    compare_and_set_revision(conn, resource_id, expected, now)
}

/// `putText(value)` of a caller value: only strings can be stored as text.
/// `putText(value)` of a caller value: `Buffer.from(value, "utf8")` stored as `text/plain`.
pub fn put_caller_text(conn: &Db, value: Js<'_>, now: i64) -> Result<BlobHash> {
    match value {
        Js::String(text) => put_text(conn, text, now),
        other => put_blob(conn, &buffer_from(other, Encoding::Utf8)?, MEDIA_TEXT, now),
    }
}
