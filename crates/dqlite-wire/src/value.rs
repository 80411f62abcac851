//! SQLite values as they travel in dqlite tuples.
//!
//! A tuple slot carries a one-byte (parameters) or four-bit (rows) type code
//! followed by the value's encoding in the body. The five SQLite storage
//! classes have codes 1 to 5; dqlite adds three "special" codes derived from a
//! column's declared type: UNIXTIME (9, an INTEGER in a DATETIME, DATE or
//! TIMESTAMP column), ISO8601 (10, TEXT or NULL in such a column) and BOOLEAN
//! (11, an INTEGER in a BOOLEAN column).

/// Type code of a 64-bit signed integer.
pub const INTEGER: u8 = 1;
/// Type code of an IEEE 754 double.
pub const FLOAT: u8 = 2;
/// Type code of a UTF-8 text (zero-terminated, padded to a word).
pub const TEXT: u8 = 3;
/// Type code of a blob (a length word, then the bytes padded to a word).
pub const BLOB: u8 = 4;
/// Type code of SQL NULL (one zero word).
pub const NULL: u8 = 5;
/// Type code of an integer in a DATETIME/DATE/TIMESTAMP column (seconds).
pub const UNIXTIME: u8 = 9;
/// Type code of a text (or NULL, sent as "") in a DATETIME/DATE/TIMESTAMP column.
pub const ISO8601: u8 = 10;
/// Type code of an integer in a BOOLEAN column (0 or 1).
pub const BOOLEAN: u8 = 11;

/// One value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Integer(i64),
    Float(f64),
    Text(String),
    Blob(Vec<u8>),
    Null,
    /// A date/time as text. In rows, SQL NULL in a date column arrives as
    /// `Iso8601("")` (the server sends an empty string for it).
    Iso8601(String),
    Boolean(bool),
    /// Seconds since the epoch, read from an INTEGER in a date column. As a
    /// parameter it is sent as a plain INTEGER: dqlite 1.11 refuses code 9 in
    /// parameters.
    Unixtime(i64),
}

impl Value {
    /// The wire type code used for this value in a *parameter* tuple.
    pub fn param_code(&self) -> u8 {
        match self {
            Value::Integer(_) | Value::Unixtime(_) => INTEGER,
            Value::Float(_) => FLOAT,
            Value::Text(_) => TEXT,
            Value::Blob(_) => BLOB,
            Value::Null => NULL,
            Value::Iso8601(_) => ISO8601,
            Value::Boolean(_) => BOOLEAN,
        }
    }

    /// The wire type code of this value in a *row* tuple.
    pub fn row_code(&self) -> u8 {
        match self {
            Value::Unixtime(_) => UNIXTIME,
            other => other.param_code(),
        }
    }

    /// The value as SQLite stores it, folding dqlite's special types back
    /// into storage classes: UNIXTIME and BOOLEAN become INTEGER, ISO8601
    /// becomes TEXT, and the empty ISO8601 string (how a NULL in a date
    /// column is sent) becomes NULL.
    pub fn into_storage(self) -> Value {
        match self {
            Value::Unixtime(v) => Value::Integer(v),
            Value::Boolean(b) => Value::Integer(b as i64),
            Value::Iso8601(s) if s.is_empty() => Value::Null,
            Value::Iso8601(s) => Value::Text(s),
            other => other,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Integer(v) | Value::Unixtime(v) => Some(*v),
            Value::Boolean(b) => Some(*b as i64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) | Value::Iso8601(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_blob(&self) -> Option<&[u8]> {
        match self {
            Value::Blob(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Integer(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Blob(v.to_vec())
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}
