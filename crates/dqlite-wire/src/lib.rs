//! A blocking client for the dqlite wire protocol, version 1.
//!
//! dqlite is SQLite with its write-ahead log replicated by Raft. Clients talk
//! to the leader over a small binary protocol; this crate implements it with
//! std only (blocking `std::net` sockets with timeouts), so it can run on
//! worker threads without a runtime or a system library.
//!
//! * [`wire`] — framing and field encoding; [`value`] — the value types;
//! * [`message`] — the requests and responses;
//! * [`address`] — node addresses and `dqlite://` URLs, checked before any
//!   I/O;
//! * [`conn`] — one connection: handshake, statements, streams, transactions,
//!   each request bounded by one deadline (`deadline`) and its reply by
//!   [`budget`]'s limits, its first reply checked to be dqlite's
//!   (`handshake`);
//! * [`cluster`] — leader discovery, reconnection with backoff (`backoff`),
//!   retrying sessions (`session`); [`watch`] — noticing a leader that
//!   stopped answering;
//! * [`error`] — typed errors and the [`Outcome`] of the failed request;
//! * [`identity`] — which cluster a node belongs to, and the pin that keeps a
//!   [`Cluster`] on one;
//! * [`harness`] — a local test cluster on loopback (`piw-dqlite-node` or
//!   `dqlite-demo` nodes); [`fake`] — scripted misbehaving nodes for tests.

pub mod address;
mod backoff;
pub mod budget;
pub mod cluster;
pub mod conn;
mod deadline;
pub mod error;
pub mod fake;
mod handshake;
pub mod harness;
pub mod identity;
pub mod message;
mod session;
pub mod value;
pub mod watch;
pub mod wire;

pub use budget::ReplyLimits;
pub use cluster::{parse_url, Backoff, Cluster, Config, Session};
pub use conn::{
    request_writes, Connection, ExecResult, QueryResult, Rows, Statement, Timeouts, Transaction,
};
pub use error::{Error, ErrorKind, Outcome, ReplyLimit, Result};
pub use message::NodeInfo;
pub use value::Value;
