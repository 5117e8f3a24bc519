//! `mewa model …`: the papers' tables and figures, recomputed.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use mewa_model::http::SlowStartModel;
use mewa_model::iw::RatioMode;
use mewa_model::repro;

use crate::output::{emit, pct, OutputArgs, Table};
use mewa_lab::report::{draw, Chart, Mark, Series};

#[derive(Debug, Args)]
pub struct ModelCmd {
    #[command(subcommand)]
    which: Option<Which>,
    /// With no subcommand: folder for every table (CSV) and figure (SVG).
    #[arg(long, default_value = "out/model")]
    out: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Seed 000 Table I: connections chosen and load-time reduction, 20 Mbit/s.
    Table1 {
        /// Completion-time model behind Algorithm 1.
        #[arg(long, value_enum, default_value_t = ModelArg::Printed)]
        model: ModelArg,
        /// Initial window, segments (the paper states 10).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
        iw: u32,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Seed 000 Fig. 4: idle share of one HTTP/2 connection, 20 Mbit/s.
    Idle {
        /// Completion-time model.
        #[arg(long, value_enum, default_value_t = ModelArg::Printed)]
        model: ModelArg,
        /// Initial window, segments (the paper states 10; 4 reproduces its Fig. 4).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
        iw: u32,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Seed 001 Figs. 4–5: content-aware IW against computation share.
    Iw {
        /// Stop test of Algorithm 1.
        #[arg(long, value_enum, default_value_t = ModeArg::Cumulative)]
        mode: ModeArg,
        /// Print every curve point, not only the peaks.
        #[arg(long)]
        points: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Seed 002 Fig. 1: FLD_TCP (×3) against Reno (×2) slow start.
    Fld {
        /// RTTs to tabulate.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=40))]
        rtts: u32,
        #[command(flatten)]
        out: OutputArgs,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModelArg {
    /// Seed 000 eq. 1–2 as printed.
    Printed,
    /// Round-by-round count of the same picture (monotone).
    Rounds,
}

impl From<ModelArg> for SlowStartModel {
    fn from(m: ModelArg) -> Self {
        match m {
            ModelArg::Printed => SlowStartModel::Printed,
            ModelArg::Rounds => SlowStartModel::Rounds,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// ΔQoE/ΔCost from the default window, as printed.
    Cumulative,
    /// ΔQoE/ΔCost of each ×γ step.
    Marginal,
}

impl From<ModeArg> for RatioMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Cumulative => RatioMode::Cumulative,
            ModeArg::Marginal => RatioMode::Marginal,
        }
    }
}

pub fn run(cmd: ModelCmd) -> anyhow::Result<()> {
    match cmd.which {
        Some(Which::Table1 { model, iw, out }) => table1(model.into(), iw, &out),
        Some(Which::Idle { model, iw, out }) => idle(model.into(), iw, &out),
        Some(Which::Iw { mode, points, out }) => iw(mode.into(), points, &out),
        Some(Which::Fld { rtts, out }) => fld(rtts, &out),
        None => all(&cmd.out),
    }
}

/// Every reproduction, printed, with CSV and SVG files in `dir`.
fn all(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let write = |name: &str, table: Table| -> anyhow::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, table.to_csv())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    };
    let text = |plot: &str| OutputArgs {
        json: false,
        csv: false,
        plot: Some(dir.join(plot)),
    };
    let printed = SlowStartModel::Printed;
    println!("== Seed 000 Table I: connections n and predicted reduction (20 Mbit/s, IW 10) — ours | paper\n");
    table1(printed, 10, &text("table1.svg"))?;
    write("table1.csv", table1_table(printed, 10)?)?;
    println!("\n== Seed 000 Fig. 4: idle share T_idle/T_HTTP, one connection (20 Mbit/s, IW 10)\n");
    idle(printed, 10, &text("idle.svg"))?;
    write("idle.csv", idle_table(printed, 10)?)?;
    println!("\n   the same with IW 4 (RFC 3390, the paper's reference [9]; see docs/MODEL.md)\n");
    idle(printed, 4, &text("idle-iw4.svg"))?;
    write("idle-iw4.csv", idle_table(printed, 4)?)?;
    println!("\n== Seed 001 Figs. 4–5: IW_opt over computation share 1–95% (α = 1/3), stop test as printed\n");
    iw(RatioMode::Cumulative, false, &text("iw.svg"))?;
    write("iw.csv", iw_table(RatioMode::Cumulative, true)?)?;
    println!("\n   the same with a per-step (marginal) stop test\n");
    iw(RatioMode::Marginal, false, &text("iw-marginal.svg"))?;
    write("iw-marginal.csv", iw_table(RatioMode::Marginal, true)?)?;
    println!("\n== Seed 002 Fig. 1: cumulative bytes per RTT, IW 10 × 1500 B\n");
    fld(8, &text("fld.svg"))?;
    write("fld.csv", fld_table(8))?;
    println!("\nCSV and SVG files are in {}", dir.display());
    Ok(())
}

fn table1_table(model: SlowStartModel, iw: u32) -> anyhow::Result<Table> {
    let cells = repro::table1(model, iw)?;
    let mut t = Table::new(&[
        "size_kb",
        "rtt_ms",
        "n",
        "reduction_%",
        "paper_n",
        "paper_reduction_%",
        "reduction_at_paper_n_%",
        "n_max",
    ]);
    for c in &cells {
        t.push(vec![
            c.size_kb.to_string(),
            c.rtt_ms.to_string(),
            c.n.to_string(),
            pct(c.reduction_pct),
            c.paper_n.to_string(),
            format!("{:.2}", c.paper_reduction_pct),
            pct(c.reduction_at_paper_n_pct),
            c.n_max.to_string(),
        ]);
    }
    Ok(t)
}

fn table1(model: SlowStartModel, iw: u32, out: &OutputArgs) -> anyhow::Result<()> {
    let cells = repro::table1(model, iw)?;
    if !out.json && !out.csv {
        // The paper's layout: one row per size, one column pair per RTT.
        let mut headers = vec!["size KB".to_string()];
        headers.extend(
            repro::TABLE1_RTTS_MS
                .iter()
                .map(|r| format!("{r} ms: ours | paper")),
        );
        let mut t = Table {
            headers,
            rows: Vec::new(),
        };
        for size in repro::TABLE1_SIZES_KB {
            let mut row = vec![size.to_string()];
            for c in cells.iter().filter(|c| c.size_kb == size) {
                row.push(format!(
                    "{:5.1}% n={} | {:5.2}% n={}",
                    c.reduction_pct, c.n, c.paper_reduction_pct, c.paper_n
                ));
            }
            t.push(row);
        }
        print!("{}", t.to_text());
        let same = cells.iter().filter(|c| c.n == c.paper_n).count();
        let mae = cells
            .iter()
            .map(|c| (c.reduction_pct - c.paper_reduction_pct).abs())
            .sum::<f64>()
            / cells.len() as f64;
        let mae_at = cells
            .iter()
            .map(|c| (c.reduction_at_paper_n_pct - c.paper_reduction_pct).abs())
            .sum::<f64>()
            / cells.len() as f64;
        println!(
            "same n as the paper: {same}/{}; mean |reduction − paper| = {mae:.1} points; \
             with the paper's n: {mae_at:.1} points",
            cells.len()
        );
    } else {
        emit(out, &table1_table(model, iw)?, &cells)?;
    }
    if let Some(p) = &out.plot {
        let mut series = Vec::new();
        for (i, size) in repro::TABLE1_SIZES_KB.into_iter().enumerate() {
            let row: Vec<_> = cells.iter().filter(|c| c.size_kb == size).collect();
            series.push(Series {
                name: format!("{size} KB (model)"),
                points: row
                    .iter()
                    .map(|c| (f64::from(c.rtt_ms), c.reduction_pct))
                    .collect(),
                mark: Mark::Line,
                colour: i,
            });
            series.push(Series {
                name: format!("{size} KB (paper)"),
                points: row
                    .iter()
                    .map(|c| (f64::from(c.rtt_ms), c.paper_reduction_pct))
                    .collect(),
                mark: Mark::Points,
                colour: i,
            });
        }
        let chart = Chart {
            title: "Seed 000 Table I / Fig. 5: load-time reduction with n connections, 20 Mbit/s",
            x_label: "RTT (ms)",
            y_label: "reduction (%)",
            log_y: false,
        };
        draw(p, &chart, &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn idle_table(model: SlowStartModel, iw: u32) -> anyhow::Result<Table> {
    let cells = repro::idle_grid(model, iw)?;
    let mut t = Table::new(&["size_kb", "rtt_ms", "idle_%", "t_http_s", "paper_idle_%"]);
    for c in &cells {
        t.push(vec![
            c.size_kb.to_string(),
            c.rtt_ms.to_string(),
            pct(c.idle_pct),
            format!("{:.3}", c.t_http_s),
            c.paper_idle_pct.map_or("-".into(), pct),
        ]);
    }
    Ok(t)
}

fn idle(model: SlowStartModel, iw: u32, out: &OutputArgs) -> anyhow::Result<()> {
    let cells = repro::idle_grid(model, iw)?;
    if !out.json && !out.csv {
        let mut headers = vec!["size KB".to_string()];
        headers.extend(repro::TABLE1_RTTS_MS.iter().map(|r| format!("{r} ms")));
        let mut t = Table {
            headers,
            rows: Vec::new(),
        };
        for size in repro::TABLE1_SIZES_KB {
            let mut row = vec![size.to_string()];
            for c in cells.iter().filter(|c| c.size_kb == size) {
                row.push(match c.paper_idle_pct {
                    Some(p) => format!("{:.1}% (paper {p:.1}%)", c.idle_pct),
                    None => format!("{:.1}%", c.idle_pct),
                });
            }
            t.push(row);
        }
        print!("{}", t.to_text());
    } else {
        emit(out, &idle_table(model, iw)?, &cells)?;
    }
    if let Some(p) = &out.plot {
        let mut series = Vec::new();
        for (i, size) in repro::TABLE1_SIZES_KB.into_iter().enumerate() {
            let row: Vec<_> = cells.iter().filter(|c| c.size_kb == size).collect();
            series.push(Series {
                name: format!("{size} KB (model)"),
                points: row
                    .iter()
                    .map(|c| (f64::from(c.rtt_ms), c.idle_pct))
                    .collect(),
                mark: Mark::Line,
                colour: i,
            });
            let paper: Vec<_> = row
                .iter()
                .filter_map(|c| c.paper_idle_pct.map(|v| (f64::from(c.rtt_ms), v)))
                .collect();
            if !paper.is_empty() {
                series.push(Series {
                    name: format!("{size} KB (paper text)"),
                    points: paper,
                    mark: Mark::Points,
                    colour: i,
                });
            }
        }
        let chart = Chart {
            title: "Seed 000 Fig. 4: idle share of one connection, 20 Mbit/s",
            x_label: "RTT (ms)",
            y_label: "T_idle / T_HTTP (%)",
            log_y: false,
        };
        draw(p, &chart, &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn iw_table(mode: RatioMode, points: bool) -> anyhow::Result<Table> {
    let curves = repro::iw_curves(mode)?;
    Ok(if points {
        let mut t = Table::new(&["size_kb", "rtt_ms", "computation_%", "iw_opt"]);
        for c in &curves {
            for &(p, iw) in &c.points {
                t.push(vec![
                    c.size_kb.to_string(),
                    c.rtt_ms.to_string(),
                    p.to_string(),
                    format!("{iw:.1}"),
                ]);
            }
        }
        t
    } else {
        let mut t = Table::new(&[
            "size_kb",
            "rtt_ms",
            "peak_iw",
            "paper_peak",
            "at_%",
            "back_to_10_at_%",
            "paper_back_to_10_%",
        ]);
        for c in &curves {
            t.push(vec![
                c.size_kb.to_string(),
                c.rtt_ms.to_string(),
                format!("{:.0}", c.peak_iw),
                c.paper_peak_iw.map_or("-".into(), |v| format!("{v:.0}")),
                c.peak_share_pct.to_string(),
                c.back_to_default_pct
                    .map_or("never".into(), |v| v.to_string()),
                if c.size_kb == 400 && c.rtt_ms == 100 {
                    repro::IW_PAPER_BACK_TO_DEFAULT_PCT.to_string()
                } else {
                    "-".into()
                },
            ]);
        }
        t
    })
}

fn iw(mode: RatioMode, points: bool, out: &OutputArgs) -> anyhow::Result<()> {
    let curves = repro::iw_curves(mode)?;
    emit(out, &iw_table(mode, points)?, &curves)?;
    if let Some(p) = &out.plot {
        let mut series = Vec::new();
        for (i, c) in curves.iter().enumerate() {
            series.push(Series {
                name: format!("{} KB, {} ms", c.size_kb, c.rtt_ms),
                points: c.points.iter().map(|&(s, iw)| (f64::from(s), iw)).collect(),
                mark: Mark::Line,
                colour: i,
            });
            if let Some(pk) = c.paper_peak_iw {
                series.push(Series {
                    name: format!("paper peak {pk:.0}"),
                    points: vec![(f64::from(c.peak_share_pct), pk)],
                    mark: Mark::Points,
                    colour: i,
                });
            }
        }
        let chart = Chart {
            title: "Seed 001 Figs. 4-5: content-aware IW (alpha = 1/3)",
            x_label: "computation share of t_c + t_principle (%)",
            y_label: "IW_opt (segments)",
            log_y: false,
        };
        draw(p, &chart, &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn fld_table(rtts: u32) -> Table {
    let mut t = Table::new(&[
        "rtt",
        "reno_window",
        "fld_window",
        "reno_cum_kB",
        "fld_cum_kB",
    ]);
    for r in repro::fld_table(rtts) {
        t.push(vec![
            r.rtt.to_string(),
            r.reno_window.to_string(),
            r.fld_window.to_string(),
            format!("{}", r.reno_cumulative / 1000),
            format!("{}", r.fld_cumulative / 1000),
        ]);
    }
    t
}

fn fld(rtts: u32, out: &OutputArgs) -> anyhow::Result<()> {
    let rows = repro::fld_table(rtts);
    emit(out, &fld_table(rtts), &rows)?;
    if !out.json && !out.csv {
        let (r, f) = (
            mewa_model::fld::Schedule::reno(),
            mewa_model::fld::Schedule::fld(),
        );
        println!(
            "500 kB flow: FLD_TCP {} RTTs, Reno {} RTTs (paper: 4 and 6)",
            f.rtts_to_finish(500_000).unwrap_or(0),
            r.rtts_to_finish(500_000).unwrap_or(0)
        );
    }
    if let Some(p) = &out.plot {
        let series = vec![
            Series {
                name: "Reno (x2 per RTT)".into(),
                points: rows
                    .iter()
                    .map(|r| (f64::from(r.rtt), r.reno_cumulative as f64 / 1000.0))
                    .collect(),
                mark: Mark::Line,
                colour: 0,
            },
            Series {
                name: "FLD_TCP (x3 per RTT)".into(),
                points: rows
                    .iter()
                    .map(|r| (f64::from(r.rtt), r.fld_cumulative as f64 / 1000.0))
                    .collect(),
                mark: Mark::Line,
                colour: 1,
            },
        ];
        let chart = Chart {
            title: "Seed 002 Fig. 1: cumulative bytes per round trip (IW 10 x 1500 B)",
            x_label: "round trip",
            y_label: "cumulative kB (log scale)",
            log_y: true,
        };
        draw(p, &chart, &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
