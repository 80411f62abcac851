//! Errors, and what each one says about the request that caused it.
//!
//! Every error carries an [`Outcome`]: whether the request certainly had no
//! effect on the cluster ([`Outcome::NotApplied`], safe to retry after
//! reconnecting), ran and failed ([`Outcome::Failed`]), was part of an
//! interactive transaction that is now gone ([`Outcome::RolledBack`], retry
//! the whole transaction), or may or may not have been committed
//! ([`Outcome::Unknown`], never retried automatically).
//!
//! Failure responses keep SQLite's *extended* result code. dqlite's own
//! codes are extended I/O errors: `SQLITE_IOERR_NOT_LEADER` (10 | 40 << 8)
//! means the node refused the request before running it, and
//! `SQLITE_IOERR_LEADERSHIP_LOST` (10 | 41 << 8) means the node lost
//! leadership while a write was being replicated — the write may still be
//! committed by the next leader.

use std::fmt;
use std::io;
use std::time::Duration;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// SQLite's primary code for I/O errors.
pub const SQLITE_IOERR: u64 = 10;
/// The node is not the leader (checked before the request runs).
pub const SQLITE_IOERR_NOT_LEADER: u64 = SQLITE_IOERR | (40 << 8);
/// The node lost leadership while replicating the request's changes.
pub const SQLITE_IOERR_LEADERSHIP_LOST: u64 = SQLITE_IOERR | (41 << 8);
/// Pre-1.0 spelling of NOT_LEADER, still recognised.
pub const SQLITE_IOERR_NOT_LEADER_LEGACY: u64 = SQLITE_IOERR | (32 << 8);
/// Pre-1.0 spelling of LEADERSHIP_LOST, still recognised.
pub const SQLITE_IOERR_LEADERSHIP_LOST_LEGACY: u64 = SQLITE_IOERR | (33 << 8);
/// SQLITE_BUSY: another writer, or a checkpoint in progress.
pub const SQLITE_BUSY: u64 = 5;
/// What dqlite 1.11 answers when its leader refuses a statement while it
/// hands leadership over: raft's `RAFT_NOTLEADER` (7) passed through as the
/// failure code, which reads as `SQLITE_NOMEM`, with the connection's stale
/// message ("no more rows available"). The statement never ran. A real
/// SQLITE_NOMEM of the node is handled alike: it ran nothing either (SQLite
/// rolls back what an out-of-memory error interrupts).
pub const SQLITE_NOMEM_OR_RAFT_NOTLEADER: u64 = 7;
/// SQLITE_INTERRUPT.
pub const SQLITE_INTERRUPT: u64 = 9;
/// SQLITE_NOTFOUND: dqlite's answer for an unknown database or statement id,
/// which also follows a leadership change.
pub const SQLITE_NOTFOUND: u64 = 12;

/// What the cluster did with the request that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The request had no effect: it was never (completely) sent, the node
    /// refused it before running it, or it only read. Safe to retry once
    /// reconnected to the leader.
    NotApplied,
    /// The statement ran and failed with a SQL error; it changed nothing
    /// (for a multi-statement text, statements before the failing one ran).
    /// Retrying repeats the failure unless the cause was transient
    /// (`SQLITE_BUSY`); that is the caller's call.
    Failed,
    /// The request belonged to an interactive transaction that is gone: the
    /// connection or the leadership was lost before COMMIT was sent, so the
    /// server rolled it back. Nothing of it was committed; retry the whole
    /// transaction from BEGIN.
    RolledBack,
    /// A write or COMMIT was sent and no reply came (connection lost, reply
    /// timed out, or the leader lost leadership while replicating). It may
    /// have been committed or not. Never retried by this crate.
    Unknown,
}

