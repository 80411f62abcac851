//! Raw SQL on the store's own connection, for the better-sqlite3-compatible `state.connection`
//! of the JS layer: preparing (to report errors and column metadata early), running, and
//! querying statements with positional or named parameters.
//!
//! On a dqlite cluster the statements run there; what SQLite tells about a statement before it
//! runs (whether it returns rows, its columns, its parameter names) is asked of a statement
//! prepared on an in-memory database holding the same schema text, so it is SQLite's own answer
//! for every statement over the store's tables.
//!
//! Values cross the boundary as JSON, with tags for what JSON cannot hold: `{"$b": base64}` for
//! BLOBs/Buffers, `{"$i": "123"}` for BigInts, `{"$f": "Infinity"}` for non-finite reals.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::{Connection, Statement};
use serde_json::{json, Map, Value};

use crate::error::{Result, StoreError};
use crate::sql::{params_from_iter, Db};

thread_local! {
    /// The schema, in memory, that describes a cluster's statements (see the module header).
    static DESCRIBER: Connection = {
        let conn = Connection::open_in_memory().expect("an in-memory database");
        conn.execute_batch(crate::state::schema::STATE_SCHEMA_SQL)
            .expect("the schema text");
        conn
    };
}

/// Runs `f` on `sql` prepared on the in-memory schema.
fn described<T>(sql: &str, f: impl FnOnce(&Statement<'_>) -> Result<T>) -> Result<T> {
    DESCRIBER.with(|conn| {
        let statement = conn.prepare_cached(sql)?;
        f(&statement)
    })
}

/// [`describe`] on either engine.
pub fn describe_on(db: &Db, sql: &str) -> Result<Value> {
    match db {
        Db::File(conn) => {
            one_statement(conn, sql)?;
            describe(conn, sql)
        }
        Db::Remote(_) => {
            DESCRIBER.with(|conn| one_statement(conn, sql))?;
            // Compiled by the cluster too, so that an error there is this call's.
            db.prepare_cached(sql)?;
            DESCRIBER.with(|conn| describe(conn, sql))
        }
    }
}

/// better-sqlite3's `prepare` takes exactly one statement, and decides what follows it without
/// compiling it: after the first statement only spaces, `;`, `\t`..`\r` and comments may come
/// (an unterminated `/*` runs to the end), else "more than one statement" — even where the rest
/// would not compile. rusqlite compiles the rest instead, so it reports that text's own error.
/// A first statement that does not compile is left to the prepare that follows, which reports
/// SQLite's error for it.
fn one_statement(conn: &Connection, sql: &str) -> Result<()> {
    let Some(tail) = first_statement_end(conn, sql) else {
        return Ok(());
    };
    let Some(tail) = tail else {
        return Err(StoreError::Range(
            "The supplied SQL string contains no statements".into(),
        ));
    };
    if only_separators(&sql.as_bytes()[tail..]) {
        Ok(())
    } else {
        Err(StoreError::Range(
            "The supplied SQL string contains more than one statement".into(),
        ))
    }
}

/// Where SQLite's compilation of `sql`'s first statement stops: `Some(None)` when there is no
/// statement, `None` when it does not compile.
fn first_statement_end(conn: &Connection, sql: &str) -> Option<Option<usize>> {
    use rusqlite::ffi;
    use std::ffi::{c_char, c_int};
    let length = c_int::try_from(sql.len()).ok()?;
    let mut statement = std::ptr::null_mut();
    let mut tail: *const c_char = std::ptr::null();
    // SAFETY: the handle is the open connection's, `sql` outlives the call, SQLite reads at most
    // `length` bytes of it and leaves `tail` inside them; the statement is finalized at once.
    let end = unsafe {
        let rc = ffi::sqlite3_prepare_v3(
            conn.handle(),
            sql.as_ptr().cast(),
            length,
            0,
            &mut statement,
            &mut tail,
        );
        if rc != ffi::SQLITE_OK {
            return None;
        }
        let offset = tail.offset_from(sql.as_ptr().cast::<c_char>()) as usize;
        if statement.is_null() {
            return Some(None);
        }
        ffi::sqlite3_finalize(statement);
        offset
    };
    Some(Some(end))
}

/// better-sqlite3's scan of what follows the first statement, up to a NUL as in C.
fn only_separators(rest: &[u8]) -> bool {
    let mut rest = match rest.iter().position(|&byte| byte == 0) {
        Some(nul) => &rest[..nul],
        None => rest,
    };
    loop {
        match rest {
            [] => return true,
            [b' ' | b';' | b'\t'..=b'\r', more @ ..] => rest = more,
            [b'/', b'*', more @ ..] => {
                rest = match more.windows(2).position(|pair| pair == b"*/") {
                    Some(at) => &more[at + 2..],
                    None => &[],
                }
            }
            [b'-', b'-', more @ ..] => {
                rest = match more.iter().position(|&byte| byte == b'\n') {
                    Some(at) => &more[at + 1..],
                    None => &[],
                }
            }
            _ => return false,
        }
    }
}

/// [`run`] on either engine.
pub fn run_on(db: &Db, sql: &str, params: &Value) -> Result<Value> {
    match db {
        Db::File(conn) => run(conn, sql, params),
        Db::Remote(_) => {
            let values = described(sql, |statement| bound_values(statement, params))?;
            let mut statement = db.prepare_cached(sql)?;
            let changes = statement.execute(params_from_iter(values.iter().map(|(_, v)| v)))?;
            Ok(json!({ "changes": changes, "lastInsertRowid": db.last_insert_rowid()? }))
        }
    }
}

/// `{columns, rows}` from the cursor `$rows` (rusqlite's or the remote engine's: the same calls,
/// with no trait in common), each row encoded as `$names.len()` tagged values, stopping after
/// `$limit` rows.
macro_rules! rows_reply {
    ($names:expr, $rows:expr, $safe_integers:expr, $limit:expr) => {{
        let width = $names.len();
        let out = collect_rows(
            || {
                $rows
                    .next()?
                    .map(|row| encode_row(width, $safe_integers, |index| row.get_ref(index)))
                    .transpose()
            },
            $limit,
        )?;
        Ok(json!({ "columns": $names, "rows": out }))
    }};
}

/// [`query`] on either engine.
pub fn query_on(
    db: &Db,
    sql: &str,
    params: &Value,
    safe_integers: bool,
    limit: Option<usize>,
) -> Result<Value> {
    match db {
        Db::File(conn) => query(conn, sql, params, safe_integers, limit),
        Db::Remote(_) => {
            let (names, values) = described(sql, |statement| {
                Ok((column_names(statement), bound_values(statement, params)?))
            })?;
            let mut statement = db.prepare_cached(sql)?;
            let mut rows = statement.query(params_from_iter(values.iter().map(|(_, v)| v)))?;
            rows_reply!(names, rows, safe_integers, limit)
        }
    }
}

/// [`exec`] on either engine.
pub fn exec_on(db: &Db, sql: &str) -> Result<()> {
    match db {
        Db::File(conn) => exec(conn, sql),
        Db::Remote(_) => Ok(db.execute_batch(sql)?),
    }
}

/// Compiles `sql` and describes it: whether it returns rows, and its result columns.
pub fn describe(conn: &Connection, sql: &str) -> Result<Value> {
    let statement = conn.prepare_cached(sql)?;
    let declared = statement.columns();
    let columns: Vec<Value> = statement
        .columns_with_metadata()
        .iter()
        .zip(&declared)
        .map(|(column, decl)| {
            json!({
                "name": column.name(),
                "column": column.origin_name(),
                "table": column.table_name(),
                "database": column.database_name(),
                "type": decl.decl_type(),
            })
        })
        .collect();
    Ok(
        json!({ "reader": statement.column_count() > 0, "readonly": statement.readonly(), "columns": columns }),
    )
}

/// Runs a statement; returns `{changes, lastInsertRowid}`.
pub fn run(conn: &Connection, sql: &str, params: &Value) -> Result<Value> {
    let mut statement = conn.prepare_cached(sql)?;
    bind(&mut statement, params)?;
    let mut rows = statement.raw_query();
    while rows.next()?.is_some() {}
    drop(rows);
    Ok(json!({ "changes": conn.changes(), "lastInsertRowid": conn.last_insert_rowid() }))
}

/// Runs a query; returns `{columns, rows}` with rows as arrays of tagged values. `limit` stops
/// after that many rows (`get` reads one).
pub fn query(
    conn: &Connection,
    sql: &str,
    params: &Value,
    safe_integers: bool,
    limit: Option<usize>,
) -> Result<Value> {
    let mut statement = conn.prepare_cached(sql)?;
    let names = column_names(&statement);
    bind(&mut statement, params)?;
    let mut rows = statement.raw_query();
    rows_reply!(names, rows, safe_integers, limit)
}

/// A statement's result column names.
fn column_names(statement: &Statement<'_>) -> Vec<Value> {
    statement
        .column_names()
        .into_iter()
        .map(|name| Value::String(name.into()))
        .collect()
}

/// The rows `next` steps to (each already an array of tagged values), stopping after `limit`.
fn collect_rows(
    mut next: impl FnMut() -> rusqlite::Result<Option<Value>>,
    limit: Option<usize>,
) -> rusqlite::Result<Vec<Value>> {
    let mut out = Vec::new();
    while let Some(row) = next()? {
        out.push(row);
        if limit.is_some_and(|limit| out.len() >= limit) {
            break;
        }
    }
    Ok(out)
}

/// One row of `width` columns (`column` reads one) as an array of tagged values.
fn encode_row<'r>(
    width: usize,
    safe_integers: bool,
    column: impl Fn(usize) -> rusqlite::Result<ValueRef<'r>>,
) -> rusqlite::Result<Value> {
    let values = (0..width)
        .map(|index| Ok(encode_value(column(index)?, safe_integers)))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Value::Array(values))
}

