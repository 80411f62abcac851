//! The index against the SQL it replaces, after every step of random histories of raw SQL on
//! the mirrored tables: equal timestamps, deletions (cascading or behind foreign keys' back),
//! REPLACE victims, truncations, rowid changes, VACUUM, rolled-back writes, another
//! connection's commits (journaled or not) and TEMP shadowing.

use rusqlite::{params, Connection};

use super::RunIndex;
use crate::state::schema::STATE_SCHEMA_SQL;
use crate::test_support::Scratch;

const PROJECTS: [Option<&str>; 3] = [Some("p1"), Some("p2"), None];
const QUEUE_STATUSES: [&str; 7] = [
    "queued",
    "starting",
    "running",
    "parked",
    "done",
    "failed",
    "cancelled",
];
const RUN_STATUSES: [&str; 7] = [
    "queued",
    "running",
    "waiting",
    "completed",
    "failed",
    "timed_out",
    "cancelled",
];
const SELECT_FROM: &str =
    "FROM runs r JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id
    JOIN leases l ON l.resource_id = r.resource_id";

/// A small deterministic generator (xorshift).
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

fn open_reader(file: &std::path::Path) -> Option<Connection> {
    Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()
}

fn open(file: &std::path::Path) -> Connection {
    let conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON")
        .unwrap();
    conn
}

fn setup(conn: &Connection) {
    conn.execute_batch(STATE_SCHEMA_SQL).unwrap();
    conn.execute_batch(
        "INSERT INTO blobs VALUES (zeroblob(32), 'x', 0, x'', 0);
         INSERT INTO projects VALUES ('p1', '/p1', 0), ('p2', '/p2', 0);
         INSERT INTO workflow_definitions VALUES (randomblob(32), 'w', zeroblob(32), 0);",
    )
    .unwrap();
}

/// Adds run `n` with every component row (`definition`: use the existing one, else a digest
/// with no definition row).
fn add_run(conn: &Connection, random: &mut Random, n: u64, definition: bool) {
    let run_id = format!("run-{n}");
    let resource = format!("res-{n}");
    let project = random.pick(&PROJECTS);
    let at = random.below(4) as i64;
    let digest_sql = if definition {
        "(SELECT definition_digest FROM workflow_definitions LIMIT 1)"
    } else {
        "randomblob(32)"
    };
    conn.execute(
        "INSERT INTO resources VALUES (?, 'run', ?, ?, 0, 0)",
        params![resource, resource, random.below(3) as i64],
    )
    .unwrap();
    conn.execute("INSERT INTO leases(resource_id) VALUES (?)", [&resource])
        .unwrap();
    conn.execute(
        &format!(
            "INSERT INTO runs(run_id, resource_id, project_id, root_run_id, definition_digest,
               workflow_ref, launch_options_hash, status, input_hash, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?1, {digest_sql}, 'w', zeroblob(32), 'queued', zeroblob(32), ?4, 0)"
        ),
        params![run_id, resource, project, random.below(3) as i64],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO run_queue(run_id, status, available_at, origin_session_id, created_at,
           updated_at) VALUES (?, 'queued', ?, ?, ?, ?)",
        params![run_id, at, format!("s-{n}"), at, at],
    )
    .unwrap();
    if random.below(4) != 0 {
        let mode = random.pick(&["interactive", "headless"]);
        conn.execute(
            "INSERT INTO run_bindings VALUES (?, ?, ?, 0)",
            params![run_id, format!("s-{n}"), mode],
        )
        .unwrap();
    }
}

/// One random change through raw SQL on `conn` (or `other`, another connection).
fn step(conn: &Connection, other: &Connection, random: &mut Random, n: &mut u64) {
    let case = random.below(20);
    step_case(conn, other, random, n, case);
}

/// The steps that run inside a caller's transaction (no BEGIN, VACUUM or foreign-key switch).
const IN_TRANSACTION: [u64; 15] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 15, 16, 17];

