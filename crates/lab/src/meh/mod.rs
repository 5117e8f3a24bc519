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
//! The experiment is [`Meh`] under the lab's [`Experiment`] contract: a
//! [`Config`], its units (a pair of loads with and without the hint per
//! run and page; then a set of Chromium loads per run and browser page,
//! one per arm: `cold`, the peers a user has without mewa, `meh`),
//! each in the result folder's journal the moment it ends, and a
//! [`MehReport`] built from the journal's records. Inside, by job:
//! - `config`: the settings and the choices they name;
//! - `setup`: the settings resolved for the runner;
//! - `edge`: the edge in the testbed;
//! - `before_load`: the radio link before each load;
//! - `planner`: what the client remembers from load to load;
//! - `pairs`: the loader's pairs, with and without the hint;
//! - `browser`: headless Chromium's sets, one measured load per arm;
//! - `record`: what the journal keeps of each load;
//! - `floor`: the physical floor of a load on its stretch of the trace;
//! - `summary`: per-page and overall figures over the records;
//! - `peers`: the arms compared, with paired statistics;
//! - `report`: tables, plots and the Markdown report.

mod before_load;
mod browser;
mod config;
mod edge;
mod floor;
mod pairs;
mod peers;
mod planner;
mod record;
mod report;
mod setup;
mod summary;

use std::net::SocketAddr;
use std::path::Path;

use mewa_corpus::{Corpus, Page};
use mewa_link::runtime::LinkOptions;

pub use before_load::TRACE_STRIDE_MS;
pub use config::{arms_in_order, Arm, BrowserPages, Config, Dispatch, Policy, Rrc};
pub use floor::{floor_s, FloorInput};
pub use pairs::{plan_bdp_bytes, PlanAssign, PULL_FLOOR_BYTES};
pub use peers::{
    arms_table, compare, compare_folders, page_table, summarise_arms, ArmsSummary, Comparison,
    FolderComparison, Metric, FEWEST_FOR_VERDICT,
};
pub use peers::{reduction_ci, verdict_text};
pub use record::{BrowserRun, EdgeStart, MehRun, Metrics, Record};
pub use report::MehReport;
pub use setup::{PlanRate, RadioLink, Setup};
pub use summary::{fig8_pages, full_hint_bytes, summarise, MehPage, MehResult};

use crate::bed::{replay_groups, Bed, BedError, OriginSettings, CLIENT, EDGE};
use crate::experiment::{
    at_least_one, needs_root, rtt_in_range, Experiment, ExperimentError, Run, Unit,
};
use browser::{browser_set, Browsing, ProxyTls};
use edge::start_edge;
use mewa_report::{ReportError, ResultFolder};
use pairs::{load_pair, Client};
use planner::{Planner, ProxyRtt};
use record::OlderResult;

/// `mewa lab meh`, prepared: the configuration, its pages and its
/// resolved settings.
#[derive(Debug)]
pub struct Meh {
    config: Config,
    corpus: Corpus,
    setup: Setup,
    /// The testbed serves each recorded host at its own address (an
    /// imported corpus): Chromium then loads every page by default.
    per_host: bool,
}

/// The key of the loader's pair of `page` in run `run`.
fn pair_key(run: usize, page: &str) -> String {
    format!("run{run}/{page}")
}

/// The key of Chromium's pair of `page` in run `run`.
fn browser_key(run: usize, page: &str) -> String {
    format!("chromium/run{run}/{page}")
}

impl Meh {
    /// The pages Chromium loads.
    fn browser_pages(&self) -> Vec<&Page> {
        match (self.setup.browser_pages, self.per_host) {
            (BrowserPages::All, _) | (BrowserPages::Auto, true) => {
                self.corpus.pages.iter().collect()
            }
            _ => fig8_pages(&self.corpus),
        }
    }

