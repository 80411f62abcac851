//! Child workflows of controllers: idempotent reservation of a child workflow
//! request per resource and key, its progress under the resource's claim, the scheduler's
//! completion report, and reads.

use crate::sql::{params_from_iter, Db, OptionalExtension, Row};
use serde_json::{json, Map, Value};

use super::rows::claim::assert_controller_claim;
use super::rows::{
    error_argument, not_found_error, opt_text_lossy, put_caller_text,
    require_controller_row_by_uid, text_lossy,
};
use crate::error::{Result, StoreError};
use crate::js::{bind_params, buffer_from, canonical_literal, Encoding, Js, Param};
use crate::state::blobs::{read_text, BlobHash};
use crate::state::ids::random_uuid;
use crate::state::leases::{insert_attributed_event_of, Actor};
use crate::state::revisions::{bump_resource, resource_revision, Payload};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// A `controller_workflows` row with its resource uid; `run_id` is the actual run, else the
/// reserved one.
struct WorkflowRow {
    request_id: String,
    resource_uid: String,
    request_key: String,
    input_fingerprint: Vec<u8>,
    workflow_name: String,
    run_id: Option<String>,
    status: String,
    attempt_count: i64,
    error_hash: Option<Vec<u8>>,
}

/// The reference's `workflowSelect`; `clause` follows the join.
fn workflow_select(clause: &str) -> String {
    format!(
        "SELECT w.request_id, c.uid, w.request_key, w.input_fingerprint, w.workflow_name,
                COALESCE(w.run_id, w.reserved_run_id), w.status, w.attempt_count, w.error_hash
         FROM controller_workflows w
         JOIN controller_resources c ON c.controller_resource_id = w.controller_resource_id {clause}"
    )
}

impl WorkflowRow {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<WorkflowRow> {
        Ok(WorkflowRow {
            request_id: row.get(0)?,
            resource_uid: row.get(1)?,
            request_key: text_lossy(row, 2)?,
            input_fingerprint: row.get(3)?,
            workflow_name: text_lossy(row, 4)?,
            run_id: opt_text_lossy(row, 5)?,
            status: row.get(6)?,
            attempt_count: row.get(7)?,
            error_hash: row.get(8)?,
        })
    }
}

fn workflow_row(conn: &Db, uid: Js<'_>, request_key: Js<'_>) -> Result<Option<WorkflowRow>> {
    let mut statement =
        conn.prepare_cached(&workflow_select("WHERE c.uid = ? AND w.request_key = ?"))?;
    let bound = bind_params(&[Param::Js(uid), Param::Js(request_key)])?;
    Ok(statement
        .query_row(params_from_iter(bound), WorkflowRow::from_row)
        .optional()?)
}

fn workflow_row_by_id(conn: &Db, request_id: Js<'_>) -> Result<Option<WorkflowRow>> {
    let mut statement = conn.prepare_cached(&workflow_select("WHERE w.request_id = ?"))?;
    let bound = bind_params(&[Param::Js(request_id)])?;
    Ok(statement
        .query_row(params_from_iter(bound), WorkflowRow::from_row)
        .optional()?)
}

fn require_workflow_row(conn: &Db, request_id: Js<'_>) -> Result<WorkflowRow> {
    workflow_row_by_id(conn, request_id)?
        .ok_or_else(|| not_found_error("Workflow request not found: ", &[request_id]))
}

/// `ChildWorkflowRecord`: `runId` and `error` exist only when set.
fn map_workflow(conn: &Db, row: &WorkflowRow) -> Result<Value> {
    let mut record = Map::new();
    record.insert("requestId".into(), row.request_id.clone().into());
    record.insert("resourceUid".into(), row.resource_uid.clone().into());
    record.insert("requestKey".into(), row.request_key.clone().into());
    record.insert(
        "inputFingerprint".into(),
        hex::encode(&row.input_fingerprint).into(),
    );
    record.insert("workflow".into(), row.workflow_name.clone().into());
    if let Some(run_id) = &row.run_id {
        record.insert("runId".into(), run_id.clone().into());
    }
    record.insert("state".into(), row.status.clone().into());
    record.insert("attempt".into(), row.attempt_count.into());
    if let Some(hash) = &row.error_hash {
        record.insert(
            "error".into(),
            read_text(conn, hash)?.unwrap_or_default().into(),
        );
    }
    Ok(Value::Object(record))
}

