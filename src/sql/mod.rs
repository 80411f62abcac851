//! The one place where SQL is executed: [`Db`], the state database's connection, is either a
//! local SQLite file (rusqlite, with its statement cache) or a dqlite cluster (`remote`). The
//! domain modules prepare, bind, run and read rows through this API only, so they do not know
//! which engine they talk to.
//!
//! The API is rusqlite's own shape (`prepare_cached`, `execute`, `query_row`, `query_map`,
//! `query`, `row.get`, `row.get_ref`, `params!`, `params_from_iter`, `OptionalExtension`) and its
//! errors are `rusqlite::Error`, so a domain module moved onto the seam changes its imports, not
//! its SQL lines. On the file side every call is one `match` in front of the very rusqlite call
//! it made before: no allocation, no copy of a row.
//!
//! What only a local file can do stays there, reached through [`Db::file`]: the run index's
//! hooks and capture, the prune's helper connections, `state.connection`.

pub mod cluster_clock;
pub mod remote;
pub mod retry;
mod row;

use rusqlite::types::ToSql;
use rusqlite::{CachedStatement, Connection};

pub use row::Row;
pub use rusqlite::{params, OptionalExtension};

/// The state database's connection: a local SQLite file or a dqlite cluster.
pub enum Db {
    /// A local file, through rusqlite.
    File(Connection),
    /// A dqlite cluster (see [`remote`]); boxed, so that the file's variant stays small.
    Remote(Box<remote::Remote>),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Db::File(conn) => f.debug_tuple("File").field(conn).finish(),
            Db::Remote(remote) => f.debug_tuple("Remote").field(&remote.leader()).finish(),
        }
    }
}

impl Db {
    /// The local connection, `None` on a cluster.
    #[inline]
    pub fn file(&self) -> Option<&Connection> {
        match self {
            Db::File(conn) => Some(conn),
            Db::Remote(_) => None,
        }
    }

    /// The cluster connection, `None` for a file.
    pub fn remote(&self) -> Option<&remote::Remote> {
        match self {
            Db::File(_) => None,
            Db::Remote(remote) => Some(remote),
        }
    }

    /// A statement from the connection's cache (prepared on first use).
    #[inline]
    pub fn prepare_cached(&self, sql: &str) -> rusqlite::Result<Stmt<'_>> {
        match self {
            Db::File(conn) => conn.prepare_cached(sql).map(Stmt::Cached),
            Db::Remote(remote) => remote.prepare(sql).map(Stmt::Remote),
        }
    }

    /// A statement prepared for one use.
    pub fn prepare(&self, sql: &str) -> rusqlite::Result<Stmt<'_>> {
        match self {
            Db::File(conn) => conn.prepare(sql).map(Stmt::Plain),
            Db::Remote(remote) => remote.prepare(sql).map(Stmt::Remote),
        }
    }

    /// Runs one statement, returning the number of rows it changed.
    pub fn execute<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        match self {
            Db::File(conn) => conn.execute(sql, params.file()),
            Db::Remote(remote) => remote.prepare(sql)?.execute(params.values()?),
        }
    }

    /// The first row of one statement, read by `f`.
    pub fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        match self {
            Db::File(conn) => conn.query_row(sql, params.file(), |row| f(&Row::File(row))),
            Db::Remote(remote) => remote.prepare(sql)?.query_row(params.values()?, f),
        }
    }

    /// Runs every statement of `sql` (no parameters).
    pub fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        match self {
            Db::File(conn) => conn.execute_batch(sql),
            Db::Remote(remote) => remote.execute_batch(sql),
        }
    }

    /// Whether no transaction is open.
    #[inline]
    pub fn is_autocommit(&self) -> bool {
        match self {
            Db::File(conn) => conn.is_autocommit(),
            Db::Remote(remote) => remote.is_autocommit(),
        }
    }

    /// The rowid of the last row inserted through this connection (on a cluster the writes
    /// held back are sent first: one of them may be that insert).
    pub fn last_insert_rowid(&self) -> rusqlite::Result<i64> {
        match self {
            Db::File(conn) => Ok(conn.last_insert_rowid()),
            Db::Remote(remote) => remote.last_insert_rowid(),
        }
    }

    /// The caller of a write transaction promises that from here to its COMMIT it runs no
    /// JavaScript (a getter, a coercion, an assignment): on a cluster the writes whose count
    /// nobody reads ([`Db::holds_writes`]) then wait and go together, in the COMMIT's request
    /// when nothing reads in between. A held statement that fails fails the request that
    /// carries it with its own error, and nothing after it runs; a step that fails before
    /// they are sent reports their failure first (`StateDb::write` sends them), as they,
    /// sent alone, would have failed before it. On a file, nothing changes.
    pub fn hold_writes_until_commit(&self) {
        if let Db::Remote(remote) = self {
            remote.hold_writes();
        }
    }

    /// Whether writes may be held back now ([`Db::hold_writes_until_commit`] on a cluster).
    #[inline]
    pub fn holds_writes(&self) -> bool {
        match self {
            Db::File(_) => false,
            Db::Remote(remote) => remote.holds_writes(),
        }
    }

    /// Sends the writes held back, if any: an error path reports their failure first, as the
    /// statements, sent alone, would have failed before it.
    pub fn send_held(&self) -> rusqlite::Result<()> {
        match self {
            Db::File(_) => Ok(()),
            Db::Remote(remote) => remote.send_held(),
        }
    }
}

