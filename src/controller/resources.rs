//! Controller resources: creating them (`putResource`) and reading them (by reference, by
//! uid, listed). Changes to an existing one are in [`super::resource_changes`].

use crate::sql::{params, params_from_iter, Db};
use serde_json::json;

use super::json_arg;
use super::rows::documented::{
    documented_row, documented_row_by_uid, documented_select, DocumentedRow,
};
use super::rows::queue_item::enqueue_controller_row;
use super::rows::{
    bump_controller_resource, controller_record, controller_row, finalizers, names_row,
    require_resource, ControllerRow, ResourceRef,
};
use crate::error::{Result, StoreError};
use crate::js::timestamp;
use crate::js::{bind_params, to_number, Js, Param};

use crate::state::blobs::{put_json, put_jsons, JsonReads};
use crate::state::ids::{random_uuid, resource_id_for};
use crate::state::json::{canonical, record_text};
use crate::state::leases::insert_lease;
use crate::state::leases::{insert_attributed_event, Actor};
use crate::store::{in_read_transaction, Store};
use crate::wire::{Call, JsonArg, Reply};

/// `validateName`/`validateKey`: `value.length === 0 || value.length > 512` is invalid (the
/// `>` compares numerically, so a string or bigint `length` of an object counts too; a value
/// without a length passes).
fn validate_key(value: Js<'_>, label: &str) -> Result<()> {
    let length = value.get("length")?;
    let invalid = match length {
        Js::Number(n) => n == 0.0 || n > 512.0,
        Js::BigInt(digits) => digits.parse::<f64>().is_ok_and(|n| n > 512.0),
        Js::Undefined | Js::Symbol(_) => false,
        other => to_number(other).is_ok_and(|n| n > 512.0),
    };
    if invalid {
        return Err(StoreError::plain(format!("{label} is invalid")));
    }
    Ok(())
}

/// Canonical text of `{observedGeneration: 0, conditions: [], controllerStatus}`.
fn initial_status_text(controller_status: JsonArg<'_>) -> Result<String> {
    Ok(match controller_status {
        JsonArg::Undefined => r#"{"conditions":[],"observedGeneration":0}"#.to_string(),
        other => format!(
            r#"{{"conditions":[],"controllerStatus":{},"observedGeneration":0}}"#,
            other.text()?
        ),
    })
}

pub fn put_resource(store: &Store, call: &Call) -> Result<Reply> {
    if store.is_read_only() {
        return Err(StoreError::plain("Controller store is read-only"));
    }
    let options = Js::arg(call, 0);
    let controller = options.get("controller")?;
    validate_key(controller, "controller")?;
    let key = options.get("key")?;
    validate_key(key, "resource key")?;
    let reference = ResourceRef::Parts(controller, key);
    // Inside the transaction each use reads `options.controller` and `options.key` again, as
    // the reference's expressions do: the lookup, the resource id, the insert, the record.
    let again = ResourceRef::Object(options);
    let now = timestamp(call, options.get("now")?)?;
    let spec_text = json_arg(call, options.get("spec")?)?.text()?;
    let status_text = match options
        .get("initialStatus")
        .and_then(|status| json_arg(call, status))
        .and_then(initial_status_text)
    {
        Ok(text) => text,
        Err(error) => {
            // The reference stored the spec's blob (`putJson`, outside any transaction) before
            // reading the status (a getter may throw) or failing on it: it stays until an open
            // prunes it.
            put_json(store.conn()?, spec_text, now)?;
            return Err(error);
        }
    };
    // Not inside a caller's transaction: there the reference stores the blobs in it and then
    // fails to begin its own, which rolls the caller's back.
    if store.project_id().is_some() && reference.texts().is_some() && store.conn()?.is_autocommit()
    {
        // When the call itself fails (a resource row left behind by deleteResource makes the
        // insert fail on its primary key, for one), nothing was written: the reference's own
        // path then runs, storing the blobs outside its transaction and failing the same way.
        // A failure of the file (busy, I/O, full) is the answer as it is: run again, it would
        // wait out the busy timeout a second time or hide a real I/O error behind a retry.
        match put_resource_in_one_transaction(store, again, spec_text, &status_text, now) {
            Ok(reply) => return Ok(reply),
            Err(error) if error.is_environmental() => return Err(error),
            // The record's lookup named a resource that does not exist: the reference fails
            // there, in its transaction, its two blobs stored before it (running the other
            // path would read the caller's fields again).
            Err(error @ StoreError::ResourceNotFound { .. }) => {
                put_json(store.conn()?, spec_text, now)?;
                put_json(store.conn()?, &status_text, now)?;
                return Err(error);
            }
            Err(_) => {}
        }
    }
    // Both blobs are stored before (and outside) the transaction, as the reference does.
    let conn = store.conn()?;
    let spec_hash = put_json(conn, spec_text, now)?;
    let status_hash = put_json(conn, &status_text, now)?;
    let record = store.write(|conn| {
        // Another process's read-write open may have pruned the blobs just stored (nothing
        // referred to them yet); storing them again inside the transaction is a no-op unless
        // that happened, where the reference would fail on the foreign key.
        match controller_row(conn, store.project_id(), again)? {
            None => {
                put_json(conn, spec_text, now)?;
                put_json(conn, &status_text, now)?;
                create_resource(store, conn, again, &spec_hash, &status_hash, now)?;
            }
            Some(existing) if existing.spec_hash[..] != spec_hash[..] => {
                put_json(conn, spec_text, now)?;
                change_spec(conn, &existing, &spec_hash, now)?;
            }
            Some(_) => {}
        }
        require_resource(conn, store.project_id(), again)
    })?;
    Ok(Reply::json_text(record))
}

