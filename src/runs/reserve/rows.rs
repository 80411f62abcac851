//! The rows a queued run consists of, written in the reference's insert order: documents,
//! definition, resource and lease, run, binding and queue, viewer rows and events.

use crate::runs::machine::status::status_sql;
use crate::sql::Db;

use super::*;
use crate::error::{Result, StoreError};
use crate::js::{bind_params, Js, Param};
use crate::runs::machine::moves::RESERVE;
use crate::state::blobs::{put_json, put_jsons, BlobHash};
use crate::state::ids::resource_id_for;
use crate::state::leases::{bound_text, insert_attributed_event_of, insert_lease, Actor};
use crate::state::revisions::Payload;
use crate::state::viewer::initialize_viewer_run;

impl<'a> Reservation<'a> {
    /// Every row of a queued run, in the reference's insert order.
    pub(super) fn insert_run(
        &self,
        conn: &Db,
        project_id: Option<&str>,
        lineage: &Lineage<'_>,
    ) -> Result<Documents<'a>> {
        // `resourceIdFor("run", options.runId)` interpolates the value in a template.
        let resource_id = resource_id_for("run", &self.defined("runId")?.template()?);
        let documents = self.put_documents(conn)?;
        self.insert_definition(conn, &documents.definition_hash)?;
        let values = bind_params(&[
            Param::text(&resource_id),
            self.run_id_param()?,
            Param::int(self.now),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
             VALUES (?, 'run', ?, 1, ?, ?)",
        )?
        .execute_deferred(crate::sql::params_from_iter(&values))?;
        insert_lease(conn, &resource_id)?;
        let project_id = project_id.ok_or_else(|| {
            StoreError::plain("Controller project is not registered in the state database")
        })?;
        self.insert_run_row(conn, &resource_id, project_id, lineage, &documents)?;
        // The run id as a TEXT column stores the bound value.
        let stored_run_id = stored_text(conn, self.defined("runId")?)?.unwrap_or_default();
        initialize_viewer_run(conn, &stored_run_id, self.now)?;
        documents.source.insert(conn, self.run_id_param()?)?;
        self.insert_binding_and_queue(conn)?;
        let origin = self.defined("originSessionId")?;
        let actor_id = stored_text(conn, origin)?;
        let payload = "{}";
        // Launch options default to `{}`: then the payload blob is already stored.
        let stored = documents.stored_hash_of(payload);
        let (actor, kind) = match (ill_formed_actor(origin)?, &stored) {
            (Some(actor), _) => (Param::Own(actor), Payload::Fresh),
            (None, Some(hash)) => (bound_text(actor_id.as_deref()), Payload::Stored(hash)),
            (None, None) => (bound_text(actor_id.as_deref()), Payload::Fresh),
        };
        let event = (resource_id.as_str(), 1, RESERVE.event);
        insert_attributed_event_of(conn, event, Actor::Session(actor), payload, self.now, kind)?;
        Ok(documents)
    }

