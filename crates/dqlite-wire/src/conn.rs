//! One connection to one dqlite node: its handshake and its requests (this
//! file); how a message goes out and its reply comes back, with the outcome
//! of each failure (`framing`); result streams ([`Rows`], `rows`);
//! interactive transactions ([`Transaction`], `transaction`).
//!
//! The server answers a connection's requests one at a time, in order: it
//! reads the next request only once it has answered the one before, so
//! requests written back to back wait in the socket and are run in turn
//! ([`Connection::begin_and_query`] sends two at once). A [`Connection`] is
//! used through `&mut self` and a streaming [`Rows`] borrows it until the
//! result is read to the end or interrupted. Any I/O or protocol failure marks the
//! connection broken: the byte stream can no longer be trusted, and every
//! later call fails with [`ErrorKind::Broken`] until it is replaced.
//!
//! Each error's [`Outcome`] is decided in `framing`, where it is known whether the
//! request was completely written, whether it may write, and whether it ran
//! inside a transaction begun with [`Connection::begin`].
//!
//! Every request has one deadline for writing it and reading its whole reply,
//! every batch of a result included: `timeouts.request` from when it is sent,
//! or the caller's own deadline ([`Connection::set_deadline`]) when that comes
//! first. A reply is also held to [`ReplyLimits`]. The first reply of a
//! connection must look like dqlite's ([`crate::handshake`]).

mod framing;
pub use framing::request_writes;
mod rows;
mod transaction;

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::address;
use crate::budget::{Budget, ReplyLimits};
use crate::deadline;
use crate::error::{Error, ErrorKind, Outcome, Result};
use crate::message::{NodeInfo, Request, Response};
use crate::value::Value;
use crate::watch::Watch;
use crate::wire::PROTOCOL_VERSION;

use framing::{io_error, Reply};
pub use rows::Rows;
pub use transaction::Transaction;

/// Socket timeouts of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect, per resolved address; through [`crate::Cluster`], also
    /// the handshake (the protocol version and who the leader is).
    pub connect: Duration,
    /// Writing a request and reading its whole reply (every rows batch).
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            request: Duration::from_secs(10),
        }
    }
}

/// Result of a statement that does not return rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecResult {
    pub last_insert_id: i64,
    pub rows_affected: u64,
}

/// A whole result set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// A statement prepared on one connection (ids are per connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    pub id: u32,
    /// Number of parameters the statement takes.
    pub params: u64,
}

/// What a request can do to the database, for deciding its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Reads or session-only requests: a lost reply changes nothing.
    Read,
    /// May write (Exec, ExecSql).
    Write,
    /// The COMMIT of a transaction begun with `begin`.
    Commit,
}

/// A connection to one node.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    address: String,
    timeouts: Timeouts,
    /// No request goes past this instant (see [`Connection::set_deadline`]).
    deadline: Option<Instant>,
    limits: ReplyLimits,
    watch: Option<Watch>,
    /// A reply has come: the peer speaks dqlite.
    answered: bool,
    db: Option<u32>,
    broken: bool,
    in_tx: bool,
    /// Requests sent whose replies are still to be read and only checked
    /// ([`Connection::commit_detached_unread`]).
    unread: usize,
}

impl Connection {
    /// Dial `address` (host:port) and send the protocol version.
    pub fn connect(address: &str, timeouts: Timeouts) -> Result<Connection> {
        Connection::connect_until(address, timeouts, Instant::now() + timeouts.connect)
    }

