//! The prune's reads, in parts: each referencing table with row ids is split into row id
//! ranges, which the prune's connection and, on a large file, helper connections on threads of
//! their own (one per spare core, see [`helpers`]) take from one queue and read at the same
//! time, striking off one shared set. While the prune's connection loads the blobs (a fifth of
//! the work), the helpers already read parts and keep their values, struck once the set is
//! there.
//!
//! Why a helper reads exactly what the prune's connection would: it is opened while the prune
//! holds the write lock and before the prune has changed anything, so no commit can come
//! between the two connections' snapshots. It is not used when the prune's connection has
//! temporary objects (a temporary table can shadow a table the prune reads, and only that
//! connection sees it). Whatever goes wrong on a helper (it cannot open, is busy, fails a
//! read, panics) is never the prune's error: a part counts as read only once its values are
//! struck, and every part a helper took and did not strike is read again by the prune's
//! connection.
//!
//! Striking is idempotent and order-free (a blob stays if any value equals it), so which
//! connection reads which part, and in which order, changes nothing in the result.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use rusqlite::Connection;

use super::blob_set::{BlobSet, Striker};
use super::scan::{self, quote_identifier, Collected, StrikingConnection, TableScan};
use crate::error::{Result, StoreError};
use crate::state::temp_schema;

/// Below this many pages in the file, every table is one part (and there is no helper): the
/// queries finding the ranges' bounds would cost more than the ranges save.
const SPLIT_FROM_PAGES: i64 = 2_048;

/// Row ids per part of a table (at most [`MOST_PARTS`] parts).
const PART_ROWS: i64 = 8_192;
const MOST_PARTS: i64 = 256;

/// Row ids (of all ranged tables together) per helper: with fewer, opening one costs more
/// than it saves.
const ROWS_PER_HELPER: i64 = 32_768;

/// Helpers at most, whatever the cores: each is a connection and a thread for the prune's
/// duration, and the reads of four already take a core each.
const MOST_HELPERS: usize = 3;

/// How many helpers to read `rows` row ids with: one per spare core, up to [`MOST_HELPERS`].
fn helpers(rows: i64) -> usize {
    let spare = std::thread::available_parallelism().map_or(0, |cores| cores.get() - 1);
    let worth = usize::try_from(rows / ROWS_PER_HELPER).unwrap_or(0);
    spare.min(worth).min(MOST_HELPERS)
}

/// Rows of table `scan` (of the scan list) to read: those in `range`, or all.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Part {
    scan: usize,
    range: Option<(i64, i64)>,
}

/// The set of the file's blobs with those `tables` refer to struck off: it loads the blobs,
/// strikes what the newest rows of the tables read newest first refer to, then every table in
/// full, in parts, in this order, until the set is empty. Each helper thread calls
/// `open_helper` for its connection to the same file, and reads parts while the prune's
/// connection loads the blobs, keeping their values until the set is there to strike them off.
pub fn unreferenced(
    conn: &Connection,
    tables: &[TableScan],
    open_helper: impl Fn() -> Option<Connection> + Sync,
) -> Result<BlobSet> {
    let (parts, rows) = parts(conn, tables)?;
    let helpers = if tables.is_empty() || temp_schema::is_used(conn)? {
        0
    } else {
        helpers(rows)
    };
    let queue = Queue {
        read: parts.iter().map(|_| AtomicBool::new(false)).collect(),
        parts,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };
    let loaded = OnceLock::new();
    std::thread::scope(|scope| {
        let helping: Vec<_> = (0..helpers)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("piw-prune-helper".into())
                    .spawn_scoped(scope, || {
                        if let Some(helper) = open_helper() {
                            help(helper, &loaded, tables, &queue);
                        }
                    })
                    .ok()
            })
            .collect();
        let mine = (|| {
            let set = loaded.get_or_init(|| scan::load(conn));
            let set = set.as_ref().map_err(Clone::clone)?;
            let mut striking = StrikingConnection::new(conn)?;
            let mut striker = Striker::new(set);
            // A blob only such a table refers to is most often one of its newest rows.
            for scan in tables.iter().filter(|scan| scan.newest_first) {
                if set.is_empty() {
                    break;
                }
                striking.newest_rows(&mut striker, scan)?;
            }
            queue.read(&mut striking, &mut striker, set, tables)
        })();
        if mine.is_err() {
            queue.stop.store(true, Relaxed);
        }
        for thread in helping {
            // A panic of a helper is one more way for it to leave a part unread.
            let _ = thread.join();
        }
        mine
    })?;
    let set = loaded
        .into_inner()
        .ok_or_else(|| StoreError::plain("The blob prune did not load the blobs"))??;
    if !set.is_empty() && queue.read.iter().any(|read| !read.load(Relaxed)) {
        read_unread_parts(conn, &set, tables, &queue)?;
    }
    Ok(set)
}

/// Reads what a helper took and did not strike (it failed, or panicked).
fn read_unread_parts(
    conn: &Connection,
    set: &BlobSet,
    tables: &[TableScan],
    queue: &Queue,
) -> Result<()> {
    let mut striking = StrikingConnection::new(conn)?;
    let mut striker = Striker::new(set);
    for (part, read) in queue.parts.iter().zip(&queue.read) {
        if set.is_empty() {
            break;
        }
        if !read.load(Relaxed) {
            striking.part(&mut striker, tables, part.scan, part.range)?;
        }
    }
    Ok(())
}

