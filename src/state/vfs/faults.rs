//! A test VFS over "unix" that fails the N-th write, sync, truncate or lock of this thread with
//! an I/O error or a full disk, the way SQLite's own test suite injects faults (test_vfs.c,
//! test_devsym.c).
//!
//! Faults are planned per thread ([`arm`], [`disarm`]): SQLite calls a connection's VFS on the
//! thread that steps it, and cargo runs each test on its own thread.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::mem::size_of;
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name of the fault VFS (plain SQLite with faults).
pub const NAME: &CStr = c"piw-faults";

/// The file operations a fault can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// `xWrite` of any file.
    Write,
    /// `xSync` of any file.
    Sync,
    /// `xTruncate` of any file.
    Truncate,
    /// `xLock` (file locks) and `xShmLock` acquiring a wal-index lock.
    Lock,
}

/// What the failing call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// EIO: nothing happens, the method's `SQLITE_IOERR_*` code.
    Eio,
    /// ENOSPC: a write stores its first half, then `SQLITE_FULL` (what unix reports for a short
    /// write); other points fail as with EIO (unix maps ENOSPC of fsync/ftruncate so too).
    Enospc,
}

pub const POINTS: [Point; 4] = [Point::Write, Point::Sync, Point::Truncate, Point::Lock];
pub const KINDS: [Kind; 2] = [Kind::Eio, Kind::Enospc];

#[derive(Clone, Copy)]
struct Plan {
    /// Calls seen per point since the last [`arm`] / [`count`].
    seen: [u64; 4],
    /// Fail the n-th call (1-based) of this point, once.
    target: Option<(Point, u64, Kind)>,
    fired: bool,
    /// Calls are neither counted nor failed (see [`paused`]).
    paused: bool,
}

thread_local! {
    static PLAN: Cell<Plan> = const { Cell::new(Plan { seen: [0; 4], target: None, fired: false, paused: false }) };
}

/// Starts counting calls afresh, failing the `n`-th call of `point` with `kind`.
pub fn arm(point: Point, n: u64, kind: Kind) {
    PLAN.with(|plan| {
        plan.set(Plan {
            seen: [0; 4],
            target: Some((point, n, kind)),
            fired: false,
            paused: false,
        })
    });
}

thread_local! {
    static NEXT_PRUNE: Cell<Option<(Point, u64, Kind)>> = const { Cell::new(None) };
}

/// Makes the next read-write open on this thread fail the `n`-th call of `point` with `kind`
/// in its blob prune, which runs on a thread of its own (`prune::at_open`: that thread [`arm`]s
/// it). The opening thread's own calls are not failed.
pub fn arm_next_prune(point: Point, n: u64, kind: Kind) {
    NEXT_PRUNE.with(|next| next.set(Some((point, n, kind))));
}

/// The fault [`arm_next_prune`] planned, taken by the open that starts a prune.
pub fn take_next_prune() -> Option<(Point, u64, Kind)> {
    NEXT_PRUNE.with(|next| next.take())
}

/// Starts counting calls afresh, failing none.
pub fn count() {
    PLAN.with(|plan| {
        plan.set(Plan {
            seen: [0; 4],
            target: None,
            fired: false,
            paused: false,
        })
    });
}

/// Stops failing calls; returns whether the armed fault fired.
pub fn disarm() -> bool {
    PLAN.with(|plan| {
        let mut current = plan.get();
        current.target = None;
        plan.set(current);
        current.fired
    })
}

/// Runs `body` without counting or failing its calls (a check between the calls under test).
pub fn paused<T>(body: impl FnOnce() -> T) -> T {
    let set = |paused| {
        PLAN.with(|plan| {
            let mut current = plan.get();
            current.paused = paused;
            plan.set(current);
        })
    };
    set(true);
    let value = body();
    set(false);
    value
}

/// Calls of `point` seen since the last [`arm`] / [`count`].
pub fn seen(point: Point) -> u64 {
    PLAN.with(|plan| plan.get().seen[point as usize])
}

/// Counts a call of `point`; the fault kind if this is the one to fail.
fn hit(point: Point) -> Option<Kind> {
    PLAN.with(|plan| {
        let mut current = plan.get();
        if current.paused {
            return None;
        }
        current.seen[point as usize] += 1;
        let fails = match current.target {
            Some((target, n, kind)) if target == point && n == current.seen[point as usize] => {
                current.fired = true;
                Some(kind)
            }
            _ => None,
        };
        plan.set(current);
        fails
    })
}

/// Registers the fault VFS (over "unix") the first time; returns its name.
pub fn name() -> &'static CStr {
    registered();
    NAME
}

fn registered() {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // SAFETY: looking up a registered VFS; the unix VFS lives for the process.
        let unix = unsafe { ffi::sqlite3_vfs_find(c"unix".as_ptr()) };
        assert!(!unix.is_null(), "the unix VFS");
        // SAFETY: `unix` is live; only plain fields are read.
        let (version, size, max_path) =
            unsafe { ((*unix).iVersion, (*unix).szOsFile, (*unix).mxPathname) };
        let mut vfs = Box::new(
            // SAFETY: copying the unix VFS's method table; the copy forwards to it.
            unsafe { ptr::read(unix) },
        );
        vfs.iVersion = version;
        vfs.szOsFile = (REAL_OFFSET + size as usize) as c_int;
        vfs.mxPathname = max_path;
        vfs.pNext = ptr::null_mut();
        vfs.zName = NAME.as_ptr();
        vfs.pAppData = unix.cast();
        vfs.xOpen = Some(x_open);
        // SAFETY: a complete VFS that is never freed.
        let rc = unsafe { ffi::sqlite3_vfs_register(Box::into_raw(vfs), 0) };
        assert_eq!(rc, ffi::SQLITE_OK, "register the fault VFS");
    });
}

