//! Prepare-or-adopt's identity check: an existing run is adopted only when it matches the
//! request in every identity field.

use crate::sql::Db;

use super::*;
use crate::error::{Result, StoreError};
use crate::runs::records::read_queued_run_sources;
use crate::runs::row::RunRow;
use crate::state::blobs::read_json;
use crate::state::json::canonical;

impl<'a> Reservation<'a> {
    /// The existing run must match this request in every identity field.
    pub(super) fn assert_compatible(&self, conn: &Db, row: &RunRow) -> Result<()> {
        if !self.is_compatible(conn, row)? {
            return Err(StoreError::plain(format!(
                "Workflow run preparation conflicts: {}",
                self.defined("runId")?.template()?
            )));
        }
        Ok(())
    }

    /// The reference's short-circuit order: later comparisons (and their errors) are reached
    /// only while everything before them matched.
    pub(super) fn is_compatible(&self, conn: &Db, row: &RunRow) -> Result<bool> {
        let lineage_kind = self.expected_lineage_kind()?;
        let parent = self.parent_row(conn)?;
        // `parent?.rootRunId ?? options.runId`, compared with `===`.
        let root_run_id_matches = match &parent {
            Some(parent) => row.root_run_id == parent.root_run_id,
            None => self.defined("runId")?.strict_eq_str(&row.root_run_id),
        };
        let restart_number_matches = if lineage_kind.strict_eq_str("restart") {
            match self.given("restartNumber")? {
                Some(number) => number_equals(number, row.restart_number),
                None => {
                    let parent_number = parent.as_ref().map_or(-1, |parent| parent.restart_number);
                    row.restart_number == parent_number + 1
                }
            }
        } else {
            row.restart_number == parent.as_ref().map_or(0, |parent| parent.restart_number)
        };
        let fingerprint = self.terminal_fingerprint()?;
        let same_identity = self
            .defined("workflowName")?
            .strict_eq_str(&row.workflow_name)
            && self
                .defined("workflowSourceRef")?
                .strict_eq_str(&row.workflow_ref)
            && row.definition_digest == self.definition_digest;
        if !same_identity {
            return Ok(false);
        }
        let stored_sources = canonical(&read_queued_run_sources(conn, row)?);
        let sources = queued_workflow_source(self.defined("workflowSource")?)?;
        if stored_sources != sources.canonical(self.call)? {
            return Ok(false);
        }
        let input = self.document("input")?.text_or("null")?;
        if canonical(&read_json(conn, &row.input_hash)?) != input {
            return Ok(false);
        }
        let launch_options = self.document("launchOptions")?.text_or("{}")?;
        if canonical(&read_json(conn, &row.launch_options_hash)?) != launch_options {
            return Ok(false);
        }
        let execution_mode_matches = match self.given("executionMode")? {
            Some(mode) => row
                .execution_mode
                .as_deref()
                .is_some_and(|stored| mode.strict_eq_str(stored)),
            None => row.execution_mode.as_deref() == Some("interactive"),
        };
        Ok(js_equals_text(
            row.origin_session_id.as_deref(),
            self.defined("originSessionId")?,
        ) && execution_mode_matches
            && parent_run_id_matches(row, self.given("parentRunId")?)
            && root_run_id_matches
            && same_nullable_text(row.lineage_kind.as_deref(), lineage_kind)
            && restart_number_matches
            && row.parent_terminal_fingerprint == fingerprint)
    }
}
