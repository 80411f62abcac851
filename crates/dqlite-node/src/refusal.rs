//! Why this node cannot join the cluster `--join` reaches, and what to do
//! instead: each refusal names the data directory, the clusters involved
//! (their members as id@address) and the fix. Built from what the leader
//! and the node itself report; `crate::membership` acts on them.

use std::path::Path;

use dqlite_wire::identity::{describe, same_cluster, Mismatch};
use dqlite_wire::NodeInfo;

use crate::identity::Identity;

/// The refusal for a node that cannot be a member of the cluster whose
/// leader at `leader` reports `nodes`; `own` is the configuration the node
/// itself holds (`None` when it holds none, or did not answer).
pub fn check(
    me: &Identity,
    dir: &Path,
    seeds: &[String],
    leader: &str,
    nodes: &[NodeInfo],
    own: Option<&[NodeInfo]>,
) -> Option<String> {
    if let Some(other) = nodes
        .iter()
        .find(|n| n.address == me.address && n.id != me.id)
    {
        return Some(format!(
            "the cluster already has node {} at {}: this data directory ({}) is not that node's \
             (remove it from the cluster, or start with its data directory)",
            other.id,
            me.address,
            dir.display()
        ));
    }
    if let Some(own) = own.filter(|own| !same_cluster(own, nodes)) {
        return Some(another_cluster(dir, own, leader, nodes));
    }
    if let Some(same_id) = nodes
        .iter()
        .find(|n| n.id == me.id && n.address != me.address)
    {
        let own = [NodeInfo {
            id: me.id,
            address: me.address.clone(),
            role: 0,
        }];
        return Some(format!(
            "{} (the cluster's node {} is {})",
            another_cluster(dir, &own, leader, nodes),
            same_id.id,
            same_id.address
        ));
    }
    let others: Vec<&String> = seeds.iter().filter(|s| **s != me.address).collect();
    let listed = |s: &&String| nodes.iter().any(|n| &n.address == *s);
    if leader == me.address && !others.is_empty() && !others.iter().any(listed) {
        return Some(format!(
            "this node leads a cluster of its own, {}, which has none of the --join addresses \
             ({}): {} holds that cluster. To join the cluster at {}, start this node with a new, \
             empty --dir; to keep running its own cluster, start it without --join",
            describe(nodes),
            others
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            dir.display(),
            others[0]
        ));
    }
    None
}

/// The refusal for a mismatch the wire client found among the addresses
/// tried (the `--join` ones and this node's own).
pub fn mismatch(m: &Mismatch, me: &Identity, dir: &Path) -> String {
    let (leader, nodes) = &m.kept;
    if leader == &me.address {
        if let Some((address, theirs)) = m.others.first() {
            return another_cluster(dir, nodes, address, theirs);
        }
    }
    if let Some((_, own)) = m.others.iter().find(|(a, _)| a == &me.address) {
        return another_cluster(dir, own, leader, nodes);
    }
    format!("{m}. Pass --join the addresses of one cluster: the one this node is to join")
}

fn another_cluster(dir: &Path, own: &[NodeInfo], leader: &str, nodes: &[NodeInfo]) -> String {
    format!(
        "{} holds a node of another cluster, {}, than the one --join reaches, {} (leader {leader}): \
         a data directory belongs to one cluster. To join this one, start the node with a new, \
         empty --dir (keep {} while that other cluster's data matters); to go on running the \
         other cluster, start it without --join",
        dir.display(),
        describe(own),
        describe(nodes),
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: u64, address: &str) -> NodeInfo {
        NodeInfo {
            id,
            address: address.into(),
            role: 0,
        }
    }

    fn me(id: u64, address: &str) -> Identity {
        Identity {
            id,
            address: address.into(),
        }
    }

    const DIR: &str = "/var/lib/piw";

    #[test]
    fn a_stray_first_node_is_refused_with_the_fix() {
        let cluster = [n(1, "a:1"), n(7, "c:1")];
        let seeds = ["a:1".to_string()];
        let stray = me(1, "b:1");
        let own = [n(1, "b:1")];
        let why = check(&stray, Path::new(DIR), &seeds, "a:1", &cluster, Some(&own)).unwrap();
        assert!(
            why.starts_with("/var/lib/piw holds a node of another cluster, [1@b:1], than the one --join reaches, [1@a:1, 7@c:1] (leader a:1)")
                && why.contains("new, empty --dir"),
            "{why}"
        );
        // Without its own configuration: its id is the cluster's node 1 elsewhere.
        let why = check(&stray, Path::new(DIR), &seeds, "a:1", &cluster, None).unwrap();
        assert!(why.contains("(the cluster's node 1 is a:1)"), "{why}");
        // Leading a cluster of its own that lists none of the --join nodes.
        let why = check(&stray, Path::new(DIR), &seeds, "b:1", &own, Some(&own)).unwrap();
        assert!(
            why.starts_with("this node leads a cluster of its own, [1@b:1]"),
            "{why}"
        );
    }

    #[test]
    fn members_new_nodes_and_restarts_pass() {
        let cluster = [n(1, "a:1"), n(7, "b:1")];
        let seeds = ["a:1".to_string()];
        let dir = Path::new(DIR);
        // A new node: no configuration of its own yet.
        assert_eq!(
            check(&me(9, "c:1"), dir, &seeds, "a:1", &cluster, None),
            None
        );
        // A member restarting, its own configuration a little behind.
        let own = [n(1, "a:1"), n(7, "b:1")];
        assert_eq!(
            check(&me(7, "b:1"), dir, &seeds, "a:1", &cluster, Some(&own)),
            None
        );
        // A member that leads the cluster the --join nodes are in.
        assert_eq!(
            check(&me(7, "b:1"), dir, &seeds, "b:1", &cluster, Some(&own)),
            None
        );
        // Another node at this address is the old refusal.
        let why = check(&me(8, "b:1"), dir, &seeds, "a:1", &cluster, None).unwrap();
        assert!(
            why.starts_with("the cluster already has node 7 at b:1"),
            "{why}"
        );
    }

    #[test]
    fn a_mismatch_among_the_join_addresses_says_so() {
        let m = Mismatch {
            kept: ("a:1".into(), vec![n(1, "a:1")]),
            others: vec![("b:1".into(), vec![n(1, "b:1")])],
            reconnection: false,
        };
        let why = mismatch(&m, &me(1, "b:1"), Path::new(DIR));
        assert!(
            why.starts_with("/var/lib/piw holds a node of another cluster, [1@b:1]"),
            "{why}"
        );
        let why = mismatch(&m, &me(1, "a:1"), Path::new(DIR));
        assert!(
            why.starts_with("/var/lib/piw holds a node of another cluster, [1@a:1]"),
            "{why}"
        );
        let why = mismatch(&m, &me(5, "c:1"), Path::new(DIR));
        assert!(
            why.starts_with("the addresses belong to different dqlite clusters"),
            "{why}"
        );
        assert!(why.ends_with("the one this node is to join"), "{why}");
    }
}
