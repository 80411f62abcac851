//! The run index: an in-memory mirror of what the run polls read of every run (its queue row,
//! resource revision, definition, lease and binding), kept exact per connection so that
//! `workflowRunListRevision`, the first pages of the run lists and the host's
//! `claimNextWorkflowRun` need not read the whole history on every poll.
//!
//! How it stays exact, at the snapshot of the read transaction it is used in:
//! - Every commit, this connection's or another's, moves the WAL's commit counter by one
//!   (`position`). The index knows the position it describes; a poll at a later one re-reads
//!   the runs that the commits in between changed, as their journal entries name them
//!   (`hooks` makes the entries of every native connection: this connection's are kept in
//!   memory, everyone's go to the journal beside the file, `journal`). The entries must chain
//!   from the index's position to the poll's, WAL frame by WAL frame. A commit whose writer
//!   is still writing its entry is waited for, briefly (`IN_FLIGHT_WAIT`).
//! - A native writer's entry also carries the rows of the runs it changed, read just before
//!   its commit (`capture`): a reader takes those instead of reading the runs again, which
//!   after another connection's commit means reading them from a cold page cache.
//! - A commit with no entry (another application's, the TypeScript store's, a writer that died
//!   between its commit and its entry), an entry that says "rebuild" (a definition changed), a
//!   schema change (DDL, VACUUM renumbering rowids) or more commits than the journal keeps:
//!   the index is built again — at once for a small file, else in the background (`builder`)
//!   while the polls read through SQL, so no call waits for more index work than its own SQL
//!   would cost.
//! - The run and view records a list page read are kept until a change names their run, or a
//!   blob changes (`records`): a page of unchanged runs is answered without SQL.
//! - Not used at all inside the caller's own transaction (uncommitted changes), while the TEMP
//!   schema holds anything (it could shadow a main table), outside WAL mode, or while
//!   statements are recorded for the bench (the recorder owns the connection's hooks).

mod blob_refs;
mod builder;
mod clean_proof;
mod file_io;
mod hooks;
mod identity;
mod journal;
mod journal_file;
mod mirror;
mod position;
mod preupdate;
mod records;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::temp_schema;
use crate::error::Result;
use builder::Builder;
pub use clean_proof::BeforeClose;
use hooks::Hooks;
use identity::StateFile;
use journal::{Journal, Key};
pub use mirror::answers::ListRevision;
pub use mirror::Current;
use mirror::{At, Mirror};
use position::follows;
pub use records::Shape;

/// Files with fewer runs than this build their index in the poll itself: the build costs
/// about what the poll's SQL does.
const SYNC_BUILD_RUNS: i64 = 1024;
/// Past this many changed keys, a catch-up gives way to a build (it would cost more than the
/// polls' SQL).
const MAX_CATCH_UP_KEYS: usize = 2_000;
/// How long a catch-up waits, in all, for the entries of commits whose writers are still in
/// flight (visible, entry not yet written: microseconds, unless the writer was descheduled)
/// before it takes them for a gap.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(if cfg!(test) {
    // Tests hold a writer there; the wait must outlast a loaded machine's scheduling.
    2_000
} else {
    20
});
/// A commit that changed more runs than this has no images (they would not fit its slot).
const MAX_CAPTURED_RUNS: usize = 8;

/// Opens a read-only connection to the state file, or none.
pub type OpenReader = fn(&Path) -> Option<Connection>;

/// The run index of one connection (see the module header).
pub struct RunIndex {
    /// `None`: not installed (statement recording owns the hooks); never used.
    hooks: Option<Box<Hooks>>,
    mirror: Mutex<Mirror>,
    builder: Builder,
    /// The state file, for the builder's connection.
    file_path: PathBuf,
    /// The file the connection has open; `None` when it could not be identified: then no
    /// build made on another connection is taken.
    state_file: Option<StateFile>,
    /// Opens the builder's read-only connection to it.
    open_reader: OpenReader,
    /// How many times the index was built (in the poll or in the background and taken).
    builds: AtomicUsize,
    /// Why the journal was refused when the connection opened (the hooks are not installed).
    refusal: Option<String>,
}

