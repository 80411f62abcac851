//! The legacy workflow-source entry points, kept only to fail: after the SQLite cutover there is
//! no legacy source state to repair or claim.

use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// The legacy stubs implemented here.
pub const METHODS: &[&str] = &[
    "repairCanonicalWorkflowSourceRun",
    "claimLegacyWorkflowSourceRun",
];

/// Runs `method` when this module implements it (see `METHODS`); `None` otherwise.
pub fn dispatch(_store: &Store, method: &str, _call: &Call) -> Option<Result<Reply>> {
    let message = match method {
        "repairCanonicalWorkflowSourceRun" => {
            "Legacy workflow source repair is not available after the SQLite cutover"
        }
        "claimLegacyWorkflowSourceRun" => {
            "Legacy workflow source claims are not available after the SQLite cutover"
        }
        _ => return None,
    };
    Some(Err(StoreError::plain(message)))
}
