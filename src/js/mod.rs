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
//! - [`binder`]: better-sqlite3's binding rules (`stmt.run/get/all(…)`), also used by
//!   `src/connection.rs`. [`node`]: Node API emulation (`createHash(…).update`, `Buffer.from`,
//!   Node's argument errors, the claim token's hash). [`computed`]: what stays computed in
//!   JavaScript (`new Date`, `Date.parse`). [`ops`]: JavaScript's operators and coercions.
//! - [`raw`]: the same semantics over raw `Option<&Value>` wire values, for the modules not
//!   ported to [`Js`] yet; it goes when they have moved.

pub mod binder;
pub mod computed;
pub mod live;
pub mod node;
pub mod ops;
pub mod raw;
mod value;

#[cfg(test)]
mod test_symbols;
#[cfg(test)]
mod tests;

pub use binder::*;
pub use computed::*;
pub use node::*;
pub use ops::*;
pub use raw::*;
pub use value::*;

/// The WTF-8 bytes of UTF-16 `units` (what V8 writes for a string with lone surrogates: each
/// as its own 3-byte sequence).
pub fn wtf8(units: &[u16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(units.len() * 3);
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok(c) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            Err(lone) => {
                let unit = u32::from(lone.unpaired_surrogate());
                out.push(0xe0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3f) as u8);
                out.push(0x80 | (unit & 0x3f) as u8);
            }
        }
    }
    out
}

/// The UTF-16 units of WTF-8 `bytes` (the inverse of [`wtf8`]).
pub fn wtf8_units(bytes: &[u8]) -> Vec<u16> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let lead = bytes[at];
        let (width, initial) = match lead {
            0x00..=0x7f => (1, u32::from(lead)),
            0xc0..=0xdf => (2, u32::from(lead & 0x1f)),
            0xe0..=0xef => (3, u32::from(lead & 0x0f)),
            _ => (4, u32::from(lead & 0x07)),
        };
        let mut code = initial;
        for byte in bytes.iter().skip(at + 1).take(width - 1) {
            code = (code << 6) | u32::from(byte & 0x3f);
        }
        at += width;
        if code >= 0x10000 {
            let code = code - 0x10000;
            out.push(0xd800 | (code >> 10) as u16);
            out.push(0xdc00 | (code & 0x3ff) as u16);
        } else {
            out.push(code as u16);
        }
    }
    out
}
