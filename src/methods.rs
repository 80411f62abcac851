//! The one list of the store's public methods, in the reference class's declaration order: for
//! each, its name, what the JS layer converts around the call ([`Conversions`], which
//! lib/methods.js compiles at load from [`js_table`]) and the handler that runs it. The JS layer
//! names a call's method by its position here ([`dispatch_at`]), so no name is matched per call.
//!
//! The table holds only data: each row's handler is a plain `fn(&Store, &Call) -> Result<Reply>`
//! in its domain module, which reads the call's arguments in the reference's order and, for a
//! write, opens the call's one transaction itself through [`Store::write`] (src/store.rs), the
//! one place a transaction begins.

use serde_json::{json, Value};

use crate::controller::{effects, events, queue, resources, workflows};
use crate::error::{Result, StoreError};
use crate::runs::claims;
use crate::runs::{interaction, legacy, reads, reserve, run_events, settle, transitions};
use crate::store::Store;
use crate::wire::{Call, Reply};

/// One public method.
pub struct Method {
    /// The method's name on `SqliteControllerStore`.
    pub name: &'static str,
    /// What the JS layer does before and after the core runs it.
    pub js: Conversions,
    /// Unpacks the arguments and runs the method in its domain module. Every argument is read
    /// through `crate::js::Js`: live through napi in a synchronous call (src/js/live/), from
    /// the JS layer's snapshot in a `store.async` one.
    pub run: fn(&Store<'_>, &Call) -> Result<Reply>,
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

/// Nothing converted: the arguments are sent as they are.
const PLAIN: Conversions = Conversions {
    time: &[],
    date: &[],
    json: &[],
    claim: None,
    echo: None,
    echo_props: &[],
    lease: None,
};
/// `options.now` is a timestamp.
const OPTIONS_NOW: &[&str] = &["0.now"];
const NOW: Conversions = Conversions {
    time: OPTIONS_NOW,
    ..PLAIN
};
const RUN_JSON: &[&str] = &["0.definitionSnapshot", "0.input", "0.launchOptions"];
const RUN_RESERVATION: Conversions = Conversions {
    json: RUN_JSON,
    ..NOW
};

/// A method. Its conversions (timestamps, `Date.parse`, canonical JSON, the lease sum, the claim
/// changed in place) are computed in the core through `crate::js::computed` where the
/// reference computes them in a synchronous call; they stay listed for `store.async` calls,
/// whose arguments the JS layer converts before it queues them.
const fn method(
    name: &'static str,
    js: Conversions,
    run: fn(&Store<'_>, &Call) -> Result<Reply>,
) -> Method {
    Method { name, js, run }
}

/// Every public method but `close` (the JS layer's own), in the reference's order.
pub static METHODS: &[Method] = &[
    // controller resources
    method(
        "putResource",
        Conversions {
            json: &["0.spec", "0.initialStatus"],
            ..NOW
        },
        resources::put_resource,
    ),
    method("getResource", PLAIN, resources::get_resource),
    method("getResourceByUid", PLAIN, resources::get_resource_by_uid),
    method("listResources", PLAIN, resources::list_resources),
    method(
        "updateStatus",
        Conversions {
            json: &["0.status"],
            claim: Some("0.claim"),
            ..NOW
        },
        resources::update_status,
    ),
    method(
        "requestDeletion",
        Conversions {
            time: &["1"],
            ..PLAIN
        },
        resources::request_deletion,
    ),
    method("updateFinalizers", NOW, resources::update_finalizers),
    method("deleteResource", PLAIN, resources::delete_resource),
    // the work queue and its claims
    method(
        "enqueue",
        Conversions {
            time: &["1"],
            ..PLAIN
        },
        queue::enqueue,
    ),
    method(
        "claimNext",
        Conversions {
            lease: Some(("0.now", "0.leaseMs")),
            echo_props: &["ownerId"],
            ..NOW
        },
        queue::claim_next,
    ),
    method(
        "renewClaim",
        Conversions {
            time: &["2"],
            claim: Some("0"),
            lease: Some(("2", "1")),
            ..PLAIN
        },
        queue::renew_claim,
    ),
    method(
        "settleClaim",
        Conversions {
            time: &["1"],
            claim: Some("0"),
            ..PLAIN
        },
        queue::settle_claim_call,
    ),
    method(
        "requeueClaim",
        Conversions {
            time: &["2"],
            date: &["1.availableAt"],
            claim: Some("0"),
            ..PLAIN
        },
        queue::requeue_claim,
    ),
    method("listQueue", PLAIN, queue::list_queue),
    // effects
    method("reserveEffect", NOW, effects::reserve_effect),
    method("getEffect", PLAIN, effects::get_effect),
    method("updateEffect", NOW, effects::update_effect),
    method("listEffects", PLAIN, effects::list_effects),
    // child workflows
    method("reserveWorkflow", PLAIN, workflows::reserve_workflow),
    method("getWorkflow", PLAIN, workflows::get_workflow),
    method(
        "getWorkflowByRequestId",
        PLAIN,
        workflows::get_workflow_by_request_id,
    ),
    method("updateWorkflow", PLAIN, workflows::update_workflow),
    method("completeWorkflow", PLAIN, workflows::complete_workflow),
    method("listWorkflows", PLAIN, workflows::list_workflows),
    // controller events
    method(
        "recordEvent",
        Conversions {
            json: &["0.payload"],
            claim: Some("0.claim"),
            echo: Some("0.payload"),
            echo_props: &["controller", "key", "type"],
            ..NOW
        },
        events::record_event,
    ),
    method("listEvents", PLAIN, events::list_events),
    // run reservation
    method(
        "reserveWorkflowRun",
        RUN_RESERVATION,
        reserve::reserve_workflow_run_call,
    ),
    method(
        "prepareOrAdoptWorkflowRun",
        RUN_RESERVATION,
        reserve::prepare_or_adopt_workflow_run_call,
    ),
    method(
        "enqueueWorkflowRun",
        RUN_RESERVATION,
        reserve::enqueue_workflow_run_call,
    ),
    // run reads and views
    method("getWorkflowRun", PLAIN, reads::get_workflow_run_call),
    method(
        "getWorkflowRunView",
        PLAIN,
        reads::get_workflow_run_view_call,
    ),
    method(
        "workflowRunListRevision",
        PLAIN,
        reads::workflow_run_list_revision_call,
    ),
    method(
        "listWorkflowRunViews",
        PLAIN,
        reads::list_workflow_run_views_call,
    ),
    method(
        "workflowRunProjectPath",
        PLAIN,
        reads::workflow_run_project_path_call,
    ),
    method("listWorkflowRuns", PLAIN, reads::list_workflow_runs_call),
    method(
        "findSessionReservation",
        PLAIN,
        reads::find_session_reservation_call,
    ),
    method(
        "findSessionReservationView",
        PLAIN,
        reads::find_session_reservation_view_call,
    ),
    // run claims and fencing (and the interaction timeout, declared among them)
    method("claimWorkflowRun", NOW, claims::claim_workflow_run),
    method(
        "claimWorkflowRunForInteractionValidation",
        NOW,
        claims::claim_for_interaction_validation,
    ),
    method("claimWorkflowRunForControl", NOW, claims::claim_for_control),
    method(
        "beginWorkflowRunInteractionTimeout",
        NOW,
        interaction::begin_timeout_call,
    ),
    method("markWorkflowRunRunning", NOW, claims::mark_running),
    method("claimNextWorkflowRun", NOW, claims::claim_next),
    method("renewWorkflowRunClaim", NOW, claims::renew),
    method("verifyWorkflowRunClaim", NOW, claims::verify),
    method("workflowRunAuthority", PLAIN, claims::authority),
    // run state transitions (and the paused check, declared among them)
    method("parkWorkflowRun", NOW, transitions::park_workflow_run),
    method(
        "pauseParkedWorkflowRun",
        NOW,
        transitions::pause_parked_call,
    ),
    method(
        "resumePausedInteraction",
        NOW,
        transitions::resume_paused_call,
    ),
    method(
        "isWorkflowRunPaused",
        PLAIN,
        reads::is_workflow_run_paused_call,
    ),
    method(
        "parkWorkflowRunForSourceChange",
        NOW,
        transitions::park_for_source_change_call,
    ),
    method(
        "parkWorkflowRunForAmbiguousEffect",
        NOW,
        transitions::park_for_ambiguous_effect_call,
    ),
    method("failWorkflowRun", NOW, transitions::fail_call),
    method("cancelWorkflowRun", NOW, transitions::cancel_call),
    method(
        "cancelStaleWorkflowRun",
        NOW,
        transitions::cancel_stale_call,
    ),
    method("deleteWorkflowRun", PLAIN, transitions::delete_call),
    method(
        "completeWorkflowRun",
        NOW,
        transitions::complete_workflow_run,
    ),
    // legacy stubs
    method(
        "repairCanonicalWorkflowSourceRun",
        PLAIN,
        legacy::repair_canonical_workflow_source_run,
    ),
    method(
        "claimLegacyWorkflowSourceRun",
        PLAIN,
        legacy::claim_legacy_workflow_source_run,
    ),
    // run events and run effects
    method(
        "recordRunEvent",
        Conversions {
            json: &["0.payload"],
            echo: Some("0.payload"),
            echo_props: &["runId", "workflowRef", "type"],
            ..NOW
        },
        run_events::record_run_event_call,
    ),
    method(
        "listRunEventsAfter",
        PLAIN,
        run_events::list_run_events_after_call,
    ),
    method("settleRunEffect", PLAIN, settle::settle_run_effect_call),
    method(
        "setWorkflowRunOriginSession",
        PLAIN,
        transitions::set_origin_session_call,
    ),
];

/// Runs the public method at `index` of [`METHODS`].
pub fn dispatch_at(store: &Store<'_>, index: u32, call: &Call) -> Result<Reply> {
    match (
        METHODS.get(index as usize),
        store.state.cluster_reconnect_deadline(),
    ) {
        (Some(method), Some(window)) => {
            crate::sql::retry::with_reruns(method.name, window, || (method.run)(store, call))
        }
        (Some(method), None) => (method.run)(store, call),
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

/// The table as the JS layer reads it: `[{name, time, date, json, claim, echo, echoProps, lease}]`, with absent conversions as empty lists or `null` and `lease` as `{now, ms}`.
pub fn js_table() -> String {
    let table: Vec<Value> = METHODS
        .iter()
        .map(|Method { name, js, .. }| {
            json!({
                "name": name,
                "time": js.time,
                "date": js.date,
                "json": js.json,
                "claim": js.claim,
                "echo": js.echo,
                "echoProps": js.echo_props,
                "lease": js.lease.map(|(now, ms)| json!({ "now": now, "ms": ms })),
            })
        })
        .collect();
    Value::Array(table).to_string()
}
