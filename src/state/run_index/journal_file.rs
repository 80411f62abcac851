//! The journal's file on disk (`<state file>-runlog`): which file may be used as the journal,
//! and how one is made. A journal is believed only when it is provably this package's, for this
//! state file, and private to the state file's owner:
//! - it is opened without following a symbolic link (`O_NOFOLLOW`, and `O_CLOEXEC`), then
//!   checked on its descriptor: a regular file with one link, owned by the state file's owner,
//!   writable by no one else, and readable by no one else when the state file is not;
//! - its header names this state file (device and inode) and carries a random identity, which
//!   every slot's checksum is keyed with;
//! - it is made complete under a name of its own (created exclusively, mode 0600) and only then
//!   linked — or, to replace a stale one, renamed — to the journal's name, so no process ever
//!   opens half a journal, and two processes that start at once end on the same file.
//!
//! A file at the journal's name that fails a check of the first kind is refused: neither used,
//! nor written, nor deleted ([`Opened::Refused`] says why, for the store's warning). One of
//! ours that names another state file (a restored or copied file, an earlier file under the
//! name) or has an older format is stale: a writer whose state file still has this name
//! replaces it; nobody reads it.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::file_io::{fnv, read_at, write_at};
use super::identity::StateFile;

/// The header's first bytes: the format. Every format of this package starts with `PREFIX`.
const MAGIC: &[u8; 16] = b"piw-runlog v3\0\0\0";
const PREFIX: &[u8] = b"piw-runlog v";
/// Bytes of the header: magic, identity, state file id, checksum.
pub const HEADER: u64 = 64;

/// A journal file that may be used, with the identity its header carries.
pub struct Trusted {
    pub file: File,
    pub identity: u64,
}

/// What is at the journal's name.
pub enum Opened {
    Trusted(Trusted),
    /// Nothing usable yet (none there, a stale one a reader cannot replace): readers see gaps.
    Unusable,
    /// A file that is not ours or not private: never used, written or deleted.
    Refused(String),
}

/// Opens the journal at `path` for `state`; a writer (`writable`) makes one (of `length`
/// bytes) when there is none or replaces a stale one.
pub fn open(path: &Path, state: &StateFile, writable: bool, length: u64) -> Opened {
    // Without owners and inodes to check, no journal is believed: other processes' commits
    // are gaps there (docs/run-index.md, "Limits").
    if cfg!(not(unix)) {
        return Opened::Unusable;
    }
    // A replacement another process renamed in between is opened again, a few times at most.
    for _ in 0..4 {
        let file = match open_existing(path, writable) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                if !writable {
                    return Opened::Unusable;
                }
                match make(path, state, length, Placing::IfAbsent) {
                    Ok(Some(trusted)) => return Opened::Trusted(trusted),
                    Ok(None) => continue,
                    Err(_) => return Opened::Unusable,
                }
            }
            Err(error) => return refused_open(path, &error),
        };
        if let Some(reason) = untrusted(&file, state) {
            return Opened::Refused(format!("{} {reason}", path.display()));
        }
        match read_header(&file) {
            Header::Ours { identity, state_id } if state_id == state.id => {
                // A journal a close shortened to its header (see `Journal::stamp_closed`) gets
                // its slots back from the first writer, as a new one has them.
                if writable
                    && file
                        .metadata()
                        .is_ok_and(|metadata| metadata.len() < length)
                {
                    let _ = file.set_len(length);
                }
                return Opened::Trusted(Trusted { file, identity });
            }
            Header::Ours { .. } | Header::OursStale => {
                // Only for the file the state's name leads to: a connection left on a file a
                // restore renamed away must not take the journal from the new file's.
                if !writable || !state.is_named_by(&state_path(path)) {
                    return Opened::Unusable;
                }
                return match make(path, state, length, Placing::Replacing) {
                    Ok(Some(trusted)) => Opened::Trusted(trusted),
                    _ => Opened::Unusable,
                };
            }
            Header::Foreign => {
                return Opened::Refused(format!(
                    "{} is not a journal of this package (its first bytes are not one)",
                    path.display()
                ));
            }
        }
    }
    Opened::Unusable
}

