//! JavaScript's operators and coercions over the view: `${value}`, `Number(value)`, `+`, the
//! methods a value has, `normalizeJson` of the wire backend. A live object is coerced by V8
//! itself (its `toString`/`valueOf` run, and what they throw is thrown).

use serde_json::{Map, Value};

use super::binder::Bound;
use super::value::{read_error, Js};
use crate::error::{Result, StoreError};

impl<'a> Js<'a> {
    /// `${value}` in a template string (`String(value)`).
    pub fn template(self) -> Result<String> {
        Ok(match self {
            Js::Live(object) => return object.to_text()?.template(),
            Js::Undefined => "undefined".into(),
            Js::Null => "null".into(),
            Js::Bool(b) => b.to_string(),
            Js::Number(n) => js_number_text(n),
            Js::String(text) | Js::IllFormed { text, .. } | Js::BigInt(text) => text.into(),
            Js::Symbol(_) => {
                return Err(StoreError::Type(
                    "Cannot convert a Symbol value to a string".into(),
                ))
            }
            Js::Function(_) => "function () { [native code] }".into(),
            Js::Array(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    let item = Js::of(item);
                    parts.push(if item.is_nullish() {
                        String::new()
                    } else {
                        item.template()?
                    });
                }
                parts.join(",")
            }
            Js::Object(_) => "[object Object]".into(),
            Js::Bytes { text, .. } | Js::Instance { text, .. } => match text {
                Some(text) => text.into(),
                None => {
                    return Err(StoreError::Type(
                        "Cannot convert object to primitive value".into(),
                    ))
                }
            },
        })
    }

    /// `${value}` as a JSON string literal, as `JSON.stringify` writes it: a lone surrogate
    /// (kept by a template literal) is written as its `\uXXXX` escape, which `JSON.parse`
    /// reads back as that lone surrogate.
    pub fn template_json(self) -> Result<String> {
        match self {
            Js::IllFormed { wtf8, .. } => Ok(json_string_of_units(&super::live::wtf8_units(
                &hex::decode(wtf8).unwrap_or_default(),
            ))),
            Js::Live(object) => object.to_text()?.template_json(),
            other => {
                Ok(serde_json::to_string(&other.template()?).expect("a string always serializes"))
            }
        }
    }

    /// `expr.name(…)`: Ok when the value has that method, else V8's TypeError naming `expr`.
    pub fn method(self, expr: &str, name: &str) -> Result<Js<'a>> {
        let has = match self {
            Js::Undefined | Js::Null => return Err(read_error(self, name)),
            Js::String(_) | Js::IllFormed { .. } => STRING_METHODS.contains(&name),
            Js::Array(_) => ARRAY_METHODS.contains(&name),
            Js::Live(object) => object.get(name)?.type_of() == "function",
            _ => OBJECT_METHODS.contains(&name),
        };
        if has {
            Ok(self)
        } else {
            Err(StoreError::Type(format!("{expr}.{name} is not a function")))
        }
    }

    /// `normalizeJson(value)` of the reference's canonical JSON: the JSON value, or its error
    /// (`undefined` object properties dropped, `-0` as `0`, keys sorted by the caller of
    /// `canonical`; object keys are checked in sorted order, as the reference walks them).
    pub fn json_value(self) -> Result<Value> {
        Ok(match self {
            Js::Null => Value::Null,
            Js::Bool(b) => Value::Bool(b),
            Js::String(text) | Js::IllFormed { text, .. } => Value::String(text.into()),
            Js::Number(n) if !n.is_finite() => {
                return Err(StoreError::plain("JSON numbers must be finite"))
            }
            Js::Number(0.0) => Value::from(0),
            Js::Number(n) => serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number),
            Js::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| match Js::of(item) {
                        // JSON.stringify writes an undefined item as null.
                        Js::Undefined => Ok(Value::Null),
                        item => item.json_value(),
                    })
                    .collect::<Result<_>>()?,
            ),
            Js::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
                let mut out = Map::new();
                for key in keys {
                    let item = Js::of(&map[key]);
                    if item != Js::Undefined {
                        out.insert(key.clone(), item.json_value()?);
                    }
                }
                Value::Object(out)
            }
            Js::Bytes { .. } | Js::Instance { .. } | Js::Live(_) => {
                return Err(StoreError::plain(
                    "Only plain objects can be stored as canonical JSON",
                ))
            }
            other => {
                return Err(StoreError::plain(format!(
                    "Unsupported JSON value type: {}",
                    other.type_of()
                )))
            }
        })
    }
}

const STRING_METHODS: &[&str] = &[
    "at",
    "charAt",
    "charCodeAt",
    "codePointAt",
    "concat",
    "endsWith",
    "includes",
    "indexOf",
    "lastIndexOf",
    "localeCompare",
    "match",
    "matchAll",
    "normalize",
    "padEnd",
    "padStart",
    "repeat",
    "replace",
    "replaceAll",
    "search",
    "slice",
    "split",
    "startsWith",
    "substring",
    "toLowerCase",
    "toUpperCase",
    "trim",
    "trimEnd",
    "trimStart",
    "toString",
    "valueOf",
    "isWellFormed",
    "toWellFormed",
];
const ARRAY_METHODS: &[&str] = &[
    "at",
    "concat",
    "entries",
    "every",
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "flat",
    "flatMap",
    "forEach",
    "includes",
    "indexOf",
    "join",
    "keys",
    "lastIndexOf",
    "map",
    "pop",
    "push",
    "reduce",
    "reduceRight",
    "reverse",
    "shift",
    "slice",
    "some",
    "sort",
    "splice",
    "toReversed",
    "toSorted",
    "toSpliced",
    "toString",
    "unshift",
    "values",
    "with",
];
const OBJECT_METHODS: &[&str] = &[
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
];

