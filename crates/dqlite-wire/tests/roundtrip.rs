//! Property tests: every value, parameter tuple, row batch and request
//! survives encoding and decoding, and no byte string makes the decoders
//! panic.

use dqlite_wire::message::{response, Request, Response};
use dqlite_wire::wire::{Decoder, Encoder, Header, ROWS_DONE, ROWS_PART, WORD};
use dqlite_wire::Value;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    // Any Unicode without NUL (which the protocol cannot carry).
    any::<String>().prop_map(|s| s.replace('\0', ""))
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        any::<f64>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(Value::Float),
        text().prop_map(Value::Text),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::Blob),
        Just(Value::Null),
        text().prop_map(Value::Iso8601),
        any::<bool>().prop_map(Value::Boolean),
    ]
}

fn row_value() -> impl Strategy<Value = Value> {
    prop_oneof![value(), any::<i64>().prop_map(Value::Unixtime)]
}

proptest! {
    #[test]
    fn params_round_trip(params in proptest::collection::vec(value(), 0..40)) {
        let mut e = Encoder::new();
        e.params(&params).unwrap();
        prop_assert_eq!(e.body().len() % WORD, 0);
        let mut d = Decoder::new(e.body());
        prop_assert_eq!(d.params().unwrap(), params);
        prop_assert!(d.is_empty());
    }

    #[test]
    fn unixtime_parameters_travel_as_integers(t in any::<i64>()) {
        let mut e = Encoder::new();
        e.params(&[Value::Unixtime(t)]).unwrap();
        prop_assert_eq!(Decoder::new(e.body()).params().unwrap(), vec![Value::Integer(t)]);
    }

    #[test]
    fn rows_batches_round_trip(
        columns in proptest::collection::vec("[a-z_][a-z0-9_]{0,12}", 1..20),
        seed_rows in proptest::collection::vec(proptest::collection::vec(row_value(), 20), 0..30),
        more in any::<bool>(),
    ) {
        let rows: Vec<Vec<Value>> = seed_rows
            .into_iter()
            .map(|r| r.into_iter().take(columns.len()).collect())
            .collect();
        let mut e = Encoder::new();
        e.u64(columns.len() as u64);
        for c in &columns {
            e.text(c).unwrap();
        }
        for r in &rows {
            e.row(r).unwrap();
        }
        e.u64(if more { ROWS_PART } else { ROWS_DONE });
        let header = Header { words: (e.body().len() / WORD) as u32, kind: response::ROWS, revision: 0, extra: 0 };
        match Response::decode(&header, e.body()).unwrap() {
            Response::Rows(batch) => {
                prop_assert_eq!(batch.columns, columns);
                prop_assert_eq!(batch.rows, rows);
                prop_assert_eq!(batch.more, more);
            }
            other => prop_assert!(false, "decoded {:?}", other),
        }
    }

    #[test]
    fn exec_sql_requests_round_trip(sql in text(), params in proptest::collection::vec(value(), 0..10), db in any::<u32>()) {
        let frame = Request::ExecSql { db, sql: &sql, params: &params }.encode().unwrap();
        let mut w = [0u8; WORD];
        w.copy_from_slice(&frame[..WORD]);
        let h = Header::decode(w);
        prop_assert_eq!(h.body_len(), frame.len() - WORD);
        let mut d = Decoder::new(&frame[WORD..]);
        prop_assert_eq!(d.u64().unwrap(), u64::from(db));
        prop_assert_eq!(d.text().unwrap(), sql);
        prop_assert_eq!(d.params().unwrap(), params);
    }

    #[test]
    fn decoding_arbitrary_bodies_never_panics(kind in 0u8..12, body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let words = body.len() / WORD;
        let body = &body[..words * WORD];
        let h = Header { words: words as u32, kind, revision: 0, extra: 0 };
        let _ = Response::decode(&h, body);
        let _ = Decoder::new(body).params();
        let _ = Decoder::new(body).row(5);
    }
}
