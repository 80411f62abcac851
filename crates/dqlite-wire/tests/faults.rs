//! The client against nodes that misbehave ([`dqlite_wire::fake`], on
//! loopback, no real cluster): a reply dripped a byte at a time, a result
//! that never ends, a leader that freezes, an HTTP server where a node was
//! expected, addresses that refuse, do not resolve or are malformed. Each
//! must end by its deadline with an error that says what happened.

use std::time::{Duration, Instant};

use dqlite_wire::address::resolver_calls;
use dqlite_wire::fake::{Behaviour, FakeNode};
use dqlite_wire::{
    Cluster, Config, Connection, ErrorKind, Outcome, ReplyLimit, ReplyLimits, Session, Timeouts,
};

fn config(connect_ms: u64, request_ms: u64, deadline_ms: u64) -> Config {
    Config {
        timeouts: Timeouts {
            connect: Duration::from_millis(connect_ms),
            request: Duration::from_millis(request_ms),
        },
        reconnect_deadline: Duration::from_millis(deadline_ms),
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        fail_fast: true,
        ..Config::default()
    }
}

fn url(nodes: &[&str]) -> String {
    format!("dqlite://{}/db", nodes.join(","))
}

#[test]
fn a_node_dripping_its_handshake_cannot_hold_connect_past_its_deadline() {
    // The case of the report: a byte every 500 ms, reconnect deadline 3 s,
    // request timeout 2 s. The handshake alone would take 16 s.
    let node = FakeNode::start(Behaviour::Drip(Duration::from_millis(500)));
    let cluster = Cluster::from_url(&url(&[node.address()]), config(2_000, 2_000, 3_000)).unwrap();
    let started = Instant::now();
    let e = cluster.connect().unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}: {e}");
    assert!(matches!(e.kind(), ErrorKind::NoLeader { .. }), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(e.is_retry_safe());
}

#[test]
fn one_deadline_covers_a_whole_reply_not_each_read() {
    // Each byte comes well within the request timeout; the reply does not.
    let node = FakeNode::start(Behaviour::Drip(Duration::from_millis(100)));
    let timeouts = Timeouts {
        connect: Duration::from_millis(500),
        request: Duration::from_millis(600),
    };
    let mut conn = Connection::connect(node.address(), timeouts).unwrap();
    let started = Instant::now();
    let e = conn.leader().unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(e.kind(), ErrorKind::Timeout { op: "read", .. }),
        "{e}"
    );
    assert!(took < Duration::from_millis(900), "{took:?}");
    assert!(conn.is_broken());
}

#[test]
fn a_result_that_never_ends_stops_at_the_reply_limit() {
    let node = FakeNode::start(Behaviour::EndlessRows);
    let mut config = config(1_000, 10_000, 5_000);
    config.reply_limits = ReplyLimits {
        rows: 1_000_000,
        bytes: 4 << 20,
    };
    let cluster = Cluster::from_url(&url(&[node.address()]), config).unwrap();
    let mut conn = cluster.connect().unwrap();
    let started = Instant::now();
    let e = conn
        .query_all("SELECT n, text FROM endless", &[])
        .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::ReplyTooLarge {
                limit: ReplyLimit::Bytes(4194304)
            }
        ),
        "{e}"
    );
    // Not to be sent again: it would bring as much.
    assert_eq!(e.outcome(), Outcome::Failed);
    assert!(!e.is_retry_safe());
    assert!(conn.is_broken(), "the rest of the stream is not read");
    assert!(started.elapsed() < Duration::from_secs(5));

    // The row cap, and a session does not run the query again.
    let mut config = config_with_rows(10_000);
    config.reconnect_deadline = Duration::from_secs(5);
    let cluster = Cluster::from_url(&url(&[node.address()]), config).unwrap();
    let mut session = Session::new(&cluster);
    let e = session.query_all("SELECT 1", &[]).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::ReplyTooLarge {
                limit: ReplyLimit::Rows(10_000)
            }
        ),
        "{e}"
    );
    assert_eq!(session.reconnects(), 1);
}

fn config_with_rows(rows: u64) -> Config {
    let mut c = config(1_000, 10_000, 5_000);
    c.reply_limits = ReplyLimits {
        rows,
        bytes: u64::MAX,
    };
    c
}

#[test]
fn the_default_limits_hold_against_an_endless_result() {
    let node = FakeNode::start(Behaviour::EndlessRows);
    let cluster = Cluster::from_url(&url(&[node.address()]), Config::default()).unwrap();
    let mut conn = cluster.connect().unwrap();
    let e = conn.query_all("SELECT 1", &[]).unwrap_err();
    let limit = ReplyLimits::default();
    assert!(
        matches!(e.kind(), ErrorKind::ReplyTooLarge { limit: ReplyLimit::Bytes(b) } if *b == limit.bytes),
        "{e}"
    );
}

#[test]
fn an_http_server_is_reported_as_not_dqlite_at_once() {
    let http = FakeNode::start(Behaviour::Http);
    let cluster =
        Cluster::from_url(&url(&[http.address()]), config(2_000, 10_000, 15_000)).unwrap();
    let started = Instant::now();
    let e = cluster.connect().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(e.kind(), ErrorKind::NotDqlite { .. }), "{e}");
    let message = e.to_string();
    assert!(
        message.contains(&format!(
            "{} does not answer the dqlite handshake",
            http.address()
        )),
        "{message}"
    );
    assert!(message.contains("\"HTTP/1.1\""), "{message}");
}

