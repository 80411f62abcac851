//! What a store method does when the cluster loses an acknowledgement (`Remote`'s errors): the
//! rule of which calls may run again after an unknown outcome, and the retry loop the method
//! router runs on a cluster.
//!
//! * `DQLITE_ROLLED_BACK` (the transaction was lost before its COMMIT: nothing of it applied):
//!   every method runs again, from its first argument read, on the new leader, for up to the
//!   cluster's `reconnectDeadlineMs` from its first run.
//! * `DQLITE_OUTCOME_UNKNOWN` (a COMMIT was sent and its reply lost: it may have been applied):
//!   only a method whose second run cannot differ from its first is run again: the reads (the
//!   [`Access`] of each method's row in src/methods/table.rs), and the constructor's open.
//!   Every write surfaces the error, with that `code`, for the caller to find out
//!   (docs/cluster.md, "Lost acknowledgements").
//! * `DQLITE_UNAVAILABLE` (no leader within the reconnect deadline; nothing applied): surfaced,
//!   the deadline already spent.
//! * `SQLITE_BUSY` (another host's write transaction holds the leader's write lock; the call's
//!   own transaction was rolled back, nothing of it applied): run again for up to
//!   [`BUSY_WAIT`], as a file's connection waits for its busy timeout.

use std::time::{Duration, Instant};

use super::remote::codes;
use crate::error::{Result, StoreError};

/// How long a call that meets another host's write lock keeps trying: the file's busy timeout
/// (5 s) and more, since right after a failover the new leader refuses writes with
/// `SQLITE_BUSY` while it catches up (seen for over 5 s with three hosts on loopback).
pub const BUSY_WAIT: Duration = Duration::from_secs(10);

/// How a call's reruns after lost transactions are spaced: the first pause, doubled up to
/// the second (a test shortens them).
#[derive(Clone, Copy)]
struct Pacing(Duration, Duration);

const PACING: Pacing = Pacing(Duration::from_millis(20), Duration::from_millis(500));

/// Whether a call only reads (each method's row says it: src/methods/table.rs). After an unknown
/// outcome (which a read cannot meet, but a method's read snapshot can) running a read again is
/// the same as running it once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Access {
    /// It only reads: run again after a COMMIT whose acknowledgement was lost.
    Read,
    /// It may write: a second run could apply it twice, so a lost acknowledgement is the
    /// caller's to find out (docs/cluster.md, "Lost acknowledgements").
    Write,
}

/// The constructor's open, for [`with_reruns`]: it writes, but a second run finds what the
/// first left and does the same (the schema is created only when its transaction finds none;
/// the prune deletes only blobs nothing references), so it runs again like a read.
pub const OPEN: Access = Access::Read;

/// The cluster code of `error`, if it is a cluster failure.
fn cluster_code(error: &StoreError) -> Option<&str> {
    match error {
        StoreError::Js {
            code: Some(code), ..
        } if code.starts_with("DQLITE_") => Some(code),
        _ => None,
    }
}

/// Whether `error` is SQLite's busy or locked refusal (nothing of the call applied).
fn is_busy(error: &StoreError) -> bool {
    matches!(error, StoreError::Sqlite { code, .. }
        if code.starts_with("SQLITE_BUSY") || code.starts_with("SQLITE_LOCKED"))
}

/// Runs `call` (one method, which `access` does) and runs it again while its error says that is safe,
/// for up to `window` (the cluster's `reconnectDeadlineMs`: the patience a caller gave it).
/// Bounded by time, not by a count: while a leadership change settles, a node may take a
/// connection as leader and then refuse its transaction ("not leader", rolled back) for as long
/// as an election takes; eight quick reruns gave up within 2 s (a CI failure of the failover
/// suite).
pub fn with_reruns<T>(
    access: Access,
    window: Duration,
    call: impl FnMut() -> Result<T>,
) -> Result<T> {
    with_reruns_paced(access, window, PACING, call)
}

