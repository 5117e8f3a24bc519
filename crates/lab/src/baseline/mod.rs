//! The first experiment: load pages over one HTTP/2 connection
//! through the link emulator with real kernel TCP, and set the measured load
//! times beside seed 000's T_HTTP model.
//!
//! Seed 000 §IV grid: 20 Mbit/s, RTT 50/75/100/125/150 ms. For each RTT one
//! testbed is built (client and origin namespaces, one emulated link with
//! half the RTT each way and mahimahi's default unbounded drop-tail queue, so
//! that no packet is lost — the model has no loss term); every page is then
//! loaded `runs` times, the pages interleaved run by run so that slow drift
//! of the machine spreads over all pages alike.
//!
//! The measured time is the wire load time (first SYN to last body byte),
//! seed 000's tcpdump measure ([`mewa_loader::metrics`]). The model is
//! [`mewa_model::t_http`] (eq. 1 as printed) and
//! [`mewa_model::t_http_rounds`] (round by round) for one connection, with
//! the page's total body bytes as S_page.

mod report;

use std::path::{Path, PathBuf};
use std::time::Duration;

use mewa_corpus::{Corpus, Page};
use mewa_link::core::{LinkConfig, RateSpec};
use mewa_link::runtime::LinkOptions;
use mewa_model::http::{t_http, t_http_rounds, TcpPath};
use serde::{Deserialize, Serialize};

use crate::bed::{link_of, Bed, OriginSettings};
use crate::experiment::{
    at_least_one, needs_root, rtt_in_range, CorpusChoice, Experiment, ExperimentError,
    OriginChoice, Run, Unit,
};
use mewa_loader::metrics::PageMetrics;
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::LoadOptions;
use mewa_report::median;
use mewa_report::ResultFolder;

pub use report::BaselineReport;

/// `mewa lab baseline`'s settings. `Default` is seed 000 §IV's grid and
/// what the CLI shows: 20 Mbit/s, RTT 50–150 ms, 10 runs, h2c, cubic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The origin's congestion control and CA.
    pub origin: OriginChoice,
    /// Round-trip times of the grid, ms.
    pub rtts_ms: Vec<u64>,
    /// Bottleneck rate both ways, bit/s.
    pub rate_bps: u64,
    /// Loads per page and RTT.
    pub runs: usize,
    /// h2 over TLS instead of h2c (adds the TLS handshake's round trip,
    /// which the model does not count).
    pub tls: bool,
    /// Parent of the timestamped result folder.
    pub out: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            rtts_ms: vec![50, 75, 100, 125, 150],
            rate_bps: 20_000_000,
            runs: 10,
            tls: false,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// `mewa lab baseline`, prepared: the configuration, its pages and the
/// resolved grid.
#[derive(Debug)]
pub struct Baseline {
    config: Config,
    corpus: Corpus,
    setup: Setup,
}

/// One load's journal record: the load, and for the first run of each
/// page and RTT its whole record (the HAR export).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineLoad {
    /// The load's figures.
    pub run: BaselineRun,
    /// The load record, first runs only.
    pub sample: Option<LoadRecord>,
}

/// A unit's key: the RTT, the run and the page.
fn key(rtt_ms: u64, run: usize, page: &str) -> String {
    format!("rtt{rtt_ms}/run{run}/{page}")
}

impl Experiment for Baseline {
    const NAME: &'static str = "baseline";
    const COMMAND: &'static str = "mewa lab baseline";
    type Config = Config;
    type Record = BaselineLoad;
    type Report = BaselineReport;

