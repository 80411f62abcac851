//! `piw-dqlite-node` in a real three-node cluster on loopback: it forms
//! the cluster, comes back after a restart as the same member, hands
//! leadership over on SIGTERM, logs who leads, refuses an identity it does
//! not have, forms a cluster only when told to, and refuses to join with a
//! data directory of another cluster.

mod lone;

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use dqlite_wire::harness::{NodeProgram, TestCluster};
use dqlite_wire::{Connection, Timeouts};
use lone::Lone;

const WAIT: Duration = Duration::from_secs(60);

fn program() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_piw-dqlite-node"))
}

fn ids(cluster: &mut TestCluster) -> Vec<(u64, String, u64)> {
    let mut v: Vec<_> = cluster
        .members()
        .unwrap()
        .into_iter()
        .map(|n| (n.id, n.address, n.role))
        .collect();
    v.sort();
    v
}

#[test]
fn restarts_as_the_same_member_and_hands_leadership_over_on_sigterm() {
    let mut cluster = TestCluster::start_with(NodeProgram::Piw(program()), 3, WAIT).unwrap();
    let formed = ids(&mut cluster);
    assert_eq!(formed.len(), 3);
    assert!(formed.iter().all(|(_, _, role)| *role == 0), "{formed:?}");
    assert!(
        formed.iter().any(|(id, ..)| *id == 1),
        "the bootstrap node is id 1"
    );

    // A planned stop of the leader: it hands leadership over and exits 0.
    let leader = cluster.wait_for_leader(WAIT).unwrap();
    assert_eq!(cluster.terminate(leader, WAIT).unwrap(), Some(0));
    let log = fs::read_to_string(cluster.log_path(leader)).unwrap();
    assert!(log.contains("leadership handed to"), "{log}");
    assert!(log.contains("leadership gained: this node"), "{log}");
    let next = cluster.wait_for_leader(WAIT).unwrap();
    assert_ne!(next, leader);
    // The new leader and the other follower log the change.
    let gained = format!(
        "leadership gained: this node ({}) leads",
        cluster.address(next)
    );
    assert!(lone::log_shows(cluster.log_path(next), &gained, WAIT));
    let third = (0..3).find(|&i| i != leader && i != next).unwrap();
    let seen = format!("the leader is now {}", cluster.address(next));
    assert!(lone::log_shows(cluster.log_path(third), &seen, WAIT));

    // Back with its data directory: the same id, the same three voters.
    cluster.restart(leader).unwrap();
    cluster.wait_for_voters(3, WAIT).unwrap();
    assert_eq!(ids(&mut cluster), formed);

    // A leader that hands leadership over while it runs logs the loss and
    // the new leader's address.
    let timeouts = Timeouts {
        connect: Duration::from_secs(1),
        request: WAIT,
    };
    let current = cluster.wait_for_leader(WAIT).unwrap();
    let mut conn = Connection::connect(cluster.address(current), timeouts).unwrap();
    conn.transfer(0).unwrap();
    drop(conn);
    let deadline = std::time::Instant::now() + WAIT;
    let next = loop {
        let now = cluster.wait_for_leader(WAIT).unwrap();
        if now != current || std::time::Instant::now() >= deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(next, current);
    let lost = format!(
        "leadership lost: the leader is now {}",
        cluster.address(next)
    );
    assert!(lone::log_shows(cluster.log_path(current), &lost, WAIT));

    // A follower killed (SIGKILL) and restarted with --join again is found
    // to be a member already: not added a second time.
    let follower = (0..3).find(|&i| i != 0 && i != next).unwrap();
    cluster.kill(follower);
    cluster.restart(follower).unwrap();
    cluster.wait_for_voters(3, WAIT).unwrap();
    assert_eq!(ids(&mut cluster), formed);

    // A wiped data directory at a member's address is another node: it is
    // refused, and the process exits non-zero.
    cluster.kill(follower);
    fs::remove_dir_all(cluster.data_dir(follower)).unwrap();
    fs::create_dir_all(cluster.data_dir(follower)).unwrap();
    cluster.restart(follower).unwrap();
    assert_eq!(cluster.wait_exit(follower, WAIT).unwrap(), Some(1));
    let log = fs::read_to_string(cluster.log_path(follower)).unwrap();
    assert!(log.contains("the cluster already has node"), "{log}");
    assert_eq!(ids(&mut cluster), formed);
}

#[test]
fn a_data_directory_keeps_its_address() {
    let dir = std::env::temp_dir().join(format!("piw-node-address-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("piw-node"), "id=1\naddress=127.0.0.1:1\n").unwrap();
    let out = Command::new(program())
        .args(["--address", "127.0.0.1:2", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("start it with --address 127.0.0.1:1")
            && stderr.contains("a node at 127.0.0.1:2 needs a data directory of its own"),
        "{stderr}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_print_the_usage() {
    let out = Command::new(program())
        .args(["--role", "boss"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("voter, standby or spare") && stderr.contains("usage:"),
        "{stderr}"
    );
}

#[test]
fn snapshots_are_taken_every_n_entries_with_snapshot_every() {
    let dir = std::env::temp_dir().join(format!("piw-node-snapshots-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let mut node = Command::new(program())
        .args([
            "--bootstrap",
            "--address",
            &address,
            "--snapshot-every",
            "8",
        ])
        .arg("--dir")
        .arg(&dir)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let cluster = dqlite_wire::Cluster::new([address.as_str()], "snapshots", Default::default());
    let mut conn = cluster.connect().unwrap();
    conn.exec_sql("CREATE TABLE t (n INTEGER)", &[]).unwrap();
    for n in 0..40 {
        conn.exec_sql(
            "INSERT INTO t VALUES (?)",
            &[dqlite_wire::value::Value::Integer(n)],
        )
        .unwrap();
    }
    let snapshots = || {
        fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("snapshot-")
            })
            .count()
    };
    // Taken in the background after the entries are applied.
    let deadline = std::time::Instant::now() + WAIT;
    while snapshots() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(conn);
    node.kill().unwrap();
    node.wait().unwrap();
    let taken = snapshots();
    fs::remove_dir_all(&dir).unwrap();
    assert!(
        taken > 0,
        "no snapshot after 41 entries with --snapshot-every 8"
    );
}

#[test]
fn a_snapshot_interval_under_four_is_refused() {
    let out = Command::new(program())
        .args([
            "--address",
            "127.0.0.1:1",
            "--dir",
            "/nonexistent",
            "--snapshot-every",
            "3",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("--snapshot-every 3: 4 or more"), "{stderr}");
}

#[test]
fn a_new_node_is_refused_without_bootstrap_or_join_and_then_joins() {
    let mut cluster = TestCluster::start_with(NodeProgram::Piw(program()), 3, WAIT).unwrap();
    let mut node = Lone::new("told");
    node.start(&[]);
    assert_eq!(node.wait_exit(WAIT), Some(1), "{}", node.log());
    let log = node.log();
    assert!(
        log.contains("pass --bootstrap to form a new cluster") && log.contains("or --join"),
        "{log}"
    );
    assert!(!node.dir.exists(), "a refused start creates nothing");

    node.start(&["--join", cluster.address(0)]);
    assert!(
        lone::log_shows(&node.log_path, "joined the cluster as voter", WAIT),
        "{}",
        node.log()
    );
    cluster.wait_for_voters(4, WAIT).unwrap();
    let members = ids(&mut cluster);
    let joined = members.iter().find(|(_, a, _)| *a == node.address).unwrap();
    assert!(joined.0 != 1 && joined.2 == 0, "{members:?}");
}

#[test]
fn a_node_that_formed_its_own_cluster_is_refused_by_join_with_the_fix() {
    let mut cluster = TestCluster::start_with(NodeProgram::Piw(program()), 3, WAIT).unwrap();
    let formed = ids(&mut cluster);
    // The stray node: a cluster of its own, then stopped.
    let mut stray = Lone::new("stray");
    stray.start(&["--bootstrap"]);
    let gained = format!("leadership gained: this node ({}) leads", stray.address);
    assert!(
        lone::log_shows(&stray.log_path, &gained, WAIT),
        "{}",
        stray.log()
    );
    assert_eq!(stray.terminate(WAIT), Some(0), "{}", stray.log());

    // Restarted with --join and its old directory: refused, never a member.
    stray.start(&["--join", cluster.address(0)]);
    assert_eq!(stray.wait_exit(WAIT), Some(1), "{}", stray.log());
    let log = stray.log();
    let dir = stray.dir.display().to_string();
    assert!(
        log.contains(&format!(
            "{dir} holds a node of another cluster, [1@{}]",
            stray.address
        )) && log.contains("start the node with a new, empty --dir"),
        "{log}"
    );
    assert!(
        !log.contains("member of the cluster") && !log.contains("joined the cluster"),
        "{log}"
    );
    assert_eq!(ids(&mut cluster), formed);

    // What the refusal says to do: a new, empty directory joins.
    let mut fresh = Lone::at(&stray.address, "stray-new");
    fresh.start(&["--join", cluster.address(0)]);
    assert!(
        lone::log_shows(&fresh.log_path, "joined the cluster as voter", WAIT),
        "{}",
        fresh.log()
    );
    cluster.wait_for_voters(4, WAIT).unwrap();
    let members = ids(&mut cluster);
    assert!(
        members
            .iter()
            .any(|(id, a, _)| *a == stray.address && *id != 1),
        "{members:?}"
    );
}

#[test]
fn bootstrap_and_join_exclude_each_other() {
    let out = Command::new(program())
        .args(["--address", "127.0.0.1:1", "--dir", "/nonexistent"])
        .args(["--bootstrap", "--join", "127.0.0.1:2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("--bootstrap and --join exclude each other"),
        "{stderr}"
    );
}
