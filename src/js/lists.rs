//! The reference's expressions over a caller's list: `<list>.map(() => "?").join(", ")` for an
//! SQL list, `<list>.flatMap(f)`, and `...<list>` in an argument list.
//!
//! A list whose method is Array.prototype's own (an array, a Proxy of one, an array-like that
//! borrowed `Array.prototype.map`) is walked here, as that method walks it. Any other method —
//! an array's own `map`, an object's `map` with no iterator, an own `Symbol.iterator` — is the
//! caller's code: JavaScript then evaluates the reference's own source text over the list
//! (`Cx::evaluate`), so that the caller's method runs, and what it returns or throws, and V8's
//! messages (`options.statuses.map(...).join is not a function`, `Spread syntax requires
//! ...iterable[Symbol.iterator] to be a function`), are the reference's. A snapshot of
//! `store.async` (no live values) keeps its own rules (`Js::method`, `Js::sql_marks`).

use napi::sys;

use super::value::{Js, Obj, Raw};
use crate::error::{Result, StoreError};

/// Where a spread stands in the reference's argument list (V8 words its TypeError by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// `params.push(...options.<name>)`: the only and last argument.
    Push,
    /// `.get(projectId, ...options.controllers, ...exclusionParams, now, now)`.
    Among,
}

/// `root` and the object that holds the list for a reference expression `root.name` (or the
/// list itself for a bare `root`), as JavaScript source that binds them from `list`.
fn binding(expr: &str) -> String {
    match expr.split_once('.') {
        Some((root, name)) => format!("const {root} = {{ {name}: list }};"),
        None => format!("const {expr} = list;"),
    }
}

impl<'a> Obj<'a> {
    /// The JS layer's `name` (one of Array.prototype's own methods, the caller's realm under
    /// Jest: lib/computed.js).
    fn helper_value(self, name: &str) -> Result<Raw> {
        let cx = self.cx();
        Ok(cx.global_property(cx.helpers()?, name))
    }

    fn is(self, value: Raw, other: Raw) -> bool {
        let mut same = false;
        // SAFETY: handles of the running callback.
        unsafe { sys::napi_strict_equals(self.cx().env(), value, other, &mut same) };
        same
    }

    /// Whether `value` is the JS layer's `intrinsic` (`arrayMap`, `arrayFlatMap`).
    fn is_intrinsic(self, value: Js<'_>, intrinsic: &str) -> Result<bool> {
        match value {
            Js::Live(function) => Ok(self.is(function.raw(), self.helper_value(intrinsic)?)),
            _ => Ok(false),
        }
    }

    /// A JavaScript array whose `[Symbol.iterator]` is Array.prototype's: a spread then reads
    /// its items by index, as V8's does.
    fn iterates_as_array(self) -> Result<bool> {
        if !self.is_js_array() {
            return Ok(false);
        }
        let symbol = self.helper_value("iteratorSymbol")?;
        let mut iterator = std::ptr::null_mut();
        // SAFETY: handles of the running callback; a getter it runs may throw (checked).
        let status =
            unsafe { sys::napi_get_property(self.cx().env(), self.raw(), symbol, &mut iterator) };
        self.cx().check(status)?;
        Ok(self.is(iterator, self.helper_value("arrayIterator")?))
    }
}

/// What a caller's list has under a method's name ([`Js::method_kind`]).
pub enum Method {
    /// Array.prototype's own method: the list is walked in Rust, as that method walks it.
    Array,
    /// The caller's own function: JavaScript runs the reference's expression.
    Caller,
    /// Not a function: the reference's call throws this TypeError.
    Missing(StoreError),
}

