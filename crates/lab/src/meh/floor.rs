//! The physical floor of a page load on the testbed's radio link: the time
//! a client that wastes nothing would take on the same stretch of the
//! same trace. It wakes the radio (the promotion, where an RRC model is
//! on), asks the edge's DNS once (one radio round trip), opens one TCP
//! connection and one TLS 1.3 session (a round trip each, end to end),
//! sends one request (a round trip), and from then on receives the page's
//! bytes as fast as the trace delivers them. No design removes any of
//! these: a load's time over its floor says how much is left to win.

use std::time::Duration;

use mewa_link::core::trace::DeliveryTrace;

use super::setup::RadioLink;

/// Where a load stands on the link, and what it must move.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloorInput {
    /// The radio's promotion from idle (zero without an RRC model).
    pub promotion: Duration,
    /// Round trip client ⇄ edge, ms (the DNS exchange).
    pub radio_rtt_ms: u64,
    /// Round trip edge ⇄ origin, ms.
    pub wired_rtt_ms: u64,
    /// Where in the trace the load's first packet falls, ms.
    pub trace_at_ms: u64,
    /// The page's bytes.
    pub bytes: u64,
}

/// The longest a floor is looked for: a trace that delivers nothing for
/// this long has no floor worth the name.
const HORIZON: Duration = Duration::from_secs(3600);

/// The time from `from` until `trace` has delivered `bytes` (its
/// opportunities from `from` on, repeating); `None` beyond [`HORIZON`].
fn drain(trace: &DeliveryTrace, from: Duration, bytes: u64) -> Option<Duration> {
    if bytes == 0 {
        return Some(Duration::ZERO);
    }
    let enough = |d: Duration| trace.capacity_bytes(from, from + d) >= bytes;
    if !enough(HORIZON) {
        return None;
    }
    // The least whole millisecond that carries the bytes (opportunities
    // fall on whole ms: the one at ms t counts for [t, t + 1)).
    let (mut lo, mut hi) = (0u64, HORIZON.as_millis() as u64);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if enough(Duration::from_millis(mid)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(Duration::from_millis(lo))
}

/// The floor of a load, s, on `radio`: promotion, one radio round trip
/// for DNS, three end-to-end round trips (TCP, TLS 1.3, the request),
/// then the page's bytes at the trace's pace from that moment (at the
/// fixed rate on a fixed link). `None` when the trace never delivers them.
pub fn floor_s(radio: &RadioLink, f: &FloorInput) -> Option<f64> {
    let rtt = Duration::from_millis(f.radio_rtt_ms + f.wired_rtt_ms);
    let before = f.promotion + Duration::from_millis(f.radio_rtt_ms) + rtt * 3;
    let transfer = match radio {
        RadioLink::Fixed { rate_bps } if *rate_bps > 0 => {
            Duration::from_secs_f64(f.bytes as f64 * 8.0 / *rate_bps as f64)
        }
        RadioLink::Fixed { .. } => return None,
        RadioLink::Trace { down, .. } => {
            drain(down, Duration::from_millis(f.trace_at_ms) + before, f.bytes)?
        }
    };
    Some((before + transfer).as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(bytes: u64) -> FloorInput {
        FloorInput {
            promotion: Duration::from_millis(400),
            radio_rtt_ms: 45,
            wired_rtt_ms: 20,
            trace_at_ms: 0,
            bytes,
        }
    }

    #[test]
    fn the_floor_is_round_trips_then_bytes_at_the_links_pace() {
        // 400 ms promotion + 45 ms DNS + 3 × 65 ms, then 1 MB at 8 Mbit/s.
        let fixed = RadioLink::Fixed {
            rate_bps: 8_000_000,
        };
        let f = floor_s(&fixed, &input(1_000_000)).expect("floor");
        assert!((f - (0.4 + 0.045 + 0.195 + 1.0)).abs() < 1e-9, "{f}");
        // One opportunity (1500 B) per ms is 12 Mbit/s.
        let trace = |text: &str| RadioLink::Trace {
            name: "t".into(),
            down: DeliveryTrace::parse(text).expect("trace"),
            up: DeliveryTrace::every_ms(1),
        };
        let every = trace("1\n");
        let f = floor_s(&every, &input(150_000)).expect("floor");
        // 100 opportunities: 100 ms.
        assert!((f - (0.64 + 0.1)).abs() < 1e-9, "{f}");
        // A trace that delivers nothing in its first second and then a
        // packet per ms: a load starting at its beginning waits for it,
        // one starting later does not.
        let mut text = String::new();
        for ms in 1000..2000 {
            text.push_str(&format!("{ms}\n"));
        }
        let gap = trace(&text);
        let at0 = floor_s(&gap, &input(15_000)).expect("floor");
        assert!((at0 - 1.01).abs() < 1e-9, "{at0}");
        let later = FloorInput {
            trace_at_ms: 500,
            ..input(15_000)
        };
        let f = floor_s(&gap, &later).expect("floor");
        assert!((f - (0.64 + 0.01)).abs() < 1e-9, "{f}");
        assert_eq!(floor_s(&RadioLink::Fixed { rate_bps: 0 }, &input(1)), None);
    }
}
