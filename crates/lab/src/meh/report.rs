//! `mewa lab meh`'s report: per-page and Chromium tables, the figures
//! beside seed 000's (`mewa_model::repro::meh`), the CDF and box plots, and
//! the Markdown report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use mewa_model::repro::meh;

use super::config::Config;
use super::peers;
use super::record::BrowserRun;
use super::setup::{PlanRate, RadioLink, Setup};
use super::summary::MehResult;
use mewa_report::ResultFolder;
use mewa_report::{opt, to_json, BoxGroup, Chart, Mark, Report, ReportError, Series, Table};

fn pages_table(res: &MehResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "KB",
        "objects",
        "n",
        "hint B",
        "full hint B",
        "UDP answer B",
        "URLs",
        "URLs ahead ms",
        "without s",
        "with s",
        "reduction %",
        "failed",
    ]);
    for p in &res.pages {
        t.push(vec![
            p.page.clone(),
            format!("{:.0}", p.page_bytes as f64 / 1000.0),
            p.objects.to_string(),
            p.n.to_string(),
            p.hint_bytes.to_string(),
            p.full_hint_bytes
                .map_or_else(|| "-".into(), |b| b.to_string()),
            p.answer_bytes.to_string(),
            p.urls_via.to_string(),
            opt(p.urls_lead_ms, 1),
            opt(p.median_without_s, 3),
            opt(p.median_with_s, 3),
            opt(p.reduction_pct, 1),
            p.failed.to_string(),
        ]);
    }
    t
}

/// Chromium through the proxy: per page, median with and without, and
/// when Chromium had asked for the whole page (the rest is what more
/// connections can shorten).
fn browser_table(res: &MehResult) -> Table {
    let mut t = Table::new(&[
        "Chromium page",
        "n",
        "without s",
        "with s",
        "reduction %",
        "all asked s (without/with)",
        "URLs ahead ms",
        "prefetched",
        "failed",
        "seed 000 %",
    ]);
    // Pages in first-seen order (the runs interleave them).
    let mut names: Vec<&str> = Vec::new();
    for b in &res.browser {
        if !names.contains(&b.page.as_str()) {
            names.push(&b.page);
        }
    }
    for name in names {
        let of = |with: bool, pick: fn(&BrowserRun) -> Option<f64>| {
            let v: Vec<f64> = res
                .browser
                .iter()
                .filter(|b| b.page == name && b.is_side(with))
                .filter_map(pick)
                .collect();
            mewa_report::median(&v)
        };
        let (without, with) = (of(false, |b| b.plt_s), of(true, |b| b.plt_s));
        let asked = |with| of(with, |b| b.requested_s);
        let n = res
            .browser
            .iter()
            .filter(|b| b.page == name && b.with_hint)
            .map(|b| b.n)
            .max()
            .unwrap_or(0);
        t.push(vec![
            name.to_string(),
            n.to_string(),
            opt(without, 3),
            opt(with, 3),
            opt(without.zip(with).map(|(a, b)| (1.0 - b / a) * 100.0), 1),
            format!("{} / {}", opt(asked(false), 3), opt(asked(true), 3)),
            opt(of(true, |b| b.urls_lead_ms), 1),
            res.browser
                .iter()
                .filter(|b| b.page == name && b.with_hint)
                .map(|b| b.prefetched)
                .max()
                .unwrap_or(0)
                .to_string(),
            res.browser
                .iter()
                .filter(|b| b.page == name && b.error.is_some())
                .count()
                .to_string(),
            res.pages
                .iter()
                .find(|p| p.page == name)
                .and_then(|p| meh::fig8_of(p.page_bytes))
                .map_or_else(|| "-".into(), |f| format!("{:.1}", f.2)),
        ]);
    }
    t
}

