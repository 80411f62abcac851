//! Changes to an existing controller resource: its status and finalizers under a claim or an
//! expected resource version, deletion requests and deletion.

use std::sync::LazyLock;

use crate::sql::{params, Db};

use super::json_arg;
use super::rows::claim::{assert_controller_claim, require_claim_row_with_record};
use super::rows::finalizers::replace_finalizers;
use super::rows::queue_item::enqueue_controller_row;
use super::rows::{
    bump_controller_resource, controller_record, finalizers, names_row, require_controller_row,
    require_resource, ControllerRow, ResourceRef,
};
use crate::error::{Result, StoreError};
use crate::js::{assign_read_from, timestamp, Js};
use crate::state::blobs::{put_json, put_json_held, stored_json_test, BlobHash};
use crate::state::ids::sha256;
use crate::state::json::record_text;
use crate::state::leases::{insert_attributed_event, Actor};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// `row.resourceVersion !== expectedResourceVersion` throws `ResourceConflictError`.
fn expect_version(row: &ControllerRow, expected: Js<'_>, reference: ResourceRef<'_>) -> Result<()> {
    if expected.strict_eq_number(row.resource_version as f64) {
        Ok(())
    } else {
        Err(reference.conflict())
    }
}

pub fn update_status(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let now = timestamp(call, options.get("now")?)?;
    let (record, resource_version) = store.write(|conn| {
        let reference = ResourceRef::of(options.get("ref")?);
        let (claimed, reads) = require_claim_row_with_record(conn, store.project_id(), reference)?;
        claimed.assert_claim(options.get("claim")?, now, true)?;
        let mut row = claimed.row;
        expect_version(&row, options.get("expectedResourceVersion")?, reference)?;
        let status_text = json_arg(call, options.get("status")?)?.text()?;
        let status_hash = set_status(conn, &row.controller_resource_id, status_text, now)?;
        // `options.finalizers !== undefined`, then the list read again.
        let replaced = !options.get("finalizers")?.is_undefined();
        if replaced {
            replace_finalizers(
                conn,
                &row.controller_resource_id,
                options.get("finalizers")?,
            )?;
        }
        bump_controller_resource(conn, &row.resource_id, row.resource_version, now)?;
        let revision = row.resource_version + 1;
        insert_attributed_event(
            conn,
            &row.resource_id,
            revision,
            "resource.status_updated",
            Actor::claim(|| options.get("claim"))?,
            "{}",
            now,
        )?;
        // `options.claim.resourceVersion = row.resourceVersion + 1`, inside the transaction.
        let assigned = assign_read_from(
            options,
            options.get("claim")?,
            "resourceVersion",
            revision as f64,
        )?;
        // `this.requireResource(options.ref)`: the ref read again. When it names the row
        // updated, the record is that row as it now stands (the status blob holds exactly the
        // text just stored); another resource is read as any lookup reads it.
        let again = ResourceRef::of(options.get("ref")?);
        if !names_row(again, &row)? {
            let record = require_resource(conn, store.project_id(), again)?;
            return Ok((record, (!assigned).then_some(revision)));
        }
        row.resource_version = revision;
        row.status_hash = status_hash.to_vec();
        // The spec and finalizers as read with the row: this update changed neither, unless
        // it replaced the finalizers.
        let spec = reads.json(conn, &row.spec_hash).get_text(&row.spec_hash)?;
        let status = record_text(status_text).map_err(StoreError::plain)?;
        let finalizers = match replaced || reads.has_finalizers {
            true => finalizers(conn, &row.controller_resource_id)?,
            false => Vec::new(),
        };
        Ok((
            controller_record(&row, &spec, &status, &finalizers),
            (!assigned).then_some(revision),
        ))
    })?;
    Ok(match resource_version {
        Some(version) => Reply::json_text(record).set_claim("resourceVersion", version),
        None => Reply::json_text(record),
    })
}

