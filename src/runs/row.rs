//! The joined row of one workflow run (run, definition, queue, binding, lease) that every run
//! method reads, and its lookups.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{Result, StoreError};

/// The columns of the reference's `workflowRunSelect`, followed by a clause.
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
    l.generation, l.owner_id, l.expires_at
    FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id
    JOIN leases l ON l.resource_id = r.resource_id";

#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub run_id: String,
    pub resource_id: String,
    pub workflow_name: String,
    pub workflow_ref: String,
    /// `runs.status` (the durable run state).
    pub run_status: String,
    pub paused: i64,
    pub definition_digest: Vec<u8>,
    pub definition_hash: Vec<u8>,
    pub input_hash: Vec<u8>,
    pub launch_options_hash: Vec<u8>,
    /// `run_queue.status` (the launch status).
    pub status: String,
    pub available_at: i64,
    pub affinity_runner_id: Option<String>,
    pub consecutive_errors: i64,
    pub error_code: Option<String>,
    pub error_hash: Option<Vec<u8>>,
    /// `NULL` when the run has no binding row (LEFT JOIN).
    pub origin_session_id: Option<String>,
    pub execution_mode: Option<String>,
    pub parent_run_id: Option<String>,
    pub root_run_id: String,
    pub lineage_kind: Option<String>,
    pub restart_number: i64,
    pub parent_terminal_fingerprint: Option<Vec<u8>>,
    pub created_at: i64,
    pub updated_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub lease_generation: i64,
    pub owner_id: Option<String>,
    pub claim_expires_at: Option<i64>,
}

impl RunRow {
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
        })
    }

    /// Queue status `done`, `failed` or `cancelled`.
    pub fn is_queue_terminal(&self) -> bool {
        matches!(self.status.as_str(), "done" | "failed" | "cancelled")
    }
}

pub fn workflow_run_row(conn: &Connection, run_id: &str) -> Result<Option<RunRow>> {
    Ok(conn
        .prepare_cached(&format!("{RUN_SELECT} WHERE r.run_id = ?"))?
        .query_row([run_id], RunRow::from_row)
        .optional()?)
}

/// The run row, or `Workflow run not found: <id>`.
pub fn require_workflow_run_row(conn: &Connection, run_id: &str) -> Result<RunRow> {
    workflow_run_row(conn, run_id)?
        .ok_or_else(|| StoreError::plain(format!("Workflow run not found: {run_id}")))
}
