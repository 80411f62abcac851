//! The run index's contents: one compact entry per `runs` row with what its joins find, the
//! orders the run polls read, and how the entries follow the changed runs.
//!
//! Kept small (96 bytes a run, see the size test): the runs in one rowid-sorted
//! vector, the view order in one sorted vector whose entries carry what the list filters
//! test, ordered sets only for the few runs that are active (queued, starting, running,
//! parked) and for the host's claim candidates. Lease owners and runner affinities are kept
//! as hashes: the claim reads them only to narrow its candidates, and a collision only adds
//! one the claim's own SQL then turns down.
//!
//! What a run's row is read from is `rows`'s; what the polls read of the contents, `answers`'s.

pub(super) mod answers;
mod rows;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, MutexGuard};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};
use rustc_hash::FxHashMap;

use super::journal::Key;
use super::position::WalPosition;
use super::records::RecordCache;
use crate::error::Result;
pub(super) use rows::{affected_runs, image_of};
use rows::{column, columns_of, decode_image, run_by_rowid_sql, text_hash, Columns, RUN_ROWS};

/// The snapshot an index describes: a WAL position under a schema version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub(super) position: WalPosition,
    pub(super) schema: i64,
}

/// One read's access to an up-to-date index (see `RunIndex::current`); what it answers is
/// `answers`'s.
pub struct Current<'a>(pub(super) MutexGuard<'a, Mirror>);

/// What an entry has (bits of [`Run::flags`]).
mod has {
    pub const QUEUE: u16 = 1;
    pub const RESOURCE: u16 = 1 << 1;
    pub const DEFINITION: u16 = 1 << 2;
    pub const LEASE: u16 = 1 << 3;
    pub const OWNER: u16 = 1 << 4;
    pub const EXPIRY: u16 = 1 << 5;
    pub const AFFINITY: u16 = 1 << 6;
    /// `r.status = 'waiting'`.
    pub const WAITING: u16 = 1 << 7;
    /// `r.paused = 1`.
    pub const PAUSED: u16 = 1 << 8;
    /// `q.error_code = 'workflowSourceChanged'`.
    pub const SOURCE_CHANGED: u16 = 1 << 9;
    /// `b.execution_mode = 'headless'`.
    pub const HEADLESS: u16 = 1 << 10;
}

/// The queue statuses a run can be claimed in, kept in ordered sets of their own.
const ACTIVE: [&str; 4] = ["queued", "starting", "running", "parked"];

/// One `runs` row with what its joins find (fields of a missing row are 0; see `flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Run {
    r_created: i64,
    q_rowid: i64,
    q_created: i64,
    q_updated: i64,
    available_at: i64,
    revision: i64,
    expires_at: i64,
    owner: u32,
    affinity: u32,
    /// A [`Names`] number, 0 for `NULL`.
    project: u32,
    /// A [`Names`] number of the queue's status, 0 without a queue row.
    status: u8,
    flags: u16,
}

impl Run {
    fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// In the view list's joins: a definition and a queue row.
    fn is_viewed(&self) -> bool {
        self.has(has::DEFINITION) && self.has(has::QUEUE)
    }

    /// In `RUN_SELECT`'s inner joins (the lists and the claim).
    fn is_selected(&self) -> bool {
        self.is_viewed() && self.has(has::LEASE)
    }

    /// The claim predicates that depend on this row alone and on no argument (see
    /// `runs::claims::next_run_selection`), for a host (no `sessionId`).
    fn is_host_candidate(&self, status: &str) -> bool {
        self.is_selected()
            && matches!(status, "queued" | "parked" | "starting" | "running")
            && !(status == "parked" && (self.has(has::WAITING) || self.has(has::PAUSED)))
            && !self.has(has::SOURCE_CHANGED)
            && (self.has(has::HEADLESS) || status != "queued")
    }
}

/// A run in the view order: its key only (what the list filters test is the run's, looked up
/// by rowid — 16 bytes a run less than a copy of it here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct View {
    q_created: i64,
    rowid: i64,
}

impl View {
    /// Stored ascending, read backwards: `q.created_at DESC`, then rowid ascending. New runs
    /// (the latest `created_at`) go near the end, where inserting moves little.
    fn key(&self) -> (i64, Reverse<i64>) {
        (self.q_created, Reverse(self.rowid))
    }
}

/// Texts by number (0 stands for none).
#[derive(Default)]
struct Names {
    /// Fx, not SipHash: every run image a catch-up reads hashes its status and project, and
    /// these texts come from the state file, where colliding ones could only slow a poll.
    numbers: FxHashMap<Arc<str>, u32>,
    texts: Vec<Arc<str>>,
}

