//! `mewa lab cellular`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use mewa_lab::cellular;
use mewa_lab::experiment::CorpusChoice;

use super::args::{absolute, CaArgs, RunArgs};
use crate::units;

/// `mewa lab cellular`'s flags.
#[derive(Debug, Args)]
pub struct CellularArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Your own pages instead of meh15: a corpus JSON or recordings.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable).
    #[arg(long = "page")]
    pages: Vec<String>,
    /// Radios: 3g (2 s promotion, CELL_FACH after 5 s idle), lte (400 ms)
    /// [default: 3g,lte].
    #[arg(long, value_delimiter = ',')]
    radio: Vec<String>,
    /// Networks: fixed (3g: 2 Mbit/s down, 512 kbit/s up, 150 ms; lte: 10
    /// and 5 Mbit/s, 60 ms), trace (TMobile-UMTS-driving, TMobile-LTE-short)
    /// [default: fixed].
    #[arg(long, value_delimiter = ',')]
    network: Vec<String>,
    /// Settings, each one knob changed from Linux's defaults: base,
    /// ssai-off, no-metrics, reno, bbr, rto-floor (the fix), frto-off (no
    /// F-RTO), ts-off (no TCP timestamps); or knobs joined by +
    /// (frto-off+ts-off+rto-floor), the fix then compared with the same
    /// setting without it [default: the eight single ones].
    #[arg(long, value_delimiter = ',')]
    setting: Vec<String>,
    /// Protocols: h1 (HTTP/1.1 over TLS, 6 per host), h2, h3 [default: h1,h2].
    #[arg(long, value_delimiter = ',')]
    protocol: Vec<String>,
    /// The browser of every session: loader (the built-in loader, for
    /// sweeps; PLT = last object done) or chromium (headless Chromium, one
    /// process and profile per session kept across its loads, for the
    /// headline table; PLT = its onload time) [default: loader].
    #[arg(long, value_name = "loader|chromium")]
    browser: Option<String>,
    /// Chromium binary for --browser chromium [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Times each page is loaded per session [default: 2].
    #[arg(long)]
    loads: Option<usize>,
    /// Think time before each load [default: 8s: 3G's radio is in
    /// CELL_FACH, LTE's in long DRX].
    #[arg(long, value_parser = units::secs_f64)]
    think: Option<f64>,
    /// TCP_INFO sampling period [default: 20ms].
    #[arg(long, value_parser = units::ms)]
    sample: Option<u64>,
    /// A drop-tail queue that drains in this long at the radio's fixed
    /// rate, each way, so a full queue drops (and ssthresh, which the
    /// metrics cache hands on, is set) [default: unbounded].
    #[arg(long, value_parser = units::ms)]
    queue: Option<u64>,
    /// Keep the link's pcaps in the result folder's pcap/.
    #[arg(long)]
    keep_pcaps: bool,
    #[command(flatten)]
    ca: CaArgs,
}

impl CellularArgs {
    fn config(&self) -> anyhow::Result<cellular::CellularConfig> {
        let mut c: cellular::CellularConfig = self.run.base()?;
        if let Some(p) = &self.corpus {
            c.corpus = CorpusChoice {
                path: Some(absolute(p)?),
                pages: self.pages.clone(),
            };
        } else if !self.pages.is_empty() {
            c.corpus.pages = self.pages.clone();
        }
        if !self.radio.is_empty() {
            c.radios = self.radio.clone();
        }
        if !self.network.is_empty() {
            c.networks = self.network.clone();
        }
        if !self.setting.is_empty() {
            c.settings = self.setting.clone();
        }
        if !self.protocol.is_empty() {
            c.protocols = self.protocol.clone();
        }
        if let Some(b) = &self.browser {
            c.browser = b.clone();
        }
        if let Some(b) = &self.chromium {
            c.chromium = absolute(b)?;
        }
        c.loads = self.loads.unwrap_or(c.loads);
        c.think_s = self.think.unwrap_or(c.think_s);
        c.sample_ms = self.sample.unwrap_or(c.sample_ms);
        if self.queue.is_some() {
            c.queue_ms = self.queue;
        }
        c.keep_pcaps |= self.keep_pcaps;
        if let Some(d) = &self.ca.ca_dir {
            c.origin.ca_dir = Some(absolute(d)?);
        }
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        if let Some(dir) = &self.run.report {
            let report = cellular::report_again(dir).with_context(|| {
                format!("{}: not a mewa lab cellular result folder", dir.display())
            })?;
            return super::finish(&report);
        }
        let c = self.config()?;
        let report = super::with_bar(|p| cellular::run(&c, p)).context("cellular experiment")?;
        super::finish(&report)
    }
}
