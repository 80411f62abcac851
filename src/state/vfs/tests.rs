//! The shim against plain SQLite: commits seen by other connections, writes per commit, spills,
//! checkpoints, recovery of copied files.

use super::wal_appends::{wal_writes, PUBLISHED_UNWRITTEN};
use super::*;
use rusqlite::{params, Connection, OpenFlags};
use std::path::Path;

use crate::test_support::Scratch;

const FLAGS: OpenFlags = OpenFlags::SQLITE_OPEN_READ_WRITE
    .union(OpenFlags::SQLITE_OPEN_CREATE)
    .union(OpenFlags::SQLITE_OPEN_NO_MUTEX);

fn open_shim(path: &Path, synchronous: &str) -> Connection {
    open_with(path, synchronous, name().expect("registered"))
}

fn open_with(path: &Path, synchronous: &str, vfs: &CStr) -> Connection {
    let conn = Connection::open_with_flags_and_vfs(path, FLAGS, vfs).expect("open with the VFS");
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("busy timeout");
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .expect("WAL");
    conn.pragma_update(None, "synchronous", synchronous)
        .expect("synchronous");
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, tag TEXT, body TEXT);
         CREATE INDEX IF NOT EXISTS items_tag ON items(tag);",
    )
    .expect("schema");
    conn
}

fn open_plain(path: &Path) -> Connection {
    let conn = Connection::open_with_flags(path, FLAGS).expect("open plain");
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("busy timeout");
    conn
}

fn body(seed: i64, length: usize) -> String {
    let unit = format!("{seed:x}-");
    unit.repeat(length / unit.len() + 1)[..length].to_string()
}

/// Inserts rows `first..first + count` (bodies of `length` bytes) in one transaction.
fn insert_rows(conn: &Connection, first: i64, count: i64, length: usize) {
    let tx = conn.unchecked_transaction().expect("begin");
    for id in first..first + count {
        tx.execute(
            "INSERT INTO items(id, tag, body) VALUES (?, ?, ?)",
            params![id, format!("tag-{}", id % 97), body(id, length)],
        )
        .expect("insert");
    }
    tx.commit().expect("commit");
}

/// (rows, total body length, sum of ids) as `conn` sees them.
fn summary(conn: &Connection) -> (i64, i64, i64) {
    conn.query_row(
        "SELECT count(*), coalesce(sum(length(body)), 0), coalesce(sum(id), 0) FROM items",
        [],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )
    .expect("summary")
}

/// Fails if a commit was ever published while its frames were held back (on this thread).
fn assert_no_commit_published_unwritten() {
    assert_eq!(PUBLISHED_UNWRITTEN.with(|count| count.get()), 0);
}

fn integrity(conn: &Connection) -> String {
    assert_no_commit_published_unwritten();
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity_check")
}

/// Copies the database and its WAL (not the wal-index) as a crash would leave them, and
/// opens the copy with the plain VFS, which must recover every commit from the WAL alone.
fn recovered_copy(scratch: &Scratch, path: &Path) -> Connection {
    let copy = scratch.file(&format!(
        "copy-{}.sqlite",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    ));
    std::fs::copy(path, &copy).expect("copy database");
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let mut wal_copy = copy.as_os_str().to_owned();
    wal_copy.push("-wal");
    if Path::new(&wal).exists() {
        std::fs::copy(&wal, &wal_copy).expect("copy WAL");
    }
    open_plain(&copy)
}

