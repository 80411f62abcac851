//! Workflow run reads and views: single runs and views, the run list and its
//! revision, the open reservation of a session, and the paused flag. Nothing here writes.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::sql::{params_from_iter, Db, OptionalExtension};
use serde_json::{json, Value};

use super::machine::status::status_sql;
use super::records::{
    map_listed_run_record, map_run_record, map_workflow_run, run_record_select, RecordReads,
};
use super::row::{rowid_list, run_row_of, RunRow, RunRowRef, RUN_SELECT};
use super::views::{
    push_views, view_of_rowid, VIEW_BY_ROWID, VIEW_BY_RUN_ID, VIEW_OPEN_SESSION_RESERVATION,
};
use crate::error::Result;
use crate::js::{greater_than, params_for, Bound, Js, Spread};
use crate::state::blobs::JsonReads;
use crate::state::columns::is_utf8_error;
use crate::state::run_index::{Current, ListRevision, Shape};
use crate::store::{in_read_transaction, Store};
use crate::wire::json_text;

/// Open reservations: the queue is not terminal.
const OPEN_SESSION_RESERVATION: &str = concat!(
    "WHERE b.origin_session_id = ?
    AND q.status NOT IN ",
    status_sql!(queue_terminal),
    " ORDER BY q.created_at DESC LIMIT 1"
);

/// `RUN_SELECT {clause}`, built on first use: a lookup builds no SQL text.
fn run_select(cell: &'static OnceLock<String>, clause: &str) -> &'static str {
    cell.get_or_init(|| format!("{RUN_SELECT} {clause}"))
}

/// The runs of a list's page with their input, error and root source (see
/// `RUN_RECORD_COLUMNS`), by row id, in one statement.
fn page_runs_select() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        run_record_select(
            RUN_SELECT,
            false,
            "WHERE r.rowid IN (SELECT value FROM json_each(?))",
        )
    })
}

/// The records of the runs of `rowids` in their order (`None` for a row id the select does
/// not find): one statement for the page instead of one per run, which SQLite answers in row
/// id order. Each record is written as its row is stepped, from SQLite's row buffers; a
/// record's failure is kept in its place, so the caller meets the first failure in page
/// order, as building the records in page order would (a row that cannot be read fails the
/// page at once, as before any record was built). With the run index (`index`), the records it
/// kept are taken as they are and only the others read, then kept.
fn page_records(
    conn: &Db,
    json: &mut JsonReads<'_>,
    mut index: Option<&mut Current<'_>>,
    rowids: &[i64],
) -> Result<Vec<Option<Result<String>>>> {
    let mut page: Vec<Option<Result<String>>> = Vec::new();
    page.resize_with(rowids.len(), || None);
    let mut position: HashMap<i64, usize> = HashMap::new();
    let mut unread = Vec::new();
    for (at, rowid) in rowids.iter().enumerate() {
        match index
            .as_deref()
            .and_then(|index| index.record(Shape::Record, *rowid))
        {
            Some(record) => page[at] = Some(Ok(record.to_owned())),
            None => {
                position.insert(*rowid, at);
                unread.push(*rowid);
            }
        }
    }
    if unread.is_empty() {
        return Ok(page);
    }
    let mut select = conn.prepare_cached(page_runs_select())?;
    let mut rows = select.query([rowid_list(&unread)])?;
    while let Some(ref row) = rows.next()? {
        let reads = RecordReads::from_row(row, false)?;
        let Some((rowid, at)) = reads
            .rowid
            .and_then(|rowid| Some((rowid, *position.get(&rowid)?)))
        else {
            continue;
        };
        let owned;
        let run = match RunRowRef::from_row(row) {
            // A text that is not UTF-8 (a caller's lone surrogate): read as V8 reads it.
            Err(error) if is_utf8_error(&error) => {
                owned = RunRow::from_row(row)?;
                owned.borrowed()
            }
            run => run?,
        };
        let record = map_listed_run_record(json, &run, &reads);
        if let (Some(index), Ok(text), true) = (
            index.as_deref_mut(),
            &record,
            reads.read_every_document(&run),
        ) {
            index.keep_record(Shape::Record, rowid, text);
        }
        page[at] = Some(record);
    }
    Ok(page)
}

