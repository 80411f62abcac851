//! Controller resources: resources, the work queue and its claims, effects,
//! child workflows and controller events. `rows` holds what they share (the controller row,
//! claim checks, queue and finalizer helpers). Caller values are read through [`crate::js`].

pub mod effects;
pub mod events;
pub mod queue;
pub mod resource_changes;
pub mod resources;
pub mod rows;
pub mod workflows;

use crate::error::Result;
use crate::js::Js;
use crate::wire::{Call, JsonArg};

/// A caller JSON document as `canonicalJson` reads it where the reference stores it
/// ([`JsonArg::read`]).
fn json_arg<'a>(call: &'a Call, value: Js<'a>) -> Result<JsonArg<'a>> {
    JsonArg::read(call, value)
}
