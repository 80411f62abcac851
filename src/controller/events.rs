//! Controller events: recording an event on a controller resource (by its claim holder or the
//! control plane) and listing events newest first. Both write their records with
//! `ControllerEvent::write`.
//!
//! Limits are bound as `LIMIT +?`. SQLite reads a bare `LIMIT ?` bound to an integer as a
//! constant when it compiles the statement, so every new binding expires the cached statement
//! and the next step compiles it again; `+?` is the same value, read when the statement runs
//! (the plans are the same either way).

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::{params_from_iter, Connection};
use serde_json::Value;

use super::js::{bind_all, bind_params, is_nullish, read, Bound, Js, Param};
use super::rows::{bump_controller_resource, joined_document_text, require_claim_row, ResourceRef};
use super::{json_arg, time_at};
use crate::error::Result;
use crate::state::revisions::{insert_event_binding, EventDraft};
use crate::store::{in_read_transaction, Store};
use crate::wire::{Call, ObjectWriter, Reply};

/// `listEvents` without a `limit`.
const DEFAULT_EVENT_LIMIT: i64 = 100;

/// Records an event with a revision bump. The returned `payload` is the caller's own object,
/// which the JS layer puts back in place of the `{}` sent here.
pub fn record_event(store: &Store, call: &Call) -> Result<Reply> {
    let options = call.args.first();
    let now = time_at(read(options, "now")?, call)?;
    let (event, revision) = store.write(|conn| {
        let reference = ResourceRef::copied(options)?;
        let claimed = require_claim_row(conn, store.project_id(), reference)?;
        // Only `undefined` means no claim: a `null` one is checked (and fails to be read).
        let claim = read(options, "claim")?;
        let lease = claim
            .map(|claim| claimed.assert_claim(Some(claim), now, true))
            .transpose()?;
        let row = &claimed.row;
        // The revision was read with the row, in this transaction.
        let revision = row.resource_version + 1;
        bump_controller_resource(conn, &row.resource_id, revision - 1, now)?;
        let event_type = read(options, "type")?;
        let payload = json_arg(read(options, "payload")?).text_or("{}")?;
        let event = EventDraft {
            resource_id: &row.resource_id,
            revision,
            event_type: "",
            actor_type: if lease.is_some() {
                "controller"
            } else {
                "control"
            },
            actor_id: lease.as_ref().and_then(|lease| lease.owner_id.as_deref()),
            payload,
            now,
            lease_generation: lease.as_ref().map(|lease| lease.generation),
        };
        // The caller's `type` is bound as better-sqlite3 binds it: a number becomes its REAL
        // text, `null`/`undefined` fail the NOT NULL constraint, an object or array the count.
        let event_type = bind_all(&[Js::opt(event_type)], 1)?;
        insert_event_binding(conn, &event, &event_type[0], &event.actor_id)?;
        let mut event = String::with_capacity(128);
        ControllerEvent {
            // The events INSERT is the last row insert: `event_seq` is its rowid (AUTOINCREMENT).
            seq: conn.last_insert_rowid(),
            recorded_at: now,
            controller: None,
            key: None,
            event_type: None,
            payload: "{}",
        }
        .write(&mut event);
        Ok((event, revision))
    })?;
    let claim = read(options, "claim")?;
    let reply = Reply::json_text(event);
    Ok(if claim.is_some() {
        reply.set_claim("resourceVersion", revision)
    } else {
        reply
    })
}

/// A `ControllerEvent`, its payload already JSON text. The record `recordEvent` returns has
/// no `controller`, `key` or `type` (`None`, written as `null`) and a `{}` payload: the JS
/// layer puts the caller's own values there (`echo` and `echo_props` in src/methods.rs).
struct ControllerEvent<'a> {
    seq: i64,
    recorded_at: i64,
    controller: Option<&'a str>,
    key: Option<&'a str>,
    event_type: Option<&'a str>,
    payload: &'a str,
}

impl ControllerEvent<'_> {
    /// The one writer of `ControllerEvent`, as JSON text.
    fn write(&self, out: &mut String) {
        ObjectWriter::new(out)
            .int("seq", self.seq)
            .time("recordedAt", self.recorded_at)
            .opt_str("controller", self.controller)
            .opt_str("key", self.key)
            .opt_str("type", self.event_type)
            .raw("payload", self.payload)
            .finish();
    }
}