impl RunIndex {
    /// Installs the hooks on `conn` (unless `recording`, or `PIW_RUN_INDEX=off` in the
    /// environment: every poll then reads through SQL, which tests compare the index with).
    /// The index must be dropped after the connection is closed: the hooks point at it.
    /// Background builds read through a connection `open_reader` opens.
    ///
    /// A file at the journal's name that is not this package's or not private (see
    /// `journal_file`) is left alone and the index is not installed: every poll reads through
    /// SQL, and [`RunIndex::refusal`] says why.
    pub fn install(
        conn: &Connection,
        recording: bool,
        file_path: &Path,
        writable: bool,
        open_reader: OpenReader,
    ) -> RunIndex {
        let state_file = StateFile::of(conn, file_path);
        let mut refusal = None;
        let hooks = (!recording && !switched_off())
            .then(|| {
                let journal = Journal::new(file_path, state_file, writable);
                refusal = journal.open_now();
                // SAFETY: the handle is live; the box outlives the connection (see above).
                refusal
                    .is_none()
                    .then(|| unsafe { hooks::install(conn.handle(), journal) })
            })
            .flatten();
        RunIndex {
            hooks,
            mirror: Mutex::default(),
            builder: Builder::default(),
            file_path: file_path.to_path_buf(),
            state_file,
            open_reader,
            builds: AtomicUsize::new(0),
            refusal,
        }
    }

    /// Why the index is not used, if the file at the journal's name was refused (when the
    /// connection opened, or later).
    pub fn refusal(&self) -> Option<String> {
        (self.refusal.clone()).or_else(|| self.hooks.as_ref()?.journal().refusal())
    }

    /// An index that is never used: a state database without a local file (a dqlite cluster),
    /// whose polls read through SQL.
    pub fn unused(file_path: &Path) -> RunIndex {
        RunIndex {
            hooks: None,
            mirror: Mutex::default(),
            builder: Builder::default(),
            file_path: file_path.to_path_buf(),
            state_file: None,
            open_reader: |_| None,
            builds: AtomicUsize::new(0),
            refusal: None,
        }
    }

    /// Records the schema the open verified, once the connection's pragmas are set (the WAL
    /// hook replaces the autocheckpoint pragma's, see `hooks`). `verified_at`: the schema
    /// version read just before the objects were verified equal to the state schema's.
    pub fn schema_verified(&self, conn: &Connection, verified_at: Option<i64>) -> Result<()> {
        let version: i64 = conn.query_row("PRAGMA main.schema_version", [], |row| row.get(0))?;
        if let Some(hooks) = &self.hooks {
            // SAFETY: as in `install`.
            unsafe { hooks::install_wal_hook(hooks) };
            // The version only grows: unchanged since before the check, the objects are those
            // it verified.
            hooks.read_blob_columns(conn, verified_at.filter(|at| *at == version));
        }
        self.lock().verified_schema = Some(version);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Mirror> {
        self.mirror.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index brought up to the snapshot of the read transaction open on `conn`, or `None`
    /// when the caller must read through SQL. `own_transaction`: the transaction was begun for
    /// this read (the connection was in autocommit), so it holds no uncommitted changes.
    pub fn current<'a>(
        &'a self,
        conn: &Connection,
        own_transaction: bool,
    ) -> Result<Option<Current<'a>>> {
        let Some(hooks) = &self.hooks else {
            return Ok(None);
        };
        if !own_transaction || hooks.journal().refusal().is_some() {
            return Ok(None);
        }
        // The first read takes the snapshot (a deferred BEGIN has not yet).
        let schema: i64 = conn
            .prepare_cached("PRAGMA main.schema_version")?
            .query_row([], |row| row.get(0))?;
        if temp_schema::is_used(conn)? {
            return Ok(None);
        }
        let Some(position) = position::of_snapshot(conn) else {
            return Ok(None);
        };
        let mut mirror = self.lock();
        let Some(verified_schema) = mirror.verified_schema else {
            return Ok(None);
        };
        let now = At { position, schema };
        self.builder.wait_for_running();
        if let Some(built) = self.builder.take() {
            let at = At {
                position: built.position,
                schema: built.schema,
            };
            // A build of another file (the name leads to another one now) is dropped, and so is
            // one newer than this poll's snapshot (its read began after this one): it cannot be
            // brought back to this snapshot; a later poll builds again.
            let id = |file: Option<StateFile>| file.map(|file| file.id);
            let same_file = self.state_file.is_some() && id(built.file) == id(self.state_file);
            if same_file
                && at.schema == schema
                && position.commit.wrapping_sub(at.position.commit) < 1 << 31
            {
                *mirror = built.mirror;
                mirror.verified_schema = Some(verified_schema);
                give_back_freed_memory();
                mirror.at = Some(at);
                self.builds.fetch_add(1, Ordering::Relaxed);
            }
        }
        let caught_up = match mirror.at {
            Some(at) => catch_up(hooks, &mut mirror, conn, at, now)?,
            None => false,
        };
        if !caught_up {
            mirror.at = None;
            hooks.journal().recheck();
            if !self.builds_in_the_poll(conn, &mirror)? {
                // Built on a connection of its own, which opens the file by its name: only
                // while the name still leads to this connection's file.
                if self.state_file.is_some() && identity::unmoved(conn) {
                    self.builder.start(self.file_path.clone(), self.open_reader);
                }
                return Ok(None);
            }
            mirror.rebuild(conn)?;
            self.builds.fetch_add(1, Ordering::Relaxed);
        }
        mirror.at = Some(now);
        Ok(Some(Current(mirror)))
    }

