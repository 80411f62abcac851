//! Scripted dqlite nodes on loopback that misbehave on purpose, for tests
//! that need no real cluster: a node that drips its replies, one that never
//! ends a result, one that freezes after the handshake, an HTTP server where
//! a node was expected.
//!
//! A [`FakeNode`] listens on a free 127.0.0.1 port and serves each
//! connection on a thread of its own. Every loop is bounded: by the client
//! going away, by [`FakeNode`]'s drop (a stop flag polled every few tens of
//! milliseconds) and by [`LIFETIME`].

use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::message::{request, response};
use crate::value::Value;
use crate::wire::{Decoder, Encoder, Header, ROWS_DONE, ROWS_PART, WORD};

/// No fake node serves longer than this.
pub const LIFETIME: Duration = Duration::from_secs(120);
/// How often waiting threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// What a fake node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// A leader (unless told otherwise, [`FakeNode::set_leader`]) that
    /// answers every request; a query returns no rows.
    Leader,
    /// A leader whose every query streams batches that never end (rows of
    /// an integer and a 200-byte text).
    EndlessRows,
    /// A leader that answers the handshake (who leads, registration, the
    /// database's opening, the members, a read of its clock), then freezes at
    /// the first statement: no reply, and the socket stays open, as with a
    /// stopped process.
    FreezeAtSql,
    /// A leader that sends every reply one byte at a time, this far apart.
    Drip(Duration),
    /// An HTTP server: whatever it is sent, `400 Bad Request`.
    Http,
}

/// Who a node names as the leader.
#[derive(Debug, Clone)]
enum Named {
    Itself,
    Other(String),
}

#[derive(Debug)]
struct Shared {
    address: String,
    behaviour: Behaviour,
    named: Mutex<Named>,
    /// The members a cluster request lists (ids from 1, in this order); empty: itself alone.
    members: Mutex<Vec<String>>,
    stop: AtomicBool,
    started: Instant,
    /// Requests that were already there when the reply to the one before was sent: the client
    /// sent them without waiting for it.
    sent_ahead: AtomicUsize,
    /// The text of every EXEC_SQL request, in order.
    exec_sql: Mutex<Vec<String>>,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.started.elapsed() > LIFETIME
    }
}