/// The state file's name, from its journal's (`<state file>-runlog`).
fn state_path(journal: &Path) -> PathBuf {
    let name = journal.as_os_str().as_encoded_bytes();
    let state = name.strip_suffix(b"-runlog").unwrap_or(name);
    // SAFETY: a prefix of an OsStr's encoded bytes that ends where an ASCII suffix began.
    PathBuf::from(unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(state) })
}

/// Whether `file`, in use as the journal at `path`, is still the file there: `false` once
/// another process replaced it (the descriptor then names a file with no name).
pub fn still_named(file: &File) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata().is_ok_and(|metadata| metadata.nlink() == 1)
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        true
    }
}

/// Removes the journal at `path` if it is still `file` (the last connection closed).
pub fn remove(path: &Path, file: &File) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (Ok(named), Ok(open)) = (std::fs::symlink_metadata(path), file.metadata()) else {
            return;
        };
        if named.file_type().is_file() && named.ino() == open.ino() && named.dev() == open.dev() {
            let _ = std::fs::remove_file(path);
        }
    }
    #[cfg(not(unix))]
    let _ = (path, file);
}

/// The header of a journal for `state` with `identity`.
fn header(state: &StateFile, identity: u64) -> [u8; HEADER as usize] {
    let mut bytes = [0u8; HEADER as usize];
    bytes[..16].copy_from_slice(MAGIC);
    bytes[16..24].copy_from_slice(&identity.to_le_bytes());
    bytes[24..32].copy_from_slice(&state.id.to_le_bytes());
    let checksum = fnv(&[&bytes[..32]]);
    bytes[32..40].copy_from_slice(&checksum.to_le_bytes());
    bytes
}

enum Header {
    Ours {
        identity: u64,
        state_id: u64,
    },
    /// Ours by its first bytes, but of another format or damaged.
    OursStale,
    Foreign,
}

fn read_header(file: &File) -> Header {
    let mut bytes = [0u8; HEADER as usize];
    if read_at(file, &mut bytes, 0).is_err() {
        let mut prefix = [0u8; PREFIX.len()];
        return match read_at(file, &mut prefix, 0) {
            Ok(()) if prefix == PREFIX => Header::OursStale,
            _ => Header::Foreign,
        };
    }
    if !bytes.starts_with(PREFIX) {
        return Header::Foreign;
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    if &bytes[..16] != MAGIC || word(32) != fnv(&[&bytes[..32]]) {
        return Header::OursStale;
    }
    Header::Ours {
        identity: word(16),
        state_id: word(24),
    }
}

/// The reason `file` may not be trusted, if any.
fn untrusted(file: &File, state: &StateFile) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = match file.metadata() {
            Ok(metadata) => metadata,
            Err(error) => return Some(format!("cannot be inspected ({error})")),
        };
        let mode = metadata.mode() & 0o7777;
        if !metadata.file_type().is_file() {
            return Some("is not a regular file".into());
        }
        if metadata.nlink() != 1 {
            return Some(format!(
                "has {} links (a journal has one)",
                metadata.nlink()
            ));
        }
        if metadata.uid() != state.uid {
            return Some(format!(
                "is owned by uid {}, the state file by uid {}",
                metadata.uid(),
                state.uid
            ));
        }
        if mode & 0o022 != 0 {
            return Some(format!(
                "is writable by group or others (mode {mode:04o}; a journal is 0600)"
            ));
        }
        if state.mode & 0o044 == 0 && mode & 0o044 != 0 {
            return Some(format!(
                "is readable by group or others (mode {mode:04o}) while the state file is not"
            ));
        }
        None
    }
    #[cfg(not(unix))]
    {
        let _ = (file, state);
        Some("is not used on this platform".into())
    }
}

fn open_existing(path: &Path, writable: bool) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(writable);
    no_follow(&mut options);
    options.open(path)
}

