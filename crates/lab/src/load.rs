//! `mewa lab load`: load each page of a corpus once through an emulated
//! link (client and origin namespaces, real kernel TCP) and show the load's
//! metrics; optionally keep the loads as HAR 1.2 and as JSON records, and a
//! result folder with the configuration that produced them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mewa_link::runtime::LinkOptions;
use serde::{Deserialize, Serialize};

use mewa_corpus::Corpus;

use crate::baseline;
use crate::bed::{Bed, OriginSettings};
use crate::experiment::{
    needs_root, rtt_in_range, CorpusChoice, Experiment, ExperimentError, OriginChoice, Run, Unit,
};
use mewa_loader::har::to_har;
use mewa_loader::metrics::{bytes_per_rtt_bin, max_bytes_per_bin, PageMetrics};
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{self as loader, LoadOptions};
use mewa_report::ResultFolder;
use mewa_report::{opt, to_json, write_file, Report, ReportError, Table};

/// How objects are spread over n HTTP/2 or HTTP/3 connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AssignRule {
    /// Fewest outstanding bytes.
    Least,
    /// In turn.
    RoundRobin,
    /// HTML, CSS and scripts on the connection that carried the document,
    /// leaves by least outstanding.
    WarmFirst,
}

impl std::str::FromStr for AssignRule {
    type Err = mewa_loader::record::UnknownName;
    fn from_str(s: &str) -> Result<AssignRule, Self::Err> {
        match s {
            "least" => Ok(AssignRule::Least),
            "round-robin" => Ok(AssignRule::RoundRobin),
            "warm-first" => Ok(AssignRule::WarmFirst),
            other => Err(mewa_loader::record::UnknownName {
                what: "assignment rule",
                got: other.to_string(),
                choices: "least, round-robin or warm-first",
            }),
        }
    }
}

/// `mewa lab load`'s settings; `Default` is what the CLI shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The origin's congestion control and CA.
    pub origin: OriginChoice,
    /// HTTP version.
    pub protocol: Protocol,
    /// TLS for h1/h2 (h3 always uses it).
    pub tls: bool,
    /// Connections: per host for h1 (default 6), per origin for h2/h3
    /// (default 1).
    pub connections: Option<usize>,
    /// How objects are spread over n h2/h3 connections.
    pub assign: AssignRule,
    /// Pull dispatch: at most this many KB requested and not yet received
    /// per connection for leaves.
    pub pull_kb: Option<u64>,
    /// With `pull_kb`: follow each connection's delivery over this many ms.
    pub pull_follow_ms: Option<u64>,
    /// Round trip of the link, ms.
    pub rtt_ms: u64,
    /// Bottleneck rate both ways, bit/s.
    pub rate_bps: u64,
    /// Write the loads as HAR 1.2 here.
    pub har: Option<PathBuf>,
    /// Write the raw load records as JSON here.
    pub json: Option<PathBuf>,
    /// Parent of a timestamped result folder (none: no folder).
    pub out: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            protocol: Protocol::H2,
            tls: false,
            connections: None,
            assign: AssignRule::Least,
            pull_kb: None,
            pull_follow_ms: None,
            rtt_ms: 100,
            rate_bps: 20_000_000,
            har: None,
            json: None,
            out: None,
        }
    }
}

/// The loader options `config` asks for (before the testbed aims them).
fn options(config: &Config) -> Result<LoadOptions, ExperimentError> {
    let bad = |field, message: &str| ExperimentError::Config {
        field,
        message: message.to_string(),
    };
    let mut opts = LoadOptions::browser(config.protocol, config.tls);
    if let Some(n) = config.connections {
        if n == 0 || n > 64 {
            return Err(bad("--connections", &format!("{n}: give 1 to 64")));
        }
        opts.connections = n;
        opts.preconnect = n > 1 && config.protocol != Protocol::H1;
    }
    opts.assign = match config.assign {
        AssignRule::Least => Arc::new(loader::LeastOutstanding),
        AssignRule::RoundRobin => Arc::new(loader::RoundRobin::default()),
        AssignRule::WarmFirst => Arc::new(loader::WarmFirst),
    };
    if let Some(kb) = config.pull_kb {
        if kb == 0 {
            return Err(bad("--pull", "0: give at least 1kB per connection"));
        }
        opts.pull_budget = Some(kb.saturating_mul(1000));
    }
    match config.pull_follow_ms {
        Some(0) => {
            return Err(bad(
                "--pull-follow",
                "0ms: give the window, about one RTT (e.g. 65ms)",
            ))
        }
        Some(_) if config.pull_kb.is_none() => {
            return Err(bad("--pull-follow", "goes with --pull"));
        }
        ms => opts.pull_follow = ms.map(Duration::from_millis),
    }
    Ok(opts)
}

/// `mewa lab load`, prepared: the configuration, its pages and the
/// loader's options.
#[derive(Debug)]
pub struct Load {
    config: Config,
    corpus: Corpus,
    opts: LoadOptions,
    origin: OriginSettings,
}

/// A unit's key: the page.
fn key(page: &str) -> String {
    format!("page/{page}")
}

impl Experiment for Load {
    const NAME: &'static str = "load";
    const COMMAND: &'static str = "mewa lab load";
    type Config = Config;
    type Record = LoadRecord;
    type Report = LoadReport;

