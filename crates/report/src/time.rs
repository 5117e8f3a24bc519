//! Wall-clock time as the result folders and HAR files write it: RFC 3339
//! UTC with milliseconds, and the `YYYYMMDD-HHMMSS` stamp of a folder's
//! name. Formatted here rather than with a date crate: it is the one
//! calendar computation the workspace needs.

use std::time::{SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 → (year, month 1–12, day 1–31), proleptic
/// Gregorian (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds,
/// e.g. `2023-11-14T22:13:20.000Z`.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        unix_ms % 1000
    )
}

/// Milliseconds since the Unix epoch, now (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `YYYYMMDD-HHMMSS` (UTC), for folder names.
pub fn stamp() -> String {
    // 2026-11-22T10:11:12.345Z → 20261122-101112
    rfc3339_ms(unix_ms())
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .take(15)
        .collect::<String>()
        .replace('T', "-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(rfc3339_ms(1_709_251_199_000), "2024-02-29T23:59:59.000Z");
    }

    #[test]
    fn stamp_is_a_folder_name() {
        let s = stamp();
        assert_eq!(s.len(), 15, "{s}");
        assert_eq!(&s[8..9], "-");
        assert!(s.chars().all(|c| c.is_ascii_digit() || c == '-'));
    }

    proptest! {
        #[test]
        fn dates_parse_back(ms in 0u64..253_402_300_800_000) {
            let s = rfc3339_ms(ms);
            prop_assert_eq!(s.len(), 24);
            let y: i64 = s[0..4].parse().unwrap();
            let mo: u32 = s[5..7].parse().unwrap();
            let d: u32 = s[8..10].parse().unwrap();
            prop_assert!((1..=12).contains(&mo) && (1..=31).contains(&d));
            // days_from_civil inverse check.
            let yy = if mo <= 2 { y - 1 } else { y };
            let era = yy.div_euclid(400);
            let yoe = yy - era * 400;
            let mp = (mo as i64 + 9) % 12;
            let doy = (153 * mp + 2) / 5 + d as i64 - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            let days = era * 146_097 + doe - 719_468;
            prop_assert_eq!(days, (ms / 1000 / 86_400) as i64);
        }
    }
}
