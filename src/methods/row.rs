//! What a row of the method table is: a method's name, declaration, access, conversions and
//! handler, and how a handler of each shape runs.

use crate::error::Result;
use crate::js::Js;
use crate::sql::retry::Access;
use crate::store::Store;
use crate::wire::{Call, Reply};
use Handler::{Bool, Direct, List, Record, Reservation};

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
    /// through `crate::js::Js`: live through napi in a synchronous call (src/js/live/), from
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
    /// Runs the handler on the call and answers it.
    #[inline]
    pub fn run(&self, store: &Store<'_>, call: &Call) -> Result<Reply> {
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
