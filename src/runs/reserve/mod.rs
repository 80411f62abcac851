//! Workflow run reservation: validating a new run and its lineage, writing every
//! row a queued run consists of, and the two entry points built on it — prepare-or-adopt (reserve
//! and claim in one transaction, or adopt an identical existing run) and enqueue (reserve if
//! missing, then claim in a second transaction).
//!
//! By concern: `lineage` (the lineage rules), `rows` (the rows written), `adopt` (the
//! identity check of prepare-or-adopt), `checks` (value checks), `source` (the workflow
//! source).

mod adopt;
mod checks;
mod lineage;
mod rows;
mod source;

use crate::sql::Db;

use super::take::{claim_run, claim_run_in_transaction, ClaimOptions, RunClaim};
use std::sync::OnceLock;

use super::records::{
    map_listed_run_record, map_workflow_run, map_workflow_run_with, run_record_select, RecordReads,
};
use super::row::{run_row_of, RunRow, RunRowRef, RUN_SELECT};
use crate::error::{Result, StoreError};
use crate::js::timestamp;
use crate::js::{params_for, Js, Param};
use crate::sql::params_from_iter;
use crate::state::blobs::{BlobHash, JsonReads};
use crate::state::columns::is_utf8_error;
use crate::store::Store;
use crate::wire::{Call, JsonArg, Reply};
use checks::*;
use source::*;

pub fn reserve_workflow_run(store: &Store, call: &Call, options: Js<'_>) -> Result<String> {
    let request = Reservation::validate(call, options, None)?;
    let project_id = store.project_id();
    store.write(|conn| request.reserve_in_transaction(conn, project_id))
}

