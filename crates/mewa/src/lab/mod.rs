//! `mewa lab`: the experiments of `mewa-lab` (docs/LAB.md), as flags.
//!
//! One module per experiment turns its flags into the experiment's
//! `Config`; [`run_experiment`] runs it the same way for every one of them
//! with a progress bar, prints the report's text and writes its result
//! folder. `--config FOLDER/config.json` starts from an earlier run's
//! configuration, flags given with it overriding its values; `--resume
//! FOLDER` continues an interrupted run; `--report FOLDER` rebuilds a
//! report. A flag left out takes the value of the `Config`'s `Default`,
//! which the help shows. Every quantity takes a unit ([`crate::units`]).

mod accel;
mod args;
mod baseline;
mod cellular;
mod compare;
mod fld;
mod iw;
mod load;
mod meh;
mod parity;

use std::io::IsTerminal;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mewa_lab::experiment::{Experiment, Progress};
use mewa_report::Report;

use args::RunArgs;

/// `mewa lab …`
#[derive(Debug, Args)]
pub struct LabCmd {
    #[command(subcommand)]
    pub(crate) cmd: LabSub,
}

#[derive(Debug, Subcommand)]
pub(crate) enum LabSub {
    /// Seed 000's grid over one HTTP/2 connection, measured beside the
    /// T_HTTP model: 20 Mbit/s, RTT 50–150 ms, 10 runs per page and RTT.
    /// Needs root (network namespaces, TUN). Results go to a timestamped
    /// folder: config.json, meta.json, runs.csv, cells.csv, summary.csv,
    /// report.md, plots, HAR.
    Baseline(baseline::BaselineArgs),
    /// Load one page through an emulated link and print its metrics;
    /// optionally write the load as HAR 1.2 and as a JSON record.
    Load(load::LoadArgs),
    /// Seed 000's Mobile Edge Hint experiment: client ⇄ radio link ⇄ edge
    /// (mewa edge: DNS with hints, SQLite store, latency monitor) ⇄ wired
    /// link ⇄ origin, every page back to back with the hint (n planned
    /// connections, objects balanced by size) and without (one HTTP/2
    /// connection), 30 runs each. Needs root. Results: config.json,
    /// meta.json, runs.csv, pages.csv, report.md, cdf.svg, pages-box.svg.
    Meh(Box<meh::MehArgs>),
    /// The built-in loader against headless Chromium, both without hints,
    /// over the same link: per page, the median PLT and the moment every
    /// object had been requested, and where the time goes when the PLTs
    /// differ by more than 10 %. The check that the baseline every gain is
    /// measured against is as fast as a browser. Needs root and Chromium.
    /// Results: config.json, meta.json, parity.csv, report.md, parity.svg.
    Parity(parity::ParityArgs),
    /// Seed 002's FLD_TCP against Cubic at the server, with the kernel's
    /// FLD_TCP (`mewa cc load` first): bulk transfers, fairness, and pages
    /// under cross traffic (LTE, 3G) with the paper's page metrics (for
    /// pages, --cc names the controls compared with cubic, comma-separated;
    /// default mewa_fld). Needs root. Results: config.json, meta.json, CSV
    /// tables, report.md, SVG.
    Fld(fld::FldArgs),
    /// Seed 001's content-aware initial window: the complat pages (400,
    /// 1000, 2400 KB; computation 0-95 %) over a 25 ms, 60 Mbit/s radio
    /// plus 25/75/125 ms wired RTT, over QUIC and TCP, with IW 10, the
    /// window the client computes (Algorithm 1) and asks for, and a fixed
    /// large one. The origin grants it (`mewa cc load` first for TCP).
    /// Needs root. Results: config.json, meta.json, completion.csv,
    /// targets.csv, cost.csv, shares.csv, report.md, SVG.
    Iw(iw::IwArgs),
    /// Seed 004's accelerator: the accel7 page (42 images on 7 domains,
    /// 320 KB) at RTT 150 ms, uplink 1024 kbit/s, downlink 128-4096
    /// kbit/s, over HTTP/1.1, HTTPS, HTTP/2 to each domain and HTTP/2
    /// through `mewa accel` (cache emptied before each load, and warm).
    /// Headless Chromium by default (--tool loader for a quick sweep).
    /// Needs root. Results: config.json, meta.json, runs.jsonl,
    /// plt_chromium.csv, report.md, plt_chromium.svg (like seed 004 Fig. 6).
    Accel(accel::AccelArgs),
    /// Seed 003's cellular TCP study: pages loaded one after another with
    /// think time, on one browsing session per protocol (connections kept
    /// across loads), through the 3G or LTE radio model over fixed rates or
    /// a cellular trace, with each TCP knob changed from Linux's defaults
    /// (slow start after idle, the metrics cache, reno/cubic/bbr) and the
    /// RTO floor that covers the radio's promotion. Per load: PLT,
    /// throughput, the server's cwnd (TCP_INFO), timeouts, and spurious
    /// retransmissions seen on the link. The built-in loader by default;
    /// --browser chromium for headless Chromium (the headline table).
    /// Needs root. Results: config.json,
    /// meta.json, table2.csv (seed 003 Table 2 beside ours), knobs.csv,
    /// fix.csv, runs.csv, report.md, cwnd-*.svg.
    Cellular(cellular::CellularArgs),
    /// Two `mewa lab meh` result folders compared: for every Chromium arm
    /// both have, the second folder's loads against the first's, paired by
    /// page and run (the same stretch of the trace when both ran it), on
    /// PLT, onload, FCP, LCP and Speed Index: the median change over pages
    /// with a bootstrap 95 % interval, the Wilcoxon signed-rank p-value and
    /// the pairs won. No root needed.
    Compare(compare::CompareArgs),
}

