//! `mewa lab iw`'s report: per point of the grid (a page at an RTT over a
//! transport) the figures of every arm, then one function per table and
//! per plot over them.

use std::collections::BTreeMap;

use mewa_model::iw::{optimal_iw, t_transfer, IwChoice, IwInputs};
use mewa_report::{
    median, quantile, Mark, Plot, ResultFolder, Section, SectionReport, Series, Table,
};

use super::{Arm, Config, IwRun, Transport};

/// A fraction as a percentage with one decimal.
fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

/// A value with three decimals, or a dash.
fn secs(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.3}"))
}

/// The estimated computation share of seed 001 §4.1:
/// t_c / (t_c + t_principle) with t_principle from eq. 1 at the RTT.
pub fn estimated_share(page_bytes: u64, computation_ms: u64, rtt_ms: u64) -> f64 {
    let tc = computation_ms as f64 / 1e3;
    let tp = t_transfer(page_bytes, rtt_ms as f64 / 1e3, 10.0, 1500, 1.5);
    if tc + tp > 0.0 {
        tc / (tc + tp)
    } else {
        0.0
    }
}

/// One point of the grid and what every arm measured at it.
#[derive(Debug)]
struct Point {
    page: String,
    rtt_ms: u64,
    proto: Transport,
    bytes: u64,
    /// Median completion time per arm, s.
    median: BTreeMap<Arm, f64>,
    /// Median window the aware arm asked for.
    asked: Option<f64>,
    /// Estimated computation share.
    est: f64,
    /// Measured share: t_c over the IW-10 completion time.
    measured: Option<f64>,
    /// Algorithm 1 at the nominal RTT.
    choice: Option<IwChoice>,
}

impl Point {
    /// The completion time change of `arm` against the default, a fraction.
    fn change(&self, arm: Arm) -> Option<f64> {
        let d = *self.median.get(&Arm::Default)?;
        let a = *self.median.get(&arm)?;
        (d > 0.0).then(|| (d - a) / d)
    }

    /// Seed 001's throughput compensation: t_default/t_aware − 1.
    fn throughput_gain(&self) -> Option<f64> {
        let d = *self.median.get(&Arm::Default)?;
        let a = *self.median.get(&Arm::Aware)?;
        (a > 0.0).then(|| d / a - 1.0)
    }

    /// The computation-share band the targets name.
    fn band(&self) -> &'static str {
        match self.est {
            s if s < 0.01 => "0 %",
            s if (0.2..=0.5).contains(&s) => "20–50 %",
            s if s >= 0.85 => "≥ 85 %",
            _ => "other",
        }
    }

    /// The plots' series label.
    fn label(&self) -> String {
        format!("{} {} KB {} ms", self.proto, self.bytes / 1000, self.rtt_ms)
    }
}

/// Every point of the grid, in order of page, RTT and transport.
fn points(config: &Config, runs: &[IwRun]) -> Vec<Point> {
    type Key = (String, u64, Transport);
    let mut times: BTreeMap<(Key, Arm), Vec<f64>> = BTreeMap::new();
    let mut facts: BTreeMap<Key, (u64, u64)> = BTreeMap::new();
    let mut asked: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for r in runs {
        let k = (r.page.clone(), r.rtt_ms, r.protocol);
        facts.insert(k.clone(), (r.page_bytes, r.computation_ms));
        if let Some(t) = r.completion_s {
            times.entry((k.clone(), r.arm)).or_default().push(t);
        }
        if r.arm == Arm::Aware {
            asked
                .entry(k)
                .or_default()
                .push(f64::from(r.asked.unwrap_or(10)));
        }
    }
    facts
        .into_iter()
        .map(|(k, (bytes, comp))| {
            let median: BTreeMap<Arm, f64> = Arm::ALL
                .iter()
                .filter_map(|&a| Some((a, median(times.get(&(k.clone(), a))?)?)))
                .collect();
            let (page, rtt_ms, proto) = k;
            Point {
                est: estimated_share(bytes, comp, rtt_ms),
                measured: median.get(&Arm::Default).map(|t| (comp as f64 / 1e3) / t),
                choice: optimal_iw(&IwInputs {
                    alpha: config.alpha,
                    ..IwInputs::paper(bytes, rtt_ms as f64 / 1e3, comp as f64 / 1e3)
                })
                .ok(),
                asked: asked
                    .get(&(page.clone(), rtt_ms, proto))
                    .and_then(|v| mewa_report::median(v)),
                page,
                rtt_ms,
                proto,
                bytes,
                median,
            }
        })
        .collect()
}

