//! The view's semantics over raw wire values (`Option<&Value>`, `None` is `undefined`), for the
//! domain modules that still hold them: the controller side (`src/controller/`) and parts of
//! `src/runs/reserve/`. Each goes when its last caller reads through [`Js`] instead.

use serde_json::Value;

use super::node::token_hash_js;
use super::value::{read_error, Js};
use crate::error::Result;

/// Property `name` as JavaScript reads it: `None` when `undefined`.
pub fn prop<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object
        .get(name)
        .filter(|value| Js::of(value) != Js::Undefined)
}

/// `value === undefined || value === null` (the `??` test).
pub fn is_nullish(value: Option<&Value>) -> bool {
    Js::opt(value).is_nullish()
}

/// `stored === caller` for a stored string.
pub fn same_text(stored: &str, caller: Option<&Value>) -> bool {
    Js::opt(caller).strict_eq_str(stored)
}

/// `stored === caller` for a stored number.
pub fn same_number(stored: i64, caller: Option<&Value>) -> bool {
    Js::opt(caller).strict_eq_number(stored as f64)
}

/// `stored === caller` for a value read from SQLite (never `undefined`; objects and arrays are
/// never identical to a caller's).
pub fn same_value(stored: &Value, caller: Option<&Value>) -> bool {
    match caller {
        None => false,
        Some(caller) => match stored {
            Value::Array(_) | Value::Object(_) => false,
            stored => Js::of(stored).strict_eq(Js::of(caller)),
        },
    }
}
/// `${value}` in a template string.
pub fn template(value: Option<&Value>) -> String {
    Js::opt(value)
        .template()
        .unwrap_or_else(|_| "[object Object]".into())
}

/// `tokenHash(value)`: SHA-256 of a string token; Node's hash refuses anything else.
pub fn token_hash_of(value: Option<&Value>) -> Result<[u8; 32]> {
    token_hash_js(Js::opt(value))
}
/// `object.name` over raw wire values (`None` is `undefined`), as [`Js::get`] reads it: the
/// property-read TypeError for `null`/`undefined`, `undefined` for a primitive's property; the
/// raw value is kept (a tagged `undefined` reads as `None`).
pub fn read<'a>(object: Option<&'a Value>, name: &str) -> Result<Option<&'a Value>> {
    let raw = match Js::opt(object) {
        nullish @ (Js::Undefined | Js::Null) => return Err(read_error(nullish, name)),
        Js::Object(map) => map.get(name),
        Js::Instance { props, .. } => props.and_then(|props| props.get(name)),
        _ => None,
    };
    Ok(raw.filter(|value| Js::of(value) != Js::Undefined))
}

/// `value.length` as a number, `None` when it is not one (`undefined`, or an object's
/// non-number `length`); reading it from `null`/`undefined` throws.
pub fn length_of(value: Option<&Value>) -> Result<Option<f64>> {
    Ok(Js::opt(value).get("length")?.as_number())
}
