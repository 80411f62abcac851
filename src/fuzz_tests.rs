//! Property-based fuzzing of the Rust core below the JS layer: every store method is dispatched
//! with random and malformed argument arrays (wrong JSON types, missing and extra fields,
//! huge and fractional numbers, malformed JSON envelopes, SQL-looking and non-ASCII strings).
//! The core must never panic (debug builds also panic on integer overflow), must answer with
//! an error or a reply, and a call that fails must leave every table but `blobs` as it was.
//!
//! `PIW_RUST_FUZZ_CASES` sets the number of calls (the soak script raises it).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

use crate::methods::{dispatch, METHODS};
use crate::state::StateDb;
use crate::store::{resolve_project, Store};
use crate::test_support::{dump_tables, open_read_write};
use crate::wire::Call;

/// Methods whose reference commits a first transaction before a later step can fail.
const LEAVES_TRACE: &[&str] = &["enqueueWorkflowRun", "settleRunEffect"];

const FIELDS: &[&str] = &[
    "controller",
    "key",
    "ref",
    "spec",
    "initialStatus",
    "status",
    "claim",
    "now",
    "leaseMs",
    "ownerId",
    "controllers",
    "exclude",
    "expectedResourceVersion",
    "finalizers",
    "token",
    "generation",
    "queueVersion",
    "resourceVersion",
    "expiresAt",
    "availableAt",
    "error",
    "resourceUid",
    "kind",
    "requestFingerprint",
    "state",
    "externalRef",
    "requestKey",
    "workflow",
    "inputFingerprint",
    "runId",
    "attempt",
    "type",
    "payload",
    "limit",
    "offset",
    "workflowName",
    "workflowSourceRef",
    "workflowSource",
    "definitionDigest",
    "definitionSnapshot",
    "input",
    "launchOptions",
    "runnerId",
    "originSessionId",
    "executionMode",
    "parentRunId",
    "lineageKind",
    "restartNumber",
    "parentTerminalFingerprint",
    "claimToken",
    "sessionId",
    "excludeRunIds",
    "statuses",
    "detail",
    "errorCode",
    "errorMessage",
    "controlId",
    "targetSessionId",
    "workflowRef",
    "root",
    "mounted",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("c".to_string()),
        Just("k".to_string()),
        Just("r-1".to_string()),
        Just("host-1".to_string()),
        Just("'; DROP TABLE runs; --".to_string()),
        Just("a".repeat(600)),
        Just("a1".repeat(32)),
        Just("sha256:".to_string() + &"b2".repeat(32)),
        Just("\u{fffd}\u{0}é🙂".to_string()),
        Just("pending".to_string()),
        Just("indeterminate".to_string()),
        Just("restart".to_string()),
        Just("run.park_queue".to_string()),
        "[a-z0-9._-]{0,12}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        Just(json!(1_789_257_600_000i64)),
        Just(json!(8_640_000_000_000_000i64)),
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        Just(json!(1.5)),
        Just(json!(-0.0)),
        Just(json!(1e308)),
    ]
}

/// A JSON envelope as the JS layer sends caller documents, valid or not.
fn envelope() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"$c": "{}"})),
        Just(json!({"$c": "{\"a\":[1,2,{\"b\":null}]}"})),
        Just(json!({"$c": "null"})),
        Just(json!({"$c": "not json"})),
        Just(json!({"$c": "[[[[[[[[[[[[[[[[[[[["})),
        Just(json!({"$c": "\"\\ud800\""})),
        Just(json!({"$u": true})),
        Just(json!({"$e": "JSON numbers must be finite"})),
        Just(json!({"$c": 5})),
        text().prop_map(|text| json!({ "$c": text })),
    ]
}

/// Lists whose methods are not Array.prototype's, as `store.async`'s snapshot (lib/wire.js)
/// sends them: array-likes (a `length` and indexed properties, no `map`), objects with their
/// own `map`/`join`/`Symbol.iterator` (a function is sent as its tag), a Set, a typed array.
fn list_like() -> impl Strategy<Value = Value> {
    let function = |name: &str| json!({ "\u{0}": "function", "v": name });
    prop_oneof![
        Just(json!({ "length": 1, "0": "queued" })),
        Just(json!({ "length": 2, "0": "fz-a", "1": "k0" })),
        Just(json!({ "length": "1", "0": "queued" })),
        Just(json!({ "length": 1, "0": "queued", "map": function("map") })),
        Just(
            json!({ "length": 1, "0": "queued", "map": function("map"), "join": function("join") })
        ),
        Just(json!({ "0": "queued", "flatMap": function("flatMap") })),
        Just(json!({ "\u{0}": "object", "kind": "Set", "text": "[object Set]", "props": {} })),
        Just(
            json!({ "\u{0}": "object", "kind": "Array", "text": "queued", "props": { "0": "queued", "map": function("map") } })
        ),
        Just(json!({ "\u{0}": "bytes", "kind": "Uint8Array", "v": "0102", "text": "1,2" })),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
        envelope(),
        list_like(),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..6).prop_map(
                |entries| {
                    Value::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect::<Map<_, _>>(),
                    )
                }
            ),
        ]
    })
}

