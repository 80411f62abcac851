//! The caller's objects in a live call: property reads (getters, prototypes and Proxy traps
//! run), the tests better-sqlite3 and the reference apply to them (`Array.isArray`, plain
//! objects, byte views), their coercions and ArraySpeciesCreate.

use std::ffi::CString;
use std::ptr;

use napi::sys;

use super::super::value::{Cx, Js, Obj, Raw};
use crate::error::{Result, StoreError};

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
