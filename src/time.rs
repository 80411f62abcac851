//! Epoch milliseconds to the text of JavaScript's `Date.prototype.toISOString`.
//!
//! Timestamps are parsed by the JS layer (so `new Date(string)` semantics stay exact); the core
//! only ever formats them, including the six-digit signed years JavaScript uses outside 0–9999.

/// `new Date(ms).toISOString()` for any `ms` within JavaScript's date range.
pub fn iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let ms_of_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    // Written digit by digit: `format!` cost more than the rest of a typical record.
    let mut text = Vec::with_capacity(27);
    if (0..=9999).contains(&year) {
        push_digits(&mut text, year as u64, 4);
    } else {
        text.push(if year < 0 { b'-' } else { b'+' });
        push_digits(&mut text, year.unsigned_abs(), 6);
    }
    let fields = [
        (b'-', u64::from(month), 2),
        (b'-', u64::from(day), 2),
        (b'T', (ms_of_day / 3_600_000) as u64, 2),
        (b':', (ms_of_day / 60_000 % 60) as u64, 2),
        (b':', (ms_of_day / 1000 % 60) as u64, 2),
        (b'.', (ms_of_day % 1000) as u64, 3),
    ];
    for (separator, value, width) in fields {
        text.push(separator);
        push_digits(&mut text, value, width);
    }
    text.push(b'Z');
    String::from_utf8(text).expect("ASCII digits and separators")
}

/// `value` in decimal, zero-padded to `width` digits (wider values keep all their digits).
fn push_digits(text: &mut Vec<u8>, mut value: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut start = digits.len();
    while value > 0 {
        start -= 1;
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
    }
    start = start.min(digits.len() - width);
    text.extend_from_slice(&digits[start..]);
}

/// The largest distance from the epoch a JavaScript `Date` holds (±100,000,000 days).
pub const MAX_JS_TIME: f64 = 8.64e15;

/// `new Date(ms).toISOString()` for a computed time such as `now + leaseMs`: JavaScript
/// throws `RangeError: Invalid time value` outside its date range (and for NaN).
pub fn js_iso(ms: f64) -> crate::error::Result<String> {
    if ms.is_nan() || ms.abs() > MAX_JS_TIME {
        return Err(crate::error::StoreError::Range("Invalid time value".into()));
    }
    Ok(iso(ms.trunc() as i64))
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::iso;

    #[test]
    fn formats_like_javascript() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_789_257_600_005), "2026-09-13T00:00:00.005Z");
        assert_eq!(iso(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso(8_640_000_000_000_000), "+275760-09-13T00:00:00.000Z");
        assert_eq!(iso(-8_640_000_000_000_000), "-271821-04-20T00:00:00.000Z");
        assert_eq!(iso(253_402_300_800_000), "+010000-01-01T00:00:00.000Z");
        assert_eq!(iso(-62_198_755_200_000), "-000001-01-01T00:00:00.000Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso(-62_167_219_200_000), "0000-01-01T00:00:00.000Z");
    }

    /// The digit-by-digit writer against `format!` over the whole date range.
    #[test]
    fn matches_format_everywhere() {
        let formatted = |ms: i64| {
            let (year, month, day) = super::civil_from_days(ms.div_euclid(86_400_000));
            let t = ms.rem_euclid(86_400_000);
            let year_text = if (0..=9999).contains(&year) {
                format!("{year:04}")
            } else if year < 0 {
                format!("-{:06}", -year)
            } else {
                format!("+{year:06}")
            };
            format!(
                "{year_text}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
                t / 3_600_000,
                t / 60_000 % 60,
                t / 1000 % 60,
                t % 1000
            )
        };
        let mut ms: i64 = -8_640_000_000_000_000;
        while ms <= 8_640_000_000_000_000 {
            assert_eq!(iso(ms), formatted(ms));
            ms += 86_399_999_999_937;
        }
    }

    #[test]
    fn computed_times_outside_the_date_range_are_range_errors() {
        use super::js_iso;
        assert_eq!(js_iso(8.64e15).unwrap(), "+275760-09-13T00:00:00.000Z");
        assert_eq!(js_iso(1.5).unwrap(), "1970-01-01T00:00:00.001Z");
        for ms in [
            8.64e15 + 1.0,
            -8.64e15 - 1.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert!(
                matches!(js_iso(ms), Err(crate::error::StoreError::Range(m)) if m == "Invalid time value")
            );
        }
    }
}