/// A prepared statement of either engine.
pub enum Stmt<'c> {
    /// From the file connection's statement cache.
    Cached(CachedStatement<'c>),
    /// Prepared on the file connection for one use.
    Plain(rusqlite::Statement<'c>),
    /// On the cluster.
    Remote(remote::Stmt<'c>),
}

impl<'c> Stmt<'c> {
    #[inline]
    fn file(&mut self) -> Option<&mut rusqlite::Statement<'c>> {
        match self {
            Stmt::Cached(statement) => Some(statement),
            Stmt::Plain(statement) => Some(statement),
            Stmt::Remote(_) => None,
        }
    }

    /// The number of `?` parameters (the highest index).
    pub fn parameter_count(&self) -> usize {
        match self {
            Stmt::Cached(statement) => statement.parameter_count(),
            Stmt::Plain(statement) => statement.parameter_count(),
            Stmt::Remote(statement) => statement.parameter_count(),
        }
    }

    /// Runs the statement; the number of rows it changed.
    #[inline]
    pub fn execute<P: Params>(&mut self, params: P) -> rusqlite::Result<usize> {
        match self {
            Stmt::Remote(statement) => statement.execute(params.values()?),
            file => file
                .file()
                .expect("a file statement")
                .execute(params.file()),
        }
    }

    /// Runs the statement when its count is not needed. On a file it is [`Stmt::execute`]; on
    /// a cluster, inside a write transaction, it may be sent later, together with the
    /// transaction's next statement or its COMMIT, saving a round trip each
    /// ([`remote::Stmt::execute_deferred`]): its error, if it fails, is then returned by that
    /// later call and nothing after it runs. Only where that is the same to the caller: the
    /// error propagates unchanged (`?`), and nothing between this statement and the next can
    /// fail or touch a JS value (an argument's getter, an in-place assignment) — the promise
    /// of [`Db::hold_writes_until_commit`], whose [`Db::holds_writes`] the callers ask.
    #[inline]
    pub fn execute_deferred<P: Params>(&mut self, params: P) -> rusqlite::Result<()> {
        match self {
            Stmt::Remote(statement) => statement.execute_deferred(params.values()?),
            file => file
                .file()
                .expect("a file statement")
                .execute(params.file())
                .map(|_| ()),
        }
    }

    /// The first row, read by `f` (`QueryReturnedNoRows` when there is none).
    #[inline]
    pub fn query_row<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        match self {
            Stmt::Remote(statement) => statement.query_row(params.values()?, f),
            file => file
                .file()
                .expect("a file statement")
                .query_row(params.file(), |row| f(&Row::File(row))),
        }
    }

    /// The rows, stepped one by one.
    #[inline]
    pub fn query<P: Params>(&mut self, params: P) -> rusqlite::Result<Rows<'_>> {
        match self {
            Stmt::Cached(statement) => statement.query(params.file()).map(Rows::File),
            Stmt::Plain(statement) => statement.query(params.file()).map(Rows::File),
            Stmt::Remote(statement) => statement.query(params.values()?).map(Rows::Remote),
        }
    }

    /// The rows, each read by `f`.
    #[inline]
    pub fn query_map<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<MappedRows<'_, F>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
    {
        Ok(MappedRows {
            rows: self.query(params)?,
            map: f,
        })
    }
}

