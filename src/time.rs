//! Epoch milliseconds to the text of JavaScript's `Date.prototype.toISOString`.
//!
//! Timestamps are parsed by the JS layer (so `new Date(string)` semantics stay exact); the core
//! only ever formats them, including the six-digit signed years JavaScript uses outside 0–9999.

/// `new Date(ms).toISOString()` for any `ms` within JavaScript's date range.
pub fn iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let ms_of_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let hours = ms_of_day / 3_600_000;
    let minutes = ms_of_day / 60_000 % 60;
    let seconds = ms_of_day / 1000 % 60;
    let millis = ms_of_day % 1000;
    let year_text = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    format!("{year_text}-{month:02}-{day:02}T{hours:02}:{minutes:02}:{seconds:02}.{millis:03}Z")
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
