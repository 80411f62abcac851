//! Replacing a resource's finalizers as the reference's
//! iteration of the caller's list does.

use crate::error::{Result, StoreError};
use crate::js::js_number_text;
use crate::js::{bind_params, Bound, Js, Param};
use crate::sql::{params_from_iter, Db};

/// Replaces the finalizer list as the reference does: `[...new Set(finalizers)]` (a string is
/// iterated by code point; `null`/`undefined` make an empty set, other non-iterables throw),
/// refused when shorter than `finalizers.length`, then one insert per item.
pub fn replace_finalizers(
    conn: &Db,
    controller_resource_id: &str,
    finalizers: Js<'_>,
) -> Result<()> {
    // A caller's object (an array, a Set, a Map, a boxed String, a Proxy):
    // `[...new Set(finalizers)]` is JavaScript's own (its iteration, its traps, what they
    // throw).
    if let Js::Live(object) = finalizers {
        let unique = object
            .cx()
            .helper("uniqueItems", &[finalizers])?
            .items()?
            .unwrap_or_default();
        return store_unique(conn, controller_resource_id, finalizers, unique);
    }
    let chars: Vec<(String, String)>;
    let items: Vec<Js<'_>> = match finalizers {
        Js::Undefined | Js::Null => Vec::new(),
        Js::String(text) => {
            chars = text.chars().map(|c| (c.into(), String::new())).collect();
            chars.iter().map(|(c, _)| Js::String(c)).collect()
        }
        // Each lone surrogate is a code point of its own, kept (its WTF-8), as V8 iterates it.
        Js::IllFormed { wtf8, .. } => {
            chars = code_points(&hex::decode(wtf8).unwrap_or_default());
            chars
                .iter()
                .map(|(text, wtf8)| {
                    if wtf8.is_empty() {
                        Js::String(text)
                    } else {
                        Js::IllFormed { text, wtf8 }
                    }
                })
                .collect()
        }
        // A byte view iterates its elements (numbers; only bytes are read here).
        Js::Live(object) if object.bytes().is_some() => object
            .bytes()
            .unwrap_or_default()
            .into_iter()
            .map(|byte| Js::Number(f64::from(byte)))
            .collect(),
        other => match other.items()? {
            Some(items) => items,
            None => return Err(not_iterable(other)),
        },
    };
    // SameValueZero: objects and arrays are never equal to another one.
    let mut unique: Vec<Js<'_>> = Vec::with_capacity(items.len());
    for item in items {
        let seen = !matches!(
            item,
            Js::Object(_) | Js::Array(_) | Js::Instance { .. } | Js::Bytes { .. } | Js::Live(_)
        ) && unique.iter().any(|kept| same_value_zero(*kept, item));
        if !seen {
            unique.push(item);
        }
    }
    store_unique(conn, controller_resource_id, finalizers, unique)
}

/// `unique.length !== finalizers.length` refuses the list; then the rows, one per item.
fn store_unique(
    conn: &Db,
    controller_resource_id: &str,
    finalizers: Js<'_>,
    unique: Vec<Js<'_>>,
) -> Result<()> {
    let length = finalizers.get("length")?.as_number();
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
            Param::Js(finalizer),
            Param::Own(Bound::Real(position as f64)),
        ])?))?;
    }
    Ok(())
}

/// The code points of WTF-8 `bytes`, each as `(text, "")`, or a lone surrogate as
/// `("\u{FFFD}", hex of its WTF-8)`.
fn code_points(bytes: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(&lead) = rest.first() {
        let width = match lead {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        }
        .min(rest.len());
        let (point, tail) = rest.split_at(width);
        out.push(match std::str::from_utf8(point) {
            Ok(text) => (text.to_owned(), String::new()),
            Err(_) => ("\u{FFFD}".to_owned(), hex::encode(point)),
        });
        rest = tail;
    }
    out
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