    /// At the end of a write transaction on `conn`, before its COMMIT: reads the rows of the
    /// runs it changed, for its journal entry, so that the indexes of other connections take
    /// them instead of reading those runs again after the commit (their page caches are cold
    /// then; this connection's is warm now). Nothing when the keys say too much or too little:
    /// readers then read the runs themselves.
    pub fn capture(&self, conn: &Connection) {
        let Some(hooks) = &self.hooks else {
            return;
        };
        confirm_blob_refs(hooks, conn);
        let keys: BTreeSet<Key> = match hooks.changes().pending() {
            Some(keys) if keys.len() <= MAX_CAPTURED_RUNS => keys.into_iter().collect(),
            _ => return,
        };
        // Only a reader knows which of its runs an added definition joins; an entry of images
        // carries no keys, and a changed blob must reach the readers' records.
        if keys.is_empty()
            || keys.contains(&Key::DefinitionAdded)
            || keys.contains(&Key::BlobChanged)
        {
            return;
        }
        let Ok(rowids) = mirror::affected_runs(conn, &keys, &BTreeSet::new()) else {
            return;
        };
        if rowids.len() > MAX_CAPTURED_RUNS {
            return;
        }
        let mut images = Vec::with_capacity(rowids.len());
        for rowid in rowids {
            let Some(image) = mirror::image_of(conn, rowid) else {
                return;
            };
            images.push((rowid, image.map(Vec::into_boxed_slice)));
        }
        hooks.changes().set_images(images);
    }

    /// Whether the file, as the write transaction open on `conn` (this index's connection,
    /// just begun, nothing changed yet) sees it, provably has no blob that nothing refers to
    /// (see `clean_proof`): the open's prune then need not start.
    pub fn blobs_known_clean(&self, conn: &Connection) -> bool {
        self.hooks
            .as_ref()
            .is_some_and(|hooks| clean_proof::known_clean(hooks.journal(), conn, &self.file_path))
    }

    /// Just before `conn` (this index's connection) closes: what tells, after the close,
    /// whether it may leave a close stamp (see `clean_proof`).
    pub fn before_close(&self, conn: &Connection) -> Option<BeforeClose> {
        let hooks = self.hooks.as_ref()?;
        clean_proof::before_close(hooks.journal(), conn, &self.file_path)
    }