    /// Refuses an arm that cannot run on these pages: HTTP/3 needs
    /// `https://` pages (QUIC is TLS only). A recorded `http://` page may
    /// still load over it when Chromium upgrades it to `https://` (an
    /// HSTS-preloaded site such as wikipedia.org), so such pages are named
    /// in a warning and the load's protocol says what happened; a corpus
    /// with no `https://` page at all is refused.
    fn check_arms(&self) -> Result<(), ExperimentError> {
        if !self.setup.arms.contains(&Arm::H3) || !self.per_host {
            return Ok(());
        }
        let pages = self.browser_pages();
        let clear: Vec<&str> = pages
            .iter()
            .filter(|p| !p.main.starts_with("https://"))
            .map(|p| p.name.as_str())
            .collect();
        if !pages.is_empty() && clear.len() == pages.len() {
            return Err(ExperimentError::Config {
                field: "--arms",
                message: "h3 needs pages served over https (QUIC is TLS only), and every \
                          page of this corpus is recorded as http://: leave h3 out"
                    .into(),
            });
        }
        if !clear.is_empty() {
            tracing::warn!(
                "h3: {} recorded as http:// load over HTTP/3 only if Chromium upgrades them to \
                 https:// (HSTS); the protocol column says what happened",
                clear.join(", ")
            );
        }
        Ok(())
    }

    /// Chromium's runs per page and variant (0 when there are none).
    fn browser_runs(&self) -> usize {
        self.setup.browser.as_ref().map_or(0, |(_, n)| *n)
    }

    /// The loader's pairs `run` lacks, run by run, the pages interleaved;
    /// `planner` carries the client's state from load to load.
    fn loader_pairs(
        &self,
        run: &mut Run<'_, Record>,
        client: &Client<'_>,
        planner: &mut Planner,
    ) -> Result<(), ExperimentError> {
        let pages = &self.corpus.pages;
        for r in 0..self.setup.runs {
            for (i, page) in pages.iter().enumerate() {
                let key = pair_key(r, &page.name);
                if run.is_done(&key) {
                    continue;
                }
                run.begin(&key);
                let progress = &*run;
                let records = load_pair(client, page, r, r * pages.len() + i, planner, &|k, w| {
                    progress.within(k, w)
                })?;
                run.finish(&key, records)?;
            }
        }
        Ok(())
    }

    /// Chromium's pairs `run` lacks, run by run, the pages interleaved.
    fn browser_pairs(
        &self,
        run: &mut Run<'_, Record>,
        browsing: &Browsing<'_>,
    ) -> Result<(), ExperimentError> {
        let mut proxy_rtt = ProxyRtt::replayed(run.records());
        let pages = self.browser_pages();
        for r in 0..self.browser_runs() {
            for (i, page) in pages.iter().enumerate() {
                let key = browser_key(r, &page.name);
                if run.is_done(&key) {
                    continue;
                }
                run.begin(&key);
                let progress = &*run;
                let records = browser_set(
                    browsing,
                    page,
                    r,
                    r * pages.len() + i,
                    &mut proxy_rtt,
                    &|k, w| progress.within(k, w),
                )?;
                run.finish(&key, records)?;
            }
        }
        Ok(())
    }
}

impl Experiment for Meh {
    const NAME: &'static str = "meh";
    const COMMAND: &'static str = "mewa lab meh";
    type Config = Config;
    type Record = Record;
    type Report = MehReport;

    fn prepare(config: &Config) -> Result<Meh, ExperimentError> {
        at_least_one("--runs", config.runs)?;
        rtt_in_range("--radio-rtt", config.radio_rtt_ms)?;
        rtt_in_range("--wired-rtt", config.wired_rtt_ms)?;
        if !(config.cpu_slowdown.is_finite() && (1.0..=20.0).contains(&config.cpu_slowdown)) {
            return Err(ExperimentError::Config {
                field: "--cpu-slowdown",
                message: format!(
                    "{} is not a slowdown between 1 (none) and 20 (4 is a mid-range phone)",
                    config.cpu_slowdown
                ),
            });
        }
        let corpus = config.corpus.load()?;
        let setup = Setup::resolve(config)?;
        let per_host = !replay_groups(&corpus).is_empty();
        let meh = Meh {
            config: config.clone(),
            corpus,
            setup,
            per_host,
        };
        meh.check_arms()?;
        Ok(meh)
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        Some(&self.config.out)
    }

