//! [`Session`]: one logical client of a cluster, over [`Cluster::connect_until`].

use std::time::Instant;

use crate::backoff::Backoff;
use crate::cluster::Cluster;
use crate::conn::{Connection, ExecResult, QueryResult, Transaction};
use crate::error::{Outcome, Result};
use crate::value::Value;

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
        let deadline = Instant::now() + self.cluster.config().reconnect_deadline;
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
        let deadline = Instant::now() + self.cluster.config().reconnect_deadline;
        let mut backoff = Backoff::new(
            self.cluster.config().backoff_initial,
            self.cluster.config().backoff_max,
        );
        loop {
            let conn = self.ensure(deadline)?;
            conn.set_deadline(Some(deadline));
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
