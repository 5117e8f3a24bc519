//! What the testbed did around the pages: how the origin repaired its
//! losses, and what the background flows carried (with several logs for a
//! setting whose run was resumed: one per testbed that finished).

use mewa_report::table::opt;
use mewa_report::{median, Section, Table};

use super::figures::loader_types;
use super::groups::group;
use crate::cross::{CrossLog, Flow};
use crate::fld::counters::TcpCounters;
use crate::fld::pages::config::{Config, Network};
use crate::fld::pages::record::{CrossEntry, PageRun};

/// Loss repair at the server: the origin namespace's TCP counters per load,
/// per setting, loader type and control.
pub fn server_tcp_table(config: &Config, labels: &[String], runs: &[PageRun]) -> Section {
    let mut t = Table::new(&[
        "setting",
        "page type",
        "cc",
        "retransmitted segments per load (mean)",
        "timeouts per load (mean)",
        "loss probes per load (mean)",
        "loads with a timeout",
    ]);
    for s in labels {
        for p in loader_types(config) {
            for cc in &config.ccs {
                let g: Vec<TcpCounters> = group(runs, s, p, cc)
                    .iter()
                    .filter_map(|r| r.server_tcp)
                    .collect();
                let n = g.len().max(1) as f64;
                let mean =
                    |f: fn(&TcpCounters) -> u64| -> f64 { g.iter().map(f).sum::<u64>() as f64 / n };
                let cell = |v: f64, digits: usize| {
                    if g.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{v:.digits$}")
                    }
                };
                t.push(vec![
                    s.clone(),
                    p.title().into(),
                    cc.to_string(),
                    cell(mean(|c| c.retrans_segs), 1),
                    cell(mean(|c| c.timeouts), 2),
                    cell(mean(|c| c.loss_probes), 2),
                    format!(
                        "{}/{}",
                        g.iter().filter(|c| c.timeouts > 0).count(),
                        g.len()
                    ),
                ]);
            }
        }
    }
    Section {
        title: "Loss repair at the server (the origin namespace's TCP counters per load)".into(),
        csv: "server-tcp.csv",
        table: t,
        note: "Retransmitted segments, retransmission timeouts and tail loss probes of the \
               origin's sockets during each load (the background flows run on hosts of their own)."
            .into(),
    }
}

/// The cross-traffic logs of one setting label, in the order its testbeds
/// ran.
struct Logs<'a> {
    setting: &'a Network,
    logs: Vec<&'a CrossEntry>,
}

/// The logs grouped by setting label: in the order of `labels`, then any
/// label the configuration does not have, in the order met.
fn by_setting<'a>(labels: &[String], cross: &'a [CrossEntry]) -> Vec<Logs<'a>> {
    let mut out: Vec<Logs<'a>> = Vec::new();
    for e in cross {
        match out.iter_mut().find(|l| l.setting.name == e.setting.name) {
            Some(l) => l.logs.push(e),
            None => out.push(Logs {
                setting: &e.setting,
                logs: vec![e],
            }),
        }
    }
    out.sort_by_key(|l| {
        labels
            .iter()
            .position(|s| *s == l.setting.name)
            .unwrap_or(labels.len())
    });
    out
}

/// The background's mean throughput over the logs, bit/s, leaving out each
/// log's first second (slow start); several logs weigh by their length.
fn mean_cross_bps(logs: &[&CrossLog]) -> f64 {
    let total = |l: &CrossLog| -> f64 { l.mean_bps(1).iter().sum() };
    let secs = |l: &CrossLog| -> f64 {
        let n = l.bytes.iter().map(Vec::len).max().unwrap_or(0);
        n.saturating_sub(1) as f64 * l.interval_s
    };
    let weight: f64 = logs.iter().map(|l| secs(l)).sum();
    if logs.len() == 1 || weight <= 0.0 {
        return logs.iter().map(|l| total(l)).sum::<f64>() / logs.len().max(1) as f64;
    }
    logs.iter().map(|l| total(l) * secs(l)).sum::<f64>() / weight
}

/// The cross-traffic table, and each log as `cross-<setting>.csv` (a
/// resumed setting's later testbeds as `cross-<setting>-2.csv` and on).
pub fn cross_table(
    labels: &[String],
    cross: &[CrossEntry],
    runs: &[PageRun],
) -> (Section, Vec<(String, String)>) {
    let mut t = Table::new(&[
        "setting",
        "capacity Mbit/s",
        "cross flows",
        "cross Mbit/s (mean)",
        "capacity minus cross Mbit/s",
        "page handshake RTT ms (median)",
    ]);
    let mut extra = Vec::new();
    let mut partial = Vec::new();
    for Logs { setting: s, logs } in by_setting(labels, cross) {
        let total = mean_cross_bps(&logs.iter().map(|e| &e.log).collect::<Vec<_>>());
        let mine: Vec<&PageRun> = runs.iter().filter(|r| r.setting == s.name).collect();
        t.push(vec![
            s.name.clone(),
            format!("{:.0}", s.capacity_bps as f64 / 1e6),
            s.cross
                .iter()
                .map(Flow::label)
                .collect::<Vec<_>>()
                .join(" "),
            format!("{:.1}", total / 1e6),
            format!("{:.1}", (s.capacity_bps as f64 - total).max(0.0) / 1e6),
            opt(
                median(
                    &mine
                        .iter()
                        .filter_map(|r| r.handshake_ms)
                        .collect::<Vec<_>>(),
                ),
                1,
            ),
        ]);
        for (k, e) in logs.iter().enumerate() {
            let file = match k {
                0 => format!("cross-{}.csv", s.name),
                k => format!("cross-{}-{}.csv", s.name, k + 1),
            };
            extra.push((file, e.log.to_csv()));
        }
        let covered: usize = logs.iter().map(|e| e.loads.unwrap_or(mine.len())).sum();
        if logs.len() > 1 || covered < mine.len() {
            partial.push(format!(
                "{}: {} logs over {} of its {} loads",
                s.name,
                logs.len(),
                covered.min(mine.len()),
                mine.len()
            ));
        }
    }
    let mut note = String::from(
        "Seed 002: background iperf flows bring LTE's 100 Mbit/s to an effective 25 Mbit/s and \
           3G's 21 to 7. Here long cubic flows share the bottleneck with the page; what they \
           carried during the loads is above, per second in cross-<setting>.csv.",
    );
    if !partial.is_empty() {
        note.push_str(&format!(
            " A resumed run has a log per testbed that finished (an interrupted testbed's log \
             is lost with it; the later ones are cross-<setting>-2.csv and on), and the mean \
             is over those: {}.",
            partial.join("; ")
        ));
    }
    let section = Section {
        title: "Cross traffic".into(),
        csv: "cross.csv",
        table: t,
        note,
    };
    (section, extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(per_second: u64, seconds: usize) -> CrossLog {
        CrossLog {
            flows: vec![Flow::Tcp { cc: "cubic".into() }],
            interval_s: 1.0,
            bytes: vec![vec![per_second; seconds]],
        }
    }

    #[test]
    fn several_logs_of_a_setting_weigh_by_their_length() {
        // 1 MB/s for 10 s (9 counted), then 2 MB/s for 4 s (3 counted).
        let (a, b) = (log(1_000_000, 10), log(2_000_000, 4));
        assert_eq!(mean_cross_bps(&[&a]), 8e6);
        let m = mean_cross_bps(&[&a, &b]);
        assert!((m - (8e6 * 9.0 + 16e6 * 3.0) / 12.0).abs() < 1e-6, "{m}");
    }
}
