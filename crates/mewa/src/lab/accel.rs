//! `mewa lab accel`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use mewa_lab::accel;
use mewa_lab::experiment::CorpusChoice;

use super::args::{absolute, CaArgs, RunArgs};
use crate::units;

/// `mewa lab accel`'s flags.
#[derive(Debug, Args)]
pub struct AccelArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Your own pages instead of accel7: a corpus JSON or recordings (the
    /// page's main host is accelerated, every other host folded).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable).
    #[arg(long = "page")]
    pages: Vec<String>,
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
    /// five]; accel-meh (the warm accelerator with the Mobile Edge Hint
    /// client's connection count and size balancing) with --tool loader.
    #[arg(long, value_delimiter = ',')]
    variant: Vec<String>,
    /// Tools: chromium (headline), loader (quick sweep) [default: chromium].
    #[arg(long, value_delimiter = ',')]
    tool: Vec<String>,
    /// Chromium binary [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Loads per page, variant, tool and rate [default: 10].
    #[arg(long)]
    runs: Option<usize>,
    /// The origins' Cache-Control max-age [default: 3600s].
    #[arg(long, value_parser = max_age)]
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
    fn config(&self) -> anyhow::Result<accel::AccelLabConfig> {
        let mut c: accel::AccelLabConfig = self.run.base()?;
        if let Some(p) = &self.corpus {
            c.corpus = Some(CorpusChoice {
                path: Some(absolute(p)?),
                pages: self.pages.clone(),
            });
        } else if !self.pages.is_empty() {
            c.corpus = Some(CorpusChoice {
                path: None,
                pages: self.pages.clone(),
            });
        }
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
        if let Some(d) = &self.ca.ca_dir {
            c.ca_dir = Some(absolute(d)?);
        }
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        if let Some(dir) = &self.run.report {
            let report = accel::report_again(dir).with_context(|| {
                format!("{}: not a mewa lab accel result folder", dir.display())
            })?;
            return super::finish(&report);
        }
        let c = self.config()?;
        let report = super::with_bar(|p| accel::run(&c, p)).context("accel experiment")?;
        super::finish(&report)
    }
}

/// A max-age in whole seconds that fits a `Cache-Control` header.
fn max_age(s: &str) -> Result<u32, String> {
    u32::try_from(units::secs(s)?).map_err(|_| format!("{s}: too long"))
}
