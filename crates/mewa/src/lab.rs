//! `mewa lab`: the experiments of `mewa-lab` (docs/LAB.md), as flags.
//!
//! Each subcommand turns its flags into the experiment's `Config`, runs it
//! with a progress bar, prints the report's text and writes its result
//! folder. `--config FOLDER/config.json` starts from a earlier run's
//! configuration; flags given with it override its values. A flag left out
//! takes the value of the `Config`'s `Default`, which the help shows.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mewa_lab::experiment::{find_trace, CorpusChoice, Experiment, OriginChoice, Progress};
use mewa_lab::load::AssignRule;
use mewa_lab::meh::{BrowserPages, Dispatch, Policy, Rrc};
use mewa_lab::{accel, baseline, cellular, fld, iw, load, meh, parity};
use mewa_link::core::parse_rate;
use mewa_loader::record::Protocol;
use mewa_report::read_config;
use mewa_report::Report;

/// `mewa lab …`
#[derive(Debug, Args)]
pub struct LabCmd {
    #[command(subcommand)]
    cmd: LabSub,
}

#[derive(Debug, Subcommand)]
enum LabSub {
    /// Seed 000's grid over one HTTP/2 connection, measured beside the
    /// T_HTTP model: 20 Mbit/s, RTT 50–150 ms, 10 runs per page and RTT.
    /// Needs root (network namespaces, TUN). Results go to a timestamped
    /// folder: config.json, meta.json, runs.csv, cells.csv, summary.csv,
    /// report.md, plots, HAR.
    Baseline(BaselineArgs),
    /// Load one page through an emulated link and print its metrics;
    /// optionally write the load as HAR 1.2 and as a JSON record.
    Load(LoadArgs),
    /// Seed 000's Mobile Edge Hint experiment: client ⇄ radio link ⇄ edge
    /// (mewa edge: DNS with hints, SQLite store, latency monitor) ⇄ wired
    /// link ⇄ origin, every page back to back with the hint (n planned
    /// connections, objects balanced by size) and without (one HTTP/2
    /// connection), 30 runs each. Needs root. Results: config.json,
    /// meta.json, runs.csv, pages.csv, report.md, cdf.svg, pages-box.svg.
    Meh(MehArgs),
    /// The built-in loader against headless Chromium, both without hints,
    /// over the same link: per page, the median PLT and the moment every
    /// object had been requested, and where the time goes when the PLTs
    /// differ by more than 10 %. The check that the baseline every gain is
    /// measured against is as fast as a browser. Needs root and Chromium.
    /// Results: config.json, meta.json, parity.csv, report.md, parity.svg.
    Parity(ParityArgs),
    /// Seed 002's FLD_TCP against Cubic at the server, with the kernel's
    /// FLD_TCP (`mewa cc load` first): bulk transfers, fairness, and pages
    /// under cross traffic (LTE, 3G) with the paper's page metrics (for
    /// pages, --cc names the controls compared with cubic, comma-separated;
    /// default mewa_fld). Needs root. Results: config.json, meta.json, CSV
    /// tables, report.md, SVG.
    Fld(FldArgs),
    /// Seed 001's content-aware initial window: the complat pages (400,
    /// 1000, 2400 KB; computation 0-95 %) over a 25 ms, 60 Mbit/s radio
    /// plus 25/75/125 ms wired RTT, over QUIC and TCP, with IW 10, the
    /// window the client computes (Algorithm 1) and asks for, and a fixed
    /// large one. The origin grants it (`mewa cc load` first for TCP).
    /// Needs root. Results: config.json, meta.json, completion.csv,
    /// targets.csv, cost.csv, shares.csv, report.md, SVG.
    Iw(IwArgs),
    /// Seed 004's accelerator: the accel7 page (42 images on 7 domains,
    /// 320 KB) at RTT 150 ms, uplink 1024 kbit/s, downlink 128-4096
    /// kbit/s, over HTTP/1.1, HTTPS, HTTP/2 to each domain and HTTP/2
    /// through `mewa accel` (cache emptied before each load, and warm).
    /// Headless Chromium by default (--tool loader for a quick sweep).
    /// Needs root. Results: config.json, meta.json, runs.jsonl,
    /// plt_chromium.csv, report.md, plt_chromium.svg (like seed 004 Fig. 6).
    Accel(AccelArgs),
    /// Seed 003's cellular TCP study: pages loaded one after another with
    /// think time, on one browsing session per protocol (connections kept
    /// across loads), through the 3G or LTE radio model over fixed rates or
    /// a cellular trace, with each TCP knob changed from Linux's defaults
    /// (slow start after idle, the metrics cache, reno/cubic/bbr) and the
    /// RTO floor that covers the radio's promotion. Per load: PLT,
    /// throughput, the server's cwnd (TCP_INFO), timeouts, and spurious
    /// retransmissions seen on the link. The built-in loader by default;
    /// --browser chromium for headless Chromium (the headline table).
    /// Needs root. Results: config.json,
    /// meta.json, table2.csv (seed 003 Table 2 beside ours), knobs.csv,
    /// fix.csv, runs.csv, report.md, cwnd-*.svg.
    Cellular(CellularArgs),
}

