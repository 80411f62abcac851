//! Against a real three-node dqlite cluster on loopback, of the node program
//! the harness takes from `PIW_DQLITE_NODE` (`piw-dqlite-node` or `dqlite-demo`).
//!
//! Ignored by default; run with
//! `cargo test -p dqlite-wire --test cluster -- --ignored --test-threads=1`
//! (or `npm run test:cluster`). Each test starts its own cluster in a
//! temporary directory and stops it when done, also on failure.

use std::time::{Duration, Instant};

use dqlite_wire::error::{SQLITE_IOERR_NOT_LEADER, SQLITE_NOTFOUND};
use dqlite_wire::harness::TestCluster;
use dqlite_wire::{Cluster, Config, Connection, ErrorKind, Outcome, Session, Timeouts, Value};

const SCHEMA: &str = include_str!("../../../src/state/schema.sql");
const DB: &str = "pi-workflows";
const FORM: Duration = Duration::from_secs(60);

fn start() -> TestCluster {
    TestCluster::start(3, FORM).unwrap_or_else(|e| panic!("cluster did not start: {e}"))
}

fn config() -> Config {
    Config {
        timeouts: Timeouts {
            connect: Duration::from_millis(500),
            request: Duration::from_secs(5),
        },
        reconnect_deadline: Duration::from_secs(20),
        ..Config::default()
    }
}

fn leader_conn(c: &TestCluster) -> Connection {
    Cluster::new(c.addresses(), DB, config())
        .connect()
        .unwrap_or_else(|e| panic!("no leader connection: {e}\n{}", c.logs()))
}

