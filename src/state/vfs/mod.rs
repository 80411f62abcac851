//! Which VFS a state database opens with: SQLite's default ("unix"), and in tests the VFS a test
//! chose for its thread — the fault-injecting one of [`faults`].
//!
//! A WAL-append shim over unix lived here until issue 37: it wrote a commit's WAL frames with one
//! `pwrite` instead of two per page, and measured no gain on a disk (docs/performance.md,
//! "The WAL-append shim, removed"). Plain unix writes the same bytes, so files it wrote open as
//! any other.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::CStr;

#[cfg(test)]
pub mod faults;

/// The VFS a state database opens with: `None`, SQLite's default, unless a test chose one for
/// this thread ([`use_for_thread`]).
pub fn for_connection() -> Option<&'static CStr> {
    #[cfg(test)]
    if let Some(chosen) = CHOSEN.with(std::cell::Cell::get) {
        return chosen;
    }
    None
}

#[cfg(test)]
thread_local! {
    static CHOSEN: std::cell::Cell<Option<Option<&'static CStr>>> = const { std::cell::Cell::new(None) };
}

/// Makes state databases opened on this thread use `vfs` (`None`: SQLite's default), until
/// [`use_default_for_thread`].
#[cfg(test)]
pub fn use_for_thread(vfs: Option<&'static CStr>) {
    CHOSEN.with(|chosen| chosen.set(Some(vfs)));
}

/// Undoes [`use_for_thread`].
#[cfg(test)]
pub fn use_default_for_thread() {
    CHOSEN.with(|chosen| chosen.set(None));
}
