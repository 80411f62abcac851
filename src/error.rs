//! The one error type of the core, and its wire form for the JS layer.
//!
//! Every failure a method can report is a [`StoreError`]. The JS layer turns the wire form back
//! into the caller-realm error the reference throws (same class, `name`, message and fields).

use serde_json::{json, Value};

/// The core's result type: errors are always [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Every failure a store or connection method reports, as the JS error it becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// A plain `Error` with this message.
    Plain(String),
    /// A plain `Error` whose message interpolates a caller's string with lone surrogates (see
    /// [`crate::js::message_error`]): `message` has U+FFFD for each, `wtf8` is the hex of the
    /// message's WTF-8 bytes, from which the JS layer builds the message JavaScript builds.
    PlainWtf8 {
        /// Readable text.
        message: String,
        /// The message's WTF-8, hex.
        wtf8: String,
    },
    /// A `TypeError` (the closed-connection error of better-sqlite3).
    Type(String),
    /// A `RangeError` (better-sqlite3's parameter-count errors).
    Range(String),
    /// An error JavaScript itself throws in the reference (V8's or Node's): its class name,
    /// message and Node's `code` when it has one (`ERR_INVALID_ARG_TYPE`).
    Js {
        /// The constructor name (`TypeError`, `RangeError`, `Error`).
        name: String,
        /// The message.
        message: String,
        /// Node's error code, an own enumerable property of the error.
        code: Option<String>,
    },
    /// An SQLite failure: better-sqlite3's `SqliteError` with SQLite's message and code name.
    Sqlite {
        /// SQLite's extended result code name, e.g. `SQLITE_CONSTRAINT_UNIQUE`.
        code: String,
        /// SQLite's message.
        message: String,
    },
    /// `ResourceConflictError(controller, key)`.
    ResourceConflict {
        /// The `controller` value the caller gave (interpolated as JavaScript would).
        controller: Value,
        /// The `key` value the caller gave.
        key: Value,
    },
    /// `ResourceNotFoundError(controller, key)`.
    ResourceNotFound {
        /// The `controller` value the caller gave (interpolated as JavaScript would).
        controller: Value,
        /// The `key` value the caller gave.
        key: Value,
    },
    /// `EffectRequestConflictError(key)`.
    EffectRequestConflict {
        /// The effect key, `JSON.stringify`-ed in the message.
        key: Value,
    },
    /// `WorkflowRequestConflictError(key)`.
    WorkflowRequestConflict {
        /// The request key, `JSON.stringify`-ed in the message.
        key: Value,
    },
    /// A value JavaScript threw while a live call read or coerced the caller's values (a getter,
    /// a Proxy trap, a `toString`): the napi handle of that value, valid until the call returns.
    /// The call's entry point rethrows the very value (src/addon/store.rs); it has no wire form.
    Thrown(usize),
    /// The read-write open's blob prune failed after the constructor returned (see
    /// `state::prune::at_open`), reported by the first use of the state: `error` is what the
    /// reference's constructor would have thrown (same class, message and `code`); the JS layer
    /// marks it as the prune's (`openPrune`, `filePath`, a note in the stack's first line).
    OpenPrune {
        /// The state file whose prune failed.
        file_path: String,
        /// The prune's own error.
        error: Box<StoreError>,
    },
}

impl StoreError {
    /// A plain `Error(message)`.
    pub fn plain(message: impl Into<String>) -> Self {
        StoreError::Plain(message.into())
    }

    /// `error` as the failure of the open's blob prune of `file_path`.
    pub fn open_prune(error: StoreError, file_path: &std::path::Path) -> Self {
        StoreError::OpenPrune {
            file_path: file_path.to_string_lossy().into_owned(),
            error: Box::new(error),
        }
    }

    /// better-sqlite3's `TypeError` for a closed connection.
    pub fn closed() -> Self {
        StoreError::Type("The database connection is not open".into())
    }