fn with_reruns_paced<T>(
    access: Access,
    window: Duration,
    pacing: Pacing,
    mut call: impl FnMut() -> Result<T>,
) -> Result<T> {
    let deadline = Instant::now() + window;
    let Pacing(mut delay, max_delay) = pacing;
    let mut busy_since: Option<Instant> = None;
    let mut busy_delay = Duration::from_millis(1);
    loop {
        let error = match call() {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if is_busy(&error) {
            // Counted from the first refusal: the call may have waited for a leader before.
            let since = *busy_since.get_or_insert_with(Instant::now);
            if since.elapsed() + busy_delay > BUSY_WAIT {
                return Err(error);
            }
            std::thread::sleep(busy_delay);
            busy_delay = (busy_delay * 2).min(Duration::from_millis(50));
            continue;
        }
        let again = match cluster_code(&error) {
            Some(codes::ROLLED_BACK) => true,
            Some(codes::OUTCOME_UNKNOWN) => access == Access::Read,
            _ => false,
        };
        if !again || Instant::now() + delay > deadline {
            return Err(error);
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(max_delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: &str) -> StoreError {
        StoreError::Js {
            name: "Error".into(),
            message: "lost".into(),
            code: Some(code.into()),
        }
    }

    #[test]
    fn a_rolled_back_call_runs_again_an_unknown_write_does_not() {
        let mut runs = 0;
        let out = with_reruns(Access::Write, WINDOW, || {
            runs += 1;
            if runs < 3 {
                Err(failure(codes::ROLLED_BACK))
            } else {
                Ok(runs)
            }
        });
        assert_eq!(out.unwrap(), 3);
        let mut runs = 0;
        let out: Result<()> = with_reruns(Access::Write, WINDOW, || {
            runs += 1;
            Err(failure(codes::OUTCOME_UNKNOWN))
        });
        assert_eq!(
            cluster_code(&out.unwrap_err()),
            Some(codes::OUTCOME_UNKNOWN)
        );
        assert_eq!(runs, 1);
        let mut runs = 0;
        let out = with_reruns(Access::Read, WINDOW, || {
            runs += 1;
            if runs < 2 {
                Err(failure(codes::OUTCOME_UNKNOWN))
            } else {
                Ok(())
            }
        });
        assert!(out.is_ok() && runs == 2);
        let mut runs = 0;
        let out = with_reruns(OPEN, WINDOW, || {
            runs += 1;
            if runs < 2 {
                Err(failure(codes::OUTCOME_UNKNOWN))
            } else {
                Ok(())
            }
        });
        assert!(out.is_ok() && runs == 2, "the open runs again");
        let mut runs = 0;
        let out: Result<()> = with_reruns(Access::Read, WINDOW, || {
            runs += 1;
            Err(failure(codes::UNAVAILABLE))
        });
        assert!(out.is_err() && runs == 1);
        let mut runs = 0;
        let out = with_reruns(Access::Write, WINDOW, || {
            runs += 1;
            match runs {
                1..=3 => Err(StoreError::Sqlite {
                    code: "SQLITE_BUSY".into(),
                    message: "database is locked".into(),
                }),
                _ => Ok(runs),
            }
        });
        assert_eq!(out.unwrap(), 4);
    }

    const WINDOW: Duration = Duration::from_millis(300);
    const FAST: Pacing = Pacing(Duration::from_micros(50), Duration::from_micros(200));

    #[test]
    fn rolled_back_calls_run_again_for_the_window_not_for_a_count() {
        // A leader that keeps refusing ("not leader", rolled back) while an election settles:
        // twenty refusals in a row, then it answers.
        let mut runs = 0;
        let out = with_reruns_paced(OPEN, WINDOW, FAST, || {
            runs += 1;
            if runs <= 20 {
                Err(failure(codes::ROLLED_BACK))
            } else {
                Ok(runs)
            }
        });
        assert_eq!(out.unwrap(), 21);
        // Past the window the call gives up with the last error.
        let started = Instant::now();
        let out: Result<()> = with_reruns_paced(Access::Write, WINDOW, FAST, || {
            Err(failure(codes::ROLLED_BACK))
        });
        assert_eq!(cluster_code(&out.unwrap_err()), Some(codes::ROLLED_BACK));
        let waited = started.elapsed();
        assert!(waited >= WINDOW - FAST.1, "{waited:?}");
    }
}
