//! The run state machine: every move a method makes between a run's statuses, in one table
//! ([`MOVES`]), with what each writes — its row updates (the only statements that change
//! `runs.status` or `run_queue.status`), the event, whether it releases the lease, and the
//! viewer deltas — and [`Move::apply`], the one function that runs a move's row updates.
//! docs/architecture.md, "The run state machine", draws it.
//!
//! A move's bookkeeping after its updates (the resource revision, the attributed event, the
//! viewer deltas: [`super::record`]) and its guards (the claim check, the lease release) stay
//! with the method, in the reference's order; the table says which a move has, and the tests
//! below hold each update's SQL to the statuses the table names.

use crate::error::Result;
use crate::js::{bind_params, Param};
use crate::sql::{params_from_iter, Db, Params};

use super::status::{status_sql, QueueStatus as Q, RunStatus as R};

/// Which row a move's update changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `run_queue`.
    Queue,
    /// `runs`.
    Run,
    /// `node_attempts` (the run's attempts wait with it).
    Attempts,
    /// `interactive_requests` (the request a timeout cancels).
    Request,
}

/// The lease a move releases after its updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// None: the lease is kept.
    Kept,
    /// A claim: the runner takes the lease (before the update).
    Taken,
    /// The caller's verified claim, by token and generation.
    Claim,
    /// The caller's claim, by token and generation, unexpired (a failure or cancellation
    /// without a token has none to release).
    LiveClaim,
    /// The control plane's own short lease, taken for the move.
    System,
}

/// The viewer deltas a move records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    None,
    /// The run's summary and replay.
    SummaryReplay,
    /// The run's summary, replay and interactions (an interaction timeout).
    Timeout,
    /// The viewer's row of a new run.
    Initialized,
}

/// A status change: from any of `from` (empty: any status) to `to`; `None` leaves it.
pub type Change<S> = Option<(&'static [S], S)>;

/// One move of the state machine.
#[derive(Debug)]
pub struct Move {
    /// The public methods that make it.
    pub methods: &'static [&'static str],
    /// `run_queue.status`.
    pub queue: Change<Q>,
    /// `runs.status`.
    pub run: Change<R>,
    /// The row updates, each once, in the order the method runs them.
    pub updates: &'static [(Table, &'static str)],
    /// The event recorded (`events.event_type`).
    pub event: &'static str,
    // Release and viewer describe what the method does after the move (its guards and
    // bookkeeping stay with it); only the documentation's table and its test read them.
    #[cfg_attr(not(test), allow(dead_code))]
    pub release: Release,
    #[cfg_attr(not(test), allow(dead_code))]
    pub viewer: Viewer,
}

impl Move {
    /// Runs the move's update of `table` with `params` (bound in the statement's order); the
    /// number of rows it changed. The caller judges the count: a guard that no longer holds.
    pub fn apply<P: Params>(&self, conn: &Db, table: Table, params: P) -> Result<usize> {
        Ok(conn.prepare_cached(self.sql(table))?.execute(params)?)
    }

    /// The move's update of `table`.
    fn sql(&self, table: Table) -> &'static str {
        self.updates
            .iter()
            .find(|(of, _)| *of == table)
            .map(|(_, sql)| *sql)
            .unwrap_or_else(|| panic!("the move of {:?} updates no {table:?}", self.methods))
    }

    /// [`Move::apply`] when nobody reads its count: held back to go with what follows when the
    /// write holds its writes (`Db::hold_writes_until_commit`).
    pub fn apply_unread<P: Params>(&self, conn: &Db, table: Table, params: P) -> Result<()> {
        Ok(conn
            .prepare_cached(self.sql(table))?
            .execute_deferred(params)?)
    }

    /// [`Move::apply`] with values bound as better-sqlite3 binds the reference's arguments.
    pub fn apply_bound(&self, conn: &Db, table: Table, values: &[Param<'_>]) -> Result<usize> {
        self.apply(conn, table, params_from_iter(bind_params(values)?))
    }
}

