//! Leader discovery, reconnection and retries over a set of nodes.
//!
//! [`Cluster`] knows the seed addresses, the last leader it found and the
//! nodes the cluster reported. [`Cluster::connect`] asks nodes who the
//! leader is (a node that is itself the leader answers with its own
//! address), follows the answer, and returns a connection to the leader with
//! the database open. A round that finds no leader is repeated after an
//! exponential backoff with jitter ([`Backoff`], `backoff.rs`) until the
//! reconnect deadline passes; the
//! deadline holds inside a round as well (each dial, handshake and reply is
//! bounded by it). With [`Config::fail_fast`], on a cluster never reached, a
//! round whose addresses are plainly wrong (another service, a host that does
//! not resolve, every one refusing) fails at once instead: retrying cannot
//! mend a configuration.
//! Connections it returns watch their leader while a reply is late
//! ([`Watch`]).
//!
//! [`Session`] (`session.rs`) keeps one leader connection and replaces it when it breaks.
//! It retries a call only when the call certainly had no effect
//! ([`Outcome::NotApplied`]), and a transaction closure only when the
//! transaction was certainly rolled back ([`Outcome::RolledBack`]); an
//! [`Outcome::Unknown`] error is always returned to the caller.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::address::parse_url;
pub use crate::backoff::Backoff;
use crate::budget::ReplyLimits;
use crate::conn::{Connection, Timeouts};
use crate::error::{Error, ErrorKind, Outcome, Result};
use crate::identity::Pin;
use crate::message::NodeInfo;
pub use crate::session::Session;
use crate::watch::Watch;

/// Connection, backoff and deadline settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub timeouts: Timeouts,
    /// First backoff delay after a round found no leader.
    pub backoff_initial: Duration,
    /// Largest backoff delay.
    pub backoff_max: Duration,
    /// How long `connect` (and a `Session` retry) keeps trying.
    pub reconnect_deadline: Duration,
    /// Id sent in the Client registration.
    pub client_id: u64,
    /// The most one reply may bring.
    pub reply_limits: ReplyLimits,
    /// How late a reply may be before the other nodes are asked whether
    /// another one leads now, and then how often (zero: never; see
    /// [`Watch`]).
    pub liveness_interval: Duration,
    /// Until a leader was reached once, end a connect after the first round
    /// that shows the addresses to be wrong: another service answers
    /// ([`ErrorKind::NotDqlite`]), a name does not resolve, or every address
    /// refuses ([`ErrorKind::Refused`]). Off by default: a caller that has
    /// just started its nodes waits for them; the store turns it on, since
    /// its nodes run already and a wrong address is the likelier cause.
    pub fail_fast: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeouts: Timeouts::default(),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            reconnect_deadline: Duration::from_secs(15),
            client_id: 0,
            reply_limits: ReplyLimits::default(),
            liveness_interval: Duration::from_secs(1),
            fail_fast: false,
        }
    }
}

#[derive(Debug, Default)]
struct Known {
    leader: Option<String>,
    discovered: Vec<String>,
}

/// The addresses a cluster is reached at: its seeds, the last leader found
/// and the nodes the cluster reported. Shared with the connections' watches
/// ([`Watch`]), which ask the same nodes who leads.
#[derive(Debug)]
pub(crate) struct Nodes {
    seeds: Vec<String>,
    known: Mutex<Known>,
}

impl Nodes {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Addresses in the order they are tried: last leader, seeds, then
    /// nodes the cluster reported.
    pub(crate) fn candidates(&self) -> Vec<String> {
        let known = self.known();
        let mut out: Vec<String> = Vec::new();
        let all = known
            .leader
            .iter()
            .chain(self.seeds.iter())
            .chain(known.discovered.iter());
        for a in all {
            if !out.contains(a) {
                out.push(a.clone());
            }
        }
        out
    }

    /// Remember `address` as the leader, to be tried first.
    pub(crate) fn set_leader(&self, address: &str) {
        self.known().leader = Some(address.to_owned());
    }
}