fn runs_table(res: &MehResult) -> Table {
    let mut t = Table::new(&[
        "page",
        "bytes",
        "objects",
        "run",
        "with_hint",
        "ok",
        "plt_s",
        "n",
        "connections",
        "dns_ms",
        "hint_bytes",
        "hint_over_tcp",
        "answer_bytes",
        "urls_over_tcp",
        "urls_ms",
        "ready_ms",
        "idle_share",
        "fallback",
        "error",
    ]);
    for r in &res.runs {
        t.push(vec![
            r.page.clone(),
            r.page_bytes.to_string(),
            r.objects.to_string(),
            r.run.to_string(),
            r.with_hint.to_string(),
            r.ok.to_string(),
            opt(r.plt_s, 6),
            r.n.to_string(),
            r.connections.to_string(),
            format!("{:.2}", r.dns_ms),
            r.hint_bytes.to_string(),
            r.hint_over_tcp.to_string(),
            r.answer_bytes.to_string(),
            r.urls_over_tcp.to_string(),
            opt(r.urls_ms, 2),
            opt(r.ready_ms, 2),
            opt(r.idle_share, 4),
            r.fallback.clone().unwrap_or_default(),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// The headline figures beside the paper's, with the issue's targets.
fn summary(res: &MehResult, setting: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "setting: {setting}");
    if let Some(w) = res.measured_wired_rtt_ms {
        let _ = write!(s, "wired RTT measured by the edge: {w:.1} ms");
        if res.wired_rtts_ms.len() > 1 {
            let all: Vec<String> = res
                .wired_rtts_ms
                .iter()
                .map(|w| format!("{w:.1}"))
                .collect();
            let _ = write!(
                s,
                " (the first of {} testbed starts: {} ms)",
                all.len(),
                all.join(", ")
            );
        }
        s.push('\n');
    }
    let mut t = Table::new(&["figure", "measured", "seed 000", "target"]);
    let red = res.median_reduction_pct;
    t.push(vec![
        "median PLT without hint, s".into(),
        opt(res.median_without_s, 3),
        format!("{:.2}", meh::MEDIAN_WITHOUT_S),
        "".into(),
    ]);
    t.push(vec![
        "median PLT with hint, s".into(),
        opt(res.median_with_s, 3),
        format!("{:.2}", meh::MEDIAN_WITH_S),
        "".into(),
    ]);
    t.push(vec![
        "median reduction %".into(),
        opt(red, 1),
        format!("{:.1}", meh::MEDIAN_REDUCTION_PCT),
        format!(
            ">= 20 ({})",
            if red.is_some_and(|r| r >= 20.0) {
                "met"
            } else {
                "NOT met"
            }
        ),
    ]);
    t.push(vec![
        "best page reduction %".into(),
        opt(res.best_reduction_pct, 1),
        format!("{:.1}", meh::BEST_REDUCTION_PCT),
        "".into(),
    ]);
    let worst = res.worst_reduction_pct;
    t.push(vec![
        "worst page reduction %".into(),
        opt(worst, 1),
        "-".into(),
        format!(
            ">= -3 ({})",
            if worst.is_some_and(|w| w >= -3.0) {
                "met"
            } else {
                "NOT met"
            }
        ),
    ]);
    t.push(vec![
        "hints <= 1 KB, %".into(),
        format!("{:.0}", res.hints_within_1k * 100.0),
        "-".into(),
        format!(
            ">= 90 ({})",
            if res.hints_within_1k >= 0.9 {
                "met"
            } else {
                "NOT met"
            }
        ),
    ]);
    // Chromium, every load of every page pooled (the headline figure).
    let pooled = |with: bool| {
        let v: Vec<f64> = res
            .browser
            .iter()
            .filter(|b| b.is_side(with))
            .filter_map(|b| b.plt_s)
            .collect();
        mewa_report::median(&v)
    };
    if let (Some(without), Some(with)) = (pooled(false), pooled(true)) {
        let red = (1.0 - with / without) * 100.0;
        t.push(vec![
            "Chromium pooled median reduction %".into(),
            format!("{red:.1} ({without:.3} -> {with:.3} s)"),
            format!("{:.1}", meh::MEDIAN_REDUCTION_PCT),
            format!(">= 20 ({})", if red >= 20.0 { "met" } else { "NOT met" }),
        ]);
    }
    // The hint for real pages: UDP answers within 1 KB, URL list in time.
    let hinted: Vec<_> = res.pages.iter().filter(|p| p.answer_bytes > 0).collect();
    if !hinted.is_empty() {
        let n = hinted.len() as f64;
        let small = hinted.iter().filter(|p| p.answer_bytes <= 1000).count() as f64 / n;
        let fits = hinted.iter().filter(|p| p.answer_bytes <= 1232).count() as f64 / n;
        t.push(vec![
            "UDP answers <= 1000 B / <= 1232 B, %".into(),
            format!("{:.0} / {:.0}", small * 100.0, fits * 100.0),
            "-".into(),
            format!(
                ">= 95 / 100 ({})",
                if small >= 0.95 && fits >= 1.0 {
                    "met"
                } else {
                    "NOT met"
                }
            ),
        ]);
        let timed: Vec<f64> = hinted.iter().filter_map(|p| p.urls_lead_ms).collect();
        let in_time = timed.iter().filter(|&&l| l >= 0.0).count() as f64 / n;
        t.push(vec![
            "URL list before the connection is ready (loader), % of pages".into(),
            format!("{:.0}", in_time * 100.0),
            "-".into(),
            format!(
                ">= 95 ({})",
                if in_time >= 0.95 { "met" } else { "NOT met" }
            ),
        ]);
    }
    for (kb, objects, paper) in meh::FIG8 {
        // The corpus page closest in size to Fig. 8's, if it is that page
        // (a `--page` selection may have left none).
        let near = res
            .pages
            .iter()
            .min_by_key(|p| p.page_bytes.abs_diff(kb * 1000))
            .filter(|p| meh::fig8_of(p.page_bytes).is_some_and(|f| f.0 == kb));
        if let Some(p) = near {
            t.push(vec![
                format!("Fig. 8 page {kb} KB / {objects} obj: {}", p.page),
                opt(p.reduction_pct, 1),
                format!("{paper:.1}"),
                "".into(),
            ]);
        }
    }
    s.push_str(&t.to_text());
    s
}

/// Whether any load of the loader completed with a PLT: the plots have
/// something to draw.
fn any_load_measured(res: &MehResult) -> bool {
    res.runs.iter().any(|r| r.ok && r.plt_s.is_some())
}

/// Every load's PLT as a CDF, without and with the hint (seed 000 Fig. 7).
fn cdf_plot(res: &MehResult, path: &Path) -> Result<(), ReportError> {
    let cdf = |with: bool| -> Vec<(f64, f64)> {
        let mut v: Vec<f64> = res
            .runs
            .iter()
            .filter(|r| r.ok && r.with_hint == with)
            .filter_map(|r| r.plt_s)
            .collect();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        v.iter()
            .enumerate()
            .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)])
            .collect()
    };
    mewa_report::draw(
        path,
        &Chart {
            title: "Page load time, every page and run (seed 000 Fig. 7)",
            x_label: "page load time (first SYN to last data byte), s",
            y_label: "CDF",
            log_y: false,
        },
        &[
            Series {
                name: "HTTP/2, one connection (without hint)".into(),
                points: cdf(false),
                mark: Mark::Line,
                colour: 0,
            },
            Series {
                name: "with Mobile Edge Hint".into(),
                points: cdf(true),
                mark: Mark::Line,
                colour: 1,
            },
        ],
    )
}

