//! A local test cluster driven over stdin, for test runners that are not
//! cargo (a Jest suite spawns it and talks to it line by line).
//!
//! Usage: `dqlite-test-cluster [NODES]` (default 3). Once the cluster has
//! formed it prints one line, `{"addresses":["127.0.0.1:P1",...]}`, then
//! answers one line per command read from stdin:
//!
//! * `leader` → the leader's node index (0-based) or an error;
//! * `kill N` → SIGKILL node N; `restart N` → start it with its data kept;
//! * `freeze N` → SIGSTOP node N (`leader` then asks only the others);
//!   `thaw N` → SIGCONT it;
//! * `follows N` → wait (bounded) until node N agrees with the others on a
//!   leader other than itself; its index;
//! * `transfer N` → hand leadership to node N and wait until it leads;
//! * `voters N` → wait (bounded) until N nodes are voters;
//! * `stop`, or the end of stdin (the parent went away) → stop every node,
//!   remove the data and exit.
//!
//! Answers are `ok`, `ok <value>` or `error <message on one line>`.

use std::io::{self, BufRead, Write};
use std::time::Duration;

use dqlite_wire::harness::TestCluster;

const WAIT: Duration = Duration::from_secs(60);

fn main() {
    let n = std::env::args()
        .nth(1)
        .map(|a| a.parse::<usize>().expect("NODES is a number"))
        .unwrap_or(3);
    let mut cluster = match TestCluster::start(n, WAIT) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let addresses: Vec<String> = cluster
        .addresses()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect();
    let mut out = io::stdout();
    let _ = writeln!(out, "{{\"addresses\":[{}]}}", addresses.join(","));
    let _ = out.flush();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let arg = words.next().and_then(|w| w.parse::<usize>().ok());
        let answer = match (cmd, arg) {
            ("leader", _) => cluster.wait_for_leader(WAIT).map(|i| i.to_string()),
            ("kill", Some(i)) if i < n => {
                cluster.kill(i);
                Ok(String::new())
            }
            ("restart", Some(i)) if i < n && !cluster.is_running(i) => {
                cluster.restart(i).map(|()| String::new())
            }
            ("freeze", Some(i)) if i < n => cluster.freeze(i).map(|()| String::new()),
            ("thaw", Some(i)) if i < n => cluster.thaw(i).map(|()| String::new()),
            ("follows", Some(i)) if i < n => cluster.wait_follows(i, WAIT).map(|l| l.to_string()),
            ("transfer", Some(i)) if i < n => cluster.transfer(i, WAIT).map(|()| String::new()),
            ("voters", Some(v)) => cluster.wait_for_voters(v, WAIT).map(|()| String::new()),
            ("stop", _) => break,
            _ => Err(format!("unknown command: {line}")),
        };
        let reply = match answer {
            Ok(v) if v.is_empty() => "ok".to_owned(),
            Ok(v) => format!("ok {v}"),
            Err(e) => format!("error {}", e.replace('\n', " | ")),
        };
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
    cluster.stop();
}
