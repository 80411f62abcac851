//! The napi functions the live backend calls, for the crate's test executable only: Node
//! provides them to the addon at load, and the tests make wire calls only, so these are never
//! called.

macro_rules! never_called {
    ($($name:ident)*) => {
        $(
            #[no_mangle]
            extern "C" fn $name() {
                unreachable!(concat!(stringify!($name), " outside Node"));
            }
        )*
    };
}

never_called! {
    napi_call_function napi_coerce_to_number napi_coerce_to_string napi_create_bigint_int64
    napi_create_double napi_create_string_utf16 napi_create_symbol
    napi_get_and_clear_last_exception napi_get_array_length napi_get_boolean
    napi_get_dataview_info napi_get_date_value napi_get_element napi_get_global
    napi_get_named_property napi_get_null napi_get_prototype napi_get_typedarray_info
    napi_get_undefined napi_get_value_bool napi_get_value_double napi_get_value_string_utf16
    napi_has_own_property napi_is_array napi_is_dataview napi_is_exception_pending
    napi_is_typedarray napi_new_instance napi_create_reference napi_get_reference_value napi_instanceof napi_has_element napi_strict_equals napi_throw napi_typeof napi_get_property
}
