//! `mewa lab cellular`'s tables and plots: seed 003's Table 2 beside ours,
//! each knob against the base, the fix's effect, and the congestion window
//! around a promotion.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{browser_label, CellRun, CellularConfig, LoadTrace};
use crate::experiment::ExperimentError;
use mewa_report::plot::{Mark, Series};
use mewa_report::table::{opt, pct};
use mewa_report::ResultFolder;
use mewa_report::Table;
use mewa_report::{mean, median};
use mewa_report::{Plot, Section, SectionReport};

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

/// What `result.json` holds, to rebuild the report.
#[derive(Debug, Serialize, Deserialize)]
struct CellularResult {
    runs: Vec<CellRun>,
    traces: Vec<LoadTrace>,
}

/// The report of an earlier run, from its result folder.
pub fn report_again(dir: &Path) -> Result<SectionReport, ExperimentError> {
    let config: CellularConfig = mewa_report::read_config(&dir.join("config.json"))?;
    let result: CellularResult = mewa_report::read_config(&dir.join("result.json"))?;
    let folder = ResultFolder::existing(dir)?;
    Ok(report(&config, result.runs, result.traces, Some(folder)))
}

fn max(v: &[f64]) -> Option<f64> {
    v.iter()
        .copied()
        .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
}

/// A run's spurious retransmissions on the wire, both directions, SYNs
/// included.
fn spurious(r: &CellRun) -> u32 {
    r.wire_down.spurious + r.wire_up.spurious + r.wire_down.spurious_syn + r.wire_up.spurious_syn
}

/// Loads that began with the radio asleep on connections kept from an
/// earlier load: where a promotion meets TCP's old RTT estimate.
/// `new` against `base` in per cent (+: larger), if `base` is positive.
fn change_pct(base: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (base, new) {
        (Some(b), Some(n)) if b > 0.0 => Some((n / b - 1.0) * 100.0),
        _ => None,
    }
}

fn after_promotion(r: &CellRun) -> bool {
    r.seq > 0 && r.promotions > 0
}

/// The loads of one browser, radio, network, protocol and setting.
fn cell_runs<'a>(
    runs: &'a [CellRun],
    [browser, radio, network, protocol, setting]: [&str; 5],
) -> Vec<&'a CellRun> {
    runs.iter()
        .filter(|x| {
            x.browser == browser
                && x.radio == radio
                && x.network == network
                && x.protocol == protocol
                && x.setting == setting
        })
        .collect()
}

/// The browsers of `runs` (the loader first), or the configured one when
/// there are none: each table has a block per browser, since their page
/// load times measure different ends (last object, onload).
fn browsers(config: &CellularConfig, runs: &[CellRun]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in runs {
        if !v.contains(&r.browser) {
            v.push(r.browser.clone());
        }
    }
    if v.is_empty() {
        v.push(config.browser.clone());
    }
    v.sort_by_key(|b| (b != super::LOADER, b.clone()));
    v
}

/// Every browser × radio × network × protocol of a report, in order.
fn grid<'a>(
    browsers: &'a [String],
    config: &'a CellularConfig,
) -> impl Iterator<Item = (&'a String, &'a String, &'a String, &'a String)> {
    browsers.iter().flat_map(move |b| {
        config.radios.iter().flat_map(move |r| {
            config
                .networks
                .iter()
                .flat_map(move |n| config.protocols.iter().map(move |p| (b, r, n, p)))
        })
    })
}

/// One line per server socket of a [`LoadTrace`] field.
fn per_socket(what: &str, sockets: &[Vec<(f64, u32)>]) -> Vec<Series> {
    sockets
        .iter()
        .enumerate()
        .map(|(i, pts)| Series {
            name: format!("{what}, server socket {}", i + 1),
            points: pts.iter().map(|&(s, c)| (s, f64::from(c))).collect(),
            mark: Mark::Line,
            colour: i % 6,
        })
        .collect()
}

