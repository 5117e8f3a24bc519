//! Seed 003's Table 2 beside ours: Reno and Cubic × HTTP/1.1 and HTTP/2,
//! on 3G over the run's first network.

use mewa_loader::record::Protocol;
use mewa_report::table::opt;
use mewa_report::{mean, Section, Table};

use super::super::config::Config;
use super::super::record::CellRun;
use super::super::setting::{Knob, Setting};
use super::select::{headline_radio, label, max, Cell};
use crate::experiment::Browser;

/// Seed 003 Table 2, "Comparison of HTTP and SPDY with different TCP
/// variants" (3G): per row, Reno HTTP, Reno SPDY, Cubic HTTP, Cubic SPDY.
pub const TABLE2: [(&str, [f64; 4]); 5] = [
    (
        "Avg. Page Load (msec)",
        [9690.84, 9899.95, 9352.58, 8671.09],
    ),
    ("Avg. Throughput (KBps)", [121.88, 119.55, 115.36, 129.79]),
    ("Max. Throughput (KBps)", [1024.74, 528.88, 889.33, 876.98]),
    ("Avg. cwnd (# segments)", [10.45, 24.16, 10.59, 52.11]),
    ("Max. cwnd (# segments)", [22.0, 48.0, 22.0, 197.0]),
];

/// The table: a block of [`TABLE2`]'s rows per browser, each of our
/// figures beside the paper's.
pub fn table2(config: &Config, runs: &[CellRun], browsers: &[Browser], names: &str) -> Section {
    let radio = headline_radio(config);
    let network = config.networks.first().copied();
    let columns = [
        (Setting::single(Knob::Reno), Protocol::H1),
        (Setting::single(Knob::Reno), Protocol::H2),
        (Setting::base(), Protocol::H1),
        (Setting::base(), Protocol::H2),
    ];
    let mut t2 = Table::new(&[
        "browser",
        "",
        "Reno HTTP/1.1",
        "(paper: HTTP)",
        "Reno HTTP/2",
        "(paper: SPDY)",
        "Cubic HTTP/1.1",
        "(paper: HTTP)",
        "Cubic HTTP/2",
        "(paper: SPDY)",
    ]);
    for &browser in browsers {
        for (row, (what, paper)) in TABLE2.iter().enumerate() {
            let mut line = vec![label(browser).to_string(), what.to_string()];
            for (c, (setting, protocol)) in columns.iter().enumerate() {
                let loads: Vec<&CellRun> = match (radio, network) {
                    (Some(radio), Some(network)) => Cell {
                        browser,
                        radio,
                        network,
                        protocol: *protocol,
                    }
                    .loads(runs, setting),
                    _ => Vec::new(),
                };
                let v = figure(row, &loads);
                line.push(opt(v, if row >= 3 { 1 } else { 0 }));
                line.push(format!("{}", paper[c]));
            }
            t2.push(line);
        }
    }
    let name = |n: Option<String>| n.unwrap_or_default();
    Section {
        title: format!(
            "Seed 003 Table 2 beside ours ({names}; {}, {} rates, server Reno or Cubic)",
            name(radio.map(|r| r.to_string())),
            name(network.map(|n| n.to_string())),
        ),
        csv: "table2.csv",
        table: t2,
        note: "Averages over every load of the setting (page load: the loader's last object done, \
               Chromium's own onload time, loadEventEnd of Navigation Timing; throughput: \
               the bytes the link delivered downstream over the load time; max throughput: the best \
               whole second of any load; cwnd: the server's, sampled from TCP_INFO, time-weighted \
               per socket that sent). The paper's numbers are from a production 3G network with \
               real sites (seed 003 Table 2); ours from the emulated radio and the corpus pages, \
               so compare the pattern across the columns, not the magnitudes."
            .into(),
    }
}

/// [`TABLE2`]'s row `row` over `loads` (those that finished count).
fn figure(row: usize, loads: &[&CellRun]) -> Option<f64> {
    let rs: Vec<&&CellRun> = loads.iter().filter(|r| r.plt_s.is_some()).collect();
    match row {
        0 => mean(
            &rs.iter()
                .filter_map(|r| r.plt_s.map(|s| s * 1000.0))
                .collect::<Vec<_>>(),
        ),
        1 => mean(&rs.iter().filter_map(|r| r.avg_kbps).collect::<Vec<_>>()),
        2 => max(&rs.iter().filter_map(|r| r.max_kbps).collect::<Vec<_>>()),
        3 => mean(&rs.iter().filter_map(|r| r.cwnd_avg).collect::<Vec<_>>()),
        _ => max(&rs
            .iter()
            .filter_map(|r| r.cwnd_max.map(f64::from))
            .collect::<Vec<_>>()),
    }
}
