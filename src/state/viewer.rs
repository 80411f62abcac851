//! Viewer projection bookkeeping: every change to a run bumps its presentation revision and
//! writes one delta row per affected view, keeping the last 256 revisions.

use crate::sql::{params, Db, OptionalExtension};

use super::blobs::{put_json, put_json_held, stored_json_test};
use super::ids::sha256;
use crate::error::{Result, StoreError};

/// How many presentation revisions of deltas are kept per run.
pub const VIEWER_DELTA_RETENTION: i64 = 256;

/// One view a change touches: `(target_type, target_key)`.
pub type ViewerDraft = (&'static str, &'static str);

/// The views most run changes touch: summary and replay.
pub const SUMMARY_REPLAY: &[ViewerDraft] = &[("summary", ""), ("replay", "")];
/// The views every bump of a run resource touches.
pub const RUN_RESOURCE_BUMP: &[ViewerDraft] = &[
    ("summary", ""),
    ("graph", ""),
    ("replay", ""),
    ("inspector", "run"),
];

/// Inserts the run's `viewer_runs` row (revision 1), or keeps the one an earlier run of this
/// id left.
pub fn initialize_viewer_run(conn: &Db, run_id: &str, now: i64) -> Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO viewer_runs(run_id, presentation_revision, retained_from_revision, updated_at)
             VALUES (?, 1, 1, ?) ON CONFLICT(run_id) DO NOTHING",
    )?;
    if conn.holds_writes() {
        // Held to the COMMIT: the insert's count only chooses the read below, which finds the
        // row the insert conflicted with.
        insert.execute_deferred(params![run_id, now])?;
        return Ok(());
    }
    if insert.execute(params![run_id, now])? == 1 {
        return Ok(());
    }
    match presentation_revision(conn, run_id)? {
        Some(_) => Ok(()),
        None => Err(StoreError::plain(format!(
            "Viewer projection could not be initialized for workflow run: {run_id}"
        ))),
    }
}

fn presentation_revision(conn: &Db, run_id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT presentation_revision FROM viewer_runs WHERE run_id = ?")?
        .query_row([run_id], |row| row.get(0))
        .optional()?)
}

/// `SET` of the `viewer_runs` change of one presentation revision, made first and read back
/// (`RETURNING`): the next revision, and the first one kept, `max(1, revision - 256 + 1)`
/// ([`VIEWER_DELTA_RETENTION`]). The reference reads the row, writes the deltas, then updates
/// the row where the revision is still the one read; inside the write transaction nothing else
/// can move it, so the end state is the same.
macro_rules! advance_revision {
    () => {
        "UPDATE viewer_runs
         SET presentation_revision = presentation_revision + 1,
             retained_from_revision = MAX(1, presentation_revision + 2 - 256),
             updated_at = ?"
    };
}

