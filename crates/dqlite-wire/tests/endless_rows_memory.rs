//! The memory a result that never ends costs the client, with the default
//! reply limits. One test in its own binary: the process's peak RSS
//! (`VmHWM`) is this test's alone.

use std::time::Duration;

use dqlite_wire::fake::{Behaviour, FakeNode};
use dqlite_wire::{Cluster, Config, ErrorKind};

/// A field of /proc/self/status, in KiB (Linux only; `None` elsewhere).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn an_endless_result_grows_the_client_by_less_than_64_mib() {
    let node = FakeNode::start(Behaviour::EndlessRows);
    let config = Config {
        reconnect_deadline: Duration::from_secs(10),
        ..Config::default()
    };
    let cluster = Cluster::from_url(&format!("dqlite://{}/db", node.address()), config).unwrap();
    let mut conn = cluster.connect().unwrap();
    let Some(before) = status_kib("VmRSS:") else {
        return;
    };
    let e = conn.query_all("SELECT 1", &[]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ReplyTooLarge { .. }), "{e}");
    let peak = status_kib("VmHWM:").unwrap();
    let growth_mib = peak.saturating_sub(before) as f64 / 1024.0;
    println!("endless result: peak RSS growth {growth_mib:.1} MiB");
    assert!(growth_mib < 64.0, "{growth_mib} MiB");
}
