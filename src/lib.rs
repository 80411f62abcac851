//! pi-workflows-native: a Rust implementation of the `SqliteControllerStore` of
//! @osolmaz/pi-workflows 0.16.1, exposed to Node through napi-rs.
//!
//! The napi surface is `addon` (`NativeState`, `NativeStore` and the few free functions the JS
//! layer calls); docs/architecture.md follows one call through the modules below.
#![deny(clippy::all)]
// Errors carry the JSON values the reference interpolates; they are rare, so size is no concern.
#![allow(clippy::result_large_err)]

pub mod addon;
mod connection;
mod controller;
mod error;
mod js;
mod methods;
mod runs;
mod sql;
mod state;
mod store;
mod time;
mod trace;
mod wire;

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
