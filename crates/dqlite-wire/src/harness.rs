//! A local dqlite cluster for tests: nodes on loopback.
//!
//! The node program is this repository's `piw-dqlite-node` when
//! `PIW_DQLITE_NODE` names its binary, and go-dqlite's `dqlite-demo`
//! otherwise ([`NodeProgram`]); for the demo, [`TestCluster::start`]
//! installs Debian's `libdqlite0` and `go-dqlite` when it is missing (as
//! root, with `apt-get`). Nodes start on free 127.0.0.1 ports with data
//! directories under a fresh temporary directory, and the start waits until
//! every node is a voter and agrees on the leader. Nodes can be SIGKILLed,
//! stopped with SIGTERM and restarted with their data directory kept, and
//! frozen with SIGSTOP (then left out of "who leads?": a frozen node cannot
//! answer) and resumed with SIGCONT.
//! Dropping the cluster SIGKILLs every node and removes the directory.
//! Every wait is bounded and fails with the node logs in its message.
//! With `piw-dqlite-node`, [`DELAY_VAR`] puts a network delay between the
//! nodes and their clients ([`delay`]).

mod delay;

pub use delay::DELAY_VAR;

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::conn::{Connection, Timeouts};

const DEMO: &str = "dqlite-demo";
/// The variable that names the `piw-dqlite-node` binary to test with.
pub const NODE_PROGRAM_VAR: &str = "PIW_DQLITE_NODE";

/// Which program runs the nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeProgram {
    /// go-dqlite's `dqlite-demo` (from Debian's `go-dqlite`).
    Demo,
    /// This repository's `piw-dqlite-node`, at this path.
    Piw(PathBuf),
}

impl NodeProgram {
    /// `piw-dqlite-node` when [`NODE_PROGRAM_VAR`] names it (a relative
    /// path is taken from the current directory), else the demo.
    pub fn from_env() -> NodeProgram {
        match std::env::var_os(NODE_PROGRAM_VAR) {
            Some(p) if !p.is_empty() && p != "demo" => {
                let p = PathBuf::from(p);
                NodeProgram::Piw(std::path::absolute(&p).unwrap_or(p))
            }
            _ => NodeProgram::Demo,
        }
    }

    /// The command that runs node `node`, joining `join` when given. A
    /// first `piw-dqlite-node` without `join` is told to `--bootstrap`
    /// (it refuses to form a cluster otherwise); a restart needs neither.
    fn command(&self, node: &Node, join: Option<&str>) -> Command {
        let mut cmd = match self {
            NodeProgram::Demo => {
                let mut cmd = Command::new(DEMO);
                cmd.args(["--api", &node.api, "--db", &node.db, "-D"]);
                cmd
            }
            NodeProgram::Piw(path) => {
                let mut cmd = Command::new(path);
                if let Some(bind) = &node.bind {
                    cmd.args(["--bind", bind]);
                }
                cmd.args(["--address", &node.db, "--dir"]);
                cmd
            }
        };
        cmd.arg(&node.dir);
        if let Some(join) = join {
            cmd.args(["--join", join]);
        } else if matches!(self, NodeProgram::Piw(_)) && !node.started {
            cmd.arg("--bootstrap");
        }
        cmd
    }
}

/// Debian packages that provide `dqlite-demo` and its library.
pub const PACKAGES: [&str; 2] = ["libdqlite0", "go-dqlite"];

fn probe_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_millis(500),
        request: Duration::from_secs(2),
    }
}