/// Writes the `limit` newest controller events of `events_source` (the table, or a window of
/// it, which `CROSS JOIN` makes SQLite walk in order instead of indexing it to join backwards)
/// into `out` as JSON array items, straight from SQLite's row buffers; returns how many. Each
/// payload blob comes in the same row (one statement, not one more per payload).
fn write_events(
    conn: &Connection,
    events_source: &str,
    join: &str,
    filter: &str,
    bound: &[Bound<'_>],
    out: &mut String,
) -> Result<i64> {
    let sql = format!(
        "SELECT e.event_seq, e.recorded_at, c.controller_name, c.resource_key,
                e.event_type, e.payload_hash, b.media_type, b.content
         FROM {events_source} e
         {join} resources r ON r.resource_id = e.resource_id
         JOIN controller_resources c ON c.resource_id = r.resource_id
         LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
         WHERE {filter}
         ORDER BY e.event_seq DESC LIMIT +?"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let mut rows = statement.query(params_from_iter(bound))?;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        if count > 0 {
            out.push(',');
        }
        count += 1;
        let (seq, recorded_at) = (row.get(0)?, row.get(1)?);
        let (controller, key, event_type) = (text_at(row, 2)?, text_at(row, 3)?, text_at(row, 4)?);
        let payload = match row.get_ref(5)? {
            ValueRef::Null => Cow::Borrowed("{}"),
            _ => Cow::Owned(joined_document_text(row, 6)?),
        };
        ControllerEvent {
            seq,
            recorded_at,
            controller: Some(&controller),
            key: Some(&key),
            event_type: Some(&event_type),
            payload: &payload,
        }
        .write(out);
    }
    Ok(count)
}

/// For a plain positive `limit`: `(limit, window)`, where `window` newest events of every
/// kind are searched first. Events are listed newest first, so when the window holds `limit`
/// matching events they are the answer; otherwise the whole log is searched. SQLite's own plan
/// collects every event of every controller resource and sorts them, whatever the limit.
fn recent_window(limit: Option<&Bound<'_>>) -> Option<(i64, i64)> {
    let limit = match limit? {
        Bound::Integer(limit) => *limit,
        Bound::Real(limit) if limit.fract() == 0.0 && limit.abs() < 1e9 => *limit as i64,
        _ => return None,
    };
    (1..=EVENT_WINDOW_LIMIT)
        .contains(&limit)
        .then_some((limit, limit * 2))
}

/// The newest events of every kind; its row count is bound first.
const RECENT_EVENTS: &str = "(SELECT * FROM events ORDER BY event_seq DESC LIMIT +?)";

/// Above this limit the window is not worth trying.
const EVENT_WINDOW_LIMIT: i64 = 10_000;

/// Newest first; unscoped without a project. `limit` is bound as given (`-1` is unlimited, a
/// fraction is SQLite's datatype mismatch).
pub fn list_events(store: &Store, call: &Call) -> Result<Reply> {
    // `options = {}` stands in for `undefined` only.
    let defaults = Value::Object(Default::default());
    let options = Some(call.args.first().unwrap_or(&defaults));
    let mut clauses = vec!["r.resource_type = 'controller'"];
    let mut params = Vec::new();
    if let Some(project_id) = store.project_id() {
        clauses.push("c.project_id = ?");
        params.push(Param::text(project_id));
    }
    if let Some(controller) = read(options, "controller")? {
        clauses.push("c.controller_name = ?");
        params.push(Param::Caller(Some(controller)));
    }
    if let Some(key) = read(options, "key")? {
        clauses.push("c.resource_key = ?");
        params.push(Param::Caller(Some(key)));
    }
    let limit = read(options, "limit")?;
    params.push(if is_nullish(limit) {
        Param::int(DEFAULT_EVENT_LIMIT)
    } else {
        Param::Caller(limit)
    });
    let conn = store.conn()?;
    let filter = clauses.join(" AND ");
    // One read transaction: the rows and each payload blob under one file lock.
    let bound = bind_params(&params)?;
    let out = in_read_transaction(conn, || event_list_text(conn, &filter, bound))?;
    Ok(Reply::json_text(out))
}

/// The events matching `filter` (bound by `bound`, its last value the limit) as JSON text.
fn event_list_text(conn: &Connection, filter: &str, bound: Vec<Bound<'_>>) -> Result<String> {
    let mut out = String::with_capacity(16 * 1024);
    out.push('[');
    let windowed = match recent_window(bound.last()) {
        Some((limit, window)) => {
            let mut windowed = bound.clone();
            windowed.insert(0, Bound::Integer(window));
            let count = write_events(
                conn,
                RECENT_EVENTS,
                "CROSS JOIN",
                filter,
                &windowed,
                &mut out,
            )?;
            // Fewer than `limit` in the window: the whole log is searched (these events are its
            // newest matches, so any payload that failed here fails there first too).
            count == limit || {
                out.truncate(1);
                false
            }
        }
        None => false,
    };
    if !windowed {
        write_events(conn, "events", "JOIN", filter, &bound, &mut out)?;
    }
    out.push(']');
    Ok(out)
}

/// A TEXT column borrowed when it is UTF-8, else decoded as V8 decodes it (see
/// [`text_lossy`](super::rows::text_lossy)).
fn text_at<'r>(row: &'r rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Cow<'r, str>> {
    match row.get_ref(index)? {
        ValueRef::Text(bytes) => Ok(String::from_utf8_lossy(bytes)),
        _ => row.get::<_, String>(index).map(Cow::Owned),
    }
}
