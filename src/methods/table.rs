//! The rows of the method table (see the parent module): every public method but `close`, in
//! the reference's order.

use serde_json::Value;

use super::row::Handler::{Bool, Direct, List, Record, Reservation};
use super::row::{Conversions, Declared, Handler, Method};
use crate::controller::{effects, events, queue, resource_changes, resources, workflows};
use crate::js::Js;
use crate::runs::claims;
use crate::runs::{
    interaction, legacy, parking, reads, recovery, reserve, run_events, settle, terminal,
    transitions,
};
use crate::sql::retry::Access;
use crate::wire::Reply;

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

/// A row. Its conversions (timestamps, `Date.parse`, canonical JSON, the lease sum, the claim
/// changed in place) are computed in the core through `crate::js::computed` where the
/// reference computes them in a synchronous call; they stay listed for `store.async` calls,
/// whose arguments the JS layer converts before it queues them.
const fn method(
    name: &'static str,
    declared: Declared,
    access: Access,
    js: Conversions,
    run: Handler,
) -> Method {
    Method {
        name,
        declared,
        access,
        js,
        run,
    }
}

const CONTROLLER: Declared = Declared::ControllerStore;
const CLASS: Declared = Declared::SqliteControllerStore;
const READ: Access = Access::Read;
const WRITE: Access = Access::Write;

