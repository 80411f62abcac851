//! A SQLite VFS over the platform's default one ("unix") that gathers the write-ahead log's
//! appends into one write per commit.
//!
//! SQLite's WAL writer issues two writes per frame (the 24-byte frame header, then the page), so a
//! commit of twenty pages costs some forty `pwrite` calls. This shim forwards every method of the
//! real VFS and file unchanged, except that the writes to a WAL file (`SQLITE_OPEN_WAL`) that
//! continue exactly where the previous ones ended are kept in a buffer and written with one call.
//! It is registered under its own name ([`name`]), never as the default VFS. Measured on the run
//! lifecycle: 36 WAL `pwrite` calls per commit before, 1.07 after.
//!
//! Why it is exactly as safe as plain SQLite — the write patterns of `walFrames` and
//! `walRewriteChecksums` (sqlite3.c, 3.50) and how each is handled:
//! - The buffered bytes always reach the file in SQLite's order: a write that does not continue
//!   the buffer, and every other method on the WAL file (read, sync, truncate, size, file
//!   control, locks, close…), first writes the buffer out. A flush error is returned by that
//!   method; the buffer is kept so that a later flush retries it (never dropped while the write
//!   lock is held), so a transaction can only commit if every frame before its commit frame made
//!   it to the file. Reads of spilled (not yet committed) frames thus see their bytes.
//! - Commits. SQLite publishes a commit in the wal-index (shared memory of the database file)
//!   after writing its frames and — only with `synchronous=FULL/EXTRA` — syncing the WAL, so the
//!   sync cannot be relied on. A frame header whose bytes 4..8 (the database size) are non-zero
//!   marks a commit frame; the write that follows it (its page) is written together with
//!   everything buffered before `xWrite` returns, and its result is that write's. A commit frame
//!   header that does not continue buffered frames — a one-frame commit, or the last header
//!   `walRewriteChecksums` rewrites after the commit, which no page follows — is written
//!   through at once. So no commit is ever visible before all its bytes are in the file, and
//!   write errors of a commit (ENOSPC, EIO) are reported where SQLite expects them.
//! - The 32-byte WAL header at offset 0 (a new or restarted log) is buffered like any write:
//!   the frames after it continue it, and `syncHeader` syncs flush it.
//! - Frame overwrites after a cache spill (the page at a frame's offset + 24) do not continue the
//!   buffer, so they flush it first; checksum rewrites are each preceded by a read (a flush).
//! - Padding frames for sector alignment split writes around a sync; SQLite pads only when the
//!   database file lacks `SQLITE_IOCAP_POWERSAFE_OVERWRITE` (unix has it unless `psow=0`), and then
//!   this shim buffers nothing for that WAL.
//! - Uncommitted frames left when the write lock is released (a rollback after a spill) are
//!   written out while the lock is still held — the database file's `xShmLock` releasing
//!   `WAL_WRITE_LOCK` flushes its WAL — and then dropped, so stale bytes can never land on frames
//!   another connection appends later. In `locking_mode=EXCLUSIVE` there is no other writer.
//! - A process killed with bytes in the buffer loses only frames that were never committed (and
//!   at most a restarted log's header, with the frames of the old log all checkpointed): the file
//!   then holds a prefix of SQLite's writes, exactly as if the process had died before issuing
//!   the rest, which WAL recovery already handles through the frames' salts and checksums.
//!   Power loss is unchanged: every `xSync` writes the buffer out first.
//!
//! The buffer is capped ([`BUFFER_LIMIT`], 128 KiB) so a huge transaction holds bounded memory
//! and no write exceeds what the unix VFS accepts. Nothing in
//! a callback may unwind into C: bodies run under `catch_unwind` (a panic becomes
//! `SQLITE_IOERR`) and the buffer grows with `try_reserve` (a failed reservation writes through).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, addr_of_mut};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name the shim is registered under.
pub const NAME: &CStr = c"piw-wal-append";

/// The most bytes held back before they are written out: the largest write the unix VFS takes
/// (`seekAndWriteFd` masks a write's size to 17 bits). A commit of up to 31 frames of 4 KiB
/// pages fits in one write; a larger one costs one more write per 31 frames.
const BUFFER_LIMIT: usize = 0x1ffff;
/// The size of a WAL frame header; SQLite writes nothing else of this size to a WAL file.
const FRAME_HEADER_BYTES: usize = 24;
/// The wal-index lock slot of the WAL write lock (`WAL_WRITE_LOCK` in wal.c).
const WAL_WRITE_LOCK: c_int = 0;

/// Registers the shim the first time it is asked for (thread-safe) and returns its name, or
/// `None` when SQLite has no VFS to wrap or refused it (the caller then opens with the default).
pub fn name() -> Option<&'static CStr> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    REGISTERED.get_or_init(register).then_some(NAME)
}

