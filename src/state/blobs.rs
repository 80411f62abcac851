//! Content-addressed blobs: every JSON document and text the store keeps lives in `blobs`,
//! keyed by the SHA-256 of its bytes.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::ids::sha256;
use crate::error::{Result, StoreError};

/// Media type of JSON blobs.
pub const MEDIA_JSON: &str = "application/json";
/// Media type of text blobs.
pub const MEDIA_TEXT: &str = "text/plain";

/// A blob's key: the SHA-256 of its content.
pub type BlobHash = [u8; 32];

/// A `blobs` row (`BlobRecord`).
#[derive(Debug, Clone, PartialEq)]
pub struct Blob {
    /// SHA-256 of `content`.
    pub hash: Vec<u8>,
    /// `application/json` or `text/plain` for what the store writes.
    pub media_type: String,
    /// Length of `content` in bytes.
    pub byte_length: i64,
    /// The stored bytes.
    pub content: Vec<u8>,
}

/// Stores `content` under its hash; an existing blob with that hash must be identical.
pub fn put_blob(conn: &Connection, content: &[u8], media_type: &str, now: i64) -> Result<BlobHash> {
    let hash = sha256(content);
    let inserted = conn
        .prepare_cached(
            "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(blob_hash) DO NOTHING",
        )?
        .execute(params![
            &hash[..],
            media_type,
            content.len() as i64,
            content,
            now
        ])?;
    if inserted == 0 {
        let stored = read_blob(conn, &hash)?;
        let same = stored.is_some_and(|blob| {
            blob.media_type == media_type
                && blob.byte_length == content.len() as i64
                && blob.content == content
        });
        if !same {
            return Err(StoreError::plain("Content-addressed blob conflict"));
        }
    }
    Ok(hash)
}

/// Stores JSON text that is already canonical.
pub fn put_json(conn: &Connection, canonical_text: &str, now: i64) -> Result<BlobHash> {
    put_blob(conn, canonical_text.as_bytes(), MEDIA_JSON, now)
}

/// Stores UTF-8 text (`text/plain`).
pub fn put_text(conn: &Connection, text: &str, now: i64) -> Result<BlobHash> {
    put_blob(conn, text.as_bytes(), MEDIA_TEXT, now)
}

/// The blob with this hash, or `None`.
pub fn read_blob(conn: &Connection, hash: &[u8]) -> Result<Option<Blob>> {
    let blob = conn
        .prepare_cached(
            "SELECT blob_hash, media_type, byte_length, content FROM blobs WHERE blob_hash = ?",
        )?
        .query_row([hash], |row| {
            Ok(Blob {
                hash: row.get(0)?,
                media_type: row.get(1)?,
                byte_length: row.get(2)?,
                content: row.get(3)?,
            })
        })
        .optional()?;
    Ok(blob)
}

/// The UTF-8 text of a blob (any media type), as `content.toString("utf8")` would give it.
pub fn read_text(conn: &Connection, hash: &[u8]) -> Result<Option<String>> {
    Ok(read_blob(conn, hash)?.map(|blob| String::from_utf8_lossy(&blob.content).into_owned()))
}

/// The stored JSON text of a JSON blob, exactly as stored.
pub fn read_json_text(conn: &Connection, hash: &[u8]) -> Result<String> {
    match read_blob(conn, hash)? {
        Some(blob) if blob.media_type == MEDIA_JSON => {
            Ok(String::from_utf8_lossy(&blob.content).into_owned())
        }
        _ => Err(StoreError::plain(
            "JSON blob is missing or has the wrong media type",
        )),
    }
}

/// A JSON blob parsed, with object keys sorted as the reference's `parseJson` sorts them.
pub fn read_json(conn: &Connection, hash: &[u8]) -> Result<Value> {
    let text = read_json_text(conn, hash)?;
    let value = super::json::parse(&text)
        .map_err(|error| StoreError::plain(format!("Stored JSON is invalid: {error}")))?;
    Ok(sort_keys(value))
}

/// Object keys in JavaScript's default sort order, recursively.
pub fn sort_keys(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        other => other,
    }
}

/// Deletes every blob no foreign-key column refers to; returns how many went. The caller holds
/// the write transaction.
pub fn prune_unreferenced(conn: &Connection) -> Result<usize> {
    conn.execute_batch(
        "CREATE TEMP TABLE referenced_blobs(blob_hash BLOB PRIMARY KEY) WITHOUT ROWID",
    )?;
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema
             WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'blobs'",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for table in tables {
        let columns: Vec<String> = conn
            .prepare(
                "SELECT \"from\" FROM pragma_foreign_key_list(?)
                 WHERE \"table\" = 'blobs' AND \"to\" = 'blob_hash'",
            )?
            .query_map([&table], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for column in columns {
            let column = quote_identifier(&column);
            conn.execute(
                &format!(
                    "INSERT OR IGNORE INTO referenced_blobs(blob_hash)
                     SELECT {column} FROM {} WHERE {column} IS NOT NULL",
                    quote_identifier(&table)
                ),
                [],
            )?;
        }
    }
    let deleted = conn.execute(
        "DELETE FROM blobs
         WHERE NOT EXISTS (SELECT 1 FROM referenced_blobs r WHERE r.blob_hash = blobs.blob_hash)",
        [],
    )?;
    conn.execute_batch("DROP TABLE referenced_blobs")?;
    Ok(deleted)
}

fn quote_identifier(value: &str) -> String {
    format!("\"{}\"", value.replace('"', "\"\""))
}
