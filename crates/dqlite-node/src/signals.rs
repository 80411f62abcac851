//! Waiting for SIGTERM or SIGINT: both are blocked before any thread
//! starts (libdqlite's thread inherits the mask) and taken with `sigwait`,
//! so no handler runs at an arbitrary point.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};

/// Why the process asked itself to stop (0: it did not).
static STOP_REASON: AtomicU8 = AtomicU8::new(0);
/// The node could not join its cluster.
pub const JOIN_FAILED: u8 = 1;

/// Stop the process as SIGTERM would, remembering `reason`.
pub fn stop_self(reason: u8) {
    STOP_REASON.store(reason, Ordering::SeqCst);
    // SAFETY: a process-directed signal to ourselves; it stays pending
    // until the main thread's sigwait takes it.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
}

/// The reason given to [`stop_self`], 0 for a signal from outside.
pub fn stop_reason() -> u8 {
    STOP_REASON.load(Ordering::SeqCst)
}

/// Block SIGTERM and SIGINT in this thread and every thread it starts.
pub fn block_termination() -> io::Result<Termination> {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
    }
    // SAFETY: a valid set; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(Termination { set })
}

/// The blocked termination signals.
pub struct Termination {
    set: libc::sigset_t,
}

impl Termination {
    /// Wait for one of them; its name.
    pub fn wait(&self) -> &'static str {
        loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: a valid set of blocked signals and an out pointer.
            let rc = unsafe { libc::sigwait(&self.set, &mut sig) };
            if rc == 0 {
                return if sig == libc::SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
            }
        }
    }
}