/// A running fake node; dropping it stops it.
#[derive(Debug)]
pub struct FakeNode {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeNode {
    pub fn start(behaviour: Behaviour) -> FakeNode {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let shared = Arc::new(Shared {
            address: listener.local_addr().expect("local address").to_string(),
            behaviour,
            named: Mutex::new(Named::Itself),
            members: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            started: Instant::now(),
            sent_ahead: AtomicUsize::new(0),
            exec_sql: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let shared = shared.clone();
            thread::spawn(move || accept(&listener, &shared))
        };
        FakeNode {
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.shared.address
    }

    /// Name `leader` as the leader from now on (`""`: none known; `None`:
    /// this node itself).
    pub fn set_leader(&self, leader: Option<&str>) {
        let named = leader.map_or(Named::Itself, |l| Named::Other(l.to_owned()));
        *self.shared.named.lock().unwrap_or_else(|p| p.into_inner()) = named;
    }

    /// How many requests came before the reply to the request before them was sent (the
    /// client wrote them together, one round trip for both).
    pub fn sent_ahead(&self) -> usize {
        self.shared.sent_ahead.load(Ordering::Relaxed)
    }

    /// The SQL text of every EXEC_SQL request so far, in order.
    pub fn exec_sql(&self) -> Vec<String> {
        self.shared
            .exec_sql
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Fake nodes of one cluster: each lists all of them as members (a client keeps to one
    /// cluster, `crate::identity`).
    pub fn one_cluster(nodes: &[&FakeNode]) {
        let addresses: Vec<String> = nodes.iter().map(|n| n.address().to_owned()).collect();
        for node in nodes {
            *node
                .shared
                .members
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = addresses.clone();
        }
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut served = Vec::new();
    while !shared.stopped() {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = shared.clone();
                served.push(thread::spawn(move || serve(stream, &shared)));
            }
            Err(e) if e.kind() == IoKind::WouldBlock => thread::sleep(POLL),
            Err(_) => break,
        }
    }
    for handle in served {
        let _ = handle.join();
    }
}

/// Read exactly `buf`, polling the stop flag; `false` when the client went
/// away or the node stops.
fn read_exact(stream: &mut TcpStream, buf: &mut [u8], shared: &Shared) -> bool {
    let mut at = 0;
    while at < buf.len() {
        if shared.stopped() {
            return false;
        }
        match stream.read(&mut buf[at..]) {
            Ok(0) => return false,
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => {}
            Err(_) => return false,
        }
    }
    true
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(POLL));
    if shared.behaviour == Behaviour::Http {
        return bad_request(stream);
    }
    let mut version = [0u8; WORD];
    if !read_exact(&mut stream, &mut version, shared) {
        return;
    }
    loop {
        let mut word = [0u8; WORD];
        if !read_exact(&mut stream, &mut word, shared) {
            return;
        }
        let header = Header::decode(word);
        let mut body = vec![0u8; header.body_len()];
        if !read_exact(&mut stream, &mut body, shared) {
            return;
        }
        let sql = matches!(
            header.kind,
            request::PREPARE
                | request::EXEC
                | request::QUERY
                | request::EXEC_SQL
                | request::QUERY_SQL
        );
        if header.kind == request::QUERY_SQL
            && shared.behaviour != Behaviour::EndlessRows
            && reads_the_clock(&body)
        {
            // A store reads the leader's clock on every new connection; every node here
            // answers that, so that each fault shows at the store's own statements.
            if !send(&mut stream, &clock_reading(), shared) {
                return;
            }
            continue;
        }
        if sql && shared.behaviour == Behaviour::FreezeAtSql {
            while !shared.stopped() {
                thread::sleep(POLL);
            }
            return;
        }
        if header.kind == request::EXEC_SQL {
            let mut d = Decoder::new(&body);
            let sql = d.u64().and_then(|_| d.text()).unwrap_or_default();
            shared
                .exec_sql
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sql);
        }
        if next_is_waiting(&stream) {
            shared.sent_ahead.fetch_add(1, Ordering::Relaxed);
        }
        let sent = match header.kind {
            request::QUERY | request::QUERY_SQL if shared.behaviour == Behaviour::EndlessRows => {
                endless_rows(&mut stream, shared)
            }
            kind => send(&mut stream, &reply(kind, &body, shared), shared),
        };
        if !sent {
            return;
        }
    }
}

/// Whether the client's next request is already there, before this reply is sent.
fn next_is_waiting(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let waiting = matches!(stream.peek(&mut [0u8; 1]), Ok(n) if n > 0);
    let _ = stream.set_nonblocking(false);
    waiting
}

/// Answer as an HTTP server answers bytes that are not HTTP. What the
/// client sent is read first and the socket closed for writing only, so the
/// answer is not lost to a reset.
fn bad_request(mut stream: TcpStream) {
    let mut junk = [0u8; 256];
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && matches!(stream.read(&mut junk), Ok(n) if n > 0) {}
    let _ = stream
        .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && matches!(stream.read(&mut junk), Ok(n) if n > 0) {}
}

/// Write `frame`, all at once or dripped; `false` when the client went away.
fn send(stream: &mut TcpStream, frame: &[u8], shared: &Shared) -> bool {
    let Behaviour::Drip(every) = shared.behaviour else {
        return stream.write_all(frame).is_ok();
    };
    for byte in frame {
        if shared.stopped() || stream.write_all(&[*byte]).is_err() {
            return false;
        }
        let until = Instant::now() + every;
        while Instant::now() < until {
            if shared.stopped() {
                return false;
            }
            thread::sleep(POLL.min(until - Instant::now()));
        }
    }
    true
}

fn frame(kind: u8, fill: impl FnOnce(&mut Encoder)) -> Vec<u8> {
    let mut e = Encoder::new();
    fill(&mut e);
    e.finish(kind, 0).expect("a small frame")
}

/// The reply of a well-behaved leader to a request of type `kind`.
fn reply(kind: u8, body: &[u8], shared: &Shared) -> Vec<u8> {
    match kind {
        request::LEADER => {
            let named = shared
                .named
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let address = match named {
                Named::Itself => shared.address.clone(),
                Named::Other(a) => a,
            };
            frame(response::SERVER, |e| {
                e.u64(u64::from(!address.is_empty()))
                    .text(&address)
                    .expect("an address");
            })
        }
        request::CLIENT => frame(response::WELCOME, |e| {
            e.u64(15_000);
        }),
        request::OPEN => frame(response::DB, |e| {
            e.u32_pair(0, 0);
        }),
        request::CLUSTER => frame(response::SERVERS, |e| {
            let listed = shared
                .members
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let members = if listed.is_empty() {
                vec![shared.address.clone()]
            } else {
                listed
            };
            e.u64(members.len() as u64);
            for (id, address) in (1u64..).zip(&members) {
                e.u64(id).text(address).expect("an address").u64(0);
            }
        }),
        request::PREPARE => {
            let mut d = Decoder::new(body);
            let sql = d.u64().and_then(|_| d.text()).unwrap_or_default();
            frame(response::STMT, |e| {
                e.u32_pair(0, 1).u64(placeholders(&sql));
            })
        }
        request::QUERY | request::QUERY_SQL => frame(response::ROWS, |e| {
            e.u64(1).text("x").expect("a name").u64(ROWS_DONE);
        }),
        request::EXEC | request::EXEC_SQL => frame(response::RESULT, |e| {
            e.i64(0).u64(0);
        }),
        _ => frame(response::EMPTY, |e| {
            e.u64(0);
        }),
    }
}

/// The `?` placeholders of `sql` outside quotes (the statements tests send).
fn placeholders(sql: &str) -> u64 {
    let mut quote = None;
    let mut n = 0;
    for c in sql.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '?') => n += 1,
            _ => {}
        }
    }
    n
}

/// Whether a `QUERY_SQL` body asks for the node's clock (`julianday('now')`).
fn reads_the_clock(body: &[u8]) -> bool {
    let mut d = Decoder::new(body);
    let sql = d.u64().and_then(|_| d.text()).unwrap_or_default();
    sql.contains("julianday('now')")
}

/// One row: this machine's clock in epoch ms.
fn clock_reading() -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64);
    frame(response::ROWS, |e| {
        e.u64(1)
            .text("now")
            .expect("a name")
            .row(&[Value::Integer(now)])
            .expect("a row")
            .u64(ROWS_DONE);
    })
}

/// Stream batches of rows until the client goes away or the node stops.
fn endless_rows(stream: &mut TcpStream, shared: &Shared) -> bool {
    let text = Value::Text("x".repeat(200));
    let mut n = 0i64;
    while !shared.stopped() {
        let batch = frame(response::ROWS, |e| {
            e.u64(2)
                .text("n")
                .expect("a name")
                .text("text")
                .expect("a name");
            for _ in 0..64 {
                n += 1;
                e.row(&[Value::Integer(n), text.clone()]).expect("a row");
            }
            e.u64(ROWS_PART);
        });
        if stream.write_all(&batch).is_err() {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_outside_quotes_are_counted() {
        assert_eq!(placeholders("SELECT ?, '?', \"?\" WHERE a = ?"), 2);
    }
}
