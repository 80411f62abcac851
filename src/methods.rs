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
    /// Unpacks the arguments and runs the method in its domain module.
    pub run: fn(&Store<'_>, &Call) -> Result<Reply>,
    /// Whether a synchronous call reads the caller's own values through napi (the live view,
    /// src/js/live.rs) rather than a JSON snapshot: its handler reads every argument through
    /// `crate::js::Js`, and the JS layer converts nothing before it (it still echoes
    /// `echo`/`echo_props` into the record, reading them from the caller's objects).
    pub live: bool,
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

/// A method whose synchronous calls read the caller's values live (see [`Method::live`]): its
/// conversions (timestamps, `Date.parse`, canonical JSON, the lease sum, the claim changed in
/// place) are computed in the core through `crate::js::computed` where the reference computes
/// them; they stay listed for its `store.async` calls, which the JS layer converts first.
const fn live(
    name: &'static str,
    js: Conversions,
    run: fn(&Store<'_>, &Call) -> Result<Reply>,
) -> Method {
    Method {
        name,
        js,
        run,
        live: true,
    }
}

/// Every public method but `close` (the JS layer's own), in the reference's order.
pub static METHODS: &[Method] = &[
    // controller resources
    live(
        "putResource",
        Conversions {
            json: &["0.spec", "0.initialStatus"],
            ..NOW
        },
        resources::put_resource,
    ),
    live("getResource", PLAIN, resources::get_resource),
    live("getResourceByUid", PLAIN, resources::get_resource_by_uid),
    live("listResources", PLAIN, resources::list_resources),
    live(
        "updateStatus",
        Conversions {
            json: &["0.status"],
            claim: Some("0.claim"),
            ..NOW
        },
        resources::update_status,
    ),
    live(
        "requestDeletion",
        Conversions {
            time: &["1"],
            ..PLAIN
        },
        resources::request_deletion,
    ),
    live("updateFinalizers", NOW, resources::update_finalizers),
    live("deleteResource", PLAIN, resources::delete_resource),
    // the work queue and its claims
    live(
        "enqueue",
        Conversions {
            time: &["1"],
            ..PLAIN
        },
        queue::enqueue,
    ),
    live(
        "claimNext",
        Conversions {
            lease: Some(("0.now", "0.leaseMs")),
            echo_props: &["ownerId"],
            ..NOW
        },
        queue::claim_next,
    ),
    live(
        "renewClaim",
        Conversions {
            time: &["2"],
            claim: Some("0"),
            lease: Some(("2", "1")),
            ..PLAIN
        },
        queue::renew_claim,
    ),
    live(
        "settleClaim",
        Conversions {
            time: &["1"],
            claim: Some("0"),
            ..PLAIN
        },
        queue::settle_claim_call,
    ),
    live(
        "requeueClaim",
        Conversions {
            time: &["2"],
            date: &["1.availableAt"],
            claim: Some("0"),
            ..PLAIN
        },
        queue::requeue_claim,
    ),
    live("listQueue", PLAIN, queue::list_queue),
    // effects
    live("reserveEffect", NOW, effects::reserve_effect),
    live("getEffect", PLAIN, effects::get_effect),
    live("updateEffect", NOW, effects::update_effect),
    live("listEffects", PLAIN, effects::list_effects),
    // child workflows
    live("reserveWorkflow", PLAIN, workflows::reserve_workflow),
    live("getWorkflow", PLAIN, workflows::get_workflow),
    live(
        "getWorkflowByRequestId",
        PLAIN,
        workflows::get_workflow_by_request_id,
    ),
    live("updateWorkflow", PLAIN, workflows::update_workflow),
    live("completeWorkflow", PLAIN, workflows::complete_workflow),
    live("listWorkflows", PLAIN, workflows::list_workflows),
    // controller events
    live(
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
    live("listEvents", PLAIN, events::list_events),
    // run reservation
    live(
        "reserveWorkflowRun",
        RUN_RESERVATION,
        reserve::reserve_workflow_run_call,
    ),
    live(
        "prepareOrAdoptWorkflowRun",
        RUN_RESERVATION,
        reserve::prepare_or_adopt_workflow_run_call,
    ),
    live(
        "enqueueWorkflowRun",
        RUN_RESERVATION,
        reserve::enqueue_workflow_run_call,
    ),
    // run reads and views
    live("getWorkflowRun", PLAIN, reads::get_workflow_run_call),
    live(
        "getWorkflowRunView",
        PLAIN,
        reads::get_workflow_run_view_call,
    ),
    live(
        "workflowRunListRevision",
        PLAIN,
        reads::workflow_run_list_revision_call,
    ),
    live(
        "listWorkflowRunViews",
        PLAIN,
        reads::list_workflow_run_views_call,
    ),
    live(
        "workflowRunProjectPath",
        PLAIN,
        reads::workflow_run_project_path_call,
    ),
    live("listWorkflowRuns", PLAIN, reads::list_workflow_runs_call),
    live(
        "findSessionReservation",
        PLAIN,
        reads::find_session_reservation_call,
    ),
    live(
        "findSessionReservationView",
        PLAIN,
        reads::find_session_reservation_view_call,
    ),
    // run claims and fencing (and the interaction timeout, declared among them)
    live("claimWorkflowRun", NOW, claims::claim_workflow_run),
    live(
        "claimWorkflowRunForInteractionValidation",
        NOW,
        claims::claim_for_interaction_validation,
    ),
    live("claimWorkflowRunForControl", NOW, claims::claim_for_control),
    live(
        "beginWorkflowRunInteractionTimeout",
        NOW,
        interaction::begin_timeout_call,
    ),
    live("markWorkflowRunRunning", NOW, claims::mark_running),
    live("claimNextWorkflowRun", NOW, claims::claim_next),
    live("renewWorkflowRunClaim", NOW, claims::renew),
    live("verifyWorkflowRunClaim", NOW, claims::verify),
    live("workflowRunAuthority", PLAIN, claims::authority),
    // run state transitions (and the paused check, declared among them)
    live("parkWorkflowRun", NOW, transitions::park_workflow_run),
    live(
        "pauseParkedWorkflowRun",
        NOW,
        transitions::pause_parked_call,
    ),
    live(
        "resumePausedInteraction",
        NOW,
        transitions::resume_paused_call,
    ),
    live(
        "isWorkflowRunPaused",
        PLAIN,
        reads::is_workflow_run_paused_call,
    ),
    live(
        "parkWorkflowRunForSourceChange",
        NOW,
        transitions::park_for_source_change_call,
    ),
    live(
        "parkWorkflowRunForAmbiguousEffect",
        NOW,
        transitions::park_for_ambiguous_effect_call,
    ),
    live("failWorkflowRun", NOW, transitions::fail_call),
    live("cancelWorkflowRun", NOW, transitions::cancel_call),
    live(
        "cancelStaleWorkflowRun",
        NOW,
        transitions::cancel_stale_call,
    ),
    live("deleteWorkflowRun", PLAIN, transitions::delete_call),
    live(
        "completeWorkflowRun",
        NOW,
        transitions::complete_workflow_run,
    ),
    // legacy stubs
    live(
        "repairCanonicalWorkflowSourceRun",
        PLAIN,
        legacy::repair_canonical_workflow_source_run,
    ),
    live(
        "claimLegacyWorkflowSourceRun",
        PLAIN,
        legacy::claim_legacy_workflow_source_run,
    ),
    // run events and run effects
    live(
        "recordRunEvent",
        Conversions {
            json: &["0.payload"],
            echo: Some("0.payload"),
            echo_props: &["runId", "workflowRef", "type"],
            ..NOW
        },
        run_events::record_run_event_call,
    ),
    live(
        "listRunEventsAfter",
        PLAIN,
        run_events::list_run_events_after_call,
    ),
    live("settleRunEffect", PLAIN, settle::settle_run_effect_call),
    live(
        "setWorkflowRunOriginSession",
        PLAIN,
        transitions::set_origin_session_call,
    ),
];

/// Runs the public method at `index` of [`METHODS`].
pub fn dispatch_at(store: &Store<'_>, index: u32, call: &Call) -> Result<Reply> {
    match METHODS.get(index as usize) {
        Some(method) if store.state.is_cluster() => {
            crate::sql::retry::with_reruns(method.name, || (method.run)(store, call))
        }
        Some(method) => (method.run)(store, call),
        None => Err(StoreError::plain(format!("Unknown store method: #{index}"))),
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

/// The table as the JS layer reads it: `[{name, live, time, date, json, claim, echo, echoProps,
/// lease}]`, with absent conversions as empty lists or `null` and `lease` as `{now, ms}`.
pub fn js_table() -> String {
    let table: Vec<Value> = METHODS
        .iter()
        .map(|Method { name, js, live, .. }| {
            json!({
                "name": name,
                "live": live,
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
