//! The resource's work-queue row: enqueueing it (or moving it earlier) and its version.

use crate::sql::{params, Db};

use crate::error::Result;

/// Queues the resource, or moves an existing item earlier and bumps its version.
pub fn enqueue_controller_row(
    conn: &Db,
    controller_resource_id: &str,
    available_at: i64,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO controller_queue(
           controller_resource_id, available_at, queue_version,
           consecutive_errors, created_at, updated_at
         ) VALUES (?, ?, 1, 0, ?, ?)
         ON CONFLICT(controller_resource_id) DO UPDATE SET
           available_at = MIN(controller_queue.available_at, excluded.available_at),
           queue_version = controller_queue.queue_version + 1,
           updated_at = excluded.updated_at",
    )?
    .execute_deferred(params![controller_resource_id, available_at, now, now])?;
    Ok(())
}
