//! Chromium's arms side by side: every arm against `cold` and `meh`
//! against the best peer, on each metric users watch, from paired loads
//! (the same page on the same stretch of the trace), with the statistics
//! of [`mewa_report::paired`]: per page the median of its paired changes
//! with a bootstrap interval, over pages the median of the pages' medians
//! with a two-level interval, the Wilcoxon signed-rank p-value and the
//! pairs won. A page is called slower or faster only when its interval
//! says so.

use std::collections::BTreeMap;

use mewa_report::paired::{compare_pages, PagesComparison, Resampling};
use mewa_report::{median, opt, Table};
use serde::Serialize;

use super::config::Arm;
use super::record::BrowserRun;

/// A figure of a Chromium load that arms are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Metric {
    /// The page's own span in the NetLog (first request to last event).
    Plt,
    /// `loadEventEnd`.
    Onload,
    /// First Contentful Paint.
    Fcp,
    /// Largest Contentful Paint.
    Lcp,
    /// Speed Index.
    SpeedIndex,
}

impl Metric {
    /// Every metric, in the tables' order.
    pub const ALL: [Metric; 5] = [
        Metric::Plt,
        Metric::Onload,
        Metric::Fcp,
        Metric::Lcp,
        Metric::SpeedIndex,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Plt => "PLT",
            Metric::Onload => "onload",
            Metric::Fcp => "FCP",
            Metric::Lcp => "LCP",
            Metric::SpeedIndex => "Speed Index",
        }
    }

    /// Its value in a load, s; none when the load failed or the page has
    /// no such mark.
    pub fn of(self, b: &BrowserRun) -> Option<f64> {
        if b.error.is_some() {
            return None;
        }
        let m = b.metrics.as_ref();
        match self {
            Metric::Plt => b.plt_s,
            Metric::Onload => m.and_then(|m| m.onload_s),
            Metric::Fcp => m.and_then(|m| m.fcp_s),
            Metric::Lcp => m.and_then(|m| m.lcp_s),
            Metric::SpeedIndex => m.and_then(|m| m.speed_index_s),
        }
    }
}

/// One comparison: arm `b` against arm `a` on `metric`.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The baseline arm.
    pub a: Arm,
    /// The arm compared with it.
    pub b: Arm,
    /// The metric.
    pub metric: Metric,
    /// Per page and over pages.
    pub result: PagesComparison,
}

/// Every comparison of a run's Chromium loads.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArmsSummary {
    /// The arms loaded, in order.
    pub arms: Vec<Arm>,
    /// The peer (an arm other than `meh`) with the lowest median PLT over
    /// pages: the strongest baseline a user has without mewa.
    pub best_peer: Option<Arm>,
    /// Every arm against `cold`, then `meh` against the best peer (when
    /// it is not `cold`), per metric.
    pub comparisons: Vec<Comparison>,
}

/// The pairs `(a, b)` of `metric` per page: loads of the same page in the
/// same run (the same stretch of the trace), pages in first-seen order.
fn pairs(loads: &[BrowserRun], a: Arm, b: Arm, metric: Metric) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut by: BTreeMap<(String, usize), (Option<f64>, Option<f64>)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for l in loads {
        if !order.contains(&l.page) {
            order.push(l.page.clone());
        }
        let slot = by.entry((l.page.clone(), l.run)).or_default();
        let arm = l.arm();
        if arm == a {
            slot.0 = metric.of(l);
        }
        if arm == b {
            slot.1 = metric.of(l);
        }
    }
    order
        .into_iter()
        .map(|page| {
            let v = by
                .iter()
                .filter(|((p, _), _)| *p == page)
                .filter_map(|(_, (x, y))| Some(((*x)?, (*y)?)))
                .collect();
            (page, v)
        })
        .collect()
}

