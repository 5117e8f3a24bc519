//! Rate-following pull dispatch: which of n connections gets a held object
//! next, so that n > 1 does not lose to one connection.
//!
//! Seed 000 splits a page's bytes over its n connections up front. With a
//! loss-based kernel sender (cubic and its HyStart) a connection that joins a
//! queue the first one has already filled can leave slow start early at a
//! small window, and its share then crawls while the other connections idle
//! (measured in `docs/LAB-RESULTS.md`, "Pull dispatch"). Pulling instead of pushing
//! fixes that: an object that cannot reveal others (an image, a font) waits
//! until a connection has room, and goes to the one that would finish it
//! first at the rate it delivered over the last RTT.
//!
//! Both the lab's loader and the client's proxy dispatch with this; they
//! differ only in where the bytes and times come from. No clocks here:
//! callers pass microseconds since a start of their choosing.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// When a hint-aware client (the lab's loader, the proxy) sends each
/// leaf's request over its n connections. One enum for both, with one
/// `auto` rule, so an experiment's setting means the same in the loader
/// and in the proxy Chromium goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatch {
    /// As soon as the object is found (or prefetched), on the connection
    /// the assignment chose: seed 000's static split by size.
    Push,
    /// Leaves wait while every connection has a bandwidth-delay product of
    /// bytes outstanding and go to the first that drains: a connection
    /// that turns out slow carries less. The loader only; the proxy runs
    /// it as [`Dispatch::Push`].
    Pull,
    /// Each leaf waits for the connection that would finish it first at
    /// its delivery rate over the last RTT ([`earliest_completion`]), and
    /// leaves larger than [`PULL_FLOOR_BYTES`] only go to a connection
    /// that has moved that much in an RTT: a connection that cubic's
    /// HyStart leaves at a small window then carries little.
    PullRate,
    /// The default: [`Dispatch::Push`] when the client prefetches the
    /// page's objects from the hint's URLs (every connection then starts
    /// at once with its share known, the static split's own premise),
    /// [`Dispatch::PullRate`] otherwise (the extra connections start cold
    /// behind a warm one, and a static split strands objects on a slow
    /// one; docs/LAB-RESULTS.md, "Pull dispatch" and "Prefetch").
    Auto,
}

impl Dispatch {
    /// What this setting means for a load that prefetches (`prefetching`)
    /// or not: [`Dispatch::Auto`] resolved, anything else as it is.
    pub fn resolve(self, prefetching: bool) -> Dispatch {
        match self {
            Dispatch::Auto if prefetching => Dispatch::Push,
            Dispatch::Auto => Dispatch::PullRate,
            d => d,
        }
    }

    /// The name the command line and config files use.
    pub fn name(self) -> &'static str {
        match self {
            Dispatch::Push => "push",
            Dispatch::Pull => "pull",
            Dispatch::PullRate => "pull-rate",
            Dispatch::Auto => "auto",
        }
    }
}

impl std::fmt::Display for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A dispatch name that is none of `auto`, `push`, `pull`, `pull-rate`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dispatch {0:?}: use auto, push, pull or pull-rate")]
pub struct UnknownDispatch(pub String);

impl std::str::FromStr for Dispatch {
    type Err = UnknownDispatch;
    fn from_str(s: &str) -> Result<Dispatch, UnknownDispatch> {
        [
            Dispatch::Push,
            Dispatch::Pull,
            Dispatch::PullRate,
            Dispatch::Auto,
        ]
        .into_iter()
        .find(|d| d.name() == s)
        .ok_or_else(|| UnknownDispatch(s.to_string()))
    }
}

/// The least rate (bytes per window) every connection is credited with, and
/// the size above which an object needs a connection that has shown it can
/// move that much in a window: two initial windows of ten 1460-byte
/// segments, what a fresh connection can take in its first RTT.
pub const PULL_FLOOR_BYTES: u64 = 2 * crate::DEFAULT_IW as u64 * 1460;

/// Per connection, the bytes it delivered recently and when.
#[derive(Debug, Clone, Default)]
pub struct Deliveries {
    slots: Vec<VecDeque<(u64, u64)>>,
}

impl Deliveries {
    /// An empty log for `n` connections.
    pub fn new(n: usize) -> Deliveries {
        Deliveries {
            slots: vec![VecDeque::new(); n],
        }
    }

    /// Connection `slot` delivered `bytes` at `at_us`. Out-of-range slots
    /// are ignored (a caller's bookkeeping error must not panic a load).
    pub fn record(&mut self, slot: usize, at_us: u64, bytes: u64) {
        if let Some(d) = self.slots.get_mut(slot) {
            d.push_back((at_us, bytes));
        }
    }

