//! The radio bandwidth a phone can know: what its own recent page loads
//! delivered.
//!
//! Seed 000's client plans n from "radio bandwidth × RTT", and a lab that
//! hands it the link's configured rate, or a trace's mean, tells it
//! something no phone knows. This estimator uses only what the
//! client observes: the bytes its recent loads received and when. Each
//! load gives its **peak delivery rate**, the most bytes received in any
//! window of `window` length divided by that length (the windowed maximum
//! of delivery rate that BBR also keeps, here per load); the estimate is
//! the maximum over the last [`KEEP`] loads, so one load that never left
//! slow start does not drag it down, and a radio that got worse is
//! forgotten after a few pages. Before any load it has nothing, and the
//! caller supplies its prior (a rate the modem reports, or a class
//! default).

use std::collections::VecDeque;

/// Loads whose peak rates the estimate remembers.
pub const KEEP: usize = 3;

/// The estimator.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRate {
    window_us: u64,
    peaks: VecDeque<f64>,
}

impl DeliveryRate {
    /// An estimator measuring rates over windows of `window_us` µs (about
    /// one RTT: shorter windows see bursts, longer ones include idle gaps).
    pub fn new(window_us: u64) -> DeliveryRate {
        DeliveryRate {
            window_us: window_us.max(1),
            peaks: VecDeque::new(),
        }
    }

    /// The most bytes one load's arrivals `(µs, bytes)` in time order
    /// delivered in any window; `None` when they span less than one window
    /// (too short to say anything about the radio). The whole of what the
    /// estimator takes from a load: a caller that keeps this figure can
    /// rebuild the estimate later ([`DeliveryRate::observe_window_bytes`]).
    pub fn peak_window_bytes(&self, arrivals: &[(u64, u64)]) -> Option<u64> {
        let (first, last) = (arrivals.first()?.0, arrivals.last()?.0);
        if last.saturating_sub(first) < self.window_us {
            return None;
        }
        // Two pointers: the bytes that arrived in (t - window, t].
        let (mut lo, mut sum, mut best) = (0usize, 0u64, 0u64);
        for &(t, b) in arrivals {
            sum += b;
            while arrivals[lo].0 + self.window_us <= t {
                sum -= arrivals[lo].1;
                lo += 1;
            }
            best = best.max(sum);
        }
        Some(best)
    }

    /// Peak delivery rate, bit/s, of one load's arrivals `(µs, bytes)` in
    /// time order; `None` when they span less than one window.
    pub fn peak_bps(&self, arrivals: &[(u64, u64)]) -> Option<f64> {
        self.peak_window_bytes(arrivals).map(|b| self.rate_bps(b))
    }

    /// `bytes` per window as a rate, bit/s.
    fn rate_bps(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / (self.window_us as f64 / 1e6)
    }

    /// Takes one load's arrivals into the estimate.
    pub fn observe(&mut self, arrivals: &[(u64, u64)]) {
        if let Some(b) = self.peak_window_bytes(arrivals) {
            self.observe_window_bytes(b);
        }
    }

    /// Takes one load into the estimate by its
    /// [`DeliveryRate::peak_window_bytes`]: what [`DeliveryRate::observe`]
    /// does with its arrivals, for a caller that kept only that figure.
    pub fn observe_window_bytes(&mut self, bytes: u64) {
        if self.peaks.len() == KEEP {
            self.peaks.pop_front();
        }
        self.peaks.push_back(self.rate_bps(bytes));
    }

    /// The estimate, bit/s, or `None` before any usable load.
    pub fn estimate_bps(&self) -> Option<f64> {
        self.peaks.iter().copied().reduce(f64::max)
    }
}

/// The round trip a phone can plan with when its radio was idle.
///
/// The DNS exchange that brings the hint is the first packet after the
/// idle gap: its round trip includes the radio's promotion (400 ms on
/// LTE, 2 s on 3G), and seed 000's plan read as the radio's RTT asks for
/// many more connections than the link needs. A phone knows better from
/// its recent loads: the TCP handshakes of its last [`KEEP`] loads came
/// after the promotion. Their smallest is the estimate (end to end, so it
/// over-states the radio's part by the wired one: a few connections fewer
/// at most, never more).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecentRtt {
    samples: VecDeque<f64>,
}

impl RecentRtt {
    /// Nothing seen yet.
    pub fn new() -> RecentRtt {
        RecentRtt::default()
    }

