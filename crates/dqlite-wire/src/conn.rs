//! One connection to one dqlite node: handshake, requests, result streams,
//! interactive transactions.
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
//! Each error's [`Outcome`] is decided here, where it is known whether the
//! request was completely written, whether it may write, and whether it ran
//! inside a transaction begun with [`Connection::begin`].
//!
//! Every request has one deadline for writing it and reading its whole reply,
//! every batch of a result included: `timeouts.request` from when it is sent,
//! or the caller's own deadline ([`Connection::set_deadline`]) when that comes
//! first. A reply is also held to [`ReplyLimits`]. The first reply of a
//! connection must look like dqlite's ([`crate::handshake`]).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use std::vec;

use crate::address;
use crate::budget::{Budget, ReplyLimits};
use crate::deadline::{self, Idle, Stop};
use crate::error::{Error, ErrorKind, Outcome, Result};
use crate::handshake;
use crate::message::{NodeInfo, Request, Response, RowsBatch};
use crate::value::Value;
use crate::watch::Watch;
use crate::wire::{Header, MAX_BODY_BYTES, PROTOCOL_VERSION, WORD};

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
        let db = self.db()?;
        let sql = if immediate {
            "BEGIN IMMEDIATE"
        } else {
            "BEGIN"
        };
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
        match self.receive(Effect::Read, &mut reply) {
            Ok(Response::Result { .. }) => {}
            Ok(other) => return Err(self.unexpected(other, "result")),
            Err(begin) => {
                if !self.broken {
                    // Keep the stream in step: the query's reply comes all the same.
                    let _ = self.receive_rows(deadline).and_then(Rows::collect_all);
                }
                return Err(begin);
            }
        }
        self.in_tx = true;
        self.receive_rows(deadline)
            .and_then(Rows::collect_all)
            .map_err(nothing_lost)
    }

    /// Whether requests may be sent ahead of the replies before them
    /// ([`Connection::begin_and_query`]): where this client can acknowledge a
    /// reply at once. dqlite's nodes leave Nagle's algorithm on, so a node
    /// holds its second reply until its first is acknowledged; an
    /// acknowledgement delayed as usual (40 ms on Linux, more elsewhere) would
    /// cost far more than the round trip saved.
    pub fn can_send_ahead() -> bool {
        cfg!(any(target_os = "linux", target_os = "android"))
    }

    /// Acknowledge the next reply as soon as it comes (see
    /// [`Connection::can_send_ahead`]); the kernel leaves that mode again by
    /// itself, so it is asked for after each send.
    fn acknowledge_at_once(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            #[cfg(target_os = "android")]
            use std::os::android::net::TcpStreamExt;
            #[cfg(target_os = "linux")]
            use std::os::linux::net::TcpStreamExt;
            let _ = self.stream.set_quickack(true);
        }
    }

    fn exec_request(&mut self, req: &Request<'_>, effect: Effect) -> Result<ExecResult> {
        match self.call(req, effect)? {
            Response::Result {
                last_insert_id,
                rows_affected,
            } => Ok(ExecResult {
                last_insert_id,
                rows_affected,
            }),
            other => Err(self.unexpected(other, "result")),
        }
    }

    fn start_rows(&mut self, req: &Request<'_>) -> Result<Rows<'_>> {
        let deadline = self.request_deadline();
        self.send(&req.encode()?, deadline)?;
        self.receive_rows(deadline)
    }

    /// The first batch of the oldest request's rows, as a stream that reads
    /// the rest by `deadline`.
    fn receive_rows(&mut self, deadline: Instant) -> Result<Rows<'_>> {
        let mut reply = Reply {
            deadline,
            budget: Budget::new(self.limits),
        };
        let batch = match self.receive(Effect::Read, &mut reply)? {
            Response::Rows(batch) => batch,
            other => return Err(self.unexpected(other, "rows")),
        };
        let RowsBatch {
            columns,
            rows,
            more,
        } = batch;
        Ok(Rows {
            conn: self,
            reply,
            columns,
            pending: rows.into_iter(),
            more,
            batches: 1,
        })
    }

    /// Send one request and read its reply, deciding the outcome of any
    /// failure. A failure response is returned as an error.
    fn call(&mut self, req: &Request<'_>, effect: Effect) -> Result<Response> {
        let mut reply = Reply {
            deadline: self.request_deadline(),
            budget: Budget::new(self.limits),
        };
        self.call_with(req, effect, &mut reply)
    }

    /// [`Connection::call`] within `reply`'s deadline and limits.
    fn call_with(
        &mut self,
        req: &Request<'_>,
        effect: Effect,
        reply: &mut Reply,
    ) -> Result<Response> {
        let frame = req.encode()?;
        self.send(&frame, reply.deadline)?;
        self.receive(effect, reply)
    }

    /// Write one or more whole request frames.
    fn send(&mut self, frames: &[u8], deadline: Instant) -> Result<()> {
        // A transaction does not survive its connection: once the socket is
        // unusable the server rolls it back.
        let unsent = if self.in_tx {
            Outcome::RolledBack
        } else {
            Outcome::NotApplied
        };
        if self.broken {
            return Err(Error::new(ErrorKind::Broken, unsent));
        }
        // A request that was not completely written was not executed: the
        // server only acts on whole messages.
        self.write_all(frames, deadline)
            .map_err(|e| e.with_outcome(unsent))
    }

    /// Read the reply of the oldest request sent, deciding the outcome of any
    /// failure. A failure response is returned as an error.
    fn receive(&mut self, effect: Effect, reply: &mut Reply) -> Result<Response> {
        let response = self
            .read_response(reply)
            .map_err(|e| self.lost_reply(e, effect))?;
        match response {
            Response::Failure { code, message } => {
                let err = Error::from_failure(code, message);
                let outcome = self.failure_outcome(&err, effect);
                if err.needs_reconnect() {
                    // Not the leader any more (or the server lost our
                    // database/statement): this connection is done.
                    self.broken = true;
                }
                Err(err.with_outcome(outcome))
            }
            other => Ok(other),
        }
    }

    /// A reply that did not come whole: its outcome is a lost reply's, except
    /// past the reply limits, where the request is known to have run and
    /// fail (its outcome stays `Failed`: sending it again fails again).
    fn lost_reply(&self, e: Error, effect: Effect) -> Error {
        if matches!(e.kind(), ErrorKind::ReplyTooLarge { .. }) {
            return e;
        }
        let outcome = self.lost_reply_outcome(effect);
        e.with_outcome(outcome)
    }

    fn lost_reply_outcome(&self, effect: Effect) -> Outcome {
        match (effect, self.in_tx) {
            (Effect::Read, false) => Outcome::NotApplied,
            (Effect::Read | Effect::Write, true) => Outcome::RolledBack,
            (Effect::Write, false) | (Effect::Commit, _) => Outcome::Unknown,
        }
    }

    fn failure_outcome(&self, err: &Error, effect: Effect) -> Outcome {
        match err.kind() {
            ErrorKind::NotLeader { .. } if self.in_tx => Outcome::RolledBack,
            ErrorKind::NotLeader { .. } => Outcome::NotApplied,
            ErrorKind::LeadershipLost { .. } => match (effect, self.in_tx) {
                (Effect::Read, false) => Outcome::NotApplied,
                (Effect::Read | Effect::Write, true) => Outcome::RolledBack,
                (Effect::Write, false) | (Effect::Commit, _) => Outcome::Unknown,
            },
            _ => Outcome::Failed,
        }
    }

    fn unexpected(&mut self, got: Response, want: &str) -> Error {
        self.broken = true;
        Error::protocol(format!("expected a {want} response, got {}", got.name()))
    }

    fn write_all(&mut self, bytes: &[u8], deadline: Instant) -> Result<()> {
        let started = Instant::now();
        deadline::write_all(&mut self.stream, bytes, deadline).map_err(|e| {
            self.broken = true;
            io_error(
                e,
                "write",
                deadline.saturating_duration_since(started),
                Outcome::NotApplied,
            )
        })
    }

    /// Read one message. Any failure breaks the connection; the caller sets
    /// the outcome.
    fn read_response(&mut self, reply: &mut Reply) -> Result<Response> {
        let res = self.read_frame(reply).and_then(|(header, body)| {
            if self.answered {
                return Response::decode_within(&header, &body, &mut reply.budget);
            }
            let first = handshake::decode(&self.address, &header, &body)?;
            self.answered = true;
            Ok(first)
        });
        if res.is_err() {
            self.broken = true;
        }
        res
    }

    fn read_frame(&mut self, reply: &mut Reply) -> Result<(Header, Vec<u8>)> {
        let deadline = reply.deadline;
        let started = Instant::now();
        let waited = |e| {
            io_error(
                e,
                "read",
                deadline.saturating_duration_since(started),
                Outcome::NotApplied,
            )
        };
        let mut word = [0u8; WORD];
        self.read_until(&mut word, deadline)
            .map_err(|s| s.into_error(waited))?;
        let header = Header::decode(word);
        if !self.answered {
            handshake::check_header(&self.address, word, &header)?;
        }
        if header.body_len() > MAX_BODY_BYTES {
            return Err(Error::protocol(format!(
                "response body of {} bytes exceeds the {MAX_BODY_BYTES}-byte limit",
                header.body_len()
            )));
        }
        reply.budget.admit_frame(header.body_len())?;
        let mut body = vec![0u8; header.body_len()];
        self.read_until(&mut body, deadline)
            .map_err(|s| s.into_error(waited))?;
        Ok((header, body))
    }

    /// Fill `buf` by `deadline`; meanwhile, when a watch is set, ask the other
    /// nodes at its interval whether another one leads now.
    fn read_until(&mut self, buf: &mut [u8], deadline: Instant) -> std::result::Result<(), Stop> {
        let Connection {
            stream,
            address,
            watch,
            ..
        } = self;
        match watch {
            None => deadline::read_exact(stream, buf, deadline, None),
            Some(watch) => {
                let mut check = || watch.check(address, deadline);
                let idle = Idle {
                    every: watch.every(),
                    check: &mut check,
                };
                deadline::read_exact(stream, buf, deadline, Some(idle))
            }
        }
    }

    /// Read the next batch of a result stream, within its reply's deadline
    /// and limits.
    fn next_batch(&mut self, reply: &mut Reply) -> Result<RowsBatch> {
        match self.read_response(reply) {
            Ok(Response::Rows(batch)) => Ok(batch),
            Ok(Response::Failure { code, message }) => {
                let err = Error::from_failure(code, message);
                let outcome = self.failure_outcome(&err, Effect::Read);
                self.broken |= err.needs_reconnect();
                Err(err.with_outcome(outcome))
            }
            Ok(other) => Err(self.unexpected(other, "rows")),
            Err(e) => Err(self.lost_reply(e, Effect::Read)),
        }
    }

    /// Send Interrupt and skip whatever the server still streams until its
    /// Empty reply (by the deadline of a new request). Returns the number of
    /// rows skipped.
    fn interrupt_stream(&mut self) -> Result<u64> {
        let db = self.db()?;
        let frame = Request::Interrupt { db }.encode()?;
        let deadline = self.request_deadline();
        self.write_all(&frame, deadline)?;
        let mut skipped = 0u64;
        loop {
            // Skipped batches are dropped at once: each is held to the limits
            // on its own.
            let mut reply = Reply {
                deadline,
                budget: Budget::new(self.limits),
            };
            match self.read_response(&mut reply) {
                Ok(Response::Empty) => return Ok(skipped),
                Ok(Response::Rows(batch)) => skipped += batch.rows.len() as u64,
                // A failure ends the statement too; the next reply is Empty.
                Ok(Response::Failure { .. }) => {}
                Ok(other) => return Err(self.unexpected(other, "empty")),
                Err(e) => {
                    let outcome = self.lost_reply_outcome(Effect::Read);
                    return Err(e.with_outcome(outcome));
                }
            }
        }
    }
}

