//! Run view records (`WorkflowRunQueueViewRecord`): the reference's view select as constant
//! statements, and a row of it written straight as JSON text.

use crate::sql::Row;

use super::machine::status::status_sql;
use super::records::push_source;
use crate::error::Result;
use crate::state::columns::{blob_at, opt_blob_at, opt_str_at, str_at};
use crate::wire::ObjectWriter;

/// The columns of the reference's `workflowRunViewSelect` as a literal, so that each
/// statement built on it is a constant (`concat!`): a lookup builds no SQL text.
macro_rules! run_view_select {
    () => {
        run_view_select!("")
    };
    ($extra_columns:literal) => {
        concat!(
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
    source.source_revision",
            $extra_columns,
            "
    FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id
    LEFT JOIN run_sources source ON source.run_id = r.run_id AND source.mount_path = ''
    LEFT JOIN blobs error ON error.blob_hash = q.error_hash"
        )
    };
}

/// The view of one run by id.
pub const VIEW_BY_RUN_ID: &str = concat!(run_view_select!(), " WHERE r.run_id = ?");
/// The view of one run by row id, and whether its error message, when it has one, is there
/// (see [`view_of_rowid`]).
pub const VIEW_BY_ROWID: &str = concat!(
    run_view_select!(", q.error_hash IS NULL OR error.blob_hash IS NOT NULL"),
    " WHERE r.rowid = ?"
);
/// The newest open reservation of a session (the queue is not terminal).
pub const VIEW_OPEN_SESSION_RESERVATION: &str = concat!(
    run_view_select!(),
    " WHERE b.origin_session_id = ?
    AND q.status NOT IN ",
    status_sql!(queue_terminal),
    " ORDER BY q.created_at DESC LIMIT 1"
);

/// Maps one row of `run_view_select!()` to a `WorkflowRunQueueViewRecord`, written straight as
/// JSON text (views are listed fifty at a time); `None` for a row the reference filters out
/// (no binding or no root source).
pub fn map_view_row(row: &Row<'_>) -> rusqlite::Result<Option<String>> {
    let execution_mode = opt_str_at(row, 8)?;
    let source_type = opt_str_at(row, 20)?;
    let source_ref = opt_str_at(row, 21)?;
    let source_revision = opt_str_at(row, 22)?;
    let (Some(mode), Some(source_type), Some(source_ref), Some(source_revision)) =
        (execution_mode, source_type, source_ref, source_revision)
    else {
        return Ok(None);
    };
    if mode != "interactive" && mode != "headless" {
        return Ok(None);
    }
    let run_status = str_at(row, 3)?;
    let origin = opt_str_at(row, 7)?;
    let fingerprint = opt_blob_at(row, 13)?;
    let digest = blob_at(row, 5)?;
    let mut out = String::with_capacity(900);
    let mut view = ObjectWriter::new(&mut out);
    view.str("runId", str_at(row, 0)?)
        .str("workflowName", str_at(row, 1)?)
        .str("workflowSourceRef", str_at(row, 2)?);
    let source = view.key("workflowSource");
    source.push_str("{\"root\":");
    push_source(source, source_type, source_ref, source_revision);
    source.push_str(",\"mounted\":[]}");
    view.bool("initialized", run_status != "queued")
        .digest("definitionDigest", digest)
        .str("runStateStatus", run_status)
        .bool("paused", row.get::<_, i64>(4)? == 1)
        .str("status", str_at(row, 6)?)
        .opt_str(
            "originSessionId",
            if mode == "headless" { None } else { origin },
        )
        .str("executionMode", mode)
        .opt_str("parentRunId", opt_str_at(row, 9)?)
        .str("rootRunId", str_at(row, 10)?)
        .opt_str("lineageKind", opt_str_at(row, 11)?)
        .int("restartNumber", row.get::<_, i64>(12)?)
        .opt_hex("parentTerminalFingerprint", fingerprint)
        .opt_str("errorCode", opt_str_at(row, 14)?)
        .opt_str("errorMessage", opt_str_at(row, 15)?)
        .time("createdAt", row.get(16)?)
        .time("updatedAt", row.get(17)?)
        .opt_time("startedAt", row.get(18)?)
        .opt_time("finishedAt", row.get(19)?)
        .finish();
    Ok(Some(out))
}

/// The view of run `rowid` through [`VIEW_BY_ROWID`] (`None`: no such run, or one the reference
/// filters out), and whether a blob inserted later cannot change it: the error message is the
/// only document a view reads, and it reads a missing one as none.
pub fn view_of_rowid(
    statement: &mut crate::sql::Stmt<'_>,
    rowid: i64,
) -> Result<Option<(String, bool)>> {
    let mut rows = statement.query([rowid])?;
    let Some(ref row) = rows.next()? else {
        return Ok(None);
    };
    let settled = row.get::<_, bool>(VIEW_COLUMNS)?;
    Ok(map_view_row(row)?.map(|view| (view, settled)))
}

/// How many columns `run_view_select!()` has.
const VIEW_COLUMNS: usize = 23;

/// Appends the view records of one run of `statement` (a `VIEW_*` statement) to `views`.
pub fn push_views(
    statement: &mut crate::sql::Stmt<'_>,
    params: impl crate::sql::Params,
    views: &mut Vec<String>,
) -> Result<()> {
    let rows = statement.query_map(params, map_view_row)?;
    for row in rows {
        if let Some(view) = row? {
            views.push(view);
        }
    }
    Ok(())
}
