//! Congestion control for HTTP/3: seed 002's FLD_TCP, and the Reno it falls
//! back to, as quinn controllers around the sans-IO core of `mewa-cc`; and
//! the name → factory table behind `mewa origin serve --quic-cc`.
//!
//! [`Core`] is a thin adapter: quinn reports acknowledgements and
//! congestion events with their time, [`Core`] hands them to a
//! [`mewa_cc::Window`] unchanged and reads the window back. So the HTTP/3
//! sender follows exactly the schedule the core's tests check in virtual
//! time, and the same schedule as the BPF version for Linux TCP. The only
//! thing the adapter adds is a floor under the window (see
//! [`Core::min_window`]), because quinn cannot send at all with a window of
//! one datagram.
//!
//! [`QuicCc`] names every controller the origin can give its QUIC
//! connections: quinn's own (`cubic`, `newreno`, `bbr`) and the two cores
//! (`fld`, `reno`); [`factory`] turns a name into the
//! [`QuicCongestion`] that [`crate::OriginConfig::quic_congestion`] takes.

use std::any::Any;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use mewa_cc::{Ack, Controller as _, Window};
use quinn::congestion::{
    BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use quinn_proto::RttEstimator;

/// A congestion controller factory for QUIC connections: what
/// [`QuicCc::factory`] gives and [`crate::OriginConfig::quic_congestion`]
/// takes.
pub type QuicCongestion = Arc<dyn ControllerFactory + Send + Sync + 'static>;

/// Which `mewa-cc` controller a [`CoreConfig`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoreKind {
    /// FLD_TCP ([`Window::fld`]): ×3 slow start, Relentless below 2 MB
    /// delivered, Reno after.
    Fld,
    /// Reno ([`Window::reno`]) with the same initial window: what FLD_TCP
    /// is compared with and falls back to.
    Reno,
}

impl CoreKind {
    /// The core, with segments of `mss` bytes.
    pub fn window(self, mss: u64) -> Window {
        match self {
            CoreKind::Fld => Window::fld(mss),
            CoreKind::Reno => Window::reno(mss),
        }
    }
}

/// A quinn [`ControllerFactory`] building a [`Core`] of the given kind for
/// every connection (and for every new path of one: quinn builds a fresh
/// controller when a path changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreConfig {
    /// FLD_TCP or Reno.
    pub kind: CoreKind,
}

impl CoreConfig {
    /// FLD_TCP.
    pub const FLD: CoreConfig = CoreConfig {
        kind: CoreKind::Fld,
    };
    /// Reno.
    pub const RENO: CoreConfig = CoreConfig {
        kind: CoreKind::Reno,
    };
}

impl ControllerFactory for CoreConfig {
    /// A [`Core`] whose segment is `current_mtu`: the datagram size quinn
    /// starts the path with (1200 B unless configured), so the initial
    /// window is seed 002's "congestion window of 10 segments" of the
    /// datagrams this connection actually sends. That is also quinn's own
    /// default initial window (`min(10 × 1200, max(2 × 1200, 14720))` =
    /// 12 000 B), so `fld`, `reno`, `cubic` and `newreno` start alike.
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Core::new(self.kind, current_mtu))
    }
}

/// A quinn congestion [`Controller`] that is a [`mewa_cc::Window`].
#[derive(Debug, Clone)]
pub struct Core {
    kind: CoreKind,
    core: Window,
    /// The path's datagram size now (it grows with MTU discovery).
    mtu: u64,
}

impl Core {
    /// A controller of `kind` whose segment is `current_mtu` bytes.
    pub fn new(kind: CoreKind, current_mtu: u16) -> Core {
        let mtu = u64::from(current_mtu).max(1);
        Core {
            kind,
            core: kind.window(mtu),
            mtu,
        }
    }

    /// FLD_TCP or Reno.
    pub fn kind(&self) -> CoreKind {
        self.kind
    }

    /// The wrapped core, exactly as the events quinn reported left it.
    pub fn core(&self) -> &Window {
        &self.core
    }

    /// The smallest window quinn is given: two datagrams of the current
    /// size. RFC 9002 §7.2: "The RECOMMENDED value is 2 *
    /// max_datagram_size" for kMinimumWindow, and §7.6.2: on persistent
    /// congestion "the sender's congestion window MUST be reduced to the
    /// minimum congestion window (kMinimumWindow)". The core instead goes
    /// to one segment after a timeout, as TCP does (RFC 5681 §3.1), but
    /// quinn sends a datagram only while `in_flight + datagram < window`,
    /// so a window of one datagram would send nothing but loss probes.
    /// The floor also follows the datagram size up after MTU discovery,
    /// which the core's fixed segment size does not (see
    /// [`Controller::on_mtu_update`] below).
    pub fn min_window(&self) -> u64 {
        2 * self.mtu
    }
}

impl Controller for Core {
    /// An acknowledgement grows the window only if the sender was limited
    /// by the window, not by the application: quinn's `app_limited` says
    /// the connection "was blocked on outgoing application data prior to
    /// receiving these acknowledgements". The RTT estimate is not used:
    /// FLD_TCP and Reno are driven by acknowledged bytes alone.
    fn on_ack(
        &mut self,
        now: Instant,
        _sent: Instant,
        bytes: u64,
        app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.core.on_ack(
            now,
            Ack {
                bytes,
                cwnd_limited: !app_limited,
            },
        );
    }

