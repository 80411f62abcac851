//! Workflow runs: reservation with lineage, reads and views, claims and
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