/// A dqlite cluster and one database on it.
#[derive(Debug)]
pub struct Cluster {
    nodes: Arc<Nodes>,
    database: String,
    config: Config,
    /// The cluster reached first: a leader of another one is refused (`crate::identity`).
    pin: Pin,
    /// A leader was reached once: from then on an address that refuses is
    /// a node restarting, not a configuration error.
    reached: AtomicBool,
}

enum Probe {
    Leader(Connection),
    Redirect(String),
    NoLeader,
}

/// What a round over the candidates met when it found no leader.
#[derive(Debug, Default)]
struct Missed {
    /// Each address that failed, with its error, in the order tried.
    failures: Vec<(String, Error)>,
    /// Nodes that answered the handshake but named no reachable leader.
    answered: usize,
}

impl Missed {
    /// The error to report at once on a cluster never reached, instead of
    /// retrying until the deadline: an address that is another service, a
    /// host that is malformed or does not resolve, or every address refusing
    /// the connection. Such a round is a configuration error; an election
    /// or a node that does not answer yet is worth waiting for.
    fn misconfigured(&mut self) -> Option<Error> {
        let at = |missed: &Missed, wanted: fn(&ErrorKind) -> bool| {
            missed.failures.iter().position(|(_, e)| wanted(e.kind()))
        };
        let found = at(self, |k| matches!(k, ErrorKind::NotDqlite { .. })).or_else(|| {
            at(self, |k| {
                matches!(
                    k,
                    ErrorKind::Unresolved { .. } | ErrorKind::BadAddress { .. }
                )
            })
        });
        if let Some(i) = found {
            return Some(self.failures.swap_remove(i).1);
        }
        let refused = |e: &Error| matches!(e.kind(), ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused);
        if self.answered == 0
            && !self.failures.is_empty()
            && self.failures.iter().all(|(_, e)| refused(e))
        {
            let addresses = self.failures.iter().map(|(a, _)| a.clone()).collect();
            return Some(Error::new(
                ErrorKind::Refused { addresses },
                Outcome::NotApplied,
            ));
        }
        None
    }

    /// An error that no retry can change: an argument the server refused, or a leader of
    /// another cluster than the one this client is on (`crate::identity`) when no node of its
    /// own answered as leader.
    fn unchangeable(&mut self) -> Option<Error> {
        let i = self.failures.iter().position(|(_, e)| {
            matches!(
                e.kind(),
                ErrorKind::InvalidArgument(_) | ErrorKind::ClusterMismatch(_)
            )
        })?;
        Some(self.failures.swap_remove(i).1)
    }

    fn last(self) -> Option<Error> {
        self.failures.into_iter().last().map(|(_, e)| e)
    }
}

impl Cluster {
    /// A cluster at `addresses` (`host:port`, not checked here: a malformed
    /// one fails when it is dialled); [`Cluster::from_url`] checks them.
    pub fn new<S: Into<String>>(
        addresses: impl IntoIterator<Item = S>,
        database: &str,
        config: Config,
    ) -> Cluster {
        Cluster {
            nodes: Arc::new(Nodes {
                seeds: addresses.into_iter().map(Into::into).collect(),
                known: Mutex::new(Known::default()),
            }),
            database: database.to_owned(),
            config,
            pin: Pin::default(),
            reached: AtomicBool::new(false),
        }
    }

