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
//!   control, locks, close…), first writes the buffer out. Reads of spilled (not yet committed)
//!   frames thus see their bytes. Appends are held back only while the connection holds the
//!   WAL write lock through the wal-index (never in `locking_mode=EXCLUSIVE`'s heap mode).
//! - A failed flush is returned by the method that flushed, the buffer is dropped, and every
//!   later WAL write fails with that error until the write lock is released: a transaction can
//!   only commit if every frame before its commit frame made it to the file, and nothing of a
//!   rejected one (its commit frame above all) is ever written after SQLite saw it fail. Plain
//!   SQLite leaves the same bytes behind: whatever its successful writes stored.
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
//! The argument is checked by `fault_sweep_tests` (crate root): every write, sync, truncate and
//! lock of representative store operations fails in turn under the shim, stacked on the fault
//! VFS of `faults`, then the files are copied as a crash leaves them and reopened — with the same
//! outcome as plain unix under the same faults.
//!
//! The buffer is capped (`wal_appends::BUFFER_LIMIT`, 128 KiB) so a huge transaction holds bounded memory
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

#[cfg(test)]
pub mod faults;
#[cfg(test)]
mod tests;
mod wal_appends;

use wal_appends::WalAppends;
#[cfg(test)]
use wal_appends::{count_published_unwritten, count_wal_write};

/// The name the shim is registered under.
pub const NAME: &CStr = c"piw-wal-append";

/// The wal-index lock slot of the WAL write lock (`WAL_WRITE_LOCK` in wal.c).
const WAL_WRITE_LOCK: c_int = 0;

/// Registers the shim the first time it is asked for (thread-safe) and returns its name, or
/// `None` when SQLite has no VFS to wrap or refused it (the caller then opens with the default).
pub fn name() -> Option<&'static CStr> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    REGISTERED
        .get_or_init(|| register_over(c"unix", NAME))
        .then_some(NAME)
}

/// The VFS a state database opens with: the shim, or (in tests) what [`use_for_thread`] chose.
/// `PIW_WAL_SHIM=off` in the environment opens with SQLite's default VFS instead, so that the
/// benchmarks can measure what the shim buys (`npm run bench:durability`).
pub fn for_connection() -> Option<&'static CStr> {
    #[cfg(test)]
    if let Some(chosen) = CHOSEN.with(|chosen| chosen.get()) {
        return chosen;
    }
    static OFF: OnceLock<bool> = OnceLock::new();
    if *OFF.get_or_init(|| std::env::var_os("PIW_WAL_SHIM").is_some_and(|value| value == "off")) {
        return None;
    }
    name()
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

/// Registers the shim as `name` over the VFS `real_name` (SQLite's default if there is no such
/// VFS); whether that worked.
fn register_over(real_name: &CStr, name: &'static CStr) -> bool {
    // SAFETY: sqlite3_vfs_find only reads SQLite's VFS list (initialising SQLite if needed); the
    // VFS it returns lives as long as the process (registered VFSes are never freed here).
    let real = unsafe {
        let named = ffi::sqlite3_vfs_find(real_name.as_ptr());
        if named.is_null() {
            ffi::sqlite3_vfs_find(ptr::null())
        } else {
            named
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
        zName: name.as_ptr(),
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
    Database { wal: *mut ShimFile },
    /// A WAL file: its held-back appends, and the database file it belongs to (null once
    /// either is closed).
    Wal {
        appends: WalAppends,
        database: *mut ShimFile,
    },
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
            Role::Wal { appends, .. } => appends.flush(self.real),
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
        if let Role::Wal { appends, .. } = &mut self.role {
            action(appends, real);
        }
    }

    /// The database file of this WAL file closed first: write out, stop holding anything
    /// back, and forget the link.
    fn unlink_database(&mut self) {
        let real = self.real;
        if let Role::Wal { appends, database } = &mut self.role {
            appends.unlink(real);
            *database = ptr::null_mut();
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
        unsafe { link_wal(name, shim) }
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
unsafe fn link_wal(name: ffi::sqlite3_filename, wal_file: *mut ShimFile) -> Role {
    let mut appends = WalAppends {
        coalesce: false,
        buffer: Vec::new(),
        start: 0,
        commit_page_next: false,
        holds_commit: false,
        write_locked: false,
        failed: ffi::SQLITE_OK,
    };
    if name.is_null() {
        return Role::Wal {
            appends,
            database: ptr::null_mut(),
        };
    }
    // SAFETY: for a WAL name from the pager, this returns the pager's database file object.
    let database = unsafe { ffi::sqlite3_database_file_object(name) };
    // SAFETY: `database` is null or the pager's open database file.
    if !unsafe { is_shim_file(database) } {
        return Role::Wal {
            appends,
            database: ptr::null_mut(),
        };
    }
    // SAFETY: it is a shim file (checked), open, and used by this same connection only.
    let database = unsafe { shim(database) };
    let Role::Database { wal } = &mut database.role else {
        return Role::Wal {
            appends,
            database: ptr::null_mut(),
        };
    };
    if !wal.is_null() {
        return Role::Wal {
            appends,
            database: ptr::null_mut(),
        };
    }
    *wal = wal_file;
    let characteristics = forward!(database, xDeviceCharacteristics, 0);
    appends.coalesce = characteristics & ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0;
    Role::Wal {
        appends,
        database: ptr::from_mut(database),
    }
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
        let Role::Wal { appends, .. } = &mut file.role else {
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
            wal.unlink_database();
        }
        if let Role::Wal { database, .. } = &mut file.role {
            // SAFETY: a linked database file is open (its close clears this link) and used by
            // this connection only.
            if let Some(database) = unsafe { database.as_mut() } {
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
        let rc = match file.flush() {
            ffi::SQLITE_OK => forward!(
                file,
                xShmLock,
                ffi::SQLITE_IOERR_SHMLOCK,
                offset,
                count,
                flags
            ),
            rc => rc,
        };
        let takes_write_lock = flags == ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_EXCLUSIVE
            && offset <= WAL_WRITE_LOCK
            && WAL_WRITE_LOCK < offset + count;
        if takes_write_lock && rc == ffi::SQLITE_OK {
            if let Some(wal) = file.wal_file() {
                wal.with_appends(|appends, _| appends.write_locked = true);
            }
        }
        rc
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
