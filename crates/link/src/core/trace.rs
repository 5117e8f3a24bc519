//! Link traces: mahimahi delivery-opportunity traces and delay traces.
//!
//! A **delivery trace** (mahimahi `mm-link` format) has one integer millisecond
//! timestamp per line; each line is one opportunity to deliver a 1500-byte
//! packet; a timestamp repeated n times is n opportunities in that millisecond;
//! the trace repeats when it ends, with a period equal to its last timestamp
//! (mahimahi `link_queue.cc`). A **delay trace** (mewa's own) has lines
//! `<ms> <one-way delay ms>`: from that time on the delay is that value; after
//! the last line the last value holds.

use std::time::Duration;

/// Bytes one delivery opportunity carries (mahimahi's MTU-sized packet).
pub const OPPORTUNITY_BYTES: usize = 1500;

/// Why a trace file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// A line is not what the format allows.
    #[error("line {line}: {message}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// Timestamps go backwards.
    #[error("line {line}: timestamp {ms} ms is earlier than the previous line's {prev} ms; traces must not go back in time")]
    Backwards {
        /// 1-based line number.
        line: usize,
        /// The timestamp on this line.
        ms: u64,
        /// The previous timestamp.
        prev: u64,
    },
    /// No usable line.
    #[error("the trace has no timestamps")]
    Empty,
    /// A delivery trace whose last timestamp is 0 cannot repeat.
    #[error("the trace must last a nonzero time (its last timestamp is 0 ms)")]
    ZeroPeriod,
}

/// A mahimahi delivery-opportunity trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryTrace {
    /// Opportunity timestamps in ms, non-decreasing.
    ms: Vec<u64>,
}

impl DeliveryTrace {
    /// Parses mahimahi trace text. Blank lines and `#` comments are ignored.
    pub fn parse(text: &str) -> Result<DeliveryTrace, TraceError> {
        let mut ms = Vec::new();
        let mut prev = 0u64;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let v: u64 = line.parse().map_err(|_| TraceError::Line {
                line: i + 1,
                message: format!(
                    "expected a whole number of milliseconds, found {:?}",
                    truncate(line)
                ),
            })?;
            if v < prev {
                return Err(TraceError::Backwards {
                    line: i + 1,
                    ms: v,
                    prev,
                });
            }
            prev = v;
            ms.push(v);
        }
        if ms.is_empty() {
            return Err(TraceError::Empty);
        }
        if prev == 0 {
            return Err(TraceError::ZeroPeriod);
        }
        Ok(DeliveryTrace { ms })
    }

    /// A constant rate of one opportunity every `1/per_ms` ms (`1` = 12 Mbit/s).
    pub fn every_ms(n: u64) -> DeliveryTrace {
        DeliveryTrace { ms: vec![n.max(1)] }
    }

    /// Period after which the trace repeats.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.ms.last().copied().unwrap_or(1))
    }

    /// Opportunities per period.
    pub fn opportunities(&self) -> usize {
        self.ms.len()
    }

    /// Mean rate the trace allows, bit/s.
    pub fn mean_bps(&self) -> f64 {
        (self.ms.len() * OPPORTUNITY_BYTES * 8) as f64 / self.period().as_secs_f64()
    }

    /// Bytes the trace allows in [from, to) (opportunities at ms t with
    /// from ≤ t < to), counting repetitions.
    pub fn capacity_bytes(&self, from: Duration, to: Duration) -> u64 {
        self.count_before(to)
            .saturating_sub(self.count_before(from))
            * OPPORTUNITY_BYTES as u64
    }

    /// Opportunities at times < `t`. Cycle k holds the times k·p + m for every
    /// line m (so a line equal to the period p falls on the next cycle's start).
    fn count_before(&self, t: Duration) -> u64 {
        let p = self.ms[self.ms.len() - 1];
        // Whole milliseconds, rounded up: an opportunity at m ms is before t
        // exactly when m < ceil(t).
        let t = t.as_nanos().div_ceil(1_000_000) as u64;
        // Cycles k < full lie entirely before t (their last time k·p + p < t).
        let full = if t > p { (t - 1) / p } else { 0 };
        let mut n = full * self.ms.len() as u64;
        let mut k = full;
        while k * p < t {
            n += self.ms.partition_point(|&m| k * p + m < t) as u64;
            k += 1;
        }
        n
    }
}

/// Walks a delivery trace's opportunities in time order, forever.
#[derive(Debug, Clone)]
pub struct TraceCursor {
    idx: usize,
    /// Link time (ms) of the trace's time 0 in the current cycle; negative
    /// after [`TraceCursor::rewind`] to a moment later in the trace than the
    /// link's clock (the next opportunity is never before the link's now).
    base_ms: i64,
}

