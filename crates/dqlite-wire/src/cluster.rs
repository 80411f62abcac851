//! Leader discovery, reconnection and retries over a set of nodes.
//!
//! [`Cluster`] knows the seed addresses, the last leader it found and the
//! nodes the cluster reported. [`Cluster::connect`] asks nodes who the
//! leader is (a node that is itself the leader answers with its own
//! address), follows the answer, and returns a connection to the leader with
//! the database open. A round that finds no leader is repeated after an
//! exponential backoff with jitter until the reconnect deadline passes.
//!
//! [`Session`] keeps one leader connection and replaces it when it breaks.
//! It retries a call only when the call certainly had no effect
//! ([`Outcome::NotApplied`]), and a transaction closure only when the
//! transaction was certainly rolled back ([`Outcome::RolledBack`]); an
//! [`Outcome::Unknown`] error is always returned to the caller.

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::conn::{Connection, ExecResult, QueryResult, Timeouts, Transaction};
use crate::error::{Error, ErrorKind, Outcome, Result};
use crate::identity::Pin;
use crate::message::NodeInfo;
use crate::value::Value;

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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeouts: Timeouts::default(),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            reconnect_deadline: Duration::from_secs(15),
            client_id: 0,
        }
    }
}

/// Exponential backoff with "equal jitter": attempt `n` waits a random
/// duration in `[d/2, d]` where `d = min(max, initial * 2^n)`.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let stack = &nanos as *const u64 as u64;
        Backoff {
            initial,
            max,
            attempt: 0,
            rng: (nanos ^ stack.rotate_left(32)) | 1,
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(30)).unwrap_or(u32::MAX);
        let ceiling = self.initial.saturating_mul(factor).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let half = ceiling / 2;
        let span = (ceiling - half).as_nanos() as u64;
        half + Duration::from_nanos(if span == 0 { 0 } else { r % (span + 1) })
    }

    /// Sleep for the next delay, but not past `deadline`. False when the
    /// deadline has passed.
    pub fn sleep_until_deadline(&mut self, deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        thread::sleep(self.next_delay().min(deadline - now));
        Instant::now() < deadline
    }
}

/// Parse `dqlite://host1:9001,host2:9001/database` into addresses and the
/// database name.
pub fn parse_url(url: &str) -> Result<(Vec<String>, String)> {
    let rest = url
        .strip_prefix("dqlite://")
        .ok_or_else(|| Error::invalid_argument(format!("not a dqlite:// address: {url}")))?;
    let (hosts, db) = rest
        .split_once('/')
        .ok_or_else(|| Error::invalid_argument(format!("no database name in {url}")))?;
    let addrs: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    if addrs.is_empty() || db.is_empty() || db.contains('/') {
        return Err(Error::invalid_argument(format!(
            "expected dqlite://host:port[,host:port...]/database, got {url}"
        )));
    }
    if let Some(bad) = addrs.iter().find(|a| !a.contains(':')) {
        return Err(Error::invalid_argument(format!("{bad} has no port")));
    }
    Ok((addrs, db.to_owned()))
}

#[derive(Debug, Default)]
struct Known {
    leader: Option<String>,
    discovered: Vec<String>,
}

/// A dqlite cluster and one database on it.
#[derive(Debug)]
pub struct Cluster {
    seeds: Vec<String>,
    database: String,
    config: Config,
    known: Mutex<Known>,
    /// The cluster reached first: a leader of another one is refused (`crate::identity`).
    pin: Pin,
}

enum Probe {
    Leader(Connection),
    Redirect(String),
    NoLeader,
}

impl Cluster {
    pub fn new<S: Into<String>>(
        addresses: impl IntoIterator<Item = S>,
        database: &str,
        config: Config,
    ) -> Cluster {
        Cluster {
            seeds: addresses.into_iter().map(Into::into).collect(),
            database: database.to_owned(),
            config,
            known: Mutex::new(Known::default()),
            pin: Pin::default(),
        }
    }

