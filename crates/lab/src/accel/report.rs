//! `mewa lab accel`'s report: per browser, the median page load time by
//! downlink rate and variant against seed 004's "about a third", its two
//! plots (like seed 004 Fig. 6), and with several pages the same per page.

use std::collections::{BTreeMap, BTreeSet};

use mewa_report::{median, Mark, Plot, ResultFolder, Section, SectionReport, Series, Table};

use super::{AccelRun, Config, Variant};
use crate::experiment::Browser;

/// One browser's loads, by rate and variant: the PLTs of the pages that
/// loaded in every variant at that rate (so the medians compare the same
/// pages), the failures, and the pages left out.
struct Cells {
    rates: Vec<u64>,
    plt: BTreeMap<(u64, Variant), Vec<f64>>,
    failed: BTreeMap<(u64, Variant), usize>,
    left_out: usize,
}

impl Cells {
    fn of(runs: &[AccelRun], tool: Browser, variants: &[Variant]) -> Cells {
        let mine = || runs.iter().filter(move |r| r.tool == tool);
        let loaded: BTreeSet<(&str, u64, Variant)> = mine()
            .filter(|r| r.plt_s.is_some())
            .map(|r| (r.page.as_str(), r.down_kbps, r.variant))
            .collect();
        let complete =
            |page: &str, rate: u64| variants.iter().all(|v| loaded.contains(&(page, rate, *v)));
        let mut plt: BTreeMap<(u64, Variant), Vec<f64>> = BTreeMap::new();
        let mut failed: BTreeMap<(u64, Variant), usize> = BTreeMap::new();
        let mut left_out: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
        for r in mine() {
            match r.plt_s {
                Some(p) if complete(&r.page, r.down_kbps) => {
                    plt.entry((r.down_kbps, r.variant)).or_default().push(p)
                }
                Some(_) => {
                    left_out.entry(r.down_kbps).or_default().insert(&r.page);
                }
                None => *failed.entry((r.down_kbps, r.variant)).or_default() += 1,
            }
        }
        let mut rates: Vec<u64> = mine().map(|r| r.down_kbps).collect();
        rates.sort_unstable();
        rates.dedup();
        Cells {
            rates,
            plt,
            failed,
            left_out: left_out.values().map(BTreeSet::len).sum(),
        }
    }

    /// The median PLT of `v` at `rate`.
    fn median(&self, rate: u64, v: Variant) -> Option<f64> {
        self.plt.get(&(rate, v)).and_then(|x| median(x))
    }

    /// `v` against HTTP/2 per domain at `rate`, a fraction.
    fn vs_h2(&self, rate: u64, v: Variant) -> Option<f64> {
        match (self.median(rate, v), self.median(rate, Variant::H2)) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
            _ => None,
        }
    }
}

/// The median PLT by rate and variant, against the target.
fn rates_table(config: &Config, tool: Browser, variants: &[Variant], c: &Cells) -> Section {
    let mut header = vec!["downlink kbit/s".to_owned()];
    header.extend(variants.iter().map(|v| format!("{v} s")));
    header.push("warm vs h2".into());
    header.push("cold vs h2".into());
    header.push("loads (failed)".into());
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&header);
    let (mut meets, mut compared) = (0, 0);
    let pct = |x: f64| format!("{:+.1} %", x * 100.0);
    for &rate in &c.rates {
        let mut row = vec![rate.to_string()];
        for v in variants {
            row.push(c.median(rate, *v).map_or("-".into(), |m| format!("{m:.2}")));
        }
        let warm = c.vs_h2(rate, Variant::AccelWarm);
        if let Some(w) = warm {
            compared += 1;
            if w <= -1.0 / 3.0 {
                meets += 1;
            }
        }
        row.push(warm.map_or("-".into(), pct));
        row.push(c.vs_h2(rate, Variant::AccelCold).map_or("-".into(), pct));
        let n: usize = variants
            .iter()
            .map(|v| c.plt.get(&(rate, *v)).map_or(0, Vec::len))
            .sum();
        let f: usize = variants
            .iter()
            .map(|v| c.failed.get(&(rate, *v)).copied().unwrap_or(0))
            .sum();
        row.push(format!("{n} ({f})"));
        t.push(row);
    }
    let left_out = if c.left_out == 0 {
        String::new()
    } else {
        format!(
            " Left out of the medians: {} page-rate pairs that did not load in every \
             variant (see the per-page table).",
            c.left_out
        )
    };
    Section {
        title: format!(
            "Page load time by downlink rate, median ({tool}; RTT {} ms, uplink {} kbit/s)",
            config.rtt_ms, config.up_kbps
        ),
        csv: match tool {
            Browser::Chromium => "plt_chromium.csv",
            Browser::Loader => "plt_loader.csv",
        },
        table: t,
        note: format!(
            "Seed 004 Fig. 6: the accelerator shortens the page load \"by about a third\" \
             against SPDY. Target: accel-warm at least 33.3 % below h2 at every rate; \
             met at {meets} of {compared} rates.{left_out}"
        ),
    }
}

