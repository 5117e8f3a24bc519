//! Congestion controllers as sans-IO cores: no sockets, no clocks of their
//! own. A sender reports acknowledgements, losses and timeouts with the time
//! they happened (`now`), and reads the window back. The same core is what the
//! BPF `struct_ops` version (Linux TCP) and the quinn `Controller` (HTTP/3)
//! wrap, so all three can be tested against one schedule in virtual time.
//!
//! One controller, [`Window`], covers both of seed 002's senders: FLD_TCP
//! ([`Window::fld`]) and the Reno it falls back to ([`Window::reno`]). They
//! differ in two numbers: how many extra segments slow start adds per
//! acknowledged segment, and below how many delivered bytes a loss is
//! answered as Relentless TCP does instead of by halving.

use std::time::Instant;

/// Bytes of one segment in seed 002's Figure 1 (1500 B).
pub const SEED_MSS: u64 = 1500;

/// Seed 002's initial window: "it also starts with a higher congestion
/// window of 10 segments as done in the newer Linux TCPs".
pub const INITIAL_WINDOW_SEGMENTS: u64 = 10;

/// Seed 002's threshold between short and long flows: "The threshold value
/// is selected to be 2 MB".
pub const FLD_THRESHOLD_BYTES: u64 = 2_000_000;

/// An acknowledgement, as the controller needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Bytes newly acknowledged.
    pub bytes: u64,
    /// Whether the sender was limited by the window when these bytes were
    /// sent (not by the application): only then does the window grow, or an
    /// idle or application-limited flow would grow a window it never used.
    pub cwnd_limited: bool,
}

/// The events a sender reports, and the window it reads back.
pub trait Controller {
    /// `ack` arrived at `now`.
    fn on_ack(&mut self, now: Instant, ack: Ack);
    /// `lost_bytes` of data sent at `sent` were found lost at `now` (by
    /// duplicate acknowledgements, SACK or a QUIC loss detection).
    fn on_loss(&mut self, now: Instant, sent: Instant, lost_bytes: u64);
    /// The retransmission timer fired at `now`.
    fn on_rto(&mut self, now: Instant);
    /// The congestion window, bytes.
    fn window(&self) -> u64;
}

/// The numbers that make a [`Window`] FLD_TCP or Reno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Segment size, bytes.
    pub mss: u64,
    /// Initial window, bytes.
    pub initial_window: u64,
    /// Extra segments slow start adds per acknowledged segment while the
    /// flow is short (below [`Params::relentless_below`]): 1 doubles the
    /// window every round trip (Reno), 2 triples it (FLD_TCP). Past that,
    /// slow start doubles, as Reno's.
    pub slow_start_gain: u64,
    /// While fewer bytes than this have been delivered, a loss takes only
    /// the lost bytes off the window (Relentless TCP); from then on it halves
    /// it (Reno). 0: always Reno.
    pub relentless_below: u64,
}

/// Which rule the controller follows now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Below the slow-start threshold: the window grows by
    /// [`Params::slow_start_gain`] segments per acknowledged segment.
    SlowStart,
    /// At or above it: one segment per window of acknowledged bytes.
    CongestionAvoidance,
}

/// A window-based controller: FLD_TCP or Reno (see the crate's docs).
#[derive(Debug, Clone)]
pub struct Window {
    params: Params,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged over the connection's life: what decides between
    /// Relentless and Reno. Acknowledged, not sent, so retransmissions do not
    /// count twice.
    delivered: u64,
    /// Acknowledged bytes not yet turned into a segment of congestion
    /// avoidance growth (RFC 3465 byte counting).
    avoidance_credit: u64,
    /// When the current recovery began: Reno halves once for the losses of
    /// one window (RFC 6582), not once per lost packet.
    recovery_start: Option<Instant>,
}

impl Window {
    /// A controller with `params`.
    pub fn new(params: Params) -> Window {
        let mss = params.mss.max(1);
        let params = Params { mss, ..params };
        Window {
            cwnd: params.initial_window.max(mss),
            ssthresh: u64::MAX,
            delivered: 0,
            avoidance_credit: 0,
            recovery_start: None,
            params,
        }
    }

