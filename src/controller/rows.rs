//! The controller resource row and what every controller method builds on: lookups by
//! reference and by uid, the `ControllerResource` record, finalizers, the work-queue row, and
//! the claim checks that fence writes by lease generation and token.

use std::sync::LazyLock;

use rusqlite::types::ValueRef;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row};
use serde_json::Value;

use super::js::{
    bind_params, buffer_from, length_of, read, same_number, same_text, token_hash_of, Bound,
    Encoding, Js, Param,
};
use crate::args::js_number_text;
use crate::error::{Result, StoreError};
use crate::state::blobs::{put_blob, put_text, BlobHash, JsonReads, MEDIA_JSON, MEDIA_TEXT};
use crate::state::json::record_text;
use crate::state::leases::{
    self, insert_attributed_event, lease_columns, require_lease, Actor, Fence, Holder, HolderKind,
    Lease,
};
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
    /// The caller's reference object (`None` for `undefined`).
    Object(Option<&'a Value>),
    /// `controller` and `key`, already read.
    Parts(Option<&'a Value>, Option<&'a Value>),
}

impl<'a> ResourceRef<'a> {
    /// The caller's reference object (`None` for `undefined`).
    pub fn of(object: Option<&'a Value>) -> ResourceRef<'a> {
        ResourceRef::Object(object)
    }

    /// `{controller: object.controller, key: object.key}`: both read now.
    pub fn copied(object: Option<&'a Value>) -> Result<ResourceRef<'a>> {
        let (controller, key) = ResourceRef::Object(object).parts()?;
        Ok(ResourceRef::Parts(controller, key))
    }

    /// `ref.controller`, then `ref.key`.
    pub fn parts(self) -> Result<(Option<&'a Value>, Option<&'a Value>)> {
        match self {
            ResourceRef::Object(object) => Ok((read(object, "controller")?, read(object, "key")?)),
            ResourceRef::Parts(controller, key) => Ok((controller, key)),
        }
    }

    /// Both values when they are strings (stored and read back as they are).
    pub fn texts(self) -> Option<(&'a str, &'a str)> {
        match self.parts() {
            Ok((Some(Value::String(controller)), Some(Value::String(key)))) => {
                Some((controller, key))
            }
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
        Ok((
            Value::String(Js::opt(controller).template()?),
            Value::String(Js::opt(key).template()?),
        ))
    }
}

/// The clause that selects a reference's row in a project (bound: project, controller, key).
const BY_REFERENCE: &str =
    "WHERE c.project_id = ? AND c.controller_name = ? AND c.resource_key = ?";

/// The one row `sql` (a select ending in [`BY_REFERENCE`]) finds for a reference in this
/// project, read by `read`; always `None` without a project.
fn query_by_reference<T>(
    conn: &Connection,
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
        Param::Caller(controller),
        Param::Caller(key),
    ])?;
    Ok(statement
        .query_row(params_from_iter(bound), read)
        .optional()?)
}

/// The clause that selects a row by uid in any project.
const BY_UID: &str = "WHERE c.uid = ?";

/// The one row `sql` (a select ending in [`BY_UID`]) finds for a uid in any project, read by
/// `read`.
fn query_by_uid<T>(
    conn: &Connection,
    uid: Option<&Value>,
    sql: &str,
    read: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    let mut statement = conn.prepare_cached(sql)?;
    let bound = bind_params(&[Param::Caller(uid)])?;
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
    conn: &Connection,
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
    conn: &Connection,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<ControllerRow> {
    controller_row(conn, project_id, reference)?.ok_or_else(|| reference.not_found())
}

/// The row with this uid in any project.
pub fn controller_row_by_uid(
    conn: &Connection,
    uid: Option<&Value>,
) -> Result<Option<ControllerRow>> {
    query_by_uid(conn, uid, &CONTROLLER_BY_UID, ControllerRow::from_row)
}

/// The row of a uid in any project, or `Controller resource not found: <uid>`.
pub fn require_controller_row_by_uid(
    conn: &Connection,
    uid: Option<&Value>,
) -> Result<ControllerRow> {
    controller_row_by_uid(conn, uid)?.ok_or_else(|| uid_not_found(uid))
}

/// The record of a reference (JSON text), or `ResourceNotFoundError`.
pub fn require_resource(
    conn: &Connection,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<String> {
    let row = require_controller_row(conn, project_id, reference)?;
    map_controller_resource(conn, &row)
}

/// `ControllerResource` as JSON text: `deletionTimestamp` exists only once deletion was
/// requested. Written straight as text, the stored spec and status embedded as they are.
pub fn map_controller_resource(conn: &Connection, row: &ControllerRow) -> Result<String> {
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

/// A controller row read with its spec and status blobs and its finalizers: a whole record in
/// one statement, where [`map_controller_resource`] takes four.
#[derive(Debug)]
pub struct DocumentedRow {
    /// The controller row.
    pub row: ControllerRow,
    spec: Option<(bool, String)>,
    status: Option<(bool, String)>,
    /// The finalizers as SQLite's `json_group_array` wrote them, in `position` order.
    finalizers: Option<String>,
}

/// The columns [`DocumentedRow::from_row`] reads after [`CONTROLLER_COLUMNS`].
/// The finalizers come ordered from a subquery, which SQLite runs as a co-routine feeding the
/// aggregate in that order (its ORDER BY is kept under any aggregate but count/min/max: see
/// the OmitOrderBy conditions in sqlite3.c): `json_group_array(… ORDER BY …)` would build
/// and sort a temporary B-tree on every read instead.
const DOCUMENT_COLUMNS: &str = "sb.media_type, sb.content, tb.media_type, tb.content,
    (SELECT json_group_array(finalizer) FROM (
       SELECT f.finalizer FROM controller_finalizers f
       WHERE f.controller_resource_id = c.controller_resource_id ORDER BY f.position))";

/// [`controller_select`] with the spec and status blobs and the finalizers, then `clause`.
pub fn documented_select(clause: &str) -> String {
    format!(
        "SELECT {CONTROLLER_COLUMNS}, {DOCUMENT_COLUMNS}
         FROM controller_resources c JOIN resources r ON r.resource_id = c.resource_id
         LEFT JOIN blobs sb ON sb.blob_hash = c.spec_hash
         LEFT JOIN blobs tb ON tb.blob_hash = c.status_hash {clause}"
    )
}

/// Whether a joined blob (its `media_type` at column `media`, its `content` next) is JSON, and
/// its content as text (as `read_json_text` reads it); `None` when the blob is missing.
pub fn joined_blob(row: &Row<'_>, media: usize) -> rusqlite::Result<Option<(bool, String)>> {
    let is_json = match row.get_ref(media)? {
        ValueRef::Null => return Ok(None),
        ValueRef::Text(media_type) => media_type == MEDIA_JSON.as_bytes(),
        _ => false,
    };
    let text = match row.get_ref(media + 1)? {
        ValueRef::Blob(bytes) | ValueRef::Text(bytes) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
        _ => String::new(),
    };
    Ok(Some((is_json, text)))
}

/// `document_text(&joined_blob(row, media)?)`, with the content borrowed from the row rather
/// than copied first (lists write many documents).
pub fn joined_document_text(row: &Row<'_>, media: usize) -> Result<String> {
    let is_json = match row.get_ref(media)? {
        ValueRef::Null => false,
        ValueRef::Text(media_type) => media_type == MEDIA_JSON.as_bytes(),
        _ => false,
    };
    if !is_json {
        return document_text(&None);
    }
    let text = match row.get_ref(media + 1)? {
        ValueRef::Blob(bytes) | ValueRef::Text(bytes) => String::from_utf8_lossy(bytes),
        _ => "".into(),
    };
    record_text(&text).map_err(StoreError::plain)
}

/// The record text of a joined JSON blob, failing as `JsonReads::get_text` fails.
pub fn document_text(document: &Option<(bool, String)>) -> Result<String> {
    match document {
        Some((true, text)) => record_text(text).map_err(StoreError::plain),
        _ => Err(StoreError::plain(
            "JSON blob is missing or has the wrong media type",
        )),
    }
}

impl DocumentedRow {
    /// Reads a row selected by [`documented_select`].
    pub fn from_row(row: &Row<'_>) -> rusqlite::Result<DocumentedRow> {
        Ok(DocumentedRow {
            row: ControllerRow::from_row(row)?,
            spec: joined_blob(row, 10)?,
            status: joined_blob(row, 12)?,
            // Only valid UTF-8 is taken as SQLite wrote it; otherwise they are read again.
            finalizers: match row.get_ref(14)? {
                ValueRef::Text(text) => std::str::from_utf8(text).ok().map(str::to_owned),
                _ => None,
            },
        })
    }

    /// The record, as [`map_controller_resource`] writes it (same errors, same order).
    pub fn record(&self, conn: &Connection) -> Result<String> {
        let spec = document_text(&self.spec)?;
        let status = document_text(&self.status)?;
        // SQLite wrote the finalizers (always text) as a JSON array of strings; should it ever
        // not read as one, they are read again.
        let listed = self
            .finalizers
            .as_deref()
            .and_then(|text| serde_json::from_str::<Vec<String>>(text).ok());
        let finalizers = match listed {
            Some(finalizers) => finalizers,
            None => finalizers(conn, &self.row.controller_resource_id)?,
        };
        Ok(controller_record(&self.row, &spec, &status, &finalizers))
    }
}

/// [`documented_select`] by reference and by uid, written once rather than on every read.
static DOCUMENTED_BY_REFERENCE: LazyLock<String> =
    LazyLock::new(|| documented_select(BY_REFERENCE));
static DOCUMENTED_BY_UID: LazyLock<String> = LazyLock::new(|| documented_select(BY_UID));

/// The documented row for a reference in this project; always `None` without a project.
pub fn documented_row(
    conn: &Connection,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<Option<DocumentedRow>> {
    query_by_reference(
        conn,
        project_id,
        reference,
        &DOCUMENTED_BY_REFERENCE,
        DocumentedRow::from_row,
    )
}

/// The documented row with this uid in any project.
pub fn documented_row_by_uid(
    conn: &Connection,
    uid: Option<&Value>,
) -> Result<Option<DocumentedRow>> {
    query_by_uid(conn, uid, &DOCUMENTED_BY_UID, DocumentedRow::from_row)
}

/// The resource's finalizers in `position` order.
pub fn finalizers(conn: &Connection, controller_resource_id: &str) -> Result<Vec<String>> {
    let mut statement = conn.prepare_cached(
        "SELECT finalizer FROM controller_finalizers
         WHERE controller_resource_id = ? ORDER BY position",
    )?;
    let rows = statement.query_map([controller_resource_id], |row| text_lossy(row, 0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Replaces the finalizer list as the reference does: `[...new Set(finalizers)]` (a string is
/// iterated by code point; `null`/`undefined` make an empty set, other non-iterables throw),
/// refused when shorter than `finalizers.length`, then one insert per item.
pub fn replace_finalizers(
    conn: &Connection,
    controller_resource_id: &str,
    finalizers: Option<&Value>,
) -> Result<()> {
    let chars: Vec<Value>;
    let items: &[Value] = match Js::opt(finalizers) {
        Js::Undefined | Js::Null => &[],
        Js::Array(items) => items,
        Js::String(text) | Js::IllFormed { text, .. } => {
            chars = text.chars().map(|c| Value::String(c.to_string())).collect();
            &chars
        }
        other => return Err(not_iterable(other)),
    };
    // SameValueZero: objects and arrays are never equal to another one.
    let mut unique: Vec<&Value> = Vec::with_capacity(items.len());
    for item in items {
        let item_js = Js::of(item);
        let seen = !matches!(
            item_js,
            Js::Object(_) | Js::Array(_) | Js::Instance { .. } | Js::Bytes { .. }
        ) && unique
            .iter()
            .any(|kept| same_value_zero(Js::of(kept), item_js));
        if !seen {
            unique.push(item);
        }
    }
    let length = length_of(finalizers)?;
    if length != Some(unique.len() as f64) {
        return Err(StoreError::plain("Controller finalizers must be unique"));
    }
    conn.prepare_cached("DELETE FROM controller_finalizers WHERE controller_resource_id = ?")?
        .execute([controller_resource_id])?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO controller_finalizers(controller_resource_id, finalizer, position)
         VALUES (?, ?, ?)",
    )?;
    for (position, finalizer) in unique.into_iter().enumerate() {
        insert.execute(params_from_iter(bind_params(&[
            Param::text(controller_resource_id),
            Param::Caller(Some(finalizer)),
            Param::Own(Bound::Real(position as f64)),
        ])?))?;
    }
    Ok(())
}

/// SameValueZero of two values that are not objects.
fn same_value_zero(a: Js<'_>, b: Js<'_>) -> bool {
    match (a, b) {
        (Js::Number(a), Js::Number(b)) => a == b || (a.is_nan() && b.is_nan()),
        (a, b) => a.strict_eq(b),
    }
}

/// V8's TypeError for spreading a value that is not iterable.
fn not_iterable(value: Js<'_>) -> StoreError {
    let described = match value {
        Js::Bool(b) => format!("boolean {b}"),
        Js::Number(n) => format!("number {}", js_number_text(n)),
        other => other.type_of().to_string(),
    };
    StoreError::Type(format!(
        "{described} is not iterable (cannot read property Symbol(Symbol.iterator))"
    ))
}

/// Queues the resource, or moves an existing item earlier and bumps its version.
pub fn enqueue_controller_row(
    conn: &Connection,
    controller_resource_id: &str,
    available_at: i64,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO controller_queue(
           controller_resource_id, available_at, queue_version,
           consecutive_errors, created_at, updated_at
         ) VALUES (?, ?, 1, 0, ?, ?)
         ON CONFLICT(controller_resource_id) DO UPDATE SET
           available_at = MIN(controller_queue.available_at, excluded.available_at),
           queue_version = controller_queue.queue_version + 1,
           updated_at = excluded.updated_at",
    )?
    .execute(params![controller_resource_id, available_at, now, now])?;
    Ok(())
}

/// The queue item's `queue_version` (bumped by every enqueue).
pub fn queue_version(conn: &Connection, controller_resource_id: &str) -> Result<i64> {
    conn.prepare_cached(
        "SELECT queue_version FROM controller_queue WHERE controller_resource_id = ?",
    )?
    .query_row([controller_resource_id], |row| row.get(0))
    .optional()?
    .ok_or_else(|| StoreError::plain("Controller queue item is missing"))
}

/// A controller row read together with its lease and queue item, for the methods that check a
/// claim: one statement instead of one per table.
#[derive(Debug, Clone)]
pub struct ClaimRow {
    /// The controller row.
    pub row: ControllerRow,
    /// The `leases` row, `None` when missing.
    pub lease: Option<Lease>,
    /// `controller_queue.queue_version`, `None` without a queue item.
    pub queue_version: Option<i64>,
    /// `controller_queue.consecutive_errors`, `None` without a queue item.
    pub consecutive_errors: Option<i64>,
}

/// The columns [`ClaimRow::from_row`] reads after [`CONTROLLER_COLUMNS`], over `leases l`
/// and `controller_queue q`.
pub const CLAIM_COLUMNS: &str =
    concat!(lease_columns!(), ", q.queue_version, q.consecutive_errors");

/// [`controller_select`] with the lease and the queue item, then `clause`.
fn claim_select(clause: &str) -> String {
    format!(
        "SELECT {CONTROLLER_COLUMNS}, {CLAIM_COLUMNS}
         FROM controller_resources c JOIN resources r ON r.resource_id = c.resource_id
         LEFT JOIN leases l ON l.resource_id = c.resource_id
         LEFT JOIN controller_queue q ON q.controller_resource_id = c.controller_resource_id
         {clause}"
    )
}

/// [`claim_select`] by reference and by uid, written once.
static CLAIM_BY_REFERENCE: LazyLock<String> = LazyLock::new(|| claim_select(BY_REFERENCE));
static CLAIM_BY_UID: LazyLock<String> = LazyLock::new(|| claim_select(BY_UID));

impl ClaimRow {
    /// Reads a row of [`CONTROLLER_COLUMNS`] followed by [`CLAIM_COLUMNS`].
    pub fn from_row(row: &Row<'_>) -> rusqlite::Result<ClaimRow> {
        let lease = Lease::from_columns(row, 10)?;
        Ok(ClaimRow {
            row: ControllerRow::from_row(row)?,
            lease,
            queue_version: row.get(15)?,
            consecutive_errors: row.get(16)?,
        })
    }

    /// [`assert_controller_claim`] against the lease read with the row.
    pub fn assert_claim(
        &self,
        claim: Option<&Value>,
        now: i64,
        require_unexpired: bool,
    ) -> Result<Lease> {
        check_claim_target(&self.row, claim)?;
        let lease = self.lease.clone().ok_or_else(|| {
            StoreError::plain(format!("Lease is missing: {}", self.row.resource_id))
        })?;
        check_claim_lease(lease, claim, now, require_unexpired)
    }

    /// The queue item's `queue_version`, as [`queue_version`] reads it.
    pub fn require_queue_version(&self) -> Result<i64> {
        self.queue_version
            .ok_or_else(|| StoreError::plain("Controller queue item is missing"))
    }
}

/// [`controller_row`] with its lease and queue item; always `None` without a project.
pub fn claim_row(
    conn: &Connection,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<Option<ClaimRow>> {
    query_by_reference(
        conn,
        project_id,
        reference,
        &CLAIM_BY_REFERENCE,
        ClaimRow::from_row,
    )
}

/// [`claim_row`], or `ResourceNotFoundError`.
pub fn require_claim_row(
    conn: &Connection,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<ClaimRow> {
    claim_row(conn, project_id, reference)?.ok_or_else(|| reference.not_found())
}

/// [`require_controller_row_by_uid`] with its lease and queue item.
pub fn require_claim_row_by_uid(conn: &Connection, uid: Option<&Value>) -> Result<ClaimRow> {
    query_by_uid(conn, uid, &CLAIM_BY_UID, ClaimRow::from_row)?.ok_or_else(|| uid_not_found(uid))
}

/// `Controller resource not found: <uid>`.
fn uid_not_found(uid: Option<&Value>) -> StoreError {
    not_found_error("Controller resource not found: ", &[uid])
}

/// `new Error(`<prefix>${a}/${b}…`)`, or the TypeError the template string throws.
pub fn not_found_error(prefix: &str, parts: &[Option<&Value>]) -> StoreError {
    let mut message = prefix.to_string();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            message.push('/');
        }
        match Js::opt(*part).template() {
            Ok(text) => message.push_str(&text),
            Err(error) => return error,
        }
    }
    StoreError::plain(message)
}

/// Compare-and-set of a controller or effect resource's revision (never a run's: run resources
/// are `run-…`), without [`bump_resource`](crate::state::revisions::bump_resource)'s look for a run.
pub fn bump_controller_resource(
    conn: &Connection,
    resource_id: &str,
    expected: i64,
    now: i64,
) -> Result<()> {
    debug_assert!(!resource_id.starts_with("run-"));
    compare_and_set_revision(conn, resource_id, expected, now)
}

fn check_claim_target(row: &ControllerRow, claim: Option<&Value>) -> Result<()> {
    if !same_text(&row.controller_name, read(claim, "controller")?)
        || !same_text(&row.resource_key, read(claim, "key")?)
    {
        return Err(StoreError::plain(
            "Controller claim targets another resource",
        ));
    }
    Ok(())
}

/// Checks that `claim` is the live controller lease of `row` (unexpired unless
/// `require_unexpired` is off); returns that lease.
pub fn assert_controller_claim(
    conn: &Connection,
    row: &ControllerRow,
    claim: Option<&Value>,
    now: i64,
    require_unexpired: bool,
) -> Result<Lease> {
    check_claim_target(row, claim)?;
    let lease = require_lease(conn, &row.resource_id)?;
    check_claim_lease(lease, claim, now, require_unexpired)
}

fn check_claim_lease(
    lease: Lease,
    claim: Option<&Value>,
    now: i64,
    require_unexpired: bool,
) -> Result<Lease> {
    let owner_id = read(claim, "ownerId")?;
    let holds = lease.owner_type.as_deref() == Some("controller")
        && lease
            .owner_id
            .as_deref()
            .is_some_and(|owner| same_text(owner, owner_id))
        && same_number(lease.generation, read(claim, "generation")?)
        && lease.token_hash.is_some()
        && lease.token_matches(&token_hash_of(read(claim, "token")?)?)
        && (!require_unexpired || lease.is_unexpired(now));
    if !holds {
        return Err(StoreError::plain("Controller claim is stale"));
    }
    Ok(lease)
}

/// A controller claim as a lease holder, its fields read in the reference's order
/// (`ownerId`, `token`, `generation`) and bound as the caller gave them.
pub struct ClaimFence<'a> {
    owner_id: Option<&'a Value>,
    token_hash: [u8; 32],
    generation: Option<&'a Value>,
}

impl<'a> ClaimFence<'a> {
    /// Reads `claim.ownerId`, hashes `claim.token`, reads `claim.generation`.
    pub fn read(claim: Option<&'a Value>) -> Result<ClaimFence<'a>> {
        let owner_id = read(claim, "ownerId")?;
        let token_hash = token_hash_of(read(claim, "token")?)?;
        let generation = read(claim, "generation")?;
        Ok(ClaimFence {
            owner_id,
            token_hash,
            generation,
        })
    }

    /// The controller holder the claim names.
    pub fn holder(&self) -> Holder<'_> {
        Holder {
            kind: HolderKind::Controller,
            owner_id: Param::Caller(self.owner_id),
            token_hash: &self.token_hash,
        }
    }

    /// The generation the claim fences by.
    pub fn generation(&self) -> Param<'a> {
        Param::Caller(self.generation)
    }
}

/// Releases the verified `lease` held by `claim`; returns the new resource version when it
/// was released (the reference then sets `claim.resourceVersion`).
/// `revision` is the resource's current revision (read with its row in this transaction).
pub fn release_lease(
    conn: &Connection,
    resource_id: &str,
    revision: i64,
    claim: Option<&Value>,
    lease: &Lease,
    now: i64,
) -> Result<Option<i64>> {
    let fence = ClaimFence::read(claim)?;
    if !leases::release(
        conn,
        resource_id,
        &fence.holder(),
        fence.generation(),
        Fence::Owner,
        now,
    )? {
        return Ok(None);
    }
    bump_controller_resource(conn, resource_id, revision, now)?;
    insert_attributed_event(
        conn,
        resource_id,
        revision + 1,
        "lease.released",
        Actor::Controller(lease),
        "{}",
        now,
    )?;
    Ok(Some(revision + 1))
}

/// `putText(value)` of a caller value: only strings can be stored as text.
/// `putText(value)` of a caller value: `Buffer.from(value, "utf8")` stored as `text/plain`.
pub fn put_caller_text(conn: &Connection, value: Option<&Value>, now: i64) -> Result<BlobHash> {
    match value {
        Some(Value::String(text)) => put_text(conn, text, now),
        other => put_blob(conn, &buffer_from(other, Encoding::Utf8)?, MEDIA_TEXT, now),
    }
}