/// The pairs of `metric` per page between two result folders' loads of one
/// arm: `a`'s and `b`'s loads of the same page in the same run (the same
/// stretch of the same trace when both ran it), pages in `a`'s order.
fn pairs_between(
    a: &[&BrowserRun],
    b: &[&BrowserRun],
    metric: Metric,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut order: Vec<String> = Vec::new();
    for l in a {
        if !order.contains(&l.page) {
            order.push(l.page.clone());
        }
    }
    order
        .into_iter()
        .map(|page| {
            let v = a
                .iter()
                .filter(|x| x.page == page)
                .filter_map(|x| {
                    let y = b.iter().find(|y| y.page == x.page && y.run == x.run)?;
                    Some((metric.of(x)?, metric.of(y)?))
                })
                .collect();
            (page, v)
        })
        .collect()
}

/// Two result folders compared: per arm both have and metric, folder `b`'s
/// loads against folder `a`'s.
#[derive(Debug, Clone, Serialize)]
pub struct FolderComparison {
    /// Per arm and metric (the comparison's `a` and `b` name the arm).
    pub comparisons: Vec<Comparison>,
}

/// Folder `b`'s Chromium loads against folder `a`'s, arm by arm (only the
/// arms in `arms`, when given), paired by page and run.
pub fn compare_folders(a: &[BrowserRun], b: &[BrowserRun], arms: &[Arm]) -> FolderComparison {
    let mut comparisons = Vec::new();
    for metric in Metric::ALL {
        for &arm in Arm::ALL {
            if !arms.is_empty() && !arms.contains(&arm) {
                continue;
            }
            let of = |v: &'_ [BrowserRun]| -> Vec<BrowserRun> {
                v.iter().filter(|l| l.arm() == arm).cloned().collect()
            };
            let (xa, xb) = (of(a), of(b));
            if xa.is_empty() || xb.is_empty() {
                continue;
            }
            let ra: Vec<&BrowserRun> = xa.iter().collect();
            let rb: Vec<&BrowserRun> = xb.iter().collect();
            comparisons.push(Comparison {
                a: arm,
                b: arm,
                metric,
                result: compare_pages(&pairs_between(&ra, &rb, metric), &Resampling::default()),
            });
        }
    }
    FolderComparison { comparisons }
}

/// The median over pages of each page's median `metric` in `arm`.
fn median_over_pages(loads: &[BrowserRun], arm: Arm, metric: Metric) -> Option<f64> {
    median_of_page_medians(loads, arm, |l| metric.of(l))
}

/// The median over pages of each page's median of `value` in `arm`'s
/// loads (loads without a value left out).
fn median_of_page_medians(
    loads: &[BrowserRun],
    arm: Arm,
    value: impl Fn(&BrowserRun) -> Option<f64>,
) -> Option<f64> {
    let mut per: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for l in loads.iter().filter(|l| l.arm() == arm) {
        if let Some(v) = value(l) {
            per.entry(&l.page).or_default().push(v);
        }
    }
    let meds: Vec<f64> = per.values().filter_map(|v| median(v)).collect();
    median(&meds)
}

/// The median over pages of each page's median PLT over its floor in
/// `arm`: how far the arm is from what the link allows.
pub fn floor_multiple(loads: &[BrowserRun], arm: Arm) -> Option<f64> {
    median_of_page_medians(loads, arm, |l| {
        Some(Metric::Plt.of(l)? / l.floor_s.filter(|f| *f > 0.0)?)
    })
}

/// Compares `b` with `a` on `metric` over `loads`.
pub fn compare(loads: &[BrowserRun], a: Arm, b: Arm, metric: Metric) -> Comparison {
    Comparison {
        a,
        b,
        metric,
        result: compare_pages(&pairs(loads, a, b, metric), &Resampling::default()),
    }
}

/// The comparisons of a run's Chromium loads.
pub fn summarise_arms(loads: &[BrowserRun]) -> ArmsSummary {
    let arms: Vec<Arm> = Arm::ALL
        .iter()
        .copied()
        .filter(|a| loads.iter().any(|l| l.arm() == *a))
        .collect();
    let best_peer = arms
        .iter()
        .copied()
        .filter(|a| a.is_peer())
        .filter_map(|a| Some((a, median_over_pages(loads, a, Metric::Plt)?)))
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(a, _)| a);
    let mut comparisons = Vec::new();
    for metric in Metric::ALL {
        for &b in arms.iter().filter(|a| **a != Arm::Cold) {
            comparisons.push(compare(loads, Arm::Cold, b, metric));
        }
        if let Some(best) = best_peer.filter(|p| *p != Arm::Cold) {
            if arms.contains(&Arm::Meh) {
                comparisons.push(compare(loads, best, Arm::Meh, metric));
            }
        }
    }
    ArmsSummary {
        arms,
        best_peer,
        comparisons,
    }
}

