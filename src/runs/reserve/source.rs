//! The run's workflow source (a bare source, or a root with mounts): its validation, canonical
//! form and rows.

use crate::sql::Db;
use serde_json::json;

use crate::error::{Result, StoreError};
use crate::js::{bind_params, canonical_literal, Js, Param};
use crate::wire::Call;

/// A validated `workflowSource`: a bare source is the root with no mounts.
pub(super) struct QueuedSource<'a> {
    root: Js<'a>,
    /// `workflowSource.mounted` as given (`undefined` for a bare source), and its items.
    mounted_value: Js<'a>,
    mounted: Vec<Js<'a>>,
}

/// A non-null, non-array object (`isRecord`).
fn is_record(value: Js<'_>) -> Result<bool> {
    Ok(value.type_of() == "object" && value != Js::Null && !value.is_array()?)
}

pub(super) fn queued_workflow_source(value: Js<'_>) -> Result<QueuedSource<'_>> {
    if is_workflow_source(value)? {
        return Ok(QueuedSource {
            root: value,
            mounted_value: Js::Undefined,
            mounted: Vec::new(),
        });
    }
    if is_record(value)? {
        let root = value.get("root")?;
        let mounted_value = value.get("mounted")?;
        if let Some(mounted) = mounted_value.items()? {
            if is_workflow_source(root)? && all_mounted(&mounted)? {
                return Ok(QueuedSource {
                    root,
                    mounted_value,
                    mounted,
                });
            }
        }
    }
    Err(StoreError::plain(
        "Stored workflow source identity is invalid",
    ))
}

fn all_mounted(mounted: &[Js<'_>]) -> Result<bool> {
    for item in mounted {
        if !is_mounted_workflow_source(*item)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn is_string(value: Js<'_>) -> bool {
    matches!(value, Js::String(_) | Js::IllFormed { .. })
}

pub(super) fn is_workflow_source(value: Js<'_>) -> Result<bool> {
    if !is_record(value)? {
        return Ok(false);
    }
    let has_text = |name: &str| value.get(name).map(is_string);
    Ok(match value.get("kind")?.as_str() {
        Some("builtin") => has_text("id")? && has_text("revision")?,
        Some("file") => has_text("path")? && has_text("hash")?,
        _ => false,
    })
}

pub(super) fn is_mounted_workflow_source(value: Js<'_>) -> Result<bool> {
    if !is_record(value)? {
        return Ok(false);
    }
    let path_ok = match value.get("mountPath")?.items()? {
        Some(parts) => parts.iter().all(|part| is_string(*part)),
        None => false,
    };
    Ok(path_ok
        && is_string(value.get("workflowName")?)
        && is_workflow_source(value.get("source")?)?)
}

/// `(source_type, source_ref, source_revision)` of a validated source, as `queuedSourceParts`
/// reads it: `kind` again (`=== "builtin"`), then the two fields of that kind, bound as the
/// caller's values are (a getter that changed since the check may give `undefined`, which
/// fails the NOT NULL constraint).
pub(super) fn source_parts<'a>(source: Js<'a>) -> Result<(&'static str, Js<'a>, Js<'a>)> {
    Ok(if source.get("kind")?.strict_eq_str("builtin") {
        ("builtin", source.get("id")?, source.get("revision")?)
    } else {
        ("file", source.get("path")?, source.get("hash")?)
    })
}

impl QueuedSource<'_> {
    /// Canonical JSON of `{root, mounted}` as the caller gave them (extra properties included).
    pub(super) fn canonical(&self, call: &Call) -> Result<String> {
        if call.cx().is_some() {
            return match self.mounted_value {
                // A bare source: `{root: source, mounted: []}` (keys in canonical order).
                Js::Undefined => Ok(format!(
                    r#"{{"mounted":[],"root":{}}}"#,
                    canonical_literal(call, &[("root", self.root)])?
                        .strip_prefix(r#"{"root":"#)
                        .and_then(|rest| rest.strip_suffix('}'))
                        .unwrap_or("null")
                )),
                mounted => canonical_literal(call, &[("root", self.root), ("mounted", mounted)]),
            };
        }
        let mounted: Vec<serde_json::Value> =
            self.mounted.iter().map(|item| item.to_wire()).collect();
        Ok(crate::state::json::canonical(
            &json!({ "root": self.root.to_wire(), "mounted": mounted }),
        ))
    }

    /// The root row (`mount_path ''`), then one row per mount (`mountPath.join("/")`).
    pub(super) fn insert(&self, conn: &Db, run_id: Param<'_>) -> Result<()> {
        let mut insert = conn.prepare_cached(
            "INSERT INTO run_sources(run_id, mount_path, source_type, source_ref, source_revision)
             VALUES (?, ?, ?, ?, ?)",
        )?;
        let (kind, reference, revision) = source_parts(self.root)?;
        let root = bind_params(&[
            run_id.clone(),
            Param::text(""),
            Param::text(kind),
            Param::Js(reference),
            Param::Js(revision),
        ])?;
        insert.execute_deferred(crate::sql::params_from_iter(&root))?;
        for mounted in &self.mounted {
            // `queuedSourceParts(mounted.source)`, then `mounted.mountPath.join("/")`.
            let (kind, reference, revision) = source_parts(mounted.get("source")?)?;
            let mount_path: Vec<&str> = mounted
                .get("mountPath")?
                .items()?
                .unwrap_or_default()
                .into_iter()
                .filter_map(|part| match part {
                    Js::String(text) | Js::IllFormed { text, .. } => Some(text),
                    _ => None,
                })
                .collect();
            let joined = mount_path.join("/");
            let values = bind_params(&[
                run_id.clone(),
                Param::text(&joined),
                Param::text(kind),
                Param::Js(reference),
                Param::Js(revision),
            ])?;
            insert.execute_deferred(crate::sql::params_from_iter(&values))?;
        }
        Ok(())
    }
}