/// `putResource` when nothing in its transaction can fail but SQLite itself (a project, string
/// names): the two blobs the reference stores just before its transaction are stored as its
/// first statements instead (same rows, same order, one commit instead of three), and the
/// record is written from what the transaction knows rather than read back, unless the
/// reference read for it (`requireResource({controller: options.controller, key:
/// options.key})`) names another resource. `reference` is read at each use.
fn put_resource_in_one_transaction(
    store: &Store,
    reference: ResourceRef<'_>,
    spec_text: &str,
    status_text: &str,
    now: i64,
) -> Result<Reply> {
    let record = store.write(|conn| {
        let [spec_hash, status_hash] = put_jsons(conn, [spec_text, status_text], now)?;
        let mut json = JsonReads::new(conn);
        let text = |stored: &str| record_text(stored).map_err(StoreError::plain);
        let (row, spec, status, finalizers) =
            match controller_row(conn, store.project_id(), reference)? {
                None => {
                    let row =
                        create_resource(store, conn, reference, &spec_hash, &status_hash, now)?;
                    (row, text(spec_text)?, text(status_text)?, Vec::new())
                }
                Some(mut existing) => {
                    if existing.spec_hash[..] != spec_hash[..] {
                        change_spec(conn, &existing, &spec_hash, now)?;
                        existing.resource_version += 1;
                        existing.generation += 1;
                        existing.spec_hash = spec_hash.to_vec();
                    }
                    let status = json.get_text(&existing.status_hash)?;
                    let finalizers = finalizers(conn, &existing.controller_resource_id)?;
                    (existing, text(spec_text)?, status, finalizers)
                }
            };
        let (controller, key) = reference.parts()?;
        let named = ResourceRef::Parts(controller, key);
        if !names_row(named, &row)? {
            return require_resource(conn, store.project_id(), named);
        }
        Ok(controller_record(&row, &spec, &status, &finalizers))
    })?;
    Ok(Reply::json_text(record))
}