#[derive(Debug, Args)]
struct CellularArgs {
    /// Start from this configuration (a result folder's config.json);
    /// flags given as well override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Rebuild the report of an earlier run from its result folder (no
    /// loads).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    report: Option<PathBuf>,
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
    /// Think time before each load, s [default: 8: 3G's radio is in
    /// CELL_FACH, LTE's in long DRX].
    #[arg(long)]
    think: Option<f64>,
    /// TCP_INFO sampling period, ms [default: 20].
    #[arg(long)]
    sample_ms: Option<u64>,
    /// A drop-tail queue of this many ms at the radio's fixed rate, each
    /// way, so a full queue drops (and ssthresh, which the metrics cache
    /// hands on, is set) [default: unbounded].
    #[arg(long)]
    queue_ms: Option<u64>,
    /// Keep the link's pcaps in the result folder's pcap/.
    #[arg(long)]
    keep_pcaps: bool,
    /// Directory of the local test CA.
    #[arg(long)]
    ca_dir: Option<PathBuf>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl CellularArgs {
    fn config(&self) -> anyhow::Result<cellular::CellularConfig> {
        let mut c: cellular::CellularConfig = match &self.config {
            Some(p) => read_config(p)?,
            None => cellular::CellularConfig::default(),
        };
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
        c.sample_ms = self.sample_ms.unwrap_or(c.sample_ms);
        if self.queue_ms.is_some() {
            c.queue_ms = self.queue_ms;
        }
        c.keep_pcaps |= self.keep_pcaps;
        if let Some(d) = &self.ca_dir {
            c.origin.ca_dir = Some(absolute(d)?);
        }
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

#[derive(Debug, Args)]
struct AccelArgs {
    /// Start from this configuration (a result folder's config.json);
    /// flags given as well override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Rebuild the report of an earlier run from its result folder (no
    /// loads).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    report: Option<PathBuf>,
    /// Your own pages instead of accel7: a corpus JSON or recordings (the
    /// page's main host is accelerated, every other host folded).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable).
    #[arg(long = "page")]
    pages: Vec<String>,
    /// Downlink rates, kbit/s, comma-separated
    /// [default: 128,256,512,1024,2048,4096].
    #[arg(long, value_delimiter = ',')]
    down: Vec<u64>,
    /// Uplink rate, kbit/s [default: 1024].
    #[arg(long)]
    up: Option<u64>,
    /// Round trip of the emulated link, ms [default: 150].
    #[arg(long)]
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
    /// The origins' Cache-Control max-age, s [default: 3600].
    #[arg(long)]
    max_age: Option<u32>,
    /// Chromium looks names up with a DNS server on the edge, across the
    /// link (on), or is given them with --host-resolver-rules (off)
    /// [default: on].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    dns: Option<bool>,
    /// Keep each Chromium load's NetLog in the result folder's chromium/
    /// (RATE-VARIANT-PAGE-RUN.netlog.json, a few MB each).
    #[arg(long)]
    keep_netlogs: bool,
    /// Directory of the local test CA.
    #[arg(long)]
    ca_dir: Option<PathBuf>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl AccelArgs {
    fn config(&self) -> anyhow::Result<accel::AccelLabConfig> {
        let mut c: accel::AccelLabConfig = match &self.config {
            Some(p) => read_config(p)?,
            None => accel::AccelLabConfig::default(),
        };
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
        if let Some(d) = &self.ca_dir {
            c.ca_dir = Some(absolute(d)?);
        }
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

#[derive(Debug, Args)]
struct FldArgs {
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
    /// Write a pages run's report again from its result folder
    /// (config.json and result.json), with this build's tables.
    Report {
        /// The result folder (out/lab/fld-pages-…).
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
struct FldBulkArgs {
    /// Round trip [default: 40ms].
    #[arg(long)]
    rtt: Option<String>,
    /// Bottleneck rate both ways [default: 20mbit].
    #[arg(long)]
    rate: Option<String>,
    /// Bottleneck queue in bytes [default: unbounded].
    #[arg(long)]
    queue: Option<usize>,
    /// Transfer sizes in bytes, comma-separated [default: 500000,2000000].
    #[arg(long, value_delimiter = ',')]
    size: Vec<u64>,
    /// TCP congestion controls, comma-separated [default: reno,cubic,bbr,mewa_fld].
    #[arg(long, value_delimiter = ',')]
    cc: Vec<String>,
    /// QUIC controllers, comma-separated: cubic, newreno, bbr, fld, reno;
    /// `none` for TCP only [default: newreno,cubic,bbr,fld].
    #[arg(long, value_delimiter = ',')]
    quic_cc: Vec<String>,
    /// Transfers per size and control [default: 5].
    #[arg(long)]
    runs: Option<usize>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct FldFairnessArgs {
    /// Round trip [default: 40ms].
    #[arg(long)]
    rtt: Option<String>,
    /// Bottleneck rate [default: 20mbit].
    #[arg(long)]
    rate: Option<String>,
    /// Bottleneck queue in bytes [default: 100000, one BDP].
    #[arg(long)]
    queue: Option<usize>,
    /// Seconds both flows run [default: 60].
    #[arg(long)]
    duration: Option<u64>,
    /// Controls FLD_TCP runs against, comma-separated [default: cubic,reno].
    #[arg(long, value_delimiter = ',')]
    against: Vec<String>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct IwArgs {
    /// Start from this configuration (a result folder's config.json);
    /// flags given as well override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Rebuild the report of an earlier run from its result folder (no
    /// loads).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    report: Option<PathBuf>,
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
    /// [default: 25,75,125].
    #[arg(long, value_delimiter = ',')]
    wired_rtt: Vec<u64>,
    /// Transports: h3 (QUIC), h2 (TCP) [default: h3,h2].
    #[arg(long, value_delimiter = ',')]
    transport: Vec<String>,
    /// Arms: default (IW 10), aware (seed 001), fixed (--fixed-iw for every
    /// page) [default: default,aware,fixed].
    #[arg(long, value_delimiter = ',')]
    arm: Vec<String>,
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
    /// The bottleneck queue, ms at the radio's rate [default: 100].
    #[arg(long)]
    queue_ms: Option<u64>,
    /// The origin's net.ipv4.tcp_slow_start_after_idle: on (the kernel's
    /// default: a TCP connection idle past its RTO, as during a page's
    /// computation, starts again from IW 10) or off [default: the kernel's].
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    slow_start_after_idle: Option<bool>,
    /// Directory of the local test CA.
    #[arg(long)]
    ca_dir: Option<PathBuf>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl IwArgs {
    fn config(&self) -> anyhow::Result<iw::IwConfig> {
        let mut c: iw::IwConfig = match &self.config {
            Some(p) => read_config(p)?,
            None => iw::IwConfig::default(),
        };
        if let Some(p) = &self.corpus {
            c.corpus = Some(CorpusChoice {
                path: Some(absolute(p)?),
                pages: Vec::new(),
            });
        }
        if !self.pages.is_empty() {
            c.pages = self.pages.clone();
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
        c.queue_ms = self.queue_ms.unwrap_or(c.queue_ms);
        if self.slow_start_after_idle.is_some() {
            c.slow_start_after_idle = self.slow_start_after_idle;
        }
        if let Some(d) = &self.ca_dir {
            c.ca_dir = Some(absolute(d)?);
        }
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

/// `on` or `off`.
fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("`{s}`: give on or off")),
    }
}

#[derive(Debug, Args)]
// The corpus arguments' --cc means the origin's one control elsewhere;
// here it names the controls compared with cubic.
#[command(mut_arg("cc", |a| a.help(
    "Congestion controls compared with cubic, comma-separated (mewa_fld, mewa_fld_paced, bbr, ...) [default: mewa_fld]"
)))]
struct FldPagesArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Network settings, comma-separated: lte, 3g [default: lte,3g].
    #[arg(long, value_delimiter = ',')]
    setting: Vec<String>,
    /// Page types, comma-separated: h2 (HTTP/2 over TLS), h1 (HTTP/1.1 in
    /// the clear) with the built-in loader; chromium (headless Chromium,
    /// HTTP/2), chromium-h1 (headless Chromium with HTTP/2 off: HTTP/1.1
    /// over TLS, six connections per host) and chromium-http (headless
    /// Chromium over http://: HTTP/1.1 in the clear, generated pages only),
    /// their load time only [default: h2,h1].
    #[arg(long = "type", value_delimiter = ',')]
    types: Vec<String>,
    /// Loads per page, type and control [default: 11].
    #[arg(long)]
    loads: Option<usize>,
    /// Background flows instead of the settings' own (LTE: three cubic
    /// flows, 3G: two), comma-separated: a TCP congestion control (cubic,
    /// tcp:reno) or udp:RATE (udp:75mbit); `none` for no cross traffic.
    #[arg(long, value_delimiter = ',')]
    cross: Vec<String>,
    /// The bottleneck queue in ms at the setting's capacity; several,
    /// comma-separated, sweep it (each setting once per queue, with a plot
    /// of each control's change against cubic by queue) [default: 20].
    #[arg(long, value_delimiter = ',')]
    queue_ms: Vec<u64>,
    /// Chromium binary for --type chromium [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

/// A cellular trace instead of a fixed rate.
#[derive(Debug, Args)]
struct TraceArgs {
    /// Instead of a fixed rate: a mahimahi downlink trace, any file (your
    /// own recording, or a bare name looked up in ../shared/data/traces).
    /// Its uplink is `X.up` beside a `X.down`, or the file --uplink names.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The uplink trace of --trace, when it is not `X.up` beside `X.down`.
    #[arg(long, requires = "trace")]
    uplink: Option<PathBuf>,
}

impl TraceArgs {
    /// Sets the configuration's trace files: found, checked and absolute,
    /// so that config.json names the same trace from any directory.
    fn apply(
        &self,
        trace: &mut Option<PathBuf>,
        uplink: &mut Option<PathBuf>,
    ) -> anyhow::Result<()> {
        if let Some(t) = &self.trace {
            let (down, up) = find_trace(t, self.uplink.as_deref())?;
            *trace = Some(absolute(&down)?);
            *uplink = match &self.uplink {
                Some(_) => Some(absolute(&up)?),
                None => None,
            };
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
struct ParityArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Loads per page by each of the two [default: 5].
    #[arg(long)]
    runs: Option<usize>,
    /// Link rate both ways [default: 32mbit].
    #[arg(long, conflicts_with = "trace")]
    rate: Option<String>,
    /// Round trip of the link [default: 65ms].
    #[arg(long)]
    rtt: Option<String>,
    #[command(flatten)]
    trace: TraceArgs,
    /// Chromium binary [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl ParityArgs {
    fn config(&self) -> anyhow::Result<parity::Config> {
        let mut c: parity::Config = self.corpus.base()?;
        self.corpus.apply(&mut c.corpus, &mut c.origin)?;
        c.runs = self.runs.unwrap_or(c.runs);
        if let Some(r) = &self.rate {
            c.rate_bps = rate_of(r)?;
            c.trace = None;
        }
        if let Some(r) = &self.rtt {
            c.rtt_ms = rtt_ms("--rtt", r)?;
        }
        self.trace.apply(&mut c.trace, &mut c.uplink)?;
        if let Some(b) = &self.chromium {
            c.chromium = absolute(b)?;
        }
        if let Some(o) = &self.out {
            c.out = Some(o.clone());
        }
        Ok(c)
    }
}

/// The pages and the origin, shared by every experiment.
#[derive(Debug, Args)]
struct CorpusArgs {
    /// Start from this configuration (a result folder's config.json);
    /// flags given as well override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Corpus JSON (`mewa corpus gen/import`), or recordings imported on the
    /// fly (a HAR, a DevTools log, a Lighthouse folder, or a folder of them);
    /// default: `meh15` with seed 1.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Only pages whose name contains this text (repeatable).
    #[arg(long = "page")]
    pages: Vec<String>,
    /// Directory of the local test CA (default: $XDG_DATA_HOME/mewa/ca or
    /// ~/.local/share/mewa/ca).
    #[arg(long)]
    ca_dir: Option<PathBuf>,
    /// TCP congestion control of the origin's sockets [default: cubic].
    #[arg(long)]
    cc: Option<String>,
}

impl CorpusArgs {
    /// The configuration to start from: `--config`'s, or the default.
    fn base<C: serde::de::DeserializeOwned + Default>(&self) -> anyhow::Result<C> {
        match &self.config {
            Some(p) => Ok(read_config(p)?),
            None => Ok(C::default()),
        }
    }

    /// Applies the corpus and origin flags given.
    fn apply(&self, corpus: &mut CorpusChoice, origin: &mut OriginChoice) -> anyhow::Result<()> {
        if let Some(p) = &self.corpus {
            // Absolute, so that config.json re-runs from anywhere.
            corpus.path = Some(absolute(p)?);
        }
        if !self.pages.is_empty() {
            corpus.pages = self.pages.clone();
        }
        if let Some(d) = &self.ca_dir {
            origin.ca_dir = Some(absolute(d)?);
        }
        if let Some(c) = &self.cc {
            origin.cc = c.parse().map_err(|e| anyhow::anyhow!("--cc: {e}"))?;
        }
        Ok(())
    }
}

/// `p` made absolute against the working directory: resolved (no `..`,
/// no links) when it exists, else as given (a CA folder made later).
fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    match std::fs::canonicalize(p) {
        Ok(c) => Ok(c),
        Err(_) => {
            std::path::absolute(p).with_context(|| format!("{}: not a usable path", p.display()))
        }
    }
}

#[derive(Debug, Args)]
struct BaselineArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Round-trip times, comma-separated (`50ms,75ms` or bare ms)
    /// [default: 50,75,100,125,150].
    #[arg(long, value_delimiter = ',')]
    rtt: Vec<String>,
    /// Bottleneck rate both ways [default: 20mbit].
    #[arg(long)]
    rate: Option<String>,
    /// Loads per page and RTT [default: 10].
    #[arg(long)]
    runs: Option<usize>,
    /// h2 over TLS instead of h2c (adds the TLS handshake's round trip,
    /// which the model does not count).
    #[arg(long)]
    tls: bool,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl BaselineArgs {
    fn config(&self) -> anyhow::Result<baseline::Config> {
        let mut c: baseline::Config = self.corpus.base()?;
        self.corpus.apply(&mut c.corpus, &mut c.origin)?;
        if !self.rtt.is_empty() {
            c.rtts_ms = self
                .rtt
                .iter()
                .map(|s| rtt_ms("--rtt", s))
                .collect::<anyhow::Result<_>>()?;
        }
        if let Some(r) = &self.rate {
            c.rate_bps = rate_of(r)?;
        }
        c.runs = self.runs.unwrap_or(c.runs);
        c.tls |= self.tls;
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

#[derive(Debug, Args)]
struct LoadArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
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
    /// Pull dispatch for n > 1 h2/h3 connections: at most this many KB
    /// requested and not yet received per connection for images, fonts
    /// and media; the rest wait for the first connection that drains
    /// (HTML, CSS and scripts are never held). Default: request every
    /// object as soon as it is found, as a browser does.
    #[arg(long, value_name = "KB")]
    pull_kb: Option<u64>,
    /// With --pull-kb: a connection's budget grows to twice the bytes it
    /// delivered over the last this-many ms (about one RTT), so a
    /// connection with a small window holds little; --pull-kb is then the
    /// floor.
    #[arg(long, value_name = "MS")]
    pull_follow_ms: Option<u64>,
    /// Round-trip time of the link [default: 100ms].
    #[arg(long)]
    rtt: Option<String>,
    /// Bottleneck rate both ways [default: 20mbit].
    #[arg(long)]
    rate: Option<String>,
    /// Write the load(s) as HAR 1.2 here.
    #[arg(long)]
    har: Option<PathBuf>,
    /// Write the raw load record(s) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write a timestamped result folder (config.json, loads.csv,
    /// records, HAR) under this folder.
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl LoadArgs {
    fn config(&self) -> anyhow::Result<load::Config> {
        let mut c: load::Config = self.corpus.base()?;
        self.corpus.apply(&mut c.corpus, &mut c.origin)?;
        c.protocol = self.protocol.unwrap_or(c.protocol);
        c.tls |= self.tls;
        c.connections = self.connections.or(c.connections);
        c.assign = self.assign.unwrap_or(c.assign);
        c.pull_kb = self.pull_kb.or(c.pull_kb);
        c.pull_follow_ms = self.pull_follow_ms.or(c.pull_follow_ms);
        if let Some(r) = &self.rtt {
            c.rtt_ms = rtt_ms("--rtt", r)?;
        }
        if let Some(r) = &self.rate {
            c.rate_bps = rate_of(r)?;
        }
        c.har = self.har.clone().or(c.har);
        c.json = self.json.clone().or(c.json);
        c.out = self.out.clone().or(c.out);
        Ok(c)
    }
}

#[derive(Debug, Args)]
struct MehArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Loads per page and variant (seed 000: 30) [default: 30].
    #[arg(long)]
    runs: Option<usize>,
    /// Radio link rate both ways (seed 000 §IV: 32 Mbit/s average)
    /// [default: 32mbit].
    #[arg(long, conflicts_with = "trace")]
    rate: Option<String>,
    #[command(flatten)]
    trace: TraceArgs,
    /// Round trip over the radio link, client ⇄ edge [default: 45ms].
    #[arg(long)]
    radio_rtt: Option<String>,
    /// Round trip edge ⇄ origin (seed 000: 65 ms end to end on average)
    /// [default: 20ms].
    #[arg(long)]
    wired_rtt: Option<String>,
    /// Radio bandwidth the client is told to plan with (seed 000's known
    /// bandwidth); default: what the client's own recent loads delivered
    /// (peak delivery rate over one round trip, best of the last 3 loads),
    /// as a phone can know it.
    #[arg(long)]
    bandwidth: Option<String>,
    /// The client's bandwidth estimate before its first load (a rate the
    /// modem would report) [default: 10mbit].
    #[arg(long)]
    prior: Option<String>,
    /// The phone's radio state machine on the radio link: `lte` (400 ms
    /// promotion from idle), `3g` (2 s) or `off`. With one, the radio is
    /// put to sleep before every load (a user between two pages), so every
    /// load pays the promotion [default: off].
    #[arg(long)]
    radio: Option<Rrc>,
    /// Pages Chromium loads: `auto` (every page of a recorded corpus, the
    /// three Fig. 8 pages of a generated one), `fig8` or `all`
    /// [default: auto].
    #[arg(long)]
    browser_pages: Option<BrowserPages>,
    /// How objects are spread over the connections: `warm-first` (HTML,
    /// CSS and scripts on the document's connection, the rest by the
    /// hint's size-balanced assignment) or `hint` (the hint's assignment
    /// for everything, seed 000 as written) [default: warm-first].
    #[arg(long)]
    policy: Option<Policy>,
    /// When the hint-aware client requests images, fonts and media:
    /// `auto` (default: push when it prefetches the hint's URLs, pull-rate
    /// otherwise), `pull-rate` (each leaf waits for the connection that
    /// would finish it first at its delivery rate over the last RTT,
    /// holding at most twice that; a fresh connection gets large leaves
    /// only once it has shown it can move two initial windows per RTT),
    /// `pull` (at most a bandwidth-delay product outstanding per
    /// connection) or `push` (as soon as found or prefetched, on the
    /// connection the policy chose: seed 000's static split by size). The
    /// browser runs' proxy follows: auto, pull-rate, or push for push and
    /// pull.
    #[arg(long)]
    dispatch: Option<Dispatch>,
    /// With the hint, do not request the objects whose URLs the hint
    /// carries before the page reveals them: the hint then only sets the
    /// number of connections and the assignment (by default the client
    /// requests them right after the document, as seed 000's client "sends
    /// requests to all embedded URLs on parallel connections").
    #[arg(long)]
    no_prefetch: bool,
    /// With the hint, keep one connection whatever n the plan chose: the
    /// URLs' part of the gain alone (with --no-prefetch as well the hint
    /// does nothing). For the split into n only / URLs only / both.
    #[arg(long)]
    one_connection: bool,
    /// Browser runs: the proxy keeps its prefetch to one initial window per
    /// connection until the page's document has arrived (off by default:
    /// measured not to pay on the shared recordings and meh15; for links
    /// whose queue is deep enough that the document waits behind the
    /// prefetch).
    #[arg(long)]
    first_flight_budget: bool,
    /// Browser runs: the proxy holds prefetched images until the more
    /// urgent prefetched objects still on their way are within one
    /// bandwidth-delay product (off by default: measured to cost meh15's
    /// 3648k page 0.8 s, its images then starting on cold connections;
    /// without it every prefetch starts at once and the origin's HTTP/2
    /// priorities order them)
    #[arg(long)]
    image_hold: bool,
    /// Browser runs: the proxy sends prefetched images on the document's
    /// connection at once, not after the document's response head (by
    /// default they wait for it, so that the connection's first flights
    /// carry the document when the origin has images ready sooner)
    #[arg(long)]
    images_with_document: bool,
    /// Browser runs: the proxy holds prefetched images on the page's other
    /// hosts until the more urgent prefetched objects on their way are
    /// within one bandwidth-delay product (their connections are not the
    /// page's, so no origin orders them behind its scripts)
    #[arg(long)]
    hold_other_hosts_images: bool,
    /// Also load pages (see --browser-pages) in headless Chromium this many
    /// times with the hint (through the local proxy) and without (Chromium
    /// on its own); 0 skips it. Skipped with a message when Chromium is not
    /// installed [default: 5].
    #[arg(long)]
    browser_runs: Option<usize>,
    /// Chromium binary for the browser runs [default: /usr/bin/chromium].
    #[arg(long)]
    chromium: Option<PathBuf>,
    /// Keep every browser load's Chromium NetLog (a few MB each) in the
    /// result folder's chromium/, named PAGE-RUN-WITHHINT.netlog.json, to
    /// see where a load's time goes (chrome://net-export viewer).
    #[arg(long)]
    keep_netlogs: bool,
    /// Parent of the timestamped result folder [default: out/lab].
    #[arg(long, short)]
    out: Option<PathBuf>,
}

impl MehArgs {
    fn config(&self) -> anyhow::Result<meh::Config> {
        let mut c: meh::Config = self.corpus.base()?;
        self.corpus.apply(&mut c.corpus, &mut c.origin)?;
        c.runs = self.runs.unwrap_or(c.runs);
        if let Some(r) = &self.rate {
            c.rate_bps = rate_of(r)?;
            c.trace = None;
        }
        self.trace.apply(&mut c.trace, &mut c.uplink)?;
        if let Some(r) = &self.radio_rtt {
            c.radio_rtt_ms = rtt_ms("--radio-rtt", r)?;
        }
        if let Some(r) = &self.wired_rtt {
            c.wired_rtt_ms = rtt_ms("--wired-rtt", r)?;
        }
        if let Some(b) = &self.bandwidth {
            c.bandwidth_bps = Some(rate_of(b)?);
        }
        if let Some(b) = &self.prior {
            c.prior_bps = parse_rate(b).map_err(|e| anyhow::anyhow!("--prior: {e}"))?;
        }
        c.radio = self.radio.unwrap_or(c.radio);
        c.browser_pages = self.browser_pages.unwrap_or(c.browser_pages);
        c.policy = self.policy.unwrap_or(c.policy);
        c.dispatch = self.dispatch.unwrap_or(c.dispatch);
        if self.no_prefetch {
            c.prefetch = false;
        }
        c.one_connection |= self.one_connection;
        c.first_flight_budget |= self.first_flight_budget;
        c.image_hold |= self.image_hold;
        c.images_with_document |= self.images_with_document;
        c.hold_other_hosts_images |= self.hold_other_hosts_images;
        c.browser_runs = self.browser_runs.unwrap_or(c.browser_runs);
        c.chromium = self.chromium.clone().unwrap_or(c.chromium);
        c.keep_netlogs |= self.keep_netlogs;
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

/// Runs `mewa lab …`.
pub fn run(cmd: LabCmd) -> anyhow::Result<()> {
    namespaces_cleaned_up()?;
    match cmd.cmd {
        LabSub::Baseline(a) => {
            let c = a.config()?;
            let total = c.rtts_ms.len() * c.runs;
            let report = with_bar(total, |p| baseline::Baseline::run(&c, p))
                .context("baseline experiment")?;
            finish(&report)
        }
        LabSub::Load(a) => {
            let c = a.config()?;
            let report = load::Load::run(&c, &Progress::none())?;
            print!("{}", report.text());
            if let Some(p) = &c.har {
                println!("HAR: {}", p.display());
            }
            if let Some(p) = &c.json {
                println!("records: {}", p.display());
            }
            if let Some(dir) = report.write()? {
                println!("results: {}", dir.display());
            }
            Ok(())
        }
        LabSub::Meh(a) => {
            let c = a.config()?;
            let report = with_bar(c.runs * 2, |p| meh::run(&c, p)).context("MEH experiment")?;
            finish(&report)
        }
        LabSub::Parity(a) => {
            let c = a.config()?;
            let report = with_bar(c.runs * 2, |p| parity::Parity::run(&c, p))
                .context("parity experiment")?;
            finish(&report)
        }
        LabSub::Fld(a) => run_fld(a.which),
        LabSub::Accel(a) => {
            if let Some(dir) = &a.report {
                let report = accel::report_again(dir).with_context(|| {
                    format!("{}: not a mewa lab accel result folder", dir.display())
                })?;
                return finish(&report);
            }
            let c = a.config()?;
            let total = c.runs * c.down_kbps.len() * c.variants.len() * c.tools.len();
            let report = with_bar(total, |p| accel::run(&c, p)).context("accel experiment")?;
            finish(&report)
        }
        LabSub::Cellular(a) => {
            if let Some(dir) = &a.report {
                let report = cellular::report_again(dir).with_context(|| {
                    format!("{}: not a mewa lab cellular result folder", dir.display())
                })?;
                return finish(&report);
            }
            let c = a.config()?;
            let report = with_bar(0, |p| cellular::run(&c, p)).context("cellular experiment")?;
            finish(&report)
        }
        LabSub::Iw(a) => {
            if let Some(dir) = &a.report {
                let report = iw::report_again(dir).with_context(|| {
                    format!("{}: not a mewa lab iw result folder", dir.display())
                })?;
                return finish(&report);
            }
            let c = a.config()?;
            let report = with_bar(c.runs, |p| iw::run(&c, p)).context("iw experiment")?;
            finish(&report)
        }
    }
}

fn run_fld(which: FldSub) -> anyhow::Result<()> {
    match which {
        FldSub::Bulk(a) => {
            let c = a.config()?;
            let total = c.runs * c.sizes.len() * (c.ccs.len() + c.quic_ccs.len());
            let report = with_bar(total, |p| fld::bulk(&c, p)).context("fld bulk")?;
            finish(&report)
        }
        FldSub::Fairness(a) => {
            let c = a.config()?;
            let n = c.against.len();
            let report = with_bar(n, |p| fld::fairness(&c, p)).context("fld fairness")?;
            finish(&report)
        }
        FldSub::Pages(a) => {
            let c = a.config()?;
            let report = with_bar(c.loads, |p| fld::pages(&c, p)).context("fld pages")?;
            finish(&report)
        }
        FldSub::Report { dir } => {
            let report = fld::pages_report_again(&dir).with_context(|| {
                format!("{}: not a mewa lab fld pages result folder", dir.display())
            })?;
            finish(&report)
        }
    }
}

impl FldBulkArgs {
    fn config(&self) -> anyhow::Result<fld::BulkConfig> {
        let mut c = fld::BulkConfig::default();
        rtt_and_rate(&self.rtt, &self.rate, &mut c.rtt_ms, &mut c.rate_bps)?;
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
                .filter(|q| *q != "none")
                .cloned()
                .collect();
        }
        c.runs = self.runs.unwrap_or(c.runs);
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

impl FldFairnessArgs {
    fn config(&self) -> anyhow::Result<fld::FairnessConfig> {
        let mut c = fld::FairnessConfig::default();
        rtt_and_rate(&self.rtt, &self.rate, &mut c.rtt_ms, &mut c.rate_bps)?;
        c.queue_bytes = self.queue.unwrap_or(c.queue_bytes);
        c.duration_s = self.duration.unwrap_or(c.duration_s);
        if !self.against.is_empty() {
            c.against = self.against.clone();
        }
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

impl FldPagesArgs {
    fn config(&self) -> anyhow::Result<fld::PagesConfig> {
        let mut c: fld::PagesConfig = self.corpus.base()?;
        self.corpus.apply(&mut c.corpus, &mut c.origin)?;
        // Here --cc names the controls compared with cubic, comma-separated
        // (the origin's listener always starts connections on cubic).
        if let Some(cc) = &self.corpus.cc {
            c.ccs = vec!["cubic".into()];
            for name in cc.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if !c.ccs.iter().any(|c| c == name) {
                    c.ccs.push(name.to_owned());
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
        if !self.queue_ms.is_empty() {
            c.queue_ms = self.queue_ms.clone();
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
        c.out = self.out.clone().unwrap_or(c.out);
        Ok(c)
    }
}

/// Every lab command builds its testbed in named network namespaces
/// (`mewa-<pid>-…`), which outlive the process unless deleted: removes
/// those that dead runs left, and makes SIGINT, SIGTERM and SIGHUP delete
/// this run's (killing what runs inside them, such as a browser) before
/// exiting, as `mewa link` does. Without root there is nothing to clean
/// (the experiment itself then says it needs root).
fn namespaces_cleaned_up() -> anyhow::Result<()> {
    if mewa_lab::experiment::needs_root().is_ok() {
        match mewa_link::runtime::cleanup_stale() {
            Ok(r) if !r.is_empty() => eprintln!(
                "mewa lab: removed what dead runs left: namespaces {:?}, devices {:?}, processes {:?}",
                r.namespaces, r.devices, r.killed
            ),
            Ok(_) => {}
            Err(e) => eprintln!("mewa lab: warning: stale cleanup failed: {e}"),
        }
    }
    mewa_link::runtime::teardown_on_signals().context("installing the signal teardown")
}

/// Prints the report, writes its folder and names it.
fn finish(report: &dyn Report) -> anyhow::Result<()> {
    let dir = report.write()?;
    print!("{}", report.text());
    if let Some(dir) = dir {
        println!("results: {}", dir.display());
    }
    Ok(())
}

/// Runs `f` with a progress bar on a terminal, or a log line every 5 %
/// without one. `hint` sizes the bar until the first step gives the total.
fn with_bar<R>(hint: usize, f: impl FnOnce(&Progress) -> R) -> R {
    let pb = ProgressBar::new(hint as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:32}] {pos}/{len} loads, eta {eta}  {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    let tty = std::io::stderr().is_terminal();
    let bar = pb.clone();
    let progress = Progress::new(move |s| {
        bar.set_length(s.total as u64);
        bar.set_position(s.done as u64);
        bar.set_message(s.what.to_string());
        let step = (s.total / 20).max(1);
        if !tty && (s.done % step == 0 || s.done == s.total) {
            eprintln!("[{}/{}] {}", s.done, s.total, s.what);
        }
    });
    let out = f(&progress);
    pb.finish_and_clear();
    out
}

/// `100`, `75ms` or `0.15s` as whole milliseconds, 1 ms to 10 s.
fn rtt_ms(flag: &str, s: &str) -> anyhow::Result<u64> {
    let d = crate::origin::parse_duration(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    let ms = d.as_millis() as u64;
    if ms == 0 || ms > 10_000 {
        bail!("{flag} {s}: give a round trip between 1 ms and 10 s");
    }
    Ok(ms)
}

/// `--rtt` and `--rate`, when given, into their configuration fields.
fn rtt_and_rate(
    rtt: &Option<String>,
    rate: &Option<String>,
    rtt_field: &mut u64,
    rate_field: &mut u64,
) -> anyhow::Result<()> {
    if let Some(r) = rtt {
        *rtt_field = rtt_ms("--rtt", r)?;
    }
    if let Some(r) = rate {
        *rate_field = rate_of(r)?;
    }
    Ok(())
}

fn rate_of(s: &str) -> anyhow::Result<u64> {
    parse_rate(s).map_err(|e| anyhow::anyhow!("--rate: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: LabSub,
    }

    fn parse(args: &[&str]) -> LabSub {
        let mut v = vec!["lab"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).expect("parses").cmd
    }

    #[test]
    fn rtt_accepts_ms_and_durations() {
        assert_eq!(rtt_ms("--rtt", "100").unwrap(), 100);
        assert_eq!(rtt_ms("--rtt", "75ms").unwrap(), 75);
        assert_eq!(rtt_ms("--rtt", "0.15s").unwrap(), 150);
        assert!(rtt_ms("--rtt", "0").is_err());
        assert!(rtt_ms("--rtt", "fast").is_err());
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        let LabSub::Meh(a) = parse(&["meh"]) else {
            panic!("not meh")
        };
        assert_eq!(a.config().unwrap(), meh::Config::default());
        let LabSub::Baseline(a) = parse(&["baseline"]) else {
            panic!("not baseline")
        };
        assert_eq!(a.config().unwrap(), baseline::Config::default());
        let LabSub::Load(a) = parse(&["load"]) else {
            panic!("not load")
        };
        assert_eq!(a.config().unwrap(), load::Config::default());
        let LabSub::Parity(a) = parse(&["parity"]) else {
            panic!("not parity")
        };
        assert_eq!(a.config().unwrap(), parity::Config::default());
    }

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
        assert_eq!(iw_args(&[]).config().unwrap(), iw::IwConfig::default());
        let c = iw_args(&[
            "--shares",
            "0,0.35",
            "--wired-rtt",
            "75",
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
        assert_eq!(c.protocols, vec!["h3".to_string()]);
        assert_eq!(c.arms, vec!["default".to_string(), "aware".to_string()]);
        assert_eq!((c.fixed_iw, c.iw_max, c.runs), (64, 150, 3));
        assert_eq!(c.alpha, 0.5);
        assert_eq!(c.pages, vec!["400k".to_string()]);
    }

    #[test]
    fn fld_flags_set_their_configurations() {
        let fld_sub = |args: &[&str]| {
            let mut v = vec!["fld"];
            v.extend_from_slice(args);
            let LabSub::Fld(a) = parse(&v) else {
                panic!("not fld")
            };
            a.which
        };
        let FldSub::Bulk(a) = fld_sub(&["bulk"]) else {
            panic!("not bulk")
        };
        assert_eq!(a.config().unwrap(), fld::BulkConfig::default());
        let FldSub::Bulk(a) = fld_sub(&[
            "bulk",
            "--rate",
            "100mbit",
            "--rtt",
            "20ms",
            "--size",
            "1000,2000",
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
        let FldSub::Fairness(a) = fld_sub(&["fairness", "--against", "reno", "--duration", "30"])
        else {
            panic!("not fairness")
        };
        let c = a.config().unwrap();
        assert_eq!((c.against, c.duration_s), (vec!["reno".to_string()], 30));
        let FldSub::Pages(a) = fld_sub(&["pages"]) else {
            panic!("not pages")
        };
        assert_eq!(a.config().unwrap(), fld::PagesConfig::default());
        let FldSub::Pages(a) = fld_sub(&["pages", "--cross", "udp:75mbit", "--setting", "lte"])
        else {
            panic!("not pages")
        };
        let c = a.config().unwrap();
        assert_eq!(
            c.cross,
            Some(vec![mewa_lab::cross::Flow::Udp { bps: 75_000_000 }])
        );
        assert_eq!(c.settings, vec!["lte".to_string()]);
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
            vec!["cubic".to_string(), "bbr".to_string()]
        );
        let FldSub::Pages(a) = fld_sub(&["pages", "--cc", "mewa_fld, mewa_fld_paced,cubic"]) else {
            panic!("not pages")
        };
        assert_eq!(
            a.config().unwrap().ccs,
            ["cubic", "mewa_fld", "mewa_fld_paced"]
                .map(String::from)
                .to_vec()
        );
        // Its --help says what --cc means here, not the origin's meaning.
        let help = Cli::try_parse_from(["lab", "fld", "pages", "--help"])
            .err()
            .map(|e| e.render().to_string())
            .unwrap_or_default();
        assert!(help.contains("compared with cubic"), "{help}");
        assert!(!help.contains("of the origin's sockets"), "{help}");
    }

    #[test]
    fn flags_override_a_config_file() {
        let dir = std::env::temp_dir().join(format!("mewa-cli-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.json");
        let saved = meh::Config {
            runs: 7,
            radio_rtt_ms: 60,
            dispatch: Dispatch::Push,
            ..meh::Config::default()
        };
        std::fs::write(&file, serde_json::to_string(&saved).unwrap()).unwrap();
        let f = file.to_str().unwrap();
        let LabSub::Meh(a) = parse(&["meh", "--config", f]) else {
            panic!("not meh")
        };
        assert_eq!(a.config().unwrap(), saved);
        let LabSub::Meh(a) = parse(&["meh", "--config", f, "--runs", "2"]) else {
            panic!("not meh")
        };
        let c = a.config().unwrap();
        assert_eq!(
            (c.runs, c.radio_rtt_ms, c.dispatch),
            (2, 60, Dispatch::Push)
        );
        // A baseline config is not a MEH config.
        let LabSub::Baseline(a) = parse(&["baseline", "--config", f]) else {
            panic!("not baseline")
        };
        assert!(a.config().is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
