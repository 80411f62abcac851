//! What the run polls read of an up-to-date index: the list revision, the pages of the two
//! run lists, and a host's claim candidates.

use std::cmp::Reverse;

use super::rows::text_hash;
use super::{has, Current, Run, View, ACTIVE};
use crate::state::leases::free_or_expired;
use crate::state::run_index::records::Shape;

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
    /// The record of run `rowid` a list kept, still exact at this snapshot (see `records`).
    pub fn record(&self, shape: Shape, rowid: i64) -> Option<&str> {
        self.0.records.get(shape, rowid)
    }

    /// Keeps the record of run `rowid`, read at this snapshot with every document it reads.
    pub fn keep_record(&mut self, shape: Shape, rowid: i64, record: &str) {
        self.0.records.keep(shape, rowid, record);
    }

    /// The list revision; `None` when its sum leaves SQLite's integers (SQLite's `sum()`
    /// then fails: the caller takes the SQL path for its error).
    pub fn list_revision(&self) -> Option<ListRevision> {
        let mirror = &self.0;
        Some(ListRevision {
            count: mirror.revised,
            revision_sum: i64::try_from(mirror.revision_sum).ok()?,
            updated_at: if mirror.revised > 0 {
                mirror.max_updated
            } else {
                0
            },
        })
    }

    /// The rowids of the view list's page (`ORDER BY q.created_at DESC` with its ties in
    /// rowid order, see `runs::reads`).
    pub fn view_page(&self, offset: usize, limit: usize) -> Vec<i64> {
        self.0
            .views
            .iter()
            .rev()
            .skip(offset)
            .take(limit)
            .map(|view| view.rowid)
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
        let Some(project) = mirror.project_filter(project) else {
            return Vec::new();
        };
        let wanted: Option<Vec<u8>> = statuses.map(|statuses| {
            statuses
                .iter()
                .filter_map(|text| mirror.statuses.find(text))
                .map(|number| number as u8)
                .collect()
        });
        if limit == 0 || wanted.as_ref().is_some_and(Vec::is_empty) {
            return Vec::new();
        }
        let all_active = wanted.as_ref().is_some_and(|wanted| {
            wanted
                .iter()
                .all(|status| ACTIVE.contains(&mirror.statuses.text(u32::from(*status))))
        });
        if all_active {
            let wanted = wanted.as_deref().unwrap_or_default();
            return self.active_page(project, wanted, limit);
        }
        let passes = |view: &View| {
            mirror.run(view.rowid).is_some_and(|run| {
                run.is_selected()
                    && project.is_none_or(|project| run.project == project)
                    && wanted
                        .as_ref()
                        .is_none_or(|wanted| wanted.contains(&run.status))
            })
        };
        // Read in view order; runs with the same `q.created_at` are put in the list's own
        // order for their ties.
        let mut page = Vec::new();
        let mut group: Vec<&View> = Vec::new();
        let mut views = mirror.views.iter().rev().peekable();
        while page.len() < limit {
            let Some(view) = views.next() else {
                break;
            };
            if passes(view) {
                group.push(view);
            }
            if views
                .peek()
                .is_some_and(|next| next.q_created == view.q_created)
            {
                continue;
            }
            let mut rowids: Vec<i64> = group.iter().map(|view| view.rowid).collect();
            if rowids.len() > 1 {
                self.order_ties(&mut rowids, project.is_some(), wanted.is_some());
            }
            page.extend(rowids);
            group.clear();
        }
        page.truncate(limit);
        page
    }

    /// The page of `list_page` for statuses that are all [`ACTIVE`]: from their own sets.
    fn active_page(&self, project: Option<u32>, wanted: &[u8], limit: usize) -> Vec<i64> {
        let mirror = &self.0;
        let mut found: Vec<(i64, i64)> = Vec::new();
        for status in wanted {
            let Some(set) = mirror.active.get(status) else {
                continue;
            };
            // The first `limit` of this status, and every run tied with the last of them.
            let mut taken = 0;
            let mut last: Option<i64> = None;
            for &(Reverse(q_created), rowid) in set {
                if taken >= limit && last != Some(q_created) {
                    break;
                }
                let matches = project.is_none_or(|project| {
                    mirror.run(rowid).is_some_and(|run| run.project == project)
                });
                if matches {
                    found.push((q_created, rowid));
                    taken += 1;
                    last = Some(q_created);
                }
            }
        }
        found.sort_unstable_by_key(|&(q_created, rowid)| (Reverse(q_created), rowid));
        found.dedup();
        let mut page = Vec::new();
        let mut at = 0;
        while at < found.len() && page.len() < limit {
            let end = found[at..]
                .iter()
                .position(|entry| entry.0 != found[at].0)
                .map_or(found.len(), |length| at + length);
            let mut rowids: Vec<i64> = found[at..end].iter().map(|entry| entry.1).collect();
            if rowids.len() > 1 {
                self.order_ties(&mut rowids, project.is_some(), true);
            }
            page.extend(rowids);
            at = end;
        }
        page.truncate(limit);
        page
    }

    /// Orders runs with one `q.created_at` as the list does: `r.created_at DESC, r.rowid` for a
    /// project; `q.status, q.available_at, q.rowid` for every project with statuses; rowid
    /// otherwise.
    fn order_ties(&self, rowids: &mut [i64], project: bool, by_status: bool) {
        let mirror = &self.0;
        let run = |rowid: i64| mirror.run(rowid).copied().unwrap_or_default();
        if project {
            rowids.sort_by_key(|&rowid| (Reverse(run(rowid).r_created), rowid));
        } else if by_status {
            rowids.sort_by(|&a, &b| {
                let (x, y) = (run(a), run(b));
                let status = |run: &Run| mirror.statuses.text(u32::from(run.status));
                (status(&x), x.available_at, x.q_rowid, a).cmp(&(
                    status(&y),
                    y.available_at,
                    y.q_rowid,
                    b,
                ))
            });
        } else {
            rowids.sort_unstable();
        }
    }

    /// A superset of the runs a host's `claimNextWorkflowRun` may pick at `now` (rowids,
    /// ascending): the row-local predicates, the project, and, when the runner binds as
    /// `runner` (text), the lease, affinity and availability tests. The caller's SQL makes the
    /// pick among them.
    pub fn host_candidates(
        &self,
        project: Option<&str>,
        runner: Option<&str>,
        now: i64,
    ) -> Vec<i64> {
        let mirror = &self.0;
        let Some(project) = mirror.project_filter(project) else {
            return Vec::new();
        };
        // `now` is bound as a double: the comparisons are exact only within 2^53.
        let exact_now = now.unsigned_abs() <= 1 << 53;
        let runner = runner.map(|runner| text_hash(runner.as_bytes()));
        let reserved: Vec<i64> = match runner {
            Some(runner) => mirror
                .reserved
                .get(&runner)
                .into_iter()
                .flatten()
                .copied()
                .collect(),
            None => mirror.reserved.values().flatten().copied().collect(),
        };
        let mut found: Vec<i64> = mirror
            .candidates
            .iter()
            .chain(&reserved)
            .copied()
            .filter(|rowid| {
                let Some(run) = mirror.run(*rowid) else {
                    return false;
                };
                if project.is_some_and(|project| run.project != project) {
                    return false;
                }
                if exact_now && run.available_at > now {
                    return false;
                }
                let Some(runner) = runner else {
                    return true;
                };
                let status = mirror.statuses.text(u32::from(run.status));
                let affinity_passes = !run.has(has::AFFINITY)
                    || run.affinity == runner
                    || matches!(status, "parked" | "starting" | "running");
                let expires_at = run.has(has::EXPIRY).then_some(run.expires_at);
                let lease_passes = !exact_now
                    || free_or_expired(run.has(has::OWNER), expires_at, now)
                    || run.owner == runner;
                affinity_passes && lease_passes
            })
            .collect();
        found.sort_unstable();
        found
    }
}