/// The fewest samples (pairs of a page, pages over pages) whose interval
/// is read as a verdict: a bootstrap of one or two values is those values,
/// not an interval.
pub const FEWEST_FOR_VERDICT: usize = 3;

/// A verdict as the tables print it, or why there is none.
pub fn verdict_text(samples: usize, v: mewa_report::Verdict) -> String {
    if samples < FEWEST_FOR_VERDICT {
        format!("too few ({samples})")
    } else {
        format!("{v:?}")
    }
}

/// A change as a reduction in percent (positive: faster).
fn reduction(change: f64) -> f64 {
    -change * 100.0
}

/// A median change and its interval as the tables print them: the
/// reduction in percent and the interval of the reduction, low to high.
pub fn reduction_ci(change: f64, ci: (f64, f64)) -> String {
    format!(
        "{:.1} [{:.1}, {:.1}]",
        reduction(change),
        reduction(ci.1),
        reduction(ci.0)
    )
}

/// The over-pages table: per metric and comparison, the median reduction
/// with its 95 % interval, the p-value and the pairs won.
pub fn arms_table(s: &ArmsSummary) -> Table {
    let mut t = Table::new(&[
        "metric",
        "arm vs baseline",
        "pages",
        "pairs won",
        "median reduction % [95% CI]",
        "p (Wilcoxon)",
        "verdict",
    ]);
    for c in &s.comparisons {
        let Some(o) = &c.result.overall else {
            continue;
        };
        t.push(vec![
            c.metric.name().into(),
            format!("{} vs {}", c.b, c.a),
            o.pages.to_string(),
            format!("{}/{}", o.won, o.pairs),
            reduction_ci(o.median_change, o.ci),
            opt(o.p_value, 4),
            verdict_text(o.pages, o.verdict()),
        ]);
    }
    t
}

/// The comparison of `b` against `a` on `metric`, if made.
fn find(s: &ArmsSummary, a: Arm, b: Arm, metric: Metric) -> Option<&Comparison> {
    s.comparisons
        .iter()
        .find(|c| c.a == a && c.b == b && c.metric == metric)
}

