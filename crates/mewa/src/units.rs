//! The one unit grammar of mewa's command line: every duration takes a
//! unit (`150ms`, `2s`), every rate a unit (`4096kbit`, `32mbit`), every
//! size a unit (`500kB`, `2MB`); a bare number is refused with a message
//! that shows the accepted form. These are clap value parsers over
//! `mewa_link::core`'s, in the units each configuration keeps.

use std::time::Duration;

use mewa_link::core::{parse_duration, parse_rate, parse_size, parse_whole_secs};

/// A duration: `150ms`, `2s`, `250us`.
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration in whole milliseconds (`150ms`, `0.15s`).
pub fn ms(s: &str) -> Result<u64, String> {
    let d = duration(s)?;
    u64::try_from(d.as_millis()).map_err(|_| format!("{s}: too long"))
}

/// A round trip in whole milliseconds, 1 ms to 10 s.
pub fn rtt_ms(s: &str) -> Result<u64, String> {
    match ms(s)? {
        ms @ 1..=10_000 => Ok(ms),
        _ => Err(format!("{s}: give a round trip between 1ms and 10s")),
    }
}

/// A duration in whole seconds (`60s`, `2m` is not a unit: `120s`).
pub fn secs(s: &str) -> Result<u64, String> {
    parse_whole_secs(s).map_err(|e| e.to_string())
}

/// Whole seconds that fit a `u32`, the width of a hint's TTL and of a
/// `Cache-Control` max-age.
pub fn secs_u32(s: &str) -> Result<u32, String> {
    u32::try_from(secs(s)?).map_err(|_| format!("{s}: too long"))
}

/// A timeout: a duration above zero, since a zero one would give up
/// before anything could answer.
pub fn timeout(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err(format!("{s}: a timeout must be above 0 (e.g. 2s)")),
        d => Ok(d),
    }
}

/// A round trip above 0 and up to 10 s, fractions of a millisecond kept
/// (`45ms`, `12.5ms`), for what a model or a plan assumes.
pub fn rtt(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if !d.is_zero() && d <= Duration::from_secs(10) => Ok(d),
        _ => Err(format!("{s}: give a round trip above 0 and at most 10s")),
    }
}

/// A duration in seconds with a fraction (`8s`, `0.5s`, `500ms`).
pub fn secs_f64(s: &str) -> Result<f64, String> {
    duration(s).map(|d| d.as_secs_f64())
}

/// A rate in bit/s: `32mbit`, `4096kbit`.
pub fn rate(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

/// A rate in whole kbit/s: `4096kbit`, `2mbit`.
pub fn kbit(s: &str) -> Result<u64, String> {
    let bps = rate(s)?;
    if bps % 1000 != 0 {
        return Err(format!("{s}: give whole kbit/s (e.g. 512kbit)"));
    }
    Ok(bps / 1000)
}

/// A size in bytes: `500kB`, `2MB`, `64KiB`.
pub fn size(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// A size in bytes that fits memory (`usize`).
pub fn size_usize(s: &str) -> Result<usize, String> {
    usize::try_from(size(s)?).map_err(|_| format!("{s}: too large"))
}

/// `on` or `off` (`1`/`0`, `true`/`false` too).
pub fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("`{s}`: give on or off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_quantity_takes_its_unit_and_a_bare_number_shows_the_form() {
        assert_eq!(rtt_ms("75ms"), Ok(75));
        assert_eq!(rtt_ms("0.15s"), Ok(150));
        for bad in ["100", "0ms", "11s", "fast"] {
            assert!(rtt_ms(bad).is_err(), "{bad}");
        }
        assert!(rtt_ms("100").unwrap_err().contains("150ms"));
        assert_eq!(secs("60s"), Ok(60));
        assert!(secs("60").is_err() && secs("1.5s").is_err());
        assert_eq!(secs_f64("500ms"), Ok(0.5));
        assert_eq!(secs_u32("300s"), Ok(300));
        assert!(secs_u32("300").unwrap_err().contains("2s"));
        assert_eq!(timeout("2s"), Ok(Duration::from_secs(2)));
        assert!(timeout("0s").is_err() && timeout("2000").is_err());
        assert_eq!(rtt("12.5ms"), Ok(Duration::from_micros(12_500)));
        assert!(rtt("0ms").is_err() && rtt("11s").is_err() && rtt("45").is_err());
        assert_eq!(rate("32mbit"), Ok(32_000_000));
        assert!(rate("512").unwrap_err().contains("4096kbit"));
        assert_eq!(kbit("4096kbit"), Ok(4096));
        assert_eq!(kbit("2mbit"), Ok(2000));
        assert!(kbit("1500bit").is_err());
        assert_eq!(size("500kB"), Ok(500_000));
        assert!(size("500000").unwrap_err().contains("500kB"));
        assert_eq!(on_off("on"), Ok(true));
        assert_eq!(on_off("0"), Ok(false));
        assert!(on_off("yes").is_err());
    }
}
