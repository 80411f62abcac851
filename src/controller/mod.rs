//! Controller resources (methods 2–27): resources, the work queue and its claims, effects,
//! child workflows and controller events. `rows` holds what they share (the controller row,
//! claim checks, queue and finalizer helpers). `js` is [`crate::args`], the JavaScript semantics
//! of caller values shared with the run side.

pub mod effects;
pub mod events;
pub use crate::args as js;
pub mod queue;
pub mod resources;
pub mod rows;
pub mod workflows;
