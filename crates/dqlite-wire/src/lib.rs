//! A blocking client for the dqlite wire protocol, version 1.
//!
//! dqlite is SQLite with its write-ahead log replicated by Raft. Clients talk
//! to the leader over a small binary protocol; this crate implements it with
//! std only (blocking `std::net` sockets with timeouts), so it can run on
//! worker threads without a runtime or a system library.
//!
//! * [`wire`] — framing and field encoding; [`value`] — the value types;
//! * [`message`] — the requests and responses;
//! * [`conn`] — one connection: handshake, statements, streams, transactions;
//! * [`cluster`] — leader discovery, reconnection with backoff, retrying
//!   sessions;
//! * [`error`] — typed errors and the [`Outcome`] of the failed request;
//! * [`identity`] — which cluster a node belongs to, and the pin that keeps a
//!   [`Cluster`] on one;
//! * [`harness`] — a local test cluster on loopback (`piw-dqlite-node` or
//!   `dqlite-demo` nodes).

pub mod cluster;
pub mod conn;
pub mod error;
pub mod harness;
pub mod identity;
pub mod message;
pub mod value;
pub mod wire;

pub use cluster::{parse_url, Backoff, Cluster, Config, Session};
pub use conn::{Connection, ExecResult, QueryResult, Rows, Statement, Timeouts, Transaction};
pub use error::{Error, ErrorKind, Outcome, Result};
pub use message::NodeInfo;
pub use value::Value;