const NOT_TERMINAL_QUEUE: &[Q] = &[Q::Queued, Q::Starting, Q::Running, Q::Parked];
const NOT_TERMINAL_RUN: &[R] = &[R::Queued, R::Running, R::Waiting];

/// A runner takes the lease (`claimWorkflowRun`, `claimNextWorkflowRun`, the interaction
/// validation claim; a control claim keeps the queue status and makes no move).
pub const CLAIM: Move = Move {
    methods: &[
        "claimWorkflowRun",
        "claimNextWorkflowRun",
        "claimWorkflowRunForInteractionValidation",
    ],
    queue: Some((NOT_TERMINAL_QUEUE, Q::Starting)),
    run: None,
    updates: &[(
        Table::Queue,
        concat!(
            "UPDATE run_queue
             SET status = ",
            status_sql!(starting),
            ", error_code = NULL, error_hash = NULL, updated_at = ?
             WHERE run_id = ?"
        ),
    )],
    event: "lease.claimed",
    release: Release::Taken,
    viewer: Viewer::None,
};

/// The claimant starts the run.
pub const MARK_RUNNING: Move = Move {
    methods: &["markWorkflowRunRunning"],
    queue: Some((&[], Q::Running)),
    run: None,
    updates: &[(
        Table::Queue,
        concat!(
            "UPDATE run_queue SET status = ",
            status_sql!(running),
            ", started_at = COALESCE(started_at, ?),
                    updated_at = ? WHERE run_id = ?"
        ),
    )],
    event: "run.queue_running",
    release: Release::Kept,
    viewer: Viewer::None,
};

/// The claimant parks the run and lets go of it.
pub const PARK: Move = Move {
    methods: &["parkWorkflowRun"],
    queue: Some((&[], Q::Parked)),
    run: None,
    updates: &[(
        Table::Queue,
        concat!(
            "UPDATE run_queue SET status = ",
            status_sql!(parked),
            ", updated_at = ?, finished_at = ?
             WHERE run_id = ?"
        ),
    )],
    event: "run.queue_parked",
    release: Release::Claim,
    viewer: Viewer::SummaryReplay,
};

/// The claimant is done with the run.
pub const COMPLETE: Move = Move {
    methods: &["completeWorkflowRun"],
    queue: Some((&[], Q::Done)),
    run: None,
    updates: &[(
        Table::Queue,
        concat!(
            "UPDATE run_queue SET status = ",
            status_sql!(done),
            ", updated_at = ?, finished_at = ?
             WHERE run_id = ?"
        ),
    )],
    event: "run.queue_done",
    release: Release::Claim,
    viewer: Viewer::SummaryReplay,
};

/// A parked, ownerless run waiting on an interaction is paused (`runs.paused`; the statuses
/// stay).
pub const PAUSE: Move = Move {
    methods: &["pauseParkedWorkflowRun"],
    queue: None,
    run: None,
    updates: &[(
        Table::Run,
        concat!(
            "UPDATE runs SET paused = 1, status_detail = 'paused', updated_at = ?
             WHERE run_id = ? AND paused = 0 AND status IN ",
            status_sql!(run_pausable)
        ),
    )],
    event: "run.paused",
    release: Release::Kept,
    viewer: Viewer::SummaryReplay,
};

/// The pause is lifted.
pub const RESUME: Move = Move {
    methods: &["resumePausedInteraction"],
    queue: None,
    run: None,
    updates: &[(
        Table::Run,
        concat!(
            "UPDATE runs
             SET paused = 0, status_detail = 'waiting for origin-session input', updated_at = ?
             WHERE run_id = ? AND status = ",
            status_sql!(waiting),
            " AND paused = 1"
        ),
    )],
    event: "run.resumed",
    release: Release::Kept,
    viewer: Viewer::SummaryReplay,
};

