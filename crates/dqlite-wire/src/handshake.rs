//! Telling a dqlite node from another service by the first reply of a
//! connection.
//!
//! A wrong port often reaches some other server (HTTP, SSH, a database),
//! which answers the protocol version and the first request with bytes of
//! its own protocol. Read as a dqlite header, `HTTP/1.1` is a 10 GB message
//! of an unknown type. So the first reply must have a known response type and
//! a small body (every first request is small: who leads, open, register)
//! and must decode; otherwise the address is reported as
//! [`ErrorKind::NotDqlite`], with the bytes that came, and is not retried
//! like a node that is merely slow.

use crate::budget::{Budget, ReplyLimits};
use crate::error::{Error, ErrorKind, Outcome, Result};
use crate::message::{response, Response};
use crate::wire::{Header, WORD};

/// The largest first reply that can be dqlite's (a leader's address, a
/// failure message).
const FIRST_REPLY_BYTES: usize = 64 << 10;

fn not_dqlite(address: &str, detail: String) -> Error {
    let kind = ErrorKind::NotDqlite {
        address: address.to_owned(),
        detail,
    };
    Error::new(kind, Outcome::NotApplied)
}

/// The first header of a connection to `address`, read from `word`: a known
/// response type and a small body, or another protocol's bytes.
pub(crate) fn check_header(address: &str, word: [u8; WORD], header: &Header) -> Result<()> {
    if header.kind <= response::EMPTY && header.body_len() <= FIRST_REPLY_BYTES {
        return Ok(());
    }
    let detail = format!(
        "it replied {}, which is not a dqlite message",
        printable(&word)
    );
    Err(not_dqlite(address, detail))
}

/// The first reply of a connection to `address`, decoded.
pub(crate) fn decode(address: &str, header: &Header, body: &[u8]) -> Result<Response> {
    let mut budget = Budget::new(ReplyLimits::UNLIMITED);
    Response::decode_within(header, body, &mut budget).map_err(|e| {
        not_dqlite(
            address,
            format!("its first reply is not a dqlite message: {e}"),
        )
    })
}

/// Bytes of another protocol as text, for a message: `"HTTP/1.1"`.
fn printable(bytes: &[u8]) -> String {
    let text: String = bytes
        .iter()
        .map(|&b| match b {
            b' '..=b'~' => (b as char).to_string(),
            _ => format!("\\x{b:02x}"),
        })
        .collect();
    format!("\"{text}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_answer_is_not_dqlite_and_says_what_came() {
        let word = *b"HTTP/1.1";
        let e = check_header("h:1", word, &Header::decode(word)).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::NotDqlite { .. }));
        assert!(e.to_string().contains("it replied \"HTTP/1.1\""), "{e}");
        let word = [1, 0, 0, 0, response::SERVER, 0, 0, 0];
        assert!(check_header("h:1", word, &Header::decode(word)).is_ok());
        let word = [0xff, 0xff, 0, 0, response::SERVER, 0, 0, 0];
        assert!(
            check_header("h:1", word, &Header::decode(word)).is_err(),
            "too large"
        );
        assert_eq!(printable(&[0, b'a']), "\"\\x00a\"");
    }
}