    /// Root for the testbed. Chromium is not required: without it the
    /// browser runs are left out, with a warning.
    fn check_machine(&self) -> Result<(), ExperimentError> {
        if self.config.browser_runs > 0 && self.setup.browser.is_none() {
            tracing::warn!(
                "skipping the browser runs: no Chromium at {} (apt-get install chromium, or --chromium PATH)",
                self.config.chromium.display()
            );
        }
        if let Some((chromium, _)) = &self.setup.browser {
            if self.setup.arms.contains(&Arm::EarlyHints) {
                crate::browser::check_early_hints(chromium, "--arms")?;
            }
        }
        needs_root()
    }

    fn units(&self) -> Vec<Unit> {
        let runs = self.setup.runs;
        let mut units = Vec::new();
        for r in 0..runs {
            for page in &self.corpus.pages {
                units.push(Unit {
                    key: pair_key(r, &page.name),
                    what: format!("run {}/{runs}, {}", r + 1, page.name),
                    loads: 2,
                });
            }
        }
        let n = self.browser_runs();
        for r in 0..n {
            for page in self.browser_pages() {
                units.push(Unit {
                    key: browser_key(r, &page.name),
                    what: format!("Chromium run {}/{n}, {}", r + 1, page.name),
                    loads: self.setup.arms.len(),
                });
            }
        }
        units
    }

    /// One testbed for every unit left: the loader's pairs, then
    /// Chromium's (planning with the bandwidth the client's loads showed).
    /// The edge's wired RTT goes in as a note per testbed start; the
    /// client's state is rebuilt from the units done before.
    fn execute(&self, run: &mut Run<'_, Record>) -> Result<(), ExperimentError> {
        if !run.any_left("") {
            return Ok(());
        }
        let folder = match run.folder() {
            Some(f) => f.to_path_buf(),
            None => std::env::temp_dir().join(format!("mewa-meh-{}", std::process::id())),
        };
        let cfg = &self.setup;
        let origin = OriginSettings {
            congestion: cfg.congestion.clone(),
            ca_dir: cfg.ca_dir.clone(),
            iw: None,
        };
        let bed = Bed::start_with_edge(
            &self.corpus,
            cfg.radio_link(),
            LinkOptions::default(),
            cfg.wired_link(),
            &origin,
        )?;
        std::fs::create_dir_all(&folder).map_err(ExperimentError::io("creating", &folder))?;
        let (edge, wired_rtt_ms) = start_edge(&bed, &self.corpus, &folder.join("edge.sqlite"))?;
        let start = EdgeStart {
            wired_rtt_ms,
            at_unix_s: Some(mewa_edge::app::now_unix_s()),
        };
        run.note("edge", vec![Record::Edge(start)])?;
        let edge_ip = bed
            .running()?
            .addr_towards(EDGE, CLIENT)
            .map_err(BedError::from)?;
        let edge_addr = SocketAddr::from((edge_ip, 53));
        let mut planner = Planner::replayed(cfg, run.records());
        let client = Client {
            bed: &bed,
            edge: edge_addr,
            setup: cfg,
        };
        self.loader_pairs(run, &client, &mut planner)?;
        if cfg.browser.is_some() && run.any_left("chromium/") {
            let dir = folder.join("chromium");
            std::fs::create_dir_all(&dir).map_err(ExperimentError::io("creating", &dir))?;
            let tls = ProxyTls::new(&cfg.ca_dir)?;
            let browsing = Browsing {
                bed: &bed,
                edge: edge_addr,
                setup: cfg,
                tls: &tls,
                work_dir: &dir,
                bandwidth_bps: planner.bandwidth_bps(),
            };
            self.browser_pairs(run, &browsing)?;
        }
        drop(edge);
        bed.shutdown()?;
        Ok(())
    }

    fn report(
        &self,
        records: Vec<Record>,
        folder: Option<ResultFolder>,
    ) -> Result<MehReport, ExperimentError> {
        let result = summarise(&self.corpus, records);
        Ok(MehReport::new(
            self.config.clone(),
            &self.setup,
            result,
            folder,
        ))
    }

    /// Folders written before the journal: the loads in `result.json`.
    fn older_records(dir: &Path) -> Option<Result<Vec<Record>, ExperimentError>> {
        let path = dir.join("result.json");
        path.is_file().then(|| read_older(&path))
    }
}