fn step_case(conn: &Connection, other: &Connection, random: &mut Random, n: &mut u64, case: u64) {
    let any = "(SELECT rowid FROM runs ORDER BY random() LIMIT 1)";
    let at = random.below(4) as i64;
    match case {
        0..=2 => {
            *n += 1;
            add_run(conn, random, *n, true);
        }
        3 => {
            let status = random.pick(&QUEUE_STATUSES);
            let error = random.pick(&[None, Some("workflowSourceChanged"), Some("other")]);
            let affinity = random.pick(&[None, None, Some("host-1"), Some("other")]);
            conn.execute(
                &format!(
                    "UPDATE OR IGNORE run_queue SET status = ?, created_at = ?, updated_at = ?,
                       available_at = ?, error_code = ?, affinity_runner_id = ?
                     WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any})"
                ),
                params![status, at, random.below(5) as i64, at, error, affinity],
            )
            .unwrap();
        }
        4 => {
            conn.execute_batch(&format!(
                "UPDATE resources SET revision = revision + 1
                 WHERE resource_id = (SELECT resource_id FROM runs WHERE rowid = {any})"
            ))
            .unwrap();
        }
        5 => {
            let owner = random.pick(&[None, Some("host-1"), Some("other")]);
            let sql = match owner {
                None => {
                    "UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                           acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL"
                }
                Some(_) => {
                    "UPDATE leases SET owner_type = 'host', owner_id = ?1,
                              token_hash = zeroblob(32), acquired_at = 0, heartbeat_at = 0,
                              expires_at = ?2"
                }
            };
            let sql = format!(
                "{sql} WHERE resource_id = (SELECT resource_id FROM runs WHERE rowid = {any})"
            );
            match owner {
                None => conn.execute(&sql, []),
                Some(owner) => conn.execute(&sql, params![owner, random.below(10) as i64]),
            }
            .unwrap();
        }
        6 => {
            let mode = random.pick(&["interactive", "headless"]);
            conn.execute(
                &format!(
                    "UPDATE run_bindings SET execution_mode = ?
                     WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any})"
                ),
                [mode],
            )
            .unwrap();
        }
        7 => {
            let status = random.pick(&RUN_STATUSES);
            let finished = matches!(status, "queued" | "running")
                .then_some(())
                .is_none();
            conn.execute(
                &format!(
                    "UPDATE runs SET status = ?, paused = ?, finished_at = ?, created_at = ?
                     WHERE rowid = {any}"
                ),
                params![
                    status,
                    random.below(2) as i64,
                    finished.then_some(1_i64),
                    at
                ],
            )
            .unwrap();
        }
        8 => {
            // Cascading deletes (a run's resource, or the run itself), and a component row alone.
            let sql = match random.below(5) {
                2 => format!("DELETE FROM leases WHERE rowid = {any}"),
                3 => format!(
                    "DELETE FROM run_bindings WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any})"
                ),
                4 => format!(
                    "DELETE FROM run_queue WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any})"
                ),
                0 => format!(
                    "DELETE FROM resources
                     WHERE resource_id = (SELECT resource_id FROM runs WHERE rowid = {any})"
                ),
                _ => format!("DELETE FROM runs WHERE rowid = {any}"),
            };
            conn.execute_batch(&sql).unwrap();
        }
        9 => {
            // Behind the foreign keys' back: an orphaned run, or a whole table truncated.
            let sql = match random.below(3) {
                0 => format!(
                    "DELETE FROM run_queue WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any})"
                ),
                1 => "DELETE FROM run_bindings".to_owned(),
                _ => format!("DELETE FROM leases WHERE rowid = {any}"),
            };
            conn.execute_batch(&format!(
                "PRAGMA foreign_keys = OFF; {sql}; PRAGMA foreign_keys = ON"
            ))
            .unwrap();
        }
        10 => {
            // REPLACE victims: the same run id, or another run's active session.
            let sql = match random.below(2) {
                0 => format!(
                    "INSERT OR REPLACE INTO run_queue(run_id, status, available_at,
                       origin_session_id, created_at, updated_at)
                     SELECT run_id, 'running', 1, 'fresh-' || rowid, 2, 3 FROM runs WHERE rowid = {any}"
                ),
                _ => format!(
                    "REPLACE INTO run_queue(run_id, status, available_at, origin_session_id,
                       created_at, updated_at)
                     SELECT r.run_id, 'queued', 0, (SELECT origin_session_id FROM run_queue
                       WHERE status IN ('queued', 'starting', 'running') LIMIT 1), 0, 0
                     FROM runs r WHERE r.rowid = {any}"
                ),
            };
            let _ = conn.execute_batch(&sql);
        }
        11 => {
            conn.execute_batch(&format!(
                "BEGIN; DELETE FROM runs WHERE rowid = {any};
                 UPDATE run_queue SET created_at = 9; ROLLBACK"
            ))
            .unwrap();
        }
        12 => {
            other
                .execute_batch(&format!(
                    "UPDATE run_queue SET created_at = {at}, status = 'parked'
                     WHERE rowid = (SELECT rowid FROM run_queue ORDER BY random() LIMIT 1)"
                ))
                .unwrap();
        }
        13 => {
            // A run whose definition arrives later (foreign keys off), then its definition.
            *n += 1;
            conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
            add_run(conn, random, *n, false);
            conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
        }
        15 => {
            conn.execute_batch(
                "INSERT OR IGNORE INTO workflow_definitions
                 SELECT DISTINCT r.definition_digest, 'w', zeroblob(32), 0 FROM runs r",
            )
            .unwrap();
        }
        17 => {
            // A run moved to another rowid (the update reports both).
            let target = random.pick(&[conn, other]);
            target
                .execute_batch(&format!(
                    "UPDATE runs SET rowid = (SELECT max(rowid) FROM runs) + 1000 WHERE rowid = {any}"
                ))
                .unwrap();
        }
        19 => {
            // One transaction: a run's own row and other runs' queue and lease rows (their
            // keys are dropped only where they name the run whose row was written).
            let status = random.pick(&QUEUE_STATUSES);
            random
                .pick(&[conn, other])
                .execute_batch(&format!(
                    "BEGIN;
                     UPDATE runs SET paused = 1 - paused WHERE rowid = {any};
                     UPDATE OR IGNORE run_queue SET status = '{status}', updated_at = updated_at + 1
                       WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any});
                     UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                       acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
                       WHERE resource_id = (SELECT resource_id FROM runs WHERE rowid = {any});
                     COMMIT"
                ))
                .unwrap();
        }
        18 if random.below(4) == 0 => {
            // Renumbers the rowids of tables without an INTEGER PRIMARY KEY.
            random.pick(&[conn, other]).execute_batch("VACUUM").unwrap();
        }
        14 => {
            // A failing statement: its changes are undone.
            let _ = conn.execute_batch("UPDATE run_queue SET consecutive_errors = -1");
        }
        _ => {
            conn.execute_batch(&format!(
                "UPDATE run_queue SET updated_at = updated_at + 1
                 WHERE run_id = (SELECT run_id FROM runs WHERE rowid = {any})"
            ))
            .unwrap();
        }
    }
}

