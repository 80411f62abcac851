//! How a state database is opened: read-write or read-only (its own module so that
//! `private_fs`, a child of `state`, can use it without importing its parent).

/// How a state database is opened (`StateDatabaseMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `read-write`: creates and prunes; every store method may write.
    ReadWrite,
    /// `read-only`: the file must exist; `query_only` is on.
    ReadOnly,
}