fn register() -> bool {
    // SAFETY: sqlite3_vfs_find only reads SQLite's VFS list (initialising SQLite if needed); the
    // VFS it returns lives as long as the process (registered VFSes are never freed here).
    let real = unsafe {
        let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
        if unix.is_null() {
            ffi::sqlite3_vfs_find(ptr::null())
        } else {
            unix
        }
    };
    if real.is_null() {
        return false;
    }
    // SAFETY: `real` is a registered, live VFS; these fields are plain values.
    let (version, real_size, max_path) =
        unsafe { ((*real).iVersion, (*real).szOsFile, (*real).mxPathname) };
    let Some(size) = usize::try_from(real_size)
        .ok()
        .and_then(|real_size| c_int::try_from(REAL_OFFSET + real_size).ok())
    else {
        return false;
    };
    let vfs = Box::into_raw(Box::new(ffi::sqlite3_vfs {
        iVersion: version.clamp(1, 3),
        szOsFile: size,
        mxPathname: max_path,
        pNext: ptr::null_mut(),
        zName: NAME.as_ptr(),
        pAppData: real.cast(),
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        xDlOpen: Some(x_dl_open),
        xDlError: Some(x_dl_error),
        xDlSym: Some(x_dl_sym),
        xDlClose: Some(x_dl_close),
        xRandomness: Some(x_randomness),
        xSleep: Some(x_sleep),
        xCurrentTime: Some(x_current_time),
        xGetLastError: Some(x_get_last_error),
        xCurrentTimeInt64: Some(x_current_time_int64),
        xSetSystemCall: Some(x_set_system_call),
        xGetSystemCall: Some(x_get_system_call),
        xNextSystemCall: Some(x_next_system_call),
    }));
    // SAFETY: `vfs` is a fully initialised VFS that is never freed once registered (SQLite keeps
    // the pointer); registration takes SQLite's own mutex. `OnceLock` runs this at most once.
    let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if rc != ffi::SQLITE_OK {
        // SAFETY: SQLite refused it, so nothing refers to the box we just leaked.
        drop(unsafe { Box::from_raw(vfs) });
        return false;
    }
    true
}

/// The file object SQLite allocates (`szOsFile` bytes) for a main database or WAL file: the
/// shim's state, then the real VFS's file object at [`REAL_OFFSET`]. Other files (journals, temp
/// files) are opened by the real VFS directly in the same memory and never see the shim.
#[repr(C)]
struct ShimFile {
    /// Must come first: SQLite sees a `sqlite3_file` whose methods are [`IO_METHODS`].
    base: ffi::sqlite3_file,
    /// The real file object, inside this allocation.
    real: *mut ffi::sqlite3_file,
    role: Role,
}

const REAL_OFFSET: usize = size_of::<ShimFile>().next_multiple_of(16);

enum Role {
    /// A main database file, and the WAL file of the same connection while it is open.
    Database {
        wal: *mut ShimFile,
    },
    Wal(WalAppends),
}

/// The held-back appends of one WAL file.
struct WalAppends {
    /// The database file this WAL belongs to (null once either is closed).
    database: *mut ShimFile,
    /// Whether appends are gathered at all (see the module comment on padding).
    coalesce: bool,
    buffer: Vec<u8>,
    /// The file offset of `buffer[0]`.
    start: i64,
    /// A commit frame's header was written: its page, the next write, must not be held back.
    commit_page_next: bool,
    /// The buffer holds a commit frame's header.
    holds_commit: bool,
}

