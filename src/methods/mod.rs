//! What a store method is, and the router that runs one. [`METHODS`] (table.rs) is the one list
//! of the store's public methods, in the reference class's declaration order, and a row says
//! everything a method is: its name, where the reference declares its types ([`Declared`]:
//! index.d.ts follows the same split), whether it only reads ([`Access`]: on a cluster a read
//! runs again after a lost COMMIT acknowledgement, src/sql/retry.rs), what the JS layer
//! converts around the call ([`Conversions`], which lib/methods.js compiles at load from
//! [`js_table`]) and its handler ([`Handler`], named with the shape it takes and answers, so
//! that no domain module needs an adapter per method). The JS layer names a call's method by
//! its position in the table ([`dispatch_at`]), so no name is matched per call.
//!
//! Adding a method: its row in table.rs, its handler in its domain module, its declaration in
//! index.d.ts (then `node scripts/async-types.js`) and its section in docs/api.md (and its line
//! in docs/cluster.md's "Lost acknowledgements"); __test__/types.spec.ts and
//! __test__/api-docs.spec.ts fail while any of them disagree.
//!
//! A handler reads the call's arguments in the reference's order and, for a write, opens the
//! call's one transaction itself through [`Store::write`] (src/store.rs), the one place a
//! transaction begins.

use serde_json::{json, Value};

use crate::error::{Result, StoreError};
use crate::js::Js;
pub use crate::sql::retry::Access;
use crate::store::Store;
use crate::wire::{Call, Reply};
use Handler::{Bool, Direct, List, Record, Reservation};

mod table;
pub use table::METHODS;

/// One public method.
pub struct Method {
    /// The method's name on `SqliteControllerStore`.
    pub name: &'static str,
    /// Where the reference declares the method's types.
    pub declared: Declared,
    /// Whether it only reads: on a cluster a read runs again after a COMMIT whose
    /// acknowledgement was lost (src/sql/retry.rs; docs/cluster.md lists the same).
    pub access: Access,
    /// What the JS layer does before and after the core runs it.
    pub js: Conversions,
    /// Unpacks the arguments and runs the method in its domain module. Every argument is read
    /// through `crate::js::Js`: live through napi in a synchronous call (src/js/live.rs), from
    /// the JS layer's snapshot in a `store.async` one.
    pub run: Handler,
}

/// The declaration of the reference that a method's types (index.d.ts) come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Declared {
    /// The `ControllerStore` interface (the reference's src/controllers/store.ts), which the
    /// class implements.
    ControllerStore,
    /// The class `SqliteControllerStore` alone (src/controllers/sqlite.ts): the run methods.
    SqliteControllerStore,
}

/// A method's handler, by the shape it takes the call in and what it answers.
pub enum Handler {
    /// Reads its own arguments and answers the call.
    Direct(fn(&Store<'_>, &Call) -> Result<Reply>),
    /// Reads its own arguments and answers `true` or `false`.
    Bool(fn(&Store<'_>, &Call) -> Result<bool>),
    /// One record by its first argument (an id): the record's JSON text, or `undefined`.
    Record(fn(&Store<'_>, Js<'_>) -> Result<Option<String>>),
    /// A list by its first argument (the options): the list's JSON text.
    List(fn(&Store<'_>, Js<'_>) -> Result<String>),
    /// A run's reservation by its first argument (the options), with the call for the
    /// conversions a `store.async` call's JS layer made.
    Reservation(fn(&Store<'_>, &Call, Js<'_>) -> Result<Reply>),
}

impl Handler {
    fn run(&self, store: &Store<'_>, call: &Call) -> Result<Reply> {
        match self {
            Direct(run) => run(store, call),
            Bool(run) => run(store, call).map(Reply::value),
            Record(run) => run(store, Js::arg(call, 0)).map(Reply::maybe_text),
            List(run) => run(store, Js::arg(call, 0)).map(Reply::json_text),
            Reservation(run) => run(store, call, Js::arg(call, 0)),
        }
    }
}

/// The JS layer's work around one call. Paths are `argIndex` or `argIndex.property`.
pub struct Conversions {
    /// Timestamps read with `new Date(value ?? now)`; sent as epoch ms, or null if invalid.
    pub time: &'static [&'static str],
    /// Timestamps read with `Date.parse(value)`; sent as epoch ms, or null if NaN.
    pub date: &'static [&'static str],
    /// Caller JSON documents; sent as canonical-JSON envelopes.
    pub json: &'static [&'static str],
    /// The claim object the method may update in place (`resourceVersion`, `expiresAt`).
    pub claim: Option<&'static str>,
    /// The record's `payload` is the caller's own payload object (`?? {}`).
    pub echo: Option<&'static str>,
    /// Record properties that are the caller's own `args[0][name]`, as they are.
    pub echo_props: &'static [&'static str],
    /// `(now, ms)`: the lease expiry `now + leaseMs` (JavaScript's `+`, after `now` went
    /// through `time`) and `new Date(that).toISOString()`, sent in place of `ms` as
    /// `{$lease: {sum, iso}}`; what either threw is sent as `{$error}` in its place.
    pub lease: Option<(&'static str, &'static str)>,
}

/// Runs the public method at `index` of [`METHODS`].
pub fn dispatch_at(store: &Store<'_>, index: u32, call: &Call) -> Result<Reply> {
    match (
        METHODS.get(index as usize),
        store.state.cluster_reconnect_deadline(),
    ) {
        (Some(method), Some(window)) => {
            crate::sql::retry::with_reruns(method.access, window, || method.run.run(store, call))
        }
        (Some(method), None) => method.run.run(store, call),
        (None, _) => Err(StoreError::plain(format!("Unknown store method: #{index}"))),
    }
}

/// Runs the public method called `name` (the crate's tests name methods).
#[cfg(test)]
pub fn dispatch(store: &Store<'_>, name: &str, call: &Call) -> Result<Reply> {
    let index = METHODS
        .iter()
        .position(|method| method.name == name)
        .unwrap_or_else(|| panic!("Unknown store method: {name}"));
    dispatch_at(store, index as u32, call)
}

/// The table as the JS layer (and its tests) read it: `[{name, declared, reads, time, date,
/// json, claim, echo, echoProps, lease}]`, with `declared` the name of the reference's
/// declaration, absent conversions as empty lists or `null` and `lease` as `{now, ms}`.
pub fn js_table() -> String {
    let table: Vec<Value> = METHODS
        .iter()
        .map(
            |Method {
                 name,
                 declared,
                 access,
                 js,
                 ..
             }| {
                json!({
                    "name": name,
                    "declared": format!("{declared:?}"),
                    "reads": *access == Access::Read,
                    "time": js.time,
                    "date": js.date,
                    "json": js.json,
                    "claim": js.claim,
                    "echo": js.echo,
                    "echoProps": js.echo_props,
                    "lease": js.lease.map(|(now, ms)| json!({ "now": now, "ms": ms })),
                })
            },
        )
        .collect();
    Value::Array(table).to_string()
}