/// Per page, the PLTs without and with the hint as boxes (seed 000
/// Fig. 8 for every page).
fn box_plot(res: &MehResult, path: &Path) -> Result<(), ReportError> {
    let groups: Vec<BoxGroup> = res
        .pages
        .iter()
        .map(|p| {
            let of = |with: bool| -> Vec<f64> {
                res.runs
                    .iter()
                    .filter(|r| r.page == p.page && r.ok && r.with_hint == with)
                    .filter_map(|r| r.plt_s)
                    .collect()
            };
            BoxGroup {
                label: format!("{:.0}k n={}", p.page_bytes as f64 / 1000.0, p.n),
                boxes: vec![of(false), of(true)],
            }
        })
        .collect();
    mewa_report::draw_boxes(
        path,
        "Page load time per page, without (left) and with (right) the hint (seed 000 Fig. 8)",
        "page load time, s",
        &["without hint", "with hint"],
        &groups,
    )
}

/// What `mewa lab meh` measured, with the configuration that produced it.
#[derive(Debug, Clone)]
pub struct MehReport {
    /// The configuration (also in the folder's `config.json`).
    pub config: Config,
    /// One line describing the setting, for the report's head.
    pub setting: String,
    /// Every load and the figures over them.
    pub result: MehResult,
    folder: Option<ResultFolder>,
}

