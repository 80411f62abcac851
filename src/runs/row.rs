//! The joined row of one workflow run (run, definition, queue, binding, lease) that every run
//! method reads, and its lookups.

use super::machine::status::{QueueStatus, RunStatus};
use std::sync::OnceLock;

use crate::sql::{params_from_iter, Db, OptionalExtension, Row};

use crate::error::Result;
use crate::js::{params_for, Js};
use crate::state::columns::{
    blob_at, is_utf8_error, lossy_string_at, opt_blob_at, opt_lossy_string_at, opt_str_at, str_at,
};
use crate::state::leases::{Claim, Lease};
use crate::state::revisions::KnownRevisions;

/// The columns of the reference's `workflowRunSelect`, then the rest of the run's lease (so a
/// path that reads the run has its whole lease without reading it again), followed by a
/// clause.
pub const RUN_SELECT: &str = "SELECT r.run_id, r.resource_id,
    d.workflow_name, r.workflow_ref, r.status,
    r.paused, r.definition_digest, d.definition_hash,
    r.input_hash, r.launch_options_hash,
    q.status, q.available_at, q.affinity_runner_id,
    q.consecutive_errors, q.error_code,
    q.error_hash, b.origin_session_id,
    b.execution_mode, r.parent_run_id,
    r.root_run_id, r.lineage_kind,
    r.restart_number, r.parent_terminal_fingerprint,
    q.created_at, q.updated_at,
    q.started_at, q.finished_at,
    l.generation, l.owner_id, l.expires_at,
    l.owner_type, l.token_hash
    FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id
    JOIN leases l ON l.resource_id = r.resource_id";

/// How many columns [`RUN_SELECT`] reads (a statement's own columns follow them).
pub const RUN_COLUMN_COUNT: usize = 32;

/// One workflow run as [`RUN_SELECT`] reads it: run, definition, queue, binding and lease;
/// its texts and blobs owned ([`RunRow`]) or borrowed from SQLite's row ([`RunRowRef`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunColumns<S, B> {
    /// `runs.run_id`.
    pub run_id: S,
    /// The run's `resources` row.
    pub resource_id: S,
    /// `workflow_definitions.workflow_name`.
    pub workflow_name: S,
    /// `runs.workflow_ref` (the `workflowSourceRef`).
    pub workflow_ref: S,
    /// `runs.status` (the durable run state).
    pub run_status: S,
    /// `runs.paused` (0 or 1).
    pub paused: i64,
    /// The 32-byte definition digest.
    pub definition_digest: B,
    /// Blob hash of the definition snapshot.
    pub definition_hash: B,
    /// Blob hash of the input.
    pub input_hash: B,
    /// Blob hash of the launch options.
    pub launch_options_hash: B,
    /// `run_queue.status` (the launch status).
    pub status: S,
    /// `run_queue.available_at` (epoch ms).
    pub available_at: i64,
    /// The runner a queued run waits for.
    pub affinity_runner_id: Option<S>,
    /// `run_queue.consecutive_errors`.
    pub consecutive_errors: i64,
    /// `run_queue.error_code`.
    pub error_code: Option<S>,
    /// Blob hash of the queue's error message.
    pub error_hash: Option<B>,
    /// `NULL` when the run has no binding row (LEFT JOIN).
    pub origin_session_id: Option<S>,
    /// `interactive` or `headless`; `NULL` without a binding row.
    pub execution_mode: Option<S>,
    /// The parent of a continuation or restart.
    pub parent_run_id: Option<S>,
    /// The first run of the lineage (the run itself for a root run).
    pub root_run_id: S,
    /// `continuation`, `restart`, or `NULL` for a root run.
    pub lineage_kind: Option<S>,
    /// 0 for a root run; a restart's is its parent's plus one.
    pub restart_number: i64,
    /// A restart's 32-byte parent terminal fingerprint.
    pub parent_terminal_fingerprint: Option<B>,
    /// `run_queue.created_at` (epoch ms).
    pub created_at: i64,
    /// `run_queue.updated_at` (epoch ms).
    pub updated_at: i64,
    /// `run_queue.started_at` (epoch ms).
    pub started_at: Option<i64>,
    /// `run_queue.finished_at` (epoch ms).
    pub finished_at: Option<i64>,
    /// `leases.generation` (the fencing number).
    pub lease_generation: i64,
    /// The lease owner (`runnerId` in records).
    pub owner_id: Option<S>,
    /// The lease expiry (epoch ms).
    pub claim_expires_at: Option<i64>,
    /// `leases.owner_type`.
    pub owner_type: Option<S>,
    /// `leases.token_hash` (SHA-256 of the owner's token).
    pub token_hash: Option<B>,
}

