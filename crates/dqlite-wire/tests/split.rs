//! One cluster per client, against two real clusters on loopback (of the
//! node program the harness takes from `PIW_DQLITE_NODE`): addresses from
//! both are refused at the first connect, and a reconnection that reaches
//! the other cluster is refused without sending it anything, and without
//! keeping the client away from its own cluster once that is back.
//!
//! Ignored by default; `npm run test:cluster` runs it
//! (`cargo test -p dqlite-wire --test split -- --ignored --test-threads=1`).

use std::time::Duration;

use dqlite_wire::harness::TestCluster;
use dqlite_wire::{Cluster, Config, ErrorKind, Outcome, Session, Timeouts, Value};

const DB: &str = "pi-workflows";
const FORM: Duration = Duration::from_secs(60);

fn config() -> Config {
    Config {
        timeouts: Timeouts {
            connect: Duration::from_millis(500),
            request: Duration::from_secs(5),
        },
        reconnect_deadline: Duration::from_secs(20),
        ..Config::default()
    }
}

fn start(n: usize) -> TestCluster {
    TestCluster::start(n, FORM).unwrap_or_else(|e| panic!("cluster did not start: {e}"))
}

fn mismatch(e: &dqlite_wire::Error) -> &dqlite_wire::identity::Mismatch {
    match e.kind() {
        ErrorKind::ClusterMismatch(m) => m,
        other => panic!("expected a cluster mismatch, got {other:?}: {e}"),
    }
}

#[test]
#[ignore = "starts dqlite clusters; run with --ignored"]
fn addresses_of_two_clusters_are_refused_at_the_first_connect() {
    let a = start(3);
    let b = start(1);
    for seeds in [
        vec![a.address(0), b.address(0)],
        vec![b.address(0), a.address(1), a.address(2)],
    ] {
        let cluster = Cluster::new(seeds.clone(), DB, config());
        let e = cluster.connect().unwrap_err();
        let m = mismatch(&e);
        assert!(!m.reconnection);
        assert_eq!(e.outcome(), Outcome::NotApplied);
        // Every address is named with its cluster's members.
        let text = e.to_string();
        for address in [a.address(0), b.address(0)] {
            assert!(text.contains(&format!("@{address}")), "{text}");
        }
        assert!(
            text.contains(&format!("{} is in the cluster of", seeds[1])),
            "{text}"
        );
        // The first leader reached is not remembered as this client's.
        assert_eq!(cluster.last_leader(), None);
    }
    // Each cluster's own addresses are fine.
    Cluster::new(a.addresses(), DB, config()).connect().unwrap();
    Cluster::new(b.addresses(), DB, config()).connect().unwrap();
}

#[test]
#[ignore = "starts dqlite clusters; run with --ignored"]
fn a_reconnection_into_another_cluster_is_refused() {
    let mut a = start(3);
    let mut b = start(1);
    // Cluster B holds its own table, which a swapped client would read.
    let own = Cluster::new(b.addresses(), DB, config());
    Session::new(&own)
        .exec_sql("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('b')", &[])
        .unwrap();
    // B's node is down when the client first connects: it cannot be asked.
    b.kill(0);
    let mut seeds = a.addresses();
    seeds.push(b.address(0).to_owned());
    let cluster = Cluster::new(seeds, DB, config());
    let mut session = Session::new(&cluster);
    session
        .exec_sql("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('a')", &[])
        .unwrap();

    // All of A down, B back: the next call reaches B's leader and is refused.
    for i in 0..3 {
        a.kill(i);
    }
    b.restart(0).unwrap();
    b.wait_for_leader(FORM).unwrap();
    let e = session.query_all("SELECT v FROM t", &[]).unwrap_err();
    let m = mismatch(&e);
    assert!(m.reconnection, "{e}");
    assert_eq!(m.others[0].0, b.address(0));
    assert_eq!(e.outcome(), Outcome::NotApplied);

    // A back: the same client answers from A again.
    for i in 0..3 {
        a.restart(i).unwrap();
    }
    a.wait_for_voters(3, FORM).unwrap();
    let rows = session.query_all("SELECT v FROM t", &[]).unwrap().rows;
    assert_eq!(rows, vec![vec![Value::Text("a".into())]]);
}