/// The view rows of `sql` for the caller's values (`workflowRunViewRows(clause, values)`).
fn view_rows_of(conn: &Db, sql: &'static str, values: &[Js<'_>]) -> Result<Vec<String>> {
    let mut statement = conn.prepare_cached(sql)?;
    let params = params_for(&statement, values)?;
    let mut views = Vec::new();
    push_views(&mut statement, params_from_iter(&params), &mut views)?;
    Ok(views)
}

pub fn get_workflow_run(store: &Store, run_id: Js<'_>) -> Result<Option<String>> {
    let conn = store.conn()?;
    // One statement reads the run with its documents and root source: one snapshot, so no
    // transaction is needed unless the record needs more reads (mounts, a document missing
    // or not JSON); then the whole record is read again in one read transaction.
    let sql = {
        static SQL: OnceLock<String> = OnceLock::new();
        SQL.get_or_init(|| run_record_select(RUN_SELECT, true, "WHERE r.run_id = ?"))
    };
    // The record is written from SQLite's row buffers while the statement is on its row.
    let found = {
        let mut statement = conn.prepare_cached(sql)?;
        let params = params_for(&statement, &[run_id])?;
        let mut rows = statement.query(params_from_iter(&params))?;
        match rows.next()? {
            None => None,
            Some(ref row) => match RunRowRef::from_row(row) {
                // A text that is not UTF-8 (a caller's lone surrogate): the owned read below
                // reads it as V8 reads it.
                Err(error) if is_utf8_error(&error) => Some(None),
                run => {
                    let run = run?;
                    let reads = RecordReads::from_row(row, true)?;
                    match reads.is_complete(&run) {
                        true => Some(Some(map_run_record(conn, &run, &reads)?)),
                        false => Some(None),
                    }
                }
            },
        }
    };
    match found {
        None => Ok(None),
        Some(Some(record)) => Ok(Some(record)),
        Some(None) => in_read_transaction(conn, || match run_row_of(conn, run_id)? {
            Some(row) => Ok(Some(map_workflow_run(conn, &row)?)),
            None => Ok(None),
        }),
    }
}

pub fn get_workflow_run_view(store: &Store, run_id: Js<'_>) -> Result<Option<String>> {
    let views = view_rows_of(store.conn()?, VIEW_BY_RUN_ID, &[run_id])?;
    Ok(views.into_iter().next())
}

/// `{total, revision}` of every run (not project-scoped).
pub fn revision_json(revision: &ListRevision) -> Value {
    json!({
        "total": revision.count,
        "revision": format!(
            "{}:{}:{}",
            revision.count, revision.revision_sum, revision.updated_at
        ),
    })
}

pub fn workflow_run_list_revision(store: &Store) -> Result<ListRevision> {
    let conn = store.conn()?;
    let own = conn.is_autocommit();
    in_read_transaction(conn, || {
        let index = store.state.run_index_current(conn, own)?;
        list_revision(conn, index.as_ref())
    })
}

/// The list revision from the run index when it has one, else through SQL.
fn list_revision(conn: &Db, index: Option<&Current<'_>>) -> Result<ListRevision> {
    if let Some(revision) = index.and_then(Current::list_revision) {
        return Ok(revision);
    }
    Ok(conn
        .prepare_cached(
            "SELECT count(*), COALESCE(sum(res.revision), 0), COALESCE(max(q.updated_at), 0)
             FROM runs r JOIN run_queue q ON q.run_id = r.run_id
             JOIN resources res ON res.resource_id = r.resource_id",
        )?
        .query_row([], |row| {
            Ok(ListRevision {
                count: row.get(0)?,
                revision_sum: row.get(1)?,
                updated_at: row.get(2)?,
            })
        })?)
}