    fn prepare(config: &Config) -> Result<Baseline, ExperimentError> {
        at_least_one("--runs", config.runs)?;
        at_least_one("--rtt", config.rtts_ms.len())?;
        for &rtt in &config.rtts_ms {
            rtt_in_range("--rtt", rtt)?;
        }
        if config.rate_bps == 0 {
            return Err(ExperimentError::Config {
                field: "--rate",
                message: "give a rate above 0 (e.g. 20mbit)".into(),
            });
        }
        let corpus = config.corpus.load()?;
        let origin = config.origin.settings()?;
        let setup = Setup {
            rate_bps: config.rate_bps,
            rtts_ms: config.rtts_ms.clone(),
            runs: config.runs,
            tls: config.tls,
            congestion: origin.congestion,
            ..Setup::seed000(origin.ca_dir)
        };
        Ok(Baseline {
            config: config.clone(),
            corpus,
            setup,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        Some(&self.config.out)
    }

    fn check_machine(&self) -> Result<(), ExperimentError> {
        needs_root()
    }

    fn units(&self) -> Vec<Unit> {
        let cfg = &self.setup;
        let mut units = Vec::new();
        for &rtt in &cfg.rtts_ms {
            for r in 0..cfg.runs {
                for page in &self.corpus.pages {
                    units.push(Unit::one(
                        key(rtt, r, &page.name),
                        format!("RTT {rtt} ms, run {}/{}, {}", r + 1, cfg.runs, page.name),
                    ));
                }
            }
        }
        units
    }

    /// One testbed per RTT; every page is loaded `runs` times, the pages
    /// interleaved run by run.
    fn execute(&self, run: &mut Run<'_, BaselineLoad>) -> Result<(), ExperimentError> {
        let cfg = &self.setup;
        let origin = OriginSettings {
            congestion: cfg.congestion.clone(),
            ca_dir: cfg.ca_dir.clone(),
            iw: None,
        };
        for &rtt in &cfg.rtts_ms {
            if !run.any_left(&format!("rtt{rtt}/")) {
                continue;
            }
            let bed = Bed::start(
                &self.corpus,
                link(cfg.rate_bps, rtt),
                LinkOptions::default(),
                &origin,
            )?;
            let opts = bed.options(LoadOptions {
                timeout: cfg.timeout,
                ..LoadOptions::browser(Protocol::H2, cfg.tls)
            });
            for r in 0..cfg.runs {
                for page in &self.corpus.pages {
                    let key = key(rtt, r, &page.name);
                    if run.is_done(&key) {
                        continue;
                    }
                    run.begin(&key);
                    let rec = bed.load(page, &opts)?;
                    let load = BaselineLoad {
                        run: one_run(page, rtt, r, &rec),
                        sample: (r == 0).then_some(rec),
                    };
                    run.finish(&key, vec![load])?;
                }
            }
            bed.shutdown()?;
        }
        Ok(())
    }

    fn report(
        &self,
        records: Vec<BaselineLoad>,
        folder: Option<ResultFolder>,
    ) -> Result<BaselineReport, ExperimentError> {
        let mut runs = Vec::with_capacity(records.len());
        let mut samples = Vec::new();
        for l in records {
            if let Some(rec) = l.sample {
                samples.push((l.run.rtt_ms, rec));
            }
            runs.push(l.run);
        }
        let result = result(&self.corpus, &self.setup, runs, samples);
        Ok(BaselineReport::new(
            self.config.clone(),
            &self.corpus,
            result,
            folder,
        ))
    }
}

/// The grid as the runner uses it (resolved from a [`Config`]).
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    /// Bottleneck rate both ways, bit/s.
    pub rate_bps: u64,
    /// Round-trip times of the grid, ms (split evenly over the two
    /// directions).
    pub rtts_ms: Vec<u64>,
    /// Loads per page and RTT.
    pub runs: usize,
    /// h2 over TLS instead of h2c by prior knowledge.
    pub tls: bool,
    /// The origin's TCP congestion control.
    pub congestion: String,
    /// The local test CA's directory.
    pub ca_dir: PathBuf,
    /// Per-load timeout.
    pub timeout: Duration,
}

impl Setup {
    /// Seed 000's grid: 20 Mbit/s, RTT 50–150 ms in 25 ms steps, 10 runs,
    /// h2c, cubic (Linux's default before bbr, and what the seed's servers
    /// ran).
    pub fn seed000(ca_dir: PathBuf) -> Setup {
        Setup {
            rate_bps: 20_000_000,
            rtts_ms: vec![50, 75, 100, 125, 150],
            runs: 10,
            tls: false,
            congestion: "cubic".into(),
            ca_dir,
            timeout: Duration::from_secs(60),
        }
    }
}

/// One load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineRun {
    /// Page name.
    pub page: String,
    /// Page bytes (sum of bodies).
    pub page_bytes: u64,
    /// Objects on the page.
    pub objects: usize,
    /// RTT of the link, ms.
    pub rtt_ms: u64,
    /// Run number from 0.
    pub run: usize,
    /// Whether every object arrived.
    pub ok: bool,
    /// First SYN to last body byte, s.
    pub plt_wire_s: Option<f64>,
    /// Load start to all objects done, s.
    pub plt_loader_s: Option<f64>,
    /// Share of the wire time with no object receiving.
    pub idle_share: Option<f64>,
    /// Why the load failed.
    pub error: Option<String>,
}

