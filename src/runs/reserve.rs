//! Workflow run reservation: validating a new run and its lineage, writing every
//! row a queued run consists of, and the two entry points built on it — prepare-or-adopt (reserve
//! and claim in one transaction, or adopt an identical existing run) and enqueue (reserve if
//! missing, then claim in a second transaction).

use rusqlite::{params, Connection};
use serde_json::{json, Value};

use super::claims::{claim_run, claim_run_in_transaction, ClaimOptions, RunClaim};
use super::records::{map_workflow_run, map_workflow_run_with, read_queued_run_sources};
use super::row::{run_row_of, RunRow};
use crate::args::{bind_params, Bound, Js, Param};
use crate::error::{Result, StoreError};
use crate::state::blobs::{put_json, read_json, BlobHash, JsonReads};
use crate::state::ids::resource_id_for;
use crate::state::json::canonical;
use crate::state::leases::insert_lease;
use crate::state::revisions::{
    bump_resource_revision, insert_event, insert_event_with_stored_payload, EventDraft,
};
use crate::state::viewer::initialize_viewer_run;
use crate::store::Store;
use crate::wire::{field, time, Call, JsonArg, Reply};

pub fn reserve_workflow_run(store: &Store, options: &Value) -> Result<String> {
    let request = Reservation::validate(options)?;
    let project_id = store.project_id();
    store.write(|conn| request.reserve_in_transaction(conn, project_id))
}

pub fn prepare_or_adopt_workflow_run(store: &Store, options: &Value) -> Result<String> {
    let request = Reservation::validate(options)?;
    let project_id = store.project_id();
    store.write(|conn| {
        if let Some(existing) = run_row_of(conn, request.run_id)? {
            request.assert_compatible(conn, &existing)?;
            let run = map_workflow_run(conn, &existing)?;
            return Ok(format!(r#"{{"state":"adopted","run":{run}}}"#));
        }
        request.reserve_in_transaction(conn, project_id)?;
        let claim = run_claim(options)?;
        match claim_run_in_transaction(conn, &claim, request.now, ClaimOptions::default())? {
            Some(run) => Ok(format!(r#"{{"state":"claimed","run":{run}}}"#)),
            None => Err(not_claimed(&request.run_key)),
        }
    })
}

pub fn enqueue_workflow_run(store: &Store, options: &Value) -> Result<String> {
    // `this.getWorkflowRun(options.runId)`: the caller's value bound as given.
    let run_id = crate::args::Js::of(options).get("runId")?;
    let existing = match run_row_of(store.conn()?, run_id)? {
        Some(row) => Some(map_workflow_run(store.conn()?, &row)?),
        None => None,
    };
    if existing.is_none() {
        reserve_workflow_run(store, &without_execution_mode(options))?;
    }
    let now = time(field(options, "now"))?;
    let claim = run_claim(options)?;
    claim_run(store, &claim, now, ClaimOptions::default())?
        .ok_or_else(|| not_claimed(&run_id.template().unwrap_or_default()))
}

/// enqueueWorkflowRun forwards every reservation field except `executionMode`.
fn without_execution_mode(options: &Value) -> Value {
    let mut forwarded = options.clone();
    if let Some(map) = forwarded.as_object_mut() {
        map.remove("executionMode");
    }
    forwarded
}

fn run_claim(options: &Value) -> Result<RunClaim<'_>> {
    let options = crate::args::Js::of(options);
    Ok(RunClaim {
        run_id: options.get_or_undefined("runId"),
        runner_id: options.get_or_undefined("runnerId"),
        claim_token: options.get_or_undefined("claimToken"),
        lease_ms: options.get_or_undefined("leaseMs"),
    })
}

fn not_claimed(run_id: &str) -> StoreError {
    StoreError::plain(format!("Workflow run could not be claimed: {run_id}"))
}

/// A reservation request that passed the checks made before the transaction.
///
/// `validateRunId` tests only the text of `runId` (`String(value)`: a number, a bigint or a
/// one-item array passes); the reference then uses the value itself everywhere: bound as
/// better-sqlite3 binds it (a number as REAL, stored as `'5.0'` in the TEXT columns and matching
/// them when looked up), and interpolated in templates (`resourceIdFor`, messages) as `"5"`.
struct Reservation<'a> {
    options: &'a Value,
    /// `options.runId` as the caller gave it (`None` is `undefined`).
    run_id_value: Option<&'a Value>,
    /// The same value as JavaScript sees it.
    run_id: Js<'a>,
    /// `${options.runId}`.
    run_key: String,
    now: i64,
    definition_digest: Vec<u8>,
}

/// What a run's lineage resolves to.
struct Lineage<'a> {
    parent_run_id: Option<&'a Value>,
    /// The parent's root (text), or `None`: the run is its own root (`options.runId`, bound).
    root_run_id: Option<String>,
    /// `null` for a root run, else `options.lineageKind ?? "continuation"`.
    lineage_kind: Js<'a>,
    restart_number: i64,
    parent_terminal_fingerprint: Option<Vec<u8>>,
}

/// The blobs a reservation stores (hash and JSON text), and its validated source.
struct Documents<'a> {
    definition_hash: BlobHash,
    definition: &'a str,
    source: QueuedSource<'a>,
    input_hash: BlobHash,
    input: &'a str,
    launch_options_hash: BlobHash,
    launch_options: &'a str,
}