/// What went wrong.
#[derive(Debug)]
pub enum ErrorKind {
    /// A failure response: a SQL error with its extended result code.
    Sql { code: u64, message: String },
    /// The node is not the leader (the request did not run).
    NotLeader { code: u64, message: String },
    /// The node lost leadership while replicating the request.
    LeadershipLost { code: u64, message: String },
    /// The socket failed (refused, reset, closed by the peer, ...).
    Io(io::Error),
    /// No reply within the configured timeout.
    Timeout { op: &'static str, after: Duration },
    /// The server sent something this client cannot read.
    Protocol(String),
    /// The caller's arguments cannot be encoded (checked before sending).
    InvalidArgument(String),
    /// No leader could be reached before the deadline.
    NoLeader {
        attempts: u32,
        waited: Duration,
        last: Option<Box<Error>>,
    },
    /// The connection failed earlier and must be replaced.
    Broken,
    /// The nodes reached belong to different clusters (see [`crate::identity`]); nothing was
    /// sent to the one refused.
    ClusterMismatch(Box<crate::identity::Mismatch>),
    /// A malformed address (a `dqlite://` URL or `host:port`), refused
    /// before any I/O: `address` as given, `reason` what is wrong with it.
    BadAddress { address: String, reason: String },
    /// A well-formed host name that the system's resolver does not know.
    Unresolved { address: String, error: io::Error },
    /// The address answered with something that is not dqlite (another
    /// service on that port): `detail` says what came back.
    NotDqlite { address: String, detail: String },
    /// Every address refused the connection (nothing listens there), on a
    /// cluster never reached before: a configuration error, not a restart.
    Refused { addresses: Vec<String> },
    /// The reply brought more rows or bytes than the configured limit; the
    /// connection was dropped with what had arrived.
    ReplyTooLarge { limit: ReplyLimit },
    /// The node a reply was awaited from stopped answering and another node
    /// leads now; the request was abandoned.
    LeaderMoved { from: String, to: String },
}

/// Which limit a reply went past (see [`crate::ReplyLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyLimit {
    Rows(u64),
    Bytes(u64),
}

/// An error with the [`Outcome`] of the request that caused it.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    outcome: Outcome,
}

impl Error {
    pub fn new(kind: ErrorKind, outcome: Outcome) -> Error {
        Error { kind, outcome }
    }

