//! Content-addressed blobs: every JSON document and text the store keeps lives in `blobs`,
//! keyed by the SHA-256 of its bytes.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::sql::{params, Db, OptionalExtension};
use rusqlite::types::ValueRef;
use serde_json::Value;

use super::ids::sha256;
use super::json::{record_text_of, sort_keys};
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
///
/// One statement where the reference runs two (`INSERT … ON CONFLICT DO NOTHING`, then a read
/// comparing the stored row): a missing blob is inserted, an identical one is left as it is
/// (the upsert's `WHERE` is false, nothing is written), and a different one under the same hash
/// is "updated" to a negative length, which its `CHECK` refuses — the conflict the reference's
/// comparison reports. The failed statement changes nothing.
pub fn put_blob(conn: &Db, content: &[u8], media_type: &str, now: i64) -> Result<BlobHash> {
    let hash = sha256(content);
    let put = conn.prepare_cached(PUT_ONE)?.execute(params![
        &hash[..],
        media_type,
        content.len() as i64,
        content,
        now
    ]);
    match put {
        Ok(_) => Ok(hash),
        Err(error) if is_conflict_marker(&error) => {
            Err(StoreError::plain("Content-addressed blob conflict"))
        }
        Err(error) => Err(error.into()),
    }
}

/// [`put_json`] of each text, in order, in one statement: a multi-row `INSERT` inserts its
/// rows in order, and decides each as a put of its own would (a text met again, in the list
/// or the table, changes nothing; a different blob under its hash fails the statement).
pub fn put_jsons<const N: usize>(conn: &Db, texts: [&str; N], now: i64) -> Result<[BlobHash; N]> {
    let hashes = texts.map(|text| sha256(text.as_bytes()));
    let rows = vec!["(?, ?, ?, ?, ?)"; N].join(", ");
    let sql = format!(
        "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
         VALUES {rows} {PUT_CONFLICT}"
    );
    let keys: Vec<&[u8]> = hashes.iter().map(|hash| &hash[..]).collect();
    let contents = texts.map(str::as_bytes);
    let lengths = texts.map(|text| text.len() as i64);
    let mut params: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(5 * N);
    for ((key, content), length) in keys.iter().zip(&contents).zip(&lengths) {
        params.extend([
            key as &dyn rusqlite::ToSql,
            &MEDIA_JSON,
            length,
            content,
            &now,
        ]);
    }
    let mut put = conn.prepare_cached(&sql)?;
    if conn.holds_writes() {
        // Held to the COMMIT: a conflict is then the `CHECK` failure `conflict_of_held_put`
        // names.
        put.execute_deferred(&params[..])?;
        return Ok(hashes);
    }
    match put.execute(&params[..]) {
        Ok(_) => Ok(hashes),
        Err(error) if is_conflict_marker(&error) => {
            Err(StoreError::plain("Content-addressed blob conflict"))
        }
        Err(error) => Err(error.into()),
    }
}

/// [`put_json`] held back until the transaction's next statement or COMMIT when
/// [`Db::holds_writes`] (a cluster write past its caller's promise), else run now. A conflict
/// then fails the request that carries it with the `CHECK` failure, which the write
/// transaction reports as the put would ([`conflict_of_held_put`]).
pub fn put_json_held(conn: &Db, canonical_text: &str, now: i64) -> Result<BlobHash> {
    if !conn.holds_writes() {
        return put_json(conn, canonical_text, now);
    }
    let hash = sha256(canonical_text.as_bytes());
    conn.prepare_cached(PUT_ONE)?.execute_deferred(params![
        &hash[..],
        MEDIA_JSON,
        canonical_text.len() as i64,
        canonical_text.as_bytes(),
        now
    ])?;
    Ok(hash)
}

/// A write transaction's error as the store reports it: the `CHECK` failure of a put held
/// back ([`put_json_held`]) is the put's conflict. Only a put's upsert writes a negative
/// length (the store writes no other table with that check), so nothing else is renamed.
pub fn conflict_of_held_put(error: StoreError) -> StoreError {
    match &error {
        StoreError::Sqlite { code, message }
            if code == "SQLITE_CONSTRAINT_CHECK" && message.ends_with(CONFLICT_MARKER) =>
        {
            StoreError::plain("Content-addressed blob conflict")
        }
        _ => error,
    }
}

/// The end of SQLite's message for the `CHECK` a conflicting put fails.
const CONFLICT_MARKER: &str = "byte_length >= 0";

/// The upsert clause of a put: see [`put_blob`].
macro_rules! put_conflict {
    () => {
        "ON CONFLICT(blob_hash) DO UPDATE SET byte_length = -1
             WHERE NOT (media_type = excluded.media_type
                        AND byte_length = excluded.byte_length
                        AND content = excluded.content)"
    };
}

