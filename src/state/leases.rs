//! Leases and fencing for both kinds of holder: controller resources and workflow runs.
//!
//! Every read and write of the `leases` table lives here: the generation-0 row of a new
//! resource, reading it, taking it (free, expired, or by generation alone), renewing and
//! releasing it. The liveness rules are [`super::liveness`]'s and event attribution
//! [`super::attribution`]'s (both re-exported here). Callers
//! pass a resource id and a [`Holder`] (owner type, owner id, token hash), never a run or
//! controller row; their own rules (pending interactions, queue states, finalizers) stay
//! with them.
//!
//! Every write is fenced: a take by the generation it read, a renewal or release by the
//! generation and the token hash (and, where the reference checks them, the owner and the
//! expiry). Values a caller supplied arrive as [`Param`]s and are bound here in statement
//! order through [`bind_params`], with better-sqlite3's rules; values already bound elsewhere
//! arrive as `Param::Own`.

use crate::sql::{params_from_iter, Db, OptionalExtension};

pub use super::attribution::{
    bound_text, insert_attributed_event, insert_attributed_event_of, record_event, Actor,
};
pub(crate) use super::liveness::lease_columns;
pub use super::liveness::{
    free_or_expired, system_lease_expiry, Claim, Lease, CONTROLLER_TAKEABLE, RUN_TAKEABLE,
};
use crate::error::{Result, StoreError};
use crate::js::{bind_params, Param};

/// Which kind of holder takes, renews or releases a lease; it decides the owner type stored
/// and the expiry rule of a take.
#[derive(Debug, Clone)]
pub enum HolderKind<'a> {
    /// A workflow run's runner (`session` or `host`, bound as given): takes by generation
    /// alone (the caller has judged the current holder's liveness).
    Runner(Param<'a>),
    /// A controller (`owner_type = 'controller'`): takes a free or expired lease.
    Controller,
    /// The control plane's short lease (`owner_type = 'system'`): takes a free, expired or
    /// undated lease.
    System,
}

/// Who holds (or is to hold) a lease.
#[derive(Debug, Clone)]
pub struct Holder<'a> {
    /// The owner type and its take rule.
    pub kind: HolderKind<'a>,
    /// `leases.owner_id`, bound in statement order.
    pub owner_id: Param<'a>,
    /// SHA-256 of the holder's token.
    pub token_hash: &'a [u8],
}

/// What a release is fenced by, beside the resource and the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The token hash (the caller verified the claim in this transaction).
    Token,
    /// The token hash, unexpired at `now`.
    LiveToken,
    /// The owner id and the token hash (a controller's verified claim).
    Owner,
    /// The system owner, its id and token hash, unexpired at `now`.
    LiveSystemOwner,
}

/// The resource's lease, or `Lease is missing: <id>`.
pub fn require_lease(conn: &Db, resource_id: &str) -> Result<Lease> {
    conn.prepare_cached(
        "SELECT generation, owner_type, owner_id, token_hash, expires_at
         FROM leases WHERE resource_id = ?",
    )?
    .query_row([resource_id], |row| {
        Ok(Lease {
            generation: row.get(0)?,
            owner_type: row.get(1)?,
            owner_id: row.get(2)?,
            token_hash: row.get(3)?,
            expires_at: row.get(4)?,
        })
    })
    .optional()?
    .ok_or_else(|| StoreError::plain(format!("Lease is missing: {resource_id}")))
}

/// Inserts the generation-0 lease row every new resource gets.
pub fn insert_lease(conn: &Db, resource_id: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO leases(resource_id, generation) VALUES (?, 0)")?
        .execute_deferred([resource_id])?;
    Ok(())
}

/// The bytes of `leases.owner_id` as SQLite stored it (a number bound as a double becomes its
/// text, `5.0`; a caller's lone surrogates stay the WTF-8 V8 wrote), `None` when unowned.
pub fn stored_owner_id(conn: &Db, resource_id: &str) -> Result<Option<Vec<u8>>> {
    Ok(conn
        .prepare_cached("SELECT owner_id FROM leases WHERE resource_id = ?")?
        .query_row([resource_id], |row| {
            Ok(row.get_ref(0)?.as_bytes_or_null()?.map(<[u8]>::to_vec))
        })?)
}

/// `leases.expires_at` as the STRICT column holds it after binding (a numeric text converted).
pub fn stored_expires_at(conn: &Db, resource_id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT expires_at FROM leases WHERE resource_id = ?")?
        .query_row([resource_id], |row| row.get(0))?)
}

