//! The held-back appends of one WAL file: when a write may wait in the buffer and when the
//! buffer must reach the file (the rules are in the parent module's header).

use std::ffi::c_int;

use rusqlite::ffi;

/// The most bytes held back before they are written out: the largest write the unix VFS takes
/// (`seekAndWriteFd` masks a write's size to 17 bits). A commit of up to 31 frames of 4 KiB
/// pages fits in one write; a larger one costs one more write per 31 frames.
const BUFFER_LIMIT: usize = 0x1ffff;
/// The size of a WAL frame header; SQLite writes nothing else of this size to a WAL file.
const FRAME_HEADER_BYTES: usize = 24;

/// The held-back appends of one WAL file.
pub(super) struct WalAppends {
    /// Whether appends are gathered at all (see the module comment on padding).
    pub(super) coalesce: bool,
    pub(super) buffer: Vec<u8>,
    /// The file offset of `buffer[0]`.
    pub(super) start: i64,
    /// A commit frame's header was written: its page, the next write, must not be held back.
    pub(super) commit_page_next: bool,
    /// The buffer holds a commit frame's header.
    pub(super) holds_commit: bool,
    /// This connection holds the WAL write lock (taken through the wal-index): appends are held
    /// back only then, so that releasing it always ends what was held (see [`Self::release`]).
    pub(super) write_locked: bool,
    /// The error of a held-back write that failed after SQLite was told it succeeded: the
    /// transaction can no longer commit whole, so every later write fails with it until the
    /// write lock is released (`SQLITE_OK`: none).
    pub(super) failed: c_int,
}

#[cfg(test)]
thread_local! {
    /// Writes SQLite asked of WAL files and writes that reached the real files, on this thread.
    static WAL_WRITES: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

#[cfg(test)]
thread_local! {
    /// Times a wal-index barrier (a commit being published) found a commit frame held back.
    pub(super) static PUBLISHED_UNWRITTEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
pub(super) fn count_published_unwritten() {
    PUBLISHED_UNWRITTEN.with(|count| count.set(count.get() + 1));
}

/// (requested, real) WAL writes on this thread so far.
#[cfg(test)]
pub(super) fn wal_writes() -> (u64, u64) {
    WAL_WRITES.with(|counts| counts.get())
}

#[cfg(test)]
pub(super) fn count_wal_write(real: bool) {
    WAL_WRITES.with(|counts| {
        let (requested, written) = counts.get();
        counts.set(if real {
            (requested, written + 1)
        } else {
            (requested + 1, written)
        });
    });
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
    pub(super) fn end(&self) -> i64 {
        self.start + self.buffer.len() as i64
    }

    /// Writes the buffer out with one write. The buffer is dropped whether that worked or not:
    /// a failed write is never retried, since what it held (a commit frame, perhaps) was
    /// rejected and must never reach the file later.
    pub(super) fn flush(&mut self, real: *mut ffi::sqlite3_file) -> c_int {
        if self.buffer.is_empty() {
            return ffi::SQLITE_OK;
        }
        let rc = write_real(real, &self.buffer, self.start);
        self.buffer.clear();
        self.holds_commit = false;
        if rc != ffi::SQLITE_OK {
            self.commit_page_next = false;
            self.failed = rc;
        }
        rc
    }

    /// Adds `data` at `offset` to the buffer if it fits (the caller checked it continues it).
    pub(super) fn append(&mut self, data: &[u8], offset: i64) -> bool {
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

    pub(super) fn flush_then_write(
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
    pub(super) fn write(
        &mut self,
        real: *mut ffi::sqlite3_file,
        data: &[u8],
        offset: i64,
    ) -> c_int {
        if self.failed != ffi::SQLITE_OK {
            return self.failed;
        }
        if !self.coalesce || !self.write_locked {
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

    /// The write lock is being released: what is still held back belongs to no commit (SQLite
    /// was told it was written, so it is, while the lock is held), and a failed write's
    /// refusal ends with the transaction it failed.
    pub(super) fn release(&mut self, real: *mut ffi::sqlite3_file) {
        let _ = self.flush(real);
        self.buffer.clear();
        self.commit_page_next = false;
        self.holds_commit = false;
        self.write_locked = false;
        self.failed = ffi::SQLITE_OK;
    }

    /// The database file closed first: write out and stop holding anything back.
    pub(super) fn unlink(&mut self, real: *mut ffi::sqlite3_file) {
        self.release(real);
        self.coalesce = false;
    }
}
