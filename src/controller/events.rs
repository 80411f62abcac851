//! Controller events: recording an event on a controller resource (by its claim holder or the
//! control plane) and listing events newest first. Both write their records with
//! `ControllerEvent::write`.
//!
//! Limits are bound as `LIMIT +?`. SQLite reads a bare `LIMIT ?` bound to an integer as a
//! constant when it compiles the statement, so every new binding expires the cached statement
//! and the next step compiles it again; `+?` is the same value, read when the statement runs
//! (the plans are the same either way).

use std::borrow::Cow;

use crate::sql::{params_from_iter, Db};
use rusqlite::types::ValueRef;

use super::json_arg;
use super::rows::claim::require_claim_row;
use super::rows::documented::joined_payload_text;
use super::rows::{bump_controller_resource, ResourceRef};
use crate::error::Result;
use crate::js::timestamp;
use crate::js::{assign_read_from, bind_params, Bound, Js, Param};
use crate::state::leases::{self, Actor};
use crate::state::revisions::Payload;
use crate::store::{in_read_transaction, Store};
use crate::wire::{Call, ObjectWriter, Reply};

/// `listEvents` without a `limit`.
const DEFAULT_EVENT_LIMIT: i64 = 100;

/// Records an event with a revision bump. The returned `payload` is the caller's own object,
/// which the JS layer puts back in place of the `{}` sent here.
pub fn record_event(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let now = timestamp(call, options.get("now")?)?;
    let (event, revision, echo) = store.write(|conn| {
        let reference = ResourceRef::copied(options)?;
        let claimed = require_claim_row(conn, store.project_id(), reference)?;
        // Only `undefined` means no claim: a `null` one is checked (and fails to be read). The
        // test and the check each read `options.claim`.
        let claimed_by = !options.get("claim")?.is_undefined();
        if claimed_by {
            claimed.assert_claim(options.get("claim")?, now, true)?;
        }
        let row = &claimed.row;
        // The revision was read with the row, in this transaction.
        let revision = row.resource_version + 1;
        bump_controller_resource(conn, &row.resource_id, revision - 1, now)?;
        // The event's arguments, in their order: `options.type`, `options.claim === undefined`,
        // `options.claim?.ownerId ?? null`, `options.payload ?? {}`, `options.claim?.generation`.
        let event_type = options.get("type")?;
        let claimed = !options.get("claim")?.is_undefined();
        let owner_id = options
            .get("claim")?
            .get_or_undefined("ownerId")?
            .or(Js::Null);
        let payload = options.get("payload")?;
        let generation = options
            .get("claim")?
            .get_or_undefined("generation")?
            .or(Js::Null);
        let payload = json_arg(call, payload)?.text_or("{}")?;
        let actor = Actor::ControllerEvent {
            claimed,
            owner_id,
            generation,
        };
        // The caller's values are bound as better-sqlite3 binds them: a number becomes its REAL
        // text, `null`/`undefined` fail the NOT NULL constraint, an object or array the count.
        let event = (row.resource_id.as_str(), revision, Param::Js(event_type));
        leases::record_event(conn, event, actor, payload, now, Payload::Fresh)?;
        // `if (options.claim !== undefined) options.claim.resourceVersion = revision`: the test
        // and the assignment each read `options.claim`, and the assignment runs on whatever the
        // second read gives (`undefined` there throws the reference's TypeError: rolled back).
        let claimed = !options.get("claim")?.is_undefined();
        let assigned = claimed && {
            let claim = options.get("claim")?;
            assign_read_from(options, claim, "resourceVersion", revision as f64)?
        };
        let mut event = String::with_capacity(128);
        ControllerEvent {
            // The events INSERT is the last row insert: `event_seq` is its rowid (AUTOINCREMENT).
            seq: conn.last_insert_rowid()?,
            recorded_at: now,
            controller: None,
            key: None,
            event_type: None,
            payload: "{}",
        }
        .write(&mut event);
        // The record's `controller`, `key`, `type` and `payload: options.payload ?? {}`: a live
        // call reads them here, inside the transaction (a getter that throws rolls it back),
        // and hands the caller's values back as they are; a wire call's are put in by the JS
        // layer (`echo`, `echo_props`).
        let mut echo = Vec::new();
        if let Js::Live(object) = options {
            for name in ["controller", "key", "type"] {
                if let (_, Some(handle)) = object.get_with_handle(name)? {
                    echo.push((name, handle));
                }
            }
            if let Some(handle) = object.get_handle_or_empty_object("payload")? {
                echo.push(("payload", handle));
            }
        }
        // A wire call's claim is changed by the JS layer after the call.
        let wire_claim = claimed && !assigned;
        Ok((event, wire_claim.then_some(revision), echo))
    })?;
    let mut reply = Reply::json_text(event);
    reply.echo = echo;
    Ok(match revision {
        Some(revision) => reply.set_claim("resourceVersion", revision),
        None => reply,
    })
}

