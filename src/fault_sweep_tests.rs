//! Fault injection the way SQLite tests itself: representative store operations are run again
//! and again, the N-th write, sync, truncate or lock of the run failing with EIO or ENOSPC
//! (`state::vfs::faults`), for every N the operation reaches. Each run is followed by a crash
//! (the database and WAL copied as they are, without the wal-index) and a reopen of the copy.
//! The invariant: every call that returned is fully in the copy, every call that failed is
//! fully absent (every table, `blobs` included, row for row), `integrity_check` and
//! `foreign_key_check` pass, and the copy opens as a state database.
//!
//! The faults hit SQLite's unix VFS, which the store opens its file with. `PIW_FAULT_SWEEP=full`
//! (the soak) tries every N; otherwise the quick sweep in `cargo test` tries at most
//! [`QUICK_POINTS`] Ns per point, spread over the whole range.

use std::ffi::CStr;
use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::error::Result;
use crate::methods::dispatch;
use crate::state::vfs::{self, faults};
use crate::state::{Mode, OpenOptions, StateDb};
use crate::store::{resolve_project, Store};
use crate::test_support::{dump_tables, open_read_write, Scratch};
use crate::wire::Call;

const NOW: i64 = 1_789_257_600_000;
const QUICK_POINTS: u64 = 4;