    /// The connection was closed. When SQLite removed the WAL — the file's last connection
    /// closed — the journal goes too, so that a closed state is only the file, as the
    /// reference leaves it; unless the close proved the file clean (`before`), when it is
    /// left shortened to its header, a close stamp in it, so that the next open need not read
    /// the whole file for its prune. (Another process opening meanwhile finds no journal:
    /// gaps, never wrong answers.)
    pub fn closed(&self, file_path: &Path, before: Option<BeforeClose>) {
        let Some(hooks) = &self.hooks else {
            return;
        };
        if clean_proof::wal_path(file_path).exists() {
            return;
        }
        let stamped = before.is_some_and(|before| {
            clean_proof::stamp_after_close(hooks.journal(), before, file_path)
        });
        if !stamped {
            hooks.journal().remove();
        }
    }

    /// How many times the index was built so far.
    pub fn builds(&self) -> usize {
        self.builds.load(Ordering::Relaxed)
    }

    /// Whether the file is small enough to build the index in the poll: by the runs the last
    /// index held, else by the last run's rowid.
    fn builds_in_the_poll(&self, conn: &Connection, mirror: &Mirror) -> Result<bool> {
        if self.builder.is_running() {
            return Ok(false);
        }
        let runs = match self.builds() {
            0 => conn
                .prepare_cached("SELECT max(rowid) FROM runs")?
                .query_row([], |row| row.get::<_, Option<i64>>(0))?
                .unwrap_or(0),
            _ => mirror.len() as i64,
        };
        Ok(runs < SYNC_BUILD_RUNS)
    }
}

/// Checks, before the commit, that every blob the transaction inserted is referred to by a row
/// it wrote (see `blob_refs`): only then can its entry say it left no blob unreferenced.
fn confirm_blob_refs(hooks: &Hooks, conn: &Connection) {
    let Some(columns) = hooks.blob_columns() else {
        return;
    };
    let Some(refs) = hooks.changes().blob_refs().to_confirm() else {
        return;
    };
    if blob_refs::confirm(conn, columns, &refs) {
        hooks.changes().blob_refs_mut().set_confirmed();
    }
}

/// A connection of the state's own that no index reads from (the open's prune), whose commits
/// are journaled for the indexes of every other connection.
pub struct Journaled {
    // Declared first, so closed before the hooks that point into `hooks` go.
    conn: Connection,
    hooks: Box<Hooks>,
    file_path: PathBuf,
}

impl Journaled {
    /// `alongside`: the store connection's index, whose columns referring to blobs it shares
    /// (read when that connection's schema was verified, just before).
    pub fn new(conn: Connection, file_path: &Path, alongside: &RunIndex) -> Journaled {
        // SAFETY: the box is dropped after the connection (field order).
        let journal = Journal::new(file_path, StateFile::of(&conn, file_path), true);
        let _ = journal.open_now();
        let hooks = unsafe { hooks::install(conn.handle(), journal) };
        unsafe { hooks::install_wal_hook(&hooks) };
        match alongside
            .hooks
            .as_ref()
            .and_then(|other| other.blob_columns())
        {
            Some(columns) => hooks.share_blob_columns(columns.clone()),
            None => hooks.read_blob_columns(&conn, None),
        }
        Journaled {
            conn,
            hooks,
            file_path: file_path.to_path_buf(),
        }
    }

    /// Whether the file, as this connection's write transaction (just begun, nothing changed
    /// yet) sees it, provably has no blob that nothing refers to (see `clean_proof`). Anything
    /// unproven — another application's commit, a writer killed before its entry, a log
    /// restarted, a dirty commit — is `false`: the prune reads the file.
    pub fn blobs_known_clean(&self) -> bool {
        clean_proof::known_clean(self.hooks.journal(), &self.conn, &self.file_path)
    }

    /// Records that the prune in this connection's write transaction found no blob to delete.
    pub fn mark_blobs_clean(&self) {
        clean_proof::mark_clean(self.hooks.journal(), &self.conn, &self.file_path);
    }
}

