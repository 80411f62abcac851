//! better-sqlite3's binding rules: the parameter list of a `stmt.run/get/all(…)` call (arrays
//! spread, one plain object of named parameters, numbers as REAL, bigints as INTEGER, strings
//! as TEXT (lone surrogates as V8 writes them), byte views as BLOB, `null`/`undefined` as NULL,
//! anything else a TypeError; `Too few`/`Too many` RangeErrors), for the store's statements and
//! for `state.connection` (src/connection.rs). SQLite's own errors (`datatype mismatch`, STRICT
//! columns) then follow from SQLite itself. A live value is tested as better-sqlite3 tests it:
//! V8's `IsArray()` (a Proxy is never spread), the prototype for a plain object, the items read
//! with `Get` (getters run).

use std::borrow::Cow;

use rusqlite::types::{ToSql, ToSqlOutput, Value as SqlValue, ValueRef};

use super::value::Js;
use crate::error::{Result, StoreError};

pub(super) const TOO_BIG: &str = "The bound string, buffer, or bigint is too big";
pub(super) const CANNOT_BIND: &str =
    "SQLite3 can only bind numbers, strings, bigints, buffers, and null";

impl<'a> Js<'a> {
    /// This value as better-sqlite3 binds one anonymous parameter.
    pub fn bind(self) -> Result<Bound<'a>> {
        Ok(match self {
            Js::Undefined | Js::Null => Bound::Null,
            Js::Number(n) => Bound::Real(n),
            Js::BigInt(digits) => match digits.parse::<i64>() {
                Ok(n) => Bound::Integer(n),
                Err(_) => return Err(StoreError::Range(TOO_BIG.into())),
            },
            Js::String(text) => Bound::Text(Cow::Borrowed(text.as_bytes())),
            Js::IllFormed { wtf8, .. } => {
                Bound::Text(Cow::Owned(hex::decode(wtf8).unwrap_or_default()))
            }
            Js::Bytes { hex, .. } => Bound::Blob(hex::decode(hex).unwrap_or_default()),
            Js::Live(object) => match object.bytes() {
                Some(bytes) => Bound::Blob(bytes),
                None => return Err(StoreError::Type(CANNOT_BIND.into())),
            },
            _ => return Err(StoreError::Type(CANNOT_BIND.into())),
        })
    }
}

/// One SQLite parameter, bound as better-sqlite3 binds the JavaScript value.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound<'a> {
    /// NULL.
    Null,
    /// INTEGER (from a bigint).
    Integer(i64),
    /// REAL (every JavaScript number).
    Real(f64),
    /// TEXT (the bytes V8 writes, possibly not valid UTF-8).
    Text(Cow<'a, [u8]>),
    /// BLOB.
    Blob(Vec<u8>),
}

impl<'a> Bound<'a> {
    /// A value the store itself binds (an id it computed, a time).
    pub fn text(text: &'a str) -> Bound<'a> {
        Bound::Text(Cow::Borrowed(text.as_bytes()))
    }
}

impl ToSql for Bound<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Bound::Null => ToSqlOutput::Owned(SqlValue::Null),
            Bound::Integer(n) => ToSqlOutput::Owned(SqlValue::Integer(*n)),
            Bound::Real(n) => ToSqlOutput::Owned(SqlValue::Real(*n)),
            Bound::Text(bytes) => ToSqlOutput::Borrowed(ValueRef::Text(bytes)),
            Bound::Blob(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
        })
    }
}

/// One parameter list being bound, in better-sqlite3's order of checks: a value it cannot bind
/// first, then "Too many" past the last parameter, then (at [`Binder::finish`]) the count.
struct Binder<'a> {
    out: Vec<Bound<'a>>,
    count: usize,
    named: bool,
}