    /// Bytes connection `slot` delivered in the `window_us` before `now_us`.
    /// Drops what is older, so the log stays as long as one window.
    pub fn within(&mut self, slot: usize, now_us: u64, window_us: u64) -> u64 {
        let Some(d) = self.slots.get_mut(slot) else {
            return 0;
        };
        while d
            .front()
            .is_some_and(|&(t, _)| t.saturating_add(window_us) < now_us)
        {
            d.pop_front();
        }
        d.iter().map(|&(_, b)| b).sum()
    }

    /// [`Deliveries::within`] for every connection, in order: the
    /// `delivered` argument of [`earliest_completion`].
    pub fn recent(&mut self, now_us: u64, window_us: u64) -> Vec<u64> {
        (0..self.slots.len())
            .map(|i| self.within(i, now_us, window_us))
            .collect()
    }

    /// Whether nothing is logged for `slot`.
    pub fn is_empty(&self, slot: usize) -> bool {
        self.slots.get(slot).is_none_or(VecDeque::is_empty)
    }
}

/// The books of n connections: what each has been asked for and not yet
/// delivered, and (when a rate window is set) what each delivered lately.
///
/// The loader and the proxy keep the same books and differ only in where
/// the bytes and times come from, so both keep this one.
#[derive(Debug, Clone)]
pub struct Ledger {
    outstanding: Vec<u64>,
    delivered: Deliveries,
    /// The window a connection's rate is measured over (about one RTT);
    /// `None`: deliveries are not logged.
    window_us: Option<u64>,
}

impl Ledger {
    /// Empty books for `n` connections. `window_us`: log deliveries and
    /// measure rates over this window (µs); `None` keeps no log.
    pub fn new(n: usize, window_us: Option<u64>) -> Ledger {
        Ledger {
            outstanding: vec![0; n],
            delivered: Deliveries::new(n),
            window_us,
        }
    }

    /// Bytes asked of each connection and not yet delivered.
    pub fn outstanding(&self) -> &[u64] {
        &self.outstanding
    }

    /// Connection `slot` was asked for `bytes` more. Out-of-range slots are
    /// ignored, as in [`Deliveries::record`].
    pub fn ask(&mut self, slot: usize, bytes: u64) {
        if let Some(o) = self.outstanding.get_mut(slot) {
            *o = o.saturating_add(bytes);
        }
    }

    /// `bytes` of what connection `slot` was asked for no longer count:
    /// delivered, or the request ended without them.
    pub fn count_off(&mut self, slot: usize, bytes: u64) {
        if let Some(o) = self.outstanding.get_mut(slot) {
            *o = o.saturating_sub(bytes);
        }
    }

    /// Connection `slot` delivered `bytes` at `at_us`: logged for its rate
    /// when the books keep a window (what it was asked for is counted off
    /// separately, by [`Ledger::count_off`], since a body may run longer
    /// than what was asked).
    pub fn log_delivery(&mut self, slot: usize, at_us: u64, bytes: u64) {
        if self.window_us.is_some() && bytes > 0 {
            self.delivered.record(slot, at_us, bytes);
        }
    }

    /// [`earliest_completion`] for an object of `size` at `now_us`, with
    /// each connection's rate over the window. Without a window no rate is
    /// known and every connection is credited with `floor`.
    pub fn earliest(&mut self, size: u64, floor: u64, now_us: u64) -> Option<usize> {
        let recent = match self.window_us {
            Some(w) => self.delivered.recent(now_us, w),
            None => vec![0; self.outstanding.len()],
        };
        earliest_completion(&self.outstanding, &recent, size, floor)
    }
}