/// Records one presentation revision touching `drafts`; the caller holds the write transaction.
pub fn record_viewer_deltas(
    conn: &Db,
    run_id: &str,
    drafts: &[ViewerDraft],
    now: i64,
) -> Result<i64> {
    let advanced = conn
        .prepare_cached(concat!(
            advance_revision!(),
            " WHERE run_id = ? RETURNING presentation_revision, retained_from_revision"
        ))?
        .query_row(params![now, run_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let Some((revision, retained_from)) = advanced else {
        return Err(StoreError::plain(format!(
            "Viewer projection does not exist for workflow run: {run_id}"
        )));
    };
    write_deltas(conn, run_id, revision, retained_from, drafts, now)?;
    Ok(revision)
}

/// What [`record_run_resource_deltas`] for run `run_id`'s resource, then `between` (the bump's
/// event), then [`record_viewer_deltas`] of `drafts` write, with the two `viewer_runs`
/// changes made in one statement (nothing else reads or writes that row meanwhile), held back
/// when its revision is `known` and writes are held. `None`, with nothing written and
/// `between` not run, when the run has no viewer projection.
pub fn record_bump_and_viewer_deltas(
    conn: &Db,
    (run_id, known): (&str, Option<i64>),
    drafts: &[ViewerDraft],
    now: i64,
    between: impl FnOnce() -> Result<()>,
) -> Result<Option<()>> {
    let advanced: Option<(i64, i64)> = match known {
        Some(current) if conn.holds_writes() => Some(advance_known(conn, run_id, current, 2, now)?),
        _ => conn
            .prepare_cached(
                "UPDATE viewer_runs
                 SET presentation_revision = presentation_revision + 2,
                     retained_from_revision = MAX(1, presentation_revision + 3 - 256),
                     updated_at = ?
                 WHERE run_id = ? RETURNING presentation_revision, retained_from_revision",
            )?
            .query_row(params![now, run_id], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?,
    };
    let Some((revision, retained_from)) = advanced else {
        return Ok(None);
    };
    let bumped = revision - 1;
    let bump_retained_from = (bumped - VIEWER_DELTA_RETENTION + 1).max(1);
    write_deltas(
        conn,
        run_id,
        bumped,
        bump_retained_from,
        RUN_RESOURCE_BUMP,
        now,
    )?;
    between()?;
    write_deltas(conn, run_id, revision, retained_from, drafts, now)?;
    Ok(Some(()))
}

/// [`record_run_resource_deltas`] of run `run_id` (the run of `resource_id`) whose
/// presentation revision its read found (`known`): with writes held, the change is held back
/// too, its values computed as the `RETURNING` would give them.
pub fn record_known_run_resource_deltas(
    conn: &Db,
    (resource_id, run_id): (&str, &str),
    known: Option<i64>,
    now: i64,
) -> Result<()> {
    match known {
        Some(current) if conn.holds_writes() => {
            let (revision, retained_from) = advance_known(conn, run_id, current, 1, now)?;
            write_deltas(
                conn,
                run_id,
                revision,
                retained_from,
                RUN_RESOURCE_BUMP,
                now,
            )
        }
        _ => record_run_resource_deltas(conn, resource_id, now),
    }
}

/// [`record_viewer_deltas`] of a run whose presentation revision its read found (`known`), as
/// [`record_known_run_resource_deltas`] does.
pub fn record_known_viewer_deltas(
    conn: &Db,
    run_id: &str,
    known: Option<i64>,
    drafts: &[ViewerDraft],
    now: i64,
) -> Result<i64> {
    match known {
        Some(current) if conn.holds_writes() => {
            let (revision, retained_from) = advance_known(conn, run_id, current, 1, now)?;
            write_deltas(conn, run_id, revision, retained_from, drafts, now)?;
            Ok(revision)
        }
        _ => record_viewer_deltas(conn, run_id, drafts, now),
    }
}

/// The `viewer_runs` change of `steps` presentation revisions from `current`, held back: the
/// new revision and the first one kept, as the `RETURNING` of [`record_viewer_deltas`] gives them.
fn advance_known(
    conn: &Db,
    run_id: &str,
    current: i64,
    steps: i64,
    now: i64,
) -> Result<(i64, i64)> {
    conn.prepare_cached(
        "UPDATE viewer_runs
         SET presentation_revision = presentation_revision + ?,
             retained_from_revision = MAX(1, presentation_revision + ? + 1 - 256),
             updated_at = ?
         WHERE run_id = ?",
    )?
    .execute_deferred(params![steps, steps, now, run_id])?;
    let revision = current + steps;
    Ok((revision, (revision - VIEWER_DELTA_RETENTION + 1).max(1)))
}

/// The deltas of a bump of `resource_id`, when it is a run with a viewer projection (one
/// statement finds the run and advances its revision).
pub fn record_run_resource_deltas(conn: &Db, resource_id: &str, now: i64) -> Result<()> {
    let advanced: Option<(String, i64, i64)> = conn
        .prepare_cached(concat!(
            advance_revision!(),
            " WHERE run_id = (SELECT run_id FROM runs WHERE resource_id = ?)
             RETURNING run_id, presentation_revision, retained_from_revision"
        ))?
        .query_row(params![now, resource_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    if let Some((run_id, revision, retained_from)) = advanced {
        write_deltas(
            conn,
            &run_id,
            revision,
            retained_from,
            RUN_RESOURCE_BUMP,
            now,
        )?;
    }
    Ok(())
}

/// The delta rows of `revision` (one patch blob for all), then the deltas that fell out of
/// retention. Below revision 257 nothing has: `retained_from` is 1 and the schema keeps every
/// delta's revision at 1 or more, so the reference's `DELETE … < 1` finds nothing.
fn write_deltas(
    conn: &Db,
    run_id: &str,
    revision: i64,
    retained_from: i64,
    drafts: &[ViewerDraft],
    now: i64,
) -> Result<()> {
    debug_assert_eq!(
        retained_from,
        (revision - VIEWER_DELTA_RETENTION + 1).max(1)
    );
    if !drafts.is_empty() {
        let patch =
            format!(r#"[{{"op":"replace","path":"/presentationRevision","value":{revision}}}]"#);
        // Every delta of a revision carries the same patch: stored (and hashed) once, since a
        // second put of the same content in the same transaction changes nothing. Every run
        // goes through the same revisions, so the patch is most often stored already: the
        // deltas are inserted on that condition first, and the patch put only when it was not.
        let patch_hash = sha256(patch.as_bytes());
        if conn.holds_writes() {
            // Nobody reads the count: the put and the rows go with what follows.
            put_json_held(conn, &patch, now)?;
            conn.prepare_cached(&insert_deltas_sql(drafts))?
                .execute_deferred(params![run_id, revision, &patch_hash[..], now])?;
            return drop_out_of_retention(conn, run_id, retained_from);
        }
        let inserted = conn
            .prepare_cached(&insert_deltas_of_stored_patch_sql(drafts))?
            .execute(params![
                run_id,
                revision,
                &patch_hash[..],
                now,
                patch.len() as i64,
                patch.as_bytes()
            ])?;
        if inserted == 0 {
            put_json(conn, &patch, now)?;
            conn.prepare_cached(&insert_deltas_sql(drafts))?
                .execute(params![run_id, revision, &patch_hash[..], now])?;
        }
    }
    drop_out_of_retention(conn, run_id, retained_from)
}

/// Deletes the run's deltas below `retained_from` (none below revision 257).
fn drop_out_of_retention(conn: &Db, run_id: &str, retained_from: i64) -> Result<()> {
    if retained_from > 1 {
        conn.prepare_cached(
            "DELETE FROM viewer_deltas WHERE run_id = ? AND presentation_revision < ?",
        )?
        .execute_deferred(params![run_id, retained_from])?;
    }
    Ok(())
}

/// [`insert_deltas_sql`] on condition that the patch is stored, identical: `?5` is its length
/// and `?6` its content. The rows of a `VALUES` list are selected, and inserted, in order.
fn insert_deltas_of_stored_patch_sql(drafts: &[ViewerDraft]) -> String {
    let values = insert_deltas_sql(drafts);
    let (columns, rows) = values.split_once(" VALUES ").expect("a VALUES list");
    format!(
        "{columns} SELECT * FROM (VALUES {rows}) WHERE {}",
        stored_json_test(3, 5, 6)
    )
}

/// One `INSERT` of a revision's delta rows, in `drafts` order (a multi-row `VALUES` inserts
/// its rows in order, so the rowids are those of one insert per row): `?1` run, `?2`
/// revision, `?3` patch hash, `?4` time; the views are our own constants, written as literals.
fn insert_deltas_sql(drafts: &[ViewerDraft]) -> String {
    let mut sql = String::from(
        "INSERT INTO viewer_deltas(
           run_id, presentation_revision, delta_index, target_type,
           target_key, patch_hash, recorded_at
         ) VALUES ",
    );
    for (index, (target_type, target_key)) in drafts.iter().enumerate() {
        if index > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(?1, ?2, {index}, '{target_type}', '{target_key}', ?3, ?4)"
        ));
    }
    sql
}
