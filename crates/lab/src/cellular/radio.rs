//! The radios the study emulates and the networks under them: each radio's
//! round trip, fixed rates, cellular trace and longest promotion, and the
//! link a testbed of one radio over one network is built on.

use std::path::Path;
use std::time::Duration;

use mewa_link::core::radio::{LteParams, RadioConfig, UmtsParams};
use mewa_link::core::{DelaySpec, DirectionConfig, LinkConfig, QueueSpec, RateSpec};

use crate::experiment::kinds::named_enum;
use crate::experiment::{read_traces, ExperimentError};

named_enum! {
    /// A radio access technology.
    pub enum Radio ("radio", "3g or lte") {
        /// 3G (UMTS/HSPA).
        ThreeG = "3g",
        /// LTE.
        Lte = "lte",
    }
}

named_enum! {
    /// What carries the radio's packets.
    pub enum Network ("network", "fixed or trace") {
        /// The radio's fixed rates ([`RadioProfile::down_bps`], `up_bps`).
        Fixed = "fixed",
        /// The radio's cellular trace ([`RadioProfile::trace`]).
        Trace = "trace",
    }
}

/// One radio access technology as the experiment emulates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RadioProfile {
    /// Which radio.
    pub radio: Radio,
    /// Round trip of the link without queueing, ms.
    pub rtt_ms: u64,
    /// Fixed downlink rate, bit/s.
    pub down_bps: u64,
    /// Fixed uplink rate, bit/s.
    pub up_bps: u64,
    /// The cellular trace of this technology in the shared traces.
    pub trace: &'static str,
    /// The longest promotion the radio model makes a packet wait (3G:
    /// IDLE → CELL_DCH; LTE: RRC_IDLE → RRC_CONNECTED), ms: what the
    /// retransmission timeout must cover after idle.
    pub promotion_ms: u64,
}

impl Radio {
    /// How the experiment emulates it.
    pub fn profile(self) -> RadioProfile {
        match self {
            // 2 Mbit/s down, 512 kbit/s up, 150 ms round trip, the
            // T-Mobile UMTS drive trace; seed 003's "∼2 seconds" promotion.
            Radio::ThreeG => RadioProfile {
                radio: self,
                rtt_ms: 150,
                down_bps: 2_000_000,
                up_bps: 512_000,
                trace: "TMobile-UMTS-driving",
                promotion_ms: 2_000,
            },
            // 10 Mbit/s down, 5 Mbit/s up, 60 ms round trip, the T-Mobile
            // LTE trace; seed 003's "about 400 msec" promotion.
            Radio::Lte => RadioProfile {
                radio: self,
                rtt_ms: 60,
                down_bps: 10_000_000,
                up_bps: 5_000_000,
                trace: "TMobile-LTE-short",
                promotion_ms: 400,
            },
        }
    }
}

impl RadioProfile {
    /// The longest promotion.
    pub fn promotion(&self) -> Duration {
        Duration::from_millis(self.promotion_ms)
    }

    /// The radio model's parameters.
    fn radio_model(&self) -> RadioConfig {
        match self.radio {
            Radio::ThreeG => RadioConfig::Umts(UmtsParams::default()),
            Radio::Lte => RadioConfig::Lte(LteParams::default()),
        }
    }

    /// The link of this radio over `network`, with a drop-tail queue of
    /// `queue_ms` at the fixed rate each way (`None`: unbounded). Reads
    /// the trace for [`Network::Trace`].
    pub fn link(
        &self,
        network: Network,
        queue_ms: Option<u64>,
    ) -> Result<LinkConfig, ExperimentError> {
        let delay = DelaySpec::Fixed(Duration::from_micros(self.rtt_ms.saturating_mul(500)));
        let (down, up) = match network {
            Network::Fixed => (
                RateSpec::Constant { bps: self.down_bps },
                RateSpec::Constant { bps: self.up_bps },
            ),
            Network::Trace => {
                let (_, d, u) = read_traces(Path::new(self.trace), None)?;
                (RateSpec::Trace(d), RateSpec::Trace(u))
            }
        };
        let dir = |rate, bps: u64| DirectionConfig {
            delay: delay.clone(),
            rate,
            queue: queue_ms.map_or_else(QueueSpec::default, |ms| {
                crate::bulk::drop_tail(Some(crate::fld::queue_bytes(bps, ms)))
            }),
            loss: 0.0,
        };
        Ok(LinkConfig {
            up: dir(up, self.up_bps),
            down: dir(down, self.down_bps),
            radio: self.radio_model(),
            ..LinkConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_radios_have_links_over_fixed_rates_and_their_trace() {
        for &r in Radio::ALL {
            let p = r.profile();
            let l = p.link(Network::Fixed, None).unwrap();
            assert_ne!(l.radio, RadioConfig::Off);
            assert_eq!(Some(l.radio), RadioConfig::preset(r.name()));
            assert_eq!(l.down.queue, QueueSpec::default());
            // 300 ms at 2 Mbit/s is 75 kB.
            let q = p.link(Network::Fixed, Some(300)).unwrap();
            let want = crate::fld::queue_bytes(p.down_bps, 300);
            assert_eq!(q.down.queue, crate::bulk::drop_tail(Some(want)));
            assert!("wired".parse::<Network>().is_err());
            if std::path::Path::new(crate::experiment::SHARED_TRACES).exists() {
                assert!(p.link(Network::Trace, None).is_ok(), "{r}");
            }
        }
    }
}
