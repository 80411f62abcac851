//! JavaScript semantics of argument values: what the reference's own JavaScript does with each
//! value a caller passes, in one place for all 64 methods.
//!
//! The JS layer (`lib/wire.js`) sends every argument so that nothing JavaScript could tell apart
//! is lost: `undefined` (argument, property or item), NaN/±Infinity/-0, bigints, strings with
//! lone surrogates, Buffers and typed arrays, symbols, functions and non-plain objects arrive as
//! tagged objects whose first key is `"\0"`. [`Js`] is a borrowed view of one such value, as
//! JavaScript sees it.
//!
//! Contract (stable: other modules build on these names):
//! - [`Js::arg`] / [`Js::of`]: the view of a positional argument / of any wire value.
//! - [`Js::get`]: `value.name` — `TypeError: Cannot read properties of null (reading 'name')`
//!   for `null`/`undefined`, `undefined` for a missing property or a primitive's property.
//! - [`Js::or`] (`??`), [`Js::is_nullish`], [`Js::type_of`], [`Js::is_array`],
//!   [`Js::strict_eq_str`] / [`Js::strict_eq_number`] / [`Js::strict_eq`] (`===`),
//!   [`Js::template`] (`${value}`), [`Js::as_str`] (a well-formed string, else `None`).
//! - [`Js::method`]: `expr.name(…)` on a value — `TypeError: <expr>.<name> is not a function`
//!   when the value's type has no such method (V8 names the source expression: pass the
//!   reference's expression text), the property-read TypeError for `null`/`undefined`.
//! - [`bind_all`]: the parameter list of a better-sqlite3 `stmt.run/get/all(…)`, with its rules
//!   and messages (arrays spread, one plain object of named parameters, numbers as REAL, bigints
//!   as INTEGER, strings as TEXT (lone surrogates as V8 writes them), byte views as BLOB,
//!   `null`/`undefined` as NULL, anything else a TypeError; `Too few`/`Too many` RangeErrors).
//!   [`Js::bind`] is one value of it. SQLite's own errors (`datatype mismatch`, STRICT columns)
//!   then follow from SQLite itself.
//! - [`hash_data`]: `createHash(…).update(value)` — the bytes Node hashes, or Node's
//!   `ERR_INVALID_ARG_TYPE`; [`node_arg_type_error`] builds Node's message for any argument.
//! - [`time`]: a timestamp the JS layer computed with `new Date` (epoch ms, `null` when invalid,
//!   or the error `new Date` threw, thrown here where the reference would throw it).
//! - The `Option<&Value>` helpers ([`prop`], [`bind`], [`template`], [`same_text`], …) are the
//!   same semantics for code that still holds raw wire values.

use std::borrow::Cow;

use rusqlite::types::{ToSql, ToSqlOutput, Value as SqlValue, ValueRef};
use serde_json::{Map, Value};

use crate::error::{Result, StoreError};
use crate::state::ids::token_hash;

/// The first key of a tagged wire value.
pub const TAG: &str = "\u{0}";

/// One method call: its arguments and `Date.now()` at the call.
pub struct Call {
    /// The positional arguments, as the JS layer encoded them.
    pub args: Vec<Value>,
    /// `Date.now()` when the call was made (for paths where the reference reads the clock).
    pub clock: i64,
}

impl Call {
    /// A call with these arguments at `clock`.
    pub fn new(args: Vec<Value>, clock: i64) -> Call {
        Call { args, clock }
    }

    /// Positional argument `index`; `null` when absent or `undefined`.
    pub fn arg(&self, index: usize) -> &Value {
        match self.args.get(index) {
            Some(value) if Js::of(value) != Js::Undefined => value,
            _ => &Value::Null,
        }
    }
}

