//! The cluster engine against a fake leader (requests sent together or held back) and, with
//! `--ignored`, against a real cluster (a held-back statement's error).

use super::*;
use crate::sql::params;

/// A store's connection to a fake leader, and the leader.
fn on_fake_leader() -> (crate::sql::Db, dqlite_wire::fake::FakeNode) {
    let node = dqlite_wire::fake::FakeNode::start(dqlite_wire::fake::Behaviour::Leader);
    let url = format!("dqlite://{}/db", node.address());
    let deadline = Instant::now() + Duration::from_secs(10);
    let remote = Remote::open(&url, Config::default(), false, deadline).unwrap();
    (crate::sql::Db::Remote(Box::new(remote)), node)
}

fn select(db: &crate::sql::Db) -> usize {
    let mut statement = db.prepare_cached("SELECT x FROM t WHERE k = ?").unwrap();
    let rows = statement.query_map(["k"], |_| Ok(())).unwrap();
    rows.count()
}

/// Prepares and runs one statement that binds nothing, as the store's transaction steps do.
fn step(db: &crate::sql::Db, sql: &str) {
    db.prepare_cached(sql).unwrap().execute([]).unwrap();
}

#[test]
fn a_transaction_sends_its_begin_with_its_first_select_in_one_round_trip() {
    let (db, node) = on_fake_leader();
    for begin in ["BEGIN IMMEDIATE", "BEGIN"] {
        let before = node.sent_ahead();
        db.prepare_cached(begin).unwrap().execute([]).unwrap();
        assert!(!db.is_autocommit());
        assert_eq!(select(&db), 0);
        let together = usize::from(Connection::can_send_ahead());
        assert_eq!(node.sent_ahead(), before + together, "{begin} went alone");
        assert!(!db.is_autocommit());
        db.execute("INSERT INTO t VALUES (?)", ["v"]).unwrap();
        step(&db, "COMMIT");
        assert!(db.is_autocommit());
    }
    // A first statement that writes waits for its BEGIN, as before.
    let before = node.sent_ahead();
    step(&db, "BEGIN IMMEDIATE");
    db.execute("INSERT INTO t VALUES (?)", ["v"]).unwrap();
    select(&db);
    step(&db, "COMMIT");
    assert_eq!(node.sent_ahead(), before);
    // A transaction ended before any statement never reached the server.
    for end in ["COMMIT", "ROLLBACK"] {
        step(&db, "BEGIN IMMEDIATE");
        db.execute_batch(end).unwrap();
        assert!(db.is_autocommit());
        assert!(db.execute_batch(end).is_err(), "no transaction is open");
    }
}

#[test]
fn held_back_statements_go_with_the_next_statement_or_the_commit_in_one_request() {
    let (db, node) = on_fake_leader();
    let sent = |from: usize| node.exec_sql()[from..].to_vec();
    let start = node.exec_sql().len();
    step(&db, "BEGIN IMMEDIATE");
    select(&db);
    let mut insert = db.prepare_cached("INSERT INTO t VALUES (?, ?)").unwrap();
    // Nothing is held back before the transaction's caller promises (`hold_writes_until_commit`).
    insert.execute_deferred(params![0, "sent"]).unwrap();
    db.hold_writes_until_commit();
    assert!(db.holds_writes());
    insert.execute_deferred(params![1, "a'b"]).unwrap();
    insert.execute_deferred(params![-2, vec![0xab_u8]]).unwrap();
    step(&db, "COMMIT");
    assert_eq!(
        sent(start),
        [
            "BEGIN IMMEDIATE",
            "INSERT INTO t VALUES (1, 'a''b');\nINSERT INTO t VALUES ((-2), X'AB');\nCOMMIT"
        ]
    );
    assert!(!db.holds_writes(), "the promise ends with its transaction");
    // Before a statement that needs a reply, in one request of their own; a REAL cannot be
    // written into the text exactly, so that statement is sent as it comes.
    let start = node.exec_sql().len();
    step(&db, "BEGIN IMMEDIATE");
    select(&db);
    db.hold_writes_until_commit();
    insert.execute_deferred(params![3, "c"]).unwrap();
    insert.execute_deferred(params![4, "d"]).unwrap();
    insert.execute_deferred(params![5, 0.5]).unwrap();
    insert.execute_deferred(params![6, "e"]).unwrap();
    step(&db, "ROLLBACK");
    assert_eq!(
        sent(start),
        [
            "BEGIN IMMEDIATE",
            "INSERT INTO t VALUES (3, 'c');\nINSERT INTO t VALUES (4, 'd')",
            "ROLLBACK"
        ],
        "the statement held back before the ROLLBACK is dropped"
    );
    // Outside a write transaction nothing is held back.
    let start = node.exec_sql().len();
    step(&db, "BEGIN");
    select(&db);
    db.hold_writes_until_commit();
    assert!(!db.holds_writes());
    insert.execute_deferred(params![7, "f"]).unwrap();
    step(&db, "COMMIT");
    // A read snapshot's COMMIT is sent without waiting for its reply: give the node up to 5 s
    // to have read it (under load it may not have yet).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sent(start).len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(sent(start), ["BEGIN", "COMMIT"]);
}

