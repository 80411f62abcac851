//! Canonical JSON for values the core builds itself (event payloads, viewer patches), and
//! parsing JSON text the way JavaScript accepts it.
//!
//! The text must equal what the reference's `JSON.stringify(normalizeJson(v))` produces: object
//! keys in JavaScript's default sort order (UTF-16 code units), numbers formatted as JavaScript
//! formats them, and `-0` written as `0`. Caller-supplied JSON is canonicalised by the JS layer,
//! where JavaScript's own rules apply for free.

use std::borrow::Cow;

use serde_json::{Number, Value};

/// The reference's canonical JSON text of `value` (sorted keys, JavaScript number format).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, &map[key]);
            }
            out.push('}');
        }
    }
}

/// JavaScript's `Number.prototype.toString` for a finite number.
pub fn js_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        if i.unsigned_abs() < (1 << 53) {
            return i.to_string();
        }
    }
    if let Some(u) = n.as_u64() {
        if u < (1 << 53) {
            return u.to_string();
        }
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f == 0.0 {
        return "0".into();
    }
    let mut buffer = ryu_js::Buffer::new();
    buffer.format_finite(f).to_string()
}

fn write_number(out: &mut String, n: &Number) {
    out.push_str(&js_number(n));
}

fn write_string(out: &mut String, s: &str) {
    // serde_json escapes exactly the characters JSON.stringify escapes for well-formed strings.
    out.push_str(&serde_json::to_string(s).expect("strings always serialise"));
}

/// The text a record embeds for a stored JSON document with this content: the text itself
/// when plain serde_json reads it and its object keys are strictly in JavaScript's sort order
/// (`JSON.parse` then builds the same value the reference's sorted `parseJson` does), else the
/// value [`parse`]d, keys sorted, written again. What `JsonReads::get_text` gives for a blob
/// of this content, for a document the caller just stored (no need to read it back).
pub fn record_text(text: &str) -> std::result::Result<String, String> {
    record_text_of(Cow::Borrowed(text))
}

/// [`record_text`] of a text the caller owns (kept as it is when it serves, not copied).
pub fn record_text_of(text: Cow<'_, str>) -> std::result::Result<String, String> {
    // Only plain serde_json's verdict lets the text serve as it is: deep nesting goes through
    // `parse` like any text with keys out of order. A lone surrogate's escape (which
    // `JSON.stringify` writes, and `JSON.parse` reads back as that lone surrogate) stays as
    // it is when the text's keys are in order with it repaired.
    if keys_in_order(&text) {
        return Ok(text.into_owned());
    }
    if replace_lone_surrogates(&text).is_some_and(|repaired| keys_in_order(&repaired)) {
        return Ok(text.into_owned());
    }
    let value = parse(&text).map_err(|error| format!("Stored JSON is invalid: {error}"))?;
    Ok(serde_json::to_string(&sort_keys(value)).expect("a JSON value always serializes"))
}

/// Object keys in JavaScript's default sort order, recursively. Stored JSON is canonical, so
/// its keys are nearly always sorted already: checked first, without rebuilding anything.
pub fn sort_keys(value: Value) -> Value {
    if keys_sorted(&value) {
        return value;
    }
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        other => other,
    }
}

fn keys_sorted(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().all(keys_sorted),
        Value::Object(map) => {
            let mut keys = map.keys();
            let ordered = match keys.next() {
                None => true,
                Some(first) => keys
                    .try_fold(first, |previous, key| {
                        (previous.encode_utf16().cmp(key.encode_utf16()).is_lt()).then_some(key)
                    })
                    .is_some(),
            };
            ordered && map.values().all(keys_sorted)
        }
        _ => true,
    }
}

/// Whether plain serde_json reads `text` and every object in it has its keys strictly in
/// JavaScript's sort order (`false` for a repeated key), read without building the value.
pub fn keys_in_order(text: &str) -> bool {
    matches!(
        serde_json::from_str::<SortedKeys>(text),
        Ok(SortedKeys(true))
    )
}

/// Whether every object of a JSON text has its keys strictly in JavaScript's sort order, read
/// without building the value (`false` for a repeated key).
struct SortedKeys(bool);

impl<'de> serde::Deserialize<'de> for SortedKeys {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(SortedKeysVisitor)
    }
}

struct SortedKeysVisitor;