/// The claimant parks the run: its workflow source changed.
pub const SOURCE_CHANGED: Move = Move {
    methods: &["parkWorkflowRunForSourceChange"],
    queue: Some((NOT_TERMINAL_QUEUE, Q::Parked)),
    run: None,
    updates: &[
        (
            Table::Run,
            concat!(
                "UPDATE runs SET status_detail = ?, updated_at = ?, finished_at = NULL
                 WHERE run_id = ? AND status NOT IN ",
                status_sql!(run_terminal)
            ),
        ),
        (
            Table::Queue,
            concat!(
                "UPDATE run_queue
                 SET status = ",
                status_sql!(parked),
                ", error_code = 'workflowSourceChanged', error_hash = ?,
                     available_at = ?, updated_at = ?, finished_at = NULL
                 WHERE run_id = ? AND status IN ",
                status_sql!(queue_claimable)
            ),
        ),
    ],
    event: "run.source_changed",
    release: Release::LiveClaim,
    viewer: Viewer::SummaryReplay,
};

/// The claimant parks a running run whose effect's outcome is unknown; its attempts wait.
pub const EFFECT_AMBIGUOUS: Move = Move {
    methods: &["parkWorkflowRunForAmbiguousEffect"],
    queue: Some((&[Q::Starting, Q::Running, Q::Parked], Q::Parked)),
    run: Some((&[R::Running], R::Waiting)),
    updates: &[
        (
            Table::Attempts,
            concat!(
                "UPDATE node_attempts SET status = ",
                status_sql!(waiting),
                ", updated_at = ?
                 WHERE run_id = ? AND status IN ",
                status_sql!(attempt_open)
            ),
        ),
        (
            Table::Run,
            concat!(
                "UPDATE runs SET status = ",
                status_sql!(waiting),
                ", status_detail = ?, updated_at = ?,
                        finished_at = ?
                 WHERE run_id = ? AND status = ",
                status_sql!(running)
            ),
        ),
        (
            Table::Queue,
            concat!(
                "UPDATE run_queue
                 SET status = ",
                status_sql!(parked),
                ", error_code = 'effectAmbiguous', error_hash = ?,
                     updated_at = ?
                 WHERE run_id = ? AND status IN ",
                status_sql!(queue_started)
            ),
        ),
    ],
    event: "run.effect_ambiguous",
    release: Release::LiveClaim,
    viewer: Viewer::SummaryReplay,
};

/// The row updates of a claimant's terminal move to `$status`: the queue entry, unless already
/// terminal, with the caller's error code, then the run.
macro_rules! terminal_updates {
    ($status:ident) => {
        &[
            (
                Table::Queue,
                concat!(
                    "UPDATE run_queue
                 SET status = ",
                    status_sql!($status),
                    ", error_code = ?, error_hash = ?, updated_at = ?, finished_at = ?
                 WHERE run_id = ? AND status NOT IN ",
                    status_sql!(queue_terminal)
                ),
            ),
            (
                Table::Run,
                concat!(
                    "UPDATE runs
                 SET status = ",
                    status_sql!($status),
                    ", paused = 0, status_detail = NULL, error_hash = ?,
                     updated_at = ?, finished_at = ?
                 WHERE run_id = ?"
                ),
            ),
        ]
    };
}

/// The claimant (or anyone, for an ownerless queued or starting run) fails the run.
pub const FAIL: Move = Move {
    methods: &["failWorkflowRun"],
    queue: Some((NOT_TERMINAL_QUEUE, Q::Failed)),
    run: Some((&[], R::Failed)),
    updates: terminal_updates!(failed),
    event: "run.queue_failed",
    release: Release::LiveClaim,
    viewer: Viewer::SummaryReplay,
};

/// The claimant (or anyone, for an ownerless queued or starting run) cancels the run and what
/// it leaves open ([`super::dependents`]).
pub const CANCEL: Move = Move {
    methods: &["cancelWorkflowRun"],
    queue: Some((NOT_TERMINAL_QUEUE, Q::Cancelled)),
    run: Some((&[], R::Cancelled)),
    updates: terminal_updates!(cancelled),
    event: "run.queue_cancelled",
    release: Release::LiveClaim,
    viewer: Viewer::SummaryReplay,
};