impl Names {
    /// The number of `text` (a TEXT column's value), allocating only for a new one.
    fn number(&mut self, value: ValueRef<'_>) -> rusqlite::Result<u32> {
        let Some(text) = value.as_str_or_null()? else {
            return Ok(0);
        };
        if let Some(number) = self.numbers.get(text) {
            return Ok(*number);
        }
        let text: Arc<str> = text.into();
        self.texts.push(text.clone());
        let number = self.texts.len() as u32;
        self.numbers.insert(text, number);
        Ok(number)
    }

    fn find(&self, text: &[u8]) -> Option<u32> {
        std::str::from_utf8(text)
            .ok()
            .and_then(|text| self.numbers.get(text).copied())
    }

    fn text(&self, number: u32) -> &str {
        number
            .checked_sub(1)
            .and_then(|at| self.texts.get(at as usize))
            .map_or("", |text| text)
    }
}

/// The index's contents.
#[derive(Default)]
pub(super) struct Mirror {
    /// `schema_version` as the open verified it; `None`: not yet verified, not used.
    pub(super) verified_schema: Option<i64>,
    /// The snapshot the index describes; `None`: nothing built yet, or stale.
    pub(super) at: Option<At>,
    /// By rowid, ascending.
    runs: Vec<(i64, Run)>,
    /// Every run in the view list, by [`View::key`].
    views: Vec<View>,
    projects: Names,
    statuses: Names,
    /// Runs without a definition row (a definition inserted later may join them).
    orphans: BTreeSet<i64>,
    /// Selected runs in an [`ACTIVE`] status, by status: `q.created_at DESC, rowid`.
    active: HashMap<u8, BTreeSet<(Reverse<i64>, i64)>>,
    /// Host claim candidates (see [`Run::is_host_candidate`]) any runner may take...
    candidates: BTreeSet<i64>,
    /// ...and those only the runner of their affinity may take (queued), by its hash: a host
    /// never looks at the runs reserved for others.
    reserved: HashMap<u32, BTreeSet<i64>>,
    // The list revision: runs joined with a queue and a resource row.
    revised: i64,
    revision_sum: i128,
    /// `max(q.updated_at)` and how many runs have it; recounted when the last one goes.
    max_updated: i64,
    at_max_updated: usize,
    /// The records of runs a list read lately (see `records`).
    pub(super) records: RecordCache,
    /// How many runs were taken from images (tests tell the two ways of catching up apart).
    #[cfg(test)]
    pub(super) images_applied: usize,
}

impl Mirror {
    fn read_run(&mut self, columns: &Columns<'_>) -> rusqlite::Result<(i64, Run)> {
        let mut run = Run::default();
        let mut set = |flag: u16, on: bool| {
            if on {
                run.flags |= flag;
            }
        };
        set(has::WAITING, column(columns, 3)?);
        set(has::PAUSED, column(columns, 4)?);
        let queue = column::<Option<i64>>(columns, 5)?.is_some();
        set(has::QUEUE, queue);
        let resource = column::<Option<i64>>(columns, 12)?.is_some();
        set(has::RESOURCE, resource);
        set(
            has::DEFINITION,
            column::<Option<i64>>(columns, 14)?.is_some(),
        );
        let lease = column::<Option<i64>>(columns, 15)?.is_some();
        set(has::LEASE, lease);
        let owner = columns[16].as_bytes_or_null()?;
        set(has::OWNER, owner.is_some());
        let expires_at = column::<Option<i64>>(columns, 17)?;
        set(has::EXPIRY, expires_at.is_some());
        let affinity = columns[11].as_bytes_or_null()?;
        set(has::AFFINITY, affinity.is_some());
        if queue {
            set(has::SOURCE_CHANGED, column(columns, 10)?);
        }
        if column::<Option<i64>>(columns, 18)?.is_some() {
            set(has::HEADLESS, column(columns, 19)?);
        }
        run.owner = owner.map_or(0, text_hash);
        run.affinity = affinity.map_or(0, text_hash);
        run.expires_at = expires_at.unwrap_or(0);
        run.r_created = column(columns, 2)?;
        if queue {
            run.q_rowid = column(columns, 5)?;
            run.status = self.statuses.number(columns[6])? as u8;
            run.available_at = column(columns, 7)?;
            run.q_created = column(columns, 8)?;
            run.q_updated = column(columns, 9)?;
        }
        if resource {
            run.revision = column(columns, 13)?;
        }
        run.project = self.projects.number(columns[1])?;
        Ok((column(columns, 0)?, run))
    }

