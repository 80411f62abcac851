//! Workflow runs (methods 28–64): reservation with lineage, reads and views, claims and
//! fencing, state transitions, interactions, run events and run effects.

pub mod records;
pub mod row;

use crate::error::Result;
use crate::store::Store;
use crate::wire::{Call, Reply};

/// The run-side methods implemented so far.
pub fn methods() -> Vec<&'static str> {
    Vec::new()
}

pub fn dispatch(_store: &Store, method: &str, _call: &Call) -> Option<Result<Reply>> {
    match method {
        _ => None,
    }
}
