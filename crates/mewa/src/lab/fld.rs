//! `mewa lab fld bulk|fairness|pages`.

use std::str::FromStr;

use clap::{Args, Subcommand};
use mewa_lab::experiment::Congestion;
use mewa_lab::fld::bulk::{self, Bulk};
use mewa_lab::fld::fairness::{self, Fairness};
use mewa_lab::fld::pages::{self, PageType, Pages, Setting};
use mewa_origin::quic_cc::QuicCc;

use super::args::{absolute, CaArgs, CorpusArgs, RunArgs};
use crate::units;

/// `mewa lab fld`'s subcommands.
#[derive(Debug, Args)]
pub struct FldArgs {
    #[command(subcommand)]
    which: FldSub,
}

#[derive(Debug, Subcommand)]
enum FldSub {
    /// One transfer per size and congestion control at a fixed RTT and
    /// rate: completion time, round trips, drops (seed 002's 500 kB in 4
    /// round trips against Reno's 6).
    Bulk(FldBulkArgs),
    /// A long FLD_TCP flow against a long flow of another control over a
    /// bounded queue: throughput over time and Jain's index once FLD_TCP
    /// is past 2 MB.
    Fairness(FldFairnessArgs),
    /// Pages through a link shared with cross traffic (seed 002's LTE and
    /// 3G settings), the server's connections alternating between cubic
    /// and FLD_TCP load by load: net transfer time per page type (Fig. 6),
    /// idle share (7), concurrency (8), connection durations (9-10), first
    /// objects per RTT (11), connection sizes.
    Pages(FldPagesArgs),
}

/// A QUIC controller on the command line, or `none` for TCP only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuicArg {
    /// This controller.
    Cc(QuicCc),
    /// No QUIC sender.
    None,
}

impl FromStr for QuicArg {
    type Err = mewa_origin::quic_cc::QuicCcError;
    fn from_str(s: &str) -> Result<QuicArg, Self::Err> {
        match s {
            "none" => Ok(QuicArg::None),
            s => s.parse().map(QuicArg::Cc),
        }
    }
}

/// A congestion control as a comma-separated list gives it (spaces around
/// the name allowed).
fn control(s: &str) -> Result<Congestion, String> {
    s.trim().parse().map_err(|e| format!("{e}"))
}

#[derive(Debug, Args)]
struct FldBulkArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Round trip [default: 40ms].
    #[arg(long, value_parser = units::rtt_ms)]
    rtt: Option<u64>,
    /// Bottleneck rate both ways [default: 20mbit].
    #[arg(long, value_parser = units::rate)]
    rate: Option<u64>,
    /// Bottleneck queue, e.g. 100kB [default: unbounded].
    #[arg(long, value_parser = units::size_usize)]
    queue: Option<usize>,
    /// Transfer sizes, comma-separated [default: 500kB,2MB].
    #[arg(long, value_delimiter = ',', value_parser = units::size)]
    size: Vec<u64>,
    /// TCP congestion controls, comma-separated [default: reno,cubic,bbr,mewa_fld].
    #[arg(long, value_delimiter = ',', value_parser = control)]
    cc: Vec<Congestion>,
    /// QUIC controllers, comma-separated: cubic, newreno, bbr, fld, reno;
    /// `none` for TCP only [default: newreno,cubic,bbr,fld].
    #[arg(long, value_delimiter = ',')]
    quic_cc: Vec<QuicArg>,
    /// Transfers per size and control [default: 5].
    #[arg(long)]
    runs: Option<usize>,
}

#[derive(Debug, Args)]
struct FldFairnessArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Round trip [default: 40ms].
    #[arg(long, value_parser = units::rtt_ms)]
    rtt: Option<u64>,
    /// Bottleneck rate [default: 20mbit].
    #[arg(long, value_parser = units::rate)]
    rate: Option<u64>,
    /// Bottleneck queue [default: 100kB, one BDP].
    #[arg(long, value_parser = units::size_usize)]
    queue: Option<usize>,
    /// How long both flows run [default: 60s].
    #[arg(long, value_parser = units::secs)]
    duration: Option<u64>,
    /// Controls FLD_TCP runs against, comma-separated [default: cubic,reno].
    #[arg(long, value_delimiter = ',', value_parser = control)]
    against: Vec<Congestion>,
}

