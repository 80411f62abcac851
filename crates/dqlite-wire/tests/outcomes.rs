//! The outcome of a failed request, against a scripted fake node on
//! loopback: what is reported when the reply is lost, refused, late or
//! garbled — the cases a real cluster produces only by chance.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use dqlite_wire::message::response;
use dqlite_wire::wire::{Encoder, Header, WORD};
use dqlite_wire::{Connection, ErrorKind, Outcome, Timeouts};

/// What the fake node does with the n-th request after the handshake.
#[derive(Clone)]
enum Step {
    /// Reply with a frame of this type and body.
    Reply(u8, Vec<u8>),
    /// Close the socket without replying.
    Hangup,
    /// Keep the socket open and never reply.
    Stall,
}

fn result_body() -> Vec<u8> {
    let mut e = Encoder::new();
    e.i64(0).u64(0);
    e.body().to_vec()
}

fn failure_body(code: u64, msg: &str) -> Vec<u8> {
    let mut e = Encoder::new();
    e.u64(code).text(msg).unwrap();
    e.body().to_vec()
}

fn db_body() -> Vec<u8> {
    let mut e = Encoder::new();
    e.u32_pair(0, 0);
    e.body().to_vec()
}

fn read_request(s: &mut TcpStream) -> Option<Header> {
    let mut w = [0u8; WORD];
    s.read_exact(&mut w).ok()?;
    let h = Header::decode(w);
    let mut body = vec![0u8; h.body_len()];
    s.read_exact(&mut body).ok()?;
    Some(h)
}

/// A node that answers Open, then follows `steps`.
fn fake_node(steps: Vec<Step>) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut version = [0u8; 8];
        s.read_exact(&mut version).unwrap();
        assert_eq!(u64::from_le_bytes(version), 1);
        let script = std::iter::once(Step::Reply(response::DB, db_body())).chain(steps);
        for step in script {
            if read_request(&mut s).is_none() {
                return;
            }
            match step {
                Step::Reply(kind, body) => {
                    let h = Header {
                        words: (body.len() / WORD) as u32,
                        kind,
                        revision: 0,
                        extra: 0,
                    };
                    s.write_all(&h.encode()).unwrap();
                    s.write_all(&body).unwrap();
                }
                Step::Hangup => return,
                Step::Stall => {
                    thread::sleep(Duration::from_millis(600));
                    return;
                }
            }
        }
    });
    (addr, handle)
}

fn open(addr: &str) -> Connection {
    let mut c = Connection::connect(
        addr,
        Timeouts {
            connect: Duration::from_millis(500),
            request: Duration::from_millis(300),
        },
    )
    .unwrap();
    c.open("db").unwrap();
    c
}

#[test]
fn a_write_whose_reply_is_lost_has_an_unknown_outcome() {
    let (addr, h) = fake_node(vec![Step::Hangup]);
    let mut c = open(&addr);
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert_eq!(err.outcome(), Outcome::Unknown, "{err}");
    assert!(err.is_outcome_unknown() && !err.is_retry_safe());
    assert!(matches!(err.kind(), ErrorKind::Io(_)));
    assert!(c.is_broken());
    // Nothing more is sent on a broken connection, and nothing is claimed.
    let err = c.exec_sql("INSERT INTO t VALUES (2)", &[]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Broken));
    assert_eq!(err.outcome(), Outcome::NotApplied);
    h.join().unwrap();
}

#[test]
fn a_write_whose_reply_times_out_has_an_unknown_outcome() {
    let (addr, h) = fake_node(vec![Step::Stall]);
    let mut c = open(&addr);
    let err = c.exec_sql("UPDATE t SET a = 1", &[]).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Timeout { op: "read", .. }),
        "{err}"
    );
    assert_eq!(err.outcome(), Outcome::Unknown);
    assert!(c.is_broken());
    h.join().unwrap();
}

#[test]
fn a_read_whose_reply_is_lost_is_safe_to_retry() {
    let (addr, h) = fake_node(vec![Step::Hangup]);
    let mut c = open(&addr);
    let err = c.query_all("SELECT 1", &[]).unwrap_err();
    assert_eq!(err.outcome(), Outcome::NotApplied, "{err}");
    assert!(err.is_retry_safe() && err.needs_reconnect());
    h.join().unwrap();
}

