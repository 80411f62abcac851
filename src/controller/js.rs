//! JavaScript semantics for caller values: property reads (with V8's TypeErrors), strict
//! equality against stored values, binding a statement's arguments as better-sqlite3 binds
//! them, template-string interpolation and `Buffer.from(hex, "hex")`.
//!
//! The reference compares and binds the caller's raw values, so a claim whose `generation` is
//! the string `"1"` is stale for a `!==` check yet matches an SQL `generation = ?`. Keeping the
//! JSON value (not a coerced Rust type) until the point of use preserves both behaviours.

use rusqlite::types::{ToSqlOutput, ValueRef};
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::state::ids::token_hash;
use crate::state::json::js_number;

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

/// V8's TypeError for a property read on `undefined` or `null`.
pub fn cannot_read(receiver: &str, name: &str) -> StoreError {
    StoreError::Type(format!(
        "Cannot read properties of {receiver} (reading '{name}')"
    ))
}

/// `object.name` as JavaScript reads it (`None` is `undefined`): reading from `undefined` or
/// `null` throws V8's TypeError; primitives and arrays have none of the names the store reads.
pub fn read<'a>(object: Option<&'a Value>, name: &str) -> Result<Option<&'a Value>> {
    match object {
        None => Err(cannot_read("undefined", name)),
        Some(Value::Null) => Err(cannot_read("null", name)),
        Some(Value::Object(map)) => Ok(map.get(name)),
        Some(_) => Ok(None),
    }
}

/// `value.length`: UTF-16 code units of a string, items of an array, a number-valued `length`
/// property of an object; `undefined` otherwise (reading it from `undefined`/`null` throws).
pub fn length_of(value: Option<&Value>) -> Result<Option<f64>> {
    Ok(match value {
        None | Some(Value::Null) => read(value, "length").map(|_| None)?,
        Some(Value::String(text)) => Some(utf16_length(text) as f64),
        Some(Value::Array(items)) => Some(items.len() as f64),
        Some(Value::Object(map)) => map.get("length").and_then(Value::as_f64),
        Some(_) => None,
    })
}

/// One argument of a better-sqlite3 statement call: a value of the store's own (bound as it
/// is) or a caller's value (bound by better-sqlite3's rules).
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    /// A value the store computed.
    Own(ValueRef<'a>),
    /// A caller's value (`None` for `undefined`).
    Caller(Option<&'a Value>),
}

impl<'a> Param<'a> {
    /// The store's own text.
    pub fn text(text: &'a str) -> Param<'a> {
        Param::Own(ValueRef::Text(text.as_bytes()))
    }

    /// The store's own integer.
    pub fn int(value: i64) -> Param<'a> {
        Param::Own(ValueRef::Integer(value))
    }

    /// The store's own bytes.
    pub fn blob(bytes: &'a [u8]) -> Param<'a> {
        Param::Own(ValueRef::Blob(bytes))
    }

    /// SQL NULL.
    pub fn null() -> Param<'a> {
        Param::Own(ValueRef::Null)
    }
}

const CANNOT_BIND: &str = "SQLite3 can only bind numbers, strings, bigints, buffers, and null";

/// One value as better-sqlite3's `BindValueFromJS` binds it; `None` for a type it refuses.
fn bind_value(value: Option<&Value>) -> Option<ValueRef<'_>> {
    match value {
        None | Some(Value::Null) => Some(ValueRef::Null),
        Some(Value::Number(n)) => Some(ValueRef::Real(n.as_f64().unwrap_or(f64::NAN))),
        Some(Value::String(s)) => Some(ValueRef::Text(s.as_bytes())),
        Some(_) => None,
    }
}

/// The arguments of `statement.run/get/all(...params)` bound as better-sqlite3's `Binder`
/// binds them to a statement with `params.len()` anonymous parameters (one `?` per argument,
/// as every statement of the store is written): an array argument binds its items in turn, a
/// plain object is the (only) bag of named parameters and binds nothing, and then the count
/// must match. Errors are its errors, in its order: a value it cannot bind first, then "Too
/// many" when a value lands beyond the last parameter, then the final count.
pub fn bind_all<'a>(params: &[Param<'a>]) -> Result<Vec<ToSqlOutput<'a>>> {
    let capacity = params.len();
    let mut bound = Vec::with_capacity(capacity);
    let mut named_bag = false;
    let push = |bound: &mut Vec<ToSqlOutput<'a>>, value: Option<ValueRef<'a>>| {
        let value = value.ok_or_else(|| StoreError::Type(CANNOT_BIND.into()))?;
        if bound.len() == capacity {
            return Err(StoreError::Range(
                "Too many parameter values were provided".into(),
            ));
        }
        bound.push(ToSqlOutput::Borrowed(value));
        Ok(())
    };
    for param in params {
        match *param {
            Param::Own(value) => push(&mut bound, Some(value))?,
            Param::Caller(Some(Value::Array(items))) => {
                for item in items {
                    push(&mut bound, bind_value(Some(item)))?;
                }
            }
            Param::Caller(Some(Value::Object(_))) => {
                if named_bag {
                    return Err(StoreError::Type(
                        "You cannot specify named parameters in two different objects".into(),
                    ));
                }
                named_bag = true;
            }
            Param::Caller(value) => push(&mut bound, bind_value(value))?,
        }
    }
    if bound.len() < capacity {
        return Err(StoreError::Range(
            "Too few parameter values were provided".into(),
        ));
    }
    Ok(bound)
}

