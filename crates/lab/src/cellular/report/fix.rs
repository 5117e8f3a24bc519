//! The fix: each setting with the RTO floor against the same knobs
//! without it, on the loads that began with a promotion.

use mewa_report::table::{opt, pct};
use mewa_report::{median, Section, Table};

use super::super::record::CellRun;
use super::super::setting::Setting;
use super::select::{after_promotion, change_pct, spurious, Cell};

/// The table, for each pair (without, with) of [`super::select::fix_pairs`].
pub fn fix(
    runs: &[CellRun],
    grid: &[Cell],
    pairs: &[(&Setting, &Setting)],
    names: &str,
) -> Section {
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
    for &(without, with) in pairs {
        for cell in grid {
            let of = |s: &Setting| -> Vec<&CellRun> {
                let mut v = cell.loads(runs, s);
                v.retain(|x| after_promotion(x));
                v
            };
            let (b, f) = (of(without), of(with));
            if b.is_empty() || f.is_empty() {
                continue;
            }
            let mut line = cell.columns();
            line.extend(row(&b, &f, without, with));
            fix.push(line);
        }
    }
    Section {
        title: format!(
            "The fix: an RTO floor over the radio, on loads that began with a promotion ({names})"
        ),
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
               in both settings, and the median of their PLT changes. Target: \
               at least 90 % fewer spurious timeouts after promotion, and a lower \
               median PLT for HTTP/2 on 3G."
            .into(),
    }
}

/// A row's figures after the cell's columns: the loads `b` without the
/// fix against `f` with it.
fn row(b: &[&CellRun], f: &[&CellRun], without: &Setting, with: &Setting) -> Vec<String> {
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
    let med = |v: &[&CellRun]| median(&v.iter().filter_map(|x| x.plt_s).collect::<Vec<_>>());
    let (mb, mf) = (med(b), med(f));
    // The medians above compare whichever loads woke the radio in each
    // setting, which on a corpus of unlike pages can be different pages;
    // the paired change compares each page's same load in both settings.
    let paired: Vec<f64> = b
        .iter()
        .filter_map(|x| {
            let y = f.iter().find(|y| y.page == x.page && y.seq == x.seq)?;
            change_pct(x.plt_s, y.plt_s)
        })
        .collect();
    vec![
        format!("{without} → {with}"),
        format!("{} / {}", b.len(), f.len()),
        sp(b).to_string(),
        sp(f).to_string(),
        if sp(b) > 0 {
            pct((1.0 - f64::from(sp(f)) / f64::from(sp(b))) * 100.0)
        } else {
            "-".into()
        },
        to(b).to_string(),
        to(f).to_string(),
        if to(b) > 0 {
            pct((1.0 - to(f) as f64 / to(b) as f64) * 100.0)
        } else {
            "-".into()
        },
        tlp(b).to_string(),
        tlp(f).to_string(),
        format!("{} / {}", genuine(b), genuine(f)),
        opt(mb, 3),
        opt(mf, 3),
        change_pct(mb, mf).map_or_else(|| "-".into(), pct),
        paired.len().to_string(),
        median(&paired).map_or_else(|| "-".into(), pct),
    ]
}
