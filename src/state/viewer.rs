//! Viewer projection bookkeeping: every change to a run bumps its presentation revision and
//! writes one delta row per affected view, keeping the last 256 revisions.

use rusqlite::{params, Connection, OptionalExtension};

use super::blobs::put_json;
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

/// Inserts the run's `viewer_runs` row (revision 1); returns its presentation revision.
pub fn initialize_viewer_run(conn: &Connection, run_id: &str, now: i64) -> Result<i64> {
    conn.prepare_cached(
        "INSERT INTO viewer_runs(run_id, presentation_revision, retained_from_revision, updated_at)
         VALUES (?, 1, 1, ?) ON CONFLICT(run_id) DO NOTHING",
    )?
    .execute(params![run_id, now])?;
    presentation_revision(conn, run_id)?.ok_or_else(|| {
        StoreError::plain(format!(
            "Viewer projection could not be initialized for workflow run: {run_id}"
        ))
    })
}

fn presentation_revision(conn: &Connection, run_id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT presentation_revision FROM viewer_runs WHERE run_id = ?")?
        .query_row([run_id], |row| row.get(0))
        .optional()?)
}

/// Records one presentation revision touching `drafts`; the caller holds the write transaction.
pub fn record_viewer_deltas(
    conn: &Connection,
    run_id: &str,
    drafts: &[ViewerDraft],
    now: i64,
) -> Result<i64> {
    let current = presentation_revision(conn, run_id)?.ok_or_else(|| {
        StoreError::plain(format!(
            "Viewer projection does not exist for workflow run: {run_id}"
        ))
    })?;
    let revision = current + 1;
    let patch =
        format!(r#"[{{"op":"replace","path":"/presentationRevision","value":{revision}}}]"#);
    // Every delta of a revision carries the same patch: stored (and hashed) once, since a
    // second put of the same content in the same transaction changes nothing.
    let patch_hash = if drafts.is_empty() {
        None
    } else {
        Some(put_json(conn, &patch, now)?)
    };
    for (index, (target_type, target_key)) in drafts.iter().enumerate() {
        let patch_hash = patch_hash.expect("stored when there are drafts");
        conn.prepare_cached(
            "INSERT INTO viewer_deltas(
               run_id, presentation_revision, delta_index, target_type,
               target_key, patch_hash, recorded_at
             ) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )?
        .execute(params![
            run_id,
            revision,
            index as i64,
            target_type,
            target_key,
            &patch_hash[..],
            now
        ])?;
    }
    let retained_from = (revision - VIEWER_DELTA_RETENTION + 1).max(1);
    let updated = conn
        .prepare_cached(
            "UPDATE viewer_runs
             SET presentation_revision = ?, retained_from_revision = ?, updated_at = ?
             WHERE run_id = ? AND presentation_revision = ?",
        )?
        .execute(params![revision, retained_from, now, run_id, current])?;
    if updated != 1 {
        return Err(StoreError::plain(format!(
            "Viewer projection revision conflict for workflow run: {run_id}"
        )));
    }
    conn.prepare_cached(
        "DELETE FROM viewer_deltas WHERE run_id = ? AND presentation_revision < ?",
    )?
    .execute(params![run_id, retained_from])?;
    Ok(revision)
}