    /// The snapshot blob, the source check, then the input (`?? null`) and launch options
    /// (`?? {}`) blobs — each step can fail, so the order is the reference's. The three puts
    /// are one statement once every step before them has passed; when one fails, the puts
    /// its steps made first are made, in order (one can fail first), then its error returned.
    pub(super) fn put_documents(&self, conn: &Db) -> Result<Documents<'a>> {
        let mut read = Vec::with_capacity(3);
        let steps = (|| {
            let snapshot = self.document("definitionSnapshot")?.text()?;
            read.push(snapshot);
            let source = queued_workflow_source(self.defined("workflowSource")?)?;
            let input = self.document("input")?.text_or("null")?;
            read.push(input);
            let launch_options = self.document("launchOptions")?.text_or("{}")?;
            Ok((snapshot, source, input, launch_options))
        })();
        let (snapshot, source, input, launch_options) = match steps {
            Ok(documents) => documents,
            Err(error) => {
                for text in read {
                    put_json(conn, text, self.now)?;
                }
                return Err(error);
            }
        };
        let [definition_hash, input_hash, launch_options_hash] =
            put_jsons(conn, [snapshot, input, launch_options], self.now)?;
        Ok(Documents {
            definition_hash,
            definition: snapshot,
            source,
            input_hash,
            input,
            launch_options_hash,
            launch_options,
        })
    }

    /// The first definition stored for a digest keeps its workflow name.
    pub(super) fn insert_definition(&self, conn: &Db, definition_hash: &BlobHash) -> Result<()> {
        let values = bind_params(&[
            Param::blob(&self.definition_digest),
            Param::Js(self.defined("workflowName")?),
            Param::blob(&definition_hash[..]),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO workflow_definitions(
               definition_digest, workflow_name, definition_hash, created_at
             ) VALUES (?, ?, ?, ?)
             ON CONFLICT(definition_digest) DO NOTHING",
        )?
        .execute_deferred(crate::sql::params_from_iter(&values))?;
        Ok(())
    }

    pub(super) fn insert_run_row(
        &self,
        conn: &Db,
        resource_id: &str,
        project_id: &str,
        lineage: &Lineage<'_>,
        documents: &Documents<'_>,
    ) -> Result<()> {
        let root_run_id = match &lineage.root_run_id {
            Some(root) => Param::text(root),
            None => Param::Js(lineage.own_root),
        };
        // `lineageKind` as the lineage resolved it: the caller's value bound as given (an
        // array spreads), the default as text, `null` for a root run.
        let lineage_kind = Param::Js(lineage.lineage_kind);
        let fingerprint = match &lineage.parent_terminal_fingerprint {
            Some(bytes) => Param::blob(bytes),
            None => Param::null(),
        };
        let values = bind_params(&[
            self.run_id_param()?,
            Param::text(resource_id),
            Param::text(project_id),
            // `options.parentRunId ?? null`, read for the statement.
            Param::Js(self.defined("parentRunId")?.or(Js::Null)),
            root_run_id,
            lineage_kind,
            Param::int(lineage.restart_number),
            fingerprint,
            Param::blob(&self.definition_digest),
            Param::Js(self.defined("workflowSourceRef")?),
            Param::blob(&documents.launch_options_hash[..]),
            Param::blob(&documents.input_hash[..]),
            Param::int(self.now),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(concat!(
            "INSERT INTO runs(
               run_id, resource_id, project_id, parent_run_id, root_run_id, lineage_kind,
               restart_number, parent_terminal_fingerprint, definition_digest,
               workflow_ref, launch_options_hash, status, paused,
               input_hash, created_at, updated_at
             ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
            status_sql!(queued),
            ", 0, ?, ?, ?)"
        ))?
        .execute_deferred(crate::sql::params_from_iter(&values))?;
        Ok(())
    }

    /// The binding (`executionMode ?? "interactive"`) and the queue row, whose affinity is the
    /// reserving runner; the queue's partial index allows one active run per origin session.
    pub(super) fn insert_binding_and_queue(&self, conn: &Db) -> Result<()> {
        // `.run(options.runId, options.originSessionId, options.executionMode ?? …)`.
        let run_id = self.run_id_param()?;
        let origin_session_id = Param::Js(self.defined("originSessionId")?);
        let execution_mode = match self.given("executionMode")? {
            Some(mode) => Param::Js(mode),
            None => Param::text("interactive"),
        };
        let values = bind_params(&[
            run_id,
            origin_session_id,
            execution_mode,
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO run_bindings(run_id, origin_session_id, execution_mode, created_at)
             VALUES (?, ?, ?, ?)",
        )?
        .execute_deferred(crate::sql::params_from_iter(&values))?;
        let values = bind_params(&[
            self.run_id_param()?,
            Param::int(self.now),
            Param::Js(self.defined("runnerId")?),
            Param::Js(self.defined("originSessionId")?),
            Param::int(self.now),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(concat!(
            "INSERT INTO run_queue(
               run_id, status, available_at, affinity_runner_id, origin_session_id,
               consecutive_errors, created_at, updated_at
             ) VALUES (?, ",
            status_sql!(queued),
            ", ?, ?, ?, 0, ?, ?)"
        ))?
        .execute_deferred(crate::sql::params_from_iter(&values))?;
        Ok(())
    }
}
