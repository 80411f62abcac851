//! Resource revisions and the event log: the bookkeeping every mutation shares.
//!
//! Each mutating path bumps `resources.revision` by compare-and-set and appends an `events` row
//! carrying the new revision, so readers of the same file can follow every change.

use crate::sql::{params, params_from_iter, Db, OptionalExtension};

use std::sync::LazyLock;

use super::blobs::{put_json, put_json_held, stored_json_test, BlobHash};
use super::ids::{random_uuid, sha256};
use super::viewer::{record_known_run_resource_deltas, record_run_resource_deltas};
use crate::error::{Result, StoreError};
use crate::js::{bind_params, Bound, Js, Param};

/// The resource's revision, or `Resource is missing: <id>`.
pub fn resource_revision(conn: &Db, resource_id: &str) -> Result<i64> {
    conn.prepare_cached("SELECT revision FROM resources WHERE resource_id = ?")?
        .query_row([resource_id], |row| row.get(0))
        .optional()?
        .ok_or_else(|| StoreError::plain(format!("Resource is missing: {resource_id}")))
}

/// Compare-and-set `revision` from `expected` to `expected + 1`; a run resource also records
/// the viewer deltas of a run change.
pub fn bump_resource(conn: &Db, resource_id: &str, expected: i64, now: i64) -> Result<()> {
    compare_and_set_revision(conn, resource_id, expected, now)?;
    record_run_resource_deltas(conn, resource_id, now)
}

/// Compare-and-set `revision` from `expected` to `expected + 1`, nothing else: for resources
/// that are never a run's (controller and effect resources), where [`bump_resource`]'s look
/// for a run to record viewer deltas of would always come back empty.
///
/// A write that holds its writes to the COMMIT (`Db::holds_writes`) holds this one too, its
/// count unread: a revision other than `expected` is written as -1 instead, which the column's
/// `CHECK (revision >= 0)` refuses, failing the request that carries it; the write transaction
/// reports that as the conflict ([`conflict_of_held_revision`]). (Every caller's `expected` is
/// the revision it read in the same transaction, whose row therefore exists.)
pub fn compare_and_set_revision(
    conn: &Db,
    resource_id: &str,
    expected: i64,
    now: i64,
) -> Result<()> {
    if conn.holds_writes() {
        conn.prepare_cached(HELD_COMPARE_AND_SET)?
            .execute_deferred(params![expected, now, resource_id])?;
        return Ok(());
    }
    let changed = conn
        .prepare_cached(
            "UPDATE resources SET revision = revision + 1, updated_at = ?
             WHERE resource_id = ? AND revision = ?",
        )?
        .execute(params![now, resource_id, expected])?;
    if changed != 1 {
        return Err(StoreError::plain("Resource revision conflict"));
    }
    Ok(())
}

/// [`compare_and_set_revision`] held back: `expected`, `now`, `resource_id`.
const HELD_COMPARE_AND_SET: &str =
    "UPDATE resources SET revision = CASE revision WHEN ? THEN revision + 1 ELSE -1 END,
     updated_at = ? WHERE resource_id = ?";

/// A write transaction's error as the store reports it: the `CHECK` failure of a held
/// compare-and-set ([`compare_and_set_revision`]) is the revision conflict. Nothing else writes
/// a negative revision, so nothing else is renamed.
pub fn conflict_of_held_revision(error: StoreError) -> StoreError {
    match &error {
        StoreError::Sqlite { code, message }
            if code == "SQLITE_CONSTRAINT_CHECK" && message.ends_with("revision >= 0") =>
        {
            StoreError::plain("Resource revision conflict")
        }
        _ => error,
    }
}

/// [`resource_revision`] then [`bump_resource`] from it, in one statement: returns the new
/// revision, or fails with `Resource is missing: <id>` as the read would. For callers that do
/// nothing fallible between the two (inside the write transaction nothing else can move the
/// revision, so the compare-and-set always holds).
pub fn bump_resource_revision(conn: &Db, resource_id: &str, now: i64) -> Result<i64> {
    let revision = advance_resource_revision(conn, resource_id, now)?;
    record_run_resource_deltas(conn, resource_id, now)?;
    Ok(revision)
}

/// [`bump_resource_revision`] without the viewer deltas, for a caller that records them.
pub fn advance_resource_revision(conn: &Db, resource_id: &str, now: i64) -> Result<i64> {
    conn.prepare_cached(
        "UPDATE resources SET revision = revision + 1, updated_at = ?
             WHERE resource_id = ? RETURNING revision",
    )?
    .query_row(params![now, resource_id], |row| row.get(0))
    .optional()?
    .ok_or_else(|| StoreError::plain(format!("Resource is missing: {resource_id}")))
}

