//! What a connection's commits change, as SQLite reports it: the pre-update hook names every
//! row of the mirrored tables a statement inserts, updates or deletes (REPLACE victims and
//! foreign-key cascades included; with the hook set SQLite never truncates a table without
//! visiting its rows), the commit hook reads where the WAL stood while the write lock is still
//! held (and marks the commit's journal slot in flight), and the WAL hook — called once the
//! commit is durable — turns the transaction's keys into a journal entry: kept for this
//! connection's own index and written to the shared journal for everyone else's.
//!
//! The WAL hook replaces SQLite's default one, which is what `PRAGMA wal_autocheckpoint` sets;
//! it checkpoints at the same threshold. A later `PRAGMA wal_autocheckpoint` on the connection
//! takes the hook back: its commits are then gaps, which readers answer with a rebuild.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::ffi;

use super::blob_refs::{BlobRefs, RefColumns};
use super::journal::{Entry, Images, Journal, Key};
use super::position::{self, WalPosition};
use super::preupdate::{sqlite3_preupdate_hook, sqlite3_preupdate_new, sqlite3_preupdate_old};

/// `PRAGMA wal_autocheckpoint` as the state opens the file (the reference's value).
pub const AUTOCHECKPOINT_FRAMES: c_int = 1000;
/// How many of its own commits a connection keeps for its index.
const OWN_ENTRIES: usize = 4096;
/// Past this many keys in one transaction, its entry says "rebuild" instead.
const MAX_KEYS: usize = 50_000;

/// A written `runs` row's `run_id` and `resource_id`.
type RunKeys = (Box<[u8]>, Box<[u8]>);

/// The open transaction's changes, and the commits made so far.
#[derive(Default)]
pub struct Changes {
    keys: Vec<Key>,
    /// The transaction changed what keys cannot say.
    unreported: bool,
    /// `run_id` and `resource_id` of the `runs` rows the transaction wrote: a row keyed by one
    /// of them names a run whose own key is there already.
    written_runs: Vec<RunKeys>,
    /// The rows of the runs `keys` name, read just before the commit (`RunIndex::capture`);
    /// any change after that drops them.
    images: Option<Images>,
    /// Where the WAL stood at the transaction's first change, with the write lock held and no
    /// frame of it written yet: where its commit starts from, even when SQLite restarted the
    /// log while spilling pages before the commit.
    first_base: Option<WalPosition>,
    /// Where the transaction's commit starts from (set by the commit hook).
    base: Option<WalPosition>,
    /// This connection's commits, oldest first.
    own: VecDeque<Arc<Entry>>,
    /// What the transaction did to blob references (see `blob_refs`).
    blob_refs: BlobRefs,
}

impl Changes {
    /// The open transaction's keys, when they say everything the commit changes.
    pub fn pending(&self) -> Option<Vec<Key>> {
        (!self.unreported).then(|| self.named_runs())
    }

