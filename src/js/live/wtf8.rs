//! Strings with lone surrogates: V8 writes them as WTF-8 (each surrogate its own 3-byte
//! sequence), which is what better-sqlite3 binds.

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