impl<'a> Documents<'a> {
    /// The hash of a JSON blob this reservation put with exactly this text.
    fn stored_hash_of(&self, text: &str) -> Option<BlobHash> {
        self.stored()
            .into_iter()
            .find_map(|(hash, stored)| (stored == text).then_some(hash))
    }

    /// The JSON blobs this reservation put, for the record read right after it.
    fn stored(&self) -> Vec<(BlobHash, &'a str)> {
        vec![
            (self.definition_hash, self.definition),
            (self.input_hash, self.input),
            (self.launch_options_hash, self.launch_options),
        ]
    }
}

impl<'a> Reservation<'a> {
    /// Run id, then timestamp, then digest — the reference's order.
    fn validate(options: &'a Value) -> Result<Reservation<'a>> {
        // `validateRunId(options.runId)`: the pattern tests the value's text.
        let run_id = Js::of(options).get("runId")?;
        let run_key = run_id.template()?;
        validate_run_id(&run_key)?;
        let now = time(field(options, "now"))?;
        let definition_digest = digest_buffer(crate::args::prop(options, "definitionDigest"))?;
        Ok(Reservation {
            options,
            run_id_value: crate::args::prop(options, "runId"),
            run_id,
            run_key,
            now,
            definition_digest,
        })
    }

    /// The `options` property, or `None` when it is `undefined`.
    fn defined(&self, name: &str) -> Option<&'a Value> {
        crate::args::prop(self.options, name)
    }