/// The refusal for a name that could not be opened: a symbolic link, or no permission.
fn refused_open(path: &Path, error: &io::Error) -> Opened {
    let linked = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if linked {
        return Opened::Refused(format!(
            "{} is a symbolic link (a journal is never followed)",
            path.display()
        ));
    }
    match error.kind() {
        io::ErrorKind::PermissionDenied => {
            Opened::Refused(format!("{} cannot be opened ({error})", path.display()))
        }
        _ => Opened::Unusable,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Placing {
    /// Link the new journal to the name only if nothing is there.
    IfAbsent,
    /// Rename it over a stale one.
    Replacing,
}

/// Makes a new journal for `state` under a name of its own, then places it at `path`. `None`
/// when another process placed one first (open that one instead).
fn make(
    path: &Path,
    state: &StateFile,
    length: u64,
    placing: Placing,
) -> io::Result<Option<Trusted>> {
    let identity = random_u64()?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{identity:016x}.tmp"));
    let temporary = PathBuf::from(temporary);
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    no_follow(&mut options);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(&temporary)?;
    let placed = (|| {
        file.set_len(length)?;
        write_at(&file, &header(state, identity), 0)?;
        match placing {
            Placing::IfAbsent => match std::fs::hard_link(&temporary, path) {
                Ok(()) => {
                    std::fs::remove_file(&temporary)?;
                    Ok(true)
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                // A file system without hard links: renamed instead (over one placed meanwhile,
                // whose users see theirs unnamed and open this one).
                Err(_) => std::fs::rename(&temporary, path).map(|()| true),
            },
            Placing::Replacing => std::fs::rename(&temporary, path).map(|()| true),
        }
    })();
    if !matches!(placed, Ok(true)) {
        let _ = std::fs::remove_file(&temporary);
    }
    Ok(placed?.then_some(Trusted { file, identity }))
}

fn no_follow(options: &mut std::fs::OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // std opens with O_CLOEXEC already.
        options.custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    let _ = options;
}

fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| io::Error::other(error.to_string()))?;
    Ok(u64::from_le_bytes(bytes))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::test_support::Scratch;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A state file and its journal's name; the state file identified as a connection would.
    fn state(scratch: &Scratch) -> (PathBuf, StateFile) {
        let file = scratch.file("state.sqlite");
        std::fs::write(&file, b"").unwrap();
        let metadata = std::fs::metadata(&file).unwrap();
        let state = StateFile {
            id: fnv(&[&metadata.dev().to_le_bytes(), &metadata.ino().to_le_bytes()]),
            uid: metadata.uid(),
            mode: 0o600,
        };
        (scratch.file("state.sqlite-runlog"), state)
    }

    /// A journal of the journal module's size.
    fn open(path: &Path, state: &StateFile, writable: bool) -> Opened {
        super::open(path, state, writable, HEADER + 4096 * 1024)
    }

    fn refusal(opened: Opened) -> String {
        match opened {
            Opened::Refused(reason) => reason,
            Opened::Trusted(_) => "trusted".into(),
            Opened::Unusable => "unusable".into(),
        }
    }

    fn trusted(opened: Opened) -> Trusted {
        match opened {
            Opened::Trusted(trusted) => trusted,
            other => panic!("not trusted: {}", refusal(other)),
        }
    }

    #[test]
    fn a_new_journal_is_private_whole_and_this_files() {
        let scratch = Scratch::new("runlog-new");
        let (path, state) = state(&scratch);
        assert!(matches!(open(&path, &state, false), Opened::Unusable));
        let made = trusted(open(&path, &state, true));
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(metadata.mode() & 0o777, 0o600);
        assert_eq!(metadata.len(), HEADER + 4096 * 1024);
        // Nothing but the journal was left beside the state file.
        let mut names: Vec<_> = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["state.sqlite", "state.sqlite-runlog"]);
        // Another connection of the same file finds the same journal.
        let again = trusted(open(&path, &state, false));
        assert_eq!(again.identity, made.identity);
        assert!(still_named(&made.file));
    }

    #[test]
    fn a_symbolic_link_is_never_followed_nor_its_target_touched() {
        let scratch = Scratch::new("runlog-link");
        let (path, state) = state(&scratch);
        let victim = scratch.file("victim");
        std::fs::write(&victim, vec![7u8; 1120]).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        for writable in [true, false] {
            let reason = refusal(open(&path, &state, writable));
            assert!(
                reason.ends_with("is a symbolic link (a journal is never followed)"),
                "{reason}"
            );
        }
        assert_eq!(std::fs::read(&victim).unwrap(), vec![7u8; 1120]);
        // A link that leads nowhere is not created through either.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(scratch.file("nowhere"), &path).unwrap();
        assert!(refusal(open(&path, &state, true)).contains("symbolic link"));
        assert!(!scratch.file("nowhere").exists());
        assert!(std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_file_others_can_write_or_read_or_that_is_linked_twice_is_refused() {
        let scratch = Scratch::new("runlog-modes");
        let (path, state) = state(&scratch);
        drop(trusted(open(&path, &state, true)));
        let bytes = std::fs::read(&path).unwrap();
        let set_mode =
            |mode| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        set_mode(0o666);
        assert!(
            refusal(open(&path, &state, true)).contains("writable by group or others (mode 0666")
        );
        set_mode(0o620);
        assert!(refusal(open(&path, &state, false)).contains("writable by group or others"));
        set_mode(0o640);
        assert!(refusal(open(&path, &state, true)).contains("readable by group or others"));
        // Readable by others is fine where the state file is too.
        let shared = StateFile {
            mode: 0o644,
            ..state
        };
        assert!(matches!(open(&path, &shared, true), Opened::Trusted(_)));
        set_mode(0o600);
        std::fs::hard_link(&path, scratch.file("second-name")).unwrap();
        assert!(refusal(open(&path, &state, true)).contains("has 2 links"));
        std::fs::remove_file(scratch.file("second-name")).unwrap();
        // Refused files were neither written nor replaced.
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(matches!(open(&path, &state, true), Opened::Trusted(_)));
    }

    #[test]
    fn another_users_journal_is_refused() {
        if unsafe { libc::geteuid() } != 0 {
            return; // Only root can give a file away.
        }
        let scratch = Scratch::new("runlog-owner");
        let (path, state) = state(&scratch);
        drop(trusted(open(&path, &state, true)));
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let reason = refusal(open(&path, &state, true));
        assert!(
            reason.contains("is owned by uid 65534, the state file by uid 0"),
            "{reason}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);
    }

    #[test]
    fn a_foreign_file_is_refused_and_a_stale_journal_replaced() {
        let scratch = Scratch::new("runlog-stale");
        let (path, state) = state(&scratch);
        std::fs::write(&path, b"someone else's notes").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(refusal(open(&path, &state, true)).contains("is not a journal of this package"));
        assert_eq!(std::fs::read(&path).unwrap(), b"someone else's notes");
        // An older format of ours, and one of another state file: replaced by a writer only.
        for stale in [
            b"piw-runlog v2\0\0\0".to_vec(),
            header(&StateFile { id: 99, ..state }, 5).to_vec(),
        ] {
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, &stale).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            let inode = std::fs::metadata(&path).unwrap().ino();
            assert!(matches!(open(&path, &state, false), Opened::Unusable));
            let replaced = trusted(open(&path, &state, true));
            assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode);
            assert_eq!(
                replaced.file.metadata().unwrap().ino(),
                std::fs::metadata(&path).unwrap().ino()
            );
        }
        // A writer left on a file that a restore renamed away does not take the journal from
        // the file now at the name: it uses none.
        let moved = StateFile { id: 12345, ..state };
        let inode = std::fs::metadata(&path).unwrap().ino();
        assert!(matches!(open(&path, &moved, true), Opened::Unusable));
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    }

    #[test]
    fn writers_that_start_together_share_one_journal() {
        let scratch = Scratch::new("runlog-race");
        let (path, state) = state(&scratch);
        let identities: Vec<u64> = std::thread::scope(|scope| {
            let openers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| trusted(open(&path, &state, true)).identity))
                .collect();
            openers
                .into_iter()
                .map(|opener| opener.join().unwrap())
                .collect()
        });
        assert!(
            identities.iter().all(|identity| *identity == identities[0]),
            "{identities:?}"
        );
        assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 2);
    }
}
