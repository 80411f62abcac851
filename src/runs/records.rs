//! Run records as the reference returns them: the full queue record (with sources, input and
//! launch options) and the lighter view record.

use rusqlite::{Connection, Row};
use serde_json::{json, Map, Value};

use super::row::RunRow;
use crate::error::{Result, StoreError};
use crate::state::blobs::{read_text, JsonReads};
use crate::time::{iso, js_iso};
use crate::wire::{json_text, ObjectWriter};

fn digest_text(digest: &[u8]) -> String {
    format!("sha256:{}", hex::encode(digest))
}

/// `WorkflowRunQueueRecord` for a run row as JSON text (`claimToken` is null here).
pub fn map_workflow_run(conn: &Connection, row: &RunRow) -> Result<String> {
    map_workflow_run_with(&mut JsonReads::new(conn), row, None)
}

/// [`map_workflow_run`] reading JSON documents through `json`, which a list shares: its runs
/// mostly have the same definition snapshot and launch options. A claim result carries the
/// caller's `claimToken`. Written straight as JSON text: building and serializing a `Value`
/// was most of the cost of the record.
pub fn map_workflow_run_with(
    json: &mut JsonReads<'_>,
    row: &RunRow,
    claim_token: Option<&str>,
) -> Result<String> {
    let conn = json.conn();
    let headless = row.execution_mode.as_deref() == Some("headless");
    let error_message = match &row.error_hash {
        Some(hash) => read_text(conn, hash)?,
        None => None,
    };
    let sources = read_queued_run_sources_text(json, row)?;
    let input = json.get_text(&row.input_hash)?;
    let launch_options = json.get_text(&row.launch_options_hash)?;
    // A renewal may store an expiry beyond JavaScript's dates; toISOString() throws then.
    let claim_expires_at = match row.claim_expires_at {
        Some(ms) => Some(js_iso(ms as f64)?),
        None => None,
    };
    let mut out = String::with_capacity(1024 + input.len() + launch_options.len());
    let mut record = ObjectWriter::new(&mut out);
    record
        .str("runId", &row.run_id)
        .str("workflowName", &row.workflow_name)
        .str("workflowSourceRef", &row.workflow_ref)
        .raw("workflowSource", &sources)
        .bool("initialized", row.run_status != "queued")
        .str("definitionDigest", &digest_text(&row.definition_digest))
        .raw("input", &input)
        .raw("launchOptions", &launch_options)
        .str("status", &row.status)
        .opt_str("runnerId", row.owner_id.as_deref())
        .opt_str("claimToken", claim_token);
    match row.owner_id {
        Some(_) => record.int("claimGeneration", row.lease_generation),
        None => record.raw("claimGeneration", "null"),
    };
    record
        .opt_str("claimExpiresAt", claim_expires_at.as_deref())
        .opt_str("affinityRunnerId", row.affinity_runner_id.as_deref())
        .opt_str(
            "originSessionId",
            if headless {
                None
            } else {
                row.origin_session_id.as_deref()
            },
        )
        .opt_str("executionMode", row.execution_mode.as_deref())
        .opt_str("parentRunId", row.parent_run_id.as_deref())
        .str("rootRunId", &row.root_run_id)
        .opt_str("lineageKind", row.lineage_kind.as_deref())
        .int("restartNumber", row.restart_number)
        .opt_str(
            "parentTerminalFingerprint",
            row.parent_terminal_fingerprint
                .as_deref()
                .map(hex::encode)
                .as_deref(),
        )
        .opt_str("errorCode", row.error_code.as_deref())
        .opt_str("errorMessage", error_message.as_deref())
        .str("createdAt", &iso(row.created_at))
        .str("updatedAt", &iso(row.updated_at))
        .opt_str("startedAt", row.started_at.map(iso).as_deref())
        .opt_str("finishedAt", row.finished_at.map(iso).as_deref())
        .finish();
    Ok(out)
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
pub fn read_queued_run_sources(conn: &Connection, run: &RunRow) -> Result<Value> {
    let text = read_queued_run_sources_text(&mut JsonReads::new(conn), run)?;
    Ok(serde_json::from_str(&text).expect("sources are written as valid JSON"))
}

/// [`read_queued_run_sources`] as JSON text.
fn read_queued_run_sources_text(json: &mut JsonReads<'_>, run: &RunRow) -> Result<String> {
    let conn = json.conn();
    let rows: Vec<SourceRow> = conn
        .prepare_cached(
            "SELECT mount_path, source_type, source_ref, source_revision
             FROM run_sources WHERE run_id = ? ORDER BY mount_path",
        )?
        .query_map([&run.run_id], |row| {
            Ok(SourceRow {
                mount_path: row.get(0)?,
                source_type: row.get(1)?,
                source_ref: row.get(2)?,
                source_revision: row.get(3)?,
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
        json.check(&run.definition_hash)?;
        Map::new()
    } else {
        mount_names(&json.get(&run.definition_hash)?)
    };
    let mut out = String::with_capacity(160);
    let mut sources = ObjectWriter::new(&mut out);
    sources.raw("root", &json_text(&source_value(root)));
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
    sources.raw("mounted", &json_text(&Value::Array(mounted)));
    sources.finish();
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

/// The columns of the reference's `workflowRunViewSelect` as a literal, so that each
/// statement built on it is a constant (`concat!`): a lookup builds no SQL text.
macro_rules! run_view_select {
    () => {
        "SELECT r.run_id, d.workflow_name,
    r.workflow_ref, r.status, r.paused,
    r.definition_digest, q.status,
    b.origin_session_id, b.execution_mode,
    r.parent_run_id, r.root_run_id,
    r.lineage_kind, r.restart_number,
    r.parent_terminal_fingerprint,
    q.error_code, CAST(error.content AS TEXT),
    q.created_at, q.updated_at,
    q.started_at, q.finished_at,
    source.source_type, source.source_ref,
    source.source_revision
    FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id
    LEFT JOIN run_sources source ON source.run_id = r.run_id AND source.mount_path = ''
    LEFT JOIN blobs error ON error.blob_hash = q.error_hash"
    };
}

/// The view of one run by id.
pub const VIEW_BY_RUN_ID: &str = concat!(run_view_select!(), " WHERE r.run_id = ?");
/// The view of one run by row id.
pub const VIEW_BY_ROWID: &str = concat!(run_view_select!(), " WHERE r.rowid = ?");
/// The newest open reservation of a session (the queue is not terminal).
pub const VIEW_OPEN_SESSION_RESERVATION: &str = concat!(
    run_view_select!(),
    " WHERE b.origin_session_id = ?
    AND q.status NOT IN ('done', 'failed', 'cancelled') ORDER BY q.created_at DESC LIMIT 1"
);

/// Maps one row of `run_view_select!()` to a `WorkflowRunQueueViewRecord`, written straight as
/// JSON text (views are listed fifty at a time); `None` for a row the reference filters out
/// (no binding or no root source).
pub fn map_view_row(row: &Row<'_>) -> rusqlite::Result<Option<String>> {
    let execution_mode: Option<String> = row.get(8)?;
    let source_type: Option<String> = row.get(20)?;
    let source_ref: Option<String> = row.get(21)?;
    let source_revision: Option<String> = row.get(22)?;
    let (Some(mode), Some(source_type), Some(source_ref), Some(source_revision)) =
        (execution_mode, source_type, source_ref, source_revision)
    else {
        return Ok(None);
    };
    if mode != "interactive" && mode != "headless" {
        return Ok(None);
    }
    let run_status: String = row.get(3)?;
    let origin: Option<String> = row.get(7)?;
    let fingerprint: Option<Vec<u8>> = row.get(13)?;
    let digest: Vec<u8> = row.get(5)?;
    let mut source = String::new();
    ObjectWriter::new(&mut source)
        .raw(
            "root",
            &json_text(&source_json(&source_type, &source_ref, &source_revision)),
        )
        .raw("mounted", "[]")
        .finish();
    let mut out = String::with_capacity(700);
    ObjectWriter::new(&mut out)
        .str("runId", &row.get::<_, String>(0)?)
        .str("workflowName", &row.get::<_, String>(1)?)
        .str("workflowSourceRef", &row.get::<_, String>(2)?)
        .raw("workflowSource", &source)
        .bool("initialized", run_status != "queued")
        .str("definitionDigest", &digest_text(&digest))
        .str("runStateStatus", &run_status)
        .bool("paused", row.get::<_, i64>(4)? == 1)
        .str("status", &row.get::<_, String>(6)?)
        .opt_str(
            "originSessionId",
            if mode == "headless" {
                None
            } else {
                origin.as_deref()
            },
        )
        .str("executionMode", &mode)
        .opt_str("parentRunId", row.get::<_, Option<String>>(9)?.as_deref())
        .str("rootRunId", &row.get::<_, String>(10)?)
        .opt_str("lineageKind", row.get::<_, Option<String>>(11)?.as_deref())
        .int("restartNumber", row.get::<_, i64>(12)?)
        .opt_str(
            "parentTerminalFingerprint",
            fingerprint.as_deref().map(hex::encode).as_deref(),
        )
        .opt_str("errorCode", row.get::<_, Option<String>>(14)?.as_deref())
        .opt_str("errorMessage", row.get::<_, Option<String>>(15)?.as_deref())
        .str("createdAt", &iso(row.get(16)?))
        .str("updatedAt", &iso(row.get(17)?))
        .opt_str(
            "startedAt",
            row.get::<_, Option<i64>>(18)?.map(iso).as_deref(),
        )
        .opt_str(
            "finishedAt",
            row.get::<_, Option<i64>>(19)?.map(iso).as_deref(),
        )
        .finish();
    Ok(Some(out))
}

/// View records (JSON texts) of `sql`, one of the `VIEW_*` statements.
pub fn view_rows(
    conn: &Connection,
    sql: &'static str,
    params: impl rusqlite::Params,
) -> Result<Vec<String>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, map_view_row)?;
    let mut views = Vec::new();
    for row in rows {
        if let Some(view) = row? {
            views.push(view);
        }
    }
    Ok(views)
}
