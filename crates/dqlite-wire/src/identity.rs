//! Which cluster a node belongs to, and the pin that keeps a [`Cluster`](crate::Cluster) on
//! the cluster it reached first.
//!
//! dqlite has no cluster id. What every node can report is its Raft configuration, the
//! members' ids and addresses (the Cluster request; followers answer it too, a node that
//! belongs to no cluster yet answers with no members). That configuration is the identity used
//! here, compared by [`same_cluster`]:
//!
//! * a member is its id **and** its address: the first node of every cluster has the same id
//!   (1 for `piw-dqlite-node` and libdqlite, go-dqlite's fixed bootstrap id for `dqlite-demo`),
//!   so two clusters formed apart both have a node 1, at different addresses;
//! * a configuration changes one member at a time, so two views of one cluster taken at
//!   different times share members: one shared member is enough;
//! * but a shared bootstrap member proves nothing when the earlier view had members with
//!   generated (random 64-bit) ids: a node 1 whose data directory was wiped and bootstrapped
//!   again at the same address is a new cluster of one that still "shares" node 1. When the
//!   earlier view has generated ids, one of them must be shared.
//!
//! So a store is refused when it reaches a cluster that shares no member with the one it
//! opened, or none of its random-id members. The one change this cannot tell from a new
//! cluster: a cluster that lost every member with a generated id while the store was not
//! looking (shrunk to its first node alone); the store then refuses, and a new store opens
//! it. The one new cluster it cannot tell from the old: a cluster of node 1 alone, wiped and
//! bootstrapped again at the same address; `piw-dqlite-node` only bootstraps when told to.

use std::fmt;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use crate::conn::{Connection, Timeouts};
use crate::error::{Error, ErrorKind, Outcome, Result};
use crate::message::NodeInfo;

/// The id libdqlite bootstraps a cluster with (`piw-dqlite-node`'s first node).
pub const BOOTSTRAP_ID: u64 = 1;
/// go-dqlite's bootstrap id (`dqlite-demo`'s first node).
pub const GO_DQLITE_BOOTSTRAP_ID: u64 = 0x2dc1_7185_8c31_55be;

/// Whether `id` is a bootstrap id: the first node of any cluster may have it.
pub fn is_bootstrap_id(id: u64) -> bool {
    id == BOOTSTRAP_ID || id == GO_DQLITE_BOOTSTRAP_ID
}

fn shares(a: &[NodeInfo], b: &NodeInfo) -> bool {
    a.iter().any(|n| n.id == b.id && n.address == b.address)
}

/// Whether the configuration `later` belongs to the same cluster as `earlier` (see the
/// module's header): they share a member (same id and address), and one with a generated id
/// when `earlier` has any.
pub fn same_cluster(earlier: &[NodeInfo], later: &[NodeInfo]) -> bool {
    let generated = earlier.iter().any(|n| !is_bootstrap_id(n.id));
    earlier
        .iter()
        .filter(|n| !generated || !is_bootstrap_id(n.id))
        .any(|n| shares(later, n))
}

/// The members as `[1@10.0.0.1:9001, 6935…@10.0.0.2:9001]`: each id (decimal, as dqlite's shell
/// shows it) and address, sorted.
pub fn describe(nodes: &[NodeInfo]) -> String {
    let mut out: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}@{}", n.id, n.address))
        .collect();
    out.sort();
    format!("[{}]", out.join(", "))
}

/// Addresses found in different clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The cluster kept: the leader's address and its members (for a reconnection, the ones
    /// the cluster had when it was last reached).
    pub kept: (String, Vec<NodeInfo>),
    /// Addresses in another cluster, each with that cluster's members.
    pub others: Vec<(String, Vec<NodeInfo>)>,
    /// A reconnection reached `others`, after the store had opened `kept`.
    pub reconnection: bool,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (address, members) = &self.kept;
        let others: Vec<String> = self
            .others
            .iter()
            .map(|(a, m)| format!("{a} is in the cluster of {}", describe(m)))
            .collect();
        if self.reconnection {
            write!(
                f,
                "a reconnection reached another dqlite cluster than the one this client opened: \
                 {}; the cluster opened is {} (last leader {address}). Nothing was sent to it",
                others.join("; "),
                describe(members)
            )
        } else {
            write!(
                f,
                "the addresses belong to different dqlite clusters: {address} is in the cluster \
                 of {}; {}",
                describe(members),
                others.join("; ")
            )
        }
    }
}

fn mismatch(m: Mismatch) -> Error {
    Error::new(ErrorKind::ClusterMismatch(Box::new(m)), Outcome::NotApplied)
}

/// The configuration the node at `address` reports, `None` when it cannot be asked or belongs
/// to no cluster yet.
pub fn members_at(address: &str, timeouts: Timeouts) -> Option<Vec<NodeInfo>> {
    let nodes = Connection::connect(address, timeouts)
        .ok()?
        .cluster()
        .ok()?;
    (!nodes.is_empty()).then_some(nodes)
}

/// The configuration of every seed but `leader` that answers, asked all at once: a seed that
/// does not answer costs the open one connect timeout, not one each. A healthy node answers
/// in milliseconds, so each is given at most 2 s; one slower is not checked (a missed check,
/// never a false refusal).
fn ask_all(seeds: &[String], leader: &str, timeouts: Timeouts) -> Vec<(String, Vec<NodeInfo>)> {
    let timeouts = Timeouts {
        request: timeouts.request.min(Duration::from_secs(2)),
        ..timeouts
    };
    thread::scope(|scope| {
        let asked: Vec<_> = seeds
            .iter()
            .filter(|s| s.as_str() != leader)
            .map(|s| scope.spawn(move || Some((s.clone(), members_at(s, timeouts)?))))
            .collect();
        asked
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect()
    })
}

