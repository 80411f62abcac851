//! Columns of the current row read in place (borrowed from SQLite's row buffer, no copy), each
//! failing on a value of another type exactly as `row.get` into the owned type does.

use crate::sql::Row;
use rusqlite::types::ValueRef;

/// A text column read in place; any other value fails as `row.get::<String>` does.
pub fn str_at<'r>(row: &'r Row<'_>, index: usize) -> rusqlite::Result<&'r str> {
    if let ValueRef::Text(text) = row.get_ref(index)? {
        if let Ok(text) = std::str::from_utf8(text) {
            return Ok(text);
        }
    }
    Err(row
        .get::<_, String>(index)
        .expect_err("only UTF-8 text reads as a String"))
}

/// A blob column read in place; any other value fails as `row.get::<Vec<u8>>` does.
pub fn blob_at<'r>(row: &'r Row<'_>, index: usize) -> rusqlite::Result<&'r [u8]> {
    match row.get_ref(index)? {
        ValueRef::Blob(bytes) => Ok(bytes),
        _ => Err(row
            .get::<_, Vec<u8>>(index)
            .expect_err("only a blob reads as bytes")),
    }
}

/// [`blob_at`] for a nullable column.
pub fn opt_blob_at<'r>(row: &'r Row<'_>, index: usize) -> rusqlite::Result<Option<&'r [u8]>> {
    match row.get_ref(index)? {
        ValueRef::Null => Ok(None),
        _ => blob_at(row, index).map(Some),
    }
}

/// [`str_at`] for a nullable column.
pub fn opt_str_at<'r>(row: &'r Row<'_>, index: usize) -> rusqlite::Result<Option<&'r str>> {
    match row.get_ref(index)? {
        ValueRef::Null => Ok(None),
        _ => str_at(row, index).map(Some),
    }
}

/// A text column as better-sqlite3 reads it into a JavaScript string: V8 decodes invalid
/// UTF-8 (a caller's lone surrogate, stored as its WTF-8 bytes) with a U+FFFD for each
/// maximal invalid subsequence, as `String::from_utf8_lossy` does; any other value fails as
/// `row.get::<String>` does.
pub fn lossy_string_at(row: &Row<'_>, index: usize) -> rusqlite::Result<String> {
    match row.get_ref(index)? {
        ValueRef::Text(text) => Ok(String::from_utf8_lossy(text).into_owned()),
        _ => row.get::<_, String>(index),
    }
}

/// [`lossy_string_at`] for a nullable column.
pub fn opt_lossy_string_at(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<String>> {
    match row.get_ref(index)? {
        ValueRef::Null => Ok(None),
        _ => lossy_string_at(row, index).map(Some),
    }
}

/// Whether reading a text column failed only because its bytes are not UTF-8.
pub fn is_utf8_error(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::FromSqlConversionFailure(_, rusqlite::types::Type::Text, _)
    ) || matches!(error, rusqlite::Error::Utf8Error(_))
}
