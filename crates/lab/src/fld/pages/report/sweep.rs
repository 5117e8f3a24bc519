//! The queue sweep: when a run loads each setting at several bottleneck
//! queues, each control's change against cubic (Fig. 6's comparison) at
//! each queue, as a table and a plot per setting.

use mewa_report::plot::{Mark, Series};
use mewa_report::table::opt;
use mewa_report::{Plot, Section, Table};

use super::groups::{against_cubic, Compared};
use crate::experiment::Congestion;
use crate::fld::pages::config::{Config, PageType, Setting};
use crate::fld::pages::record::PageRun;

/// Each queue of `setting` with `cc`'s comparison with cubic there.
fn by_queue(
    config: &Config,
    setting: Setting,
    kind: PageType,
    cc: &Congestion,
    runs: &[PageRun],
) -> Vec<(u64, Compared)> {
    config
        .cells()
        .into_iter()
        .filter(|c| c.setting == setting)
        .map(|c| (c.queue_ms, against_cubic(runs, &c.label, kind, cc)))
        .collect()
}

/// The controls compared with cubic.
fn challengers(config: &Config) -> impl Iterator<Item = &Congestion> {
    config.ccs.iter().filter(|c| **c != Congestion::Cubic)
}

/// The sweep's table: a row per setting, queue, page type and control.
pub fn sweep_table(config: &Config, runs: &[PageRun]) -> Section {
    let mut t = Table::new(&[
        "setting",
        "queue ms",
        "page type",
        "cc",
        "change vs cubic, median of pages %",
        "pooled change %",
        "pages faster than cubic",
    ]);
    for &setting in &config.settings {
        for &p in &config.protocols {
            for cc in challengers(config) {
                for (q, c) in by_queue(config, setting, p, cc, runs) {
                    t.push(vec![
                        setting.to_string(),
                        q.to_string(),
                        p.title().into(),
                        cc.to_string(),
                        opt(c.median_change_pct, 1),
                        opt(c.pooled_change_pct, 1),
                        format!("{}/{}", c.faster, c.pages),
                    ]);
                }
            }
        }
    }
    Section {
        title: "The queue sweep: each control against cubic by bottleneck queue".into(),
        csv: "queue-sweep.csv",
        table: t,
        note: "Fig. 6's comparison (the median over pages of each page's change against cubic; \
               + is faster) for each bottleneck queue, in ms at the setting's capacity. Seed \
               002 does not give its emulator's queue; the background flows keep whatever \
               queue there is full, so its depth decides how much of FLD_TCP's faster growth \
               turns into losses."
            .into(),
    }
}

/// The sweep's plot for `setting`: a line per page type and control.
pub fn sweep_plot(config: &Config, setting: Setting, runs: &[PageRun]) -> Plot {
    let mut series = Vec::new();
    for &p in &config.protocols {
        for cc in challengers(config) {
            let points = by_queue(config, setting, p, cc, runs)
                .into_iter()
                .filter_map(|(q, c)| c.median_change_pct.map(|m| (q as f64, m)))
                .collect();
            series.push(Series {
                name: format!("{} {cc}", p.title()),
                points,
                mark: Mark::Line,
                colour: series.len(),
            });
        }
    }
    Plot {
        file: format!("queue-sweep-{setting}.svg"),
        title: format!("FLD_TCP against cubic by bottleneck queue, {setting}"),
        x_label: "queue (ms at capacity)".into(),
        y_label: "change vs cubic, median of pages (%; + is faster)".into(),
        series,
    }
}