    /// The transaction's keys, sorted, each once, without those of a queue, binding, resource
    /// or lease row of a run whose own row the transaction wrote: that run is named by its
    /// rowid already. (Its run_id and resource_id are unique: whichever run has one of them
    /// after the commit either is that run or had its own row written too.)
    fn named_runs(&self) -> Vec<Key> {
        let written = &self.written_runs;
        let mut keys: Vec<Key> = self
            .keys
            .iter()
            .filter(|key| match key {
                Key::RunId(text) => !written.iter().any(|(run_id, _)| run_id == text),
                Key::ResourceId(text) => {
                    !written.iter().any(|(_, resource_id)| resource_id == text)
                }
                _ => true,
            })
            .cloned()
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    pub fn blob_refs(&self) -> &BlobRefs {
        &self.blob_refs
    }

    pub fn blob_refs_mut(&mut self) -> &mut BlobRefs {
        &mut self.blob_refs
    }

    /// The rows `pending()`'s keys name, read at the end of the transaction.
    pub fn set_images(&mut self, images: Images) {
        self.images = Some(images);
    }

    /// This connection's entry for commit `commit`.
    pub fn own(&self, commit: u32) -> Option<Arc<Entry>> {
        let first = self.own.front()?.commit;
        let at = commit.wrapping_sub(first) as usize;
        self.own
            .get(at)
            .filter(|entry| entry.commit == commit)
            .cloned()
    }
}

/// The hooks' context: one per connection, at a fixed address while the connection is open.
pub struct Hooks {
    db: *mut ffi::sqlite3,
    changes: Mutex<Changes>,
    journal: Journal,
    /// The columns referring to blobs, once the schema was verified (see `blob_refs`).
    blob_columns: std::sync::OnceLock<Arc<RefColumns>>,
    /// Tests hold a commit between becoming visible and its entry: while the first is set the
    /// WAL hook waits (at most 10 s), and the second says it is waiting.
    #[cfg(test)]
    pub(super) wal_hook_hold: (std::sync::atomic::AtomicBool, std::sync::atomic::AtomicBool),
}

// SAFETY: `db` is only used by the hooks, which SQLite calls on the connection's own thread
// while it runs a statement; the rest is behind a mutex.
unsafe impl Send for Hooks {}
unsafe impl Sync for Hooks {}

impl Hooks {
    pub fn changes(&self) -> MutexGuard<'_, Changes> {
        self.changes.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Reads the columns referring to blobs on `conn` (the hooks' connection, its schema
    /// verified); until then every commit counts as one that may have left a blob unreferenced.
    /// `exact_at`: the schema version at which the file's schema objects were verified equal to
    /// the state schema's (their columns are then known without reading).
    pub fn read_blob_columns(&self, conn: &rusqlite::Connection, exact_at: Option<i64>) {
        let columns = match exact_at.and_then(RefColumns::of_state_schema) {
            Some(known) => Ok(known),
            None => RefColumns::read(conn),
        };
        if let Ok(columns) = columns {
            let _ = self.blob_columns.set(Arc::new(columns));
        }
    }

    /// The columns another connection of the same open read (at the schema version they say).
    pub fn share_blob_columns(&self, columns: Arc<RefColumns>) {
        let _ = self.blob_columns.set(columns);
    }

    pub fn blob_columns(&self) -> Option<&Arc<RefColumns>> {
        self.blob_columns.get()
    }
}

/// Installs the pre-update, commit and rollback hooks on `db` (the WAL hook comes with
/// [`install_wal_hook`], once the connection's pragmas are set).
///
/// # Safety
/// `db` is live, and the returned box outlives the connection.
pub unsafe fn install(db: *mut ffi::sqlite3, journal: Journal) -> Box<Hooks> {
    let hooks = Box::new(Hooks {
        db,
        changes: Mutex::default(),
        journal,
        blob_columns: std::sync::OnceLock::new(),
        #[cfg(test)]
        wal_hook_hold: Default::default(),
    });
    let context = (&*hooks as *const Hooks).cast_mut().cast::<c_void>();
    sqlite3_preupdate_hook(db, Some(on_preupdate), context);
    ffi::sqlite3_commit_hook(db, Some(on_commit), context);
    ffi::sqlite3_rollback_hook(db, Some(on_rollback), context);
    hooks
}

/// Installs the WAL hook (see the module header).
///
/// # Safety
/// As [`install`], with the box `install` returned.
pub unsafe fn install_wal_hook(hooks: &Hooks) {
    let context = (hooks as *const Hooks).cast_mut().cast::<c_void>();
    ffi::sqlite3_wal_hook(hooks.db, Some(on_wal_commit), context);
}

/// How a table the index or its cached run records read names the run a row belongs to.
enum Mirrored {
    Runs,
    /// The `run_id` column (the first).
    ByRunId,
    /// The `resource_id` column (the first).
    ByResourceId,
    Definitions,
    /// Documents: read by the run records only, by hash.
    Blobs,
}

fn mirrored(table: &[u8]) -> Option<Mirrored> {
    Some(match table {
        b"runs" => Mirrored::Runs,
        // `run_sources`: only the records read it.
        b"run_queue" | b"run_bindings" | b"run_sources" => Mirrored::ByRunId,
        b"resources" | b"leases" => Mirrored::ByResourceId,
        b"workflow_definitions" => Mirrored::Definitions,
        b"blobs" => Mirrored::Blobs,
        _ => return None,
    })
}

/// Column `column`'s text, before (`old`) or after the change.
unsafe fn column_text(db: *mut ffi::sqlite3, column: c_int, old: bool) -> Option<Box<[u8]>> {
    let mut value: *mut ffi::sqlite3_value = std::ptr::null_mut();
    let code = if old {
        sqlite3_preupdate_old(db, column, &mut value)
    } else {
        sqlite3_preupdate_new(db, column, &mut value)
    };
    if code != ffi::SQLITE_OK
        || value.is_null()
        || ffi::sqlite3_value_type(value) == ffi::SQLITE_NULL
    {
        return None;
    }
    let text = ffi::sqlite3_value_text(value);
    let length = ffi::sqlite3_value_bytes(value);
    if text.is_null() || length < 0 {
        return Some(Box::default());
    }
    Some(Box::from(std::slice::from_raw_parts(text, length as usize)))
}

unsafe extern "C" fn on_preupdate(
    context: *mut c_void,
    db: *mut ffi::sqlite3,
    operation: c_int,
    database: *const c_char,
    table: *const c_char,
    old_rowid: ffi::sqlite3_int64,
    new_rowid: ffi::sqlite3_int64,
) {
    if CStr::from_ptr(database).to_bytes() != b"main" {
        return;
    }
    let hooks = &*(context as *const Hooks);
    let mut changes = hooks.changes();
    if changes.first_base.is_none() {
        changes.first_base = position::of_shared_memory(db);
    }
    let table = CStr::from_ptr(table).to_bytes();
    changes.blob_refs.note(
        hooks.blob_columns.get().map(|columns| &**columns),
        db,
        operation,
        table,
        new_rowid,
    );
    let Some(kind) = mirrored(table) else {
        return;
    };
    // A new blob changes no record: one is kept only when every document it read was there.
    if matches!(kind, Mirrored::Blobs) && operation == ffi::SQLITE_INSERT {
        return;
    }
    changes.images = None;
    if changes.unreported {
        return;
    }
    let before = operation != ffi::SQLITE_INSERT;
    let after = operation != ffi::SQLITE_DELETE;
    match kind {
        Mirrored::Runs => {
            if before {
                changes.keys.push(Key::Run(old_rowid));
            }
            if after && !(before && new_rowid == old_rowid) {
                changes.keys.push(Key::Run(new_rowid));
            }
            if after {
                // `runs(run_id, resource_id, …)`.
                if let (Some(run_id), Some(resource_id)) =
                    (column_text(db, 0, false), column_text(db, 1, false))
                {
                    changes.written_runs.push((run_id, resource_id));
                }
            }
        }
        Mirrored::ByRunId | Mirrored::ByResourceId => {
            let key = |text: Box<[u8]>| match kind {
                Mirrored::ByRunId => Key::RunId(text),
                _ => Key::ResourceId(text),
            };
            let old = before.then(|| column_text(db, 0, true)).flatten();
            let new = after.then(|| column_text(db, 0, false)).flatten();
            if new.is_some() && new == old {
                changes.keys.extend(new.map(key));
            } else {
                changes.keys.extend(old.map(key));
                changes.keys.extend(new.map(key));
            }
        }
        Mirrored::Definitions if operation == ffi::SQLITE_INSERT => {
            changes.keys.push(Key::DefinitionAdded);
        }
        // A definition some runs join changed or went: only a rebuild can tell which.
        Mirrored::Definitions => changes.unreported = true,
        // Once for a run of them (a prune deletes thousands in a row).
        Mirrored::Blobs if changes.keys.last() == Some(&Key::BlobChanged) => {}
        Mirrored::Blobs => changes.keys.push(Key::BlobChanged),
    }
    if changes.keys.len() > MAX_KEYS {
        changes.unreported = true;
    }
    if changes.unreported {
        changes.keys = Vec::new();
    }
}

/// The transaction is about to commit, holding the WAL write lock: it starts from where the
/// WAL stood at its first change (or, without one, where it stands now).
unsafe extern "C" fn on_commit(context: *mut c_void) -> c_int {
    let hooks = &*(context as *const Hooks);
    let first_base = hooks.changes().first_base.take();
    let base = first_base.or_else(|| position::of_shared_memory(hooks.db));
    if let Some(base) = &base {
        hooks.journal.announce(base);
    }
    hooks.changes().base = base;
    0
}

unsafe extern "C" fn on_rollback(context: *mut c_void) {
    let hooks = &*(context as *const Hooks);
    let mut changes = hooks.changes();
    changes.keys.clear();
    changes.written_runs.clear();
    changes.images = None;
    changes.unreported = false;
    changes.first_base = None;
    changes.blob_refs.clear();
    // A commit that failed after its commit hook: its slot's mark goes.
    if let Some(base) = changes.base.take() {
        hooks.journal.withdraw(base.commit.wrapping_add(1));
    }
}

/// A commit is durable, ending at frame `frames` of the WAL.
unsafe extern "C" fn on_wal_commit(
    context: *mut c_void,
    db: *mut ffi::sqlite3,
    database: *const c_char,
    frames: c_int,
) -> c_int {
    if CStr::from_ptr(database).to_bytes() != b"main" {
        return ffi::SQLITE_OK;
    }
    let hooks = &*(context as *const Hooks);
    #[cfg(test)]
    {
        use std::sync::atomic::Ordering;
        let (hold, waiting) = &hooks.wal_hook_hold;
        if hold.load(Ordering::SeqCst) {
            waiting.store(true, Ordering::SeqCst);
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while hold.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            waiting.store(false, Ordering::SeqCst);
        }
    }
    let entry = {
        let mut changes = hooks.changes();
        let keys = changes.named_runs();
        changes.keys.clear();
        changes.written_runs.clear();
        let unreported = std::mem::replace(&mut changes.unreported, false);
        let images = changes.images.take();
        let blobs_clean = (changes.blob_refs.is_clean())
            .then(|| hooks.blob_columns.get().map(|columns| columns.schema))
            .flatten();
        changes.blob_refs.clear();
        changes.base.take().map(|base| {
            let commit = base.commit.wrapping_add(1);
            let frames = frames as u32;
            // Read back at once; another commit since makes it unknown, not wrong.
            let after_salt = position::of_shared_memory(db)
                .filter(|now| now.commit == commit && now.frames == frames)
                .map(|now| now.salt);
            let entry = Arc::new(Entry {
                commit,
                base,
                after_frames: frames,
                after_salt,
                images: images.filter(|_| !unreported),
                keys: (!unreported).then_some(keys),
                blobs_clean,
            });
            if changes.own.len() == OWN_ENTRIES {
                changes.own.pop_front();
            }
            // Own entries stay consecutive: a commit the hooks missed ends the run of them.
            if changes
                .own
                .back()
                .is_some_and(|last| last.commit.wrapping_add(1) != commit)
            {
                changes.own.clear();
            }
            changes.own.push_back(entry.clone());
            entry
        })
    };
    if let Some(entry) = &entry {
        abort_if_told_to();
        hooks.journal().append(entry);
    }
    if frames >= AUTOCHECKPOINT_FRAMES {
        ffi::sqlite3_wal_checkpoint(db, database);
    }
    ffi::SQLITE_OK
}

/// `PIW_TEST_ABORT_BEFORE_JOURNAL=n`: the process dies (SIGABRT, nothing cleaned up) at its
/// n-th commit, after the commit is durable and before its journal entry is written — the
/// moment a writer killed with -9 leaves its commit without an entry. Only the crash tests set
/// it (`__test__/run-index-model.spec.ts`).
fn abort_if_told_to() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    static COMMITS: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        std::env::var("PIW_TEST_ABORT_BEFORE_JOURNAL")
            .ok()
            .and_then(|value| value.parse().ok())
    });
    if let Some(at) = at {
        if COMMITS.fetch_add(1, Ordering::Relaxed) + 1 == *at {
            std::process::abort();
        }
    }
}