/// The revisions a run move's bookkeeping advances, as the move's first read found them (on a
/// cluster: `crate::runs::row::run_row_with_revisions_of`), so that a move holding its last
/// writes to the COMMIT (`Db::hold_writes_until_commit`) writes them without reading them back.
/// Within the move's write transaction nothing else moves them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KnownRevisions {
    /// `resources.revision` of the run's resource (`None`: no row, or not read).
    pub resource: Option<i64>,
    /// `viewer_runs.presentation_revision` of the run (`None`: no projection, or not read).
    pub presentation: Option<i64>,
}

/// [`advance_resource_revision`], or, with the revision `known` and writes held, the update held
/// back and `known + 1` returned.
pub fn advance_known_resource_revision(
    conn: &Db,
    resource_id: &str,
    known: Option<i64>,
    now: i64,
) -> Result<i64> {
    match known {
        Some(revision) if conn.holds_writes() => {
            conn.prepare_cached(
                "UPDATE resources SET revision = revision + 1, updated_at = ? WHERE resource_id = ?",
            )?
            .execute_deferred(params![now, resource_id])?;
            Ok(revision + 1)
        }
        _ => advance_resource_revision(conn, resource_id, now),
    }
}

/// [`bump_resource_revision`] of run `run_id`'s resource, from what its read knew
/// ([`advance_known_resource_revision`], `record_known_run_resource_deltas`).
pub fn bump_known_run_revision(
    conn: &Db,
    (resource_id, run_id): (&str, &str),
    known: KnownRevisions,
    now: i64,
) -> Result<i64> {
    let revision = advance_known_resource_revision(conn, resource_id, known.resource, now)?;
    record_known_run_resource_deltas(conn, (resource_id, run_id), known.presentation, now)?;
    Ok(revision)
}

/// The columns of an event the store computes itself, for [`insert_event_params`].
#[derive(Debug, Clone, Copy)]
pub struct EventBase<'a> {
    /// The resource the event belongs to.
    pub resource_id: &'a str,
    /// The resource revision after the change.
    pub revision: i64,
    /// One of `session|host|controller|channel|human|policy|control|system`.
    pub actor_type: &'a str,
    /// Canonical JSON text of the payload (`{}` when there is none).
    pub payload: &'a str,
    /// `recorded_at` (epoch ms).
    pub now: i64,
}

/// Whether an event's payload is most likely stored already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A document events repeat (`{}`, `{"status":"running"}`): the row is inserted on
    /// condition that the blob is there, identical, and the blob put only when it was not.
    Repeated,
    /// A document of this event alone: put, then the row inserted.
    Fresh,
    /// A document this transaction has stored already, under this hash (what `put_json`
    /// returned for the same text): putting it again would change nothing (the blob is there,
    /// identical, and keeps its first `created_at`), so the row alone is inserted.
    Stored(&'a BlobHash),
}