/// A run row that owns its texts and blobs.
pub type RunRow = RunColumns<String, Vec<u8>>;

/// A run row borrowed from SQLite's row buffers, for a record written straight out.
pub type RunRowRef<'r> = RunColumns<&'r str, &'r [u8]>;

impl RunRow {
    /// Reads a row selected by [`RUN_SELECT`].
    pub fn from_row(row: &Row<'_>) -> rusqlite::Result<RunRow> {
        match RunRowRef::from_row(row) {
            Ok(borrowed) => Ok(borrowed.map(|text| (*text).to_owned(), |bytes| bytes.to_vec())),
            // A caller's text with lone surrogates is stored as WTF-8: read as V8 reads it.
            Err(error) if is_utf8_error(&error) => Ok(read_columns(
                row,
                |index| lossy_string_at(row, index),
                |index| opt_lossy_string_at(row, index),
            )?
            .map(String::clone, |bytes| bytes.to_vec())),
            Err(error) => Err(error),
        }
    }

    /// The row with its texts and blobs borrowed.
    pub fn borrowed(&self) -> RunRowRef<'_> {
        self.map(String::as_str, Vec::as_slice)
    }

    /// The run's `leases` row as read with the run: what `require_lease` returns until the
    /// lease is written (the inner join guarantees the row exists).
    pub fn lease(&self) -> Lease {
        Lease {
            generation: self.lease_generation,
            owner_type: self.owner_type.clone(),
            owner_id: self.owner_id.clone(),
            token_hash: self.token_hash.clone(),
            expires_at: self.claim_expires_at,
        }
    }

    /// The claim columns of the run's lease, borrowed, for a claim check.
    pub fn claim(&self) -> Claim<'_> {
        Claim {
            owner_id: self.owner_id.as_deref(),
            token_hash: self.token_hash.as_deref(),
            expires_at: self.claim_expires_at,
        }
    }

    /// Queue status `done`, `failed` or `cancelled`.
    pub fn is_queue_terminal(&self) -> bool {
        self.queue_status().is_some_and(QueueStatus::is_terminal)
    }

    /// `run_queue.status`.
    pub fn queue_status(&self) -> Option<QueueStatus> {
        QueueStatus::parse(&self.status)
    }

    /// `runs.status`.
    pub fn run_status(&self) -> Option<RunStatus> {
        RunStatus::parse(&self.run_status)
    }
}

impl<'r> RunRowRef<'r> {
    /// Reads a row selected by [`RUN_SELECT`] in place; a column of another type fails as
    /// `row.get` into the owned type does.
    pub fn from_row(row: &'r Row<'_>) -> rusqlite::Result<RunRowRef<'r>> {
        read_columns(
            row,
            |index| str_at(row, index),
            |index| opt_str_at(row, index),
        )
    }
}

/// The columns of a row selected by [`RUN_SELECT`], texts read by `text`/`opt_text`, blobs in
/// place.
fn read_columns<'r, S>(
    row: &'r Row<'_>,
    text: impl Fn(usize) -> rusqlite::Result<S>,
    opt_text: impl Fn(usize) -> rusqlite::Result<Option<S>>,
) -> rusqlite::Result<RunColumns<S, &'r [u8]>> {
    Ok(RunColumns {
        run_id: text(0)?,
        resource_id: text(1)?,
        workflow_name: text(2)?,
        workflow_ref: text(3)?,
        run_status: text(4)?,
        paused: row.get(5)?,
        definition_digest: blob_at(row, 6)?,
        definition_hash: blob_at(row, 7)?,
        input_hash: blob_at(row, 8)?,
        launch_options_hash: blob_at(row, 9)?,
        status: text(10)?,
        available_at: row.get(11)?,
        affinity_runner_id: opt_text(12)?,
        consecutive_errors: row.get(13)?,
        error_code: opt_text(14)?,
        error_hash: opt_blob_at(row, 15)?,
        origin_session_id: opt_text(16)?,
        execution_mode: opt_text(17)?,
        parent_run_id: opt_text(18)?,
        root_run_id: text(19)?,
        lineage_kind: opt_text(20)?,
        restart_number: row.get(21)?,
        parent_terminal_fingerprint: opt_blob_at(row, 22)?,
        created_at: row.get(23)?,
        updated_at: row.get(24)?,
        started_at: row.get(25)?,
        finished_at: row.get(26)?,
        lease_generation: row.get(27)?,
        owner_id: opt_text(28)?,
        claim_expires_at: row.get(29)?,
        owner_type: opt_text(30)?,
        token_hash: opt_blob_at(row, 31)?,
    })
}

