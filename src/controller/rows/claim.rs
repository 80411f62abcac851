//! The claim checks that fence controller writes: the row read with its lease and queue item,
//! the check that a caller's claim is the live controller lease, the claim as a lease holder,
//! and the release of a verified claim.

use std::sync::LazyLock;

use crate::sql::{Db, Row};
use rusqlite::types::ValueRef;

use crate::state::blobs::{JsonReads, MEDIA_JSON};

use super::*;
use crate::error::{Result, StoreError};
use crate::js::Param;
use crate::state::leases::{
    self, insert_attributed_event, lease_columns, require_lease, Actor, Fence, Holder, HolderKind,
    Lease,
};

/// A controller row read together with its lease and queue item, for the methods that check a
/// claim: one statement instead of one per table.
#[derive(Debug, Clone)]
pub struct ClaimRow {
    /// The controller row.
    pub row: ControllerRow,
    /// The `leases` row, `None` when missing.
    pub lease: Option<Lease>,
    /// `controller_queue.queue_version`, `None` without a queue item.
    pub queue_version: Option<i64>,
    /// `controller_queue.consecutive_errors`, `None` without a queue item.
    pub consecutive_errors: Option<i64>,
}

/// The columns [`ClaimRow::from_row`] reads after [`CONTROLLER_COLUMNS`], over `leases l`
/// and `controller_queue q`.
pub const CLAIM_COLUMNS: &str =
    concat!(lease_columns!(), ", q.queue_version, q.consecutive_errors");

/// [`controller_select`] with the lease and the queue item, then `clause`.
fn claim_select(clause: &str) -> String {
    format!(
        "SELECT {CONTROLLER_COLUMNS}, {CLAIM_COLUMNS}
         FROM controller_resources c JOIN resources r ON r.resource_id = c.resource_id
         LEFT JOIN leases l ON l.resource_id = c.resource_id
         LEFT JOIN controller_queue q ON q.controller_resource_id = c.controller_resource_id
         {clause}"
    )
}

/// [`claim_select`] by reference and by uid, written once.
static CLAIM_BY_REFERENCE: LazyLock<String> = LazyLock::new(|| claim_select(BY_REFERENCE));
/// [`CLAIM_BY_REFERENCE`] with [`RecordReads`]' columns.
static CLAIM_WITH_RECORD_BY_REFERENCE: LazyLock<String> = LazyLock::new(|| {
    claim_select(BY_REFERENCE).replacen(
        "\n         FROM controller_resources c",
        ", spec.media_type, spec.content,
           EXISTS (SELECT 1 FROM controller_finalizers f
                   WHERE f.controller_resource_id = c.controller_resource_id)
         FROM controller_resources c LEFT JOIN blobs spec ON spec.blob_hash = c.spec_hash",
        1,
    )
});

/// What a resource's record reads besides its row, read with it: the spec's JSON text (when
/// the blob is stored as JSON) and whether the resource has finalizers. For a write that
/// changes neither the spec nor (unless it replaces them) the finalizers before its record.
#[derive(Debug, Clone)]
pub struct RecordReads {
    spec: Option<String>,
    /// Whether `controller_finalizers` held a row of the resource.
    pub has_finalizers: bool,
}

impl RecordReads {
    /// JSON reads that know the spec blob `spec_hash` (the row's) holds.
    pub fn json<'c>(&'c self, conn: &'c Db, spec_hash: &[u8]) -> JsonReads<'c> {
        let stored = match (<[u8; 32]>::try_from(spec_hash), &self.spec) {
            (Ok(hash), Some(text)) => vec![(hash, text.as_str())],
            _ => Vec::new(),
        };
        JsonReads::with_stored(conn, stored)
    }
}

/// [`require_claim_row`] with the [`RecordReads`] of the resource, in one statement.
pub fn require_claim_row_with_record(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<(ClaimRow, RecordReads)> {
    let read = |row: &Row<'_>| -> rusqlite::Result<(ClaimRow, RecordReads)> {
        let spec = match row.get_ref(17)? {
            ValueRef::Text(media) if media == MEDIA_JSON.as_bytes() => match row.get_ref(18)? {
                ValueRef::Blob(bytes) | ValueRef::Text(bytes) => {
                    Some(String::from_utf8_lossy(bytes).into_owned())
                }
                _ => None,
            },
            _ => None,
        };
        let has_finalizers = row.get::<_, i64>(19)? != 0;
        Ok((
            ClaimRow::from_row(row)?,
            RecordReads {
                spec,
                has_finalizers,
            },
        ))
    };
    query_by_reference(
        conn,
        project_id,
        reference,
        &CLAIM_WITH_RECORD_BY_REFERENCE,
        read,
    )?
    .ok_or_else(|| reference.not_found())
}
static CLAIM_BY_UID: LazyLock<String> = LazyLock::new(|| claim_select(BY_UID));

impl ClaimRow {
    /// Reads a row of [`CONTROLLER_COLUMNS`] followed by [`CLAIM_COLUMNS`].
    pub fn from_row(row: &Row<'_>) -> rusqlite::Result<ClaimRow> {
        let lease = Lease::from_columns(row, 10)?;
        Ok(ClaimRow {
            row: ControllerRow::from_row(row)?,
            lease,
            queue_version: row.get(15)?,
            consecutive_errors: row.get(16)?,
        })
    }

