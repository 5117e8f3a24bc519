//! `mewa lab parity`: is the built-in loader as fast as a browser? Each
//! page loaded without any hint by the loader (one HTTP/2 connection per
//! host group over TLS, references found as the HTML streams in,
//! Chromium's priorities) and by headless Chromium (fresh profile per
//! load, its own connections), over the same emulated link, back to back.
//!
//! A baseline slower than a browser would flatter every gain measured
//! against it. Two checks per page, on the medians of the runs:
//! - **discovery**: the moment the loader had requested every object is
//!   no later than Chromium's (from Chromium's NetLog);
//! - **PLT**: where the two differ by more than 10 %, the report says where
//!   the time goes: before the last request (discovery, including script
//!   computation, which Chromium really runs) or after it (transfer).

use std::path::{Path, PathBuf};

use mewa_link::runtime::LinkOptions;
use serde::{Deserialize, Serialize};

use mewa_corpus::Corpus;

use crate::bed::{link_of, Bed, OriginSettings};
use crate::experiment::{
    at_least_one, needs_root, read_traces, rtt_in_range, Browser, CorpusChoice, Experiment,
    ExperimentError, OriginChoice, Run, Unit,
};
use crate::replay::{with_chromium, with_loader};
use mewa_chromium::Arrival;
use mewa_link::core::RateSpec;
use mewa_report::ResultFolder;
use mewa_report::{draw, opt, to_json, Chart, Mark, Report, ReportError, Series, Table};

/// `mewa lab parity`'s settings; `Default` is what the CLI shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages (default meh15; recordings work as they are).
    pub corpus: CorpusChoice,
    /// The origin's congestion control and CA.
    pub origin: OriginChoice,
    /// Loads per page by each of the two (at least 5 for a median worth
    /// reading).
    pub runs: usize,
    /// Link rate both ways, bit/s (seed 000: 32 Mbit/s); unused with a trace.
    pub rate_bps: u64,
    /// Round trip of the link, ms (seed 000: 65 ms end to end).
    pub rtt_ms: u64,
    /// A mahimahi downlink trace instead of a fixed rate.
    pub trace: Option<PathBuf>,
    /// The uplink trace of `trace`, when not `X.up` beside `X.down`.
    pub uplink: Option<PathBuf>,
    /// The Chromium binary.
    pub chromium: PathBuf,
    /// Parent of a timestamped result folder (none: no folder).
    pub out: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            runs: 5,
            rate_bps: 32_000_000,
            rtt_ms: 65,
            trace: None,
            uplink: None,
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            out: Some(PathBuf::from("out/lab")),
        }
    }
}

/// One page: both loaders' runs and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct ParityPage {
    /// Page name.
    pub page: String,
    /// Objects in the page.
    pub objects: usize,
    /// The page's scripts' computation, ms (Chromium runs it for real).
    pub compute_ms: u64,
    /// Every loader run.
    pub loader: Vec<Arrival>,
    /// Every Chromium run.
    pub chromium: Vec<Arrival>,
}

/// Median of the known values ([`mewa_report::median`]).
fn median(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    mewa_report::median(&v.flatten().collect::<Vec<f64>>())
}

impl ParityPage {
    /// Median PLT of the loader and of Chromium, s.
    pub fn plt(&self) -> (Option<f64>, Option<f64>) {
        (
            median(self.loader.iter().map(|a| a.plt_s)),
            median(self.chromium.iter().map(|a| a.plt_s)),
        )
    }

    /// Median all-requested time of the loader and of Chromium, s.
    pub fn requested(&self) -> (Option<f64>, Option<f64>) {
        (
            median(self.loader.iter().map(|a| a.requested_s)),
            median(self.chromium.iter().map(|a| a.requested_s)),
        )
    }

    /// Whether the loader had asked for everything no later than Chromium
    /// (1 ms of slack for clock granularity); `None` without both.
    pub fn discovers_in_time(&self) -> Option<bool> {
        match self.requested() {
            (Some(l), Some(c)) => Some(l <= c + 0.001),
            _ => None,
        }
    }

    /// Where the PLT difference lies when it is above 10 %: the phase
    /// (before or after the last request) whose difference is the larger.
    pub fn where_time_goes(&self) -> Option<String> {
        let ((Some(lp), Some(cp)), (Some(lr), Some(cr))) = (self.plt(), self.requested()) else {
            return None;
        };
        if (lp - cp).abs() <= 0.10 * cp {
            return None;
        }
        let discovery = cr - lr;
        let transfer = (cp - cr) - (lp - lr);
        let who = if cp > lp { "Chromium" } else { "the loader" };
        Some(if discovery.abs() >= transfer.abs() {
            format!(
                "{who} slower by {:.0} ms, most before the last request ({:+.0} ms of discovery{})",
                (cp - lp).abs() * 1e3,
                discovery * 1e3,
                if self.compute_ms > 0 {
                    format!(", scripts compute {} ms", self.compute_ms)
                } else {
                    ", parsing and layout: no script computation in the page".into()
                }
            )
        } else {
            format!(
                "{who} slower by {:.0} ms, most after the last request ({:+.0} ms of transfer)",
                (cp - lp).abs() * 1e3,
                transfer * 1e3
            )
        })
    }
}