#[cfg(test)]
thread_local! {
    /// Writes SQLite asked of WAL files and writes that reached the real files, on this thread.
    static WAL_WRITES: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

#[cfg(test)]
thread_local! {
    /// Times a wal-index barrier (a commit being published) found a commit frame held back.
    static PUBLISHED_UNWRITTEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
fn count_published_unwritten() {
    PUBLISHED_UNWRITTEN.with(|count| count.set(count.get() + 1));
}

/// (requested, real) WAL writes on this thread so far.
#[cfg(test)]
fn wal_writes() -> (u64, u64) {
    WAL_WRITES.with(|counts| counts.get())
}

#[cfg(test)]
fn count_wal_write(real: bool) {
    WAL_WRITES.with(|counts| {
        let (requested, written) = counts.get();
        counts.set(if real {
            (requested, written + 1)
        } else {
            (requested + 1, written)
        });
    });
}

/// Runs a callback body, turning a panic into `SQLITE_IOERR` instead of unwinding into C.
fn guarded(body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(ffi::SQLITE_IOERR)
}

/// Whether `file` is an open file of this shim (its methods are one of [`IO_METHODS`]).
///
/// # Safety
/// `file` is null or points to a `sqlite3_file`.
unsafe fn is_shim_file(file: *mut ffi::sqlite3_file) -> bool {
    if file.is_null() {
        return false;
    }
    // SAFETY: the caller guarantees a non-null `file` is a sqlite3_file.
    let methods = unsafe { (*file).pMethods };
    IO_METHODS.iter().any(|table| ptr::eq(table, methods))
}

/// The shim file behind a `sqlite3_file` SQLite passes to one of [`IO_METHODS`].
///
/// # Safety
/// `file` was opened by [`x_open`] with a shim method table and not yet closed; SQLite calls a
/// file's methods from one thread at a time, so no other reference to it is live.
unsafe fn shim<'a>(file: *mut ffi::sqlite3_file) -> &'a mut ShimFile {
    // SAFETY: per the contract, `file` is the first field of a live, initialised ShimFile.
    unsafe { &mut *file.cast::<ShimFile>() }
}

impl ShimFile {
    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: `real` was opened successfully, so its method table is non-null and static.
        unsafe { &*(*self.real).pMethods }
    }

    /// Writes held-back WAL bytes out; `SQLITE_OK` for other files.
    fn flush(&mut self) -> c_int {
        match &mut self.role {
            Role::Wal(appends) => appends.flush(self.real),
            Role::Database { .. } => ffi::SQLITE_OK,
        }
    }

    /// The WAL file of this database file, if it is open.
    fn wal_file(&mut self) -> Option<&mut ShimFile> {
        let Role::Database { wal } = self.role else {
            return None;
        };
        // SAFETY: the link is cleared when either file closes, so a non-null `wal` is a live
        // shim file of the same connection, which SQLite uses from one thread at a time.
        unsafe { wal.as_mut() }
    }

    /// Runs `action` on the held-back appends of a WAL file (with its real file).
    fn with_appends(&mut self, action: impl FnOnce(&mut WalAppends, *mut ffi::sqlite3_file)) {
        let real = self.real;
        if let Role::Wal(appends) = &mut self.role {
            action(appends, real);
        }
    }
}

/// Calls the real file's method `$method` with `$args`, or returns `$missing` if it has none.
macro_rules! forward {
    ($file:expr, $method:ident, $missing:expr $(, $arg:expr)*) => {{
        let file: &ShimFile = $file;
        match file.methods().$method {
            // SAFETY: forwarding SQLite's own arguments to the real file's method, on the real
            // file object it opened.
            Some(method) => unsafe { method(file.real $(, $arg)*) },
            None => $missing,
        }
    }};
}

/// Writes straight to the real file.
fn write_real(real: *mut ffi::sqlite3_file, data: &[u8], offset: i64) -> c_int {
    #[cfg(test)]
    count_wal_write(true);
    let Ok(amount) = c_int::try_from(data.len()) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: `real` is an open real file (its method table is non-null); `data` is valid for
    // `amount` bytes for the duration of the call.
    unsafe {
        match (*(*real).pMethods).xWrite {
            Some(write) => write(real, data.as_ptr().cast(), amount, offset),
            None => ffi::SQLITE_IOERR_WRITE,
        }
    }
}

impl WalAppends {
    fn end(&self) -> i64 {
        self.start + self.buffer.len() as i64
    }

    /// Writes the buffer out with one write; kept for a retry when that fails.
    fn flush(&mut self, real: *mut ffi::sqlite3_file) -> c_int {
        if self.buffer.is_empty() {
            return ffi::SQLITE_OK;
        }
        let rc = write_real(real, &self.buffer, self.start);
        if rc == ffi::SQLITE_OK {
            self.buffer.clear();
            self.holds_commit = false;
        }
        rc
    }

    /// Adds `data` at `offset` to the buffer if it fits (the caller checked it continues it).
    fn append(&mut self, data: &[u8], offset: i64) -> bool {
        if self.buffer.len() + data.len() > BUFFER_LIMIT
            || self.buffer.try_reserve(data.len()).is_err()
        {
            return false;
        }
        if self.buffer.is_empty() {
            self.start = offset;
        }
        self.buffer.extend_from_slice(data);
        true
    }

    fn flush_then_write(
        &mut self,
        real: *mut ffi::sqlite3_file,
        data: &[u8],
        offset: i64,
    ) -> c_int {
        match self.flush(real) {
            ffi::SQLITE_OK => write_real(real, data, offset),
            rc => rc,
        }
    }

    /// `xWrite` of a WAL file.
    fn write(&mut self, real: *mut ffi::sqlite3_file, data: &[u8], offset: i64) -> c_int {
        if !self.coalesce {
            return write_real(real, data, offset);
        }
        let continues = !self.buffer.is_empty() && offset == self.end();
        if std::mem::take(&mut self.commit_page_next) {
            // The page of a commit frame: once this returns, SQLite may publish the commit.
            if continues && self.append(data, offset) {
                return self.flush(real);
            }
            return self.flush_then_write(real, data, offset);
        }
        let commit_header = data.len() == FRAME_HEADER_BYTES && data[4..8] != [0; 4];
        if commit_header && !continues {
            let rc = self.flush_then_write(real, data, offset);
            self.commit_page_next = rc == ffi::SQLITE_OK;
            return rc;
        }
        // A write elsewhere, or one that would overflow the buffer: what is held goes first.
        if !continues || self.buffer.len() + data.len() > BUFFER_LIMIT {
            let rc = self.flush(real);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        if !self.append(data, offset) {
            return self.flush_then_write(real, data, offset);
        }
        self.commit_page_next = commit_header;
        self.holds_commit |= commit_header;
        ffi::SQLITE_OK
    }

    /// The write lock is being released: what is still held back belongs to no commit. It is
    /// written out while the lock is held (as plain SQLite would have) and then dropped.
    fn release(&mut self, real: *mut ffi::sqlite3_file) {
        let _ = self.flush(real);
        self.buffer.clear();
        self.commit_page_next = false;
        self.holds_commit = false;
    }

    /// The database file closed first: write out and stop holding anything back.
    fn unlink(&mut self, real: *mut ffi::sqlite3_file) {
        self.release(real);
        self.database = ptr::null_mut();
        self.coalesce = false;
    }
}

// ---- VFS methods -------------------------------------------------------------------------------

/// The real VFS this shim wraps.
///
/// # Safety
/// `vfs` is the shim's registered VFS.
unsafe fn real_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: `pAppData` of the shim's VFS holds the real VFS (set at registration).
    unsafe { (*vfs).pAppData.cast() }
}

/// Calls the real VFS's method `$method`, or returns `$missing` if it has none.
macro_rules! forward_vfs {
    ($vfs:expr, $method:ident, $missing:expr $(, $arg:expr)*) => {{
        // SAFETY: SQLite calls VFS methods with the registered VFS; the real VFS is live for the
        // process and receives SQLite's own arguments unchanged.
        unsafe {
            let real = real_vfs($vfs);
            match (*real).$method {
                Some(method) => method(real $(, $arg)*),
                None => $missing,
            }
        }
    }};
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes `szOsFile` writable bytes at `file` and the shim's VFS.
    guarded(|| unsafe { open(vfs, name, file, flags, out_flags) })
}

/// # Safety
/// As for `xOpen`: `file` has `szOsFile` writable bytes (8-byte aligned), `vfs` is the shim's.
unsafe fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: the shim's VFS wraps a live real VFS.
    let real_vfs = unsafe { real_vfs(vfs) };
    // SAFETY: reading a field of the live real VFS.
    let Some(real_open) = (unsafe { (*real_vfs).xOpen }) else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & (ffi::SQLITE_OPEN_MAIN_DB | ffi::SQLITE_OPEN_WAL) == 0 {
        // SAFETY: the allocation is at least the real VFS's szOsFile, so the real file object can
        // live at its start; its methods are then the real ones and the shim is not involved.
        return unsafe { real_open(real_vfs, name, file, flags, out_flags) };
    }
    let shim = file.cast::<ShimFile>();
    // SAFETY: `file` has szOsFile = REAL_OFFSET + the real szOsFile bytes, 8-byte aligned
    // (SQLite's allocations are), so the real object fits at REAL_OFFSET. pMethods stays NULL
    // until everything is initialised, which is what SQLite expects of a failed open.
    let (real, rc) = unsafe {
        (*file).pMethods = ptr::null();
        let real = file
            .cast::<u8>()
            .add(REAL_OFFSET)
            .cast::<ffi::sqlite3_file>();
        (*real).pMethods = ptr::null();
        (real, real_open(real_vfs, name, real, flags, out_flags))
    };
    if rc != ffi::SQLITE_OK {
        // SAFETY: an open that failed but left methods set must still be closed (xOpen contract).
        unsafe {
            if !(*real).pMethods.is_null() {
                if let Some(close) = (*(*real).pMethods).xClose {
                    close(real);
                }
            }
        }
        return rc;
    }
    // SAFETY: the real open succeeded, so its method table is set.
    let version = unsafe { (*(*real).pMethods).iVersion }.clamp(1, 3);
    let role = if flags & ffi::SQLITE_OPEN_WAL != 0 {
        // SAFETY: SQLite opens WAL files only from the pager, with a name it allocated.
        Role::Wal(unsafe { link_wal(name, shim) })
    } else {
        Role::Database {
            wal: ptr::null_mut(),
        }
    };
    // SAFETY: writing the fields of the (uninitialised) shim state in place, then publishing it
    // through pMethods.
    unsafe {
        ptr::write(addr_of_mut!((*shim).real), real);
        ptr::write(addr_of_mut!((*shim).role), role);
        (*file).pMethods = &IO_METHODS[version as usize - 1];
    }
    ffi::SQLITE_OK
}

