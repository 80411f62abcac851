//! pi-workflows-native: a Rust implementation of the `SqliteControllerStore` of
//! @osolmaz/pi-workflows 0.16.1, exposed to Node through napi-rs.
//!
//! This file holds the napi surface only: `NativeState` (one state database connection, shared
//! by a JS `StateDatabase` and the stores built on it) and `NativeStore` (a store bound to a
//! project). Every method returns one string: a result's JSON, `""` for `undefined`, `~{…}` when
//! a store method changed the caller's claim in place, or `!{…}` for an error that `index.js`
//! rethrows as the reference's error class. Panics are caught and reported as errors; an open
//! transaction is rolled back first, so a panic never leaves the file half-written.
#![deny(clippy::all)]
// Errors carry the JSON values the reference interpolates; they are rare, so size is no concern.
#![allow(clippy::result_large_err)]

pub mod connection;
pub mod controller;
pub mod error;
pub mod js;
pub mod methods;
pub mod runs;
pub mod sql;
pub mod state;
pub mod store;
pub mod time;
pub mod trace;
pub mod wire;

#[cfg(test)]
mod cluster_fault_tests;
#[cfg(test)]
mod fault_sweep_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod test_support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::{AsyncTask, Buffer, Unknown};
use napi::{Env, JsValue, Task};
use napi_derive::napi;
use serde_json::{json, Value};

use error::{Result, StoreError};
use state::blobs::{self, MEDIA_JSON, MEDIA_TEXT};
use state::{Mode, OpenOptions, SharedState, StateDb};
use store::Store;
use wire::{encode_error, Call};

thread_local! {
    /// The states whose lock this thread holds for a call now running, with the state each
    /// call runs on (see [`reentered`]).
    static HELD: std::cell::RefCell<Vec<(usize, *const StateDb)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The state this thread is already running a call on, when it is `state`: a getter, a Proxy
/// trap or a coercion of a live call's arguments called the same database again. Its mutex is
/// held by that call (waiting for it would never end), so the nested call runs on the same
/// connection, as the reference's nested call runs on its one better-sqlite3 connection: a
/// read sees the outer call's uncommitted rows, a write's `BEGIN IMMEDIATE` inside the outer
/// transaction fails and rolls it back (`StateDb::write`), as the reference's does.
fn reentered(state: &SharedState) -> Option<*const StateDb> {
    let key = Arc::as_ptr(state) as usize;
    HELD.with(|held| {
        held.borrow()
            .iter()
            .rev()
            .find(|(held, _)| *held == key)
            .map(|(_, db)| *db)
    })
}

/// better-sqlite3's TypeError for a connection in use (what closing it from inside one of its
/// own calls answers here: the outer call still holds the connection).
fn busy() -> StoreError {
    StoreError::Type("This database connection is busy executing a query".into())
}

/// Marks `state` as held by this thread, running on `db`, for as long as it lives.
struct Held(usize);

impl Held {
    fn mark(state: &SharedState, db: &StateDb) -> Held {
        let key = Arc::as_ptr(state) as usize;
        HELD.with(|held| held.borrow_mut().push((key, db as *const StateDb)));
        Held(key)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|(key, _)| *key == self.0) {
                held.remove(at);
            }
        });
    }
}

/// Runs `read` on `state`: on the state of the call this thread is inside (a re-entrant call,
/// see [`reentered`]) or with its lock taken.
fn with_state<T>(state: &SharedState, read: impl FnOnce(&StateDb) -> T) -> T {
    match reentered(state) {
        // SAFETY: the outer call's guard lives until its `Held` mark is dropped, on this thread,
        // after this nested call returns; both calls only take `&StateDb`.
        Some(db) => read(unsafe { &*db }),
        None => read(&lock(state)),
    }
}

