//! JavaScript semantics for caller values: strict equality against stored values, binding to
//! SQLite as better-sqlite3 binds, template-string interpolation and `Buffer.from(hex, "hex")`.
//!
//! The reference compares and binds the caller's raw values, so a claim whose `generation` is
//! the string `"1"` is stale for a `!==` check yet matches an SQL `generation = ?`. Keeping the
//! JSON value (not a coerced Rust type) until the point of use preserves both behaviours.

use rusqlite::types::Value as SqlValue;
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::state::ids::token_hash;
use crate::state::json::js_number;

/// Property `name` as JavaScript reads it: `None` when `undefined` (absent on the wire).
pub fn prop<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object.get(name)
}

/// `value === undefined || value === null` (the `??` test).
pub fn is_nullish(value: Option<&Value>) -> bool {
    value.is_none_or(Value::is_null)
}

/// `stored === caller` for a stored string.
pub fn same_text(stored: &str, caller: Option<&Value>) -> bool {
    caller.and_then(Value::as_str) == Some(stored)
}

/// `stored === caller` for a stored number.
pub fn same_number(stored: i64, caller: Option<&Value>) -> bool {
    caller.and_then(Value::as_f64) == Some(stored as f64)
}

/// `stored === caller` for a value read from SQLite (never `undefined`; objects and arrays are
/// never identical to a caller's).
pub fn same_value(stored: &Value, caller: Option<&Value>) -> bool {
    match (stored, caller) {
        (_, None) => false,
        (Value::Null, Some(Value::Null)) => true,
        (Value::Bool(a), Some(Value::Bool(b))) => a == b,
        (Value::Number(a), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
        (Value::String(a), Some(Value::String(b))) => a == b,
        _ => false,
    }
}

/// A caller value bound as better-sqlite3 binds it: every JavaScript number as a double,
/// strings as text, `null`/`undefined` as NULL; anything else is refused as it refuses it.
pub fn bind(value: Option<&Value>) -> Result<SqlValue> {
    match value {
        None | Some(Value::Null) => Ok(SqlValue::Null),
        Some(Value::Number(n)) => Ok(SqlValue::Real(n.as_f64().unwrap_or(f64::NAN))),
        Some(Value::String(s)) => Ok(SqlValue::Text(s.clone())),
        Some(_) => Err(StoreError::Type(
            "SQLite3 can only bind numbers, strings, bigints, buffers, and null".into(),
        )),
    }
}

/// `${value}` in a template string.
pub fn template(value: Option<&Value>) -> String {
    match value {
        None => "undefined".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => js_number(n),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => template(Some(other)),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) => "[object Object]".into(),
    }
}

/// `tokenHash(value)`: SHA-256 of a string token; Node's hash refuses anything else.
pub fn token_hash_of(value: Option<&Value>) -> Result<[u8; 32]> {
    match value {
        Some(Value::String(token)) => Ok(token_hash(token)),
        other => Err(StoreError::Type(format!(
            "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received {}",
            received(other)
        ))),
    }
}

/// Node's refusal of a non-string first argument to `Buffer.from`.
pub fn buffer_argument_error(value: Option<&Value>) -> StoreError {
    StoreError::Type(format!(
        "The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object. Received {}",
        received(value)
    ))
}

/// How Node's argument errors describe a value.
fn received(value: Option<&Value>) -> String {
    match value {
        None => "undefined".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => format!("type boolean ({b})"),
        Some(Value::Number(n)) => format!("type number ({})", js_number(n)),
        Some(Value::String(s)) => format!("type string ('{s}')"),
        Some(Value::Array(_)) => "an instance of Array".into(),
        Some(Value::Object(_)) => "an instance of Object".into(),
    }
}

/// `Buffer.from(text, "hex")`: pairs of hex digits (either case) up to the first invalid pair;
/// a trailing odd digit is dropped.
pub fn buffer_from_hex(text: &str) -> Vec<u8> {
    // Any non-ASCII character ends decoding, so byte offsets equal UTF-16 offsets until then.
    text.as_bytes()
        .chunks_exact(2)
        .map_while(|pair| Some(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?))
        .collect()
}

fn hex_digit(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|digit| digit as u8)
}

/// `value.length` of a string in UTF-16 code units.
pub fn utf16_length(text: &str) -> usize {
    text.encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hex_decoding_stops_at_the_first_invalid_pair() {
        assert_eq!(buffer_from_hex("0fAB"), vec![0x0f, 0xab]);
        assert_eq!(buffer_from_hex("abc"), vec![0xab]);
        assert_eq!(buffer_from_hex("ab zz cd"), vec![0xab]);
        assert_eq!(buffer_from_hex("zz"), Vec::<u8>::new());
        assert_eq!(buffer_from_hex("abé0"), vec![0xab]);
    }

    #[test]
    fn strict_equality_keeps_javascript_types() {
        assert!(same_number(1, Some(&json!(1))));
        assert!(!same_number(1, Some(&json!("1"))));
        assert!(!same_number(1, None));
        assert!(same_text("a", Some(&json!("a"))));
        assert!(!same_value(&json!(null), None));
        assert!(same_value(&json!(2), Some(&json!(2.0))));
    }

    #[test]
    fn templates_format_like_javascript() {
        assert_eq!(template(None), "undefined");
        assert_eq!(template(Some(&json!(1.5))), "1.5");
        assert_eq!(template(Some(&json!(["a", null, 1]))), "a,,1");
    }
}
