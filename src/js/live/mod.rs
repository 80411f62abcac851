//! The live backend of the view: the caller's own values of a synchronous call, read through
//! napi exactly when, and as often as, the domain code reads them.
//!
//! A property read is `napi_get_named_property` (getters, the prototype chain, Proxy traps and
//! non-enumerable properties behave as in JavaScript); a coercion is V8's own
//! (`napi_coerce_to_string`/`_number`); `Array.isArray` is JavaScript's. What JavaScript throws
//! meanwhile is taken off the isolate and travels as [`StoreError::Thrown`]: the call fails (its
//! transaction rolls back, as every error does) and the entry point rethrows that very value.
//!
//! Primitives are copied into the view ([`Js::String`], [`Js::Number`], …) when they are read;
//! objects (arrays, functions, byte views and Proxies included) stay [`Js::Live`] handles.
//! Handles are valid for the napi callback that made the [`Cx`]: the view never outlives the
//! call (`Call` owns the `Cx`, and a `Js<'a>` borrows the `Call`).
//!
//! This file is the call's context ([`Cx`]: napi status, views of values, strings, the JS
//! layer's helpers); `object.rs` reads and tests the caller's objects ([`Obj`](super::Obj));
//! `wtf8.rs` converts strings with lone surrogates.

use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::ptr;

use napi::sys;

use super::value::{Cx, Js, Obj, Raw, ReadString};
use crate::error::{Result, StoreError};

mod object;
mod wtf8;

pub use wtf8::{wtf8, wtf8_units};

thread_local! {
    /// The JS layer's helpers (`lib/computed.js`), registered once per thread that loads the
    /// addon ([`set_helpers`]).
    static HELPERS: Cell<sys::napi_ref> = const { Cell::new(ptr::null_mut()) };
}

/// Keeps `helpers` (an object of functions) for the live calls of this thread.
///
/// # Safety
/// `env` and `helpers` belong to the running napi callback.
pub unsafe fn set_helpers(env: sys::napi_env, helpers: Raw) {
    let mut reference = ptr::null_mut();
    unsafe { sys::napi_create_reference(env, helpers, 1, &mut reference) };
    HELPERS.with(|cell| cell.set(reference));
}

impl Cx {
    /// The context of a call made on `env`.
    ///
    /// # Safety
    /// `env` is the env of the napi callback running now, and the `Cx` is dropped before it
    /// returns.
    pub unsafe fn new(env: sys::napi_env) -> Cx {
        Cx {
            env,
            strings: RefCell::new(Vec::new()),
            object_prototype: Cell::new(ptr::null_mut()),
            array_constructor: Cell::new(ptr::null_mut()),
            read_strings: RefCell::new(Vec::new()),
        }
    }

    /// The env of the call.
    pub fn env(&self) -> sys::napi_env {
        self.env
    }

    /// `text`, kept for the rest of the call.
    pub fn keep(&self, text: String) -> &str {
        let boxed = text.into_boxed_str();
        let view: *const str = &*boxed;
        self.strings.borrow_mut().push(boxed);
        // SAFETY: the box's heap buffer never moves or drops while `self` lives (the vector only
        // ever grows; moving a Box moves the pointer, not the text), and `'a` borrows `self`.
        unsafe { &*view }
    }

    /// What a napi call that may run JavaScript returned: `Ok` on success, the exception it
    /// left as [`StoreError::Thrown`], or a plain error for any other failure.
    pub fn check(&self, status: sys::napi_status) -> Result<()> {
        if status == sys::Status::napi_ok {
            return Ok(());
        }
        let mut pending = false;
        // SAFETY: a valid env of the running callback.
        unsafe { sys::napi_is_exception_pending(self.env, &mut pending) };
        if pending {
            let mut error = ptr::null_mut();
            unsafe { sys::napi_get_and_clear_last_exception(self.env, &mut error) };
            return Err(StoreError::Thrown(error as usize));
        }
        Err(StoreError::plain(format!(
            "pi-workflows-native internal error: napi status {status}"
        )))
    }

