//! `NativeStore`: a store bound to one project on a `NativeState`, and its calls: a synchronous
//! one reads the caller's own arguments through napi (`callLive`), a `store.async` one the JS
//! layer's snapshot on a libuv worker (`callAsync`). Both run the method table's row
//! (src/methods/) under the connection's lock.

use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi::{Env, JsValue, Task};
use napi_derive::napi;
use serde_json::Value;

use super::guard::{guarded, with_state};
use super::state::NativeState;
use crate::error::StoreError;
use crate::js;
use crate::methods;
use crate::state::SharedState;
use crate::store::{self, Store};
use crate::wire::{encode_error, Call};

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

    /// `callAsync`'s call run here, on the caller's thread: a synchronous call on a cluster
    /// whose arguments are plain data (lib/plain-arguments.js), which no read can tell from
    /// their snapshot, so that its writes wait for the COMMIT as an async call's do.
    #[napi(catch_unwind)]
    pub fn call_snapshot(&self, method: u32, args_json: String, clock: f64) -> String {
        run_store_call(
            &self.state,
            self.project_id.as_deref(),
            method,
            &args_json,
            clock,
        )
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
        let store = Store::new(state, project_id).running_no_javascript();
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
