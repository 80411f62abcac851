//! Run records as the reference returns them: the full queue record (with sources, input and
//! launch options); the lighter view record is [`super::views`]'.

use std::borrow::Cow;

use crate::sql::{Db, Row};
use rusqlite::types::ValueRef;
use serde_json::{json, Map, Value};

use super::row::{with_columns, RunRow, RunRowRef};
use crate::error::{Result, StoreError};
use crate::state::blobs::{read_text, BlobHash, JsonReads, MEDIA_JSON};
use crate::state::columns::lossy_string_at;

use crate::state::json::record_text;
use crate::time::check_js_time;
use crate::wire::{json_text, ObjectWriter};

/// `WorkflowRunQueueRecord` for a run row as JSON text (`claimToken` is null here).
pub fn map_workflow_run(conn: &Db, row: &RunRow) -> Result<String> {
    map_workflow_run_with(&mut JsonReads::new(conn), row, None)
}

/// [`map_workflow_run`] reading JSON documents through `json`, which a list shares: its runs
/// mostly have the same definition snapshot and launch options. A claim result carries the
/// caller's `claimToken` (`claim_token`: its JSON text). Written straight as JSON text: building and serializing a `Value`
/// was most of the cost of the record.
pub fn map_workflow_run_with(
    json: &mut JsonReads<'_>,
    row: &RunRow,
    claim_token: Option<&str>,
) -> Result<String> {
    map_run_record_with(json, &row.borrowed(), None, claim_token)
}

/// The record of `row` from what it reads besides the row.
fn write_run_record(
    row: &RunRowRef<'_>,
    error_message: Option<&str>,
    sources: &str,
    input: &str,
    launch_options: &str,
    claim_token: Option<&str>,
) -> Result<String> {
    let headless = row.execution_mode == Some("headless");
    // A renewal may store an expiry beyond JavaScript's dates; toISOString() throws then.
    if let Some(ms) = row.claim_expires_at {
        check_js_time(ms as f64)?;
    }
    let mut out = String::with_capacity(1024 + input.len() + launch_options.len());
    let mut record = ObjectWriter::new(&mut out);
    record
        .str("runId", row.run_id)
        .str("workflowName", row.workflow_name)
        .str("workflowSourceRef", row.workflow_ref)
        .raw("workflowSource", sources)
        .bool("initialized", row.run_status != "queued")
        .digest("definitionDigest", row.definition_digest)
        .raw("input", input)
        .raw("launchOptions", launch_options)
        .str("status", row.status)
        .opt_str("runnerId", row.owner_id)
        .raw("claimToken", claim_token.unwrap_or("null"));
    match row.owner_id {
        Some(_) => record.int("claimGeneration", row.lease_generation),
        None => record.raw("claimGeneration", "null"),
    };
    record
        .opt_time("claimExpiresAt", row.claim_expires_at)
        .opt_str("affinityRunnerId", row.affinity_runner_id)
        .opt_str(
            "originSessionId",
            if headless {
                None
            } else {
                row.origin_session_id
            },
        )
        .opt_str("executionMode", row.execution_mode)
        .opt_str("parentRunId", row.parent_run_id)
        .str("rootRunId", row.root_run_id)
        .opt_str("lineageKind", row.lineage_kind)
        .int("restartNumber", row.restart_number)
        .opt_hex("parentTerminalFingerprint", row.parent_terminal_fingerprint)
        .opt_str("errorCode", row.error_code)
        .opt_str("errorMessage", error_message)
        .time("createdAt", row.created_at)
        .time("updatedAt", row.updated_at)
        .opt_time("startedAt", row.started_at)
        .opt_time("finishedAt", row.finished_at)
        .finish();
    Ok(out)
}