/// What a step may read from the setup: its replies, by name.
type Setup = serde_json::Map<String, Value>;
type Step = fn(&Store<'_>, &Setup) -> Result<()>;

struct Operation {
    name: &'static str,
    /// Run once, without faults, into the file every attempt starts from.
    setup: fn(&Store<'_>) -> Result<Setup>,
    /// The calls under test, in order; the first that fails ends the attempt.
    steps: &'static [Step],
}

fn doc(value: Value) -> Value {
    json!({ "$c": crate::state::json::canonical(&value) })
}

fn call(store: &Store<'_>, method: &str, options: Value) -> Result<Option<Value>> {
    let reply = dispatch(store, method, &Call::new(vec![options], NOW))?;
    Ok(match reply.text {
        Some(text) => Some(serde_json::from_str(&text).expect("reply JSON")),
        None => reply.value,
    })
}

fn put(store: &Store<'_>, key: &str, spec: Value) -> Result<Option<Value>> {
    call(
        store,
        "putResource",
        json!({
            "controller": "sweep", "key": key, "now": NOW,
            "spec": doc(spec), "initialStatus": doc(json!({ "n": 0 })),
        }),
    )
}

fn claim_next(store: &Store<'_>) -> Result<Option<Value>> {
    // The JS layer sends `now + leaseMs` and its date, computed by JavaScript, for `leaseMs`.
    let expires_at = NOW + 60_000;
    let lease = json!({ "$lease": { "sum": expires_at, "iso": crate::time::iso(expires_at) } });
    call(
        store,
        "claimNext",
        json!({ "controllers": ["sweep"], "ownerId": "sweeper", "leaseMs": lease, "now": NOW }),
    )
}

fn reservation(run_id: &str) -> Value {
    json!({
        "runId": run_id,
        "workflowName": "echo",
        "workflowSourceRef": "builtin:echo",
        "workflowSource": { "kind": "builtin", "id": "echo", "revision": "rev-1" },
        "definitionDigest": "a1".repeat(32),
        "definitionSnapshot": doc(json!({ "name": "echo", "startAt": "start", "nodes": { "start": { "type": "agent" } }, "edges": [] })),
        "input": doc(json!({ "task": format!("task for {run_id}"), "pad": "p".repeat(3000) })),
        "runnerId": "setup",
        "originSessionId": format!("session-{run_id}"),
        "executionMode": "headless",
        "now": NOW,
    })
}

fn run_args(extra: Value) -> Value {
    let mut args = json!({ "runId": "run-1", "claimToken": "token-1", "now": NOW });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    args
}

fn no_setup(_: &Store<'_>) -> Result<Setup> {
    Ok(Setup::new())
}

fn with_resource(store: &Store<'_>) -> Result<Setup> {
    put(store, "existing", json!({ "v": 1 }))?;
    Ok(Setup::new())
}

fn with_claim(store: &Store<'_>) -> Result<Setup> {
    put(store, "claimed", json!({ "v": 1 }))?;
    let claim = claim_next(store)?.expect("a claim");
    Ok(Setup::from_iter([("claim".to_string(), claim)]))
}

const OPERATIONS: &[Operation] = &[
    Operation {
        name: "run lifecycle",
        setup: no_setup,
        steps: &[
            |store, _| call(store, "reserveWorkflowRun", reservation("run-1")).map(drop),
            |store, _| {
                let claimed = call(
                    store,
                    "claimWorkflowRun",
                    run_args(json!({ "runnerId": "runner", "leaseMs": 60_000 })),
                )?;
                assert!(claimed.is_some(), "claimed");
                Ok(())
            },
            |store, _| {
                let running = call(store, "markWorkflowRunRunning", run_args(json!({})))?;
                assert_eq!(running, Some(json!(true)));
                Ok(())
            },
            |store, _| {
                call(
                    store,
                    "recordRunEvent",
                    json!({
                        "runId": "run-1", "workflowRef": "builtin:echo", "type": "sweep.progress",
                        "runnerId": "runner", "payload": doc(json!({ "pad": "e".repeat(2000) })),
                        "now": NOW,
                    }),
                )
                .map(drop)
            },
            |store, _| {
                let done = call(store, "completeWorkflowRun", run_args(json!({})))?;
                assert_eq!(done, Some(json!(true)));
                Ok(())
            },
        ],
    },
    Operation {
        name: "putResource (new, then a new spec)",
        setup: with_resource,
        steps: &[
            |store, _| put(store, "fresh", json!({ "pad": "s".repeat(5000) })).map(drop),
            |store, _| put(store, "existing", json!({ "v": 2 })).map(drop),
        ],
    },
    Operation {
        name: "claimNext",
        setup: with_resource,
        steps: &[|store, _| {
            assert!(claim_next(store)?.is_some(), "claimed");
            Ok(())
        }],
    },
    Operation {
        name: "updateStatus",
        setup: with_claim,
        steps: &[|store, setup| {
            let claim = &setup["claim"];
            call(
                store,
                "updateStatus",
                json!({
                    "ref": { "controller": "sweep", "key": "claimed" },
                    "expectedResourceVersion": claim["resourceVersion"],
                    "claim": claim,
                    "status": doc(json!({ "observedGeneration": 1, "conditions": [], "controllerStatus": { "pad": "u".repeat(4000) } })),
                    "now": NOW,
                }),
            )
            .map(drop)
        }],
    },
    Operation {
        name: "state.transaction with raw SQL",
        setup: no_setup,
        steps: &[|store, _| {
            // What `store.state.transaction(() => connection.prepare(sql).run())` sends.
            let conn = store.state.file_conn()?;
            crate::connection::run(conn, "BEGIN IMMEDIATE", &json!({}))?;
            let outcome = (|| {
                crate::connection::run(
                    conn,
                    "INSERT INTO projects(project_id, canonical_path, created_at) VALUES (?, ?, ?)",
                    &json!({ "positional": ["project-raw", "/raw/project", NOW] }),
                )?;
                crate::connection::run(
                    conn,
                    "UPDATE schema_meta SET updated_at = ? WHERE id = 1",
                    &json!({ "positional": [NOW + 1] }),
                )?;
                crate::connection::run(conn, "COMMIT", &json!({}))
            })();
            if outcome.is_err() && !conn.is_autocommit() {
                crate::connection::run(conn, "ROLLBACK", &json!({}))?;
            }
            outcome.map(drop)
        }],
    },
    Operation {
        name: "checkpoint, then putResource",
        setup: with_resource,
        steps: &[
            |store, _| {
                put(
                    store,
                    "before-checkpoint",
                    json!({ "pad": "c".repeat(6000) }),
                )
                .map(drop)
            },
            |store, _| {
                // Copies the WAL into the file and truncates it: writes, syncs and truncates
                // of the database file; the next commit then restarts the log.
                crate::connection::query(
                    store.state.file_conn()?,
                    "PRAGMA wal_checkpoint(TRUNCATE)",
                    &json!({}),
                    false,
                    None,
                )
                .map(drop)
            },
            |store, _| put(store, "after-checkpoint", json!({ "v": 3 })).map(drop),
        ],
    },
];

/// Every table, `blobs` included, row for row.
fn dump(conn: &Connection) -> rusqlite::Result<String> {
    dump_tables(conn, |_| true)
}

fn open(dir: &Path) -> StateDb {
    open_read_write(&dir.join("state.sqlite"), NOW)
}

/// Copies the state file and its WAL as a crash leaves them (not the wal-index).
fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for suffix in ["", "-wal"] {
        let source = from.join(format!("state.sqlite{suffix}"));
        if source.exists() {
            std::fs::copy(&source, to.join(format!("state.sqlite{suffix}"))).unwrap();
        }
    }
}

#[derive(Default, Debug)]
struct Tally {
    attempts: u64,
    fired: u64,
    acknowledged: u64,
    rejected: u64,
    resurrected: u64,
    lost: u64,
    /// Rejected by a failed sync after the commit was written, and back after the crash.
    indeterminate: u64,
    failures: Vec<String>,
}

/// One attempt: a fresh copy of the setup file, the steps with the fault armed, a crash, a
/// reopen of what the crash left.
fn attempt(
    op: &Operation,
    base: &Path,
    setup: &Setup,
    dir: &Path,
    fault: Option<(faults::Point, u64, faults::Kind)>,
    tally: &mut Tally,
) -> [u64; 4] {
    copy_files(base, &dir.join("live"));
    let state = open(&dir.join("live"));
    let project = resolve_project(&state, "/sweep/project", NOW).unwrap();
    let store = Store::new(&state, project.as_deref());
    let mut expected = dump(state.file_conn().unwrap()).unwrap();
    match fault {
        Some((point, n, kind)) => faults::arm(point, n, kind),
        None => faults::count(),
    }
    let mut rejected_at = None;
    for (index, step) in op.steps.iter().enumerate() {
        let outcome = step(&store, setup);
        let live = faults::paused(|| dump(state.file_conn().unwrap()));
        match outcome {
            Ok(()) => {
                tally.acknowledged += 1;
                expected = live.expect("a dump after a call that returned");
            }
            Err(error) => {
                assert!(fault.is_some(), "{}: step {index} failed: {error}", op.name);
                tally.rejected += 1;
                rejected_at = Some((index, error));
                if let Ok(live) = live {
                    if live != expected {
                        tally.failures.push(format!(
                            "{} {fault:?}: step {index} failed and changed the live database",
                            op.name
                        ));
                    }
                }
                break;
            }
        }
    }
    let seen = faults::POINTS.map(faults::seen);
    tally.fired += u64::from(faults::disarm());
    tally.attempts += 1;
    // The crash: the files as they are now, while the connection is still open.
    copy_files(&dir.join("live"), &dir.join("crashed"));
    drop(state);
    let crashed = Connection::open(dir.join("crashed/state.sqlite")).unwrap();
    let integrity: String = crashed
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    let violations = crashed
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |_| Ok(()))
        .unwrap()
        .count();
    let recovered = dump(&crashed).unwrap();
    let recovered_rows = row_counts(&crashed).unwrap();
    drop(crashed);
    let label = format!("{} {fault:?} (rejected: {rejected_at:?})", op.name);
    if integrity != "ok" || violations != 0 {
        tally.failures.push(format!(
            "{label}: integrity {integrity}, {violations} foreign-key violations"
        ));
    }
    if recovered != expected {
        let synced_after_commit = matches!(fault, Some((faults::Point::Sync, _, _)));
        if let (Some((index, _)), true) = (&rejected_at, synced_after_commit) {
            // A commit whose frames were all written but whose sync failed is reported failed
            // and stays invisible to the live connection, yet recovery finds it in the WAL:
            // plain SQLite (and so the reference) leaves it so too. It must be there whole:
            // every table holds as many rows as after the same calls without a fault (the
            // values differ by their random ids and tokens).
            tally.indeterminate += 1;
            if recovered_rows != rows_after(op, base, setup, &dir.join("twin"), *index) {
                tally
                    .failures
                    .push(format!("{label}: a failed-sync call came back in part"));
            }
        } else if rejected_at.is_some() {
            tally.resurrected += 1;
            tally
                .failures
                .push(format!("{label}: a rejected call came back"));
        } else {
            tally.lost += 1;
            tally
                .failures
                .push(format!("{label}: an acknowledged call was lost"));
        }
    }
    // The copy opens as a state database (verification, prune) and stays whole.
    vfs::use_for_thread(None);
    let reopened = StateDb::open(OpenOptions {
        file_path: dir.join("crashed/state.sqlite"),
        mode: Mode::ReadWrite,
        now: NOW,
    });
    match reopened {
        Ok(reopened) => {
            if let Err(error) = reopened.integrity_check() {
                tally.failures.push(format!("{label}: reopened: {error}"));
            }
        }
        Err(error) => tally
            .failures
            .push(format!("{label}: reopen failed: {error}")),
    }
    seen
}

