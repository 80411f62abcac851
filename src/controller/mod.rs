//! Controller resources (methods 2–27): resources, the work queue and its claims, effects,
//! child workflows and controller events. `rows` holds what they share (the controller row,
//! claim checks, queue and finalizer helpers); `js` the JavaScript semantics of caller values.

pub mod effects;
pub mod events;
pub mod js;
pub mod queue;
pub mod resources;
pub mod rows;
pub mod workflows;

use crate::error::Result;
use crate::store::Store;
use crate::wire::{Call, Reply};

type Dispatch = fn(&Store, &str, &Call) -> Option<Result<Reply>>;

/// Each submodule's method names and dispatcher.
const MODULES: &[(&[&str], Dispatch)] = &[
    (resources::METHODS, resources::dispatch),
    (queue::METHODS, queue::dispatch),
    (effects::METHODS, effects::dispatch),
    (workflows::METHODS, workflows::dispatch),
    (events::METHODS, events::dispatch),
];

/// The controller-side methods implemented so far.
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
