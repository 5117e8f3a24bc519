//! FLD_TCP's slow start against Reno's (seed 002 §2.1).
//!
//! "While traditional TCP doubles its congestion window every round trip in the
//! Slow-start phase, FLD_TCP triples its congestion window." The schedule here
//! is the paper's Figure 1 idealisation: IW 10 segments of 1500 bytes, no
//! bottleneck unless a cap is given, no losses, a whole window per RTT.

use serde::Serialize;

/// A slow-start window schedule: the window starts at `iw_segments` and is
/// multiplied by `growth` every RTT until it reaches `cap_segments`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Schedule {
    /// Initial window, segments.
    pub iw_segments: u64,
    /// Segment size, bytes.
    pub mss_bytes: u64,
    /// Window growth per RTT: 2 for Reno, 3 for FLD_TCP.
    pub growth: u64,
    /// Largest window (the pipe), segments; `None` for an unconstrained path.
    pub cap_segments: Option<u64>,
}

impl Schedule {
    /// Reno slow start as seed 002 Figure 1 draws it: IW 10 × 1500 B, ×2 per RTT.
    pub fn reno() -> Schedule {
        Schedule {
            iw_segments: 10,
            mss_bytes: 1500,
            growth: 2,
            cap_segments: None,
        }
    }

    /// FLD_TCP slow start as seed 002 Figure 1 draws it: IW 10 × 1500 B, ×3 per RTT.
    pub fn fld() -> Schedule {
        Schedule {
            iw_segments: 10,
            mss_bytes: 1500,
            growth: 3,
            cap_segments: None,
        }
    }

    /// Window (segments) during RTT `k`, counting from 1.
    pub fn window(&self, k: u32) -> u64 {
        let mut w = self.iw_segments;
        for _ in 1..k {
            w = w.saturating_mul(self.growth);
            if let Some(cap) = self.cap_segments {
                if w >= cap {
                    return cap;
                }
            }
        }
        match self.cap_segments {
            Some(cap) => w.min(cap),
            None => w,
        }
    }

    /// Bytes sent in RTT `k` (from 1).
    pub fn bytes_in_rtt(&self, k: u32) -> u64 {
        self.window(k).saturating_mul(self.mss_bytes)
    }

    /// Bytes sent in RTTs 1..=k.
    pub fn cumulative_bytes(&self, k: u32) -> u64 {
        (1..=k).fold(0u64, |acc, i| acc.saturating_add(self.bytes_in_rtt(i)))
    }

    /// RTTs needed to deliver a flow of `bytes` (0 for an empty flow). Returns
    /// `None` only if the schedule can never send anything (zero IW or MSS).
    pub fn rtts_to_finish(&self, bytes: u64) -> Option<u32> {
        if bytes == 0 {
            return Some(0);
        }
        if self.bytes_in_rtt(1) == 0 {
            return None;
        }
        let mut sent = 0u64;
        let mut k = 0u32;
        while sent < bytes {
            k += 1;
            sent = sent.saturating_add(self.bytes_in_rtt(k));
        }
        Some(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Seed 002 §2.1: "after the 1st RTT, both transfer 15 kB, and by the 2nd RTT,
    // FLD_TCP transfers 60 kB while RENO transfers just 45 kB".
    #[test]
    fn seed_first_two_rtts() {
        assert_eq!(Schedule::fld().cumulative_bytes(1), 15_000);
        assert_eq!(Schedule::reno().cumulative_bytes(1), 15_000);
        assert_eq!(Schedule::fld().cumulative_bytes(2), 60_000);
        assert_eq!(Schedule::reno().cumulative_bytes(2), 45_000);
    }

    // Seed 002 §2.1: "a flow of size 500 kB … FLD_TCP would finish the flow in 4
    // RTT while RENO's Slow-start would require 6 RTT".
    #[test]
    fn seed_500kb_flow() {
        assert_eq!(Schedule::fld().rtts_to_finish(500_000), Some(4));
        assert_eq!(Schedule::reno().rtts_to_finish(500_000), Some(6));
    }

    #[test]
    fn cap_stops_growth() {
        let s = Schedule {
            cap_segments: Some(50),
            ..Schedule::fld()
        };
        assert_eq!(s.window(1), 10);
        assert_eq!(s.window(2), 30);
        assert_eq!(s.window(3), 50);
        assert_eq!(s.window(9), 50);
    }

    #[test]
    fn degenerate_schedule() {
        let s = Schedule {
            iw_segments: 0,
            ..Schedule::reno()
        };
        assert_eq!(s.rtts_to_finish(1), None);
        assert_eq!(s.rtts_to_finish(0), Some(0));
    }

    proptest::proptest! {
        #[test]
        fn fld_never_slower_than_reno(bytes in 0u64..100_000_000) {
            let f = Schedule::fld().rtts_to_finish(bytes).unwrap();
            let r = Schedule::reno().rtts_to_finish(bytes).unwrap();
            proptest::prop_assert!(f <= r);
        }
    }
}
