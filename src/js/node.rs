//! Node API emulation: what `createHash(…).update(value)` hashes, `Buffer.from(value, …)`, the
//! claim token's hash, and how Node's `ERR_INVALID_ARG_TYPE` describes a value it refuses.

use std::borrow::Cow;

use super::ops::{js_number_text, to_number};
use super::value::Js;
use crate::error::{Result, StoreError};

/// `tokenHash(token)` of a string token: SHA-256 of its UTF-8. Only this hash of a claim token
/// is ever stored.
pub fn token_hash(token: &str) -> [u8; 32] {
    crate::state::ids::sha256(token.as_bytes())
}

/// The reads Node's `determineSpecificType` makes of a live object before it describes it
/// (`value.constructor?.name`, a function's `name`): a getter or a Proxy trap that throws makes
/// Node throw that instead of its own error.
fn read_specific_type(value: Js<'_>) -> Result<()> {
    if let Js::Live(object) = value {
        if object.type_of() == "function" {
            object.get("name")?;
        } else if let Js::Live(constructor) = object.get("constructor")? {
            constructor.get("name")?;
        }
    }
    Ok(())
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
        Js::Live(object) if object.type_of() == "function" => {
            format!(
                "function {}",
                object.get("name").ok().and_then(Js::as_str).unwrap_or("")
            )
        }
        Js::Live(object) => match object.constructor_name() {
            Some(kind) if !kind.is_empty() => format!("an instance of {kind}"),
            _ => "[Object: null prototype] {}".into(),
        },
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
    if let Err(thrown) = read_specific_type(value) {
        return thrown;
    }
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
        Js::Live(object) if object.bytes().is_some() => {
            Ok(Cow::Owned(object.bytes().unwrap_or_default()))
        }
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
        // A caller's object: Node itself reads it (a byte view's bytes, or its refusal).
        Js::Live(object) => {
            let digest = object.cx().helper("tokenHash", &[value])?;
            let bytes = match digest {
                Js::Live(buffer) => buffer.bytes().unwrap_or_default(),
                _ => Vec::new(),
            };
            bytes
                .try_into()
                .map_err(|_| StoreError::plain("pi-workflows-native internal error: token hash"))
        }
        other => Ok(Sha256::digest(hash_data(other)?).into()),
    }
}

/// Node's refusal of a non-string first argument to `Buffer.from`.
pub fn buffer_from_error(value: Js<'_>) -> StoreError {
    if let Err(thrown) = read_specific_type(value) {
        return thrown;
    }
    StoreError::Js {
        name: "TypeError".into(),
        message: format!(
            "The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object. Received {}",
            node_received(value)
        ),
        code: Some("ERR_INVALID_ARG_TYPE".into()),
    }
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
pub fn buffer_from(value: Js<'_>, encoding: Encoding) -> Result<Vec<u8>> {
    match value {
        Js::String(text) | Js::IllFormed { text, .. } => Ok(match encoding {
            Encoding::Utf8 => text.as_bytes().to_vec(),
            Encoding::Hex => buffer_from_hex(text),
        }),
        Js::Bytes { hex, .. } => Ok(hex::decode(hex).unwrap_or_default()),
        Js::Array(items) => items
            .iter()
            .map(|item| to_number(Js::of(item)).map(to_uint8))
            .collect(),
        // A caller's object: Node's own Buffer.from reads it (array-likes, `valueOf`, boxed
        // strings, its refusals).
        Js::Live(object) => {
            let encoding = match encoding {
                Encoding::Utf8 => "utf8",
                Encoding::Hex => "hex",
            };
            match object
                .cx()
                .helper("bufferFrom", &[value, Js::String(encoding)])?
            {
                Js::Live(buffer) => Ok(buffer.bytes().unwrap_or_default()),
                _ => Ok(Vec::new()),
            }
        }
        other => Err(buffer_from_error(other)),
    }
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