/// The deadline and what is left of the limits of one request's reply.
#[derive(Debug)]
struct Reply {
    deadline: Instant,
    budget: Budget,
}

impl Stop {
    fn into_error(self, io: impl FnOnce(io::Error) -> Error) -> Error {
        match self {
            Stop::Io(e) => io(e),
            Stop::Check(e) => e,
        }
    }
}

fn io_error(e: io::Error, op: &'static str, timeout: Duration, outcome: Outcome) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            Error::new(ErrorKind::Timeout { op, after: timeout }, outcome)
        }
        _ => Error::new(ErrorKind::Io(e), outcome),
    }
}

/// A result set being streamed. Dropping it before the end interrupts the
/// query (and breaks the connection if that fails).
#[derive(Debug)]
pub struct Rows<'c> {
    conn: &'c mut Connection,
    reply: Reply,
    columns: Vec<String>,
    pending: vec::IntoIter<Vec<Value>>,
    more: bool,
    batches: u64,
}

impl Rows<'_> {
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Rows responses received so far (the server sends about a memory page
    /// of rows per response).
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// The next row, `None` at the end.
    pub fn next_row(&mut self) -> Result<Option<Vec<Value>>> {
        loop {
            if let Some(row) = self.pending.next() {
                return Ok(Some(row));
            }
            if !self.more {
                return Ok(None);
            }
            // The stream is over whatever happens next.
            self.more = false;
            let batch = self.conn.next_batch(&mut self.reply)?;
            self.batches += 1;
            self.more = batch.more;
            self.pending = batch.rows.into_iter();
        }
    }

    /// Read everything left.
    pub fn collect_all(mut self) -> Result<QueryResult> {
        let mut rows = Vec::new();
        while let Some(row) = self.next_row()? {
            rows.push(row);
        }
        Ok(QueryResult {
            columns: std::mem::take(&mut self.columns),
            rows,
        })
    }

    /// Stop the query. Returns the number of rows the server had already
    /// produced and this client discarded (buffered ones included).
    pub fn interrupt(mut self) -> Result<u64> {
        let buffered = self.pending.len() as u64;
        self.pending = Vec::new().into_iter();
        if !self.more {
            return Ok(buffered);
        }
        self.more = false;
        Ok(buffered + self.conn.interrupt_stream()?)
    }
}