/// Runs `mewa lab …`.
pub fn run(cmd: LabCmd) -> anyhow::Result<()> {
    if let LabSub::Compare(a) = &cmd.cmd {
        // Reads two folders: no testbed, no root.
        return a.run();
    }
    namespaces_cleaned_up()?;
    match cmd.cmd {
        LabSub::Baseline(a) => a.run(),
        LabSub::Load(a) => a.run(),
        LabSub::Meh(a) => a.run(),
        LabSub::Parity(a) => a.run(),
        LabSub::Fld(a) => a.run(),
        LabSub::Iw(a) => a.run(),
        LabSub::Accel(a) => a.run(),
        LabSub::Cellular(a) => a.run(),
        LabSub::Compare(a) => a.run(),
    }
}

/// Runs an experiment as `run` says: a new run of the configuration
/// `config` builds from the flags, the continuation of an interrupted one
/// (`--resume`), or its report again (`--report`); then prints the report
/// and writes it. `--resume` and `--report` take the folder's own
/// configuration, so flags that would change it are refused.
pub(crate) fn run_experiment<E: Experiment>(
    run: &RunArgs,
    config: impl Fn() -> anyhow::Result<E::Config>,
) -> anyhow::Result<()>
where
    E::Config: Default + PartialEq,
{
    let name = E::COMMAND;
    if let Some(dir) = run.report.as_ref().or(run.resume.as_ref()) {
        if run.out.is_some() || config()? != E::Config::default() {
            bail!(
                "{name}: --resume and --report use the folder's own configuration \
                 ({}); give no other flags with them",
                dir.join("config.json").display()
            );
        }
    }
    let report = if let Some(dir) = &run.report {
        E::report_again(dir)
            .with_context(|| format!("{}: not a `{name}` result folder", dir.display()))?
    } else if let Some(dir) = &run.resume {
        with_bar(|p| E::resume(dir, p))
            .with_context(|| format!("{name}: continuing {}", dir.display()))?
    } else {
        let c = config()?;
        with_bar(|p| E::run(&c, p)).with_context(|| name.to_string())?
    };
    finish(&report)
}

/// Every lab command builds its testbed in named network namespaces
/// (`mewa-<pid>-…`), which outlive the process unless deleted: removes
/// those that dead runs left, and makes SIGINT, SIGTERM and SIGHUP delete
/// this run's (killing what runs inside them, such as a browser) before
/// exiting, as `mewa link` does. Without root there is nothing to clean
/// (the experiment itself then says it needs root).
fn namespaces_cleaned_up() -> anyhow::Result<()> {
    if mewa_lab::experiment::needs_root().is_ok() {
        match mewa_link::runtime::cleanup_stale() {
            Ok(r) if !r.is_empty() => eprintln!(
                "mewa lab: removed what dead runs left: namespaces {:?}, devices {:?}, processes {:?}",
                r.namespaces, r.devices, r.killed
            ),
            Ok(_) => {}
            Err(e) => eprintln!("mewa lab: warning: stale cleanup failed: {e}"),
        }
    }
    mewa_link::runtime::teardown_on_signals().context("installing the signal teardown")
}

/// Prints the report, writes its folder and names it.
fn finish(report: &dyn Report) -> anyhow::Result<()> {
    let dir = report.write()?;
    print!("{}", report.text());
    if let Some(dir) = dir {
        println!("results: {}", dir.display());
    }
    Ok(())
}

/// Runs `f` with a progress bar on a terminal, or a log line every 5 %
/// without one. The experiment's first step gives the total (and, for a
/// resumed run, the loads already done, which do not count towards the
/// rate the ETA is estimated from).
fn with_bar<R>(f: impl FnOnce(&Progress) -> R) -> R {
    let pb = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:32}] {pos}/{len} loads, eta {eta}  {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    let tty = std::io::stderr().is_terminal();
    let bar = pb.clone();
    let mut first = true;
    let progress = Progress::new(move |s| {
        bar.set_length(s.total as u64);
        bar.set_position(s.done as u64);
        if std::mem::take(&mut first) {
            bar.reset_eta();
        }
        bar.set_message(s.what.to_string());
        let step = (s.total / 20).max(1);
        if !tty && (s.done % step == 0 || s.done == s.total) {
            eprintln!("[{}/{}] {}", s.done, s.total, s.what);
        }
    });
    let out = f(&progress);
    pb.finish_and_clear();
    out
}

/// Parses `mewa lab ARGS…` for the modules' tests.
#[cfg(test)]
pub(crate) fn parse(args: &[&str]) -> LabSub {
    use clap::Parser;
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: LabSub,
    }
    let mut v = vec!["lab"];
    v.extend_from_slice(args);
    Cli::try_parse_from(v).expect("parses").cmd
}

/// What `mewa lab ARGS…` says when it does not parse (its help included).
#[cfg(test)]
pub(crate) fn parse_error(args: &[&str]) -> String {
    use clap::Parser;
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: LabSub,
    }
    let mut v = vec!["lab"];
    v.extend_from_slice(args);
    Cli::try_parse_from(v)
        .err()
        .map(|e| e.render().to_string())
        .unwrap_or_default()
}