pub fn reserve_workflow(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let now = call.clock;
    // Each use reads the field again, as the reference's expressions do.
    let reservation = store.write(|conn| {
        let source = require_controller_row_by_uid(conn, options.get("resourceUid")?)?;
        assert_controller_claim(conn, &source, options.get("claim")?, now, true)?;
        let (uid, request_key) = (options.get("resourceUid")?, options.get("requestKey")?);
        if let Some(existing) = workflow_row(conn, uid, request_key)? {
            // The stored fingerprint is lower-case hex; the argument is compared as given.
            let same_request = options
                .get("workflow")?
                .strict_eq_str(&existing.workflow_name)
                && options
                    .get("inputFingerprint")?
                    .strict_eq_str(&hex::encode(&existing.input_fingerprint));
            if !same_request {
                return Err(match error_argument(call, options.get("requestKey")?) {
                    Ok(key) => StoreError::WorkflowRequestConflict { key },
                    Err(thrown) => thrown,
                });
            }
            return Ok(json!({ "record": map_workflow(conn, &existing)?, "created": false }));
        }
        let request_id = random_uuid();
        let mut statement = conn.prepare_cached(
            "INSERT INTO controller_workflows(
               request_id, controller_resource_id, request_key, workflow_name,
               input_fingerprint, status, attempt_count, created_at, updated_at
             ) VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?)",
        )?;
        // The statement's arguments in order: `options.requestKey`, `options.workflow`, then
        // `Buffer.from(options.inputFingerprint, "hex")`.
        let request_key = options.get("requestKey")?;
        let workflow = options.get("workflow")?;
        let fingerprint_bytes = buffer_from(options.get("inputFingerprint")?, Encoding::Hex)?;
        statement.execute(params_from_iter(bind_params(&[
            Param::text(&request_id),
            Param::text(&source.controller_resource_id),
            Param::Js(request_key),
            Param::Js(workflow),
            Param::blob(&fingerprint_bytes),
            Param::int(now),
            Param::int(now),
        ])?))?;
        let record = map_workflow(conn, &require_workflow_row(conn, Js::String(&request_id))?)?;
        Ok(json!({ "record": record, "created": true }))
    })?;
    Ok(Reply::value(reservation))
}

pub fn get_workflow(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let row = workflow_row(conn, Js::arg(call, 0), Js::arg(call, 1))?;
    Ok(Reply::maybe(
        row.map(|row| map_workflow(conn, &row)).transpose()?,
    ))
}

pub fn get_workflow_by_request_id(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let row = workflow_row_by_id(conn, Js::arg(call, 0))?;
    Ok(Reply::maybe(
        row.map(|row| map_workflow(conn, &row)).transpose()?,
    ))
}

/// `update.error === undefined || update.error === null ? null : putText(update.error)`:
/// the field read for each test and again for the text.
fn update_error_hash(conn: &Db, update: Js<'_>, now: i64) -> Result<Option<BlobHash>> {
    if update.get("error")?.is_undefined() || update.get("error")? == Js::Null {
        return Ok(None);
    }
    put_caller_text(conn, update.get("error")?, now).map(Some)
}

