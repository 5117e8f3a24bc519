//! The experiment's settings as the runner uses them: the client's
//! policies and the resolved radio and wired links.

use std::path::PathBuf;
use std::time::Duration;

use mewa_link::core::{LinkConfig, RateSpec};
use serde::{Deserialize, Serialize};

use crate::bed::link_of;

/// How the hint-aware client spreads objects over its n connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Seed 000 as written: the hint's size-balanced (LPT) assignment;
    /// objects the hint does not list go to the least-loaded connection.
    Hint,
    /// Objects that reveal others (HTML, CSS, scripts) stay on the
    /// connection that carried the document, whose window has grown; the
    /// leaves follow the hint's assignment (docs/LAB-RESULTS.md explains why).
    WarmFirst,
}

/// When the hint-aware client sends each leaf's request (one enum for the
/// loader, the lab and the proxy).
pub use mewa_model::pull::Dispatch;

impl std::str::FromStr for Policy {
    type Err = crate::record::UnknownName;
    fn from_str(s: &str) -> Result<Policy, Self::Err> {
        match s {
            "hint" => Ok(Policy::Hint),
            "warm-first" => Ok(Policy::WarmFirst),
            _ => Err(crate::record::UnknownName {
                what: "policy",
                got: s.to_string(),
                choices: "hint or warm-first",
            }),
        }
    }
}

/// The radio link.
#[derive(Debug, Clone)]
pub enum RadioLink {
    /// A constant rate both ways (seed 000 §IV: 32 Mbit/s).
    Fixed {
        /// Bit/s.
        rate_bps: u64,
    },
    /// Mahimahi delivery traces (downlink, uplink).
    Trace {
        /// Label for reports (the trace file's name).
        name: String,
        /// Network → client.
        down: mewa_link::core::trace::DeliveryTrace,
        /// Client → network.
        up: mewa_link::core::trace::DeliveryTrace,
    },
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Rate of the radio link.
    pub radio: RadioLink,
    /// Round trip over the radio link (client ⇄ edge).
    pub radio_rtt_ms: u64,
    /// Round trip over the wired part (edge ⇄ origin); the edge measures it.
    pub wired_rtt_ms: u64,
    /// Loads per page and variant.
    pub runs: usize,
    /// The radio bandwidth the client plans with, bit/s (seed 000: known
    /// to the client; here the link's rate, or a trace's mean).
    pub planned_bandwidth_bps: f64,
    /// How objects are spread over the connections.
    pub policy: Policy,
    /// When leaves are requested.
    pub dispatch: Dispatch,
    /// With the hint, request every object whose URL the hint carries
    /// right after the document (seed 000 §II: the client "sends requests
    /// to all embedded URLs on parallel connections"); off, objects are
    /// requested as the page reveals them and the hint only sets n and
    /// the assignment.
    pub prefetch: bool,
    /// TCP congestion control of the origin.
    pub congestion: String,
    /// The test CA's folder.
    pub ca_dir: PathBuf,
    /// Where the edge keeps its SQLite store (a fresh file per run).
    pub store_path: PathBuf,
    /// Per-load limit.
    pub timeout: Duration,
    /// Also load seed 000's Fig. 8 pages in headless Chromium through the
    /// local proxy: (Chromium binary, runs per page and variant).
    pub browser: Option<(PathBuf, usize)>,
    /// Keep each browser load's Chromium NetLog in the result folder's
    /// `chromium/` (they are a few MB each), for reading the load's phases
    /// in Chromium's netlog viewer or with [`netlog_times`]'s parser.
    pub keep_netlogs: bool,
}

impl Setup {
    /// Seed 000 §IV: average RTT 65 ms, 32 Mbit/s; 45 ms of the RTT over
    /// the radio and 20 ms wired, 30 runs per page and variant.
    pub fn seed000(ca_dir: PathBuf, store_path: PathBuf) -> Setup {
        Setup {
            radio: RadioLink::Fixed {
                rate_bps: 32_000_000,
            },
            radio_rtt_ms: 45,
            wired_rtt_ms: 20,
            runs: 30,
            planned_bandwidth_bps: 32e6,
            policy: Policy::WarmFirst,
            dispatch: Dispatch::Auto,
            prefetch: true,
            congestion: "cubic".into(),
            ca_dir,
            store_path,
            timeout: Duration::from_secs(120),
            browser: None,
            keep_netlogs: false,
        }
    }

    pub(crate) fn radio_link(&self) -> LinkConfig {
        let (down, up) = match &self.radio {
            RadioLink::Fixed { rate_bps } => (
                RateSpec::Constant { bps: *rate_bps },
                RateSpec::Constant { bps: *rate_bps },
            ),
            RadioLink::Trace { down, up, .. } => {
                (RateSpec::Trace(down.clone()), RateSpec::Trace(up.clone()))
            }
        };
        link_of(self.radio_rtt_ms, down, up)
    }

    pub(crate) fn wired_link(&self) -> LinkConfig {
        link_of(self.wired_rtt_ms, RateSpec::Unlimited, RateSpec::Unlimited)
    }
}