impl<'a> Js<'a> {
    /// The call's context of a live value.
    fn live_cx(self) -> Result<&'a super::value::Cx> {
        match self {
            Js::Live(object) => Ok(object.cx()),
            _ => Err(StoreError::plain(
                "pi-workflows-native internal error: a caller's method on a snapshot",
            )),
        }
    }

    /// `<expr>.map(() => "?").join(", ")`: the placeholders and whether a hole of a sparse
    /// array left an empty one ([`Js::sql_marks`]); `None` for a snapshot that is not an
    /// array. `<expr>.map` is read once, as the reference reads it.
    pub fn sql_marks_as(self, expr: &str) -> Result<Option<(String, bool)>> {
        match self.method_kind(expr, "map")? {
            Method::Array => self.sql_marks(),
            Method::Caller => Ok(Some((self.caller_map_join(expr, "?", ", ")?, false))),
            Method::Missing(error) => Err(error),
        }
    }

    /// `...<expr>` where the reference spreads it (`form`): the values bound.
    pub fn sql_spread_as(self, expr: &str, form: Spread) -> Result<Vec<Js<'a>>> {
        let Js::Live(list) = self else {
            return self.sql_spread();
        };
        if list.iterates_as_array()? {
            return self.sql_spread();
        }
        let source = match form {
            Spread::Push => format!(
                "{} const params = []; params.push(...{expr}); return params;",
                binding(expr)
            ),
            Spread::Among => format!(
                "{} const exclusionParams = []; const stmt = {{ get: (...values) => values }}; \
                 return stmt.get(0, ...{expr}, ...exclusionParams, 0, 0).slice(1, -2);",
                binding(expr)
            ),
        };
        Ok(list
            .cx()
            .evaluate(&source, self)?
            .items()?
            .unwrap_or_default())
    }

    /// `<expr>.<name>` read once, as the reference reads it before calling it: Array.prototype's
    /// own method (or, for a snapshot of `store.async`, a method [`Js::method`] allows), the
    /// caller's, or V8's TypeError for a value that is not a function.
    pub fn method_kind(self, expr: &str, name: &str) -> Result<Method> {
        let Js::Live(list) = self else {
            return Ok(match self.method(expr, name) {
                Ok(_) => Method::Array,
                Err(error) => Method::Missing(error),
            });
        };
        let method = list.get(name)?;
        Ok(if method.type_of() != "function" {
            Method::Missing(StoreError::Type(format!("{expr}.{name} is not a function")))
        } else if list.is_intrinsic(
            method,
            if name == "map" {
                "arrayMap"
            } else {
                "arrayFlatMap"
            },
        )? {
            Method::Array
        } else {
            Method::Caller
        })
    }

    /// `<expr>.map(() => item).join(separator)` run by JavaScript, for a list whose `map` is
    /// the caller's ([`Method::Caller`]).
    pub fn caller_map_join(self, expr: &str, item: &str, separator: &str) -> Result<String> {
        let source = format!(
            "{} return {expr}.map(() => {}).join({});",
            binding(expr),
            serde_json::to_string(item).expect("a string serializes"),
            serde_json::to_string(separator).expect("a string serializes"),
        );
        self.live_cx()?.evaluate(&source, self)?.template()
    }

    /// `<expr>.flatMap((ref) => [ref.controller, ref.key])` run by JavaScript, for a list whose
    /// `flatMap` is the caller's ([`Method::Caller`]): the values its result spreads into the
    /// statement's parameters.
    pub fn caller_flat_map_refs(self, expr: &str) -> Result<Vec<Js<'a>>> {
        let cx = self.live_cx()?;
        let source = format!(
            "{} return {expr}.flatMap((ref) => [ref.controller, ref.key]);",
            binding(expr)
        );
        let flat = cx.evaluate(&source, self)?;
        Ok(match flat {
            Js::Live(object) if object.iterates_as_array()? => flat.items()?.unwrap_or_default(),
            // Anything else is spread into the statement's parameters, as the reference does.
            _ => {
                let source =
                    "const exclusionParams = list; const stmt = { get: (...values) => values }; \
                              return stmt.get(0, ...exclusionParams, 0, 0).slice(1, -2);";
                cx.evaluate(source, flat)?.items()?.unwrap_or_default()
            }
        })
    }
}
