//! The store's public methods and the router that runs one. [`METHODS`] (table.rs) is the one list
//! of the store's public methods, in the reference class's declaration order, and a row says
//! everything a method is: its name, where the reference declares its types ([`Declared`]:
//! index.d.ts follows the same split), whether it only reads ([`Access`]: on a cluster a read
//! runs again after a lost COMMIT acknowledgement, src/sql/retry.rs), what the JS layer
//! converts around the call ([`Conversions`], which lib/methods.js compiles at load from
//! [`js_table`]) and its handler ([`Handler`], named with the shape it takes and answers, so
//! that no domain module needs an adapter per method); row.rs defines them. The JS layer names a call's method by
//! its position in the table ([`dispatch_at`]), so no name is matched per call.
//!
//! Adding a method: its row in table.rs, its handler in its domain module, its declaration in
//! index.d.ts (then `node scripts/async-types.js`) and its section in docs/api.md (and its line
//! in docs/cluster.md's "Lost acknowledgements"); __test__/types.spec.ts,
//! __test__/api-docs.spec.ts and __test__/method-reads.spec.ts fail while any of them disagree.
//!
//! A handler reads the call's arguments in the reference's order and, for a write, opens the
//! call's one transaction itself through [`Store::write`] (src/store.rs), the one place a
//! transaction begins.

use serde_json::{json, Value};

use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::wire::{Call, Reply};

mod row;
mod table;

pub use crate::sql::retry::Access;
pub use row::Method;
pub use table::METHODS;

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
