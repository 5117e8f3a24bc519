//! Seed 002's page figures as tables and plots, each from the loads alone:
//! Fig. 6 (net transfer time against cubic), Figs. 7–8 (idle share,
//! concurrency), Figs. 9–10 (connection durations), Fig. 11 (first
//! objects per round trip) and the connection-size study.

use mewa_report::plot::{Mark, Series};
use mewa_report::table::{opt, pct};
use mewa_report::{quantile, Plot, Section, Table};

use super::groups::{against_cubic, group, median_of_pages};
use crate::experiment::Congestion;
use crate::fld::pages::config::{Config, PageType};
use crate::fld::pages::record::PageRun;

/// Fig. 6: page net transfer time per page type, each control against
/// cubic page by page (paired: the pages differ far more than the
/// controls do).
pub fn net_transfer_table(config: &Config, labels: &[String], runs: &[PageRun]) -> Section {
    let mut t = Table::new(&[
        "setting",
        "page type",
        "cc",
        "net transfer s (median of pages)",
        "load s (median of pages)",
        "change vs cubic, median of pages %",
        "pooled change %",
        "pages faster than cubic",
        "paired change % [95% CI], p, pairs won",
    ]);
    for s in labels {
        for &p in &config.protocols {
            for cc in &config.ccs {
                let g = group(runs, s, p, cc);
                let net = median_of_pages(&g, |r| r.net_transfer_s);
                let plt = median_of_pages(&g, |r| r.plt_s);
                let (change, pooled, faster, paired) = if *cc == Congestion::Cubic {
                    ("-".into(), "-".into(), "-".into(), "-".into())
                } else {
                    let c = against_cubic(runs, s, p, cc);
                    (
                        opt(c.median_change_pct, 1),
                        opt(c.pooled_change_pct, 1),
                        format!("{}/{}", c.faster, c.pages),
                        c.paired.map_or("-".into(), |o| {
                            format!(
                                "{:.1} [{:.1}, {:.1}], p {}, {}/{}",
                                -o.median_change * 100.0,
                                -o.ci.1 * 100.0,
                                -o.ci.0 * 100.0,
                                opt(o.p_value, 3),
                                o.won,
                                o.pairs
                            )
                        }),
                    )
                };
                t.push(vec![
                    s.clone(),
                    p.title().into(),
                    cc.to_string(),
                    opt(net, 3),
                    opt(plt, 3),
                    change,
                    pooled,
                    faster,
                    paired,
                ]);
            }
        }
    }
    Section {
        title: "Fig. 6: page net transfer time (load time minus idle time) per page type".into(),
        csv: "fig6-net-transfer.csv",
        table: t,
        note: "Seed 002 Fig. 6: FLD_TCP reduces the page net transfer time for all page types, \
               more on 3G than on LTE. Target: below cubic's for every page type on both settings. \
               Chromium rows compare the load time (first to last request event in its NetLog)."
            .into(),
    }
}

/// A figure of one figure per load, shown as quartiles and CDFs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerLoad {
    /// Fig. 7: the idle share of the load.
    IdleShare,
    /// Fig. 8: the effective concurrency.
    Concurrency,
}

impl PerLoad {
    fn fig(self) -> u8 {
        match self {
            PerLoad::IdleShare => 7,
            PerLoad::Concurrency => 8,
        }
    }

    fn what(self) -> &'static str {
        match self {
            PerLoad::IdleShare => "idle share of the load",
            PerLoad::Concurrency => "effective concurrency",
        }
    }

    fn file(self) -> &'static str {
        match self {
            PerLoad::IdleShare => "fig7-idle-share",
            PerLoad::Concurrency => "fig8-concurrency",
        }
    }

    fn of(self, r: &PageRun) -> Option<f64> {
        match self {
            PerLoad::IdleShare => r.idle_share,
            PerLoad::Concurrency => r.effective_concurrency,
        }
    }

    /// The values of the loads of one setting label, page type and control.
    fn values(self, runs: &[PageRun], s: &str, p: PageType, cc: &Congestion) -> Vec<f64> {
        group(runs, s, p, cc)
            .iter()
            .filter_map(|r| self.of(r))
            .collect()
    }
}