pub fn prepare_or_adopt_workflow_run(store: &Store, call: &Call, options: Js<'_>) -> Result<Reply> {
    let request = Reservation::validate(call, options, None)?;
    let project_id = store.project_id();
    let mut token = Js::Undefined;
    let text = store.write(|conn| {
        // `this.workflowRunRow(options.runId)`: read again, inside the transaction.
        if let Some(existing) = run_row_of(conn, options.get("runId")?)? {
            request.assert_compatible(conn, &existing)?;
            let run = map_workflow_run(conn, &existing)?;
            return Ok(format!(r#"{{"state":"adopted","run":{run}}}"#));
        }
        request.reserve_in_transaction(conn, project_id)?;
        let claim = run_claim(call, options)?;
        token = claim.claim_token;
        match claim_run_in_transaction(conn, &claim, request.now, ClaimOptions::default())? {
            Some(run) => Ok(format!(r#"{{"state":"claimed","run":{run}}}"#)),
            None => Err(not_claimed(&options.get("runId")?.template()?)),
        }
    })?;
    Ok(Reply::json_text(text).echo_object("run.claimToken", token))
}

pub fn enqueue_workflow_run(store: &Store, call: &Call, options: Js<'_>) -> Result<Reply> {
    // `this.getWorkflowRun(options.runId)`: the caller's value bound as given.
    let existing = match run_row_of(store.conn()?, options.get("runId")?)? {
        Some(row) => Some(map_workflow_run(store.conn()?, &row)?),
        None => None,
    };
    if existing.is_none() {
        // `this.reserveWorkflowRun({...})` of a copy: every field read once as it is built.
        let copy = forwarded_reservation(options)?;
        let request = Reservation::validate(call, options, Some(copy))?;
        let project_id = store.project_id();
        store.write(|conn| request.reserve_in_transaction(conn, project_id))?;
    }
    // `this.claimWorkflowRun({runId, runnerId, claimToken, leaseMs, ...now})`, a copy too.
    let claim = run_claim(call, options)?;
    let now = timestamp(call, copied_if_defined(options, "now")?)?;
    match claim_run(store, &claim, now, ClaimOptions::default())? {
        Some(run) => Ok(Reply::json_text(run).echo_object("claimToken", claim.claim_token)),
        // `Workflow run could not be claimed: ${options.runId}`: read for the message.
        None => Err(not_claimed(&options.get("runId")?.template()?)),
    }
}

/// `options[name]` when it is defined (the test, then the value, each a read), as the
/// reference's `...(options[name] === undefined ? {} : { [name]: options[name] })` copies it.
fn copied_if_defined<'a>(options: Js<'a>, name: &str) -> Result<Js<'a>> {
    if options.get(name)?.is_undefined() {
        return Ok(Js::Undefined);
    }
    options.get(name)
}

/// The reservation `enqueueWorkflowRun` forwards, read from `options` in its literal's order:
/// `executionMode` is not forwarded, `launchOptions ?? {}` (absent here: the reservation's own
/// `?? {}` stores the same `{}`), and the lineage fields and `now` only when defined.
fn forwarded_reservation<'a>(options: Js<'a>) -> Result<Vec<(&'static str, Js<'a>)>> {
    let mut copy = Vec::with_capacity(15);
    for name in [
        "runId",
        "workflowName",
        "workflowSourceRef",
        "workflowSource",
        "definitionDigest",
        "definitionSnapshot",
        "input",
        "launchOptions",
        "runnerId",
        "originSessionId",
    ] {
        let value = options.get(name)?;
        let value = if name == "launchOptions" && value.is_nullish() {
            Js::Undefined
        } else {
            value
        };
        copy.push((name, value));
    }
    for name in [
        "parentRunId",
        "lineageKind",
        "restartNumber",
        "parentTerminalFingerprint",
        "now",
    ] {
        copy.push((name, copied_if_defined(options, name)?));
    }
    Ok(copy)
}

fn run_claim<'a>(call: &'a Call, options: Js<'a>) -> Result<RunClaim<'a>> {
    let _ = call;
    Ok(RunClaim {
        run_id: options.get_or_undefined("runId")?,
        runner_id: options.get_or_undefined("runnerId")?,
        claim_token: options.get_or_undefined("claimToken")?,
        lease_ms: options.get_or_undefined("leaseMs")?,
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
    call: &'a Call,
    options: Js<'a>,
    /// enqueueWorkflowRun's forwarded copy, read from instead of `options` (a field it does
    /// not hold is `undefined`).
    forwarded: Option<Vec<(&'static str, Js<'a>)>>,
    /// `options.runId` as `validateRunId` read it (each later use reads it again).
    run_id: Js<'a>,
    /// `${options.runId}` of that read.
    run_key: String,
    now: i64,
    definition_digest: Vec<u8>,
}

/// What a run's lineage resolves to.
struct Lineage<'a> {
    /// `let rootRunId = options.runId`, read before the parent is looked up.
    own_root: Js<'a>,
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
    fn validate(
        call: &'a Call,
        options: Js<'a>,
        forwarded: Option<Vec<(&'static str, Js<'a>)>>,
    ) -> Result<Reservation<'a>> {
        let mut request = Reservation {
            call,
            options,
            forwarded,
            run_id: Js::Undefined,
            run_key: String::new(),
            now: 0,
            definition_digest: Vec::new(),
        };
        // `validateRunId(options.runId)`: the pattern tests the value's text.
        request.run_id = request.defined("runId")?;
        request.run_key = request.run_id.template()?;
        validate_run_id(request.run_id, &request.run_key)?;
        request.now = timestamp(call, request.defined("now")?)?;
        request.definition_digest = digest_buffer(request.defined("definitionDigest")?)?;
        Ok(request)
    }

    /// `options[name]` (`undefined` when absent), or the forwarded copy's.
    fn defined(&self, name: &str) -> Result<Js<'a>> {
        match &self.forwarded {
            Some(copy) => Ok(copy
                .iter()
                .find(|(field, _)| *field == name)
                .map_or(Js::Undefined, |(_, value)| *value)),
            None => self.options.get(name),
        }
    }

    /// `options[name]`, or `None` when it is `undefined` or `null` (for `??`).
    fn given(&self, name: &str) -> Result<Option<Js<'a>>> {
        Ok(Some(self.defined(name)?).filter(|value| !value.is_nullish()))
    }

    /// A caller JSON document (`options[name]`) as `canonicalJson` reads it.
    fn document(&self, name: &str) -> Result<JsonArg<'a>> {
        JsonArg::read(self.call, self.defined(name)?)
    }

    /// `options.parentRunId !== undefined`, then `requireWorkflowRunRow(options.parentRunId)`
    /// (read again, bound as given).
    fn parent_row(&self, conn: &Db) -> Result<Option<RunRow>> {
        if self.defined("parentRunId")?.is_undefined() {
            return Ok(None);
        }
        let parent_run_id = self.defined("parentRunId")?;
        match run_row_of(conn, parent_run_id)? {
            Some(row) => Ok(Some(row)),
            None => Err(not_found(parent_run_id)?),
        }
    }

    /// `options.parentTerminalFingerprint === undefined ? none :
    /// terminalFingerprintBuffer(options.parentTerminalFingerprint)` (two reads).
    fn terminal_fingerprint(&self) -> Result<Option<Vec<u8>>> {
        if self.defined("parentTerminalFingerprint")?.is_undefined() {
            return Ok(None);
        }
        terminal_fingerprint_buffer(self.defined("parentTerminalFingerprint")?).map(Some)
    }

    /// `lineageKind ?? "continuation"` for a child run (any value the caller gave), `null` for
    /// a root run.
    fn expected_lineage_kind(&self) -> Result<Js<'a>> {
        if self.defined("parentRunId")?.is_undefined() {
            return Ok(Js::Null);
        }
        Ok(self
            .given("lineageKind")?
            .unwrap_or(Js::String("continuation")))
    }

    /// `options.runId` as one statement parameter, read for it.
    fn run_id_param(&self) -> Result<Param<'a>> {
        Ok(Param::Js(self.defined("runId")?))
    }

    /// Each use of `options.runId` reads it again, as the reference's expressions do.
    fn reserve_in_transaction(&self, conn: &Db, project_id: Option<&str>) -> Result<String> {
        // `this.getWorkflowRun(options.runId)`.
        if let Some(existing) = run_row_of(conn, self.defined("runId")?)? {
            // The reference's duplicate check reads the whole record, which can itself fail.
            map_workflow_run(conn, &existing)?;
            return Err(StoreError::plain(format!(
                "Workflow run already reserved: {}",
                self.defined("runId")?.template()?
            )));
        }
        let lineage = self.resolve_lineage(conn)?;
        let documents = self.insert_run(conn, project_id, &lineage)?;
        // The record reads the run back (other rows decide what it shows: an existing
        // definition keeps its name and snapshot), but not the documents just stored.
        // `requireWorkflowRun(options.runId)`: looked up by the value as bound.
        let run_id = self.defined("runId")?;
        let mut json = JsonReads::with_stored(conn, documents.stored());
        match read_back_record(&mut json, run_id)? {
            Some(Some(record)) => return Ok(record),
            Some(None) => return Err(not_found(run_id)?),
            None => {}
        }
        let row = match run_row_of(conn, run_id)? {
            Some(row) => row,
            None => return Err(not_found(run_id)?),
        };
        map_workflow_run_with(&mut json, &row, None)
    }
}

/// The record of the run just reserved, read with its input and root source in one statement
/// (`Some(None)`: no such run); `None` when a text of its row is not UTF-8 (a caller's lone
/// surrogate), which the owned read reads as V8 does.
fn read_back_record(json: &mut JsonReads<'_>, run_id: Js<'_>) -> Result<Option<Option<String>>> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| run_record_select(RUN_SELECT, false, "WHERE r.run_id = ?"));
    let conn = json.conn();
    let mut statement = conn.prepare_cached(sql)?;
    let params = params_for(&statement, &[run_id])?;
    let mut rows = statement.query(params_from_iter(&params))?;
    let Some(ref row) = rows.next()? else {
        return Ok(Some(None));
    };
    match RunRowRef::from_row(row) {
        Err(error) if is_utf8_error(&error) => Ok(None),
        run => {
            let run = run?;
            let reads = RecordReads::from_row(row, false)?;
            Ok(Some(Some(map_listed_run_record(json, &run, &reads)?)))
        }
    }
}
