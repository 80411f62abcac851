//! The legacy workflow-source entry points, kept only to fail: after the SQLite cutover there is
//! no legacy source state to repair or claim.

use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// `repairCanonicalWorkflowSourceRun()`: always fails.
pub fn repair_canonical_workflow_source_run(_store: &Store, _call: &Call) -> Result<Reply> {
    Err(StoreError::plain(
        "Legacy workflow source repair is not available after the SQLite cutover",
    ))
}

/// `claimLegacyWorkflowSourceRun()`: always fails.
pub fn claim_legacy_workflow_source_run(_store: &Store, _call: &Call) -> Result<Reply> {
    Err(StoreError::plain(
        "Legacy workflow source claims are not available after the SQLite cutover",
    ))
}