/// Columns a run's own statement adds to `RUN_SELECT` so that its record needs no further
/// statement in the common case: the input and error blobs, the root source and whether
/// mounts exist ([`RUN_RECORD_JOINS`] joins them). Nothing is decided from them that the
/// separate reads would decide otherwise: a document that is missing or not JSON, a missing
/// root or any mount sends the record down the separate reads, which fail or read as before.
pub const RUN_RECORD_COLUMNS: &str = ", input.media_type, input.content, error.content,
    root.source_type, root.source_ref, root.source_revision,
    EXISTS (SELECT 1 FROM run_sources m WHERE m.run_id = r.run_id AND m.mount_path <> '')";
/// The joins of [`RUN_RECORD_COLUMNS`] (blob hashes and `(run_id, mount_path)` are keys).
pub const RUN_RECORD_JOINS: &str = " LEFT JOIN blobs input ON input.blob_hash = r.input_hash
    LEFT JOIN blobs error ON error.blob_hash = q.error_hash
    LEFT JOIN run_sources root ON root.run_id = r.run_id AND root.mount_path = ''";
/// For a single run, its definition snapshot and launch options too (a list shares them
/// across its runs instead, see `JsonReads`).
pub const RUN_DOCUMENT_COLUMNS: &str = ", definition.media_type, definition.content,
    launch.media_type, launch.content";
/// The joins of [`RUN_DOCUMENT_COLUMNS`].
pub const RUN_DOCUMENT_JOINS: &str =
    " LEFT JOIN blobs definition ON definition.blob_hash = d.definition_hash
    LEFT JOIN blobs launch ON launch.blob_hash = r.launch_options_hash";

const RECORD_COLUMN_COUNT: usize = 7;
const DOCUMENT_COLUMN_COUNT: usize = 4;

/// `RUN_SELECT` with [`RUN_RECORD_COLUMNS`] and, with `documents`, [`RUN_DOCUMENT_COLUMNS`]
/// (for a single run), else the run's row id (for a list's page), followed by `clause`.
pub fn run_record_select(run_select: &str, documents: bool, clause: &str) -> String {
    let (columns, joins) = if documents {
        (
            format!("{RUN_RECORD_COLUMNS}{RUN_DOCUMENT_COLUMNS}"),
            format!("{RUN_RECORD_JOINS}{RUN_DOCUMENT_JOINS}"),
        )
    } else {
        (
            format!("{RUN_RECORD_COLUMNS}, r.rowid"),
            RUN_RECORD_JOINS.to_owned(),
        )
    };
    format!("{}{joins} {clause}", with_columns(run_select, &columns))
}

/// What [`RUN_RECORD_COLUMNS`] (and [`RUN_DOCUMENT_COLUMNS`]) read for one run, borrowed from
/// SQLite's row where the content is valid UTF-8.
pub struct RecordReads<'r> {
    /// The error blob's text (as `read_text` gives it), `None` when it is missing.
    error: Option<Cow<'r, str>>,
    /// The input's JSON text when it is a JSON blob.
    input: Option<Cow<'r, str>>,
    /// The root source (type, ref, revision).
    root: Option<[&'r str; 3]>,
    has_mounts: bool,
    /// The definition snapshot's and launch options' JSON texts (when read and JSON).
    definition: Option<Cow<'r, str>>,
    launch_options: Option<Cow<'r, str>>,
    /// `runs.rowid`, read for a list's page.
    pub rowid: Option<i64>,
}

impl<'r> RecordReads<'r> {
    /// Whether a blob inserted later cannot change the record of `row`: the error message is
    /// the only document a record reads as missing when it is (every other one missing fails
    /// the record).
    pub fn read_every_document(&self, row: &RunRowRef<'_>) -> bool {
        row.error_hash.is_none() || self.error.is_some()
    }

    /// Whether a record from `run_record_select(…, documents = true, …)` needs no further
    /// read: the root source without mounts and every document stored as JSON.
    pub fn is_complete(&self, row: &RunRowRef<'_>) -> bool {
        self.root.is_some()
            && !self.has_mounts
            && stored(row.definition_hash, &self.definition).is_some()
            && stored(row.input_hash, &self.input).is_some()
            && stored(row.launch_options_hash, &self.launch_options).is_some()
    }

