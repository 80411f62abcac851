//! The cluster engine of the seam: the state database on a dqlite cluster, through our own
//! wire-protocol client (`crates/dqlite-wire`).
//!
//! One leader connection at a time, with a statement cache keyed by SQL text (statement ids die
//! with their connection, so the cache is emptied on every reconnect). Outside a transaction a
//! request that certainly had no effect (`NotApplied`: never completely sent, refused by a
//! follower, a read whose reply was lost) is sent again on a fresh leader connection until the
//! reconnect deadline. Inside a transaction nothing is retried here: the transaction is gone
//! once its connection is, and the error says so (`DQLITE_ROLLED_BACK`); the caller reruns the
//! whole method (`crate::methods`). A COMMIT whose reply was lost is `DQLITE_OUTCOME_UNKNOWN`.
//!
//! Errors are `rusqlite::Error`s like the file's: a SQL error keeps SQLite's extended code and
//! message (`SqliteFailure`), so the store reports the same `SqliteError`s; a failure of the
//! cluster itself travels as a [`Failure`] inside `UserFunctionError`, which `StoreError`
//! turns into an `Error` with its `code` (one of [`codes`], chosen in `failure::error`). Values
//! cross the wire as `values` converts them.
//!
//! Deadlines: each statement's wait for a leader and every request of it (the whole reply) end
//! by `reconnectDeadlineMs` from the statement's start, and within a call (a store method, the
//! constructor's open) by the call's own deadline ([`Remote::call_scope`]), so that no
//! synchronous call holds the event loop longer, whatever a server does.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use dqlite_wire::{Backoff, Cluster, Config, Connection, Outcome, Value};

mod failure;
mod values;

use super::row::Row;
pub use failure::{codes, Failure};
use failure::{error, failure, sqlite_error};
pub use values::{to_value, Rows};

/// How long a `BEGIN IMMEDIATE` that finds another connection's write transaction waits for
/// it, as the file's busy timeout.
const BUSY_WAIT: Duration = Duration::from_millis(5_000);

/// The state database on a dqlite cluster.
pub struct Remote {
    cluster: Cluster,
    state: RefCell<State>,
    /// The deadline of the call in progress, if one set it ([`Remote::call_scope`]).
    call_deadline: Cell<Option<Instant>>,
    /// The deadline the open was given (see [`Remote::open_deadline`]).
    open_deadline: Instant,
    /// A read-only state: every leader connection gets `PRAGMA query_only = ON`, as a
    /// read-only file's connection has.
    query_only: bool,
    /// This host's offset from the leader, measured on every leader connection.
    clock: std::sync::Arc<super::cluster_clock::ClusterClock>,
}

#[derive(Default)]
struct State {
    conn: Option<Connection>,
    statements: HashMap<String, dqlite_wire::Statement>,
    last_insert_rowid: i64,
    /// A transaction is open (begun through the seam, not yet ended).
    transaction: Option<TransactionKind>,
    /// Its BEGIN is not sent yet: it goes with the transaction's first statement
    /// ([`Remote::begin_with`]), sent together with it when that is a plain SELECT.
    begin_pending: bool,
    /// Statements of the open write transaction held back by [`Stmt::execute_deferred`], with
    /// their values written in: sent before the next statement, or with the COMMIT.
    deferred: Vec<String>,
    /// The write transaction's caller promised that no JavaScript runs before its COMMIT
    /// ([`Remote::hold_writes`]): the writes whose count it does not need may wait.
    holding: bool,
}

impl State {
    /// The transaction is over (or lost): nothing of it is pending any more.
    fn end_transaction(&mut self) {
        self.transaction = None;
        self.begin_pending = false;
        self.deferred.clear();
        self.holding = false;
    }
}

#[derive(Clone, Copy, PartialEq)]
enum TransactionKind {
    /// `BEGIN`: a read snapshot (`in_read_transaction`); nothing to lose at its COMMIT.
    Read,
    /// `BEGIN IMMEDIATE`: a write.
    Write,
}

/// What a statement's text is to the cluster engine.
#[derive(Clone, Copy, PartialEq)]
enum Control {
    /// Ordinary SQL.
    Sql,
    Begin(TransactionKind),
    Commit,
    Rollback,
}

