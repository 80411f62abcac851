//! Controller resources (methods 2–27): resources, the work queue and its claims, effects,
//! child workflows and controller events.

use crate::error::Result;
use crate::store::Store;
use crate::wire::{Call, Reply};

/// The controller-side methods implemented so far.
pub fn methods() -> Vec<&'static str> {
    Vec::new()
}

pub fn dispatch(_store: &Store, method: &str, _call: &Call) -> Option<Result<Reply>> {
    match method {
        _ => None,
    }
}
