//! `mewa lab baseline`'s report: the model's error per RTT, every page
//! and RTT beside the model, the two plots, and the first run of every page
//! as HAR 1.2.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use mewa_corpus::Corpus;

use super::{BaselineResult, Config, RttSummary};
use mewa_loader::har::to_har;
use mewa_report::ResultFolder;
use mewa_report::{opt, to_json, write_file, Chart, Mark, Report, ReportError, Series, Table};

/// What `mewa lab baseline` measured, with the configuration that
/// produced it.
#[derive(Debug, Clone)]
pub struct BaselineReport {
    /// The configuration (also in the folder's `config.json`).
    pub config: Config,
    /// Every load, per cell and per RTT.
    pub result: BaselineResult,
    corpus_name: String,
    pages: usize,
    folder: Option<ResultFolder>,
}

impl BaselineReport {
    /// The report of `result`, measured on `corpus`.
    pub fn new(
        config: Config,
        corpus: &Corpus,
        result: BaselineResult,
        folder: Option<ResultFolder>,
    ) -> BaselineReport {
        BaselineReport {
            config,
            result,
            corpus_name: corpus.name.clone(),
            pages: corpus.pages.len(),
            folder,
        }
    }
}

impl Report for BaselineReport {
    fn text(&self) -> String {
        summary_table(&self.result).to_text()
    }

    fn csv(&self) -> Vec<(&'static str, Table)> {
        vec![
            ("runs.csv", runs_table(&self.result)),
            ("cells.csv", cells_table(&self.result)),
            ("summary.csv", summary_table(&self.result)),
        ]
    }

    fn json(&self) -> Result<String, ReportError> {
        to_json("the result", &self.result)
    }

    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        let (scatter, per_rtt) = (
            dir.join("measured-vs-model.svg"),
            dir.join("error-per-rtt.svg"),
        );
        // Measured against the model, one colour per RTT, and the diagonal.
        let mut series = Vec::new();
        let mut hi: f64 = 0.0;
        for (i, &rtt) in self.result.config.rtts_ms.iter().enumerate() {
            let points: Vec<(f64, f64)> = self
                .result
                .cells
                .iter()
                .filter(|c| c.rtt_ms == rtt)
                .filter_map(|c| c.measured_s.map(|m| (c.model_printed_s, m)))
                .collect();
            hi = points.iter().fold(hi, |h, &(x, y)| h.max(x).max(y));
            series.push(Series {
                name: format!("RTT {rtt} ms"),
                points,
                mark: Mark::Points,
                colour: i,
            });
        }
        series.push(Series {
            name: "measured = model".into(),
            points: vec![(0.0, 0.0), (hi, hi)],
            mark: Mark::Line,
            colour: 9,
        });
        mewa_report::draw(
            &scatter,
            &Chart {
                title: "Page load time over one HTTP/2 connection: measured vs seed 000 T_HTTP",
                x_label: "model T_HTTP (eq. 1 as printed), s",
                y_label: "measured, first SYN to last byte (median), s",
                log_y: false,
            },
            &series,
        )?;
        let per = |f: fn(&RttSummary) -> Option<f64>| -> Vec<(f64, f64)> {
            self.result
                .per_rtt
                .iter()
                .filter_map(|s| f(s).map(|v| (s.rtt_ms as f64, v)))
                .collect()
        };
        let (lo, hi) = (
            *self.result.config.rtts_ms.iter().min().unwrap_or(&0) as f64,
            *self.result.config.rtts_ms.iter().max().unwrap_or(&0) as f64,
        );
        mewa_report::draw(
            &per_rtt,
            &Chart {
                title: "Model error per RTT (median absolute % error over pages)",
                x_label: "RTT, ms",
                y_label: "MdAPE, %",
                log_y: false,
            },
            &[
                Series {
                    name: "eq. 1 as printed".into(),
                    points: per(|s| s.mdape_printed_pct),
                    mark: Mark::Line,
                    colour: 0,
                },
                Series {
                    name: "round by round".into(),
                    points: per(|s| s.mdape_rounds_pct),
                    mark: Mark::Line,
                    colour: 1,
                },
                Series {
                    name: "target 15 %".into(),
                    points: vec![(lo, 15.0), (hi, 15.0)],
                    mark: Mark::Line,
                    colour: 9,
                },
            ],
        )?;
        Ok(vec![scatter, per_rtt])
    }

    fn write_extra(&self, dir: &Path) -> Result<(), ReportError> {
        for &rtt in &self.result.config.rtts_ms {
            let recs: Vec<_> = self
                .result
                .samples
                .iter()
                .filter(|(r, _)| *r == rtt)
                .map(|(_, rec)| rec.clone())
                .collect();
            let har = to_json("the HAR capture", &to_har(&recs))?;
            write_file(&dir.join(format!("run0-rtt{rtt}ms.har")), &har)?;
        }

        Ok(())
    }

    fn markdown(&self) -> String {
        markdown(&self.corpus_name, self.pages, &self.result)
    }

    fn folder(&self) -> Option<&ResultFolder> {
        self.folder.as_ref()
    }
}