/// The control plane cancels a run whose claim is absent or expired, under its own short
/// lease (`cancelWorkflowRun` without a token falls back to it).
pub const CANCEL_STALE: Move = Move {
    methods: &["cancelStaleWorkflowRun", "cancelWorkflowRun"],
    queue: Some((NOT_TERMINAL_QUEUE, Q::Cancelled)),
    run: Some((NOT_TERMINAL_RUN, R::Cancelled)),
    updates: &[
        (
            Table::Queue,
            concat!(
                "UPDATE run_queue
                 SET status = ",
                status_sql!(cancelled),
                ", error_code = 'cancelled', error_hash = ?,
                     updated_at = ?, finished_at = ?
                 WHERE run_id = ? AND status NOT IN ",
                status_sql!(queue_terminal)
            ),
        ),
        (
            Table::Run,
            concat!(
                "UPDATE runs
                 SET status = ",
                status_sql!(cancelled),
                ", paused = 0, status_detail = NULL, error_hash = ?,
                     updated_at = ?, finished_at = ?
                 WHERE run_id = ? AND status NOT IN ",
                status_sql!(run_terminal)
            ),
        ),
    ],
    event: "run.queue_cancelled",
    release: Release::System,
    viewer: Viewer::SummaryReplay,
};

/// The claimant's interaction deadline passed: the request is cancelled and the waiting run
/// goes back to work.
pub const INTERACTION_TIMEOUT: Move = Move {
    methods: &["beginWorkflowRunInteractionTimeout"],
    queue: Some((&[Q::Parked], Q::Starting)),
    run: Some((&[R::Waiting], R::Running)),
    updates: &[
        (
            Table::Request,
            concat!(
                "UPDATE interactive_requests
                 SET status = ",
                status_sql!(cancelled),
                ", revision = revision + 1, updated_at = ?
                 WHERE request_id = ? AND run_id = ? AND status = ",
                status_sql!(pending)
            ),
        ),
        (
            Table::Run,
            concat!(
                "UPDATE runs
                 SET status = ",
                status_sql!(running),
                ", status_detail = 'finishing expired interaction deadline',
                     updated_at = ?, finished_at = NULL
                 WHERE run_id = ? AND status = ",
                status_sql!(waiting)
            ),
        ),
        (
            Table::Queue,
            concat!(
                "UPDATE run_queue SET status = ",
                status_sql!(starting),
                ", error_code = NULL, error_hash = NULL,
                    updated_at = ?, finished_at = NULL
                 WHERE run_id = ? AND status = ",
                status_sql!(parked)
            ),
        ),
    ],
    event: "run.interaction_timeout_started",
    release: Release::Kept,
    viewer: Viewer::Timeout,
};

/// A continuation is reserved: its parked, ownerless parent is done.
pub const CONTINUED: Move = Move {
    methods: &["reserveWorkflowRun"],
    queue: Some((&[Q::Parked], Q::Done)),
    run: None,
    updates: &[(
        Table::Queue,
        concat!(
            "UPDATE run_queue SET status = ",
            status_sql!(done),
            ", updated_at = ?, finished_at = ?
             WHERE run_id = ? AND status = ",
            status_sql!(parked)
        ),
    )],
    event: "run.queue_done_for_continuation",
    release: Release::Kept,
    viewer: Viewer::None,
};

/// A reservation inserts the run and its queue entry as `queued` (`src/runs/reserve/rows.rs`,
/// with [`status_sql!`]); no update.
pub const RESERVE: Move = Move {
    methods: &["reserveWorkflowRun", "prepareOrAdoptWorkflowRun"],
    queue: Some((&[], Q::Queued)),
    run: Some((&[], R::Queued)),
    updates: &[],
    event: "run.queued",
    release: Release::Kept,
    viewer: Viewer::Initialized,
};