    /// From a `dqlite://` address; a malformed one is refused
    /// ([`ErrorKind::BadAddress`]) before any I/O.
    pub fn from_url(url: &str, config: Config) -> Result<Cluster> {
        let (addrs, db) = parse_url(url)?;
        Ok(Cluster::new(addrs, &db, config))
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// The leader found by the last successful connect.
    pub fn last_leader(&self) -> Option<String> {
        self.nodes.known().leader.clone()
    }

    /// Addresses in the order they are tried: last leader, seeds, then
    /// nodes the cluster reported.
    pub fn candidates(&self) -> Vec<String> {
        self.nodes.candidates()
    }

    /// A leader connection with the database open, retrying with backoff
    /// until the configured reconnect deadline.
    pub fn connect(&self) -> Result<Connection> {
        self.connect_until(Instant::now() + self.config.reconnect_deadline)
    }

    /// Like [`Cluster::connect`] with an explicit deadline, which holds
    /// inside a round too: no dial, handshake or reply outlasts it. With
    /// [`Config::fail_fast`], until a leader was reached once, a round that
    /// shows the addresses to be wrong ends the connect at once (see
    /// [`ErrorKind::NotDqlite`], [`ErrorKind::Unresolved`],
    /// [`ErrorKind::Refused`]).
    pub fn connect_until(&self, deadline: Instant) -> Result<Connection> {
        let started = Instant::now();
        let mut backoff = Backoff::new(self.config.backoff_initial, self.config.backoff_max);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let mut missed = match self.round(true, deadline) {
                Ok(conn) => return Ok(conn),
                Err(missed) => missed,
            };
            if let Some(e) = missed.unchangeable() {
                return Err(e);
            }
            if self.config.fail_fast && !self.reached.load(Ordering::Relaxed) {
                if let Some(e) = missed.misconfigured() {
                    return Err(e);
                }
            }
            if !backoff.sleep_until_deadline(deadline) {
                return Err(Error::new(
                    ErrorKind::NoLeader {
                        attempts,
                        waited: started.elapsed(),
                        last: missed.last().map(Box::new),
                    },
                    Outcome::NotApplied,
                ));
            }
        }
    }

    /// A leader connection without a database, for membership requests
    /// (add, assign, remove, transfer): one round over the candidates.
    pub fn connect_admin_once(&self) -> Result<Connection> {
        self.once(false)
    }

    /// One round over the candidates, following at most one redirect from
    /// each.
    pub fn connect_once(&self) -> Result<Connection> {
        self.once(true)
    }

    fn once(&self, open: bool) -> Result<Connection> {
        let deadline = Instant::now() + self.config.reconnect_deadline;
        self.round(open, deadline).map_err(|missed| {
            missed.last().unwrap_or_else(|| {
                Error::new(
                    ErrorKind::NoLeader {
                        attempts: 1,
                        waited: Duration::ZERO,
                        last: None,
                    },
                    Outcome::NotApplied,
                )
            })
        })
    }

    fn round(&self, open: bool, deadline: Instant) -> std::result::Result<Connection, Missed> {
        let mut missed = Missed::default();
        for address in self.candidates() {
            if Instant::now() >= deadline {
                break;
            }
            let leader = match self.probe(&address, open, deadline) {
                Ok(Probe::Leader(conn)) => conn,
                Ok(Probe::Redirect(leader)) => {
                    missed.answered += 1;
                    match self.probe(&leader, open, deadline) {
                        Ok(Probe::Leader(conn)) => conn,
                        Ok(_) => continue,
                        Err(e) => {
                            missed.failures.push((leader, e));
                            continue;
                        }
                    }
                }
                Ok(Probe::NoLeader) => {
                    missed.answered += 1;
                    continue;
                }
                Err(e) => {
                    missed.failures.push((address, e));
                    continue;
                }
            };
            match self.connected(leader) {
                Ok(conn) => return Ok(conn),
                Err(e) => missed.failures.push((address, e)),
            }
        }
        Err(missed)
    }

    /// Dial `address` and ask it who leads; when it does, register (and
    /// open the database). The dial and that first answer share the connect
    /// timeout, so a node that is frozen or is not dqlite costs no more; the
    /// rest is bounded by `deadline`.
    fn probe(&self, address: &str, open: bool, deadline: Instant) -> Result<Probe> {
        let handshake = deadline.min(Instant::now() + self.config.timeouts.connect);
        let mut conn = Connection::connect_until(address, self.config.timeouts, handshake)?;
        conn.set_limits(self.config.reply_limits);
        conn.set_deadline(Some(handshake));
        match conn.leader()? {
            Some(leader) if leader.address == address => {
                conn.set_deadline(Some(deadline));
                conn.register(self.config.client_id)?;
                if open {
                    conn.open(&self.database)?;
                }
                Ok(Probe::Leader(conn))
            }
            Some(leader) => Ok(Probe::Redirect(leader.address)),
            None => Ok(Probe::NoLeader),
        }
    }