/// Runs `sql` with `params` bound as better-sqlite3 binds them; the number of rows changed.
fn execute(conn: &Db, sql: &str, params: &[Param<'_>]) -> Result<usize> {
    let mut statement = conn.prepare_cached(sql)?;
    Ok(statement.execute(params_from_iter(bind_params(params)?))?)
}

/// Takes generation `from_generation + 1` for `holder` until `expires_at`, fenced by
/// `from_generation` and the holder kind's expiry rule; false when it did not take.
pub fn take(
    conn: &Db,
    resource_id: &str,
    holder: &Holder<'_>,
    from_generation: i64,
    expires_at: Param<'_>,
    now: i64,
) -> Result<bool> {
    let generation = Param::int(from_generation + 1);
    let owner_id = holder.owner_id.clone();
    let token_hash = Param::blob(holder.token_hash);
    let changed = match &holder.kind {
        HolderKind::Runner(owner_type) => execute(
            conn,
            "UPDATE leases SET generation = ?, owner_type = ?, owner_id = ?, token_hash = ?,
                acquired_at = ?, heartbeat_at = ?, expires_at = ?
         WHERE resource_id = ? AND generation = ?",
            &[
                generation,
                owner_type.clone(),
                owner_id,
                token_hash,
                Param::int(now),
                Param::int(now),
                expires_at,
                Param::text(resource_id),
                Param::int(from_generation),
            ],
        )?,
        // The controller and the system differ only in the owner type written and in whether a
        // lease without an expiry may be taken.
        HolderKind::Controller | HolderKind::System => execute(
            conn,
            if matches!(holder.kind, HolderKind::Controller) {
                "UPDATE leases
         SET generation = ?, owner_type = 'controller', owner_id = ?, token_hash = ?,
             acquired_at = ?, heartbeat_at = ?, expires_at = ?
         WHERE resource_id = ? AND generation = ?
           AND (owner_id IS NULL OR expires_at <= ?)"
            } else {
                "UPDATE leases
                 SET generation = ?, owner_type = 'system', owner_id = ?, token_hash = ?,
                     acquired_at = ?, heartbeat_at = ?, expires_at = ?
                 WHERE resource_id = ? AND generation = ?
                   AND (owner_id IS NULL OR expires_at IS NULL OR expires_at <= ?)"
            },
            &[
                generation,
                owner_id,
                token_hash,
                Param::int(now),
                Param::int(now),
                expires_at,
                Param::text(resource_id),
                Param::int(from_generation),
                Param::int(now),
            ],
        )?,
    };
    Ok(changed == 1)
}

/// Extends the holder's lease at `generation` to `expires_at` when it is unexpired at `now`;
/// false when it did not.
pub fn renew(
    conn: &Db,
    resource_id: &str,
    holder: &Holder<'_>,
    generation: Param<'_>,
    expires_at: Param<'_>,
    now: i64,
) -> Result<bool> {
    // Every kind is fenced by its owner type; a controller's or the system's is bound as the
    // text the reference writes as a literal, which matches the same rows.
    let owner_type = match &holder.kind {
        HolderKind::Runner(owner_type) => owner_type.clone(),
        HolderKind::Controller => Param::text("controller"),
        HolderKind::System => Param::text("system"),
    };
    let changed = execute(
        conn,
        "UPDATE leases SET heartbeat_at = ?, expires_at = ?
             WHERE resource_id = ? AND owner_type = ? AND owner_id = ?
               AND token_hash = ? AND generation = ? AND expires_at > ?",
        &[
            Param::int(now),
            expires_at,
            Param::text(resource_id),
            owner_type,
            holder.owner_id.clone(),
            Param::blob(holder.token_hash),
            generation,
            Param::int(now),
        ],
    )?;
    Ok(changed == 1)
}

/// Clears the owner, token and times of the holder's lease at `generation`, fenced by `fence`
/// (judged at `now` where it says so); false when it did not release. The generation is kept:
/// the next take moves on from it.
pub fn release(
    conn: &Db,
    resource_id: &str,
    holder: &Holder<'_>,
    generation: Param<'_>,
    fence: Fence,
    now: i64,
) -> Result<bool> {
    let token_hash = Param::blob(holder.token_hash);
    let changed = match fence {
        Fence::Token => execute(
            conn,
            "UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                        acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
                 WHERE resource_id = ? AND token_hash = ? AND generation = ?",
            &[Param::text(resource_id), token_hash, generation],
        )?,
        Fence::LiveToken => execute(
            conn,
            "UPDATE leases
             SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                 acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
             WHERE resource_id = ? AND token_hash = ? AND generation = ? AND expires_at > ?",
            &[
                Param::text(resource_id),
                token_hash,
                generation,
                Param::int(now),
            ],
        )?,
        Fence::Owner => execute(
            conn,
            "UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
         WHERE resource_id = ? AND owner_id = ? AND token_hash = ? AND generation = ?",
            &[
                Param::text(resource_id),
                holder.owner_id.clone(),
                token_hash,
                generation,
            ],
        )?,
        Fence::LiveSystemOwner => {
            if !matches!(holder.kind, HolderKind::System) {
                return Err(StoreError::plain(
                    "Only the system holder is released by its owner and expiry",
                ));
            }
            execute(
                conn,
                "UPDATE leases
                 SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                     acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
                 WHERE resource_id = ? AND owner_type = 'system' AND owner_id = ?
                   AND token_hash = ? AND generation = ? AND expires_at > ?",
                &[
                    Param::text(resource_id),
                    holder.owner_id.clone(),
                    token_hash,
                    generation,
                    Param::int(now),
                ],
            )?
        }
    };
    Ok(changed == 1)
}

/// One suite for every holder kind, the way a driver suite runs each property against every
/// driver: each test loops over `HOLDERS`, and a new kind is covered by adding it there.
#[cfg(test)]
#[path = "leases_tests.rs"]
mod tests;
