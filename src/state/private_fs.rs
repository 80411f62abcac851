//! The file-system side of an open that stays in the core: what kind of file is at the state
//! path, where a dangling symbolic link points, and owner-only creation of new files.
//!
//! Folders, the legacy check and the final `chmod 0600` are done by the JS layer with Node's
//! own `fs`, as the reference does them, so that their failures are Node's errors
//! (`lib/state-database.js`).
//!
//! On Windows, Node's `chmod` only toggles the read-only attribute and `mkdir` ignores the mode,
//! so the reference leaves permissions alone there; so does this module.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::mode::Mode;
use crate::error::StoreError;

/// How deep a chain of symbolic links is followed (Linux's own limit, `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Whether a regular file is at `path` (following links). Anything else that is there is
/// refused before SQLite opens it: a read-only open of a FIFO would block forever, and a write
/// could reach a device. Where the reference (SQLite through better-sqlite3) answers, the
/// answer is its error; where it would hang or write, a plain error names the path.
pub fn is_regular_file(path: &Path, mode: Mode) -> Result<bool, StoreError> {
    let Ok(metadata) = fs::metadata(path) else {
        return Ok(false);
    };
    let kind = metadata.file_type();
    if kind.is_file() {
        return Ok(true);
    }
    let cannot_open = || StoreError::Sqlite {
        code: "SQLITE_CANTOPEN".into(),
        message: "unable to open database file".into(),
    };
    let read_error = || StoreError::Sqlite {
        code: "SQLITE_IOERR_READ".into(),
        message: "disk I/O error".into(),
    };
    if kind.is_dir() {
        // SQLite opens a folder read-only, then fails its first read; read-write it cannot.
        return Err(match mode {
            Mode::ReadWrite => cannot_open(),
            Mode::ReadOnly => read_error(),
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_socket() {
            return Err(cannot_open());
        }
        // Opened read-write a FIFO fails SQLite's first `pread`; read-only, `open` blocks.
        if kind.is_fifo() && mode == Mode::ReadWrite {
            return Err(read_error());
        }
    }
    Err(StoreError::plain(format!(
        "Pi Workflows state database is not a regular file: {}",
        path.display()
    )))
}

/// Where a new file at `path` appears: `path` itself, or the end of the chain of symbolic
/// links at `path` when they lead nowhere yet (SQLite follows them, and so did the reference,
/// creating the file at their target). `None` for a chain that loops or cannot be read.
pub fn creation_target(path: &Path) -> Option<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let target = fs::read_link(&current).ok()?;
                let base = current.parent().unwrap_or(Path::new("/"));
                current = base.join(target);
            }
            Err(error) if error.kind() != io::ErrorKind::NotFound => return None,
            _ => return Some(current),
        }
    }
    None
}

/// Creates `path` (empty) as 0600 unless it exists; an existing file is left as it is. Elsewhere
/// than Unix, a plain create.
pub fn create_file(path: &Path) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map(drop)
}

/// `fs.mkdirSync(dir, { recursive: true, mode: 0o700 })`: folders it creates are owner-only;
/// existing ones keep their permissions. (Backups only; the state file's folder is made in JS.)
pub fn create_dirs(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// `chmod(path, mode)` on Unix; nothing elsewhere.
#[cfg(unix)]
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// `chmod(path, mode)` on Unix; nothing elsewhere.
#[cfg(not(unix))]
pub fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn folder(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("piw-private-fs-{label}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn creation_target_follows_relative_chains_and_stops_at_loops() {
        let dir = folder("links");
        fs::create_dir(dir.join("out")).unwrap();
        symlink("out/second", dir.join("first")).unwrap();
        symlink("../real.sqlite", dir.join("out/second")).unwrap();
        assert_eq!(creation_target(&dir.join("plain")), Some(dir.join("plain")));
        assert_eq!(
            creation_target(&dir.join("first")),
            Some(dir.join("out").join("../real.sqlite"))
        );
        symlink("loop-b", dir.join("loop-a")).unwrap();
        symlink("loop-a", dir.join("loop-b")).unwrap();
        assert_eq!(creation_target(&dir.join("loop-a")), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_regular_files_pass() {
        let dir = folder("kinds");
        let file = dir.join("file");
        fs::write(&file, b"").unwrap();
        assert_eq!(is_regular_file(&file, Mode::ReadOnly), Ok(true));
        assert_eq!(
            is_regular_file(&dir.join("missing"), Mode::ReadWrite),
            Ok(false)
        );
        let code = |path: &Path, mode| match is_regular_file(path, mode) {
            Err(StoreError::Sqlite { code, .. }) => code,
            other => format!("{other:?}"),
        };
        assert_eq!(code(&dir, Mode::ReadWrite), "SQLITE_CANTOPEN");
        assert_eq!(code(&dir, Mode::ReadOnly), "SQLITE_IOERR_READ");
        assert!(matches!(
            is_regular_file(Path::new("/dev/null"), Mode::ReadOnly),
            Err(StoreError::Plain(message)) if message.ends_with("not a regular file: /dev/null")
        ));
        fs::remove_dir_all(&dir).unwrap();
    }
}
