//! The bench's hooks (bench/): statement recording (src/trace.rs) and the thread's CPU time.

use napi_derive::napi;

use crate::trace;

/// Bench only: records every statement of connections opened from now on into `path`, or
/// stops recording with `null` (see src/trace.rs).
#[napi]
pub fn record_statements(path: Option<String>) -> napi::Result<()> {
    trace::record_to(path.as_deref()).map_err(|error| napi::Error::from_reason(error.to_string()))
}

/// Bench only: labels the statements recorded from now on (`""`: untimed).
#[napi]
pub fn record_mark(label: String) {
    trace::mark(&label);
}

/// Bench only: how many times this process has written requests to a dqlite node so far
/// (a write carries one request or several sent together; bench:cluster divides by calls).
#[napi]
pub fn cluster_request_writes() -> f64 {
    dqlite_wire::request_writes() as f64
}

/// Bench only: the CPU time of the calling thread so far, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`; `-1` where the platform has no such clock). bench:scale reads it
/// around each timed call, so that a poll's cost can be read apart from the time its thread
/// spent descheduled while other processes ran.
#[napi]
pub fn thread_cpu_time_ns() -> f64 {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec for the call to fill.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0 {
            return now.tv_sec as f64 * 1e9 + now.tv_nsec as f64;
        }
    }
    -1.0
}