/// Figs. 7 and 8: the quartiles of `fig` per setting, loader type and
/// control.
pub fn per_load_table(
    fig: PerLoad,
    config: &Config,
    labels: &[String],
    runs: &[PageRun],
) -> Section {
    let mut t = Table::new(&[
        "setting",
        "page type",
        "cc",
        "p25",
        "median",
        "p75",
        "loads",
    ]);
    for s in labels {
        for p in loader_types(config) {
            for cc in &config.ccs {
                let v = fig.values(runs, s, p, cc);
                t.push(vec![
                    s.clone(),
                    p.title().into(),
                    cc.to_string(),
                    opt(quantile(&v, 0.25), 3),
                    opt(quantile(&v, 0.5), 3),
                    opt(quantile(&v, 0.75), 3),
                    v.len().to_string(),
                ]);
            }
        }
    }
    let (csv, note) = match fig {
        PerLoad::IdleShare => (
            "fig7-idle-share.csv",
            "Seed 002 Fig. 7: the median page is idle about 50 % of its load; FLD_TCP raises the idle share (it finishes transfers sooner).",
        ),
        PerLoad::Concurrency => (
            "fig8-concurrency.csv",
            "Seed 002 Fig. 8: most pages below a concurrency of 2; FLD_TCP lowers it.",
        ),
    };
    Section {
        title: format!("Fig. {}: {}", fig.fig(), fig.what()),
        csv,
        table: t,
        note: note.into(),
    }
}

/// Figs. 7 and 8: the CDF of `fig` for one setting label and page type, a
/// line per control.
pub fn per_load_plot(
    fig: PerLoad,
    config: &Config,
    s: &str,
    p: PageType,
    runs: &[PageRun],
) -> Plot {
    let series = config
        .ccs
        .iter()
        .enumerate()
        .map(|(i, cc)| mewa_report::cdf_series(cc.name(), &fig.values(runs, s, p, cc), i))
        .collect();
    Plot {
        file: format!("{}-{s}-{p}.svg", fig.file()),
        title: format!("Fig. {}: {}, {s}, {}", fig.fig(), fig.what(), p.title()),
        x_label: fig.what().into(),
        y_label: "CDF of loads".into(),
        series,
    }
}

/// Every connection's duration in the loads of one group, s.
fn durations(runs: &[PageRun], s: &str, p: PageType, cc: &Congestion) -> Vec<f64> {
    group(runs, s, p, cc)
        .iter()
        .flat_map(|r| r.connection_s.iter().copied())
        .collect()
}

/// Figs. 9–10: connection durations (h1 = unencrypted, h2 = encrypted
/// HTTP/2), quantiles per setting, loader type and control.
pub fn durations_table(config: &Config, labels: &[String], runs: &[PageRun]) -> Section {
    let mut t = Table::new(&[
        "setting",
        "connections",
        "cc",
        "p25 s",
        "median s",
        "p75 s",
        "p90 s",
        "count",
    ]);
    for s in labels {
        for p in loader_types(config) {
            for cc in &config.ccs {
                let v = durations(runs, s, p, cc);
                t.push(vec![
                    s.clone(),
                    p.title().into(),
                    cc.to_string(),
                    opt(quantile(&v, 0.25), 3),
                    opt(quantile(&v, 0.5), 3),
                    opt(quantile(&v, 0.75), 3),
                    opt(quantile(&v, 0.9), 3),
                    v.len().to_string(),
                ]);
            }
        }
    }
    Section {
        title: "Figs. 9-10: connection duration".into(),
        csv: "fig9-10-connection-duration.csv",
        table: t,
        note:
            "Seed 002 Figs. 9-10: FLD_TCP shortens encrypted, unencrypted and HTTP/2 connections."
                .into(),
    }
}

/// Figs. 9–10: the CDF of connection durations for one setting label and
/// page type, a line per control.
pub fn durations_plot(config: &Config, s: &str, p: PageType, runs: &[PageRun]) -> Plot {
    let series = config
        .ccs
        .iter()
        .enumerate()
        .map(|(i, cc)| mewa_report::cdf_series(cc.name(), &durations(runs, s, p, cc), i))
        .collect();
    Plot {
        file: format!("fig9-10-connection-duration-{s}-{p}.svg"),
        title: format!("Figs. 9-10: connection duration, {s}, {}", p.title()),
        x_label: "connection duration (s)".into(),
        y_label: "CDF of connections".into(),
        series,
    }
}