pub fn list_workflow_run_views(store: &Store, options: Js<'_>) -> Result<String> {
    let conn = store.conn()?;
    let own = conn.is_autocommit();
    // The revision and the page from one snapshot (the reference reads them one after the other:
    // the revision first, then `options.limit` and `options.offset`, then binds them). The
    // caller's values are read before the snapshot's transaction: the reference holds none
    // while it reads them, so a getter's own store call (a write) runs as it does there.
    let values = [options.get("limit")?, options.get("offset")?];
    let (current, runs) = in_read_transaction(conn, || {
        let mut index = store.state.run_index_current(conn, own)?;
        let current = list_revision(conn, index.as_ref())?;
        let page = crate::js::bind_all(&values, 2)?;
        let paged_by_index = values.iter().all(is_number);
        Ok((
            current,
            view_page(conn, index.as_mut(), paged_by_index, &page)?,
        ))
    })?;
    let mut out = json_text(&revision_json(&current));
    out.pop(); // `}`: the runs follow the total and revision
    out.push_str(",\"runs\":[");
    out.push_str(&runs.join(","));
    out.push_str("]}");
    Ok(out)
}

/// The runs of the view list, in the order of `run_view_select!() ORDER BY q.created_at DESC`.
/// Ties keep the single statement's order: it scans `runs` and its sort is stable, so equal
/// `created_at` come in rowid order.
const VIEW_ORDER_SELECT: &str = "SELECT r.rowid FROM runs r
    JOIN workflow_definitions d ON d.definition_digest = r.definition_digest
    JOIN run_queue q ON q.run_id = r.run_id
    ORDER BY q.created_at DESC, r.rowid LIMIT +? OFFSET +?";

