//! (to be written)

use crate::error::Result;
use crate::store::Store;
use crate::wire::{Call, Reply};

/// The methods implemented here.
pub const METHODS: &[&str] = &[];

pub fn dispatch(_store: &Store, method: &str, _call: &Call) -> Option<Result<Reply>> {
    match method {
        _ => None,
    }
}
