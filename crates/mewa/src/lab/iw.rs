//! `mewa lab iw`.

use std::path::PathBuf;

use clap::Args;
use mewa_lab::iw::{Arm, Config, Iw, Transport};

use super::args::{absolute, CaArgs, RunArgs};
use crate::units;

/// `mewa lab iw`'s flags.
#[derive(Debug, Args)]
pub struct IwArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Your own pages instead of complat: a corpus JSON or recordings
    /// (their computation latency is their scripts' compute time).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable), e.g. -s35.
    #[arg(long = "page")]
    pages: Vec<String>,
    /// complat computation shares, comma-separated, 0 to 0.95
    /// [default: 0,0.05,...,0.95].
    #[arg(long, value_delimiter = ',')]
    shares: Vec<f64>,
    /// Wired RTTs added to the radio's 25 ms, comma-separated
    /// [default: 25ms,75ms,125ms].
    #[arg(long, value_delimiter = ',', value_parser = units::rtt_ms)]
    wired_rtt: Vec<u64>,
    /// Transports: h3 (QUIC), h2 (TCP) [default: h3,h2].
    #[arg(long, value_delimiter = ',')]
    transport: Vec<Transport>,
    /// Arms: default (IW 10), aware (seed 001), fixed (--fixed-iw for every
    /// page) [default: default,aware,fixed].
    #[arg(long, value_delimiter = ',')]
    arm: Vec<Arm>,
    /// The fixed arm's window, segments [default: 100].
    #[arg(long)]
    fixed_iw: Option<u32>,
    /// Seed 001's policy threshold alpha [default: 1/3].
    #[arg(long)]
    alpha: Option<f64>,
    /// The origin's largest grant, segments [default: 200].
    #[arg(long)]
    iw_max: Option<u32>,
    /// Back-to-back loads per page, arm, transport and RTT [default: 30].
    #[arg(long)]
    runs: Option<usize>,
    /// The bottleneck queue as the time it takes to drain at the radio's
    /// rate [default: 100ms].
    #[arg(long, value_parser = units::ms)]
    queue: Option<u64>,
    /// The origin's net.ipv4.tcp_slow_start_after_idle: on (the kernel's
    /// default: a TCP connection idle past its RTO, as during a page's
    /// computation, starts again from IW 10) or off [default: the kernel's].
    #[arg(long, value_name = "on|off", value_parser = units::on_off)]
    slow_start_after_idle: Option<bool>,
    #[command(flatten)]
    ca: CaArgs,
}

impl IwArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let mut c: Config = self.run.base()?;
        if let Some(p) = &self.corpus {
            c.corpus.path = Some(absolute(p)?);
        }
        if !self.pages.is_empty() {
            c.corpus.pages = self.pages.clone();
        }
        if !self.shares.is_empty() {
            c.shares = self.shares.clone();
        }
        if !self.wired_rtt.is_empty() {
            c.wired_rtts_ms = self.wired_rtt.clone();
        }
        if !self.transport.is_empty() {
            c.protocols = self.transport.clone();
        }
        if !self.arm.is_empty() {
            c.arms = self.arm.clone();
        }
        c.fixed_iw = self.fixed_iw.unwrap_or(c.fixed_iw);
        c.alpha = self.alpha.unwrap_or(c.alpha);
        c.iw_max = self.iw_max.unwrap_or(c.iw_max);
        c.runs = self.runs.unwrap_or(c.runs);
        c.queue_ms = self.queue.unwrap_or(c.queue_ms);
        if self.slow_start_after_idle.is_some() {
            c.slow_start_after_idle = self.slow_start_after_idle;
        }
        self.ca.apply(&mut c.origin)?;
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }

    pub(super) fn run(&self) -> anyhow::Result<()> {
        super::run_experiment::<Iw>(&self.run, || self.config())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabSub};
    use super::*;

    #[test]
    fn iw_flags_set_its_configuration() {
        let iw_args = |args: &[&str]| {
            let mut v = vec!["iw"];
            v.extend_from_slice(args);
            let LabSub::Iw(a) = parse(&v) else {
                panic!("not iw")
            };
            a
        };
        assert_eq!(iw_args(&[]).config().unwrap(), Config::default());
        let c = iw_args(&[
            "--shares",
            "0,0.35",
            "--wired-rtt",
            "75ms",
            "--transport",
            "h3",
            "--arm",
            "default,aware",
            "--fixed-iw",
            "64",
            "--alpha",
            "0.5",
            "--iw-max",
            "150",
            "--runs",
            "3",
            "--page",
            "400k",
            "--slow-start-after-idle",
            "off",
        ])
        .config()
        .unwrap();
        assert_eq!(c.slow_start_after_idle, Some(false));
        assert_eq!(c.shares, vec![0.0, 0.35]);
        assert_eq!(c.wired_rtts_ms, vec![75]);
        assert_eq!(c.protocols, vec![Transport::H3]);
        assert_eq!(c.arms, vec![Arm::Default, Arm::Aware]);
        assert_eq!((c.fixed_iw, c.iw_max, c.runs), (64, 150, 3));
        assert_eq!(c.alpha, 0.5);
        assert_eq!(c.corpus.pages, vec!["400k".to_string()]);
    }
}
