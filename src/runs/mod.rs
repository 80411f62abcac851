//! Workflow runs: reservation with lineage, reads and views, claims and fencing, the state
//! machine and the methods that move a run through it, interactions, run events and run effects.

pub mod checks;
pub mod claims;
pub mod interaction;
pub mod legacy;
pub mod machine;
pub mod parking;
pub mod reads;
pub mod records;
pub mod recovery;
pub mod reserve;
pub mod row;
pub mod run_events;
pub mod settle;
pub mod take;
pub mod terminal;
pub mod transitions;
pub mod views;
