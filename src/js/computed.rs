//! What must stay computed in JavaScript: `new Date(value ?? now)`, `Date.parse(value)`, the
//! lease sum `now + leaseMs`. For a live call they are computed by V8 at the point the
//! reference's code evaluates them ([`timestamp`]); for the wire backend the JS layer computed
//! them before the call (epoch ms, or what JavaScript threw), and [`time`] reads that.

use serde_json::{Map, Value};

use super::value::{Call, Js};
use crate::error::{Result, StoreError};

/// `epoch(validTimestamp(value))`: `new Date(value ?? now)` in epoch ms, `Invalid timestamp`
/// when it is NaN; for a live call computed by V8 now (a `valueOf` runs, and what it throws is
/// thrown), for a wire call as the JS layer computed it.
pub fn timestamp(call: &Call, value: Js<'_>) -> Result<i64> {
    match call.cx() {
        None => time(value, call.clock),
        Some(_) if value.is_undefined() => Ok(call.clock),
        Some(cx) => match cx.new_date(value)? {
            ms if ms.is_finite() => Ok(ms as i64),
            _ => Err(StoreError::plain("Invalid timestamp")),
        },
    }
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// A timestamp the JS layer computed with `new Date(…)`: epoch ms; `null` (an invalid date) is
/// the store's `Invalid timestamp`; `{"$error": {name, message, code?}}` is what `new Date`
/// threw; `undefined` (the JS layer did not reach it: its object was not an object) is `clock`.
pub fn time(value: Js<'_>, clock: i64) -> Result<i64> {
    match value {
        Js::Number(ms) if ms.is_finite() => Ok(ms as i64),
        Js::Undefined => Ok(clock),
        Js::Object(map) => Err(match map.get("$error").and_then(Value::as_object) {
            Some(error) => thrown_error(error),
            None => StoreError::plain("Invalid timestamp"),
        }),
        _ => Err(StoreError::plain("Invalid timestamp")),
    }
}

/// A date the JS layer read with `Date.parse(…)`: epoch ms, `None` for NaN, or what it threw.
pub fn parsed_date(value: Js<'_>) -> Result<Option<i64>> {
    match value {
        Js::Number(ms) if ms.is_finite() => Ok(Some(ms as i64)),
        Js::Object(map) => match map.get("$error").and_then(Value::as_object) {
            Some(error) => Err(thrown_error(error)),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// An error JavaScript threw in the JS layer (`{name, message, code?}`).
pub fn thrown_error(error: &Map<String, Value>) -> StoreError {
    StoreError::Js {
        name: str_field(error, "name").unwrap_or("Error").into(),
        message: str_field(error, "message").unwrap_or("").into(),
        code: str_field(error, "code").map(Into::into),
    }
}