/// Make sure `dqlite-demo` can be run, installing the packages if needed.
pub fn ensure_installed() -> Result<(), String> {
    if demo_runs() {
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !is_root {
        return Err(format!(
            "{DEMO} is missing; install it with: apt-get install -y {}",
            PACKAGES.join(" ")
        ));
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-q"]).status();
        if !install() {
            return Err(format!("apt-get install {} failed", PACKAGES.join(" ")));
        }
    }
    if demo_runs() {
        Ok(())
    } else {
        Err(format!("{DEMO} still does not run after installing"))
    }
}

fn demo_runs() -> bool {
    Command::new(DEMO)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The installed version of a Debian package, if any.
pub fn package_version(name: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", name])
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// How many times [`TestCluster::start_with`] starts a cluster whose node lost its port.
const START_ATTEMPTS: usize = 3;

/// Whether a failed start's report (with the nodes' log tails) says a node found its port
/// taken: both node programs print the Go / libuv wording of `EADDRINUSE`.
fn lost_a_port(report: &str) -> bool {
    report.contains("address already in use")
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[derive(Debug)]
struct Node {
    api: String,
    db: String,
    /// Where the node listens when a delay proxy holds `db` ([`delay`]).
    bind: Option<String>,
    dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Started before (its data directory holds its identity).
    started: bool,
    /// SIGSTOPped and not resumed yet.
    frozen: bool,
}

/// A running local cluster.
#[derive(Debug)]
pub struct TestCluster {
    root: PathBuf,
    program: NodeProgram,
    nodes: Vec<Node>,
}

impl TestCluster {
    /// Start `n` nodes (1 to 9) of [`NodeProgram::from_env`] and wait up to
    /// `timeout` for them to form a cluster of voters with one leader.
    pub fn start(n: usize, timeout: Duration) -> Result<TestCluster, String> {
        TestCluster::start_with(NodeProgram::from_env(), n, timeout)
    }

    /// [`TestCluster::start`] with the given node program. A free port is found by binding
    /// and releasing it, so another process (a cluster of a test running beside this one) can
    /// take it before the node binds it, and the node exits; the cluster is then started
    /// again on new ports, up to [`START_ATTEMPTS`] times in all.
    pub fn start_with(
        program: NodeProgram,
        n: usize,
        timeout: Duration,
    ) -> Result<TestCluster, String> {
        let mut attempt = 1;
        loop {
            match TestCluster::start_once(program.clone(), n, timeout) {
                Err(e) if lost_a_port(&e) && attempt < START_ATTEMPTS => attempt += 1,
                started => return started,
            }
        }
    }

    fn start_once(
        program: NodeProgram,
        n: usize,
        timeout: Duration,
    ) -> Result<TestCluster, String> {
        assert!((1..=9).contains(&n), "1 to 9 nodes");
        match &program {
            NodeProgram::Demo => ensure_installed()?,
            NodeProgram::Piw(path) if !path.is_file() => {
                return Err(format!(
                    "{}: no such node program (build it: cargo build -p dqlite-node)",
                    path.display()
                ))
            }
            NodeProgram::Piw(_) => {}
        }
        let stamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let root = std::env::temp_dir().join(format!(
            "dqlite-wire-cluster-{}-{stamp}",
            std::process::id()
        ));
        fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        let mut cluster = TestCluster {
            root,
            program,
            nodes: Vec::new(),
        };
        for i in 0..n {
            let port = |what| free_port().map_err(|e| format!("free {what} port: {e}"));
            let (api, db) = (port("api")?, port("db")?);
            let dir = cluster.root.join(format!("node{}", i + 1));
            fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            cluster.nodes.push(Node {
                api: format!("127.0.0.1:{api}"),
                db: format!("127.0.0.1:{db}"),
                bind: None,
                log: cluster.root.join(format!("node{}.log", i + 1)),
                dir,
                child: None,
                started: false,
                frozen: false,
            });
        }
        let delay = delay::from_env().filter(|_| matches!(cluster.program, NodeProgram::Piw(_)));
        if let Some(delay) = delay {
            for node in &mut cluster.nodes {
                let hidden = format!("127.0.0.1:{}", free_port().map_err(|e| e.to_string())?);
                let listener =
                    TcpListener::bind(&node.db).map_err(|e| format!("{}: {e}", node.db))?;
                delay::forward(listener, hidden.clone(), delay);
                node.bind = Some(hidden);
            }
        }
        let deadline = Instant::now() + timeout;
        // The first node bootstraps (`--bootstrap` for piw-dqlite-node); the
        // others join it one by one (both programs make joiners voters
        // themselves).
        for i in 0..n {
            cluster.spawn(i)?;
            if i == 0 {
                cluster.wait_until(deadline, "node 1 to lead", |c| {
                    c.leader_seen_by(0).as_deref() == Some(c.nodes[0].db.as_str())
                })?;
            }
        }
        cluster.wait_until(deadline, &format!("{n} voters and one leader"), |c| {
            c.formed(n)
        })?;
        Ok(cluster)
    }

    /// The replication ("db") addresses of all nodes, in node order.
    pub fn addresses(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.db.clone()).collect()
    }

    /// The db address of node `i`.
    pub fn address(&self, i: usize) -> &str {
        &self.nodes[i].db
    }

    /// The data directory of node `i`.
    pub fn data_dir(&self, i: usize) -> &Path {
        &self.nodes[i].dir
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let join = (i > 0).then(|| self.nodes[0].db.clone());
        let node = &self.nodes[i];
        let log = File::options()
            .create(true)
            .append(true)
            .open(&node.log)
            .map_err(|e| e.to_string())?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = self.program.command(node, join.as_deref());
        cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawn {:?}: {e}", cmd.get_program()))?;
        self.nodes[i].child = Some(child);
        self.nodes[i].started = true;
        Ok(())
    }

    /// The log file of node `i` (its stdout and stderr).
    pub fn log_path(&self, i: usize) -> &Path {
        &self.nodes[i].log
    }

    /// Which node (index) node `i` reports as the leader.
    pub fn leader_seen_by(&self, i: usize) -> Option<String> {
        if !self.is_running(i) {
            return None;
        }
        let mut conn = Connection::connect(&self.nodes[i].db, probe_timeouts()).ok()?;
        conn.leader().ok().flatten().map(|l| l.address)
    }

    /// Whether node `i` is frozen (SIGSTOPped).
    pub fn is_frozen(&self, i: usize) -> bool {
        self.nodes[i].frozen
    }

    /// The index of the node every running node that is not frozen agrees
    /// is the leader.
    pub fn leader(&self) -> Option<usize> {
        let mut seen = None;
        let answering = (0..self.nodes.len()).filter(|&i| self.is_running(i) && !self.is_frozen(i));
        for i in answering {
            let l = self.leader_seen_by(i)?;
            if seen.get_or_insert_with(|| l.clone()) != &l {
                return None;
            }
        }
        let l = seen?;
        self.nodes
            .iter()
            .position(|n| n.db == l)
            .filter(|&i| self.is_running(i) && !self.is_frozen(i))
    }

    fn formed(&self, voters: usize) -> bool {
        let Some(leader) = self.leader() else {
            return false;
        };
        let Ok(mut conn) = Connection::connect(&self.nodes[leader].db, probe_timeouts()) else {
            return false;
        };
        conn.cluster()
            .map(|nodes| nodes.iter().filter(|n| n.role == 0).count() == voters)
            .unwrap_or(false)
    }

    /// Wait (bounded) until the running nodes agree on a leader; its index.
    pub fn wait_for_leader(&mut self, timeout: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        self.wait_until(deadline, "a leader", |c| c.leader().is_some())?;
        self.leader().ok_or_else(|| "leader vanished".to_owned())
    }

    /// Wait (bounded) until `n` nodes are voters again.
    pub fn wait_for_voters(&mut self, n: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        self.wait_until(deadline, &format!("{n} voters"), |c| c.formed(n))
    }

    fn wait_until(
        &mut self,
        deadline: Instant,
        what: &str,
        mut ok: impl FnMut(&TestCluster) -> bool,
    ) -> Result<(), String> {
        loop {
            if let Some(dead) = self.exited_node() {
                return Err(format!(
                    "waiting for {what}: node {} exited\n{}",
                    dead + 1,
                    self.logs()
                ));
            }
            if ok(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("timed out waiting for {what}\n{}", self.logs()));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn exited_node(&mut self) -> Option<usize> {
        self.nodes.iter_mut().position(|n| {
            n.child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
        })
    }

    /// SIGKILL node `i` and reap it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.nodes[i].frozen = false;
    }

    /// Freeze node `i` with SIGSTOP: its sockets stay open and nothing
    /// answers on them, as with a long pause of its process.
    pub fn freeze(&mut self, i: usize) -> Result<(), String> {
        let child = self.nodes[i]
            .child
            .as_ref()
            .ok_or_else(|| format!("node {} is not running", i + 1))?;
        send_signal("STOP", child.id());
        self.nodes[i].frozen = true;
        Ok(())
    }

    /// Resume node `i` with SIGCONT.
    pub fn thaw(&mut self, i: usize) -> Result<(), String> {
        let child = self.nodes[i]
            .child
            .as_ref()
            .ok_or_else(|| format!("node {} is not running", i + 1))?;
        send_signal("CONT", child.id());
        self.nodes[i].frozen = false;
        Ok(())
    }

    /// Wait (bounded) until every running node, node `i` included, agrees
    /// on a leader other than node `i`: `i` is a follower again.
    pub fn wait_follows(&mut self, i: usize, timeout: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        let what = format!("node {} to follow", i + 1);
        self.wait_until(deadline, &what, |c| c.leader().is_some_and(|l| l != i))?;
        self.leader().ok_or_else(|| "leader vanished".to_owned())
    }

    /// Hand leadership to node `i` (a voter), and wait (bounded) until every
    /// running node agrees it leads. Raft hands it over only once `i` has
    /// every entry the leader has; a transfer that times out meanwhile (the
    /// leader keeps appending) is asked for again until `timeout`.
    pub fn transfer(&mut self, i: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let leader =
                self.wait_for_leader(deadline.saturating_duration_since(Instant::now()))?;
            if leader == i {
                return Ok(());
            }
            let asked = self.ask_transfer(leader, i, deadline);
            if Instant::now() >= deadline {
                return Err(format!(
                    "timed out handing leadership to node {}: {asked:?}\n{}",
                    i + 1,
                    self.logs()
                ));
            }
            if asked.is_err() {
                thread::sleep(Duration::from_millis(200));
            }
        }
    }

    fn ask_transfer(&self, leader: usize, i: usize, deadline: Instant) -> Result<(), String> {
        let mut conn = Connection::connect(&self.nodes[leader].db, probe_timeouts())
            .map_err(|e| e.to_string())?;
        let nodes = conn.cluster().map_err(|e| e.to_string())?;
        let id = nodes
            .iter()
            .find(|n| n.address == self.nodes[i].db)
            .map(|n| n.id)
            .ok_or_else(|| format!("node {} is not a member", i + 1))?;
        conn.set_timeouts(Timeouts {
            request: deadline.saturating_duration_since(Instant::now()),
            ..probe_timeouts()
        });
        conn.transfer(id)
            .map_err(|e| format!("transfer to node {}: {e}", i + 1))
    }

    /// Stop node `i` with SIGTERM (a planned stop) and wait up to
    /// `timeout` for it to exit; its exit code. SIGKILLed when it does not.
    pub fn terminate(&mut self, i: usize, timeout: Duration) -> Result<Option<i32>, String> {
        let Some(child) = self.nodes[i].child.as_ref() else {
            return Err(format!("node {} is not running", i + 1));
        };
        send_sigterm(child.id());
        match self.wait_exit(i, timeout) {
            Ok(code) => Ok(code),
            Err(e) => {
                self.kill(i);
                Err(format!("{e} after SIGTERM"))
            }
        }
    }

    /// Wait up to `timeout` for node `i` to exit by itself; its exit code
    /// (`Err` when it is still running then, or was not running).
    pub fn wait_exit(&mut self, i: usize, timeout: Duration) -> Result<Option<i32>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(child) = self.nodes[i].child.as_mut() else {
                return Err(format!("node {} is not running", i + 1));
            };
            if let Ok(Some(status)) = child.try_wait() {
                self.nodes[i].child = None;
                return Ok(status.code());
            }
            if Instant::now() >= deadline {
                return Err(format!("node {} is still running", i + 1));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The cluster's configuration as the leader reports it.
    pub fn members(&mut self) -> Result<Vec<crate::NodeInfo>, String> {
        let leader = self.wait_for_leader(Duration::from_secs(30))?;
        let mut conn = Connection::connect(&self.nodes[leader].db, probe_timeouts())
            .map_err(|e| e.to_string())?;
        conn.cluster().map_err(|e| e.to_string())
    }

    /// Start node `i` again with its data directory as it was.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        assert!(!self.is_running(i), "node {} is running", i + 1);
        self.spawn(i)
    }

    /// The last lines of every node's log.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            out.push_str(&format!("--- node {} ({}) log tail:\n", i + 1, n.db));
            if let Ok(f) = File::open(&n.log) {
                let lines: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
                for l in &lines[lines.len().saturating_sub(15)..] {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Kill every node and remove the data.
    pub fn stop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// SIGTERM through `kill(1)`: the crate stays std only.
fn send_sigterm(pid: u32) {
    send_signal("TERM", pid);
}

/// Signal `pid` (`TERM`, `STOP`, `CONT`) through `kill(1)`.
fn send_signal(signal: &str, pid: u32) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status();
}

#[cfg(test)]
mod tests {
    use super::lost_a_port;

    #[test]
    fn a_port_taken_before_the_node_bound_it_is_told_from_other_failures() {
        // dqlite-demo's report in a CI run where another test's cluster took the port.
        let demo = "waiting for 3 voters and one leader: node 2 exited\n--- node 2 (127.0.0.1:45741) log tail:\n\
                    Error: listen tcp 127.0.0.1:41793: bind: address already in use\nUsage:";
        assert!(lost_a_port(demo));
        // libuv's wording, which piw-dqlite-node's start failure carries.
        assert!(lost_a_port(
            "node 1 exited\n... dqlite_node_start: listen: address already in use"
        ));
        assert!(!lost_a_port(
            "waiting for node 1 to lead: node 1 exited\n... no such file or directory"
        ));
    }
}