/// Every move, for the tests and the documentation.
#[cfg(test)]
pub const MOVES: &[&Move] = &[
    &RESERVE,
    &CLAIM,
    &MARK_RUNNING,
    &PARK,
    &COMPLETE,
    &PAUSE,
    &RESUME,
    &SOURCE_CHANGED,
    &EFFECT_AMBIGUOUS,
    &FAIL,
    &CANCEL,
    &CANCEL_STALE,
    &INTERACTION_TIMEOUT,
    &CONTINUED,
];

/// The move's row of docs/architecture.md's table of moves (a test holds the two equal).
#[cfg(test)]
pub fn doc_row(mv: &Move) -> String {
    fn change<S: Copy>(change: Change<S>, name: fn(S) -> &'static str) -> String {
        match change {
            None => "—".to_owned(),
            Some((&[], to)) => format!("any → `{}`", name(to)),
            Some((from, to)) => {
                let from: Vec<_> = from.iter().map(|status| name(*status)).collect();
                format!("`{}` → `{}`", from.join("`, `"), name(to))
            }
        }
    }
    let updates: Vec<_> = mv
        .updates
        .iter()
        .map(|(table, _)| format!("{table:?}").to_lowercase())
        .collect();
    format!(
        "| `{}` | {} | {} | {} | `{}` | {:?} | {:?} |",
        mv.methods.join("`, `"),
        change(mv.queue, Q::as_str),
        change(mv.run, R::as_str),
        if updates.is_empty() {
            "insert".to_owned()
        } else {
            updates.join(", ")
        },
        mv.event,
        mv.release,
        mv.viewer,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quoted literals of `sql`.
    fn literals(sql: &str) -> Vec<&str> {
        sql.split('\'').skip(1).step_by(2).collect()
    }

    /// `SET status = '<to>'` of an update.
    fn set_status(sql: &str) -> Option<&str> {
        let (_, after) = sql.split_once("SET status = '")?;
        after.split('\'').next()
    }

    #[test]
    fn each_update_sets_the_status_the_table_names() {
        for mv in MOVES {
            for (table, sql) in mv.updates {
                let set = set_status(sql);
                match table {
                    Table::Queue => {
                        let (_, to) = mv.queue.expect("a queue update changes the queue status");
                        assert_eq!(set, Some(to.as_str()), "{:?}", mv.methods);
                    }
                    Table::Run => match mv.run {
                        Some((_, to)) => assert_eq!(set, Some(to.as_str()), "{:?}", mv.methods),
                        None => assert_eq!(set, None, "{:?}", mv.methods),
                    },
                    Table::Attempts | Table::Request => {}
                }
            }
        }
    }

    #[test]
    fn the_architecture_document_lists_every_move() {
        let doc = include_str!("../../../docs/architecture.md");
        for mv in MOVES {
            let row = doc_row(mv);
            assert!(doc.contains(&row), "docs/architecture.md lacks\n{row}");
        }
    }

    #[test]
    fn a_queue_guard_admits_the_statuses_the_table_moves_from() {
        for mv in MOVES {
            let Some((from, _)) = mv.queue else { continue };
            let Some((_, sql)) = mv.updates.iter().find(|(table, _)| *table == Table::Queue) else {
                continue;
            };
            // Unguarded, the method judged the status it read (a claim: not terminal).
            let Some((_, guard)) = sql.split_once("AND status ") else {
                continue;
            };
            let named: Vec<Q> = literals(guard).into_iter().filter_map(Q::parse).collect();
            let admitted: Vec<Q> = Q::ALL
                .into_iter()
                .filter(|status| match guard.starts_with("NOT IN") {
                    true => !named.contains(status),
                    false => named.contains(status),
                })
                .collect();
            let mut from = from.to_vec();
            from.sort_by_key(|status| *status as u8);
            assert_eq!(admitted, from, "{:?}", mv.methods);
        }
    }
}