fn control_of(sql: &str) -> Control {
    let words: Vec<String> = sql
        .trim()
        .trim_end_matches(';')
        .split_ascii_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["BEGIN"] | ["BEGIN", "DEFERRED"] | ["BEGIN", "TRANSACTION"] => {
            Control::Begin(TransactionKind::Read)
        }
        ["BEGIN", "IMMEDIATE"] | ["BEGIN", "EXCLUSIVE"] => Control::Begin(TransactionKind::Write),
        ["COMMIT"] | ["END"] | ["COMMIT", "TRANSACTION"] => Control::Commit,
        ["ROLLBACK"] | ["ROLLBACK", "TRANSACTION"] => Control::Rollback,
        _ => Control::Sql,
    }
}

impl Remote {
    /// Connects to the leader of the cluster `url` names (`dqlite://h1:p,h2:p/db`), by
    /// `deadline`; a malformed `url` fails before any I/O.
    pub fn open(
        url: &str,
        config: Config,
        read_only: bool,
        deadline: Instant,
    ) -> rusqlite::Result<Remote> {
        let cluster = Cluster::from_url(url, config).map_err(error)?;
        let remote = Remote {
            cluster,
            state: RefCell::new(State::default()),
            call_deadline: Cell::new(None),
            open_deadline: deadline,
            query_only: read_only,
            clock: Default::default(),
        };
        {
            let _call = remote.call_scope(deadline);
            remote.run(|_| Ok(()))?;
        }
        Ok(remote)
    }