/// The Chromium loads of a `mewa lab meh` result folder (its journal, or
/// an older folder's `result.json`).
pub fn browser_loads(dir: &Path) -> Result<Vec<BrowserRun>, ExperimentError> {
    let records = if dir.join(mewa_report::journal::JOURNAL).is_file() {
        mewa_report::Journal::<Record>::open(dir)?.into_records()
    } else if let Some(r) = Meh::older_records(dir) {
        r?
    } else {
        return Err(ExperimentError::Config {
            field: "FOLDER",
            message: format!(
                "{} holds no result of `mewa lab meh` (no {} or result.json)",
                dir.display(),
                mewa_report::journal::JOURNAL
            ),
        });
    };
    Ok(records
        .into_iter()
        .filter_map(|r| match r {
            Record::Chromium(b) => Some(*b),
            _ => None,
        })
        .collect())
}

/// The records of an older folder's `result.json` at `path`.
fn read_older(path: &Path) -> Result<Vec<Record>, ExperimentError> {
    let text = std::fs::read(path).map_err(ExperimentError::io("reading", path))?;
    let older: OlderResult = serde_json::from_slice(&text).map_err(|e| ReportError::ReadBack {
        path: path.to_path_buf(),
        message: "not the result of `mewa lab meh`".into(),
        source: Box::new(e),
    })?;
    Ok(older.into_records())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{CorpusChoice, OriginChoice, Progress};

    fn small(out: &Path) -> Config {
        Config {
            corpus: CorpusChoice {
                path: None,
                pages: vec!["622k".into(), "1412k".into()],
            },
            origin: OriginChoice {
                ca_dir: Some(out.join("ca")),
                ..OriginChoice::default()
            },
            runs: 2,
            browser_runs: 0,
            out: out.to_path_buf(),
            ..Config::default()
        }
    }

    #[test]
    fn zero_runs_and_absurd_rtts_are_refused_before_anything_starts() {
        let bad = Config {
            runs: 0,
            ..Config::default()
        };
        assert!(matches!(
            Meh::run(&bad, &Progress::none()),
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
            Meh::run(&bad, &Progress::none()),
            Err(ExperimentError::Config {
                field: "--wired-rtt",
                ..
            })
        ));
    }

    #[test]
    fn units_are_pairs_of_loads_then_chromium_pairs() {
        let dir = std::env::temp_dir();
        let mut c = small(&dir);
        // A Chromium that exists wherever the test runs: the browser runs
        // are planned (the binary is only looked for, not started).
        c.chromium = std::env::current_exe().expect("test binary");
        c.browser_runs = 1;
        let meh = Meh::prepare(&c).expect("prepared");
        let units = meh.units();
        let keys: Vec<&str> = units.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(units.len(), 2 * 2 + 2, "{keys:?}");
        assert!(units.iter().all(|u| u.loads == 2));
        assert!(keys[0].starts_with("run0/meh15-02-622k"), "{keys:?}");
        assert!(keys[3].starts_with("run1/"), "{keys:?}");
        assert!(keys[4].starts_with("chromium/run0/"), "{keys:?}");
        // Without Chromium, no browser units.
        c.chromium = "/nonexistent/chromium".into();
        let meh = Meh::prepare(&c).expect("prepared");
        assert_eq!(meh.units().len(), 4);
    }

    /// A load's row as a test writes it.
    fn row(page: &str, run: usize, with_hint: bool, plt_s: f64, n: u32) -> Record {
        Record::Load(Box::new(MehRun {
            page: page.into(),
            page_bytes: 622_000,
            objects: 32,
            run,
            with_hint,
            ok: true,
            plt_s: Some(plt_s),
            n,
            connections: n as usize,
            dns_ms: 45.5,
            hint_bytes: 404,
            hint_over_tcp: false,
            answer_bytes: 511,
            urls_over_tcp: false,
            urls_ms: with_hint.then_some(0.0),
            ready_ms: Some(66.0),
            fallback: None,
            idle_share: Some(0.3),
            error: None,
            peak_window_bytes: Some(200_000),
            handshake_us: Some(65_900),
        }))
    }

    #[test]
    fn the_report_is_built_from_records_alone() {
        let dir = std::env::temp_dir();
        let meh = Meh::prepare(&small(&dir)).expect("prepared");
        let page = meh.corpus.pages[0].name.clone();
        let records = vec![
            Record::Edge(EdgeStart {
                wired_rtt_ms: Some(20.4),
                at_unix_s: Some(1_800_000_000),
            }),
            row(&page, 0, false, 0.5, 1),
            row(&page, 0, true, 0.25, 3),
            Record::Edge(EdgeStart {
                wired_rtt_ms: Some(21.0),
                at_unix_s: Some(1_800_000_600),
            }),
            row(&page, 1, true, 0.5, 3),
            row(&page, 1, false, 0.75, 1),
        ];
        let report = meh.report(records.clone(), None).expect("report");
        let res = &report.result;
        assert_eq!(res.runs.len(), 4);
        let p = res.pages.iter().find(|p| p.page == page).expect("page");
        assert_eq!(p.n, 3);
        assert_eq!(p.median_without_s, Some(0.625));
        assert_eq!(p.median_with_s, Some(0.375));
        assert!(p.reduction_pct.is_some_and(|r| (r - 40.0).abs() < 1e-9));
        assert_eq!(p.urls_via, "udp");
        // The other page had no loads.
        assert_eq!(res.pages.len(), 2);
        assert_eq!(res.pages[1].median_with_s, None);
        // The first testbed start's wired RTT; both named.
        assert_eq!(res.measured_wired_rtt_ms, Some(20.4));
        let text = mewa_report::Report::text(&report);
        assert!(text.contains("reduction %"), "{text}");
        assert!(
            text.contains("wired RTT measured by the edge: 20.4 ms (the first of 2 testbed starts: 20.4, 21.0 ms)"),
            "{text}"
        );
        assert!(!text.contains("Chromium page"), "{text}");
        // Built again from the same records: the same tables, the full
        // hint's size included (encoded at the first start's moment).
        let again = meh.report(records, None).expect("report");
        assert_eq!(mewa_report::Report::text(&again), text);
        assert_eq!(
            res.pages[0].full_hint_bytes,
            full_hint_bytes(&meh.corpus.pages[0], Some(20.4), 1_800_000_000)
        );
    }

    #[test]
    fn a_run_stopped_before_its_first_pair_still_has_a_report() {
        let dir = std::env::temp_dir().join(format!("mewa-meh-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let meh = Meh::prepare(&small(&dir)).expect("prepared");
        let records = vec![Record::Edge(EdgeStart {
            wired_rtt_ms: Some(20.4),
            at_unix_s: Some(1_800_000_000),
        })];
        let report = meh.report(records, None).expect("report");
        let text = mewa_report::Report::text(&report);
        assert!(text.contains("median reduction %"), "{text}");
        // Nothing to draw: no figure, and no error.
        let plots = mewa_report::Report::plots(&report, &dir).expect("plots");
        assert!(plots.is_empty(), "{plots:?}");
        assert!(mewa_report::Report::markdown(&report).contains("No load completed"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_older_folder_is_read_from_its_result_json() {
        let dir = std::env::temp_dir().join(format!("mewa-meh-older-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert!(Meh::older_records(&dir).is_none());
        let old = serde_json::json!({
            "runs": [{
                "page": "p", "page_bytes": 1, "objects": 1, "run": 0,
                "with_hint": true, "ok": true, "plt_s": 0.5, "n": 2,
                "connections": 2, "dns_ms": 45.0, "hint_bytes": 300,
                "hint_over_tcp": false, "fallback": null, "idle_share": null,
                "error": null
            }],
            "pages": [],
            "browser": [{"page": "p", "run": 0, "with_hint": false, "plt_s": 1.0,
                         "n": 0, "error": null}],
            "measured_wired_rtt_ms": 20.5
        });
        std::fs::write(dir.join("result.json"), old.to_string()).expect("write");
        let records = Meh::older_records(&dir)
            .expect("a result.json")
            .expect("reads");
        assert_eq!(records.len(), 3);
        assert!(matches!(&records[0], Record::Edge(e) if e.wired_rtt_ms == Some(20.5)));
        assert!(matches!(&records[1], Record::Load(l) if l.n == 2 && l.answer_bytes == 0));
        assert!(matches!(&records[2], Record::Chromium(b) if !b.with_hint));
        std::fs::write(dir.join("result.json"), "{\"runs\": 3}").expect("write");
        let e = Meh::older_records(&dir)
            .expect("a result.json")
            .expect_err("bad");
        assert!(e.to_string().contains("result.json"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
