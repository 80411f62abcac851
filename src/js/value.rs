//! The view: [`Js`], one JavaScript value as the reference's code sees it, over either backend
//! (a wire snapshot, or the caller's live value: `src/js/live/`, which implements the live
//! handles [`Cx`] and [`Obj`] defined here).
//!
//! The wire form (`lib/wire.js`) keeps what JSON would lose: `undefined` (argument, property or
//! item), NaN/±Infinity/-0, bigints, strings with lone surrogates, Buffers and typed arrays,
//! symbols, functions and non-plain objects arrive as tagged objects whose first key is `"\0"`.

use serde_json::{Map, Value};

use std::cell::{Cell, RefCell};

use napi::sys;

use crate::error::{Result, StoreError};

/// Which array method [`Js::walk_as`] walks as: their result arrays differ in the length their
/// species constructor is given.
#[derive(Clone, Copy)]
pub enum Walk {
    Map,
    FlatMap,
}

/// A napi value handle of the call.
pub type Raw = sys::napi_value;

/// The context of one live call: its napi env and the strings read from V8 so far.
pub struct Cx {
    pub(super) env: sys::napi_env,
    /// Every string read from V8 during the call; the view hands out `&'a str` into them.
    pub(super) strings: RefCell<Vec<Box<str>>>,
    /// `Object.prototype`, looked up once per call when first needed.
    pub(super) object_prototype: Cell<Raw>,
    /// The JS layer's `Array` (the caller's realm), looked up once per call when first needed.
    pub(super) array_constructor: Cell<Raw>,
    /// The last well-formed string read from each `(object, property)` of the call: a read
    /// again that gives a strictly equal string (the reference reads some fields five times)
    /// reuses its text instead of converting it once more.
    pub(super) read_strings: RefCell<Vec<ReadString>>,
}

/// One entry of [`Cx::read_strings`].
pub(super) struct ReadString {
    pub(super) object: Raw,
    pub(super) name: Box<str>,
    pub(super) value: Raw,
    /// Text kept in [`Cx::strings`] for the rest of the call.
    pub(super) text: *const str,
}

/// One object of a live call (an array, a function, a byte view, a Proxy, …).
#[derive(Clone, Copy)]
pub struct Obj<'a> {
    pub(super) cx: &'a Cx,
    pub(super) raw: Raw,
}

impl std::fmt::Debug for Obj<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Obj({:p})", self.raw)
    }
}

impl PartialEq for Obj<'_> {
    /// The same handle (not JavaScript's `===`: see [`Obj::strict_eq`]).
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