/// The parts of `tables` in reading order, and how many row ids the ranged ones span.
fn parts(conn: &Connection, tables: &[TableScan]) -> Result<(Vec<Part>, i64)> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |row| row.get(0))?;
    let in_ranges = pages >= SPLIT_FROM_PAGES;
    let mut parts = Vec::new();
    let mut rows = 0i64;
    for (scan, table) in tables.iter().enumerate() {
        let bounds: (Option<i64>, Option<i64>) = if table.ranged && in_ranges {
            // Two subqueries: min and max in one aggregate read the whole table.
            let name = quote_identifier(&table.table);
            let sql =
                format!("SELECT (SELECT min(rowid) FROM {name}), (SELECT max(rowid) FROM {name})");
            conn.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?)))?
        } else {
            (None, None)
        };
        let (Some(low), Some(high)) = bounds else {
            parts.push(Part { scan, range: None });
            continue;
        };
        let ranges = split(low, high);
        rows = rows.saturating_add(high.saturating_sub(low));
        let table_parts = ranges.into_iter().map(|range| Part {
            scan,
            range: Some(range),
        });
        if table.newest_first {
            parts.extend(table_parts.rev());
        } else {
            parts.extend(table_parts);
        }
    }
    Ok((parts, rows))
}

/// `low..=high` in ascending ranges of about [`PART_ROWS`] row ids, at most [`MOST_PARTS`].
fn split(low: i64, high: i64) -> Vec<(i64, i64)> {
    let span = i128::from(high) - i128::from(low) + 1;
    let count = (span + i128::from(PART_ROWS) - 1) / i128::from(PART_ROWS);
    let count = count.clamp(1, i128::from(MOST_PARTS));
    let size = (span + count - 1) / count;
    let bound = |index: i128| (i128::from(low) + index * size).min(i128::from(high) + 1);
    (0..count)
        .map(|index| (bound(index), bound(index + 1) - 1))
        .filter(|(start, end)| start <= end)
        // Every bound is within low..=high (+1 before the subtraction): it fits an i64.
        .map(|(start, end)| (start as i64, end as i64))
        .collect()
}

/// The parts, taken one by one by whichever connection is free.
struct Queue {
    parts: Vec<Part>,
    /// Per part, whether its values are struck (it was read to its end, or to the set's
    /// emptying).
    read: Vec<AtomicBool>,
    next: AtomicUsize,
    /// Set when the prune's connection failed: the helpers stop too.
    stop: AtomicBool,
}

impl Queue {
    /// Reads parts until none is left, the set is empty or the prune's connection failed.
    fn read(
        &self,
        striking: &mut StrikingConnection<'_>,
        striker: &mut Striker<'_>,
        set: &BlobSet,
        tables: &[TableScan],
    ) -> Result<()> {
        while !set.is_empty() && !self.stop.load(Relaxed) {
            let Some((index, part)) = self.take() else {
                break;
            };
            striking.part(striker, tables, part.scan, part.range)?;
            self.read[index].store(true, Relaxed);
        }
        Ok(())
    }

    /// The next part nobody took, with its index.
    fn take(&self) -> Option<(usize, Part)> {
        let index = self.next.fetch_add(1, Relaxed);
        self.parts.get(index).map(|part| (index, *part))
    }
}

/// Values a helper may keep while the blobs load (32 MiB of hashes), before it waits.
const MOST_COLLECTED: usize = 1 << 20;

/// The helper's share of the queue, in a read transaction of its own: until the set is loaded,
/// parts whose values it keeps, then parts it strikes. A part counts as read once its values
/// are struck. Its errors end its share and are dropped: see the module comment.
fn help(
    helper: Connection,
    loaded: &OnceLock<Result<BlobSet>>,
    tables: &[TableScan],
    queue: &Queue,
) {
    if helper.execute_batch("BEGIN").is_err() {
        return;
    }
    if let Ok(mut striking) = StrikingConnection::new(&helper) {
        let mut collected = Collected::default();
        let mut collected_parts = Vec::new();
        let mut queue_empty = false;
        // Until the prune's connection has loaded the blobs.
        let set = loop {
            if queue.stop.load(Relaxed) {
                break None;
            }
            if let Some(set) = loaded.get() {
                break set.as_ref().ok();
            }
            if queue_empty || collected.len() >= MOST_COLLECTED {
                std::thread::yield_now();
                continue;
            }
            let Some((index, part)) = queue.take() else {
                queue_empty = true;
                continue;
            };
            if striking
                .collect_part(&mut collected, tables, part.scan, part.range)
                .is_err()
            {
                break None;
            }
            collected_parts.push(index);
        };
        if let Some(set) = set {
            let mut striker = Striker::new(set);
            collected.strike_into(&mut striker);
            for index in collected_parts {
                queue.read[index].store(true, Relaxed);
            }
            let _ = queue.read(&mut striking, &mut striker, set, tables);
        }
    }
    let _ = helper.execute_batch("ROLLBACK");
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_a_range_into_parts_covering_it_once() {
        for (low, high) in [
            (1, 1),
            (1, 8_192),
            (1, 8_193),
            (-5, 100_000),
            (i64::MIN, i64::MAX),
            (i64::MAX - 3, i64::MAX),
            (7, 2_000_007),
        ] {
            let parts = split(low, high);
            assert!(!parts.is_empty() && parts.len() <= 256, "{low}..={high}");
            assert_eq!(parts[0].0, low);
            assert_eq!(parts.last().unwrap().1, high);
            for pair in parts.windows(2) {
                assert_eq!(pair[0].1.checked_add(1), Some(pair[1].0), "{low}..={high}");
            }
            assert!(parts.iter().all(|(start, end)| start <= end));
        }
    }
}
