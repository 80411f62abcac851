//! A controller row read with its spec and status documents and its finalizers: a whole
//! `ControllerResource` record in one statement, and the joined blob columns it reads.

use std::borrow::Cow;
use std::sync::LazyLock;

use crate::sql::{Db, Row};
use rusqlite::types::ValueRef;

use super::*;
use crate::error::{Result, StoreError};
use crate::state::blobs::MEDIA_JSON;
use crate::state::json::record_text;

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

/// An event's payload as written out: `{}` where its hash (column `hash`) is NULL, else the
/// [`joined_document_text`] of the media type and content that follow it.
pub fn joined_payload_text(row: &Row<'_>, hash: usize) -> Result<Cow<'static, str>> {
    Ok(match row.get_ref(hash)? {
        ValueRef::Null => Cow::Borrowed("{}"),
        _ => Cow::Owned(joined_document_text(row, hash + 1)?),
    })
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
    pub fn record(&self, conn: &Db) -> Result<String> {
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
    conn: &Db,
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
pub fn documented_row_by_uid(conn: &Db, uid: Js<'_>) -> Result<Option<DocumentedRow>> {
    query_by_uid(conn, uid, &DOCUMENTED_BY_UID, DocumentedRow::from_row)
}
