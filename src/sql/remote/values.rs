//! Values crossing the wire: a bound parameter as dqlite sends it ([`to_value`]), a
//! statement with its values written into its text ([`inline`]) and a query's rows as
//! received ([`Rows`]).

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

/// `sql` with each parameter replaced by its value as an SQL literal, for a request that runs
/// several statements (libdqlite 1.11 binds parameters to the first statement of a text only).
/// `None` where that cannot be exact or safe: a REAL other than a whole number below 2^53 (its
/// decimal text need not read back as the same double; -0 neither), text with a NUL character, a named parameter, a comment or a `;` in `sql`
/// (a comment would swallow what follows it in the joined text, an empty statement ends the
/// request there), a parameter index without a value.
pub fn inline(sql: &str, values: &[Value]) -> Option<String> {
    let sql = sql.trim().trim_end_matches(';').trim_end();
    if sql.is_empty() {
        return None;
    }
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16 * values.len());
    let mut highest = 0usize;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        match bytes[i] {
            // Quoted text and identifiers are copied as they are.
            quote @ (b'\'' | b'"' | b'`') => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return None,
                        Some(&c) if c == quote && bytes.get(i + 1) == Some(&quote) => i += 2,
                        Some(&c) if c == quote => break,
                        Some(_) => i += 1,
                    }
                }
                i += 1;
            }
            b'[' => {
                i += bytes[i..].iter().position(|&c| c == b']')? + 1;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => return None,
            b'/' if bytes.get(i + 1) == Some(&b'*') => return None,
            b';' | b':' | b'@' | b'$' | b'#' => return None,
            b'?' => {
                out.push_str(&sql[copied..i]);
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                let index = if digits == 0 {
                    highest + 1
                } else {
                    sql[i + 1..i + 1 + digits].parse().ok()?
                };
                highest = highest.max(index);
                literal(values.get(index.checked_sub(1)?)?, &mut out)?;
                i += 1 + digits;
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Some(out)
}

/// `value` as SQLite reads it back from SQL text, exactly.
fn literal(value: &Value, out: &mut String) -> Option<()> {
    use std::fmt::Write;
    match value {
        Value::Null => out.push_str("NULL"),
        Value::Integer(i64::MIN) => out.push_str("(-9223372036854775807 - 1)"),
        // In parentheses: `- ?` must not become a comment.
        Value::Integer(n) if *n < 0 => write!(out, "({n})").ok()?,
        Value::Integer(n) => write!(out, "{n}").ok()?,
        // A whole number below 2^53 is read back exactly, as a REAL (`5.0`): JavaScript's
        // numbers, bound as better-sqlite3 binds them (a claim's generation, say).
        Value::Float(x) if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 && *x != 0.0 => {
            let n = *x as i64;
            if n < 0 {
                write!(out, "({n}.0)").ok()?;
            } else {
                write!(out, "{n}.0").ok()?;
            }
        }
        Value::Float(x) if *x == 0.0 && x.is_sign_positive() => out.push_str("0.0"),
        Value::Text(text) if !text.contains('\0') => {
            out.push('\'');
            out.push_str(&text.replace('\'', "''"));
            out.push('\'');
        }
        Value::Blob(bytes) => {
            out.push_str("X'");
            for byte in bytes {
                write!(out, "{byte:02X}").ok()?;
            }
            out.push('\'');
        }
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::row::value_ref;

    #[test]
    fn inlined_values_read_back_as_the_bound_ones() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let text = "it's ? a \"quote\" -- not a comment /* nor this */ ; [x] é".to_string();
        let cases: Vec<(&str, Vec<Value>)> = vec![
            (
                "SELECT ?, ?, ?, ?, ?, typeof(?6)",
                vec![
                    Value::Integer(1),
                    Value::Integer(-5),
                    Value::Integer(i64::MIN),
                    Value::Integer(i64::MAX),
                    Value::Text(text.clone()),
                    Value::Null,
                ],
            ),
            (
                "SELECT ?1, ?, ?1, '?', \"?\" FROM (SELECT 1 AS \"?\")",
                vec![
                    Value::Blob(vec![0, 1, 0xab, 0xff]),
                    Value::Text(String::new()),
                ],
            ),
            (
                "SELECT 1 - ?, [a?b] FROM (SELECT 2 AS [a?b])",
                vec![Value::Integer(-3)],
            ),
            (
                "SELECT ?, typeof(?1), 1 - ?, ?, ?, typeof(?5), CAST(?5 AS TEXT)",
                vec![
                    Value::Float(5.0),
                    Value::Float(-7.0),
                    Value::Float(9_007_199_254_740_991.0),
                    Value::Float(0.0),
                    Value::Float(-9_007_199_254_740_991.0),
                ],
            ),
        ];
        for (sql, values) in cases {
            let inlined = inline(sql, &values).unwrap_or_else(|| panic!("{sql}"));
            let read = |sql: &str, bind: bool| -> Vec<rusqlite::types::Value> {
                let mut statement = db.prepare(sql).unwrap();
                let columns = statement.column_count();
                let params: Vec<rusqlite::types::Value> = if bind {
                    values.iter().map(|v| value_ref(v).into()).collect()
                } else {
                    Vec::new()
                };
                statement
                    .query_row(rusqlite::params_from_iter(params), |row| {
                        (0..columns).map(|i| row.get(i)).collect()
                    })
                    .unwrap()
            };
            assert_eq!(read(&inlined, false), read(sql, true), "{sql} as {inlined}");
        }
    }

    #[test]
    fn what_cannot_be_inlined_exactly_is_not() {
        let one = [Value::Integer(1)];
        for sql in [
            "SELECT ? -- a comment",
            "SELECT ? /* a comment */",
            "SELECT ?; SELECT 2",
            "SELECT :name",
            "SELECT @name, ?",
            "SELECT $name",
            "SELECT ?2",
            "SELECT 'unterminated ?",
            "  ;  ",
        ] {
            assert_eq!(inline(sql, &one), None, "{sql}");
        }
        for x in [
            0.1,
            -0.0,
            9_007_199_254_740_992.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert_eq!(inline("SELECT ?", &[Value::Float(x)]), None, "{x}");
        }
        assert_eq!(inline("SELECT ?", &[Value::Text("a\0b".into())]), None);
        assert_eq!(
            inline(
                " UPDATE t SET a = ? WHERE b = ?;\n ",
                &[Value::Integer(1), Value::Null]
            ),
            Some("UPDATE t SET a = 1 WHERE b = NULL".into())
        );
    }

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