    /// Until the returned guard is dropped, nothing waits or reads past `deadline` (or an
    /// earlier deadline already in force): one call's statements share it.
    pub fn call_scope(&self, deadline: Instant) -> CallScope<'_> {
        let outer = self.call_deadline.get();
        self.call_deadline
            .set(Some(outer.map_or(deadline, |d| d.min(deadline))));
        CallScope {
            remote: self,
            outer,
        }
    }

    /// The deadline the open was given: what a constructor does after the open (registering
    /// its project) shares it.
    pub fn open_deadline(&self) -> Instant {
        self.open_deadline
    }

    /// When a statement started now must be done.
    fn deadline(&self) -> Instant {
        let own = Instant::now() + self.cluster.config().reconnect_deadline;
        self.call_deadline.get().map_or(own, |call| call.min(own))
    }

    /// This host's offset from the leader's clock (`super::cluster_clock`).
    pub fn clock(&self) -> &std::sync::Arc<super::cluster_clock::ClusterClock> {
        &self.clock
    }

    /// The address of the leader this store last talked to.
    pub fn leader(&self) -> Option<String> {
        self.cluster.last_leader()
    }

    /// Whether no transaction is open.
    pub fn is_autocommit(&self) -> bool {
        self.state.borrow().transaction.is_none()
    }

    /// The rowid of the last row an INSERT of this connection added: the writes held back are
    /// sent first (the server's answer to them carries its connection's last rowid).
    pub fn last_insert_rowid(&self) -> rusqlite::Result<i64> {
        self.send_held()?;
        Ok(self.state.borrow().last_insert_rowid)
    }

    /// From here to the write transaction's COMMIT, the caller runs no JavaScript (see
    /// `Db::hold_writes_until_commit`): writes whose count is not needed may then be held back
    /// and sent together ([`Remote::holds_writes`], [`Stmt::execute_deferred`]). Nothing
    /// outside a write transaction; it ends with the transaction.
    pub fn hold_writes(&self) {
        let mut state = self.state.borrow_mut();
        if state.transaction == Some(TransactionKind::Write) {
            state.holding = true;
        }
    }

    /// Whether [`Remote::hold_writes`] is in force.
    pub fn holds_writes(&self) -> bool {
        self.state.borrow().holding
    }

    /// How long a call waits for a leader (`reconnectDeadlineMs`), and so how long its reruns
    /// after lost transactions go on (`crate::sql::retry`).
    pub fn reconnect_deadline(&self) -> std::time::Duration {
        self.cluster.config().reconnect_deadline
    }

    /// Runs `op` on the leader connection. Outside a transaction, a failure that certainly had
    /// no effect is retried on a new leader connection until the deadline; inside one, the
    /// transaction ends with its connection and the error is returned.
    fn run<T>(
        &self,
        mut op: impl FnMut(&mut State) -> dqlite_wire::Result<T>,
    ) -> rusqlite::Result<T> {
        let config = self.cluster.config();
        let deadline = self.deadline();
        let mut backoff = Backoff::new(config.backoff_initial, config.backoff_max);
        let mut state = self.state.borrow_mut();
        loop {
            // A transaction whose BEGIN is not sent yet has nothing to lose.
            let in_transaction = state.transaction.is_some() && !state.begin_pending;
            if state.conn.as_ref().is_some_and(Connection::is_broken) {
                state.conn = None;
                state.statements.clear();
            }
            if state.conn.is_none() {
                if in_transaction {
                    state.end_transaction();
                    return Err(failure(
                        codes::ROLLED_BACK,
                        "the cluster connection was lost inside the transaction; nothing of it was committed".into(),
                    ));
                }
                let mut conn = self.cluster.connect_until(deadline).map_err(error)?;
                // What a new connection runs first is part of the call: by its deadline, and
                // run again only where a retry can change the answer.
                conn.set_deadline(Some(deadline));
                let retried = |e: &dqlite_wire::Error, backoff: &mut Backoff| {
                    e.needs_reconnect()
                        && e.outcome() == Outcome::NotApplied
                        && backoff.sleep_until_deadline(deadline)
                };
                if self.query_only {
                    if let Err(e) = conn.exec_sql("PRAGMA query_only = ON", &[]) {
                        if retried(&e, &mut backoff) {
                            continue;
                        }
                        return Err(error(e));
                    }
                }
                // A new leader has its own clock.
                if let Err(e) = self.clock.measure(&mut conn) {
                    if retried(&e, &mut backoff) {
                        continue;
                    }
                    return Err(error(e));
                }
                state.conn = Some(conn);
            }
            conn(&mut state).set_deadline(Some(deadline));
            match op(&mut state) {
                Ok(value) => return Ok(value),
                Err(e) => {
                    let broken = e.needs_reconnect()
                        || state.conn.as_ref().is_some_and(Connection::is_broken);
                    if broken {
                        state.conn = None;
                        state.statements.clear();
                        if in_transaction {
                            state.end_transaction();
                        }
                    }
                    let retry = broken
                        && !in_transaction
                        && e.outcome() == Outcome::NotApplied
                        && backoff.sleep_until_deadline(deadline);
                    if !retry {
                        return Err(error(e));
                    }
                }
            }
        }
    }

    /// A statement: its text and parameter count (prepared on the leader now, so that an SQL
    /// error is the prepare's, as on a file).
    pub fn prepare(&self, sql: &str) -> rusqlite::Result<Stmt<'_>> {
        let control = control_of(sql);
        let parameters = match control {
            Control::Sql => self.run(|state| Ok(statement(state, sql)?.params))? as usize,
            _ => 0,
        };
        Ok(Stmt {
            remote: self,
            sql: sql.to_owned(),
            control,
            parameters,
        })
    }

    /// Runs every statement of `sql` (a transaction control statement as [`Stmt::execute`]).
    pub fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        match control_of(sql) {
            Control::Sql => {
                self.send_held()?;
                self.begin_sent()?;
                self.run(|state| conn(state).exec_sql(sql, &[])).map(|_| ())
            }
            control => self.control(control).map(|_| ()),
        }
    }

    fn control(&self, control: Control) -> rusqlite::Result<usize> {
        let open = self.state.borrow().transaction;
        match control {
            Control::Sql => unreachable!("not a control statement"),
            Control::Begin(_) if open.is_some() => Err(sqlite_error(
                1,
                "cannot start a transaction within a transaction",
            )),
            Control::Begin(kind) => {
                // Sent with the transaction's first statement (`begin_with`).
                let mut state = self.state.borrow_mut();
                state.transaction = Some(kind);
                state.begin_pending = true;
                Ok(0)
            }
            Control::Commit | Control::Rollback if self.ended_unsent(control) => {
                // Nothing was sent: there is nothing to end.
                Ok(0)
            }
            Control::Commit => {
                let Some(kind) = open else {
                    return Err(sqlite_error(1, "cannot commit - no transaction is active"));
                };
                // Held-back statements go in the COMMIT's request: dqlite stops at the first
                // that fails, whose error is then the COMMIT's (the transaction rolled back).
                let statements = std::mem::take(&mut self.state.borrow_mut().deferred).join(";\n");
                self.begin_sent()?;
                let committed = self.run(|state| match kind {
                    // A read snapshot's COMMIT changes nothing: its reply is only checked
                    // before the connection's next request.
                    TransactionKind::Read => conn(state).commit_detached_unread(),
                    TransactionKind::Write => conn(state).commit_detached_after(&statements),
                });
                self.state.borrow_mut().end_transaction();
                match committed {
                    Ok(()) => Ok(0),
                    // A read snapshot's COMMIT changes nothing, whatever became of its reply.
                    Err(rusqlite::Error::ToSqlConversionFailure(_))
                        if kind == TransactionKind::Read =>
                    {
                        Ok(0)
                    }
                    Err(other) => Err(other),
                }
            }
            Control::Rollback => {
                if open.is_none() {
                    return Err(sqlite_error(
                        1,
                        "cannot rollback - no transaction is active",
                    ));
                }
                let deadline = self.deadline();
                let mut state = self.state.borrow_mut();
                state.end_transaction();
                if let Some(conn) = state.conn.as_mut() {
                    conn.set_deadline(Some(deadline));
                    // A lost reply breaks the connection, and the server rolls back when it
                    // closes: either way nothing of the transaction remains.
                    if conn.rollback_detached().is_err() {
                        state.conn = None;
                        state.statements.clear();
                    }
                }
                Ok(0)
            }
        }
    }
}

