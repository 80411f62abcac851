//! The run records (`listWorkflowRuns`'s JSON) and view records (`listWorkflowRunViews`'s) of
//! the runs the index last read for a page, kept while nothing they are read from changes: a
//! poll's page of runs that did not change since is not read through SQL again (after another
//! process's commit, that read met a cold page cache for every record).
//!
//! Exact as the index is, at the same snapshot: a change to any row of a run's records — its
//! `runs`, `run_queue`, `run_bindings`, `run_sources`, `leases` or `resources` row, as the
//! journal's keys and images name it — drops that run's record (`Mirror::put`); a changed or
//! deleted blob (`Key::BlobChanged`) drops them all, and so does every build (the mirror
//! starts empty), so a changed definition or any gap does too. A record is kept only when
//! every document it read was there: a blob inserted later cannot change it.

use rustc_hash::FxHashMap;

/// Past this many records of a kind the cache of that kind starts again (a few MiB: records
/// are ~1–2 KiB).
const MAX_RECORDS: usize = 4_096;

/// Which record of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `WorkflowRunQueueRecord` (`listWorkflowRuns`).
    Record,
    /// `WorkflowRunQueueViewRecord` (`listWorkflowRunViews`).
    View,
}

#[derive(Default)]
pub(super) struct RecordCache {
    records: FxHashMap<i64, Box<str>>,
    views: FxHashMap<i64, Box<str>>,
}

impl RecordCache {
    fn of(&self, shape: Shape) -> &FxHashMap<i64, Box<str>> {
        match shape {
            Shape::Record => &self.records,
            Shape::View => &self.views,
        }
    }

    pub(super) fn get(&self, shape: Shape, rowid: i64) -> Option<&str> {
        self.of(shape).get(&rowid).map(|record| &**record)
    }

    pub(super) fn keep(&mut self, shape: Shape, rowid: i64, record: &str) {
        let kept = match shape {
            Shape::Record => &mut self.records,
            Shape::View => &mut self.views,
        };
        if kept.len() >= MAX_RECORDS {
            kept.clear();
        }
        kept.insert(rowid, record.into());
    }

    pub(super) fn forget(&mut self, rowid: i64) {
        self.records.remove(&rowid);
        self.views.remove(&rowid);
    }

    pub(super) fn clear(&mut self) {
        self.records.clear();
        self.views.clear();
    }
}
