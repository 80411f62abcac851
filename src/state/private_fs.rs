//! Owner-only permissions for the state file and its folder, as the reference sets them with
//! `fs.mkdirSync(dir, { mode: 0o700 })` and `fs.chmodSync(file, 0o600)`.
//!
//! On Windows, Node's `chmod` only toggles the read-only attribute and `mkdir` ignores the mode,
//! so the reference leaves permissions alone there; so does this module.

use std::fs;
use std::io;
use std::path::Path;

/// `fs.mkdirSync(dir, { recursive: true, mode: 0o700 })`: folders it creates are owner-only;
/// existing ones keep their permissions.
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