#[test]
fn every_commit_is_visible_to_a_plain_connection() {
    let scratch = Scratch::new("visible");
    let path = scratch.file("state.sqlite");
    let writer = open_shim(&path, "FULL");
    let reader = open_plain(&path);
    let mut expected = (0, 0, 0);
    for round in 0..60 {
        let count = 1 + round % 7;
        let first = expected.0 + 1;
        insert_rows(&writer, first, count, 200 + 37 * round as usize);
        expected.0 += count;
        expected.1 += count * (200 + 37 * round);
        expected.2 += (first..first + count).sum::<i64>();
        assert_eq!(summary(&reader), expected, "after commit {round}");
    }
    assert_eq!(summary(&recovered_copy(&scratch, &path)), expected);
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn a_commit_costs_one_real_write_instead_of_two_per_frame() {
    let scratch = Scratch::new("writes");
    let path = scratch.file("state.sqlite");
    let writer = open_shim(&path, "FULL");
    writer
        .query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
        .expect("no checkpoints");
    insert_rows(&writer, 1, 10, 100);
    let (requested_before, real_before) = wal_writes();
    let commits = 30;
    for round in 0..commits {
        // Rows spread over the table and its index: a dozen pages or more per commit.
        insert_rows(&writer, 1000 + round * 100, 20, 1500);
    }
    let requested = wal_writes().0 - requested_before;
    let real = wal_writes().1 - real_before;
    let frames = requested / 2;
    assert!(
        frames >= 8 * commits as u64,
        "{frames} frames for {commits} commits"
    );
    assert_eq!(real, commits as u64, "{requested} writes asked for");
    let reader = open_plain(&path);
    assert_eq!(summary(&reader).0, 10 + 20 * commits);
    assert_no_commit_published_unwritten();
}

#[test]
fn a_transaction_that_spills_the_cache_commits_and_reads_back() {
    let scratch = Scratch::new("spill");
    let path = scratch.file("state.sqlite");
    let writer = open_shim(&path, "FULL");
    writer
        .query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
        .expect("no checkpoints");
    writer
        .pragma_update(None, "cache_size", 10)
        .expect("tiny cache");
    insert_rows(&writer, 1, 100, 300);
    let reader = open_plain(&path);
    let before = summary(&reader);

    let tx = writer.unchecked_transaction().expect("begin");
    for id in 1000..5000 {
        tx.execute(
            "INSERT INTO items(id, tag, body) VALUES (?, ?, ?)",
            params![id, format!("tag-{}", id % 13), body(id, 700)],
        )
        .expect("insert");
    }
    // Reads spilled pages back, then rewrites them: frames overwritten within the
    // transaction, so SQLite rewrites the checksums at commit.
    let seen: i64 = tx
        .query_row("SELECT count(*) FROM items WHERE id >= 1000", [], |row| {
            row.get(0)
        })
        .expect("read back");
    assert_eq!(seen, 4000);
    tx.execute(
        "UPDATE items SET body = body || 'x' WHERE id % 3 = 0 AND id >= 1000",
        [],
    )
    .expect("update");
    assert_eq!(
        summary(&reader),
        before,
        "nothing visible before the commit"
    );
    tx.commit().expect("commit");

    let rewritten = (1000..5000).filter(|id| id % 3 == 0).count() as i64;
    let expected = (
        before.0 + 4000,
        before.1 + 4000 * 700 + rewritten,
        before.2 + (1000..5000).sum::<i64>(),
    );
    assert_eq!(summary(&reader), expected);
    assert_eq!(summary(&writer), expected);
    let copy = recovered_copy(&scratch, &path);
    assert_eq!(summary(&copy), expected);
    assert_eq!(integrity(&copy), "ok");
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn pages_spilled_and_read_back_at_random_stay_current() {
    let scratch = Scratch::new("random");
    let path = scratch.file("state.sqlite");
    let writer = open_shim(&path, "NORMAL");
    writer
        .pragma_update(None, "cache_size", 10)
        .expect("tiny cache");
    let rows = 2000_usize;
    insert_rows(&writer, 0, rows as i64, 500);
    let mut lengths = vec![500_usize; rows];
    let mut seed = 0x2545_f491_u64;
    let mut next = move |bound: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % bound
    };
    let tx = writer.unchecked_transaction().expect("begin");
    for step in 0..6000 {
        let id = next(rows);
        if step % 2 == 0 {
            let length = 100 + next(800);
            tx.execute(
                "UPDATE items SET body = ? WHERE id = ?",
                params![body(step, length), id as i64],
            )
            .expect("update");
            lengths[id] = length;
        } else {
            let length: i64 = tx
                .query_row(
                    "SELECT length(body) FROM items WHERE id = ?",
                    [id as i64],
                    |row| row.get(0),
                )
                .expect("read back");
            assert_eq!(length as usize, lengths[id], "row {id} at step {step}");
        }
    }
    tx.commit().expect("commit");
    let expected_total = lengths.iter().sum::<usize>() as i64;
    let reader = open_plain(&path);
    assert_eq!(summary(&reader).1, expected_total);
    let copy = recovered_copy(&scratch, &path);
    assert_eq!(summary(&copy).1, expected_total);
    assert_eq!(integrity(&copy), "ok");
}

#[test]
fn commits_without_a_sync_are_visible_at_once() {
    for synchronous in ["NORMAL", "OFF"] {
        let scratch = Scratch::new("nosync");
        let path = scratch.file("state.sqlite");
        let writer = open_shim(&path, synchronous);
        let reader = open_plain(&path);
        let mut rows = 0;
        for round in 0..40 {
            insert_rows(&writer, rows + 1, 5, 400 + round * 10);
            rows += 5;
            assert_eq!(summary(&reader).0, rows, "{synchronous} commit {round}");
        }
        // A spilled transaction too, whose checksum rewrite is not followed by a sync.
        writer
            .pragma_update(None, "cache_size", 10)
            .expect("tiny cache");
        let tx = writer.unchecked_transaction().expect("begin");
        for id in 10_000..12_000 {
            tx.execute(
                "INSERT INTO items(id, tag, body) VALUES (?, 'spill', ?)",
                params![id, body(id, 600)],
            )
            .expect("insert");
        }
        tx.execute("UPDATE items SET tag = 'rewritten' WHERE id % 2 = 0", [])
            .expect("update");
        tx.commit().expect("commit");
        rows += 2000;
        assert_eq!(summary(&reader).0, rows, "{synchronous} spilled commit");
        let copy = recovered_copy(&scratch, &path);
        assert_eq!(summary(&copy), summary(&reader), "{synchronous} recovered");
        assert_eq!(integrity(&copy), "ok");
    }
}

#[test]
fn many_transactions_with_checkpoints_and_restarts_stay_intact() {
    let scratch = Scratch::new("checkpoints");
    let path = scratch.file("state.sqlite");
    let writer = open_shim(&path, "FULL");
    writer
        .query_row("PRAGMA wal_autocheckpoint = 25", [], |_| Ok(()))
        .expect("autocheckpoint");
    let reader = open_plain(&path);
    let mut next = 1;
    for round in 0..400_i64 {
        let count = 1 + round % 11;
        insert_rows(&writer, next, count, 100 + (round as usize * 53) % 2500);
        next += count;
        if round % 9 == 0 {
            writer
                .execute("DELETE FROM items WHERE id % 17 = ?", [round % 17])
                .expect("delete");
        }
        if round % 13 == 0 {
            writer
                .execute("UPDATE items SET body = body || 'u' WHERE id % 5 = 0", [])
                .expect("update");
        }
        match round % 50 {
            10 => reader.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())),
            20 => writer.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())),
            30 => writer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())),
            _ => Ok(()),
        }
        .expect("checkpoint");
        if round % 25 == 0 {
            assert_eq!(summary(&reader), summary(&writer), "round {round}");
            assert_eq!(
                summary(&recovered_copy(&scratch, &path)),
                summary(&writer),
                "recovered at round {round}"
            );
        }
    }
    assert_eq!(integrity(&writer), "ok");
    assert_eq!(integrity(&reader), "ok");
    assert_eq!(summary(&reader), summary(&writer));
}

