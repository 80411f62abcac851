//! Recovery parks: the claimant parks a run whose workflow source changed (`SOURCE_CHANGED`)
//! or whose effect's outcome is unknown (`EFFECT_AMBIGUOUS`), keeping why as the queue error.

use crate::sql::Db;
use crate::state::revisions::KnownRevisions;
use serde_json::{json, Value};

use super::checks::{
    claimed_row, inconsistent_of, options_now, release_live_lease, run_id_read_again,
};
use super::machine::moves::{Move, Table, EFFECT_AMBIGUOUS, SOURCE_CHANGED};
use super::machine::record;
use super::row::RunRow;
use crate::controller::rows::put_caller_text;
use crate::error::{Result, StoreError};
use crate::js::{token_hash_js, Js, Param};
use crate::state::blobs::put_text;
use crate::state::leases::Actor;
use crate::store::Store;
use crate::wire::Call;

/// The first 8,192 UTF-16 code units, as `String.prototype.slice(0, 8192)` gives them (a split
/// surrogate pair leaves a lone surrogate, which becomes U+FFFD when stored as UTF-8).
fn truncate_detail(detail: &str) -> String {
    const LIMIT: usize = 8_192;
    if detail.len() <= LIMIT {
        return detail.to_owned();
    }
    let units: Vec<u16> = detail.encode_utf16().take(LIMIT).collect();
    String::from_utf16_lossy(&units)
}

/// `options.detail.slice(0, 8_192)`, read where the reference reads it: a string is cut here;
/// any other receiver with a `slice` method (an array, a boxed string, a byte view, a string
/// with lone surrogates) is sliced by JavaScript itself, and what it returns is what the
/// reference stores and binds.
fn sliced_detail<'a>(call: &'a Call, options: Js<'a>, cut: &'a mut String) -> Result<Js<'a>> {
    match options.get("detail")?.method("options.detail", "slice")? {
        Js::String(text) => {
            *cut = truncate_detail(text);
            Ok(Js::String(cut.as_str()))
        }
        other => match call.cx() {
            Some(cx) => cx.invoke(other, "slice", &[Js::Number(0.0), Js::Number(8_192.0)]),
            None => Err(StoreError::Type(
                "options.detail.slice is not a function".into(),
            )),
        },
    }
}

/// Parks a claimed run whose workflow source changed, keeping the detail as the queue error.
pub fn park_for_source_change(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    let options = Js::arg(call, 0);
    store.write(|conn| {
        let Some(row) = claimed_row(conn, options, now)? else {
            return Ok(false);
        };
        let mut cut = String::new();
        let detail = sliced_detail(call, options, &mut cut)?;
        let error_hash = put_caller_text(conn, detail, now)?;
        // The updates bind `options.runId` as they read it.
        let run = SOURCE_CHANGED.apply_bound(
            conn,
            Table::Run,
            &[
                Param::Js(detail),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ],
        )?;
        let queue = SOURCE_CHANGED.apply_bound(
            conn,
            Table::Queue,
            &[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ],
        )?;
        let parked = Parked {
            inconsistent: "has inconsistent source-change state",
            claim_changed: "claim changed during source recovery",
            payload: json!({ "status": "parked", "code": "workflowSourceChanged" }),
        };
        parked.settle(conn, options, &row, &SOURCE_CHANGED, (run, queue), now)
    })
}

const AMBIGUOUS_EFFECT_DETAIL: &str = "effect outcome is ambiguous; explicit recovery is required";

/// Parks a claimed, running run whose effect outcome is unknown; its attempts wait too.
pub fn park_for_ambiguous_effect(store: &Store, call: &Call) -> Result<bool> {
    let now = options_now(call)?;
    let options = Js::arg(call, 0);
    store.write(|conn| {
        let Some(row) = claimed_row(conn, options, now)? else {
            return Ok(false);
        };
        let error_hash = put_text(conn, AMBIGUOUS_EFFECT_DETAIL, now)?;
        // The updates bind `options.runId` as they read it, each its own read.
        let mv = &EFFECT_AMBIGUOUS;
        mv.apply_bound(
            conn,
            Table::Attempts,
            &[Param::int(now), Param::Js(options.get("runId")?)],
        )?;
        let run = mv.apply_bound(
            conn,
            Table::Run,
            &[
                Param::text(AMBIGUOUS_EFFECT_DETAIL),
                Param::int(now),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ],
        )?;
        let queue = mv.apply_bound(
            conn,
            Table::Queue,
            &[
                Param::blob(&error_hash[..]),
                Param::int(now),
                Param::Js(options.get("runId")?),
            ],
        )?;
        let parked = Parked {
            inconsistent: "has inconsistent ambiguous-effect state",
            claim_changed: "claim changed during effect recovery",
            payload: json!({ "status": "waiting", "code": "effectAmbiguous" }),
        };
        parked.settle(conn, options, &row, mv, (run, queue), now)
    })
}

/// What the two recovery parks do after their updates, in the reference's order: judge the
/// updates, release the caller's live lease, then the revision, event and viewer deltas.
struct Parked {
    /// The error when an update did not change exactly one row.
    inconsistent: &'static str,
    /// The error when the lease could not be released.
    claim_changed: &'static str,
    /// The event's payload.
    payload: Value,
}

impl Parked {
    fn settle(
        self,
        conn: &Db,
        options: Js<'_>,
        row: &RunRow,
        mv: &Move,
        (run, queue): (usize, usize),
        now: i64,
    ) -> Result<bool> {
        if run != 1 || queue != 1 {
            return Err(inconsistent_of(options, self.inconsistent));
        }
        let lease = row.lease();
        let token_hash = token_hash_js(options.get("claimToken")?)?;
        if !release_live_lease(conn, &row.resource_id, &token_hash, lease.generation, now)? {
            return Err(inconsistent_of(options, self.claim_changed));
        }
        let viewed = options.get("runId")?;
        record(
            conn,
            (row, KnownRevisions::default()),
            (mv.event, &self.payload),
            Actor::Holder(&lease),
            now,
            run_id_read_again(viewed, &row.run_id),
        )?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::truncate_detail;

    #[test]
    fn truncates_by_utf16_code_units() {
        assert_eq!(truncate_detail("short"), "short");
        let ascii = "a".repeat(9_000);
        assert_eq!(truncate_detail(&ascii).len(), 8_192);
        // 8,191 units, then an astral character split in half: the lone surrogate is replaced.
        let split = format!("{}{}", "a".repeat(8_191), "😀");
        assert_eq!(
            truncate_detail(&split),
            format!("{}\u{FFFD}", "a".repeat(8_191))
        );
        let wide = "é".repeat(8_192);
        assert_eq!(truncate_detail(&wide), wide);
    }
}