/// One JavaScript value as the reference's code sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Js<'a> {
    /// `undefined` (also a missing argument or property).
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number (NaN, ±Infinity and -0 included).
    Number(f64),
    /// A well-formed string.
    String(&'a str),
    /// A string with lone surrogates: `text` has U+FFFD for each, `wtf8` is the hex of the
    /// bytes V8 hands to SQLite (each lone surrogate as a 3-byte sequence).
    IllFormed {
        /// Readable text.
        text: &'a str,
        /// WTF-8 bytes, hex.
        wtf8: &'a str,
    },
    /// A bigint (decimal digits).
    BigInt(&'a str),
    /// A Buffer, typed array or DataView: its constructor, viewed bytes (hex) and `String(v)`.
    Bytes {
        /// Constructor name.
        kind: Option<&'a str>,
        /// The viewed bytes, hex.
        hex: &'a str,
        /// `String(value)`.
        text: Option<&'a str>,
    },
    /// A symbol (its description).
    Symbol(&'a str),
    /// A function (its name).
    Function(&'a str),
    /// An array.
    Array(&'a [Value]),
    /// A plain object (prototype `Object.prototype` or `null`).
    Object(&'a Map<String, Value>),
    /// Any other object (Date, Map, class instance, boxed primitive…).
    Instance {
        /// Constructor name.
        kind: Option<&'a str>,
        /// `String(value)`, `None` when it threw.
        text: Option<&'a str>,
        /// Own enumerable properties.
        props: Option<&'a Map<String, Value>>,
    },
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

impl<'a> Js<'a> {
    /// The view of one wire value.
    pub fn of(value: &'a Value) -> Js<'a> {
        match value {
            Value::Null => Js::Null,
            Value::Bool(b) => Js::Bool(*b),
            Value::Number(n) => Js::Number(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Js::String(s),
            Value::Array(items) => Js::Array(items),
            Value::Object(map) => match map.get(TAG) {
                Some(Value::String(tag)) if map.keys().next().map(String::as_str) == Some(TAG) => {
                    Js::tagged(tag, map)
                }
                _ => Js::Object(map),
            },
        }
    }

    fn tagged(tag: &str, map: &'a Map<String, Value>) -> Js<'a> {
        let v = str_field(map, "v").unwrap_or("");
        match tag {
            "undefined" => Js::Undefined,
            "number" => Js::Number(match v {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                "-0" => -0.0,
                other => other.parse().unwrap_or(f64::NAN),
            }),
            "bigint" => Js::BigInt(v),
            "string" => Js::IllFormed {
                text: v,
                wtf8: str_field(map, "wtf8").unwrap_or(""),
            },
            "bytes" => Js::Bytes {
                kind: str_field(map, "kind"),
                hex: v,
                text: str_field(map, "text"),
            },
            "symbol" => Js::Symbol(v),
            "function" => Js::Function(v),
            _ => Js::Instance {
                kind: str_field(map, "kind"),
                text: str_field(map, "text"),
                props: map.get("props").and_then(Value::as_object),
            },
        }
    }

    /// Positional argument `index` of a call (`undefined` past the end).
    pub fn arg(call: &'a Call, index: usize) -> Js<'a> {
        call.args.get(index).map_or(Js::Undefined, Js::of)
    }

    /// A wire value that may be absent (`None` is `undefined`).
    pub fn opt(value: Option<&'a Value>) -> Js<'a> {
        value.map_or(Js::Undefined, Js::of)
    }

    /// `value.name`.
    pub fn get(self, name: &str) -> Result<Js<'a>> {
        match self {
            Js::Undefined | Js::Null => Err(read_error(self, name)),
            _ => Ok(self.get_or_undefined(name)),
        }
    }

    /// The raw wire value of property `name` (for envelopes the JS layer put there), `null`
    /// when absent.
    pub fn get_or_undefined_value(self, name: &str) -> &'a Value {
        static NULL: Value = Value::Null;
        match self {
            Js::Object(map) => map.get(name).unwrap_or(&NULL),
            _ => &NULL,
        }
    }

    /// `value?.name` (`undefined` for `null`/`undefined`).
    pub fn get_or_undefined(self, name: &str) -> Js<'a> {
        match self {
            Js::Object(map) => Js::opt(map.get(name)),
            Js::Instance { props, .. } => Js::opt(props.and_then(|props| props.get(name))),
            Js::Array(items) => match name {
                "length" => Js::Number(items.len() as f64),
                _ => index_of(name).map_or(Js::Undefined, |index| Js::opt(items.get(index))),
            },
            Js::String(text) | Js::IllFormed { text, .. } if name == "length" => {
                Js::Number(utf16_length(text) as f64)
            }
            Js::Bytes { hex, .. } if name == "length" => Js::Number((hex.len() / 2) as f64),
            _ => Js::Undefined,
        }
    }

    /// `value === null || value === undefined`.
    pub fn is_nullish(self) -> bool {
        matches!(self, Js::Undefined | Js::Null)
    }

    /// `value === undefined`.
    pub fn is_undefined(self) -> bool {
        self == Js::Undefined
    }

    /// `value ?? fallback`.
    pub fn or(self, fallback: Js<'a>) -> Js<'a> {
        if self.is_nullish() {
            fallback
        } else {
            self
        }
    }

    /// `typeof value`.
    pub fn type_of(self) -> &'static str {
        match self {
            Js::Undefined => "undefined",
            Js::Bool(_) => "boolean",
            Js::Number(_) => "number",
            Js::String(_) | Js::IllFormed { .. } => "string",
            Js::BigInt(_) => "bigint",
            Js::Symbol(_) => "symbol",
            Js::Function(_) => "function",
            Js::Null | Js::Array(_) | Js::Object(_) | Js::Instance { .. } | Js::Bytes { .. } => {
                "object"
            }
        }
    }

    /// `Array.isArray(value)`.
    pub fn is_array(self) -> bool {
        matches!(self, Js::Array(_))
    }

    /// The items of an array (`None` for anything else).
    pub fn items(self) -> Option<impl Iterator<Item = Js<'a>>> {
        match self {
            Js::Array(items) => Some(items.iter().map(Js::of)),
            _ => None,
        }
    }

    /// The string, when the value is a well-formed string.
    pub fn as_str(self) -> Option<&'a str> {
        match self {
            Js::String(text) => Some(text),
            _ => None,
        }
    }

    /// The number, when the value is a number.
    pub fn as_number(self) -> Option<f64> {
        match self {
            Js::Number(n) => Some(n),
            _ => None,
        }
    }

    /// `value === text`.
    pub fn strict_eq_str(self, text: &str) -> bool {
        self.as_str() == Some(text)
    }

    /// `value === number`.
    pub fn strict_eq_number(self, number: f64) -> bool {
        self.as_number() == Some(number)
    }

    /// `a === b` (objects are never identical to one another here: each wire value is a copy).
    pub fn strict_eq(self, other: Js<'_>) -> bool {
        match (self, other) {
            (Js::Undefined, Js::Undefined) | (Js::Null, Js::Null) => true,
            (Js::Bool(a), Js::Bool(b)) => a == b,
            (Js::Number(a), Js::Number(b)) => a == b,
            (Js::String(a), Js::String(b)) => a == b,
            (Js::IllFormed { wtf8: a, .. }, Js::IllFormed { wtf8: b, .. }) => a == b,
            (Js::BigInt(a), Js::BigInt(b)) => a == b,
            _ => false,
        }
    }

    /// `${value}` in a template string (`String(value)`).
    pub fn template(self) -> Result<String> {
        Ok(match self {
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

    /// `expr.name(…)`: Ok when the value has that method, else V8's TypeError naming `expr`.
    pub fn method(self, expr: &str, name: &str) -> Result<Js<'a>> {
        let has = match self {
            Js::Undefined | Js::Null => return Err(read_error(self, name)),
            Js::String(_) | Js::IllFormed { .. } => STRING_METHODS.contains(&name),
            Js::Array(_) => ARRAY_METHODS.contains(&name),
            _ => OBJECT_METHODS.contains(&name),
        };
        if has {
            Ok(self)
        } else {
            Err(StoreError::Type(format!("{expr}.{name} is not a function")))
        }
    }

    /// This value as better-sqlite3 binds one anonymous parameter.
    pub fn bind(self) -> Result<Bound<'a>> {
        Ok(match self {
            Js::Undefined | Js::Null => Bound::Null,
            Js::Number(n) => Bound::Real(n),
            Js::BigInt(digits) => match digits.parse::<i64>() {
                Ok(n) => Bound::Integer(n),
                Err(_) => return Err(StoreError::Range(TOO_BIG.into())),
            },
            Js::String(text) => Bound::Text(Cow::Borrowed(text.as_bytes())),
            Js::IllFormed { wtf8, .. } => {
                Bound::Text(Cow::Owned(hex::decode(wtf8).unwrap_or_default()))
            }
            Js::Bytes { hex, .. } => Bound::Blob(hex::decode(hex).unwrap_or_default()),
            _ => return Err(StoreError::Type(CANNOT_BIND.into())),
        })
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
            Js::Bytes { .. } | Js::Instance { .. } => {
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

    /// The bytes of a byte view.
    pub fn bytes(self) -> Option<Vec<u8>> {
        match self {
            Js::Bytes { hex, .. } => hex::decode(hex).ok(),
            _ => None,
        }
    }
}

const TOO_BIG: &str = "The bound string, buffer, or bigint is too big";
const CANNOT_BIND: &str = "SQLite3 can only bind numbers, strings, bigints, buffers, and null";

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

fn index_of(name: &str) -> Option<usize> {
    if name == "0" || (!name.starts_with('0') && name.bytes().all(|b| b.is_ascii_digit())) {
        name.parse().ok()
    } else {
        None
    }
}

/// V8's TypeError for reading `name` of `null`/`undefined`.
fn read_error(value: Js<'_>, name: &str) -> StoreError {
    let what = if value == Js::Null {
        "null"
    } else {
        "undefined"
    };
    StoreError::Type(format!(
        "Cannot read properties of {what} (reading '{name}')"
    ))
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

/// `value.length` of a string in UTF-16 code units.
pub fn utf16_length(text: &str) -> usize {
    text.encode_utf16().count()
}

/// One SQLite parameter, bound as better-sqlite3 binds the JavaScript value.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound<'a> {
    /// NULL.
    Null,
    /// INTEGER (from a bigint).
    Integer(i64),
    /// REAL (every JavaScript number).
    Real(f64),
    /// TEXT (the bytes V8 writes, possibly not valid UTF-8).
    Text(Cow<'a, [u8]>),
    /// BLOB.
    Blob(Vec<u8>),
}

impl<'a> Bound<'a> {
    /// A value the store itself binds (an id it computed, a time).
    pub fn text(text: &'a str) -> Bound<'a> {
        Bound::Text(Cow::Borrowed(text.as_bytes()))
    }
}

impl ToSql for Bound<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Bound::Null => ToSqlOutput::Owned(SqlValue::Null),
            Bound::Integer(n) => ToSqlOutput::Owned(SqlValue::Integer(*n)),
            Bound::Real(n) => ToSqlOutput::Owned(SqlValue::Real(*n)),
            Bound::Text(bytes) => ToSqlOutput::Borrowed(ValueRef::Text(bytes)),
            Bound::Blob(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
        })
    }
}

/// The parameters of `stmt.run/get/all(...values)` for a statement with `param_count` anonymous
/// parameters, or the error better-sqlite3 throws before running it.
pub fn bind_all<'a>(values: &[Js<'a>], param_count: usize) -> Result<Vec<Bound<'a>>> {
    let mut out = Vec::with_capacity(param_count);
    let mut named = false;
    let push = |value: Js<'a>, out: &mut Vec<Bound<'a>>| -> Result<()> {
        let bound = value.bind()?;
        if out.len() == param_count {
            return Err(StoreError::Range(
                "Too many parameter values were provided".into(),
            ));
        }
        out.push(bound);
        Ok(())
    };
    for value in values {
        match *value {
            Js::Array(items) => {
                for item in items {
                    push(Js::of(item), &mut out)?;
                }
            }
            Js::Object(_) => {
                if named {
                    return Err(StoreError::Type(
                        "You cannot specify named parameters in two different objects".into(),
                    ));
                }
                // Our statements have no named parameters: the object binds nothing.
                named = true;
            }
            other => push(other, &mut out)?,
        }
    }
    if out.len() < param_count {
        return Err(StoreError::Range(
            "Too few parameter values were provided".into(),
        ));
    }
    Ok(out)
}

/// The parameters of `statement.get/all/run(...values)`, bound as better-sqlite3 binds them.
pub fn params_for<'a>(
    statement: &rusqlite::Statement<'_>,
    values: &[Js<'a>],
) -> Result<Vec<Bound<'a>>> {
    bind_all(values, statement.parameter_count())
}

impl Bound<'_> {
    /// The number, when it is one that SQLite reads as a non-negative integer (a LIMIT).
    pub fn as_count(&self) -> Option<u64> {
        match *self {
            Bound::Integer(n) => u64::try_from(n).ok(),
            Bound::Real(n) if n >= 0.0 && n.fract() == 0.0 && n < 9.2e18 => Some(n as u64),
            _ => None,
        }
    }
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

/// How Node's argument errors describe the value they received.
pub fn node_received(value: Js<'_>) -> String {
    let primitive = |kind: &str, inspected: String| {
        let inspected = if inspected.encode_utf16().count() > 28 {
            let head: Vec<u16> = inspected.encode_utf16().take(25).collect();
            format!("{}...", String::from_utf16_lossy(&head))
        } else {
            inspected
        };
        format!("type {kind} ({inspected})")
    };
    match value {
        Js::Undefined => "undefined".into(),
        Js::Null => "null".into(),
        Js::Function(name) => format!("function {name}"),
        Js::Bool(b) => primitive("boolean", b.to_string()),
        Js::Number(n) => primitive(
            "number",
            if n == 0.0 && n.is_sign_negative() {
                "-0".into()
            } else {
                js_number_text(n)
            },
        ),
        Js::BigInt(digits) => primitive("bigint", format!("{digits}n")),
        Js::Symbol(description) => primitive("symbol", format!("Symbol({description})")),
        Js::String(text) | Js::IllFormed { text, .. } => primitive("string", inspect_string(text)),
        Js::Array(_) => "an instance of Array".into(),
        Js::Bytes { kind, .. } | Js::Instance { kind, .. } => match kind {
            Some(kind) if !kind.is_empty() => format!("an instance of {kind}"),
            _ => "[Object: null prototype] {}".into(),
        },
        Js::Object(_) => "an instance of Object".into(),
    }
}

/// `util.inspect` of a string: single quotes unless the text holds one.
fn inspect_string(text: &str) -> String {
    let quote = if !text.contains('\'') {
        '\''
    } else if !text.contains('"') {
        '"'
    } else if !text.contains('`') {
        '`'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Node's `ERR_INVALID_ARG_TYPE` TypeError for argument `name`, which must be `expected`.
pub fn node_arg_type_error(name: &str, expected: &str, value: Js<'_>) -> StoreError {
    StoreError::Js {
        name: "TypeError".into(),
        message: format!(
            "The \"{name}\" argument must be {expected}. Received {}",
            node_received(value)
        ),
        code: Some("ERR_INVALID_ARG_TYPE".into()),
    }
}

/// What `createHash(…).update(value)` hashes: a string's UTF-8 (lone surrogates as U+FFFD),
/// a byte view's bytes; Node refuses anything else.
pub fn hash_data(value: Js<'_>) -> Result<Cow<'_, [u8]>> {
    match value {
        Js::String(text) | Js::IllFormed { text, .. } => Ok(Cow::Borrowed(text.as_bytes())),
        Js::Bytes { hex, .. } => Ok(Cow::Owned(hex::decode(hex).unwrap_or_default())),
        other => Err(node_arg_type_error(
            "data",
            "of type string or an instance of Buffer, TypedArray, or DataView",
            other,
        )),
    }
}

/// `tokenHash(value)`: SHA-256 of the token as `createHash("sha256").update(value)` reads it.
pub fn token_hash_js(value: Js<'_>) -> Result<[u8; 32]> {
    use sha2::{Digest, Sha256};
    match value {
        Js::String(token) => Ok(token_hash(token)),
        other => Ok(Sha256::digest(hash_data(other)?).into()),
    }
}

/// Node's refusal of a non-string first argument to `Buffer.from`.
pub fn buffer_from_error(value: Js<'_>) -> StoreError {
    StoreError::Js {
        name: "TypeError".into(),
        message: format!(
            "The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object. Received {}",
            node_received(value)
        ),
        code: Some("ERR_INVALID_ARG_TYPE".into()),
    }
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

// ---- The same semantics over raw wire values (`None` is `undefined`).

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

/// A caller value bound as better-sqlite3 binds one anonymous parameter, except that a string
/// with lone surrogates is bound as its readable text (one U+FFFD each), as this helper always
/// did; better-sqlite3 itself writes V8's WTF-8 bytes ([`Js::bind`], checked against
/// better-sqlite3 12), which read back as three U+FFFD each. Callers of this helper (the
/// controller side) keep their behaviour until they move to [`Js::bind`].
pub fn bind(value: Option<&Value>) -> Result<SqlValue> {
    if let Js::IllFormed { text, .. } = Js::opt(value) {
        return Ok(SqlValue::Text(text.into()));
    }
    Ok(match Js::opt(value).bind()? {
        Bound::Null => SqlValue::Null,
        Bound::Integer(n) => SqlValue::Integer(n),
        Bound::Real(n) => SqlValue::Real(n),
        Bound::Text(bytes) => SqlValue::Text(String::from_utf8_lossy(&bytes).into_owned()),
        Bound::Blob(bytes) => SqlValue::Blob(bytes),
    })
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

/// Node's refusal of a non-string first argument to `Buffer.from`.
pub fn buffer_argument_error(value: Option<&Value>) -> StoreError {
    buffer_from_error(Js::opt(value))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tag(kind: &str, v: &str) -> Value {
        let mut map = Map::new();
        map.insert(TAG.into(), json!(kind));
        map.insert("v".into(), json!(v));
        Value::Object(map)
    }

    // The JS layer's fast path relies on this: a lone surrogate never parses (lib.rs RETRY).
    #[test]
    fn lone_surrogates_do_not_parse() {
        for text in [r#"["\ud800"]"#, r#"["\udc00x"]"#, r#"[{"\ud83d": 1}]"#] {
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
        }
        assert!(serde_json::from_str::<Value>(r#"["\ud83d\ude00"]"#).is_ok());
    }

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
        assert!(!Js::of(&tag("number", "NaN")).strict_eq(Js::of(&tag("number", "NaN"))));
    }

    #[test]
    fn templates_format_like_javascript() {
        assert_eq!(template(None), "undefined");
        assert_eq!(template(Some(&json!(1.5))), "1.5");
        assert_eq!(template(Some(&json!(["a", null, 1]))), "a,,1");
        assert_eq!(Js::of(&tag("number", "-0")).template().unwrap(), "0");
        assert_eq!(Js::of(&tag("bigint", "12")).template().unwrap(), "12");
        assert_eq!(js_number_text(1e21), "1e+21");
        assert!(Js::of(&tag("symbol", "s")).template().is_err());
    }

    #[test]
    fn tags_decode_and_user_keys_stay_objects() {
        assert_eq!(Js::of(&tag("undefined", "")), Js::Undefined);
        assert!(Js::of(&tag("number", "-Infinity")) == Js::Number(f64::NEG_INFINITY));
        // A user object whose first key is not the tag is a plain object.
        let user = json!({"a": 1, "\u{0}": "undefined"});
        assert!(matches!(Js::of(&user), Js::Object(_)));
        let object = json!({"x": {"\u{0}": "undefined"}});
        assert_eq!(Js::of(&object).get("x").unwrap(), Js::Undefined);
        assert_eq!(prop(&object, "x"), None);
    }

    #[test]
    fn property_reads_throw_like_v8() {
        let error = Js::Null.get("now").unwrap_err();
        assert_eq!(
            error,
            StoreError::Type("Cannot read properties of null (reading 'now')".into())
        );
        assert_eq!(Js::String("abc").get("length").unwrap(), Js::Number(3.0));
        assert_eq!(Js::Number(1.0).get("runId").unwrap(), Js::Undefined);
        let list = json!(["a"]);
        assert_eq!(Js::of(&list).get("0").unwrap(), Js::String("a"));
    }

    #[test]
    fn methods_name_the_source_expression() {
        assert_eq!(
            Js::Number(5.0)
                .method("runnerId", "startsWith")
                .unwrap_err(),
            StoreError::Type("runnerId.startsWith is not a function".into())
        );
        assert!(Js::String("x").method("runnerId", "startsWith").is_ok());
        assert!(Js::of(&json!([]))
            .method("options.controllers", "map")
            .is_ok());
        assert_eq!(
            Js::String("jobs")
                .method("options.controllers", "map")
                .unwrap_err(),
            StoreError::Type("options.controllers.map is not a function".into())
        );
    }

    // Checked against better-sqlite3 12 (`SELECT ? AS a, ? AS b`).
    #[test]
    fn binding_follows_better_sqlite3() {
        let bind2 = |values: &[Js<'_>]| bind_all(values, 2).map(|bound| bound.len());
        let array = json!(["x"]);
        let pair = json!(["x", "y"]);
        let nested = json!([["x"], 1]);
        let object = json!({"x": 1});
        assert_eq!(
            bind2(&[Js::Bool(true), Js::Number(1.0)]),
            Err(StoreError::Type(CANNOT_BIND.into()))
        );
        assert_eq!(bind2(&[Js::of(&array), Js::Number(1.0)]), Ok(2));
        assert_eq!(bind2(&[Js::of(&pair)]), Ok(2));
        assert_eq!(
            bind2(&[Js::of(&nested)]),
            Err(StoreError::Type(CANNOT_BIND.into()))
        );
        assert_eq!(
            bind2(&[Js::of(&object), Js::Number(1.0)]),
            Err(StoreError::Range(
                "Too few parameter values were provided".into()
            ))
        );
        assert_eq!(
            bind2(&[Js::Number(1.0), Js::Number(2.0), Js::of(&object)]),
            Ok(2)
        );
        assert_eq!(
            bind2(&[
                Js::of(&object),
                Js::of(&object),
                Js::Number(1.0),
                Js::Number(2.0)
            ]),
            Err(StoreError::Type(
                "You cannot specify named parameters in two different objects".into()
            ))
        );
        assert_eq!(
            bind2(&[Js::Number(1.0), Js::Number(2.0), Js::Bool(true)]),
            Err(StoreError::Type(CANNOT_BIND.into()))
        );
        assert_eq!(
            bind2(&[Js::Number(1.0), Js::Number(2.0), Js::Number(3.0)]),
            Err(StoreError::Range(
                "Too many parameter values were provided".into()
            ))
        );
        assert_eq!(
            bind2(&[Js::BigInt("9223372036854775808"), Js::Null]),
            Err(StoreError::Range(TOO_BIG.into()))
        );
        assert_eq!(
            Js::BigInt("-9223372036854775808").bind(),
            Ok(Bound::Integer(i64::MIN))
        );
        assert_eq!(Js::Number(1.0).bind(), Ok(Bound::Real(1.0)));
        assert_eq!(Js::Undefined.bind(), Ok(Bound::Null));
    }

    #[test]
    fn node_describes_received_values() {
        let hash = |value: Js<'_>| match hash_data(value) {
            Err(StoreError::Js { message, code, .. }) => (message, code),
            other => panic!("{other:?}"),
        };
        let (message, code) = hash(Js::Number(5.0));
        assert_eq!(message, "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received type number (5)");
        assert_eq!(code.as_deref(), Some("ERR_INVALID_ARG_TYPE"));
        assert!(hash(Js::Null).0.ends_with("Received null"));
        assert!(hash(Js::of(&json!([])))
            .0
            .ends_with("Received an instance of Array"));
        assert_eq!(node_received(Js::String("a'b")), "type string (\"a'b\")");
        assert_eq!(
            node_received(Js::String("abcdefghijklmnopqrstuvwxyz0123")),
            "type string ('abcdefghijklmnopqrstuvwx...)"
        );
    }
}

// ---- Raw wire values read where the reference reads them, and statement parameters that mix
// the store's own values with the caller's.

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

/// One argument of a `stmt.run/get/all(…)` call: a value the store computed (bound as it is)
/// or a caller's value (bound by better-sqlite3's rules, arrays spread, one named-parameter
/// object).
#[derive(Debug, Clone)]
pub enum Param<'a> {
    /// A value of the store's own.
    Own(Bound<'a>),
    /// A caller's value (`None` for `undefined`).
    Caller(Option<&'a Value>),
}

impl<'a> Param<'a> {
    /// The store's own text.
    pub fn text(text: &'a str) -> Param<'a> {
        Param::Own(Bound::text(text))
    }

    /// The store's own integer.
    pub fn int(value: i64) -> Param<'a> {
        Param::Own(Bound::Integer(value))
    }

    /// The store's own bytes.
    pub fn blob(bytes: &[u8]) -> Param<'a> {
        Param::Own(Bound::Blob(bytes.to_vec()))
    }

    /// SQL NULL.
    pub fn null() -> Param<'a> {
        Param::Own(Bound::Null)
    }
}

/// [`bind_all`] for a parameter list mixing the store's values and the caller's, with one
/// argument per `?` as every statement of the store is written: the same rules and errors in
/// the same order (a value it cannot bind first, then "Too many" past the last parameter, then
/// the final count).
pub fn bind_params<'a>(params: &[Param<'a>]) -> Result<Vec<Bound<'a>>> {
    let count = params.len();
    let mut out = Vec::with_capacity(count);
    let mut named = false;
    let push = |bound: Bound<'a>, out: &mut Vec<Bound<'a>>| -> Result<()> {
        if out.len() == count {
            return Err(StoreError::Range(
                "Too many parameter values were provided".into(),
            ));
        }
        out.push(bound);
        Ok(())
    };
    for param in params {
        match param {
            Param::Own(bound) => push(bound.clone(), &mut out)?,
            Param::Caller(value) => match Js::opt(*value) {
                Js::Array(items) => {
                    for item in items {
                        push(Js::of(item).bind()?, &mut out)?;
                    }
                }
                Js::Object(_) => {
                    if named {
                        return Err(StoreError::Type(
                            "You cannot specify named parameters in two different objects".into(),
                        ));
                    }
                    named = true;
                }
                other => push(other.bind()?, &mut out)?,
            },
        }
    }
    if out.len() < count {
        return Err(StoreError::Range(
            "Too few parameter values were provided".into(),
        ));
    }
    Ok(out)
}

/// How `Buffer.from(value, encoding)` decodes a string.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Encoding {
    /// `"utf8"` (lone surrogates as U+FFFD).
    Utf8,
    /// `"hex"`.
    Hex,
}

/// `Buffer.from(value, encoding)`: a string decoded with `encoding`, a byte view copied, an
/// array's items each made a byte (`ToNumber`, then modulo 256; the encoding is ignored);
/// anything else is Node's `ERR_INVALID_ARG_TYPE`.
pub fn buffer_from(value: Option<&Value>, encoding: Encoding) -> Result<Vec<u8>> {
    match Js::opt(value) {
        Js::String(text) | Js::IllFormed { text, .. } => Ok(match encoding {
            Encoding::Utf8 => text.as_bytes().to_vec(),
            Encoding::Hex => buffer_from_hex(text),
        }),
        Js::Bytes { hex, .. } => Ok(hex::decode(hex).unwrap_or_default()),
        Js::Array(items) => items
            .iter()
            .map(|item| to_number(Js::of(item)).map(to_uint8))
            .collect(),
        other => Err(buffer_from_error(other)),
    }
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

/// `ToUint8`: modulo 256 of the truncated number, 0 for NaN and infinities.
fn to_uint8(n: f64) -> u8 {
    if n.is_finite() {
        n.trunc().rem_euclid(256.0) as u8
    } else {
        0
    }
}

#[cfg(test)]
mod raw_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mixed_parameters_bind_as_better_sqlite3_binds_them() {
        let message = |params: &[Param<'_>]| match bind_params(params) {
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
            message(&[Param::Caller(Some(&two)), Param::int(1)]),
            "Too many parameter values were provided"
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
        assert_eq!(message(&[Param::Caller(None)]), "1 bound");
    }

    #[test]
    fn raw_property_reads_throw_on_undefined_and_null() {
        let object = json!({"a": null, "u": {"\u{0}": "undefined"}});
        assert_eq!(read(Some(&object), "a").unwrap(), Some(&Value::Null));
        assert_eq!(read(Some(&object), "u").unwrap(), None);
        assert_eq!(read(Some(&json!("text")), "a").unwrap(), None);
        assert_eq!(
            read(None, "a").unwrap_err(),
            StoreError::Type("Cannot read properties of undefined (reading 'a')".into())
        );
        assert_eq!(length_of(Some(&json!("\u{1f600}"))).unwrap(), Some(2.0));
        assert_eq!(length_of(Some(&json!(5))).unwrap(), None);
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
}