/// `new Error(`${a}${b}…`)`: a plain Error whose message is `pieces` interpolated, each as a
/// template literal converts it (what a conversion throws is returned instead). A caller's
/// string with lone surrogates keeps them in the message, as JavaScript's message does.
pub fn message_error(pieces: &[Js<'_>]) -> StoreError {
    let mut message = String::new();
    let mut wtf8: Option<Vec<u8>> = None;
    for piece in pieces {
        let (text, bytes) = match piece {
            Js::IllFormed { text, wtf8 } => ((*text).to_owned(), hex::decode(wtf8).ok()),
            other => match other.template() {
                Ok(text) => (text, None),
                Err(error) => return error,
            },
        };
        if bytes.is_some() && wtf8.is_none() {
            wtf8 = Some(message.as_bytes().to_vec());
        }
        if let Some(out) = wtf8.as_mut() {
            out.extend_from_slice(bytes.as_deref().unwrap_or(text.as_bytes()));
        }
        message.push_str(&text);
    }
    match wtf8 {
        None => StoreError::Plain(message),
        Some(bytes) => StoreError::PlainWtf8 {
            message,
            wtf8: hex::encode(bytes),
        },
    }
}

/// `JSON.stringify` of a string given as UTF-16 units: lone surrogates as `\uXXXX` escapes.
pub fn json_string_of_units(units: &[u16]) -> String {
    let mut out = String::with_capacity(units.len() + 2);
    out.push('"');
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok(c) => {
                let mut buf = [0u8; 4];
                let text = serde_json::to_string(&*c.encode_utf8(&mut buf))
                    .expect("a string always serializes");
                out.push_str(&text[1..text.len() - 1]);
            }
            Err(lone) => out.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

/// `Number.prototype.toString()` of any number.
pub fn js_number_text(n: f64) -> String {
    if n == 0.0 {
        return "0".into();
    }
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        return format!("{}", n as i64);
    }
    ryu_js::Buffer::new().format_finite(n).to_string()
}

/// A primitive JavaScript computed from caller values (`now + options.leaseMs`).
#[derive(Debug, Clone, PartialEq)]
pub enum Sum {
    /// A number.
    Number(f64),
    /// A string (the `+` concatenated).
    Text(String),
}

impl Sum {
    /// Bound as better-sqlite3 binds it.
    pub fn bind(&self) -> Bound<'_> {
        match self {
            Sum::Number(n) => Bound::Real(*n),
            Sum::Text(text) => Bound::text(text),
        }
    }

    /// The value as JSON (canonical JSON refuses a non-finite number).
    pub fn json_value(&self) -> Result<Value> {
        match self {
            Sum::Number(n) => Js::Number(*n).json_value(),
            Sum::Text(text) => Ok(Value::String(text.clone())),
        }
    }
}

/// `number + value`, as JavaScript's `+` computes it.
pub fn add_to_number(number: f64, value: Js<'_>) -> Result<Sum> {
    let other = match value {
        Js::Number(n) => n,
        Js::Null => 0.0,
        Js::Undefined => f64::NAN,
        Js::Bool(b) => f64::from(u8::from(b)),
        Js::BigInt(_) => {
            return Err(StoreError::Type(
                "Cannot mix BigInt and other types, use explicit conversions".into(),
            ))
        }
        Js::Symbol(_) => {
            return Err(StoreError::Type(
                "Cannot convert a Symbol value to a number".into(),
            ))
        }
        // An object of a live call: JavaScript's own `+` (ToPrimitive runs `valueOf`).
        Js::Live(object) => {
            return Ok(
                match object.cx().helper("add", &[Js::Number(number), value])? {
                    Js::Number(n) => Sum::Number(n),
                    Js::String(text) | Js::IllFormed { text, .. } => Sum::Text(text.into()),
                    _ => Sum::Number(f64::NAN),
                },
            )
        }
        // Strings, and objects through their string form, concatenate.
        other => {
            return Ok(Sum::Text(format!(
                "{}{}",
                js_number_text(number),
                other.template()?
            )))
        }
    };
    Ok(Sum::Number(number + other))
}
/// `value > n` for a number `n`, as JavaScript's relational comparison runs it: a BigInt
/// compares by its value, anything else through ToNumber (`"1" > 0`; an object's
/// `valueOf`/`toString` run; a Symbol throws).
pub fn greater_than(value: Js<'_>, n: f64) -> Result<bool> {
    Ok(match value {
        Js::BigInt(digits) => digits.parse::<f64>().is_ok_and(|value| value > n),
        other => to_number(other)? > n,
    })
}

/// `ToNumber(value)` (`Number(value)`).
pub fn to_number(value: Js<'_>) -> Result<f64> {
    Ok(match value {
        Js::Undefined => f64::NAN,
        Js::Null => 0.0,
        Js::Bool(b) => f64::from(u8::from(b)),
        Js::Number(n) => n,
        Js::String(text) | Js::IllFormed { text, .. } => string_to_number(text),
        Js::BigInt(_) => {
            return Err(StoreError::Type(
                "Cannot convert a BigInt value to a number".into(),
            ))
        }
        Js::Symbol(_) => {
            return Err(StoreError::Type(
                "Cannot convert a Symbol value to a number".into(),
            ))
        }
        Js::Live(object) => object.to_number()?,
        other => string_to_number(&other.template()?),
    })
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