/// Every public method but `close` (the JS layer's own), in the reference's order.
// One row a line where it fits: the table reads as a table.
#[rustfmt::skip]
pub static METHODS: &[Method] = &[
    // controller resources
    method(
        "putResource",
        CONTROLLER,
        WRITE,
        Conversions {
            json: &["0.spec", "0.initialStatus"],
            ..NOW
        },
        Direct(resources::put_resource),
    ),
    method("getResource", CONTROLLER, READ, PLAIN, Direct(resources::get_resource)),
    method("getResourceByUid", CONTROLLER, READ, PLAIN, Direct(resources::get_resource_by_uid)),
    method("listResources", CONTROLLER, READ, PLAIN, Direct(resources::list_resources)),
    method(
        "updateStatus",
        CONTROLLER,
        WRITE,
        Conversions {
            json: &["0.status"],
            claim: Some("0.claim"),
            ..NOW
        },
        Direct(resource_changes::update_status),
    ),
    method(
        "requestDeletion",
        CONTROLLER,
        WRITE,
        Conversions {
            time: &["1"],
            ..PLAIN
        },
        Direct(resource_changes::request_deletion),
    ),
    method("updateFinalizers", CONTROLLER, WRITE, NOW, Direct(resource_changes::update_finalizers)),
    method("deleteResource", CONTROLLER, WRITE, PLAIN, Direct(resource_changes::delete_resource)),
    // the work queue and its claims
    method(
        "enqueue",
        CONTROLLER,
        WRITE,
        Conversions {
            time: &["1"],
            ..PLAIN
        },
        Direct(queue::enqueue),
    ),
    method(
        "claimNext",
        CONTROLLER,
        WRITE,
        Conversions {
            lease: Some(("0.now", "0.leaseMs")),
            echo_props: &["ownerId"],
            ..NOW
        },
        Direct(queue::claim_next),
    ),
    method(
        "renewClaim",
        CONTROLLER,
        WRITE,
        Conversions {
            time: &["2"],
            claim: Some("0"),
            lease: Some(("2", "1")),
            ..PLAIN
        },
        Direct(queue::renew_claim),
    ),
    method(
        "settleClaim",
        CONTROLLER,
        WRITE,
        Conversions {
            time: &["1"],
            claim: Some("0"),
            ..PLAIN
        },
        Direct(|store, call| queue::settle_claim(store, call, None, Js::arg(call, 1))),
    ),
    method(
        "requeueClaim",
        CONTROLLER,
        WRITE,
        Conversions {
            time: &["2"],
            date: &["1.availableAt"],
            claim: Some("0"),
            ..PLAIN
        },
        Direct(queue::requeue_claim),
    ),
    method("listQueue", CONTROLLER, READ, PLAIN, Direct(queue::list_queue)),
    // effects
    method("reserveEffect", CONTROLLER, WRITE, NOW, Direct(effects::reserve_effect)),
    method("getEffect", CONTROLLER, READ, PLAIN, Direct(effects::get_effect)),
    method("updateEffect", CONTROLLER, WRITE, NOW, Direct(effects::update_effect)),
    method("listEffects", CONTROLLER, READ, PLAIN, Direct(effects::list_effects)),
    // child workflows
    method("reserveWorkflow", CONTROLLER, WRITE, PLAIN, Direct(workflows::reserve_workflow)),
    method("getWorkflow", CONTROLLER, READ, PLAIN, Direct(workflows::get_workflow)),
    method(
        "getWorkflowByRequestId",
        CONTROLLER,
        READ,
        PLAIN,
        Direct(workflows::get_workflow_by_request_id),
    ),
    method("updateWorkflow", CONTROLLER, WRITE, PLAIN, Direct(workflows::update_workflow)),
    method("completeWorkflow", CONTROLLER, WRITE, PLAIN, Direct(workflows::complete_workflow)),
    method("listWorkflows", CONTROLLER, READ, PLAIN, Direct(workflows::list_workflows)),
    // controller events
    method(
        "recordEvent",
        CONTROLLER,
        WRITE,
        Conversions {
            json: &["0.payload"],
            claim: Some("0.claim"),
            echo: Some("0.payload"),
            echo_props: &["controller", "key", "type"],
            ..NOW
        },
        Direct(events::record_event),
    ),
    method("listEvents", CONTROLLER, READ, PLAIN, Direct(events::list_events)),
    // run reservation
    method(
        "reserveWorkflowRun",
        CLASS,
        WRITE,
        RUN_RESERVATION,
        Direct(|store, call| {
            reserve::reserve_workflow_run(store, call, Js::arg(call, 0)).map(Reply::json_text)
        }),
    ),
    method(
        "prepareOrAdoptWorkflowRun",
        CLASS,
        WRITE,
        RUN_RESERVATION,
        Reservation(reserve::prepare_or_adopt_workflow_run),
    ),
    method(
        "enqueueWorkflowRun",
        CLASS,
        WRITE,
        RUN_RESERVATION,
        Reservation(reserve::enqueue_workflow_run),
    ),
    // run reads and views
    method("getWorkflowRun", CLASS, READ, PLAIN, Record(reads::get_workflow_run)),
    method("getWorkflowRunView", CLASS, READ, PLAIN, Record(reads::get_workflow_run_view)),
    method(
        "workflowRunListRevision",
        CLASS,
        READ,
        PLAIN,
        Direct(|store, _| {
            reads::workflow_run_list_revision(store)
                .map(|revision| Reply::value(reads::revision_json(&revision)))
        }),
    ),
    method("listWorkflowRunViews", CLASS, READ, PLAIN, List(reads::list_workflow_run_views)),
    method(
        "workflowRunProjectPath",
        CLASS,
        READ,
        PLAIN,
        Direct(|store, call| {
            reads::workflow_run_project_path(store, Js::arg(call, 0))
                .map(|path| Reply::maybe(path.map(Value::String)))
        }),
    ),
    method("listWorkflowRuns", CLASS, READ, PLAIN, List(reads::list_workflow_runs)),
    method("findSessionReservation", CLASS, READ, PLAIN, Record(reads::find_session_reservation)),
    method(
        "findSessionReservationView",
        CLASS,
        READ,
        PLAIN,
        Record(reads::find_session_reservation_view),
    ),
    // run claims and fencing (and the interaction timeout, declared among them)
    method("claimWorkflowRun", CLASS, WRITE, NOW, Direct(claims::claim_workflow_run)),
    method(
        "claimWorkflowRunForInteractionValidation",
        CLASS,
        WRITE,
        NOW,
        Direct(claims::claim_for_interaction_validation),
    ),
    method("claimWorkflowRunForControl", CLASS, WRITE, NOW, Direct(claims::claim_for_control)),
    method(
        "beginWorkflowRunInteractionTimeout",
        CLASS,
        WRITE,
        NOW,
        Bool(interaction::begin_timeout),
    ),
    method("markWorkflowRunRunning", CLASS, WRITE, NOW, Direct(claims::mark_running)),
    method("claimNextWorkflowRun", CLASS, WRITE, NOW, Direct(claims::claim_next)),
    method("renewWorkflowRunClaim", CLASS, WRITE, NOW, Direct(claims::renew)),
    method("verifyWorkflowRunClaim", CLASS, READ, NOW, Direct(claims::verify)),
    method("workflowRunAuthority", CLASS, READ, PLAIN, Direct(claims::authority)),
    // run state transitions (and the paused check, declared among them)
    method("parkWorkflowRun", CLASS, WRITE, NOW, Direct(transitions::park_workflow_run)),
    method("pauseParkedWorkflowRun", CLASS, WRITE, NOW, Bool(parking::pause_parked)),
    method("resumePausedInteraction", CLASS, WRITE, NOW, Bool(parking::resume_paused)),
    method(
        "isWorkflowRunPaused",
        CLASS,
        READ,
        PLAIN,
        Direct(|store, call| {
            reads::is_workflow_run_paused(store, Js::arg(call, 0)).map(Reply::value)
        }),
    ),
    method(
        "parkWorkflowRunForSourceChange",
        CLASS,
        WRITE,
        NOW,
        Bool(recovery::park_for_source_change),
    ),
    method(
        "parkWorkflowRunForAmbiguousEffect",
        CLASS,
        WRITE,
        NOW,
        Bool(recovery::park_for_ambiguous_effect),
    ),
    method("failWorkflowRun", CLASS, WRITE, NOW, Bool(terminal::fail)),
    method("cancelWorkflowRun", CLASS, WRITE, NOW, Bool(terminal::cancel)),
    method("cancelStaleWorkflowRun", CLASS, WRITE, NOW, Bool(terminal::cancel_stale_by_call)),
    method("deleteWorkflowRun", CLASS, WRITE, PLAIN, Bool(transitions::delete)),
    method("completeWorkflowRun", CLASS, WRITE, NOW, Direct(transitions::complete_workflow_run)),
    // legacy stubs
    method(
        "repairCanonicalWorkflowSourceRun",
        CLASS,
        WRITE,
        PLAIN,
        Direct(legacy::repair_canonical_workflow_source_run),
    ),
    method(
        "claimLegacyWorkflowSourceRun",
        CLASS,
        WRITE,
        PLAIN,
        Direct(legacy::claim_legacy_workflow_source_run),
    ),
    // run events and run effects
    method(
        "recordRunEvent",
        CLASS,
        WRITE,
        Conversions {
            json: &["0.payload"],
            echo: Some("0.payload"),
            echo_props: &["runId", "workflowRef", "type"],
            ..NOW
        },
        Direct(|store, call| {
            store.write(|conn| run_events::record_run_event(conn, call, Js::arg(call, 0)))
        }),
    ),
    method(
        "listRunEventsAfter",
        CLASS,
        READ,
        PLAIN,
        Direct(|store, call| {
            run_events::list_run_events_after(store, Js::arg(call, 0), Js::arg(call, 1))
        }),
    ),
    method(
        "settleRunEffect",
        CLASS,
        WRITE,
        PLAIN,
        Direct(|store, call| settle::settle_run_effect(store, call).map(|()| Reply::undefined())),
    ),
    method(
        "setWorkflowRunOriginSession",
        CLASS,
        WRITE,
        PLAIN,
        Bool(transitions::set_origin_session),
    ),
];