impl<'de> serde::de::Visitor<'de> for SortedKeysVisitor {
    type Value = SortedKeys;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<SortedKeys, E> {
        Ok(SortedKeys(true))
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<SortedKeys, E> {
        Ok(SortedKeys(true))
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<SortedKeys, E> {
        Ok(SortedKeys(true))
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<SortedKeys, E> {
        Ok(SortedKeys(true))
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<SortedKeys, E> {
        Ok(SortedKeys(true))
    }

    fn visit_unit<E>(self) -> std::result::Result<SortedKeys, E> {
        Ok(SortedKeys(true))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut items: A,
    ) -> std::result::Result<SortedKeys, A::Error> {
        let mut sorted = true;
        while let Some(SortedKeys(item)) = items.next_element()? {
            sorted &= item;
        }
        Ok(SortedKeys(sorted))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut entries: A,
    ) -> std::result::Result<SortedKeys, A::Error> {
        let mut sorted = true;
        let mut previous: Option<String> = None;
        while let Some(key) = entries.next_key::<String>()? {
            if let Some(previous) = &previous {
                sorted &= previous.encode_utf16().cmp(key.encode_utf16()).is_lt();
            }
            let SortedKeys(value) = entries.next_value()?;
            sorted &= value;
            previous = Some(key);
        }
        Ok(SortedKeys(sorted))
    }
}

/// Deepest nesting [`parse`] accepts: beyond what the JS layer's canonicaliser can produce
/// (its recursion ends near 3,000 levels).
pub const MAX_JSON_DEPTH: usize = 4_096;

/// Stack one nesting level may take in the recursive walks of a value (parse, sort, print,
/// drop); measured at about 720 bytes in release builds and 2.6 KB in debug builds.
const STACK_PER_LEVEL: usize = if cfg!(debug_assertions) { 3_072 } else { 1_024 };
/// Stack kept free for the rest of the call around those walks.
const STACK_MARGIN: usize = 256 * 1024;

/// Parses JSON text that JavaScript's `JSON.parse` accepts: nesting deeper than serde_json's
/// default limit of 128 (up to [`MAX_JSON_DEPTH`]), and `\uD800`-style escapes of lone
/// surrogates, which a Rust string cannot hold; they become U+FFFD, the character
/// better-sqlite3 and `Buffer.from` store for them.
pub fn parse(text: &str) -> std::result::Result<Value, String> {
    let first = match serde_json::from_str(text) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let repaired = replace_lone_surrogates(text);
    let text = repaired.as_deref().unwrap_or(text);
    let depth = nesting_depth(text);
    if depth > MAX_JSON_DEPTH {
        return Err(format!("JSON nesting deeper than {MAX_JSON_DEPTH} levels"));
    }
    // Deep values are walked recursively (here and by every later use); refuse them cleanly
    // rather than overflow the stack of the calling thread, which would abort the process.
    let needed = depth * STACK_PER_LEVEL + STACK_MARGIN;
    if depth > 128 && stacker::remaining_stack().is_none_or(|free| free < needed) {
        return Err(format!(
            "JSON nesting of {depth} levels needs more stack than this thread has"
        ));
    }
    if repaired.is_none() && !first.is_syntax() {
        return Err(first.to_string());
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let mut values = deserializer.into_iter::<Value>();
    match (values.next(), values.next()) {
        (Some(Ok(value)), None) => Ok(value),
        _ => Err(first.to_string()),
    }
}

/// The deepest array/object nesting of JSON text (brackets inside strings do not count).
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// `text` with every `\uXXXX` escape of an unpaired surrogate replaced by `\uFFFD`; `None`
/// when there is none.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    let unit_at = |at: usize| -> Option<u16> {
        let hex = text.get(at..at + 6)?;
        let digits = hex.strip_prefix("\\u")?;
        u16::from_str_radix(digits, 16).ok()
    };
    let high = |unit: u16| (0xD800..0xDC00).contains(&unit);
    let low = |unit: u16| (0xDC00..0xE000).contains(&unit);
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut at, mut copied) = (0, 0);
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            at += 1;
            continue;
        }
        let Some(unit) = unit_at(at) else {
            at += 2; // any other escape, `\\` included
            continue;
        };
        let paired = high(unit) && unit_at(at + 6).is_some_and(low);
        if paired {
            at += 12;
        } else if high(unit) || low(unit) {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..at]);
            out.push_str("\\uFFFD");
            at += 6;
            copied = at;
        } else {
            at += 6;
        }
    }
    out.map(|mut out| {
        out.push_str(&text[copied..]);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::{
        canonical, keys_in_order, keys_sorted, parse, record_text, sort_keys, MAX_JSON_DEPTH,
    };
    use serde_json::json;

    #[test]
    fn record_text_is_what_a_blob_read_gives() {
        // Sorted keys: the text itself, byte for byte.
        for text in [
            r#"{"a":1,"b":[{"x":null,"y":"\u0001"}]}"#,
            "[]",
            "\"s\"",
            "1e+21",
        ] {
            assert_eq!(record_text(text).unwrap(), text);
        }
        // JSON.stringify writes integer-like keys first; the record sorts them as strings.
        assert_eq!(
            record_text(r#"{"9":1,"10":2}"#).unwrap(),
            r#"{"10":2,"9":1}"#
        );
        // A lone surrogate's escape stays as JSON.stringify wrote it (JSON.parse reads it back
        // as that lone surrogate, as the reference's parseJson keeps it) when the keys are in
        // order; out of order, the value is rebuilt and the escape repaired.
        assert_eq!(record_text(r#"["\ud800"]"#).unwrap(), r#"["\ud800"]"#);
        assert_eq!(
            record_text(r#"{"b":"\ud800","a":1}"#).unwrap(),
            "{\"a\":1,\"b\":\"\u{FFFD}\"}"
        );
        assert!(record_text("{")
            .unwrap_err()
            .starts_with("Stored JSON is invalid"));
    }

    #[test]
    fn sorts_keys_and_formats_numbers_like_javascript() {
        let value =
            json!({"b": 1, "a": [1.5, -0.0, 1e21, 0.000001, 1e-7], "é": "x\u{1}\"", "Z": null});
        assert_eq!(
            canonical(&value),
            r#"{"Z":null,"a":[1.5,0,1e+21,0.000001,1e-7],"b":1,"é":"x\u0001\""}"#
        );
    }

    #[test]
    fn parses_lone_surrogates_as_replacement_characters() {
        assert_eq!(
            parse(r#"["\ud800","a\udc00b","\ud83d\ude00","\\ud800"]"#).unwrap(),
            json!(["\u{FFFD}", "a\u{FFFD}b", "\u{1F600}", "\\ud800"])
        );
        assert_eq!(
            parse(r#"{"\udfff\ud800":1}"#).unwrap(),
            json!({"\u{FFFD}\u{FFFD}": 1})
        );
    }

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn parses_nesting_javascript_accepts_and_refuses_the_absurd() {
        // On a thread as large as Node's main thread, the deepest accepted value round-trips.
        let big = std::thread::Builder::new().stack_size(16 << 20);
        let deepest = big.spawn(|| canonical(&parse(&nested(MAX_JSON_DEPTH)).unwrap()));
        assert_eq!(deepest.unwrap().join().unwrap(), nested(MAX_JSON_DEPTH));
        assert!(parse(&nested(MAX_JSON_DEPTH + 1))
            .unwrap_err()
            .contains("nesting"));
        assert!(parse(&format!("{}]", nested(200))).is_err());
        assert!(parse("[1,").is_err());
    }

    #[test]
    fn refuses_nesting_the_thread_cannot_hold_instead_of_overflowing() {
        let small = std::thread::Builder::new().stack_size(512 << 10);
        let outcome = small.spawn(|| parse(&nested(2_000)).map(|_| ()));
        let error = outcome.unwrap().join().unwrap().unwrap_err();
        assert!(error.contains("needs more stack"), "{error}");
        assert_eq!(canonical(&parse(&nested(300)).unwrap()), nested(300));
    }

    #[test]
    fn sorted_keys_reads_text_as_keys_sorted_reads_the_value() {
        for text in [
            r#"{"a":1,"b":{"x":[{"p":null,"q":true}],"y":"s"}}"#,
            r#"{"b":1,"a":2}"#,
            r#"[{"a":1},{"d":{"c":1,"b":2}}]"#,
            "{\"\u{1f600}\":1,\"\u{ff61}\":2}",
            "{\"\u{ff61}\":1,\"\u{1f600}\":2}",
            r#"{"a\u0062":1,"ac":2}"#,
            r#"[1,-2.5e3,"x",false,null,{}]"#,
        ] {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(keys_in_order(text), keys_sorted(&value), "{text}");
        }
        // A repeated key is never served as stored text.
        assert!(!keys_in_order(r#"{"a":1,"a":2}"#));
        // Nor one plain serde_json refuses (a lone surrogate).
        assert!(!keys_in_order(r#"{"a":"\ud800"}"#));
    }

    fn keys(value: &serde_json::Value) -> Vec<String> {
        value.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn sorts_keys_by_utf16_code_units_at_every_level() {
        // U+1F600 is a surrogate pair (0xD83D …), below U+FF61 in UTF-16 but not in UTF-8.
        let value = sort_keys(
            json!({"\u{ff61}": 1, "b": {"z": 1, "a": [{"y": 1, "x": 2}]}, "\u{1f600}": 2}),
        );
        assert_eq!(keys(&value), ["b", "\u{1f600}", "\u{ff61}"]);
        assert_eq!(keys(&value["b"]), ["a", "z"]);
        assert_eq!(keys(&value["b"]["a"][0]), ["x", "y"]);
    }

    #[test]
    fn leaves_sorted_values_as_they_are() {
        let sorted = json!({"a": [1, {"b": null, "c": "d"}], "e": {}});
        assert_eq!(sort_keys(sorted.clone()), sorted);
        assert_eq!(keys(&sort_keys(json!({"b": 1, "a": 2}))), ["a", "b"]);
    }
}