/// Builds the report.
pub fn report(
    config: &CellularConfig,
    runs: Vec<CellRun>,
    traces: Vec<LoadTrace>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let mut sections = Vec::new();
    let browsers = browsers(config, &runs);
    let names = browsers
        .iter()
        .map(|b| browser_label(b))
        .collect::<Vec<_>>()
        .join(", ");

    // Every load.
    let mut all = Table::new(&[
        "browser",
        "radio",
        "network",
        "setting",
        "protocol",
        "page",
        "seq",
        "radio at start",
        "promotions",
        "PLT s",
        "KB/s avg",
        "KB/s max",
        "cwnd avg",
        "cwnd max",
        "srv timeouts",
        "srv spurious RTOs",
        "cli timeouts",
        "TLPs",
        "wire spurious down",
        "wire spurious up",
        "wire genuine",
        "new conns",
        "reused conns",
        "handshakes on wire",
        "failed",
    ]);
    for r in &runs {
        all.push(vec![
            browser_label(&r.browser).to_string(),
            r.radio.clone(),
            r.network.clone(),
            r.setting.clone(),
            r.protocol.clone(),
            r.page.clone(),
            r.seq.to_string(),
            r.radio_state.clone(),
            r.promotions.to_string(),
            opt(r.plt_s, 3),
            opt(r.avg_kbps, 1),
            opt(r.max_kbps, 1),
            opt(r.cwnd_avg, 1),
            r.cwnd_max.map_or("-".into(), |c| c.to_string()),
            r.server.timeouts.to_string(),
            r.server.spurious_rtos.to_string(),
            r.client.timeouts.to_string(),
            (r.server.loss_probes + r.client.loss_probes).to_string(),
            (r.wire_down.spurious + r.wire_down.spurious_syn).to_string(),
            (r.wire_up.spurious + r.wire_up.spurious_syn).to_string(),
            (r.wire_down.genuine + r.wire_up.genuine).to_string(),
            r.new_connections.to_string(),
            r.reused_connections.to_string(),
            r.handshakes.to_string(),
            r.failed.to_string(),
        ]);
    }

    // Table 2: Reno/Cubic × HTTP/1.1 / HTTP/2, on 3G (the first network).
    let radio = if config.radios.iter().any(|r| r == "3g") {
        "3g".to_string()
    } else {
        config.radios.first().cloned().unwrap_or_default()
    };
    let network = config.networks.first().cloned().unwrap_or_default();
    let cell = |browser: &str, setting: &str, proto: &str| -> Vec<&CellRun> {
        let mut loads = cell_runs(&runs, [browser, &radio, &network, proto, setting]);
        loads.retain(|r| r.plt_s.is_some());
        loads
    };
    let columns = [
        ("reno", "h1"),
        ("reno", "h2"),
        ("base", "h1"),
        ("base", "h2"),
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
    for (browser, (row, (label, paper))) in browsers
        .iter()
        .flat_map(|b| TABLE2.iter().enumerate().map(move |t| (b, t)))
    {
        let mut line = vec![browser_label(browser).to_string(), label.to_string()];
        for (c, (setting, proto)) in columns.iter().enumerate() {
            let rs = cell(browser, setting, proto);
            let v = match row {
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
            };
            line.push(opt(v, if row >= 3 { 1 } else { 0 }));
            line.push(format!("{}", paper[c]));
        }
        t2.push(line);
    }
    sections.push(Section {
        title: format!(
            "Seed 003 Table 2 beside ours ({names}; {radio}, {network} rates, server Reno or Cubic)"
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
    });

    // Each knob against the base.
    let mut knobs = Table::new(&[
        "browser",
        "radio",
        "network",
        "protocol",
        "setting",
        "loads",
        "median PLT s",
        "mean PLT s",
        "median vs base %",
        "spurious rexmits/load",
        "timeouts/load",
        "F-RTO spurious/load",
        "TLPs/load",
        "genuine rexmits/load",
        "cwnd avg",
    ]);
    for (b, r, n, p) in grid(&browsers, config) {
        let of = |s: &str| cell_runs(&runs, [b, r, n, p, s]);
        let plts = |v: &[&CellRun]| v.iter().filter_map(|x| x.plt_s).collect::<Vec<_>>();
        let base = median(&plts(&of("base")));
        for s in &config.settings {
            let v = of(s);
            if v.is_empty() {
                continue;
            }
            let med = median(&plts(&v));
            let per =
                |f: &dyn Fn(&CellRun) -> f64| v.iter().map(|x| f(x)).sum::<f64>() / v.len() as f64;
            knobs.push(vec![
                browser_label(b).to_string(),
                r.clone(),
                n.clone(),
                p.clone(),
                s.clone(),
                v.len().to_string(),
                opt(med, 3),
                opt(mean(&plts(&v)), 3),
                match change_pct(base, med) {
                    Some(c) if s != "base" => pct(c),
                    _ => "-".into(),
                },
                format!("{:.2}", per(&|x| f64::from(spurious(x)))),
                format!(
                    "{:.2}",
                    per(&|x| (x.server.timeouts + x.client.timeouts) as f64)
                ),
                format!(
                    "{:.2}",
                    per(&|x| (x.server.spurious_rtos + x.client.spurious_rtos) as f64)
                ),
                format!(
                    "{:.2}",
                    per(&|x| (x.server.loss_probes + x.client.loss_probes) as f64)
                ),
                format!(
                    "{:.2}",
                    per(&|x| f64::from(x.wire_down.genuine + x.wire_up.genuine))
                ),
                opt(
                    mean(&v.iter().filter_map(|x| x.cwnd_avg).collect::<Vec<_>>()),
                    1,
                ),
            ]);
        }
    }
    sections.push(Section {
        title: format!("Each knob against the base (Linux defaults: cubic, slow start after idle, metrics cache; {names})"),
        csv: "knobs.csv",
        table: knobs,
        note: "Seed 003: disabling the metrics cache gave about 35 % shorter loads at the median \
               (§6.2.4); Reno and Cubic differ little, SPDY with Reno worst (§6.2.3). Spurious \
               retransmissions are those the link delivered twice (both directions, SYNs \
               included); timeouts and F-RTO's spurious verdicts are both ends' kernel counters."
            .into(),
    });

    // The fix.
    let mut fix = Table::new(&[
        "browser",
        "radio",
        "network",
        "protocol",
        "settings",
        "loads after a promotion",
        "spurious (base)",
        "spurious (fix)",
        "fewer %",
        "timeouts (base)",
        "timeouts (fix)",
        "timeouts fewer %",
        "TLPs (base)",
        "TLPs (fix)",
        "genuine (base / fix)",
        "median PLT s (base)",
        "median PLT s (fix)",
        "PLT change %",
        "paired loads",
        "paired change %",
    ]);
    // Each setting with the fix against the same knobs without it
    // (`rto-floor` against `base`, `frto-off+rto-floor` against
    // `frto-off`), where the run has both.
    let knobs_of: Vec<(&String, super::Knobs)> = config
        .settings
        .iter()
        .filter_map(|s| Some((s, super::Knobs::by_name(s)?)))
        .collect();
    let pairs: Vec<(&String, &String)> = knobs_of
        .iter()
        .flat_map(|(with, w)| {
            knobs_of
                .iter()
                .filter(|(_, k)| k.is_without_fix_of(w))
                .map(|(without, _)| (*without, *with))
        })
        .collect();
    for &(without, with) in &pairs {
        for (browser, r, n, p) in grid(&browsers, config) {
            let of = |s: &str| -> Vec<&CellRun> {
                let mut v = cell_runs(&runs, [browser, r, n, p, s]);
                v.retain(|x| after_promotion(x));
                v
            };
            let (b, f) = (of(without), of(with));
            if b.is_empty() || f.is_empty() {
                continue;
            }
            let sp = |v: &[&CellRun]| v.iter().map(|x| spurious(x)).sum::<u32>();
            let to = |v: &[&CellRun]| {
                v.iter()
                    .map(|x| x.server.timeouts + x.client.timeouts)
                    .sum::<u64>()
            };
            let tlp = |v: &[&CellRun]| {
                v.iter()
                    .map(|x| x.server.loss_probes + x.client.loss_probes)
                    .sum::<u64>()
            };
            let genuine = |v: &[&CellRun]| {
                v.iter()
                    .map(|x| x.wire_down.genuine + x.wire_up.genuine)
                    .sum::<u32>()
            };
            let med =
                |v: &[&CellRun]| median(&v.iter().filter_map(|x| x.plt_s).collect::<Vec<_>>());
            let (mb, mf) = (med(&b), med(&f));
            // The medians above compare whichever loads woke the radio in
            // each setting, which on a corpus of unlike pages can be
            // different pages; the paired change compares each page's
            // same load in both settings.
            let paired: Vec<f64> = b
                .iter()
                .filter_map(|x| {
                    let y = f.iter().find(|y| y.page == x.page && y.seq == x.seq)?;
                    change_pct(x.plt_s, y.plt_s)
                })
                .collect();
            fix.push(vec![
                browser_label(browser).to_string(),
                r.clone(),
                n.clone(),
                p.clone(),
                format!("{without} → {with}"),
                format!("{} / {}", b.len(), f.len()),
                sp(&b).to_string(),
                sp(&f).to_string(),
                if sp(&b) > 0 {
                    pct((1.0 - f64::from(sp(&f)) / f64::from(sp(&b))) * 100.0)
                } else {
                    "-".into()
                },
                to(&b).to_string(),
                to(&f).to_string(),
                if to(&b) > 0 {
                    pct((1.0 - to(&f) as f64 / to(&b) as f64) * 100.0)
                } else {
                    "-".into()
                },
                tlp(&b).to_string(),
                tlp(&f).to_string(),
                format!("{} / {}", genuine(&b), genuine(&f)),
                opt(mb, 3),
                opt(mf, 3),
                change_pct(mb, mf).map_or_else(|| "-".into(), pct),
                paired.len().to_string(),
                median(&paired).map_or_else(|| "-".into(), pct),
            ]);
        }
    }
    sections.push(Section {
        title: format!("The fix: an RTO floor over the radio, on loads that began with a promotion ({names})"),
        csv: "fix.csv",
        table: fix,
        note: "Loads after the session's first whose start woke the radio (promotions > 0), with \
               and without the fix, for each setting the run has both ways (settings: base → \
               rto-floor, frto-off+ts-off → frto-off+ts-off+rto-floor, ...; rto-floor: the \
               routes over the radio carry rto_min = \
               promotion + 200 ms, and mewa_rto gives handshakes promotion + 1 s; docs/LAB.md says \
               why a route and not TCP_BPF_RTO_MIN). Spurious: retransmissions the link delivered \
               twice, both ends, handshakes included; timeouts: both ends' kernel RTOs (TCPTimeouts, \
               SYN timeouts included) — where the link lost nothing (genuine 0), every one of them \
               was spurious; TLPs: tail loss probes, which keep their own clock (2 srtt). Paired: \
               the loads of the same page at the same place in the session that woke the radio \
               in both settings, and the median of their PLT changes. Target \
               (issue 22): at least 90 % fewer spurious timeouts after promotion, and a lower \
               median PLT for HTTP/2 on 3G."
            .into(),
    });
    sections.push(Section {
        title: "Every load".into(),
        csv: "runs.csv",
        table: all,
        note: String::new(),
    });

    // The window around a promotion: the first such load of 3G h2, in
    // each setting compared in the fix table, without the fix and with it.
    let mut plots = Vec::new();
    let mut shown: Vec<&str> = vec!["base", "rto-floor"];
    for &(without, with) in &pairs {
        for s in [without.as_str(), with.as_str()] {
            if !shown.contains(&s) {
                shown.push(s);
            }
        }
    }
    for setting in shown {
        let Some(t) = traces
            .iter()
            .find(|t| t.setting == setting && t.protocol == "h2" && t.radio == radio)
            .or_else(|| {
                traces
                    .iter()
                    .find(|t| t.setting == setting && t.radio == radio)
            })
        else {
            continue;
        };
        let mut series = per_socket("cwnd", &t.cwnd);
        for (spur, name, colour) in [
            (true, "spurious retransmission", 7),
            (false, "genuine retransmission", 8),
        ] {
            let pts: Vec<(f64, f64)> = t
                .retransmissions
                .iter()
                .filter(|(_, s)| *s == spur)
                .map(|&(x, _)| (x, 0.0))
                .collect();
            if !pts.is_empty() {
                series.push(Series {
                    name: name.into(),
                    points: pts,
                    mark: Mark::Points,
                    colour,
                });
            }
        }
        plots.push(Plot {
            file: format!("rto-{setting}.svg"),
            title: format!(
                "{} {} {} {}: server RTO after a promotion (TCP_INFO)",
                browser_label(&t.browser),
                t.radio,
                t.protocol,
                setting
            ),
            x_label: "s since the load began".into(),
            y_label: "ms".into(),
            series: per_socket("RTO", &t.rto),
        });
        plots.push(Plot {
            file: format!("cwnd-{setting}.svg"),
            title: format!(
                "{} {} {} {}: server cwnd after a promotion (radio {} at start, load {})",
                browser_label(&t.browser),
                t.radio,
                t.protocol,
                setting,
                t.radio_state,
                t.seq
            ),
            x_label: "s since the load began".into(),
            y_label: "segments".into(),
            series,
        });
    }

    SectionReport {
        name: "cellular",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs, "traces": traces }),
        extra: Vec::new(),
        folder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load as an older `runs.jsonl` line has it: no `browser`, no
    /// `handshakes`.
    fn old_line(setting: &str, protocol: &str, plt: f64) -> serde_json::Value {
        serde_json::json!({
            "radio": "3g", "network": "fixed", "setting": setting, "protocol": protocol,
            "page": "p", "seq": 0, "radio_state": "umts_idle", "promotions": 1,
            "plt_s": plt, "failed": 0, "new_connections": 1, "reused_connections": 0,
            "start_unix_us": 0, "down_bytes": 0, "avg_kbps": null, "max_kbps": null,
            "cwnd_avg": null, "cwnd_max": null, "server": {}, "client": {},
            "wire_down": {"spurious": 0, "genuine": 0, "partial": 0, "spurious_syn": 0},
            "wire_up": {"spurious": 0, "genuine": 0, "partial": 0, "spurious_syn": 0}
        })
    }

    #[test]
    fn old_runs_read_as_the_loaders_and_each_browser_has_its_own_rows() {
        let old: CellRun = serde_json::from_value(old_line("base", "h2", 2.0)).unwrap();
        assert_eq!((old.browser.as_str(), old.handshakes), ("loader", 0));
        let mut chromium: CellRun = serde_json::from_value(old_line("base", "h2", 3.0)).unwrap();
        chromium.browser = super::super::CHROMIUM.into();
        let config = CellularConfig {
            radios: vec!["3g".into()],
            settings: vec!["base".into()],
            protocols: vec!["h2".into()],
            ..CellularConfig::default()
        };
        let r = report(&config, vec![chromium, old], Vec::new(), None);
        let table = |csv: &str| &r.sections.iter().find(|s| s.csv == csv).unwrap().table;
        // Table 2: the loader's block first, then Chromium's, each with
        // its own mean PLT (Cubic HTTP/2 is the ninth column).
        let t2 = table("table2.csv");
        assert_eq!(t2.rows.len(), 2 * TABLE2.len());
        assert_eq!(
            (t2.rows[0][0].as_str(), t2.rows[0][8].as_str()),
            ("loader", "2000")
        );
        let c = &t2.rows[TABLE2.len()];
        assert_eq!((c[0].as_str(), c[8].as_str()), ("Chromium", "3000"));
        let knobs = table("knobs.csv");
        let labels: Vec<&str> = knobs.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(labels, ["loader", "Chromium"]);
        // Every row of runs.csv has a cell per header.
        let runs = table("runs.csv");
        assert!(runs.rows.iter().all(|r| r.len() == runs.headers.len()));
    }

    /// The report's fix table.
    fn fix_table(r: &SectionReport) -> &Table {
        &r.sections
            .iter()
            .find(|s| s.csv == "fix.csv")
            .expect("a fix table")
            .table
    }

    #[test]
    fn the_fix_pairs_each_pages_same_load_across_settings() {
        // (setting, page, seq, promotions, PLT): page a woke the radio only
        // in the base, so the medians compare unlike pages (+65 %), while
        // the pairs b and c are each 10 % slower with the fix.
        let loads = [
            ("base", "a", 1, 1, 2.0),
            ("base", "b", 2, 1, 4.0),
            ("base", "c", 3, 1, 2.0),
            ("rto-floor", "a", 1, 0, 1.0),
            ("rto-floor", "b", 2, 1, 4.4),
            ("rto-floor", "c", 3, 1, 2.2),
        ];
        let runs: Vec<CellRun> = loads
            .iter()
            .map(|&(setting, page, seq, promotions, plt)| {
                let mut v = old_line(setting, "h2", plt);
                v["page"] = page.into();
                v["seq"] = seq.into();
                v["promotions"] = promotions.into();
                serde_json::from_value(v).unwrap()
            })
            .collect();
        let config = CellularConfig {
            radios: vec!["3g".into()],
            settings: vec!["base".into(), "rto-floor".into()],
            protocols: vec!["h2".into()],
            ..CellularConfig::default()
        };
        let r = report(&config, runs, Vec::new(), None);
        let fix = fix_table(&r);
        assert_eq!(fix.rows.len(), 1);
        let col = |name: &str| {
            let i = fix.headers.iter().position(|h| h == name).unwrap();
            fix.rows[0][i].as_str()
        };
        assert_eq!(col("settings"), "base → rto-floor");
        assert_eq!(col("loads after a promotion"), "3 / 2");
        assert_eq!(col("PLT change %"), "65.0");
        assert_eq!((col("paired loads"), col("paired change %")), ("2", "10.0"));
    }

    #[test]
    fn the_fix_is_compared_within_each_setting_that_has_it_both_ways() {
        // (setting, page, PLT): without F-RTO the fix saves 1 s; the base
        // pair is there too, and reno has no pair (no reno+rto-floor).
        let loads = [
            ("base", "a", 2.0),
            ("rto-floor", "a", 2.0),
            ("frto-off", "a", 3.0),
            ("rto-floor+frto-off", "a", 2.0),
            ("reno", "a", 2.5),
        ];
        let runs: Vec<CellRun> = loads
            .iter()
            .map(|&(setting, page, plt)| {
                let mut v = old_line(setting, "h2", plt);
                v["page"] = page.into();
                v["seq"] = 1.into();
                serde_json::from_value(v).unwrap()
            })
            .collect();
        let config = CellularConfig {
            radios: vec!["3g".into()],
            settings: loads.iter().map(|l| l.0.to_string()).collect(),
            protocols: vec!["h2".into()],
            ..CellularConfig::default()
        };
        let r = report(&config, runs, Vec::new(), None);
        let fix = fix_table(&r);
        let col = |row: usize, name: &str| {
            let i = fix.headers.iter().position(|h| h == name).unwrap();
            fix.rows[row][i].clone()
        };
        assert_eq!(fix.rows.len(), 2);
        assert_eq!(col(0, "settings"), "base → rto-floor");
        assert_eq!(col(0, "paired change %"), "0.0");
        assert_eq!(col(1, "settings"), "frto-off → rto-floor+frto-off");
        assert_eq!(col(1, "paired change %"), "-33.3");
    }
}