/// Finds the database file of a WAL being opened and links the two; appends are gathered only
/// when that worked and SQLite will not pad commits to sector boundaries.
///
/// # Safety
/// `name` is the WAL file name the pager passes to `xOpen`; `wal_file` is the WAL's file object.
unsafe fn link_wal(name: ffi::sqlite3_filename, wal_file: *mut ShimFile) -> WalAppends {
    let mut appends = WalAppends {
        database: ptr::null_mut(),
        coalesce: false,
        buffer: Vec::new(),
        start: 0,
        commit_page_next: false,
        holds_commit: false,
    };
    if name.is_null() {
        return appends;
    }
    // SAFETY: for a WAL name from the pager, this returns the pager's database file object.
    let database = unsafe { ffi::sqlite3_database_file_object(name) };
    // SAFETY: `database` is null or the pager's open database file.
    if !unsafe { is_shim_file(database) } {
        return appends;
    }
    // SAFETY: it is a shim file (checked), open, and used by this same connection only.
    let database = unsafe { shim(database) };
    let Role::Database { wal } = &mut database.role else {
        return appends;
    };
    if !wal.is_null() {
        return appends;
    }
    *wal = wal_file;
    let characteristics = forward!(database, xDeviceCharacteristics, 0);
    appends.database = ptr::from_mut(database);
    appends.coalesce = characteristics & ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0;
    appends
}

unsafe extern "C" fn x_delete(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    forward_vfs!(vfs, xDelete, ffi::SQLITE_IOERR_DELETE, name, sync_dir)
}

unsafe extern "C" fn x_access(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    forward_vfs!(vfs, xAccess, ffi::SQLITE_IOERR_ACCESS, name, flags, out)
}

unsafe extern "C" fn x_full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    size: c_int,
    out: *mut c_char,
) -> c_int {
    forward_vfs!(vfs, xFullPathname, ffi::SQLITE_CANTOPEN, name, size, out)
}

unsafe extern "C" fn x_dl_open(vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    forward_vfs!(vfs, xDlOpen, ptr::null_mut(), name)
}

unsafe extern "C" fn x_dl_error(vfs: *mut ffi::sqlite3_vfs, size: c_int, out: *mut c_char) {
    forward_vfs!(vfs, xDlError, (), size, out)
}

type DlSymbol = Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)>;

unsafe extern "C" fn x_dl_sym(
    vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> DlSymbol {
    forward_vfs!(vfs, xDlSym, None, handle, symbol)
}

unsafe extern "C" fn x_dl_close(vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    forward_vfs!(vfs, xDlClose, (), handle)
}

unsafe extern "C" fn x_randomness(
    vfs: *mut ffi::sqlite3_vfs,
    size: c_int,
    out: *mut c_char,
) -> c_int {
    forward_vfs!(vfs, xRandomness, 0, size, out)
}

unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    forward_vfs!(vfs, xSleep, 0, micros)
}

unsafe extern "C" fn x_current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    forward_vfs!(vfs, xCurrentTime, ffi::SQLITE_ERROR, out)
}

