//! This node's place in the cluster: joining it (added, then given its
//! role, by the leader) and handing leadership over before a planned stop.
//! Both go through the cluster's leader with the addon's wire client; what
//! makes a join impossible is `crate::refusal`'s.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use dqlite_wire::identity;
use dqlite_wire::{Backoff, Cluster, Config, Connection, ErrorKind, NodeInfo, Timeouts};

use crate::identity::Identity;
use crate::refusal;

/// Roles, as the protocol numbers them.
pub const VOTER: u64 = 0;
pub const STANDBY: u64 = 1;
pub const SPARE: u64 = 2;

pub fn role_name(role: u64) -> &'static str {
    match role {
        VOTER => "voter",
        STANDBY => "stand-by",
        _ => "spare",
    }
}

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(1),
        // An Assign to voter is answered once the node has caught up.
        request: Duration::from_secs(60),
    }
}

/// Make this node a member with `role`, through the leader found from
/// `seeds`: added when the configuration lacks it, assigned when its role
/// differs, nothing when it is already there (a restart). Retries with
/// backoff until `deadline`; fails at once, saying what to do, when the
/// node cannot be that member ([`refusal`]).
pub fn join(
    seeds: &[String],
    me: &Identity,
    dir: &Path,
    role: u64,
    deadline: Instant,
) -> Result<Vec<String>, String> {
    let mut addresses: Vec<String> = seeds.to_vec();
    if !addresses.contains(&me.address) {
        addresses.push(me.address.clone());
    }
    let cluster = Cluster::new(
        addresses,
        "",
        Config {
            timeouts: timeouts(),
            ..Config::default()
        },
    );
    let mut done = Vec::new();
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    loop {
        let last = match step(&cluster, me, dir, seeds, role) {
            Ok(Step::Member) => return Ok(done),
            Ok(Step::Changed(what)) => {
                done.push(what);
                continue;
            }
            Err(Failure::Fatal(e)) => return Err(e),
            Err(Failure::Retry(e)) => e,
        };
        if !backoff.sleep_until_deadline(deadline) {
            return Err(format!(
                "could not join the cluster through {seeds:?}: {last}"
            ));
        }
    }
}

enum Step {
    Member,
    Changed(String),
}

enum Failure {
    Retry(String),
    Fatal(String),
}

fn step(
    cluster: &Cluster,
    me: &Identity,
    dir: &Path,
    seeds: &[String],
    role: u64,
) -> Result<Step, Failure> {
    let retry = |e: dqlite_wire::Error| Failure::Retry(e.to_string());
    let mut leader = cluster.connect_admin_once().map_err(|e| match e.kind() {
        ErrorKind::ClusterMismatch(m) => Failure::Fatal(refusal::mismatch(m, me, dir)),
        _ => retry(e),
    })?;
    let nodes = leader.cluster().map_err(retry)?;
    let own = identity::members_at(&me.address, timeouts());
    if let Some(why) = refusal::check(me, dir, seeds, leader.address(), &nodes, own.as_deref()) {
        return Err(Failure::Fatal(why));
    }
    // A member is its id at its address: every cluster's first node is id 1.
    match nodes
        .iter()
        .find(|n| n.id == me.id && n.address == me.address)
    {
        None => {
            leader.add_node(me.id, &me.address).map_err(retry)?;
            Ok(Step::Changed(format!("added by {}", leader.address())))
        }
        Some(NodeInfo { role: current, .. }) if *current != role => {
            leader.assign_role(me.id, role).map_err(retry)?;
            Ok(Step::Changed(format!("assigned {}", role_name(role))))
        }
        Some(_) => Ok(Step::Member),
    }
}

/// When this node leads, hand leadership to the most up-to-date voter so
/// that stopping it costs no election timeout. Returns the new leader's
/// address, or `None` when this node was not the leader.
pub fn hand_over(me: &Identity, within: Duration) -> Result<Option<String>, String> {
    let deadline = Instant::now() + within;
    let mut conn = Connection::connect(
        &me.address,
        Timeouts {
            connect: Duration::from_secs(1),
            request: within,
        },
    )
    .map_err(|e| e.to_string())?;
    let leads = conn
        .leader()
        .map_err(|e| e.to_string())?
        .is_some_and(|l| l.id == me.id);
    let voters = conn.cluster().map_err(|e| e.to_string())?;
    if !leads || !voters.iter().any(|n| n.id != me.id && n.role == VOTER) {
        return Ok(None);
    }
    // Id 0: the engine picks the voter whose log is most up to date.
    conn.transfer(0).map_err(|e| e.to_string())?;
    while Instant::now() < deadline {
        match conn.leader() {
            Ok(Some(l)) if l.id != me.id => return Ok(Some(l.address)),
            Ok(_) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("leadership did not move before the deadline".into())
}