/// Writes an `events` row (`crate::state::attribution::record_event` is the one caller): the
/// type, actor id and lease generation given as [`Param`]s, the
/// whole row bound in one pass by better-sqlite3's rules (an array a caller gave spreads over
/// the columns after it), as the reference's `insertEvent` binds the values it was passed.
pub fn insert_event_params(
    conn: &Db,
    event: &EventBase<'_>,
    [event_type, actor_id, lease_generation]: [Param<'_>; 3],
    payload: Payload<'_>,
) -> Result<String> {
    let event_id = format!("event-{}", random_uuid());
    if conn.holds_writes() {
        insert_event_held(
            conn,
            event,
            &event_id,
            [event_type, actor_id, lease_generation],
            payload,
        )?;
        return Ok(event_id);
    }
    // The reference puts the payload first: a forged blob fails before a value that cannot
    // be bound does. A fresh payload is put now (its hash is the put's); a repeated one only
    // when the conditional insert below finds it missing.
    let payload_hash = match payload {
        Payload::Fresh => put_json(conn, event.payload, event.now)?,
        Payload::Stored(hash) => *hash,
        Payload::Repeated => sha256(event.payload.as_bytes()),
    };
    let caller = [event_type, actor_id, lease_generation];
    let row = bind_params(&event_row(event, &event_id, caller, &payload_hash));
    let row = match row {
        Ok(row) => row,
        Err(error) => {
            if payload == Payload::Repeated {
                put_json(conn, event.payload, event.now)?;
            }
            return Err(error);
        }
    };
    if payload == Payload::Repeated {
        if insert_of_stored_payload(conn, &row, event.payload)? {
            return Ok(event_id);
        }
        put_json(conn, event.payload, event.now)?;
    }
    conn.prepare_cached(INSERT_EVENT)?
        .execute(params_from_iter(row))?;
    Ok(event_id)
}

/// [`insert_event_params`] past the caller's promise ([`Db::holds_writes`]): the payload put
/// (unless stored) and the row held back, to go with what follows. The row is bound first:
/// when that fails, the payload is put now and its failure, which the reference meets first,
/// wins. A caller's object is bound only with nothing held back (binding an array reads its
/// elements, which JavaScript may observe).
fn insert_event_held(
    conn: &Db,
    event: &EventBase<'_>,
    event_id: &str,
    caller: [Param<'_>; 3],
    payload: Payload<'_>,
) -> Result<()> {
    let stored = match payload {
        Payload::Stored(hash) => Some(*hash),
        Payload::Fresh | Payload::Repeated => None,
    };
    let payload_hash = stored.unwrap_or_else(|| sha256(event.payload.as_bytes()));
    let params = event_row(event, event_id, caller, &payload_hash);
    if params
        .iter()
        .any(|param| matches!(param, Param::Js(Js::Live(_))))
    {
        conn.send_held()?;
    }
    let row = bind_params(&params);
    let row = match row {
        Ok(row) => row,
        Err(error) => {
            if stored.is_none() {
                put_json(conn, event.payload, event.now)?;
            }
            return Err(error);
        }
    };
    if stored.is_none() {
        put_json_held(conn, event.payload, event.now)?;
    }
    conn.prepare_cached(INSERT_EVENT)?
        .execute_deferred(params_from_iter(row))?;
    Ok(())
}

/// An `events` row's values in [`INSERT_EVENT`]'s order: the caller's `[event_type, actor_id,
/// lease_generation]` among the store's own.
fn event_row<'a>(
    event: &EventBase<'a>,
    event_id: &'a str,
    [event_type, actor_id, lease_generation]: [Param<'a>; 3],
    payload_hash: &BlobHash,
) -> [Param<'a>; 9] {
    [
        Param::text(event_id),
        Param::text(event.resource_id),
        Param::int(event.revision),
        event_type,
        Param::text(event.actor_type),
        actor_id,
        lease_generation,
        Param::blob(&payload_hash[..]),
        Param::int(event.now),
    ]
}

/// [`INSERT_EVENT`] of the bound `row` if its payload (`payload`, whose hash the row holds)
/// is stored, identical; whether it was.
fn insert_of_stored_payload(conn: &Db, row: &[Bound<'_>], payload: &str) -> Result<bool> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "INSERT INTO events(
               event_id, resource_id, resource_revision, event_type, actor_type,
               actor_id, lease_generation, payload_hash, recorded_at
             ) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE {}",
            stored_json_test(8, 10, 11)
        )
    });
    let guard = [
        Bound::Integer(payload.len() as i64),
        Bound::Blob(payload.as_bytes().to_vec()),
    ];
    let params = row.iter().cloned().chain(guard);
    Ok(conn
        .prepare_cached(&SQL)?
        .execute(params_from_iter(params))?
        == 1)
}

/// The events INSERT, one parameter per column.
const INSERT_EVENT: &str = "INSERT INTO events(
       event_id, resource_id, resource_revision, event_type, actor_type,
       actor_id, lease_generation, payload_hash, recorded_at
     ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// `event_seq` of an event inserted in this transaction.
pub fn event_seq(conn: &Db, event_id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT event_seq FROM events WHERE event_id = ?")?
        .query_row([event_id], |row| row.get(0))
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::{conflict_of_held_revision, HELD_COMPARE_AND_SET};
    use crate::error::StoreError;
    use crate::sql::params;
    use crate::state::schema::STATE_SCHEMA_SQL;

    /// The held compare-and-set on the real schema (its `CHECK` is what reports a conflict).
    #[test]
    fn a_held_compare_and_set_advances_the_revision_read_and_refuses_another() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(STATE_SCHEMA_SQL).unwrap();
        conn.execute(
            "INSERT INTO resources VALUES ('r', 'controller', 'k', 3, 1, 1)",
            [],
        )
        .unwrap();
        let held = |expected: i64, now: i64| {
            conn.execute(HELD_COMPARE_AND_SET, params![expected, now, "r"])
                .map_err(|error| conflict_of_held_revision(StoreError::from(error)))
        };
        let row = || {
            conn.query_row(
                "SELECT revision, updated_at FROM resources WHERE resource_id = 'r'",
                [],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
            )
            .unwrap()
        };
        assert_eq!(held(3, 7).unwrap(), 1);
        assert_eq!(row(), (4, 7));
        let conflict = held(3, 8).unwrap_err();
        assert_eq!(
            conflict.to_string(),
            StoreError::plain("Resource revision conflict").to_string()
        );
        assert_eq!(row(), (4, 7));
    }
}
