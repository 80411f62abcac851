//! `piw-dqlite-node`: one dqlite node for a pi-workflows-native cluster.
//!
//! The engine is libdqlite itself; this program gives it what a service
//! needs: an identity kept in its data directory, a new cluster formed only
//! when told (`--bootstrap`), joining the cluster by itself (added and made
//! a voter by the leader, again after a restart if that did not finish;
//! refused, with the fix, when the data directory holds another cluster),
//! leadership changes in its log, and a clean stop on SIGTERM that first
//! hands leadership to another voter. Logs go to stderr, one line per event.

mod engine;
mod identity;
mod leadership;
mod membership;
mod refusal;
mod signals;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use engine::{Engine, Settings};
use identity::Start;

const USAGE: &str = "\
usage: piw-dqlite-node --address HOST:PORT --dir DIR [options]

  --address HOST:PORT   the address other nodes and clients use (kept in DIR)
  --dir DIR             data directory (created if missing; keep it across restarts)
  --bootstrap           form a new cluster with this node as its first member
                        (once, on one node; a restart needs neither flag)
  --join ADDR[,ADDR]    nodes of the cluster to join (a new node needs
                        --bootstrap or --join; a restart keeps its cluster)
  --role ROLE           voter (default), standby or spare
  --bind ADDR           listen here instead of --address (e.g. 0.0.0.0:9001)
  --latency-ms N        average one-way network latency; Raft's heartbeat and
                        election timeouts scale with it (default 100: a leader
                        SIGKILLed on loopback is replaced in about 3 s; 50 in
                        about 2 s, libdqlite's own default in about 6 s)
  --snapshot-every N    snapshot the database every N Raft log entries and keep
                        N entries after each snapshot (default 512; libdqlite's
                        own keeps 8192: ~0.4 GB of log per node, in memory and on
                        disk, when each commit carries 40-80 KiB of pages)
  --join-timeout-s N    give up joining after N seconds (default 300)
  --version             print the program's and libdqlite's versions
";

#[derive(Debug)]
struct Options {
    address: String,
    dir: PathBuf,
    bootstrap: bool,
    join: Vec<String>,
    role: u64,
    bind: Option<String>,
    latency_ms: u32,
    snapshot_every: u32,
    join_timeout: Duration,
}

/// Measured on loopback (three nodes, the leader SIGKILLed, until another
/// node names a new leader): 20 ms → 0.6 s, 50 → 1.6–2.3 s, 100 → 2.7–3.1 s,
/// unset (libdqlite's default) → 5.1–6.2 s. Lower values elect faster but
/// call needless elections when a node is starved of CPU: at 50 the
/// failover suite on two busy cores met an extra leadership change just
/// after a restart. 100 is about dqlite-demo's timing.
const DEFAULT_LATENCY_MS: u32 = 100;

/// libdqlite's own snapshot parameters (a snapshot every 1,024 entries,
/// 8,192 kept after it) keep up to ~9,200 entries, each a commit's WAL
/// frames: a store commit carries 10–20 pages, so a node of the failover
/// suite peaked at 311–435 MB of memory and as much log on disk within a
/// minute, and a restarted node had all of it to load and catch up on. At
/// 512/512: 96–107 MB and 90–96 MB, failover times unchanged. A follower
/// that falls further behind gets a snapshot (the database) instead of the
/// entries.
const DEFAULT_SNAPSHOT_EVERY: u32 = 512;

/// How often the node asks itself who leads, for its log: a change is
/// logged within this much of the election (an election takes seconds).
const LEADERSHIP_POLL: Duration = Duration::from_millis(200);

fn parse(args: &[String]) -> Result<Options, String> {
    let mut address = None;
    let mut dir = None;
    let mut bootstrap = false;
    let mut join = Vec::new();
    let mut role = membership::VOTER;
    let mut bind = None;
    let mut latency_ms = DEFAULT_LATENCY_MS;
    let mut snapshot_every = DEFAULT_SNAPSHOT_EVERY;
    let mut join_timeout = Duration::from_secs(300);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--address" => address = Some(value()?),
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--bootstrap" => bootstrap = true,
            "--join" => join.extend(
                value()?
                    .split(',')
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned),
            ),
            "--role" => {
                role = match value()?.as_str() {
                    "voter" => membership::VOTER,
                    "standby" => membership::STANDBY,
                    "spare" => membership::SPARE,
                    other => return Err(format!("--role {other}: voter, standby or spare")),
                }
            }
            "--bind" => bind = Some(value()?),
            "--latency-ms" => {
                let v = value()?;
                let ms = v
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| (1..=3_600_000).contains(&n));
                latency_ms = ms.ok_or_else(|| format!("--latency-ms {v}: 1 to 3600000"))?;
            }
            "--snapshot-every" => {
                let v = value()?;
                let n = v.parse::<u32>().ok().filter(|&n| n >= 4);
                snapshot_every = n.ok_or_else(|| format!("--snapshot-every {v}: 4 or more"))?;
            }
            "--join-timeout-s" => {
                let v = value()?;
                let s = v
                    .parse::<u64>()
                    .map_err(|_| format!("--join-timeout-s {v}: seconds"))?;
                join_timeout = Duration::from_secs(s);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if bootstrap && !join.is_empty() {
        return Err(
            "--bootstrap and --join exclude each other: --bootstrap forms a new cluster, \
             --join joins an existing one"
                .into(),
        );
    }
    Ok(Options {
        address: address.ok_or("--address is required")?,
        dir: dir.ok_or("--dir is required")?,
        bootstrap,
        join,
        role,
        bind,
        latency_ms,
        snapshot_every,
        join_timeout,
    })
}