/// Puts the status blob and points the resource at it. A controller mostly writes a status
/// it wrote before: the row is updated on condition that the blob is stored, identical, and
/// the blob put only when it was not (see [`stored_json_test`]).
fn set_status(conn: &Db, controller_resource_id: &str, text: &str, now: i64) -> Result<BlobHash> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE controller_resources SET status_hash = ?1, updated_at = ?2
             WHERE controller_resource_id = ?3 AND {}",
            stored_json_test(1, 4, 5)
        )
    });
    const SET: &str = "UPDATE controller_resources SET status_hash = ?, updated_at = ?
         WHERE controller_resource_id = ?";
    if conn.holds_writes() {
        // Held to the COMMIT, the condition's count is never read: the put and the plain
        // update leave the same rows (a put of a stored blob changes nothing).
        let hash = put_json_held(conn, text, now)?;
        conn.prepare_cached(SET)?.execute_deferred(params![
            &hash[..],
            now,
            controller_resource_id
        ])?;
        return Ok(hash);
    }
    let hash = sha256(text.as_bytes());
    let length = text.len() as i64;
    let params = params![
        &hash[..],
        now,
        controller_resource_id,
        length,
        text.as_bytes()
    ];
    if conn.prepare_cached(&SQL)?.execute(params)? == 1 {
        return Ok(hash);
    }
    put_json(conn, text, now)?;
    conn.prepare_cached(SET)?
        .execute(params![&hash[..], now, controller_resource_id])?;
    Ok(hash)
}

pub fn request_deletion(store: &Store, call: &Call) -> Result<Reply> {
    let now = timestamp(call, Js::arg(call, 1))?;
    let reference = ResourceRef::of(Js::arg(call, 0));
    let record = store.write(|conn| {
        let row = require_controller_row(conn, store.project_id(), reference)?;
        if row.deletion_requested_at.is_none() {
            conn.prepare_cached(
                "UPDATE controller_resources SET deletion_requested_at = ?, updated_at = ?
                 WHERE controller_resource_id = ?",
            )?
            .execute(params![now, now, row.controller_resource_id])?;
            bump_controller_resource(conn, &row.resource_id, row.resource_version, now)?;
            enqueue_controller_row(conn, &row.controller_resource_id, now, now)?;
            insert_attributed_event(
                conn,
                &row.resource_id,
                row.resource_version + 1,
                "resource.deletion_requested",
                Actor::Control(None),
                "{}",
                now,
            )?;
        }
        require_resource(conn, store.project_id(), reference)
    })?;
    Ok(Reply::json_text(record))
}

pub fn update_finalizers(store: &Store, call: &Call) -> Result<Reply> {
    let options = Js::arg(call, 0);
    let now = timestamp(call, options.get("now")?)?;
    let record = store.write(|conn| {
        let reference = ResourceRef::of(options.get("ref")?);
        let row = require_controller_row(conn, store.project_id(), reference)?;
        expect_version(&row, options.get("expectedResourceVersion")?, reference)?;
        replace_finalizers(
            conn,
            &row.controller_resource_id,
            options.get("finalizers")?,
        )?;
        conn.prepare_cached(
            "UPDATE controller_resources SET updated_at = ? WHERE controller_resource_id = ?",
        )?
        .execute(params![now, row.controller_resource_id])?;
        bump_controller_resource(conn, &row.resource_id, row.resource_version, now)?;
        insert_attributed_event(
            conn,
            &row.resource_id,
            row.resource_version + 1,
            "resource.finalizers_updated",
            Actor::Control(None),
            "{}",
            now,
        )?;
        // `this.requireResource(options.ref)`: the ref read again.
        require_resource(
            conn,
            store.project_id(),
            ResourceRef::of(options.get("ref")?),
        )
    })?;
    Ok(Reply::json_text(record))
}

/// Deletes the controller row once deletion was requested and no finalizers remain; the
/// `resources` row stays behind, as in the reference.
pub fn delete_resource(store: &Store, call: &Call) -> Result<Reply> {
    let reference = ResourceRef::of(Js::arg(call, 0));
    let deleted = store.write(|conn| {
        let row = require_controller_row(conn, store.project_id(), reference)?;
        assert_controller_claim(conn, &row, Js::arg(call, 2), call.clock, true)?;
        expect_version(&row, Js::arg(call, 1), reference)?;
        if row.deletion_requested_at.is_none()
            || !finalizers(conn, &row.controller_resource_id)?.is_empty()
        {
            return Ok(false);
        }
        conn.prepare_cached("DELETE FROM controller_resources WHERE controller_resource_id = ?")?
            .execute([&row.controller_resource_id])?;
        Ok(true)
    })?;
    Ok(Reply::value(deleted))
}