/// Completion time per page (medians), every arm beside the model.
fn completion_table(points: &[Point]) -> Section {
    let mut t = Table::new(&[
        "transport",
        "RTT ms",
        "page",
        "KB",
        "share est.",
        "share meas.",
        "IW asked",
        "model IW",
        "default s",
        "aware s",
        "fixed s",
        "aware −%",
        "model −%",
        "fixed −%",
        "throughput +%",
    ]);
    for p in points {
        t.push(vec![
            p.proto.to_string(),
            p.rtt_ms.to_string(),
            p.page.clone(),
            (p.bytes / 1000).to_string(),
            pct(p.est),
            p.measured.map_or("–".into(), pct),
            p.asked.map_or("–".into(), |a| format!("{a:.0}")),
            p.choice.map_or("–".into(), |c| c.segments().to_string()),
            secs(p.median.get(&Arm::Default).copied()),
            secs(p.median.get(&Arm::Aware).copied()),
            secs(p.median.get(&Arm::Fixed).copied()),
            p.change(Arm::Aware).map_or("–".into(), pct),
            p.choice.map_or("–".into(), |c| pct(c.reduction())),
            p.change(Arm::Fixed).map_or("–".into(), pct),
            p.throughput_gain().map_or("–".into(), pct),
        ]);
    }
    Section {
        title: "Completion time per page (medians)".into(),
        csv: "completion.csv",
        table: t,
        note: "share est.: t_c/(t_c + t_principle) with eq. 1 at the RTT (seed 001 §4.1); \
               share meas.: t_c over the measured IW-10 completion time. model −%: \
               Algorithm 1's predicted reduction (eq. 1 at the nominal RTT). Throughput +%: \
               t_default/t_aware − 1, seed 001's throughput compensation (Figs. 6–7: up to \
               33.2 % varying RTT, 34.5 % varying size). Seed 001's optimal IW at 100 ms: \
               114 (400 KB, 35 %), 108 (1000 KB), 76 (2400 KB); 171 at 150 ms."
            .into(),
    }
}

/// The aware arm's change by computation-share band, against the targets.
fn targets_table(points: &[Point]) -> Section {
    let mut by_band: BTreeMap<(Transport, &'static str), Vec<f64>> = BTreeMap::new();
    for p in points {
        if let Some(a) = p.change(Arm::Aware) {
            by_band
                .entry((p.proto, p.band()))
                .or_default()
                .push(a * 100.0);
        }
    }
    let mut t = Table::new(&[
        "transport",
        "share band",
        "points",
        "aware −% min",
        "aware −% median",
        "aware −% max",
        "target",
    ]);
    let one = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.1}"));
    for ((proto, band), v) in &by_band {
        if *band == "other" {
            continue;
        }
        let target = match *band {
            "20–50 %" => "≥ 25 % shorter (seed 001: up to 25.1 %)",
            _ => "never longer",
        };
        t.push(vec![
            proto.to_string(),
            band.to_string(),
            v.len().to_string(),
            one(quantile(v, 0.0)),
            one(median(v)),
            one(quantile(v, 1.0)),
            target.into(),
        ]);
    }
    Section {
        title: "Targets: completion time change by computation share".into(),
        csv: "targets.csv",
        table: t,
        note: "Target: ≥ 25 % shorter than IW 10 at 20–50 % computation share, never \
               longer at 0 % or 90 %."
            .into(),
    }
}

