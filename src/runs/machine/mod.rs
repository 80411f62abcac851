//! The run state machine, one owner: the statuses and their SQL text ([`status`]), the table of
//! moves and the function that applies one ([`moves`]), what a cancellation ends besides the
//! run ([`dependents`]), and the bookkeeping most moves end with ([`record`]).

pub mod dependents;
pub mod moves;
pub mod status;

use serde_json::Value;

use super::row::RunRow;
use crate::error::Result;
use crate::sql::Db;
use crate::state::json::canonical;
use crate::state::leases::{insert_attributed_event_of, Actor};
use crate::state::revisions::{advance_known_resource_revision, KnownRevisions, Payload};
use crate::state::viewer::{
    record_bump_and_viewer_deltas, record_run_resource_deltas, record_viewer_deltas, SUMMARY_REPLAY,
};

/// The `events` row and viewer deltas a move of `row` ends with: bump, the move's event
/// attributed to `actor`, then the explicit summary/replay deltas of `viewer_run_id` (the
/// row's id, or the `options.runId` the reference reads again for them), from the revisions the
/// move's read found (`known`; none on a file). The last thing a move does: its callers return,
/// and commit, after it.
pub fn record(
    conn: &Db,
    (row, known): (&RunRow, KnownRevisions),
    event: (&str, &Value),
    actor: Actor<'_>,
    now: i64,
    viewer_run_id: &str,
) -> Result<()> {
    conn.hold_writes_until_commit();
    let revision = advance_known_resource_revision(conn, &row.resource_id, known.resource, now)?;
    let payload = canonical(event.1);
    let insert_event = || {
        let event = (row.resource_id.as_str(), revision, event.0);
        let actor = actor.clone();
        insert_attributed_event_of(conn, event, actor, &payload, now, Payload::Repeated).map(drop)
    };
    // The bump's viewer revision is of the row's run (`runs.resource_id` is unique).
    if viewer_run_id == row.run_id
        && record_bump_and_viewer_deltas(
            conn,
            (&row.run_id, known.presentation),
            SUMMARY_REPLAY,
            now,
            insert_event,
        )?
        .is_some()
    {
        return Ok(());
    }
    record_run_resource_deltas(conn, &row.resource_id, now)?;
    insert_event()?;
    record_viewer_deltas(conn, viewer_run_id, SUMMARY_REPLAY, now)?;
    Ok(())
}
