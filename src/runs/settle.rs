//! Run effects the engine asks the store to settle (`run.park_queue`, `run.settle_queue`): each
//! pending effect of that type becomes `applied` in its own transaction.

use crate::sql::{params, params_from_iter, Db};

use crate::error::Result;
use crate::js::{canonical_literal, params_for, Js};
use crate::state::leases::{insert_attributed_event_of, Actor};
use crate::state::revisions::{bump_resource, resource_revision, Payload};
use crate::store::Store;
use crate::wire::Call;

/// A pending effect of the run: `(effect_id, resource_id)`.
type PendingEffect = (String, String);

/// `.all(runId, effectType)`: the caller's values bound as better-sqlite3 binds them.
fn pending_effects(conn: &Db, run_id: Js<'_>, effect_type: Js<'_>) -> Result<Vec<PendingEffect>> {
    let mut statement = conn.prepare_cached(
        "SELECT e.effect_id, e.resource_id
         FROM effects e JOIN runs r ON r.resource_id = e.source_resource_id
         WHERE r.run_id = ? AND e.effect_type = ? AND e.status = 'pending'",
    )?;
    let params = params_for(&statement, &[run_id, effect_type])?;
    let effects = statement
        .query_map(params_from_iter(&params), |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(effects)
}

/// Lists the pending effects first (outside a transaction, as the reference does), then applies
/// each one in its own transaction at the call's `Date.now()`.
pub fn settle_run_effect(store: &Store, call: &Call) -> Result<()> {
    let run_id = Js::arg(call, 0);
    let effect_type = Js::arg(call, 1);
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
            let payload =
                canonical_literal(call, &[("runId", run_id), ("effectType", effect_type)])?;
            let event = (resource_id.as_str(), revision + 1, "effect.applied");
            insert_attributed_event_of(conn, event, Actor::System, &payload, now, Payload::Fresh)?;
            Ok(())
        })?;
    }
    Ok(())
}