/// The x of a rate on the plots: log2 kbit/s.
fn x(rate: u64) -> f64 {
    (rate as f64).log2()
}

/// The accelerated variants' change against HTTP/2 per domain by rate.
fn reduction_plot(tool: Browser, variants: &[Variant], c: &Cells) -> Plot {
    let mut lines: Vec<Series> = [Variant::AccelWarm, Variant::AccelCold, Variant::AccelMeh]
        .into_iter()
        .enumerate()
        .filter(|(_, v)| variants.contains(v))
        .map(|(colour, v)| Series {
            name: format!("{v} vs h2"),
            points: c
                .rates
                .iter()
                .filter_map(|&r| Some((x(r), c.vs_h2(r, v)? * 100.0)))
                .collect(),
            mark: Mark::Line,
            colour,
        })
        .collect();
    lines.push(Series {
        name: "seed 004: about -33 %".into(),
        points: c.rates.iter().map(|&r| (x(r), -100.0 / 3.0)).collect(),
        mark: Mark::Points,
        colour: 3,
    });
    Plot {
        file: format!("reduction_{tool}.svg"),
        title: format!("Page load time through the accelerator against HTTP/2 per domain ({tool})"),
        x_label: "downlink, log2 kbit/s (7 = 128, 12 = 4096)".into(),
        y_label: "change of the median PLT, %".into(),
        series: lines,
    }
}

/// Every variant's median PLT by rate, like seed 004 Fig. 6.
fn plt_plot(tool: Browser, variants: &[Variant], c: &Cells) -> Plot {
    let series = variants
        .iter()
        .enumerate()
        .map(|(colour, v)| Series {
            name: v.to_string(),
            points: c
                .rates
                .iter()
                .filter_map(|&r| Some((x(r), c.median(r, *v)?)))
                .collect(),
            mark: Mark::Line,
            colour,
        })
        .collect();
    Plot {
        file: format!("plt_{tool}.svg"),
        title: format!("Page load time against downlink rate ({tool}), like seed 004 Fig. 6"),
        x_label: "downlink, log2 kbit/s (7 = 128, 12 = 4096)".into(),
        y_label: "page load time, s (median)".into(),
        series,
    }
}

/// The report: per browser (Chromium first), the rates table, its two
/// plots and, with several pages, the per-page table.
pub(super) fn report(
    config: &Config,
    runs: Vec<AccelRun>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let mut sections = Vec::new();
    let mut plots = Vec::new();
    let variants: Vec<Variant> = Variant::ALL
        .iter()
        .copied()
        .filter(|v| runs.iter().any(|r| r.variant == *v))
        .collect();
    for tool in [Browser::Chromium, Browser::Loader] {
        if !runs.iter().any(|r| r.tool == tool) {
            continue;
        }
        let cells = Cells::of(&runs, tool, &variants);
        sections.push(rates_table(config, tool, &variants, &cells));
        plots.push(reduction_plot(tool, &variants, &cells));
        plots.push(plt_plot(tool, &variants, &cells));
        if let Some(section) = per_page(&runs, tool, &variants) {
            sections.push(section);
        }
        if let Some(section) = paired(&runs, tool, &variants) {
            sections.push(section);
        }
    }
    SectionReport {
        name: "accel",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs }),
        extra: Vec::new(),
        folder,
    }
}