/// Runs `operation` on the locked state (or, re-entered, on the state of the call this thread
/// is inside), turning errors and panics into the error wire form.
fn guarded(state: &SharedState, operation: impl FnOnce(&StateDb) -> Result<String>) -> String {
    match reentered(state) {
        // SAFETY: as in [`with_state`].
        Some(db) => run_guarded(state, unsafe { &*db }, operation),
        None => run_guarded(state, &lock(state), operation),
    }
}

fn run_guarded(
    state: &SharedState,
    db: &StateDb,
    operation: impl FnOnce(&StateDb) -> Result<String>,
) -> String {
    let _held = Held::mark(state, db);
    let outcome = catch_unwind(AssertUnwindSafe(|| db.as_one_call(|| operation(db))));
    match outcome {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => encode_error(&error),
        Err(panic) => {
            // The connection as it is: a prune failure not reported yet stays for the next call.
            if let Ok(conn) = db.conn_before_prune() {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
            }
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            encode_error(&StoreError::plain(format!(
                "pi-workflows-native internal error: {detail}"
            )))
        }
    }
}

fn lock(state: &SharedState) -> MutexGuard<'_, StateDb> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn json_reply(value: Value) -> Result<String> {
    Ok(wire::json_text(&value))
}

/// One state database connection (`StateDatabase` in the JS layer).
#[napi]
pub struct NativeState {
    state: Option<SharedState>,
    /// On a cluster, this host's offset from the leader's clock (read without the state's lock).
    clock: Option<Arc<sql::cluster_clock::ClusterClock>>,
}

#[napi]
impl NativeState {
    /// Opens the state file; throws an encoded error (`!{…}`) as the message on failure.
    #[napi(factory, catch_unwind)]
    pub fn open(options_json: String) -> napi::Result<NativeState> {
        match parse_json(&options_json).and_then(|options| match options.get("cluster") {
            Some(_) => open_cluster(&options),
            None => parse_open_options(&options_json).and_then(StateDb::open),
        }) {
            Ok(state) => Ok(NativeState {
                // Without waiting for a file's open prune (nor taking its report: the first
                // call owes it to the caller).
                clock: state
                    .conn_before_prune()
                    .ok()
                    .and_then(|db| db.remote())
                    .map(|remote| remote.clock().clone()),
                state: Some(Arc::new(Mutex::new(state))),
            }),
            Err(error) => Err(napi::Error::from_reason(encode_error(&error))),
        }
    }

    fn shared(&self) -> &SharedState {
        self.state
            .as_ref()
            .expect("NativeState is always opened by its factory")
    }

    /// Closes the connection; every store built on this state sees it closed (TypeError on use).
    /// Replies `""`, or the error of the open's blob prune (`!{…}`) when it failed and no call
    /// reported it yet: the connection is closed either way.
    #[napi(catch_unwind)]
    pub fn close(&self) -> String {
        if reentered(self.shared()).is_some() {
            return encode_error(&busy());
        }
        match lock(self.shared()).close() {
            Ok(()) => String::new(),
            Err(error) => encode_error(&error),
        }
    }

    /// On a cluster, the ms to add to the caller's clock for a call that passes no `now`: this
    /// host's offset from the leader's clock (src/sql/cluster_clock.rs); 0 for a file.
    #[napi]
    pub fn clock_offset(&self) -> f64 {
        self.clock
            .as_ref()
            .map_or(0.0, |clock| clock.offset_ms() as f64)
    }

    /// How many leader connections had their clock measured (0 for a file): when it changes,
    /// the JS layer reads [`NativeState::cluster_clock`] again.
    #[napi]
    pub fn clock_measurements(&self) -> f64 {
        self.clock
            .as_ref()
            .map_or(0.0, |clock| clock.measurements() as f64)
    }

    /// The latest measurement as JSON (`{offsetMs, measuredOffsetMs, roundTripMs, leader,
    /// measurements}`); `null` for a file.
    #[napi]
    pub fn cluster_clock(&self) -> Option<String> {
        let reading = self.clock.as_ref()?.reading()?;
        Some(
            json!({
                "offsetMs": reading.offset_ms,
                "measuredOffsetMs": reading.measured_offset_ms,
                "roundTripMs": reading.round_trip_ms,
                "leader": reading.leader,
                "measurements": reading.measurements,
            })
            .to_string(),
        )
    }

