//! The run index's contents: one entry per `runs` row with what its joins find, the sets the
//! run polls read (kept in their SQL order), and how the entries follow the changed rows.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, MutexGuard};

use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::Result;

/// A mirrored table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Table {
    Runs,
    Queue,
    Resources,
    Definitions,
    Leases,
    Bindings,
}

impl Table {
    pub(super) fn of(name: &[u8]) -> Option<Table> {
        Some(match name {
            b"runs" => Table::Runs,
            b"run_queue" => Table::Queue,
            b"resources" => Table::Resources,
            b"workflow_definitions" => Table::Definitions,
            b"leases" => Table::Leases,
            b"run_bindings" => Table::Bindings,
            _ => return None,
        })
    }
}

/// One read's access to an up-to-date index (see `RunIndex::current`).
pub struct Current<'a>(pub(super) MutexGuard<'a, Mirror>);

/// A run's queue row, as the polls read it.
#[derive(Debug, Clone, PartialEq)]
struct Queue {
    rowid: i64,
    status: Arc<str>,
    available_at: i64,
    created_at: i64,
    updated_at: i64,
    /// `error_code = 'workflowSourceChanged'`.
    source_changed: bool,
}

/// A run's lease row.
#[derive(Debug, Clone, PartialEq)]
struct Lease {
    rowid: i64,
    owner_id: Option<Box<str>>,
    expires_at: Option<i64>,
}

/// One `runs` row with what its joins find.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    project: Option<Arc<str>>,
    created_at: i64,
    /// `status = 'waiting'`.
    waiting: bool,
    /// `paused = 1`.
    paused: bool,
    queue: Option<Queue>,
    /// `(rowid, revision)` of its `resources` row.
    resource: Option<(i64, i64)>,
    /// The rowid of its `workflow_definitions` row.
    definition: Option<i64>,
    lease: Option<Lease>,
    /// `(rowid, execution_mode = 'headless')` of its `run_bindings` row.
    binding: Option<(i64, bool)>,
}

impl Run {
    /// In `RUN_SELECT`'s inner joins (the lists and the claim).
    fn is_selected(&self) -> bool {
        self.definition.is_some() && self.queue.is_some() && self.lease.is_some()
    }

    /// The claim predicates that depend on this row alone and on no argument (see
    /// `runs::claims::next_run_selection`), for a host (no `sessionId`).
    fn is_host_candidate(&self) -> bool {
        let Some(queue) = self.queue.as_ref().filter(|_| self.is_selected()) else {
            return false;
        };
        let status = &*queue.status;
        matches!(status, "queued" | "parked" | "starting" | "running")
            && !(status == "parked" && (self.waiting || self.paused))
            && !queue.source_changed
            && (self.binding.is_some_and(|(_, headless)| headless) || status != "queued")
    }
}

/// The order keys of the project lists: `q.created_at DESC, r.created_at DESC, r.rowid`.
type ProjectKey = (Reverse<i64>, Reverse<i64>, i64);

/// The global list with statuses, within one status: `q.created_at DESC, q.available_at,
/// q.rowid`, then the run's rowid.
type StatusKey = (Reverse<i64>, i64, i64, i64);

/// The global list with statuses: `q.created_at DESC, q.status, q.available_at, q.rowid`.
type GlobalStatusKey = (Reverse<i64>, Arc<str>, i64, i64);

/// The index's contents.
#[derive(Default)]
pub(super) struct Mirror {
    /// `schema_version` as the open verified it; `None`: never used (again).
    pub(super) verified_schema: Option<i64>,
    /// `PRAGMA data_version` of the snapshot the index describes; `None`: stale.
    pub(super) built_at: Option<i64>,
    pub(super) stale_polls: u32,
    runs: HashMap<i64, Run>,
    /// Component rowid → the run it joins.
    by_queue: HashMap<i64, i64>,
    by_resource: HashMap<i64, i64>,
    by_lease: HashMap<i64, i64>,
    by_binding: HashMap<i64, i64>,
    /// Definition rowid → how many runs join it.
    by_definition: HashMap<i64, usize>,
    /// Runs without a definition row.
    orphans: BTreeSet<i64>,
    strings: HashSet<Arc<str>>,
    // What the reads use, derived from `runs`.
    /// Runs joined with a queue and a resource row (the list revision).
    revised: i64,
    revision_sum: i128,
    updated_at: BTreeMap<i64, usize>,
    /// The view list: joined with a definition and a queue row (`q.created_at DESC, rowid`).
    views: BTreeSet<(Reverse<i64>, i64)>,
    /// `RUN_SELECT`'s rows: every project (`q.created_at DESC, rowid`), by project, by status.
    listed: BTreeSet<(Reverse<i64>, i64)>,
    listed_by_project: HashMap<Arc<str>, BTreeSet<ProjectKey>>,
    by_status: HashMap<Arc<str>, BTreeSet<StatusKey>>,
    by_project_status: HashMap<(Arc<str>, Arc<str>), BTreeSet<ProjectKey>>,
    /// Host claim candidates (see [`Run::is_host_candidate`]).
    candidates: BTreeSet<i64>,
}

