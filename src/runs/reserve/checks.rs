//! The value checks of a reservation, as the reference's helpers make them: run ids, digests
//! and fingerprints, and the comparisons of stored and given values.

use crate::sql::Db;

use crate::error::{Result, StoreError};
use crate::js::{bind_params, buffer_from, message_error, Bound, Encoding, Js, Param};
use crate::runs::row::RunRow;

/// `row.parentRunId === (options.parentRunId ?? null)`.
pub(super) fn parent_run_id_matches(row: &RunRow, given: Option<Js<'_>>) -> bool {
    match (row.parent_run_id.as_deref(), given) {
        (None, None) => true,
        (Some(stored), Some(value)) => value.strict_eq_str(stored),
        _ => false,
    }
}

/// JavaScript `stored === value` for a nullable text column and a caller value.
pub(super) fn js_equals_text(stored: Option<&str>, value: Js<'_>) -> bool {
    match stored {
        None => value == Js::Null,
        Some(stored) => value.strict_eq_str(stored),
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
    Ok(message_error(&[
        Js::String("Workflow run not found: "),
        run_id,
    ]))
}

/// What a TEXT column stores for a caller value the reference binds there: the string itself,
/// or the text SQLite makes of a number (`5` as REAL is `'5.0'`); `None` for `null`/`undefined`.
/// The value is bound as one parameter by better-sqlite3's rules (a one-item array spreads);
/// values it cannot bind fail with its error. An event's actor id that is a string with lone
/// surrogates is bound as the caller's value instead ([`ill_formed_actor`]): the column then
/// holds its WTF-8, as the reference's.
pub(super) fn stored_text(conn: &Db, value: Js<'_>) -> Result<Option<String>> {
    // A string with lone surrogates is stored as its WTF-8, and reads back as V8 decodes it.
    if let Some(text) = value.stored_text() {
        return Ok(Some(text.into_owned()));
    }
    let bound = bind_params(&[Param::Js(value)])?;
    if bound.first() == Some(&Bound::Null) {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached("SELECT CAST(? AS TEXT)")?
        .query_row(crate::sql::params_from_iter(&bound), |row| {
            row.get::<_, Option<String>>(0)
        })?)
}

/// `value === n` for a caller value and an integer.
pub(super) fn number_equals(value: Js<'_>, n: i64) -> bool {
    // -0 is `=== 0`, as in JavaScript.
    value.strict_eq_number(n as f64)
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`
pub(super) fn validate_run_id(value: Js<'_>, run_id: &str) -> Result<()> {
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
        Err(message_error(&[
            Js::String("Invalid workflow run id: "),
            value,
        ]))
    }
}

/// 64 hex digits (any case) after an optional `sha256:` prefix, as 32 bytes. `value` is `None`
/// for `undefined`; a value that is not a string fails where the reference calls `startsWith`.
pub(super) fn sha256_hex(value: Js<'_>, error: &str) -> Result<Vec<u8>> {
    let text = match value.method("value", "startsWith")? {
        Js::String(text) => text,
        // A lone surrogate is no hex digit: the digest test fails.
        Js::IllFormed { .. } => return Err(StoreError::plain(error)),
        // Another receiver of `startsWith` (a boxed String): its own methods, then the
        // test of its string and `Buffer.from(hex, "hex")`, by JavaScript.
        Js::Live(object) => {
            let cx = object.cx();
            let prefixed = cx.invoke(value, "startsWith", &[Js::String("sha256:")])?;
            let hex = if prefixed.truthy() {
                cx.invoke(value, "slice", &[Js::Number(7.0)])?
            } else {
                value
            };
            if !is_sha256_hex(&hex.template()?) {
                return Err(StoreError::plain(error));
            }
            return buffer_from(hex, Encoding::Hex);
        }
        _ => {
            return Err(StoreError::Type(
                "value.startsWith is not a function".into(),
            ))
        }
    };
    let hex = text.strip_prefix("sha256:").unwrap_or(text);
    if !is_sha256_hex(hex) {
        return Err(StoreError::plain(error));
    }
    hex::decode(hex).map_err(|_| StoreError::plain(error))
}

/// `/^[0-9a-f]{64}$/i.test(hex)`.
fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(super) fn digest_buffer(value: Js<'_>) -> Result<Vec<u8>> {
    sha256_hex(value, "Expected a SHA-256 digest")
}

pub(super) fn terminal_fingerprint_buffer(value: Js<'_>) -> Result<Vec<u8>> {
    sha256_hex(value, "Expected a terminal fingerprint")
}

/// The caller's value bound as better-sqlite3 binds it, when it is a string with lone
/// surrogates (whose stored bytes are not the UTF-8 of any Rust string).
pub(super) fn ill_formed_actor(value: Js<'_>) -> Result<Option<Bound<'_>>> {
    match value {
        Js::IllFormed { .. } => value.bind().map(Some),
        _ => Ok(None),
    }
}
