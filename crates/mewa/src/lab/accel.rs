//! `mewa lab accel`.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::accel::{Accel, Config, Variant};
use mewa_lab::experiment::Browser;

use super::args::{absolute, CaArgs, CorpusArgs, RunArgs};
use crate::units;

/// `mewa lab accel`'s flags.
#[derive(Debug, Args)]
pub struct AccelArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Your own pages instead of accel7 (each page's main host is
    /// accelerated, every other host folded).
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Downlink rates, comma-separated
    /// [default: 128kbit,256kbit,512kbit,1024kbit,2048kbit,4096kbit].
    #[arg(long, value_delimiter = ',', value_parser = units::kbit)]
    down: Vec<u64>,
    /// Uplink rate [default: 1024kbit].
    #[arg(long, value_parser = units::kbit)]
    up: Option<u64>,
    /// Round trip of the emulated link [default: 150ms].
    #[arg(long, value_parser = units::rtt_ms)]
    rtt: Option<u64>,
    /// Variants: h1, https, h2, accel-cold, accel-warm [default: these
    /// five]; the peers a browser and a CDN already have, direct to the
    /// origins, with --tool chromium: predictor (a returning visitor),
    /// early-hints (103 Early Hints from the origins), h3 (HTTP/3);
    /// accel-meh (the warm accelerator with the Mobile Edge Hint client's
    /// connection count and size balancing) with --tool loader.
    #[arg(long, value_delimiter = ',')]
    variant: Vec<Variant>,
    /// Tools: chromium (headline), loader (quick sweep) [default: chromium].
    #[arg(long, value_delimiter = ',')]
    tool: Vec<Browser>,
    /// Chromium binary [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Loads per page, variant, tool and rate [default: 10].
    #[arg(long)]
    runs: Option<usize>,
    /// The origins' Cache-Control max-age [default: 3600s].
    #[arg(long, value_parser = units::secs_u32)]
    max_age: Option<u32>,
    /// Chromium looks names up with a DNS server on the edge, across the
    /// link (on), or is given them with --host-resolver-rules (off)
    /// [default: on].
    #[arg(long, value_name = "on|off", value_parser = units::on_off)]
    dns: Option<bool>,
    /// Keep each Chromium load's NetLog in the result folder's chromium/
    /// (RATE-VARIANT-PAGE-RUN.netlog.json, a few MB each).
    #[arg(long)]
    keep_netlogs: bool,
    #[command(flatten)]
    ca: CaArgs,
}

impl AccelArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
        if !self.down.is_empty() {
            c.down_kbps = self.down.clone();
        }
        c.up_kbps = self.up.unwrap_or(c.up_kbps);
        c.rtt_ms = self.rtt.unwrap_or(c.rtt_ms);
        if !self.variant.is_empty() {
            c.variants = self.variant.clone();
        }
        if !self.tool.is_empty() {
            c.tools = self.tool.clone();
        }
        if let Some(b) = &self.chromium {
            c.chromium = absolute(b)?;
        }
        c.runs = self.runs.unwrap_or(c.runs);
        c.max_age_s = self.max_age.unwrap_or(c.max_age_s);
        c.dns = self.dns.unwrap_or(c.dns);
        c.keep_netlogs |= self.keep_netlogs;
        self.ca.apply(&mut c.origin)?;
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Accel>(&self.run, || self.config())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, parse_error, LabSub};
    use super::*;

    #[test]
    fn flags_are_typed_and_take_units() {
        let LabSub::Accel(a) = parse(&["accel"]) else {
            panic!("not accel")
        };
        assert_eq!(a.config().unwrap(), Config::default());
        let LabSub::Accel(a) = parse(&[
            "accel",
            "--down",
            "256kbit,1mbit",
            "--rtt",
            "150ms",
            "--tool",
            "loader",
            "--variant",
            "h2,accel-warm",
        ]) else {
            panic!("not accel")
        };
        let c = a.config().unwrap();
        assert_eq!(c.down_kbps, vec![256, 1000]);
        assert_eq!(c.tools, vec![Browser::Loader]);
        assert_eq!(c.variants, vec![Variant::H2, Variant::AccelWarm]);
        for bare in [&["accel", "--rtt", "150"][..], &["accel", "--down", "512"]] {
            let e = parse_error(bare);
            assert!(e.contains("150ms") || e.contains("4096kbit"), "{e}");
        }
        assert!(parse_error(&["accel", "--variant", "spdy"]).contains("spdy"));
    }
}