/// The columns of one run and its joins; `WHERE r.rowid = ?` for one run.
const RUN_ROWS: &str = "SELECT r.rowid, r.project_id, r.created_at, r.status = 'waiting',
    r.paused = 1, q.rowid, q.status, q.available_at, q.created_at, q.updated_at,
    q.error_code IS 'workflowSourceChanged', s.rowid, s.revision, d.rowid, l.rowid, l.owner_id,
    l.expires_at, b.rowid, b.execution_mode = 'headless'
    FROM runs r LEFT JOIN run_queue q ON q.run_id = r.run_id
    LEFT JOIN resources s ON s.resource_id = r.resource_id
    LEFT JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    LEFT JOIN leases l ON l.resource_id = r.resource_id
    LEFT JOIN run_bindings b ON b.run_id = r.run_id";

impl Mirror {
    /// An empty index, built by its first read.
    pub(super) fn new() -> Mirror {
        Mirror {
            stale_polls: u32::MAX,
            ..Mirror::default()
        }
    }

    fn intern(&mut self, text: String) -> Arc<str> {
        if let Some(found) = self.strings.get(text.as_str()) {
            return found.clone();
        }
        let text: Arc<str> = text.into();
        self.strings.insert(text.clone());
        text
    }

    fn read_run(&mut self, row: &Row<'_>) -> rusqlite::Result<(i64, Run)> {
        let project: Option<String> = row.get(1)?;
        let queue = match row.get::<_, Option<i64>>(5)? {
            None => None,
            Some(rowid) => Some(Queue {
                rowid,
                status: self.intern(row.get(6)?),
                available_at: row.get(7)?,
                created_at: row.get(8)?,
                updated_at: row.get(9)?,
                source_changed: row.get(10)?,
            }),
        };
        let run = Run {
            project: project.map(|project| self.intern(project)),
            created_at: row.get(2)?,
            waiting: row.get(3)?,
            paused: row.get(4)?,
            queue,
            resource: match row.get::<_, Option<i64>>(11)? {
                None => None,
                Some(rowid) => Some((rowid, row.get(12)?)),
            },
            definition: row.get(13)?,
            lease: match row.get::<_, Option<i64>>(14)? {
                None => None,
                Some(rowid) => Some(Lease {
                    rowid,
                    owner_id: row
                        .get::<_, Option<String>>(15)?
                        .map(String::into_boxed_str),
                    expires_at: row.get(16)?,
                }),
            },
            binding: match row.get::<_, Option<i64>>(17)? {
                None => None,
                Some(rowid) => Some((rowid, row.get(18)?)),
            },
        };
        Ok((row.get(0)?, run))
    }

