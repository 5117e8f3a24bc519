//! `mewa`: Mobile Edge Web Acceleration — one command line over the models,
//! the hint format, the link emulator, the origin, the edge, the client and
//! the lab. It only parses arguments: every command's work is library code
//! in the crates below it (docs/ARCHITECTURE.md).

mod accel;
mod cc;
mod client;
mod corpus;
mod edge;
mod hint;
mod lab;
mod link;
mod model;
mod origin;
mod output;
mod units;

use clap::{Parser, Subcommand};

/// Mobile Edge Web Acceleration: faster mobile page loads with help from the
/// network edge, and a lab that measures by how much.
#[derive(Debug, Parser)]
#[command(name = "mewa", version, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Reproduce the papers' tables and figures from the models (all of them
    /// when no subcommand is given).
    Model(model::ModelCmd),
    /// Build, inspect and measure Mobile Edge Hints.
    Hint(hint::HintCmd),
    /// Run a program behind an emulated cellular link (delay, rate or
    /// mahimahi trace, queue, loss, radio states), or plot a link log.
    Link(Box<link::LinkCmd>),
    /// Generate, show and import page corpora (docs/CORPUS.md).
    Corpus(corpus::CorpusCmd),
    /// Serve a page corpus over HTTP/1.1, HTTP/2 and HTTP/3 for all its
    /// hostnames (docs/ORIGIN.md).
    Origin(origin::OriginCmd),
    /// The Mobile Edge Hint server: DNS with page hints, page-metadata
    /// store, latency monitor, admin API (docs/EDGE.md).
    Edge(edge::EdgeCmd),
    /// The hint-aware client: ask the edge for a page's hint and show the
    /// plan (connections, assignment) or the fallback reason, or run the
    /// local proxy a browser uses.
    Client(client::ClientCmd),
    /// Experiments over emulated links with real kernel TCP, the built-in
    /// page loader and headless Chromium: the T_HTTP baseline, single
    /// loads, and seed 000's Mobile Edge Hint experiment (needs root;
    /// docs/LAB.md).
    Lab(Box<lab::LabCmd>),
    /// Benchmarks that print figures: the link emulator against a veth
    /// pair, the origin against nghttpd and nginx, the edge's DNS against
    /// NSD, the proxy against a direct connection.
    Bench(mewa_bench::BenchCmd),
    /// Seed 004's accelerator: a reverse-proxy cache that folds a page's
    /// domains into its own host so one HTTP/2 connection carries the page
    /// (docs/ACCEL.md).
    Accel(accel::AccelCmd),
    /// Register, remove and inspect mewa's BPF TCP congestion controls
    /// (FLD_TCP as mewa_fld; docs/CC.md).
    Cc(cc::CcCmd),
}

/// Sends the libraries' `tracing` events to stderr: `RUST_LOG` filters
/// them (`RUST_LOG=mewa_edge=debug`), info and above by default. With
/// `RUST_LOG` set (someone is debugging) each line has its UTC time, to
/// line it up with other logs (a Chromium NetLog, a pcap).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env();
    let timed = filter.is_ok();
    let filter = filter.unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = if timed {
        b.try_init()
    } else {
        b.without_time().try_init()
    };
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging();
    let res = match cli.cmd {
        Cmd::Model(m) => model::run(m).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Hint(h) => hint::run(h).map(|()| std::process::ExitCode::SUCCESS),
        // The wrapped program's exit status is mewa's.
        Cmd::Link(l) => link::run(*l),
        Cmd::Corpus(c) => corpus::run(c).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Origin(o) => origin::run(o).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Edge(e) => edge::run(e).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Client(c) => client::run(c).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Lab(l) => lab::run(*l).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Accel(a) => accel::run(a).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Cc(c) => cc::run(c).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Bench(b) => mewa_bench::run(b)
            .map(|()| std::process::ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
