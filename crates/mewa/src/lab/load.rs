//! `mewa lab load`.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::load::{AssignRule, Config, Load};
use mewa_loader::record::Protocol;

use super::args::{CorpusArgs, OriginArgs, RunArgs};
use crate::units;

/// `mewa lab load`'s flags.
#[derive(Debug, Args)]
#[command(mut_arg("out", |a| a.help(
    "Also write a timestamped result folder (config.json, runs.jsonl, loads.csv, records, HAR) under this folder"
)))]
pub struct LoadArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
    #[command(flatten)]
    origin: OriginArgs,
    /// h1, h2 or h3 [default: h2].
    #[arg(long)]
    protocol: Option<Protocol>,
    /// TLS for h1/h2 (h3 always uses it).
    #[arg(long)]
    tls: bool,
    /// Connections: per host for h1 (default 6), per origin for h2/h3
    /// (default 1).
    #[arg(long)]
    connections: Option<usize>,
    /// How objects are spread over n h2/h3 connections: `least` (fewest
    /// outstanding bytes), `round-robin`, or `warm-first` (HTML/CSS/JS on the
    /// connection that carried the document, leaves by least outstanding)
    /// [default: least].
    #[arg(long)]
    assign: Option<AssignRule>,
    /// Pull dispatch for n > 1 h2/h3 connections: at most this much
    /// requested and not yet received per connection for images, fonts and
    /// media (e.g. 64kB); the rest wait for the first connection that
    /// drains (HTML, CSS and scripts are never held). Default: request every
    /// object as soon as it is found, as a browser does.
    #[arg(long, value_name = "SIZE", value_parser = units::size)]
    pull: Option<u64>,
    /// With --pull: a connection's budget grows to twice the bytes it
    /// delivered over this last span (about one RTT, e.g. 65ms), so a
    /// connection with a small window holds little; --pull is then the
    /// floor.
    #[arg(long, value_name = "DURATION", value_parser = units::ms)]
    pull_follow: Option<u64>,
    /// Round-trip time of the link [default: 100ms].
    #[arg(long, value_parser = units::rtt_ms)]
    rtt: Option<u64>,
    /// Bottleneck rate both ways [default: 20mbit].
    #[arg(long, value_parser = units::rate)]
    rate: Option<u64>,
    /// Write the load(s) as HAR 1.2 here.
    #[arg(long)]
    har: Option<PathBuf>,
    /// Write the raw load record(s) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl LoadArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
        self.origin.apply(&mut c.origin)?;
        c.protocol = self.protocol.unwrap_or(c.protocol);
        c.tls |= self.tls;
        c.connections = self.connections.or(c.connections);
        c.assign = self.assign.unwrap_or(c.assign);
        if let Some(bytes) = self.pull {
            // The configuration keeps whole kB.
            c.pull_kb = Some(bytes.div_ceil(1000));
        }
        c.pull_follow_ms = self.pull_follow.or(c.pull_follow_ms);
        c.rtt_ms = self.rtt.unwrap_or(c.rtt_ms);
        c.rate_bps = self.rate.unwrap_or(c.rate_bps);
        c.har = self.har.clone().or(c.har);
        c.json = self.json.clone().or(c.json);
        c.out = self.run.out.clone().or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Load>(&self.run, || self.config())?;
        if let Some(p) = &self.har {
            println!("HAR: {}", p.display());
        }
        if let Some(p) = &self.json {
            println!("records: {}", p.display());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabSub};
    use super::*;

    fn args(a: &[&str]) -> LoadArgs {
        let mut v = vec!["load"];
        v.extend_from_slice(a);
        match parse(&v) {
            LabSub::Load(l) => l,
            other => panic!("not load: {other:?}"),
        }
    }

    #[test]
    fn no_flags_give_the_library_defaults_and_quantities_take_units() {
        assert_eq!(args(&[]).config().unwrap(), Config::default());
        let c = args(&["--pull", "64kB", "--pull-follow", "65ms", "--rtt", "40ms"])
            .config()
            .unwrap();
        assert_eq!(
            (c.pull_kb, c.pull_follow_ms, c.rtt_ms),
            (Some(64), Some(65), 40)
        );
    }
}