    pub(super) fn rebuild(&mut self, conn: &Connection) -> Result<()> {
        *self = Mirror {
            verified_schema: self.verified_schema,
            ..Mirror::default()
        };
        let mut statement = conn.prepare_cached(RUN_ROWS)?;
        let mut rows = statement.query([])?;
        let mut runs = Vec::new();
        while let Some(row) = rows.next()? {
            runs.push(self.read_run(&columns_of(row)?)?);
        }
        runs.sort_unstable_by_key(|(rowid, _)| *rowid);
        let mut views: Vec<View> = runs
            .iter()
            .filter_map(|(rowid, run)| view_of(*rowid, run))
            .collect();
        views.sort_unstable_by_key(View::key);
        self.views = views;
        for (rowid, run) in &runs {
            self.derive(*rowid, run, true);
        }
        self.runs = runs;
        self.shrink();
        Ok(())
    }

    /// How many runs the index holds.
    pub(super) fn len(&self) -> usize {
        self.runs.len()
    }

    /// Gives the memory a build reserved for growth back.
    fn shrink(&mut self) {
        self.runs.shrink_to_fit();
        self.views.shrink_to_fit();
    }

    /// Re-reads the runs the changed `keys` belong to.
    pub(super) fn apply(&mut self, conn: &Connection, keys: &BTreeSet<Key>) -> Result<()> {
        if keys.contains(&Key::BlobChanged) {
            self.records.clear();
        }
        let sql = run_by_rowid_sql();
        for rowid in affected_runs(conn, keys, &self.orphans)? {
            let fresh = conn
                .prepare_cached(sql)?
                .query_row([rowid], |row| self.read_run(&columns_of(row)?))
                .optional()?;
            self.put(rowid, fresh.map(|(_, run)| run));
        }
        self.settle_max_updated();
        Ok(())
    }

    /// Takes the rows a writer read for its commit (`None`: the run is gone); `false` when
    /// an image does not decode (the caller then builds).
    pub(super) fn apply_images(&mut self, images: &BTreeMap<i64, &Option<Box<[u8]>>>) -> bool {
        for (&rowid, image) in images {
            let fresh = match image {
                None => None,
                Some(bytes) => {
                    let Some(columns) = decode_image(bytes) else {
                        return false;
                    };
                    match self.read_run(&columns) {
                        Ok((at, run)) if at == rowid => Some(run),
                        _ => return false,
                    }
                }
            };
            self.put(rowid, fresh);
            #[cfg(test)]
            {
                self.images_applied += 1;
            }
        }
        self.settle_max_updated();
        true
    }

    fn settle_max_updated(&mut self) {
        if self.at_max_updated == 0 && self.revised > 0 {
            self.recount_max_updated();
        }
    }

    /// Replaces run `rowid` with `fresh` (`None`: it is gone).
    fn put(&mut self, rowid: i64, fresh: Option<Run>) {
        // Its record may have changed where its index row did not.
        self.records.forget(rowid);
        let found = self.position_of(rowid);
        let old = found.ok().map(|at| self.runs[at].1);
        if old == fresh {
            return;
        }
        if let Some(old) = &old {
            self.derive(rowid, old, false);
        }
        let (old_view, new_view) = (
            old.and_then(|run| view_of(rowid, &run)),
            fresh.and_then(|run| view_of(rowid, &run)),
        );
        match (old_view, new_view) {
            // A lease, revision or affinity change: the view list is as it was.
            (old, new) if old == new => {}
            (Some(old), Some(new)) if old.key() == new.key() => {
                if let Ok(at) = self.views.binary_search_by_key(&old.key(), View::key) {
                    self.views[at] = new;
                }
            }
            (old, new) => {
                if let Some(old) = old {
                    if let Ok(at) = self.views.binary_search_by_key(&old.key(), View::key) {
                        self.views.remove(at);
                    }
                }
                if let Some(new) = new {
                    let at = self
                        .views
                        .binary_search_by_key(&new.key(), View::key)
                        .unwrap_or_else(|at| at);
                    grow_gently(&mut self.views);
                    self.views.insert(at, new);
                }
            }
        }
        match (found, fresh) {
            (Ok(at), Some(run)) => self.runs[at].1 = run,
            (Ok(at), None) => {
                self.runs.remove(at);
            }
            (Err(at), Some(run)) => {
                grow_gently(&mut self.runs);
                self.runs.insert(at, (rowid, run));
            }
            (Err(_), None) => {}
        }
        if let Some(fresh) = &fresh {
            self.derive(rowid, fresh, true);
        }
    }