    /// Reads the added columns of a row of [`run_record_select`].
    pub fn from_row(row: &'r Row<'_>, documents: bool) -> rusqlite::Result<RecordReads<'r>> {
        let added = RECORD_COLUMN_COUNT + if documents { DOCUMENT_COLUMN_COUNT } else { 1 };
        let at = row.column_count() - added;
        let root = match (
            row.get_ref(at + 3)?,
            row.get_ref(at + 4)?,
            row.get_ref(at + 5)?,
        ) {
            (ValueRef::Text(kind), ValueRef::Text(id), ValueRef::Text(revision)) => {
                match (
                    std::str::from_utf8(kind),
                    std::str::from_utf8(id),
                    std::str::from_utf8(revision),
                ) {
                    (Ok(kind), Ok(id), Ok(revision)) => Some([kind, id, revision]),
                    _ => None,
                }
            }
            _ => None,
        };
        let (definition, launch_options) = if documents {
            (
                json_content(row, at + RECORD_COLUMN_COUNT)?,
                json_content(row, at + RECORD_COLUMN_COUNT + 2)?,
            )
        } else {
            (None, None)
        };
        Ok(RecordReads {
            error: content_text(row.get_ref(at + 2)?),
            input: json_content(row, at)?,
            root,
            has_mounts: row.get::<_, i64>(at + 6)? != 0,
            definition,
            launch_options,
            rowid: match documents {
                true => None,
                false => Some(row.get(at + RECORD_COLUMN_COUNT)?),
            },
        })
    }
}

/// [`RecordReads`] copied out of SQLite's row, for a record written once the statement has
/// moved on (a claim reads its run's documents with its row, then writes).
pub struct OwnedRecordReads {
    error: Option<String>,
    input: Option<String>,
    root: Option<[String; 3]>,
    has_mounts: bool,
    definition: Option<String>,
    launch_options: Option<String>,
}

impl RecordReads<'_> {
    /// The reads, owned.
    pub fn to_owned(&self) -> OwnedRecordReads {
        let owned = |text: &Option<Cow<'_, str>>| text.as_deref().map(str::to_owned);
        OwnedRecordReads {
            error: owned(&self.error),
            input: owned(&self.input),
            root: self.root.map(|root| root.map(str::to_owned)),
            has_mounts: self.has_mounts,
            definition: owned(&self.definition),
            launch_options: owned(&self.launch_options),
        }
    }
}

impl OwnedRecordReads {
    /// The reads, borrowed from here.
    pub fn borrowed(&self) -> RecordReads<'_> {
        fn borrowed(text: &Option<String>) -> Option<Cow<'_, str>> {
            text.as_deref().map(Cow::Borrowed)
        }
        RecordReads {
            error: borrowed(&self.error),
            input: borrowed(&self.input),
            root: self
                .root
                .as_ref()
                .map(|[kind, id, revision]| [kind.as_str(), id.as_str(), revision.as_str()]),
            has_mounts: self.has_mounts,
            definition: borrowed(&self.definition),
            launch_options: borrowed(&self.launch_options),
            rowid: None,
        }
    }
}

/// A blob's content as `read_text` reads it (`NULL`: no blob, content is `NOT NULL`).
fn content_text(content: ValueRef<'_>) -> Option<Cow<'_, str>> {
    match content {
        ValueRef::Null => None,
        ValueRef::Blob(bytes) | ValueRef::Text(bytes) => Some(String::from_utf8_lossy(bytes)),
        _ => Some(Cow::Borrowed("")),
    }
}

/// The content at `at + 1` when the media type at `at` is JSON.
fn json_content<'r>(row: &'r Row<'_>, at: usize) -> rusqlite::Result<Option<Cow<'r, str>>> {
    Ok(match row.get_ref(at)? {
        ValueRef::Text(media) if media == MEDIA_JSON.as_bytes() => {
            content_text(row.get_ref(at + 1)?)
        }
        _ => None,
    })
}

/// A 32-byte hash with the text read for it, for `JsonReads::with_stored`.
fn stored<'t>(hash: &[u8], text: &'t Option<Cow<'_, str>>) -> Option<(BlobHash, &'t str)> {
    Some((hash.try_into().ok()?, text.as_deref()?))
}

