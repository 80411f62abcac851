//! Replacing a resource's finalizers as the reference's
//! iteration of the caller's list does.

use rusqlite::{params_from_iter, Connection};
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::js::js_number_text;
use crate::js::{bind_params, length_of, Bound, Js, Param};

/// Replaces the finalizer list as the reference does: `[...new Set(finalizers)]` (a string is
/// iterated by code point; `null`/`undefined` make an empty set, other non-iterables throw),
/// refused when shorter than `finalizers.length`, then one insert per item.
pub fn replace_finalizers(
    conn: &Connection,
    controller_resource_id: &str,
    finalizers: Option<&Value>,
) -> Result<()> {
    let chars: Vec<Value>;
    let items: &[Value] = match Js::opt(finalizers) {
        Js::Undefined | Js::Null => &[],
        Js::Array(items) => items,
        Js::String(text) | Js::IllFormed { text, .. } => {
            chars = text.chars().map(|c| Value::String(c.to_string())).collect();
            &chars
        }
        other => return Err(not_iterable(other)),
    };
    // SameValueZero: objects and arrays are never equal to another one.
    let mut unique: Vec<&Value> = Vec::with_capacity(items.len());
    for item in items {
        let item_js = Js::of(item);
        let seen = !matches!(
            item_js,
            Js::Object(_) | Js::Array(_) | Js::Instance { .. } | Js::Bytes { .. }
        ) && unique
            .iter()
            .any(|kept| same_value_zero(Js::of(kept), item_js));
        if !seen {
            unique.push(item);
        }
    }
    let length = length_of(finalizers)?;
    if length != Some(unique.len() as f64) {
        return Err(StoreError::plain("Controller finalizers must be unique"));
    }
    conn.prepare_cached("DELETE FROM controller_finalizers WHERE controller_resource_id = ?")?
        .execute([controller_resource_id])?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO controller_finalizers(controller_resource_id, finalizer, position)
         VALUES (?, ?, ?)",
    )?;
    for (position, finalizer) in unique.into_iter().enumerate() {
        insert.execute(params_from_iter(bind_params(&[
            Param::text(controller_resource_id),
            Param::Caller(Some(finalizer)),
            Param::Own(Bound::Real(position as f64)),
        ])?))?;
    }
    Ok(())
}

/// SameValueZero of two values that are not objects.
fn same_value_zero(a: Js<'_>, b: Js<'_>) -> bool {
    match (a, b) {
        (Js::Number(a), Js::Number(b)) => a == b || (a.is_nan() && b.is_nan()),
        (a, b) => a.strict_eq(b),
    }
}

/// V8's TypeError for spreading a value that is not iterable.
fn not_iterable(value: Js<'_>) -> StoreError {
    let described = match value {
        Js::Bool(b) => format!("boolean {b}"),
        Js::Number(n) => format!("number {}", js_number_text(n)),
        other => other.type_of().to_string(),
    };
    StoreError::Type(format!(
        "{described} is not iterable (cannot read property Symbol(Symbol.iterator))"
    ))
}
