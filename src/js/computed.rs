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

/// An error JavaScript threw in the JS layer (`{name, message, code?}`).
pub fn thrown_error(error: &Map<String, Value>) -> StoreError {
    StoreError::Js {
        name: str_field(error, "name").unwrap_or("Error").into(),
        message: str_field(error, "message").unwrap_or("").into(),
        code: str_field(error, "code").map(Into::into),
    }
}

/// `now + leaseMs`, the one place the core computes a lease's expiry from a caller's
/// `leaseMs`: JavaScript's `+` ([`super::ops::add_to_number`]; V8's own for an object, through
/// `lib/computed.js`'s `add`, the helper the JS layer's `$lease` conversion calls too).
pub fn lease_sum(now: i64, lease_ms: Js<'_>) -> Result<super::ops::Sum> {
    super::ops::add_to_number(now as f64, lease_ms)
}

/// The lease expiry `now + leaseMs` (JavaScript's `+`) and `new Date(that).toISOString()`.
/// A live call computes the sum where it is built ([`LeaseSum::of`]) and the date where it is
/// asked for; a wire call reads what the JS layer computed and sent in place of `leaseMs`
/// (`{$lease: {sum, iso}}`, or `{$lease: {$error}}` when `+` threw).
pub struct LeaseSum<'a> {
    sum: LeaseValue<'a>,
    /// The JS layer's date (wire calls).
    wire_iso: Option<Result<String>>,
    live: Option<&'a super::value::Cx>,
}

enum LeaseValue<'a> {
    Wire(Js<'a>),
    Live(super::ops::Sum),
}

impl<'a> LeaseSum<'a> {
    /// `now + leaseMs` of `call` (`lease_ms` as read: for a wire call, the JS layer's envelope
    /// when the method's row converts it; otherwise [`lease_sum`] of the value).
    pub fn of(call: &'a Call, now: i64, lease_ms: Js<'a>) -> Result<LeaseSum<'a>> {
        let envelope = match lease_ms {
            Js::Object(map) => map.get("$lease"),
            _ => None,
        };
        let Some(envelope) = envelope else {
            return Ok(LeaseSum {
                sum: LeaseValue::Live(lease_sum(now, lease_ms)?),
                wire_iso: None,
                live: call.cx(),
            });
        };
        if let Some(error) = envelope.get("$error").and_then(Value::as_object) {
            return Err(thrown_error(error));
        }
        let iso = match envelope.get("iso") {
            Some(Value::String(iso)) => Ok(iso.clone()),
            other => Err(other
                .and_then(|thrown| thrown.get("$error"))
                .and_then(Value::as_object)
                .map_or_else(invalid_time_value, thrown_error)),
        };
        Ok(LeaseSum {
            sum: LeaseValue::Wire(Js::opt(envelope.get("sum"))),
            wire_iso: Some(iso),
            live: None,
        })
    }

    /// The sum as better-sqlite3 binds it (a double, NaN becoming NULL, or text).
    pub fn bound(&self) -> Result<super::binder::Bound<'_>> {
        match &self.sum {
            LeaseValue::Wire(sum) => sum.bind(),
            LeaseValue::Live(sum) => Ok(sum.bind()),
        }
    }

    /// The sum as a JSON value (canonical JSON refuses a non-finite number).
    pub fn json_value(&self) -> Result<Value> {
        match &self.sum {
            LeaseValue::Wire(sum) => sum.json_value(),
            LeaseValue::Live(sum) => sum.json_value(),
        }
    }

    /// `new Date(sum).toISOString()` (V8's RangeError for a date out of range).
    pub fn iso(&self) -> Result<String> {
        match (&self.sum, self.live) {
            (LeaseValue::Live(super::ops::Sum::Number(ms)), _) => crate::time::js_iso(*ms),
            (LeaseValue::Live(super::ops::Sum::Text(text)), Some(cx)) => {
                match cx.helper("iso", &[Js::String(text)])? {
                    Js::String(iso) => Ok(iso.to_owned()),
                    _ => Err(invalid_time_value()),
                }
            }
            _ => self
                .wire_iso
                .clone()
                .unwrap_or_else(|| Err(invalid_time_value())),
        }
    }
}

fn invalid_time_value() -> StoreError {
    StoreError::Range("Invalid time value".into())
}

/// `object[key] = value` as the reference's strict-mode code assigns it, for a live call (a
/// frozen object or a getter-only property throws the reference's TypeError, which fails the
/// call and rolls its transaction back); `false` for a wire call, whose JS layer applies the
/// change after the call (`Reply::set_claim`).
pub fn assign(object: Js<'_>, key: &str, value: f64) -> Result<bool> {
    assign_read_from(object, object, key, value)
}

/// `owner.x[key] = value` where `target` is what the call read from its argument `owner` for
/// `owner.x`: in a live call the assignment runs whatever `target` turned out to be (on
/// `undefined`, `null` or a primitive the reference's strict-mode code throws its TypeError,
/// inside the transaction); `false` for a wire call, as [`assign`].
pub fn assign_read_from(owner: Js<'_>, target: Js<'_>, key: &str, value: f64) -> Result<bool> {
    match owner {
        Js::Live(owner) => {
            owner
                .cx()
                .helper("assign", &[target, Js::String(key), Js::Number(value)])?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// [`assign`] of a string value.
pub fn assign_text(object: Js<'_>, key: &str, value: &str) -> Result<bool> {
    match object {
        Js::Live(target) => {
            target
                .cx()
                .helper("assign", &[object, Js::String(key), Js::String(value)])?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// `Date.parse(value)` as a statement parameter (NaN binds as NULL): computed by V8 now for a
/// live call; for a wire call the JS layer sent it (epoch ms, or `null`) in place of `value`.
pub fn date_parse<'a>(call: &Call, value: Js<'a>) -> Result<super::binder::Param<'a>> {
    use super::binder::{Bound, Param};
    match call.cx() {
        None => Ok(Param::Js(value)),
        Some(cx) => Ok(match cx.helper("parse", &[value])? {
            Js::Number(ms) => Param::Own(Bound::Real(ms)),
            _ => Param::null(),
        }),
    }
}

/// `canonicalJson({[name]: value, …})` of an object literal the reference builds from caller
/// values: for a live call by the JS layer's canonicaliser over the literal (what it throws,
/// thrown); for a wire call from the views, `undefined` fields left out, the rest checked in
/// sorted key order as canonical JSON walks them.
pub fn canonical_literal(call: &Call, fields: &[(&str, Js<'_>)]) -> Result<String> {
    if let Some(cx) = call.cx() {
        let pairs: Vec<Js<'_>> = fields
            .iter()
            .flat_map(|(name, value)| [Js::String(name), *value])
            .collect();
        return match cx.helper("canonicalObject", &pairs)? {
            Js::String(text) => Ok(text.to_owned()),
            _ => Err(StoreError::plain("Unsupported JSON value type: undefined")),
        };
    }
    let mut sorted: Vec<&(&str, Js<'_>)> = fields.iter().collect();
    sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut object = Map::new();
    for (name, value) in sorted {
        if !value.is_undefined() {
            object.insert((*name).into(), value.json_value()?);
        }
    }
    Ok(crate::state::json::canonical(&Value::Object(object)))
}