/// [`map_workflow_run`] for a row of `run_record_select(…, documents = true, …)`: no further
/// statement unless the run has mounts or a document is missing or not JSON.
pub fn map_run_record(conn: &Db, row: &RunRowRef<'_>, reads: &RecordReads<'_>) -> Result<String> {
    map_run_record_with(
        &mut read_documents(conn, row, reads),
        row,
        Some(reads),
        None,
    )
}

/// JSON reads that know the definition snapshot and launch options `reads` holds.
fn read_documents<'c>(
    conn: &'c Db,
    row: &RunRowRef<'_>,
    reads: &'c RecordReads<'_>,
) -> JsonReads<'c> {
    let stored = [
        stored(row.definition_hash, &reads.definition),
        stored(row.launch_options_hash, &reads.launch_options),
    ];
    JsonReads::with_stored(conn, stored.into_iter().flatten().collect())
}

/// [`map_run_record`] of a claim result, carrying the caller's `claimToken` (its JSON text).
pub fn map_run_record_with_token(
    conn: &Db,
    row: &RunRowRef<'_>,
    reads: &RecordReads<'_>,
    claim_token: &str,
) -> Result<String> {
    let mut json = read_documents(conn, row, reads);
    map_run_record_with(&mut json, row, Some(reads), Some(claim_token))
}

/// [`map_workflow_run_with`] for a row of `run_record_select(…, documents = false, …)`: the
/// definition snapshot and launch options through the list's shared `json`, the input from
/// the row.
pub fn map_listed_run_record(
    json: &mut JsonReads<'_>,
    row: &RunRowRef<'_>,
    reads: &RecordReads<'_>,
) -> Result<String> {
    map_run_record_with(json, row, Some(reads), None)
}

/// The reads of a run's record, in the reference's order, from `reads` where they hold them
/// (the error, the root source of a run without mounts, the input), else through `json`; a
/// claim result carries the caller's `claimToken`.
fn map_run_record_with(
    json: &mut JsonReads<'_>,
    row: &RunRowRef<'_>,
    reads: Option<&RecordReads<'_>>,
    claim_token: Option<&str>,
) -> Result<String> {
    let error_message = match (row.error_hash, reads) {
        (None, _) => None,
        (Some(_), Some(reads)) => reads.error.as_deref().map(Cow::Borrowed),
        (Some(hash), None) => read_text(json.conn(), hash)?.map(Cow::Owned),
    };
    let sources = match reads {
        Some(RecordReads {
            root: Some([kind, id, revision]),
            has_mounts: false,
            ..
        }) => {
            json.check(row.definition_hash)?;
            let mut out = String::with_capacity(160);
            out.push_str("{\"root\":");
            push_source(&mut out, kind, id, revision);
            out.push_str(",\"mounted\":[]}");
            out
        }
        _ => read_queued_run_sources_text(json, row)?,
    };
    // The input read with the row is what `get_text` would give for it as a stored text.
    let input = match reads.and_then(|reads| stored(row.input_hash, &reads.input)) {
        Some((_, text)) => record_text(text).map_err(StoreError::plain)?,
        None => json.get_text(row.input_hash)?,
    };
    let launch_options = json.get_text(row.launch_options_hash)?;
    write_run_record(
        row,
        error_message.as_deref(),
        &sources,
        &input,
        &launch_options,
        claim_token,
    )
}

struct SourceRow {
    mount_path: String,
    source_type: String,
    source_ref: String,
    source_revision: String,
}

fn source_value(source: &SourceRow) -> Value {
    source_json(
        &source.source_type,
        &source.source_ref,
        &source.source_revision,
    )
}

/// [`source_json`] written as text.
pub fn push_source(out: &mut String, source_type: &str, source_ref: &str, source_revision: &str) {
    let mut source = ObjectWriter::new(out);
    if source_type == "builtin" {
        source
            .raw("kind", "\"builtin\"")
            .str("id", source_ref)
            .str("revision", source_revision);
    } else {
        source
            .raw("kind", "\"file\"")
            .str("path", source_ref)
            .str("hash", source_revision);
    }
    source.finish();
}

