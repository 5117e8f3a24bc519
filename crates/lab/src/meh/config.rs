//! The experiment's settings as the runner uses them: the client's
//! policies and the resolved radio and wired links.

use std::path::PathBuf;
use std::time::Duration;

use mewa_link::core::radio::RadioConfig;
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
    type Err = mewa_loader::record::UnknownName;
    fn from_str(s: &str) -> Result<Policy, Self::Err> {
        match s {
            "hint" => Ok(Policy::Hint),
            "warm-first" => Ok(Policy::WarmFirst),
            _ => Err(mewa_loader::record::UnknownName {
                what: "policy",
                got: s.to_string(),
                choices: "hint or warm-first",
            }),
        }
    }
}

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

/// Which pages Chromium loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BrowserPages {
    /// Every page of a recorded corpus, seed 000's Fig. 8 pages of a
    /// generated one.
    Auto,
    /// The three pages closest to seed 000 Fig. 8's sizes.
    Fig8,
    /// Every page.
    All,
}

impl std::str::FromStr for BrowserPages {
    type Err = mewa_loader::record::UnknownName;
    fn from_str(s: &str) -> Result<BrowserPages, Self::Err> {
        match s {
            "auto" => Ok(BrowserPages::Auto),
            "fig8" => Ok(BrowserPages::Fig8),
            "all" => Ok(BrowserPages::All),
            other => Err(mewa_loader::record::UnknownName {
                what: "browser page choice",
                got: other.to_string(),
                choices: "auto, fig8 or all",
            }),
        }
    }
}

/// The phone's radio state machine on the radio link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rrc {
    /// No RRC model: the radio is always connected.
    Off,
    /// LTE RRC (400 ms promotion from idle, DRX).
    Lte,
    /// 3G RRC (2 s promotion from idle, FACH).
    #[serde(rename = "3g")]
    Umts,
}

impl Rrc {
    /// The link's radio model.
    pub fn config(self) -> RadioConfig {
        match self {
            Rrc::Off => RadioConfig::Off,
            Rrc::Lte => RadioConfig::Lte(Default::default()),
            Rrc::Umts => RadioConfig::Umts(Default::default()),
        }
    }
}

impl std::str::FromStr for Rrc {
    type Err = mewa_loader::record::UnknownName;
    fn from_str(s: &str) -> Result<Rrc, Self::Err> {
        match s {
            "off" => Ok(Rrc::Off),
            "lte" => Ok(Rrc::Lte),
            "3g" => Ok(Rrc::Umts),
            other => Err(mewa_loader::record::UnknownName {
                what: "radio model",
                got: other.to_string(),
                choices: "lte, 3g or off",
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
            rrc: Rrc::Off,
            runs: 30,
            plan_rate: PlanRate::Fixed(32e6),
            browser_pages: BrowserPages::Auto,
            policy: Policy::WarmFirst,
            dispatch: Dispatch::Auto,
            prefetch: true,
            one_connection: false,
            first_flight_budget: false,
            image_hold: false,
            images_with_document: false,
            hold_other_hosts_images: false,
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
        LinkConfig {
            radio: self.rrc.config(),
            ..link_of(self.radio_rtt_ms, down, up)
        }
    }

    pub(crate) fn wired_link(&self) -> LinkConfig {
        link_of(self.wired_rtt_ms, RateSpec::Unlimited, RateSpec::Unlimited)
    }
}