    /// Whether the connection is still open (`connection.open`).
    #[napi(getter)]
    pub fn is_open(&self) -> bool {
        with_state(self.shared(), StateDb::is_open)
    }

    /// Why the run index of this connection is not used: the file at its journal's name
    /// (`<state file>-runlog`) is not this package's or not private. `null` when it is used.
    #[napi(getter)]
    pub fn runlog_refusal(&self) -> Option<String> {
        with_state(self.shared(), StateDb::runlog_refusal)
    }

    /// Whether a transaction is open on the connection (`connection.inTransaction`). The open's
    /// blob prune runs on a connection of its own, so the answer does not wait for it, and a
    /// prune failure is left for the next call to report (a getter never throws, as in
    /// better-sqlite3).
    #[napi(getter)]
    pub fn in_transaction(&self) -> bool {
        with_state(self.shared(), |state| {
            state
                .conn_before_prune()
                .map(|conn| !conn.is_autocommit())
                .unwrap_or(false)
        })
    }

    /// `connection.exec(sql)`: runs every statement of `sql`.
    #[napi(catch_unwind)]
    pub fn exec(&self, sql: String) -> String {
        guarded(self.shared(), |state| {
            connection::exec_on(state.conn()?, &sql)?;
            Ok(String::new())
        })
    }

    /// What `connection.prepare(sql)` needs to know: `{reader, readonly, columns}`.
    #[napi(catch_unwind)]
    pub fn describe(&self, sql: String) -> String {
        guarded(self.shared(), |state| {
            json_reply(connection::describe_on(state.conn()?, &sql)?)
        })
    }

    /// `statement.run(...params)` with the JS layer's encoded parameters: `{changes, lastInsertRowid}`.
    #[napi(catch_unwind)]
    pub fn run(&self, sql: String, params_json: String) -> String {
        guarded(self.shared(), |state| {
            json_reply(connection::run_on(
                state.conn()?,
                &sql,
                &parse_json(&params_json)?,
            )?)
        })
    }

    /// `statement.get/all/iterate(...params)`: `{columns, rows}` with encoded values (`first` stops after one row).
    #[napi(catch_unwind)]
    pub fn query(
        &self,
        sql: String,
        params_json: String,
        safe_integers: bool,
        first: bool,
    ) -> String {
        guarded(self.shared(), |state| {
            let limit = first.then_some(1);
            let params = parse_json(&params_json)?;
            json_reply(connection::query_on(
                state.conn()?,
                &sql,
                &params,
                safe_integers,
                limit,
            )?)
        })
    }

    /// `putBlob`: returns the hash as hex (the JS layer makes the Buffer).
    #[napi(catch_unwind)]
    pub fn put_blob(&self, content: Buffer, media_type: String, now: f64) -> String {
        guarded(self.shared(), |state| {
            if state.mode == Mode::ReadOnly {
                return Err(StoreError::plain(
                    "Cannot write a blob through a read-only Pi Workflows database",
                ));
            }
            let hash = blobs::put_blob(state.conn()?, &content, &media_type, now as i64)?;
            json_reply(Value::String(hex::encode(hash)))
        })
    }

    /// `readBlob`: `{hash, mediaType, byteLength, content}` with hex bytes, or `""`.
    #[napi(catch_unwind)]
    pub fn read_blob(&self, hash: Buffer) -> String {
        guarded(self.shared(), |state| {
            Ok(match blobs::read_blob(state.conn()?, &hash)? {
                None => String::new(),
                Some(blob) => json!({
                    "hash": hex::encode(&blob.hash),
                    "mediaType": blob.media_type,
                    "byteLength": blob.byte_length,
                    "content": hex::encode(&blob.content),
                })
                .to_string(),
            })
        })
    }