/// Rows per table.
fn row_counts(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    tables
        .into_iter()
        .map(|table| {
            let rows = conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |row| {
                row.get(0)
            })?;
            Ok((table, rows))
        })
        .collect()
}

/// Rows per table after steps `0..=last` without a fault, on a fresh copy of the setup file
/// (through the VFS the attempt used).
fn rows_after(
    op: &Operation,
    base: &Path,
    setup: &Setup,
    dir: &Path,
    last: usize,
) -> Vec<(String, i64)> {
    copy_files(base, dir);
    let state = open(dir);
    let project = resolve_project(&state, "/sweep/project", NOW).unwrap();
    let store = Store::new(&state, project.as_deref());
    for step in &op.steps[..=last] {
        step(&store, setup).expect("the same calls without a fault");
    }
    row_counts(state.file_conn().unwrap()).unwrap()
}

fn sweep(vfs_name: &'static CStr, full: bool) -> (Tally, Vec<String>) {
    let scratch = Scratch::new(&format!("fault-sweep-{}", vfs_name.to_string_lossy()));
    let root = scratch.path();
    let mut tally = Tally::default();
    let mut lines = Vec::new();
    for (number, op) in OPERATIONS.iter().enumerate() {
        let base = root.join(format!("base-{number}"));
        vfs::use_for_thread(Some(vfs_name));
        let setup = {
            let state = open(&base);
            let project = resolve_project(&state, "/sweep/project", NOW).unwrap();
            (op.setup)(&Store::new(&state, project.as_deref())).expect("setup")
        };
        vfs::use_for_thread(Some(vfs_name));
        let counts = attempt(
            op,
            &base,
            &setup,
            &root.join(format!("count-{number}")),
            None,
            &mut tally,
        );
        let mut tried = 0;
        for (point, &total) in faults::POINTS.iter().zip(&counts) {
            let ns: Vec<u64> = if full || total <= QUICK_POINTS {
                (1..=total).collect()
            } else {
                (0..QUICK_POINTS)
                    .map(|i| 1 + i * (total - 1) / (QUICK_POINTS - 1))
                    .collect()
            };
            for kind in faults::KINDS {
                for &n in &ns {
                    vfs::use_for_thread(Some(vfs_name));
                    let dir = root.join(format!("{number}-{point:?}-{kind:?}-{n}"));
                    attempt(op, &base, &setup, &dir, Some((*point, n, kind)), &mut tally);
                    let _ = std::fs::remove_dir_all(&dir);
                    tried += 1;
                }
            }
        }
        lines.push(format!(
            "{}: {} writes, {} syncs, {} truncates, {} locks; {tried} faulted runs",
            op.name, counts[0], counts[1], counts[2], counts[3]
        ));
    }
    vfs::use_default_for_thread();
    (tally, lines)
}

fn run_sweep(vfs_name: &'static CStr, label: &str) {
    let full = std::env::var("PIW_FAULT_SWEEP").is_ok_and(|mode| mode == "full");
    let (tally, lines) = sweep(vfs_name, full);
    println!(
        "fault sweep over {label} ({}): {} operations, {} runs ({} faults fired), {} calls returned, {} failed; {} resurrected, {} lost, {} failed syncs whose commit came back whole",
        if full { "full" } else { "quick" },
        OPERATIONS.len(),
        tally.attempts,
        tally.fired,
        tally.acknowledged,
        tally.rejected,
        tally.resurrected,
        tally.lost,
        tally.indeterminate
    );
    for line in lines {
        println!("  {line}");
    }
    assert!(tally.failures.is_empty(), "{label}: {:#?}", tally.failures);
}

#[test]
fn faults_over_plain_sqlite_lose_and_resurrect_nothing() {
    run_sweep(faults::name(), "plain unix");
}