#[test]
fn a_database_the_node_dropped_was_not_used_and_a_transaction_on_it_is_gone() {
    // A node that lost leadership (and may lead again already) has closed every connection's
    // database: it refuses the request before running it.
    let gone = || Step::Reply(response::FAILURE, failure_body(12, "no database opened"));
    let (addr, h) = fake_node(vec![gone()]);
    let mut c = open(&addr);
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert_eq!(err.code(), Some(12));
    assert_eq!(err.outcome(), Outcome::NotApplied, "{err}");
    assert!(err.is_retry_safe() && err.needs_reconnect() && c.is_broken());
    h.join().unwrap();

    let (addr, h) = fake_node(vec![Step::Reply(response::RESULT, result_body()), gone()]);
    let mut c = open(&addr);
    c.begin_detached(true).unwrap();
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert_eq!(err.outcome(), Outcome::RolledBack, "{err}");
    assert!(c.is_broken());
    h.join().unwrap();
}

#[test]
fn not_leader_is_safe_and_leadership_lost_on_a_write_is_unknown() {
    let (addr, h) = fake_node(vec![Step::Reply(
        response::FAILURE,
        failure_body(10250, "not leader"),
    )]);
    let mut c = open(&addr);
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::NotLeader { code: 10250, .. }
    ));
    assert_eq!(err.outcome(), Outcome::NotApplied);
    assert!(c.is_broken(), "a connection to a non-leader is dropped");
    h.join().unwrap();

    // dqlite 1.11 refusing a statement while it hands leadership over.
    let (addr, h) = fake_node(vec![Step::Reply(
        response::FAILURE,
        failure_body(7, "no more rows available"),
    )]);
    let mut c = open(&addr);
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotLeader { code: 7, .. }));
    assert_eq!(err.outcome(), Outcome::NotApplied);
    assert!(c.is_broken());
    h.join().unwrap();

    let (addr, h) = fake_node(vec![Step::Reply(
        response::FAILURE,
        failure_body(10506, "disk I/O error"),
    )]);
    let mut c = open(&addr);
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::LeadershipLost { code: 10506, .. }
    ));
    assert_eq!(err.outcome(), Outcome::Unknown);
    h.join().unwrap();
}

#[test]
fn inside_a_transaction_a_lost_statement_rolls_back_but_a_lost_commit_is_unknown() {
    let ok = Step::Reply(response::RESULT, result_body());
    // BEGIN ok, INSERT lost.
    let (addr, h) = fake_node(vec![ok.clone(), Step::Hangup]);
    let mut c = open(&addr);
    let mut tx = c.begin().unwrap();
    let err = tx.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert_eq!(err.outcome(), Outcome::RolledBack, "{err}");
    // Every later statement of the lost transaction says so too.
    let err = tx.exec_sql("INSERT INTO t VALUES (2)", &[]).unwrap_err();
    assert_eq!(err.outcome(), Outcome::RolledBack, "{err}");
    let err = tx.commit().unwrap_err();
    assert_eq!(err.outcome(), Outcome::RolledBack, "{err}");
    assert!(!c.in_transaction());
    h.join().unwrap();

    // BEGIN ok, INSERT ok, COMMIT lost.
    let (addr, h) = fake_node(vec![ok.clone(), ok.clone(), Step::Hangup]);
    let mut c = open(&addr);
    let mut tx = c.begin().unwrap();
    tx.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap();
    let err = tx.commit().unwrap_err();
    assert_eq!(err.outcome(), Outcome::Unknown, "{err}");
    assert_eq!(err.outcome_code(), "DQLITE_OUTCOME_UNKNOWN");
    h.join().unwrap();

    // A SQL error on COMMIT fails it, and the transaction is rolled back
    // (the fake node answers that ROLLBACK).
    let (addr, h) = fake_node(vec![
        ok.clone(),
        Step::Reply(
            response::FAILURE,
            failure_body(787, "FOREIGN KEY constraint failed"),
        ),
        ok,
    ]);
    let mut c = open(&addr);
    let tx = c.begin().unwrap();
    let err = tx.commit().unwrap_err();
    assert_eq!(err.outcome(), Outcome::Failed);
    assert_eq!(err.code(), Some(787));
    assert!(!c.in_transaction() && !c.is_broken());
    h.join().unwrap();
}

#[test]
fn a_garbled_reply_breaks_the_connection() {
    let (addr, h) = fake_node(vec![Step::Reply(response::RESULT, vec![0u8; 8])]);
    let mut c = open(&addr);
    let err = c.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Protocol(_)), "{err}");
    assert_eq!(err.outcome(), Outcome::Unknown);
    assert!(c.is_broken());
    h.join().unwrap();
}
