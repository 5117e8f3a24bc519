//! `mewa lab meh`'s settings as the user gives them (`config.json`, the
//! CLI's flags) and the choices they name.

use std::path::PathBuf;

use mewa_link::core::radio::RadioConfig;
use serde::{Deserialize, Serialize};

use crate::experiment::kinds::named_enum;
use crate::experiment::{CorpusChoice, OriginChoice};

/// When the hint-aware client sends each leaf's request (one enum for the
/// loader, the lab and the proxy).
pub use mewa_model::pull::Dispatch;

named_enum! {
    /// How the hint-aware client spreads objects over its n connections.
    pub enum Policy ("policy", "hint or warm-first") {
        /// Seed 000 as written: the hint's size-balanced (LPT) assignment;
        /// objects the hint does not list go to the least-loaded connection.
        Hint = "hint",
        /// Objects that reveal others (HTML, CSS, scripts) stay on the
        /// connection that carried the document, whose window has grown;
        /// the leaves follow the hint's assignment (docs/LAB-RESULTS.md
        /// explains why).
        WarmFirst = "warm-first",
    }
}

named_enum! {
    /// Which pages Chromium loads.
    pub enum BrowserPages ("browser page choice", "auto, fig8 or all") {
        /// Every page of a recorded corpus, seed 000's Fig. 8 pages of a
        /// generated one.
        Auto = "auto",
        /// The three pages closest to seed 000 Fig. 8's sizes.
        Fig8 = "fig8",
        /// Every page.
        All = "all",
    }
}

named_enum! {
    /// A configuration of Chromium a page is loaded in: what a user has
    /// without mewa (the peers), and with it. Every arm's load is paired
    /// with a `cold` load on the same stretch of the trace.
    pub enum Arm ("arm", "cold, predictor, early-hints, h3 or meh") {
        /// A first visit: a fresh profile that knows nothing of the page.
        Cold = "cold",
        /// A returning visitor: the same profile loaded the page before;
        /// its HTTP cache, socket pools and host cache are cleared before
        /// the measured load, its loading predictor kept (it preconnects
        /// to the hosts it learned).
        Predictor = "predictor",
        /// The origin answers the document with `103 Early Hints`
        /// (preconnect to the page's other hosts, preload of its
        /// render-blocking style sheets, scripts and fonts), as a CDN
        /// sends from what it saw of the page.
        EarlyHints = "early-hints",
        /// HTTP/3 to every host (the testbed's origin serves each over
        /// QUIC).
        H3 = "h3",
        /// The Mobile Edge Hint through the local proxy.
        Meh = "meh",
    }
}

impl Arm {
    /// The arms a user has without mewa: the baselines mewa must beat.
    pub fn is_peer(self) -> bool {
        !matches!(self, Arm::Meh)
    }
}

/// `arms` as run: `cold` first (every other arm is paired with it), then
/// the others in the order of [`Arm::ALL`], each once.
pub fn arms_in_order(arms: &[Arm]) -> Vec<Arm> {
    Arm::ALL
        .iter()
        .copied()
        .filter(|a| *a == Arm::Cold || arms.contains(a))
        .collect()
}

named_enum! {
    /// The phone's radio state machine on the radio link.
    pub enum Rrc ("radio model", "lte, 3g or off") {
        /// No RRC model: the radio is always connected.
        Off = "off",
        /// LTE RRC (400 ms promotion from idle, DRX).
        Lte = "lte",
        /// 3G RRC (2 s promotion from idle, FACH).
        Umts = "3g",
    }
}

impl Rrc {
    /// The radio's promotion from idle (zero without a model).
    pub fn promotion(self) -> std::time::Duration {
        match self.config() {
            RadioConfig::Off => std::time::Duration::ZERO,
            RadioConfig::Lte(p) => p.promotion,
            RadioConfig::Umts(p) => p.promotion,
        }
    }

