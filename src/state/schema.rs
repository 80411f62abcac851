//! The schema the reference store writes, byte for byte, and its identifying constants.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// `PRAGMA application_id` of a state file (`PIWF`).
pub const STATE_APPLICATION_ID: i64 = 0x5049_5746;
/// `schema_meta.schema_name`.
pub const STATE_SCHEMA_NAME: &str = "pi-workflows-state";
/// `PRAGMA user_version` and `schema_meta.schema_version`.
pub const STATE_SCHEMA_VERSION: i64 = 1;
/// `schema_meta.app_version` (the reference's, unchanged since the schema was cut).
pub const STATE_APP_VERSION: &str = "0.14.0";

/// The DDL text. Its SHA-256 is stored in `schema_meta`, so not one byte may differ.
pub const STATE_SCHEMA_SQL: &str = include_str!("schema.sql");

/// The message of every schema mismatch, as in the reference.
pub const RESET_INSTRUCTION: &str = "Pi Workflows durable state is incompatible. Move or remove the old workflow state, then create a new state.sqlite database.";

/// SHA-256 of [`STATE_SCHEMA_SQL`], stored as `schema_meta.schema_digest` (computed once: every
/// open compares it).
pub fn schema_digest() -> &'static [u8; 32] {
    static DIGEST: OnceLock<[u8; 32]> = OnceLock::new();
    DIGEST.get_or_init(|| Sha256::digest(STATE_SCHEMA_SQL.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn digest_matches_the_reference() {
        assert_eq!(
            hex::encode(super::schema_digest()),
            "0469f429aad9046cacf63bf9df4ef8c98277ba633103a2478d9fc40226666327"
        );
    }

    /// `.cargo/config.toml` reaches the bundled SQLite build, and leaves the page size of new
    /// files at the reference's 4096.
    #[test]
    fn bundled_sqlite_has_the_configured_options() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let options: Vec<String> = conn
            .prepare("PRAGMA compile_options")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for option in [
            "DEFAULT_MEMSTATUS=0",
            "OMIT_SHARED_CACHE",
            "DEFAULT_PCACHE_INITSZ=0",
        ] {
            assert!(
                options.iter().any(|o| o == option),
                "{option} missing: {options:?}"
            );
        }
        assert!(
            !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
            "one page cache for all connections: {options:?}"
        );
        let page_size: i64 = conn
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .unwrap();
        assert_eq!(page_size, 4096);
    }
}