/// `{kind, id, revision}` for a builtin source, `{kind, path, hash}` for a file.
pub fn source_json(source_type: &str, source_ref: &str, source_revision: &str) -> Value {
    if source_type == "builtin" {
        json!({ "kind": "builtin", "id": source_ref, "revision": source_revision })
    } else {
        json!({ "kind": "file", "path": source_ref, "hash": source_revision })
    }
}

/// `{root, mounted[]}` rebuilt from `run_sources`; mounted names come from the definition
/// snapshot's `composition.mounts`.
pub fn read_queued_run_sources(conn: &Db, run: &RunRow) -> Result<Value> {
    let text = read_queued_run_sources_text(&mut JsonReads::new(conn), &run.borrowed())?;
    Ok(serde_json::from_str(&text).expect("sources are written as valid JSON"))
}

/// [`read_queued_run_sources`] as JSON text.
fn read_queued_run_sources_text(json: &mut JsonReads<'_>, run: &RunRowRef<'_>) -> Result<String> {
    let conn = json.conn();
    let rows: Vec<SourceRow> = conn
        .prepare_cached(
            "SELECT mount_path, source_type, source_ref, source_revision
             FROM run_sources WHERE run_id = ? ORDER BY mount_path",
        )?
        .query_map([&run.run_id], |row| {
            Ok(SourceRow {
                mount_path: lossy_string_at(row, 0)?,
                source_type: row.get(1)?,
                source_ref: lossy_string_at(row, 2)?,
                source_revision: lossy_string_at(row, 3)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let root = rows
        .iter()
        .find(|row| row.mount_path.is_empty())
        .ok_or_else(|| {
            StoreError::plain(format!("Workflow run source is missing: {}", run.run_id))
        })?;
    let mounts: Vec<&SourceRow> = rows
        .iter()
        .filter(|row| !row.mount_path.is_empty())
        .collect();
    // The snapshot is read (and must parse) either way; only mounts need its value.
    let names = if mounts.is_empty() {
        json.check(run.definition_hash)?;
        Map::new()
    } else {
        mount_names(&json.get(run.definition_hash)?)
    };
    let mut out = String::with_capacity(160);
    out.push_str("{\"root\":");
    push_source(
        &mut out,
        &root.source_type,
        &root.source_ref,
        &root.source_revision,
    );
    out.push_str(",\"mounted\":");
    if mounts.is_empty() {
        out.push_str("[]}");
        return Ok(out);
    }
    let mounted: Vec<Value> = mounts
        .iter()
        .map(|row| {
            let name = names
                .get(&row.mount_path)
                .cloned()
                .unwrap_or_else(|| Value::String(row.mount_path.clone()));
            json!({
                "mountPath": row.mount_path.split('/').collect::<Vec<_>>(),
                "workflowName": name,
                "source": source_value(row),
            })
        })
        .collect();
    out.push_str(&json_text(&Value::Array(mounted)));
    out.push('}');
    Ok(out)
}

/// `mountPath.join("/") → workflowName` for each well-formed mount (later entries win).
fn mount_names(snapshot: &Value) -> Map<String, Value> {
    let mut names = Map::new();
    let mounts = snapshot
        .get("composition")
        .filter(|composition| composition.is_object())
        .and_then(|composition| composition.get("mounts"))
        .and_then(Value::as_array);
    for mount in mounts.into_iter().flatten() {
        let (Some(path), Some(name)) = (
            mount.get("mountPath").and_then(Value::as_array),
            mount.get("workflowName").and_then(Value::as_str),
        ) else {
            continue;
        };
        let parts: Option<Vec<&str>> = path.iter().map(Value::as_str).collect();
        if let (true, Some(parts)) = (mount.is_object(), parts) {
            names.insert(parts.join("/"), Value::String(name.into()));
        }
    }
    names
}