    /// The link's radio model.
    pub fn config(self) -> RadioConfig {
        match self {
            Rrc::Off => RadioConfig::Off,
            Rrc::Lte => RadioConfig::Lte(Default::default()),
            Rrc::Umts => RadioConfig::Umts(Default::default()),
        }
    }
}

/// `mewa lab meh`'s settings. `Default` is seed 000 §IV and what the CLI
/// shows: 32 Mbit/s radio, RTT 45 ms radio + 20 ms wired, 30 runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The origin's congestion control and CA.
    pub origin: OriginChoice,
    /// Loads per page and variant (seed 000: 30).
    pub runs: usize,
    /// Radio link rate both ways, bit/s (seed 000 §IV: 32 Mbit/s average);
    /// unused with a trace.
    pub rate_bps: u64,
    /// A mahimahi downlink trace (any file; `X.up` beside a `X.down` is its
    /// uplink unless `uplink` names one) instead of a fixed rate; a bare
    /// name is looked up in `../shared/data/traces`.
    pub trace: Option<PathBuf>,
    /// The uplink trace of `trace`, when it is not `X.up` beside `X.down`.
    #[serde(default)]
    pub uplink: Option<PathBuf>,
    /// Round trip over the radio link (client ⇄ edge), ms.
    pub radio_rtt_ms: u64,
    /// Round trip edge ⇄ origin, ms.
    pub wired_rtt_ms: u64,
    /// Radio bandwidth the client is told to plan with, bit/s (seed 000's
    /// known bandwidth); none: what its own recent loads delivered
    /// ([`mewa_client::rate::DeliveryRate`]), `prior_bps` before the first.
    pub bandwidth_bps: Option<u64>,
    /// The client's bandwidth estimate before its first load, bit/s (a
    /// rate the modem would report).
    #[serde(default = "default_prior")]
    pub prior_bps: u64,
    /// The phone's RRC model on the radio link (`off`, `lte`, `3g`); with
    /// one, the radio sleeps before every load (a user between two pages).
    #[serde(default = "default_rrc")]
    pub radio: Rrc,
    /// Which pages Chromium loads: every page of a recorded corpus and the
    /// Fig. 8 pages of a generated one (`auto`), `fig8` or `all`.
    #[serde(default = "default_browser_pages")]
    pub browser_pages: BrowserPages,
    /// How objects are spread over the connections.
    pub policy: Policy,
    /// When the hint-aware client requests images, fonts and media.
    pub dispatch: Dispatch,
    /// With the hint, request the objects whose URLs it carries right after
    /// the document.
    pub prefetch: bool,
    /// With the hint, keep one connection (the hint's URLs only, no n):
    /// with `prefetch` off as well, the hint does nothing.
    #[serde(default)]
    pub one_connection: bool,
    /// The browser runs' proxy keeps its prefetch to one initial window per
    /// connection until the document arrives
    /// (`mewa_client::proxy::ProxyConfig::first_flight_budget`).
    #[serde(default)]
    pub first_flight_budget: bool,
    /// The browser runs' proxy holds prefetched images until the urgent
    /// objects are nearly in (`mewa_client::proxy::ProxyConfig::image_hold`;
    /// off by default).
    #[serde(default)]
    pub image_hold: bool,
    /// The browser runs' proxy sends prefetched images on the document's
    /// connection at once, not after the document's response head
    /// (`mewa_client::proxy::ProxyConfig::images_after_document` off).
    #[serde(default)]
    pub images_with_document: bool,
    /// The browser runs' proxy holds prefetched images on the page's other
    /// hosts until the urgent objects are nearly in
    /// (`mewa_client::proxy::ProxyConfig::hold_other_hosts_images`).
    #[serde(default)]
    pub hold_other_hosts_images: bool,
    /// Chromium loads of the Fig. 8 pages per variant (0: none).
    pub browser_runs: usize,
    /// The Chromium arms: `cold` and what else (`cold` is always loaded:
    /// every other arm is paired with it).
    #[serde(default = "default_arms")]
    pub arms: Vec<Arm>,
    /// How many times slower Chromium's renderer runs than this machine's
    /// CPU (`Emulation.setCPUThrottlingRate`), in every arm: 4 is a
    /// mid-range phone (Lighthouse's mobile setting), 1 none.
    #[serde(default = "default_cpu_slowdown")]
    pub cpu_slowdown: f64,
    /// The Chromium binary.
    pub chromium: PathBuf,
    /// Keep every browser load's NetLog in the result folder.
    pub keep_netlogs: bool,
    /// Parent of the timestamped result folder.
    pub out: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            runs: 30,
            rate_bps: 32_000_000,
            trace: None,
            uplink: None,
            radio_rtt_ms: 45,
            wired_rtt_ms: 20,
            bandwidth_bps: None,
            prior_bps: default_prior(),
            radio: default_rrc(),
            browser_pages: default_browser_pages(),
            policy: Policy::WarmFirst,
            dispatch: Dispatch::Auto,
            prefetch: true,
            one_connection: false,
            first_flight_budget: false,
            image_hold: false,
            images_with_document: false,
            hold_other_hosts_images: false,
            browser_runs: 5,
            arms: default_arms(),
            cpu_slowdown: default_cpu_slowdown(),
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            keep_netlogs: false,
            out: PathBuf::from("out/lab"),
        }
    }
}

