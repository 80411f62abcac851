//! The change journal beside the state file (`<state file>-runlog`): for each commit a native
//! connection made, which runs it may have changed, so that every other process's run index
//! catches up on it by re-reading those runs instead of rebuilding.
//!
//! Commits are numbered by the WAL index's own commit counter (`iChange` of SQLite's
//! wal-index header, which every commit of any connection moves by exactly one), so a commit
//! the journal does not hold — another application's, the TypeScript store's — is a gap a
//! reader sees, never a change it misses. Each commit owns slot `commit % SLOTS`; an entry is
//! written with one positioned write after its commit is durable, and carries a checksum, so a
//! torn slot, or one of another journal or file, reads as missing. Entries also name the WAL
//! position (frame and salt) they start from and end at, which the reader checks, exactly,
//! against the one before (see `run_index::catch_up` and docs/run-index.md, "What a reader
//! believes"): an entry of an earlier session of the file does not chain.
//!
//! A commit is visible to other connections a moment before its writer's WAL hook writes its
//! entry. So that a reader polling in that moment does not take it for a gap (and rebuild), the
//! writer first marks the slot "in flight" while it still holds the write lock; a reader that
//! finds the mark waits a little for the entry (`Journal::settled`). A mark is never read as an
//! entry: one left by a failed or killed writer only makes the reader wait, then see a gap.
//!
//! Nothing here is part of the database: the journal can be deleted at any time (readers then
//! rebuild once), and a file without one is read as before. Which file may serve as the
//! journal is `journal_file`'s to say; a slot's bytes are `slot`'s.

mod slot;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::file_io::{read_at, write_at};
use super::identity::StateFile;
use super::journal_file::{self, HEADER};
use super::position::WalPosition;
use slot::{decode, decode_mark, encode, encode_mark, encode_slot, Binding, IN_FLIGHT, MARK, SLOT};
pub use slot::{BlobMark, Entry, Images, Key, Slot};

/// Slots in the file: how many commits a reader may fall behind before it must rebuild.
pub const SLOTS: u64 = 4096;
/// The journal file's length: its header and every slot.
const FILE_BYTES: u64 = HEADER + SLOTS * SLOT as u64;

/// The journal of one state file, opened when first needed (see `journal_file` for which file
/// that may be).
pub struct Journal {
    path: PathBuf,
    /// The state file this connection has open; `None`: it could not be identified, and no
    /// journal is used.
    state: Option<StateFile>,
    writable: bool,
    handle: Mutex<Handle>,
    /// The read-ahead's buffer, kept between catch-ups: a fresh zeroed one per poll was a
    /// fifth of a catch-up's instructions.
    read_buffer: Mutex<Vec<u8>>,
}

enum Handle {
    /// Not open (yet, or again after another process replaced it).
    Closed,
    Open(journal_file::Trusted),
    /// The file at the journal's name is not ours or not private: never touched again.
    Refused(String),
}

impl Journal {
    /// The journal of the state file at `state_file`, which the connection has open as
    /// `state`; `writable` for a read-write connection (it makes and replaces the journal).
    pub fn new(state_file: &Path, state: Option<StateFile>, writable: bool) -> Journal {
        let mut path = state_file.as_os_str().to_owned();
        path.push("-runlog");
        Journal {
            path: PathBuf::from(path),
            state,
            writable,
            handle: Mutex::new(Handle::Closed),
            read_buffer: Mutex::default(),
        }
    }

    /// Opens the journal now (a writer makes it when there is none); why it is refused, if it
    /// is: the file at its name is not ours or not private.
    pub fn open_now(&self) -> Option<String> {
        let _ = self.with_file(|_, _| Ok(()));
        self.refusal()
    }