#[test]
fn a_rolled_back_spill_never_lands_on_later_commits() {
    let scratch = Scratch::new("rollback");
    let path = scratch.file("state.sqlite");
    let shim = open_shim(&path, "FULL");
    shim.query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
        .expect("no checkpoints");
    shim.pragma_update(None, "cache_size", 10)
        .expect("tiny cache");
    insert_rows(&shim, 1, 50, 300);
    let other = open_plain(&path);

    for round in 0..5_i64 {
        // An empty log, so that undoing the transaction reads nothing back from it.
        shim.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .expect("checkpoint");
        // A transaction whose frames are spilled (partly still held back), then dropped.
        let tx = shim.unchecked_transaction().expect("begin");
        for id in 0..(300 + round * 50) {
            tx.execute(
                "INSERT INTO items(id, tag, body) VALUES (?, 'gone', ?)",
                params![100_000 + id, body(id, 900)],
            )
            .expect("insert");
        }
        tx.rollback().expect("rollback");
        // Another connection commits more frames than those, over where they were.
        let first = 1000 * (round + 1);
        insert_rows(&other, first, 600, 900);
        // The shim's connection reads (and writes) again.
        assert_eq!(
            shim.query_row("SELECT count(*) FROM items WHERE tag = 'gone'", [], |row| {
                row.get::<_, i64>(0)
            })
            .expect("read"),
            0
        );
        insert_rows(&shim, first + 700, 3, 100);
        assert_eq!(summary(&other), summary(&shim), "round {round}");
    }
    let copy = recovered_copy(&scratch, &path);
    assert_eq!(summary(&copy), summary(&other));
    assert_eq!(integrity(&copy), "ok");
    assert_eq!(integrity(&other), "ok");
}