    /// [`Connection::connect`], given up at `deadline` if that comes first.
    /// A malformed address fails before any I/O, and only a valid host name
    /// is resolved ([`address::resolve`]).
    pub fn connect_until(
        address: &str,
        timeouts: Timeouts,
        deadline: Instant,
    ) -> Result<Connection> {
        let addrs: Vec<SocketAddr> = address::resolve(address, deadline)?;
        let mut last = None;
        let mut stream = None;
        for addr in addrs {
            match deadline::connect(&addr, timeouts.connect, deadline) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = stream.ok_or_else(|| {
            let e = last.unwrap_or_else(|| io::Error::other("address resolved to nothing"));
            io_error(e, "connect", timeouts.connect, Outcome::NotApplied)
        })?;
        stream
            .set_nodelay(true)
            .map_err(|e| Error::new(ErrorKind::Io(e), Outcome::NotApplied))?;
        let mut conn = Connection {
            stream,
            address: address.to_owned(),
            timeouts,
            deadline: None,
            limits: ReplyLimits::UNLIMITED,
            watch: None,
            answered: false,
            db: None,
            broken: false,
            in_tx: false,
            unread: 0,
        };
        conn.write_all(&PROTOCOL_VERSION.to_le_bytes(), deadline)?;
        Ok(conn)
    }

    /// The address this connection was dialled with.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// True once an I/O or protocol failure made the connection unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// True between [`Connection::begin`] and the transaction's end.
    pub fn in_transaction(&self) -> bool {
        self.in_tx
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    pub fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
    }

    /// Bound every request from now on by `deadline` as well as by
    /// `timeouts.request` (`None`: by the timeout only). A caller with a
    /// deadline of its own sets it here, so that no reply, however slowly it
    /// comes, holds it longer.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// The most one reply may bring from now on (unlimited by default).
    pub fn set_limits(&mut self, limits: ReplyLimits) {
        self.limits = limits;
    }

    /// Ask the other nodes who leads while a reply is late (see [`Watch`]).
    pub(crate) fn set_watch(&mut self, watch: Option<Watch>) {
        self.watch = watch;
    }

    /// When a request sent now must be answered.
    fn request_deadline(&self) -> Instant {
        let by_timeout = Instant::now() + self.timeouts.request;
        self.deadline.map_or(by_timeout, |d| d.min(by_timeout))
    }

    /// The leader as this node knows it, `None` when it knows none.
    pub fn leader(&mut self) -> Result<Option<NodeInfo>> {
        match self.call(&Request::Leader, Effect::Read)? {
            Response::Server { id, address } if address.is_empty() => {
                let _ = id;
                Ok(None)
            }
            Response::Server { id, address } => Ok(Some(NodeInfo {
                id,
                address,
                role: 0,
            })),
            other => Err(self.unexpected(other, "server")),
        }
    }

    /// Register as client `id`; returns the server's heartbeat timeout (ms).
    pub fn register(&mut self, id: u64) -> Result<u64> {
        match self.call(&Request::Client { id }, Effect::Read)? {
            Response::Welcome { heartbeat_timeout } => Ok(heartbeat_timeout),
            other => Err(self.unexpected(other, "welcome")),
        }
    }

    /// The nodes of the cluster, with their roles.
    pub fn cluster(&mut self) -> Result<Vec<NodeInfo>> {
        match self.call(&Request::Cluster, Effect::Read)? {
            Response::Servers(nodes) => Ok(nodes),
            other => Err(self.unexpected(other, "servers")),
        }
    }

    /// Ask this node (the leader) to hand leadership to voter `id`; returns
    /// once the transfer is done.
    pub fn transfer(&mut self, id: u64) -> Result<()> {
        self.membership(&Request::Transfer { id })
    }

    /// Ask this node (the leader) to add node `id` at `address` as a spare.
    pub fn add_node(&mut self, id: u64, address: &str) -> Result<()> {
        self.membership(&Request::Add { id, address })
    }

    /// Ask this node (the leader) to give node `id` a role (see
    /// [`NodeInfo::role`]); returns once the change is committed.
    pub fn assign_role(&mut self, id: u64, role: u64) -> Result<()> {
        self.membership(&Request::Assign { id, role })
    }

    /// Ask this node (the leader) to remove node `id` from the cluster.
    pub fn remove_node(&mut self, id: u64) -> Result<()> {
        self.membership(&Request::Remove { id })
    }

    /// A configuration change, answered with Empty once it is committed. A
    /// lost reply leaves it unknown: callers look at [`Self::cluster`].
    fn membership(&mut self, request: &Request<'_>) -> Result<()> {
        match self.call(request, Effect::Write)? {
            Response::Empty => Ok(()),
            other => Err(self.unexpected(other, "empty")),
        }
    }

    /// Open the database `name` (one per connection; created if missing).
    pub fn open(&mut self, name: &str) -> Result<()> {
        match self.call(&Request::Open { name }, Effect::Read)? {
            Response::Db { id } => {
                self.db = Some(id);
                Ok(())
            }
            other => Err(self.unexpected(other, "db")),
        }
    }

    fn db(&self) -> Result<u32> {
        self.db
            .ok_or_else(|| Error::invalid_argument("no database is open on this connection"))
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement> {
        let db = self.db()?;
        match self.call(&Request::Prepare { db, sql }, Effect::Read)? {
            Response::Stmt { id, params, .. } => Ok(Statement { id, params }),
            other => Err(self.unexpected(other, "stmt")),
        }
    }

    pub fn finalize(&mut self, stmt: Statement) -> Result<()> {
        let db = self.db()?;
        match self.call(&Request::Finalize { db, stmt: stmt.id }, Effect::Read)? {
            Response::Empty => Ok(()),
            other => Err(self.unexpected(other, "empty")),
        }
    }

    /// Run a prepared statement that returns no rows.
    pub fn exec(&mut self, stmt: Statement, params: &[Value]) -> Result<ExecResult> {
        let db = self.db()?;
        let req = Request::Exec {
            db,
            stmt: stmt.id,
            params,
        };
        self.exec_request(&req, Effect::Write)
    }

    /// Run every statement of `sql` (parameters bind to the first). Outside
    /// a transaction each statement commits on its own.
    pub fn exec_sql(&mut self, sql: &str, params: &[Value]) -> Result<ExecResult> {
        let db = self.db()?;
        self.exec_request(&Request::ExecSql { db, sql, params }, Effect::Write)
    }

    /// Stream the rows of a prepared statement (it must return columns).
    pub fn query(&mut self, stmt: Statement, params: &[Value]) -> Result<Rows<'_>> {
        let db = self.db()?;
        let req = Request::Query {
            db,
            stmt: stmt.id,
            params,
        };
        self.start_rows(&req)
    }

    /// Stream the rows of the first statement of `sql`.
    pub fn query_sql(&mut self, sql: &str, params: &[Value]) -> Result<Rows<'_>> {
        let db = self.db()?;
        self.start_rows(&Request::QuerySql { db, sql, params })
    }

