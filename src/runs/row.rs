//! The joined row of one workflow run (run, definition, queue, binding, lease) that every run
//! method reads, and its lookups.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{Result, StoreError};
use crate::state::ids::token_hash;
use crate::state::revisions::Lease;

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

/// One workflow run as [`RUN_SELECT`] reads it: run, definition, queue, binding and lease.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// `runs.run_id`.
    pub run_id: String,
    /// The run's `resources` row.
    pub resource_id: String,
    /// `workflow_definitions.workflow_name`.
    pub workflow_name: String,
    /// `runs.workflow_ref` (the `workflowSourceRef`).
    pub workflow_ref: String,
    /// `runs.status` (the durable run state).
    pub run_status: String,
    /// `runs.paused` (0 or 1).
    pub paused: i64,
    /// The 32-byte definition digest.
    pub definition_digest: Vec<u8>,
    /// Blob hash of the definition snapshot.
    pub definition_hash: Vec<u8>,
    /// Blob hash of the input.
    pub input_hash: Vec<u8>,
    /// Blob hash of the launch options.
    pub launch_options_hash: Vec<u8>,
    /// `run_queue.status` (the launch status).
    pub status: String,
    /// `run_queue.available_at` (epoch ms).
    pub available_at: i64,
    /// The runner a queued run waits for.
    pub affinity_runner_id: Option<String>,
    /// `run_queue.consecutive_errors`.
    pub consecutive_errors: i64,
    /// `run_queue.error_code`.
    pub error_code: Option<String>,
    /// Blob hash of the queue's error message.
    pub error_hash: Option<Vec<u8>>,
    /// `NULL` when the run has no binding row (LEFT JOIN).
    pub origin_session_id: Option<String>,
    /// `interactive` or `headless`; `NULL` without a binding row.
    pub execution_mode: Option<String>,
    /// The parent of a continuation or restart.
    pub parent_run_id: Option<String>,
    /// The first run of the lineage (the run itself for a root run).
    pub root_run_id: String,
    /// `continuation`, `restart`, or `NULL` for a root run.
    pub lineage_kind: Option<String>,
    /// 0 for a root run; a restart's is its parent's plus one.
    pub restart_number: i64,
    /// A restart's 32-byte parent terminal fingerprint.
    pub parent_terminal_fingerprint: Option<Vec<u8>>,
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
    pub owner_id: Option<String>,
    /// The lease expiry (epoch ms).
    pub claim_expires_at: Option<i64>,
    /// `leases.owner_type`.
    pub owner_type: Option<String>,
    /// `leases.token_hash` (SHA-256 of the owner's token).
    pub token_hash: Option<Vec<u8>>,
}

impl RunRow {
    /// Reads a row selected by [`RUN_SELECT`].
    pub fn from_row(row: &Row<'_>) -> rusqlite::Result<RunRow> {
        Ok(RunRow {
            run_id: row.get(0)?,
            resource_id: row.get(1)?,
            workflow_name: row.get(2)?,
            workflow_ref: row.get(3)?,
            run_status: row.get(4)?,
            paused: row.get(5)?,
            definition_digest: row.get(6)?,
            definition_hash: row.get(7)?,
            input_hash: row.get(8)?,
            launch_options_hash: row.get(9)?,
            status: row.get(10)?,
            available_at: row.get(11)?,
            affinity_runner_id: row.get(12)?,
            consecutive_errors: row.get(13)?,
            error_code: row.get(14)?,
            error_hash: row.get(15)?,
            origin_session_id: row.get(16)?,
            execution_mode: row.get(17)?,
            parent_run_id: row.get(18)?,
            root_run_id: row.get(19)?,
            lineage_kind: row.get(20)?,
            restart_number: row.get(21)?,
            parent_terminal_fingerprint: row.get(22)?,
            created_at: row.get(23)?,
            updated_at: row.get(24)?,
            started_at: row.get(25)?,
            finished_at: row.get(26)?,
            lease_generation: row.get(27)?,
            owner_id: row.get(28)?,
            claim_expires_at: row.get(29)?,
            owner_type: row.get(30)?,
            token_hash: row.get(31)?,
        })
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

    /// Whether `claim_token` is the run's current claim, unexpired at `now`
    /// (`verifyWorkflowRunClaim` of this row).
    pub fn holds_live_claim(&self, claim_token: &str, now: i64) -> bool {
        let (Some(_), Some(expires_at)) = (&self.owner_id, self.claim_expires_at) else {
            return false;
        };
        self.token_hash.as_deref() == Some(&token_hash(claim_token)[..]) && expires_at > now
    }

    /// Queue status `done`, `failed` or `cancelled`.
    pub fn is_queue_terminal(&self) -> bool {
        matches!(self.status.as_str(), "done" | "failed" | "cancelled")
    }
}

/// The run's row, or `None`.
pub fn workflow_run_row(conn: &Connection, run_id: &str) -> Result<Option<RunRow>> {
    Ok(conn
        .prepare_cached(&format!("{RUN_SELECT} WHERE r.run_id = ?"))?
        .query_row([run_id], RunRow::from_row)
        .optional()?)
}

/// The run row unless the run is missing or its queue is terminal (`done`, `failed`,
/// `cancelled`): the runs a claim or a terminal transition may still act on.
pub fn nonterminal_run_row(conn: &Connection, run_id: &str) -> Result<Option<RunRow>> {
    Ok(workflow_run_row(conn, run_id)?.filter(|row| !row.is_queue_terminal()))
}

/// The run row, or `Workflow run not found: <id>`.
pub fn require_workflow_run_row(conn: &Connection, run_id: &str) -> Result<RunRow> {
    workflow_run_row(conn, run_id)?
        .ok_or_else(|| StoreError::plain(format!("Workflow run not found: {run_id}")))
}