impl MehReport {
    /// The report of a run of `setup` (from `config`).
    pub fn new(
        config: Config,
        setup: &Setup,
        result: MehResult,
        folder: Option<ResultFolder>,
    ) -> MehReport {
        let link = match &setup.radio {
            RadioLink::Fixed { rate_bps } => format!("{:.0} Mbit/s", *rate_bps as f64 / 1e6),
            RadioLink::Trace { name, .. } => {
                format!(
                    "trace {name} (mean {:.1} Mbit/s)",
                    setup.radio.mean_bps() / 1e6
                )
            }
        };
        let setting = format!(
            "radio {link}, RRC {:?}, RTT {} ms radio + {} ms wired, {} runs, policy {:?}, dispatch {:?}, prefetch {}{}, planned bandwidth {}",
            setup.rrc,
            setup.radio_rtt_ms,
            setup.wired_rtt_ms,
            setup.runs,
            setup.policy,
            setup.dispatch,
            if setup.prefetch { "on" } else { "off" },
            [
                (setup.one_connection, ", one connection (URLs only)"),
                (setup.first_flight_budget, ", first-flight budget"),
                (setup.image_hold, ", image hold"),
                (
                    setup.images_with_document,
                    ", images beside the document",
                ),
                (
                    setup.hold_other_hosts_images,
                    ", other hosts' images held",
                ),
            ]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, s)| *s)
            .collect::<String>(),
            match setup.plan_rate {
                PlanRate::Fixed(b) => format!("{:.1} Mbit/s (told)", b / 1e6),
                PlanRate::Observed { prior_bps } => format!(
                    "observed (peak delivery of the last loads; {:.0} Mbit/s before the first)",
                    prior_bps / 1e6
                ),
            }
        );
        MehReport {
            config,
            setting,
            result,
            folder,
        }
    }
}

impl Report for MehReport {
    fn text(&self) -> String {
        let mut s = pages_table(&self.result).to_text();
        s.push('\n');
        if !self.result.browser.is_empty() {
            s.push_str(&browser_table(&self.result).to_text());
            s.push('\n');
            s.push_str(
                &peers::arms_detail_table(&self.result.browser, &self.result.arms).to_text(),
            );
            s.push('\n');
            s.push_str(&peers::arms_table(&self.result.arms).to_text());
            s.push('\n');
            s.push_str(&peers::targets_table(&self.result.browser, &self.result.arms).to_text());
            s.push('\n');
        }
        s.push_str(&summary(&self.result, &self.setting));
        s
    }

    fn csv(&self) -> Vec<(&'static str, Table)> {
        vec![
            ("runs.csv", runs_table(&self.result)),
            ("pages.csv", pages_table(&self.result)),
            ("browser.csv", peers::loads_table(&self.result.browser)),
            ("arms.csv", peers::arms_table(&self.result.arms)),
            ("evidence.csv", peers::evidence_table(&self.result.browser)),
        ]
    }

    fn json(&self) -> Result<String, ReportError> {
        to_json("the result", &self.result)
    }