impl Iterator for Rows<'_> {
    type Item = Result<Vec<Value>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}

impl Drop for Rows<'_> {
    fn drop(&mut self) {
        if self.more {
            self.more = false;
            if self.conn.interrupt_stream().is_err() {
                self.conn.broken = true;
            }
        }
    }
}

/// An interactive transaction on one connection. Dropping it without
/// `commit` rolls it back (and breaks the connection if that fails, which
/// makes the server roll back when the socket closes).
#[derive(Debug)]
pub struct Transaction<'c> {
    conn: &'c mut Connection,
    done: bool,
}

impl Transaction<'_> {
    pub fn exec_sql(&mut self, sql: &str, params: &[Value]) -> Result<ExecResult> {
        self.conn.exec_sql(sql, params)
    }

    pub fn exec(&mut self, stmt: Statement, params: &[Value]) -> Result<ExecResult> {
        self.conn.exec(stmt, params)
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement> {
        self.conn.prepare(sql)
    }

    pub fn query_sql(&mut self, sql: &str, params: &[Value]) -> Result<Rows<'_>> {
        self.conn.query_sql(sql, params)
    }

    pub fn query(&mut self, stmt: Statement, params: &[Value]) -> Result<Rows<'_>> {
        self.conn.query(stmt, params)
    }

    pub fn query_all(&mut self, sql: &str, params: &[Value]) -> Result<QueryResult> {
        self.conn.query_all(sql, params)
    }

    /// COMMIT. A lost reply is [`Outcome::Unknown`]. A SQL error (e.g. a
    /// deferred foreign key) is [`Outcome::Failed`] and the transaction is
    /// then rolled back (nothing of it is committed).
    pub fn commit(mut self) -> Result<()> {
        let db = self.conn.db()?;
        let req = Request::ExecSql {
            db,
            sql: "COMMIT",
            params: &[],
        };
        match self.conn.exec_request(&req, Effect::Commit) {
            Ok(_) => {
                self.finish();
                Ok(())
            }
            Err(e) => {
                if e.outcome() == Outcome::Failed && self.rollback_inner().is_err() {
                    // The socket closing rolls it back instead.
                    self.conn.broken = true;
                }
                self.finish();
                Err(e)
            }
        }
    }

    /// ROLLBACK.
    pub fn rollback(mut self) -> Result<()> {
        let res = self.rollback_inner();
        self.finish();
        res
    }

    fn rollback_inner(&mut self) -> Result<()> {
        let db = self.conn.db()?;
        let req = Request::ExecSql {
            db,
            sql: "ROLLBACK",
            params: &[],
        };
        // Once asked for, the rollback's result does not matter to the
        // data: a lost reply means the socket is gone, which rolls back too.
        self.conn.exec_request(&req, Effect::Read).map(|_| ())
    }

    fn finish(&mut self) {
        self.done = true;
        self.conn.in_tx = false;
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            if !self.conn.broken && self.rollback_inner().is_err() {
                self.conn.broken = true;
            }
            self.finish();
        }
    }
}
