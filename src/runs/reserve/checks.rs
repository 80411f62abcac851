//! The value checks of a reservation, as the reference's helpers make them: run ids, digests
//! and fingerprints, and the comparisons of stored and given values.

use rusqlite::Connection;
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::js::{bind_params, Bound, Js, Param};
use crate::runs::row::RunRow;

/// `row.parentRunId === (options.parentRunId ?? null)`.
pub(super) fn parent_run_id_matches(row: &RunRow, given: Option<&Value>) -> bool {
    match (row.parent_run_id.as_deref(), given) {
        (None, None) => true,
        (Some(stored), Some(value)) => value.as_str() == Some(stored),
        _ => false,
    }
}

/// JavaScript `stored === value` for a nullable text column and a caller value that may be
/// `undefined` (`None`).
pub(super) fn js_equals_text(stored: Option<&str>, value: Option<&Value>) -> bool {
    match (stored, value) {
        (None, Some(Value::Null)) => true,
        (Some(stored), Some(Value::String(value))) => stored == value,
        _ => false,
    }
}

/// `stored === value` for a nullable text column and a caller value.
pub(super) fn same_nullable_text(stored: Option<&str>, value: Js<'_>) -> bool {
    match stored {
        None => value == Js::Null,
        Some(stored) => value.strict_eq_str(stored),
    }
}

/// `Workflow run not found: ${runId}`.
pub(super) fn not_found(run_id: Js<'_>) -> Result<StoreError> {
    Ok(StoreError::plain(format!(
        "Workflow run not found: {}",
        run_id.template()?
    )))
}

/// What a TEXT column stores for a caller value the reference binds there: the string itself,
/// or the text SQLite makes of a number (`5` as REAL is `'5.0'`); `None` for `null`/`undefined`.
/// The value is bound as one parameter by better-sqlite3's rules (a one-item array spreads);
/// values it cannot bind fail with its error.
pub(super) fn stored_text(conn: &Connection, value: Option<&Value>) -> Result<Option<String>> {
    if let Some(text) = Js::opt(value).as_str() {
        return Ok(Some(text.to_string()));
    }
    let bound = bind_params(&[Param::Caller(value)])?;
    if bound.first() == Some(&Bound::Null) {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached("SELECT CAST(? AS TEXT)")?
        .query_row(rusqlite::params_from_iter(&bound), |row| {
            row.get::<_, Option<String>>(0)
        })?)
}

/// `value === n` for a caller value and an integer.
pub(super) fn number_equals(value: &Value, n: i64) -> bool {
    // Through the JavaScript view: a tagged -0 is `=== 0`, as in JavaScript.
    Js::of(value).strict_eq_number(n as f64)
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`
pub(super) fn validate_run_id(run_id: &str) -> Result<()> {
    let bytes = run_id.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 200
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(StoreError::plain(format!(
            "Invalid workflow run id: {run_id}"
        )))
    }
}

/// 64 hex digits (any case) after an optional `sha256:` prefix, as 32 bytes. `value` is `None`
/// for `undefined`; a value that is not a string fails where the reference calls `startsWith`.
pub(super) fn sha256_hex(value: Option<&Value>, error: &str) -> Result<Vec<u8>> {
    let text = match value {
        Some(Value::String(text)) => text,
        None => return Err(no_starts_with("undefined")),
        Some(Value::Null) => return Err(no_starts_with("null")),
        Some(_) => {
            return Err(StoreError::Type(
                "value.startsWith is not a function".into(),
            ))
        }
    };
    let hex = text.strip_prefix("sha256:").unwrap_or(text);
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::plain(error));
    }
    hex::decode(hex).map_err(|_| StoreError::plain(error))
}

pub(super) fn no_starts_with(receiver: &str) -> StoreError {
    StoreError::Type(format!(
        "Cannot read properties of {receiver} (reading 'startsWith')"
    ))
}

pub(super) fn digest_buffer(value: Option<&Value>) -> Result<Vec<u8>> {
    sha256_hex(value, "Expected a SHA-256 digest")
}

pub(super) fn terminal_fingerprint_buffer(value: &Value) -> Result<Vec<u8>> {
    sha256_hex(Some(value), "Expected a terminal fingerprint")
}