impl Remote {
    /// Ends a transaction whose BEGIN was never sent (a COMMIT only when no statement is held
    /// back either); false when its BEGIN was sent.
    fn ended_unsent(&self, control: Control) -> bool {
        let mut state = self.state.borrow_mut();
        if !state.begin_pending || (control == Control::Commit && !state.deferred.is_empty()) {
            return false;
        }
        state.end_transaction();
        true
    }

    /// Holds back `sql` with `values` until the write transaction's next statement or COMMIT
    /// ([`Stmt::execute_deferred`]); false (nothing held) unless its caller promised
    /// ([`Remote::hold_writes`]: only inside a write transaction), or where its values cannot
    /// be written into its text exactly ([`values::inline`]).
    fn defer(&self, sql: &str, values: &[Value]) -> bool {
        let mut state = self.state.borrow_mut();
        if !state.holding {
            return false;
        }
        match values::inline(sql, values) {
            Some(statement) => {
                state.deferred.push(statement);
                true
            }
            None => false,
        }
    }

    /// The held-back statements (taken), or `None` when nothing is held.
    fn take_held(&self) -> Option<String> {
        let mut state = self.state.borrow_mut();
        if state.deferred.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut state.deferred).join(";\n"))
    }

    /// The held-back statements then `sql` with `values`, as one text (taken); `None` when
    /// nothing is held or `values` cannot be written into `sql` exactly ([`values::inline`]).
    fn take_held_then(&self, sql: &str, values: &[Value]) -> Option<String> {
        let mut state = self.state.borrow_mut();
        if state.deferred.is_empty() {
            return None;
        }
        let statement = values::inline(sql, values)?;
        let mut statements = std::mem::take(&mut state.deferred);
        statements.push(statement);
        Some(statements.join(";\n"))
    }

    /// Sends the held-back statements, if any, in one request: dqlite runs them in turn and
    /// stops at the first that fails, whose error is returned (the statement that needed them
    /// sent is then not run). Also for an error path that must report a held statement's
    /// failure before its own, as the statement, sent alone, would have failed first.
    pub fn send_held(&self) -> rusqlite::Result<()> {
        let Some(statements) = self.take_held() else {
            return Ok(());
        };
        self.begin_sent()?;
        let result = self.run(|state| conn(state).exec_sql(&statements, &[]))?;
        // `sqlite3_last_insert_rowid` of the leader's connection after the last of them.
        self.state.borrow_mut().last_insert_rowid = result.last_insert_id;
        Ok(())
    }

    /// Sends the pending BEGIN, if any, on its own (the next statement needs it begun).
    fn begin_sent(&self) -> rusqlite::Result<()> {
        if !self.state.borrow().begin_pending {
            return Ok(());
        }
        self.begin_with(|state, immediate| conn(state).begin_detached(immediate))
    }

    /// Runs the pending BEGIN through `send` (which may carry the first statement with it,
    /// returning that statement's result), as a file's connection waits for its busy timeout
    /// while another connection's write transaction holds the lock. Until the BEGIN has
    /// succeeded nothing is open on the server, so `send` is run again on a new leader
    /// connection where it certainly had no effect, as a statement outside a transaction;
    /// when the BEGIN fails, the transaction is not open.
    fn begin_with<T>(
        &self,
        mut send: impl FnMut(&mut State, bool) -> dqlite_wire::Result<T>,
    ) -> rusqlite::Result<T> {
        let kind = self.state.borrow().transaction;
        let immediate = kind == Some(TransactionKind::Write);
        let busy_until = Instant::now() + BUSY_WAIT;
        let mut delay = Duration::from_millis(1);
        loop {
            let sent = self.run(|state| send(state, immediate));
            let mut state = self.state.borrow_mut();
            // The server's transaction is open when the BEGIN succeeded, even if a statement
            // sent with it failed.
            let begun = state.conn.as_ref().is_some_and(Connection::in_transaction);
            if begun {
                state.begin_pending = false;
                return sent;
            }
            match sent {
                Err(rusqlite::Error::SqliteFailure(failure, _))
                    if failure.code == rusqlite::ErrorCode::DatabaseBusy
                        && Instant::now() < busy_until =>
                {
                    drop(state);
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_millis(50));
                }
                other => {
                    state.begin_pending = false;
                    state.end_transaction();
                    return other;
                }
            }
        }
    }
}