/// What each arm cost the link: drops, retransmissions, queueing delay,
/// and the window granted.
fn cost_table(runs: &[IwRun]) -> Section {
    let mut t = Table::new(&[
        "transport",
        "arm",
        "loads",
        "drops/load",
        "retrans/load",
        "queue p95 ms (median)",
        "queue max ms (median)",
        "granted (median)",
    ]);
    let mut arms: BTreeMap<(Transport, Arm), Vec<&IwRun>> = BTreeMap::new();
    for r in runs {
        arms.entry((r.protocol, r.arm)).or_default().push(r);
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            "–".to_string()
        } else {
            format!("{:.1}", v.iter().sum::<f64>() / v.len() as f64)
        }
    };
    let one = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.1}"));
    for ((proto, arm), rs) in &arms {
        let drops: Vec<f64> = rs
            .iter()
            .filter_map(|r| r.drops.map(|d| d as f64))
            .collect();
        let retrans: Vec<f64> = rs
            .iter()
            .filter_map(|r| r.server_tcp.map(|c| c.retrans_segs as f64))
            .collect();
        let p95: Vec<f64> = rs.iter().filter_map(|r| r.queue_p95_ms).collect();
        let max: Vec<f64> = rs.iter().filter_map(|r| r.queue_max_ms).collect();
        let granted: Vec<f64> = rs.iter().filter_map(|r| r.granted.map(f64::from)).collect();
        t.push(vec![
            proto.to_string(),
            arm.to_string(),
            rs.len().to_string(),
            mean(&drops),
            mean(&retrans),
            one(median(&p95)),
            one(median(&max)),
            median(&granted).map_or("10 (nothing asked)".into(), |x| format!("{x:.0}")),
        ]);
    }
    let unknown = runs.iter().filter(|r| r.drops.is_none()).count();
    let mut note = "Queueing delay of the bottleneck's downlink packets during each load: what \
                    a flow sharing it would wait."
        .to_string();
    if unknown > 0 {
        note.push_str(&format!(
            " {unknown} loads have no link figures (their testbed was interrupted before it \
             was torn down, or its link logs could not be read); drops/load and the queue \
             columns leave them out."
        ));
    }
    Section {
        title: "Cost: drops, retransmissions, queueing delay".into(),
        csv: "cost.csv",
        table: t,
        note,
    }
}

/// Estimated minus measured computation share (seed 001 Figs. 8–9).
fn shares_table(points: &[Point]) -> Section {
    let diff: Vec<f64> = points
        .iter()
        .filter_map(|p| p.measured.map(|m| (p.est - m) * 100.0))
        .collect();
    let two = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.2}"));
    let mut t = Table::new(&["points", "min", "median", "max", "seed 001"]);
    t.push(vec![
        diff.len().to_string(),
        two(quantile(&diff, 0.0)),
        two(median(&diff)),
        two(quantile(&diff, 1.0)),
        "−0.84 to 5.30 points".into(),
    ]);
    Section {
        title: "Estimated minus measured computation share, points (seed 001 Figs. 8–9)".into(),
        csv: "shares.csv",
        table: t,
        note: String::new(),
    }
}

/// Named point sets as series, each sorted along x, one colour each.
fn to_series(m: BTreeMap<String, Vec<(f64, f64)>>, mark: Mark) -> Vec<Series> {
    m.into_iter()
        .enumerate()
        .map(|(i, (name, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name,
                points,
                mark,
                colour: i,
            }
        })
        .collect()
}

/// The window asked against the computation share, beside Algorithm 1's
/// (seed 001 Figs. 4–5).
fn iw_plot(points: &[Point]) -> Plot {
    let mut asked: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut model: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for p in points {
        if let Some(a) = p.asked {
            asked.entry(p.label()).or_default().push((p.est * 100.0, a));
        }
        if let Some(c) = p.choice {
            model
                .entry(format!("model {} KB {} ms", p.bytes / 1000, p.rtt_ms))
                .or_default()
                .push((p.est * 100.0, f64::from(c.segments())));
        }
    }
    let mut series = to_series(asked, Mark::Points);
    series.extend(to_series(model, Mark::Line));
    Plot {
        file: "iw-vs-share.svg".into(),
        title: "Initial window asked against computation share (seed 001 Figs. 4–5)".into(),
        x_label: "estimated computation share, %".into(),
        y_label: "IW, segments".into(),
        series,
    }
}

/// The aware arm's completion time reduction against the computation share.
fn reduction_plot(points: &[Point]) -> Plot {
    let mut reduction: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for p in points {
        if let Some(a) = p.change(Arm::Aware) {
            reduction
                .entry(p.label())
                .or_default()
                .push((p.est * 100.0, a * 100.0));
        }
    }
    Plot {
        file: "completion-reduction.svg".into(),
        title: "Completion time, content-aware IW against IW 10".into(),
        x_label: "estimated computation share, %".into(),
        y_label: "completion time reduction, %".into(),
        series: to_series(reduction, Mark::Line),
    }
}

/// The report of `runs` (the link's figures attached where known).
pub(super) fn report(
    config: &Config,
    runs: Vec<IwRun>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let points = points(config, &runs);
    SectionReport {
        name: "iw",
        sections: vec![
            completion_table(&points),
            targets_table(&points),
            cost_table(&runs),
            shares_table(&points),
        ],
        plots: vec![iw_plot(&points), reduction_plot(&points)],
        json: serde_json::json!({ "runs": runs }),
        extra: Vec::new(),
        folder,
    }
}