    pub(super) fn rebuild(&mut self, conn: &Connection) -> Result<()> {
        *self = Mirror {
            verified_schema: self.verified_schema,
            stale_polls: self.stale_polls,
            ..Mirror::default()
        };
        let mut statement = conn.prepare_cached(RUN_ROWS)?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let (rowid, run) = self.read_run(row)?;
            self.insert(rowid, run);
        }
        Ok(())
    }

    /// Re-reads the runs the changed `rows` belong to; `true` when only a rebuild can tell
    /// (a definition some run joined changed).
    pub(super) fn apply(&mut self, conn: &Connection, rows: &[(Table, i64)]) -> Result<bool> {
        let mut affected = BTreeSet::new();
        let unique: HashSet<&(Table, i64)> = rows.iter().collect();
        for &(table, rowid) in unique {
            let (reverse, owner_sql) = match table {
                Table::Runs => {
                    affected.insert(rowid);
                    continue;
                }
                Table::Definitions => {
                    if self.by_definition.contains_key(&rowid) {
                        return Ok(true);
                    }
                    affected.extend(self.orphans.iter().copied());
                    continue;
                }
                Table::Queue => (
                    &self.by_queue,
                    "SELECT r.rowid FROM run_queue c JOIN runs r ON r.run_id = c.run_id
                     WHERE c.rowid = ?",
                ),
                Table::Resources => (
                    &self.by_resource,
                    "SELECT r.rowid FROM resources c JOIN runs r ON r.resource_id = c.resource_id
                     WHERE c.rowid = ?",
                ),
                Table::Leases => (
                    &self.by_lease,
                    "SELECT r.rowid FROM leases c JOIN runs r ON r.resource_id = c.resource_id
                     WHERE c.rowid = ?",
                ),
                Table::Bindings => (
                    &self.by_binding,
                    "SELECT r.rowid FROM run_bindings c JOIN runs r ON r.run_id = c.run_id
                     WHERE c.rowid = ?",
                ),
            };
            // The run the row joined before the change, and the one it joins now.
            affected.extend(reverse.get(&rowid).copied());
            let mut owners = conn.prepare_cached(owner_sql)?;
            for owner in owners.query_map([rowid], |row| row.get::<_, i64>(0))? {
                affected.insert(owner?);
            }
        }
        let sql = {
            static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
            SQL.get_or_init(|| format!("{RUN_ROWS} WHERE r.rowid = ?"))
        };
        for rowid in affected {
            let fresh = conn
                .prepare_cached(sql)?
                .query_row([rowid], |row| self.read_run(row))
                .optional()?;
            self.remove(rowid);
            if let Some((rowid, run)) = fresh {
                self.insert(rowid, run);
            }
        }
        Ok(false)
    }

    fn insert(&mut self, rowid: i64, run: Run) {
        if let Some(queue) = &run.queue {
            self.by_queue.insert(queue.rowid, rowid);
        }
        if let Some((resource, _)) = run.resource {
            self.by_resource.insert(resource, rowid);
        }
        if let Some(lease) = &run.lease {
            self.by_lease.insert(lease.rowid, rowid);
        }
        if let Some((binding, _)) = run.binding {
            self.by_binding.insert(binding, rowid);
        }
        match run.definition {
            Some(definition) => *self.by_definition.entry(definition).or_default() += 1,
            None => {
                self.orphans.insert(rowid);
            }
        }
        self.derive(rowid, &run, true);
        self.runs.insert(rowid, run);
    }

    fn remove(&mut self, rowid: i64) {
        let Some(run) = self.runs.remove(&rowid) else {
            return;
        };
        self.derive(rowid, &run, false);
        fn unlink(map: &mut HashMap<i64, i64>, key: Option<i64>, rowid: i64) {
            if let Some(key) = key {
                if map.get(&key) == Some(&rowid) {
                    map.remove(&key);
                }
            }
        }
        unlink(
            &mut self.by_queue,
            run.queue.as_ref().map(|q| q.rowid),
            rowid,
        );
        unlink(&mut self.by_resource, run.resource.map(|r| r.0), rowid);
        unlink(
            &mut self.by_lease,
            run.lease.as_ref().map(|l| l.rowid),
            rowid,
        );
        unlink(&mut self.by_binding, run.binding.map(|b| b.0), rowid);
        match run.definition {
            Some(definition) => {
                if let Some(count) = self.by_definition.get_mut(&definition) {
                    *count -= 1;
                    if *count == 0 {
                        self.by_definition.remove(&definition);
                    }
                }
            }
            None => {
                self.orphans.remove(&rowid);
            }
        }
    }

    /// Adds (`add`) or removes the run's entries in what the reads use.
    fn derive(&mut self, rowid: i64, run: &Run, add: bool) {
        fn toggle<K: Ord>(set: &mut BTreeSet<K>, key: K, add: bool) {
            if add {
                set.insert(key);
            } else {
                set.remove(&key);
            }
        }
        let Some(queue) = &run.queue else {
            return;
        };
        if let Some((_, revision)) = run.resource {
            let sign = if add { 1 } else { -1 };
            self.revised += sign;
            self.revision_sum += i128::from(sign) * i128::from(revision);
            let count = self.updated_at.entry(queue.updated_at).or_default();
            if add {
                *count += 1;
            } else {
                *count -= 1;
                if *count == 0 {
                    self.updated_at.remove(&queue.updated_at);
                }
            }
        }
        let created = Reverse(queue.created_at);
        if run.definition.is_some() {
            toggle(&mut self.views, (created, rowid), add);
        }
        if !run.is_selected() {
            return;
        }
        toggle(&mut self.listed, (created, rowid), add);
        let status_key = (created, queue.available_at, queue.rowid, rowid);
        toggle(
            self.by_status.entry(queue.status.clone()).or_default(),
            status_key,
            add,
        );
        if let Some(project) = &run.project {
            let key = (created, Reverse(run.created_at), rowid);
            toggle(
                self.listed_by_project.entry(project.clone()).or_default(),
                key,
                add,
            );
            toggle(
                self.by_project_status
                    .entry((project.clone(), queue.status.clone()))
                    .or_default(),
                key,
                add,
            );
        }
        if run.is_host_candidate() {
            toggle(&mut self.candidates, rowid, add);
        }
    }
}