/// `value ?? null`.
fn or_null(value: Js<'_>) -> Param<'_> {
    if value.is_nullish() {
        Param::null()
    } else {
        Param::Js(value)
    }
}

/// The scheduler's update of a workflow row; `$reserve` is what is set before the run ID
/// (the reserved run for `updateWorkflow`, nothing for `completeWorkflow`).
macro_rules! scheduler_update_sql {
    ($reserve:literal) => {
        concat!(
            "UPDATE controller_workflows SET ",
            $reserve,
            "run_id = CASE
               WHEN ? IS NOT NULL AND EXISTS(SELECT 1 FROM runs WHERE run_id = ?) THEN ?
               ELSE run_id
             END,
             status = ?, attempt_count = COALESCE(?, attempt_count),
             error_hash = ?, updated_at = ?
             WHERE request_id = ?"
        )
    };
}

/// Stores the error text of `update`, then the scheduler's update with its values bound in
/// order, each a read of `update` as in the reference: `update.runId ?? null` four times when
/// it `reserves` the run (`updateWorkflow`), three times when not (`completeWorkflow`), then
/// `update.state`, `update.attempt ?? null`, the error hash, `now` and the request ID.
fn store_scheduler_update(
    conn: &Db,
    reserves: bool,
    update: Js<'_>,
    request_id: Js<'_>,
    now: i64,
) -> Result<()> {
    let (sql, run_id_reads) = if reserves {
        (
            scheduler_update_sql!("reserved_run_id = COALESCE(?, reserved_run_id), "),
            4,
        )
    } else {
        (scheduler_update_sql!(""), 3)
    };
    let error_hash = update_error_hash(conn, update, now)?;
    let mut statement = conn.prepare_cached(sql)?;
    let mut values = Vec::with_capacity(run_id_reads + 5);
    for _ in 0..run_id_reads {
        values.push(or_null(update.get("runId")?));
    }
    values.extend([
        Param::Js(update.get("state")?),
        or_null(update.get("attempt")?),
        error_hash
            .as_ref()
            .map_or(Param::null(), |hash| Param::blob(&hash[..])),
        Param::int(now),
        Param::Js(request_id),
    ]);
    statement.execute(params_from_iter(bind_params(&values)?))?;
    Ok(())
}

pub fn update_workflow(store: &Store, call: &Call) -> Result<Reply> {
    let request_id = Js::arg(call, 0);
    let update = Js::arg(call, 1);
    let now = call.clock;
    let record = store.write(|conn| {
        let row = require_workflow_row(conn, request_id)?;
        let source = require_controller_row_by_uid(conn, Js::String(&row.resource_uid))?;
        assert_controller_claim(conn, &source, Js::arg(call, 2), now, true)?;
        store_scheduler_update(conn, true, update, request_id, now)?;
        map_workflow(conn, &require_workflow_row(conn, request_id)?)
    })?;
    Ok(Reply::value(record))
}

/// The scheduler's report of a settled child: checked before the transaction, then stored
/// with a revision bump and a `workflow_state_changed` event on the controller resource.
pub fn complete_workflow(store: &Store, call: &Call) -> Result<Reply> {
    let request_id = Js::arg(call, 0);
    let update = Js::arg(call, 1);
    let conn = store.conn()?;
    let row = require_workflow_row(conn, request_id)?;
    // `update.state === "pending" || update.state === "running"`: read for each test.
    if update.get("state")?.strict_eq_str("pending")
        || update.get("state")?.strict_eq_str("running")
    {
        return Err(StoreError::plain(
            "Scheduler completion must report a settled child state",
        ));
    }
    // `update.runId !== undefined && row.runId !== null && update.runId !== row.runId`.
    if let (false, Some(reserved)) = (update.get("runId")?.is_undefined(), &row.run_id) {
        if !update.get("runId")?.strict_eq_str(reserved) {
            return Err(StoreError::plain(
                "Scheduler completion run ID does not match the reserved child run",
            ));
        }
    }
    let source = require_controller_row_by_uid(conn, Js::String(&row.resource_uid))?;
    let now = call.clock;
    let record = store.write(|conn| {
        store_scheduler_update(conn, false, update, request_id, now)?;
        let revision = resource_revision(conn, &source.resource_id)?;
        bump_resource(conn, &source.resource_id, revision, now)?;
        let payload = completion_payload(
            call,
            request_id,
            update.get("state")?,
            update.get("runId")?,
            &row,
        )?;
        let event = (
            source.resource_id.as_str(),
            revision + 1,
            "workflow_state_changed",
        );
        insert_attributed_event_of(conn, event, Actor::System, &payload, now, Payload::Fresh)?;
        map_workflow(conn, &require_workflow_row(conn, request_id)?)
    })?;
    Ok(Reply::value(record))
}

/// Canonical `{requestId, state, runId: update.runId ?? row.runId}` (for a live call by the
/// JS layer's canonicaliser, over the literal the reference builds).
fn completion_payload(
    call: &Call,
    request_id: Js<'_>,
    state: Js<'_>,
    reported_run_id: Js<'_>,
    row: &WorkflowRow,
) -> Result<String> {
    let run_id = match (reported_run_id, &row.run_id) {
        (reported, Some(reserved)) if reported.is_nullish() => Js::String(reserved),
        (reported, None) if reported.is_nullish() => Js::Null,
        (reported, _) => reported,
    };
    canonical_literal(
        call,
        &[
            ("requestId", request_id),
            ("state", state),
            ("runId", run_id),
        ],
    )
}

pub fn list_workflows(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let mut statement = conn.prepare_cached(&workflow_select(
        "WHERE c.uid = ? ORDER BY w.created_at, w.request_id",
    ))?;
    let bound = bind_params(&[Param::Js(Js::arg(call, 0))])?;
    let rows = statement
        .query_map(params_from_iter(bound), WorkflowRow::from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let records = rows
        .iter()
        .map(|row| map_workflow(conn, row))
        .collect::<Result<Vec<_>>>()?;
    Ok(Reply::value(records))
}