/// An options object with plausible field names and random values.
fn options() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(FIELDS), value()), 0..10).prop_map(|entries| {
        Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<Map<_, _>>(),
        )
    })
}

fn call() -> impl Strategy<Value = (String, Vec<Value>, i64)> {
    let methods: Vec<String> = METHODS
        .iter()
        .map(|method| method.name.to_string())
        .collect();
    (
        prop::sample::select(methods),
        prop::collection::vec(prop_oneof![3 => options(), 2 => value()], 0..4),
        prop_oneof![
            Just(1_789_257_600_000i64),
            any::<i64>(),
            Just(i64::MAX),
            Just(0)
        ],
    )
}

/// Every table but `blobs`, row for row.
fn dump(state: &StateDb) -> String {
    dump_tables(state.file_conn().unwrap(), |table| {
        !table.starts_with("sqlite_") && table != "blobs"
    })
    .unwrap()
}

fn open_state(dir: &std::path::Path) -> StateDb {
    let state = open_read_write(&dir.join("state.sqlite"), 1_789_257_600_000);
    // Durability is not under test here; skip the fsync of every commit.
    state
        .file_conn()
        .unwrap()
        .pragma_update(None, "synchronous", "OFF")
        .unwrap();
    state
}

/// A fresh state file with its project; replaced every few hundred calls so that the row
/// comparisons stay cheap.
struct Fixture {
    dir: std::path::PathBuf,
    state: StateDb,
    project_id: Option<String>,
    calls: u32,
}

impl Fixture {
    fn new(round: u32) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("piw-rust-fuzz-{}-{round}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = open_state(&dir);
        let project_id = resolve_project(&state, "/fuzz/project", 1_789_257_600_000).unwrap();
        Fixture {
            dir,
            state,
            project_id,
            calls: 0,
        }
    }

    fn finish(self) {
        self.state.integrity_check().unwrap();
        drop(self.state);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn every_method_survives_malformed_arguments() {
    let cases = std::env::var("PIW_RUST_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_500);
    let fixture = std::cell::RefCell::new(Fixture::new(0));
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&call(), |(method, args, clock)| {
        let mut current = fixture.borrow_mut();
        current.calls += 1;
        if current.calls > 400 {
            let round = current.calls;
            let old = std::mem::replace(&mut *current, Fixture::new(round));
            old.finish();
        }
        let state = &current.state;
        let store = Store::new(state, current.project_id.as_deref());
        let changes_before = state.file_conn().unwrap().total_changes();
        let before = dump(state);
        let reply = dispatch(&store, &method, &Call::new(args.clone(), clock));
        if let Err(error) = &reply {
            prop_assert!(!error.to_wire().to_string().is_empty());
            let changed = state.file_conn().unwrap().total_changes() != changes_before
                && dump(state) != before;
            if changed && !LEAVES_TRACE.contains(&method.as_str()) {
                return Err(TestCaseError::fail(format!(
                    "{method}({args:?}) failed with {error} and changed the database"
                )));
            }
        }
        prop_assert!(
            state.file_conn().unwrap().is_autocommit(),
            "{method} left a transaction open"
        );
        Ok(())
    });
    fixture.into_inner().finish();
    outcome.unwrap();
}

/// An array-like (a `length` and indexed properties, no `map`) or a list with its own methods,
/// sent by `store.async`'s snapshot, is never read as an array where the reference calls
/// `list.map(…)`: every list site refuses it as the reference's `.map` call does.
#[test]
fn array_likes_are_never_read_as_arrays() {
    let fixture = Fixture::new(u32::MAX);
    let store = Store::new(&fixture.state, fixture.project_id.as_deref());
    let lists = [
        json!({ "length": 1, "0": "queued" }),
        json!({ "length": "1", "0": "queued" }),
        json!({ "length": 1, "0": "queued", "join": { "\u{0}": "function", "v": "join" } }),
        json!({ "\u{0}": "object", "kind": "Set", "text": "[object Set]", "props": {} }),
    ];
    let sites = [
        ("listWorkflowRuns", "statuses", "options.statuses.map"),
        (
            "listWorkflowRuns",
            "excludeRunIds",
            "options.excludeRunIds.map",
        ),
        (
            "claimNextWorkflowRun",
            "excludeRunIds",
            "options.excludeRunIds.map",
        ),
        ("claimNext", "controllers", "options.controllers.map"),
        ("claimNext", "exclude", "exclusions.map"),
    ];
    for list in &lists {
        for (method, field, expr) in sites {
            let mut options = json!({
                "runnerId": "host-1", "claimToken": "t", "leaseMs": 1000,
                "controllers": ["jobs"], "ownerId": "w",
            });
            options[field] = list.clone();
            let reply = dispatch(&store, method, &Call::new(vec![options], 1_789_257_600_000));
            let error = reply
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default();
            // A Set has no `length`: the reference's `length > 0` test skips the list.
            let skipped =
                list.get("\u{0}").is_some() && field != "controllers" && field != "exclude";
            if skipped {
                assert!(error.is_empty(), "{method} {field} {list}: {error}");
            } else {
                assert!(
                    error.contains(&format!("{expr} is not a function")),
                    "{method} {field} {list}: {error:?}"
                );
            }
        }
    }
    fixture.finish();
}
