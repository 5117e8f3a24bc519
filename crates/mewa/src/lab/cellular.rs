//! `mewa lab cellular`.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::cellular::{Cellular, Config, Network, Radio, Setting};
use mewa_lab::experiment::Browser;
use mewa_loader::record::Protocol;

use super::args::{absolute, CaArgs, CorpusArgs, RunArgs};
use crate::units;

/// `mewa lab cellular`'s flags.
#[derive(Debug, Args)]
pub struct CellularArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Radios: 3g (2 s promotion, CELL_FACH after 5 s idle), lte (400 ms)
    /// [default: 3g,lte].
    #[arg(long, value_delimiter = ',')]
    radio: Vec<Radio>,
    /// Networks: fixed (3g: 2 Mbit/s down, 512 kbit/s up, 150 ms; lte: 10
    /// and 5 Mbit/s, 60 ms), trace (TMobile-UMTS-driving, TMobile-LTE-short)
    /// [default: fixed].
    #[arg(long, value_delimiter = ',')]
    network: Vec<Network>,
    /// Settings, each one knob changed from Linux's defaults: base,
    /// ssai-off, no-metrics, reno, bbr, rto-floor (the fix), frto-off (no
    /// F-RTO), ts-off (no TCP timestamps); or knobs joined by +
    /// (frto-off+ts-off+rto-floor), the fix then compared with the same
    /// setting without it [default: the eight single ones].
    #[arg(long, value_delimiter = ',')]
    setting: Vec<Setting>,
    /// Protocols: h1 (HTTP/1.1 over TLS, 6 per host), h2, h3 [default: h1,h2].
    #[arg(long, value_delimiter = ',')]
    protocol: Vec<Protocol>,
    /// The browser of every session: loader (the built-in loader, for
    /// sweeps; PLT = last object done) or chromium (headless Chromium, one
    /// process and profile per session kept across its loads, for the
    /// headline table; PLT = its onload time) [default: loader].
    #[arg(long, value_name = "loader|chromium")]
    browser: Option<Browser>,
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
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
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
        c.browser = self.browser.unwrap_or(c.browser);
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
        self.ca.apply(&mut c.origin)?;
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Cellular>(&self.run, || self.config())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, parse_error, LabSub};
    use super::*;

    fn args(a: &[&str]) -> CellularArgs {
        let mut v = vec!["cellular"];
        v.extend_from_slice(a);
        match parse(&v) {
            LabSub::Cellular(c) => c,
            other => panic!("not cellular: {other:?}"),
        }
    }

    #[test]
    fn no_flags_give_the_library_defaults_and_choices_are_typed() {
        assert_eq!(args(&[]).config().unwrap(), Config::default());
        let c = args(&[
            "--radio",
            "3g",
            "--setting",
            "base,frto-off+ts-off+rto-floor",
            "--protocol",
            "h1,h2",
            "--browser",
            "chromium",
            "--page",
            "meh15-01",
            "--think",
            "2s",
            "--queue",
            "500ms",
        ])
        .config()
        .unwrap();
        assert_eq!(c.radios, [Radio::ThreeG]);
        let settings: Vec<String> = c.settings.iter().map(Setting::to_string).collect();
        assert_eq!(settings, ["base", "frto-off+ts-off+rto-floor"]);
        assert_eq!(c.protocols, [Protocol::H1, Protocol::H2]);
        assert_eq!(c.browser, Browser::Chromium);
        assert_eq!(c.corpus.pages, ["meh15-01"]);
        assert_eq!((c.think_s, c.queue_ms), (2.0, Some(500)));
        for (flag, bad) in [
            ("--radio", "5g"),
            ("--network", "wired"),
            ("--setting", "reno+bbr"),
            ("--protocol", "spdy"),
            ("--browser", "firefox"),
            ("--think", "8"),
        ] {
            let e = parse_error(&["cellular", flag, bad]);
            assert!(e.contains(bad), "{flag} {bad}: {e}");
        }
    }
}
