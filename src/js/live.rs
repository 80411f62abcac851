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

use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::ptr;

use napi::sys;

use super::value::{Cx, Js, Obj, Raw, ReadString};
use crate::error::{Result, StoreError};

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

/// The byte-view kinds better-sqlite3 and Node accept, with their element sizes.
fn element_size(kind: sys::napi_typedarray_type) -> usize {
    match kind {
        sys::TypedarrayType::int16_array | sys::TypedarrayType::uint16_array => 2,
        sys::TypedarrayType::int32_array
        | sys::TypedarrayType::uint32_array
        | sys::TypedarrayType::float32_array => 4,
        sys::TypedarrayType::float64_array
        | sys::TypedarrayType::bigint64_array
        | sys::TypedarrayType::biguint64_array => 8,
        _ => 1,
    }
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
    fn read_view(&self, object: Raw, name: &str, value: Raw) -> Js<'_> {
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

    fn global_property(&self, object: Raw, name: &str) -> Raw {
        let name = CString::new(name).unwrap_or_default();
        let mut out = ptr::null_mut();
        unsafe { sys::napi_get_named_property(self.env, object, name.as_ptr(), &mut out) };
        out
    }

    /// The JS layer's `Array` (the caller's realm: under Jest, the test's).
    fn array_constructor(&self) -> Result<Raw> {
        if self.array_constructor.get().is_null() {
            let helpers = self.helpers()?;
            self.array_constructor
                .set(self.global_property(helpers, "Array"));
        }
        Ok(self.array_constructor.get())
    }

    fn globals(&self) {
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
    fn foreign_error(&self, error: Raw) -> bool {
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
    fn helpers(&self) -> Result<Raw> {
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

    /// `new Date(value).getTime()`.
    pub fn new_date(&self, value: Js<'_>) -> Result<f64> {
        match self.helper("date", &[value])? {
            Js::Number(ms) => Ok(ms),
            _ => Ok(f64::NAN),
        }
    }
}

impl<'a> Obj<'a> {
    /// The handle.
    pub fn raw(self) -> Raw {
        self.raw
    }

    /// The call's context.
    pub fn cx(self) -> &'a Cx {
        self.cx
    }

    /// `object.name` (getters, prototypes and Proxy traps run).
    pub fn get(self, name: &str) -> Result<Js<'a>> {
        Ok(self.get_with_handle(name)?.0)
    }

    /// [`Obj::get`] with the handle of the value read, for a record that hands the caller's
    /// value back as it is (`None` when the read went through the caller's realm).
    pub fn get_with_handle(self, name: &str) -> Result<(Js<'a>, Option<Raw>)> {
        let key = CString::new(name).map_err(|_| StoreError::plain("property name with NUL"))?;
        let mut out = ptr::null_mut();
        let status =
            unsafe { sys::napi_get_named_property(self.cx.env, self.raw, key.as_ptr(), &mut out) };
        match self.cx.check(status) {
            Ok(()) => Ok((self.cx.read_view(self.raw, name, out), Some(out))),
            // V8 itself refused the read (a revoked Proxy): read again in the caller's realm,
            // so that its TypeError is that realm's (only a V8 error of the addon's realm,
            // while the JS layer runs in another, as under Jest, is read twice).
            Err(StoreError::Thrown(error)) if self.cx.foreign_error(error as Raw) => Ok((
                self.cx.helper("get", &[Js::Live(self), Js::String(name)])?,
                None,
            )),
            Err(error) => Err(error),
        }
    }

    /// `object[name] ?? {}` handed back to the caller as it is: the value's handle, or a `{}`
    /// of the JS layer's realm for a nullish one (as the reference's literal makes it); `None`
    /// when the read has no handle ([`Obj::get_with_handle`]).
    pub fn get_handle_or_empty_object(self, name: &str) -> Result<Option<Raw>> {
        Ok(match self.get_with_handle(name)? {
            (value, Some(handle)) if !value.is_nullish() => Some(handle),
            (_, Some(_)) => match self.cx.helper("emptyObject", &[])? {
                Js::Live(empty) => Some(empty.raw()),
                _ => None,
            },
            (_, None) => None,
        })
    }

    /// `object[index]`.
    pub fn get_index(self, index: u32) -> Result<Js<'a>> {
        let mut out = ptr::null_mut();
        let status = unsafe { sys::napi_get_element(self.cx.env, self.raw, index, &mut out) };
        self.cx.check(status)?;
        Ok(self.cx.view(out))
    }

    /// `index in object` (a Proxy's `has` trap runs).
    pub fn has_index(self, index: u32) -> Result<bool> {
        let mut has = false;
        let status = unsafe { sys::napi_has_element(self.cx.env, self.raw, index, &mut has) };
        self.cx.check(status)?;
        Ok(has)
    }

    /// `typeof object`: `"function"` or `"object"`.
    pub fn type_of(self) -> &'static str {
        let mut kind = 0;
        unsafe { sys::napi_typeof(self.cx.env, self.raw, &mut kind) };
        if kind == sys::ValueType::napi_function {
            "function"
        } else {
            "object"
        }
    }

    /// `Array.isArray(object)` (a Proxy of an array is one; a revoked Proxy throws).
    pub fn is_array(self) -> Result<bool> {
        // An ordinary array needs no call; anything else (a Proxy) asks JavaScript.
        if self.is_js_array() {
            return Ok(true);
        }
        Ok(self.cx.helper("isArray", &[Js::Live(self)])? == Js::Bool(true))
    }

    /// V8's own `IsArray()` (a JSArray, never a Proxy): what better-sqlite3 spreads.
    pub fn is_js_array(self) -> bool {
        let mut b = false;
        unsafe { sys::napi_is_array(self.cx.env, self.raw, &mut b) };
        b
    }

    /// better-sqlite3's plain object test: the prototype is `null` or the `Object.prototype` of
    /// the object's realm (better-sqlite3 asks V8 for the creation context, which napi cannot:
    /// another realm's `Object.prototype` is known by having no prototype and being its
    /// `constructor`'s `prototype`).
    pub fn is_plain(self) -> Result<bool> {
        self.cx.globals();
        let env = self.cx.env;
        let mut prototype = ptr::null_mut();
        let status = unsafe { sys::napi_get_prototype(env, self.raw, &mut prototype) };
        self.cx.check(status)?;
        let mut kind = 0;
        unsafe { sys::napi_typeof(env, prototype, &mut kind) };
        if kind == sys::ValueType::napi_null {
            return Ok(true);
        }
        let mut same = false;
        unsafe {
            sys::napi_strict_equals(env, prototype, self.cx.object_prototype.get(), &mut same)
        };
        if same {
            return Ok(true);
        }
        let mut above = ptr::null_mut();
        let status = unsafe { sys::napi_get_prototype(env, prototype, &mut above) };
        self.cx.check(status)?;
        unsafe { sys::napi_typeof(env, above, &mut kind) };
        if kind != sys::ValueType::napi_null {
            return Ok(false);
        }
        let realm_object = Obj {
            cx: self.cx,
            raw: prototype,
        };
        let mut own = false;
        let key = self
            .cx
            .make_string(&"constructor".encode_utf16().collect::<Vec<_>>());
        unsafe { sys::napi_has_own_property(env, prototype, key, &mut own) };
        if !own {
            return Ok(false);
        }
        Ok(match realm_object.get("constructor")? {
            Js::Live(constructor) if constructor.type_of() == "function" => {
                match constructor.get("prototype")? {
                    Js::Live(back) => back.strict_eq(realm_object),
                    _ => false,
                }
            }
            _ => false,
        })
    }

    /// The viewed bytes of a Buffer, typed array or DataView (`None` for any other object).
    pub fn bytes(self) -> Option<Vec<u8>> {
        let env = self.cx.env;
        let (mut typed, mut view) = (false, false);
        unsafe { sys::napi_is_typedarray(env, self.raw, &mut typed) };
        let mut data: *mut std::ffi::c_void = ptr::null_mut();
        let mut length = 0usize;
        if typed {
            let mut kind = 0;
            let mut buffer = ptr::null_mut();
            let mut offset = 0;
            unsafe {
                sys::napi_get_typedarray_info(
                    env,
                    self.raw,
                    &mut kind,
                    &mut length,
                    &mut data,
                    &mut buffer,
                    &mut offset,
                )
            };
            length *= element_size(kind);
        } else {
            unsafe { sys::napi_is_dataview(env, self.raw, &mut view) };
            if !view {
                return None;
            }
            let mut buffer = ptr::null_mut();
            let mut offset = 0;
            unsafe {
                sys::napi_get_dataview_info(
                    env,
                    self.raw,
                    &mut length,
                    &mut data,
                    &mut buffer,
                    &mut offset,
                )
            };
        }
        if data.is_null() || length == 0 {
            return Some(Vec::new());
        }
        // SAFETY: napi reports `length` viewed bytes at `data` (offset applied).
        Some(unsafe { std::slice::from_raw_parts(data as *const u8, length) }.to_vec())
    }

    /// `${object}` (ToString: `toString`/`valueOf`/`Symbol.toPrimitive` run, and throw what
    /// they throw).
    pub fn to_text(self) -> Result<Js<'a>> {
        self.cx.helper("string", &[Js::Live(self)])
    }

    /// `+object` (ToNumber).
    pub fn to_number(self) -> Result<f64> {
        match self.cx.helper("number", &[Js::Live(self)])? {
            Js::Number(n) => Ok(n),
            _ => Ok(f64::NAN),
        }
    }

    /// ArraySpeciesCreate(object, length) as `map` and `flatMap` run it before their first
    /// item: `object.constructor` is read; `undefined` or the caller's realm's `Array` make a
    /// plain array (nothing more is read), any other value goes to JavaScript
    /// (`speciesCreate` in lib/computed.js: `Symbol.species` read, a species constructor called
    /// with `length`, or V8's TypeError). The array made is not used: the domain code reads the
    /// caller's list, and what a species constructor's object would do with the mapped items
    /// (their `defineProperty`) is not reproduced.
    pub fn species_create(self, length: u32) -> Result<()> {
        match self.get("constructor")? {
            Js::Undefined => Ok(()),
            Js::Live(constructor) if constructor.is_raw(self.cx.array_constructor()?) => Ok(()),
            other => self
                .cx
                .helper("speciesCreate", &[other, Js::Number(f64::from(length))])
                .map(drop),
        }
    }

    /// `self === raw`.
    fn is_raw(self, raw: Raw) -> bool {
        let mut same = false;
        unsafe { sys::napi_strict_equals(self.cx.env, self.raw, raw, &mut same) };
        same
    }

    /// `a === b` for two objects.
    pub fn strict_eq(self, other: Obj<'_>) -> bool {
        self.is_raw(other.raw)
    }

    /// `object.constructor.name`, as Node's messages read it (`None` when it is not a string
    /// or the reads throw).
    pub fn constructor_name(self) -> Option<&'a str> {
        match self.get("constructor").ok()? {
            Js::Live(constructor) => constructor.get("name").ok()?.as_str(),
            _ => None,
        }
    }
}