    /// Persistent congestion (RFC 9002 §7.6: every packet over more than
    /// a PTO period lost) is QUIC's retransmission timeout, answered as the
    /// core answers a timeout. Any other congestion event is a loss of
    /// `lost_bytes` sent at `sent` (the newest lost packet's send time),
    /// which the core answers as Relentless TCP below 2 MB delivered ("this
    /// TCP reduces the congestion window by the amount of lost segments
    /// only") and as Reno after ("FLD_TCP functions in traditional RENO
    /// behavior"). An ECN congestion mark arrives with `lost_bytes` 0: it
    /// ends slow start but takes nothing off in Relentless mode, and halves
    /// the window in Reno mode.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        if is_persistent_congestion {
            self.core.on_rto(now);
        } else {
            self.core.on_loss(now, sent, lost_bytes);
        }
    }

    /// Only the floor ([`Core::min_window`]) follows the new datagram size;
    /// the core keeps the segment it was built with, because a
    /// [`mewa_cc::Window`]'s segment is fixed and a new core would forget
    /// the connection's state. Little depends on it: slow start, seed 002's
    /// ×3, grows by acknowledged bytes whatever their packets' size, and
    /// losses take off lost bytes; the segment only sizes the initial
    /// window (spent before discovery finishes), congestion avoidance's
    /// one segment per window, and the core's own floors, which the floor
    /// here lifts. quinn starts at its minimum datagram size and discovery
    /// only raises it (a black hole falls back to that minimum), so the
    /// build-time segment is never larger than the path's.
    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu).max(1);
    }

    fn window(&self) -> u64 {
        self.core.window().max(self.min_window())
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.window();
        m.ssthresh = Some(self.core.ssthresh());
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.core.params().initial_window
    }

    /// A [`Core`], for callers that downcast.
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Every congestion controller the origin can give its QUIC connections
/// (`mewa origin serve --quic-cc NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuicCc {
    /// quinn's CUBIC (RFC 9438), quinn's default.
    #[default]
    Cubic,
    /// quinn's NewReno (RFC 9002 §7).
    NewReno,
    /// quinn's BBR (which quinn calls experimental).
    Bbr,
    /// FLD_TCP from `mewa-cc` ([`CoreKind::Fld`]).
    Fld,
    /// Reno from `mewa-cc` ([`CoreKind::Reno`]), FLD_TCP's baseline.
    Reno,
}

impl QuicCc {
    /// Every controller, in the order of [`QuicCc::NAMES`].
    pub const ALL: [QuicCc; 5] = [
        QuicCc::Cubic,
        QuicCc::NewReno,
        QuicCc::Bbr,
        QuicCc::Fld,
        QuicCc::Reno,
    ];

    /// Every name [`QuicCc::from_str`] accepts (lower case).
    pub const NAMES: [&'static str; 5] = ["cubic", "newreno", "bbr", "fld", "reno"];

    /// The name `--quic-cc` takes.
    pub fn name(self) -> &'static str {
        match self {
            QuicCc::Cubic => "cubic",
            QuicCc::NewReno => "newreno",
            QuicCc::Bbr => "bbr",
            QuicCc::Fld => "fld",
            QuicCc::Reno => "reno",
        }
    }

    /// Whose implementation it is, for startup summaries.
    pub fn about(self) -> &'static str {
        match self {
            QuicCc::Cubic => "quinn's CUBIC",
            QuicCc::NewReno => "quinn's NewReno",
            QuicCc::Bbr => "quinn's BBR",
            QuicCc::Fld => "FLD_TCP, mewa-cc",
            QuicCc::Reno => "Reno, mewa-cc",
        }
    }

    /// A factory building this controller with its default settings.
    pub fn factory(self) -> QuicCongestion {
        match self {
            QuicCc::Cubic => Arc::new(CubicConfig::default()),
            QuicCc::NewReno => Arc::new(NewRenoConfig::default()),
            QuicCc::Bbr => Arc::new(BbrConfig::default()),
            QuicCc::Fld => Arc::new(CoreConfig::FLD),
            QuicCc::Reno => Arc::new(CoreConfig::RENO),
        }
    }
}

impl fmt::Display for QuicCc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QuicCc {
    type Err = QuicCcError;

    /// One of [`QuicCc::NAMES`], exactly.
    fn from_str(s: &str) -> Result<QuicCc, QuicCcError> {
        QuicCc::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| QuicCcError::Unknown { name: s.to_owned() })
    }
}

/// Why a QUIC congestion controller name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuicCcError {
    /// The name is none of [`QuicCc::NAMES`].
    #[error("unknown QUIC congestion controller `{name}` (choose one of: {choices})", choices = QuicCc::NAMES.join(", "))]
    Unknown {
        /// The name as given.
        name: String,
    },
}

/// The factory for the controller called `name` (one of [`QuicCc::NAMES`]),
/// for [`crate::OriginConfig::quic_congestion`].
pub fn factory(name: &str) -> Result<QuicCongestion, QuicCcError> {
    Ok(name.parse::<QuicCc>()?.factory())
}

#[cfg(test)]
mod tests;