fn log(line: &str) {
    eprintln!("piw-dqlite-node: {line}");
}

fn run(o: Options) -> Result<(), String> {
    let start = match (o.bootstrap, o.join.is_empty()) {
        (true, _) => Start::Bootstrap,
        (false, false) => Start::Join,
        (false, true) => Start::Restart,
    };
    let restarting = identity::load(&o.dir)?.is_some();
    let me = identity::choose(&o.dir, &o.address, start, || {
        engine::generate_id(&o.address)
    })?;
    if restarting && o.bootstrap {
        log(&format!(
            "--bootstrap: {} already holds node {}, which restarts as it was (nothing to bootstrap)",
            o.dir.display(),
            me.id
        ));
    }
    let termination = signals::block_termination().map_err(|e| format!("blocking signals: {e}"))?;
    let mut engine = Engine::create(&Settings {
        id: me.id,
        address: me.address.clone(),
        bind: o.bind.clone(),
        data_dir: o.dir.clone(),
        latency_ms: Some(o.latency_ms),
        snapshot: Some(engine::Snapshots {
            threshold: o.snapshot_every,
            trailing: o.snapshot_every,
        }),
    })?;
    engine.start()?;
    log(&format!(
        "node {} serving at {} (data {})",
        me.id,
        me.address,
        o.dir.display()
    ));
    leadership::watch(me.address.clone(), LEADERSHIP_POLL, log);
    if !o.join.is_empty() {
        let deadline = Instant::now() + o.join_timeout;
        // Joining runs beside the node: a restarted member is served at
        // once, and a stop signal is not held up by a slow leader.
        let (seeds, who, dir, role) = (o.join.clone(), me.clone(), o.dir.clone(), o.role);
        std::thread::spawn(
            move || match membership::join(&seeds, &who, &dir, role, deadline) {
                Ok(changes) if changes.is_empty() => log(&format!(
                    "member of the cluster as {}",
                    membership::role_name(role)
                )),
                Ok(changes) => log(&format!(
                    "joined the cluster as {} ({})",
                    membership::role_name(role),
                    changes.join(", ")
                )),
                Err(e) => {
                    // A node outside the cluster serves nobody: stop it, and
                    // exit non-zero so that its supervisor sees the failure.
                    log(&format!("joining failed: {e}"));
                    signals::stop_self(signals::JOIN_FAILED);
                }
            },
        );
    }
    let signal = termination.wait();
    log(&format!("{signal}: stopping"));
    if signals::stop_reason() == signals::JOIN_FAILED {
        engine.stop()?;
        return Err("stopped: the node could not join its cluster".into());
    }
    match membership::hand_over(&me, Duration::from_secs(5)) {
        Ok(Some(to)) => log(&format!("leadership handed to {to}")),
        Ok(None) => {}
        Err(e) => log(&format!("could not hand leadership over: {e}")),
    }
    engine.stop()?;
    log("stopped");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--version") {
        println!(
            "piw-dqlite-node {} (libdqlite {})",
            env!("CARGO_PKG_VERSION"),
            engine::version()
        );
        return ExitCode::SUCCESS;
    }
    let result = parse(&args).and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(&e);
            if e.starts_with("--") || e.starts_with("unknown argument") {
                eprint!("{USAGE}");
            }
            ExitCode::from(1)
        }
    }
}