    /// The whole result of `sql`.
    pub fn query_all(&mut self, sql: &str, params: &[Value]) -> Result<QueryResult> {
        self.query_sql(sql, params)?.collect_all()
    }

    /// BEGIN an interactive transaction on this connection. Errors inside it
    /// report [`Outcome::RolledBack`] when the transaction is lost, and
    /// [`Outcome::Unknown`] only for a COMMIT whose reply was lost.
    pub fn begin(&mut self) -> Result<Transaction<'_>> {
        self.begin_with("BEGIN")
    }

    /// BEGIN IMMEDIATE (takes the write lock at once).
    pub fn begin_immediate(&mut self) -> Result<Transaction<'_>> {
        self.begin_with("BEGIN IMMEDIATE")
    }

    /// BEGIN (or BEGIN IMMEDIATE) without a [`Transaction`] guard, for a caller that keeps
    /// the connection and ends the transaction later with [`Connection::commit_detached`] or
    /// [`Connection::rollback_detached`]. Errors inside it have the outcomes of a guarded
    /// transaction (`RolledBack` when it is lost, `Unknown` only for a COMMIT whose reply was
    /// lost).
    pub fn begin_detached(&mut self, immediate: bool) -> Result<()> {
        let sql = if immediate {
            "BEGIN IMMEDIATE"
        } else {
            "BEGIN"
        };
        let mut tx = self.begin_with(sql)?;
        // The transaction stays open: the guard's drop must not roll it back.
        tx.done = true;
        Ok(())
    }

    /// COMMIT of a transaction begun with [`Connection::begin_detached`].
    pub fn commit_detached(&mut self) -> Result<()> {
        self.reattach()?.commit()
    }

    /// COMMIT of a transaction begun with [`Connection::begin_detached`], after
    /// `statements` in the same request ([`Transaction::commit_after`]).
    pub fn commit_detached_after(&mut self, statements: &str) -> Result<()> {
        self.reattach()?.commit_after(statements)
    }

    /// COMMIT of a read transaction begun with [`Connection::begin_detached`],
    /// without waiting for its reply: a read transaction's COMMIT changes
    /// nothing, whatever its reply says. The reply is read before the next
    /// request is sent; if it is not a success, the connection is broken
    /// (the server rolls back what was open on it) and that request fails
    /// as never sent.
    pub fn commit_detached_unread(&mut self) -> Result<()> {
        if !self.in_tx {
            return Err(Error::invalid_argument("no transaction is open"));
        }
        let db = self.db()?;
        let frame = Request::ExecSql {
            db,
            sql: "COMMIT",
            params: &[],
        }
        .encode()?;
        let deadline = self.request_deadline();
        self.send(&frame, deadline)?;
        self.in_tx = false;
        self.unread += 1;
        Ok(())
    }

    /// ROLLBACK of a transaction begun with [`Connection::begin_detached`].
    pub fn rollback_detached(&mut self) -> Result<()> {
        self.reattach()?.rollback()
    }

    /// The guard of the detached transaction open on this connection.
    fn reattach(&mut self) -> Result<Transaction<'_>> {
        if !self.in_tx {
            return Err(Error::invalid_argument("no transaction is open"));
        }
        Ok(Transaction {
            conn: self,
            done: false,
        })
    }

    fn begin_with(&mut self, sql: &str) -> Result<Transaction<'_>> {
        if self.in_tx {
            return Err(Error::invalid_argument("a transaction is already open"));
        }
        let db = self.db()?;
        self.exec_request(
            &Request::ExecSql {
                db,
                sql,
                params: &[],
            },
            Effect::Read,
        )?;
        self.in_tx = true;
        Ok(Transaction {
            conn: self,
            done: false,
        })
    }

    /// `sql` (statements without parameters, which dqlite runs in turn up to the first that
    /// fails) and a query sent together, inside a transaction: one round trip where the query
    /// would otherwise wait for `sql`'s reply. The server answers them in turn and runs the
    /// query whatever `sql` did, so `stmt` must only read (a plain SELECT): after a failure
    /// it changes nothing either way.
    ///
    /// When `sql` fails, its error is returned (the query's reply is read and dropped);
    /// otherwise its result and the query's whole result or error.
    pub fn exec_sql_and_query(
        &mut self,
        sql: &str,
        stmt: Statement,
        params: &[Value],
    ) -> Result<(ExecResult, Result<QueryResult>)> {
        if !self.in_tx {
            return Err(Error::invalid_argument("no transaction is open"));
        }
        if !Connection::can_send_ahead() {
            let exec = self.exec_sql(sql, &[])?;
            let rows = self.query(stmt, params).and_then(Rows::collect_all);
            return Ok((exec, rows));
        }
        self.exec_sql_then_query(sql, Effect::Write, stmt, params, |_| {})
    }

    /// `sql` and a query of `stmt` written together, then their replies read in turn: `sql`'s
    /// with `effect` (`on_success` runs once it succeeded, before the rows are read), and when
    /// it failed, its error, the query's reply read and dropped to keep the stream in step;
    /// otherwise its result and the query's whole result or error.
    fn exec_sql_then_query(
        &mut self,
        sql: &str,
        effect: Effect,
        stmt: Statement,
        params: &[Value],
        on_success: impl FnOnce(&mut Connection),
    ) -> Result<(ExecResult, Result<QueryResult>)> {
        let db = self.db()?;
        let mut frames = Request::ExecSql {
            db,
            sql,
            params: &[],
        }
        .encode()?;
        frames.extend(
            Request::Query {
                db,
                stmt: stmt.id,
                params,
            }
            .encode()?,
        );
        let deadline = self.request_deadline();
        self.send(&frames, deadline)?;
        self.acknowledge_at_once();
        let mut reply = Reply {
            deadline,
            budget: Budget::new(self.limits),
        };
        let exec = match self.receive(effect, &mut reply) {
            Ok(Response::Result {
                last_insert_id,
                rows_affected,
            }) => ExecResult {
                last_insert_id,
                rows_affected,
            },
            Ok(other) => return Err(self.unexpected(other, "result")),
            Err(e) => {
                if !self.broken {
                    let _ = self.receive_rows(deadline).and_then(Rows::collect_all);
                }
                return Err(e);
            }
        };
        on_success(self);
        let rows = self.receive_rows(deadline).and_then(Rows::collect_all);
        Ok((exec, rows))
    }

    /// BEGIN (IMMEDIATE when `immediate`) and a query sent together: one round
    /// trip where the query would otherwise wait for the BEGIN's reply. The
    /// server reads a connection's next request only once it has answered the
    /// one before, so the query runs inside the transaction when the BEGIN
    /// succeeds and on its own when it fails: `stmt` must only read (a plain
    /// SELECT), so that it changes nothing either way.
    ///
    /// When the BEGIN fails, its error is returned (the query's reply is read
    /// and dropped) and no transaction is open. Otherwise the transaction is
    /// open, as after [`Connection::begin_detached`], and the query's whole
    /// result or error is returned. Nothing the pair does can have been
    /// applied, so a lost reply or a refusal that ends the connection is
    /// [`Outcome::NotApplied`] for either request.
    pub fn begin_and_query(
        &mut self,
        immediate: bool,
        stmt: Statement,
        params: &[Value],
    ) -> Result<QueryResult> {
        if self.in_tx {
            return Err(Error::invalid_argument("a transaction is already open"));
        }
        // The transaction begun here holds nothing yet: losing it loses nothing.
        let nothing_lost = |e: Error| match e.outcome() {
            Outcome::RolledBack => e.with_outcome(Outcome::NotApplied),
            _ => e,
        };
        if !Connection::can_send_ahead() {
            self.begin_detached(immediate)?;
            return self
                .query(stmt, params)
                .and_then(Rows::collect_all)
                .map_err(nothing_lost);
        }
        let sql = if immediate {
            "BEGIN IMMEDIATE"
        } else {
            "BEGIN"
        };
        let (_, rows) =
            self.exec_sql_then_query(sql, Effect::Read, stmt, params, |conn| conn.in_tx = true)?;
        rows.map_err(nothing_lost)
    }
}