/// The scope of one call's deadline (see [`Remote::call_scope`]).
pub struct CallScope<'r> {
    remote: &'r Remote,
    outer: Option<Instant>,
}

impl Drop for CallScope<'_> {
    fn drop(&mut self) {
        self.remote.call_deadline.set(self.outer);
    }
}

fn conn(state: &mut State) -> &mut Connection {
    state.conn.as_mut().expect("connected by Remote::run")
}

/// The cached statement for `sql` on the current connection, prepared on first use.
fn statement(state: &mut State, sql: &str) -> dqlite_wire::Result<dqlite_wire::Statement> {
    if let Some(statement) = state.statements.get(sql) {
        return Ok(*statement);
    }
    let statement = conn(state).prepare(sql)?;
    state.statements.insert(sql.to_owned(), statement);
    Ok(statement)
}

/// A statement on the cluster.
pub struct Stmt<'c> {
    remote: &'c Remote,
    sql: String,
    control: Control,
    parameters: usize,
}

impl Stmt<'_> {
    /// The number of parameters the statement takes.
    pub fn parameter_count(&self) -> usize {
        self.parameters
    }

    fn check_count(&self, values: &[Value]) -> rusqlite::Result<()> {
        if values.len() != self.parameters {
            return Err(rusqlite::Error::InvalidParameterCount(
                values.len(),
                self.parameters,
            ));
        }
        Ok(())
    }

    /// Runs the statement; the number of rows it changed.
    pub fn execute(&mut self, values: Vec<Value>) -> rusqlite::Result<usize> {
        if self.control != Control::Sql {
            return self.remote.control(self.control);
        }
        self.check_count(&values)?;
        if let Some(statements) = self.remote.take_held_then(&self.sql, &values) {
            // The held writes and this statement in one request, run in turn up to the first
            // that fails: the reply is the last one's count and the connection's last rowid.
            self.remote.begin_sent()?;
            let result = self
                .remote
                .run(|state| conn(state).exec_sql(&statements, &[]))?;
            self.remote.state.borrow_mut().last_insert_rowid = result.last_insert_id;
            return Ok(result.rows_affected as usize);
        }
        self.remote.send_held()?;
        self.remote.begin_sent()?;
        let sql = &self.sql;
        let result = self.remote.run(|state| {
            let statement = statement(state, sql)?;
            conn(state).exec(statement, &values)
        })?;
        let mut state = self.remote.state.borrow_mut();
        if result.rows_affected > 0 {
            state.last_insert_rowid = result.last_insert_id;
        }
        Ok(result.rows_affected as usize)
    }

    /// Runs the statement without reading how many rows it changed. Inside a write
    /// transaction it may be held back and sent with the transaction's next statement (just
    /// before it, all held-back statements in one request) or with its COMMIT (in the COMMIT's
    /// request): one round trip for them all. dqlite runs them in turn and stops at the first
    /// that fails, so nothing after a failing statement runs, and its error is returned by the
    /// call that sent it (the next statement's, or the COMMIT's, which then rolls back).
    /// Held only after [`Remote::hold_writes`]: the caller's promise that the error would
    /// propagate unchanged and nothing JavaScript can observe runs before the next statement
    /// (no argument read, no assignment to a caller's value). A ROLLBACK drops what is held
    /// back.
    pub fn execute_deferred(&mut self, values: Vec<Value>) -> rusqlite::Result<()> {
        if self.control == Control::Sql {
            self.check_count(&values)?;
            if self.remote.defer(&self.sql, &values) {
                return Ok(());
            }
        }
        self.execute(values).map(|_| ())
    }

    /// The rows of the statement (received whole).
    pub fn query(&mut self, values: Vec<Value>) -> rusqlite::Result<Rows> {
        self.check_count(&values)?;
        let sql = &self.sql;
        let select = is_select(sql);
        if select {
            if let Some(statements) = self.remote.take_held() {
                // The held writes and this read sent together: the read runs after them
                // whatever they did, and changes nothing; their failure is the answer.
                self.remote.begin_sent()?;
                let result = self.remote.run(|state| {
                    let statement = statement(state, sql)?;
                    let (exec, rows) =
                        conn(state).exec_sql_and_query(&statements, statement, &values)?;
                    state.last_insert_rowid = exec.last_insert_id;
                    step_error(state, statement, &values, rows)
                })?;
                return Ok(Rows::new(result));
            }
        }
        self.remote.send_held()?;
        let result =
            if select && self.remote.state.borrow().begin_pending && Connection::can_send_ahead() {
                // The transaction's first statement only reads: it goes with the BEGIN.
                self.remote.begin_with(|state, immediate| {
                    let statement = statement(state, sql)?;
                    let rows = conn(state).begin_and_query(immediate, statement, &values);
                    if conn(state).in_transaction() {
                        step_error(state, statement, &values, rows)
                    } else {
                        rows
                    }
                })?
            } else {
                self.remote.begin_sent()?;
                self.remote.run(|state| {
                    let statement = statement(state, sql)?;
                    let rows = conn(state)
                        .query(statement, &values)
                        .and_then(|rows| rows.collect_all());
                    if select {
                        step_error(state, statement, &values, rows)
                    } else {
                        rows
                    }
                })?
            };
        Ok(Rows::new(result))
    }

    /// The first row, read by `f`.
    pub fn query_row<T>(
        &mut self,
        values: Vec<Value>,
        f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let mut rows = self.query(values)?;
        match rows.next() {
            Some(row) => f(&row),
            None => Err(rusqlite::Error::QueryReturnedNoRows),
        }
    }
}

/// The rows of a plain SELECT, or its error as SQLite reports it: dqlite 1.11 answers a query
/// that fails while it steps with a failure whose code and message are the start of the rows
/// header it had begun (the column count and the first column's name). The SELECT is run once
/// more without rows to learn SQLite's own error; it changes nothing, whatever it answers.
fn step_error(
    state: &mut State,
    statement: dqlite_wire::Statement,
    values: &[Value],
    rows: dqlite_wire::Result<dqlite_wire::QueryResult>,
) -> dqlite_wire::Result<dqlite_wire::QueryResult> {
    match rows {
        Err(e) if e.outcome() == Outcome::Failed => match conn(state).exec(statement, values) {
            Err(real) if real.outcome() == Outcome::Failed => Err(real),
            _ => Err(e),
        },
        other => other,
    }
}

/// Whether `sql` is a plain SELECT (or VALUES): running it changes nothing.
fn is_select(sql: &str) -> bool {
    let first = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    first.eq_ignore_ascii_case("SELECT") || first.eq_ignore_ascii_case("VALUES")
}

#[cfg(test)]
mod tests;
