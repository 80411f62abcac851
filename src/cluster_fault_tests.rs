//! The constructor's open on a cluster (`open_cluster`, all of it but the JS glue) against
//! nodes that misbehave (`dqlite_wire::fake`, on loopback): it ends by `reconnectDeadlineMs`
//! whatever the server does, and each fault reaches the caller with its own `code`.

use std::time::{Duration, Instant};

use dqlite_wire::fake::{Behaviour, FakeNode};
use serde_json::{json, Value};

use crate::error::StoreError;
use crate::sql::remote::codes;

/// The open of `url` with these cluster options: its error's `code` and message, and how long
/// it took.
fn open(url: &str, cluster: Value) -> (String, String, Duration) {
    let mut options = json!({ "cluster": cluster, "mode": "read-write", "now": 0 });
    options["cluster"]["url"] = json!(url);
    let started = Instant::now();
    let result = crate::open_cluster(&options);
    let took = started.elapsed();
    let Err(error) = result else {
        panic!("{url}: the open succeeded");
    };
    match error {
        StoreError::Js {
            code: Some(code),
            message,
            ..
        } => (code, message, took),
        other => panic!("{url}: {other:?}"),
    }
}

#[test]
fn a_dripping_node_cannot_hold_the_open_past_its_deadline() {
    let node = FakeNode::start(Behaviour::Drip(Duration::from_millis(500)));
    let url = format!("dqlite://{}/db", node.address());
    let cluster = json!({ "reconnectDeadlineMs": 3_000, "requestTimeoutMs": 2_000 });
    let (code, message, took) = open(&url, cluster);
    assert_eq!(code, codes::UNAVAILABLE, "{message}");
    assert!(took < Duration::from_secs(4), "{took:?}: {message}");
}

#[test]
fn an_endless_result_fails_the_open_with_its_own_code() {
    let node = FakeNode::start(Behaviour::EndlessRows);
    let url = format!("dqlite://{}/db", node.address());
    let (code, message, took) = open(&url, json!({ "maxReplyBytes": 1 << 20 }));
    assert_eq!(code, codes::REPLY_TOO_LARGE, "{message}");
    assert!(
        message.contains("1048576 bytes (the cluster option maxReplyBytes)"),
        "{message}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let (code, message, _) = open(&url, json!({ "maxReplyRows": 1_000 }));
    assert_eq!(code, codes::REPLY_TOO_LARGE);
    assert!(
        message.contains("1000 rows (the cluster option maxReplyRows)"),
        "{message}"
    );
}

#[test]
fn addresses_that_cannot_work_fail_at_once_with_their_own_codes() {
    let http = FakeNode::start(Behaviour::Http);
    let (code, message, took) = open(&format!("dqlite://{}/db", http.address()), json!({}));
    assert_eq!(code, codes::NOT_DQLITE, "{message}");
    assert!(
        message.contains("does not answer the dqlite handshake"),
        "{message}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");

    let (code, message, took) = open("dqlite://127.0.0.1:1,127.0.0.1:2/db", json!({}));
    assert_eq!(code, codes::REFUSED, "{message}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    for url in [
        "dqlite://",
        "dqlite://127.0.0.1:99999/x",
        "dqlite://127.0.0.1:/x",
        "dqlite://127.0.0.1:1:2/x",
    ] {
        let (code, message, took) = open(url, json!({}));
        assert_eq!(code, codes::BAD_ADDRESS, "{url}: {message}");
        assert!(message.contains(&format!("\"{url}\"")), "{message}");
        assert!(took < Duration::from_millis(100), "{url}: {took:?}");
    }
}

#[test]
fn a_frozen_leader_holds_a_call_no_longer_than_the_call_s_deadline() {
    let node = FakeNode::start(Behaviour::FreezeAtSql);
    let config = dqlite_wire::Config {
        timeouts: dqlite_wire::Timeouts {
            connect: Duration::from_secs(1),
            request: Duration::from_secs(30),
        },
        reconnect_deadline: Duration::from_millis(1_500),
        ..dqlite_wire::Config::default()
    };
    let url = format!("dqlite://{}/db", node.address());
    let open_by = Instant::now() + Duration::from_secs(5);
    let remote = crate::sql::remote::Remote::open(&url, config, false, open_by).unwrap();
    // A statement alone: by reconnectDeadlineMs, not by the 30 s request timeout.
    let started = Instant::now();
    assert!(remote.prepare("SELECT 1").is_err());
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2_500), "{took:?}");
    // A call: every statement of it by the call's deadline.
    let started = Instant::now();
    {
        let _call = remote.call_scope(started + Duration::from_millis(700));
        assert!(remote.prepare("SELECT 1").is_err());
        assert!(remote.prepare("SELECT 2").is_err());
    }
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1_200), "{took:?}");
}