    pub(crate) fn protocol(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Protocol(msg.into()), Outcome::NotApplied)
    }

    pub(crate) fn invalid_argument(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument(msg.into()), Outcome::NotApplied)
    }

    pub(crate) fn bad_address(address: &str, reason: impl Into<String>) -> Error {
        let kind = ErrorKind::BadAddress {
            address: address.to_owned(),
            reason: reason.into(),
        };
        Error::new(kind, Outcome::NotApplied)
    }

    /// The error a failure response stands for, with `Failed` until the
    /// connection that sent the request decides its outcome.
    pub fn from_failure(code: u64, message: String) -> Error {
        let kind = match code {
            SQLITE_IOERR_NOT_LEADER
            | SQLITE_IOERR_NOT_LEADER_LEGACY
            | SQLITE_NOMEM_OR_RAFT_NOTLEADER => ErrorKind::NotLeader { code, message },
            SQLITE_IOERR_LEADERSHIP_LOST | SQLITE_IOERR_LEADERSHIP_LOST_LEGACY => {
                ErrorKind::LeadershipLost { code, message }
            }
            _ => ErrorKind::Sql { code, message },
        };
        Error::new(kind, Outcome::Failed)
    }

    pub(crate) fn with_outcome(mut self, outcome: Outcome) -> Error {
        self.outcome = outcome;
        self
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// True when the request certainly had no effect and may be sent again
    /// (on a fresh leader connection when [`Error::needs_reconnect`]).
    pub fn is_retry_safe(&self) -> bool {
        self.outcome == Outcome::NotApplied
    }

    /// True when a write may or may not have been committed.
    pub fn is_outcome_unknown(&self) -> bool {
        self.outcome == Outcome::Unknown
    }

    /// True when the connection that returned this error is unusable (or on
    /// a node that is no longer the leader) and must be replaced.
    pub fn needs_reconnect(&self) -> bool {
        match &self.kind {
            ErrorKind::Sql { code, .. } => *code == SQLITE_NOTFOUND,
            ErrorKind::InvalidArgument(_) | ErrorKind::BadAddress { .. } => false,
            _ => true,
        }
    }

    /// True for "this node is not (or no longer) the leader".
    pub fn is_leadership_error(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::NotLeader { .. } | ErrorKind::LeadershipLost { .. }
        )
    }

    /// The extended SQLite result code of a failure response.
    pub fn code(&self) -> Option<u64> {
        match &self.kind {
            ErrorKind::Sql { code, .. }
            | ErrorKind::NotLeader { code, .. }
            | ErrorKind::LeadershipLost { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The primary SQLite result code (the low byte of the extended one).
    pub fn primary_code(&self) -> Option<u64> {
        self.code().map(|c| c & 0xff)
    }

    /// The server's message of a failure response.
    pub fn message(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Sql { message, .. }
            | ErrorKind::NotLeader { message, .. }
            | ErrorKind::LeadershipLost { message, .. } => Some(message),
            _ => None,
        }
    }

    /// A short stable name of the outcome, for error codes higher up.
    pub fn outcome_code(&self) -> &'static str {
        match self.outcome {
            Outcome::NotApplied => "DQLITE_NOT_APPLIED",
            Outcome::Failed => "DQLITE_FAILED",
            Outcome::RolledBack => "DQLITE_ROLLED_BACK",
            Outcome::Unknown => "DQLITE_OUTCOME_UNKNOWN",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Sql { code, message } => write!(f, "{message} (SQLite code {code})")?,
            ErrorKind::NotLeader { code, message } => {
                write!(f, "node is not the leader: {message} (code {code})")?
            }
            ErrorKind::LeadershipLost { code, message } => {
                write!(f, "leadership lost: {message} (code {code})")?
            }
            ErrorKind::Io(e) => write!(f, "connection error: {e}")?,
            ErrorKind::Timeout { op, after } => write!(f, "{op} timed out after {after:?}")?,
            ErrorKind::Protocol(m) => write!(f, "protocol error: {m}")?,
            ErrorKind::InvalidArgument(m) => write!(f, "invalid argument: {m}")?,
            ErrorKind::NoLeader {
                attempts,
                waited,
                last,
            } => {
                write!(
                    f,
                    "no leader reachable after {attempts} attempts over {waited:?}"
                )?;
                if let Some(last) = last {
                    write!(f, " (last: {last})")?;
                }
            }
            ErrorKind::Broken => write!(f, "connection is broken by an earlier error")?,
            ErrorKind::ClusterMismatch(m) => write!(f, "{m}")?,
            ErrorKind::BadAddress { address, reason } => {
                write!(f, "bad dqlite address \"{address}\": {reason}")?
            }
            ErrorKind::Unresolved { address, error } => {
                write!(f, "the host of {address} cannot be resolved: {error}")?
            }
            ErrorKind::NotDqlite { address, detail } => write!(
                f,
                "{address} does not answer the dqlite handshake ({detail}): is it a dqlite node's port?"
            )?,
            ErrorKind::Refused { addresses } => write!(
                f,
                "no node accepted a connection ({} refused): is the dqlite node running, and is the port right?",
                addresses.join(", ")
            )?,
            ErrorKind::ReplyTooLarge { limit } => match limit {
                ReplyLimit::Rows(n) => write!(f, "the reply brought more than {n} rows")?,
                ReplyLimit::Bytes(n) => write!(f, "the reply brought more than {n} bytes")?,
            },
            ErrorKind::LeaderMoved { from, to } => write!(
                f,
                "{from} stopped answering and {to} leads now; the request was abandoned"
            )?,
        }
        match self.outcome {
            Outcome::NotApplied | Outcome::Failed => Ok(()),
            Outcome::RolledBack => write!(f, "; the transaction was rolled back"),
            Outcome::Unknown => write!(f, "; the outcome of the write is unknown"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) | ErrorKind::Unresolved { error: e, .. } => Some(e),
            ErrorKind::NoLeader { last: Some(e), .. } => Some(e.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_codes_map_to_kinds_and_keep_the_extended_code() {
        let e = Error::from_failure(SQLITE_IOERR_NOT_LEADER, "not leader".into());
        assert!(matches!(e.kind(), ErrorKind::NotLeader { .. }));
        assert!(e.is_leadership_error() && e.needs_reconnect());
        assert_eq!(e.code(), Some(10250));
        assert_eq!(e.primary_code(), Some(10));
        // dqlite 1.11's refusal during a leadership transfer.
        let e = Error::from_failure(7, "no more rows available".into());
        assert!(e.is_leadership_error() && e.needs_reconnect());
        let e = Error::from_failure(SQLITE_IOERR_LEADERSHIP_LOST, "disk I/O error".into());
        assert!(matches!(e.kind(), ErrorKind::LeadershipLost { .. }));
        assert_eq!(e.code(), Some(10506));
        // SQLITE_CONSTRAINT_UNIQUE = 19 | 8 << 8
        let e = Error::from_failure(2067, "UNIQUE constraint failed: t.a".into());
        assert!(matches!(e.kind(), ErrorKind::Sql { code: 2067, .. }));
        assert_eq!(e.primary_code(), Some(19));
        assert!(!e.needs_reconnect() && !e.is_leadership_error());
        assert_eq!(e.message(), Some("UNIQUE constraint failed: t.a"));
    }

    #[test]
    fn outcome_is_reported_and_displayed() {
        let e = Error::new(
            ErrorKind::Io(io::Error::from(io::ErrorKind::ConnectionReset)),
            Outcome::Unknown,
        );
        assert!(e.is_outcome_unknown() && !e.is_retry_safe());
        assert_eq!(e.outcome_code(), "DQLITE_OUTCOME_UNKNOWN");
        assert!(e.to_string().contains("unknown"));
    }
}