impl TraceCursor {
    /// A cursor at the first opportunity.
    pub fn new() -> Self {
        TraceCursor { idx: 0, base_ms: 0 }
    }

    /// Time of the next opportunity.
    pub fn peek(&self, trace: &DeliveryTrace) -> Duration {
        let t = self.base_ms.saturating_add_unsigned(trace.ms[self.idx]);
        Duration::from_millis(u64::try_from(t).unwrap_or(0))
    }

    /// Moves the cursor so that the trace's moment `at_ms` (modulo its
    /// period) falls at link time `now_ms`: the next opportunity is the
    /// first at or after `at_ms`. Why: two loads compared back to back
    /// should see the same stretch of a trace, not two different ones.
    pub fn rewind(&mut self, trace: &DeliveryTrace, at_ms: u64, now_ms: u64) {
        let period = trace.ms[trace.ms.len() - 1].max(1);
        let at = at_ms % period;
        // `at` < period = the last line, so some line is at or after it.
        self.idx = trace.ms.partition_point(|&m| m < at);
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        self.base_ms = now.saturating_sub(i64::try_from(at).unwrap_or(i64::MAX));
    }

    /// Moves past the next opportunity.
    pub fn advance(&mut self, trace: &DeliveryTrace) {
        self.idx += 1;
        if self.idx == trace.ms.len() {
            self.idx = 0;
            self.base_ms = self
                .base_ms
                .saturating_add_unsigned(trace.ms[trace.ms.len() - 1]);
        }
    }
}

impl Default for TraceCursor {
    fn default() -> Self {
        Self::new()
    }
}

/// A one-way delay that changes over time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayTrace {
    /// (from ms, delay) steps, time non-decreasing.
    steps: Vec<(u64, Duration)>,
}