/// Every variant against HTTP/2 per domain, per downlink rate, from paired
/// loads (the same page and run index at the same rate): the median change
/// over pages with a bootstrap 95 % interval, the Wilcoxon signed-rank
/// p-value and the pairs won (`mewa_report::paired`); with Chromium, the
/// medians of the paint marks users watch beside them. Where peers ran
/// (`predictor`, `early-hints`, `h3`), the accelerator is also paired
/// against the best of them at that rate: the peer with the lowest median
/// over pages of its pages' median PLT, `h2` included.
fn paired(runs: &[AccelRun], tool: Browser, variants: &[Variant]) -> Option<Section> {
    if !variants.contains(&Variant::H2) {
        return None;
    }
    let mut t = Table::new(&[
        "downlink kbit/s",
        "variant vs baseline",
        "pages",
        "pairs won",
        "median PLT change % [95% CI]",
        "p (Wilcoxon)",
        "FCP s",
        "LCP s",
        "SI s",
        "objects came %",
    ]);
    let mut rates: Vec<u64> = runs.iter().map(|r| r.down_kbps).collect();
    rates.sort_unstable();
    rates.dedup();
    let mine = |rate: u64, v: Variant| -> Vec<&AccelRun> {
        runs.iter()
            .filter(|r| r.tool == tool && r.down_kbps == rate && r.variant == v)
            .collect()
    };
    let med = |v: &[&AccelRun], f: &dyn Fn(&crate::measured::Metrics) -> Option<f64>| {
        let x: Vec<f64> = v
            .iter()
            .filter_map(|r| r.metrics.as_ref())
            .filter_map(f)
            .collect();
        median(&x)
    };
    // `other` against `base` at `rate`, pairs by page and run.
    let row = |rate: u64, base: Variant, other_v: Variant, label: String| -> Option<Vec<String>> {
        let base = mine(rate, base);
        let other = mine(rate, other_v);
        let mut pages: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for a in &base {
            let b = other.iter().find(|b| b.page == a.page && b.run == a.run);
            if let (Some(x), Some(y)) = (a.plt_s, b.and_then(|b| b.plt_s)) {
                pages.entry(a.page.as_str()).or_default().push((x, y));
            }
        }
        let pages: Vec<(String, Vec<(f64, f64)>)> =
            pages.into_iter().map(|(p, v)| (p.to_owned(), v)).collect();
        let o = mewa_report::compare_pages(&pages, &Default::default()).overall?;
        Some(vec![
            rate.to_string(),
            label,
            o.pages.to_string(),
            format!("{}/{}", o.won, o.pairs),
            format!(
                "{:+.1} [{:+.1}, {:+.1}]",
                o.median_change * 100.0,
                o.ci.0 * 100.0,
                o.ci.1 * 100.0
            ),
            mewa_report::opt(o.p_value, 4),
            mewa_report::opt(med(&other, &|m| m.fcp_s), 2),
            mewa_report::opt(med(&other, &|m| m.lcp_s), 2),
            mewa_report::opt(med(&other, &|m| m.speed_index_s), 2),
            mewa_report::opt(
                med(&other, &|m| {
                    (m.objects > 0).then(|| m.objects_arrived as f64 / m.objects as f64 * 100.0)
                }),
                1,
            ),
        ])
    };
    let mut best_peers = Vec::new();
    for &rate in &rates {
        for &v in variants.iter().filter(|v| **v != Variant::H2) {
            if let Some(r) = row(rate, Variant::H2, v, format!("{v} vs h2")) {
                t.push(r);
            }
        }
        let Some(best) = best_peer(runs, tool, rate, variants) else {
            continue;
        };
        if best == Variant::H2 {
            continue;
        }
        best_peers.push(format!("{best} at {rate} kbit/s"));
        for v in [Variant::AccelWarm, Variant::AccelCold] {
            if !variants.contains(&v) {
                continue;
            }
            if let Some(r) = row(rate, best, v, format!("{v} vs {best} (best peer)")) {
                t.push(r);
            }
        }
    }
    let best = if best_peers.is_empty() {
        String::new()
    } else {
        format!(
            " The best peer (lowest median over pages): {}.",
            best_peers.join(", ")
        )
    };
    Some(Section {
        title: format!("Against HTTP/2 per domain and the best peer, paired ({tool})"),
        csv: match tool {
            Browser::Chromium => "paired_chromium.csv",
            Browser::Loader => "paired_loader.csv",
        },
        table: t,
        note: format!(
            "Pairs: the same page and run at the same rate. Over pages: the median of the \
             pages' median changes, a two-level bootstrap 95 % interval, the Wilcoxon \
             signed-rank p-value over the pages' medians.{best}"
        ),
    })
}