    fn prepare(config: &Config) -> Result<Load, ExperimentError> {
        rtt_in_range("--rtt", config.rtt_ms)?;
        Ok(Load {
            config: config.clone(),
            corpus: config.corpus.load()?,
            opts: options(config)?,
            origin: config.origin.settings()?,
        })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn out(&self) -> Option<&Path> {
        self.config.out.as_deref()
    }

    fn check_machine(&self) -> Result<(), ExperimentError> {
        needs_root()
    }

    fn units(&self) -> Vec<Unit> {
        self.corpus
            .pages
            .iter()
            .map(|p| Unit::one(key(&p.name), p.name.clone()))
            .collect()
    }

    fn execute(&self, run: &mut Run<'_, LoadRecord>) -> Result<(), ExperimentError> {
        if !run.any_left("") {
            return Ok(());
        }
        let bed = Bed::start(
            &self.corpus,
            baseline::link(self.config.rate_bps, self.config.rtt_ms),
            LinkOptions::default(),
            &self.origin,
        )?;
        let opts = bed.options(self.opts.clone());
        for page in &self.corpus.pages {
            let key = key(&page.name);
            if run.is_done(&key) {
                continue;
            }
            run.begin(&key);
            let rec = bed.load(page, &opts)?;
            if !rec.ok() {
                tracing::warn!(
                    "{} did not load completely: {}",
                    page.name,
                    rec.first_error().unwrap_or_default()
                );
            }
            run.finish(&key, vec![rec])?;
        }
        bed.shutdown()?;
        Ok(())
    }

    /// The report; writes the HAR and JSON files the configuration asks
    /// for beside it.
    fn report(
        &self,
        records: Vec<LoadRecord>,
        folder: Option<ResultFolder>,
    ) -> Result<LoadReport, ExperimentError> {
        let report = LoadReport {
            config: self.config.clone(),
            records,
            folder,
        };
        if let Some(p) = &self.config.har {
            write_file(p, &to_json("the HAR capture", &to_har(&report.records))?)?;
        }
        if let Some(p) = &self.config.json {
            write_file(p, &report.json()?)?;
        }
        Ok(report)
    }
}

/// The loads of one `mewa lab load`.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The configuration.
    pub config: Config,
    /// Every page's load, in corpus order.
    pub records: Vec<LoadRecord>,
    folder: Option<ResultFolder>,
}

impl LoadReport {
    /// One row per load: size, connections, load times, idle share,
    /// effective concurrency, and the bytes of the first RTT bins.
    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "page",
            "KB",
            "objects",
            "conns",
            "PLT wire s",
            "PLT loader s",
            "idle %",
            "eff. concurrency",
            "first RTT bins KB",
        ]);
        let rtt_s = self.config.rtt_ms as f64 / 1000.0;
        for rec in &self.records {
            let m = PageMetrics::from_record(rec);
            let bins: Vec<String> = max_bytes_per_bin(&bytes_per_rtt_bin(rec, rtt_s))
                .iter()
                .take(6)
                .map(|b| format!("{:.0}", *b as f64 / 1000.0))
                .collect();
            t.push(vec![
                rec.page.clone(),
                format!("{:.0}", m.body_bytes as f64 / 1000.0),
                m.objects.to_string(),
                m.connections.to_string(),
                opt(m.plt_wire_s, 3),
                opt(m.plt_loader_s, 3),
                opt(m.idle_share.map(|x| x * 100.0), 1),
                opt(m.effective_concurrency, 2),
                bins.join(" "),
            ]);
        }
        t
    }
}

impl Report for LoadReport {
    fn text(&self) -> String {
        self.table().to_text()
    }

    fn csv(&self) -> Vec<(&'static str, Table)> {
        vec![("loads.csv", self.table())]
    }

    fn json(&self) -> Result<String, ReportError> {
        to_json("the load records", &self.records)
    }

    fn plots(&self, _dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        Ok(Vec::new())
    }

    fn write_extra(&self, dir: &Path) -> Result<(), ReportError> {
        write_file(
            &dir.join("loads.har"),
            &to_json("the HAR capture", &to_har(&self.records))?,
        )
    }

    fn markdown(&self) -> String {
        format!(
            "# mewa lab load\n\n{} over {} ms RTT at {:.1} Mbit/s, origin `{}`\n\n{}\nFiles: loads.csv, result.json (records), loads.har.\n",
            self.config.protocol,
            self.config.rtt_ms,
            self.config.rate_bps as f64 / 1e6,
            self.config.origin.cc,
            self.table().to_markdown()
        )
    }

    fn folder(&self) -> Option<&ResultFolder> {
        self.folder.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_refuse_what_the_loader_cannot_do() {
        let bad = |c: Config| options(&c).map(|_| ()).expect_err("refused");
        let e = bad(Config {
            connections: Some(0),
            ..Config::default()
        });
        assert!(e.to_string().contains("--connections"), "{e}");
        let e = bad(Config {
            pull_kb: Some(0),
            ..Config::default()
        });
        assert!(e.to_string().starts_with("--pull: "), "{e}");
        let e = bad(Config {
            pull_kb: Some(64),
            pull_follow_ms: Some(0),
            ..Config::default()
        });
        assert!(e.to_string().starts_with("--pull-follow: "), "{e}");
        let o = options(&Config {
            connections: Some(4),
            pull_kb: Some(64),
            pull_follow_ms: Some(65),
            ..Config::default()
        })
        .expect("valid");
        assert_eq!(o.connections, 4);
        assert!(o.preconnect);
        assert_eq!(o.pull_budget, Some(64_000));
        assert_eq!(o.pull_follow, Some(Duration::from_millis(65)));
    }

    #[test]
    fn assign_rule_parses_the_cli_names() {
        assert_eq!(
            "warm-first".parse::<AssignRule>(),
            Ok(AssignRule::WarmFirst)
        );
        assert!("fastest".parse::<AssignRule>().is_err());
    }
}
