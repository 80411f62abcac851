//! Decoding the arguments the JS layer sends, and encoding what goes back.
//!
//! The JS layer sends each call's arguments as one JSON array, after doing what only JavaScript
//! can do exactly: timestamps arrive as epoch milliseconds (`null` when JavaScript's `Date`
//! found them invalid), and every caller-supplied JSON document arrives as an envelope holding
//! its canonical text — or the error canonicalisation raised, which the core throws at the point
//! where the reference stores the document, so error precedence stays the reference's.

use serde_json::{Map, Value};

use crate::error::{Result, StoreError};
use crate::time::push_iso;

/// One method call (defined with the argument views, which read it).
pub use crate::js::Call;

/// A caller-supplied JSON document, canonicalised by the JS layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonArg<'a> {
    /// The canonical JSON text.
    Canonical(&'a str),
    /// The argument was `undefined`.
    Undefined,
    /// Canonicalisation failed with this message (thrown where the reference stores it).
    /// Canonicalisation failed with this message; `range` when it was a `RangeError` (a
    /// document too deep for the JavaScript stack).
    Invalid {
        /// The error's message.
        message: &'a str,
        /// Whether the error was a `RangeError`.
        range: bool,
    },
}

impl<'a> JsonArg<'a> {
    /// A caller JSON document as `canonicalJson` reads it where the reference stores it: for a
    /// live call computed now by the JS layer's canonicaliser (what it throws is thrown as it
    /// is); for a wire call the envelope the JS layer sent in its place. `undefined` stays
    /// `undefined`.
    pub fn read(call: &'a Call, value: crate::js::Js<'a>) -> Result<JsonArg<'a>> {
        use crate::js::Js;
        match call.cx() {
            None => Ok(JsonArg::of_js(value)),
            Some(_) if value.is_undefined() => Ok(JsonArg::Undefined),
            Some(cx) => match cx.helper("canonical", &[value])? {
                Js::String(text) => Ok(JsonArg::Canonical(text)),
                _ => Ok(JsonArg::Undefined),
            },
        }
    }

    /// The JS layer's envelope (`{$c: text}`, `{$e: message}` or `{$u: true}`) of a wire call;
    /// anything but an envelope is `undefined`.
    pub fn of_js(value: crate::js::Js<'a>) -> JsonArg<'a> {
        let crate::js::Js::Object(map) = value else {
            return JsonArg::Undefined;
        };
        if let Some(text) = map.get("$c").and_then(Value::as_str) {
            JsonArg::Canonical(text)
        } else if let Some(message) = map.get("$e").and_then(Value::as_str) {
            JsonArg::Invalid {
                message,
                range: map.get("$r").is_some_and(|r| r == true),
            }
        } else {
            JsonArg::Undefined
        }
    }

    /// The canonical text; `undefined` and invalid values fail as the reference's
    /// `canonicalJson` fails.
    pub fn text(self) -> Result<&'a str> {
        match self {
            JsonArg::Canonical(text) => Ok(text),
            JsonArg::Undefined => Err(StoreError::plain("Unsupported JSON value type: undefined")),
            JsonArg::Invalid {
                message,
                range: false,
            } => Err(StoreError::plain(message)),
            JsonArg::Invalid {
                message,
                range: true,
            } => Err(StoreError::Range(message.into())),
        }
    }

    /// `value ?? fallback`, canonicalised: `undefined` and `null` give `fallback`.
    pub fn text_or(self, fallback: &'a str) -> Result<&'a str> {
        match self {
            JsonArg::Undefined | JsonArg::Canonical("null") => Ok(fallback),
            other => other.text(),
        }
    }
}

/// What a method returns: a value (or `undefined`), and the properties it set on the caller's
/// claim object in place.
#[derive(Debug, Default)]
pub struct Reply {
    /// The return value; `None` for `undefined`.
    pub value: Option<Value>,
    /// The value already written as JSON text (see [`Reply::json_text`]); wins over `value`.
    pub text: Option<String>,
    /// Properties to set on the caller's claim object.
    pub claim_updates: Option<Map<String, Value>>,
    /// Properties of the returned record that are the caller's own objects (a live call's
    /// handles, which JSON cannot carry), by path (`run.claimToken`): the JS layer puts each in
    /// place of what the text holds there.
    pub echo: Vec<(&'static str, crate::js::Raw)>,
}

impl Reply {
    /// Returns `undefined`.
    pub fn undefined() -> Reply {
        Reply::default()
    }

    /// Returns `value`.
    pub fn value(value: impl Into<Value>) -> Reply {
        Reply::maybe(Some(value.into()))
    }

    /// Returns `value`, or `undefined` for `None`.
    pub fn maybe(value: Option<Value>) -> Reply {
        Reply {
            value,
            ..Reply::default()
        }
    }

    /// A value a hot list wrote straight as JSON text (no `Value` built and serialized).
    pub fn json_text(text: String) -> Reply {
        Reply {
            text: Some(text),
            ..Reply::default()
        }
    }

    /// A record written as JSON text, or `undefined` for `None`.
    pub fn maybe_text(text: Option<String>) -> Reply {
        text.map_or_else(Reply::undefined, Reply::json_text)
    }

    /// The record's `key` is `value` itself when it is one of the caller's objects (the
    /// reference returns the object it was given).
    pub fn echo_object(mut self, key: &'static str, value: crate::js::Js<'_>) -> Reply {
        if let crate::js::Js::Live(object) = value {
            self.echo.push((key, object.raw()));
        }
        self
    }