/// The targets for the hint against the peers, measured: `meh`
/// against the best peer on PLT and LCP (interval above 0), `meh` ahead of
/// every peer at the median over pages, the floor multiples, pages where
/// the hint is slower than `cold` beyond 3 % by its interval, and loads
/// that did not complete.
pub fn targets_table(loads: &[BrowserRun], s: &ArmsSummary) -> Table {
    let mut t = Table::new(&["figure", "measured", "target"]);
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    if !s.arms.contains(&Arm::Meh) {
        return t;
    }
    let best = s.best_peer;
    for metric in [Metric::Plt, Metric::Lcp] {
        if let Some(best) = best {
            let c = if best == Arm::Cold {
                find(s, Arm::Cold, Arm::Meh, metric)
            } else {
                find(s, best, Arm::Meh, metric)
            };
            if let Some(o) = c.and_then(|c| c.result.overall.as_ref()) {
                let lo = reduction(o.ci.1);
                t.push(vec![
                    format!(
                        "{}: meh vs best peer ({best}), median reduction %",
                        metric.name()
                    ),
                    format!(
                        "{:.1} [{:.1}, {:.1}], {} pages, {}/{} pairs won",
                        reduction(o.median_change),
                        lo,
                        reduction(o.ci.0),
                        o.pages,
                        o.won,
                        o.pairs
                    ),
                    format!("interval above 0 ({})", met(lo > 0.0)),
                ]);
            }
        }
        let meh = median_over_pages(loads, Arm::Meh, metric);
        let behind: Vec<String> = s
            .arms
            .iter()
            .filter(|a| a.is_peer())
            .filter_map(|&a| {
                let p = median_over_pages(loads, a, metric)?;
                (meh? >= p).then(|| format!("{a} {p:.3}"))
            })
            .collect();
        t.push(vec![
            format!(
                "{}: meh ahead of every peer at the median over pages",
                metric.name()
            ),
            match meh {
                Some(m) if behind.is_empty() => format!("meh {m:.3} s, ahead of all"),
                Some(m) => format!("meh {m:.3} s, not ahead of {}", behind.join(", ")),
                None => "-".into(),
            },
            format!("ahead of all ({})", met(meh.is_some() && behind.is_empty())),
        ]);
    }
    let mut floors: Vec<String> = Vec::new();
    for arm in [
        Some(Arm::Meh),
        Some(Arm::Cold),
        best.filter(|b| *b != Arm::Cold),
    ]
    .into_iter()
    .flatten()
    {
        floors.push(format!("{arm} {}", opt(floor_multiple(loads, arm), 2)));
    }
    t.push(vec![
        "PLT / floor, median over pages".into(),
        floors.join(", "),
        "reported".into(),
    ]);
    if let Some(c) = find(s, Arm::Cold, Arm::Meh, Metric::Plt) {
        let slower: Vec<String> = c
            .result
            .pages
            .iter()
            .filter_map(|p| {
                let st = p.stats.as_ref()?;
                (st.pairs >= FEWEST_FOR_VERDICT && reduction(st.ci.0) < -3.0)
                    .then(|| format!("{} ({:.1} %)", p.page, reduction(st.median_change)))
            })
            .collect();
        t.push(vec![
            "pages slower with the hint than cold, interval entirely below -3 %".into(),
            if slower.is_empty() {
                "none".into()
            } else {
                slower.join(", ")
            },
            format!("none ({})", met(slower.is_empty())),
        ]);
    }
    let failed: Vec<String> = s
        .arms
        .iter()
        .filter_map(|&a| {
            let n = loads
                .iter()
                .filter(|l| l.arm() == a && l.error.is_some())
                .count();
            (n > 0).then(|| format!("{a} {n}"))
        })
        .collect();
    t.push(vec![
        "loads without a load event".into(),
        if failed.is_empty() {
            "none".into()
        } else {
            failed.join(", ")
        },
        format!("none ({})", met(failed.is_empty())),
    ]);
    t
}

