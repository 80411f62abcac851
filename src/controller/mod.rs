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
