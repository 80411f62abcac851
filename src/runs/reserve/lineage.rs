//! A reservation's lineage rules: a root run declares none; a continuation's parent must be
//! the same session's and nonterminal (a parked parent's queue is closed); a restart's parent
//! must be terminal, with its terminal fingerprint and the next restart number.

use crate::sql::{params, Db};

use super::*;
use crate::error::{Result, StoreError};
use crate::js::Param;
use crate::js::{canonical_literal, Js};
use crate::runs::machine::moves::{Table, CONTINUED};
use crate::runs::machine::status::{QueueStatus, RunStatus};
use crate::runs::row::RunRow;
use crate::state::leases::{bound_text, insert_attributed_event_of, Actor};
use crate::state::revisions::{bump_resource_revision, Payload};

impl<'a> Reservation<'a> {
    /// Applies the lineage rules; a continuation of a parked parent closes the parent's queue.
    pub(super) fn resolve_lineage(&self, conn: &Db) -> Result<Lineage<'a>> {
        let lineage_kind = self.expected_lineage_kind()?;
        if self.defined("parentRunId")?.is_undefined()
            && !self.defined("lineageKind")?.is_undefined()
        {
            return Err(StoreError::plain(
                "A root workflow run cannot declare lineage",
            ));
        }
        let own_root = self.defined("runId")?;
        let Some(parent) = self.parent_row(conn)? else {
            if !self.defined("restartNumber")?.is_undefined()
                || !self.defined("parentTerminalFingerprint")?.is_undefined()
            {
                return Err(StoreError::plain(
                    "A root workflow run cannot declare restart metadata",
                ));
            }
            return Ok(Lineage {
                own_root,
                root_run_id: None,
                lineage_kind: Js::Null,
                restart_number: 0,
                parent_terminal_fingerprint: None,
            });
        };
        if !js_equals_text(
            parent.origin_session_id.as_deref(),
            self.defined("originSessionId")?,
        ) {
            return Err(StoreError::plain(
                "Workflow parent belongs to another Pi session",
            ));
        }
        let mut lineage = Lineage {
            own_root,
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

    pub(super) fn check_restart(&self, parent: &RunRow, lineage: &mut Lineage<'a>) -> Result<()> {
        let run_terminal = parent.run_status().is_some_and(RunStatus::is_terminal);
        if !run_terminal || !parent.is_queue_terminal() {
            return Err(StoreError::plain("Restart parent is not terminal"));
        }
        let Some(fingerprint) = self.terminal_fingerprint()? else {
            return Err(StoreError::plain(
                "Restart requires the parent terminal fingerprint",
            ));
        };
        lineage.parent_terminal_fingerprint = Some(fingerprint);
        let next = parent.restart_number + 1;
        if let Some(restart_number) = self.given("restartNumber")? {
            if !number_equals(restart_number, next) {
                return Err(StoreError::plain(
                    "Restart number does not follow its parent",
                ));
            }
        }
        lineage.restart_number = next;
        Ok(())
    }

    pub(super) fn check_continuation(&self, conn: &Db, parent: &RunRow) -> Result<()> {
        let fingerprint_given = !self.defined("parentTerminalFingerprint")?.is_undefined();
        let conflicting_number = match self.defined("restartNumber")? {
            Js::Undefined => false,
            number => !number_equals(number, parent.restart_number),
        };
        if fingerprint_given || conflicting_number {
            return Err(StoreError::plain(
                "Continuation lineage conflicts with restart metadata",
            ));
        }
        match parent.queue_status() {
            Some(QueueStatus::Parked) => self.close_parked_parent(conn, parent),
            Some(QueueStatus::Done) => Err(StoreError::plain(
                "Continuation parent already has a reserved continuation",
            )),
            _ => Err(StoreError::plain(format!(
                "Continuation parent queue is {}",
                parent.status
            ))),
        }
    }

    /// The parked parent's queue becomes `done`: its continuation takes over.
    pub(super) fn close_parked_parent(&self, conn: &Db, parent: &RunRow) -> Result<()> {
        if parent.owner_id.is_some() {
            return Err(StoreError::plain(
                "Continuation parent still has an active owner",
            ));
        }
        let now = self.now;
        CONTINUED.apply(conn, Table::Queue, params![now, now, parent.run_id])?;
        let revision = bump_resource_revision(conn, &parent.resource_id, self.now)?;
        let origin = self.defined("originSessionId")?;
        let actor_id = stored_text(conn, origin)?;
        // `{ continuationRunId: options.runId }`: the caller's value, as canonical JSON.
        let run_id = self.defined("runId")?;
        let payload = canonical_literal(self.call, &[("continuationRunId", run_id)])?;
        let actor = match ill_formed_actor(origin)? {
            Some(actor) => Param::Own(actor),
            None => bound_text(actor_id.as_deref()),
        };
        let event = (parent.resource_id.as_str(), revision, CONTINUED.event);
        let actor = Actor::Session(actor);
        insert_attributed_event_of(conn, event, actor, &payload, self.now, Payload::Fresh)?;
        Ok(())
    }
}