/// The WTF-8 bytes of UTF-16 `units` (what V8 writes for a string with lone surrogates: each
/// as its own 3-byte sequence).
pub fn wtf8(units: &[u16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(units.len() * 3);
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok(c) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            Err(lone) => {
                let unit = u32::from(lone.unpaired_surrogate());
                out.push(0xe0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3f) as u8);
                out.push(0x80 | (unit & 0x3f) as u8);
            }
        }
    }
    out
}

/// The UTF-16 units of WTF-8 `bytes` (the inverse of [`wtf8`]).
pub fn wtf8_units(bytes: &[u8]) -> Vec<u16> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let lead = bytes[at];
        let (width, initial) = match lead {
            0x00..=0x7f => (1, u32::from(lead)),
            0xc0..=0xdf => (2, u32::from(lead & 0x1f)),
            0xe0..=0xef => (3, u32::from(lead & 0x0f)),
            _ => (4, u32::from(lead & 0x07)),
        };
        let mut code = initial;
        for byte in bytes.iter().skip(at + 1).take(width - 1) {
            code = (code << 6) | u32::from(byte & 0x3f);
        }
        at += width;
        if code >= 0x10000 {
            let code = code - 0x10000;
            out.push(0xd800 | (code >> 10) as u16);
            out.push(0xdc00 | (code & 0x3ff) as u16);
        } else {
            out.push(code as u16);
        }
    }
    out
}
