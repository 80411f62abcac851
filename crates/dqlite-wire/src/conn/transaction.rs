//! An interactive transaction held by a guard that rolls it back unless committed.

use super::{Connection, Effect, ExecResult, QueryResult, Rows, Statement};
use crate::error::{Outcome, Result};
use crate::message::Request;
use crate::value::Value;

/// An interactive transaction on one connection. Dropping it without
/// `commit` rolls it back (and breaks the connection if that fails, which
/// makes the server roll back when the socket closes).
#[derive(Debug)]
pub struct Transaction<'c> {
    pub(super) conn: &'c mut Connection,
    pub(super) done: bool,
}

impl Transaction<'_> {
    pub fn exec_sql(&mut self, sql: &str, params: &[Value]) -> Result<ExecResult> {
        self.conn.exec_sql(sql, params)
    }

    pub fn exec(&mut self, stmt: Statement, params: &[Value]) -> Result<ExecResult> {
        self.conn.exec(stmt, params)
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement> {
        self.conn.prepare(sql)
    }

    pub fn query_sql(&mut self, sql: &str, params: &[Value]) -> Result<Rows<'_>> {
        self.conn.query_sql(sql, params)
    }

    pub fn query(&mut self, stmt: Statement, params: &[Value]) -> Result<Rows<'_>> {
        self.conn.query(stmt, params)
    }

    pub fn query_all(&mut self, sql: &str, params: &[Value]) -> Result<QueryResult> {
        self.conn.query_all(sql, params)
    }

    /// COMMIT. A lost reply is [`Outcome::Unknown`]. A SQL error (e.g. a
    /// deferred foreign key) is [`Outcome::Failed`] and the transaction is
    /// then rolled back (nothing of it is committed).
    pub fn commit(self) -> Result<()> {
        self.commit_after("")
    }

    /// COMMIT, sent in one request after `statements` (SQL text without
    /// parameters; empty: none). dqlite runs a request's statements in turn
    /// and stops at the first that fails, so the COMMIT runs only when every
    /// one of them succeeded; when one fails, its error is returned as a
    /// failing COMMIT's is, and the transaction is rolled back. A lost reply
    /// is [`Outcome::Unknown`], as for a COMMIT alone.
    pub fn commit_after(mut self, statements: &str) -> Result<()> {
        let db = self.conn.db()?;
        let text;
        let sql = if statements.is_empty() {
            "COMMIT"
        } else {
            text = format!("{statements};\nCOMMIT");
            &text
        };
        let req = Request::ExecSql {
            db,
            sql,
            params: &[],
        };
        match self.conn.exec_request(&req, Effect::Commit) {
            Ok(_) => {
                self.finish();
                Ok(())
            }
            Err(e) => {
                if e.outcome() == Outcome::Failed && self.rollback_inner().is_err() {
                    // The socket closing rolls it back instead.
                    self.conn.broken = true;
                }
                self.finish();
                Err(e)
            }
        }
    }

    /// ROLLBACK.
    pub fn rollback(mut self) -> Result<()> {
        let res = self.rollback_inner();
        self.finish();
        res
    }

    fn rollback_inner(&mut self) -> Result<()> {
        let db = self.conn.db()?;
        let req = Request::ExecSql {
            db,
            sql: "ROLLBACK",
            params: &[],
        };
        // Once asked for, the rollback's result does not matter to the
        // data: a lost reply means the socket is gone, which rolls back too.
        self.conn.exec_request(&req, Effect::Read).map(|_| ())
    }

    fn finish(&mut self) {
        self.done = true;
        self.conn.in_tx = false;
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            if !self.conn.broken && self.rollback_inner().is_err() {
                self.conn.broken = true;
            }
            self.finish();
        }
    }
}
