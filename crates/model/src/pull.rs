//! Rate-following pull dispatch: which of n connections gets a held object
//! next, so that n > 1 does not lose to one connection.
//!
//! Seed 000 splits a page's bytes over its n connections up front. With a
//! loss-based kernel sender (cubic and its HyStart) a connection that joins a
//! queue the first one has already filled can leave slow start early at a
//! small window, and its share then crawls while the other connections idle
//! (measured in `docs/LAB.md`, "Pull dispatch"). Pulling instead of pushing
//! fixes that: an object that cannot reveal others (an image, a font) waits
//! until a connection has room, and goes to the one that would finish it
//! first at the rate it delivered over the last RTT.
//!
//! Both the lab's loader and the client's proxy dispatch with this; they
//! differ only in where the bytes and times come from. No clocks here:
//! callers pass microseconds since a start of their choosing.

use std::collections::VecDeque;

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
