//! Run effects the engine asks the store to settle (`run.park_queue`, `run.settle_queue`): each
//! pending effect of that type becomes `applied` in its own transaction.

use rusqlite::{params, Connection};
use serde_json::json;

use crate::error::Result;
use crate::state::json::canonical;
use crate::state::revisions::{bump_resource, insert_event, resource_revision, EventDraft};
use crate::store::Store;
use crate::wire::{text, Call, Reply};

/// The run-effect methods implemented here.
pub const METHODS: &[&str] = &["settleRunEffect"];

/// Runs `method` when this module implements it (see `METHODS`); `None` otherwise.
pub fn dispatch(store: &Store, method: &str, call: &Call) -> Option<Result<Reply>> {
    match method {
        "settleRunEffect" => Some(settle_run_effect(store, call).map(|()| Reply::undefined())),
        _ => None,
    }
}

/// A pending effect of the run: `(effect_id, resource_id)`.
type PendingEffect = (String, String);

fn pending_effects(
    conn: &Connection,
    run_id: &str,
    effect_type: &str,
) -> Result<Vec<PendingEffect>> {
    let effects = conn
        .prepare_cached(
            "SELECT e.effect_id, e.resource_id
             FROM effects e JOIN runs r ON r.resource_id = e.source_resource_id
             WHERE r.run_id = ? AND e.effect_type = ? AND e.status = 'pending'",
        )?
        .query_map([run_id, effect_type], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(effects)
}

/// Lists the pending effects first (outside a transaction, as the reference does), then applies
/// each one in its own transaction at the call's `Date.now()`.
fn settle_run_effect(store: &Store, call: &Call) -> Result<()> {
    let run_id = text(call.arg(0), "runId")?;
    let effect_type = text(call.arg(1), "effectType")?;
    let now = call.clock;
    for (effect_id, resource_id) in pending_effects(store.conn()?, run_id, effect_type)? {
        store.write(|conn| {
            let revision = resource_revision(conn, &resource_id)?;
            conn.prepare_cached(
                "UPDATE effects SET status = 'applied', updated_at = ?, settled_at = ?
                 WHERE effect_id = ? AND status = 'pending'",
            )?
            .execute(params![now, now, effect_id])?;
            bump_resource(conn, &resource_id, revision, now)?;
            insert_event(
                conn,
                &EventDraft {
                    resource_id: &resource_id,
                    revision: revision + 1,
                    event_type: "effect.applied",
                    actor_type: "system",
                    actor_id: None,
                    payload: &canonical(&json!({ "runId": run_id, "effectType": effect_type })),
                    now,
                    lease_generation: None,
                },
            )?;
            Ok(())
        })?;
    }
    Ok(())
}
