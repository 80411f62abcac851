//! The napi surface: what the JS layer calls. Every method returns one string: a result's JSON,
//! `""` for `undefined`, `~{…}` when a store method changed the caller's claim in place, or
//! `!{…}` for an error that `index.js` rethrows as the reference's error class. Panics are
//! caught and reported as errors; an open transaction is rolled back first, so a panic never
//! leaves the file half-written.
//!
//! `state.rs`: `NativeState`, one state database connection (shared by a JS `StateDatabase`
//! and the stores built on it); `open.rs`: its open options, file or cluster; `store.rs`:
//! `NativeStore`, a store bound to a project, and its synchronous and asynchronous calls;
//! `guard.rs`: one call at a time on a connection (its lock, nested calls run on the outer
//! call's connection, panics); `bench.rs`: the bench's hooks.

mod bench;
mod guard;
pub(crate) mod open;
mod state;
mod store;

use napi::bindgen_prelude::Unknown;
use napi::{Env, JsValue};
use napi_derive::napi;

use crate::js;

pub use bench::{cluster_request_writes, record_mark, record_statements, thread_cpu_time_ns};
pub use state::NativeState;
pub use store::{NativeStore, StoreCall};

/// Registers the JS layer's helpers (`lib/computed.js`) that live calls call where the
/// reference's code computes in JavaScript (src/js/computed.rs).
#[napi]
pub fn set_helpers(env: Env, helpers: Unknown<'_>) {
    // SAFETY: both belong to this callback.
    unsafe { js::live::set_helpers(env.raw(), helpers.raw()) };
}

/// The store's public methods in call-index order, with what the JS layer converts around each
/// (JSON: see [`crate::methods::js_table`]); lib/methods.js compiles it at load.
#[napi]
pub fn method_table() -> String {
    crate::methods::js_table()
}