/// A prepared statement's parameter count, for binding a caller's values
/// (`js::params_for`).
pub trait ParameterCount {
    /// The number of `?` parameters (the highest index).
    fn parameter_count(&self) -> usize;
}

impl ParameterCount for Stmt<'_> {
    fn parameter_count(&self) -> usize {
        Stmt::parameter_count(self)
    }
}

impl ParameterCount for rusqlite::Statement<'_> {
    fn parameter_count(&self) -> usize {
        rusqlite::Statement::parameter_count(self)
    }
}

/// The rows of a query.
pub enum Rows<'s> {
    /// Stepped on the file connection.
    File(rusqlite::Rows<'s>),
    /// Received from the cluster.
    Remote(remote::Rows),
}

impl Rows<'_> {
    /// The next row, `None` after the last.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> rusqlite::Result<Option<Row<'_>>> {
        match self {
            Rows::File(rows) => Ok(rows.next()?.map(Row::File)),
            Rows::Remote(rows) => Ok(rows.next()),
        }
    }
}

/// The rows of [`Stmt::query_map`].
pub struct MappedRows<'s, F> {
    rows: Rows<'s>,
    map: F,
}

impl<T, F> Iterator for MappedRows<'_, F>
where
    F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
{
    type Item = rusqlite::Result<T>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let map = &mut self.map;
        self.rows
            .next()
            .transpose()
            .map(|row| row.and_then(|row| map(&row)))
    }
}

/// A statement's parameters, for either engine: the shapes the store binds (`params![…]`,
/// `[x, y]`, `[]`, [`params_from_iter`]).
pub trait Params {
    /// The same parameters as rusqlite binds them.
    type File: rusqlite::Params;
    /// For the file.
    fn file(self) -> Self::File;
    /// For the cluster: each value as SQLite would receive it.
    fn values(self) -> rusqlite::Result<Vec<dqlite_wire::Value>>;
}

fn values_of<'v>(
    items: impl IntoIterator<Item = &'v (impl ToSql + ?Sized + 'v)>,
) -> rusqlite::Result<Vec<dqlite_wire::Value>> {
    items
        .into_iter()
        .map(|item| remote::to_value(item))
        .collect()
}

impl<'a> Params for &'a [&'a dyn ToSql] {
    type File = &'a [&'a dyn ToSql];
    #[inline]
    fn file(self) -> Self::File {
        self
    }
    fn values(self) -> rusqlite::Result<Vec<dqlite_wire::Value>> {
        self.iter().map(|item| remote::to_value(*item)).collect()
    }
}

impl Params for [&(dyn ToSql + Send + Sync); 0] {
    type File = Self;
    #[inline]
    fn file(self) -> Self {
        self
    }
    fn values(self) -> rusqlite::Result<Vec<dqlite_wire::Value>> {
        Ok(Vec::new())
    }
}

macro_rules! array_params {
    ($($n:literal)+) => {$(
        impl<T: ToSql> Params for [T; $n] {
            type File = Self;
            #[inline]
            fn file(self) -> Self {
                self
            }
            fn values(self) -> rusqlite::Result<Vec<dqlite_wire::Value>> {
                values_of(self.iter())
            }
        }
        impl<'a, T: ToSql + ?Sized> Params for &'a [&'a T; $n] {
            type File = Self;
            #[inline]
            fn file(self) -> Self {
                self
            }
            fn values(self) -> rusqlite::Result<Vec<dqlite_wire::Value>> {
                self.iter().map(|item| remote::to_value(*item)).collect()
            }
        }
    )+};
}

array_params!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

/// Parameters from an iterator of values (rusqlite's `params_from_iter`).
pub struct ParamsFromIter<I>(I);

/// The values of `iter`, one per `?`.
#[inline]
pub fn params_from_iter<I>(iter: I) -> ParamsFromIter<I>
where
    I: IntoIterator,
    I::Item: ToSql,
{
    ParamsFromIter(iter)
}

impl<I> Params for ParamsFromIter<I>
where
    I: IntoIterator,
    I::Item: ToSql,
{
    type File = rusqlite::ParamsFromIter<I>;
    #[inline]
    fn file(self) -> Self::File {
        rusqlite::params_from_iter(self.0)
    }
    fn values(self) -> rusqlite::Result<Vec<dqlite_wire::Value>> {
        self.0
            .into_iter()
            .map(|item| remote::to_value(&item))
            .collect()
    }
}