    /// No figures before a load completed (a run interrupted before its
    /// first pair): there is nothing to draw, and the tables still say so.
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        if !any_load_measured(&self.result) {
            return Ok(Vec::new());
        }
        let (cdf_svg, box_svg) = (dir.join("cdf.svg"), dir.join("pages-box.svg"));
        cdf_plot(&self.result, &cdf_svg)?;
        box_plot(&self.result, &box_svg)?;
        let mut out = vec![cdf_svg, box_svg];
        let loads = &self.result.browser;
        if loads.iter().any(|l| peers::Metric::Plt.of(l).is_some()) {
            for (metric, file) in [
                (peers::Metric::Plt, "arms-plt-cdf.svg"),
                (peers::Metric::Lcp, "arms-lcp-cdf.svg"),
                (peers::Metric::SpeedIndex, "arms-si-cdf.svg"),
            ] {
                let path = dir.join(file);
                peers::arms_cdf_plot(loads, &self.result.arms, metric, &path)?;
                out.push(path);
            }
            let path = dir.join("arms-pages-box.svg");
            peers::arms_box_plot(loads, &self.result.arms, peers::Metric::Plt, &path)?;
            out.push(path);
        }
        Ok(out)
    }

    fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# mewa lab meh\n\n{}\n", self.setting);
        let _ = writeln!(
            md,
            "## Pages\n\n```\n{}```\n",
            pages_table(&self.result).to_text()
        );
        let _ = writeln!(
            md,
            "## Beside seed 000\n\n```\n{}```\n",
            summary(&self.result, &self.setting)
        );
        if !self.result.browser.is_empty() {
            let _ = writeln!(
            md,
            "## Headless Chromium through the local proxy\n\nPLT = from the start of the request for the page's URL to the last event of a request for one of its objects, in Chromium's NetLog (Chromium's own start-up requests and the favicon do not count). All asked = to the start of the page's last request.\n\n```\n{}```\n",
            browser_table(&self.result).to_text()
        );
            let _ = writeln!(
                md,
                "## Chromium's arms\n\nEach arm's loads are paired with `cold` loads of the same page on the same stretch of the trace. Per page: the median of its paired changes with a bootstrap 95 % interval; over pages: the median of the pages' medians with a two-level bootstrap interval, the Wilcoxon signed-rank p-value over the pages' medians, and the pairs won. Best peer (lowest median PLT over pages without mewa): {}.\n\n```\n{}```\n\n```\n{}```\n",
                self.result.arms.best_peer.map_or("-".into(), |a| a.to_string()),
                peers::arms_detail_table(&self.result.browser, &self.result.arms).to_text(),
                peers::arms_table(&self.result.arms).to_text()
            );
            let _ = writeln!(
                md,
                "### Against the peers\n\n```\n{}```\n",
                peers::targets_table(&self.result.browser, &self.result.arms).to_text()
            );
            let _ = writeln!(
                md,
                "### What each arm did, per page (from the NetLogs; medians over the page's loads)\n\n```\n{}```\n",
                peers::evidence_table(&self.result.browser).to_text()
            );
            for c in self.result.arms.comparisons.iter().filter(|c| {
                c.b == super::config::Arm::Meh
                    && matches!(c.metric, peers::Metric::Plt | peers::Metric::Lcp)
            }) {
                let _ = writeln!(
                    md,
                    "### {} per page: {} vs {}\n\n```\n{}```\n",
                    c.metric.name(),
                    c.b,
                    c.a,
                    peers::page_table(c).to_text()
                );
            }
            let errors: Vec<String> = self
                .result
                .browser
                .iter()
                .filter_map(|b| {
                    b.error
                        .as_ref()
                        .map(|e| format!("- {} run {} {}: {e}", b.page, b.run, b.arm()))
                })
                .collect();
            if !errors.is_empty() {
                let _ = writeln!(md, "Errors:\n{}\n", errors.join("\n"));
            }
        }
        if any_load_measured(&self.result) {
            let _ = writeln!(
                md,
                "Plots: cdf.svg (all loads), pages-box.svg (per page). Raw loads: runs.csv."
            );
        } else {
            let _ = writeln!(md, "No load completed: no plots. Raw loads: runs.csv.");
        }
        md
    }

    fn folder(&self) -> Option<&ResultFolder> {
        self.folder.as_ref()
    }
}