#[test]
fn switching_journal_modes_closes_and_reopens_the_wal() {
    let scratch = Scratch::new("modes");
    let path = scratch.file("state.sqlite");
    let conn = open_shim(&path, "FULL");
    for round in 0..4 {
        insert_rows(&conn, 1 + round * 100, 20, 500);
        let mode: String = conn
            .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
            .expect("delete mode");
        assert_eq!(mode, "delete");
        insert_rows(&conn, 50 + round * 100, 20, 500);
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .expect("wal mode");
        assert_eq!(mode, "wal");
    }
    drop(conn);
    let reader = open_plain(&path);
    assert_eq!(summary(&reader).0, 160);
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn connections_on_many_threads_share_one_registration() {
    let scratch = Scratch::new("threads");
    let path = scratch.file("state.sqlite");
    drop(open_shim(&path, "FULL"));
    let workers: Vec<_> = (0..4_i64)
        .map(|worker| {
            let path = path.clone();
            std::thread::spawn(move || {
                let conn = open_shim(&path, "NORMAL");
                for round in 0..40 {
                    insert_rows(&conn, worker * 10_000 + round * 10, 5, 700);
                }
                assert_no_commit_published_unwritten();
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    let reader = open_plain(&path);
    assert_eq!(summary(&reader).0, 4 * 40 * 5);
    assert_eq!(integrity(&reader), "ok");
}

/// A commit whose one real write fails is rejected, and stays rejected: nothing of it may reach
/// the WAL afterwards (issue 12: the shim wrote the failed buffer again when the write lock was
/// released, and WAL recovery replayed the rejected commit after a crash).
#[test]
fn a_commit_whose_write_failed_never_reaches_the_wal() {
    for (vfs, label) in [(faults::name(), "plain"), (faults::shim_name(), "shim")] {
        for kind in faults::KINDS {
            let scratch = Scratch::new("rejected");
            let path = scratch.file("state.sqlite");
            let conn = open_with(&path, "FULL", vfs);
            insert_rows(&conn, 1, 3, 100);
            let before = summary(&conn);
            faults::arm(faults::Point::Write, 1, kind);
            let tx = conn.unchecked_transaction().expect("begin");
            tx.execute(
                "INSERT INTO items(id, tag, body) VALUES (100, 'rejected', 'x')",
                [],
            )
            .expect("insert");
            let committed = tx.commit();
            assert!(faults::disarm(), "{label} {kind:?}: the fault fired");
            assert!(committed.is_err(), "{label} {kind:?}: the commit failed");
            assert_eq!(summary(&conn), before, "{label} {kind:?}: live view");
            // The process dies now: only what reached the files counts.
            assert_eq!(
                summary(&recovered_copy(&scratch, &path)),
                before,
                "{label} {kind:?}: after a crash"
            );
            // The connection goes on working, and its next commit is whole.
            insert_rows(&conn, 200, 2, 100);
            let copy = recovered_copy(&scratch, &path);
            assert_eq!(
                summary(&copy),
                summary(&conn),
                "{label} {kind:?}: next commit"
            );
            assert_eq!(integrity(&copy), "ok");
        }
    }
}
