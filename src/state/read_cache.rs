//! Results of whole-table reads (the run list's revision and order), kept while the database
//! provably has not changed, so that a list call need not recompute them over every run.
//!
//! "Unchanged" is SQLite's own data version of the pager (`SQLITE_FCNTL_DATA_VERSION`): it
//! moves on every commit of this connection and whenever a read transaction finds that another
//! connection (in any process) committed. It is read inside the caller's read transaction,
//! after that transaction took its snapshot, so a value computed and a value reused describe
//! the same snapshot contents. The TEMP database's version is part of the key too (a TEMP
//! table could shadow a main one). Inside a transaction the caller opened itself, uncommitted
//! changes are visible that no version reflects: nothing is reused or kept then.

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void, CStr};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{ffi, Connection};

use crate::error::Result;

/// The data versions of `main` and (once it exists) `temp`.
type Version = (u32, Option<u32>);

/// Values computed at one database version, by key.
#[derive(Default)]
pub struct ReadCache {
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    version: Option<Version>,
    entries: HashMap<String, Arc<dyn Any + Send + Sync>>,
}

/// One read transaction's access to the cache (see [`ReadCache::snapshot`]).
pub struct Snapshot<'a> {
    cache: &'a ReadCache,
    /// `None`: the caller's own transaction, where nothing is reused or kept.
    version: Option<Version>,
}

impl ReadCache {
    /// Begins using the cache in the read transaction open on `conn`. `own_transaction`: the
    /// transaction was begun for this read (the connection was in autocommit before), so it
    /// holds no uncommitted changes.
    pub fn snapshot<'a>(
        &'a self,
        conn: &Connection,
        own_transaction: bool,
    ) -> Result<Snapshot<'a>> {
        if !own_transaction {
            return Ok(Snapshot {
                cache: self,
                version: None,
            });
        }
        // Any read takes the snapshot (a deferred BEGIN has not yet), which brings the pager's
        // data version up to date with other connections' commits.
        conn.prepare_cached("PRAGMA main.schema_version")?
            .query_row([], |_| Ok(()))?;
        let version = data_version(conn, c"main").map(|main| (main, data_version(conn, c"temp")));
        let mut state = self.lock();
        if state.version != version {
            state.entries.clear();
            state.version = version;
        }
        Ok(Snapshot {
            cache: self,
            version,
        })
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Snapshot<'_> {
    /// Whether values are reused and kept (not inside the caller's own transaction).
    pub fn is_caching(&self) -> bool {
        self.version.is_some()
    }

    /// The value under `key`, computed by `compute` unless this snapshot's version already has it.
    pub fn get_or_compute<T: Any + Send + Sync>(
        &self,
        key: &str,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        if self.version.is_none() {
            return compute().map(Arc::new);
        }
        if let Some(value) = self.cache.lock().entries.get(key) {
            if let Ok(value) = Arc::clone(value).downcast::<T>() {
                return Ok(value);
            }
        }
        let value = Arc::new(compute()?);
        let mut state = self.cache.lock();
        if state.version == self.version {
            state.entries.insert(key.to_owned(), value.clone());
        }
        Ok(value)
    }
}

/// `SQLITE_FCNTL_DATA_VERSION` of the database `name`; `None` when it is not open.
fn data_version(conn: &Connection, name: &CStr) -> Option<u32> {
    let mut version: c_uint = 0;
    // SAFETY: the handle is open for the borrow of `conn`; the opcode writes one unsigned int.
    let code: c_int = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            name.as_ptr(),
            ffi::SQLITE_FCNTL_DATA_VERSION,
            (&mut version as *mut c_uint).cast::<c_void>(),
        )
    };
    (code == ffi::SQLITE_OK).then_some(version)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::ReadCache;

    fn read<T>(conn: &Connection, read: impl FnOnce() -> T) -> T {
        conn.execute_batch("BEGIN").unwrap();
        let value = read();
        conn.execute_batch("COMMIT").unwrap();
        value
    }

    fn count(cache: &ReadCache, conn: &Connection, computed: &mut u32) -> i64 {
        read(conn, || {
            let snapshot = cache.snapshot(conn, true).unwrap();
            *snapshot
                .get_or_compute("n", || {
                    *computed += 1;
                    Ok(conn.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0))?)
                })
                .unwrap()
        })
    }

    #[test]
    fn recomputes_after_any_commit_from_any_connection() {
        let folder = std::env::temp_dir().join(format!("piw-read-cache-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("cache.sqlite");
        let _ = std::fs::remove_file(&file);
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(x)")
            .unwrap();
        let other = Connection::open(&file).unwrap();
        let cache = ReadCache::default();
        let mut computed = 0;
        assert_eq!(count(&cache, &conn, &mut computed), 0);
        assert_eq!(count(&cache, &conn, &mut computed), 0);
        assert_eq!(computed, 1);
        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        assert_eq!(count(&cache, &conn, &mut computed), 1);
        other.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(count(&cache, &conn, &mut computed), 2);
        assert_eq!(count(&cache, &conn, &mut computed), 2);
        assert_eq!(computed, 3);
        // A TEMP table shadowing the main one.
        conn.execute_batch("CREATE TEMP TABLE t(x); INSERT INTO temp.t VALUES (1), (2), (3)")
            .unwrap();
        assert_eq!(count(&cache, &conn, &mut computed), 3);
        conn.execute("INSERT INTO temp.t VALUES (4)", []).unwrap();
        assert_eq!(count(&cache, &conn, &mut computed), 4);
        // Inside the caller's transaction: computed, never kept.
        conn.execute_batch("BEGIN; DELETE FROM temp.t").unwrap();
        let inside = cache.snapshot(&conn, false).unwrap();
        let fresh = inside
            .get_or_compute("n", || {
                Ok(conn.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0))?)
            })
            .unwrap();
        assert_eq!(*fresh, 0);
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(count(&cache, &conn, &mut computed), 4);
        drop((conn, other));
        let _ = std::fs::remove_dir_all(&folder);
    }
}
