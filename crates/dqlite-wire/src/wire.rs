//! Framing and field encoding of the dqlite wire protocol.
//!
//! Everything is little-endian and aligned to 8-byte words. A message is one
//! header word — body size in words (u32), type code (u8), schema revision
//! (u8), two unused bytes — followed by the body. Body fields are `uint64` /
//! `int64` / `double` (one word), pairs of `uint32` (one word together),
//! `text` (UTF-8, NUL-terminated, zero-padded to a word), `blob` (a length
//! word, then the bytes zero-padded to a word) and tuples:
//!
//! * a parameter tuple starts with a count byte and one type byte per value,
//!   the whole header zero-padded to a word, then the values;
//! * a row tuple has no count (the column count is known) and one four-bit
//!   type slot per column (low nibble first), zero-padded to a word.
//!
//! The connection's first eight bytes, before any message, are the protocol
//! version the client speaks.

use crate::error::{Error, Result};
use crate::value::{self, Value};

/// Bytes in a word.
pub const WORD: usize = 8;
/// Protocol version 1, the one every dqlite since 1.0 speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// Largest number of parameters a version-1 parameter tuple can carry.
pub const MAX_PARAMS: usize = 255;
/// Largest message body this client accepts from a server (words are a u32,
/// so the format allows 32 GiB; a reply that large is a bug or an attack).
pub const MAX_BODY_BYTES: usize = 1 << 30;

/// Marker word that ends a rows batch when more batches follow.
pub const ROWS_PART: u64 = 0xeeee_eeee_eeee_eeee;
/// Marker word that ends the last rows batch of a result.
pub const ROWS_DONE: u64 = 0xffff_ffff_ffff_ffff;

/// Round `n` up to a whole number of words.
pub fn pad_to_word(n: usize) -> usize {
    n.div_ceil(WORD) * WORD
}

/// The header word of every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Body length in words.
    pub words: u32,
    /// Request or response type code.
    pub kind: u8,
    /// Schema revision of the body; a newer revision only appends fields.
    pub revision: u8,
    /// Unused in protocol version 1.
    pub extra: u16,
}

impl Header {
    pub fn encode(&self) -> [u8; WORD] {
        let mut out = [0u8; WORD];
        out[0..4].copy_from_slice(&self.words.to_le_bytes());
        out[4] = self.kind;
        out[5] = self.revision;
        out[6..8].copy_from_slice(&self.extra.to_le_bytes());
        out
    }

    pub fn decode(word: [u8; WORD]) -> Header {
        Header {
            words: u32::from_le_bytes([word[0], word[1], word[2], word[3]]),
            kind: word[4],
            revision: word[5],
            extra: u16::from_le_bytes([word[6], word[7]]),
        }
    }

    /// Body length in bytes.
    pub fn body_len(&self) -> usize {
        self.words as usize * WORD
    }
}

