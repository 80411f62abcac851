//! The run's workflow source (a bare source, or a root with mounts): its validation, canonical
//! form and rows.

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::error::{Result, StoreError};
use crate::js::{bind_params, Param};
use crate::state::json::canonical;
use crate::wire::field;

/// A validated `workflowSource`: a bare source is the root with no mounts.
pub(super) struct QueuedSource<'a> {
    root: &'a Value,
    mounted: &'a [Value],
}

pub(super) fn queued_workflow_source(value: &Value) -> Result<QueuedSource<'_>> {
    if is_workflow_source(value) {
        return Ok(QueuedSource {
            root: value,
            mounted: &[],
        });
    }
    let root = field(value, "root");
    if let (true, Some(mounted)) = (value.is_object(), field(value, "mounted").as_array()) {
        if is_workflow_source(root) && mounted.iter().all(is_mounted_workflow_source) {
            return Ok(QueuedSource { root, mounted });
        }
    }
    Err(StoreError::plain(
        "Stored workflow source identity is invalid",
    ))
}

pub(super) fn is_workflow_source(value: &Value) -> bool {
    let has_text = |name: &str| field(value, name).is_string();
    value.is_object()
        && match field(value, "kind").as_str() {
            Some("builtin") => has_text("id") && has_text("revision"),
            Some("file") => has_text("path") && has_text("hash"),
            _ => false,
        }
}

pub(super) fn is_mounted_workflow_source(value: &Value) -> bool {
    let path_ok = field(value, "mountPath")
        .as_array()
        .is_some_and(|parts| parts.iter().all(Value::is_string));
    value.is_object()
        && path_ok
        && field(value, "workflowName").is_string()
        && is_workflow_source(field(value, "source"))
}

/// `(source_type, source_ref, source_revision)` of a validated source.
pub(super) fn source_parts(source: &Value) -> (&str, &str, &str) {
    let text = |name: &str| field(source, name).as_str().unwrap_or_default();
    if text("kind") == "builtin" {
        ("builtin", text("id"), text("revision"))
    } else {
        ("file", text("path"), text("hash"))
    }
}

impl QueuedSource<'_> {
    /// Canonical JSON of `{root, mounted}` as the caller gave them (extra properties included).
    pub(super) fn canonical(&self) -> String {
        canonical(&json!({ "root": self.root, "mounted": self.mounted }))
    }

    /// The root row (`mount_path ''`), then one row per mount (`mountPath.join("/")`).
    pub(super) fn insert(&self, conn: &Connection, run_id: Param<'_>) -> Result<()> {
        let mut insert = conn.prepare_cached(
            "INSERT INTO run_sources(run_id, mount_path, source_type, source_ref, source_revision)
             VALUES (?, ?, ?, ?, ?)",
        )?;
        let (kind, reference, revision) = source_parts(self.root);
        let root = bind_params(&[
            run_id.clone(),
            Param::text(""),
            Param::text(kind),
            Param::text(reference),
            Param::text(revision),
        ])?;
        insert.execute(rusqlite::params_from_iter(&root))?;
        for mounted in self.mounted {
            let mount_path: Vec<&str> = field(mounted, "mountPath")
                .as_array()
                .map(|parts| parts.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let (kind, reference, revision) = source_parts(field(mounted, "source"));
            let joined = mount_path.join("/");
            let values = bind_params(&[
                run_id.clone(),
                Param::text(&joined),
                Param::text(kind),
                Param::text(reference),
                Param::text(revision),
            ])?;
            insert.execute(rusqlite::params_from_iter(&values))?;
        }
        Ok(())
    }
}
