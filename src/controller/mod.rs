//! Controller resources: resources, the work queue and its claims, effects,
//! child workflows and controller events. `rows` holds what they share (the controller row,
//! claim checks, queue and finalizer helpers). Caller values are read through [`crate::js`].

pub mod effects;
pub mod events;
pub mod queue;
pub mod resources;
pub mod rows;
pub mod workflows;

use crate::error::Result;
use crate::js::Js;
use crate::wire::{Call, JsonArg};

/// A caller JSON document as `canonicalJson` reads it where the reference stores it: for a
/// live call computed now by the JS layer's canonicaliser (what it throws is thrown as it is);
/// for a wire call the envelope the JS layer sent in its place. `undefined` stays `undefined`.
fn json_arg<'a>(call: &'a Call, value: Js<'a>) -> Result<JsonArg<'a>> {
    match call.cx() {
        None => Ok(JsonArg::of_js(value)),
        Some(_) if value.is_undefined() => Ok(JsonArg::Undefined),
        Some(cx) => match cx.helper("canonical", &[value])? {
            Js::String(text) => Ok(JsonArg::Canonical(text)),
            _ => Ok(JsonArg::Undefined),
        },
    }
}