/// `value.length` of a string in UTF-16 code units.
pub fn utf16_length(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The first key of a tagged wire value.
pub const TAG: &str = "\u{0}";

/// One method call: its arguments and `Date.now()` at the call.
pub struct Call {
    /// The positional arguments, as the JS layer encoded them (empty for a live call).
    pub args: Vec<Value>,
    /// `Date.now()` when the call was made (for paths where the reference reads the clock).
    pub clock: i64,
    /// The caller's own arguments, for a live call.
    live: Option<(Cx, Vec<Raw>)>,
}

impl Call {
    /// A call with these (wire) arguments at `clock`.
    pub fn new(args: Vec<Value>, clock: i64) -> Call {
        Call {
            args,
            clock,
            live: None,
        }
    }

    /// A live call: `args` are the caller's values, read through `cx`.
    pub fn live(cx: Cx, args: Vec<Raw>, clock: i64) -> Call {
        Call {
            args: Vec::new(),
            clock,
            live: Some((cx, args)),
        }
    }

    /// The live call's context (`None` for a wire call).
    pub fn cx(&self) -> Option<&Cx> {
        self.live.as_ref().map(|(cx, _)| cx)
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
    /// An object of a live call (array, function, byte view, Proxy, class instance…), read
    /// through napi.
    Live(Obj<'a>),
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
        match &call.live {
            Some((cx, args)) => args.get(index).map_or(Js::Undefined, |raw| cx.view(*raw)),
            None => call.args.get(index).map_or(Js::Undefined, Js::of),
        }
    }

    /// A wire value that may be absent (`None` is `undefined`).
    pub fn opt(value: Option<&'a Value>) -> Js<'a> {
        value.map_or(Js::Undefined, Js::of)
    }

    /// `value.name`.
    pub fn get(self, name: &str) -> Result<Js<'a>> {
        match self {
            Js::Undefined | Js::Null => Err(read_error(self, name)),
            _ => self.get_or_undefined(name),
        }
    }

    /// The value in the wire form (`lib/wire.js`) again, for the JS layer to rebuild (an error
    /// class's argument): a primitive JSON would change is tagged; `undefined` is `null`, as an
    /// absent argument was; objects of the wire are their own JSON.
    pub fn to_wire(self) -> Value {
        let tagged = |tag: &str, v: &str| {
            let mut map = Map::new();
            map.insert(TAG.into(), tag.into());
            map.insert("v".into(), v.into());
            Value::Object(map)
        };
        match self {
            Js::Undefined | Js::Null | Js::Live(_) => Value::Null,
            Js::Bool(b) => Value::Bool(b),
            Js::Number(n) if n.is_finite() && !(n == 0.0 && n.is_sign_negative()) => {
                serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
            }
            Js::Number(n) => tagged(
                "number",
                if n.is_nan() {
                    "NaN"
                } else if n == 0.0 {
                    "-0"
                } else if n > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                },
            ),
            Js::String(text) => Value::String(text.into()),
            Js::IllFormed { text, wtf8 } => {
                let mut map = Map::new();
                map.insert(TAG.into(), "string".into());
                map.insert("v".into(), text.into());
                map.insert("wtf8".into(), wtf8.into());
                Value::Object(map)
            }
            Js::BigInt(digits) => tagged("bigint", digits),
            Js::Symbol(description) => tagged("symbol", description),
            Js::Function(name) => tagged("function", name),
            Js::Array(items) => Value::Array(items.to_vec()),
            Js::Object(map) => Value::Object(map.clone()),
            Js::Bytes { kind, hex, text } => {
                let mut map = Map::new();
                map.insert(TAG.into(), "bytes".into());
                map.insert("kind".into(), kind.into());
                map.insert("v".into(), hex.into());
                map.insert("text".into(), text.into());
                Value::Object(map)
            }
            Js::Instance { kind, text, props } => {
                let mut map = Map::new();
                map.insert(TAG.into(), "object".into());
                map.insert("kind".into(), kind.into());
                map.insert("text".into(), text.into());
                map.insert(
                    "props".into(),
                    props.map_or(Value::Object(Map::new()), |props| {
                        Value::Object(props.clone())
                    }),
                );
                Value::Object(map)
            }
        }
    }

    /// `value?.name` (`undefined` for `null`/`undefined`).
    pub fn get_or_undefined(self, name: &str) -> Result<Js<'a>> {
        Ok(match self {
            Js::Live(object) => return object.get(name),
            // A primitive's property is its wrapper's: only `length` is read here.
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
        })
    }

    /// `Boolean(value)` of a value JavaScript returned (an object is truthy).
    pub fn truthy(self) -> bool {
        match self {
            Js::Undefined | Js::Null => false,
            Js::Bool(b) => b,
            Js::Number(n) => n != 0.0 && !n.is_nan(),
            Js::String(text) => !text.is_empty(),
            Js::BigInt(digits) => digits != "0",
            _ => true,
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
            Js::Live(object) => object.type_of(),
            Js::Null | Js::Array(_) | Js::Object(_) | Js::Instance { .. } | Js::Bytes { .. } => {
                "object"
            }
        }
    }

    /// `Array.isArray(value)` (a revoked Proxy throws V8's TypeError).
    pub fn is_array(self) -> Result<bool> {
        match self {
            Js::Array(_) => Ok(true),
            Js::Live(object) => object.is_array(),
            _ => Ok(false),
        }
    }

    /// The items of an array, `value[0]` to `value[value.length - 1]`, each read as JavaScript
    /// reads it (`None` when `Array.isArray(value)` is false).
    pub fn items(self) -> Result<Option<Vec<Js<'a>>>> {
        match self {
            Js::Array(items) => Ok(Some(items.iter().map(Js::of).collect())),
            Js::Live(object) if object.is_array()? => {
                let length = object.get("length")?.as_number().unwrap_or(0.0) as u32;
                (0..length)
                    .map(|index| object.get_index(index))
                    .collect::<Result<Vec<_>>>()
                    .map(Some)
            }
            _ => Ok(None),
        }
    }

    /// [`Js::items`] with the holes of a sparse array kept (`None`): what `.map` skips, read as
    /// `.map` reads them ([`Js::walk_as`]). A wire array has none (the snapshot wrote each
    /// hole as `undefined`).
    pub fn items_with_holes(self) -> Result<Option<Vec<Option<Js<'a>>>>> {
        if let Js::Array(items) = self {
            return Ok(Some(items.iter().map(|item| Some(Js::of(item))).collect()));
        }
        let mut out = Vec::new();
        Ok(self
            .walk_as(Walk::Map, |item| {
                out.push(item);
                Ok(())
            })?
            .then_some(out))
    }

    /// `list.map(f)`'s (`Walk::Map`) and `list.flatMap(f)`'s walk over an array, as
    /// JavaScript runs it: `length`, then the result array's species (`constructor`, and what
    /// ArraySpeciesCreate reads and calls after it: [`Obj::species_create`]), then for each
    /// index `index in list` and, when present, `list[index]` and `f` of it at once, so that an
    /// item whose read in `f` throws stops the walk where JavaScript stops. `f` gets `None` for
    /// a hole. `Ok(false)`, nothing read, when `Array.isArray(list)` is false.
    pub fn walk_as(
        self,
        walk: Walk,
        mut f: impl FnMut(Option<Js<'a>>) -> Result<()>,
    ) -> Result<bool> {
        match self {
            Js::Array(items) => {
                for item in items {
                    f(Some(Js::of(item)))?;
                }
                Ok(true)
            }
            Js::Live(object) if object.is_array()? => {
                let length = object.get("length")?.as_number().unwrap_or(0.0) as u32;
                object.species_create(match walk {
                    Walk::Map => length,
                    Walk::FlatMap => 0,
                })?;
                for index in 0..length {
                    f(if object.has_index(index)? {
                        Some(object.get_index(index)?)
                    } else {
                        None
                    })?;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// `list.map(() => "?").join(", ")`, as the reference builds an SQL list (`IN (…)`) from a
    /// caller's list after checking `list.map` is a method: the placeholders, and whether a
    /// hole of a sparse array left an empty one (it joins as ""). An array's items are read
    /// as `map` reads them (`index in list`, then the item); any other receiver (a typed
    /// array, whose `map` turns each "?" into 0) is mapped and joined by JavaScript. `None`
    /// for a wire value that is not an array.
    pub fn sql_marks(self) -> Result<Option<(String, bool)>> {
        if let Some(items) = self.items_with_holes()? {
            let marks: Vec<&str> = items
                .iter()
                .map(|item| if item.is_some() { "?" } else { "" })
                .collect();
            return Ok(Some((marks.join(", "), items.iter().any(Option::is_none))));
        }
        let Js::Live(object) = self else {
            return Ok(None);
        };
        let marks = match object.cx().helper("sqlMarks", &[self])? {
            Js::String(marks) => marks.to_owned(),
            other => other.template()?,
        };
        Ok(Some((marks, false)))
    }

    /// `...list` in an argument list: an array's items read again (a hole as `undefined`);
    /// any other iterable spread by JavaScript.
    pub fn sql_spread(self) -> Result<Vec<Js<'a>>> {
        match self {
            Js::Live(object) if object.is_js_array() => {
                let length = object.get("length")?.as_number().unwrap_or(0.0) as u32;
                (0..length).map(|index| object.get_index(index)).collect()
            }
            Js::Live(object) => Ok(object
                .cx()
                .helper("spread", &[self])?
                .items()?
                .unwrap_or_default()),
            other => Ok(other.items()?.unwrap_or_default()),
        }
    }

    /// The text SQLite hands back for this string once better-sqlite3 bound it, as V8 decodes
    /// it: the string itself, or for one with lone surrogates the UTF-8 decoding of its WTF-8
    /// (each byte of a surrogate's sequence a U+FFFD). `None` for any other value.
    pub fn stored_text(self) -> Option<std::borrow::Cow<'a, str>> {
        match self {
            Js::String(text) => Some(std::borrow::Cow::Borrowed(text)),
            Js::IllFormed { wtf8, .. } => Some(std::borrow::Cow::Owned(
                String::from_utf8_lossy(&hex::decode(wtf8).unwrap_or_default()).into_owned(),
            )),
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

    /// `a === b` (wire objects are never identical to one another: each is a copy).
    pub fn strict_eq(self, other: Js<'_>) -> bool {
        match (self, other) {
            (Js::Undefined, Js::Undefined) | (Js::Null, Js::Null) => true,
            (Js::Bool(a), Js::Bool(b)) => a == b,
            (Js::Number(a), Js::Number(b)) => a == b,
            (Js::String(a), Js::String(b)) => a == b,
            (Js::IllFormed { wtf8: a, .. }, Js::IllFormed { wtf8: b, .. }) => a == b,
            (Js::BigInt(a), Js::BigInt(b)) => a == b,
            (Js::Live(a), Js::Live(b)) => a.strict_eq(b),
            _ => false,
        }
    }
}

fn index_of(name: &str) -> Option<usize> {
    if name == "0" || (!name.starts_with('0') && name.bytes().all(|b| b.is_ascii_digit())) {
        name.parse().ok()
    } else {
        None
    }
}

/// V8's TypeError for reading `name` of `null`/`undefined`.
pub(super) fn read_error(value: Js<'_>, name: &str) -> StoreError {
    let what = if value == Js::Null {
        "null"
    } else {
        "undefined"
    };
    StoreError::Type(format!(
        "Cannot read properties of {what} (reading '{name}')"
    ))
}
