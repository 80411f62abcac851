//! Building an index off the caller's path: on a read-only connection of its own, in a thread
//! of its own, while the polls read through SQL. The result names the snapshot it describes;
//! the next poll takes it and catches up from there through the journal.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::identity::StateFile;
use super::mirror::Mirror;
use super::position::{self, WalPosition};
use crate::error::Result;

/// A finished build: the index at `position` (of schema `schema`) of the file `file`.
pub struct Built {
    pub mirror: Mirror,
    pub position: WalPosition,
    pub schema: i64,
    /// The file the build read (`None`: it could not be identified), which the taker compares
    /// with its own: the builder opens the file by its name, which may lead elsewhere now.
    pub file: Option<StateFile>,
}

#[derive(Default)]
enum State {
    #[default]
    Idle,
    Running,
    Done(Box<Built>),
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Told when a build ends.
    ended: Condvar,
    /// How long the last build took, once one finished.
    last_took: Mutex<Option<Duration>>,
    /// Set when the index is dropped: a running build stops at its next step.
    cancelled: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn end(&self, state: State) {
        *self.lock() = state;
        self.ended.notify_all();
    }
}

/// The background build of one index.
#[derive(Default)]
pub struct Builder {
    shared: Arc<Shared>,
}

/// How many times the last build's time a poll waits for a running build. The Rust tests, which
/// share two cores with other test binaries, wait longer: they check that the second poll is
/// answered from the build, not how long a loaded machine takes to finish it.
const WAIT_FACTOR: u32 = if cfg!(test) { 50 } else { 2 };

impl Builder {
    /// Starts a build on the connection `open` makes, unless one is running or waiting to be
    /// taken. A build that fails (the file cannot be opened, the read fails) leaves nothing:
    /// the polls read through SQL and the next one starts another.
    pub fn start(&self, path: PathBuf, open: fn(&Path) -> Option<Connection>) {
        {
            let mut state = self.shared.lock();
            if !matches!(*state, State::Idle) {
                return;
            }
            *state = State::Running;
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("piw-run-index".into())
            .spawn(move || {
                let started = Instant::now();
                let built = open(&path).and_then(|conn| build(&conn, &path, shared.clone()).ok());
                if built.is_some() {
                    *shared.last_took.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(started.elapsed());
                }
                shared.end(match built {
                    Some(built) if !shared.cancelled.load(Ordering::Relaxed) => {
                        State::Done(Box::new(built))
                    }
                    _ => State::Idle,
                });
            });
        if spawned.is_err() {
            self.shared.end(State::Idle);
        }
    }

    /// Waits for a running build, at most twice as long as the last build took: the caller's
    /// SQL reads the same history as a build (it costs about as much: 141–176 ms against
    /// 160 ms at 200,000 runs), and a build on a busy machine may take longer than the last.
    /// So the poll after the one that started the build is answered from the index. Does not
    /// wait before a build has finished once (nothing to go by).
    pub fn wait_for_running(&self) {
        let Some(took) = *self
            .shared
            .last_took
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        else {
            return;
        };
        let deadline = Instant::now() + took * WAIT_FACTOR;
        let mut state = self.shared.lock();
        while matches!(*state, State::Running) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            state = self
                .shared
                .ended
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The finished build, if there is one.
    pub fn take(&self) -> Option<Built> {
        let mut state = self.shared.lock();
        match std::mem::take(&mut *state) {
            State::Done(built) => Some(*built),
            other => {
                *state = other;
                None
            }
        }
    }

    /// Whether a build is under way.
    pub fn is_running(&self) -> bool {
        matches!(*self.shared.lock(), State::Running)
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        self.shared.cancelled.store(true, Ordering::Relaxed);
    }
}

/// Reads the whole index in one read transaction of `conn`.
fn build(conn: &Connection, path: &Path, shared: Arc<Shared>) -> Result<Built> {
    // Stops a build nobody will take (checked every 10,000 VM steps).
    unsafe extern "C" fn cancelled(flag: *mut std::ffi::c_void) -> std::ffi::c_int {
        std::ffi::c_int::from((*(flag as *const AtomicBool)).load(Ordering::Relaxed))
    }
    let flag = (&shared.cancelled as *const AtomicBool).cast_mut().cast();
    // SAFETY: `shared` outlives the connection's use here; the handler is removed below.
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(conn.handle(), 10_000, Some(cancelled), flag)
    };
    conn.execute_batch("BEGIN")?;
    let outcome = (|| {
        let schema = conn.query_row("PRAGMA main.schema_version", [], |row| row.get(0))?;
        let position = position::of_snapshot(conn).ok_or_else(|| {
            crate::error::StoreError::plain("the run index builds only on a WAL file")
        })?;
        let mut mirror = Mirror::default();
        mirror.rebuild(conn)?;
        Ok(Built {
            mirror,
            position,
            schema,
            file: StateFile::of(conn, path),
        })
    })();
    let _ = conn.execute_batch("COMMIT");
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(conn.handle(), 0, None, std::ptr::null_mut())
    };
    outcome
}