impl<'a> Binder<'a> {
    fn new(count: usize) -> Binder<'a> {
        Binder {
            out: Vec::with_capacity(count),
            count,
            named: false,
        }
    }

    fn push(&mut self, bound: Bound<'a>) -> Result<()> {
        if self.out.len() == self.count {
            return Err(StoreError::Range(
                "Too many parameter values were provided".into(),
            ));
        }
        self.out.push(bound);
        Ok(())
    }

    /// The object of named parameters (the store's statements have none: it binds nothing).
    fn named(&mut self) -> Result<()> {
        if self.named {
            return Err(StoreError::Type(
                "You cannot specify named parameters in two different objects".into(),
            ));
        }
        self.named = true;
        Ok(())
    }

    /// One argument of the call: an array spread, a plain object named, any other value bound.
    fn argument(&mut self, value: Js<'a>) -> Result<()> {
        match value {
            Js::Array(items) => {
                for item in items {
                    self.push(Js::of(item).bind()?)?;
                }
                Ok(())
            }
            Js::Object(_) => self.named(),
            Js::Live(object) if object.is_js_array() => {
                let length = object.get("length")?.as_number().unwrap_or(0.0) as u32;
                for index in 0..length {
                    self.push(object.get_index(index)?.bind()?)?;
                }
                Ok(())
            }
            Js::Live(object) if object.bytes().is_none() && object.is_plain()? => self.named(),
            other => {
                let bound = other.bind()?;
                self.push(bound)
            }
        }
    }

    fn finish(self) -> Result<Vec<Bound<'a>>> {
        if self.out.len() < self.count {
            return Err(StoreError::Range(
                "Too few parameter values were provided".into(),
            ));
        }
        Ok(self.out)
    }
}

/// The parameters of `stmt.run/get/all(...values)` for a statement with `param_count` anonymous
/// parameters, or the error better-sqlite3 throws before running it.
pub fn bind_all<'a>(values: &[Js<'a>], param_count: usize) -> Result<Vec<Bound<'a>>> {
    let mut binder = Binder::new(param_count);
    for value in values {
        binder.argument(*value)?;
    }
    binder.finish()
}

/// The parameters of `statement.get/all/run(...values)`, bound as better-sqlite3 binds them.
pub fn params_for<'a>(
    statement: &impl crate::sql::ParameterCount,
    values: &[Js<'a>],
) -> Result<Vec<Bound<'a>>> {
    bind_all(values, statement.parameter_count())
}

impl Bound<'_> {
    /// The number, when it is one that SQLite reads as a non-negative integer (a LIMIT).
    pub fn as_count(&self) -> Option<u64> {
        match *self {
            Bound::Integer(n) => u64::try_from(n).ok(),
            Bound::Real(n) if n >= 0.0 && n.fract() == 0.0 && n < 9.2e18 => Some(n as u64),
            _ => None,
        }
    }
}
/// One argument of a `stmt.run/get/all(…)` call: a value the store computed (bound as it is)
/// or a caller's value (bound by better-sqlite3's rules, arrays spread, one named-parameter
/// object).
#[derive(Debug, Clone)]
pub enum Param<'a> {
    /// A value of the store's own.
    Own(Bound<'a>),
    /// A caller's value.
    Js(Js<'a>),
}

impl<'a> Param<'a> {
    /// The store's own text.
    pub fn text(text: &'a str) -> Param<'a> {
        Param::Own(Bound::text(text))
    }

    /// The store's own integer.
    pub fn int(value: i64) -> Param<'a> {
        Param::Own(Bound::Integer(value))
    }

    /// The store's own bytes.
    pub fn blob(bytes: &[u8]) -> Param<'a> {
        Param::Own(Bound::Blob(bytes.to_vec()))
    }

    /// SQL NULL.
    pub fn null() -> Param<'a> {
        Param::Own(Bound::Null)
    }
}

/// [`bind_all`] for a parameter list mixing the store's values and the caller's, with one
/// argument per `?` as every statement of the store is written.
pub fn bind_params<'a>(params: &[Param<'a>]) -> Result<Vec<Bound<'a>>> {
    bind_params_counted(params, params.len())
}

/// [`bind_params`] for `statement`, whose SQL was built from a caller's list (a list that is
/// not an array can give fewer `?` than values): better-sqlite3's count errors against the
/// statement's own parameter count.
pub fn bind_params_for<'a>(
    statement: &impl crate::sql::ParameterCount,
    params: &[Param<'a>],
) -> Result<Vec<Bound<'a>>> {
    bind_params_counted(params, statement.parameter_count())
}

fn bind_params_counted<'a>(params: &[Param<'a>], count: usize) -> Result<Vec<Bound<'a>>> {
    let mut binder = Binder::new(count);
    for param in params {
        match param {
            Param::Own(bound) => binder.push(bound.clone())?,
            Param::Js(value) => binder.argument(*value)?,
        }
    }
    binder.finish()
}
