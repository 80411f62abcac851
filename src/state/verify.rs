//! Open-time verification: the constants, the `schema_meta` row, and the shape hash of
//! `sqlite_schema` must all equal those of a database made from the exact schema text.

use std::sync::OnceLock;

use super::schema::{
    schema_digest, RESET_INSTRUCTION, STATE_APPLICATION_ID, STATE_APP_VERSION, STATE_SCHEMA_NAME,
    STATE_SCHEMA_SQL, STATE_SCHEMA_VERSION,
};
use crate::error::{Result, StoreError};
use crate::sql::{Db, OptionalExtension};
use rusqlite::types::Value as Sql;

fn reset() -> StoreError {
    StoreError::plain(RESET_INSTRUCTION)
}

/// Whether the file header's `application_id` and `user_version` are the reference's (reading
/// them writes nothing).
fn has_identity(conn: &Db) -> Result<bool> {
    let application_id: i64 = conn.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let user_version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    Ok(application_id == STATE_APPLICATION_ID && user_version == STATE_SCHEMA_VERSION)
}

/// Run by a read-write open before its first write: a file of another application, or an empty
/// one, is refused with the reference's error untouched (the reference switched it to WAL mode
/// first, then refused it). A file already in WAL mode passes on to the reference's own
/// sequence, which writes nothing to it before its verdict and waits for the lock of a process
/// that is creating the file at this moment (the header reads as empty until it commits).
pub fn refuse_foreign_before_writing(conn: &Db) -> Result<()> {
    if has_identity(conn)? {
        return Ok(());
    }
    let journal_mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if journal_mode.eq_ignore_ascii_case("wal") {
        return Ok(());
    }
    Err(reset())
}

/// The reference's `verifySchema`: ids, `schema_meta` and the shape of every schema object.
pub fn verify_schema(conn: &Db) -> Result<()> {
    if !has_identity(conn)? {
        return Err(reset());
    }
    let meta = conn
        .query_row(
            "SELECT schema_name, schema_version, schema_digest, app_version
             FROM schema_meta WHERE id = 1",
            [],
            |row| {
                Ok((
                    row.get::<_, Sql>(0)?,
                    row.get::<_, Sql>(1)?,
                    row.get::<_, Sql>(2)?,
                    row.get::<_, Sql>(3)?,
                ))
            },
        )
        .optional()?;
    let digest = schema_digest();
    let valid = matches!(
        &meta,
        Some((Sql::Text(name), Sql::Integer(version), Sql::Blob(stored), Sql::Text(app)))
            if name == STATE_SCHEMA_NAME
                && *version == STATE_SCHEMA_VERSION
                && stored[..] == digest[..]
                && app == STATE_APP_VERSION
    );
    if !valid {
        return Err(reset());
    }
    // Equal objects have equal shape hashes (and, short of a SHA-256 collision, only they do),
    // so the file's objects are compared with those of the exact schema text directly: hashing
    // the canonical JSON of the whole schema on every open was a good part of opening.
    if schema_objects(conn)? != *expected_schema_objects()? {
        return Err(reset());
    }
    Ok(())
}

/// `(type, name, tbl_name, sql)` of each schema object, in the order the shape hashes them.
type SchemaObjects = Vec<[String; 4]>;

fn schema_objects(conn: &Db) -> Result<SchemaObjects> {
    let mut statement = conn.prepare_cached(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema
         WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )?;
    let mut rows = statement.query([])?;
    let mut objects = Vec::new();
    while let Some(row) = rows.next()? {
        match (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?) {
            (Sql::Text(kind), Sql::Text(name), Sql::Text(table), Sql::Text(sql)) => {
                objects.push([kind, name, table, sql])
            }
            _ => {
                return Err(StoreError::plain(
                    "Pi Workflows database contains an invalid schema object",
                ))
            }
        }
    }
    Ok(objects)
}

fn expected_schema_objects() -> Result<&'static SchemaObjects> {
    static OBJECTS: OnceLock<SchemaObjects> = OnceLock::new();
    if let Some(objects) = OBJECTS.get() {
        return Ok(objects);
    }
    let memory = rusqlite::Connection::open_in_memory()?;
    memory.pragma_update(None, "foreign_keys", "ON")?;
    memory.execute_batch(STATE_SCHEMA_SQL)?;
    let objects = schema_objects(&Db::File(memory))?;
    Ok(OBJECTS.get_or_init(|| objects))
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use crate::sql::Db;
    use rusqlite::types::Value as Sql;
    use serde_json::{json, Value};

    use super::super::ids::sha256;
    use super::super::json::canonical;
    use super::STATE_SCHEMA_SQL;
    use crate::error::{Result, StoreError};

    /// SHA-256 hex of the canonical JSON of the schema objects, as the reference computes it.
    fn schema_shape(conn: &Db) -> Result<String> {
        let mut statement = conn.prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema
             WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
        )?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, Sql>(0)?,
                row.get::<_, Sql>(1)?,
                row.get::<_, Sql>(2)?,
                row.get::<_, Sql>(3)?,
            ))
        })?;
        let mut objects = Vec::new();
        for row in rows {
            match row? {
                (Sql::Text(kind), Sql::Text(name), Sql::Text(table), Sql::Text(sql)) => objects
                    .push(json!({ "type": kind, "name": name, "tableName": table, "sql": sql })),
                _ => {
                    return Err(StoreError::plain(
                        "Pi Workflows database contains an invalid schema object",
                    ))
                }
            }
        }
        Ok(hex::encode(sha256(
            canonical(&Value::Array(objects)).as_bytes(),
        )))
    }

    fn expected_schema_shape() -> Result<&'static str> {
        static SHAPE: OnceLock<String> = OnceLock::new();
        if let Some(shape) = SHAPE.get() {
            return Ok(shape);
        }
        let memory = rusqlite::Connection::open_in_memory()?;
        memory.pragma_update(None, "foreign_keys", "ON")?;
        memory.execute_batch(STATE_SCHEMA_SQL)?;
        let shape = schema_shape(&Db::File(memory))?;
        Ok(SHAPE.get_or_init(|| shape))
    }

    /// The shape hash the reference compares (open compares the objects themselves): the
    /// schema text here must make the reference's schema.
    #[test]
    fn fresh_schema_has_the_reference_shape() {
        assert_eq!(
            expected_schema_shape().unwrap(),
            "b22ef4b058c406420324879c57f8d5fea011e89c337e1ef1bb4d32da7d2370af"
        );
    }
}
