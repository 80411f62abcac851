//! A state database's open options as the JS layer sends them (JSON): a file's, or a dqlite
//! cluster's, whose whole open runs again within its reconnect deadline.

use std::path::PathBuf;

use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::state::{self, Mode, OpenOptions, StateDb};

pub(super) fn parse_json(text: &str) -> Result<Value> {
    state::json::parse(text)
        .map_err(|error| StoreError::plain(format!("Invalid JSON from the JS layer: {error}")))
}

/// Opens the state database on the dqlite cluster of `options.cluster` (`{url, mode, now,
/// connectTimeoutMs, requestTimeoutMs, reconnectDeadlineMs, maxReplyRows, maxReplyBytes}`; the
/// JS layer checked the types). The whole open, its reruns included, ends by
/// `reconnectDeadlineMs` from now.
pub(crate) fn open_cluster(options: &Value) -> Result<StateDb> {
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

pub(super) fn parse_open_options(options_json: &str) -> Result<OpenOptions> {
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
