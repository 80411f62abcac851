//! A run's statuses: `runs.status` ([`RunStatus`]) and `run_queue.status` ([`QueueStatus`]),
//! with their SQL text. Every SQL literal of either (and of the attempt and request statuses a
//! run's move changes) is written here once, as [`status_sql!`], which statements `concat!`
//! into their text; the enums' `as_str` give the same text, and a test holds the two equal.

/// The SQL text of a status, or of a set of statuses as an `IN` list: `status_sql!(parked)` is
/// `'parked'`, `status_sql!(queue_terminal)` is `('done', 'failed', 'cancelled')`. A macro, so a
/// statement can `concat!` it into a constant.
macro_rules! status_sql {
    (queued) => {
        "'queued'"
    };
    (starting) => {
        "'starting'"
    };
    (running) => {
        "'running'"
    };
    (parked) => {
        "'parked'"
    };
    (waiting) => {
        "'waiting'"
    };
    (done) => {
        "'done'"
    };
    (failed) => {
        "'failed'"
    };
    (cancelled) => {
        "'cancelled'"
    };
    (pending) => {
        "'pending'"
    };
    (headless) => {
        "'headless'"
    };
    (interactive) => {
        "'interactive'"
    };
    // `run_queue.status` of a run that is finished with: done, failed or cancelled.
    (queue_terminal) => {
        "('done', 'failed', 'cancelled')"
    };
    // `run_queue.status` of a run a claim may pick.
    (queue_claimable) => {
        "('queued', 'parked', 'starting', 'running')"
    };
    // `run_queue.status` of a run that has started (affinity no longer binds it).
    (queue_started) => {
        "('parked', 'starting', 'running')"
    };
    // `runs.status` of a finished run.
    (run_terminal) => {
        "('completed', 'failed', 'timed_out', 'cancelled')"
    };
    // `runs.status` of a run that may be paused.
    (run_pausable) => {
        "('running', 'waiting')"
    };
    // `node_attempts.status` of an attempt still in progress.
    (attempt_open) => {
        "('pending', 'running')"
    };
    // `node_attempts.status` of an attempt a cancellation ends.
    (attempt_cancellable) => {
        "('pending', 'running', 'waiting', 'interrupted')"
    };
    // `effects.status` of an effect a run's cancellation settles.
    (effect_open) => {
        "('pending', 'applying')"
    };
}
pub(crate) use status_sql;

/// `runs.status`: where the workflow's own execution is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Queued,
    Running,
    Waiting,
    Completed,
    Failed,
    TimedOut,
    Cancelled,
}

/// `run_queue.status`: where the run is in the queue runners claim from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueStatus {
    Queued,
    Starting,
    Running,
    Parked,
    Done,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Waiting,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
    ];

    /// The column's text.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Waiting => "waiting",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// The status the column's text names.
    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }

    /// Whether the run has finished ([`status_sql!`]`(run_terminal)`).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::TimedOut | RunStatus::Cancelled
        )
    }
}

impl QueueStatus {
    pub const ALL: [QueueStatus; 7] = [
        QueueStatus::Queued,
        QueueStatus::Starting,
        QueueStatus::Running,
        QueueStatus::Parked,
        QueueStatus::Done,
        QueueStatus::Failed,
        QueueStatus::Cancelled,
    ];

    /// The column's text.
    pub const fn as_str(self) -> &'static str {
        match self {
            QueueStatus::Queued => "queued",
            QueueStatus::Starting => "starting",
            QueueStatus::Running => "running",
            QueueStatus::Parked => "parked",
            QueueStatus::Done => "done",
            QueueStatus::Failed => "failed",
            QueueStatus::Cancelled => "cancelled",
        }
    }

    /// The status the column's text names.
    pub fn parse(text: &str) -> Option<QueueStatus> {
        QueueStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }

    /// Whether the queue is finished with the run ([`status_sql!`]`(queue_terminal)`).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            QueueStatus::Done | QueueStatus::Failed | QueueStatus::Cancelled
        )
    }

    /// Whether a runner has started the run ([`status_sql!`]`(queue_started)`).
    #[cfg(test)]
    fn is_started(self) -> bool {
        matches!(
            self,
            QueueStatus::Parked | QueueStatus::Starting | QueueStatus::Running
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{QueueStatus, RunStatus};

    /// The statuses of an `IN (…)` list.
    fn listed(sql: &str) -> Vec<&str> {
        sql.trim_matches(|c| c == '(' || c == ')')
            .split(", ")
            .map(|quoted| quoted.trim_matches('\''))
            .collect()
    }

    #[test]
    fn the_sql_text_is_the_enums_text() {
        let single = [
            (status_sql!(queued), "queued"),
            (status_sql!(starting), "starting"),
            (status_sql!(running), "running"),
            (status_sql!(parked), "parked"),
            (status_sql!(waiting), "waiting"),
            (status_sql!(done), "done"),
            (status_sql!(cancelled), "cancelled"),
        ];
        for (sql, text) in single {
            assert_eq!(sql, format!("'{text}'"));
            assert!(RunStatus::parse(text).is_some() || QueueStatus::parse(text).is_some());
        }
        let queue = |sql| {
            listed(sql)
                .into_iter()
                .map(QueueStatus::parse)
                .collect::<Vec<_>>()
        };
        let terminal: Vec<_> = QueueStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(Some)
            .collect();
        assert_eq!(queue(status_sql!(queue_terminal)), terminal);
        let started: Vec<_> = QueueStatus::ALL
            .into_iter()
            .filter(|s| s.is_started())
            .collect();
        let mut listed_started: Vec<_> = queue(status_sql!(queue_started))
            .into_iter()
            .flatten()
            .collect();
        listed_started.sort_by_key(|s| *s as u8);
        assert_eq!(listed_started, started);
        let claimable = queue(status_sql!(queue_claimable));
        assert!(claimable
            .iter()
            .all(|s| s.is_some_and(|s| !s.is_terminal())));
        assert_eq!(claimable.len(), 4);
        let run: Vec<_> = listed(status_sql!(run_terminal))
            .into_iter()
            .map(RunStatus::parse)
            .collect();
        let terminal: Vec<_> = RunStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(Some)
            .collect();
        assert_eq!(run, terminal);
        for status in listed(status_sql!(run_pausable)) {
            assert!(
                RunStatus::parse(status).is_some_and(|s| !s.is_terminal()),
                "{status}"
            );
        }
    }
}