    /// The `options` property, or `None` when it is `undefined` or `null` (for `??`).
    fn given(&self, name: &str) -> Option<&'a Value> {
        self.defined(name).filter(|value| !value.is_null())
    }

    fn parent_row(&self, conn: &Connection) -> Result<Option<RunRow>> {
        match self.defined("parentRunId") {
            None => Ok(None),
            // `requireWorkflowRunRow(options.parentRunId)`: the value bound as given.
            Some(parent_run_id) => {
                let parent_run_id = Js::of(parent_run_id);
                match run_row_of(conn, parent_run_id)? {
                    Some(row) => Ok(Some(row)),
                    None => Err(not_found(parent_run_id)?),
                }
            }
        }
    }

    /// `lineageKind ?? "continuation"` for a child run (any value the caller gave), `null` for
    /// a root run.
    fn expected_lineage_kind(&self) -> Js<'a> {
        if self.defined("parentRunId").is_none() {
            return Js::Null;
        }
        Js::opt(self.given("lineageKind")).or(Js::String("continuation"))
    }

    /// `this.workflowRunRow(options.runId)`.
    fn existing_row(&self, conn: &Connection) -> Result<Option<RunRow>> {
        run_row_of(conn, self.run_id)
    }

    /// `options.runId` as one statement parameter.
    fn run_id_param(&self) -> Param<'a> {
        Param::Caller(self.run_id_value)
    }

    fn reserve_in_transaction(
        &self,
        conn: &Connection,
        project_id: Option<&str>,
    ) -> Result<String> {
        if let Some(existing) = self.existing_row(conn)? {
            // The reference's duplicate check reads the whole record, which can itself fail.
            map_workflow_run(conn, &existing)?;
            return Err(StoreError::plain(format!(
                "Workflow run already reserved: {}",
                self.run_key
            )));
        }
        let lineage = self.resolve_lineage(conn)?;
        let documents = self.insert_run(conn, project_id, &lineage)?;
        // The record reads the run back (other rows decide what it shows: an existing
        // definition keeps its name and snapshot), but not the documents just stored.
        // `requireWorkflowRun(options.runId)`: looked up by the value as bound.
        let row = match self.existing_row(conn)? {
            Some(row) => row,
            None => return Err(not_found(self.run_id)?),
        };
        map_workflow_run_with(
            &mut JsonReads::with_stored(conn, documents.stored()),
            &row,
            None,
        )
    }

    /// Applies the lineage rules; a continuation of a parked parent closes the parent's queue.
    fn resolve_lineage(&self, conn: &Connection) -> Result<Lineage<'a>> {
        let lineage_kind = self.expected_lineage_kind();
        if self.defined("parentRunId").is_none() && self.defined("lineageKind").is_some() {
            return Err(StoreError::plain(
                "A root workflow run cannot declare lineage",
            ));
        }
        let Some(parent) = self.parent_row(conn)? else {
            if self.defined("restartNumber").is_some()
                || self.defined("parentTerminalFingerprint").is_some()
            {
                return Err(StoreError::plain(
                    "A root workflow run cannot declare restart metadata",
                ));
            }
            return Ok(Lineage {
                parent_run_id: None,
                root_run_id: None,
                lineage_kind: Js::Null,
                restart_number: 0,
                parent_terminal_fingerprint: None,
            });
        };
        if !js_equals_text(
            parent.origin_session_id.as_deref(),
            self.defined("originSessionId"),
        ) {
            return Err(StoreError::plain(
                "Workflow parent belongs to another Pi session",
            ));
        }
        let mut lineage = Lineage {
            parent_run_id: self.defined("parentRunId"),
            root_run_id: Some(parent.root_run_id.clone()),
            lineage_kind,
            restart_number: parent.restart_number,
            parent_terminal_fingerprint: None,
        };
        if lineage_kind.strict_eq_str("restart") {
            self.check_restart(&parent, &mut lineage)?;
        } else {
            self.check_continuation(conn, &parent)?;
        }
        Ok(lineage)
    }

    fn check_restart(&self, parent: &RunRow, lineage: &mut Lineage<'a>) -> Result<()> {
        let run_terminal = matches!(
            parent.run_status.as_str(),
            "completed" | "failed" | "timed_out" | "cancelled"
        );
        if !run_terminal || !parent.is_queue_terminal() {
            return Err(StoreError::plain("Restart parent is not terminal"));
        }
        let Some(fingerprint) = self.defined("parentTerminalFingerprint") else {
            return Err(StoreError::plain(
                "Restart requires the parent terminal fingerprint",
            ));
        };
        lineage.parent_terminal_fingerprint = Some(terminal_fingerprint_buffer(fingerprint)?);
        let next = parent.restart_number + 1;
        if let Some(restart_number) = self.given("restartNumber") {
            if !number_equals(restart_number, next) {
                return Err(StoreError::plain(
                    "Restart number does not follow its parent",
                ));
            }
        }
        lineage.restart_number = next;
        Ok(())
    }

    fn check_continuation(&self, conn: &Connection, parent: &RunRow) -> Result<()> {
        let conflicting_number = self
            .defined("restartNumber")
            .is_some_and(|number| !number_equals(number, parent.restart_number));
        if self.defined("parentTerminalFingerprint").is_some() || conflicting_number {
            return Err(StoreError::plain(
                "Continuation lineage conflicts with restart metadata",
            ));
        }
        match parent.status.as_str() {
            "parked" => self.close_parked_parent(conn, parent),
            "done" => Err(StoreError::plain(
                "Continuation parent already has a reserved continuation",
            )),
            status => Err(StoreError::plain(format!(
                "Continuation parent queue is {status}"
            ))),
        }
    }

    /// The parked parent's queue becomes `done`: its continuation takes over.
    fn close_parked_parent(&self, conn: &Connection, parent: &RunRow) -> Result<()> {
        if parent.owner_id.is_some() {
            return Err(StoreError::plain(
                "Continuation parent still has an active owner",
            ));
        }
        conn.prepare_cached(
            "UPDATE run_queue SET status = 'done', updated_at = ?, finished_at = ?
             WHERE run_id = ? AND status = 'parked'",
        )?
        .execute(params![self.now, self.now, parent.run_id])?;
        let revision = bump_resource_revision(conn, &parent.resource_id, self.now)?;
        let actor_id = stored_text(conn, self.defined("originSessionId"))?;
        // `{ continuationRunId: options.runId }`: the caller's value, as canonical JSON.
        let payload = canonical(&json!({ "continuationRunId": self.run_id.json_value()? }));
        insert_event(
            conn,
            &EventDraft {
                resource_id: &parent.resource_id,
                revision,
                event_type: "run.queue_done_for_continuation",
                actor_type: "session",
                actor_id: actor_id.as_deref(),
                payload: &payload,
                now: self.now,
                lease_generation: None,
            },
        )?;
        Ok(())
    }

    /// Every row of a queued run, in the reference's insert order.
    fn insert_run(
        &self,
        conn: &Connection,
        project_id: Option<&str>,
        lineage: &Lineage<'_>,
    ) -> Result<Documents<'a>> {
        let documents = self.put_documents(conn)?;
        // `resourceIdFor("run", options.runId)` interpolates the value in a template.
        let resource_id = resource_id_for("run", &self.run_key);
        self.insert_definition(conn, &documents.definition_hash)?;
        let values = bind_params(&[
            Param::text(&resource_id),
            self.run_id_param(),
            Param::int(self.now),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO resources(resource_id, resource_type, aggregate_key, revision, created_at, updated_at)
             VALUES (?, 'run', ?, 1, ?, ?)",
        )?
        .execute(rusqlite::params_from_iter(&values))?;
        insert_lease(conn, &resource_id)?;
        let project_id = project_id.ok_or_else(|| {
            StoreError::plain("Controller project is not registered in the state database")
        })?;
        self.insert_run_row(conn, &resource_id, project_id, lineage, &documents)?;
        // The run id as the runs row stored it (the same text a TEXT column stores for the
        // bound value).
        let stored_run_id = stored_text(conn, self.run_id_value)?.unwrap_or_default();
        initialize_viewer_run(conn, &stored_run_id, self.now)?;
        documents.source.insert(conn, self.run_id_param())?;
        self.insert_binding_and_queue(conn)?;
        let actor_id = stored_text(conn, self.defined("originSessionId"))?;
        let queued = EventDraft {
            resource_id: &resource_id,
            revision: 1,
            event_type: "run.queued",
            actor_type: "session",
            actor_id: actor_id.as_deref(),
            payload: "{}",
            now: self.now,
            lease_generation: None,
        };
        // Launch options default to `{}`: then the payload blob is already stored.
        match documents.stored_hash_of(queued.payload) {
            Some(hash) => insert_event_with_stored_payload(conn, &queued, &hash)?,
            None => insert_event(conn, &queued)?,
        };
        Ok(documents)
    }

    /// The snapshot blob, the source check, then the input (`?? null`) and launch options
    /// (`?? {}`) blobs — each step can fail, so the order is the reference's.
    fn put_documents(&self, conn: &Connection) -> Result<Documents<'a>> {
        let snapshot = JsonArg::of(field(self.options, "definitionSnapshot")).text()?;
        let definition_hash = put_json(conn, snapshot, self.now)?;
        let source = queued_workflow_source(field(self.options, "workflowSource"))?;
        let input = JsonArg::of(field(self.options, "input")).text_or("null")?;
        let input_hash = put_json(conn, input, self.now)?;
        let launch_options = JsonArg::of(field(self.options, "launchOptions")).text_or("{}")?;
        let launch_options_hash = put_json(conn, launch_options, self.now)?;
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
    fn insert_definition(&self, conn: &Connection, definition_hash: &BlobHash) -> Result<()> {
        let values = bind_params(&[
            Param::blob(&self.definition_digest),
            Param::Caller(self.defined("workflowName")),
            Param::blob(&definition_hash[..]),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO workflow_definitions(
               definition_digest, workflow_name, definition_hash, created_at
             ) VALUES (?, ?, ?, ?)
             ON CONFLICT(definition_digest) DO NOTHING",
        )?
        .execute(rusqlite::params_from_iter(&values))?;
        Ok(())
    }

    fn insert_run_row(
        &self,
        conn: &Connection,
        resource_id: &str,
        project_id: &str,
        lineage: &Lineage<'_>,
        documents: &Documents<'_>,
    ) -> Result<()> {
        let root_run_id = match &lineage.root_run_id {
            Some(root) => Param::text(root),
            None => self.run_id_param(),
        };
        // The caller's `lineageKind` is bound as given (an array spreads), the default as text.
        let lineage_kind = match (lineage.lineage_kind, self.given("lineageKind")) {
            (Js::Null, _) => Param::null(),
            (_, Some(kind)) => Param::Caller(Some(kind)),
            (_, None) => Param::text("continuation"),
        };
        let fingerprint = match &lineage.parent_terminal_fingerprint {
            Some(bytes) => Param::blob(bytes),
            None => Param::null(),
        };
        let values = bind_params(&[
            self.run_id_param(),
            Param::text(resource_id),
            Param::text(project_id),
            // `options.parentRunId ?? null`
            Param::Caller(lineage.parent_run_id.filter(|value| !value.is_null())),
            root_run_id,
            lineage_kind,
            Param::int(lineage.restart_number),
            fingerprint,
            Param::blob(&self.definition_digest),
            Param::Caller(self.defined("workflowSourceRef")),
            Param::blob(&documents.launch_options_hash[..]),
            Param::blob(&documents.input_hash[..]),
            Param::int(self.now),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO runs(
               run_id, resource_id, project_id, parent_run_id, root_run_id, lineage_kind,
               restart_number, parent_terminal_fingerprint, definition_digest,
               workflow_ref, launch_options_hash, status, paused,
               input_hash, created_at, updated_at
             ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?)",
        )?
        .execute(rusqlite::params_from_iter(&values))?;
        Ok(())
    }

    /// The binding (`executionMode ?? "interactive"`) and the queue row, whose affinity is the
    /// reserving runner; the queue's partial index allows one active run per origin session.
    fn insert_binding_and_queue(&self, conn: &Connection) -> Result<()> {
        let origin_session_id = Param::Caller(self.defined("originSessionId"));
        let execution_mode = match self.given("executionMode") {
            Some(mode) => Param::Caller(Some(mode)),
            None => Param::text("interactive"),
        };
        let values = bind_params(&[
            self.run_id_param(),
            origin_session_id.clone(),
            execution_mode,
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO run_bindings(run_id, origin_session_id, execution_mode, created_at)
             VALUES (?, ?, ?, ?)",
        )?
        .execute(rusqlite::params_from_iter(&values))?;
        let values = bind_params(&[
            self.run_id_param(),
            Param::int(self.now),
            Param::Caller(self.defined("runnerId")),
            origin_session_id,
            Param::int(self.now),
            Param::int(self.now),
        ])?;
        conn.prepare_cached(
            "INSERT INTO run_queue(
               run_id, status, available_at, affinity_runner_id, origin_session_id,
               consecutive_errors, created_at, updated_at
             ) VALUES (?, 'queued', ?, ?, ?, 0, ?, ?)",
        )?
        .execute(rusqlite::params_from_iter(&values))?;
        Ok(())
    }

    /// The existing run must match this request in every identity field.
    fn assert_compatible(&self, conn: &Connection, row: &RunRow) -> Result<()> {
        if !self.is_compatible(conn, row)? {
            return Err(StoreError::plain(format!(
                "Workflow run preparation conflicts: {}",
                self.run_key
            )));
        }
        Ok(())
    }

    /// The reference's short-circuit order: later comparisons (and their errors) are reached
    /// only while everything before them matched.
    fn is_compatible(&self, conn: &Connection, row: &RunRow) -> Result<bool> {
        let lineage_kind = self.expected_lineage_kind();
        let parent = self.parent_row(conn)?;
        // `parent?.rootRunId ?? options.runId`, compared with `===`.
        let root_run_id_matches = match &parent {
            Some(parent) => row.root_run_id == parent.root_run_id,
            None => self.run_id.strict_eq_str(&row.root_run_id),
        };
        let restart_number_matches = if lineage_kind.strict_eq_str("restart") {
            match self.given("restartNumber") {
                Some(number) => number_equals(number, row.restart_number),
                None => {
                    let parent_number = parent.as_ref().map_or(-1, |parent| parent.restart_number);
                    row.restart_number == parent_number + 1
                }
            }
        } else {
            row.restart_number == parent.as_ref().map_or(0, |parent| parent.restart_number)
        };
        let fingerprint = match self.defined("parentTerminalFingerprint") {
            Some(value) => Some(terminal_fingerprint_buffer(value)?),
            None => None,
        };
        let same_identity = field(self.options, "workflowName").as_str()
            == Some(row.workflow_name.as_str())
            && field(self.options, "workflowSourceRef").as_str() == Some(row.workflow_ref.as_str())
            && row.definition_digest == self.definition_digest;
        if !same_identity {
            return Ok(false);
        }
        let stored_sources = canonical(&read_queued_run_sources(conn, row)?);
        let sources = queued_workflow_source(field(self.options, "workflowSource"))?;
        if stored_sources != sources.canonical() {
            return Ok(false);
        }
        let input = JsonArg::of(field(self.options, "input")).text_or("null")?;
        if canonical(&read_json(conn, &row.input_hash)?) != input {
            return Ok(false);
        }
        let launch_options = JsonArg::of(field(self.options, "launchOptions")).text_or("{}")?;
        if canonical(&read_json(conn, &row.launch_options_hash)?) != launch_options {
            return Ok(false);
        }
        let execution_mode_matches = match self.given("executionMode") {
            Some(mode) => mode.is_string() && row.execution_mode.as_deref() == mode.as_str(),
            None => row.execution_mode.as_deref() == Some("interactive"),
        };
        Ok(js_equals_text(
            row.origin_session_id.as_deref(),
            self.defined("originSessionId"),
        ) && execution_mode_matches
            && parent_run_id_matches(row, self.given("parentRunId"))
            && root_run_id_matches
            && same_nullable_text(row.lineage_kind.as_deref(), lineage_kind)
            && restart_number_matches
            && row.parent_terminal_fingerprint == fingerprint)
    }
}

/// `row.parentRunId === (options.parentRunId ?? null)`.
fn parent_run_id_matches(row: &RunRow, given: Option<&Value>) -> bool {
    match (row.parent_run_id.as_deref(), given) {
        (None, None) => true,
        (Some(stored), Some(value)) => value.as_str() == Some(stored),
        _ => false,
    }
}

/// JavaScript `stored === value` for a nullable text column and a caller value that may be
/// `undefined` (`None`).
fn js_equals_text(stored: Option<&str>, value: Option<&Value>) -> bool {
    match (stored, value) {
        (None, Some(Value::Null)) => true,
        (Some(stored), Some(Value::String(value))) => stored == value,
        _ => false,
    }
}

/// `stored === value` for a nullable text column and a caller value.
fn same_nullable_text(stored: Option<&str>, value: Js<'_>) -> bool {
    match stored {
        None => value == Js::Null,
        Some(stored) => value.strict_eq_str(stored),
    }
}

/// `Workflow run not found: ${runId}`.
fn not_found(run_id: Js<'_>) -> Result<StoreError> {
    Ok(StoreError::plain(format!(
        "Workflow run not found: {}",
        run_id.template()?
    )))
}

/// What a TEXT column stores for a caller value the reference binds there: the string itself,
/// or the text SQLite makes of a number (`5` as REAL is `'5.0'`); `None` for `null`/`undefined`.
/// The value is bound as one parameter by better-sqlite3's rules (a one-item array spreads);
/// values it cannot bind fail with its error.
fn stored_text(conn: &Connection, value: Option<&Value>) -> Result<Option<String>> {
    if let Some(text) = Js::opt(value).as_str() {
        return Ok(Some(text.to_string()));
    }
    let bound = bind_params(&[Param::Caller(value)])?;
    if bound.first() == Some(&Bound::Null) {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached("SELECT CAST(? AS TEXT)")?
        .query_row(rusqlite::params_from_iter(&bound), |row| {
            row.get::<_, Option<String>>(0)
        })?)
}

/// `value === n` for a caller value and an integer.
fn number_equals(value: &Value, n: i64) -> bool {
    // Through the JavaScript view: a tagged -0 is `=== 0`, as in JavaScript.
    Js::of(value).strict_eq_number(n as f64)
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`
fn validate_run_id(run_id: &str) -> Result<()> {
    let bytes = run_id.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 200
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(StoreError::plain(format!(
            "Invalid workflow run id: {run_id}"
        )))
    }
}

/// 64 hex digits (any case) after an optional `sha256:` prefix, as 32 bytes. `value` is `None`
/// for `undefined`; a value that is not a string fails where the reference calls `startsWith`.
fn sha256_hex(value: Option<&Value>, error: &str) -> Result<Vec<u8>> {
    let text = match value {
        Some(Value::String(text)) => text,
        None => return Err(no_starts_with("undefined")),
        Some(Value::Null) => return Err(no_starts_with("null")),
        Some(_) => {
            return Err(StoreError::Type(
                "value.startsWith is not a function".into(),
            ))
        }
    };
    let hex = text.strip_prefix("sha256:").unwrap_or(text);
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::plain(error));
    }
    hex::decode(hex).map_err(|_| StoreError::plain(error))
}

fn no_starts_with(receiver: &str) -> StoreError {
    StoreError::Type(format!(
        "Cannot read properties of {receiver} (reading 'startsWith')"
    ))
}

fn digest_buffer(value: Option<&Value>) -> Result<Vec<u8>> {
    sha256_hex(value, "Expected a SHA-256 digest")
}

fn terminal_fingerprint_buffer(value: &Value) -> Result<Vec<u8>> {
    sha256_hex(Some(value), "Expected a terminal fingerprint")
}

/// A validated `workflowSource`: a bare source is the root with no mounts.
struct QueuedSource<'a> {
    root: &'a Value,
    mounted: &'a [Value],
}

fn queued_workflow_source(value: &Value) -> Result<QueuedSource<'_>> {
    if is_workflow_source(value) {
        return Ok(QueuedSource {
            root: value,
            mounted: &[],
        });
    }
    let root = field(value, "root");
    if let (true, Some(mounted)) = (value.is_object(), field(value, "mounted").as_array()) {
        if is_workflow_source(root) && mounted.iter().all(is_mounted_workflow_source) {
            return Ok(QueuedSource { root, mounted });
        }
    }
    Err(StoreError::plain(
        "Stored workflow source identity is invalid",
    ))
}

fn is_workflow_source(value: &Value) -> bool {
    let has_text = |name: &str| field(value, name).is_string();
    value.is_object()
        && match field(value, "kind").as_str() {
            Some("builtin") => has_text("id") && has_text("revision"),
            Some("file") => has_text("path") && has_text("hash"),
            _ => false,
        }
}

fn is_mounted_workflow_source(value: &Value) -> bool {
    let path_ok = field(value, "mountPath")
        .as_array()
        .is_some_and(|parts| parts.iter().all(Value::is_string));
    value.is_object()
        && path_ok
        && field(value, "workflowName").is_string()
        && is_workflow_source(field(value, "source"))
}

/// `(source_type, source_ref, source_revision)` of a validated source.
fn source_parts(source: &Value) -> (&str, &str, &str) {
    let text = |name: &str| field(source, name).as_str().unwrap_or_default();
    if text("kind") == "builtin" {
        ("builtin", text("id"), text("revision"))
    } else {
        ("file", text("path"), text("hash"))
    }
}

impl QueuedSource<'_> {
    /// Canonical JSON of `{root, mounted}` as the caller gave them (extra properties included).
    fn canonical(&self) -> String {
        canonical(&json!({ "root": self.root, "mounted": self.mounted }))
    }

    /// The root row (`mount_path ''`), then one row per mount (`mountPath.join("/")`).
    fn insert(&self, conn: &Connection, run_id: Param<'_>) -> Result<()> {
        let mut insert = conn.prepare_cached(
            "INSERT INTO run_sources(run_id, mount_path, source_type, source_ref, source_revision)
             VALUES (?, ?, ?, ?, ?)",
        )?;
        let (kind, reference, revision) = source_parts(self.root);
        let root = bind_params(&[
            run_id.clone(),
            Param::text(""),
            Param::text(kind),
            Param::text(reference),
            Param::text(revision),
        ])?;
        insert.execute(rusqlite::params_from_iter(&root))?;
        for mounted in self.mounted {
            let mount_path: Vec<&str> = field(mounted, "mountPath")
                .as_array()
                .map(|parts| parts.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let (kind, reference, revision) = source_parts(field(mounted, "source"));
            let joined = mount_path.join("/");
            let values = bind_params(&[
                run_id.clone(),
                Param::text(&joined),
                Param::text(kind),
                Param::text(reference),
                Param::text(revision),
            ])?;
            insert.execute(rusqlite::params_from_iter(&values))?;
        }
        Ok(())
    }
}

// The method table's rows (`crate::methods`): each reads the call's arguments and answers it.

/// `reserveWorkflowRun` (a row of the method table).
pub fn reserve_workflow_run_call(store: &Store, call: &Call) -> Result<Reply> {
    reserve_workflow_run(store, call.arg(0)).map(Reply::json_text)
}

/// `prepareOrAdoptWorkflowRun` (a row of the method table).
pub fn prepare_or_adopt_workflow_run_call(store: &Store, call: &Call) -> Result<Reply> {
    prepare_or_adopt_workflow_run(store, call.arg(0)).map(Reply::json_text)
}

/// `enqueueWorkflowRun` (a row of the method table).
pub fn enqueue_workflow_run_call(store: &Store, call: &Call) -> Result<Reply> {
    enqueue_workflow_run(store, call.arg(0)).map(Reply::json_text)
}