    /// Whether this is a failure of the file or its locks rather than of the call: busy or
    /// locked, I/O error, full disk, out of memory, corrupt, read-only, unopenable. Retrying the
    /// same call another way cannot make such an error the caller's.
    pub fn is_environmental(&self) -> bool {
        const CODES: &[&str] = &[
            "SQLITE_BUSY",
            "SQLITE_LOCKED",
            "SQLITE_IOERR",
            "SQLITE_FULL",
            "SQLITE_NOMEM",
            "SQLITE_CORRUPT",
            "SQLITE_NOTADB",
            "SQLITE_READONLY",
            "SQLITE_CANTOPEN",
            "SQLITE_PROTOCOL",
            "SQLITE_INTERRUPT",
            "SQLITE_PERM",
        ];
        match self {
            StoreError::Sqlite { code, .. } => CODES.iter().any(|prefix| {
                code.strip_prefix(prefix)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
            }),
            StoreError::OpenPrune { error, .. } => error.is_environmental(),
            _ => false,
        }
    }

    /// The JSON the JS layer decodes into an error object.
    pub fn to_wire(&self) -> Value {
        match self {
            StoreError::Plain(message) => json!({ "kind": "Error", "message": message }),
            StoreError::PlainWtf8 { message, wtf8 } => {
                json!({ "kind": "Error", "message": message, "wtf8": wtf8 })
            }
            StoreError::Type(message) => json!({ "kind": "TypeError", "message": message }),
            StoreError::Range(message) => json!({ "kind": "RangeError", "message": message }),
            StoreError::Js {
                name,
                message,
                code: Some(code),
            } => json!({ "kind": name, "message": message, "code": code }),
            StoreError::Js {
                name,
                message,
                code: None,
            } => json!({ "kind": name, "message": message }),
            StoreError::Sqlite { code, message } => {
                json!({ "kind": "SqliteError", "message": message, "code": code })
            }
            StoreError::ResourceConflict { controller, key } => {
                json!({ "kind": "ResourceConflictError", "args": [controller, key] })
            }
            StoreError::ResourceNotFound { controller, key } => {
                json!({ "kind": "ResourceNotFoundError", "args": [controller, key] })
            }
            StoreError::EffectRequestConflict { key } => {
                json!({ "kind": "EffectRequestConflictError", "args": [key] })
            }
            StoreError::WorkflowRequestConflict { key } => {
                json!({ "kind": "WorkflowRequestConflictError", "args": [key] })
            }
            StoreError::Thrown(_) => json!({ "kind": "Thrown" }),
            StoreError::OpenPrune { file_path, error } => {
                let mut wire = error.to_wire();
                wire["openPrune"] = json!(file_path);
                wire
            }
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_wire())
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        match &error {
            rusqlite::Error::SqliteFailure(failure, message) => StoreError::Sqlite {
                code: sqlite_code_name(failure.extended_code).to_string(),
                message: message
                    .clone()
                    .unwrap_or_else(|| rusqlite::ffi::code_to_str(failure.extended_code).into()),
            },
            rusqlite::Error::SqlInputError { error, msg, .. } => StoreError::Sqlite {
                code: sqlite_code_name(error.extended_code).to_string(),
                message: msg.clone(),
            },
            rusqlite::Error::ToSqlConversionFailure(inner) => {
                match inner.downcast_ref::<crate::sql::remote::Failure>() {
                    Some(failure) => StoreError::Js {
                        name: "Error".into(),
                        message: failure.message.clone(),
                        code: Some(failure.code.into()),
                    },
                    None => StoreError::Plain(error.to_string()),
                }
            }
            other => StoreError::Plain(other.to_string()),
        }
    }
}

