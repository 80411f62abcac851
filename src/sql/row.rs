//! One row of a result, of either engine: SQLite's row buffer read in place, or a row the
//! cluster sent.

use dqlite_wire::Value;
use rusqlite::types::{FromSql, FromSqlError, ValueRef};

/// One row of a result.
#[derive(Clone, Copy)]
pub enum Row<'a> {
    /// SQLite's row buffer, read in place.
    File(&'a rusqlite::Row<'a>),
    /// A row received from the cluster: its values and the result's column names.
    Remote(&'a [Value], &'a [String]),
}

/// A column index (rusqlite's `RowIndex`, for positions only).
pub trait ColumnIndex: Copy {
    /// The 0-based position.
    fn position(self) -> usize;
}

impl ColumnIndex for usize {
    #[inline]
    fn position(self) -> usize {
        self
    }
}

impl Row<'_> {
    /// The value at `index` converted to `T`, failing as rusqlite's `Row::get` does.
    #[inline]
    pub fn get<I: ColumnIndex, T: FromSql>(&self, index: I) -> rusqlite::Result<T> {
        match self {
            Row::File(row) => row.get(index.position()),
            Row::Remote(values, columns) => remote_get(values, columns, index.position()),
        }
    }

    /// The value at `index` in place.
    #[inline]
    pub fn get_ref<I: ColumnIndex>(&self, index: I) -> rusqlite::Result<ValueRef<'_>> {
        match self {
            Row::File(row) => row.get_ref(index.position()),
            Row::Remote(values, _) => remote_get_ref(values, index.position()),
        }
    }

    /// The number of columns.
    #[inline]
    pub fn column_count(&self) -> usize {
        match self {
            Row::File(row) => row.as_ref().column_count(),
            Row::Remote(values, _) => values.len(),
        }
    }
}

/// [`Row::get`] of a row the cluster sent; out of line, so that the file's `get` stays a
/// match in front of rusqlite's.
#[cold]
#[inline(never)]
fn remote_get<T: FromSql>(
    values: &[Value],
    columns: &[String],
    index: usize,
) -> rusqlite::Result<T> {
    let value = remote_get_ref(values, index)?;
    T::column_result(value).map_err(|error| match error {
        FromSqlError::InvalidType => rusqlite::Error::InvalidColumnType(
            index,
            columns.get(index).map_or("", String::as_str).to_owned(),
            value.data_type(),
        ),
        FromSqlError::OutOfRange(n) => rusqlite::Error::IntegralValueOutOfRange(index, n),
        FromSqlError::Other(error) => {
            rusqlite::Error::FromSqlConversionFailure(index, value.data_type(), error)
        }
        other => {
            rusqlite::Error::FromSqlConversionFailure(index, value.data_type(), Box::new(other))
        }
    })
}

/// [`Row::get_ref`] of a row the cluster sent (out of line, as [`remote_get`]).
#[cold]
#[inline(never)]
fn remote_get_ref(values: &[Value], index: usize) -> rusqlite::Result<ValueRef<'_>> {
    values
        .get(index)
        .map(value_ref)
        .ok_or(rusqlite::Error::InvalidColumnIndex(index))
}

/// A received value as SQLite's storage class (dqlite's date and boolean types folded back).
pub fn value_ref(value: &Value) -> ValueRef<'_> {
    match value {
        Value::Integer(n) | Value::Unixtime(n) => ValueRef::Integer(*n),
        Value::Boolean(b) => ValueRef::Integer(*b as i64),
        Value::Float(x) => ValueRef::Real(*x),
        Value::Text(text) => ValueRef::Text(text.as_bytes()),
        Value::Iso8601(text) if text.is_empty() => ValueRef::Null,
        Value::Iso8601(text) => ValueRef::Text(text.as_bytes()),
        Value::Blob(bytes) => ValueRef::Blob(bytes),
        Value::Null => ValueRef::Null,
    }
}