/// One page at one RTT: the median measured time beside the model.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Page name.
    pub page: String,
    /// Page bytes.
    pub page_bytes: u64,
    /// Objects on the page.
    pub objects: usize,
    /// RTT, ms.
    pub rtt_ms: u64,
    /// Successful runs.
    pub runs_ok: usize,
    /// Median wire load time over the successful runs, s.
    pub measured_s: Option<f64>,
    /// Median idle share, measured.
    pub measured_idle_share: Option<f64>,
    /// Seed 000 eq. 1 as printed, n = 1, s.
    pub model_printed_s: f64,
    /// The round-by-round model, n = 1, s.
    pub model_rounds_s: f64,
    /// Idle share the printed model predicts.
    pub model_idle_share: f64,
    /// |printed − measured| / measured.
    pub ape_printed: Option<f64>,
    /// |rounds − measured| / measured.
    pub ape_rounds: Option<f64>,
}

/// The model's error over all pages at one RTT.
#[derive(Debug, Clone, Serialize)]
pub struct RttSummary {
    /// RTT, ms.
    pub rtt_ms: u64,
    /// Pages with a measurement.
    pub pages: usize,
    /// Median absolute percentage error of the printed model, %.
    pub mdape_printed_pct: Option<f64>,
    /// Median absolute percentage error of the round model, %.
    pub mdape_rounds_pct: Option<f64>,
    /// Mean absolute percentage error of the printed model, %.
    pub mape_printed_pct: Option<f64>,
    /// Mean absolute percentage error of the round model, %.
    pub mape_rounds_pct: Option<f64>,
    /// Median over pages of measured / printed model.
    pub median_ratio_printed: Option<f64>,
}

/// Everything the experiment produced.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineResult {
    /// The configuration it ran with.
    pub config: Setup,
    /// Every load.
    pub runs: Vec<BaselineRun>,
    /// Per page and RTT.
    pub cells: Vec<Cell>,
    /// Per RTT.
    pub per_rtt: Vec<RttSummary>,
    /// The first run's record of every page at every RTT (for HAR export
    /// and closer looks).
    #[serde(skip)]
    pub samples: Vec<(u64, LoadRecord)>,
}

/// A link of `rtt_ms` round trip and `rate_bps` both ways.
pub fn link(rate_bps: u64, rtt_ms: u64) -> LinkConfig {
    let rate = RateSpec::Constant { bps: rate_bps };
    link_of(rtt_ms, rate.clone(), rate)
}

/// The result of the grid's loads: every load, per page and RTT beside
/// the model, per RTT.
fn result(
    corpus: &Corpus,
    cfg: &Setup,
    runs: Vec<BaselineRun>,
    samples: Vec<(u64, LoadRecord)>,
) -> BaselineResult {
    let cells = cells(corpus, cfg, &runs);
    let per_rtt = cfg.rtts_ms.iter().map(|&r| summary(r, &cells)).collect();
    BaselineResult {
        config: cfg.clone(),
        runs,
        cells,
        per_rtt,
        samples,
    }
}

fn one_run(page: &Page, rtt_ms: u64, run: usize, rec: &LoadRecord) -> BaselineRun {
    let m = PageMetrics::from_record(rec);
    let ok = rec.ok();
    let error = (!ok).then(|| rec.first_error().unwrap_or_else(|| "incomplete".into()));
    BaselineRun {
        page: page.name.clone(),
        page_bytes: page.total_bytes(),
        objects: page.objects.len(),
        rtt_ms,
        run,
        ok,
        plt_wire_s: m.plt_wire_s,
        plt_loader_s: m.plt_loader_s,
        idle_share: m.idle_share,
        error,
    }
}

/// The model's prediction for a page at an RTT: (printed, rounds, printed
/// idle share).
pub fn model(page_bytes: u64, rate_bps: u64, rtt_ms: u64) -> (f64, f64, f64) {
    match TcpPath::new(rate_bps as f64, rtt_ms as f64 / 1000.0) {
        Ok(path) => {
            let p = t_http(page_bytes, &path, 1);
            let r = t_http_rounds(page_bytes, &path, 1);
            (p.total_s, r.total_s, p.idle_share())
        }
        Err(_) => (f64::NAN, f64::NAN, f64::NAN),
    }
}

