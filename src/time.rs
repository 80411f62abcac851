//! Epoch milliseconds to the text of JavaScript's `Date.prototype.toISOString`.
//!
//! Timestamps are parsed by the JS layer (so `new Date(string)` semantics stay exact); the core
//! only ever formats them, including the six-digit signed years JavaScript uses outside 0–9999.

/// `new Date(ms).toISOString()` for any `ms` within JavaScript's date range.
pub fn iso(ms: i64) -> String {
    let mut text = String::with_capacity(27);
    push_iso(&mut text, ms);
    text
}

/// [`iso`] appended to `out`: written in place, digit by digit, into a stack buffer (a
/// `String` of its own, and `format!`, cost more than the rest of a typical record).
pub fn push_iso(out: &mut String, ms: i64) {
    let days = ms.div_euclid(MS_PER_DAY);
    let ms_of_day = ms.rem_euclid(MS_PER_DAY) as u32;
    let (year, month, day) = civil_from_days(days);
    // Sign and up to 20 year digits, then the 20 characters from the month on.
    let mut text = [0u8; 48];
    let magnitude = year.unsigned_abs();
    let head = if (0..=9999).contains(&year) {
        put_fixed(&mut text[..4], magnitude as u32)
    } else {
        text[0] = if year < 0 { b'-' } else { b'+' };
        match magnitude {
            // Every year of JavaScript's date range.
            0..=999_999 => 1 + put_fixed(&mut text[1..7], magnitude as u32),
            _ => put_digits(&mut text, 1, magnitude, 6),
        }
    };
    let tail = &mut text[head..head + 20];
    tail.copy_from_slice(b"-00-00T00:00:00.000Z");
    put_fixed(&mut tail[1..3], month);
    put_fixed(&mut tail[4..6], day);
    put_fixed(&mut tail[7..9], ms_of_day / 3_600_000);
    put_fixed(&mut tail[10..12], ms_of_day / 60_000 % 60);
    put_fixed(&mut tail[13..15], ms_of_day / 1000 % 60);
    put_fixed(&mut tail[16..19], ms_of_day % 1000);
    out.push_str(std::str::from_utf8(&text[..head + 20]).expect("ASCII digits and separators"));
}

/// Fills `digits` with `value` in decimal, zero-padded (`value` has no more digits than
/// `digits` holds); returns its length. Unrolled for the short fixed widths of a date.
fn put_fixed(digits: &mut [u8], mut value: u32) -> usize {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
    digits.len()
}

const MS_PER_DAY: i64 = 86_400_000;

/// Writes `value` in decimal at `at`, zero-padded to `width` digits (a wider value keeps all
/// its digits); returns the index after the last digit.
fn put_digits(text: &mut [u8], at: usize, value: u64, width: usize) -> usize {
    let mut length = width;
    let mut rest = value;
    for _ in 0..width {
        rest /= 10;
    }
    while rest > 0 {
        length += 1;
        rest /= 10;
    }
    let mut rest = value;
    for slot in text[at..at + length].iter_mut().rev() {
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    at + length
}

/// The largest distance from the epoch a JavaScript `Date` holds (±100,000,000 days).
pub const MAX_JS_TIME: f64 = 8.64e15;

/// Fails as `new Date(ms).toISOString()` does for a computed time such as `now + leaseMs`:
/// JavaScript throws `RangeError: Invalid time value` outside its date range (and for NaN).
pub fn check_js_time(ms: f64) -> crate::error::Result<()> {
    if ms.is_nan() || ms.abs() > MAX_JS_TIME {
        return Err(crate::error::StoreError::Range("Invalid time value".into()));
    }
    Ok(())
}

/// `new Date(ms).toISOString()` for a computed time (see [`check_js_time`]).
pub fn js_iso(ms: f64) -> crate::error::Result<String> {
    check_js_time(ms)?;
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

    /// `new Date(ms).toISOString()` as Node prints it, at the edges: the ends of the date
    /// range, the four-digit years' bounds, year 0 and -1, leap days, negative times.
    #[test]
    fn formats_like_javascript() {
        for (ms, javascript) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (1, "1970-01-01T00:00:00.001Z"),
            (8_640_000_000_000_000, "+275760-09-13T00:00:00.000Z"),
            (-8_640_000_000_000_000, "-271821-04-20T00:00:00.000Z"),
            (8_639_999_999_999_999, "+275760-09-12T23:59:59.999Z"),
            (-8_639_999_999_999_999, "-271821-04-20T00:00:00.001Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
            (253_402_300_800_000, "+010000-01-01T00:00:00.000Z"),
            (-62_167_219_200_000, "0000-01-01T00:00:00.000Z"),
            (-62_167_219_200_001, "-000001-12-31T23:59:59.999Z"),
            (-62_198_755_200_000, "-000001-01-01T00:00:00.000Z"),
            (-62_198_755_200_001, "-000002-12-31T23:59:59.999Z"),
            (-2_203_891_200_000, "1900-03-01T00:00:00.000Z"),
            (-2_203_891_200_001, "1900-02-28T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (951_868_799_999, "2000-02-29T23:59:59.999Z"),
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
            (-30_610_224_000_000, "1000-01-01T00:00:00.000Z"),
            (-377_705_116_800_000, "-009999-01-01T00:00:00.000Z"),
            (-377_705_116_800_001, "-010000-12-31T23:59:59.999Z"),
            (1_789_257_600_005, "2026-09-13T00:00:00.005Z"),
            (86_399_999, "1970-01-01T23:59:59.999Z"),
            (-86_400_000, "1969-12-31T00:00:00.000Z"),
            (-86_400_001, "1969-12-30T23:59:59.999Z"),
        ] {
            assert_eq!(iso(ms), javascript, "{ms}");
            let mut appended = String::from("x");
            super::push_iso(&mut appended, ms);
            assert_eq!(appended, format!("x{javascript}"));
        }
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
        // Beyond JavaScript's range (never formatted by the reference): all the year's digits.
        for ms in [
            100_000_000_000_000_000,
            -100_000_000_000_000_000,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(iso(ms), formatted(ms));
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