/// Builds a message body field by field, then frames it.
#[derive(Debug, Default)]
pub struct Encoder {
    body: Vec<u8>,
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder { body: Vec::new() }
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.body.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.body.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.body.extend_from_slice(&v.to_bits().to_le_bytes());
        self
    }

    /// Two uint32 fields, which together fill one word.
    pub fn u32_pair(&mut self, a: u32, b: u32) -> &mut Self {
        self.body.extend_from_slice(&a.to_le_bytes());
        self.body.extend_from_slice(&b.to_le_bytes());
        self
    }

    /// A NUL-terminated text. A NUL inside the string cannot be represented
    /// (the server reads C strings) and is refused rather than truncated.
    pub fn text(&mut self, s: &str) -> Result<&mut Self> {
        if s.as_bytes().contains(&0) {
            return Err(Error::invalid_argument("text contains a NUL byte"));
        }
        self.body.extend_from_slice(s.as_bytes());
        let padded = pad_to_word(s.len() + 1);
        self.body.resize(self.body.len() + padded - s.len(), 0);
        Ok(self)
    }

    pub fn blob(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64);
        self.body.extend_from_slice(b);
        let padded = pad_to_word(b.len());
        self.body.resize(self.body.len() + padded - b.len(), 0);
        self
    }

    /// A parameter tuple. No parameters encode as nothing at all, which the
    /// server reads as "no parameters".
    pub fn params(&mut self, params: &[Value]) -> Result<&mut Self> {
        if params.is_empty() {
            return Ok(self);
        }
        if params.len() > MAX_PARAMS {
            return Err(Error::invalid_argument(format!(
                "{} parameters; protocol version 1 carries at most {MAX_PARAMS}",
                params.len()
            )));
        }
        let header_len = pad_to_word(1 + params.len());
        let start = self.body.len();
        self.body.resize(start + header_len, 0);
        self.body[start] = params.len() as u8;
        for (i, p) in params.iter().enumerate() {
            self.body[start + 1 + i] = p.param_code();
        }
        for p in params {
            self.value(p)?;
        }
        Ok(self)
    }

    fn value(&mut self, v: &Value) -> Result<()> {
        match v {
            Value::Integer(i) | Value::Unixtime(i) => {
                self.i64(*i);
            }
            Value::Float(f) => {
                self.f64(*f);
            }
            Value::Text(s) | Value::Iso8601(s) => {
                self.text(s)?;
            }
            Value::Blob(b) => {
                self.blob(b);
            }
            Value::Null => {
                self.u64(0);
            }
            Value::Boolean(b) => {
                self.u64(*b as u64);
            }
        }
        Ok(())
    }

    /// Encode a row tuple (what a server sends). Only the tests and fuzzers
    /// need this; a client never sends rows.
    pub fn row(&mut self, values: &[Value]) -> Result<&mut Self> {
        let header_len = pad_to_word(values.len().div_ceil(2));
        let start = self.body.len();
        self.body.resize(start + header_len, 0);
        for (i, v) in values.iter().enumerate() {
            let code = v.row_code();
            self.body[start + i / 2] |= if i % 2 == 0 { code } else { code << 4 };
        }
        for v in values {
            self.value(v)?;
        }
        Ok(self)
    }

    /// The body so far.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Frame the body as a message of the given type: header word + body.
    pub fn finish(self, kind: u8, revision: u8) -> Result<Vec<u8>> {
        debug_assert_eq!(self.body.len() % WORD, 0);
        let words = u32::try_from(self.body.len() / WORD)
            .map_err(|_| Error::invalid_argument("message body exceeds 2^32 words"))?;
        let header = Header {
            words,
            kind,
            revision,
            extra: 0,
        };
        let mut out = Vec::with_capacity(WORD + self.body.len());
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(&self.body);
        Ok(out)
    }
}