/// The connection a held object of `size` bytes goes to now, or `None` while
/// it must wait. `outstanding[i]` is what connection i has been asked for and
/// not delivered; `delivered[i]` what it delivered over the last window.
///
/// - **Earliest completion first:** the connection that would finish the
///   object soonest at its recent rate (floored at `floor`), so a large
///   object waits for a fast connection rather than crawl on a slow empty
///   one.
/// - **Room:** it goes once that connection holds less than twice its rate.
/// - **Proof:** an object larger than `floor` only goes to a connection
///   that delivered at least `floor` in the window: a fresh connection proves
///   itself with small objects first. When nothing is outstanding anywhere,
///   any connection will do, so an object never waits for a delivery that
///   cannot come.
///
/// Ties go to the lower index. Slices of different lengths are read up to
/// the shorter; no connections gives `None`.
pub fn earliest_completion(
    outstanding: &[u64],
    delivered: &[u64],
    size: u64,
    floor: u64,
) -> Option<usize> {
    let n = outstanding.len().min(delivered.len());
    let floor = floor.max(1);
    let rate = |i: usize| floor.max(delivered[i]);
    let idle = outstanding.iter().all(|&b| b == 0);
    let proven = |i: usize| idle || size <= floor || delivered[i] >= floor;
    let finish = |i: usize| outstanding[i].saturating_add(size) as f64 / rate(i) as f64;
    let best = (0..n)
        .filter(|&i| proven(i))
        .min_by(|&a, &b| finish(a).total_cmp(&finish(b)).then(a.cmp(&b)))?;
    (outstanding[best] < rate(best).saturating_mul(2)).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_names_round_trip_and_auto_resolves() {
        for d in [
            Dispatch::Push,
            Dispatch::Pull,
            Dispatch::PullRate,
            Dispatch::Auto,
        ] {
            assert_eq!(d.to_string().parse::<Dispatch>(), Ok(d));
            let json = serde_json::to_string(&d).expect("json");
            assert_eq!(json, format!("\"{d}\""));
        }
        let e = "fast".parse::<Dispatch>().expect_err("unknown");
        assert!(e.to_string().contains("pull-rate"), "{e}");
        assert_eq!(Dispatch::Auto.resolve(true), Dispatch::Push);
        assert_eq!(Dispatch::Auto.resolve(false), Dispatch::PullRate);
        assert_eq!(Dispatch::Pull.resolve(true), Dispatch::Pull);
    }

    const F: u64 = PULL_FLOOR_BYTES;

    #[test]
    fn a_large_object_goes_to_the_fast_connection_or_waits_for_it() {
        // Connection 0 moved 300 KB in the last RTT, connection 1 nothing.
        assert_eq!(
            earliest_completion(&[100_000, 0], &[300_000, 0], 500_000, F),
            Some(0)
        );
        // Connection 0 holds twice its rate: wait for it rather than crawl
        // on the empty, unproven one.
        assert_eq!(
            earliest_completion(&[600_000, 0], &[300_000, 0], 500_000, F),
            None
        );
    }

    #[test]
    fn an_unproven_connection_takes_small_objects_only_unless_all_idle() {
        // Nobody delivered lately, something is in flight: a large object
        // waits, a small one goes where it finishes first (the empty one).
        assert_eq!(earliest_completion(&[10_000, 0], &[0, 0], 90_000, F), None);
        assert_eq!(
            earliest_completion(&[10_000, 0], &[0, 0], 20_000, F),
            Some(1)
        );
        // Nothing in flight: any connection takes it.
        assert_eq!(earliest_completion(&[0, 0], &[0, 0], 90_000, F), Some(0));
        assert_eq!(earliest_completion(&[], &[], 90_000, F), None);
    }

    #[test]
    fn the_ledger_counts_asks_and_deliveries_and_rates_over_its_window() {
        let mut l = Ledger::new(2, Some(65_000));
        l.ask(0, 100_000);
        l.ask(1, 90_000);
        l.ask(7, 1);
        assert_eq!(l.outstanding(), &[100_000, 90_000]);
        // Connection 0 delivers 60 KB (more than the floor) in the window;
        // the other, unproven one must not get the large object.
        l.count_off(0, 60_000);
        l.log_delivery(0, 1_000_000, 60_000);
        assert_eq!(l.outstanding(), &[40_000, 90_000]);
        assert_eq!(l.earliest(90_000, F, 1_010_000), Some(0));
        // A window later the rate is forgotten: nobody is proven, something
        // is in flight, so it waits.
        assert_eq!(l.earliest(90_000, F, 1_100_000), None);
        // Counting off never goes below zero.
        l.count_off(1, 1_000_000);
        l.count_off(0, 40_000);
        assert_eq!(l.outstanding(), &[0, 0]);
        assert_eq!(l.earliest(90_000, F, 1_100_000), Some(0));

        // Without a window nothing is logged and every rate is the floor.
        let mut l = Ledger::new(2, None);
        l.ask(0, 10_000);
        l.log_delivery(0, 0, 500_000);
        assert_eq!(l.earliest(20_000, F, 0), Some(1));
        assert_eq!(l.earliest(90_000, F, 0), None);
    }

    #[test]
    fn deliveries_count_one_window_and_forget_the_rest() {
        let mut d = Deliveries::new(2);
        d.record(0, 990_000, 300_000);
        d.record(0, 1_000_000, 1_000);
        d.record(5, 1_000_000, 1_000);
        assert_eq!(d.within(0, 1_000_000, 65_000), 301_000);
        assert_eq!(d.recent(1_060_000, 65_000), vec![1_000, 0]);
        assert_eq!(d.within(0, 1_060_000, 65_000), 1_000);
        assert_eq!(d.within(1, 1_060_000, 65_000), 0);
        assert_eq!(d.within(0, 2_000_000, 65_000), 0);
        assert!(d.is_empty(0));
        assert_eq!(d.within(9, 0, u64::MAX), 0);
    }
}
