//! Run events: appending a caller's event to a run's log, and paging through the events of
//! every run in sequence order. Both write their records with `RunEvent::write`.

use crate::sql::{params_from_iter, Db};

use super::checks::runner_owner_type;
use super::row::run_row_of;
use crate::controller::rows::documented::joined_payload_text;
use crate::error::{Result, StoreError};
use crate::js::{bind_all, message_error, params_for, Js, Param};
use crate::state::columns::{opt_str_at, str_at};
use crate::state::leases::{record_event, Actor};
use crate::state::revisions::{bump_resource_revision, event_seq, Payload};
use crate::store::{in_read_transaction, Store};
use crate::wire::{Call, JsonArg, ObjectWriter, Reply};

/// Records the event in the reference's order: the run (bound as given; `Workflow run not
/// found: ${runId}`), the time, the revision bump, then the event with the caller's `type` and
/// `runnerId` bound as given (`runnerId?.startsWith("host-")` picks the actor type). The
/// record's `runId`, `workflowRef`, `type` and `payload` are the caller's own values: the JS
/// layer puts them in (`echo`, `echo_props` in src/methods/table.rs); placeholders are written here.
pub fn record_run_event(conn: &Db, call: &Call, options: Js<'_>) -> Result<Reply> {
    let run_id = options.get("runId")?;
    let Some(row) = run_row_of(conn, run_id)? else {
        return Err(message_error(&[
            Js::String("Workflow run not found: "),
            run_id,
        ]));
    };
    let now = crate::js::timestamp(call, options.get("now")?)?;
    let revision = bump_resource_revision(conn, &row.resource_id, now)?;
    let event_type = options.get("type")?;
    let runner = options.get("runnerId")?;
    let actor_type = if runner.is_nullish() {
        "session"
    } else {
        match runner.method("options.runnerId?", "startsWith")? {
            Js::String(text) | Js::IllFormed { text, .. } => runner_owner_type(text),
            _ => "session",
        }
    };
    // `options.runnerId ?? null`: read again for the binding, before the payload.
    let runner_bound = options.get("runnerId")?;
    let payload = JsonArg::read(call, options.get("payload")?)?.text_or("{}")?;
    // `insertEvent` stores the payload first, then binds the row.
    let bound = bind_all(&[event_type, runner_bound], 2)?;
    let [event_type, runner_id] = [&bound[0], &bound[1]].map(|bound| Param::Own(bound.clone()));
    let actor = Actor::Runner {
        owner_type: actor_type,
        runner_id,
        generation: (row.lease_generation != 0).then_some(row.lease_generation),
    };
    let event = (row.resource_id.as_str(), revision, event_type);
    let event_id = record_event(conn, event, actor, payload, now, Payload::Fresh)?;
    let seq = event_seq(conn, &event_id)?
        .ok_or_else(|| StoreError::plain("Run event was not recorded"))?;
    // The record's `runId`, `workflowRef` and `type`: a live call reads them here, inside the
    // transaction, and hands the caller's values back as they are (a wire call's are put in
    // by the JS layer, `echo_props`).
    let mut echo = Vec::new();
    if let Js::Live(object) = options {
        for name in ["runId", "workflowRef", "type"] {
            if let (_, Some(handle)) = object.get_with_handle(name)? {
                echo.push((name, handle));
            }
        }
    }
    // The record's `options.runnerId ?? null`: read a third time.
    let runner = options.get("runnerId")?;
    let runner_id = match runner {
        Js::String(text) => Some(text),
        _ => None,
    };
    // The caller's string with lone surrogates, as JSON text (`JSON.parse` reads their escapes
    // back as they were).
    let runner_json = match runner {
        Js::IllFormed { .. } => Some(runner.template_json()?),
        _ => None,
    };
    let mut event = String::with_capacity(160);
    RunEvent {
        seq,
        recorded_at: now,
        run_id: None,
        workflow_ref: None,
        event_type: None,
        runner_id,
        runner_json,
        payload: "{}",
    }
    .write(&mut event);
    // `payload: options.payload ?? {}`, read again.
    if let Js::Live(object) = options {
        if let Some(handle) = object.get_handle_or_empty_object("payload")? {
            echo.push(("payload", handle));
        }
    }
    let mut reply = Reply::json_text(event);
    reply.echo = echo;
    Ok(reply)
}