/// One put: see [`put_blob`].
const PUT_ONE: &str = concat!(
    "INSERT INTO blobs(blob_hash, media_type, byte_length, content, created_at)
             VALUES (?, ?, ?, ?, ?) ",
    put_conflict!()
);

/// [`put_conflict`] for the multi-row put.
const PUT_CONFLICT: &str = put_conflict!();

/// The `CHECK` failure a conflicting put provokes. An insert never fails it: its length is
/// the content's, never negative.
fn is_conflict_marker(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, Some(message))
            if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_CHECK
                && message.ends_with(CONFLICT_MARKER)
    )
}

/// An `EXISTS` test that the JSON blob [`put_json`] would store is there, identical (the put
/// would then change nothing, as [`put_blob`]'s upsert decides): the statement's parameters
/// `?{hash}`, `?{length}` and `?{content}` hold its hash, length and content. A statement on
/// this condition followed, when it changed nothing, by the put and the statement again,
/// writes what the put then the statement write: in one statement when the blob is there.
pub fn stored_json_test(hash: usize, length: usize, content: usize) -> String {
    format!(
        "EXISTS (SELECT 1 FROM blobs WHERE blob_hash = ?{hash}
           AND media_type = '{MEDIA_JSON}' AND byte_length = ?{length} AND content = ?{content})"
    )
}

/// Stores JSON text that is already canonical.
pub fn put_json(conn: &Db, canonical_text: &str, now: i64) -> Result<BlobHash> {
    put_blob(conn, canonical_text.as_bytes(), MEDIA_JSON, now)
}

/// Stores UTF-8 text (`text/plain`).
pub fn put_text(conn: &Db, text: &str, now: i64) -> Result<BlobHash> {
    put_blob(conn, text.as_bytes(), MEDIA_TEXT, now)
}

/// The blob with this hash, or `None`.
pub fn read_blob(conn: &Db, hash: &[u8]) -> Result<Option<Blob>> {
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
pub fn read_text(conn: &Db, hash: &[u8]) -> Result<Option<String>> {
    Ok(read_content(conn, hash)?.map(|(_, text)| text))
}

/// The stored JSON text of a JSON blob, exactly as stored.
pub fn read_json_text(conn: &Db, hash: &[u8]) -> Result<String> {
    match read_content(conn, hash)? {
        Some((true, text)) => Ok(text),
        _ => Err(StoreError::plain(
            "JSON blob is missing or has the wrong media type",
        )),
    }
}

/// Whether a blob is JSON, and its content as text: read straight from the row, without the
/// copies `read_blob` makes of every column.
fn read_content(conn: &Db, hash: &[u8]) -> Result<Option<(bool, String)>> {
    let content = conn
        .prepare_cached("SELECT media_type, content FROM blobs WHERE blob_hash = ?")?
        .query_row([hash], |row| {
            let is_json =
                matches!(row.get_ref(0)?, ValueRef::Text(media) if media == MEDIA_JSON.as_bytes());
            let text = match row.get_ref(1)? {
                ValueRef::Blob(bytes) | ValueRef::Text(bytes) => {
                    String::from_utf8_lossy(bytes).into_owned()
                }
                _ => String::new(),
            };
            Ok((is_json, text))
        })
        .optional()?;
    Ok(content)
}

/// A JSON blob parsed, with object keys sorted as the reference's `parseJson` sorts them.
pub fn read_json(conn: &Db, hash: &[u8]) -> Result<Value> {
    parse_sorted(&read_json_text(conn, hash)?)
}

fn parse_sorted(text: &str) -> Result<Value> {
    let value = super::json::parse(text)
        .map_err(|error| StoreError::plain(format!("Stored JSON is invalid: {error}")))?;
    Ok(sort_keys(value))
}

/// `read_json` for a list of records whose documents repeat (event payloads such as `{}`):
/// each distinct hash is read and parsed once per list.
pub struct JsonReads<'c> {
    conn: &'c Db,
    stored: Vec<(BlobHash, &'c str)>,
    read: HashMap<Vec<u8>, Value>,
    texts: HashMap<Vec<u8>, String>,
    checked: HashSet<Vec<u8>>,
}

impl<'c> JsonReads<'c> {
    /// Reads through `conn`, nothing read yet.
    pub fn new(conn: &'c Db) -> JsonReads<'c> {
        JsonReads {
            conn,
            stored: Vec::new(),
            read: HashMap::new(),
            texts: HashMap::new(),
            checked: HashSet::new(),
        }
    }

    /// Reads through `conn`, knowing the content of JSON blobs this transaction has just put
    /// (`put_json` returned their hashes): a blob's content never changes under its hash, and
    /// no blob is deleted while the transaction lasts, so reading them back would give the
    /// same text.
    pub fn with_stored(conn: &'c Db, stored: Vec<(BlobHash, &'c str)>) -> JsonReads<'c> {
        JsonReads {
            stored,
            ..JsonReads::new(conn)
        }
    }

    /// `read_json_text`, from the blobs known to be stored when it is one of them.
    fn json_text(&self, hash: &[u8]) -> Result<String> {
        match self.stored.iter().find(|(stored, _)| stored[..] == *hash) {
            Some((_, text)) => Ok((*text).to_owned()),
            None => read_json_text(self.conn, hash),
        }
    }

    /// The connection it reads through.
    pub fn conn(&self) -> &'c Db {
        self.conn
    }

    /// `read_json(hash)`.
    pub fn get(&mut self, hash: &[u8]) -> Result<Value> {
        if let Some(value) = self.read.get(hash) {
            return Ok(value.clone());
        }
        let value = parse_sorted(&self.json_text(hash)?)?;
        self.read.insert(hash.to_vec(), value.clone());
        Ok(value)
    }

    /// Fails as `read_json(hash)` would, without building the value: for a document the
    /// record does not show (a run's definition snapshot without mounts).
    pub fn check(&mut self, hash: &[u8]) -> Result<()> {
        if self.read.contains_key(hash)
            || self.texts.contains_key(hash)
            || self.checked.contains(hash)
        {
            return Ok(());
        }
        let text = self.json_text(hash)?;
        // Plain serde_json refuses a lone surrogate or deep nesting that `read_json`'s own
        // parse accepts: only its verdict counts.
        if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
            super::json::parse(&text)
                .map_err(|error| StoreError::plain(format!("Stored JSON is invalid: {error}")))?;
        }
        self.checked.insert(hash.to_vec());
        Ok(())
    }

    /// `read_json` as JSON text, for records written straight into text: the stored text
    /// itself when its keys are already in order (JSON.parse makes the same value of it),
    /// else the sorted value. Parsed all the same, so invalid JSON fails as `read_json` does.
    pub fn get_text(&mut self, hash: &[u8]) -> Result<String> {
        if let Some(text) = self.texts.get(hash) {
            return Ok(text.clone());
        }
        let text = record_text_of(Cow::Owned(self.json_text(hash)?)).map_err(StoreError::plain)?;
        self.texts.insert(hash.to_vec(), text.clone());
        Ok(text)
    }
}

