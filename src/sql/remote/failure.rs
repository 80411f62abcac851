//! What the cluster engine reports: SQL errors as SQLite's own, and a failure of the cluster
//! itself as a [`Failure`] with one of the [`codes`] (the `code` of the JS error).

use dqlite_wire::{ErrorKind, Outcome, ReplyLimit};

/// The codes a cluster failure carries (the `code` of the JS error).
pub mod codes {
    /// A value the wire protocol cannot carry (text with a NUL character: dqlite sends text as
    /// C strings); nothing was sent.
    pub const UNSUPPORTED_VALUE: &str = "DQLITE_UNSUPPORTED_VALUE";
    /// Nothing was applied and no leader answered within the deadline.
    pub const UNAVAILABLE: &str = "DQLITE_UNAVAILABLE";
    /// The transaction was lost before its COMMIT: nothing of it was applied.
    pub const ROLLED_BACK: &str = "DQLITE_ROLLED_BACK";
    /// A COMMIT (or a write outside a transaction) was sent and its reply lost: it may or may
    /// not have been applied.
    pub const OUTCOME_UNKNOWN: &str = "DQLITE_OUTCOME_UNKNOWN";
    /// The URL's nodes belong to different clusters, or a reconnection reached another cluster
    /// than the one the store opened (`dqlite_wire::identity`); nothing was sent to it.
    pub const CLUSTER_MISMATCH: &str = "DQLITE_CLUSTER_MISMATCH";
    /// The `dqlite://` address is malformed (no nodes, no database name, a bad port or host, a
    /// character a database name cannot have); nothing was sent or looked up.
    pub const BAD_ADDRESS: &str = "DQLITE_BAD_ADDRESS";
    /// A node's host name does not resolve; it was looked up once.
    pub const UNRESOLVED: &str = "DQLITE_UNRESOLVED";
    /// An address answers, but not as a dqlite node (another service on that port).
    pub const NOT_DQLITE: &str = "DQLITE_NOT_DQLITE";
    /// Every address refused the connection on a store's first connect: nothing listens there.
    pub const REFUSED: &str = "DQLITE_REFUSED";
    /// A reply brought more rows or bytes than `maxReplyRows` / `maxReplyBytes`; its connection
    /// was closed (a transaction open on it with it).
    pub const REPLY_TOO_LARGE: &str = "DQLITE_REPLY_TOO_LARGE";
}

/// A failure of the cluster (not of the SQL): its code (see [`codes`]) and message.
#[derive(Debug, Clone)]
pub struct Failure {
    /// One of [`codes`].
    pub code: &'static str,
    /// What happened.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

pub(super) fn sqlite_error(code: i32, message: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(message.to_owned()))
}

pub(super) fn failure(code: &'static str, message: String) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(Failure { code, message }))
}

/// A client error as the seam reports it.
pub(super) fn error(e: dqlite_wire::Error) -> rusqlite::Error {
    if let ErrorKind::Sql { code, message } = e.kind() {
        if e.outcome() == Outcome::Failed {
            return sqlite_error(*code as i32, message);
        }
    }
    let code = match e.kind() {
        ErrorKind::ClusterMismatch(_) => {
            return failure(
                codes::CLUSTER_MISMATCH,
                format!(
                    "Pi Workflows cluster: {e}. A store uses one cluster: list only its nodes' \
                     addresses (go-dqlite's shell lists them: dqlite -s ADDRESS DATABASE, then \
                     .cluster); a node that formed a cluster of its own joins with a new, empty \
                     data directory and --join"
                ),
            );
        }
        ErrorKind::InvalidArgument(message) => {
            return failure(
                codes::UNSUPPORTED_VALUE,
                format!("Pi Workflows cluster: {message} (dqlite cannot store it)"),
            );
        }
        ErrorKind::ReplyTooLarge { limit } => {
            let (what, option) = match limit {
                ReplyLimit::Rows(n) => (format!("{n} rows"), "maxReplyRows"),
                ReplyLimit::Bytes(n) => (format!("{n} bytes"), "maxReplyBytes"),
            };
            return failure(
                codes::REPLY_TOO_LARGE,
                format!(
                    "Pi Workflows cluster: a reply brought more than {what} (the cluster option \
                     {option}); the rest was not read and its connection was closed, rolling \
                     back any transaction open on it"
                ),
            );
        }
        ErrorKind::BadAddress { .. } => codes::BAD_ADDRESS,
        ErrorKind::Unresolved { .. } => codes::UNRESOLVED,
        ErrorKind::NotDqlite { .. } => codes::NOT_DQLITE,
        ErrorKind::Refused { .. } => codes::REFUSED,
        _ => match e.outcome() {
            Outcome::Unknown => codes::OUTCOME_UNKNOWN,
            Outcome::RolledBack => codes::ROLLED_BACK,
            Outcome::NotApplied | Outcome::Failed => codes::UNAVAILABLE,
        },
    };
    failure(code, format!("Pi Workflows cluster: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_mismatch_has_its_own_code_and_names_both_clusters() {
        let node = |id, address: &str| dqlite_wire::NodeInfo {
            id,
            address: address.into(),
            role: 0,
        };
        let mismatch = dqlite_wire::identity::Mismatch {
            kept: ("10.0.0.1:9001".into(), vec![node(1, "10.0.0.1:9001")]),
            others: vec![("10.0.0.2:9001".into(), vec![node(1, "10.0.0.2:9001")])],
            reconnection: false,
        };
        let e = error(dqlite_wire::Error::new(
            ErrorKind::ClusterMismatch(Box::new(mismatch)),
            Outcome::NotApplied,
        ));
        match crate::error::StoreError::from(e) {
            crate::error::StoreError::Js { code, message, .. } => {
                assert_eq!(code.as_deref(), Some(codes::CLUSTER_MISMATCH));
                assert!(
                    message.contains("10.0.0.1:9001 is in the cluster of [1@10.0.0.1:9001]")
                        && message.contains("10.0.0.2:9001 is in the cluster of [1@10.0.0.2:9001]"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cluster_failure_keeps_its_code_and_an_sql_error_its_sqlite_code() {
        let lost = error(dqlite_wire::Error::new(
            ErrorKind::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            Outcome::Unknown,
        ));
        match crate::error::StoreError::from(lost) {
            crate::error::StoreError::Js { name, code, .. } => {
                assert_eq!(name, "Error");
                assert_eq!(code.as_deref(), Some(codes::OUTCOME_UNKNOWN));
            }
            other => panic!("{other:?}"),
        }
        let unique = error(dqlite_wire::Error::from_failure(
            2067,
            "UNIQUE constraint failed: t.a".into(),
        ));
        assert_eq!(
            crate::error::StoreError::from(unique),
            crate::error::StoreError::Sqlite {
                code: "SQLITE_CONSTRAINT_UNIQUE".into(),
                message: "UNIQUE constraint failed: t.a".into()
            }
        );
    }
}