/// `exec`: runs every statement of a script.
pub fn exec(conn: &Connection, sql: &str) -> Result<()> {
    conn.execute_batch(sql)?;
    Ok(())
}

fn encode_value(value: ValueRef<'_>, safe_integers: bool) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) if safe_integers => json!({ "$i": i.to_string() }),
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) if f.is_finite() => json!(f),
        ValueRef::Real(f) => json!({ "$f": if f > 0.0 { "Infinity" } else { "-Infinity" } }),
        ValueRef::Text(bytes) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Blob(bytes) => json!({ "$b": BASE64.encode(bytes) }),
    }
}

fn decode_param(value: &Value) -> Result<Sql> {
    Ok(match value {
        Value::Null => Sql::Null,
        Value::Bool(_) => {
            return Err(StoreError::Type(
                "SQLite3 can only bind numbers, strings, bigints, buffers, and null".into(),
            ))
        }
        // better-sqlite3 binds every JS number as a double; SQLite's column affinity converts.
        Value::Number(n) => Sql::Real(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Sql::Text(s.clone()),
        Value::Object(tagged) => decode_tagged(tagged)?,
        Value::Array(_) => {
            return Err(StoreError::Type(
                "SQLite3 can only bind numbers, strings, bigints, buffers, and null".into(),
            ))
        }
    })
}

fn decode_tagged(tagged: &Map<String, Value>) -> Result<Sql> {
    let text = |key: &str| tagged.get(key).and_then(Value::as_str);
    if let Some(b64) = text("$b") {
        let bytes = BASE64
            .decode(b64)
            .map_err(|error| StoreError::plain(format!("Invalid buffer parameter: {error}")))?;
        return Ok(Sql::Blob(bytes));
    }
    if let Some(int) = text("$i") {
        return int.parse::<i64>().map(Sql::Integer).map_err(|_| {
            StoreError::plain("The bound BigInt is too large to be represented as a 64-bit integer")
        });
    }
    match text("$f") {
        Some("Infinity") => Ok(Sql::Real(f64::INFINITY)),
        Some("-Infinity") => Ok(Sql::Real(f64::NEG_INFINITY)),
        Some(_) => Ok(Sql::Null),
        None => Err(StoreError::Type(
            "SQLite3 can only bind numbers, strings, bigints, buffers, and null".into(),
        )),
    }
}

/// Binds `{"positional": [...], "named": {...}|null}` as better-sqlite3 does.
fn bind(statement: &mut Statement<'_>, params: &Value) -> Result<()> {
    statement.clear_bindings();
    for (index, value) in bound_values(statement, params)? {
        statement.raw_bind_parameter(index, value)?;
    }
    Ok(())
}

/// The value of each parameter of `statement` (1-based index, value) from
/// `{"positional": [...], "named": {...}|null}`, as better-sqlite3 binds them.
fn bound_values(statement: &Statement<'_>, params: &Value) -> Result<Vec<(usize, Sql)>> {
    let mut bound = Vec::new();
    let positional = params.get("positional").and_then(Value::as_array);
    let named = params.get("named").and_then(Value::as_object);
    let count = statement.parameter_count();
    let mut next_positional = 0;
    for index in 1..=count {
        let value = match statement.parameter_name(index) {
            Some(name) if !name.starts_with('?') => {
                let key = &name[1..];
                let Some(named) = named else {
                    return Err(StoreError::plain(
                        "Missing named parameters: an object with the named parameters is required",
                    ));
                };
                let value = named.get(key).ok_or_else(|| {
                    StoreError::Range(format!("Missing named parameter \"{key}\""))
                })?;
                decode_param(value)?
            }
            _ => {
                let value = positional.and_then(|values| values.get(next_positional));
                next_positional += 1;
                match value {
                    Some(value) => decode_param(value)?,
                    None => {
                        return Err(StoreError::Range(
                            "Too few parameter values were provided".into(),
                        ))
                    }
                }
            }
        };
        bound.push((index, value));
    }
    if positional.is_some_and(|values| values.len() > next_positional) {
        return Err(StoreError::Range(
            "Too many parameter values were provided".into(),
        ));
    }
    Ok(bound)
}