impl std::ops::Deref for Journaled {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// Brings `mirror` from `from` to `to` with the entries of the commits in between; `false`
/// when they do not say everything (see the module header).
fn catch_up(
    hooks: &Hooks,
    mirror: &mut Mirror,
    conn: &Connection,
    from: At,
    to: At,
) -> Result<bool> {
    if from.schema != to.schema {
        return Ok(false);
    }
    let (start, end) = (from.position, to.position);
    let count = end.commit.wrapping_sub(start.commit);
    if count == 0 {
        // Nothing committed: the log must stand where it stood (a checkpoint that restarted it
        // in between is a gap, see `follows`).
        return Ok(follows(&end, start.frames, start.salt));
    }
    if count > journal::SLOTS as u32 {
        return Ok(false);
    }
    let mut previous_frames = start.frames;
    let mut previous_salt = start.salt;
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    // The journal's slots from the first commit that is not this connection's own, in one read.
    let mut ahead: Option<(u32, Vec<Option<journal::Slot>>)> = None;
    // This connection's own entries are shared with its hooks, not copied: with their images,
    // copying them was a fifth of a poll after its own commits.
    let mut entries: Vec<Held> = Vec::with_capacity(count as usize);
    let changes = hooks.changes();
    for offset in 1..=count {
        let commit = start.commit.wrapping_add(offset);
        let own = changes.own(commit).map(Held::Own);
        let entry = own.or_else(|| {
            let (first, slots) = ahead.get_or_insert_with(|| {
                (
                    commit,
                    hooks.journal().read_ahead(commit, count - offset + 1),
                )
            });
            match slots.get_mut(commit.wrapping_sub(*first) as usize)?.take() {
                Some(journal::Slot::Written(entry)) => Some(Held::Read(entry)),
                // Not written yet when read ahead (or torn): its own read, waiting if need be.
                _ => hooks.journal().settled(commit, deadline).map(Held::Read),
            }
        });
        let Some(entry) = entry else {
            return Ok(false);
        };
        if !follows(&entry.base, previous_frames, previous_salt) {
            return Ok(false);
        }
        if entry.keys.is_none() {
            return Ok(false);
        }
        previous_frames = entry.after_frames;
        // A salt its writer could not read back is the one it started from; had the commit
        // restarted the log, the next position's salt differs and the chain breaks.
        previous_salt = entry.after_salt.unwrap_or(entry.base.salt);
        entries.push(entry);
    }
    // Released before the SQL below: its statements run this connection's hooks.
    drop(changes);
    if !follows(&end, previous_frames, previous_salt) {
        return Ok(false);
    }
    let mut keys = BTreeSet::new();
    let mut images = BTreeMap::new();
    for entry in &entries {
        if let Some(entry_images) = &entry.images {
            // A later commit's image of a run replaces an earlier one's.
            images.extend(entry_images.iter().map(|(rowid, image)| (*rowid, image)));
        } else if let Some(entry_keys) = &entry.keys {
            keys.extend(entry_keys.iter().cloned());
        }
    }
    if keys.len() + images.len() > MAX_CATCH_UP_KEYS {
        return Ok(false);
    }
    // Images first: the runs of commits without images are then read as they are now, which
    // is at least as new as any image of them.
    if !mirror.apply_images(&images) {
        return Ok(false);
    }
    mirror.apply(conn, &keys)?;
    Ok(true)
}

/// An entry a catch-up applies: this connection's own, shared with its hooks, or one read from
/// the journal.
enum Held {
    Own(Arc<journal::Entry>),
    Read(journal::Entry),
}

impl std::ops::Deref for Held {
    type Target = journal::Entry;

    fn deref(&self) -> &journal::Entry {
        match self {
            Held::Own(entry) => entry,
            Held::Read(entry) => entry,
        }
    }
}

/// Returns the memory freed since to the system: the build's own (its connection's page cache,
/// the vectors it grew, on its thread's heap) and the index it replaced. glibc keeps freed heap
/// memory otherwise, and the process's RSS kept what every build once used.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `PIW_RUN_INDEX=off`, read once per process.
fn switched_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var_os("PIW_RUN_INDEX").is_some_and(|value| value == "off"))
}

#[cfg(test)]
mod tests;
