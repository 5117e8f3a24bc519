//! Seed 000's experiment, end to end: a client behind an emulated radio
//! link asks the mobile edge's DNS for a page's host with the hint request,
//! plans the number of HTTP/2 connections from the hint (Algorithm 1 with
//! BDP = radio bandwidth × (radio RTT + wired RTT)) and spreads the objects
//! over them by size; the same page is loaded back to back without the hint
//! (one connection, as a browser does).
//!
//! Everything on the path is the real thing: the edge is `mewa-edge` with
//! its SQLite store, latency monitor (which measures the wired RTT the hint
//! carries) and DNS server in its own namespace; the client's resolver and
//! planner are `mewa-client`'s; the origin is `mewa-origin`; TCP is the
//! kernel's in three namespaces.
//!
//! Topology: `client ⇄ radio link ⇄ edge ⇄ wired link ⇄ origin`.
//!
//! The experiment is a [`Config`] (what the CLI's flags set, written to
//! the result folder's `config.json`), [`run`], and a [`MehReport`].
//! Inside, by job:
//! - `config`: the client's policies and the resolved [`Setup`];
//! - `edge`: the edge in the testbed;
//! - `pairs`: paired loads, with and without the hint;
//! - `summary`: per-page and overall figures;
//! - `browser`: headless Chromium through the local proxy;
//! - `report`: tables, plots and the Markdown report.

pub(crate) mod browser;
mod config;
mod edge;
mod pairs;
mod report;
mod summary;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use browser::BrowserRun;
pub use config::{BrowserPages, Dispatch, PlanRate, Policy, RadioLink, Rrc, Setup};
pub use pairs::{plan_bdp_bytes, run_setup, PlanAssign, PULL_FLOOR_BYTES, TRACE_STRIDE_MS};
pub use report::MehReport;
pub use summary::{fig8_pages, full_hint_bytes, summarise, MehPage, MehResult, MehRun};

use crate::experiment::{
    at_least_one, needs_root, read_traces, rtt_in_range, CorpusChoice, ExperimentError,
    OriginChoice, Progress,
};
use mewa_report::ResultFolder;

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
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            keep_netlogs: false,
            out: PathBuf::from("out/lab"),
        }
    }
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

/// Runs the experiment: builds the testbed, loads every page `runs` times
/// with and without the hint (and in Chromium when asked), and returns the
/// report; the result folder under [`Config::out`] holds `config.json` from
/// the start. Needs root.
pub fn run(config: &Config, progress: &Progress) -> Result<MehReport, ExperimentError> {
    at_least_one("--runs", config.runs)?;
    rtt_in_range("--radio-rtt", config.radio_rtt_ms)?;
    rtt_in_range("--wired-rtt", config.wired_rtt_ms)?;
    let corpus = config.corpus.load()?;
    let (radio, link_bps) = match &config.trace {
        Some(t) => {
            let (down, d, u) = read_traces(t, config.uplink.as_deref())?;
            let mean = d.mean_bps();
            let name = down.file_name().map_or_else(
                || down.display().to_string(),
                |n| n.to_string_lossy().into(),
            );
            (
                RadioLink::Trace {
                    name,
                    down: d,
                    up: u,
                },
                mean,
            )
        }
        None => (
            RadioLink::Fixed {
                rate_bps: config.rate_bps,
            },
            config.rate_bps as f64,
        ),
    };
    let plan_rate = match config.bandwidth_bps {
        Some(b) => PlanRate::Fixed(b as f64),
        None => PlanRate::Observed {
            prior_bps: config.prior_bps as f64,
        },
    };
    let browser = match (config.browser_runs, config.chromium.exists()) {
        (0, _) => None,
        (n, true) => Some((config.chromium.clone(), n)),
        (_, false) => {
            tracing::warn!(
                "skipping the browser runs: no Chromium at {} (apt-get install chromium, or --chromium PATH)",
                config.chromium.display()
            );
            None
        }
    };
    let origin = config.origin.settings()?;
    needs_root()?;
    let folder = ResultFolder::create(&config.out, "meh", "mewa lab meh", config)?;
    let setup = Setup {
        radio,
        radio_rtt_ms: config.radio_rtt_ms,
        wired_rtt_ms: config.wired_rtt_ms,
        runs: config.runs,
        plan_rate,
        rrc: config.radio,
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
        browser,
        keep_netlogs: config.keep_netlogs,
        ..Setup::seed000(origin.ca_dir, folder.path().join("edge.sqlite"))
    };
    let result = run_setup(&corpus, &setup, folder.path(), progress)?;
    Ok(MehReport::new(
        config.clone(),
        &setup,
        link_bps,
        result,
        folder,
    ))
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
            ..Config::default()
        };
        let text = serde_json::to_string(&c).expect("json");
        let back: Config = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, c);
        // An older or hand-written config names only what it changes.
        let partial: Config = serde_json::from_str(r#"{"runs": 2}"#).expect("partial");
        assert_eq!(partial.runs, 2);
        assert_eq!(partial.radio_rtt_ms, Config::default().radio_rtt_ms);
        assert!(serde_json::from_str::<Config>(r#"{"rnus": 2}"#).is_err());
    }

    #[test]
    fn zero_runs_and_absurd_rtts_are_refused_before_anything_starts() {
        let bad = Config {
            runs: 0,
            ..Config::default()
        };
        assert!(matches!(
            run(&bad, &Progress::none()),
            Err(ExperimentError::Config {
                field: "--runs",
                ..
            })
        ));
        let bad = Config {
            wired_rtt_ms: 0,
            ..Config::default()
        };
        assert!(matches!(
            run(&bad, &Progress::none()),
            Err(ExperimentError::Config {
                field: "--wired-rtt",
                ..
            })
        ));
    }
}
