//! `NativeState`: one state database connection (`StateDatabase` in the JS layer): its open and
//! close, the cluster clock, raw SQL for `state.connection` (src/connection.rs) and the blob
//! methods.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::{json, Value};

use super::guard::{busy, guarded, lock, reentered, with_state};
use super::open::{open_cluster, parse_json, parse_open_options};
use crate::connection;
use crate::error::{Result, StoreError};
use crate::sql;
use crate::state::blobs::{self, MEDIA_JSON, MEDIA_TEXT};
use crate::state::{Mode, SharedState, StateDb};
use crate::wire::{self, encode_error};

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

    pub(super) fn shared(&self) -> &SharedState {
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