unsafe extern "C" fn x_get_last_error(
    vfs: *mut ffi::sqlite3_vfs,
    size: c_int,
    out: *mut c_char,
) -> c_int {
    forward_vfs!(vfs, xGetLastError, 0, size, out)
}

unsafe extern "C" fn x_current_time_int64(vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    forward_vfs!(vfs, xCurrentTimeInt64, ffi::SQLITE_ERROR, out)
}

unsafe extern "C" fn x_set_system_call(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    call: ffi::sqlite3_syscall_ptr,
) -> c_int {
    forward_vfs!(vfs, xSetSystemCall, ffi::SQLITE_NOTFOUND, name, call)
}

unsafe extern "C" fn x_get_system_call(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
) -> ffi::sqlite3_syscall_ptr {
    forward_vfs!(vfs, xGetSystemCall, None, name)
}

unsafe extern "C" fn x_next_system_call(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
) -> *const c_char {
    forward_vfs!(vfs, xNextSystemCall, ptr::null(), name)
}

// ---- File methods ------------------------------------------------------------------------------

/// The method tables for real files of io_methods version 1, 2 and 3 (a shim file reports the
/// real file's version, so SQLite calls exactly the methods the real file has).
static IO_METHODS: [ffi::sqlite3_io_methods; 3] = [io_methods(1), io_methods(2), io_methods(3)];

const fn io_methods(version: c_int) -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: version,
        xClose: Some(x_close),
        xRead: Some(x_read),
        xWrite: Some(x_write),
        xTruncate: Some(x_truncate),
        xSync: Some(x_sync),
        xFileSize: Some(x_file_size),
        xLock: Some(x_lock),
        xUnlock: Some(x_unlock),
        xCheckReservedLock: Some(x_check_reserved_lock),
        xFileControl: Some(x_file_control),
        xSectorSize: Some(x_sector_size),
        xDeviceCharacteristics: Some(x_device_characteristics),
        xShmMap: Some(x_shm_map),
        xShmLock: Some(x_shm_lock),
        xShmBarrier: Some(x_shm_barrier),
        xShmUnmap: Some(x_shm_unmap),
        xFetch: Some(x_fetch),
        xUnfetch: Some(x_unfetch),
    }
}

/// Defines a file method that writes held-back WAL bytes out, then forwards to the real file
/// (returning the flush's error instead if it failed).
macro_rules! flushing_method {
    ($name:ident, $method:ident, $missing:expr, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            guarded(|| {
                // SAFETY: SQLite calls file methods on files opened by x_open with IO_METHODS.
                let file = unsafe { shim(file) };
                match file.flush() {
                    ffi::SQLITE_OK => forward!(file, $method, $missing $(, $arg)*),
                    rc => rc,
                }
            })
        }
    };
}