    /// [`Cx::view`] of `value`, just read as `object[name]`: a string strictly equal to the
    /// last one read there is the text already converted.
    pub(super) fn read_view(&self, object: Raw, name: &str, value: Raw) -> Js<'_> {
        let mut kind = 0;
        unsafe { sys::napi_typeof(self.env, value, &mut kind) };
        if kind != sys::ValueType::napi_string {
            return self.view(value);
        }
        let mut reads = self.read_strings.borrow_mut();
        let entry = reads
            .iter_mut()
            .find(|entry| entry.object == object && &*entry.name == name);
        if let Some(entry) = &entry {
            let mut equal = false;
            unsafe { sys::napi_strict_equals(self.env, entry.value, value, &mut equal) };
            if equal {
                // SAFETY: the text is kept in `self.strings` for the rest of the call.
                return Js::String(unsafe { &*entry.text });
            }
        }
        drop(reads);
        let view = self.string_view(value);
        if let Js::String(text) = view {
            let mut reads = self.read_strings.borrow_mut();
            match reads
                .iter_mut()
                .find(|entry| entry.object == object && &*entry.name == name)
            {
                Some(entry) => {
                    entry.value = value;
                    entry.text = text;
                }
                None => reads.push(ReadString {
                    object,
                    name: name.into(),
                    value,
                    text,
                }),
            }
        }
        view
    }

    /// The view of one value of the call.
    pub(crate) fn view(&self, raw: Raw) -> Js<'_> {
        let env = self.env;
        let mut kind = 0;
        // SAFETY (every call below): `raw` is a handle of the running callback, `env` its env.
        unsafe { sys::napi_typeof(env, raw, &mut kind) };
        match kind {
            sys::ValueType::napi_undefined => Js::Undefined,
            sys::ValueType::napi_null => Js::Null,
            sys::ValueType::napi_boolean => {
                let mut b = false;
                unsafe { sys::napi_get_value_bool(env, raw, &mut b) };
                Js::Bool(b)
            }
            sys::ValueType::napi_number => {
                let mut n = 0.0;
                unsafe { sys::napi_get_value_double(env, raw, &mut n) };
                Js::Number(n)
            }
            sys::ValueType::napi_string => self.string_view(raw),
            sys::ValueType::napi_bigint => {
                // ToString of a bigint cannot run JavaScript.
                let mut text = ptr::null_mut();
                unsafe { sys::napi_coerce_to_string(env, raw, &mut text) };
                match self.string_view(text) {
                    Js::String(digits) => Js::BigInt(digits),
                    _ => Js::BigInt("0"),
                }
            }
            sys::ValueType::napi_symbol => {
                // `symbol.description` (Symbol.prototype's getter).
                let mut description = ptr::null_mut();
                let key = c"description";
                unsafe { sys::napi_get_named_property(env, raw, key.as_ptr(), &mut description) };
                match self.view(description) {
                    Js::String(text) => Js::Symbol(text),
                    _ => Js::Symbol(""),
                }
            }
            _ => Js::Live(Obj { cx: self, raw }),
        }
    }

    /// A string's UTF-16 units.
    fn utf16(&self, raw: Raw) -> Vec<u16> {
        let mut length = 0;
        unsafe { sys::napi_get_value_string_utf16(self.env, raw, ptr::null_mut(), 0, &mut length) };
        let mut units = vec![0u16; length + 1];
        let mut written = 0;
        unsafe {
            sys::napi_get_value_string_utf16(
                self.env,
                raw,
                units.as_mut_ptr(),
                units.len(),
                &mut written,
            )
        };
        units.truncate(written);
        units
    }

    /// A string, as a well-formed [`Js::String`] or, with lone surrogates, [`Js::IllFormed`].
    fn string_view<'a>(&'a self, raw: Raw) -> Js<'a> {
        let units = self.utf16(raw);
        match String::from_utf16(&units) {
            Ok(text) => Js::String(self.keep(text)),
            Err(_) => Js::IllFormed {
                text: self.keep(String::from_utf16_lossy(&units)),
                wtf8: self.keep(hex::encode(wtf8(&units))),
            },
        }
    }

    /// A JavaScript string made from `units` (lone surrogates kept).
    pub fn make_string(&self, units: &[u16]) -> Raw {
        let mut out = ptr::null_mut();
        unsafe {
            sys::napi_create_string_utf16(self.env, units.as_ptr(), units.len() as isize, &mut out)
        };
        out
    }

    pub(super) fn global_property(&self, object: Raw, name: &str) -> Raw {
        let name = CString::new(name).unwrap_or_default();
        let mut out = ptr::null_mut();
        unsafe { sys::napi_get_named_property(self.env, object, name.as_ptr(), &mut out) };
        out
    }

    /// The JS layer's `Array` (the caller's realm: under Jest, the test's).
    pub(super) fn array_constructor(&self) -> Result<Raw> {
        if self.array_constructor.get().is_null() {
            let helpers = self.helpers()?;
            self.array_constructor
                .set(self.global_property(helpers, "Array"));
        }
        Ok(self.array_constructor.get())
    }

    pub(super) fn globals(&self) {
        if !self.object_prototype.get().is_null() {
            return;
        }
        let mut global = ptr::null_mut();
        unsafe { sys::napi_get_global(self.env, &mut global) };
        let object = self.global_property(global, "Object");
        self.object_prototype
            .set(self.global_property(object, "prototype"));
    }

    /// Whether `error` is an `Error` of the addon's realm while the JS layer's helpers live in
    /// another realm (Jest's): V8's own errors are then remade in the helpers' realm.
    pub(super) fn foreign_error(&self, error: Raw) -> bool {
        let Ok(helpers) = self.helpers() else {
            return false;
        };
        self.globals();
        let env = self.env;
        let mut prototype = ptr::null_mut();
        let mut same = false;
        unsafe {
            sys::napi_get_prototype(env, helpers, &mut prototype);
            sys::napi_strict_equals(env, prototype, self.object_prototype.get(), &mut same);
        }
        if same {
            return false;
        }
        let mut global = ptr::null_mut();
        unsafe { sys::napi_get_global(env, &mut global) };
        let error_class = self.global_property(global, "Error");
        let mut is_error = false;
        unsafe { sys::napi_instanceof(env, error, error_class, &mut is_error) };
        is_error
    }

    /// A JavaScript value for `value`: a live object's own handle, a primitive made again (a
    /// symbol as a new symbol of its description: only what coercing it throws is used).
    pub fn to_raw(&self, value: Js<'_>) -> Raw {
        let env = self.env;
        let mut out = ptr::null_mut();
        // SAFETY (every call below): the env of the running callback.
        unsafe {
            match value {
                Js::Live(object) => return object.raw(),
                Js::Undefined => sys::napi_get_undefined(env, &mut out),
                Js::Null => sys::napi_get_null(env, &mut out),
                Js::Bool(b) => sys::napi_get_boolean(env, b, &mut out),
                Js::Number(n) => sys::napi_create_double(env, n, &mut out),
                Js::String(text) => {
                    let units: Vec<u16> = text.encode_utf16().collect();
                    return self.make_string(&units);
                }
                Js::IllFormed { wtf8, .. } => {
                    return self.make_string(&wtf8_units(&hex::decode(wtf8).unwrap_or_default()))
                }
                Js::BigInt(digits) => {
                    let n: i64 = digits.parse().unwrap_or(0);
                    sys::napi_create_bigint_int64(env, n, &mut out)
                }
                Js::Symbol(description) => {
                    let units: Vec<u16> = description.encode_utf16().collect();
                    let description = self.make_string(&units);
                    sys::napi_create_symbol(env, description, &mut out)
                }
                // Wire values never meet a live call.
                _ => sys::napi_get_undefined(env, &mut out),
            }
        };
        out
    }

    /// The object of `lib/computed.js`'s helpers.
    pub(super) fn helpers(&self) -> Result<Raw> {
        let reference = HELPERS.with(Cell::get);
        if reference.is_null() {
            return Err(StoreError::plain(
                "pi-workflows-native internal error: the JS helpers are not registered",
            ));
        }
        let mut helpers = ptr::null_mut();
        unsafe { sys::napi_get_reference_value(self.env, reference, &mut helpers) };
        Ok(helpers)
    }

    /// `helpers[name](...args)` of `lib/computed.js`: what it returns, or what it threw.
    pub fn helper(&self, name: &str, args: &[Js<'_>]) -> Result<Js<'_>> {
        let helpers = self.helpers()?;
        let function = self.global_property(helpers, name);
        let argv: Vec<Raw> = args.iter().map(|arg| self.to_raw(*arg)).collect();
        let mut out = ptr::null_mut();
        let status = unsafe {
            sys::napi_call_function(
                self.env,
                helpers,
                function,
                argv.len(),
                argv.as_ptr(),
                &mut out,
            )
        };
        self.check(status)?;
        Ok(self.view(out))
    }

    /// `receiver[name](...args)`: a method of a caller's value called by JavaScript (what it
    /// returns, or what it throws).
    pub fn invoke<'v>(&'v self, receiver: Js<'_>, name: &str, args: &[Js<'_>]) -> Result<Js<'v>> {
        let mut all = Vec::with_capacity(args.len() + 2);
        all.push(receiver);
        all.push(Js::String(name));
        all.extend_from_slice(args);
        self.helper("invoke", &all)
    }

    /// What the JavaScript `source` (a function body over `list`: the reference's own
    /// expression, src/js/lists.rs) returns, or what it throws.
    pub fn evaluate<'v>(&'v self, source: &str, list: Js<'_>) -> Result<Js<'v>> {
        self.helper("evaluate", &[Js::String(source), list])
    }

    /// `new Date(value).getTime()`.
    pub fn new_date(&self, value: Js<'_>) -> Result<f64> {
        match self.helper("date", &[value])? {
            Js::Number(ms) => Ok(ms),
            _ => Ok(f64::NAN),
        }
    }
}