/// The peer (`h2` or what a browser and a CDN add to it) with the lowest
/// median over pages of its pages' median PLT at `rate`, among those that
/// ran; `None` when none did.
fn best_peer(runs: &[AccelRun], tool: Browser, rate: u64, variants: &[Variant]) -> Option<Variant> {
    let mut best: Option<(f64, Variant)> = None;
    for v in Variant::PEERS.into_iter().filter(|v| variants.contains(v)) {
        let mut pages: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in runs
            .iter()
            .filter(|r| r.tool == tool && r.down_kbps == rate && r.variant == v)
        {
            if let Some(p) = r.plt_s {
                pages.entry(r.page.as_str()).or_default().push(p);
            }
        }
        let medians: Vec<f64> = pages.values().filter_map(|x| median(x)).collect();
        if let Some(m) = median(&medians) {
            if best.is_none_or(|(b, _)| m < b) {
                best = Some((m, v));
            }
        }
    }
    best.map(|(_, v)| v)
}

/// With several pages (recordings), each page's median PLT per rate and
/// variant, and the warm accelerator against h2: which pages gain, and
/// which lose.
fn per_page(runs: &[AccelRun], tool: Browser, variants: &[Variant]) -> Option<Section> {
    let mut pages: Vec<&str> = runs
        .iter()
        .filter(|r| r.tool == tool)
        .map(|r| r.page.as_str())
        .collect();
    pages.sort_unstable();
    pages.dedup();
    if pages.len() < 2 {
        return None;
    }
    let mut cells: BTreeMap<(&str, u64, Variant), Vec<f64>> = BTreeMap::new();
    let mut failed: BTreeMap<(&str, u64, Variant), usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.tool == tool) {
        let key = (r.page.as_str(), r.down_kbps, r.variant);
        match r.plt_s {
            Some(p) => cells.entry(key).or_default().push(p),
            None => *failed.entry(key).or_default() += 1,
        }
    }
    let mut header = vec!["page".to_owned(), "downlink kbit/s".to_owned()];
    header.extend(variants.iter().map(|v| format!("{v} s")));
    header.push("warm vs h2".into());
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&header);
    let mut rates: Vec<u64> = runs.iter().map(|r| r.down_kbps).collect();
    rates.sort_unstable();
    rates.dedup();
    let (mut gained, mut compared) = (0, 0);
    for page in &pages {
        for &rate in &rates {
            let med = |v: Variant| cells.get(&(*page, rate, v)).and_then(|x| median(x));
            let mut row = vec![(*page).to_owned(), rate.to_string()];
            for v in variants {
                row.push(match (med(*v), failed.get(&(*page, rate, *v))) {
                    (Some(m), None) => format!("{m:.2}"),
                    (Some(m), Some(f)) => format!("{m:.2} ({f} failed)"),
                    (None, Some(f)) => format!("- ({f} failed)"),
                    (None, None) => "-".into(),
                });
            }
            let change = match (med(Variant::AccelWarm), med(Variant::H2)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
                _ => None,
            };
            if let Some(c) = change {
                compared += 1;
                if c < 0.0 {
                    gained += 1;
                }
            }
            row.push(change.map_or("-".into(), |c| format!("{:+.1} %", c * 100.0)));
            t.push(row);
        }
    }
    Some(Section {
        title: format!("Per page, median ({tool})"),
        csv: match tool {
            Browser::Chromium => "pages_chromium.csv",
            Browser::Loader => "pages_loader.csv",
        },
        table: t,
        note: format!("The warm accelerator is faster than HTTP/2 per domain for {gained} of {compared} pages and rates."),
    })
}