/// One call's write as `StateDb::write` runs it: rolled back when it fails.
fn write(db: &crate::sql::Db, body: impl FnOnce() -> rusqlite::Result<()>) -> rusqlite::Result<()> {
    let outcome = db
        .prepare_cached("BEGIN IMMEDIATE")
        .and_then(|mut begin| begin.execute([]))
        .and_then(|_| body())
        .and_then(|()| db.prepare_cached("COMMIT")?.execute([]).map(|_| ()));
    if outcome.is_err() && !db.is_autocommit() {
        let _ = db.execute_batch("ROLLBACK");
    }
    outcome
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored (npm run test:cluster)"]
fn a_held_back_statement_that_fails_fails_its_call_with_its_own_error_and_nothing_after_it_runs() {
    let cluster = dqlite_wire::harness::TestCluster::start(3, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("cluster did not start: {e}"));
    let url = format!("dqlite://{}/db", cluster.addresses().join(","));
    let deadline = Instant::now() + Duration::from_secs(20);
    let db = crate::sql::Db::Remote(Box::new(
        Remote::open(&url, Config::default(), false, deadline).unwrap(),
    ));
    db.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    db.execute("INSERT INTO t VALUES (1, 'one')", []).unwrap();
    let rows = || -> Vec<i64> {
        let mut statement = db.prepare("SELECT k FROM t ORDER BY k").unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let insert = "INSERT INTO t VALUES (?, ?)";
    // The error of the failing statement sent on its own, as before.
    let alone = write(&db, || {
        db.prepare_cached(insert)?.execute(params![2, "two"])?;
        db.prepare_cached(insert)?.execute(params![1, "again"])?;
        db.prepare_cached(insert)?.execute(params![3, "three"])?;
        Ok(())
    })
    .unwrap_err();
    assert!(
        matches!(&alone, rusqlite::Error::SqliteFailure(failure, Some(message))
            if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                && message == "UNIQUE constraint failed: t.k"),
        "{alone:?}"
    );
    assert_eq!(rows(), [1]);
    // Held back until the COMMIT, or until the next statement: the same error, from that
    // call, and nothing of the transaction is applied, the statements after it included.
    let with_commit = write(&db, || {
        db.hold_writes_until_commit();
        let mut statement = db.prepare_cached(insert)?;
        statement.execute_deferred(params![2, "two"])?;
        statement.execute_deferred(params![1, "again"])?;
        statement.execute_deferred(params![3, "three"])?;
        Ok(())
    })
    .unwrap_err();
    assert_eq!(format!("{with_commit:?}"), format!("{alone:?}"));
    assert!(db.is_autocommit());
    assert_eq!(rows(), [1]);
    let mut reached = false;
    let before_next = write(&db, || {
        db.hold_writes_until_commit();
        let mut statement = db.prepare_cached(insert)?;
        statement.execute_deferred(params![2, "two"])?;
        statement.execute_deferred(params![1, "again"])?;
        statement.execute_deferred(params![3, "three"])?;
        db.prepare_cached("SELECT count(*) FROM t")?
            .query_row([], |row| row.get::<_, i64>(0))?;
        reached = true;
        Ok(())
    })
    .unwrap_err();
    assert_eq!(format!("{before_next:?}"), format!("{alone:?}"));
    assert!(!reached, "the call went on after its failed statement");
    assert!(db.is_autocommit());
    assert_eq!(rows(), [1]);
    // And when every statement succeeds, all of them are committed.
    write(&db, || {
        db.hold_writes_until_commit();
        let mut statement = db.prepare_cached(insert)?;
        statement.execute_deferred(params![2, "two"])?;
        statement.execute_deferred(params![3, "it's"])?;
        Ok(())
    })
    .unwrap();
    assert_eq!(rows(), [1, 2, 3]);
    let text: String = db
        .query_row("SELECT v FROM t WHERE k = 3", [], |row| row.get(0))
        .unwrap();
    assert_eq!(text, "it's");
}

#[test]
fn transaction_statements_are_recognised_and_nothing_else() {
    assert!(control_of("BEGIN") == Control::Begin(TransactionKind::Read));
    assert!(control_of(" begin deferred; ") == Control::Begin(TransactionKind::Read));
    assert!(control_of("BEGIN IMMEDIATE") == Control::Begin(TransactionKind::Write));
    assert!(control_of("begin exclusive") == Control::Begin(TransactionKind::Write));
    assert!(control_of("COMMIT") == Control::Commit);
    assert!(control_of("END") == Control::Commit);
    assert!(control_of("ROLLBACK") == Control::Rollback);
    for sql in [
        "SELECT 1",
        "ROLLBACK TO SAVEPOINT a",
        "BEGIN; SELECT 1",
        "INSERT INTO t VALUES ('COMMIT')",
    ] {
        assert!(control_of(sql) == Control::Sql, "{sql}");
    }
}

#[test]
fn only_plain_selects_are_run_again_for_their_error() {
    assert!(is_select("SELECT 1"));
    assert!(is_select("  (select x FROM t)"));
    assert!(is_select("VALUES (1)"));
    for sql in [
        "UPDATE t SET a = 1 RETURNING a",
        "WITH x AS (SELECT 1) DELETE FROM t",
        "PRAGMA x",
    ] {
        assert!(!is_select(sql), "{sql}");
    }
}