/// The per-page table of `b` against `a` on `metric`: each page's median
/// paired reduction with its interval, pairs won and verdict.
pub fn page_table(c: &Comparison) -> Table {
    let mut t = Table::new(&[
        "page",
        "pairs won",
        "median reduction % [95% CI]",
        "p",
        "verdict",
    ]);
    for p in &c.result.pages {
        let Some(s) = &p.stats else {
            t.push(vec![
                p.page.clone(),
                "0/0".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
            continue;
        };
        t.push(vec![
            p.page.clone(),
            format!("{}/{}", s.won, s.pairs),
            reduction_ci(s.median_change, s.ci),
            opt(s.p_value, 4),
            verdict_text(s.pairs, s.verdict()),
        ]);
    }
    t
}

/// Per arm: the medians over pages of each metric, the share of the
/// page's objects and bytes that came, failed loads, and the evidence that
/// the arm did what it claims (preconnects and requests before the
/// document's response, 103 responses, the document's protocol, what the
/// predictor had learned).
pub fn arms_detail_table(loads: &[BrowserRun], s: &ArmsSummary) -> Table {
    let mut t = Table::new(&[
        "arm",
        "loads",
        "failed",
        "PLT s",
        "PLT / floor",
        "onload s",
        "FCP s",
        "LCP s",
        "SI s",
        "objects came %",
        "bytes came %",
        "early preconnect hosts",
        "early requests",
        "103s",
        "protocol",
        "learned origins",
    ]);
    for &arm in &s.arms {
        let mine: Vec<&BrowserRun> = loads.iter().filter(|l| l.arm() == arm).collect();
        let share = |f: &dyn Fn(&super::record::Metrics) -> (f64, f64)| {
            let v: Vec<f64> = mine
                .iter()
                .filter_map(|l| l.metrics.as_ref())
                .map(f)
                .filter(|(_, of)| *of > 0.0)
                .map(|(got, of)| got / of * 100.0)
                .collect();
            median(&v)
        };
        let early = |f: &dyn Fn(&mewa_chromium::EarlyActions) -> usize| {
            let v: Vec<f64> = mine
                .iter()
                .filter_map(|l| l.early.as_ref())
                .map(|e| f(e) as f64)
                .collect();
            median(&v)
        };
        let mut protocols: Vec<&str> = mine.iter().filter_map(|l| l.protocol.as_deref()).collect();
        protocols.sort();
        protocols.dedup();
        let learned: Vec<f64> = mine.iter().map(|l| l.predicted.len() as f64).collect();
        t.push(vec![
            arm.to_string(),
            mine.len().to_string(),
            mine.iter()
                .filter(|l| l.error.is_some())
                .count()
                .to_string(),
            opt(median_over_pages(loads, arm, Metric::Plt), 3),
            opt(floor_multiple(loads, arm), 2),
            opt(median_over_pages(loads, arm, Metric::Onload), 3),
            opt(median_over_pages(loads, arm, Metric::Fcp), 3),
            opt(median_over_pages(loads, arm, Metric::Lcp), 3),
            opt(median_over_pages(loads, arm, Metric::SpeedIndex), 3),
            opt(share(&|m| (m.objects_arrived as f64, m.objects as f64)), 1),
            opt(share(&|m| (m.bytes_arrived as f64, m.bytes as f64)), 1),
            opt(early(&|e| e.preconnected.len()), 1),
            opt(early(&|e| e.requested.len()), 1),
            opt(early(&|e| e.informational), 1),
            if protocols.is_empty() {
                "-".into()
            } else {
                protocols.join(",")
            },
            if arm == Arm::Predictor {
                opt(median(&learned), 1)
            } else {
                "-".into()
            },
        ]);
    }
    t
}

/// The CDF of `metric` per arm over every Chromium load
/// (`arms-<metric>-cdf.svg`).
pub fn arms_cdf_plot(
    loads: &[BrowserRun],
    s: &ArmsSummary,
    metric: Metric,
    path: &std::path::Path,
) -> Result<(), mewa_report::ReportError> {
    let series: Vec<mewa_report::Series> = s
        .arms
        .iter()
        .enumerate()
        .map(|(i, &arm)| {
            let v: Vec<f64> = loads
                .iter()
                .filter(|l| l.arm() == arm)
                .filter_map(|l| metric.of(l))
                .collect();
            mewa_report::cdf_series(arm.name(), &v, i)
        })
        .collect();
    let title = format!("Chromium, {} per arm, every page and run", metric.name());
    let x = format!("{}, s", metric.name());
    mewa_report::draw(
        path,
        &mewa_report::Chart {
            title: &title,
            x_label: &x,
            y_label: "CDF",
            log_y: false,
        },
        &series,
    )
}

/// Per page, `metric` of each arm as boxes (`arms-pages-box.svg`).
pub fn arms_box_plot(
    loads: &[BrowserRun],
    s: &ArmsSummary,
    metric: Metric,
    path: &std::path::Path,
) -> Result<(), mewa_report::ReportError> {
    let mut pages: Vec<&str> = Vec::new();
    for l in loads {
        if !pages.contains(&l.page.as_str()) {
            pages.push(&l.page);
        }
    }
    let groups: Vec<mewa_report::BoxGroup> = pages
        .iter()
        .map(|page| mewa_report::BoxGroup {
            label: (*page).to_string(),
            boxes: s
                .arms
                .iter()
                .map(|&arm| {
                    loads
                        .iter()
                        .filter(|l| l.page == *page && l.arm() == arm)
                        .filter_map(|l| metric.of(l))
                        .collect()
                })
                .collect(),
        })
        .collect();
    let names: Vec<&str> = s.arms.iter().map(|a| a.name()).collect();
    mewa_report::draw_boxes(
        path,
        &format!("Chromium, {} per page and arm", metric.name()),
        &format!("{}, s", metric.name()),
        &names,
        &groups,
    )
}

/// Per page, the proof that each arm did what it claims, from its loads'
/// NetLogs (medians over the page's loads): the origins the predictor had
/// learned and the hosts it preconnected to before the document; the
/// loads that got a 103 and the hosts and objects Chromium preconnected
/// to and requested before the document's response; the loads whose
/// document came over HTTP/3; the connections the hint's proxy opened.
pub fn evidence_table(loads: &[BrowserRun]) -> Table {
    let mut t = Table::new(&[
        "page",
        "predictor: learned origins",
        "predictor: early preconnects",
        "early-hints: 103 loads",
        "early-hints: early preconnects",
        "early-hints: early requests",
        "h3: documents over h3",
        "meh: connections",
    ]);
    let mut pages: Vec<&str> = Vec::new();
    for l in loads {
        if !pages.contains(&l.page.as_str()) {
            pages.push(&l.page);
        }
    }
    for page in pages {
        let of = |arm: Arm| -> Vec<&BrowserRun> {
            loads
                .iter()
                .filter(|l| l.page == page && l.arm() == arm)
                .collect()
        };
        let med = |v: &[&BrowserRun], f: &dyn Fn(&BrowserRun) -> usize| -> String {
            if v.is_empty() {
                return "-".into();
            }
            let x: Vec<f64> = v.iter().map(|l| f(l) as f64).collect();
            opt(median(&x), 1)
        };
        let count = |v: &[&BrowserRun], f: &dyn Fn(&BrowserRun) -> bool| -> String {
            if v.is_empty() {
                "-".into()
            } else {
                format!("{}/{}", v.iter().filter(|l| f(l)).count(), v.len())
            }
        };
        let early = |l: &BrowserRun| l.early.clone().unwrap_or_default();
        let (p, e, h, m) = (
            of(Arm::Predictor),
            of(Arm::EarlyHints),
            of(Arm::H3),
            of(Arm::Meh),
        );
        t.push(vec![
            page.to_string(),
            med(&p, &|l| l.predicted.len()),
            med(&p, &|l| early(l).preconnected.len()),
            count(&e, &|l| early(l).informational > 0),
            med(&e, &|l| early(l).preconnected.len()),
            med(&e, &|l| early(l).requested.len()),
            count(&h, &|l| l.protocol.as_deref() == Some("h3")),
            med(&m, &|l| l.n),
        ]);
    }
    t
}

/// Every Chromium load with its figures, one row each (`browser.csv`).
pub fn loads_table(loads: &[BrowserRun]) -> Table {
    let mut t = Table::new(&[
        "page",
        "run",
        "arm",
        "cpu_slowdown",
        "plt_s",
        "floor_s",
        "onload_s",
        "fcp_s",
        "lcp_s",
        "speed_index_s",
        "visually_complete_s",
        "frames",
        "objects_arrived",
        "objects",
        "bytes_arrived",
        "bytes",
        "early_preconnects",
        "early_requests",
        "informational",
        "protocol",
        "learned_origins",
        "n",
        "prefetched",
        "error",
    ]);
    for l in loads {
        let m = l.metrics.clone().unwrap_or_default();
        let e = l.early.clone().unwrap_or_default();
        t.push(vec![
            l.page.clone(),
            l.run.to_string(),
            l.arm().to_string(),
            opt(l.cpu_slowdown, 1),
            opt(l.plt_s, 4),
            opt(l.floor_s, 4),
            opt(m.onload_s, 4),
            opt(m.fcp_s, 4),
            opt(m.lcp_s, 4),
            opt(m.speed_index_s, 4),
            opt(m.visually_complete_s, 4),
            m.frames.to_string(),
            m.objects_arrived.to_string(),
            m.objects.to_string(),
            m.bytes_arrived.to_string(),
            m.bytes.to_string(),
            e.preconnected.len().to_string(),
            e.requested.len().to_string(),
            e.informational.to_string(),
            l.protocol.clone().unwrap_or_default(),
            l.predicted.len().to_string(),
            l.n.to_string(),
            l.prefetched.to_string(),
            l.error
                .clone()
                .unwrap_or_default()
                .replace(['\n', ','], " "),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meh::record::Metrics;

    fn load(page: &str, run: usize, arm: Arm, plt: f64) -> BrowserRun {
        BrowserRun {
            page: page.into(),
            run,
            with_hint: arm == Arm::Meh,
            plt_s: Some(plt),
            requested_s: None,
            n: 0,
            answer_bytes: 0,
            urls_over_tcp: false,
            urls_lead_ms: None,
            prefetched: 0,
            error: None,
            handshake_ns: None,
            arm: Some(arm),
            cpu_slowdown: Some(1.0),
            metrics: Some(Metrics {
                lcp_s: Some(plt * 0.8),
                ..Metrics::default()
            }),
            early: None,
            predicted: Vec::new(),
            protocol: None,
            floor_s: Some(1.0),
        }
    }

    #[test]
    fn arms_are_paired_by_page_and_run_and_the_best_peer_is_found() {
        let mut loads = Vec::new();
        for run in 0..6 {
            for (page, base) in [("a", 2.0), ("b", 4.0), ("c", 3.0)] {
                let jitter = run as f64 * 0.01;
                loads.push(load(page, run, Arm::Cold, base + jitter));
                loads.push(load(page, run, Arm::H3, base * 0.9 + jitter));
                loads.push(load(page, run, Arm::Meh, base * 0.7 + jitter));
            }
        }
        // A failed load has no pair.
        loads[0].error = Some("no load event".into());
        let s = summarise_arms(&loads);
        assert_eq!(s.arms, [Arm::Cold, Arm::H3, Arm::Meh]);
        assert_eq!(s.best_peer, Some(Arm::H3));
        let plt_meh = s
            .comparisons
            .iter()
            .find(|c| c.metric == Metric::Plt && c.a == Arm::Cold && c.b == Arm::Meh)
            .expect("meh vs cold");
        let o = plt_meh.result.overall.as_ref().expect("overall");
        assert_eq!((o.pages, o.pairs, o.won), (3, 17, 17));
        assert!(o.median_change < -0.25 && o.median_change > -0.35, "{o:?}");
        // meh against the best peer, on LCP too.
        assert!(s
            .comparisons
            .iter()
            .any(|c| c.metric == Metric::Lcp && c.a == Arm::H3 && c.b == Arm::Meh));
        let text = arms_table(&s).to_text();
        assert!(text.contains("meh vs h3"), "{text}");
        for l in loads.iter_mut().filter(|l| l.arm() == Arm::H3) {
            l.protocol = Some("h3".into());
        }
        let evidence = evidence_table(&loads).to_text();
        assert!(
            evidence.contains("6/6"),
            "every h3 load counted: {evidence}"
        );
        let targets = targets_table(&loads, &s).to_text();
        assert!(targets.contains("meh vs best peer (h3)"), "{targets}");
        assert!(targets.contains("interval above 0 (met)"), "{targets}");
        assert!(
            targets.contains("cold 1"),
            "one failed cold load: {targets}"
        );
        assert!(arms_detail_table(&loads, &s).to_text().contains("h3"));
        assert_eq!(
            loads_table(&loads).to_text().lines().count(),
            loads.len() + 2
        );
        // Two folders: the second 10 % slower in every arm.
        let slower: Vec<BrowserRun> = loads
            .iter()
            .cloned()
            .map(|mut l| {
                l.plt_s = l.plt_s.map(|x| x * 1.1);
                l
            })
            .collect();
        let f = compare_folders(&loads, &slower, &[Arm::Meh]);
        let plt = f
            .comparisons
            .iter()
            .find(|c| c.metric == Metric::Plt)
            .expect("plt");
        assert_eq!((plt.a, plt.b), (Arm::Meh, Arm::Meh));
        let o = plt.result.overall.as_ref().expect("overall");
        assert!((o.median_change - 0.1).abs() < 1e-9, "{o:?}");
        assert_eq!(o.won, 0);
        assert!(f.comparisons.iter().all(|c| c.a == Arm::Meh));
    }
}