#[repr(C)]
struct FaultFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
}

const REAL_OFFSET: usize = size_of::<FaultFile>().next_multiple_of(16);

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes szOsFile (REAL_OFFSET + unix's szOsFile) writable bytes, 8-byte
    // aligned, so unix's file object fits at REAL_OFFSET; pMethods is set only once the real
    // open succeeded (a failed open must leave it NULL).
    unsafe {
        let unix = (*vfs).pAppData.cast::<ffi::sqlite3_vfs>();
        let real = file
            .cast::<u8>()
            .add(REAL_OFFSET)
            .cast::<ffi::sqlite3_file>();
        (*file).pMethods = ptr::null();
        (*real).pMethods = ptr::null();
        let rc = ((*unix).xOpen.expect("xOpen"))(unix, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            if !(*real).pMethods.is_null() {
                ((*(*real).pMethods).xClose.expect("xClose"))(real);
            }
            return rc;
        }
        let fault = file.cast::<FaultFile>();
        (*fault).real = real;
        (*file).pMethods = &METHODS;
        ffi::SQLITE_OK
    }
}

/// The real file and its methods behind a fault file.
///
/// # Safety
/// `file` was opened by [`x_open`] and is not closed.
unsafe fn real(
    file: *mut ffi::sqlite3_file,
) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    // SAFETY: per the contract; the unix method table is static.
    unsafe {
        let real = (*file.cast::<FaultFile>()).real;
        (real, &*(*real).pMethods)
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
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
};

/// Defines a method that forwards to the real file unchanged.
macro_rules! forwarding {
    ($name:ident, $method:ident, $ret:ty, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            // SAFETY: SQLite calls methods of files opened by x_open; unix has every method.
            unsafe {
                let (real, methods) = real(file);
                (methods.$method.expect(stringify!($method)))(real $(, $arg)*)
            }
        }
    };
}

forwarding!(x_read, xRead, c_int, (buffer: *mut c_void, amount: c_int, offset: i64));
forwarding!(x_file_size, xFileSize, c_int, (size: *mut i64));
forwarding!(x_unlock, xUnlock, c_int, (level: c_int));
forwarding!(x_check_reserved_lock, xCheckReservedLock, c_int, (out: *mut c_int));
forwarding!(x_file_control, xFileControl, c_int, (op: c_int, arg: *mut c_void));
forwarding!(x_sector_size, xSectorSize, c_int, ());
forwarding!(x_device_characteristics, xDeviceCharacteristics, c_int, ());
forwarding!(x_shm_map, xShmMap, c_int, (page: c_int, page_size: c_int, extend: c_int, out: *mut *mut c_void));
forwarding!(x_shm_barrier, xShmBarrier, (), ());
forwarding!(x_shm_unmap, xShmUnmap, c_int, (delete: c_int));
forwarding!(x_fetch, xFetch, c_int, (offset: i64, amount: c_int, out: *mut *mut c_void));
forwarding!(x_unfetch, xUnfetch, c_int, (offset: i64, page: *mut c_void));

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file opened by x_open once.
    unsafe {
        let (real, methods) = real(file);
        let rc = (methods.xClose.expect("xClose"))(real);
        (*file).pMethods = ptr::null();
        rc
    }
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: forwarding SQLite's arguments (or a prefix of its buffer) to the real file.
    unsafe {
        let (real, methods) = real(file);
        let write = methods.xWrite.expect("xWrite");
        match hit(Point::Write) {
            None => write(real, data, amount, offset),
            Some(Kind::Eio) => ffi::SQLITE_IOERR_WRITE,
            Some(Kind::Enospc) => {
                if amount / 2 > 0 {
                    write(real, data, amount / 2, offset);
                }
                ffi::SQLITE_FULL
            }
        }
    }
}

/// A sync that does not fail succeeds without reaching the disk: the crashes simulated over this
/// VFS are process crashes (the files copied as they are), for which a sync changes nothing,
/// and thousands of fsyncs would make the sweep wait on the disk.
unsafe extern "C" fn x_sync(_file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    if hit(Point::Sync).is_some() {
        return ffi::SQLITE_IOERR_FSYNC;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    if hit(Point::Truncate).is_some() {
        return ffi::SQLITE_IOERR_TRUNCATE;
    }
    // SAFETY: forwarding to the real file.
    unsafe {
        let (real, methods) = real(file);
        (methods.xTruncate.expect("xTruncate"))(real, size)
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    if hit(Point::Lock).is_some() {
        return ffi::SQLITE_IOERR_LOCK;
    }
    // SAFETY: forwarding to the real file.
    unsafe {
        let (real, methods) = real(file);
        (methods.xLock.expect("xLock"))(real, level)
    }
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    count: c_int,
    flags: c_int,
) -> c_int {
    // Releases are never failed: unix does not fail them, and SQLite ignores their result.
    if flags & ffi::SQLITE_SHM_LOCK != 0 && hit(Point::Lock).is_some() {
        return ffi::SQLITE_IOERR_SHMLOCK;
    }
    // SAFETY: forwarding to the real file.
    unsafe {
        let (real, methods) = real(file);
        (methods.xShmLock.expect("xShmLock"))(real, offset, count, flags)
    }
}