/// How `Buffer.from(value, encoding)` reads its first argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Encoding {
    /// `"utf8"`.
    Utf8,
    /// `"hex"`.
    Hex,
}

/// `Buffer.from(value, encoding)`: a string decoded with `encoding`, an array's items each
/// made a byte (`ToNumber`, then modulo 256; the encoding is ignored); anything else is Node's
/// `ERR_INVALID_ARG_TYPE`.
pub fn buffer_from(value: Option<&Value>, encoding: Encoding) -> Result<Vec<u8>> {
    match value {
        Some(Value::String(text)) => Ok(match encoding {
            Encoding::Utf8 => text.as_bytes().to_vec(),
            Encoding::Hex => buffer_from_hex(text),
        }),
        Some(Value::Array(items)) => {
            Ok(items.iter().map(|item| to_uint8(to_number(item))).collect())
        }
        other => Err(buffer_argument_error(other)),
    }
}

/// `ToNumber(value)` of a JSON value.
pub fn to_number(value: &Value) -> f64 {
    match value {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(text) => string_to_number(text),
        Value::Array(_) => string_to_number(&template(Some(value))),
        Value::Object(_) => f64::NAN,
    }
}

/// JavaScript's `StringToNumber`: decimal, `0x`/`0o`/`0b` integers, `Infinity`, surrounding
/// white space ignored, the empty string 0, anything else NaN.
fn string_to_number(text: &str) -> f64 {
    let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if text.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = text.strip_prefix(prefix) {
            return u128::from_str_radix(digits, radix).map_or(f64::NAN, |n| n as f64);
        }
    }
    let unsigned = text.trim_start_matches(['+', '-']);
    if unsigned == "Infinity" && text.len() - unsigned.len() <= 1 {
        return if text.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    // Rust also reads "inf" and "nan", which JavaScript does not.
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
    {
        return f64::NAN;
    }
    text.parse().unwrap_or(f64::NAN)
}

/// `ToUint8`: modulo 256 of the truncated number, 0 for NaN and infinities.
fn to_uint8(n: f64) -> u8 {
    if n.is_finite() {
        n.trunc().rem_euclid(256.0) as u8
    } else {
        0
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
    fn buffers_from_arrays_take_each_item_modulo_256() {
        let items = json!([
            "0x10",
            "12",
            " 7 ",
            "",
            null,
            true,
            [5],
            {},
            "1e1",
            300,
            -1,
            1.9,
            "inf"
        ]);
        assert_eq!(
            buffer_from(Some(&items), Encoding::Hex).unwrap(),
            vec![0x10, 0x0c, 7, 0, 0, 1, 5, 0, 10, 0x2c, 0xff, 1, 0]
        );
        assert!(buffer_from(Some(&json!(5)), Encoding::Utf8).is_err());
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
    #[test]
    fn statement_arguments_bind_as_better_sqlite3_binds_them() {
        let message = |params: &[Param<'_>]| match bind_all(params) {
            Ok(bound) => format!("{} bound", bound.len()),
            Err(StoreError::Type(m) | StoreError::Range(m)) => m,
            Err(other) => other.to_string(),
        };
        let one = json!(["a"]);
        let two = json!(["a", "b"]);
        let empty = json!([]);
        let object = json!({});
        let flag = json!(true);
        assert_eq!(message(&[Param::Caller(Some(&one))]), "1 bound");
        assert_eq!(
            message(&[Param::Caller(Some(&empty)), Param::int(1)]),
            "Too few parameter values were provided"
        );
        assert_eq!(
            message(&[Param::Caller(Some(&two))]),
            "Too many parameter values were provided"
        );
        assert_eq!(
            message(&[Param::Caller(Some(&object))]),
            "Too few parameter values were provided"
        );
        assert_eq!(
            message(&[Param::Caller(Some(&object)), Param::Caller(Some(&object))]),
            "You cannot specify named parameters in two different objects"
        );
        // A value of a type it refuses fails before the count does, even past the last one.
        assert_eq!(
            message(&[Param::Caller(Some(&two)), Param::Caller(Some(&flag))]),
            CANNOT_BIND
        );
        assert_eq!(
            message(&[Param::Caller(Some(&two)), Param::int(1)]),
            "Too many parameter values were provided"
        );
        assert_eq!(
            message(&[
                Param::int(1),
                Param::Caller(Some(&one)),
                Param::Caller(Some(&flag))
            ]),
            CANNOT_BIND
        );
        assert_eq!(message(&[Param::Caller(None)]), "1 bound");
    }

    #[test]
    fn property_reads_throw_on_undefined_and_null() {
        let object = json!({"a": null});
        assert_eq!(read(Some(&object), "a").unwrap(), Some(&Value::Null));
        assert_eq!(read(Some(&object), "b").unwrap(), None);
        assert_eq!(read(Some(&json!("text")), "a").unwrap(), None);
        assert_eq!(
            read(None, "a").unwrap_err(),
            StoreError::Type("Cannot read properties of undefined (reading 'a')".into())
        );
        assert_eq!(length_of(Some(&json!("\u{1f600}"))).unwrap(), Some(2.0));
        assert_eq!(length_of(Some(&json!(5))).unwrap(), None);
    }
}