    /// FLD_TCP as seed 002 §2.1 defines it, with segments of `mss` bytes.
    pub fn fld(mss: u64) -> Window {
        Window::new(Params {
            mss,
            // "it also starts with a higher congestion window of 10 segments"
            initial_window: INITIAL_WINDOW_SEGMENTS * mss,
            // "While traditional TCP doubles its congestion window every
            // round trip in the Slow-start phase, FLD_TCP triples its
            // congestion window."
            slow_start_gain: 2,
            // "as long as the amount of transmitted data is within the
            // specified threshold value, FLD_TCP functions in Relentless TCP
            // mode [...] after the TCP flow exceeds the threshold value,
            // FLD_TCP functions in traditional RENO behavior"
            relentless_below: FLD_THRESHOLD_BYTES,
        })
    }

    /// Reno (RFC 5681 with byte counting) with the same initial window, the
    /// sender FLD_TCP is compared with and falls back to.
    pub fn reno(mss: u64) -> Window {
        Window::new(Params {
            mss,
            initial_window: INITIAL_WINDOW_SEGMENTS * mss,
            slow_start_gain: 1,
            relentless_below: 0,
        })
    }

    /// The controller's numbers.
    pub fn params(&self) -> Params {
        self.params
    }

    /// Slow start or congestion avoidance.
    pub fn phase(&self) -> Phase {
        if self.cwnd < self.ssthresh {
            Phase::SlowStart
        } else {
            Phase::CongestionAvoidance
        }
    }

    /// Whether a loss now is answered as Relentless TCP does.
    pub fn relentless(&self) -> bool {
        self.delivered < self.params.relentless_below
    }

    /// Bytes acknowledged so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The slow-start threshold, bytes (`u64::MAX` before the first loss).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// The smallest window after a loss: two segments (RFC 5681).
    fn floor(&self) -> u64 {
        2 * self.params.mss
    }
}

impl Controller for Window {
    fn on_ack(&mut self, _now: Instant, ack: Ack) {
        self.delivered = self.delivered.saturating_add(ack.bytes);
        if !ack.cwnd_limited {
            return;
        }
        match self.phase() {
            Phase::SlowStart => {
                // FLD_TCP: two extra segments per acknowledged segment (×3 a
                // round trip); Reno one (×2). Past the threshold FLD_TCP is
                // Reno here too: "after the TCP flow exceeds the threshold
                // value, FLD_TCP functions in traditional RENO behavior thus
                // acting in a TCP-friendly manner" (a slow start after a
                // timeout on a long flow doubles, it does not triple).
                let gain = if self.relentless() {
                    self.params.slow_start_gain
                } else {
                    1
                };
                let grown = self.cwnd.saturating_add(ack.bytes.saturating_mul(gain));
                self.cwnd = if self.ssthresh == u64::MAX {
                    grown
                } else {
                    grown.min(self.ssthresh)
                };
            }
            Phase::CongestionAvoidance => {
                self.avoidance_credit = self.avoidance_credit.saturating_add(ack.bytes);
                while self.avoidance_credit >= self.cwnd {
                    self.avoidance_credit -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(self.params.mss);
                }
            }
        }
    }

    fn on_loss(&mut self, now: Instant, sent: Instant, lost_bytes: u64) {
        if self.relentless() {
            // "Instead of multiplicative decrease upon packet loss, this TCP
            // reduces the congestion window by the amount of lost segments
            // only": every loss counts, and slow start ends.
            self.cwnd = self.cwnd.saturating_sub(lost_bytes).max(self.floor());
            self.ssthresh = self.cwnd;
            self.avoidance_credit = 0;
            return;
        }
        // Reno: halve once for the losses of one window.
        if self.recovery_start.is_some_and(|start| sent <= start) {
            return;
        }
        self.recovery_start = Some(now);
        self.cwnd = (self.cwnd / 2).max(self.floor());
        self.ssthresh = self.cwnd;
        self.avoidance_credit = 0;
    }

    fn on_rto(&mut self, now: Instant) {
        // A timeout says the path lost a whole window: back to one segment
        // and slow start up to half the window (RFC 5681 §3.1), in both
        // modes; Relentless TCP concerns the losses that fast recovery sees.
        self.ssthresh = (self.cwnd / 2).max(self.floor());
        self.cwnd = self.params.mss;
        self.avoidance_credit = 0;
        self.recovery_start = Some(now);
    }

    fn window(&self) -> u64 {
        self.cwnd
    }
}

#[cfg(test)]
mod tests;