flushing_method!(x_read, xRead, ffi::SQLITE_IOERR_READ, (buffer: *mut c_void, amount: c_int, offset: i64));
flushing_method!(x_truncate, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, (size: i64));
flushing_method!(x_sync, xSync, ffi::SQLITE_IOERR_FSYNC, (flags: c_int));
flushing_method!(x_file_size, xFileSize, ffi::SQLITE_IOERR_FSTAT, (size: *mut i64));
flushing_method!(x_lock, xLock, ffi::SQLITE_IOERR_LOCK, (level: c_int));
flushing_method!(x_unlock, xUnlock, ffi::SQLITE_IOERR_UNLOCK, (level: c_int));
flushing_method!(x_check_reserved_lock, xCheckReservedLock, ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, (out: *mut c_int));
flushing_method!(x_file_control, xFileControl, ffi::SQLITE_NOTFOUND, (op: c_int, arg: *mut c_void));
flushing_method!(x_shm_map, xShmMap, ffi::SQLITE_IOERR_SHMMAP, (page: c_int, page_size: c_int, extend: c_int, out: *mut *mut c_void));
flushing_method!(x_shm_unmap, xShmUnmap, ffi::SQLITE_OK, (delete: c_int));
flushing_method!(x_fetch, xFetch, ffi::SQLITE_OK, (offset: i64, amount: c_int, out: *mut *mut c_void));
flushing_method!(x_unfetch, xUnfetch, ffi::SQLITE_OK, (offset: i64, page: *mut c_void));

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    guarded(|| {
        // SAFETY: SQLite calls file methods on files opened by x_open with IO_METHODS.
        let file = unsafe { shim(file) };
        let real = file.real;
        let Role::Wal(appends) = &mut file.role else {
            return forward!(file, xWrite, ffi::SQLITE_IOERR_WRITE, data, amount, offset);
        };
        #[cfg(test)]
        count_wal_write(false);
        let Ok(length) = usize::try_from(amount) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        // SAFETY: SQLite passes `amount` readable bytes at `data`, valid for this call.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length) };
        appends.write(real, bytes, offset)
    })
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    guarded(|| {
        // SAFETY: SQLite calls xClose once on a file opened by x_open with IO_METHODS.
        let file = unsafe { shim(file) };
        let flushed = file.flush();
        if let Some(wal) = file.wal_file() {
            wal.with_appends(|appends, real| appends.unlink(real));
        }
        if let Role::Wal(appends) = &mut file.role {
            // SAFETY: a linked database file is open (its close clears this link) and used by
            // this connection only.
            if let Some(database) = unsafe { appends.database.as_mut() } {
                database.role = Role::Database {
                    wal: ptr::null_mut(),
                };
            }
        }
        let closed = forward!(file, xClose, ffi::SQLITE_OK);
        // SAFETY: the shim state was initialised by x_open and is dropped exactly once, here;
        // SQLite clears pMethods after xClose and never calls the file again.
        unsafe {
            ptr::drop_in_place(addr_of_mut!(file.role));
            file.base.pMethods = ptr::null();
        }
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    })
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls file methods on files opened by x_open with IO_METHODS.
    let file = unsafe { shim(file) };
    forward!(file, xSectorSize, 4096)
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls file methods on files opened by x_open with IO_METHODS.
    let file = unsafe { shim(file) };
    forward!(file, xDeviceCharacteristics, 0)
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    count: c_int,
    flags: c_int,
) -> c_int {
    guarded(|| {
        // SAFETY: SQLite calls file methods on files opened by x_open with IO_METHODS.
        let file = unsafe { shim(file) };
        let releases_write_lock = flags == ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_EXCLUSIVE
            && offset <= WAL_WRITE_LOCK
            && WAL_WRITE_LOCK < offset + count;
        if releases_write_lock {
            if let Some(wal) = file.wal_file() {
                wal.with_appends(|appends, real| appends.release(real));
            }
        }
        match file.flush() {
            ffi::SQLITE_OK => forward!(
                file,
                xShmLock,
                ffi::SQLITE_IOERR_SHMLOCK,
                offset,
                count,
                flags
            ),
            rc => rc,
        }
    })
}

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: SQLite calls file methods on files opened by x_open with IO_METHODS.
        let file = unsafe { shim(file) };
        // Never needed by construction (a commit header's page is always written together with
        // it); a safety net should a commit be published while its header is still held back.
        if let Some(wal) = file.wal_file() {
            wal.with_appends(|appends, real| {
                if appends.holds_commit {
                    #[cfg(test)]
                    count_published_unwritten();
                    let _ = appends.flush(real);
                }
            });
        }
        forward!(file, xShmBarrier, ())
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{params, Connection, OpenFlags};
    use std::path::{Path, PathBuf};

    /// A scratch folder, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(label: &str) -> Scratch {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos());
            let dir = std::env::temp_dir()
                .join(format!("piw-vfs-{label}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("scratch folder");
            Scratch(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const FLAGS: OpenFlags = OpenFlags::SQLITE_OPEN_READ_WRITE
        .union(OpenFlags::SQLITE_OPEN_CREATE)
        .union(OpenFlags::SQLITE_OPEN_NO_MUTEX);

    fn open_shim(path: &Path, synchronous: &str) -> Connection {
        let conn = Connection::open_with_flags_and_vfs(path, FLAGS, name().expect("registered"))
            .expect("open through the shim");
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .expect("busy timeout");
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .expect("WAL");
        conn.pragma_update(None, "synchronous", synchronous)
            .expect("synchronous");
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, tag TEXT, body TEXT);
             CREATE INDEX IF NOT EXISTS items_tag ON items(tag);",
        )
        .expect("schema");
        conn
    }

    fn open_plain(path: &Path) -> Connection {
        let conn = Connection::open_with_flags(path, FLAGS).expect("open plain");
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .expect("busy timeout");
        conn
    }

    fn body(seed: i64, length: usize) -> String {
        let unit = format!("{seed:x}-");
        unit.repeat(length / unit.len() + 1)[..length].to_string()
    }

    /// Inserts rows `first..first + count` (bodies of `length` bytes) in one transaction.
    fn insert_rows(conn: &Connection, first: i64, count: i64, length: usize) {
        let tx = conn.unchecked_transaction().expect("begin");
        for id in first..first + count {
            tx.execute(
                "INSERT INTO items(id, tag, body) VALUES (?, ?, ?)",
                params![id, format!("tag-{}", id % 97), body(id, length)],
            )
            .expect("insert");
        }
        tx.commit().expect("commit");
    }

    /// (rows, total body length, sum of ids) as `conn` sees them.
    fn summary(conn: &Connection) -> (i64, i64, i64) {
        conn.query_row(
            "SELECT count(*), coalesce(sum(length(body)), 0), coalesce(sum(id), 0) FROM items",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("summary")
    }

    /// Fails if a commit was ever published while its frames were held back (on this thread).
    fn assert_no_commit_published_unwritten() {
        assert_eq!(PUBLISHED_UNWRITTEN.with(|count| count.get()), 0);
    }

    fn integrity(conn: &Connection) -> String {
        assert_no_commit_published_unwritten();
        conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .expect("integrity_check")
    }

    /// Copies the database and its WAL (not the wal-index) as a crash would leave them, and
    /// opens the copy with the plain VFS, which must recover every commit from the WAL alone.
    fn recovered_copy(scratch: &Scratch, path: &Path) -> Connection {
        let copy = scratch.file(&format!(
            "copy-{}.sqlite",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos())
        ));
        std::fs::copy(path, &copy).expect("copy database");
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let mut wal_copy = copy.as_os_str().to_owned();
        wal_copy.push("-wal");
        if Path::new(&wal).exists() {
            std::fs::copy(&wal, &wal_copy).expect("copy WAL");
        }
        open_plain(&copy)
    }

    #[test]
    fn every_commit_is_visible_to_a_plain_connection() {
        let scratch = Scratch::new("visible");
        let path = scratch.file("state.sqlite");
        let writer = open_shim(&path, "FULL");
        let reader = open_plain(&path);
        let mut expected = (0, 0, 0);
        for round in 0..60 {
            let count = 1 + round % 7;
            let first = expected.0 + 1;
            insert_rows(&writer, first, count, 200 + 37 * round as usize);
            expected.0 += count;
            expected.1 += count * (200 + 37 * round);
            expected.2 += (first..first + count).sum::<i64>();
            assert_eq!(summary(&reader), expected, "after commit {round}");
        }
        assert_eq!(summary(&recovered_copy(&scratch, &path)), expected);
        assert_eq!(integrity(&reader), "ok");
    }

    #[test]
    fn a_commit_costs_one_real_write_instead_of_two_per_frame() {
        let scratch = Scratch::new("writes");
        let path = scratch.file("state.sqlite");
        let writer = open_shim(&path, "FULL");
        writer
            .query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
            .expect("no checkpoints");
        insert_rows(&writer, 1, 10, 100);
        let (requested_before, real_before) = wal_writes();
        let commits = 30;
        for round in 0..commits {
            // Rows spread over the table and its index: a dozen pages or more per commit.
            insert_rows(&writer, 1000 + round * 100, 20, 1500);
        }
        let requested = wal_writes().0 - requested_before;
        let real = wal_writes().1 - real_before;
        let frames = requested / 2;
        assert!(
            frames >= 8 * commits as u64,
            "{frames} frames for {commits} commits"
        );
        assert_eq!(real, commits as u64, "{requested} writes asked for");
        let reader = open_plain(&path);
        assert_eq!(summary(&reader).0, 10 + 20 * commits);
        assert_no_commit_published_unwritten();
    }

    #[test]
    fn a_transaction_that_spills_the_cache_commits_and_reads_back() {
        let scratch = Scratch::new("spill");
        let path = scratch.file("state.sqlite");
        let writer = open_shim(&path, "FULL");
        writer
            .query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
            .expect("no checkpoints");
        writer
            .pragma_update(None, "cache_size", 10)
            .expect("tiny cache");
        insert_rows(&writer, 1, 100, 300);
        let reader = open_plain(&path);
        let before = summary(&reader);

        let tx = writer.unchecked_transaction().expect("begin");
        for id in 1000..5000 {
            tx.execute(
                "INSERT INTO items(id, tag, body) VALUES (?, ?, ?)",
                params![id, format!("tag-{}", id % 13), body(id, 700)],
            )
            .expect("insert");
        }
        // Reads spilled pages back, then rewrites them: frames overwritten within the
        // transaction, so SQLite rewrites the checksums at commit.
        let seen: i64 = tx
            .query_row("SELECT count(*) FROM items WHERE id >= 1000", [], |row| {
                row.get(0)
            })
            .expect("read back");
        assert_eq!(seen, 4000);
        tx.execute(
            "UPDATE items SET body = body || 'x' WHERE id % 3 = 0 AND id >= 1000",
            [],
        )
        .expect("update");
        assert_eq!(
            summary(&reader),
            before,
            "nothing visible before the commit"
        );
        tx.commit().expect("commit");

        let rewritten = (1000..5000).filter(|id| id % 3 == 0).count() as i64;
        let expected = (
            before.0 + 4000,
            before.1 + 4000 * 700 + rewritten,
            before.2 + (1000..5000).sum::<i64>(),
        );
        assert_eq!(summary(&reader), expected);
        assert_eq!(summary(&writer), expected);
        let copy = recovered_copy(&scratch, &path);
        assert_eq!(summary(&copy), expected);
        assert_eq!(integrity(&copy), "ok");
        assert_eq!(integrity(&reader), "ok");
    }

    #[test]
    fn pages_spilled_and_read_back_at_random_stay_current() {
        let scratch = Scratch::new("random");
        let path = scratch.file("state.sqlite");
        let writer = open_shim(&path, "NORMAL");
        writer
            .pragma_update(None, "cache_size", 10)
            .expect("tiny cache");
        let rows = 2000_usize;
        insert_rows(&writer, 0, rows as i64, 500);
        let mut lengths = vec![500_usize; rows];
        let mut seed = 0x2545_f491_u64;
        let mut next = move |bound: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % bound
        };
        let tx = writer.unchecked_transaction().expect("begin");
        for step in 0..6000 {
            let id = next(rows);
            if step % 2 == 0 {
                let length = 100 + next(800);
                tx.execute(
                    "UPDATE items SET body = ? WHERE id = ?",
                    params![body(step, length), id as i64],
                )
                .expect("update");
                lengths[id] = length;
            } else {
                let length: i64 = tx
                    .query_row(
                        "SELECT length(body) FROM items WHERE id = ?",
                        [id as i64],
                        |row| row.get(0),
                    )
                    .expect("read back");
                assert_eq!(length as usize, lengths[id], "row {id} at step {step}");
            }
        }
        tx.commit().expect("commit");
        let expected_total = lengths.iter().sum::<usize>() as i64;
        let reader = open_plain(&path);
        assert_eq!(summary(&reader).1, expected_total);
        let copy = recovered_copy(&scratch, &path);
        assert_eq!(summary(&copy).1, expected_total);
        assert_eq!(integrity(&copy), "ok");
    }

    #[test]
    fn commits_without_a_sync_are_visible_at_once() {
        for synchronous in ["NORMAL", "OFF"] {
            let scratch = Scratch::new("nosync");
            let path = scratch.file("state.sqlite");
            let writer = open_shim(&path, synchronous);
            let reader = open_plain(&path);
            let mut rows = 0;
            for round in 0..40 {
                insert_rows(&writer, rows + 1, 5, 400 + round * 10);
                rows += 5;
                assert_eq!(summary(&reader).0, rows, "{synchronous} commit {round}");
            }
            // A spilled transaction too, whose checksum rewrite is not followed by a sync.
            writer
                .pragma_update(None, "cache_size", 10)
                .expect("tiny cache");
            let tx = writer.unchecked_transaction().expect("begin");
            for id in 10_000..12_000 {
                tx.execute(
                    "INSERT INTO items(id, tag, body) VALUES (?, 'spill', ?)",
                    params![id, body(id, 600)],
                )
                .expect("insert");
            }
            tx.execute("UPDATE items SET tag = 'rewritten' WHERE id % 2 = 0", [])
                .expect("update");
            tx.commit().expect("commit");
            rows += 2000;
            assert_eq!(summary(&reader).0, rows, "{synchronous} spilled commit");
            let copy = recovered_copy(&scratch, &path);
            assert_eq!(summary(&copy), summary(&reader), "{synchronous} recovered");
            assert_eq!(integrity(&copy), "ok");
        }
    }

    #[test]
    fn many_transactions_with_checkpoints_and_restarts_stay_intact() {
        let scratch = Scratch::new("checkpoints");
        let path = scratch.file("state.sqlite");
        let writer = open_shim(&path, "FULL");
        writer
            .query_row("PRAGMA wal_autocheckpoint = 25", [], |_| Ok(()))
            .expect("autocheckpoint");
        let reader = open_plain(&path);
        let mut next = 1;
        for round in 0..400_i64 {
            let count = 1 + round % 11;
            insert_rows(&writer, next, count, 100 + (round as usize * 53) % 2500);
            next += count;
            if round % 9 == 0 {
                writer
                    .execute("DELETE FROM items WHERE id % 17 = ?", [round % 17])
                    .expect("delete");
            }
            if round % 13 == 0 {
                writer
                    .execute("UPDATE items SET body = body || 'u' WHERE id % 5 = 0", [])
                    .expect("update");
            }
            match round % 50 {
                10 => reader.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())),
                20 => writer.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())),
                30 => writer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())),
                _ => Ok(()),
            }
            .expect("checkpoint");
            if round % 25 == 0 {
                assert_eq!(summary(&reader), summary(&writer), "round {round}");
                assert_eq!(
                    summary(&recovered_copy(&scratch, &path)),
                    summary(&writer),
                    "recovered at round {round}"
                );
            }
        }
        assert_eq!(integrity(&writer), "ok");
        assert_eq!(integrity(&reader), "ok");
        assert_eq!(summary(&reader), summary(&writer));
    }

    #[test]
    fn a_rolled_back_spill_never_lands_on_later_commits() {
        let scratch = Scratch::new("rollback");
        let path = scratch.file("state.sqlite");
        let shim = open_shim(&path, "FULL");
        shim.query_row("PRAGMA wal_autocheckpoint = 0", [], |_| Ok(()))
            .expect("no checkpoints");
        shim.pragma_update(None, "cache_size", 10)
            .expect("tiny cache");
        insert_rows(&shim, 1, 50, 300);
        let other = open_plain(&path);

        for round in 0..5_i64 {
            // An empty log, so that undoing the transaction reads nothing back from it.
            shim.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .expect("checkpoint");
            // A transaction whose frames are spilled (partly still held back), then dropped.
            let tx = shim.unchecked_transaction().expect("begin");
            for id in 0..(300 + round * 50) {
                tx.execute(
                    "INSERT INTO items(id, tag, body) VALUES (?, 'gone', ?)",
                    params![100_000 + id, body(id, 900)],
                )
                .expect("insert");
            }
            tx.rollback().expect("rollback");
            // Another connection commits more frames than those, over where they were.
            let first = 1000 * (round + 1);
            insert_rows(&other, first, 600, 900);
            // The shim's connection reads (and writes) again.
            assert_eq!(
                shim.query_row("SELECT count(*) FROM items WHERE tag = 'gone'", [], |row| {
                    row.get::<_, i64>(0)
                })
                .expect("read"),
                0
            );
            insert_rows(&shim, first + 700, 3, 100);
            assert_eq!(summary(&other), summary(&shim), "round {round}");
        }
        let copy = recovered_copy(&scratch, &path);
        assert_eq!(summary(&copy), summary(&other));
        assert_eq!(integrity(&copy), "ok");
        assert_eq!(integrity(&other), "ok");
    }

    #[test]
    fn switching_journal_modes_closes_and_reopens_the_wal() {
        let scratch = Scratch::new("modes");
        let path = scratch.file("state.sqlite");
        let conn = open_shim(&path, "FULL");
        for round in 0..4 {
            insert_rows(&conn, 1 + round * 100, 20, 500);
            let mode: String = conn
                .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
                .expect("delete mode");
            assert_eq!(mode, "delete");
            insert_rows(&conn, 50 + round * 100, 20, 500);
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
                .expect("wal mode");
            assert_eq!(mode, "wal");
        }
        drop(conn);
        let reader = open_plain(&path);
        assert_eq!(summary(&reader).0, 160);
        assert_eq!(integrity(&reader), "ok");
    }

    #[test]
    fn connections_on_many_threads_share_one_registration() {
        let scratch = Scratch::new("threads");
        let path = scratch.file("state.sqlite");
        drop(open_shim(&path, "FULL"));
        let workers: Vec<_> = (0..4_i64)
            .map(|worker| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let conn = open_shim(&path, "NORMAL");
                    for round in 0..40 {
                        insert_rows(&conn, worker * 10_000 + round * 10, 5, 700);
                    }
                    assert_no_commit_published_unwritten();
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("worker");
        }
        let reader = open_plain(&path);
        assert_eq!(summary(&reader).0, 4 * 40 * 5);
        assert_eq!(integrity(&reader), "ok");
    }
}