fn create_resource(
    store: &Store,
    conn: &Db,
    reference: ResourceRef<'_>,
    spec_hash: &[u8],
    status_hash: &[u8],
    now: i64,
) -> Result<ControllerRow> {
    let uid = random_uuid();
    let controller_resource_id = format!("controller-resource-{}", random_uuid());
    // `${this.requireProjectId()}:${options.controller}:${options.key}`, then the insert's
    // `options.controller, options.key`: each read where it is used.
    let project_id = store.require_project_id()?;
    let (controller, key) = reference.parts()?;
    let aggregate = format!(
        "{project_id}:{}:{}",
        controller.template()?,
        key.template()?
    );
    let resource_id = resource_id_for("controller", &aggregate);
    conn.prepare_cached(
        "INSERT INTO resources(
           resource_id, resource_type, aggregate_key, revision, created_at, updated_at
         ) VALUES (?, 'controller', ?, 1, ?, ?)",
    )?
    .execute_deferred(params![resource_id, controller_resource_id, now, now])?;
    insert_lease(conn, &resource_id)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO controller_resources(
           controller_resource_id, resource_id, project_id, controller_name,
           resource_key, uid, generation, spec_hash, status_hash, created_at, updated_at
         ) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
    )?;
    let (controller, key) = reference.parts()?;
    insert.execute_deferred(params_from_iter(bind_params(&[
        Param::text(&controller_resource_id),
        Param::text(&resource_id),
        Param::text(project_id),
        Param::Js(controller),
        Param::Js(key),
        Param::text(&uid),
        Param::blob(spec_hash),
        Param::blob(status_hash),
        Param::int(now),
        Param::int(now),
    ])?))?;
    enqueue_controller_row(conn, &controller_resource_id, now, now)?;
    insert_attributed_event(
        conn,
        &resource_id,
        1,
        "resource.created",
        Actor::Control(None),
        r#"{"generation":1}"#,
        now,
    )?;
    Ok(ControllerRow {
        controller_resource_id,
        resource_id,
        resource_version: 1,
        controller_name: controller.template()?,
        resource_key: key.template()?,
        uid,
        generation: 1,
        spec_hash: spec_hash.to_vec(),
        status_hash: status_hash.to_vec(),
        deletion_requested_at: None,
    })
}

/// A new spec: generation and revision go up and the resource is queued again.
fn change_spec(conn: &Db, existing: &ControllerRow, spec_hash: &[u8], now: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE controller_resources
         SET spec_hash = ?, generation = generation + 1, updated_at = ?
         WHERE controller_resource_id = ?",
    )?
    .execute(params![spec_hash, now, existing.controller_resource_id])?;
    bump_controller_resource(conn, &existing.resource_id, existing.resource_version, now)?;
    enqueue_controller_row(conn, &existing.controller_resource_id, now, now)?;
    let payload = canonical(&json!({ "generation": existing.generation + 1 }));
    insert_attributed_event(
        conn,
        &existing.resource_id,
        existing.resource_version + 1,
        "resource.spec_updated",
        Actor::Control(None),
        &payload,
        now,
    )?;
    Ok(())
}

pub fn get_resource(store: &Store, call: &Call) -> Result<Reply> {
    // Without a project nothing is read (not even the connection).
    if store.project_id().is_none() {
        return Ok(Reply::undefined());
    }
    // One statement (the record with its documents): no read transaction needed.
    let conn = store.conn()?;
    let record = documented_row(conn, store.project_id(), ResourceRef::of(Js::arg(call, 0)))?
        .map(|row| row.record(conn))
        .transpose()?;
    Ok(Reply::maybe_text(record))
}

pub fn get_resource_by_uid(store: &Store, call: &Call) -> Result<Reply> {
    let conn = store.conn()?;
    let record = documented_row_by_uid(conn, Js::arg(call, 0))?
        .map(|row| row.record(conn))
        .transpose()?;
    Ok(Reply::maybe_text(record))
}

