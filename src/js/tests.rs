//! The wire backend's semantics (the live backend is covered by the Jest specs, which run in
//! Node).

use super::*;
use crate::error::StoreError;
use serde_json::{json, Map, Value};

mod view {
    use super::*;

    fn tag(kind: &str, v: &str) -> Value {
        let mut map = Map::new();
        map.insert(TAG.into(), json!(kind));
        map.insert("v".into(), json!(v));
        Value::Object(map)
    }

    #[test]
    fn hex_decoding_stops_at_the_first_invalid_pair() {
        assert_eq!(buffer_from_hex("0fAB"), vec![0x0f, 0xab]);
        assert_eq!(buffer_from_hex("abc"), vec![0xab]);
        assert_eq!(buffer_from_hex("ab zz cd"), vec![0xab]);
        assert_eq!(buffer_from_hex("zz"), Vec::<u8>::new());
        assert_eq!(buffer_from_hex("abé0"), vec![0xab]);
    }

    #[test]
    fn strict_equality_keeps_javascript_types() {
        assert!(Js::of(&json!(1)).strict_eq_number(1.0));
        assert!(!Js::of(&json!("1")).strict_eq_number(1.0));
        assert!(!Js::Undefined.strict_eq_number(1.0));
        assert!(Js::of(&json!("a")).strict_eq_str("a"));
        assert!(!Js::Null.strict_eq(Js::Undefined));
        assert!(Js::of(&json!(2)).strict_eq(Js::of(&json!(2.0))));
        assert!(!Js::of(&tag("number", "NaN")).strict_eq(Js::of(&tag("number", "NaN"))));
    }

    #[test]
    fn templates_format_like_javascript() {
        assert_eq!(Js::Undefined.template().unwrap(), "undefined");
        assert_eq!(Js::of(&json!(1.5)).template().unwrap(), "1.5");
        assert_eq!(Js::of(&json!(["a", null, 1])).template().unwrap(), "a,,1");
        assert_eq!(Js::of(&tag("number", "-0")).template().unwrap(), "0");
        assert_eq!(Js::of(&tag("bigint", "12")).template().unwrap(), "12");
        assert_eq!(js_number_text(1e21), "1e+21");
        assert!(Js::of(&tag("symbol", "s")).template().is_err());
    }

    #[test]
    fn tags_decode_and_user_keys_stay_objects() {
        assert_eq!(Js::of(&tag("undefined", "")), Js::Undefined);
        assert!(Js::of(&tag("number", "-Infinity")) == Js::Number(f64::NEG_INFINITY));
        // A user object whose first key is not the tag is a plain object.
        let user = json!({"a": 1, "\u{0}": "undefined"});
        assert!(matches!(Js::of(&user), Js::Object(_)));
        let object = json!({"x": {"\u{0}": "undefined"}});
        assert_eq!(Js::of(&object).get("x").unwrap(), Js::Undefined);
    }

    #[test]
    fn property_reads_throw_like_v8() {
        let error = Js::Null.get("now").unwrap_err();
        assert_eq!(
            error,
            StoreError::Type("Cannot read properties of null (reading 'now')".into())
        );
        assert_eq!(Js::String("abc").get("length").unwrap(), Js::Number(3.0));
        assert_eq!(Js::Number(1.0).get("runId").unwrap(), Js::Undefined);
        let list = json!(["a"]);
        assert_eq!(Js::of(&list).get("0").unwrap(), Js::String("a"));
    }

    #[test]
    fn methods_name_the_source_expression() {
        assert_eq!(
            Js::Number(5.0)
                .method("runnerId", "startsWith")
                .unwrap_err(),
            StoreError::Type("runnerId.startsWith is not a function".into())
        );
        assert!(Js::String("x").method("runnerId", "startsWith").is_ok());
        assert!(Js::of(&json!([]))
            .method("options.controllers", "map")
            .is_ok());
        assert_eq!(
            Js::String("jobs")
                .method("options.controllers", "map")
                .unwrap_err(),
            StoreError::Type("options.controllers.map is not a function".into())
        );
    }

