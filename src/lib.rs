//! pi-workflows-native: a Rust implementation of the `SqliteControllerStore` of
//! @osolmaz/pi-workflows 0.16.1, exposed to Node through napi-rs.
//!
//! This file holds the napi surface only. Each call arrives as a method name and a JSON array of
//! arguments prepared by `index.js`, runs in the core, and returns one string: the result's JSON,
//! `""` for `undefined`, `~{…}` when the caller's claim changed in place, or `!{…}` for an error
//! that `index.js` rethrows as the reference's error class.
#![deny(clippy::all)]

pub mod controller;
pub mod error;
pub mod runs;
pub mod state;
pub mod store;
pub mod time;
pub mod wire;

use std::path::PathBuf;

use napi_derive::napi;
use serde_json::Value;

use error::StoreError;
use state::{Mode, OpenOptions};
use store::{Store, StoreOptions};
use wire::{encode_error, field, Call};

/// One store connection. Created empty, then `open`ed; `close` is idempotent.
#[napi]
pub struct NativeStore {
    store: Option<Store>,
}

impl Default for NativeStore {
    fn default() -> Self {
        Self::new()
    }
}

#[napi]
impl NativeStore {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeStore { store: None }
    }

    /// Opens the state file; returns `""` or an encoded error.
    #[napi(catch_unwind)]
    pub fn open(&mut self, options_json: String) -> String {
        match parse_open_options(&options_json).and_then(Store::open) {
            Ok(store) => {
                self.store = Some(store);
                String::new()
            }
            Err(error) => encode_error(&error),
        }
    }

    /// Runs one public store method; see the module header for the reply encoding.
    #[napi(catch_unwind)]
    pub fn call(&self, method: String, args_json: String, clock: f64) -> String {
        let Some(store) = self.store.as_ref() else {
            return encode_error(&StoreError::closed());
        };
        let args = match serde_json::from_str::<Value>(&args_json) {
            Ok(Value::Array(args)) => args,
            _ => return encode_error(&StoreError::plain("Store arguments are not a JSON array")),
        };
        let call = Call::new(args, clock as i64);
        match store::dispatch(store, &method, &call) {
            Ok(reply) => reply.encode(),
            Err(error) => encode_error(&error),
        }
    }

    #[napi(catch_unwind)]
    pub fn close(&mut self) {
        if let Some(store) = self.store.as_mut() {
            store.close();
        }
    }
}

/// The names of the store methods the core implements.
#[napi]
pub fn implemented_methods() -> Vec<String> {
    store::implemented_methods()
        .into_iter()
        .map(String::from)
        .collect()
}

fn parse_open_options(options_json: &str) -> error::Result<StoreOptions> {
    let options: Value = serde_json::from_str(options_json)
        .map_err(|error| StoreError::plain(format!("Store options are invalid: {error}")))?;
    let text = |name: &str| field(&options, name).as_str().map(str::to_owned);
    let file_path = text("filePath").ok_or_else(|| StoreError::plain("filePath is required"))?;
    let mode = if text("mode").as_deref() == Some("read-only") {
        Mode::ReadOnly
    } else {
        Mode::ReadWrite
    };
    Ok(StoreOptions {
        state: OpenOptions {
            file_path: PathBuf::from(file_path),
            mode,
            check_legacy_state: field(&options, "checkLegacyState")
                .as_bool()
                .unwrap_or(false),
            home_dir: PathBuf::from(text("homeDir").unwrap_or_default()),
            now: field(&options, "now").as_i64().unwrap_or(0),
        },
        project_path: text("projectPath"),
    })
}