/// The cluster a [`Cluster`](crate::Cluster) is on: the configuration its last leader
/// reported, none before the first connect.
#[derive(Debug, Default)]
pub struct Pin {
    seen: Mutex<Option<(String, Vec<NodeInfo>)>>,
}

impl Pin {
    /// Admit the leader at `leader` whose configuration is `nodes`. The first time, every
    /// other address of `seeds` that answers must report the same cluster; afterwards, the
    /// leader's cluster must be the one admitted before. On success the pin follows the
    /// configuration as it changes.
    pub fn admit(
        &self,
        leader: &str,
        nodes: &[NodeInfo],
        seeds: &[String],
        timeouts: Timeouts,
    ) -> Result<()> {
        if nodes.is_empty() {
            return Err(Error::protocol(format!(
                "the leader {leader} reported a cluster without members"
            )));
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.as_ref() {
            Some((last, earlier)) if !same_cluster(earlier, nodes) => {
                return Err(mismatch(Mismatch {
                    kept: (last.clone(), earlier.clone()),
                    others: vec![(leader.to_owned(), nodes.to_vec())],
                    reconnection: true,
                }));
            }
            Some(_) => {}
            None => {
                let others: Vec<(String, Vec<NodeInfo>)> = ask_all(seeds, leader, timeouts)
                    .into_iter()
                    .filter(|(_, theirs)| !same_cluster(nodes, theirs))
                    .collect();
                if !others.is_empty() {
                    return Err(mismatch(Mismatch {
                        kept: (leader.to_owned(), nodes.to_vec()),
                        others,
                        reconnection: false,
                    }));
                }
            }
        }
        *seen = Some((leader.to_owned(), nodes.to_vec()));
        Ok(())
    }
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

    #[test]
    fn two_clusters_formed_apart_are_told_apart_by_address() {
        // Both first nodes are node 1: the two one-node clusters.
        assert!(!same_cluster(&[n(1, "a:1")], &[n(1, "b:1")]));
        assert!(same_cluster(&[n(1, "a:1")], &[n(1, "a:1")]));
        let go = GO_DQLITE_BOOTSTRAP_ID;
        assert!(!same_cluster(&[n(go, "a:1")], &[n(go, "b:1")]));
    }

    #[test]
    fn a_cluster_that_grows_shrinks_or_replaces_members_is_the_same() {
        let three = [n(1, "a:1"), n(7, "b:1"), n(9, "c:1")];
        assert!(
            same_cluster(&[n(1, "a:1")], &three),
            "grown from its first node"
        );
        assert!(same_cluster(&three, &[n(1, "a:1"), n(7, "b:1")]));
        assert!(same_cluster(
            &three,
            &[n(7, "b:1"), n(9, "c:1"), n(11, "d:1")]
        ));
        // Order does not matter, nor roles.
        let mut other_roles = three.to_vec();
        other_roles.reverse();
        other_roles[0].role = 2;
        assert!(same_cluster(&three, &other_roles));
    }

    #[test]
    fn a_re_bootstrapped_first_node_is_not_the_cluster_it_left() {
        let three = [n(1, "a:1"), n(7, "b:1"), n(9, "c:1")];
        // Node a's directory wiped and bootstrapped again: node 1 at a:1, alone.
        assert!(!same_cluster(&three, &[n(1, "a:1")]));
        // A member's address taken over by another node (another id).
        assert!(!same_cluster(&[n(7, "b:1")], &[n(8, "b:1")]));
    }

    #[test]
    fn mismatches_name_every_address_and_its_members() {
        let m = Mismatch {
            kept: ("a:1".into(), vec![n(1, "a:1")]),
            others: vec![("b:1".into(), vec![n(1, "b:1")])],
            reconnection: false,
        };
        assert_eq!(
            m.to_string(),
            "the addresses belong to different dqlite clusters: a:1 is in the cluster of \
             [1@a:1]; b:1 is in the cluster of [1@b:1]"
        );
        let m = Mismatch {
            reconnection: true,
            ..m
        };
        assert!(m.to_string().starts_with(
            "a reconnection reached another dqlite cluster than the one this client opened: \
             b:1 is in the cluster of [1@b:1]; the cluster opened is [1@a:1] (last leader a:1)"
        ));
    }

    #[test]
    fn the_pin_follows_its_cluster_and_refuses_another() {
        let pin = Pin::default();
        let t = Timeouts::default();
        // The other seed refuses connections (port 1 on loopback): it cannot be asked, and the
        // first leader is admitted.
        let seeds = ["a:1".into(), "127.0.0.1:1".into()];
        pin.admit("a:1", &[n(1, "a:1")], &seeds, t).unwrap();
        pin.admit("a:1", &[n(1, "a:1"), n(7, "b:1")], &[], t)
            .unwrap();
        pin.admit("b:1", &[n(7, "b:1"), n(9, "c:1")], &[], t)
            .unwrap();
        let e = pin.admit("d:1", &[n(1, "d:1")], &[], t).unwrap_err();
        match e.kind() {
            ErrorKind::ClusterMismatch(m) => {
                assert!(m.reconnection);
                assert_eq!(m.kept.0, "b:1");
                assert_eq!(m.others[0].0, "d:1");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.outcome(), Outcome::NotApplied);
        // Still on the cluster it had.
        pin.admit("c:1", &[n(7, "b:1"), n(9, "c:1")], &[], t)
            .unwrap();
        assert!(pin.admit("c:1", &[], &[], t).is_err());
    }
}