    /// Records `claim[key] = value`, as the reference does on the caller's claim.
    pub fn set_claim(mut self, key: &str, value: impl Into<Value>) -> Reply {
        self.claim_updates
            .get_or_insert_with(Map::new)
            .insert(key.into(), value.into());
        self
    }

    /// The wire text: `""` for `undefined`, `~{value, claim}` when the claim changed, else the
    /// value's JSON.
    pub fn encode(self) -> String {
        if let Some(text) = self.text {
            return match self.claim_updates {
                None => text,
                Some(claim) => format!(
                    "~{{\"value\":{text},\"claim\":{}}}",
                    json_text(&Value::Object(claim))
                ),
            };
        }
        match (self.value, self.claim_updates) {
            (None, None) => String::new(),
            (Some(value), None) => json_text(&value),
            (value, Some(claim)) => {
                let mut envelope = Map::new();
                if let Some(value) = value {
                    envelope.insert("value".into(), value);
                }
                envelope.insert("claim".into(), Value::Object(claim));
                format!("~{}", json_text(&Value::Object(envelope)))
            }
        }
    }
}

/// Writes one JSON object field by field into `out` (for records built straight into text).
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    empty: bool,
}

impl<'a> ObjectWriter<'a> {
    /// Opens the object (`{`) at the end of `out`.
    pub fn new(out: &'a mut String) -> ObjectWriter<'a> {
        out.push('{');
        ObjectWriter { out, empty: true }
    }

    /// Writes the key of a property whose value the caller appends next to the returned text.
    pub fn key(&mut self, key: &str) -> &mut String {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        push_json_string(self.out, key);
        self.out.push(':');
        self.out
    }

    /// An integer property.
    pub fn int(&mut self, key: &str, value: i64) -> &mut Self {
        let out = self.key(key);
        // Written in place: `fmt::Write` on a String cannot fail.
        let _ = std::fmt::Write::write_fmt(out, format_args!("{value}"));
        self
    }

    /// A boolean property.
    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.raw(key, if value { "true" } else { "false" })
    }

    /// A string property.
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        let out = self.key(key);
        push_json_string(out, value);
        self
    }

    /// A string property, `null` for `None`.
    pub fn opt_str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.str(key, value),
            None => self.raw(key, "null"),
        }
    }

    /// A value that is already JSON text.
    pub fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        let out = self.key(key);
        out.push_str(json);
        self
    }

    /// A digest property: `"sha256:<hex>"`.
    pub fn digest(&mut self, key: &str, digest: &[u8]) -> &mut Self {
        let out = self.key(key);
        out.push_str("\"sha256:");
        push_hex(out, digest);
        out.push('"');
        self
    }

    /// Lowercase hex, `null` for `None`.
    pub fn opt_hex(&mut self, key: &str, bytes: Option<&[u8]>) -> &mut Self {
        let out = self.key(key);
        match bytes {
            Some(bytes) => {
                out.push('"');
                push_hex(out, bytes);
                out.push('"');
            }
            None => out.push_str("null"),
        }
        self
    }

    /// `new Date(ms).toISOString()`, `null` for `None`.
    pub fn opt_time(&mut self, key: &str, ms: Option<i64>) -> &mut Self {
        let out = self.key(key);
        match ms {
            Some(ms) => {
                out.push('"');
                push_iso(out, ms);
                out.push('"');
            }
            None => out.push_str("null"),
        }
        self
    }

    /// `new Date(ms).toISOString()`.
    pub fn time(&mut self, key: &str, ms: i64) -> &mut Self {
        self.opt_time(key, Some(ms))
    }

    /// Closes the object (`}`).
    pub fn finish(&mut self) {
        self.out.push('}');
    }
}

fn push_json_string(out: &mut String, text: &str) {
    // Most texts need no escape (no quote, backslash or control character): copied as they
    // are, without the String serde_json would allocate; the others are escaped by serde_json.
    // The check looks at every byte without stopping early, which lets the compiler vectorize it.
    let needs_escape = text.bytes().fold(false, |needs, byte| {
        needs | (byte < 0x20) | (byte == b'"') | (byte == b'\\')
    });
    if needs_escape {
        out.push_str(&serde_json::to_string(text).expect("a string always serializes"));
    } else {
        out.reserve(text.len() + 2);
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

/// `hex::encode(bytes)` appended without a String of its own.
fn push_hex(out: &mut String, bytes: &[u8]) {
    let mut buffer = [0u8; 64];
    for chunk in bytes.chunks(32) {
        let hex = &mut buffer[..chunk.len() * 2];
        hex::encode_to_slice(chunk, hex).expect("twice the chunk's length");
        out.push_str(std::str::from_utf8(hex).expect("hex digits"));
    }
}

/// JSON text of a value. `serde_json::to_string` writes straight into a buffer; `to_string`
/// (Display) goes through `fmt::Write` a fragment at a time, at twice the cost.
pub fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serializes")
}

/// The error wire text: `!` followed by [`StoreError::to_wire`].
pub fn encode_error(error: &StoreError) -> String {
    format!("!{}", error.to_wire())
}

#[cfg(test)]
mod tests {
    use super::push_json_string;

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for text in [
            "",
            "plain",
            "quote \"",
            "back\\slash",
            "tab\t",
            "nul\0",
            "del\u{7f}",
            "line\u{2028}",
            "\u{1f600} é",
            "\u{1f}",
        ] {
            let mut out = String::new();
            push_json_string(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }
}
