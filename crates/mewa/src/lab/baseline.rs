//! `mewa lab baseline`.

use clap::Args;
use mewa_lab::baseline::{Baseline, Config};

use super::args::{CorpusArgs, OriginArgs, RunArgs};
use crate::units;

/// `mewa lab baseline`'s flags.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
    #[command(flatten)]
    origin: OriginArgs,
    /// Round-trip times, comma-separated [default: 50ms,75ms,100ms,125ms,150ms].
    #[arg(long, value_delimiter = ',', value_parser = units::rtt_ms)]
    rtt: Vec<u64>,
    /// Bottleneck rate both ways [default: 20mbit].
    #[arg(long, value_parser = units::rate)]
    rate: Option<u64>,
    /// Loads per page and RTT [default: 10].
    #[arg(long)]
    runs: Option<usize>,
    /// h2 over TLS instead of h2c (adds the TLS handshake's round trip,
    /// which the model does not count).
    #[arg(long)]
    tls: bool,
}

impl BaselineArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
        self.origin.apply(&mut c.origin)?;
        if !self.rtt.is_empty() {
            c.rtts_ms = self.rtt.clone();
        }
        c.rate_bps = self.rate.unwrap_or(c.rate_bps);
        c.runs = self.runs.unwrap_or(c.runs);
        c.tls |= self.tls;
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Baseline>(&self.run, || self.config())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabSub};
    use super::*;

    fn args(a: &[&str]) -> BaselineArgs {
        let mut v = vec!["baseline"];
        v.extend_from_slice(a);
        match parse(&v) {
            LabSub::Baseline(b) => b,
            other => panic!("not baseline: {other:?}"),
        }
    }

    #[test]
    fn no_flags_give_the_library_defaults_and_quantities_take_units() {
        assert_eq!(args(&[]).config().unwrap(), Config::default());
        let c = args(&["--rtt", "50ms,0.1s", "--rate", "32mbit"])
            .config()
            .unwrap();
        assert_eq!((c.rtts_ms, c.rate_bps), (vec![50, 100], 32_000_000));
        let e = super::super::parse_error(&["baseline", "--rtt", "100"]);
        assert!(e.contains("150ms"), "{e}");
    }
}