    /// Why the file at the journal's name was refused, if it was.
    pub fn refusal(&self) -> Option<String> {
        match &*self.lock() {
            Handle::Refused(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Writes `entry` into its slot. A journal that cannot be written is left alone: readers
    /// elsewhere then see a gap and rebuild.
    pub fn append(&self, entry: &Entry) {
        if !self.writable {
            return;
        }
        let _ = self.with_named_file(|file, binding| {
            write_at(file, &encode(entry, binding), offset(entry.commit))
        });
    }

    /// Marks the slot of the commit that starts from `base` in flight (its writer holds the
    /// write lock and is about to commit).
    pub fn announce(&self, base: &WalPosition) {
        if !self.writable {
            return;
        }
        let commit = base.commit.wrapping_add(1);
        let _ = self.with_named_file(|file, binding| {
            let slot = encode_slot(commit, base, 0, None, IN_FLIGHT, &[], binding);
            write_at(file, &slot, offset(commit))
        });
    }

    /// The commit `commit` announced did not happen (its transaction rolled back): clears the
    /// mark, unless the slot already holds something else.
    pub fn withdraw(&self, commit: u32) {
        if self.writable && self.read(commit) == Some(Slot::InFlight) {
            let _ = self.with_file(|file, _| write_at(file, &[0u8; SLOT], offset(commit)));
        }
    }

    /// What the slot of commit `commit` holds for it, if anything whole.
    pub fn read(&self, commit: u32) -> Option<Slot> {
        let mut slot = [0u8; SLOT];
        let binding = self
            .with_file(|file, binding| read_at(file, &mut slot, offset(commit)).map(|()| binding))
            .ok()?;
        decode(&slot, commit, binding)
    }

    /// What the slots of commits `first`, `first + 1`, … hold for them, `count` of them (at
    /// most `SLOTS`), in one or two reads.
    pub fn read_ahead(&self, first: u32, count: u32) -> Vec<Option<Slot>> {
        let count = count.min(SLOTS as u32);
        let mut buffer = self.read_buffer.lock().unwrap_or_else(|p| p.into_inner());
        let length = count as usize * SLOT;
        if buffer.len() < length {
            buffer.resize(length, 0);
        }
        let bytes = &mut buffer[..length];
        let head = (count as u64).min(SLOTS - u64::from(first) % SLOTS) as usize * SLOT;
        let read = self.with_file(|file, binding| {
            read_at(file, &mut bytes[..head], offset(first))?;
            read_at(file, &mut bytes[head..], HEADER)?;
            Ok(binding)
        });
        let Ok(binding) = read else {
            return vec![None; count as usize];
        };
        bytes
            .chunks_exact(SLOT)
            .zip(0..count)
            .map(|(slot, at)| {
                decode(
                    slot.try_into().expect("a slot"),
                    first.wrapping_add(at),
                    binding,
                )
            })
            .collect()
    }

    /// The entry of commit `commit`, waiting until `deadline` while its writer is in flight.
    /// Once the mark was seen, a slot that does not read whole is the writer's entry being
    /// written over it: read again.
    pub fn settled(&self, commit: u32, deadline: Instant) -> Option<Entry> {
        let mut pause = Duration::from_micros(20);
        let mut marked = false;
        loop {
            match self.read(commit) {
                Some(Slot::Written(entry)) => return Some(entry),
                None if !marked => return None,
                _ if Instant::now() >= deadline => return None,
                slot => {
                    marked |= slot.is_some();
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(1));
                }
            }
        }
    }

    /// Records that the file had no unreferenced blob at `mark` (in the header's spare bytes;
    /// older builds ignore them). The caller holds the write lock, so no commit comes between.
    pub fn set_blob_mark(&self, mark: &BlobMark) {
        if !self.writable {
            return;
        }
        let _ = self
            .with_named_file(|file, binding| write_at(file, &encode_mark(mark, binding), MARK_AT));
    }

    /// Takes the [`BlobMark`] away: what it proved no longer holds.
    pub fn clear_blob_mark(&self) {
        if self.writable && self.blob_mark().is_some() {
            let _ = self.with_named_file(|file, _| write_at(file, &[0u8; MARK], MARK_AT));
        }
    }

    /// Leaves a close stamp (the file's last connection closed it clean, see `clean_proof`)
    /// and shortens the file to its header: the slots describe a WAL that is gone. Whether it
    /// was written.
    pub fn stamp_closed(&self, stamp: &BlobMark) -> bool {
        if !self.writable {
            return false;
        }
        let stamped = self.with_named_file(|file, binding| {
            write_at(file, &encode_mark(stamp, binding), MARK_AT)?;
            file.set_len(HEADER)
        });
        stamped.is_ok()
    }

    /// The last [`BlobMark`] a writer recorded, if it reads whole.
    pub fn blob_mark(&self) -> Option<BlobMark> {
        let mut bytes = [0u8; MARK];
        let binding = self
            .with_file(|file, binding| read_at(file, &mut bytes, MARK_AT).map(|()| binding))
            .ok()?;
        decode_mark(&bytes, binding)
    }

    /// A catch-up found a gap: if another process replaced the journal since it was opened,
    /// the next use opens the one now at its name.
    pub fn recheck(&self) {
        let mut handle = self.lock();
        if matches!(&*handle, Handle::Open(open) if !journal_file::still_named(&open.file)) {
            *handle = Handle::Closed;
        }
    }

    /// Deletes the journal file if it is still this connection's (see `RunIndex::closed`).
    pub fn remove(&self) {
        if !self.writable {
            return;
        }
        let mut handle = self.lock();
        if let Handle::Open(open) = &*handle {
            journal_file::remove(&self.path, &open.file);
        }
        if !matches!(&*handle, Handle::Refused(_)) {
            *handle = Handle::Closed;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Handle> {
        self.handle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `operation` on the journal's file and what its slots are bound to, opening it
    /// first if need be.
    fn with_file<T>(
        &self,
        operation: impl FnOnce(&File, Binding) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut handle = self.lock();
        if matches!(&*handle, Handle::Closed) {
            let Some(state) = &self.state else {
                return Err(io::ErrorKind::NotFound.into());
            };
            match journal_file::open(&self.path, state, self.writable, FILE_BYTES) {
                journal_file::Opened::Trusted(trusted) => *handle = Handle::Open(trusted),
                journal_file::Opened::Unusable => return Err(io::ErrorKind::NotFound.into()),
                journal_file::Opened::Refused(reason) => *handle = Handle::Refused(reason),
            }
        }
        match (&*handle, &self.state) {
            (Handle::Open(open), Some(state)) => operation(
                &open.file,
                Binding {
                    file: state.id,
                    journal: open.identity,
                },
            ),
            _ => Err(io::ErrorKind::PermissionDenied.into()),
        }
    }

    /// As `with_file`, for a write: a journal another process replaced is not written, the
    /// one at its name is opened instead.
    fn with_named_file<T>(
        &self,
        operation: impl FnOnce(&File, Binding) -> io::Result<T>,
    ) -> io::Result<T> {
        self.recheck();
        self.with_file(operation)
    }
}

/// Where the header keeps the [`BlobMark`]: its last bytes, which `journal_file` leaves zero.
const MARK_AT: u64 = HEADER - MARK as u64;

fn offset(commit: u32) -> u64 {
    HEADER + (u64::from(commit) % SLOTS) * SLOT as u64
}

#[cfg(test)]
mod tests {
    use super::slot::KEYS_AT;
    use super::*;
    use crate::test_support::Scratch;

    pub(super) fn entry(commit: u32, keys: Option<Vec<Key>>) -> Entry {
        Entry {
            commit,
            base: WalPosition {
                commit: commit - 1,
                frames: 7,
                salt: [3, 4],
            },
            after_frames: 9,
            after_salt: commit.is_multiple_of(2).then_some([5, 6]),
            keys,
            images: None,
            blobs_clean: None,
        }
    }

    /// A new state file at `path`: its identity as a connection would find it.
    #[cfg(unix)]
    fn state_file(path: &Path) -> StateFile {
        use std::os::unix::fs::MetadataExt;
        let staged = path.with_extension("new");
        std::fs::write(&staged, b"").unwrap();
        std::fs::rename(&staged, path).unwrap();
        let metadata = std::fs::metadata(path).unwrap();
        StateFile {
            id: super::super::file_io::fnv(&[
                &metadata.dev().to_le_bytes(),
                &metadata.ino().to_le_bytes(),
            ]),
            uid: metadata.uid(),
            mode: 0o600,
        }
    }

    #[cfg(unix)]
    #[test]
    fn entries_read_back_whole_and_only_for_their_own_commit_and_file() {
        let scratch = Scratch::new("runlog");
        let path = scratch.file("state.sqlite");
        let state = state_file(&path);
        let reader = Journal::new(&path, Some(state), false);
        assert_eq!(reader.read(1), None, "no journal yet");
        let writer = Journal::new(&path, Some(state), true);
        let keys = vec![
            Key::Run(-5),
            Key::RunId(Box::from(&b"run-1"[..])),
            Key::ResourceId(Box::from(&b""[..])),
            Key::DefinitionAdded,
            Key::BlobChanged,
        ];
        writer.append(&entry(12, Some(keys.clone())));
        writer.append(&entry(13, None));
        let reader = Journal::new(&path, Some(state), false);
        assert_eq!(reader.read(12), Some(Slot::Written(entry(12, Some(keys)))));
        assert_eq!(reader.read(13), Some(Slot::Written(entry(13, None))));
        // The same slot, another commit: missing, not the other commit's entry.
        assert_eq!(reader.read(12 + SLOTS as u32), None);
        // Too many keys for a slot: the entry says a rebuild is due.
        let many = (0..200).map(Key::Run).collect();
        writer.append(&entry(14, Some(many)));
        assert_eq!(reader.read(14), Some(Slot::Written(entry(14, None))));
        // A torn slot reads as missing.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&reader.path)
            .unwrap();
        write_at(&file, &[0xff], offset(12) + KEYS_AT as u64).unwrap();
        assert_eq!(reader.read(12), None);
        // Another file under the same name (a copy renamed over it): a reader does not use the
        // journal of the first.
        let keep = scratch.file("kept-open");
        std::fs::hard_link(&path, &keep).unwrap();
        let other = state_file(&path);
        assert_ne!(other.id, state.id);
        assert_eq!(Journal::new(&path, Some(other), false).read(13), None);
        // Its writer replaces it; the first file's connections see theirs go.
        let replacing = Journal::new(&path, Some(other), true);
        assert_eq!(replacing.open_now(), None);
        assert_eq!(replacing.read(13), None);
        assert_eq!(writer.read(13), Some(Slot::Written(entry(13, None))));
        writer.recheck();
        assert_eq!(writer.read(13), None, "the first file's journal is gone");
        assert_eq!(Journal::new(&path, None, true).open_now(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_commit_in_flight_is_waited_for_and_never_read_as_an_entry() {
        let scratch = Scratch::new("runlog-in-flight");
        let path = scratch.file("state.sqlite");
        let state = Some(state_file(&path));
        let writer = Journal::new(&path, state, true);
        let reader = Journal::new(&path, state, false);
        let written = entry(21, Some(vec![Key::Run(3)]));
        writer.announce(&written.base);
        assert_eq!(reader.read(21), Some(Slot::InFlight));
        // Past its deadline, a mark is no entry.
        assert_eq!(reader.settled(21, Instant::now()), None);
        // The entry written while a reader waits is the one it gets.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(5));
                writer.append(&written);
            });
            let deadline = Instant::now() + Duration::from_secs(10);
            assert_eq!(reader.settled(21, deadline), Some(written.clone()));
        });
        // Read ahead: the same as slot by slot, across the end of the file too.
        let last = SLOTS as u32 - 1;
        writer.append(&entry(last, None));
        writer.append(&entry(last + 1, Some(vec![Key::Run(1)])));
        let ahead = reader.read_ahead(last - 1, 4);
        let one_by_one: Vec<_> = (last - 1..last + 3)
            .map(|commit| reader.read(commit))
            .collect();
        assert_eq!(ahead, one_by_one);
        assert_eq!(ahead[1], Some(Slot::Written(entry(last, None))));
        // Withdrawing clears only a mark: an entry stays.
        writer.withdraw(21);
        assert_eq!(reader.read(21), Some(Slot::Written(written)));
        let next = entry(22, None);
        writer.announce(&next.base);
        writer.withdraw(22);
        assert_eq!(reader.read(22), None);
    }
}
