//! Workflow runs (methods 28–64): reservation with lineage, reads and views, claims and
//! fencing, state transitions, interactions, run events and run effects.

pub mod claims;
pub mod interaction;
pub mod legacy;
pub mod reads;
pub mod records;
pub mod reserve;
pub mod row;
pub mod run_events;
pub mod settle;
pub mod transitions;

use crate::error::Result;
use crate::store::Store;
use crate::wire::{Call, Reply};

type Dispatch = fn(&Store, &str, &Call) -> Option<Result<Reply>>;

/// Each submodule's method names and dispatcher.
const MODULES: &[(&[&str], Dispatch)] = &[
    (reserve::METHODS, reserve::dispatch),
    (reads::METHODS, reads::dispatch),
    (claims::METHODS, claims::dispatch),
    (transitions::METHODS, transitions::dispatch),
    (interaction::METHODS, interaction::dispatch),
    (run_events::METHODS, run_events::dispatch),
    (settle::METHODS, settle::dispatch),
    (legacy::METHODS, legacy::dispatch),
];

/// The run-side methods implemented so far.
pub fn methods() -> Vec<&'static str> {
    MODULES
        .iter()
        .flat_map(|(methods, _)| methods.iter().copied())
        .collect()
}

/// Routes `method` to the submodule that implements it; `None` when none does.
pub fn dispatch(store: &Store, method: &str, call: &Call) -> Option<Result<Reply>> {
    MODULES
        .iter()
        .find_map(|(_, dispatch)| dispatch(store, method, call))
}