impl<S, B> RunColumns<S, B> {
    /// The same row with each text and blob mapped.
    fn map<'a, T, C>(
        &'a self,
        text: impl Fn(&'a S) -> T,
        bytes: impl Fn(&'a B) -> C,
    ) -> RunColumns<T, C> {
        RunColumns {
            run_id: text(&self.run_id),
            resource_id: text(&self.resource_id),
            workflow_name: text(&self.workflow_name),
            workflow_ref: text(&self.workflow_ref),
            run_status: text(&self.run_status),
            paused: self.paused,
            definition_digest: bytes(&self.definition_digest),
            definition_hash: bytes(&self.definition_hash),
            input_hash: bytes(&self.input_hash),
            launch_options_hash: bytes(&self.launch_options_hash),
            status: text(&self.status),
            available_at: self.available_at,
            affinity_runner_id: self.affinity_runner_id.as_ref().map(&text),
            consecutive_errors: self.consecutive_errors,
            error_code: self.error_code.as_ref().map(&text),
            error_hash: self.error_hash.as_ref().map(&bytes),
            origin_session_id: self.origin_session_id.as_ref().map(&text),
            execution_mode: self.execution_mode.as_ref().map(&text),
            parent_run_id: self.parent_run_id.as_ref().map(&text),
            root_run_id: text(&self.root_run_id),
            lineage_kind: self.lineage_kind.as_ref().map(&text),
            restart_number: self.restart_number,
            parent_terminal_fingerprint: self.parent_terminal_fingerprint.as_ref().map(&bytes),
            created_at: self.created_at,
            updated_at: self.updated_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            lease_generation: self.lease_generation,
            owner_id: self.owner_id.as_ref().map(&text),
            claim_expires_at: self.claim_expires_at,
            owner_type: self.owner_type.as_ref().map(&text),
            token_hash: self.token_hash.as_ref().map(&bytes),
        }
    }
}

/// `workflowRunRow(runId)`: the run's row, or `None`, with the caller's value bound as
/// better-sqlite3 binds it. The one lookup of a run by id: every run method reads its row here.
pub fn run_row_of(conn: &Db, run_id: Js<'_>) -> Result<Option<RunRow>> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| format!("{RUN_SELECT} WHERE r.run_id = ?"));
    let mut statement = conn.prepare_cached(sql)?;
    let params = params_for(&statement, &[run_id])?;
    Ok(statement
        .query_row(params_from_iter(&params), RunRow::from_row)
        .optional()?)
}

/// The [`KnownRevisions`] a read built by [`with_known_revisions`] holds at column `at`.
pub fn known_revisions(row: &Row<'_>, at: usize) -> rusqlite::Result<KnownRevisions> {
    Ok(KnownRevisions {
        resource: row.get(at)?,
        presentation: row.get(at + 1)?,
    })
}

/// `select` (a run read: [`RUN_SELECT`]'s columns, maybe more, then its `FROM` and joins) with
/// `columns` (each led by a comma) after its own.
pub fn with_columns(select: &str, columns: &str) -> String {
    let from = select
        .find("\n    FROM runs r")
        .expect("a run read has RUN_SELECT's FROM");
    format!("{}{columns}{}", &select[..from], &select[from..])
}

/// `select` ([`with_columns`]) with the two columns of [`KnownRevisions`] after its own (before
/// those a record read adds at the end).
pub fn with_known_revisions(select: &str) -> String {
    with_columns(
        select,
        ",
    (SELECT revision FROM resources WHERE resource_id = r.resource_id),
    (SELECT presentation_revision FROM viewer_runs WHERE run_id = r.run_id)",
    )
}

/// [`run_row_of`] with, on a cluster, the run's [`KnownRevisions`] read in the same statement (on
/// a file none: a move there reads each revision back as it advances it, in one statement).
pub fn run_row_with_revisions_of(
    conn: &Db,
    run_id: Js<'_>,
) -> Result<Option<(RunRow, KnownRevisions)>> {
    if conn.remote().is_none() {
        return Ok(run_row_of(conn, run_id)?.map(|row| (row, KnownRevisions::default())));
    }
    static SQL: OnceLock<String> = OnceLock::new();
    let sql =
        SQL.get_or_init(|| format!("{} WHERE r.run_id = ?", with_known_revisions(RUN_SELECT)));
    let mut statement = conn.prepare_cached(sql)?;
    let params = params_for(&statement, &[run_id])?;
    Ok(statement
        .query_row(params_from_iter(&params), |row| {
            Ok((
                RunRow::from_row(row)?,
                known_revisions(row, RUN_COLUMN_COUNT)?,
            ))
        })
        .optional()?)
}

/// Row ids as the JSON array a statement reads with `json_each(?)`.
pub fn rowid_list(rowids: &[i64]) -> String {
    let items: Vec<String> = rowids.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}
