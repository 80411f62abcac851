//! The run index's contents: one entry per `runs` row with what its joins find, the sets the
//! run polls read (kept in their SQL order), and how the entries follow the changed rows.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, MutexGuard};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row};

use super::journal::Key;
use super::position::WalPosition;
use crate::error::Result;

/// The snapshot an index describes: a WAL position under a schema version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub(super) position: WalPosition,
    pub(super) schema: i64,
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
    /// The `revision` of its `resources` row.
    resource: Option<i64>,
    /// It joins a `workflow_definitions` row.
    definition: bool,
    lease: Option<Lease>,
    /// `execution_mode = 'headless'` of its `run_bindings` row.
    binding: Option<bool>,
}

impl Run {
    /// In `RUN_SELECT`'s inner joins (the lists and the claim).
    fn is_selected(&self) -> bool {
        self.definition && self.queue.is_some() && self.lease.is_some()
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
            && (self.binding == Some(true) || status != "queued")
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
    /// `schema_version` as the open verified it; `None`: not yet verified, not used.
    pub(super) verified_schema: Option<i64>,
    /// The snapshot the index describes; `None`: nothing built yet, or stale.
    pub(super) at: Option<At>,
    runs: HashMap<i64, Run>,
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
                Some(_) => Some(row.get(12)?),
            },
            definition: row.get::<_, Option<i64>>(13)?.is_some(),
            lease: match row.get::<_, Option<i64>>(14)? {
                None => None,
                Some(_) => Some(Lease {
                    owner_id: row
                        .get::<_, Option<String>>(15)?
                        .map(String::into_boxed_str),
                    expires_at: row.get(16)?,
                }),
            },
            binding: match row.get::<_, Option<i64>>(17)? {
                None => None,
                Some(_) => Some(row.get(18)?),
            },
        };
        Ok((row.get(0)?, run))
    }

    pub(super) fn rebuild(&mut self, conn: &Connection) -> Result<()> {
        *self = Mirror {
            verified_schema: self.verified_schema,
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

    /// How many runs the index holds.
    pub(super) fn len(&self) -> usize {
        self.runs.len()
    }

    /// Gives the memory a build reserved for growth back.
    pub(super) fn shrink(&mut self) {
        self.runs.shrink_to_fit();
        self.strings.shrink_to_fit();
    }

    /// Re-reads the runs the changed `keys` belong to.
    pub(super) fn apply(&mut self, conn: &Connection, keys: &BTreeSet<Key>) -> Result<()> {
        let mut affected = BTreeSet::new();
        for key in keys {
            let (sql, text) = match key {
                Key::Run(rowid) => {
                    affected.insert(*rowid);
                    continue;
                }
                Key::DefinitionAdded => {
                    affected.extend(self.orphans.iter().copied());
                    continue;
                }
                Key::RunId(text) => ("SELECT rowid FROM runs WHERE run_id = ?", text),
                Key::ResourceId(text) => ("SELECT rowid FROM runs WHERE resource_id = ?", text),
            };
            // The run the row joins now; the one it joined before is named by its own key
            // (the writer's pre-update hook reports the old value too).
            let text = ToSqlOutput::Borrowed(ValueRef::Text(text));
            let mut owners = conn.prepare_cached(sql)?;
            for owner in owners.query_map([text], |row| row.get::<_, i64>(0))? {
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
        Ok(())
    }

    fn insert(&mut self, rowid: i64, run: Run) {
        if !run.definition {
            self.orphans.insert(rowid);
        }
        self.derive(rowid, &run, true);
        self.runs.insert(rowid, run);
    }

    fn remove(&mut self, rowid: i64) {
        let Some(run) = self.runs.remove(&rowid) else {
            return;
        };
        self.derive(rowid, &run, false);
        if !run.definition {
            self.orphans.remove(&rowid);
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
        if let Some(revision) = run.resource {
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
        if run.definition {
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