    /// Adds (`add`) or removes the run's part of the revision, the active sets, the claim
    /// candidates and the orphans.
    fn derive(&mut self, rowid: i64, run: &Run, add: bool) {
        fn toggle<K: Ord>(set: &mut BTreeSet<K>, key: K, add: bool) {
            if add {
                set.insert(key);
            } else {
                set.remove(&key);
            }
        }
        if !run.has(has::DEFINITION) {
            toggle(&mut self.orphans, rowid, add);
        }
        if !run.has(has::QUEUE) {
            return;
        }
        if run.has(has::RESOURCE) {
            let sign = if add { 1 } else { -1 };
            let first = self.revised == 0;
            self.revised += sign;
            self.revision_sum += i128::from(sign) * i128::from(run.revision);
            // While no run has `max_updated` (the last one changed), the true maximum is at
            // most it: only a larger value is known to be the new one.
            if add && (first || run.q_updated > self.max_updated) {
                self.max_updated = run.q_updated;
                self.at_max_updated = 1;
            } else if run.q_updated == self.max_updated {
                if add {
                    self.at_max_updated += 1;
                } else {
                    self.at_max_updated = self.at_max_updated.saturating_sub(1);
                }
            }
        }
        let status = self.statuses.text(u32::from(run.status));
        let is_active = ACTIVE.contains(&status);
        let candidate = run.is_host_candidate(status);
        if run.is_selected() && is_active {
            toggle(
                self.active.entry(run.status).or_default(),
                (Reverse(run.q_created), rowid),
                add,
            );
        }
        if candidate && status == "queued" && run.has(has::AFFINITY) {
            let reserved = self.reserved.entry(run.affinity).or_default();
            toggle(reserved, rowid, add);
            if reserved.is_empty() {
                self.reserved.remove(&run.affinity);
            }
        } else if candidate {
            toggle(&mut self.candidates, rowid, add);
        }
    }

    /// `max(q.updated_at)` afresh, after the last run that had it changed.
    fn recount_max_updated(&mut self) {
        let revised = self
            .runs
            .iter()
            .filter(|(_, run)| run.has(has::QUEUE) && run.has(has::RESOURCE))
            .map(|(_, run)| run.q_updated);
        let max = revised.clone().max().unwrap_or(0);
        self.max_updated = max;
        self.at_max_updated = revised.filter(|updated| *updated == max).count();
    }

    /// The number runs of `project` have (`Some(None)`: any project); `None` when no run has it.
    fn project_filter(&self, project: Option<&str>) -> Option<Option<u32>> {
        match project {
            None => Some(None),
            Some(text) => self.projects.find(text.as_bytes()).map(Some),
        }
    }

    fn run(&self, rowid: i64) -> Option<&Run> {
        self.position_of(rowid).ok().map(|at| &self.runs[at].1)
    }

    /// Where run `rowid` is in `runs` (`Err`: where it would go). Rowids are mostly dense, so
    /// the place they would have without gaps is tried first: a binary search of a large
    /// index misses the cache at nearly every step.
    fn position_of(&self, rowid: i64) -> std::result::Result<usize, usize> {
        let by_rowid = |(rowid, _): &(i64, Run)| *rowid;
        if self.runs.last().is_none_or(|(last, _)| *last < rowid) {
            return Err(self.runs.len());
        }
        if let Some(&(first, _)) = self.runs.first() {
            let guess = rowid.wrapping_sub(first);
            if let Some((found, _)) = usize::try_from(guess).ok().and_then(|at| self.runs.get(at)) {
                if *found == rowid {
                    return Ok(guess as usize);
                }
            }
        }
        self.runs.binary_search_by_key(&rowid, by_rowid)
    }
}

/// Room for one more, an eighth at a time: doubling would leave up to half of the largest
/// vectors unused.
fn grow_gently<T>(vector: &mut Vec<T>) {
    if vector.len() == vector.capacity() {
        vector.reserve_exact(vector.len() / 8 + 16);
    }
}

fn view_of(rowid: i64, run: &Run) -> Option<View> {
    run.is_viewed().then_some(View {
        q_created: run.q_created,
        rowid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_stays_small() {
        // What a run costs in the two vectors every run is in (the sets hold active runs only).
        let per_run = std::mem::size_of::<(i64, Run)>() + std::mem::size_of::<View>();
        assert!(per_run <= 96, "{per_run} bytes a run");
    }
}