    /// From a `dqlite://` address.
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
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .leader
            .clone()
    }

    /// Addresses in the order they are tried: last leader, seeds, then
    /// nodes the cluster reported.
    pub fn candidates(&self) -> Vec<String> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
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

    /// A leader connection with the database open, retrying with backoff
    /// until the configured reconnect deadline.
    pub fn connect(&self) -> Result<Connection> {
        self.connect_until(Instant::now() + self.config.reconnect_deadline)
    }

    /// Like [`Cluster::connect`] with an explicit deadline.
    pub fn connect_until(&self, deadline: Instant) -> Result<Connection> {
        let started = Instant::now();
        let mut backoff = Backoff::new(self.config.backoff_initial, self.config.backoff_max);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let last = match self.connect_once() {
                Ok(conn) => return Ok(conn),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::InvalidArgument(_) | ErrorKind::ClusterMismatch(_)
                    ) =>
                {
                    return Err(e)
                }
                Err(e) => e,
            };
            if !backoff.sleep_until_deadline(deadline) {
                return Err(Error::new(
                    ErrorKind::NoLeader {
                        attempts,
                        waited: started.elapsed(),
                        last: Some(Box::new(last)),
                    },
                    Outcome::NotApplied,
                ));
            }
        }
    }

    /// A leader connection without a database, for membership requests
    /// (add, assign, remove, transfer): one round over the candidates.
    pub fn connect_admin_once(&self) -> Result<Connection> {
        self.round(false)
    }

    /// One round over the candidates, following at most one redirect from
    /// each.
    pub fn connect_once(&self) -> Result<Connection> {
        self.round(true)
    }

    fn round(&self, open: bool) -> Result<Connection> {
        let mut last: Option<Error> = None;
        for address in self.candidates() {
            match self.probe(&address, open) {
                Ok(Probe::Leader(conn)) => return self.connected(conn),
                Ok(Probe::Redirect(leader)) => match self.probe(&leader, open) {
                    Ok(Probe::Leader(conn)) => return self.connected(conn),
                    Ok(_) => {}
                    Err(e) => last = Some(e),
                },
                Ok(Probe::NoLeader) => {}
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::new(
                ErrorKind::NoLeader {
                    attempts: 1,
                    waited: Duration::ZERO,
                    last: None,
                },
                Outcome::NotApplied,
            )
        }))
    }

    fn probe(&self, address: &str, open: bool) -> Result<Probe> {
        let mut conn = Connection::connect(address, self.config.timeouts)?;
        match conn.leader()? {
            Some(leader) if leader.address == address => {
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
        self.pin
            .admit(conn.address(), &nodes, &self.seeds, self.config.timeouts)?;
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.leader = Some(conn.address().to_owned());
        for n in nodes {
            if !known.discovered.contains(&n.address) {
                known.discovered.push(n.address);
            }
        }
        Ok(conn)
    }
}

/// One logical client of a cluster: a leader connection, replaced when it
/// breaks, and calls retried only when retrying is safe.
#[derive(Debug)]
pub struct Session<'a> {
    cluster: &'a Cluster,
    conn: Option<Connection>,
    reconnects: u64,
}

impl<'a> Session<'a> {
    pub fn new(cluster: &'a Cluster) -> Session<'a> {
        Session {
            cluster,
            conn: None,
            reconnects: 0,
        }
    }

    /// How many times the session had to (re)connect.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// The current leader connection, connecting first when there is none.
    pub fn connection(&mut self) -> Result<&mut Connection> {
        let deadline = Instant::now() + self.cluster.config.reconnect_deadline;
        self.ensure(deadline)
    }

    fn ensure(&mut self, deadline: Instant) -> Result<&mut Connection> {
        if self.conn.as_ref().is_some_and(Connection::is_broken) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let conn = self.cluster.connect_until(deadline)?;
            self.reconnects += 1;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("connection set above"))
    }