    /// `readJson`: the stored JSON text of a JSON blob (the JS layer parses and sorts it).
    #[napi(catch_unwind)]
    pub fn read_json_text(&self, hash: Buffer) -> String {
        guarded(self.shared(), |state| {
            json_reply(Value::String(blobs::read_json_text(state.conn()?, &hash)?))
        })
    }

    /// `StateDatabase.integrityCheck()`: `PRAGMA integrity_check` and `foreign_key_check`.
    #[napi(catch_unwind)]
    pub fn integrity_check(&self) -> String {
        guarded(self.shared(), |state| {
            state.integrity_check().map(|()| String::new())
        })
    }

    /// `StateDatabase.pruneUnreferencedBlobs()`: the number of blobs deleted.
    #[napi(catch_unwind)]
    pub fn prune_unreferenced_blobs(&self) -> String {
        guarded(self.shared(), |state| {
            json_reply(json!(state.prune_unreferenced_blobs()?))
        })
    }

    /// Copies the live database to `destination` with SQLite's online backup.
    #[napi(catch_unwind)]
    pub fn backup_to(&self, destination: String) -> String {
        guarded(self.shared(), |state| {
            state.backup_to(std::path::Path::new(&destination))?;
            Ok(String::new())
        })
    }

    /// The media types the core writes into `blobs.media_type`, JSON then text:
    /// `lib/state-database.js` takes its `putJson`/`putText` spellings from here.
    #[napi]
    pub fn media_types() -> Vec<String> {
        vec![MEDIA_JSON.into(), MEDIA_TEXT.into()]
    }
}

/// A store bound to one project (or the global view) on a `NativeState`.
#[napi]
pub struct NativeStore {
    state: SharedState,
    project_id: Option<String>,
}

#[napi]
impl NativeStore {
    /// Binds a store to `state`; registers (read-write) or looks up (read-only) the project.
    /// `within_open`: the state was opened by the same constructor, whose deadline on a cluster
    /// the registration shares. Throws an encoded error (`!{…}`) as the message on failure.
    #[napi(factory, catch_unwind)]
    pub fn open(
        state: &NativeState,
        project_path: Option<String>,
        now: f64,
        within_open: Option<bool>,
    ) -> napi::Result<NativeStore> {
        let shared = state.shared().clone();
        let project = match project_path {
            None => Ok(None),
            Some(path) => with_state(&shared, |state| {
                let register = || store::resolve_project(state, &path, now as i64);
                if within_open == Some(true) {
                    state.within_open(register)
                } else {
                    state.as_one_call(register)
                }
            }),
        };
        match project {
            Ok(project_id) => Ok(NativeStore {
                state: shared,
                project_id,
            }),
            Err(error) => Err(napi::Error::from_reason(encode_error(&error))),
        }
    }

    /// Runs the public store method at position `method` of `methodTable()` with the caller's
    /// own arguments (`args`: the public method's rest array): the core reads them through napi
    /// as the reference's code reads them (src/js/live/). See the module header for the reply
    /// encoding; when JavaScript threw while the core read or coerced a value, the call fails
    /// as every error does (its transaction rolled back) and that very value is thrown.
    #[napi(catch_unwind)]
    pub fn call_live(&self, env: Env, method: u32, args: Unknown<'_>, clock: f64) -> String {
        let raw_env = env.raw();
        // SAFETY: the env of this callback; `cx` (owned by `call`) is dropped before it returns.
        let cx = unsafe { js::Cx::new(raw_env) };
        let list = args.raw();
        let mut length = 0u32;
        let mut items = Vec::new();
        // SAFETY: `list` is the JS layer's own array of this callback.
        unsafe {
            napi::sys::napi_get_array_length(raw_env, list, &mut length);
            for index in 0..length {
                let mut item = std::ptr::null_mut();
                napi::sys::napi_get_element(raw_env, list, index, &mut item);
                items.push(item);
            }
        }
        let call = Call::live(cx, items, clock as i64);
        let thrown = std::cell::Cell::new(None);
        let reply = guarded(&self.state, |state| {
            let store = Store::new(state, self.project_id.as_deref());
            match methods::dispatch_at(&store, method, &call) {
                Ok(reply) => {
                    // SAFETY: `list` and the echoed handles are this callback's.
                    unsafe { set_echo(raw_env, list, &reply.echo) };
                    Ok(reply.encode())
                }
                Err(StoreError::Thrown(value)) => {
                    thrown.set(Some(value));
                    Ok(String::new())
                }
                Err(error) => Err(error),
            }
        });
        if let Some(value) = thrown.get() {
            // SAFETY: a handle of this callback (taken off the isolate by `Cx::check`).
            unsafe { napi::sys::napi_throw(raw_env, value as napi::sys::napi_value) };
        }
        reply
    }