#[test]
fn a_wrong_address_among_good_ones_is_reported_while_none_leads() {
    // Refused, and another service: the service is what is reported.
    let http = FakeNode::start(Behaviour::Http);
    let cluster = Cluster::from_url(
        &url(&["127.0.0.1:1", http.address()]),
        config(2_000, 10_000, 15_000),
    )
    .unwrap();
    let e = cluster.connect().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotDqlite { .. }), "{e}");
    // A leader found through another address is all that matters.
    let leader = FakeNode::start(Behaviour::Leader);
    let cluster = Cluster::from_url(
        &url(&[http.address(), leader.address()]),
        config(2_000, 10_000, 15_000),
    )
    .unwrap();
    assert_eq!(cluster.connect().unwrap().address(), leader.address());
}

#[test]
fn refusals_beside_an_election_are_waited_out() {
    // One node refuses, the other knows no leader yet: an election may end.
    let electing = FakeNode::start(Behaviour::Leader);
    electing.set_leader(Some(""));
    let cluster = Cluster::from_url(
        &url(&["127.0.0.1:1", electing.address()]),
        config(500, 1_000, 600),
    )
    .unwrap();
    let started = Instant::now();
    let e = cluster.connect().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NoLeader { attempts, .. } if *attempts >= 2),
        "{e}"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
}

#[test]
fn every_address_refusing_fails_after_one_round_with_a_hint() {
    let cluster = Cluster::from_url(
        &url(&["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]),
        config(2_000, 10_000, 15_000),
    )
    .unwrap();
    let started = Instant::now();
    let e = cluster.connect().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(e.kind(), ErrorKind::Refused { addresses } if addresses.len() == 3),
        "{e}"
    );
    assert!(e.to_string().contains("is the port right"), "{e}");
}

#[test]
fn a_name_that_does_not_resolve_fails_once_and_says_so() {
    let before = resolver_calls();
    let cluster = Cluster::from_url(
        "dqlite://piw-no-such-node.invalid:9001/db",
        config(2_000, 10_000, 15_000),
    )
    .unwrap();
    let e = cluster.connect().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Unresolved { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("piw-no-such-node.invalid:9001 cannot be resolved"),
        "{e}"
    );
    assert_eq!(resolver_calls() - before, 1, "asked once, not retried");
}

#[test]
fn malformed_addresses_fail_at_once_without_the_resolver() {
    let before = resolver_calls();
    for bad in [
        "dqlite://",
        "dqlite:///db",
        "dqlite://127.0.0.1:9001",
        "dqlite://127.0.0.1:99999/x",
        "dqlite://127.0.0.1:/x",
        "dqlite://127.0.0.1:1:2/x",
        "dqlite://bad_host:1/x",
        "dqlite://127.0.0.1:1/a b",
    ] {
        let started = Instant::now();
        let e = Cluster::from_url(bad, Config::default()).unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(100), "{bad}");
        assert!(
            matches!(e.kind(), ErrorKind::BadAddress { .. }),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains(&format!("\"{bad}\"")), "{e}");
    }
    // Dialled directly, a malformed host is refused before any lookup too.
    let e = Connection::connect("127.0.0.1:1:2", Timeouts::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BadAddress { .. }), "{e}");
    assert_eq!(resolver_calls(), before);
}

#[test]
fn a_request_to_a_frozen_leader_is_abandoned_once_another_leads() {
    let frozen = FakeNode::start(Behaviour::FreezeAtSql);
    let other = FakeNode::start(Behaviour::Leader);
    FakeNode::one_cluster(&[&frozen, &other]);
    other.set_leader(Some(frozen.address()));
    let mut config = config(300, 10_000, 10_000);
    config.liveness_interval = Duration::from_millis(100);
    let cluster = Cluster::from_url(&url(&[frozen.address(), other.address()]), config).unwrap();
    let mut conn = cluster.connect().unwrap();
    assert_eq!(conn.address(), frozen.address());
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            // The other node wins an election while the request waits.
            std::thread::sleep(Duration::from_millis(400));
            other.set_leader(None);
        });
        let e = conn.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(e.kind(), ErrorKind::LeaderMoved { from, to } if from == frozen.address() && to == other.address()),
            "{e}"
        );
        // A write whose reply never came: it may or may not be committed.
        assert_eq!(e.outcome(), Outcome::Unknown);
        assert!(took < Duration::from_secs(2), "{took:?}");
    });
    // The next connect goes to the new leader first.
    assert_eq!(cluster.candidates()[0], other.address());
    assert_eq!(cluster.connect().unwrap().address(), other.address());
}

#[test]
fn a_slow_leader_that_the_others_still_name_is_waited_for() {
    let frozen = FakeNode::start(Behaviour::FreezeAtSql);
    let follower = FakeNode::start(Behaviour::Leader);
    FakeNode::one_cluster(&[&frozen, &follower]);
    follower.set_leader(Some(frozen.address()));
    let mut config = config(300, 700, 10_000);
    config.liveness_interval = Duration::from_millis(100);
    let cluster = Cluster::from_url(&url(&[frozen.address(), follower.address()]), config).unwrap();
    let mut conn = cluster.connect().unwrap();
    let e = conn.query_all("SELECT 1", &[]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Timeout { .. }), "{e}");
    assert_eq!(e.outcome(), Outcome::NotApplied);
}