/// Fig. 11 for one setting label and control: the most bytes a
/// connection's first object received in each round trip, over every load.
fn most_per_round(runs: &[PageRun], s: &str, cc: &Congestion) -> Vec<u64> {
    let mut most: Vec<u64> = Vec::new();
    for r in runs.iter().filter(|r| r.setting == s && r.cc == *cc) {
        for (k, &b) in r.first_object_bins.iter().enumerate() {
            if most.len() <= k {
                most.resize(k + 1, 0);
            }
            most[k] = most[k].max(b);
        }
    }
    most
}

/// Fig. 11: most bytes of a first object in each of the first five round
/// trips, per setting and control.
pub fn rtt_bins_table(config: &Config, labels: &[String], runs: &[PageRun]) -> Section {
    let mut t = Table::new(&[
        "setting", "cc", "RTT 1 kB", "RTT 2 kB", "RTT 3 kB", "RTT 4 kB", "RTT 5 kB",
    ]);
    for s in labels {
        for cc in &config.ccs {
            let most = most_per_round(runs, s, cc);
            let mut row = vec![s.clone(), cc.to_string()];
            row.extend((0..5).map(|k| {
                most.get(k)
                    .map_or_else(|| "-".into(), |b| format!("{:.1}", *b as f64 / 1e3))
            }));
            t.push(row);
        }
    }
    Section {
        title: "Fig. 11: most bytes a connection's first object received in each RTT bin".into(),
        csv: "fig11-rtt-bins.csv",
        table: t,
        note: "Seed 002 Fig. 11: 14 kB in the first RTT for both; then Cubic's window doubles and \
               FLD_TCP's triples. Here a round trip is each connection's own handshake time \
               (queueing included), counted from the first byte of its first object; the most \
               over every load of the setting."
            .into(),
    }
}

/// Fig. 11 for one setting label: the first ten round trips, a line per
/// control.
pub fn rtt_bins_plot(config: &Config, s: &str, runs: &[PageRun]) -> Plot {
    let series = config
        .ccs
        .iter()
        .enumerate()
        .map(|(i, cc)| Series {
            name: cc.to_string(),
            points: most_per_round(runs, s, cc)
                .iter()
                .take(10)
                .enumerate()
                .map(|(k, &b)| ((k + 1) as f64, b as f64 / 1e3))
                .collect(),
            mark: Mark::Line,
            colour: i,
        })
        .collect();
    Plot {
        file: format!("fig11-rtt-bins-{s}.svg"),
        title: format!("Fig. 11: most bytes of a connection's first object per RTT bin, {s}"),
        x_label: "RTT bin".into(),
        y_label: "kB".into(),
        series,
    }
}

/// The connection-size study: the share of the cubic loads' connections
/// under 50 kB and 500 kB.
pub fn sizes_table(config: &Config, labels: &[String], runs: &[PageRun]) -> Section {
    let mut t = Table::new(&["setting", "page type", "connections", "< 50 kB", "< 500 kB"]);
    for s in labels {
        for p in loader_types(config) {
            let sizes: Vec<u64> = group(runs, s, p, &Congestion::Cubic)
                .iter()
                .flat_map(|r| r.connection_bytes.iter().copied())
                .collect();
            let share = |lim: u64| {
                if sizes.is_empty() {
                    "-".into()
                } else {
                    pct(100.0 * sizes.iter().filter(|&&b| b < lim).count() as f64
                        / sizes.len() as f64)
                }
            };
            t.push(vec![
                s.clone(),
                p.title().into(),
                sizes.len().to_string(),
                share(50_000),
                share(500_000),
            ]);
        }
    }
    Section {
        title: "Connection sizes (the cubic loads)".into(),
        csv: "connection-sizes.csv",
        table: t,
        note: "Seed 002 §3.1 (Alexa 100 and HTTP Archive): almost 85 % of connections carry less than \
               50 kB and 99 % less than 500 kB."
            .into(),
    }
}

/// The loader's page types (Chromium gives no per-object timing).
pub fn loader_types(config: &Config) -> impl Iterator<Item = PageType> + '_ {
    config
        .protocols
        .iter()
        .copied()
        .filter(|p| p.loader().is_some())
}