    /// [`assert_controller_claim`] against the lease read with the row.
    pub fn assert_claim(&self, claim: Js<'_>, now: i64, require_unexpired: bool) -> Result<Lease> {
        check_claim_target(&self.row, claim)?;
        let lease = self.lease.clone().ok_or_else(|| {
            StoreError::plain(format!("Lease is missing: {}", self.row.resource_id))
        })?;
        check_claim_lease(lease, claim, now, require_unexpired)
    }

    /// The queue item's `queue_version`, as [`queue_version`](super::queue_item::queue_version) reads it.
    pub fn require_queue_version(&self) -> Result<i64> {
        self.queue_version
            .ok_or_else(|| StoreError::plain("Controller queue item is missing"))
    }
}

/// [`controller_row`] with its lease and queue item; always `None` without a project.
pub fn claim_row(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<Option<ClaimRow>> {
    query_by_reference(
        conn,
        project_id,
        reference,
        &CLAIM_BY_REFERENCE,
        ClaimRow::from_row,
    )
}

/// [`claim_row`], or `ResourceNotFoundError`.
pub fn require_claim_row(
    conn: &Db,
    project_id: Option<&str>,
    reference: ResourceRef<'_>,
) -> Result<ClaimRow> {
    claim_row(conn, project_id, reference)?.ok_or_else(|| reference.not_found())
}

/// [`require_controller_row_by_uid`] with its lease and queue item.
pub fn require_claim_row_by_uid(conn: &Db, uid: Js<'_>) -> Result<ClaimRow> {
    query_by_uid(conn, uid, &CLAIM_BY_UID, ClaimRow::from_row)?.ok_or_else(|| uid_not_found(uid))
}

fn check_claim_target(row: &ControllerRow, claim: Js<'_>) -> Result<()> {
    if !claim.get("controller")?.strict_eq_str(&row.controller_name)
        || !claim.get("key")?.strict_eq_str(&row.resource_key)
    {
        return Err(StoreError::plain(
            "Controller claim targets another resource",
        ));
    }
    Ok(())
}

/// Checks that `claim` is the live controller lease of `row` (unexpired unless
/// `require_unexpired` is off); returns that lease.
pub fn assert_controller_claim(
    conn: &Db,
    row: &ControllerRow,
    claim: Js<'_>,
    now: i64,
    require_unexpired: bool,
) -> Result<Lease> {
    check_claim_target(row, claim)?;
    let lease = require_lease(conn, &row.resource_id)?;
    check_claim_lease(lease, claim, now, require_unexpired)
}

fn check_claim_lease(
    lease: Lease,
    claim: Js<'_>,
    now: i64,
    require_unexpired: bool,
) -> Result<Lease> {
    // Each field is read only once the checks before it held, as the reference's `||` chain.
    let holds = lease.owner_type.as_deref() == Some("controller")
        && match lease.owner_id.as_deref() {
            Some(owner) => claim.get("ownerId")?.strict_eq_str(owner),
            None => claim.get("ownerId")? == Js::Null,
        }
        && claim
            .get("generation")?
            .strict_eq_number(lease.generation as f64)
        && lease.token_hash.is_some()
        && lease.token_matches(&crate::js::token_hash_js(claim.get("token")?)?)
        && (!require_unexpired || lease.is_unexpired(now));
    if !holds {
        return Err(StoreError::plain("Controller claim is stale"));
    }
    Ok(lease)
}

/// A controller claim as a lease holder, its fields read in the reference's order
/// (`ownerId`, `token`, `generation`) and bound as the caller gave them.
pub struct ClaimFence<'a> {
    owner_id: Js<'a>,
    token_hash: [u8; 32],
    generation: Js<'a>,
}

impl<'a> ClaimFence<'a> {
    /// Reads `claim.ownerId`, hashes `claim.token`, reads `claim.generation`.
    pub fn read(claim: Js<'a>) -> Result<ClaimFence<'a>> {
        let owner_id = claim.get("ownerId")?;
        let token_hash = crate::js::token_hash_js(claim.get("token")?)?;
        let generation = claim.get("generation")?;
        Ok(ClaimFence {
            owner_id,
            token_hash,
            generation,
        })
    }

    /// The controller holder the claim names.
    pub fn holder(&self) -> Holder<'_> {
        Holder {
            kind: HolderKind::Controller,
            owner_id: Param::Js(self.owner_id),
            token_hash: &self.token_hash,
        }
    }

    /// The generation the claim fences by.
    pub fn generation(&self) -> Param<'a> {
        Param::Js(self.generation)
    }
}

/// Releases the lease the verified `claim` holds; returns the new resource version when it
/// was released (the reference then sets `claim.resourceVersion`).
/// `revision` is the resource's current revision (read with its row in this transaction).
pub fn release_lease(
    conn: &Db,
    resource_id: &str,
    revision: i64,
    claim: Js<'_>,
    now: i64,
) -> Result<Option<i64>> {
    let fence = ClaimFence::read(claim)?;
    if !leases::release(
        conn,
        resource_id,
        &fence.holder(),
        fence.generation(),
        Fence::Owner,
        now,
    )? {
        return Ok(None);
    }
    bump_controller_resource(conn, resource_id, revision, now)?;
    insert_attributed_event(
        conn,
        resource_id,
        revision + 1,
        "lease.released",
        Actor::claim(|| Ok(claim))?,
        "{}",
        now,
    )?;
    Ok(Some(revision + 1))
}
