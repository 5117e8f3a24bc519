//! The experiment's settings as the runner uses them: a [`Config`]
//! resolved, its traces read, its CA folder found, its browser looked for.

use std::path::PathBuf;
use std::time::Duration;

use mewa_link::core::{LinkConfig, RateSpec};

use super::config::{BrowserPages, Config, Dispatch, Policy, Rrc};
use crate::bed::link_of;
use crate::experiment::{read_traces, ExperimentError};

/// The longest one load may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The bandwidth the client plans n with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlanRate {
    /// A rate the client is told (seed 000's known radio bandwidth), bit/s.
    Fixed(f64),
    /// What the client's own recent loads delivered
    /// ([`mewa_client::rate::DeliveryRate`]); before any, this prior
    /// (a rate the modem would report), bit/s.
    Observed {
        /// The estimate before the first load, bit/s.
        prior_bps: f64,
    },
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

impl RadioLink {
    /// The link's mean downlink rate, bit/s.
    pub fn mean_bps(&self) -> f64 {
        match self {
            RadioLink::Fixed { rate_bps } => *rate_bps as f64,
            RadioLink::Trace { down, .. } => down.mean_bps(),
        }
    }
}

/// The experiment's settings, resolved.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Rate of the radio link.
    pub radio: RadioLink,
    /// Round trip over the radio link (client ⇄ edge).
    pub radio_rtt_ms: u64,
    /// Round trip over the wired part (edge ⇄ origin); the edge measures it.
    pub wired_rtt_ms: u64,
    /// The phone's RRC model on the radio link; with one, the radio is put
    /// to sleep before every load (a user between two pages), so every
    /// load pays the promotion.
    pub rrc: Rrc,
    /// Loads per page and variant.
    pub runs: usize,
    /// The radio bandwidth the client plans with.
    pub plan_rate: PlanRate,
    /// Which pages Chromium loads.
    pub browser_pages: BrowserPages,
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
    /// With the hint, one connection whatever n the plan chose (the URLs'
    /// part of the gain alone).
    pub one_connection: bool,
    /// The browser runs' proxy holds its prefetch to a first-flight budget
    /// until the document arrives.
    pub first_flight_budget: bool,
    /// The browser runs' proxy holds prefetched images until the urgent
    /// objects are nearly in (`mewa_client::proxy::ProxyConfig::image_hold`).
    pub image_hold: bool,
    /// The browser runs' proxy sends prefetched images on the document's
    /// connection before the document's response head
    /// (`mewa_client::proxy::ProxyConfig::images_after_document` off).
    pub images_with_document: bool,
    /// The browser runs' proxy holds prefetched images on the page's other
    /// hosts until the urgent objects are nearly in.
    pub hold_other_hosts_images: bool,
    /// TCP congestion control of the origin.
    pub congestion: String,
    /// The test CA's folder.
    pub ca_dir: PathBuf,
    /// Per-load limit.
    pub timeout: Duration,
    /// Also load pages in headless Chromium through the local proxy:
    /// (Chromium binary, runs per page and variant); `None` when none are
    /// asked for or no Chromium is installed.
    pub browser: Option<(PathBuf, usize)>,
    /// Keep each browser load's Chromium NetLog in the result folder's
    /// `chromium/` (they are a few MB each), for reading the load's phases
    /// in Chromium's netlog viewer or with
    /// [`mewa_chromium::netlog_times`]'s parser.
    pub keep_netlogs: bool,
    /// Chromium's arms, `cold` first ([`super::config::arms_in_order`]).
    pub arms: Vec<super::config::Arm>,
    /// Chromium's renderer slowdown.
    pub cpu_slowdown: f64,
}

impl Setup {
    /// `config` resolved: its trace read, its CA folder found, the browser
    /// runs dropped when no Chromium is at [`Config::chromium`]
    /// ([`Setup::browser`] is then `None`).
    pub fn resolve(config: &Config) -> Result<Setup, ExperimentError> {
        let radio = match &config.trace {
            Some(t) => {
                let (down, d, u) = read_traces(t, config.uplink.as_deref())?;
                let name = down.file_name().map_or_else(
                    || down.display().to_string(),
                    |n| n.to_string_lossy().into(),
                );
                RadioLink::Trace {
                    name,
                    down: d,
                    up: u,
                }
            }
            None => RadioLink::Fixed {
                rate_bps: config.rate_bps,
            },
        };
        let plan_rate = match config.bandwidth_bps {
            Some(b) => PlanRate::Fixed(b as f64),
            None => PlanRate::Observed {
                prior_bps: config.prior_bps as f64,
            },
        };
        let browser = (config.browser_runs > 0
            && crate::browser::check_binary(&config.chromium, "").is_ok())
        .then(|| (config.chromium.clone(), config.browser_runs));
        let origin = config.origin.settings()?;
        Ok(Setup {
            radio,
            radio_rtt_ms: config.radio_rtt_ms,
            wired_rtt_ms: config.wired_rtt_ms,
            rrc: config.radio,
            runs: config.runs,
            plan_rate,
            browser_pages: config.browser_pages,
            policy: config.policy,
            dispatch: config.dispatch,
            prefetch: config.prefetch,
            one_connection: config.one_connection,
            first_flight_budget: config.first_flight_budget,
            image_hold: config.image_hold,
            images_with_document: config.images_with_document,
            hold_other_hosts_images: config.hold_other_hosts_images,
            congestion: origin.congestion,
            ca_dir: origin.ca_dir,
            timeout: LOAD_TIMEOUT,
            browser,
            keep_netlogs: config.keep_netlogs,
            arms: super::config::arms_in_order(&config.arms),
            cpu_slowdown: config.cpu_slowdown,
        })
    }

    /// The radio link: its rate or traces, half its RTT each way, and the
    /// RRC model.
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
        LinkConfig {
            radio: self.rrc.config(),
            ..link_of(self.radio_rtt_ms, down, up)
        }
    }

    /// The wired link: its RTT, no rate limit.
    pub(crate) fn wired_link(&self) -> LinkConfig {
        link_of(self.wired_rtt_ms, RateSpec::Unlimited, RateSpec::Unlimited)
    }

    /// The window the client measures its loads' delivery over: one
    /// end-to-end round trip, µs.
    pub(crate) fn delivery_window_us(&self) -> u64 {
        (self.radio_rtt_ms + self.wired_rtt_ms) * 1000
    }
}