    /// Run `op` on the leader connection; on an error that needs a new
    /// connection, reconnect and run it again while the error says that is
    /// safe (`retry_on`) and the deadline has not passed.
    fn retry<T>(
        &mut self,
        retry_on: &[Outcome],
        mut op: impl FnMut(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.cluster.config.reconnect_deadline;
        let mut backoff = Backoff::new(
            self.cluster.config.backoff_initial,
            self.cluster.config.backoff_max,
        );
        loop {
            let conn = self.ensure(deadline)?;
            match op(conn) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    if e.needs_reconnect() || conn.is_broken() {
                        self.conn = None;
                    }
                    let retryable = e.needs_reconnect() && retry_on.contains(&e.outcome());
                    if !retryable || !backoff.sleep_until_deadline(deadline) {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Run `sql` (every statement; parameters bind to the first).
    pub fn exec_sql(&mut self, sql: &str, params: &[Value]) -> Result<ExecResult> {
        self.retry(&[Outcome::NotApplied], |c| c.exec_sql(sql, params))
    }

    /// The whole result of `sql` (a read: retried after any connection loss).
    pub fn query_all(&mut self, sql: &str, params: &[Value]) -> Result<QueryResult> {
        self.retry(&[Outcome::NotApplied], |c| c.query_all(sql, params))
    }

    /// Run `body` inside BEGIN … COMMIT. The whole transaction is run again
    /// when it was certainly rolled back (connection or leadership lost
    /// before COMMIT) or never started; a COMMIT whose reply was lost
    /// returns [`Outcome::Unknown`]. `body` may therefore run more than once
    /// and must not have effects outside the transaction.
    pub fn transaction<T>(
        &mut self,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        self.retry(&[Outcome::NotApplied, Outcome::RolledBack], |c| {
            let mut tx = c.begin()?;
            let v = body(&mut tx)?;
            tx.commit()?;
            Ok(v)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap_with_jitter_inside_bounds() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(200));
        let delays: Vec<Duration> = (0..12).map(|_| b.next_delay()).collect();
        for (i, d) in delays.iter().enumerate() {
            let ceiling =
                Duration::from_millis(10 * (1u64 << i.min(5))).min(Duration::from_millis(200));
            assert!(
                *d >= ceiling / 2 && *d <= ceiling,
                "attempt {i}: {d:?} vs {ceiling:?}"
            );
        }
        // Far attempts stay at the cap without overflowing.
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(2));
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
    }

    #[test]
    fn urls_parse_into_addresses_and_database() {
        let (a, d) = parse_url("dqlite://h1:9001,h2:9002/pi-workflows").unwrap();
        assert_eq!(a, vec!["h1:9001", "h2:9002"]);
        assert_eq!(d, "pi-workflows");
        for bad in [
            "sqlite://x:1/db",
            "dqlite://h1:9001",
            "dqlite://h1:9001/",
            "dqlite:///db",
            "dqlite://h1/db",
            "dqlite://h1:1/a/b",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn candidates_put_the_last_leader_first_without_duplicates() {
        let c = Cluster::new(["a:1", "b:2"], "db", Config::default());
        assert_eq!(c.candidates(), vec!["a:1", "b:2"]);
        {
            let mut k = c.known.lock().unwrap();
            k.leader = Some("b:2".into());
            k.discovered = vec!["a:1".into(), "c:3".into()];
        }
        assert_eq!(c.candidates(), vec!["b:2", "a:1", "c:3"]);
    }

    #[test]
    fn connect_gives_up_at_the_deadline_with_no_leader() {
        // Port 1 on loopback refuses at once.
        let config = Config {
            reconnect_deadline: Duration::from_millis(300),
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(50),
            ..Config::default()
        };
        let c = Cluster::new(["127.0.0.1:1"], "db", config);
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
