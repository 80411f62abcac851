//! Run events (methods 60–61): appending a caller's event to a run's log, and paging through
//! the events of every run in sequence order.

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{json, Value};

use super::claims::runner_owner_type;
use super::reserve::sql_value;
use super::row::require_workflow_run_row;
use crate::controller::rows::joined_document_text;
use crate::error::{Result, StoreError};
use crate::state::columns::{opt_str_at, str_at};
use crate::state::revisions::{bump_resource_revision, event_seq, insert_event, EventDraft};
use crate::store::{in_read_transaction, Store};
use crate::time::iso;
use crate::wire::{field, opt_text, text, time, Call, JsonArg, ObjectWriter, Reply};

/// The run-event methods implemented here.
pub const METHODS: &[&str] = &["recordRunEvent", "listRunEventsAfter"];

/// Runs `method` when this module implements it (see `METHODS`); `None` otherwise.
pub fn dispatch(store: &Store, method: &str, call: &Call) -> Option<Result<Reply>> {
    let reply = match method {
        "recordRunEvent" => store
            .write(|conn| record_run_event(conn, call.arg(0)))
            .map(Reply::value),
        "listRunEventsAfter" => list_run_events_after(store, call.arg(0), call.arg(1)),
        _ => return None,
    };
    Some(reply)
}

/// Records the event; the run must exist before the timestamp is even looked at. `payload`
/// comes back as `{}`: the JS layer puts the caller's own object there.
fn record_run_event(conn: &Connection, options: &Value) -> Result<Value> {
    let run_id = text(field(options, "runId"), "runId")?;
    let row = require_workflow_run_row(conn, run_id)?;
    let now = time(field(options, "now"))?;
    let runner_id = opt_text(field(options, "runnerId"), "runnerId")?;
    let event_type = text(field(options, "type"), "type")?;
    let revision = bump_resource_revision(conn, &row.resource_id, now)?;
    let event_id = insert_event(
        conn,
        &EventDraft {
            resource_id: &row.resource_id,
            revision,
            event_type,
            actor_type: runner_id.map_or("session", runner_owner_type),
            actor_id: runner_id,
            payload: JsonArg::of(field(options, "payload")).text_or("{}")?,
            now,
            lease_generation: (row.lease_generation != 0).then_some(row.lease_generation),
        },
    )?;
    let seq = event_seq(conn, &event_id)?
        .ok_or_else(|| StoreError::plain("Run event was not recorded"))?;
    Ok(json!({
        "seq": seq,
        "recordedAt": iso(now),
        "runId": run_id,
        "workflowRef": field(options, "workflowRef"),
        "type": event_type,
        "runnerId": runner_id,
        "payload": {},
    }))
}

/// Events of run resources after `seq`, oldest first, `options.limit ?? 100` of them.
fn list_run_events_after(store: &Store, seq: &Value, options: &Value) -> Result<Reply> {
    let conn = store.conn()?;
    let limit = match field(options, "limit") {
        Value::Null => Value::from(100),
        limit => limit.clone(),
    };
    // One read transaction: the rows and each payload blob under one file lock.
    let out = in_read_transaction(conn, || run_event_list_text(conn, seq, &limit))?;
    Ok(Reply::json_text(out))
}

/// Run events after `seq`, at most `limit`, as JSON text, written straight from SQLite's row
/// buffers; each payload blob comes in the same row (one statement, not one more per payload).
/// `LIMIT +?`: see [`crate::controller::events`] (a bare `LIMIT ?` recompiles on every call).
fn run_event_list_text(conn: &Connection, seq: &Value, limit: &Value) -> Result<String> {
    let mut statement = conn.prepare_cached(
        "SELECT e.event_seq, e.recorded_at, r.run_id, r.workflow_ref, e.event_type,
                e.actor_id, e.payload_hash, b.media_type, b.content
         FROM events e JOIN runs r ON r.resource_id = e.resource_id
         LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
         WHERE e.event_seq > ? ORDER BY e.event_seq LIMIT +?",
    )?;
    let mut rows = statement.query([sql_value(seq), sql_value(limit)])?;
    let mut out = String::with_capacity(16 * 1024);
    out.push('[');
    while let Some(row) = rows.next()? {
        if out.len() > 1 {
            out.push(',');
        }
        let mut event = ObjectWriter::new(&mut out);
        event
            .int("seq", row.get(0)?)
            .time("recordedAt", row.get(1)?)
            .str("runId", str_at(row, 2)?)
            .str("workflowRef", str_at(row, 3)?)
            .str("type", str_at(row, 4)?)
            .opt_str("runnerId", opt_str_at(row, 5)?);
        match row.get_ref(6)? {
            ValueRef::Null => event.raw("payload", "{}"),
            _ => event.raw("payload", &joined_document_text(row, 7)?),
        };
        event.finish();
    }
    out.push(']');
    Ok(out)
}