    // Checked against better-sqlite3 12 (`SELECT ? AS a, ? AS b`).
    #[test]
    fn binding_follows_better_sqlite3() {
        let bind2 = |values: &[Js<'_>]| bind_all(values, 2).map(|bound| bound.len());
        let array = json!(["x"]);
        let pair = json!(["x", "y"]);
        let nested = json!([["x"], 1]);
        let object = json!({"x": 1});
        assert_eq!(
            bind2(&[Js::Bool(true), Js::Number(1.0)]),
            Err(StoreError::Type(CANNOT_BIND.into()))
        );
        assert_eq!(bind2(&[Js::of(&array), Js::Number(1.0)]), Ok(2));
        assert_eq!(bind2(&[Js::of(&pair)]), Ok(2));
        assert_eq!(
            bind2(&[Js::of(&nested)]),
            Err(StoreError::Type(CANNOT_BIND.into()))
        );
        assert_eq!(
            bind2(&[Js::of(&object), Js::Number(1.0)]),
            Err(StoreError::Range(
                "Too few parameter values were provided".into()
            ))
        );
        assert_eq!(
            bind2(&[Js::Number(1.0), Js::Number(2.0), Js::of(&object)]),
            Ok(2)
        );
        assert_eq!(
            bind2(&[
                Js::of(&object),
                Js::of(&object),
                Js::Number(1.0),
                Js::Number(2.0)
            ]),
            Err(StoreError::Type(
                "You cannot specify named parameters in two different objects".into()
            ))
        );
        assert_eq!(
            bind2(&[Js::Number(1.0), Js::Number(2.0), Js::Bool(true)]),
            Err(StoreError::Type(CANNOT_BIND.into()))
        );
        assert_eq!(
            bind2(&[Js::Number(1.0), Js::Number(2.0), Js::Number(3.0)]),
            Err(StoreError::Range(
                "Too many parameter values were provided".into()
            ))
        );
        assert_eq!(
            bind2(&[Js::BigInt("9223372036854775808"), Js::Null]),
            Err(StoreError::Range(TOO_BIG.into()))
        );
        assert_eq!(
            Js::BigInt("-9223372036854775808").bind(),
            Ok(Bound::Integer(i64::MIN))
        );
        assert_eq!(Js::Number(1.0).bind(), Ok(Bound::Real(1.0)));
        assert_eq!(Js::Undefined.bind(), Ok(Bound::Null));
    }

    #[test]
    fn node_describes_received_values() {
        let hash = |value: Js<'_>| match hash_data(value) {
            Err(StoreError::Js { message, code, .. }) => (message, code),
            other => panic!("{other:?}"),
        };
        let (message, code) = hash(Js::Number(5.0));
        assert_eq!(message, "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received type number (5)");
        assert_eq!(code.as_deref(), Some("ERR_INVALID_ARG_TYPE"));
        assert!(hash(Js::Null).0.ends_with("Received null"));
        assert!(hash(Js::of(&json!([])))
            .0
            .ends_with("Received an instance of Array"));
        assert_eq!(node_received(Js::String("a'b")), "type string (\"a'b\")");
        assert_eq!(
            node_received(Js::String("abcdefghijklmnopqrstuvwxyz0123")),
            "type string ('abcdefghijklmnopqrstuvwx...)"
        );
    }
}

mod raw {
    use super::*;

    #[test]
    fn mixed_parameters_bind_as_better_sqlite3_binds_them() {
        let message = |params: &[Param<'_>]| match bind_params(params) {
            Ok(bound) => format!("{} bound", bound.len()),
            Err(StoreError::Type(m) | StoreError::Range(m)) => m,
            Err(other) => other.to_string(),
        };
        let one = json!(["a"]);
        let two = json!(["a", "b"]);
        let empty = json!([]);
        let object = json!({});
        let flag = json!(true);
        assert_eq!(message(&[Param::Js(Js::of(&one))]), "1 bound");
        assert_eq!(
            message(&[Param::Js(Js::of(&empty)), Param::int(1)]),
            "Too few parameter values were provided"
        );
        assert_eq!(
            message(&[Param::Js(Js::of(&two)), Param::int(1)]),
            "Too many parameter values were provided"
        );
        assert_eq!(
            message(&[Param::Js(Js::of(&object)), Param::Js(Js::of(&object))]),
            "You cannot specify named parameters in two different objects"
        );
        // A value of a type it refuses fails before the count does, even past the last one.
        assert_eq!(
            message(&[Param::Js(Js::of(&two)), Param::Js(Js::of(&flag))]),
            CANNOT_BIND
        );
        assert_eq!(message(&[Param::Js(Js::Undefined)]), "1 bound");
    }

    #[test]
    fn property_reads_of_wire_values_throw_on_undefined_and_null() {
        let object = json!({"a": null, "u": {"\u{0}": "undefined"}});
        let object = Js::of(&object);
        assert_eq!(object.get("a").unwrap(), Js::Null);
        assert_eq!(object.get("u").unwrap(), Js::Undefined);
        assert_eq!(Js::String("text").get("a").unwrap(), Js::Undefined);
        assert_eq!(
            Js::Undefined.get("a").unwrap_err(),
            StoreError::Type("Cannot read properties of undefined (reading 'a')".into())
        );
        assert_eq!(
            Js::String("\u{1f600}").get("length").unwrap(),
            Js::Number(2.0)
        );
        assert_eq!(Js::Number(5.0).get("length").unwrap(), Js::Undefined);
    }

    #[test]
    fn buffers_from_arrays_take_each_item_modulo_256() {
        let items = json!([
            "0x10",
            "12",
            " 7 ",
            "",
            null,
            true,
            [5],
            {},
            "1e1",
            300,
            -1,
            1.9,
            "inf"
        ]);
        assert_eq!(
            buffer_from(Js::of(&items), Encoding::Hex).unwrap(),
            vec![0x10, 0x0c, 7, 0, 0, 1, 5, 0, 10, 0x2c, 0xff, 1, 0]
        );
        assert!(buffer_from(Js::Number(5.0), Encoding::Utf8).is_err());
    }
}