/// The views of `run_view_select!() ORDER BY q.created_at DESC LIMIT ? OFFSET ?`, found in two
/// steps: the page's runs first (from the run index, or sorting only their row ids: the left
/// joins never add or drop a row), then each view. A limit or offset other than a
/// non-negative integer takes SQLite's own reading.
fn view_page(
    conn: &Db,
    mut index: Option<&mut Current<'_>>,
    paged_by_index: bool,
    page: &[Bound<'_>],
) -> Result<Vec<String>> {
    let by_index = index.as_deref().filter(|_| paged_by_index);
    let rowids: Vec<i64> = match (by_index, page[0].as_count(), page[1].as_count()) {
        (Some(index), Some(limit), Some(offset)) => index.view_page(
            usize::try_from(offset).unwrap_or(usize::MAX),
            usize::try_from(limit).unwrap_or(usize::MAX),
        ),
        _ => row_ids(conn, VIEW_ORDER_SELECT, params_from_iter(page))?,
    };
    let mut views = Vec::with_capacity(rowids.len());
    let mut by_rowid = conn.prepare_cached(VIEW_BY_ROWID)?;
    for rowid in rowids {
        // The index's views serve whichever way the page's runs were found.
        if let Some(view) = index
            .as_deref()
            .and_then(|index| index.record(Shape::View, rowid))
        {
            views.push(view.to_owned());
            continue;
        }
        let Some((view, settled)) = view_of_rowid(&mut by_rowid, rowid)? else {
            continue;
        };
        if let Some(index) = index.as_deref_mut().filter(|_| settled) {
            index.keep_record(Shape::View, rowid, &view);
        }
        views.push(view);
    }
    Ok(views)
}

/// A number or a bigint: what the run index reads a limit or offset from (see
/// `Bound::as_count`); anything else takes the SQL path.
fn is_number(value: &Js<'_>) -> bool {
    matches!(value, Js::Number(_) | Js::BigInt(_))
}

/// The first column (a row id) of every row of `sql`.
fn row_ids(conn: &Db, sql: &str, params: impl crate::sql::Params) -> Result<Vec<i64>> {
    Ok(conn
        .prepare_cached(sql)?
        .query_map(params, |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?)
}

pub fn workflow_run_project_path(store: &Store, run_id: Js<'_>) -> Result<Option<String>> {
    let mut statement = store.conn()?.prepare_cached(
        "SELECT p.canonical_path
             FROM runs r JOIN projects p ON p.project_id = r.project_id WHERE r.run_id = ?",
    )?;
    let params = params_for(&statement, &[run_id])?;
    Ok(statement
        .query_row(params_from_iter(&params), |row| {
            row.get::<_, Option<String>>(0)
        })
        .optional()?
        .flatten())
}

/// Project-scoped (unless the store has no project), newest first.
pub fn list_workflow_runs(store: &Store, options: Js<'_>) -> Result<String> {
    // `options = {}` is the default of an undefined argument only.
    let empty = serde_json::Map::new();
    let options = if options.is_undefined() {
        Js::Object(&empty)
    } else {
        options
    };
    let mut clauses: Vec<String> = Vec::new();
    let mut values: Vec<Js<'_>> = Vec::new();
    if let Some(project_id) = store.project_id() {
        clauses.push("r.project_id = ?".into());
        values.push(Js::String(project_id));
    }
    let scope = clauses.len();
    let mut by_status = false;
    let mut statuses = 0;
    let mut excluded = false;
    let mut holey = false;
    // `options.<name> !== undefined && options.<name>.length > 0`, then `.map(() => "?")` and
    // `params.push(...options.<name>)`.
    for (name, column_test) in [
        ("statuses", "q.status IN"),
        ("excludeRunIds", "r.run_id NOT IN"),
    ] {
        // Each use reads `options.<name>` again, as the reference's expressions do.
        if options.get(name)?.is_undefined() {
            continue;
        }
        // `.length > 0`: JavaScript's comparison (a string length "1" passes).
        if !greater_than(options.get(name)?.get("length")?, 0.0)? {
            continue;
        }
        let expr = format!("options.{name}");
        let Some((marks, holes)) = options.get(name)?.sql_marks_as(&expr)? else {
            continue;
        };
        // `.map(() => "?").join(", ")`: a hole stays a hole and joins as "" (SQLite then
        // refuses the list, as it refuses the reference's); the spread binds it as undefined.
        holey |= holes;
        let items = options.get(name)?.sql_spread_as(&expr, Spread::Push)?;
        clauses.push(format!("{column_test} ({marks})"));
        if name == "statuses" {
            by_status = true;
            statuses = items.len();
        } else {
            excluded = true;
        }
        values.extend(items);
    }
    // With statuses, the queue's claim index reads only runs of those statuses; without
    // statistics the planner would read every run of the project through `runs_project_idx`
    // instead (`+` keeps it off that index). The ORDER BY below is total, so the plan cannot
    // change the answer.
    if by_status && scope == 1 {
        clauses[0] = "+r.project_id = ?".into();
    }
    // `if (options.limit !== undefined) params.push(options.limit)`, then `options.limit ===
    // undefined ? "" : " LIMIT ?"`: three reads. A getter that changes between them leaves the
    // statement a parameter short or over, refused by the binder as the reference's is.
    let limit = match options.get("limit")?.is_undefined() {
        true => None,
        false => Some(options.get("limit")?),
    };
    let limit_clause = !options.get("limit")?.is_undefined();
    let mut clause = String::new();
    if !clauses.is_empty() {
        clause.push_str(&format!("WHERE {}", clauses.join(" AND ")));
    }
    // The single statement's order for equal created_at: it scans runs_project_idx
    // (project_id, created_at DESC, then rowid) for a project; for every run with statuses, the
    // queue's claim index (status, available_at, created_at, then rowid), one status after
    // another in ascending order; else runs in rowid order. Its sort keeps scan order (pinned
    // by __test__/perf-equivalence.spec.ts and __test__/scale-equivalence.spec.ts).
    clause.push_str(match (store.project_id().is_some(), by_status) {
        (true, _) => " ORDER BY q.created_at DESC, r.created_at DESC, r.rowid",
        (false, true) => " ORDER BY q.created_at DESC, q.status, q.available_at, q.rowid",
        (false, false) => " ORDER BY q.created_at DESC, r.rowid",
    });
    // The page's row ids first (sorting narrow rows), then each run: sorting every run of the
    // project with all its columns dominated the call.
    let from = &RUN_SELECT[RUN_SELECT
        .find("FROM runs r")
        .expect("RUN_SELECT has a FROM")..];
    let order_select = format!("SELECT r.rowid {from} {clause}");
    let conn = store.conn()?;
    let own = conn.is_autocommit();
    // The reference prepares before it binds: a list with a hole is SQLite's syntax error.
    if holey {
        conn.prepare(&order_select)?;
    }
    in_read_transaction(conn, || {
        let mut index = store.state.run_index_current(conn, own)?;
        // Bound as the reference binds `.all(...params)`, limit last.
        let mut all = values.clone();
        all.extend(limit);
        let count = all_parameters(&clauses) + usize::from(limit_clause);
        let params = crate::js::bind_all(&all, count)?;
        let bound_limit = limit.map(|_| &params[count - 1]);
        // The run index answers without exclusions, for statuses that are strings, and for no
        // limit or a number that SQLite reads as a non-negative integer.
        let status_texts: Option<Vec<&[u8]>> = values[scope..scope + statuses]
            .iter()
            .map(|status| match status {
                Js::String(text) => Some(text.as_bytes()),
                _ => None,
            })
            .collect();
        let plain_limit = limit.is_none_or(|limit| is_number(&limit));
        let limit_count = bound_limit.map(Bound::as_count);
        let indexed = match (&index, excluded, status_texts, limit_count) {
            (Some(index), false, Some(texts), None | Some(Some(_))) if plain_limit => Some(
                index.list_page(
                    store.project_id(),
                    by_status.then_some(&texts[..]),
                    limit_count
                        .flatten()
                        .map(|limit| usize::try_from(limit).unwrap_or(usize::MAX)),
                ),
            ),
            _ => None,
        };
        let rowids: Vec<i64> = match indexed {
            Some(rowids) => rowids,
            None if bound_limit.is_none() => {
                row_ids(conn, &order_select, params_from_iter(&params))?
            }
            None => row_ids(
                conn,
                &format!("{order_select} LIMIT +?"),
                params_from_iter(&params),
            )?,
        };
        let mut json = JsonReads::new(conn);
        let mut runs = String::from("[");
        // The index's records serve whichever way the page's runs were found.
        for record in page_records(conn, &mut json, index.as_mut(), &rowids)?
            .into_iter()
            .flatten()
        {
            if runs.len() > 1 {
                runs.push(',');
            }
            runs.push_str(&record?);
        }
        runs.push(']');
        Ok(runs)
    })
}

pub fn find_session_reservation(store: &Store, session_id: Js<'_>) -> Result<Option<String>> {
    let conn = store.conn()?;
    in_read_transaction(conn, || {
        let mut statement = conn.prepare_cached({
            static SQL: OnceLock<String> = OnceLock::new();
            run_select(&SQL, OPEN_SESSION_RESERVATION)
        })?;
        let params = params_for(&statement, &[session_id])?;
        let row = statement
            .query_row(params_from_iter(&params), RunRow::from_row)
            .optional()?;
        match row {
            Some(row) => Ok(Some(map_workflow_run(conn, &row)?)),
            None => Ok(None),
        }
    })
}

pub fn find_session_reservation_view(store: &Store, session_id: Js<'_>) -> Result<Option<String>> {
    let views = view_rows_of(store.conn()?, VIEW_OPEN_SESSION_RESERVATION, &[session_id])?;
    Ok(views.into_iter().next())
}

pub fn is_workflow_run_paused(store: &Store, run_id: Js<'_>) -> Result<bool> {
    let row = run_row_of(store.conn()?, run_id)?;
    Ok(row.is_some_and(|row| row.paused == 1))
}

/// The `?` parameters of a list's WHERE clauses.
fn all_parameters(clauses: &[String]) -> usize {
    clauses
        .iter()
        .map(|clause| clause.matches('?').count())
        .sum()
}