fn summary_table(res: &BaselineResult) -> Table {
    let mut t = Table::new(&[
        "RTT ms",
        "pages",
        "MdAPE printed %",
        "MdAPE rounds %",
        "MAPE printed %",
        "MAPE rounds %",
        "measured/model",
    ]);
    for s in &res.per_rtt {
        t.push(vec![
            s.rtt_ms.to_string(),
            s.pages.to_string(),
            opt(s.mdape_printed_pct, 1),
            opt(s.mdape_rounds_pct, 1),
            opt(s.mape_printed_pct, 1),
            opt(s.mape_rounds_pct, 1),
            opt(s.median_ratio_printed, 3),
        ]);
    }
    t
}

fn cells_table(res: &BaselineResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "KB",
        "objects",
        "RTT ms",
        "runs ok",
        "measured s",
        "model printed s",
        "model rounds s",
        "APE printed %",
        "APE rounds %",
        "idle measured %",
        "idle model %",
    ]);
    for c in &res.cells {
        t.push(vec![
            c.page.clone(),
            format!("{:.0}", c.page_bytes as f64 / 1000.0),
            c.objects.to_string(),
            c.rtt_ms.to_string(),
            c.runs_ok.to_string(),
            opt(c.measured_s, 3),
            format!("{:.3}", c.model_printed_s),
            format!("{:.3}", c.model_rounds_s),
            opt(c.ape_printed.map(|x| x * 100.0), 1),
            opt(c.ape_rounds.map(|x| x * 100.0), 1),
            opt(c.measured_idle_share.map(|x| x * 100.0), 1),
            format!("{:.1}", c.model_idle_share * 100.0),
        ]);
    }
    t
}

fn runs_table(res: &BaselineResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "bytes",
        "objects",
        "rtt_ms",
        "run",
        "ok",
        "plt_wire_s",
        "plt_loader_s",
        "idle_share",
        "error",
    ]);
    for r in &res.runs {
        t.push(vec![
            r.page.clone(),
            r.page_bytes.to_string(),
            r.objects.to_string(),
            r.rtt_ms.to_string(),
            r.run.to_string(),
            r.ok.to_string(),
            opt(r.plt_wire_s, 6),
            opt(r.plt_loader_s, 6),
            opt(r.idle_share, 4),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    t
}

fn markdown(corpus_name: &str, pages: usize, res: &BaselineResult) -> String {
    let c = &res.config;
    let ok = res.runs.iter().filter(|r| r.ok).count();
    let mut s = String::new();
    let _ = writeln!(s, "# Baseline: measured page loads vs seed 000's T_HTTP\n");
    let _ = writeln!(
        s,
        "- corpus `{}`: {} pages; {} loads ({} complete)\n\
         - link: {:.1} Mbit/s both ways, RTT {:?} ms (half each way), unbounded drop-tail queue, no loss\n\
         - one HTTP/2 connection ({}), origin TCP congestion control `{}`, {} runs per page and RTT\n\
         - measured: first SYN to last body byte, median over runs; model: eq. 1 (as printed) and the round-by-round variant, n = 1, S_page = body bytes\n",
        corpus_name,
        pages,
        res.runs.len(),
        ok,
        c.rate_bps as f64 / 1e6,
        c.rtts_ms,
        if c.tls { "h2 over TLS" } else { "h2c" },
        c.congestion,
        c.runs
    );
    let _ = writeln!(s, "## Model error per RTT (target: MdAPE ≤ 15 %)\n");
    s.push_str(&summary_table(res).to_markdown());
    let _ = writeln!(s, "\n![measured vs model](measured-vs-model.svg)\n");
    let _ = writeln!(s, "![error per RTT](error-per-rtt.svg)\n");
    let _ = writeln!(s, "## Per page and RTT\n");
    s.push_str(&cells_table(res).to_markdown());
    let failed: Vec<_> = res.runs.iter().filter(|r| !r.ok).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n## Failed loads\n");
        for r in failed {
            let _ = writeln!(
                s,
                "- {} at {} ms, run {}: {}",
                r.page,
                r.rtt_ms,
                r.run,
                r.error.as_deref().unwrap_or("?")
            );
        }
    }
    let _ = writeln!(
        s,
        "\nFiles: runs.csv (every load), cells.csv, summary.csv, result.json, \
         run0-rtt*.har (first run of every page, HAR 1.2)."
    );
    s
}