/// `{count, sum of revisions, max(updated_at) or 0}` of every run joined with its queue and
/// resource rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRevision {
    /// `count(*)`.
    pub count: i64,
    /// `COALESCE(sum(res.revision), 0)`.
    pub revision_sum: i64,
    /// `COALESCE(max(q.updated_at), 0)`.
    pub updated_at: i64,
}

impl Current<'_> {
    /// The list revision; `None` when its sum leaves SQLite's integers (SQLite's `sum()`
    /// then fails: the caller takes the SQL path for its error).
    pub fn list_revision(&self) -> Option<ListRevision> {
        Some(ListRevision {
            count: self.0.revised,
            revision_sum: i64::try_from(self.0.revision_sum).ok()?,
            updated_at: self.0.updated_at.keys().next_back().copied().unwrap_or(0),
        })
    }

    /// The rowids of the view list's page (`ORDER BY q.created_at DESC` with its ties in
    /// rowid order, see `runs::reads`).
    pub fn view_page(&self, offset: usize, limit: usize) -> Vec<i64> {
        self.0
            .views
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(_, rowid)| *rowid)
            .collect()
    }

    /// The rowids of `listWorkflowRuns` without exclusions, in its order (see
    /// `runs::reads::list_workflow_runs`): of `project` (or every project), of `statuses`
    /// (or any status), at most `limit`.
    pub fn list_page(
        &self,
        project: Option<&str>,
        statuses: Option<&[&[u8]]>,
        limit: Option<usize>,
    ) -> Vec<i64> {
        let limit = limit.unwrap_or(usize::MAX);
        let mirror = &self.0;
        let wanted = |statuses: &[&[u8]]| -> Vec<Arc<str>> {
            let mut found: Vec<Arc<str>> = mirror
                .by_status
                .keys()
                .filter(|status| statuses.contains(&status.as_bytes()))
                .cloned()
                .collect();
            found.sort();
            found
        };
        match (project, statuses) {
            (Some(project), None) => mirror
                .listed_by_project
                .get(project)
                .into_iter()
                .flatten()
                .take(limit)
                .map(|key| key.2)
                .collect(),
            (None, None) => mirror
                .listed
                .iter()
                .take(limit)
                .map(|(_, rowid)| *rowid)
                .collect(),
            (Some(project), Some(statuses)) => {
                let mut page: Vec<ProjectKey> = Vec::new();
                for status in wanted(statuses) {
                    let key = (Arc::from(project), status);
                    if let Some(set) = mirror.by_project_status.get(&key) {
                        page.extend(set.iter().take(limit).copied());
                    }
                }
                page.sort_unstable();
                page.into_iter().take(limit).map(|key| key.2).collect()
            }
            (None, Some(statuses)) => {
                // `q.created_at DESC, q.status, q.available_at, q.rowid`.
                let mut page: Vec<(GlobalStatusKey, i64)> = Vec::new();
                for status in wanted(statuses) {
                    if let Some(set) = mirror.by_status.get(&status) {
                        page.extend(
                            set.iter()
                                .take(limit)
                                .map(|key| ((key.0, status.clone(), key.1, key.2), key.3)),
                        );
                    }
                }
                page.sort_unstable();
                page.into_iter()
                    .take(limit)
                    .map(|(_, rowid)| rowid)
                    .collect()
            }
        }
    }

    /// A superset of the runs a host's `claimNextWorkflowRun` may pick at `now` (rowids,
    /// ascending): the row-local predicates, the project, and the lease test when the runner
    /// binds as `runner` (text). The caller's SQL makes the pick among them.
    pub fn host_candidates(
        &self,
        project: Option<&str>,
        runner: Option<&str>,
        now: i64,
    ) -> Vec<i64> {
        // `l.expires_at <= ?` binds `now` as a double: exact only within 2^53.
        let exact_now = now.unsigned_abs() <= 1 << 53;
        self.0
            .candidates
            .iter()
            .copied()
            .filter(|rowid| {
                let Some(run) = self.0.runs.get(rowid) else {
                    return false;
                };
                if project.is_some_and(|project| run.project.as_deref() != Some(project)) {
                    return false;
                }
                let Some(lease) = &run.lease else {
                    return false;
                };
                match (&lease.owner_id, runner) {
                    (None, _) | (Some(_), None) => true,
                    (Some(owner), Some(runner)) => {
                        **owner == *runner
                            || !exact_now
                            || lease.expires_at.is_some_and(|expires| expires <= now)
                    }
                }
            })
            .collect()
    }
}