    /// Takes one load's handshake round trip, seconds (ignored unless
    /// positive and finite).
    pub fn observe(&mut self, rtt_s: f64) {
        if rtt_s.is_finite() && rtt_s > 0.0 {
            if self.samples.len() == KEEP {
                self.samples.pop_front();
            }
            self.samples.push_back(rtt_s);
        }
    }

    /// The smallest of the recent handshakes, seconds.
    pub fn estimate_s(&self) -> Option<f64> {
        self.samples.iter().copied().reduce(f64::min)
    }

    /// The round trip to plan with ([`plan_rtt_s`] of this estimate).
    pub fn plan_rtt_s(&self, exchange_s: f64) -> f64 {
        plan_rtt_s(self.estimate_s(), exchange_s)
    }
}

/// The round trip to plan with: the exchange just made (`exchange_s`, the
/// DNS answer's) or `recent_s` (a [`RecentRtt::estimate_s`] the caller
/// kept), whichever is smaller.
pub fn plan_rtt_s(recent_s: Option<f64>, exchange_s: f64) -> f64 {
    recent_s.map_or(exchange_s, |r| r.min(exchange_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_rtt_leaves_the_promotion_out_once_a_load_has_been_seen() {
        let mut r = RecentRtt::new();
        // First load: only the DNS exchange, promotion included.
        assert_eq!(r.plan_rtt_s(0.445), 0.445);
        r.observe(0.070);
        r.observe(f64::NAN);
        r.observe(-1.0);
        assert_eq!(r.plan_rtt_s(0.445), 0.070);
        // A radio that answers faster than the memory: the exchange wins.
        assert_eq!(r.plan_rtt_s(0.050), 0.050);
        // Only the last loads count.
        r.observe(0.120);
        r.observe(0.110);
        r.observe(0.100);
        assert_eq!(r.estimate_s(), Some(0.100));
    }

    /// Arrivals of `bytes` every `every_us` µs from 0 to `until_us`.
    fn steady(bytes: u64, every_us: u64, until_us: u64) -> Vec<(u64, u64)> {
        (0..=until_us / every_us)
            .map(|i| (i * every_us, bytes))
            .collect()
    }

    #[test]
    fn a_steady_stream_gives_its_rate() {
        // 1500 B every 1 ms = 12 Mbit/s.
        let e = DeliveryRate::new(50_000);
        let p = e.peak_bps(&steady(1500, 1000, 500_000)).unwrap();
        assert!((p - 12e6).abs() / 12e6 < 0.03, "{p}");
    }

    #[test]
    fn the_peak_not_the_average() {
        // Slow start: 1 Mbit/s for 400 ms, then 20 Mbit/s for 100 ms.
        let mut a = steady(125, 1000, 400_000);
        a.extend(
            steady(2500, 1000, 100_000)
                .into_iter()
                .map(|(t, b)| (t + 401_000, b)),
        );
        let e = DeliveryRate::new(50_000);
        let p = e.peak_bps(&a).unwrap();
        assert!(p > 18e6 && p < 21e6, "{p}");
    }

    #[test]
    fn remembers_the_best_of_the_last_loads_only() {
        let mut e = DeliveryRate::new(50_000);
        assert_eq!(e.estimate_bps(), None);
        // Too short to measure: ignored.
        e.observe(&[(0, 100), (10, 100)]);
        assert_eq!(e.estimate_bps(), None);
        e.observe(&steady(3000, 1000, 200_000)); // 24 Mbit/s
        e.observe(&steady(1000, 1000, 200_000)); // 8
        e.observe(&steady(1000, 1000, 200_000));
        assert!(e.estimate_bps().unwrap() > 20e6);
        // A fourth load pushes the 24 Mbit/s one out.
        e.observe(&steady(1000, 1000, 200_000));
        let est = e.estimate_bps().unwrap();
        assert!((est - 8e6).abs() / 8e6 < 0.05, "{est}");
    }

    #[test]
    fn a_loads_peak_window_alone_rebuilds_the_same_estimate() {
        let loads = [
            steady(3000, 1000, 200_000),
            vec![(0, 100), (10, 100)],
            steady(1000, 700, 300_000),
            steady(2500, 1300, 150_000),
            steady(1200, 900, 400_000),
        ];
        let mut whole = DeliveryRate::new(50_000);
        let mut kept = DeliveryRate::new(50_000);
        for a in &loads {
            whole.observe(a);
            if let Some(b) = kept.peak_window_bytes(a) {
                kept.observe_window_bytes(b);
            }
        }
        assert_eq!(kept, whole);
        assert!(kept.estimate_bps().is_some());
    }
}