fn count(conn: &mut Connection, sql: &str) -> i64 {
    let r = conn.query_all(sql, &[]).unwrap();
    r.rows[0][0].as_i64().unwrap()
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn schema_goes_through_a_follower_to_the_leader() {
    let mut c = start();
    let leader = c.wait_for_leader(FORM).unwrap();
    let follower = (leader + 1) % 3;

    // A follower refuses SQL with NOT_LEADER, before running it.
    let mut direct = Connection::connect(c.address(follower), config().timeouts).unwrap();
    direct.open(DB).unwrap();
    let err = direct.exec_sql("CREATE TABLE t (a)", &[]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotLeader { .. }), "{err}");
    assert_eq!(err.code(), Some(SQLITE_IOERR_NOT_LEADER));
    assert_eq!(err.outcome(), Outcome::NotApplied);
    assert!(err.needs_reconnect() && direct.is_broken());

    // Given only the follower's address, the client finds the leader.
    let cluster = Cluster::new([c.address(follower)], DB, config());
    let mut conn = cluster.connect().unwrap();
    assert_eq!(conn.address(), c.address(leader));
    assert_eq!(cluster.last_leader().as_deref(), Some(c.address(leader)));
    // It learned the other nodes from the cluster configuration.
    assert_eq!(cluster.candidates().len(), 3);

    // All 86 statements in one multi-statement ExecSql.
    let statements = SCHEMA.matches(';').count();
    assert_eq!(statements, 86);
    conn.exec_sql(SCHEMA, &[]).unwrap();
    assert_eq!(count(&mut conn, "SELECT count(*) FROM sqlite_master"), 166);
    let strict = conn
        .query_all(
            "SELECT count(*) FROM pragma_table_list WHERE schema = 'main' AND strict = 1",
            &[],
        )
        .unwrap();
    assert!(strict.rows[0][0].as_i64().unwrap() > 0);
    // A SQL error keeps its extended code and does not break the connection.
    conn.exec_sql("INSERT INTO projects VALUES ('p', '/x', 1)", &[])
        .unwrap();
    let err = conn
        .exec_sql("INSERT INTO projects VALUES ('p', '/y', 2)", &[])
        .unwrap_err();
    assert_eq!(err.code(), Some(1555), "{err}"); // SQLITE_CONSTRAINT_PRIMARYKEY
    assert_eq!(err.outcome(), Outcome::Failed);
    assert!(!err.needs_reconnect() && !conn.is_broken());
    let err = conn.exec_sql("SELEKT", &[]).unwrap_err();
    assert_eq!(err.primary_code(), Some(1), "{err}");
    assert!(err.message().unwrap().contains("syntax error"), "{err}");
    assert_eq!(count(&mut conn, "SELECT count(*) FROM projects"), 1);
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn every_value_type_round_trips() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql(
        "CREATE TABLE v (i INTEGER, f REAL, t TEXT, b BLOB, n ANY, d DATETIME, flag BOOLEAN, ts TIMESTAMP)",
        &[],
    )
    .unwrap();
    let blob: Vec<u8> = (0..=255u8).cycle().take(100_003).collect();
    let rows = [
        vec![
            Value::Integer(i64::MIN),
            Value::Float(-1.5e300),
            Value::Text("héllo ☃ \u{1F600}".into()),
            Value::Blob(blob.clone()),
            Value::Null,
            Value::Iso8601("2024-01-02 03:04:05.678".into()),
            Value::Boolean(true),
            Value::Unixtime(1_700_000_000),
        ],
        vec![
            Value::Integer(i64::MAX),
            Value::Float(0.0),
            Value::Text(String::new()),
            Value::Blob(Vec::new()),
            Value::Integer(7),
            Value::Null,
            Value::Boolean(false),
            Value::Null,
        ],
    ];
    let insert = conn
        .prepare("INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .unwrap();
    assert_eq!(insert.params, 8);
    for r in &rows {
        assert_eq!(conn.exec(insert, r).unwrap().rows_affected, 1);
    }
    conn.finalize(insert).unwrap();
    // A finalized statement is gone.
    let err = conn.exec(insert, &rows[0]).unwrap_err();
    assert_eq!(err.code(), Some(SQLITE_NOTFOUND), "{err}");
    let mut conn = leader_conn(&c);

    let select = conn.prepare("SELECT * FROM v ORDER BY rowid").unwrap();
    let got = conn.query(select, &[]).unwrap().collect_all().unwrap();
    assert_eq!(got.columns, ["i", "f", "t", "b", "n", "d", "flag", "ts"]);
    // dqlite reports date and boolean columns with its own types, and a
    // NULL in a date column as an empty ISO-8601 string.
    assert_eq!(got.rows[0], rows[0]);
    let mut second = rows[1].clone();
    second[5] = Value::Iso8601(String::new());
    second[7] = Value::Iso8601(String::new());
    assert_eq!(got.rows[1], second);
    let storage: Vec<Value> = got.rows[1]
        .iter()
        .cloned()
        .map(Value::into_storage)
        .collect();
    assert_eq!(storage[5], Value::Null);
    assert_eq!(storage[6], Value::Integer(0));

    // Storage classes as SQLite sees them.
    let types = conn
        .query_all(
            "SELECT typeof(i), typeof(f), typeof(t), typeof(b), typeof(n), typeof(d), typeof(flag), typeof(ts) FROM v ORDER BY rowid",
            &[],
        )
        .unwrap();
    let t0: Vec<&str> = types.rows[0].iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(
        t0,
        ["integer", "real", "text", "blob", "null", "text", "integer", "integer"]
    );

    // Parameters through QuerySql, and values computed by SQLite.
    let echo = conn
        .query_all(
            "SELECT ?, ?, ?, ?, ?, length(?), 1.25, x'00ff', NULL",
            &[
                Value::Integer(-3),
                Value::Float(f64::MIN_POSITIVE),
                Value::Text("tab\there".into()),
                Value::Blob(vec![0, 0, 1]),
                Value::Null,
                Value::Blob(blob.clone()),
            ],
        )
        .unwrap();
    assert_eq!(
        echo.rows[0],
        vec![
            Value::Integer(-3),
            Value::Float(f64::MIN_POSITIVE),
            Value::Text("tab\there".into()),
            Value::Blob(vec![0, 0, 1]),
            Value::Null,
            Value::Integer(blob.len() as i64),
            Value::Float(1.25),
            Value::Blob(vec![0, 255]),
            Value::Null,
        ]
    );
    // Text with a NUL cannot be sent and is refused before sending.
    let err = conn
        .exec_sql("SELECT ?", &[Value::Text("a\0b".into())])
        .unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidArgument(_)));
    assert!(!conn.is_broken());
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn a_large_result_arrives_over_many_batches() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql(
        "CREATE TABLE big (id INTEGER PRIMARY KEY, label TEXT NOT NULL)",
        &[],
    )
    .unwrap();
    let inserted = conn
        .exec_sql(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5000) \
             INSERT INTO big SELECT x, 'row-' || x FROM n",
            &[],
        )
        .unwrap();
    assert_eq!(inserted.rows_affected, 5000);
    assert_eq!(inserted.last_insert_id, 5000);

    let mut rows = conn
        .query_sql("SELECT id, label FROM big ORDER BY id", &[])
        .unwrap();
    assert_eq!(rows.columns(), ["id", "label"]);
    let mut expected = 1i64;
    while let Some(row) = rows.next_row().unwrap() {
        assert_eq!(
            row,
            vec![
                Value::Integer(expected),
                Value::Text(format!("row-{expected}"))
            ]
        );
        expected += 1;
    }
    assert_eq!(expected - 1, 5000);
    let batches = rows.batches();
    assert!(batches > 10, "5000 rows came in {batches} batches");
    drop(rows);
    // The connection is ready for the next request.
    assert_eq!(count(&mut conn, "SELECT count(*) FROM big"), 5000);
    // An empty result has its columns and no rows.
    let empty = conn
        .query_all("SELECT id FROM big WHERE id < 0", &[])
        .unwrap();
    assert_eq!(empty.columns, ["id"]);
    assert!(empty.rows.is_empty());
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn transactions_commit_and_roll_back() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql(
        "CREATE TABLE acct (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)",
        &[],
    )
    .unwrap();

    let mut tx = conn.begin().unwrap();
    tx.exec_sql("INSERT INTO acct VALUES (1, 100)", &[])
        .unwrap();
    assert_eq!(
        tx.query_all("SELECT count(*) FROM acct", &[]).unwrap().rows[0][0],
        Value::Integer(1)
    );
    tx.rollback().unwrap();
    assert_eq!(count(&mut conn, "SELECT count(*) FROM acct"), 0);

    let mut tx = conn.begin_immediate().unwrap();
    tx.exec_sql("INSERT INTO acct VALUES (1, 100)", &[])
        .unwrap();
    tx.exec_sql("INSERT INTO acct VALUES (2, 50)", &[]).unwrap();
    let stmt = tx
        .prepare("UPDATE acct SET balance = balance + ? WHERE id = ?")
        .unwrap();
    tx.exec(stmt, &[Value::Integer(-30), Value::Integer(1)])
        .unwrap();
    tx.exec(stmt, &[Value::Integer(30), Value::Integer(2)])
        .unwrap();
    tx.commit().unwrap();
    assert!(!conn.in_transaction());

    // Committed data is visible on another connection.
    let mut other = leader_conn(&c);
    let r = other
        .query_all("SELECT id, balance FROM acct ORDER BY id", &[])
        .unwrap();
    assert_eq!(
        r.rows,
        vec![
            vec![Value::Integer(1), Value::Integer(70)],
            vec![Value::Integer(2), Value::Integer(80)],
        ]
    );

    // A transaction dropped without commit is rolled back.
    {
        let mut tx = conn.begin().unwrap();
        tx.exec_sql("DELETE FROM acct", &[]).unwrap();
    }
    assert_eq!(count(&mut other, "SELECT count(*) FROM acct"), 2);

    // A connection closed in the middle of a transaction loses it.
    let mut doomed = leader_conn(&c);
    let mut tx = doomed.begin().unwrap();
    tx.exec_sql("INSERT INTO acct VALUES (3, 1)", &[]).unwrap();
    std::mem::forget(tx);
    drop(doomed);
    let session_cluster = Cluster::new(c.addresses(), DB, config());
    let mut session = Session::new(&session_cluster);
    // The server rolls back when it notices the closed socket; bounded wait.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = session.query_all("SELECT count(*) FROM acct", &[]).unwrap();
        if r.rows[0][0] == Value::Integer(2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "row of a closed connection's transaction visible"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A SQL error inside a transaction fails the statement, not the transaction.
    let total: i64 = session
        .transaction(|tx| {
            let err = tx
                .exec_sql("INSERT INTO acct VALUES (1, 0)", &[])
                .unwrap_err();
            assert_eq!(err.outcome(), Outcome::Failed);
            tx.exec_sql("INSERT INTO acct VALUES (4, 4)", &[])?;
            let r = tx.query_all("SELECT sum(balance) FROM acct", &[])?;
            Ok(r.rows[0][0].as_i64().unwrap())
        })
        .unwrap();
    assert_eq!(total, 154);
    assert_eq!(count(&mut other, "SELECT count(*) FROM acct"), 3);
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn a_begin_sent_with_its_query_opens_the_transaction_or_fails_alone() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, pad TEXT)", &[])
        .unwrap();
    // Enough rows for several batches of a reply.
    conn.exec_sql(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO t SELECT i, printf('%.200c', 'x') FROM n",
        &[],
    )
    .unwrap();
    let all = conn.prepare("SELECT id, pad FROM t WHERE id >= ?").unwrap();

    let rows = conn
        .begin_and_query(true, all, &[Value::Integer(1)])
        .unwrap();
    assert_eq!(rows.rows.len(), 2000);
    assert!(conn.in_transaction());
    conn.exec_sql("DELETE FROM t WHERE id > 10", &[]).unwrap();
    conn.commit_detached().unwrap();
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 10);

    // Another connection holds the write lock: the BEGIN IMMEDIATE fails with SQLITE_BUSY, the
    // query's reply is read all the same, and the connection answers its next request.
    conn.exec_sql(
        "WITH RECURSIVE n(i) AS (SELECT 11 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO t SELECT i, printf('%.200c', 'x') FROM n",
        &[],
    )
    .unwrap();
    let mut holder = leader_conn(&c);
    holder.begin_detached(true).unwrap();
    holder
        .exec_sql("INSERT INTO t VALUES (5000, 'held')", &[])
        .unwrap();
    let busy = conn
        .begin_and_query(true, all, &[Value::Integer(1)])
        .unwrap_err();
    assert_eq!(busy.code(), Some(5), "{busy}");
    assert_eq!(busy.outcome(), Outcome::Failed);
    assert!(!conn.in_transaction() && !conn.is_broken());
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 2000);
    holder.rollback_detached().unwrap();

    // A failing query leaves the transaction open, as a query sent on its own does.
    let bad = conn
        .prepare("SELECT abs(-9223372036854775807 - 1 + id - id) FROM t")
        .unwrap();
    let overflow = conn.begin_and_query(false, bad, &[]).unwrap_err();
    assert_eq!(overflow.outcome(), Outcome::Failed, "{overflow}");
    assert!(conn.in_transaction());
    conn.rollback_detached().unwrap();
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 2000);
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn writes_sent_with_the_read_after_them_run_first_or_fail_alone() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, pad TEXT)", &[])
        .unwrap();
    let all = conn.prepare("SELECT id, pad FROM t ORDER BY id").unwrap();
    // Not inside a transaction: refused, nothing sent.
    assert!(conn
        .exec_sql_and_query("INSERT INTO t VALUES (1, 'x')", all, &[])
        .is_err());
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 0);

    // The writes run first and the read sees them, its reply whole however many batches.
    conn.begin_detached(true).unwrap();
    let (exec, rows) = conn
        .exec_sql_and_query(
            "INSERT INTO t VALUES (1, 'a');
             WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO t SELECT i, printf('%.200c', 'x') FROM n",
            all,
            &[],
        )
        .unwrap();
    assert_eq!((exec.last_insert_id, exec.rows_affected), (2000, 1999));
    assert_eq!(rows.unwrap().rows.len(), 2000);
    conn.commit_detached().unwrap();

    // A write that fails stops the batch; its error is the answer, the read's reply is read
    // and dropped, and the transaction is still open, as after a failing statement alone.
    conn.begin_detached(true).unwrap();
    let failed = conn
        .exec_sql_and_query(
            "INSERT INTO t VALUES (3000, 'new'); INSERT INTO t VALUES (1, 'taken'); INSERT INTO t VALUES (3001, 'never')",
            all,
            &[],
        )
        .unwrap_err();
    assert_eq!(failed.outcome(), Outcome::Failed, "{failed}");
    assert!(conn.in_transaction() && !conn.is_broken());
    assert_eq!(
        count(&mut conn, "SELECT count(*) FROM t WHERE id >= 3000"),
        1
    );
    conn.rollback_detached().unwrap();
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 2000);
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn a_read_commit_unread_is_checked_before_the_next_request() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql("CREATE TABLE t (a INTEGER)", &[]).unwrap();
    let all = conn.prepare("SELECT count(*) FROM t").unwrap();
    conn.begin_and_query(false, all, &[]).unwrap();
    conn.commit_detached_unread().unwrap();
    assert!(!conn.in_transaction());
    // The snapshot is gone: another connection's write is seen by the next read.
    let mut other = leader_conn(&c);
    other.exec_sql("INSERT INTO t VALUES (1)", &[]).unwrap();
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 1);
    assert!(!conn.is_broken());

    // A COMMIT the server refuses (its transaction already ended) breaks the connection at
    // the next request, which is not sent.
    conn.begin_detached(false).unwrap();
    conn.exec_sql("COMMIT", &[]).unwrap();
    conn.commit_detached_unread().unwrap();
    let next = conn.exec_sql("INSERT INTO t VALUES (2)", &[]).unwrap_err();
    assert!(matches!(next.kind(), ErrorKind::Broken), "{next}");
    assert_eq!(next.outcome(), Outcome::NotApplied);
    assert!(conn.is_broken());
    assert_eq!(count(&mut other, "SELECT count(*) FROM t"), 1);
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn interrupt_stops_a_long_query_and_keeps_the_connection() {
    let c = start();
    let mut conn = leader_conn(&c);
    let total = 200_000;
    let sql = format!(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {total}) \
         SELECT x, printf('%040d', x) FROM n"
    );
    let mut rows = conn.query_sql(&sql, &[]).unwrap();
    let mut read = 0u64;
    for _ in 0..10 {
        rows.next_row().unwrap().unwrap();
        read += 1;
    }
    assert_eq!(rows.batches(), 1);
    let skipped = rows.interrupt().unwrap();
    assert!(read + skipped <= total, "{read} + {skipped}");
    assert!(!conn.is_broken());
    // The same connection answers the next query.
    assert_eq!(count(&mut conn, "SELECT 41 + 1"), 42);

    // Dropping an unfinished stream interrupts it too.
    {
        let mut rows = conn.query_sql(&sql, &[]).unwrap();
        rows.next_row().unwrap().unwrap();
    }
    assert!(!conn.is_broken());
    assert_eq!(count(&mut conn, "SELECT 7"), 7);
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn leader_sigkill_fails_over_with_data_intact() {
    let mut c = start();
    let cluster = Cluster::new(c.addresses(), DB, config());
    let mut session = Session::new(&cluster);
    session
        .exec_sql(
            "CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)",
            &[],
        )
        .unwrap();
    for k in 0..100 {
        session
            .exec_sql(
                "INSERT INTO kv VALUES (?, ?)",
                &[Value::Integer(k), Value::Text(format!("v{k}"))],
            )
            .unwrap();
    }
    let mut stale = cluster.connect().unwrap();

    let mut figures = Vec::new();
    for round in 0..3 {
        let leader = c.wait_for_leader(FORM).unwrap();
        assert_eq!(cluster.last_leader().as_deref(), Some(c.address(leader)));
        c.kill(leader);
        let killed = Instant::now();

        // A request on a connection to the dead leader fails, and never
        // claims a definite outcome for the write.
        if round == 0 {
            let err = stale
                .exec_sql("INSERT INTO kv VALUES (1000, 'lost?')", &[])
                .unwrap_err();
            assert!(err.needs_reconnect(), "{err}");
            assert!(
                matches!(err.outcome(), Outcome::NotApplied | Outcome::Unknown),
                "{err}: {:?}",
                err.outcome()
            );
        }

        // The session reconnects to the new leader within its deadline.
        let r = session
            .query_all("SELECT count(*), max(k) FROM kv", &[])
            .unwrap();
        let reconnect = killed.elapsed();
        figures.push(reconnect);
        let n = r.rows[0][0].as_i64().unwrap();
        assert_eq!(r.rows[0][1], Value::Integer(99 + round));
        assert_eq!(
            n,
            100 + round,
            "round {round}: every acknowledged write survived"
        );
        let new_leader = cluster.last_leader().unwrap();
        assert_ne!(new_leader, c.address(leader));

        // Writes work on the new leader.
        session
            .exec_sql(
                "INSERT INTO kv VALUES (?, 'after')",
                &[Value::Integer(100 + round)],
            )
            .unwrap();
        // Bring the old leader back so the next round has a quorum.
        c.restart(leader).unwrap();
        c.wait_for_voters(3, FORM).unwrap();
    }
    assert_eq!(
        session
            .query_all("SELECT count(*) FROM kv", &[])
            .unwrap()
            .rows[0][0],
        Value::Integer(103)
    );
    eprintln!("failover: leader SIGKILL -> first answer from the new leader: {figures:?}");
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn a_restarted_node_rejoins_and_catches_up() {
    let mut c = start();
    let cluster = Cluster::new(c.addresses(), DB, config());
    let mut session = Session::new(&cluster);
    session
        .exec_sql("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB)", &[])
        .unwrap();
    session
        .exec_sql("INSERT INTO log VALUES (1, randomblob(1000))", &[])
        .unwrap();

    let leader = c.wait_for_leader(FORM).unwrap();
    let down = (leader + 1) % 3;
    c.kill(down);
    // The other two keep a quorum; write while the node is down.
    session
        .exec_sql(
            "WITH RECURSIVE n(x) AS (SELECT 2 UNION ALL SELECT x + 1 FROM n WHERE x < 2000) \
             INSERT INTO log SELECT x, randomblob(100) FROM n",
            &[],
        )
        .unwrap();
    let digest = session
        .query_all(
            "SELECT count(*), sum(length(body)), total(id) FROM log",
            &[],
        )
        .unwrap();

    c.restart(down).unwrap();
    c.wait_for_voters(3, FORM).unwrap();
    let data_files = std::fs::read_dir(c.data_dir(down)).unwrap().count();
    assert!(data_files > 0);

    // Hand leadership to the restarted node: Raft only transfers to a node
    // that has caught up, and then it serves every row itself.
    let mut conn = cluster.connect().unwrap();
    let nodes = conn.cluster().unwrap();
    let target = nodes
        .iter()
        .find(|n| n.address == c.address(down))
        .expect("node in config");
    assert_eq!(target.role, 0, "restarted node is a voter again");
    conn.transfer(target.id).unwrap();
    drop(conn);
    let deadline = Instant::now() + FORM;
    let mut on_restarted = loop {
        let mut probe = Connection::connect(c.address(down), config().timeouts).unwrap();
        if probe
            .leader()
            .unwrap()
            .is_some_and(|l| l.address == c.address(down))
        {
            probe.open(DB).unwrap();
            break probe;
        }
        assert!(
            Instant::now() < deadline,
            "restarted node never became leader\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let again = on_restarted
        .query_all(
            "SELECT count(*), sum(length(body)), total(id) FROM log",
            &[],
        )
        .unwrap();
    assert_eq!(again, digest);
    assert_eq!(again.rows[0][0], Value::Integer(2000));
}

#[test]
#[ignore = "starts a dqlite cluster; run with --ignored"]
fn loopback_round_trip_figures() {
    let c = start();
    let mut conn = leader_conn(&c);
    conn.exec_sql("CREATE TABLE t (a INTEGER)", &[]).unwrap();
    let select = conn.prepare("SELECT ?").unwrap();
    let insert = conn.prepare("INSERT INTO t VALUES (?)").unwrap();
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for i in 0..300 {
        let t = Instant::now();
        let r = conn
            .query(select, &[Value::Integer(i)])
            .unwrap()
            .collect_all()
            .unwrap();
        reads.push(t.elapsed());
        assert_eq!(r.rows[0][0], Value::Integer(i));
        let t = Instant::now();
        conn.exec(insert, &[Value::Integer(i)]).unwrap();
        writes.push(t.elapsed());
    }
    reads.sort();
    writes.sort();
    let pct = |v: &[Duration], p: usize| v[v.len() * p / 100];
    eprintln!(
        "loopback: prepared SELECT ? p50 {:?} p99 {:?}; INSERT (replicated commit) p50 {:?} p99 {:?}",
        pct(&reads, 50),
        pct(&reads, 99),
        pct(&writes, 50),
        pct(&writes, 99)
    );
    assert_eq!(count(&mut conn, "SELECT count(*) FROM t"), 300);
}