    fn connected(&self, mut conn: Connection) -> Result<Connection> {
        // Learn the members: the pin checks that they are the cluster this
        // client is on, and they keep it reachable when every seed is down.
        let nodes: Vec<NodeInfo> = conn.cluster().unwrap_or_default();
        if conn.is_broken() {
            return Err(Error::new(ErrorKind::Broken, Outcome::NotApplied));
        }
        self.pin.admit(
            conn.address(),
            &nodes,
            &self.nodes.seeds,
            self.config.timeouts,
        )?;
        {
            let mut known = self.nodes.known();
            known.leader = Some(conn.address().to_owned());
            for n in nodes {
                if !known.discovered.contains(&n.address) {
                    known.discovered.push(n.address);
                }
            }
        }
        self.reached.store(true, Ordering::Relaxed);
        conn.set_deadline(None);
        let every = self.config.liveness_interval;
        let watch =
            (!every.is_zero()).then(|| Watch::new(self.nodes.clone(), self.config.timeouts, every));
        conn.set_watch(watch);
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_put_the_last_leader_first_without_duplicates() {
        let c = Cluster::new(["a:1", "b:2"], "db", Config::default());
        assert_eq!(c.candidates(), vec!["a:1", "b:2"]);
        {
            let mut k = c.nodes.known();
            k.leader = Some("b:2".into());
            k.discovered = vec!["a:1".into(), "c:3".into()];
        }
        assert_eq!(c.candidates(), vec!["b:2", "a:1", "c:3"]);
    }

    #[test]
    fn a_cluster_never_reached_that_refuses_everywhere_fails_after_one_round() {
        // Port 1 on loopback refuses at once.
        let config = Config {
            reconnect_deadline: Duration::from_secs(10),
            fail_fast: true,
            ..Config::default()
        };
        let c = Cluster::new(["127.0.0.1:1", "127.0.0.1:2"], "db", config);
        let started = Instant::now();
        let e = c.connect().unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        match e.kind() {
            ErrorKind::Refused { addresses } => {
                assert_eq!(addresses, &["127.0.0.1:1", "127.0.0.1:2"]);
            }
            other => panic!("expected Refused, got {other:?}"),
        }
        assert!(e.to_string().contains("is the dqlite node running"), "{e}");
        assert!(e.is_retry_safe());
    }

    #[test]
    fn without_fail_fast_refusals_are_waited_for() {
        // The library's default: nodes that are still starting refuse too.
        let config = Config {
            reconnect_deadline: Duration::from_millis(300),
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(50),
            ..Config::default()
        };
        let c = Cluster::new(["127.0.0.1:1"], "db", config);
        let e = c.connect().unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::NoLeader { attempts, .. } if *attempts >= 2),
            "{e}"
        );
    }

    #[test]
    fn a_cluster_reached_before_retries_refusals_until_the_deadline() {
        // Its nodes restarting refuse as well: worth waiting for.
        let config = Config {
            reconnect_deadline: Duration::from_millis(300),
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(50),
            fail_fast: true,
            ..Config::default()
        };
        let c = Cluster::new(["127.0.0.1:1"], "db", config);
        c.reached.store(true, Ordering::Relaxed);
        let e = c.connect().unwrap_err();
        match e.kind() {
            ErrorKind::NoLeader { attempts, last, .. } => {
                assert!(*attempts >= 2);
                assert!(matches!(
                    last.as_deref().map(Error::kind),
                    Some(ErrorKind::Io(_))
                ));
            }
            other => panic!("expected NoLeader, got {other:?}"),
        }
        assert!(e.is_retry_safe());
    }
}
