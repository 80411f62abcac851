//! Canonical JSON for values the core builds itself (event payloads, viewer patches).
//!
//! The text must equal what the reference's `JSON.stringify(normalizeJson(v))` produces: object
//! keys in JavaScript's default sort order (UTF-16 code units), numbers formatted as JavaScript
//! formats them, and `-0` written as `0`. Caller-supplied JSON is canonicalised by the JS layer,
//! where JavaScript's own rules apply for free.

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

#[cfg(test)]
mod tests {
    use super::canonical;
    use serde_json::json;

    #[test]
    fn sorts_keys_and_formats_numbers_like_javascript() {
        let value =
            json!({"b": 1, "a": [1.5, -0.0, 1e21, 0.000001, 1e-7], "é": "x\u{1}\"", "Z": null});
        assert_eq!(
            canonical(&value),
            r#"{"Z":null,"a":[1.5,0,1e+21,0.000001,1e-7],"b":1,"é":"x\u0001\""}"#
        );
    }
}
