//! `mewa`: Mobile Edge Web Acceleration — one command line over the models, the
//! hint format and (as they land) the edge, client, link emulator and lab.

mod hint;
// Called by `mewa link plot` (crates/mewa/src/link.rs).
#[allow(dead_code)]
mod linkplot;
mod model;
mod output;
mod plot;

use clap::{Parser, Subcommand};

/// Mobile Edge Web Acceleration: faster mobile page loads with help from the
/// network edge, and a lab that measures by how much.
#[derive(Debug, Parser)]
#[command(name = "mewa", version, about, long_about = None)]
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Model(m) => model::run(m),
        Cmd::Hint(h) => hint::run(h),
    };
    match res {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
