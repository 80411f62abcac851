//! Values crossing the wire: a bound parameter as dqlite sends it ([`to_value`]) and a
//! query's rows as received ([`Rows`]).

use dqlite_wire::Value;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use crate::sql::row::Row;

/// A query's rows received from the cluster.
pub struct Rows {
    columns: Vec<String>,
    rows: std::vec::IntoIter<Vec<Value>>,
    current: Vec<Value>,
}

impl Rows {
    pub(super) fn new(result: dqlite_wire::QueryResult) -> Rows {
        Rows {
            columns: result.columns,
            rows: result.rows.into_iter(),
            current: Vec::new(),
        }
    }

    /// The next row.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Row<'_>> {
        self.current = self.rows.next()?;
        Some(Row::Remote(&self.current, &self.columns))
    }
}

/// A bound value as the wire sends it.
pub fn to_value(item: &(impl ToSql + ?Sized)) -> rusqlite::Result<Value> {
    let output = item.to_sql()?;
    let value = match &output {
        ToSqlOutput::Borrowed(value) => *value,
        ToSqlOutput::Owned(value) => ValueRef::from(value),
        other => {
            return Err(rusqlite::Error::ToSqlConversionFailure(
                format!("a parameter the cluster cannot take: {other:?}").into(),
            ))
        }
    };
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Integer(n),
        ValueRef::Real(x) => Value::Float(x),
        ValueRef::Text(text) => Value::Text(
            String::from_utf8(text.to_vec())
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?,
        ),
        ValueRef::Blob(bytes) => Value::Blob(bytes.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::row::value_ref;

    #[test]
    fn values_cross_as_sqlite_storage_classes() {
        let bound = [
            to_value(&1_i64).unwrap(),
            to_value(&2.5_f64).unwrap(),
            to_value(&"text").unwrap(),
            to_value(&vec![1_u8, 2]).unwrap(),
            to_value(&Option::<i64>::None).unwrap(),
        ];
        assert_eq!(
            bound,
            [
                Value::Integer(1),
                Value::Float(2.5),
                Value::Text("text".into()),
                Value::Blob(vec![1, 2]),
                Value::Null
            ]
        );
        assert_eq!(value_ref(&Value::Unixtime(7)), ValueRef::Integer(7));
        assert_eq!(value_ref(&Value::Boolean(true)), ValueRef::Integer(1));
        assert_eq!(value_ref(&Value::Iso8601(String::new())), ValueRef::Null);
        assert_eq!(
            value_ref(&Value::Iso8601("2026-01-01".into())),
            ValueRef::Text(b"2026-01-01")
        );
    }
}
