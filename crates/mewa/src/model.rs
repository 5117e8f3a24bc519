//! `mewa model …`: the papers' tables and figures, recomputed.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use mewa_lab::repro::{self, Figure};
use mewa_model::http::SlowStartModel;
use mewa_model::iw::RatioMode;

use crate::output::{emit, OutputArgs};
use crate::units;

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
        /// One choice instead of the figure: the page's size, e.g. 400kB
        /// (with --rtt and --computation), what the client computes and asks.
        #[arg(long, value_name = "SIZE", value_parser = units::size, requires_all = ["rtt", "computation"])]
        page_size: Option<u64>,
        /// The handshake RTT of the one choice, e.g. 100ms.
        #[arg(long, value_name = "DURATION", value_parser = units::rtt, requires = "page_size")]
        rtt: Option<Duration>,
        /// The page's computation latency for the one choice, e.g. 485ms.
        #[arg(long, value_name = "DURATION", value_parser = units::duration, requires = "page_size")]
        computation: Option<Duration>,
        /// Seed 001's policy threshold α for the one choice.
        #[arg(long, default_value_t = 1.0 / 3.0, requires = "page_size")]
        alpha: f64,
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
        Some(Which::Table1 { model, iw, out }) => show(&repro::table1(model.into(), iw)?, &out),
        Some(Which::Idle { model, iw, out }) => show(&repro::idle(model.into(), iw)?, &out),
        Some(Which::Iw {
            page_size: Some(bytes),
            rtt,
            computation,
            alpha,
            mode,
            ..
        }) => {
            let secs = |d: Option<Duration>| d.unwrap_or_default().as_secs_f64();
            let mut inp = mewa_model::iw::IwInputs::paper(bytes, secs(rtt), secs(computation));
            inp.alpha = alpha;
            inp.mode = mode.into();
            let c = mewa_model::iw::optimal_iw(&inp)?;
            println!("IW_opt {} segments", c.segments());
            println!("IW_max {:.1} segments, {} steps of x1.5", c.iw_max, c.steps);
            println!(
                "t_principle {:.3} s, t_default {:.3} s, t_opt {:.3} s: {:.1} % shorter",
                c.t_principle_s,
                c.t_default_s,
                c.t_opt_s,
                c.reduction() * 100.0
            );
            Ok(())
        }
        Some(Which::Iw {
            mode, points, out, ..
        }) => show(&repro::iw(mode.into(), points)?, &out),
        Some(Which::Fld { rtts, out }) => show(&repro::fld(rtts), &out),
        None => all(&cmd.out),
    }
}

/// Prints a figure as text (or `--json`/`--csv`) and draws it with
/// `--plot`.
fn show<T: serde::Serialize>(f: &Figure<T>, out: &OutputArgs) -> anyhow::Result<()> {
    if out.json || out.csv {
        emit(out, &f.table, &f.data)?;
    } else {
        print!("{}", f.text());
    }
    if let Some(p) = &out.plot {
        f.draw(p)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

/// Every reproduction, printed, with CSV and SVG files in `dir`.
fn all(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let write = |name: &str, table: &mewa_report::Table| -> anyhow::Result<()> {
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
    let f = repro::table1(printed, 10)?;
    show(&f, &text("table1.svg"))?;
    write("table1.csv", &f.table)?;
    println!("\n== Seed 000 Fig. 4: idle share T_idle/T_HTTP, one connection (20 Mbit/s, IW 10)\n");
    let f = repro::idle(printed, 10)?;
    show(&f, &text("idle.svg"))?;
    write("idle.csv", &f.table)?;
    println!("\n   the same with IW 4 (RFC 3390, the paper's reference [9]; see docs/MODEL.md)\n");
    let f = repro::idle(printed, 4)?;
    show(&f, &text("idle-iw4.svg"))?;
    write("idle-iw4.csv", &f.table)?;
    println!("\n== Seed 001 Figs. 4–5: IW_opt over computation share 1–95% (α = 1/3), stop test as printed\n");
    show(&repro::iw(RatioMode::Cumulative, false)?, &text("iw.svg"))?;
    write("iw.csv", &repro::iw(RatioMode::Cumulative, true)?.table)?;
    println!("\n   the same with a per-step (marginal) stop test\n");
    show(
        &repro::iw(RatioMode::Marginal, false)?,
        &text("iw-marginal.svg"),
    )?;
    write(
        "iw-marginal.csv",
        &repro::iw(RatioMode::Marginal, true)?.table,
    )?;
    println!("\n== Seed 002 Fig. 1: cumulative bytes per RTT, IW 10 × 1500 B\n");
    let f = repro::fld(8);
    show(&f, &text("fld.svg"))?;
    write("fld.csv", &f.table)?;
    println!("\nCSV and SVG files are in {}", dir.display());
    Ok(())
}