/// The blob prune where no local file is (a dqlite cluster): the same blobs go as with the
/// file's prune (`state::prune`, whose reads need the file itself) — those whose hash no
/// column with a foreign key to `blobs.blob_hash` holds — through one `DELETE`, in the
/// caller's write transaction. Returns how many went.
///
/// The referenced hashes are one list subquery, which SQLite builds once (a scan of each
/// referencing column) and probes per blob. The referencing columns have no indexes, so a
/// `NOT EXISTS` per column ran a scan of its table for every blob (on SQLite 3.40, the nodes',
/// as on 3.53): 13.8 s on a file of 7,808 blobs and 14,000 events (35 ms this way) — on a
/// dqlite leader, whose loop runs the statement, long enough to lose its leadership, roll the
/// open back and do the same on the next leader. The hash columns are BLOBs of STRICT tables: `NOT IN` compares as `=` did;
/// NULLs are left out of the list (one would make `NOT IN` NULL for every blob).
pub fn prune_through_sql(conn: &Db) -> Result<usize> {
    Ok(conn.prepare(&prune_sql(conn)?)?.execute([])?)
}

/// The `DELETE` of [`prune_through_sql`], for the schema `conn` holds.
fn prune_sql(conn: &Db) -> Result<String> {
    let mut references: Vec<(String, String)> = Vec::new();
    {
        let mut statement = conn.prepare_cached(
            "SELECT m.name, f.\"from\"
             FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'blobs'
               AND f.\"table\" = 'blobs' AND f.\"to\" = 'blob_hash'
             ORDER BY m.rowid, f.id",
        )?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            references.push((row.get(0)?, row.get(1)?));
        }
    }
    let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let referenced: Vec<String> = references
        .iter()
        .map(|(table, column)| {
            let column = quote(column);
            format!(
                "SELECT {column} FROM {} WHERE {column} IS NOT NULL",
                quote(table)
            )
        })
        .collect();
    Ok(match referenced.is_empty() {
        true => "DELETE FROM blobs".to_owned(),
        false => format!(
            "DELETE FROM blobs WHERE blob_hash NOT IN ({})",
            referenced.join(" UNION ALL ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::{prune_sql, prune_through_sql, put_blob, put_json, put_text};
    use crate::sql::Db;
    use crate::state::schema::STATE_SCHEMA_SQL;

    /// The real schema, so the conflict marker is tested against the `CHECK` it relies on.
    fn blobs() -> Db {
        let conn = Db::File(rusqlite::Connection::open_in_memory().unwrap());
        conn.execute_batch(STATE_SCHEMA_SQL).unwrap();
        conn
    }

    type BlobRow = (Vec<u8>, String, i64, Vec<u8>, i64);

    fn rows(conn: &Db) -> Vec<BlobRow> {
        conn.prepare("SELECT * FROM blobs ORDER BY rowid")
            .unwrap()
            .query_map([], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn a_blob_is_stored_once_and_an_identical_put_changes_nothing() {
        let conn = blobs();
        let first = put_json(&conn, r#"{"a":1}"#, 10).unwrap();
        let again = put_json(&conn, r#"{"a":1}"#, 20).unwrap();
        assert_eq!(first, again);
        let stored = rows(&conn);
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].0, first.to_vec());
        assert_eq!(
            (stored[0].1.as_str(), stored[0].2, stored[0].4),
            ("application/json", 7, 10)
        );
        assert_eq!(stored[0].3, br#"{"a":1}"#.to_vec());
    }

    fn is_conflict(result: crate::error::Result<super::BlobHash>) -> bool {
        matches!(result, Err(error) if error.to_string().contains("Content-addressed blob conflict"))
    }

    #[test]
    fn the_same_bytes_under_another_media_type_conflict() {
        let conn = blobs();
        put_text(&conn, "{}", 1).unwrap();
        assert!(is_conflict(put_json(&conn, "{}", 2)));
        assert!(is_conflict(put_blob(&conn, b"{}", "text/markdown", 3)));
        put_text(&conn, "{}", 4).unwrap();
        assert_eq!(rows(&conn).len(), 1);
    }

    #[test]
    fn a_stored_row_that_differs_from_its_hash_conflicts() {
        let conn = blobs();
        let hash = super::sha256(b"right");
        // Another writer's row under the hash of other bytes (or a corrupted one).
        conn.execute(
            "INSERT INTO blobs VALUES (?, 'text/plain', 5, CAST('wrong' AS BLOB), 1)",
            [&hash[..]],
        )
        .unwrap();
        assert!(is_conflict(put_text(&conn, "right", 2)));
        // A row written by another writer with exactly these bytes is accepted as it is.
        let other = super::sha256(b"same");
        conn.execute(
            "INSERT INTO blobs VALUES (?, 'text/plain', 4, CAST('same' AS BLOB), 1)",
            [&other[..]],
        )
        .unwrap();
        assert_eq!(put_text(&conn, "same", 3).unwrap(), other);
        let stored = rows(&conn);
        assert_eq!(stored.len(), 2);
        // The refused put left the conflicting row as it was.
        assert_eq!((stored[0].2, stored[0].3.as_slice()), (5, &b"wrong"[..]));
        assert_eq!(stored[1].4, 1);
    }

    #[test]
    fn the_sql_prune_deletes_the_unreferenced_blobs_and_keeps_the_referenced() {
        let conn = blobs();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let kept = put_json(&conn, r#"{"kept":1}"#, 1).unwrap();
        let gone = put_json(&conn, r#"{"gone":1}"#, 1).unwrap();
        let also_kept = put_json(&conn, r#"{"kept":2}"#, 1).unwrap();
        conn.prepare("INSERT INTO viewer_session_checkpoints VALUES ('r', 1, ?, 0)")
            .unwrap()
            .execute([kept.to_vec()])
            .unwrap();
        // A NULL in a nullable hash column references nothing and must not keep every blob.
        for (queue, hash) in [("q1", None), ("q2", Some(also_kept.to_vec()))] {
            conn.prepare("INSERT INTO controller_queue VALUES (?, 0, 1, 0, ?, 0, 0)")
                .unwrap()
                .execute(rusqlite::params![queue, hash])
                .unwrap();
        }
        assert_eq!(prune_through_sql(&conn).unwrap(), 1);
        let left: Vec<Vec<u8>> = rows(&conn).into_iter().map(|row| row.0).collect();
        assert_eq!(left, vec![kept.to_vec(), also_kept.to_vec()]);
        assert!(!left.contains(&gone.to_vec()));
    }

    #[test]
    fn the_sql_prune_builds_the_referenced_hashes_once_not_per_blob() {
        // A correlated subquery per referencing column scanned its table for every blob (no
        // referencing column is indexed): quadratic, seconds on a dqlite leader.
        let conn = blobs();
        let sql = prune_sql(&conn).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            plan.iter().any(|step| step.starts_with("LIST SUBQUERY")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("CORRELATED")),
            "{plan:?}"
        );
    }
}