pub fn list_resources(store: &Store, call: &Call) -> Result<Reply> {
    // `options = {}` stands in for `undefined` only.
    let options = Js::arg(call, 0);
    let mut clauses = vec!["1 = 1"];
    let mut params = Vec::new();
    if let Some(project_id) = store.project_id() {
        clauses.push("c.project_id = ?");
        params.push(Param::text(project_id));
    }
    // `options.controller !== undefined` (a property of `{}` when the argument is `undefined`),
    // then `params.push(options.controller)`: two reads.
    let controller = || match options {
        Js::Undefined => Ok(Js::Undefined),
        options => options.get("controller"),
    };
    if !controller()?.is_undefined() {
        clauses.push("c.controller_name = ?");
        params.push(Param::Js(controller()?));
    }
    let conn = store.conn()?;
    let sql = documented_select(&format!(
        "WHERE {} ORDER BY c.controller_name, c.resource_key",
        clauses.join(" AND ")
    ));
    let records = in_read_transaction(conn, || {
        let mut statement = conn.prepare_cached(&sql)?;
        let bound = bind_params(&params)?;
        let rows = statement
            .query_map(params_from_iter(bound), DocumentedRow::from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut records = String::from("[");
        for (index, row) in rows.iter().enumerate() {
            if index > 0 {
                records.push(',');
            }
            records.push_str(&row.record(conn)?);
        }
        records.push(']');
        Ok(records)
    })?;
    Ok(Reply::json_text(records))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::path::Path;

    use serde_json::json;

    use crate::error::StoreError;
    use crate::methods::dispatch;
    use crate::state::vfs::{self, faults};
    use crate::state::StateDb;
    use crate::store::{resolve_project, Store};
    use crate::test_support::{open_read_write, Scratch};
    use crate::wire::Call;

    const NOW: i64 = 1_789_257_600_000;

    fn open(dir: &Path) -> StateDb {
        open_read_write(&dir.join("state.sqlite"), NOW)
    }

    fn put(state: &StateDb, project: Option<&str>, key: &str) -> crate::error::Result<()> {
        let options = json!({
            "controller": "c", "key": key, "now": NOW,
            "spec": { "$c": "{\"v\":1}" }, "initialStatus": { "$c": "{\"n\":0}" },
        });
        dispatch(
            &Store::new(state, project),
            "putResource",
            &Call::new(vec![options], NOW),
        )
        .map(drop)
    }

    fn blob_count(state: &StateDb) -> i64 {
        let conn = state.file_conn().unwrap();
        conn.query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
            .unwrap()
    }

    thread_local! {
        static LOCK_WAITS: Cell<u32> = const { Cell::new(0) };
    }

    /// Counts each wait for a lock (SQLite calls the handler with 0 first) and gives up at once.
    fn give_up(attempt: i32) -> bool {
        if attempt == 0 {
            LOCK_WAITS.with(|waits| waits.set(waits.get() + 1));
        }
        false
    }

    fn sqlite_code(error: &StoreError) -> &str {
        match error {
            StoreError::Sqlite { code, .. } => code,
            other => panic!("not an SQLite error: {other}"),
        }
    }

    /// Another process holds the write lock: one wait for it and SQLITE_BUSY, not a second wait
    /// on the reference path (issue 12: 10 s instead of the 5 s busy timeout).
    #[test]
    fn a_held_write_lock_is_waited_for_once() {
        let dir = Scratch::new("put-busy");
        let state = open(dir.path());
        let project = resolve_project(&state, "/p", NOW).unwrap();
        let holder = rusqlite::Connection::open(dir.file("state.sqlite")).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        state
            .file_conn()
            .unwrap()
            .busy_handler(Some(give_up))
            .unwrap();
        let blobs = blob_count(&state);
        LOCK_WAITS.with(|waits| waits.set(0));
        let error = put(&state, project.as_deref(), "k").unwrap_err();
        assert_eq!(sqlite_code(&error), "SQLITE_BUSY");
        assert_eq!(LOCK_WAITS.with(Cell::get), 1, "lock waits");
        holder.execute_batch("ROLLBACK").unwrap();
        assert_eq!(blob_count(&state), blobs);
    }

    /// An I/O error of the one-transaction path is the answer: not retried on the reference
    /// path, which would write the resource after all and hide the error.
    #[test]
    fn an_io_error_surfaces_instead_of_being_retried() {
        for (kind, code) in [
            (faults::Kind::Eio, "SQLITE_IOERR_WRITE"),
            (faults::Kind::Enospc, "SQLITE_FULL"),
        ] {
            let dir = Scratch::new(&format!("put-io-{kind:?}"));
            vfs::use_for_thread(Some(faults::name()));
            let state = open(dir.path());
            let project = resolve_project(&state, "/p", NOW).unwrap();
            let blobs = blob_count(&state);
            faults::arm(faults::Point::Write, 1, kind);
            let outcome = put(&state, project.as_deref(), "k");
            assert!(faults::disarm(), "the fault fired");
            vfs::use_default_for_thread();
            assert_eq!(sqlite_code(&outcome.unwrap_err()), code);
            assert_eq!(blob_count(&state), blobs, "nothing written");
            let resources: i64 = state
                .conn()
                .unwrap()
                .query_row("SELECT count(*) FROM controller_resources", [], |row| {
                    row.get(0)
                })
                .unwrap();
            assert_eq!(resources, 0);
        }
    }
}
