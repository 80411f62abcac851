//! Controller resources: resources, the work queue and its claims, effects,
//! child workflows and controller events. `rows` holds what they share (the controller row,
//! claim checks, queue and finalizer helpers). Caller values are read through [`crate::js`].

pub mod effects;
pub mod events;
pub mod queue;
pub mod resources;
pub mod rows;
pub mod workflows;

use serde_json::Value;

use crate::error::Result;
use crate::js::{time, Js};
use crate::wire::{Call, JsonArg};

/// A timestamp the JS layer parsed, read from an argument or property: `undefined` (a
/// property of a primitive, which the JS layer leaves alone) is `new Date()`, the call's clock.
fn time_at(value: Option<&Value>, call: &Call) -> Result<i64> {
    time(Js::opt(value), call.clock)
}

/// A caller JSON document the JS layer canonicalised; `undefined` when absent.
fn json_arg(value: Option<&Value>) -> JsonArg<'_> {
    static UNDEFINED: Value = Value::Null;
    JsonArg::of(value.unwrap_or(&UNDEFINED))
}