impl DelayTrace {
    /// Parses `<ms> <delay ms>` lines (delay may have a fraction). Blank lines
    /// and `#` comments are ignored.
    pub fn parse(text: &str) -> Result<DelayTrace, TraceError> {
        let mut steps = Vec::new();
        let mut prev = 0u64;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |m: &str| TraceError::Line {
                line: i + 1,
                message: format!("{m}, found {:?}", truncate(line)),
            };
            let mut it = line.split_whitespace();
            let (Some(t), Some(d), None) = (it.next(), it.next(), it.next()) else {
                return Err(bad("expected two fields: <ms> <delay ms>"));
            };
            let t: u64 = t
                .parse()
                .map_err(|_| bad("expected a whole number of milliseconds first"))?;
            let d: f64 = d
                .parse()
                .map_err(|_| bad("expected a delay in milliseconds second"))?;
            if !(d.is_finite() && (0.0..=3_600_000.0).contains(&d)) {
                return Err(bad("delay must be between 0 and 3600000 ms"));
            }
            if t < prev {
                return Err(TraceError::Backwards {
                    line: i + 1,
                    ms: t,
                    prev,
                });
            }
            prev = t;
            steps.push((t, Duration::from_secs_f64(d / 1000.0)));
        }
        if steps.is_empty() {
            return Err(TraceError::Empty);
        }
        Ok(DelayTrace { steps })
    }

    /// The delay at time `t` (the first step's delay before it starts).
    pub fn at(&self, t: Duration) -> Duration {
        let ms = t.as_millis() as u64;
        let i = self.steps.partition_point(|&(s, _)| s <= ms);
        self.steps[i.saturating_sub(1)].1
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_walk() {
        let t = DeliveryTrace::parse("0\n0\n5\n\n# comment\n10\n").unwrap();
        assert_eq!(t.opportunities(), 4);
        assert_eq!(t.period(), Duration::from_millis(10));
        let mut c = TraceCursor::new();
        let mut seen = Vec::new();
        for _ in 0..9 {
            seen.push(c.peek(&t).as_millis());
            c.advance(&t);
        }
        assert_eq!(seen, [0, 0, 5, 10, 10, 10, 15, 20, 20]);
        // 4 opportunities per 10 ms of 1500 B: 4.8 Mbit/s.
        assert!((t.mean_bps() - 4.8e6).abs() < 1.0);
    }

    #[test]
    fn rewind_replays_a_stretch_at_any_link_time() {
        let t = DeliveryTrace::parse("0\n0\n5\n10\n").unwrap();
        let walk = |c: &mut TraceCursor, n: usize| -> Vec<u128> {
            (0..n)
                .map(|_| {
                    let at = c.peek(&t).as_millis();
                    c.advance(&t);
                    at
                })
                .collect()
        };
        // From the trace's moment 5 (an opportunity at 5), at link time 1000.
        let mut c = TraceCursor::new();
        c.rewind(&t, 5, 1000);
        assert_eq!(walk(&mut c, 5), [1000, 1005, 1005, 1005, 1010]);
        // The same moment again later: the same stretch, shifted.
        c.rewind(&t, 5, 7000);
        assert_eq!(walk(&mut c, 5), [7000, 7005, 7005, 7005, 7010]);
        // A moment past the link's clock (the cursor's base goes negative)
        // and one beyond the period (taken modulo the period: 23 → 3, the
        // next opportunity is the trace's 5).
        c.rewind(&t, 8, 2);
        assert_eq!(walk(&mut c, 4), [4, 4, 4, 9]);
        c.rewind(&t, 23, 100);
        assert_eq!(walk(&mut c, 2), [102, 107]);
    }

    #[test]
    fn capacity_counts_repetitions() {
        let t = DeliveryTrace::parse("1\n").unwrap(); // at 1, 2, 3, … ms: 12 Mbit/s
        assert_eq!(
            t.capacity_bytes(Duration::ZERO, Duration::from_secs(1)),
            999 * 1500
        );
        let (a, b) = (Duration::from_millis(1), Duration::from_millis(1001));
        assert_eq!(t.capacity_bytes(a, b), 1000 * 1500);
        let t = DeliveryTrace::parse("0\n0\n5\n10\n").unwrap();
        // [0, 10): 0, 0, 5 → 3; [10, 20): 10 (end of cycle 0), 10, 10, 15 → 4.
        assert_eq!(
            t.capacity_bytes(Duration::ZERO, Duration::from_millis(10)),
            3 * 1500
        );
        let (a, b) = (Duration::from_millis(10), Duration::from_millis(20));
        assert_eq!(t.capacity_bytes(a, b), 4 * 1500);
        // The count agrees with walking the cursor.
        let mut c = TraceCursor::new();
        let mut walked = 0;
        while c.peek(&t) < Duration::from_millis(1234) {
            walked += 1;
            c.advance(&t);
        }
        assert_eq!(
            t.capacity_bytes(Duration::ZERO, Duration::from_millis(1234)),
            walked * 1500
        );
    }

    #[test]
    fn parse_errors() {
        assert_eq!(DeliveryTrace::parse(""), Err(TraceError::Empty));
        assert_eq!(DeliveryTrace::parse("0\n0\n"), Err(TraceError::ZeroPeriod));
        assert!(matches!(
            DeliveryTrace::parse("1\nx\n"),
            Err(TraceError::Line { line: 2, .. })
        ));
        assert!(matches!(
            DeliveryTrace::parse("5\n3\n"),
            Err(TraceError::Backwards { line: 2, .. })
        ));
        assert!(matches!(
            DeliveryTrace::parse("-1\n"),
            Err(TraceError::Line { line: 1, .. })
        ));
    }

    #[test]
    fn delay_trace() {
        let d = DelayTrace::parse("0 10\n100 25.5\n").unwrap();
        assert_eq!(d.at(Duration::ZERO), Duration::from_millis(10));
        assert_eq!(d.at(Duration::from_millis(99)), Duration::from_millis(10));
        assert_eq!(
            d.at(Duration::from_millis(100)),
            Duration::from_micros(25_500)
        );
        assert_eq!(
            d.at(Duration::from_secs(100)),
            Duration::from_micros(25_500)
        );
        assert!(DelayTrace::parse("0\n").is_err());
        assert!(DelayTrace::parse("0 -1\n").is_err());
        assert!(DelayTrace::parse("5 1\n1 1\n").is_err());
    }

    #[test]
    fn real_traces_parse() {
        let Some(dir) = mewa_testkit::shared_data_or_skip("traces") else {
            return;
        };
        let t = DeliveryTrace::parse(
            &std::fs::read_to_string(dir.join("TMobile-LTE-short.down")).unwrap(),
        )
        .unwrap();
        // docs: TMobile-LTE-short.down lasts 140 s at 16.7 Mbit/s on average.
        assert!(
            (t.period().as_secs_f64() - 140.0).abs() < 1.0,
            "{:?}",
            t.period()
        );
        assert!((t.mean_bps() / 1e6 - 16.7).abs() < 0.2, "{}", t.mean_bps());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = DeliveryTrace::parse(&s);
            let _ = DelayTrace::parse(&s);
        }
    }
}