/// A `RunEventRecord`, its payload already JSON text. The record `recordRunEvent` returns has
/// no `runId`, `workflowRef` or `type` (`None`, written as `null`) and a `{}` payload: the JS
/// layer puts the caller's own values there (`echo` and `echo_props` in src/methods/table.rs).
struct RunEvent<'a> {
    seq: i64,
    recorded_at: i64,
    run_id: Option<&'a str>,
    workflow_ref: Option<&'a str>,
    event_type: Option<&'a str>,
    runner_id: Option<&'a str>,
    /// `runnerId` as JSON text, in place of `runner_id` (a caller's string that JSON text
    /// alone can keep).
    runner_json: Option<String>,
    payload: &'a str,
}

impl RunEvent<'_> {
    /// The one writer of `RunEventRecord`, as JSON text.
    fn write(&self, out: &mut String) {
        let mut record = ObjectWriter::new(out);
        record
            .int("seq", self.seq)
            .time("recordedAt", self.recorded_at)
            .opt_str("runId", self.run_id)
            .opt_str("workflowRef", self.workflow_ref)
            .opt_str("type", self.event_type);
        match &self.runner_json {
            Some(json) => record.raw("runnerId", json),
            None => record.opt_str("runnerId", self.runner_id),
        };
        record.raw("payload", self.payload).finish();
    }
}

/// Events of run resources after `seq`, oldest first, `options.limit ?? 100` of them.
pub fn list_run_events_after(store: &Store, seq: Js<'_>, options: Js<'_>) -> Result<Reply> {
    // `options = {}` is the default of an undefined argument only.
    let limit = if options.is_undefined() {
        Js::Number(100.0)
    } else {
        options.get("limit")?.or(Js::Number(100.0))
    };
    let conn = store.conn()?;
    // One read transaction: the rows and each payload blob under one file lock.
    let out = in_read_transaction(conn, || run_event_list_text(conn, seq, limit))?;
    Ok(Reply::json_text(out))
}

/// Run events after `seq`, at most `limit`, as JSON text, written straight from SQLite's row
/// buffers; each payload blob comes in the same row (one statement, not one more per payload).
/// `LIMIT +?`: see [`crate::controller::events`] (a bare `LIMIT ?` recompiles on every call).
fn run_event_list_text(conn: &Db, seq: Js<'_>, limit: Js<'_>) -> Result<String> {
    let mut statement = conn.prepare_cached(
        "SELECT e.event_seq, e.recorded_at, r.run_id, r.workflow_ref, e.event_type,
                e.actor_id, e.payload_hash, b.media_type, b.content
         FROM events e JOIN runs r ON r.resource_id = e.resource_id
         LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
         WHERE e.event_seq > ? ORDER BY e.event_seq LIMIT +?",
    )?;
    let params = params_for(&statement, &[seq, limit])?;
    let mut rows = statement.query(params_from_iter(&params))?;
    let mut out = String::with_capacity(16 * 1024);
    out.push('[');
    while let Some(ref row) = rows.next()? {
        if out.len() > 1 {
            out.push(',');
        }
        let (seq, recorded_at) = (row.get(0)?, row.get(1)?);
        let (run_id, workflow_ref) = (str_at(row, 2)?, str_at(row, 3)?);
        let (event_type, runner_id) = (str_at(row, 4)?, opt_str_at(row, 5)?);
        let payload = joined_payload_text(row, 6)?;
        RunEvent {
            seq,
            recorded_at,
            run_id: Some(run_id),
            workflow_ref: Some(workflow_ref),
            event_type: Some(event_type),
            runner_id,
            runner_json: None,
            payload: &payload,
        }
        .write(&mut out);
    }
    out.push(']');
    Ok(out)
}