/// The result of a parity run.
#[derive(Debug, Clone)]
pub struct ParityReport {
    /// The configuration.
    pub config: Config,
    /// One entry per page.
    pub pages: Vec<ParityPage>,
    folder: Option<ResultFolder>,
}

/// `mewa lab parity`, prepared: the configuration, its pages, the link.
#[derive(Debug)]
pub struct Parity {
    config: Config,
    corpus: Corpus,
    origin: OriginSettings,
    down: RateSpec,
    up: RateSpec,
}

/// One load's journal record: which browser loaded which page in which
/// run, and what arrived.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParityLoad {
    /// The page.
    pub page: String,
    /// The run.
    pub run: usize,
    /// Who loaded it.
    pub browser: Browser,
    /// What arrived, and when.
    pub arrival: Arrival,
}

/// A unit's key: the run and the page (both browsers, back to back).
fn key(run: usize, page: &str) -> String {
    format!("run{run}/{page}")
}

impl Experiment for Parity {
    const NAME: &'static str = "parity";
    const COMMAND: &'static str = "mewa lab parity";
    type Config = Config;
    type Record = ParityLoad;
    type Report = ParityReport;

    fn prepare(config: &Config) -> Result<Parity, ExperimentError> {
        at_least_one("--runs", config.runs)?;
        rtt_in_range("--rtt", config.rtt_ms)?;
        let corpus = config.corpus.load()?;
        let origin = config.origin.settings()?;
        let (down, up) = match &config.trace {
            Some(t) => {
                let (_, d, u) = read_traces(t, config.uplink.as_deref())?;
                (RateSpec::Trace(d), RateSpec::Trace(u))
            }
            None => (
                RateSpec::Constant {
                    bps: config.rate_bps,
                },
                RateSpec::Constant {
                    bps: config.rate_bps,
                },
            ),
        };
        Ok(Parity {
            config: config.clone(),
            corpus,
            origin,
            down,
            up,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        self.config.out.as_deref()
    }

    fn check_machine(&self) -> Result<(), ExperimentError> {
        crate::browser::check_binary(&self.config.chromium, "")?;
        needs_root()
    }

    fn units(&self) -> Vec<Unit> {
        let runs = self.config.runs;
        (0..runs)
            .flat_map(|r| {
                self.corpus.pages.iter().map(move |p| Unit {
                    key: key(r, &p.name),
                    what: format!("run {}/{runs}, {}", r + 1, p.name),
                    loads: 2,
                })
            })
            .collect()
    }

    /// Every page `runs` times with the loader and with Chromium, back to
    /// back, over one testbed.
    fn execute(&self, run: &mut Run<'_, ParityLoad>) -> Result<(), ExperimentError> {
        if !run.any_left("") {
            return Ok(());
        }
        let bed = Bed::start(
            &self.corpus,
            link_of(self.config.rtt_ms, self.down.clone(), self.up.clone()),
            LinkOptions::default(),
            &self.origin,
        )?;
        let work = std::env::temp_dir().join(format!("mewa-parity-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(ExperimentError::io("creating", &work))?;
        for r in 0..self.config.runs {
            for page in &self.corpus.pages {
                let key = key(r, &page.name);
                if run.is_done(&key) {
                    continue;
                }
                run.begin(&key);
                let mut loads = Vec::with_capacity(2);
                // Alternate who goes first, so neither always meets the
                // trace's same stretch.
                for chromium_first in [r % 2 == 1, r % 2 == 0] {
                    let (browser, arrival) = if chromium_first {
                        let a = with_chromium(
                            &bed,
                            page,
                            &crate::replay::Browser::plain(&self.config.chromium),
                            &self.origin.ca_dir,
                            &work,
                            None,
                            None,
                        )?;
                        (Browser::Chromium, a)
                    } else {
                        (Browser::Loader, with_loader(&bed, page)?)
                    };
                    loads.push(ParityLoad {
                        page: page.name.clone(),
                        run: r,
                        browser,
                        arrival,
                    });
                }
                run.finish(&key, loads)?;
            }
        }
        let _ = std::fs::remove_dir_all(&work);
        bed.shutdown()?;
        Ok(())
    }

    fn report(
        &self,
        records: Vec<ParityLoad>,
        folder: Option<ResultFolder>,
    ) -> Result<ParityReport, ExperimentError> {
        let pages = self
            .corpus
            .pages
            .iter()
            .map(|p| {
                let mut page = ParityPage {
                    page: p.name.clone(),
                    objects: p.objects.len(),
                    compute_ms: p.total_compute_ms(),
                    loader: Vec::new(),
                    chromium: Vec::new(),
                };
                let mut mine: Vec<&ParityLoad> =
                    records.iter().filter(|l| l.page == p.name).collect();
                mine.sort_by_key(|l| l.run);
                for l in mine {
                    match l.browser {
                        Browser::Loader => page.loader.push(l.arrival.clone()),
                        Browser::Chromium => page.chromium.push(l.arrival.clone()),
                    }
                }
                page
            })
            .collect();
        Ok(ParityReport {
            config: self.config.clone(),
            pages,
            folder,
        })
    }
}

impl ParityReport {
    /// One row per page: medians, the differences, the two checks.
    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "page",
            "objects",
            "loader PLT s",
            "Chromium PLT s",
            "PLT diff %",
            "loader all-requested s",
            "Chromium all-requested s",
            "discovers in time",
            "incomplete loads",
            "where the time goes (PLT differs > 10 %)",
        ]);
        for p in &self.pages {
            let (lp, cp) = p.plt();
            let (lr, cr) = p.requested();
            let incomplete = p
                .loader
                .iter()
                .chain(&p.chromium)
                .filter(|a| !a.missing.is_empty())
                .count();
            t.push(vec![
                p.page.clone(),
                p.objects.to_string(),
                opt(lp, 3),
                opt(cp, 3),
                opt(lp.zip(cp).map(|(l, c)| 100.0 * (l - c) / c), 1),
                opt(lr, 3),
                opt(cr, 3),
                match p.discovers_in_time() {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
                incomplete.to_string(),
                p.where_time_goes().unwrap_or_default(),
            ]);
        }
        t
    }

    /// Pages where the loader discovered later than Chromium.
    pub fn late_pages(&self) -> Vec<&str> {
        self.pages
            .iter()
            .filter(|p| p.discovers_in_time() == Some(false))
            .map(|p| p.page.as_str())
            .collect()
    }

    fn summary(&self) -> String {
        let n = self.pages.len();
        let within = self
            .pages
            .iter()
            .filter(|p| match p.plt() {
                (Some(l), Some(c)) => (l - c).abs() <= 0.10 * c,
                _ => false,
            })
            .count();
        let late = self.late_pages();
        format!(
            "{n} pages, {} runs each: loader PLT within 10 % of Chromium's on {within}; \
             the loader asked for everything no later than Chromium on {} of {n}{}",
            self.config.runs,
            n - late.len(),
            if late.is_empty() {
                String::new()
            } else {
                format!(" (later on: {})", late.join(", "))
            }
        )
    }

    fn link(&self) -> String {
        match &self.config.trace {
            Some(t) => format!("trace {}, {} ms RTT", t.display(), self.config.rtt_ms),
            None => format!(
                "{:.1} Mbit/s, {} ms RTT",
                self.config.rate_bps as f64 / 1e6,
                self.config.rtt_ms
            ),
        }
    }
}

impl Report for ParityReport {
    fn text(&self) -> String {
        format!("{}\n{}\n", self.table().to_text(), self.summary())
    }

    fn csv(&self) -> Vec<(&'static str, Table)> {
        vec![("parity.csv", self.table())]
    }

    fn json(&self) -> Result<String, ReportError> {
        to_json("the parity runs", &self.pages)
    }

    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        // Loader against Chromium, one point per page, with the diagonal.
        let pts = |f: fn(&ParityPage) -> (Option<f64>, Option<f64>)| -> Vec<(f64, f64)> {
            self.pages
                .iter()
                .filter_map(|p| {
                    let (l, c) = f(p);
                    Some((c?, l?))
                })
                .collect()
        };
        let plt = pts(ParityPage::plt);
        let req = pts(ParityPage::requested);
        let top = plt
            .iter()
            .chain(&req)
            .map(|&(c, l)| c.max(l))
            .fold(0.0, f64::max)
            * 1.05;
        let title = format!("Loader against Chromium, no hint ({})", self.link());
        let chart = Chart {
            title: &title,
            x_label: "Chromium, s",
            y_label: "loader, s",
            log_y: false,
        };
        let series = [
            Series {
                name: "PLT (median)".into(),
                points: plt,
                mark: Mark::Points,
                colour: 0,
            },
            Series {
                name: "all requested (median)".into(),
                points: req,
                mark: Mark::Points,
                colour: 1,
            },
            Series {
                name: "equal".into(),
                points: vec![(0.0, 0.0), (top, top)],
                mark: Mark::Line,
                colour: 2,
            },
        ];
        let path = dir.join("parity.svg");
        draw(&path, &chart, &series)?;
        Ok(vec![path])
    }

    fn markdown(&self) -> String {
        format!(
            "# mewa lab parity\n\nThe loader against headless Chromium without hints, {}; medians of {} runs.\n\n{}\n{}\n\n![parity](parity.svg)\n",
            self.link(),
            self.config.runs,
            self.table().to_markdown(),
            self.summary()
        )
    }

    fn folder(&self) -> Option<&ResultFolder> {
        self.folder.as_ref()
    }
}