#[derive(Debug, Args)]
struct FldPagesArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    corpus: CorpusArgs,
    #[command(flatten)]
    ca: CaArgs,
    /// Congestion controls compared with cubic, comma-separated (mewa_fld,
    /// mewa_fld_paced, bbr, ...) [default: mewa_fld].
    #[arg(long, value_delimiter = ',', value_parser = control)]
    cc: Vec<Congestion>,
    /// Network settings, comma-separated: lte, 3g [default: lte,3g].
    #[arg(long, value_delimiter = ',')]
    setting: Vec<Setting>,
    /// Page types, comma-separated: h2 (HTTP/2 over TLS), h1 (HTTP/1.1 in
    /// the clear) with the built-in loader; chromium (headless Chromium,
    /// HTTP/2), chromium-h1 (headless Chromium with HTTP/2 off: HTTP/1.1
    /// over TLS, six connections per host) and chromium-http (headless
    /// Chromium over http://: HTTP/1.1 in the clear, generated pages only),
    /// their load time only [default: h2,h1].
    #[arg(long = "type", value_delimiter = ',')]
    types: Vec<PageType>,
    /// Loads per page, type and control [default: 11].
    #[arg(long)]
    loads: Option<usize>,
    /// Background flows instead of the settings' own (LTE: three cubic
    /// flows, 3G: two), comma-separated: a TCP congestion control (cubic,
    /// tcp:reno) or udp:RATE (udp:75mbit); `none` for no cross traffic.
    #[arg(long, value_delimiter = ',')]
    cross: Vec<String>,
    /// The bottleneck queue as the time it takes to drain at the setting's
    /// capacity; several, comma-separated, sweep it (each setting once per
    /// queue, with a plot of each control's change against cubic by queue)
    /// [default: 20ms].
    #[arg(long, value_delimiter = ',', value_parser = units::ms)]
    queue: Vec<u64>,
    /// Chromium binary for the chromium page types [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<std::path::PathBuf>,
}

impl FldArgs {
    pub(super) fn run(&self) -> anyhow::Result<()> {
        match &self.which {
            FldSub::Bulk(a) => super::run_experiment::<Bulk>(&a.run, || a.config()),
            FldSub::Fairness(a) => super::run_experiment::<Fairness>(&a.run, || a.config()),
            FldSub::Pages(a) => super::run_experiment::<Pages>(&a.run, || a.config()),
        }
    }
}

