//! The state file's checks and its online backup.

use std::path::Path;

use rusqlite::Connection;

use super::{private_fs, Mode, OpenOptions, StateDb};
use crate::error::{Result, StoreError};

impl StateDb {
    /// `PRAGMA integrity_check` and `PRAGMA foreign_key_check`, with the reference's errors.
    pub fn integrity_check(&self) -> Result<()> {
        let conn = self.file_conn()?;
        let result: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        if result != "ok" {
            return Err(StoreError::plain(format!(
                "Pi Workflows SQLite integrity check failed: {result}"
            )));
        }
        let violations = conn
            .prepare("PRAGMA foreign_key_check")?
            .query_map([], |_| Ok(()))?
            .count();
        if violations != 0 {
            return Err(StoreError::plain(
                "Pi Workflows SQLite foreign-key check failed",
            ));
        }
        Ok(())
    }

    /// Online backup of the live database into `destination` (created 0600, then verified by
    /// reopening it read-only).
    pub fn backup_to(&self, destination: &Path) -> Result<()> {
        let io = |error: std::io::Error| StoreError::plain(error.to_string());
        let absolute = std::path::absolute(destination).map_err(io)?;
        if absolute == self.file_path {
            return Err(StoreError::plain(
                "Backup destination must differ from the live database",
            ));
        }
        if let Some(parent) = absolute.parent() {
            private_fs::create_dirs(parent).map_err(io)?;
        }
        self.integrity_check()?;
        create_private_file(&absolute)?;
        {
            let mut target = Connection::open(&absolute)?;
            let backup = rusqlite::backup::Backup::new(self.file_conn()?, &mut target)?;
            backup.run_to_completion(256, std::time::Duration::from_millis(0), None)?;
        }
        private_fs::set_mode(&absolute, 0o600).map_err(io)?;
        let copy = StateDb::open(OpenOptions {
            file_path: absolute,
            mode: Mode::ReadOnly,
            now: 0,
        })?;
        copy.integrity_check()
    }
}

/// Creates the empty database file owner-only before SQLite opens it: SQLite gives the WAL and
/// shared-memory files it creates next to it the main file's mode, so they start out private
/// too (chmod after opening, as the reference does, leaves them 0644 under the usual umask).
fn create_private_file(path: &Path) -> Result<()> {
    private_fs::create_file(path).map_err(|error| StoreError::plain(error.to_string()))
}