/// A `ControllerEvent`, its payload already JSON text. The record `recordEvent` returns has
/// no `controller`, `key` or `type` (`None`, written as `null`) and a `{}` payload: the
/// caller's own values go there, handed back by a live call (`$echo`), put in by the JS layer
/// for a wire call (`echo` and `echo_props` in src/methods/table.rs).
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

/// Writes the controller events `sql` selects (bound by `bound`) into `out` as JSON array
/// items after any already there, straight from SQLite's row buffers; returns how many. Each
/// payload blob comes in the same row (one statement, not one more per payload).
fn write_events(conn: &Db, sql: &str, bound: &[Bound<'_>], out: &mut String) -> Result<i64> {
    let mut statement = conn.prepare_cached(sql)?;
    let mut rows = statement.query(params_from_iter(bound))?;
    let mut count = 0;
    while let Some(ref row) = rows.next()? {
        if !out.ends_with('[') {
            out.push(',');
        }
        count += 1;
        let (seq, recorded_at) = (row.get(0)?, row.get(1)?);
        let (controller, key, event_type) = (text_at(row, 2)?, text_at(row, 3)?, text_at(row, 4)?);
        let payload = joined_payload_text(row, 5)?;
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

/// The reference's statement: every event of every matching controller resource, sorted.
fn all_events_sql(filter: &str) -> String {
    format!(
        "SELECT e.event_seq, e.recorded_at, c.controller_name, c.resource_key,
                e.event_type, e.payload_hash, b.media_type, b.content
         FROM events e
         JOIN resources r ON r.resource_id = e.resource_id
         JOIN controller_resources c ON c.resource_id = r.resource_id
         LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
         WHERE {filter}
         ORDER BY e.event_seq DESC LIMIT +?"
    )
}

/// The matching events with `lower < event_seq <= upper` (bound first), newest first: events
/// are walked down from `upper` (the `CROSS JOIN`s keep SQLite from driving the join from the
/// resources), so the walk ends at the `limit`-th match. Each event is looked up in the small
/// `controller_resources` first: a run event (most of a busy log) is passed over without a
/// read of the large `resources` table.
fn events_in_range_sql(filter: &str) -> String {
    format!(
        "SELECT e.event_seq, e.recorded_at, c.controller_name, c.resource_key,
                e.event_type, e.payload_hash, b.media_type, b.content
         FROM events e
         CROSS JOIN controller_resources c ON c.resource_id = e.resource_id
         CROSS JOIN resources r ON r.resource_id = c.resource_id
         LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
         WHERE e.event_seq <= ? AND e.event_seq > ? AND {filter}
         ORDER BY e.event_seq DESC LIMIT +?"
    )
}

/// The matching events with `event_seq <= upper` (bound first), newest first, found from the
/// matching resources through `events_resource_idx`: the sort holds only sequence numbers and
/// names, and only the `limit` events kept are read with their payloads.
fn events_below_sql(filter: &str) -> String {
    format!(
        "SELECT k.event_seq, e.recorded_at, k.controller_name, k.resource_key,
                e.event_type, e.payload_hash, b.media_type, b.content
         FROM (SELECT e.event_seq AS event_seq, c.controller_name AS controller_name,
                      c.resource_key AS resource_key
               FROM events e
               JOIN resources r ON r.resource_id = e.resource_id
               JOIN controller_resources c ON c.resource_id = r.resource_id
               WHERE e.event_seq <= ? AND {filter}
               ORDER BY e.event_seq DESC LIMIT +?) k
         CROSS JOIN events e ON e.event_seq = k.event_seq
         LEFT JOIN blobs b ON b.blob_hash = e.payload_hash
         ORDER BY k.event_seq DESC"
    )
}

/// For a plain positive `limit`, the limit: the newest events are then searched in growing
/// ranges of sequence numbers before the rest is searched from the resource side (see
/// [`newest_events`]). Any other value keeps the reference's statement, and its errors.
fn recent_window(limit: Option<&Bound<'_>>) -> Option<i64> {
    let limit = match limit? {
        Bound::Integer(limit) => *limit,
        Bound::Real(limit) if limit.fract() == 0.0 && limit.abs() < 1e9 => *limit as i64,
        _ => return None,
    };
    (1..=EVENT_WINDOW_LIMIT).contains(&limit).then_some(limit)
}

/// Above this limit the ranges are not worth trying.
const EVENT_WINDOW_LIMIT: i64 = 10_000;

/// How many sequence numbers the ranges may cover before the rest is searched from the
/// resource side (at least the first range, twice the limit). Each range is four times the
/// one before: a log whose matches are dense near its end is answered from the first ones, a
/// sparse one costs the ranges' walk on top of the resource side's search.
const WINDOW_BUDGET: i64 = 8_192;

/// Writes the `limit` newest matching events (`bound`: the filter's values; `filter` their
/// clauses) into `out`; every statement reads in the caller's read transaction, so together
/// they see one state of the file. Ranges are taken from the newest sequence number down, each
/// one's matches come before any of the next, so the items are the reference's, in its order
/// (sequence numbers are unique), and a payload that fails fails at the same item. With a
/// `key` (`keyed`) the few matching resources are searched at once.
fn newest_events(
    conn: &Db,
    filter: &str,
    keyed: bool,
    bound: &[Bound<'_>],
    limit: i64,
    out: &mut String,
) -> Result<()> {
    let (newest, oldest): (Option<i64>, Option<i64>) = conn
        // Two subqueries: each is one index seek, a single `max(), min()` reads every row.
        .prepare_cached(
            "SELECT (SELECT max(event_seq) FROM events), (SELECT min(event_seq) FROM events)",
        )?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let (Some(mut upper), Some(oldest)) = (newest, oldest) else {
        return Ok(());
    };
    let in_range = events_in_range_sql(filter);
    let mut found = 0;
    let mut span = limit * 2;
    let mut covered = 0;
    let budget = if keyed { 0 } else { WINDOW_BUDGET.max(span) };
    while covered < budget {
        let lower = upper.saturating_sub(span.min(budget - covered));
        let mut values = vec![Bound::Integer(upper), Bound::Integer(lower)];
        values.extend_from_slice(bound);
        values.push(Bound::Integer(limit - found));
        found += write_events(conn, &in_range, &values, out)?;
        if found == limit || lower < oldest {
            return Ok(());
        }
        covered = covered.saturating_add(upper.saturating_sub(lower));
        upper = lower;
        span = span.saturating_mul(4);
    }
    let mut values = vec![Bound::Integer(upper)];
    values.extend_from_slice(bound);
    values.push(Bound::Integer(limit - found));
    write_events(conn, &events_below_sql(filter), &values, out)?;
    Ok(())
}

/// Newest first; unscoped without a project. `limit` is bound as given (`-1` is unlimited, a
/// fraction is SQLite's datatype mismatch).
pub fn list_events(store: &Store, call: &Call) -> Result<Reply> {
    // `options = {}` stands in for `undefined` only: its fields are then all undefined.
    let options = Js::arg(call, 0);
    let field = |name: &str| match options {
        Js::Undefined => Ok(Js::Undefined),
        options => options.get(name),
    };
    let mut clauses = vec!["r.resource_type = 'controller'"];
    let mut params = Vec::new();
    if let Some(project_id) = store.project_id() {
        clauses.push("c.project_id = ?");
        params.push(Param::text(project_id));
    }
    // `options.controller !== undefined`, then `params.push(options.controller)`: two reads.
    if !field("controller")?.is_undefined() {
        clauses.push("c.controller_name = ?");
        params.push(Param::Js(field("controller")?));
    }
    let by_key = !field("key")?.is_undefined();
    if by_key {
        clauses.push("c.resource_key = ?");
        params.push(Param::Js(field("key")?));
    }
    let limit = field("limit")?;
    params.push(if limit.is_nullish() {
        Param::int(DEFAULT_EVENT_LIMIT)
    } else {
        Param::Js(limit)
    });
    let conn = store.conn()?;
    let filter = clauses.join(" AND ");
    // One read transaction: the rows and each payload blob under one file lock.
    let bound = bind_params(&params)?;
    let out = in_read_transaction(conn, || event_list_text(conn, &filter, by_key, bound))?;
    Ok(Reply::json_text(out))
}

/// The events matching `filter` (bound by `bound`, its last value the limit; `keyed`: it
/// names a `key`) as JSON text.
fn event_list_text(conn: &Db, filter: &str, keyed: bool, bound: Vec<Bound<'_>>) -> Result<String> {
    let mut out = String::with_capacity(16 * 1024);
    out.push('[');
    match recent_window(bound.last()) {
        Some(limit) => {
            let values = &bound[..bound.len() - 1];
            newest_events(conn, filter, keyed, values, limit, &mut out)?
        }
        None => {
            write_events(conn, &all_events_sql(filter), &bound, &mut out)?;
        }
    }
    out.push(']');
    Ok(out)
}

/// A TEXT column borrowed when it is UTF-8, else decoded as V8 decodes it (see
/// [`text_lossy`](super::rows::text_lossy)).
fn text_at<'r>(row: &'r crate::sql::Row<'_>, index: usize) -> rusqlite::Result<Cow<'r, str>> {
    match row.get_ref(index)? {
        ValueRef::Text(bytes) => Ok(String::from_utf8_lossy(bytes)),
        _ => row.get::<_, String>(index).map(Cow::Owned),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::methods::dispatch;
    use crate::store::{resolve_project, Store};
    use crate::test_support::{open_read_write, vm_steps, Scratch};
    use crate::wire::Call;

    const NOW: i64 = 1_789_257_600_000;

    /// With 5,000 older controller events and the newest ones among run events, the 100 newest
    /// come from the first ranges of the log: the work does not grow with the older events
    /// (the reference's statement joins and sorts every one of them). Counted in SQLite
    /// virtual-machine steps, which do not depend on the machine.
    #[test]
    fn the_newest_events_are_found_without_reading_the_older_ones() {
        let dir = Scratch::new("events-ranges");
        let state = open_read_write(&dir.file("state.sqlite"), NOW);
        let project = resolve_project(&state, "/events/project", NOW).unwrap();
        let store = Store::new(&state, project.as_deref());
        let call = |method: &str, options: serde_json::Value| {
            dispatch(&store, method, &Call::new(vec![options], NOW)).unwrap()
        };
        let spec = json!({ "$c": "{}" });
        call(
            "putResource",
            json!({ "controller": "c", "key": "k", "now": NOW, "spec": spec, "initialStatus": spec }),
        );
        let conn = state.file_conn().unwrap();
        let run_events = |from: i64, count: i64| {
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 + ?2 - 1)
                 INSERT INTO events(event_id, resource_id, resource_revision, event_type,
                                    actor_type, recorded_at)
                 SELECT 'bulk-' || i, 'run-resource', i, 'bulk', 'system', 0 FROM n",
                [from, count],
            )
            .unwrap();
        };
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF;
             INSERT INTO resources(resource_id, resource_type, aggregate_key, created_at, updated_at)
             VALUES ('run-resource', 'run', 'bulk', 0, 0);",
        )
        .unwrap();
        for _ in 0..5_000 {
            call(
                "recordEvent",
                json!({ "controller": "c", "key": "k", "type": "old", "now": NOW }),
            );
        }
        for round in 0..100 {
            run_events(1 + round * 3, 3);
            call(
                "recordEvent",
                json!({ "controller": "c", "key": "k", "type": "new", "now": NOW }),
            );
        }
        let (listed, steps) = vm_steps(conn, || call("listEvents", json!({ "limit": 100 })));
        let text = format!("{listed:?}");
        assert_eq!(
            text.matches("\\\"type\\\":\\\"new\\\"").count(),
            100,
            "{text:.300}"
        );
        assert!(steps < 60_000, "{steps} VM instructions");
    }
}