    /// A `store.async` call on a libuv worker thread: resolves to `callLive`'s reply for the
    /// arguments the JS layer read on the main thread before it queued the call (lib/wire.js's
    /// snapshot, every value that JSON cannot carry tagged); it decodes the reply there too.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn call_async(&self, method: u32, args_json: String, clock: f64) -> AsyncTask<StoreCall> {
        AsyncTask::new(StoreCall {
            state: self.state.clone(),
            project_id: self.project_id.clone(),
            method,
            args_json,
            clock,
        })
    }
}

fn run_store_call(
    state: &SharedState,
    project_id: Option<&str>,
    method: u32,
    args_json: &str,
    clock: f64,
) -> String {
    guarded(state, |state| {
        // lib/wire.js tags every string JSON cannot carry (a lone surrogate), so the snapshot
        // always parses.
        let Ok(Value::Array(args)) = serde_json::from_str(args_json) else {
            return Err(StoreError::plain("Store arguments are not a JSON array"));
        };
        let store = Store::new(state, project_id);
        let reply = methods::dispatch_at(&store, method, &Call::new(args, clock as i64))?;
        Ok(reply.encode())
    })
}

/// One store call for the libuv thread pool; it holds the state mutex while it runs, so calls
/// on one database never overlap.
pub struct StoreCall {
    state: SharedState,
    project_id: Option<String>,
    method: u32,
    args_json: String,
    clock: f64,
}

impl Task for StoreCall {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        Ok(run_store_call(
            &self.state,
            self.project_id.as_deref(),
            self.method,
            &self.args_json,
            self.clock,
        ))
    }

    fn resolve(&mut self, _env: Env, reply: String) -> napi::Result<String> {
        Ok(reply)
    }
}

/// Registers the JS layer's helpers (`lib/computed.js`) that live calls call where the
/// reference's code computes in JavaScript (src/js/computed.rs).
#[napi]
pub fn set_helpers(env: Env, helpers: Unknown<'_>) {
    // SAFETY: both belong to this callback.
    unsafe { js::live::set_helpers(env.raw(), helpers.raw()) };
}

/// Bench only: records every statement of connections opened from now on into `path`, or
/// stops recording with `null` (see src/trace.rs).
#[napi]
pub fn record_statements(path: Option<String>) -> napi::Result<()> {
    trace::record_to(path.as_deref()).map_err(|error| napi::Error::from_reason(error.to_string()))
}

/// Bench only: labels the statements recorded from now on (`""`: untimed).
#[napi]
pub fn record_mark(label: String) {
    trace::mark(&label);
}

/// Bench only: the CPU time of the calling thread so far, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`; `-1` where the platform has no such clock). bench:scale reads it
/// around each timed call, so that a poll's cost can be read apart from the time its thread
/// spent descheduled while other processes ran.
#[napi]
pub fn thread_cpu_time_ns() -> f64 {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec for the call to fill.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0 {
            return now.tv_sec as f64 * 1e9 + now.tv_nsec as f64;
        }
    }
    -1.0
}