/// Reads fields from a message body, failing (never panicking) on a short or
/// malformed body.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::protocol(format!(
                "short body reading {what}: need {n} bytes at offset {}, have {}",
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn word(&mut self, what: &str) -> Result<[u8; WORD]> {
        let b = self.take(WORD, what)?;
        let mut w = [0u8; WORD];
        w.copy_from_slice(b);
        Ok(w)
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.word("uint64")?))
    }

    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.word("int64")?))
    }

    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(u64::from_le_bytes(self.word("double")?)))
    }

    pub fn u32_pair(&mut self) -> Result<(u32, u32)> {
        let w = self.word("uint32 pair")?;
        Ok((
            u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
            u32::from_le_bytes([w[4], w[5], w[6], w[7]]),
        ))
    }

    /// The next word without consuming it.
    pub fn peek_u64(&self) -> Option<u64> {
        let b = self.buf.get(self.pos..self.pos + WORD)?;
        let mut w = [0u8; WORD];
        w.copy_from_slice(b);
        Some(u64::from_le_bytes(w))
    }

    pub fn text(&mut self) -> Result<String> {
        let rest = &self.buf[self.pos..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Error::protocol("text without a terminating NUL"))?;
        let padded = pad_to_word(len + 1);
        let bytes = self.take(padded, "text")?;
        String::from_utf8(bytes[..len].to_vec())
            .map_err(|e| Error::protocol(format!("text is not UTF-8: {e}")))
    }

    pub fn blob(&mut self) -> Result<Vec<u8>> {
        let len = self.u64()?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.remaining())
            .ok_or_else(|| Error::protocol(format!("blob of {len} bytes overruns the body")))?;
        let bytes = self.take(pad_to_word(len), "blob")?;
        Ok(bytes[..len].to_vec())
    }

    /// A parameter tuple (what a client sends); used by tests and fuzzers.
    pub fn params(&mut self) -> Result<Vec<Value>> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let n = self.take(1, "parameter count")?[0] as usize;
        let codes = self.take(pad_to_word(1 + n) - 1, "parameter types")?[..n].to_vec();
        codes.iter().map(|&c| self.value(c)).collect()
    }

    /// A row tuple of `columns` values.
    pub fn row(&mut self, columns: usize) -> Result<Vec<Value>> {
        let header = self.take(pad_to_word(columns.div_ceil(2)), "row header")?;
        let mut out = Vec::with_capacity(columns);
        for i in 0..columns {
            let slot = header[i / 2];
            let code = if i % 2 == 0 { slot & 0x0f } else { slot >> 4 };
            out.push(self.value(code)?);
        }
        Ok(out)
    }

    fn value(&mut self, code: u8) -> Result<Value> {
        Ok(match code {
            value::INTEGER => Value::Integer(self.i64()?),
            value::FLOAT => Value::Float(self.f64()?),
            value::TEXT => Value::Text(self.text()?),
            value::BLOB => Value::Blob(self.blob()?),
            value::NULL => {
                self.u64()?;
                Value::Null
            }
            value::UNIXTIME => Value::Unixtime(self.i64()?),
            value::ISO8601 => Value::Iso8601(self.text()?),
            value::BOOLEAN => Value::Boolean(self.u64()? != 0),
            other => return Err(Error::protocol(format!("unknown value type code {other}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_words_type_revision_extra() {
        let h = Header {
            words: 258,
            kind: 7,
            revision: 1,
            extra: 0x0302,
        };
        assert_eq!(h.encode(), [2, 1, 0, 0, 7, 1, 2, 3]);
        assert_eq!(Header::decode(h.encode()), h);
        assert_eq!(h.body_len(), 2064);
    }

    #[test]
    fn text_is_nul_terminated_and_padded() {
        let mut e = Encoder::new();
        e.text("").unwrap();
        assert_eq!(e.body(), &[0u8; 8]);
        let mut e = Encoder::new();
        e.text("1234567").unwrap();
        assert_eq!(e.body(), b"1234567\0");
        let mut e = Encoder::new();
        e.text("12345678").unwrap();
        assert_eq!(e.body().len(), 16);
        assert_eq!(&e.body()[8..], &[0u8; 8]);
        assert!(Encoder::new().text("a\0b").is_err());
    }

    #[test]
    fn parameter_header_is_count_then_codes_padded() {
        let mut e = Encoder::new();
        e.params(&[Value::Integer(-1), Value::Text("x".into()), Value::Null])
            .unwrap();
        let b = e.body();
        assert_eq!(&b[..8], &[3, 1, 3, 5, 0, 0, 0, 0]);
        assert_eq!(&b[8..16], &(-1i64).to_le_bytes());
        assert_eq!(&b[16..24], b"x\0\0\0\0\0\0\0");
        assert_eq!(&b[24..32], &[0u8; 8]);
        // Seven values fill the first header word exactly; eight need two.
        let mut e = Encoder::new();
        e.params(&vec![Value::Null; 7]).unwrap();
        assert_eq!(e.body().len(), 8 + 7 * 8);
        let mut e = Encoder::new();
        e.params(&vec![Value::Null; 8]).unwrap();
        assert_eq!(e.body().len(), 16 + 8 * 8);
    }

    #[test]
    fn no_parameters_encode_as_nothing_and_too_many_are_refused() {
        let mut e = Encoder::new();
        e.params(&[]).unwrap();
        assert!(e.body().is_empty());
        assert!(Encoder::new().params(&vec![Value::Null; 256]).is_err());
        assert!(Encoder::new().params(&vec![Value::Null; 255]).is_ok());
    }

    #[test]
    fn row_header_uses_nibbles_low_first() {
        let mut e = Encoder::new();
        e.row(&[Value::Integer(1), Value::Blob(vec![9]), Value::Unixtime(3)])
            .unwrap();
        let b = e.body();
        assert_eq!(&b[..8], &[0x41, 0x09, 0, 0, 0, 0, 0, 0]);
        let mut d = Decoder::new(b);
        assert_eq!(
            d.row(3).unwrap(),
            vec![Value::Integer(1), Value::Blob(vec![9]), Value::Unixtime(3)]
        );
        assert!(d.is_empty());
    }

    #[test]
    fn decoder_fails_on_truncation_instead_of_panicking() {
        let mut e = Encoder::new();
        e.blob(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let full = e.body().to_vec();
        for cut in 0..full.len() {
            assert!(Decoder::new(&full[..cut]).blob().is_err(), "cut at {cut}");
        }
        assert_eq!(Decoder::new(&full).blob().unwrap().len(), 9);
        // A blob length larger than the body is refused before any allocation.
        let mut e = Encoder::new();
        e.u64(u64::MAX);
        assert!(Decoder::new(e.body()).blob().is_err());
        assert!(Decoder::new(b"abcdefgh").text().is_err());
        assert!(
            Decoder::new(&[0x0f, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
                .row(1)
                .is_err()
        );
    }
}