fn ape(model: f64, measured: Option<f64>) -> Option<f64> {
    measured
        .filter(|m| *m > 0.0 && model.is_finite())
        .map(|m| (model - m).abs() / m)
}

fn cells(corpus: &Corpus, cfg: &Setup, runs: &[BaselineRun]) -> Vec<Cell> {
    let mut out = Vec::new();
    for &rtt in &cfg.rtts_ms {
        for page in &corpus.pages {
            let mine: Vec<&BaselineRun> = runs
                .iter()
                .filter(|r| r.ok && r.rtt_ms == rtt && r.page == page.name)
                .collect();
            let plt: Vec<f64> = mine.iter().filter_map(|r| r.plt_wire_s).collect();
            let idle: Vec<f64> = mine.iter().filter_map(|r| r.idle_share).collect();
            let measured = median(&plt);
            let (printed, rounds, idle_model) = model(page.total_bytes(), cfg.rate_bps, rtt);
            out.push(Cell {
                page: page.name.clone(),
                page_bytes: page.total_bytes(),
                objects: page.objects.len(),
                rtt_ms: rtt,
                runs_ok: mine.len(),
                measured_s: measured,
                measured_idle_share: median(&idle),
                model_printed_s: printed,
                model_rounds_s: rounds,
                model_idle_share: idle_model,
                ape_printed: ape(printed, measured),
                ape_rounds: ape(rounds, measured),
            });
        }
    }
    out
}

fn summary(rtt_ms: u64, cells: &[Cell]) -> RttSummary {
    let at: Vec<&Cell> = cells.iter().filter(|c| c.rtt_ms == rtt_ms).collect();
    let pct = |v: Option<f64>| v.map(|x| x * 100.0);
    let printed: Vec<f64> = at.iter().filter_map(|c| c.ape_printed).collect();
    let rounds: Vec<f64> = at.iter().filter_map(|c| c.ape_rounds).collect();
    let ratio: Vec<f64> = at
        .iter()
        .filter_map(|c| c.measured_s.map(|m| m / c.model_printed_s))
        .collect();
    RttSummary {
        rtt_ms,
        pages: printed.len(),
        mdape_printed_pct: pct(median(&printed)),
        mdape_rounds_pct: pct(median(&rounds)),
        mape_printed_pct: pct(mewa_report::mean(&printed)),
        mape_rounds_pct: pct(mewa_report::mean(&rounds)),
        median_ratio_printed: median(&ratio),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_link::core::DelaySpec;

    #[test]
    fn model_rises_with_rtt_and_size() {
        let (a, _, _) = model(1_000_000, 20_000_000, 50);
        let (b, _, _) = model(1_000_000, 20_000_000, 150);
        let (c, _, _) = model(3_000_000, 20_000_000, 150);
        assert!(a < b && b < c, "{a} {b} {c}");
        // Never faster than serialisation plus the two handshake RTTs.
        assert!(a >= 0.1 + 8.0 * 1_000_000.0 / 20e6);
    }

    #[test]
    fn ape_and_summary() {
        assert_eq!(
            ape(1.1, Some(1.0)).map(|x| (x * 1000.0).round()),
            Some(100.0)
        );
        assert_eq!(ape(1.0, None), None);
        assert_eq!(ape(1.0, Some(0.0)), None);
        let cell = |page: &str, m: f64, p: f64| Cell {
            page: page.into(),
            page_bytes: 1,
            objects: 1,
            rtt_ms: 50,
            runs_ok: 1,
            measured_s: Some(m),
            measured_idle_share: None,
            model_printed_s: p,
            model_rounds_s: p,
            model_idle_share: 0.0,
            ape_printed: ape(p, Some(m)),
            ape_rounds: ape(p, Some(m)),
        };
        let cells = vec![
            cell("a", 1.0, 1.1),
            cell("b", 1.0, 0.8),
            cell("c", 2.0, 2.0),
        ];
        let s = summary(50, &cells);
        assert_eq!(s.pages, 3);
        assert!((s.mdape_printed_pct.unwrap() - 10.0).abs() < 1e-9);
        assert!((s.mape_printed_pct.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(summary(75, &cells).pages, 0);
    }

    #[test]
    fn link_splits_the_rtt() {
        let l = link(20_000_000, 75);
        assert_eq!(l.up.delay, DelaySpec::Fixed(Duration::from_micros(37_500)));
        assert_eq!(l.down.rate, RateSpec::Constant { bps: 20_000_000 });
    }
}