impl FldBulkArgs {
    fn config(&self) -> anyhow::Result<bulk::Config> {
        let mut c: bulk::Config = self.run.base()?;
        c.rtt_ms = self.rtt.unwrap_or(c.rtt_ms);
        c.rate_bps = self.rate.unwrap_or(c.rate_bps);
        c.queue_bytes = self.queue.or(c.queue_bytes);
        if !self.size.is_empty() {
            c.sizes = self.size.clone();
        }
        if !self.cc.is_empty() {
            c.ccs = self.cc.clone();
        }
        if !self.quic_cc.is_empty() {
            c.quic_ccs = self
                .quic_cc
                .iter()
                .filter_map(|q| match q {
                    QuicArg::Cc(q) => Some(*q),
                    QuicArg::None => None,
                })
                .collect();
        }
        c.runs = self.runs.unwrap_or(c.runs);
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

impl FldFairnessArgs {
    fn config(&self) -> anyhow::Result<fairness::Config> {
        let mut c: fairness::Config = self.run.base()?;
        c.rtt_ms = self.rtt.unwrap_or(c.rtt_ms);
        c.rate_bps = self.rate.unwrap_or(c.rate_bps);
        c.queue_bytes = self.queue.unwrap_or(c.queue_bytes);
        c.duration_s = self.duration.unwrap_or(c.duration_s);
        if !self.against.is_empty() {
            c.against = self.against.clone();
        }
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

impl FldPagesArgs {
    fn config(&self) -> anyhow::Result<pages::Config> {
        let mut c: pages::Config = self.run.base()?;
        self.corpus.apply(&mut c.corpus)?;
        self.ca.apply(&mut c.origin)?;
        // --cc names the controls compared with cubic (the origin's
        // listener always starts connections on cubic).
        if !self.cc.is_empty() {
            c.ccs = vec![Congestion::Cubic];
            for cc in &self.cc {
                if !c.ccs.contains(cc) {
                    c.ccs.push(cc.clone());
                }
            }
        }
        if !self.setting.is_empty() {
            c.settings = self.setting.clone();
        }
        if !self.types.is_empty() {
            c.protocols = self.types.clone();
        }
        c.loads = self.loads.unwrap_or(c.loads);
        if !self.queue.is_empty() {
            c.queue_ms = self.queue.clone();
        }
        if let Some(b) = &self.chromium {
            c.chromium = absolute(b)?;
        }
        if !self.cross.is_empty() {
            c.cross = Some(
                self.cross
                    .iter()
                    .filter(|f| *f != "none")
                    .map(|f| mewa_lab::cross::Flow::parse(f))
                    .collect::<Result<_, _>>()
                    .map_err(|e| anyhow::anyhow!("--cross {e}"))?,
            );
        }
        c.out = self.run.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, parse_error, LabSub};
    use super::*;

    fn fld_sub(args: &[&str]) -> FldSub {
        let mut v = vec!["fld"];
        v.extend_from_slice(args);
        let LabSub::Fld(a) = parse(&v) else {
            panic!("not fld")
        };
        a.which
    }

    #[test]
    fn fld_flags_set_their_configurations() {
        let FldSub::Bulk(a) = fld_sub(&["bulk"]) else {
            panic!("not bulk")
        };
        assert_eq!(a.config().unwrap(), bulk::Config::default());
        let FldSub::Bulk(a) = fld_sub(&[
            "bulk",
            "--rate",
            "100mbit",
            "--rtt",
            "20ms",
            "--size",
            "1kB,2kB",
            "--quic-cc",
            "none",
        ]) else {
            panic!("not bulk")
        };
        let c = a.config().unwrap();
        assert_eq!(
            (c.rate_bps, c.rtt_ms, c.sizes),
            (100_000_000, 20, vec![1000, 2000])
        );
        assert!(c.quic_ccs.is_empty());
        let FldSub::Fairness(a) = fld_sub(&["fairness", "--against", "reno", "--duration", "30s"])
        else {
            panic!("not fairness")
        };
        let c = a.config().unwrap();
        assert_eq!((c.against, c.duration_s), (vec![Congestion::Reno], 30));
        let FldSub::Pages(a) = fld_sub(&["pages"]) else {
            panic!("not pages")
        };
        assert_eq!(a.config().unwrap(), pages::Config::default());
        let FldSub::Pages(a) = fld_sub(&["pages", "--cross", "udp:75mbit", "--setting", "lte"])
        else {
            panic!("not pages")
        };
        let c = a.config().unwrap();
        assert_eq!(
            c.cross,
            Some(vec![mewa_lab::cross::Flow::Udp { bps: 75_000_000 }])
        );
        assert_eq!(c.settings, vec![Setting::Lte]);
        let FldSub::Pages(a) = fld_sub(&["pages", "--cross", "udp:fast"]) else {
            panic!("not pages")
        };
        assert!(a.config().unwrap_err().to_string().contains("udp:fast"));
        let FldSub::Pages(a) = fld_sub(&["pages", "--cross", "none"]) else {
            panic!("not pages")
        };
        assert_eq!(a.config().unwrap().cross, Some(Vec::new()));
        let FldSub::Pages(a) = fld_sub(&["pages", "--cc", "bbr"]) else {
            panic!("not pages")
        };
        assert_eq!(
            a.config().unwrap().ccs,
            vec![Congestion::Cubic, Congestion::Bbr]
        );
        let FldSub::Pages(a) = fld_sub(&["pages", "--cc", "mewa_fld, mewa_fld_paced,cubic"]) else {
            panic!("not pages")
        };
        assert_eq!(
            a.config().unwrap().ccs,
            [Congestion::Cubic, Congestion::Fld, Congestion::FldPaced]
        );
        // Its --help says what --cc means here, not the origin's meaning.
        let help = parse_error(&["fld", "pages", "--help"]);
        assert!(help.contains("compared with cubic"), "{help}");
        assert!(!help.contains("of the origin's sockets"), "{help}");
        // Quantities take units.
        let e = parse_error(&["fld", "bulk", "--size", "500000"]);
        assert!(e.contains("500kB"), "{e}");
    }

    #[test]
    fn fld_names_are_typed_and_every_experiment_resumes_and_reports() {
        // A misspelt name is refused with the accepted ones.
        let e = parse_error(&["fld", "pages", "--type", "h3"]);
        assert!(e.contains("chromium-http"), "{e}");
        let e = parse_error(&["fld", "pages", "--setting", "5g"]);
        assert!(e.contains("lte or 3g"), "{e}");
        let e = parse_error(&["fld", "bulk", "--quic-cc", "vegas"]);
        assert!(e.contains("newreno"), "{e}");
        let FldSub::Pages(a) =
            fld_sub(&["pages", "--type", "chromium-h1,h2", "--queue", "10ms,50ms"])
        else {
            panic!("not pages")
        };
        let c = a.config().unwrap();
        assert_eq!(c.protocols, [PageType::ChromiumH1, PageType::H2]);
        assert_eq!(c.queue_ms, [10, 50]);
        // --resume and --report on each of the three.
        for sub in ["bulk", "fairness", "pages"] {
            for flag in ["--resume", "--report"] {
                let run = match fld_sub(&[sub, flag, "/tmp/x"]) {
                    FldSub::Bulk(a) => a.run,
                    FldSub::Fairness(a) => a.run,
                    FldSub::Pages(a) => a.run,
                };
                let dir = run.resume.or(run.report);
                assert_eq!(dir.as_deref(), Some(std::path::Path::new("/tmp/x")));
            }
        }
    }
}