/// The store's public methods in call-index order, with what the JS layer converts around each
/// (JSON: see [`methods::js_table`]); lib/methods.js compiles it at load.
#[napi]
pub fn method_table() -> String {
    methods::js_table()
}

fn parse_json(text: &str) -> Result<Value> {
    state::json::parse(text)
        .map_err(|error| StoreError::plain(format!("Invalid JSON from the JS layer: {error}")))
}

/// Opens the state database on the dqlite cluster of `options.cluster` (`{url, mode, now,
/// connectTimeoutMs, requestTimeoutMs, reconnectDeadlineMs, maxReplyRows, maxReplyBytes}`; the
/// JS layer checked the types). The whole open, its reruns included, ends by
/// `reconnectDeadlineMs` from now.
fn open_cluster(options: &Value) -> Result<StateDb> {
    let cluster = &options["cluster"];
    let url = cluster["url"]
        .as_str()
        .ok_or_else(|| StoreError::plain("cluster.url is required"))?;
    let ms = |name: &str| cluster[name].as_u64().map(std::time::Duration::from_millis);
    let mut config = dqlite_wire::Config {
        // A leader found within a quarter second of its election: the rounds are a few
        // connections on the nodes' port, cheap even every 250 ms.
        backoff_max: std::time::Duration::from_millis(250),
        // A store's nodes run already: addresses that cannot work are a configuration error,
        // reported at once.
        fail_fast: true,
        ..dqlite_wire::Config::default()
    };
    if let Some(timeout) = ms("connectTimeoutMs") {
        config.timeouts.connect = timeout;
    }
    if let Some(timeout) = ms("requestTimeoutMs") {
        config.timeouts.request = timeout;
    }
    if let Some(deadline) = ms("reconnectDeadlineMs") {
        config.reconnect_deadline = deadline;
    }
    if let Some(rows) = cluster["maxReplyRows"].as_u64() {
        config.reply_limits.rows = rows;
    }
    if let Some(bytes) = cluster["maxReplyBytes"].as_u64() {
        config.reply_limits.bytes = bytes;
    }
    let mode = if options["mode"].as_str() == Some("read-only") {
        Mode::ReadOnly
    } else {
        Mode::ReadWrite
    };
    let now = options["now"].as_i64().unwrap_or(0);
    let deadline = std::time::Instant::now() + config.reconnect_deadline;
    crate::sql::retry::with_reruns(crate::sql::retry::OPEN, config.reconnect_deadline, || {
        StateDb::open_cluster(url, config.clone(), mode, now, deadline)
    })
}

fn parse_open_options(options_json: &str) -> Result<OpenOptions> {
    let options = parse_json(options_json)?;
    let text = |name: &str| options.get(name).and_then(Value::as_str).map(str::to_owned);
    let file_path = text("filePath").ok_or_else(|| StoreError::plain("filePath is required"))?;
    let mode = if text("mode").as_deref() == Some("read-only") {
        Mode::ReadOnly
    } else {
        Mode::ReadWrite
    };
    Ok(OpenOptions {
        file_path: PathBuf::from(file_path),
        mode,
        now: options.get("now").and_then(Value::as_i64).unwrap_or(0),
    })
}

/// Hands the reply's echoed handles to the JS layer as `list.$echo = {key: value, …}` (the
/// JS layer's own argument list: the caller never sees it).
///
/// # Safety
/// `env`, `list` and every handle in `echo` must be of the current callback.
unsafe fn set_echo(
    env: napi::sys::napi_env,
    list: napi::sys::napi_value,
    echo: &[(&'static str, js::Raw)],
) {
    if echo.is_empty() {
        return;
    }
    let mut object = std::ptr::null_mut();
    napi::sys::napi_create_object(env, &mut object);
    for (key, value) in echo {
        if let Ok(name) = std::ffi::CString::new(*key) {
            napi::sys::napi_set_named_property(env, object, name.as_ptr(), *value);
        }
    }
    napi::sys::napi_set_named_property(env, list, c"$echo".as_ptr(), object);
}
