//! How a [`Connection`] exchanges messages: a request written whole, its reply
//! read by its deadline and within its limits, and the [`Outcome`] of every
//! failure decided from what the request could do (its [`Effect`]) and whether
//! it ran inside a transaction.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Connection, Effect, ExecResult, Rows};
use crate::budget::Budget;
use crate::deadline::{self, Idle, Stop};
use crate::error::{Error, ErrorKind, Outcome, Result, SQLITE_NOTFOUND};
use crate::handshake;
use crate::message::{Request, Response, RowsBatch};
use crate::wire::{Header, MAX_BODY_BYTES, WORD};

/// Request writes of every connection of the process ([`request_writes`]).
static WRITES: AtomicU64 = AtomicU64::new(0);

/// How many times this process's connections have written requests to a node (one write
/// carries one request, or several sent together): what a caller's round trips are counted
/// by (bench:cluster).
pub fn request_writes() -> u64 {
    WRITES.load(Ordering::Relaxed)
}

impl Connection {
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
    pub(super) fn acknowledge_at_once(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            #[cfg(target_os = "android")]
            use std::os::android::net::TcpStreamExt;
            #[cfg(target_os = "linux")]
            use std::os::linux::net::TcpStreamExt;
            let _ = self.stream.set_quickack(true);
        }
    }

    pub(super) fn exec_request(&mut self, req: &Request<'_>, effect: Effect) -> Result<ExecResult> {
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

    pub(super) fn start_rows(&mut self, req: &Request<'_>) -> Result<Rows<'_>> {
        let deadline = self.request_deadline();
        self.send(&req.encode()?, deadline)?;
        self.receive_rows(deadline)
    }

    /// The first batch of the oldest request's rows, as a stream that reads
    /// the rest by `deadline`.
    pub(super) fn receive_rows(&mut self, deadline: Instant) -> Result<Rows<'_>> {
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
    pub(super) fn call(&mut self, req: &Request<'_>, effect: Effect) -> Result<Response> {
        let mut reply = Reply {
            deadline: self.request_deadline(),
            budget: Budget::new(self.limits),
        };
        self.call_with(req, effect, &mut reply)
    }

    /// [`Connection::call`] within `reply`'s deadline and limits.
    pub(super) fn call_with(
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
    pub(super) fn send(&mut self, frames: &[u8], deadline: Instant) -> Result<()> {
        WRITES.fetch_add(1, Ordering::Relaxed);
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
        // Replies still owed by requests sent before come first: only a
        // success leaves the connection as the caller believes it is.
        while self.unread > 0 {
            let mut reply = Reply {
                deadline,
                budget: Budget::new(self.limits),
            };
            let read = self.read_response(&mut reply);
            self.unread -= 1;
            if !matches!(read, Ok(Response::Result { .. })) {
                self.broken = true;
                return Err(Error::new(ErrorKind::Broken, unsent));
            }
        }
        // A request that was not completely written was not executed: the
        // server only acts on whole messages.
        self.write_all(frames, deadline)
            .map_err(|e| e.with_outcome(unsent))
    }

    /// Read the reply of the oldest request sent, deciding the outcome of any
    /// failure. A failure response is returned as an error.
    pub(super) fn receive(&mut self, effect: Effect, reply: &mut Reply) -> Result<Response> {
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
    pub(super) fn lost_reply(&self, e: Error, effect: Effect) -> Error {
        if matches!(e.kind(), ErrorKind::ReplyTooLarge { .. }) {
            return e;
        }
        let outcome = self.lost_reply_outcome(effect);
        e.with_outcome(outcome)
    }

    pub(super) fn lost_reply_outcome(&self, effect: Effect) -> Outcome {
        match (effect, self.in_tx) {
            (Effect::Read, false) => Outcome::NotApplied,
            (Effect::Read | Effect::Write, true) => Outcome::RolledBack,
            (Effect::Write, false) | (Effect::Commit, _) => Outcome::Unknown,
        }
    }

    pub(super) fn failure_outcome(&self, err: &Error, effect: Effect) -> Outcome {
        match err.kind() {
            ErrorKind::NotLeader { .. } if self.in_tx => Outcome::RolledBack,
            ErrorKind::NotLeader { .. } => Outcome::NotApplied,
            // The node no longer has this connection's database or statement: a node that
            // loses leadership closes them on every connection (libdqlite 1.11 `monitor_cb`,
            // rolling back what was open), and each request looks them up before it runs.
            // After a loss and a new win in quick succession it answers so as a leader.
            ErrorKind::Sql { code, .. } if *code == SQLITE_NOTFOUND => {
                if self.in_tx {
                    Outcome::RolledBack
                } else {
                    Outcome::NotApplied
                }
            }
            ErrorKind::LeadershipLost { .. } => match (effect, self.in_tx) {
                (Effect::Read, false) => Outcome::NotApplied,
                (Effect::Read | Effect::Write, true) => Outcome::RolledBack,
                (Effect::Write, false) | (Effect::Commit, _) => Outcome::Unknown,
            },
            _ => Outcome::Failed,
        }
    }

    pub(super) fn unexpected(&mut self, got: Response, want: &str) -> Error {
        self.broken = true;
        Error::protocol(format!("expected a {want} response, got {}", got.name()))
    }

    pub(super) fn write_all(&mut self, bytes: &[u8], deadline: Instant) -> Result<()> {
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
    pub(super) fn read_response(&mut self, reply: &mut Reply) -> Result<Response> {
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

    pub(super) fn read_frame(&mut self, reply: &mut Reply) -> Result<(Header, Vec<u8>)> {
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
    pub(super) fn read_until(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
    ) -> std::result::Result<(), Stop> {
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
    pub(super) fn next_batch(&mut self, reply: &mut Reply) -> Result<RowsBatch> {
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
    pub(super) fn interrupt_stream(&mut self) -> Result<u64> {
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
pub(super) struct Reply {
    pub(super) deadline: Instant,
    pub(super) budget: Budget,
}

impl Stop {
    fn into_error(self, io: impl FnOnce(io::Error) -> Error) -> Error {
        match self {
            Stop::Io(e) => io(e),
            Stop::Check(e) => e,
        }
    }
}

pub(super) fn io_error(
    e: io::Error,
    op: &'static str,
    timeout: Duration,
    outcome: Outcome,
) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            Error::new(ErrorKind::Timeout { op, after: timeout }, outcome)
        }
        _ => Error::new(ErrorKind::Io(e), outcome),
    }
}