/// better-sqlite3's name for an (extended) SQLite result code.
pub fn sqlite_code_name(code: i32) -> &'static str {
    use rusqlite::ffi::*;
    match code {
        SQLITE_ERROR => "SQLITE_ERROR",
        SQLITE_INTERNAL => "SQLITE_INTERNAL",
        SQLITE_PERM => "SQLITE_PERM",
        SQLITE_ABORT => "SQLITE_ABORT",
        SQLITE_BUSY => "SQLITE_BUSY",
        SQLITE_LOCKED => "SQLITE_LOCKED",
        SQLITE_NOMEM => "SQLITE_NOMEM",
        SQLITE_READONLY => "SQLITE_READONLY",
        SQLITE_INTERRUPT => "SQLITE_INTERRUPT",
        SQLITE_IOERR => "SQLITE_IOERR",
        SQLITE_CORRUPT => "SQLITE_CORRUPT",
        SQLITE_NOTFOUND => "SQLITE_NOTFOUND",
        SQLITE_FULL => "SQLITE_FULL",
        SQLITE_CANTOPEN => "SQLITE_CANTOPEN",
        SQLITE_PROTOCOL => "SQLITE_PROTOCOL",
        SQLITE_EMPTY => "SQLITE_EMPTY",
        SQLITE_SCHEMA => "SQLITE_SCHEMA",
        SQLITE_TOOBIG => "SQLITE_TOOBIG",
        SQLITE_CONSTRAINT => "SQLITE_CONSTRAINT",
        SQLITE_MISMATCH => "SQLITE_MISMATCH",
        SQLITE_MISUSE => "SQLITE_MISUSE",
        SQLITE_NOLFS => "SQLITE_NOLFS",
        SQLITE_AUTH => "SQLITE_AUTH",
        SQLITE_FORMAT => "SQLITE_FORMAT",
        SQLITE_RANGE => "SQLITE_RANGE",
        SQLITE_NOTADB => "SQLITE_NOTADB",
        SQLITE_BUSY_RECOVERY => "SQLITE_BUSY_RECOVERY",
        SQLITE_BUSY_SNAPSHOT => "SQLITE_BUSY_SNAPSHOT",
        SQLITE_BUSY_TIMEOUT => "SQLITE_BUSY_TIMEOUT",
        SQLITE_LOCKED_SHAREDCACHE => "SQLITE_LOCKED_SHAREDCACHE",
        SQLITE_READONLY_RECOVERY => "SQLITE_READONLY_RECOVERY",
        SQLITE_READONLY_CANTLOCK => "SQLITE_READONLY_CANTLOCK",
        SQLITE_READONLY_ROLLBACK => "SQLITE_READONLY_ROLLBACK",
        SQLITE_READONLY_DBMOVED => "SQLITE_READONLY_DBMOVED",
        SQLITE_READONLY_CANTINIT => "SQLITE_READONLY_CANTINIT",
        SQLITE_READONLY_DIRECTORY => "SQLITE_READONLY_DIRECTORY",
        SQLITE_IOERR_READ => "SQLITE_IOERR_READ",
        SQLITE_IOERR_SHORT_READ => "SQLITE_IOERR_SHORT_READ",
        SQLITE_IOERR_WRITE => "SQLITE_IOERR_WRITE",
        SQLITE_IOERR_FSYNC => "SQLITE_IOERR_FSYNC",
        SQLITE_IOERR_TRUNCATE => "SQLITE_IOERR_TRUNCATE",
        SQLITE_IOERR_FSTAT => "SQLITE_IOERR_FSTAT",
        SQLITE_IOERR_LOCK => "SQLITE_IOERR_LOCK",
        SQLITE_IOERR_SHMOPEN => "SQLITE_IOERR_SHMOPEN",
        SQLITE_IOERR_SHMSIZE => "SQLITE_IOERR_SHMSIZE",
        SQLITE_IOERR_SHMMAP => "SQLITE_IOERR_SHMMAP",
        SQLITE_CANTOPEN_ISDIR => "SQLITE_CANTOPEN_ISDIR",
        SQLITE_CANTOPEN_FULLPATH => "SQLITE_CANTOPEN_FULLPATH",
        SQLITE_CORRUPT_VTAB => "SQLITE_CORRUPT_VTAB",
        SQLITE_CONSTRAINT_CHECK => "SQLITE_CONSTRAINT_CHECK",
        SQLITE_CONSTRAINT_COMMITHOOK => "SQLITE_CONSTRAINT_COMMITHOOK",
        SQLITE_CONSTRAINT_FOREIGNKEY => "SQLITE_CONSTRAINT_FOREIGNKEY",
        SQLITE_CONSTRAINT_FUNCTION => "SQLITE_CONSTRAINT_FUNCTION",
        SQLITE_CONSTRAINT_NOTNULL => "SQLITE_CONSTRAINT_NOTNULL",
        SQLITE_CONSTRAINT_PRIMARYKEY => "SQLITE_CONSTRAINT_PRIMARYKEY",
        SQLITE_CONSTRAINT_TRIGGER => "SQLITE_CONSTRAINT_TRIGGER",
        SQLITE_CONSTRAINT_UNIQUE => "SQLITE_CONSTRAINT_UNIQUE",
        SQLITE_CONSTRAINT_VTAB => "SQLITE_CONSTRAINT_VTAB",
        SQLITE_CONSTRAINT_ROWID => "SQLITE_CONSTRAINT_ROWID",
        SQLITE_CONSTRAINT_DATATYPE => "SQLITE_CONSTRAINT_DATATYPE",
        _ => match code & 0xff {
            SQLITE_CONSTRAINT => "SQLITE_CONSTRAINT",
            SQLITE_IOERR => "SQLITE_IOERR",
            SQLITE_BUSY => "SQLITE_BUSY",
            SQLITE_READONLY => "SQLITE_READONLY",
            SQLITE_CANTOPEN => "SQLITE_CANTOPEN",
            _ => "SQLITE_UNKNOWN",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::StoreError;

    fn sqlite(code: &str) -> StoreError {
        StoreError::Sqlite {
            code: code.into(),
            message: String::new(),
        }
    }

    #[test]
    fn file_and_lock_failures_are_environmental_the_calls_own_are_not() {
        for code in [
            "SQLITE_BUSY",
            "SQLITE_BUSY_TIMEOUT",
            "SQLITE_IOERR_WRITE",
            "SQLITE_IOERR_FSYNC",
            "SQLITE_FULL",
            "SQLITE_READONLY",
            "SQLITE_CORRUPT",
        ] {
            assert!(sqlite(code).is_environmental(), "{code}");
        }
        for code in [
            "SQLITE_CONSTRAINT_PRIMARYKEY",
            "SQLITE_CONSTRAINT_FOREIGNKEY",
            "SQLITE_ERROR",
            "SQLITE_TOOBIG",
            "SQLITE_FULLX",
        ] {
            assert!(!sqlite(code).is_environmental(), "{code}");
        }
        assert!(!StoreError::plain("Content-addressed blob conflict").is_environmental());
        assert!(!StoreError::closed().is_environmental());
    }

    /// The open prune's error is its SQLite error on the wire (the reference constructor's),
    /// with the file whose prune failed; what it is made of decides whether it is environmental.
    #[test]
    fn an_open_prune_error_is_its_own_error_naming_the_prune() {
        let path = std::path::Path::new("/state/state.sqlite");
        let full = StoreError::open_prune(sqlite("SQLITE_FULL"), path);
        assert!(full.is_environmental());
        assert_eq!(
            full.to_wire(),
            serde_json::json!({
                "kind": "SqliteError",
                "message": "",
                "code": "SQLITE_FULL",
                "openPrune": "/state/state.sqlite",
            })
        );
        let panicked = StoreError::open_prune(StoreError::plain("panicked"), path);
        assert!(!panicked.is_environmental());
        assert_eq!(panicked.to_wire()["kind"], "Error");
    }
}
