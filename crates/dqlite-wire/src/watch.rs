//! Noticing a leader that stopped answering.
//!
//! A frozen leader (SIGSTOP, a long pause of its process, a suspended VM)
//! keeps its sockets open: the kernel takes the request, and neither a reply
//! nor an error comes until the request's deadline, long after the other
//! nodes have elected a new leader. So while a reply is late, a connection
//! made by [`crate::Cluster`] asks the other nodes who leads, at the
//! cluster's `liveness_interval`: when one of them names another node and
//! that node confirms it leads, the request is abandoned
//! ([`ErrorKind::LeaderMoved`], with the outcome of a lost reply) and the new
//! leader is the first one the next connect tries. A leader that is only
//! slow is left alone: the others still name it (a new leader is elected in
//! a later term, so no node can name one while this one still leads).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::Nodes;
use crate::conn::{Connection, Timeouts};
use crate::error::{Error, ErrorKind, Outcome};

/// A connection's view of the other nodes, for asking them who leads.
#[derive(Clone)]
pub struct Watch {
    nodes: Arc<Nodes>,
    timeouts: Timeouts,
    every: Duration,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("every", &self.every).finish()
    }
}

impl Watch {
    pub(crate) fn new(nodes: Arc<Nodes>, timeouts: Timeouts, every: Duration) -> Watch {
        Watch {
            nodes,
            timeouts,
            every,
        }
    }

    /// How long a reply waits before (and between) the checks.
    pub(crate) fn every(&self) -> Duration {
        self.every
    }

    /// The error that abandons a request to `from`, when another node leads
    /// now; asked no later than `deadline`.
    pub(crate) fn check(&self, from: &str, deadline: Instant) -> Option<Error> {
        for peer in self.nodes.candidates() {
            if peer == from || Instant::now() >= deadline {
                continue;
            }
            let Some(named) = self.ask(&peer, deadline) else {
                continue;
            };
            if named == from || self.ask(&named, deadline).as_deref() != Some(named.as_str()) {
                continue;
            }
            self.nodes.set_leader(&named);
            let kind = ErrorKind::LeaderMoved {
                from: from.to_owned(),
                to: named,
            };
            return Some(Error::new(kind, Outcome::NotApplied));
        }
        None
    }

    /// Who `address` says leads (`None`: it knows none, or did not answer
    /// within the connect timeout).
    fn ask(&self, address: &str, deadline: Instant) -> Option<String> {
        let by = deadline.min(Instant::now() + self.timeouts.connect);
        let mut conn = Connection::connect_until(address, self.timeouts, by).ok()?;
        conn.set_deadline(Some(by));
        conn.leader().ok().flatten().map(|leader| leader.address)
    }
}
