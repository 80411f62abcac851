//! JavaScript semantics of the caller's values: what the reference's own JavaScript does with
//! each value a caller passes, in one place for all 64 methods.
//!
//! Contract (stable: the domain modules build on these names):
//! - [`Js`] is one value as the reference's code sees it. [`Js::arg`] is a positional argument
//!   of a [`Call`]; [`Js::get`] is `value.name` (V8's TypeError for `null`/`undefined`);
//!   [`Js::or`] (`??`), [`Js::is_nullish`], [`Js::type_of`], [`Js::is_array`],
//!   [`Js::strict_eq_str`] / [`Js::strict_eq_number`] / [`Js::strict_eq`] (`===`),
//!   [`Js::template`] (`${value}`), [`Js::method`] (`expr.name(…)`), [`Js::as_str`].
//! - Two backends behind the one API, so a domain module never knows which it reads:
//!   - live ([`live`]): a synchronous call's own arguments, read through napi when and as often
//!     as the domain code reads them (getters, prototypes, Proxy traps, V8's coercions and what
//!     they throw behave as in the reference; a thrown value is [`StoreError::Thrown`] and is
//!     rethrown as it is);
//!   - wire: a JSON snapshot `lib/wire.js` made of the arguments (`store.async`, whose reads
//!     happen on the caller's thread before it queues, in the snapshot's order; the Rust tests).
//! - [`binder`]: better-sqlite3's binding rules for the store's statements (`stmt.run/get/all(…)`;
//!   `src/connection.rs` still binds `state.connection`'s parameters with its own wire form).
//!   [`node`]: Node API emulation (`createHash(…).update`, `Buffer.from`, Node's argument
//!   errors, the claim token's hash). [`computed`]: what stays computed in JavaScript
//!   (`new Date`, `Date.parse`, `canonicalJson`, `now + leaseMs`, `toISOString`, the in-place
//!   assignments), called back through `lib/computed.js` at the point the reference computes it.
//!   [`ops`]: JavaScript's operators and coercions. [`live`]: the napi backend. [`lists`]: the
//!   reference's `map`/`join`/`flatMap`/spread over a caller's list, the caller's own methods
//!   called where the reference calls them.

pub mod binder;
pub mod computed;
pub mod lists;
pub mod live;
pub mod node;
pub mod ops;
mod value;

#[cfg(test)]
mod test_symbols;
#[cfg(test)]
mod tests;

pub use binder::*;
pub use computed::*;
pub use lists::{Method, Spread};
pub use node::*;
pub use ops::*;
pub use value::*;
