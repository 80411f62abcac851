//! pi-workflows-native: a Rust implementation of the `SqliteControllerStore` of
//! @osolmaz/pi-workflows 0.16.1, exposed to Node through napi-rs.
//!
//! The napi surface is `addon` (`NativeState`, `NativeStore` and the few free functions the JS
//! layer calls); docs/architecture.md follows one call through the modules below.
#![deny(clippy::all)]
// Errors carry the JSON values the reference interpolates; they are rare, so size is no concern.
#![allow(clippy::result_large_err)]

pub mod addon;
pub mod connection;
pub mod controller;
pub mod error;
pub mod js;
pub mod methods;
pub mod runs;
pub mod sql;
pub mod state;
pub mod store;
pub mod time;
pub mod trace;
pub mod wire;

#[cfg(test)]
mod cluster_fault_tests;
#[cfg(test)]
mod fault_sweep_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod test_support;

pub use addon::{NativeState, NativeStore, StoreCall};
// The cluster fault tests open a cluster as the JS layer's options do.
#[cfg(test)]
use addon::open::open_cluster;