fn default_arms() -> Vec<Arm> {
    vec![Arm::Cold, Arm::Meh]
}

fn default_cpu_slowdown() -> f64 {
    1.0
}

fn default_prior() -> u64 {
    10_000_000
}

fn default_rrc() -> Rrc {
    Rrc::Off
}

fn default_browser_pages() -> BrowserPages {
    BrowserPages::Auto
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips_through_json_and_fills_defaults() {
        let c = Config {
            runs: 3,
            trace: Some("/data/x.down".into()),
            dispatch: Dispatch::PullRate,
            radio: Rrc::Umts,
            ..Config::default()
        };
        let text = serde_json::to_string(&c).expect("json");
        assert!(text.contains("\"radio\":\"3g\""), "{text}");
        let back: Config = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, c);
        // An older or hand-written config names only what it changes.
        let partial: Config = serde_json::from_str(r#"{"runs": 2}"#).expect("partial");
        assert_eq!(partial.runs, 2);
        assert_eq!(partial.radio_rtt_ms, Config::default().radio_rtt_ms);
        assert!(serde_json::from_str::<Config>(r#"{"rnus": 2}"#).is_err());
    }

    #[test]
    fn choices_keep_their_names() {
        assert_eq!("warm-first".parse::<Policy>(), Ok(Policy::WarmFirst));
        assert_eq!("3g".parse::<Rrc>(), Ok(Rrc::Umts));
        assert_eq!("fig8".parse::<BrowserPages>(), Ok(BrowserPages::Fig8));
        assert_eq!("early-hints".parse::<Arm>(), Ok(Arm::EarlyHints));
        let e = "warm".parse::<Arm>().expect_err("no such arm");
        assert!(
            e.to_string()
                .contains("cold, predictor, early-hints, h3 or meh"),
            "{e}"
        );
        // Cold always, first; each arm once, in one order.
        assert_eq!(
            arms_in_order(&[Arm::Meh, Arm::H3, Arm::Meh]),
            [Arm::Cold, Arm::H3, Arm::Meh]
        );
        assert!(Arm::Predictor.is_peer() && !Arm::Meh.is_peer());
        let e = "5g".parse::<Rrc>().expect_err("no 5G model");
        assert!(e.to_string().contains("lte, 3g or off"), "{e}");
        // The report's setting line names them as before.
        assert_eq!(
            format!("{:?} {:?}", Rrc::Umts, Policy::WarmFirst),
            "Umts WarmFirst"
        );
    }
}
