//! `mewa lab parity`.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::parity::{Config, Parity};

use super::args::{absolute, CorpusArgs, OriginArgs, RunArgs, TraceArgs};
use crate::units;

/// `mewa lab parity`'s flags.
#[derive(Debug, Args)]
pub struct ParityArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
    #[command(flatten)]
    origin: OriginArgs,
    /// Loads per page by each of the two [default: 5].
    #[arg(long)]
    runs: Option<usize>,
    /// Link rate both ways [default: 32mbit].
    #[arg(long, conflicts_with = "trace", value_parser = units::rate)]
    rate: Option<u64>,
    /// Round trip of the link [default: 65ms].
    #[arg(long, value_parser = units::rtt_ms)]
    rtt: Option<u64>,
    #[command(flatten)]
    trace: TraceArgs,
    /// Chromium binary [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
}

impl ParityArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
        self.origin.apply(&mut c.origin)?;
        c.runs = self.runs.unwrap_or(c.runs);
        if let Some(r) = self.rate {
            c.rate_bps = r;
            c.trace = None;
        }
        c.rtt_ms = self.rtt.unwrap_or(c.rtt_ms);
        self.trace.apply(&mut c.trace, &mut c.uplink)?;
        if let Some(b) = &self.chromium {
            c.chromium = absolute(b)?;
        }
        if let Some(o) = &self.run.out {
            c.out = Some(o.clone());
        }
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Parity>(&self.run, || self.config())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabSub};
    use super::*;

    #[test]
    fn no_flags_give_the_library_defaults() {
        let LabSub::Parity(a) = parse(&["parity"]) else {
            panic!("not parity")
        };
        assert_eq!(a.config().unwrap(), Config::default());
    }
}