fn rowids(conn: &Connection, sql: &str, values: &[&dyn rusqlite::ToSql]) -> Vec<i64> {
    conn.prepare(sql)
        .unwrap()
        .query_map(values, |row| row.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Compares every answer of the index with its SQL, in one read transaction.
fn check(conn: &Connection, index: &RunIndex, step: usize) {
    conn.execute_batch("BEGIN").unwrap();
    // A small file: the index is built in the poll when it cannot catch up.
    let current = index
        .current(conn, true)
        .unwrap()
        .unwrap_or_else(|| panic!("step {step}: the index is not used"));
    let revision = current.list_revision().unwrap();
    let expected = conn
        .query_row(
            "SELECT count(*), COALESCE(sum(res.revision), 0), COALESCE(max(q.updated_at), 0)
             FROM runs r JOIN run_queue q ON q.run_id = r.run_id
             JOIN resources res ON res.resource_id = r.resource_id",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (revision.count, revision.revision_sum, revision.updated_at),
        expected,
        "step {step}: revision"
    );
    let views = rowids(
        conn,
        "SELECT r.rowid FROM runs r
         JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
         JOIN run_queue q ON q.run_id = r.run_id ORDER BY q.created_at DESC, r.rowid",
        &[],
    );
    assert_eq!(
        current.view_page(0, usize::MAX),
        views,
        "step {step}: views"
    );
    assert_eq!(
        current.view_page(2, 3),
        views.iter().skip(2).take(3).copied().collect::<Vec<_>>()
    );
    let status_sets: [&[&str]; 4] = [
        &["queued", "parked", "starting", "running"],
        &["parked"],
        &["done", "queued", "nope"],
        &["running", "queued"],
    ];
    for project in [Some("p1"), None] {
        let (scope, order) = match project {
            Some(_) => (
                "r.project_id = ?1",
                "q.created_at DESC, r.created_at DESC, r.rowid",
            ),
            None => ("?1 IS NULL", "q.created_at DESC, r.rowid"),
        };
        let all = rowids(
            conn,
            &format!("SELECT r.rowid {SELECT_FROM} WHERE {scope} ORDER BY {order}"),
            &[&project],
        );
        assert_eq!(current.list_page(project, None, None), all, "step {step}");
        assert_eq!(
            current.list_page(project, None, Some(3)),
            all[..all.len().min(3)]
        );
        for statuses in status_sets {
            let marks = vec!["?"; statuses.len()].join(", ");
            let order = match project {
                Some(_) => order,
                None => "q.created_at DESC, q.status, q.available_at, q.rowid",
            };
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&project];
            values.extend(statuses.iter().map(|s| s as &dyn rusqlite::ToSql));
            let expected = rowids(
                conn,
                &format!(
                    "SELECT r.rowid {SELECT_FROM} WHERE {scope} AND q.status IN ({marks})
                     ORDER BY {order}"
                ),
                &values,
            );
            let texts: Vec<&[u8]> = statuses.iter().map(|s| s.as_bytes()).collect();
            for limit in [Some(2), None] {
                let want = &expected[..expected.len().min(limit.unwrap_or(usize::MAX))];
                assert_eq!(
                    current.list_page(project, Some(&texts), limit),
                    want,
                    "step {step}: {project:?} {statuses:?} {limit:?}"
                );
            }
        }
        // Every run the host claim can pick is a candidate.
        for (runner, now) in [(Some("host-1"), 5_i64), (Some("other"), 2), (None, 0)] {
            let claimable = rowids(
                conn,
                &format!(
                    "SELECT r.rowid {SELECT_FROM} WHERE {} q.status IN ('queued', 'parked', 'starting', 'running')
                       AND q.available_at <= ?1
                       AND (l.owner_id IS NULL OR l.expires_at <= ?1 OR l.owner_id = ?2)
                       AND (q.affinity_runner_id IS NULL OR q.affinity_runner_id = ?2
                         OR q.status IN ('parked', 'starting', 'running'))
                       AND NOT (q.status = 'parked' AND (r.status = 'waiting' OR r.paused = 1))
                       AND (q.error_code IS NULL OR q.error_code <> 'workflowSourceChanged')
                       AND (b.execution_mode = 'headless' OR q.status <> 'queued')",
                    if project.is_some() { "r.project_id = ?3 AND" } else { "?3 IS NULL AND" }
                ),
                &[&(now as f64), &runner.unwrap_or("host-1"), &project],
            );
            let candidates = current.host_candidates(project, runner, now);
            for rowid in claimable {
                assert!(candidates.contains(&rowid), "step {step}: {rowid} missing");
            }
        }
    }
    drop(current);
    conn.execute_batch("COMMIT").unwrap();
}

fn installed(conn: &Connection, file: &std::path::Path) -> RunIndex {
    let index = RunIndex::install(conn, false, file, true, open_reader);
    index.schema_verified(conn, None).unwrap();
    index
}

#[test]
fn answers_as_the_sql_after_every_step_of_random_histories() {
    let scratch = Scratch::new("run-index");
    for seed in 1..=8_u64 {
        let file = scratch.file(&format!("state-{seed}.sqlite"));
        // Declared before their connections, so dropped after them (the hooks point into
        // them), a failing assertion included.
        let (index, other_index);
        let conn = open(&file);
        setup(&conn);
        let other = open(&file);
        // Odd seeds: the other connection is a native one, whose commits are journaled.
        other_index = (!seed.is_multiple_of(2)).then(|| installed(&other, &file));
        index = installed(&conn, &file);
        let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut n = 0;
        for _ in 0..8 {
            n += 1;
            add_run(&conn, &mut random, n, true);
        }
        for number in 0..200 {
            step(&conn, &other, &mut random, &mut n);
            check(&conn, &index, number);
        }
        drop((other, other_index));
        drop(conn);
    }
}

/// A file past the size the poll builds in: `runs` runs.
fn large_file(scratch: &Scratch, runs: u64) -> (std::path::PathBuf, Connection) {
    let file = scratch.file("large.sqlite");
    let conn = open(&file);
    setup(&conn);
    let mut random = Random(7);
    conn.execute_batch("BEGIN").unwrap();
    for n in 1..=runs {
        add_run(&conn, &mut random, n, true);
    }
    conn.execute_batch("COMMIT").unwrap();
    (file, conn)
}

/// A connection with its index (closed before the index goes: the hooks point into it).
struct Indexed {
    conn: Connection,
    index: RunIndex,
}

impl Indexed {
    fn open(file: &std::path::Path) -> Indexed {
        let conn = open(file);
        let index = installed(&conn, file);
        Indexed { conn, index }
    }
}

/// A large file (`runs` runs) whose index is built: the first poll reads through SQL while the
/// index is built off the caller's path.
fn built_large_file(scratch: &Scratch, runs: u64) -> (std::path::PathBuf, Indexed) {
    let (file, conn) = large_file(scratch, runs);
    let index = installed(&conn, &file);
    assert!(!poll(&conn, &index));
    poll_until_used(&conn, &index);
    (file, Indexed { conn, index })
}

fn poll(conn: &Connection, index: &RunIndex) -> bool {
    conn.execute_batch("BEGIN").unwrap();
    let used = index.current(conn, true).unwrap().is_some();
    conn.execute_batch("COMMIT").unwrap();
    used
}

/// Polls until a background build has been taken (bounded).
fn poll_until_used(conn: &Connection, index: &RunIndex) {
    for _ in 0..2_000 {
        if poll(conn, index) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the background build never finished");
}

#[test]
fn another_native_writers_commits_are_caught_up_on_without_a_build() {
    let scratch = Scratch::new("run-index-journal");
    let (file, reader) = built_large_file(&scratch, super::SYNC_BUILD_RUNS as u64 + 200);
    let Indexed { conn, index } = &reader;
    let writer = Indexed::open(&file);
    let mut random = Random(11);
    let mut n = 10_000;
    let mut caught_up = 0;
    for number in 0..60 {
        step(&writer.conn, &writer.conn, &mut random, &mut n);
        // VACUUM and definition changes need a build; every other commit is caught up on.
        let builds = index.builds();
        if !poll(conn, index) {
            poll_until_used(conn, index);
        } else {
            assert_eq!(
                index.builds(),
                builds,
                "step {number}: caught up, not built"
            );
            caught_up += 1;
        }
        check(conn, index, number);
    }
    assert!(
        caught_up >= 40,
        "only {caught_up} of 60 commits caught up on"
    );
    // A writer without hooks (another application): a gap, answered by a build.
    let foreign = open(&file);
    foreign
        .execute_batch("UPDATE resources SET revision = revision + 1")
        .unwrap();
    assert!(!poll(conn, index));
    poll_until_used(conn, index);
    check(conn, index, 1_000);
    drop((writer, foreign));
}

#[test]
fn a_rowid_change_on_the_own_connection_leaves_no_ghost() {
    let scratch = Scratch::new("run-index-rowid");
    let file = scratch.file("state.sqlite");
    let index;
    let conn = open(&file);
    setup(&conn);
    index = installed(&conn, &file);
    let mut random = Random(3);
    for n in 1..=6 {
        add_run(&conn, &mut random, n, true);
    }
    check(&conn, &index, 0);
    conn.execute_batch("UPDATE runs SET rowid = rowid + 1000 WHERE run_id = 'run-5'")
        .unwrap();
    check(&conn, &index, 1);
}

#[test]
fn falls_back_to_sql_where_it_cannot_be_exact() {
    let scratch = Scratch::new("run-index-fallback");
    let file = scratch.file("state.sqlite");
    let index;
    let conn = open(&file);
    setup(&conn);
    index = RunIndex::install(&conn, false, &file, true, open_reader);
    let used = |conn: &Connection, own: bool| {
        conn.execute_batch("BEGIN").unwrap();
        let used = index.current(conn, own).unwrap().is_some();
        conn.execute_batch("COMMIT").unwrap();
        used
    };
    // Before the open verified the schema, and inside the caller's own transaction.
    assert!(!used(&conn, true));
    index.schema_verified(&conn, None).unwrap();
    assert!(used(&conn, true));
    assert!(!used(&conn, false));
    // A TEMP object could shadow a main table.
    conn.execute_batch("CREATE TEMP TABLE runs(x)").unwrap();
    assert!(!used(&conn, true));
    conn.execute_batch("DROP TABLE temp.runs").unwrap();
    assert!(used(&conn, true));
    // A schema change: built again for the new schema.
    let builds = index.builds();
    conn.execute_batch("CREATE TABLE extra(x)").unwrap();
    assert!(used(&conn, true));
    assert_eq!(index.builds(), builds + 1);
    // Outside WAL mode there is no position to anchor the index to.
    conn.execute_batch("PRAGMA journal_mode = DELETE").unwrap();
    assert!(!used(&conn, true));
    conn.execute_batch("PRAGMA journal_mode = WAL").unwrap();
    assert!(used(&conn, true));
    // While statements are recorded, nothing is installed.
    let recording = RunIndex::install(&conn, true, &file, true, open_reader);
    recording.schema_verified(&conn, None).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    assert!(recording.current(&conn, true).unwrap().is_none());
    conn.execute_batch("COMMIT").unwrap();
}

#[test]
fn the_open_prunes_commit_is_caught_up_on_not_a_gap() {
    let scratch = Scratch::new("run-index-prune");
    let file = scratch.file("state.sqlite");
    drop(crate::test_support::open_read_write(&file, 0));
    let index;
    let conn = open(&file);
    conn.execute_batch(
        "INSERT INTO blobs VALUES (zeroblob(32), 'x', 0, x'', 0);
         INSERT INTO projects VALUES ('p1', '/p1', 0), ('p2', '/p2', 0);
         INSERT INTO workflow_definitions VALUES (randomblob(32), 'w', zeroblob(32), 0);",
    )
    .unwrap();
    let mut random = Random(5);
    conn.execute_batch("BEGIN").unwrap();
    for n in 1..=super::SYNC_BUILD_RUNS as u64 + 100 {
        add_run(&conn, &mut random, n, true);
    }
    conn.execute_batch("COMMIT").unwrap();
    index = installed(&conn, &file);
    poll_until_used(&conn, &index);
    // A blob nothing refers to: the next read-write open's prune deletes it and commits.
    conn.execute_batch("INSERT INTO blobs VALUES (randomblob(32), 'x', 0, x'', 0)")
        .unwrap();
    assert!(poll(&conn, &index));
    let builds = index.builds();
    let other = crate::test_support::open_read_write(&file, 0);
    other.conn().unwrap();
    let blobs: i64 = conn
        .query_row("SELECT count(*) FROM blobs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(blobs, 1, "the prune ran");
    assert!(poll(&conn, &index), "the prune's commit was a gap");
    assert_eq!(index.builds(), builds);
    check(&conn, &index, 0);
    drop(other);
}

#[test]
fn the_journal_goes_with_the_files_last_connection() {
    let scratch = Scratch::new("run-index-journal-file");
    let file = scratch.file("state.sqlite");
    let journal = scratch.file("state.sqlite-runlog");
    let mut first = crate::test_support::open_read_write(&file, 0);
    let mut second = crate::test_support::open_read_write(&file, 0);
    second
        .write(|conn| Ok(conn.execute_batch("INSERT INTO projects VALUES ('p', '/p', 0)")?))
        .unwrap();
    assert!(journal.exists(), "a native commit writes the journal");
    second.close().unwrap();
    assert!(journal.exists(), "another connection is still open");
    first.close().unwrap();
    assert!(!scratch.file("state.sqlite-wal").exists());
    // The file was clean (a new file, a commit that left no blob): the last connection left
    // the journal's header, a close stamp in it (see `clean_proof`).
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 64);
    // After a commit that may have left a blob unreferenced, it takes the journal along.
    let mut third = crate::test_support::open_read_write(&file, 0);
    third
        .write(|conn| {
            Ok(conn.execute_batch("INSERT INTO blobs VALUES (randomblob(32), 'x', 0, x'', 0)")?)
        })
        .unwrap();
    third.close().unwrap();
    assert!(!journal.exists(), "the last connection took it along");
}

#[test]
fn a_commit_visible_before_its_entry_is_waited_for_not_taken_for_a_gap() {
    use std::sync::atomic::Ordering;
    let scratch = Scratch::new("run-index-in-flight");
    let (file, reader) = built_large_file(&scratch, super::SYNC_BUILD_RUNS as u64 + 50);
    let Indexed { conn, index } = &reader;
    let writer = Indexed::open(&file);
    let hooks = writer.index.hooks.as_ref().unwrap();
    // The writer's WAL hook holds its entry back after the commit is visible; the reader
    // polls in that moment, and the entry comes 5 ms into its poll.
    let (hold, waiting) = &hooks.wal_hook_hold;
    hold.store(true, Ordering::SeqCst);
    let builds = index.builds();
    std::thread::scope(|scope| {
        let committing = scope.spawn(move || {
            writer
                .conn
                .execute_batch(
                    "UPDATE resources SET revision = revision + 1 WHERE resource_id = 'res-3'",
                )
                .unwrap();
        });
        while !waiting.load(Ordering::SeqCst) {
            assert!(
                !committing.is_finished(),
                "the commit never reached its WAL hook"
            );
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        scope.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            hold.store(false, Ordering::SeqCst);
        });
        assert!(poll(conn, index), "taken for a gap");
        committing.join().unwrap();
    });
    assert_eq!(index.builds(), builds, "caught up on, not built");
    check(conn, index, 0);
    // A mark no entry follows (its writer was killed), then a commit of another application:
    // after the wait, a gap — never the mark read as the commit's entry.
    let foreign = open(&file);
    conn.execute_batch("BEGIN").unwrap();
    let position = super::position::of_snapshot(conn).unwrap();
    conn.execute_batch("COMMIT").unwrap();
    hooks.journal().announce(&position);
    foreign
        .execute_batch("UPDATE resources SET revision = revision + 1 WHERE resource_id = 'res-4'")
        .unwrap();
    assert!(!poll(conn, index), "a commit without an entry is a gap");
    poll_until_used(conn, index);
    check(conn, index, 1);
    drop((writer.index, foreign));
}

#[test]
fn a_native_writers_run_rows_are_taken_from_its_entries() {
    let scratch = Scratch::new("run-index-images");
    let (file, reader) = built_large_file(&scratch, super::SYNC_BUILD_RUNS as u64 + 50);
    let Indexed { conn, index } = &reader;
    let writer = Indexed::open(&file);
    let mut random = Random(23);
    let mut n = 20_000;
    let mut with_images = 0;
    for number in 0..150 {
        writer.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        for _ in 0..=random.below(3) {
            let case = random.pick(&IN_TRANSACTION);
            step_case(&writer.conn, &writer.conn, &mut random, &mut n, case);
        }
        writer.index.capture(&writer.conn);
        match random.below(8) {
            // A change after the capture: the images go, the keys stay.
            0 => writer
                .conn
                .execute_batch(
                    "UPDATE run_queue SET updated_at = updated_at + 1
                     WHERE rowid = (SELECT max(rowid) FROM run_queue)",
                )
                .unwrap(),
            // Rolled back: neither images nor keys reach an entry.
            1 => {
                writer.conn.execute_batch("ROLLBACK").unwrap();
                continue;
            }
            _ => {}
        }
        writer.conn.execute_batch("COMMIT").unwrap();
        let commit = unsafe { super::position::of_shared_memory(writer.conn.handle()) }
            .unwrap()
            .commit;
        if let Some(super::journal::Slot::Written(entry)) =
            writer.index.hooks.as_ref().unwrap().journal().read(commit)
        {
            with_images += usize::from(entry.images.is_some());
        }
        let builds = index.builds();
        assert!(poll(conn, index), "step {number}: a gap");
        assert_eq!(
            index.builds(),
            builds,
            "step {number}: caught up on, not built"
        );
        check(conn, index, number);
    }
    assert!(with_images >= 60, "only {with_images} entries with images");
    assert!(
        index.mirror.lock().unwrap().images_applied >= with_images,
        "images written but not taken"
    );
    drop(writer);
}

#[cfg(unix)]
#[test]
fn after_a_foreign_commit_the_second_poll_answers_from_the_rebuilt_index() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("run-index-second-poll");
    let (file, reader) = built_large_file(&scratch, super::SYNC_BUILD_RUNS as u64 + 500);
    let Indexed { conn, index } = &reader;
    // The state file's mode changes after the connection opened (the JS layer's chmod 0600
    // of a new or copied file): still the same file.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    for round in 0..3 {
        let foreign = Connection::open(&file).unwrap();
        foreign
            .execute_batch("UPDATE run_queue SET updated_at = updated_at + 1 WHERE rowid = 1")
            .unwrap();
        drop(foreign);
        let builds = index.builds();
        assert!(
            !poll(conn, index),
            "round {round}: the first poll reads through SQL"
        );
        assert!(
            poll(conn, index),
            "round {round}: the second poll waits for the build"
        );
        assert_eq!(index.builds(), builds + 1);
        check(conn, index, round);
    }
}

#[test]
fn an_open_that_proves_the_file_clean_leaves_no_commit_in_flight() {
    let scratch = Scratch::new("run-index-proven-open");
    let file = scratch.file("state.sqlite");
    // A new file's prune finds nothing; its last close leaves a stamp the next open believes.
    crate::test_support::open_read_write(&file, 0)
        .close()
        .unwrap();
    let mut state = crate::test_support::open_read_write(&file, 0);
    assert!(!state.open_prune_pending());
    let hooks = state.run_index.hooks.as_ref().unwrap();
    // The check's empty transaction is no commit: its slot holds no in-flight mark, which a
    // reader would wait on after another program's first commit.
    assert_eq!(hooks.journal().read(1), None);
    state.close().unwrap();
}
