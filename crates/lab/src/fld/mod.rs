//! `mewa lab fld`: seed 002's evaluation of FLD_TCP against Cubic at the
//! server, with real kernel TCP (`mewa_fld`, the BPF version of
//! [`mewa_cc::Window::fld`]).
//!
//! - [`bulk`]: one transfer of each size (500 kB, 2 MB) at 40 ms RTT per
//!   congestion control, the flow-size claim of seed 002 §2.1 ("a flow of
//!   size 500 kB [...] FLD_TCP would finish the flow in 4 RTT while RENO's
//!   Slow-start would require 6 RTT").
//! - [`fairness`]: a long FLD_TCP flow against a long flow of another
//!   control over a bounded queue, Jain's index once FLD_TCP is past 2 MB
//!   (it must be TCP-friendly then).
//! - [`pages`]: pages loaded through a link with cross traffic (LTE: 100
//!   Mbit/s brought down by background flows, 13 ms one way; 3G: 21 Mbit/s,
//!   25 ms), the server's connections alternating between Cubic and
//!   FLD_TCP load by load, with seed 002's page metrics (Figs. 6–11) and its
//!   connection-size study.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mewa_link::core::LinkConfig;
use mewa_link::runtime::{LinkOptions, Topology};
use serde::{Deserialize, Serialize};

use crate::bed::{Bed, CLIENT, SERVER};
use crate::bulk::{self as transfer, Setup as TransferSetup};
use crate::cross::{jain, Cross, CrossLog, Flow, XRECV, XSEND};
use crate::experiment::{
    at_least_one, needs_root, rtt_in_range, CorpusChoice, ExperimentError, OriginChoice, Progress,
};
use crate::replay::{with_chromium, Browser};
use mewa_loader::metrics::{last_data_us, page_metrics};
use mewa_loader::record::{LoadRecord, ObjectTiming, Protocol};
use mewa_loader::LoadOptions;
use mewa_report::median;
use mewa_report::plot::{Mark, Series};
use mewa_report::table::{opt, pct};
use mewa_report::ResultFolder;
use mewa_report::Table;

use mewa_report::{quantile, Plot, Section, SectionReport};

/// The name sockets pick FLD_TCP by (`mewa cc load` registers it).
pub const FLD: &str = "mewa_fld";

/// Android's initial `tcp_rmem` for LTE (1 MB): the receive buffer the
/// experiments give the client. With Linux's stock 128 KB the advertised
/// window, not the sender, limits a window that triples by its third round
/// trip (crates/lab/tests/cc.rs measured 56 segments instead of 90).
pub const CLIENT_RMEM: usize = 1 << 20;

/// `ms` of queue at `bps`, in bytes (at least 10 full packets).
pub(crate) fn queue_bytes(bps: u64, ms: u64) -> usize {
    ((bps / 8).saturating_mul(ms) / 1000).max(15_000) as usize
}

/// A link of `one_way` delay each way, `bps` both ways and `queue_bytes`.
fn link(one_way: Duration, bps: u64, queue_bytes: Option<usize>) -> LinkConfig {
    transfer::fixed_link(one_way, bps, bps, queue_bytes)
}

/// Checks the congestion controls named exist (after `mewa cc load` for
/// FLD_TCP), so a run does not fail half-way.
pub(crate) fn check_controls(ccs: &[String]) -> Result<(), ExperimentError> {
    let available = mewa_origin::available_congestion_controls();
    for cc in ccs {
        if !available.iter().any(|a| a == cc) {
            let hint = if cc.starts_with("mewa_") {
                " (run `mewa cc load` first)"
            } else {
                ""
            };
            return Err(ExperimentError::Config {
                field: "--cc",
                message: format!(
                    "{cc} is not available{hint}; the kernel offers: {}",
                    available.join(" ")
                ),
            });
        }
    }
    Ok(())
}

/// Sets the client namespace's initial receive buffer to `rmem` bytes.
pub(crate) fn set_client_rmem(
    topo: &Topology,
    host: &str,
    rmem: usize,
) -> Result<(), ExperimentError> {
    crate::bed::set_tcp_rmem(topo, host, rmem).map_err(ExperimentError::Bed)
}

// ---------------------------------------------------------------- bulk

/// `mewa lab fld bulk`'s settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BulkConfig {
    /// Round trip, ms.
    pub rtt_ms: u64,
    /// Bottleneck rate both ways, bit/s.
    pub rate_bps: u64,
    /// Bottleneck queue, bytes (`None`: unbounded).
    pub queue_bytes: Option<usize>,
    /// Transfer sizes, bytes.
    pub sizes: Vec<u64>,
    /// TCP congestion controls at the sender (the kernel's names).
    pub ccs: Vec<String>,
    /// QUIC controllers at the sender (`mewa origin serve --quic-cc`
    /// names: cubic, newreno, bbr, fld, reno), shown as `quic/<name>`.
    pub quic_ccs: Vec<String>,
    /// The test CA's folder for the QUIC sender (none: the default).
    pub ca_dir: Option<PathBuf>,
    /// Transfers per size and control.
    pub runs: usize,
    /// The receiver's `SO_RCVBUF` (`None`: the kernel's autotuning).
    pub client_rmem: Option<usize>,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for BulkConfig {
    /// The issue's comparison: 500 kB and 2 MB at 40 ms RTT, 20 Mbit/s,
    /// unbounded queue, reno, cubic, bbr and FLD_TCP over TCP and over QUIC
    /// (quinn's newreno, cubic and bbr, and mewa's fld), 5 runs.
    fn default() -> BulkConfig {
        BulkConfig {
            rtt_ms: 40,
            rate_bps: 20_000_000,
            queue_bytes: None,
            sizes: vec![500_000, 2_000_000],
            ccs: ["reno", "cubic", "bbr", FLD].map(String::from).to_vec(),
            quic_ccs: ["newreno", "cubic", "bbr", "fld"]
                .map(String::from)
                .to_vec(),
            ca_dir: None,
            runs: 5,
            client_rmem: Some(CLIENT_RMEM),
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One bulk measurement.
#[derive(Debug, Clone, Serialize)]
pub struct BulkRun {
    /// Bytes sent.
    pub bytes: u64,
    /// The sender's control (`quic/<name>` over QUIC).
    pub cc: String,
    /// Run index.
    pub run: usize,
    /// `connect()` to last byte, seconds.
    pub completion_s: f64,
    /// Handshake done (`connect()` returned) to last byte, seconds: the
    /// round trips of data alone, which seed 002 counts.
    pub transfer_s: f64,
    /// Data segments per round trip.
    pub rounds: Vec<u64>,
    /// Data packets dropped at the bottleneck.
    pub drops: u64,
}

/// Runs the bulk comparison.
pub fn bulk(config: &BulkConfig, progress: &Progress) -> Result<SectionReport, ExperimentError> {
    at_least_one("--runs", config.runs)?;
    at_least_one("--size", config.sizes.len())?;
    at_least_one("--cc", config.ccs.len())?;
    rtt_in_range("--rtt", config.rtt_ms)?;
    if config.rate_bps == 0 {
        return Err(ExperimentError::Config {
            field: "--rate",
            message: "give a rate above 0 (e.g. 20mbit)".into(),
        });
    }
    needs_root()?;
    check_controls(&config.ccs)?;
    let ca_dir = OriginChoice {
        ca_dir: config.ca_dir.clone(),
        ..OriginChoice::default()
    }
    .settings()?
    .ca_dir;
    for q in &config.quic_ccs {
        if let Err(e) = mewa_origin::quic_cc::factory(q) {
            return Err(ExperimentError::Config {
                field: "--quic-cc",
                message: e.to_string(),
            });
        }
    }
    let folder = ResultFolder::create(&config.out, "fld-bulk", "mewa lab fld bulk", config)?;
    let logs = folder.path().join("links");
    let labels = bulk_labels(config);
    let total = config.runs * config.sizes.len() * labels.len();
    let mut runs = Vec::new();
    for run in 0..config.runs {
        for &bytes in &config.sizes {
            for label in &labels {
                progress.step(runs.len(), total, &format!("{bytes} B with {label}"));
                let quic = label.strip_prefix("quic/");
                let s = TransferSetup {
                    rtt: Duration::from_millis(config.rtt_ms),
                    down_bps: config.rate_bps,
                    up_bps: config.rate_bps,
                    queue_bytes: config.queue_bytes,
                    bytes,
                    congestion: quic.unwrap_or(label).to_string(),
                    receive_buffer: config.client_rmem,
                };
                let dir = logs.join(format!("{}-{bytes}-{run}", label.replace('/', "-")));
                let t = match quic {
                    Some(_) => transfer::run_quic(&s, &ca_dir, &dir),
                    None => transfer::run(&s, &dir),
                }
                .map_err(|source| ExperimentError::Transfer {
                    what: format!("of {bytes} B with {label}"),
                    source,
                })?;
                runs.push(BulkRun {
                    bytes,
                    cc: label.clone(),
                    run,
                    completion_s: t.completion.as_secs_f64(),
                    transfer_s: t.transfer.as_secs_f64(),
                    rounds: t.rounds,
                    drops: t.drops,
                });
            }
        }
    }
    progress.step(total, total, "done");
    Ok(bulk_report(config, runs, Some(folder)))
}

/// Every sender of a bulk run: the TCP controls, then `quic/<name>`.
fn bulk_labels(config: &BulkConfig) -> Vec<String> {
    config
        .ccs
        .iter()
        .cloned()
        .chain(config.quic_ccs.iter().map(|q| format!("quic/{q}")))
        .collect()
}

/// The bulk tables: median completion per size and control, and the
/// reduction against cubic (over the same transport).
pub fn bulk_report(
    config: &BulkConfig,
    runs: Vec<BulkRun>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let mut t = Table::new(&[
        "size",
        "cc",
        "completion s",
        "vs cubic %",
        "data s",
        "vs cubic %",
        "min-max completion s",
        "round trips",
        "drops",
    ]);
    for &bytes in &config.sizes {
        let of = |cc: &str| -> Vec<&BulkRun> {
            runs.iter()
                .filter(|r| r.bytes == bytes && r.cc == cc)
                .collect()
        };
        let med = |cc: &str, f: fn(&BulkRun) -> f64| {
            median(&of(cc).iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        for cc in &bulk_labels(config) {
            let base = if cc.starts_with("quic/") {
                "quic/cubic"
            } else {
                "cubic"
            };
            let (cubic_c, cubic_d) = (med(base, |r| r.completion_s), med(base, |r| r.transfer_s));
            let rs = of(cc);
            let times: Vec<f64> = rs.iter().map(|r| r.completion_s).collect();
            let (m, d) = (med(cc, |r| r.completion_s), med(cc, |r| r.transfer_s));
            let vs = |x: Option<f64>, against: Option<f64>| match (x, against) {
                (Some(x), Some(b)) if b > 0.0 && cc != base => pct(100.0 * (b - x) / b),
                _ => "-".into(),
            };
            let rounds: Vec<f64> = rs.iter().map(|r| r.rounds.len() as f64).collect();
            t.push(vec![
                format!("{} kB", bytes / 1000),
                cc.clone(),
                opt(m, 3),
                vs(m, cubic_c),
                opt(d, 3),
                vs(d, cubic_d),
                format!(
                    "{}-{}",
                    opt(times.iter().copied().reduce(f64::min), 3),
                    opt(times.iter().copied().reduce(f64::max), 3)
                ),
                opt(median(&rounds), 0),
                rs.iter().map(|r| r.drops).sum::<u64>().to_string(),
            ]);
        }
    }
    let note = format!(
        "{} ms RTT, {} Mbit/s, queue {}; medians over the runs. Completion: connect() to the \
         last byte (one handshake included); data: handshake done to the last byte; round \
         trips: RTTs in which data crossed the link. Seed 002: 500 kB takes FLD_TCP 4 round trips against Reno's 6 \
         (33 % fewer). Target: FLD completes 500 kB at least 30 % faster than cubic.",
        config.rtt_ms,
        config.rate_bps as f64 / 1e6,
        config
            .queue_bytes
            .map_or_else(|| "unbounded".to_string(), |b| format!("{b} B"))
    );
    SectionReport {
        name: "fld bulk",
        sections: vec![Section {
            title: "Bulk transfers: completion time per congestion control".into(),
            csv: "bulk.csv",
            table: t,
            note,
        }],
        plots: Vec::new(),
        json: serde_json::json!({ "runs": runs }),
        extra: Vec::new(),
        folder,
    }
}

// ---------------------------------------------------------------- fairness

/// `mewa lab fld fairness`'s settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FairnessConfig {
    /// Round trip, ms.
    pub rtt_ms: u64,
    /// Bottleneck rate, bit/s.
    pub rate_bps: u64,
    /// Bottleneck queue, bytes: bounded, or no flow ever sees a loss.
    pub queue_bytes: usize,
    /// How long both flows run, seconds.
    pub duration_s: u64,
    /// The controls FLD_TCP runs against, one run each.
    pub against: Vec<String>,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for FairnessConfig {
    /// 60 s at 40 ms RTT and 20 Mbit/s, a queue of one bandwidth-delay
    /// product (100 kB), against cubic and reno.
    fn default() -> FairnessConfig {
        FairnessConfig {
            rtt_ms: 40,
            rate_bps: 20_000_000,
            queue_bytes: 100_000,
            duration_s: 60,
            against: vec!["cubic".into(), "reno".into()],
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One fairness run.
#[derive(Debug, Clone, Serialize)]
pub struct FairnessRun {
    /// The other flow's control.
    pub against: String,
    /// Both flows' log (flow 0 is FLD_TCP).
    pub log: CrossLog,
    /// Interval from which FLD_TCP had delivered 2 MB.
    pub past_2mb_from: usize,
    /// Mean throughputs from then on, bit/s.
    pub mean_bps: Vec<f64>,
    /// Jain's index from then on.
    pub jain: Option<f64>,
}

/// Runs FLD_TCP against each control in turn.
pub fn fairness(
    config: &FairnessConfig,
    progress: &Progress,
) -> Result<SectionReport, ExperimentError> {
    at_least_one("--against", config.against.len())?;
    rtt_in_range("--rtt", config.rtt_ms)?;
    if config.duration_s < 5 {
        return Err(ExperimentError::Config {
            field: "--duration",
            message: "give at least 5 s".into(),
        });
    }
    needs_root()?;
    let mut all = config.against.clone();
    all.push(FLD.into());
    check_controls(&all)?;
    let folder =
        ResultFolder::create(&config.out, "fld-fairness", "mewa lab fld fairness", config)?;
    let mut out = Vec::new();
    for (i, other) in config.against.iter().enumerate() {
        progress.step(i, config.against.len(), &format!("{FLD} against {other}"));
        let topo = Topology::builder()
            .host(XRECV)
            .host(XSEND)
            .link(
                XRECV,
                XSEND,
                link(
                    Duration::from_millis(config.rtt_ms) / 2,
                    config.rate_bps,
                    Some(config.queue_bytes),
                ),
            )
            .build()
            .map_err(|e| ExperimentError::Bed(e.into()))?;
        set_client_rmem(&topo, XRECV, CLIENT_RMEM)?;
        let flows = [
            Flow::Tcp { cc: FLD.into() },
            Flow::Tcp { cc: other.clone() },
        ];
        let cross =
            Cross::start(&topo, &flows, Duration::from_secs(1)).map_err(ExperimentError::Cross)?;
        std::thread::sleep(Duration::from_secs(config.duration_s));
        let log = cross.stop();
        topo.shutdown()
            .map_err(|e| ExperimentError::Bed(e.into()))?;
        let mut sum = 0u64;
        let past = log
            .bytes
            .first()
            .and_then(|b| {
                b.iter().position(|&x| {
                    sum += x;
                    sum >= mewa_cc::FLD_THRESHOLD_BYTES
                })
            })
            .map_or(0, |k| k + 1);
        let mean_bps = log.mean_bps(past);
        out.push(FairnessRun {
            against: other.clone(),
            jain: jain(&mean_bps),
            past_2mb_from: past,
            mean_bps,
            log,
        });
    }
    progress.step(config.against.len(), config.against.len(), "done");
    Ok(fairness_report(config, out, Some(folder)))
}

/// The fairness table and the throughput plots.
pub fn fairness_report(
    config: &FairnessConfig,
    runs: Vec<FairnessRun>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let mut t = Table::new(&[
        "against",
        "FLD Mbit/s",
        "other Mbit/s",
        "Jain's index",
        "from s",
    ]);
    let mut plots = Vec::new();
    let mut extra = Vec::new();
    for r in &runs {
        let mbps = |i: usize| r.mean_bps.get(i).map(|v| format!("{:.2}", v / 1e6));
        t.push(vec![
            r.against.clone(),
            mbps(0).unwrap_or_default(),
            mbps(1).unwrap_or_default(),
            opt(r.jain, 3),
            format!("{:.0}", r.past_2mb_from as f64 * r.log.interval_s),
        ]);
        let series = r
            .log
            .bytes
            .iter()
            .zip(&r.log.flows)
            .enumerate()
            .map(|(i, (b, f))| Series {
                name: f.label(),
                points: b
                    .iter()
                    .enumerate()
                    .map(|(k, &x)| {
                        (
                            (k + 1) as f64 * r.log.interval_s,
                            x as f64 * 8.0 / r.log.interval_s / 1e6,
                        )
                    })
                    .collect(),
                mark: Mark::Line,
                colour: i,
            })
            .collect();
        plots.push(Plot {
            file: format!("fairness-{}.svg", r.against),
            title: format!(
                "{FLD} against {} ({} Mbit/s, {} ms RTT)",
                r.against,
                config.rate_bps / 1_000_000,
                config.rtt_ms
            ),
            x_label: "time (s)".into(),
            y_label: "throughput (Mbit/s)".into(),
            series,
        });
        extra.push((format!("fairness-{}.csv", r.against), r.log.to_csv()));
    }
    SectionReport {
        name: "fld fairness",
        sections: vec![Section {
            title: "Fairness once FLD_TCP is past 2 MB".into(),
            csv: "fairness.csv",
            table: t,
            note: format!(
                "Two long flows over {} Mbit/s, {} ms RTT, a {} B drop-tail queue, {} s. \
                 Means and Jain's index over the seconds after FLD_TCP delivered 2 MB. \
                 Target: Jain's index >= 0.9 against reno.",
                config.rate_bps as f64 / 1e6,
                config.rtt_ms,
                config.queue_bytes,
                config.duration_s
            ),
        }],
        plots,
        json: serde_json::json!({ "runs": runs }),
        extra,
        folder,
    }
}

// ---------------------------------------------------------------- pages

/// A network setting of seed 002 §3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// Its name (`lte`, `3g`).
    pub name: String,
    /// The link's capacity both ways, bit/s.
    pub capacity_bps: u64,
    /// One-way delay, ms.
    pub one_way_ms: u64,
    /// The background flows that bring the capacity down to the effective
    /// rate.
    pub cross: Vec<Flow>,
}

impl Setting {
    /// "The maximum bandwidth is set at 100 Mbps for LTE [...] for LTE, the
    /// effective average bandwidth is 25 Mbps and delay is 13 ms": three
    /// long cubic flows, so that a new flow's fair share is 25 Mbit/s.
    pub fn lte() -> Setting {
        Setting {
            name: "lte".into(),
            capacity_bps: 100_000_000,
            one_way_ms: 13,
            cross: vec![Flow::Tcp { cc: "cubic".into() }; 3],
        }
    }

    /// "[...] and 21 Mbps for 3G. [...] For 3G, it was 7 Mbps and 25 ms":
    /// two long cubic flows (a fair share of 7 Mbit/s).
    pub fn three_g() -> Setting {
        Setting {
            name: "3g".into(),
            capacity_bps: 21_000_000,
            one_way_ms: 25,
            cross: vec![Flow::Tcp { cc: "cubic".into() }; 2],
        }
    }

    /// A setting by name.
    pub fn by_name(name: &str) -> Option<Setting> {
        match name {
            "lte" => Some(Setting::lte()),
            "3g" => Some(Setting::three_g()),
            _ => None,
        }
    }
}

/// `mewa lab fld pages`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PagesConfig {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The CA (the congestion control is [`PagesConfig::ccs`]).
    pub origin: OriginChoice,
    /// Network settings (`lte`, `3g`).
    pub settings: Vec<String>,
    /// The server's congestion controls, alternated load by load.
    pub ccs: Vec<String>,
    /// Page types: `h2` (encrypted: HTTP/2 over TLS, one connection per
    /// origin) and `h1` (unencrypted: HTTP/1.1 in the clear, up to 6 per
    /// host).
    pub protocols: Vec<String>,
    /// Loads per page, type and control ("each web page is downloaded 11
    /// times").
    pub loads: usize,
    /// Seconds of cross traffic before the first load.
    pub warmup_s: u64,
    /// The bottleneck queue, in ms at the setting's capacity; several make
    /// a sweep, each setting run once per queue (seed 002 does not give its
    /// emulator's queue, and FLD_TCP's gain depends on it). A single number
    /// in older config files reads as one queue.
    #[serde(deserialize_with = "one_or_many")]
    pub queue_ms: Vec<u64>,
    /// Background flows instead of the settings' (empty: no cross traffic).
    pub cross: Option<Vec<Flow>>,
    /// The client's initial receive buffer (`net.ipv4.tcp_rmem`).
    pub client_rmem: usize,
    /// The Chromium binary (page type `chromium`).
    pub chromium: PathBuf,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for PagesConfig {
    fn default() -> PagesConfig {
        PagesConfig {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            settings: vec!["lte".into(), "3g".into()],
            ccs: vec!["cubic".into(), FLD.into()],
            protocols: vec!["h2".into(), "h1".into()],
            loads: 11,
            warmup_s: 5,
            queue_ms: vec![20],
            cross: None,
            client_rmem: CLIENT_RMEM,
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            out: PathBuf::from("out/lab"),
        }
    }
}

/// Reads a number or a list of numbers as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(u64),
        Many(Vec<u64>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(n) => vec![n],
        OneOrMany::Many(v) => v,
    })
}

impl PagesConfig {
    /// Each setting and queue the run has, and its label in the tables: the
    /// setting's name, with `-q<ms>` when the run sweeps the queue.
    pub fn cells(&self) -> Vec<(String, u64, String)> {
        let sweep = self.queue_ms.len() > 1;
        self.settings
            .iter()
            .flat_map(|s| {
                self.queue_ms.iter().map(move |&q| {
                    let label = if sweep {
                        format!("{s}-q{q}")
                    } else {
                        s.clone()
                    };
                    (s.clone(), q, label)
                })
            })
            .collect()
    }
}

/// One page load of the pages experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageRun {
    /// Network setting, with `-q<ms>` in a queue sweep
    /// ([`PagesConfig::cells`]).
    pub setting: String,
    /// The bottleneck queue, ms (`None` in runs recorded before it was
    /// kept).
    #[serde(default)]
    pub queue_ms: Option<u64>,
    /// Page type (`h2`, `h1`).
    pub protocol: String,
    /// The server's control.
    pub cc: String,
    /// The page.
    pub page: String,
    /// Load index.
    pub run: usize,
    /// Wire load time (first SYN to last byte), s.
    pub plt_s: Option<f64>,
    /// Page net transfer time: load time minus idle time, s.
    pub net_transfer_s: Option<f64>,
    /// Idle share of the load.
    pub idle_share: Option<f64>,
    /// Effective concurrency.
    pub effective_concurrency: Option<f64>,
    /// Each connection's duration, s.
    pub connection_s: Vec<f64>,
    /// Each connection's body bytes.
    pub connection_bytes: Vec<u64>,
    /// Seed 002 Fig. 11: per RTT bin, the most bytes a connection's first
    /// object received.
    pub first_object_bins: Vec<u64>,
    /// Objects that failed.
    pub failed: usize,
    /// Median TCP handshake time of the load's connections, ms: the round
    /// trip the page saw, queueing included.
    pub handshake_ms: Option<f64>,
    /// What the origin's TCP did to repair losses during the load (`None`
    /// for Chromium loads and for runs recorded before it was counted).
    #[serde(default)]
    pub server_tcp: Option<TcpCounters>,
}

/// Each connection's busy span, from its opening to the last body byte it
/// delivered (a browser keeps connections open long after the page; the
/// span is how long the page used it), and its body bytes. Connections that
/// carried nothing are left out.
pub fn connection_spans(record: &LoadRecord) -> Vec<(f64, u64)> {
    record
        .connections
        .iter()
        .filter_map(|c| {
            let carried: Vec<&ObjectTiming> = record
                .objects
                .iter()
                .filter(|o| o.connection == Some(c.id))
                .collect();
            let last = carried.iter().filter_map(|o| last_data_us(o)).max()?;
            let bytes = carried.iter().map(|o| o.body_bytes).sum();
            Some((last.saturating_sub(c.open_us) as f64 / 1e6, bytes))
        })
        .collect()
}

/// Seed 002 Fig. 11 for one load: for each round trip since the first byte
/// of a connection's first object, the most body bytes any connection's
/// first object received in it. A round trip is the connection's own
/// handshake time (SYN to SYN-ACK as the client saw it), so queueing from
/// cross traffic stretches the bins as it stretches the window's rounds.
pub fn first_object_rounds(record: &LoadRecord) -> Vec<u64> {
    let mut most: Vec<u64> = Vec::new();
    for c in &record.connections {
        let Some(rtt) = c
            .connected_us
            .map(|t| t.saturating_sub(c.open_us))
            .filter(|&r| r > 0)
        else {
            continue;
        };
        let Some(first) = record
            .objects
            .iter()
            .filter(|o| o.connection == Some(c.id))
            .min_by_key(|o| (o.request_us, o.id))
        else {
            continue;
        };
        let Some(t0) = first
            .chunks
            .iter()
            .find(|ch| ch.bytes > 0)
            .map(|ch| ch.t_us)
        else {
            continue;
        };
        let mut bins: Vec<u64> = Vec::new();
        for ch in first.chunks.iter().filter(|ch| ch.bytes > 0) {
            let k = ((ch.t_us.saturating_sub(t0)) / rtt).min(63) as usize;
            if bins.len() <= k {
                bins.resize(k + 1, 0);
            }
            bins[k] += ch.bytes;
        }
        if most.len() < bins.len() {
            most.resize(bins.len(), 0);
        }
        for (k, b) in bins.into_iter().enumerate() {
            most[k] = most[k].max(b);
        }
    }
    most
}

/// The origin namespace's TCP counters that say how a load's losses were
/// repaired (`/proc/net/snmp` and `/proc/net/netstat` read from inside the
/// namespace; only the origin's sockets live there, the background flows
/// have hosts of their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpCounters {
    /// Segments retransmitted (`Tcp: RetransSegs`).
    pub retrans_segs: u64,
    /// Retransmission timeouts (`TcpExt: TCPTimeouts`).
    pub timeouts: u64,
    /// Tail loss probes sent (`TcpExt: TCPLossProbes`).
    pub loss_probes: u64,
}

impl From<mewa_probe::tcpinfo::RepairCounters> for TcpCounters {
    fn from(r: mewa_probe::tcpinfo::RepairCounters) -> TcpCounters {
        TcpCounters {
            retrans_segs: r.retrans_segs,
            timeouts: r.timeouts,
            loss_probes: r.loss_probes,
        }
    }
}

impl TcpCounters {
    /// Parses the two files' text ([`mewa_probe::tcpinfo::Counters`]); zeros
    /// where a file lacks its TCP section.
    pub fn parse(snmp: &str, netstat: &str) -> TcpCounters {
        TcpCounters::from(
            mewa_probe::tcpinfo::Counters::parse(netstat, snmp)
                .map(|c| c.repair())
                .unwrap_or_default(),
        )
    }

    /// Reads them in `host`'s namespace (zeros if unreadable). Through
    /// `/proc/thread-self`: `/proc/net` follows the process's main thread,
    /// which stays in the machine's namespace.
    pub(crate) fn read(topo: &Topology, host: &str) -> TcpCounters {
        TcpCounters::from(mewa_probe::tcpinfo::counters_in(topo, host).repair())
    }

    /// `self − before`, per counter.
    pub(crate) fn since(self, before: TcpCounters) -> TcpCounters {
        TcpCounters {
            retrans_segs: self.retrans_segs.saturating_sub(before.retrans_segs),
            timeouts: self.timeouts.saturating_sub(before.timeouts),
            loss_probes: self.loss_probes.saturating_sub(before.loss_probes),
        }
    }
}

/// The loader's protocol and TLS for a page type (`chromium` has none: the
/// browser chooses, HTTP/2 over TLS).
fn protocol_of(name: &str) -> Option<(Protocol, bool)> {
    match name {
        "h2" => Some((Protocol::H2, true)),
        "h1" => Some((Protocol::H1, false)),
        _ => None,
    }
}

/// The page type that loads in headless Chromium (HTTP/2 over TLS).
pub const CHROMIUM: &str = "chromium";
/// The page type that loads in headless Chromium with HTTP/2 turned off:
/// HTTP/1.1 over TLS, six connections per host, as Chromium opens them.
pub const CHROMIUM_H1: &str = "chromium-h1";
/// The page type that loads in headless Chromium over `http://`: HTTP/1.1
/// in the clear, as seed 002's unencrypted pages were (generated pages
/// only; recordings keep their schemes).
pub const CHROMIUM_HTTP: &str = "chromium-http";

/// How a Chromium page type starts the browser: its flags, and whether it
/// loads the page in the clear. `None` for the loader's types.
fn chromium_type(name: &str) -> Option<(&'static [&'static str], bool)> {
    match name {
        CHROMIUM => Some((crate::browser::protocol_flags(Protocol::H2), false)),
        CHROMIUM_H1 => Some((crate::browser::protocol_flags(Protocol::H1), false)),
        CHROMIUM_HTTP => Some((&[], true)),
        _ => None,
    }
}

/// Loads every page with each control under each setting's cross traffic.
pub fn pages(config: &PagesConfig, progress: &Progress) -> Result<SectionReport, ExperimentError> {
    at_least_one("--loads", config.loads)?;
    at_least_one("--cc", config.ccs.len())?;
    at_least_one("--setting", config.settings.len())?;
    at_least_one("--type", config.protocols.len())?;
    at_least_one("--queue-ms", config.queue_ms.len())?;
    if let Some(q) = config.queue_ms.iter().find(|&&q| q == 0 || q > 10_000) {
        return Err(ExperimentError::Config {
            field: "--queue-ms",
            message: format!("{q}: give 1 to 10000 ms"),
        });
    }
    // (setting with its label as name, queue).
    let settings = config
        .cells()
        .into_iter()
        .map(|(s, q, label)| {
            let mut setting = Setting::by_name(&s).ok_or_else(|| ExperimentError::Config {
                field: "--setting",
                message: format!("{s}: give lte or 3g"),
            })?;
            if let Some(c) = &config.cross {
                setting.cross = c.clone();
            }
            setting.name = label;
            Ok((setting, q))
        })
        .collect::<Result<Vec<_>, ExperimentError>>()?;
    for p in &config.protocols {
        if protocol_of(p).is_none() && chromium_type(p).is_none() {
            return Err(ExperimentError::Config {
                field: "--type",
                message: format!(
                    "{p}: give h2 (HTTP/2 over TLS), h1 (HTTP/1.1 in the clear), \
                     {CHROMIUM}, {CHROMIUM_H1} or {CHROMIUM_HTTP}"
                ),
            });
        }
    }
    if config.protocols.iter().any(|p| chromium_type(p).is_some()) && !config.chromium.exists() {
        return Err(ExperimentError::Config {
            field: "--chromium",
            message: format!(
                "no Chromium at {} (apt-get install chromium, or --chromium PATH)",
                config.chromium.display()
            ),
        });
    }
    let corpus = config.corpus.load()?;
    if config.protocols.iter().any(|p| p == CHROMIUM_HTTP)
        && !matches!(corpus.provenance, mewa_corpus::Provenance::Generated { .. })
    {
        return Err(ExperimentError::Config {
            field: "--type",
            message: format!(
                "{CHROMIUM_HTTP}: recorded pages keep their recorded schemes and cannot be \
                 loaded in the clear; use it with generated pages (meh15, general), or \
                 {CHROMIUM_H1} for HTTP/1.1 over TLS"
            ),
        });
    }
    let origin = config.origin.settings()?;
    needs_root()?;
    let mut ccs = config.ccs.clone();
    ccs.push("cubic".into());
    check_controls(&ccs)?;
    let folder = ResultFolder::create(&config.out, "fld-pages", "mewa lab fld pages", config)?;
    // Chromium's profiles and NetLogs while a load runs.
    let work = std::env::temp_dir().join(format!("mewa-fld-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(ExperimentError::io("creating", &work))?;
    let total = settings.len()
        * config.loads
        * corpus.pages.len()
        * config.protocols.len()
        * config.ccs.len();
    let mut runs = Vec::new();
    let mut cross_logs = Vec::new();
    for (setting, queue_ms) in &settings {
        // Every connection the origin accepts switches to the control of
        // the current load: the listener runs cubic (not bbr, whose pacing
        // would stay on after a switch; GUIDE §3).
        let current = Arc::new(Mutex::new(config.ccs[0].clone()));
        let cur = current.clone();
        let hook: mewa_origin::AcceptHook = Arc::new(move |s: &tokio::net::TcpStream| {
            let cc = mewa_model::sync::lock(&cur).clone();
            if let Err(e) = socket2::SockRef::from(s).set_tcp_congestion(cc.as_bytes()) {
                tracing::warn!("switching an accepted connection to {cc}: {e}");
            }
        });
        let mut settings_origin = origin.clone();
        settings_origin.congestion = "cubic".into();
        let bed = Bed::start_with_cross_hosts_hooked(
            &corpus,
            link(
                Duration::from_millis(setting.one_way_ms),
                setting.capacity_bps,
                Some(queue_bytes(setting.capacity_bps, *queue_ms)),
            ),
            LinkOptions::default(),
            &settings_origin,
            Some(hook),
        )?;
        let topo = bed.running()?;
        set_client_rmem(topo, CLIENT, config.client_rmem)?;
        let cross = Cross::start(topo, &setting.cross, Duration::from_secs(1))
            .map_err(ExperimentError::Cross)?;
        std::thread::sleep(Duration::from_secs(config.warmup_s));
        for run in 0..config.loads {
            for page in &corpus.pages {
                for proto in &config.protocols {
                    let loader = protocol_of(proto);
                    // Alternate which control goes first, so a drift in the
                    // cross traffic does not favour one.
                    let mut order = config.ccs.clone();
                    if run % 2 == 1 {
                        order.reverse();
                    }
                    for cc in &order {
                        progress.step(
                            runs.len(),
                            total,
                            &format!("{} {} {proto} {cc}", setting.name, page.name),
                        );
                        *mewa_model::sync::lock(&current) = cc.clone();
                        let Some((protocol, tls)) = loader else {
                            let (flags, clear_text) = chromium_type(proto).unwrap_or((&[], false));
                            let a = with_chromium(
                                &bed,
                                page,
                                &Browser {
                                    binary: &config.chromium,
                                    flags,
                                    clear_text,
                                },
                                &origin.ca_dir,
                                &work,
                                None,
                                None,
                            )?;
                            runs.push(PageRun {
                                setting: setting.name.clone(),
                                queue_ms: Some(*queue_ms),
                                protocol: proto.clone(),
                                cc: cc.clone(),
                                page: page.name.clone(),
                                run,
                                plt_s: a.plt_s,
                                net_transfer_s: None,
                                idle_share: None,
                                effective_concurrency: None,
                                connection_s: Vec::new(),
                                connection_bytes: Vec::new(),
                                first_object_bins: Vec::new(),
                                failed: a.missing.len(),
                                handshake_ms: None,
                                server_tcp: None,
                            });
                            continue;
                        };
                        let opts = bed.options(LoadOptions::browser(protocol, tls));
                        let before = TcpCounters::read(topo, SERVER);
                        let record = bed.load(page, &opts)?;
                        let server_tcp = TcpCounters::read(topo, SERVER).since(before);
                        let m = page_metrics(&record);
                        let spans = connection_spans(&record);
                        runs.push(PageRun {
                            setting: setting.name.clone(),
                            queue_ms: Some(*queue_ms),
                            protocol: proto.clone(),
                            cc: cc.clone(),
                            page: page.name.clone(),
                            run,
                            plt_s: m.plt_wire_s,
                            net_transfer_s: m.busy_s,
                            idle_share: m.idle_share,
                            effective_concurrency: m.effective_concurrency,
                            connection_s: spans.iter().map(|s| s.0).collect(),
                            connection_bytes: spans.iter().map(|s| s.1).collect(),
                            first_object_bins: first_object_rounds(&record),
                            handshake_ms: median(
                                &record
                                    .connections
                                    .iter()
                                    .filter_map(|c| {
                                        c.connected_us
                                            .map(|t| t.saturating_sub(c.open_us) as f64 / 1e3)
                                    })
                                    .collect::<Vec<_>>(),
                            ),
                            failed: m.failed_objects,
                            server_tcp: Some(server_tcp),
                        });
                    }
                }
            }
        }
        let log = cross.stop();
        bed.shutdown()?;
        cross_logs.push((setting.clone(), log));
    }
    progress.step(total, total, "done");
    let _ = std::fs::remove_dir_all(&work);
    Ok(pages_report(config, runs, cross_logs, Some(folder)))
}

/// Each page's median of `f` over its loads in `runs`.
fn page_medians(runs: &[&PageRun], f: impl Fn(&PageRun) -> Option<f64>) -> BTreeMap<String, f64> {
    let mut by_page: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        if let Some(v) = f(r) {
            by_page.entry(r.page.clone()).or_default().push(v);
        }
    }
    by_page
        .into_iter()
        .filter_map(|(p, v)| median(&v).map(|m| (p, m)))
        .collect()
}

/// A control against cubic over the pages both loaded: the median of the
/// per-page changes, the change of the sums, and on how many pages it was
/// faster. Positive changes are reductions.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// Pages both have.
    pub pages: usize,
    /// Pages where the control's median is below cubic's.
    pub faster: usize,
    /// Median over pages of `100 × (cubic − other) / cubic`.
    pub median_change_pct: Option<f64>,
    /// `100 × (Σ cubic − Σ other) / Σ cubic` over the pages.
    pub pooled_change_pct: Option<f64>,
}

impl Compared {
    /// Compares per-page medians `other` with `cubic`.
    pub fn new(cubic: &BTreeMap<String, f64>, other: &BTreeMap<String, f64>) -> Compared {
        let pairs: Vec<(f64, f64)> = cubic
            .iter()
            .filter_map(|(p, &c)| other.get(p).map(|&o| (c, o)))
            .collect();
        let changes: Vec<f64> = pairs
            .iter()
            .filter(|(c, _)| *c > 0.0)
            .map(|(c, o)| 100.0 * (c - o) / c)
            .collect();
        let (sc, so) = pairs
            .iter()
            .fold((0.0, 0.0), |(a, b), (c, o)| (a + c, b + o));
        Compared {
            pages: pairs.len(),
            faster: pairs.iter().filter(|(c, o)| o < c).count(),
            median_change_pct: median(&changes),
            pooled_change_pct: (sc > 0.0).then(|| 100.0 * (sc - so) / sc),
        }
    }
}

/// What `result.json` of a pages run holds, read back.
#[derive(Debug, Deserialize)]
struct PagesResult {
    runs: Vec<PageRun>,
    cross: Vec<CrossEntry>,
}

#[derive(Debug, Deserialize)]
struct CrossEntry {
    setting: Setting,
    log: CrossLog,
}

/// Writes the report of the pages run in `dir` again from its
/// `config.json` and `result.json` (after the report changed, or to read
/// an old run with today's tables).
pub fn pages_report_again(dir: &std::path::Path) -> Result<SectionReport, ExperimentError> {
    let config: PagesConfig = mewa_report::read_config(&dir.join("config.json"))?;
    let result: PagesResult = mewa_report::read_config(&dir.join("result.json"))?;
    let folder = ResultFolder::existing(dir)?;
    let cross = result
        .cross
        .into_iter()
        .map(|c| (c.setting, c.log))
        .collect();
    Ok(pages_report(&config, result.runs, cross, Some(folder)))
}

/// The loads of one cell of the pages report: a setting's label (with
/// its queue in a sweep), a page type and a control.
fn cell<'a>(runs: &'a [PageRun], setting: &str, protocol: &str, cc: &str) -> Vec<&'a PageRun> {
    runs.iter()
        .filter(|r| r.setting == setting && r.protocol == protocol && r.cc == cc)
        .collect()
}

/// Fig. 6's comparison of `cc` with cubic for one setting label and page
/// type, page by page: the net transfer time, or for Chromium (which gives
/// the load time only) the load time.
fn against_cubic(runs: &[PageRun], setting: &str, protocol: &str, cc: &str) -> Compared {
    let key: fn(&PageRun) -> Option<f64> = if chromium_type(protocol).is_some() {
        |r| r.plt_s
    } else {
        |r| r.net_transfer_s
    };
    Compared::new(
        &page_medians(&cell(runs, setting, protocol, "cubic"), key),
        &page_medians(&cell(runs, setting, protocol, cc), key),
    )
}

/// The queue sweep's table and one plot per setting: each control's
/// median change against cubic (Fig. 6's comparison) at each queue.
fn queue_sweep(config: &PagesConfig, runs: &[PageRun]) -> (Table, Vec<Plot>) {
    let mut t = Table::new(&[
        "setting",
        "queue ms",
        "page type",
        "cc",
        "change vs cubic, median of pages %",
        "pooled change %",
        "pages faster than cubic",
    ]);
    let mut plots = Vec::new();
    for setting in &config.settings {
        let mut series = Vec::new();
        for p in &config.protocols {
            for cc in config.ccs.iter().filter(|c| *c != "cubic") {
                let mut points = Vec::new();
                for (s, q, label) in config.cells() {
                    if &s != setting {
                        continue;
                    }
                    let c = against_cubic(runs, &label, p, cc);
                    if let Some(m) = c.median_change_pct {
                        points.push((q as f64, m));
                    }
                    t.push(vec![
                        s.clone(),
                        q.to_string(),
                        type_name(p).into(),
                        cc.clone(),
                        opt(c.median_change_pct, 1),
                        opt(c.pooled_change_pct, 1),
                        format!("{}/{}", c.faster, c.pages),
                    ]);
                }
                series.push(Series {
                    name: format!("{} {cc}", type_name(p)),
                    points,
                    mark: Mark::Line,
                    colour: series.len(),
                });
            }
        }
        plots.push(Plot {
            file: format!("queue-sweep-{setting}.svg"),
            title: format!("FLD_TCP against cubic by bottleneck queue, {setting}"),
            x_label: "queue (ms at capacity)".into(),
            y_label: "change vs cubic, median of pages (%; + is faster)".into(),
            series,
        });
    }
    (t, plots)
}

/// Median over pages of each page's median of `f`, for one group.
fn median_of_pages(runs: &[&PageRun], f: impl Fn(&PageRun) -> Option<f64>) -> Option<f64> {
    let mut by_page: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in runs {
        if let Some(v) = f(r) {
            by_page.entry(&r.page).or_default().push(v);
        }
    }
    let meds: Vec<f64> = by_page.values().filter_map(|v| median(v)).collect();
    median(&meds)
}

/// The pages experiment's tables (Figs. 6–11, the connection sizes) and
/// plots.
pub fn pages_report(
    config: &PagesConfig,
    runs: Vec<PageRun>,
    cross: Vec<(Setting, CrossLog)>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let mut sections = Vec::new();
    let mut plots = Vec::new();
    let labels: Vec<String> = config.cells().into_iter().map(|c| c.2).collect();
    let group = |s: &str, p: &str, cc: &str| cell(&runs, s, p, cc);
    // Fig. 6: page net transfer time per page type, each control against
    // cubic page by page (paired: the pages differ far more than the
    // controls do).
    let mut t6 = Table::new(&[
        "setting",
        "page type",
        "cc",
        "net transfer s (median of pages)",
        "load s (median of pages)",
        "change vs cubic, median of pages %",
        "pooled change %",
        "pages faster than cubic",
    ]);
    for s in &labels {
        for p in &config.protocols {
            for cc in &config.ccs {
                let g = group(s, p, cc);
                let net = median_of_pages(&g, |r| r.net_transfer_s);
                let plt = median_of_pages(&g, |r| r.plt_s);
                let (change, pooled, faster) = if cc == "cubic" {
                    ("-".into(), "-".into(), "-".into())
                } else {
                    let c = against_cubic(&runs, s, p, cc);
                    (
                        opt(c.median_change_pct, 1),
                        opt(c.pooled_change_pct, 1),
                        format!("{}/{}", c.faster, c.pages),
                    )
                };
                t6.push(vec![
                    s.clone(),
                    type_name(p).into(),
                    cc.clone(),
                    opt(net, 3),
                    opt(plt, 3),
                    change,
                    pooled,
                    faster,
                ]);
            }
        }
    }
    sections.push(Section {
        title: "Fig. 6: page net transfer time (load time minus idle time) per page type".into(),
        csv: "fig6-net-transfer.csv",
        table: t6,
        note: "Seed 002 Fig. 6: FLD_TCP reduces the page net transfer time for all page types, \
               more on 3G than on LTE. Target: below cubic's for every page type on both settings. \
               Chromium rows compare the load time (first to last request event in its NetLog)."
            .into(),
    });
    if config.queue_ms.len() > 1 {
        let (table, sweep_plots) = queue_sweep(config, &runs);
        sections.push(Section {
            title: "The queue sweep: each control against cubic by bottleneck queue".into(),
            csv: "queue-sweep.csv",
            table,
            note:
                "Fig. 6's comparison (the median over pages of each page's change against cubic; \
                   + is faster) for each bottleneck queue, in ms at the setting's capacity. Seed \
                   002 does not give its emulator's queue; the background flows keep whatever \
                   queue there is full, so its depth decides how much of FLD_TCP's faster growth \
                   turns into losses."
                    .into(),
        });
        plots.extend(sweep_plots);
    }
    // The loader's page types: Chromium gives no per-object timing.
    let loader_types: Vec<&String> = config
        .protocols
        .iter()
        .filter(|p| chromium_type(p).is_none())
        .collect();
    let loader_types = &loader_types;
    // Figs. 7, 8: idle share and effective concurrency, quartiles and CDFs.
    for (fig, what, file, f) in [
        (
            7,
            "idle share of the load",
            "fig7-idle-share",
            (|r: &PageRun| r.idle_share) as fn(&PageRun) -> Option<f64>,
        ),
        (
            8,
            "effective concurrency",
            "fig8-concurrency",
            |r: &PageRun| r.effective_concurrency,
        ),
    ] {
        let mut t = Table::new(&[
            "setting",
            "page type",
            "cc",
            "p25",
            "median",
            "p75",
            "loads",
        ]);
        for s in &labels {
            for p in loader_types {
                let mut series = Vec::new();
                for (i, cc) in config.ccs.iter().enumerate() {
                    let v: Vec<f64> = group(s, p, cc).iter().filter_map(|r| f(r)).collect();
                    t.push(vec![
                        s.clone(),
                        type_name(p).into(),
                        cc.clone(),
                        opt(quantile(&v, 0.25), 3),
                        opt(quantile(&v, 0.5), 3),
                        opt(quantile(&v, 0.75), 3),
                        v.len().to_string(),
                    ]);
                    series.push(mewa_report::cdf_series(cc, &v, i));
                }
                plots.push(Plot {
                    file: format!("{file}-{s}-{p}.svg"),
                    title: format!("Fig. {fig}: {what}, {s}, {}", type_name(p)),
                    x_label: what.into(),
                    y_label: "CDF of loads".into(),
                    series,
                });
            }
        }
        let note = if fig == 7 {
            "Seed 002 Fig. 7: the median page is idle about 50 % of its load; FLD_TCP raises the idle share (it finishes transfers sooner)."
        } else {
            "Seed 002 Fig. 8: most pages below a concurrency of 2; FLD_TCP lowers it."
        };
        sections.push(Section {
            title: format!("Fig. {fig}: {what}"),
            csv: if fig == 7 {
                "fig7-idle-share.csv"
            } else {
                "fig8-concurrency.csv"
            },
            table: t,
            note: note.into(),
        });
    }
    // Figs. 9, 10: connection durations (h1 = unencrypted, h2 = encrypted
    // HTTP/2).
    let mut t9 = Table::new(&[
        "setting",
        "connections",
        "cc",
        "p25 s",
        "median s",
        "p75 s",
        "p90 s",
        "count",
    ]);
    for s in &labels {
        for p in loader_types {
            let mut series = Vec::new();
            for (i, cc) in config.ccs.iter().enumerate() {
                let v: Vec<f64> = group(s, p, cc)
                    .iter()
                    .flat_map(|r| r.connection_s.iter().copied())
                    .collect();
                t9.push(vec![
                    s.clone(),
                    type_name(p).into(),
                    cc.clone(),
                    opt(quantile(&v, 0.25), 3),
                    opt(quantile(&v, 0.5), 3),
                    opt(quantile(&v, 0.75), 3),
                    opt(quantile(&v, 0.9), 3),
                    v.len().to_string(),
                ]);
                series.push(mewa_report::cdf_series(cc, &v, i));
            }
            plots.push(Plot {
                file: format!("fig9-10-connection-duration-{s}-{p}.svg"),
                title: format!("Figs. 9-10: connection duration, {s}, {}", type_name(p)),
                x_label: "connection duration (s)".into(),
                y_label: "CDF of connections".into(),
                series,
            });
        }
    }
    sections.push(Section {
        title: "Figs. 9-10: connection duration".into(),
        csv: "fig9-10-connection-duration.csv",
        table: t9,
        note:
            "Seed 002 Figs. 9-10: FLD_TCP shortens encrypted, unencrypted and HTTP/2 connections."
                .into(),
    });
    // Fig. 11: most bytes of a first object per RTT bin.
    let mut t11 = Table::new(&[
        "setting", "cc", "RTT 1 kB", "RTT 2 kB", "RTT 3 kB", "RTT 4 kB", "RTT 5 kB",
    ]);
    for s in &labels {
        let mut series = Vec::new();
        for (i, cc) in config.ccs.iter().enumerate() {
            let mut most: Vec<u64> = Vec::new();
            for r in runs.iter().filter(|r| &r.setting == s && &r.cc == cc) {
                for (k, &b) in r.first_object_bins.iter().enumerate() {
                    if most.len() <= k {
                        most.resize(k + 1, 0);
                    }
                    most[k] = most[k].max(b);
                }
            }
            let mut row = vec![s.clone(), cc.clone()];
            row.extend((0..5).map(|k| {
                most.get(k)
                    .map_or_else(|| "-".into(), |b| format!("{:.1}", *b as f64 / 1e3))
            }));
            t11.push(row);
            series.push(Series {
                name: cc.clone(),
                points: most
                    .iter()
                    .take(10)
                    .enumerate()
                    .map(|(k, &b)| ((k + 1) as f64, b as f64 / 1e3))
                    .collect(),
                mark: Mark::Line,
                colour: i,
            });
        }
        plots.push(Plot {
            file: format!("fig11-rtt-bins-{s}.svg"),
            title: format!("Fig. 11: most bytes of a connection's first object per RTT bin, {s}"),
            x_label: "RTT bin".into(),
            y_label: "kB".into(),
            series,
        });
    }
    sections.push(Section {
        title: "Fig. 11: most bytes a connection's first object received in each RTT bin".into(),
        csv: "fig11-rtt-bins.csv",
        table: t11,
        note: "Seed 002 Fig. 11: 14 kB in the first RTT for both; then Cubic's window doubles and \
               FLD_TCP's triples. Here a round trip is each connection's own handshake time \
               (queueing included), counted from the first byte of its first object; the most \
               over every load of the setting."
            .into(),
    });
    // How the server repaired losses.
    let mut tl = Table::new(&[
        "setting",
        "page type",
        "cc",
        "retransmitted segments per load (mean)",
        "timeouts per load (mean)",
        "loss probes per load (mean)",
        "loads with a timeout",
    ]);
    for s in &labels {
        for p in loader_types {
            for cc in &config.ccs {
                let g: Vec<TcpCounters> = group(s, p, cc)
                    .iter()
                    .filter_map(|r| r.server_tcp)
                    .collect();
                let n = g.len().max(1) as f64;
                let mean =
                    |f: fn(&TcpCounters) -> u64| -> f64 { g.iter().map(f).sum::<u64>() as f64 / n };
                let cell = |v: f64, digits: usize| {
                    if g.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{v:.digits$}")
                    }
                };
                tl.push(vec![
                    s.clone(),
                    type_name(p).into(),
                    cc.clone(),
                    cell(mean(|c| c.retrans_segs), 1),
                    cell(mean(|c| c.timeouts), 2),
                    cell(mean(|c| c.loss_probes), 2),
                    format!(
                        "{}/{}",
                        g.iter().filter(|c| c.timeouts > 0).count(),
                        g.len()
                    ),
                ]);
            }
        }
    }
    sections.push(Section {
        title: "Loss repair at the server (the origin namespace's TCP counters per load)".into(),
        csv: "server-tcp.csv",
        table: tl,
        note: "Retransmitted segments, retransmission timeouts and tail loss probes of the \
               origin's sockets during each load (the background flows run on hosts of their own)."
            .into(),
    });
    // The connection-size study.
    let mut ts = Table::new(&["setting", "page type", "connections", "< 50 kB", "< 500 kB"]);
    for s in &labels {
        for p in loader_types {
            let sizes: Vec<u64> = group(s, p, "cubic")
                .iter()
                .flat_map(|r| r.connection_bytes.iter().copied())
                .collect();
            let share = |lim: u64| {
                if sizes.is_empty() {
                    "-".into()
                } else {
                    pct(100.0 * sizes.iter().filter(|&&b| b < lim).count() as f64
                        / sizes.len() as f64)
                }
            };
            ts.push(vec![
                s.clone(),
                type_name(p).into(),
                sizes.len().to_string(),
                share(50_000),
                share(500_000),
            ]);
        }
    }
    sections.push(Section {
        title: "Connection sizes (the cubic loads)".into(),
        csv: "connection-sizes.csv",
        table: ts,
        note: "Seed 002 §3.1 (Alexa 100 and HTTP Archive): almost 85 % of connections carry less than \
               50 kB and 99 % less than 500 kB."
            .into(),
    });
    // The cross traffic.
    let mut tc = Table::new(&[
        "setting",
        "capacity Mbit/s",
        "cross flows",
        "cross Mbit/s (mean)",
        "capacity minus cross Mbit/s",
        "page handshake RTT ms (median)",
    ]);
    let mut extra = Vec::new();
    for (s, log) in &cross {
        let total: f64 = log.mean_bps(1).iter().sum();
        tc.push(vec![
            s.name.clone(),
            format!("{:.0}", s.capacity_bps as f64 / 1e6),
            s.cross
                .iter()
                .map(Flow::label)
                .collect::<Vec<_>>()
                .join(" "),
            format!("{:.1}", total / 1e6),
            format!("{:.1}", (s.capacity_bps as f64 - total).max(0.0) / 1e6),
            opt(
                median(
                    &runs
                        .iter()
                        .filter(|r| r.setting == s.name)
                        .filter_map(|r| r.handshake_ms)
                        .collect::<Vec<_>>(),
                ),
                1,
            ),
        ]);
        extra.push((format!("cross-{}.csv", s.name), log.to_csv()));
    }
    sections.push(Section {
        title: "Cross traffic".into(),
        csv: "cross.csv",
        table: tc,
        note:
            "Seed 002: background iperf flows bring LTE's 100 Mbit/s to an effective 25 Mbit/s and \
               3G's 21 to 7. Here long cubic flows share the bottleneck with the page; what they \
               carried during the loads is above, per second in cross-<setting>.csv."
                .into(),
    });
    SectionReport {
        name: "fld pages",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs, "cross": cross.iter().map(|(s, l)| serde_json::json!({"setting": s, "log": l})).collect::<Vec<_>>() }),
        extra,
        folder,
    }
}

fn type_name(p: &str) -> &'static str {
    match p {
        "h2" => "encrypted (h2)",
        "h1" => "unencrypted (h1)",
        CHROMIUM => "Chromium, h2 (load time)",
        CHROMIUM_H1 => "Chromium, h1 over TLS (load time)",
        CHROMIUM_HTTP => "Chromium, h1 in the clear (load time)",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_loader::record::{Chunk, ConnectionTiming};

    fn conn(id: u32, open: u64, connected: u64) -> ConnectionTiming {
        ConnectionTiming {
            id,
            host: "a.test".into(),
            addr: "10.0.0.1:443".into(),
            protocol: Protocol::H2,
            tls: true,
            open_us: open,
            connected_us: Some(connected),
            ready_us: Some(connected),
            close_us: Some(10_000_000),
            error: None,
            iw: None,
            reused: false,
        }
    }

    fn obj(id: u32, conn: u32, request: u64, chunks: &[(u64, u64)]) -> ObjectTiming {
        ObjectTiming {
            id,
            url: format!("https://a.test/{id}"),
            host: "a.test".into(),
            content_type: "image/png".into(),
            connection: Some(conn),
            discovered_us: request,
            request_us: request,
            first_byte_us: chunks.first().map(|c| c.0),
            end_us: chunks.last().map(|c| c.0),
            status: 200,
            expected_status: 200,
            body_bytes: chunks.iter().map(|c| c.1).sum(),
            header_bytes: 100,
            chunks: chunks
                .iter()
                .map(|&(t_us, bytes)| Chunk { t_us, bytes })
                .collect(),
            error: None,
        }
    }

    fn record(objects: Vec<ObjectTiming>, connections: Vec<ConnectionTiming>) -> LoadRecord {
        LoadRecord {
            page: "p".into(),
            url: "https://a.test/".into(),
            protocol: Protocol::H2,
            tls: true,
            started_unix_ms: 0,
            done_us: Some(1_000_000),
            objects,
            connections,
            errors: Vec::new(),
        }
    }

    #[test]
    fn a_connection_lasts_from_its_opening_to_its_last_byte() {
        // The close (10 s, a browser's keep-alive) does not count; a
        // connection that carried nothing is left out.
        let r = record(
            vec![
                obj(0, 0, 1_000, &[(50_000, 1_000), (90_000, 500)]),
                obj(1, 0, 60_000, &[(120_000, 2_000)]),
            ],
            vec![conn(0, 0, 20_000), conn(1, 5_000, 25_000)],
        );
        assert_eq!(connection_spans(&r), vec![(0.12, 3_500)]);
    }

    #[test]
    fn first_objects_are_binned_by_their_connections_handshake_from_the_first_byte() {
        // Connection 0: handshake 20 ms; its first object's bytes at +0,
        // +10, +25, +41 ms from the first byte fall in bins 0, 0, 1, 2.
        // Connection 1: handshake 40 ms; bins 0 and 1. A later object on
        // connection 0 does not count.
        let r = record(
            vec![
                obj(
                    0,
                    0,
                    1_000,
                    &[
                        (30_000, 14_000),
                        (40_000, 1_000),
                        (55_000, 28_000),
                        (71_000, 5),
                    ],
                ),
                obj(1, 0, 2_000, &[(80_000, 99_999)]),
                obj(2, 1, 0, &[(100_000, 3_000), (150_000, 40_000)]),
            ],
            vec![conn(0, 0, 20_000), conn(1, 0, 40_000)],
        );
        assert_eq!(first_object_rounds(&r), vec![15_000, 40_000, 5]);
    }

    /// A loader's load of `page` over HTTP/2 on LTE whose net transfer
    /// took `net` seconds.
    fn page_run(page: &str, cc: &str, net: f64) -> PageRun {
        PageRun {
            setting: "lte".into(),
            queue_ms: Some(20),
            protocol: "h2".into(),
            cc: cc.into(),
            page: page.into(),
            run: 0,
            plt_s: Some(net + 0.1),
            net_transfer_s: Some(net),
            idle_share: Some(0.5),
            effective_concurrency: Some(1.0),
            connection_s: vec![net],
            connection_bytes: vec![40_000, 600_000],
            first_object_bins: vec![14_000, 42_000],
            failed: 0,
            handshake_ms: Some(26.0),
            server_tcp: None,
        }
    }

    #[test]
    fn the_pages_report_compares_each_control_with_cubic_page_by_page() {
        let run = page_run;
        let config = PagesConfig {
            settings: vec!["lte".into()],
            protocols: vec!["h2".into()],
            ..PagesConfig::default()
        };
        let runs = vec![
            run("a", "cubic", 1.0),
            run("a", FLD, 0.5),
            run("b", "cubic", 2.0),
            run("b", FLD, 2.5),
        ];
        let r = pages_report(&config, runs, Vec::new(), None);
        let fig6 = &r.sections[0].table;
        let fld = fig6
            .rows
            .iter()
            .find(|row| row[2] == FLD)
            .expect("a row for FLD");
        // Page a: 1.0 -> 0.5 (+50 %), page b: 2.0 -> 2.5 (-25 %); the
        // median of the changes +12.5 %, the sums 3.0 -> 3.0 (0 %); FLD
        // won on one page of two. The median over pages is 1.5 for both.
        assert_eq!(fld[3], "1.500");
        assert_eq!(fld[5], "12.5");
        assert_eq!(fld[6], "0.0");
        assert_eq!(fld[7], "1/2");
        let sizes = r
            .sections
            .iter()
            .find(|s| s.csv == "connection-sizes.csv")
            .expect("the connection-size table");
        assert_eq!(sizes.table.rows[0][2..], ["4", "50.0", "50.0"]);
    }

    #[test]
    fn chromium_types_compare_load_times_and_choose_protocol_and_scheme() {
        assert_eq!(chromium_type(CHROMIUM), Some((&[][..], false)));
        assert_eq!(
            chromium_type(CHROMIUM_H1),
            Some((&["--disable-http2"][..], false))
        );
        assert_eq!(chromium_type(CHROMIUM_HTTP), Some((&[][..], true)));
        assert_eq!(chromium_type("h1"), None);
        // Chromium gives a load time and no net transfer time.
        let run = |protocol: &str, cc: &str, plt: f64| PageRun {
            protocol: protocol.into(),
            plt_s: Some(plt),
            net_transfer_s: None,
            ..page_run("a", cc, 9.0)
        };
        let runs = vec![
            run(CHROMIUM, "cubic", 1.0),
            run(CHROMIUM, FLD, 0.8),
            run(CHROMIUM_H1, "cubic", 2.0),
            run(CHROMIUM_H1, FLD, 2.5),
        ];
        let h2 = against_cubic(&runs, "lte", CHROMIUM, FLD);
        let h1 = against_cubic(&runs, "lte", CHROMIUM_H1, FLD);
        assert_eq!(h2.median_change_pct.map(f64::round), Some(20.0));
        assert_eq!((h2.pages, h2.faster), (1, 1));
        assert_eq!(h1.median_change_pct.map(f64::round), Some(-25.0));
        assert_eq!((h1.pages, h1.faster), (1, 0));
    }

    #[test]
    fn a_queue_sweep_compares_with_cubic_at_each_queue() {
        // Old config files give one queue as a number.
        let old: PagesConfig = serde_json::from_str(r#"{"queue_ms": 20}"#).unwrap();
        assert_eq!(old.queue_ms, vec![20]);
        assert_eq!(
            old.cells()[0].2,
            "lte",
            "one queue keeps the setting's name"
        );
        let config = PagesConfig {
            settings: vec!["lte".into()],
            protocols: vec!["h1".into()],
            queue_ms: vec![10, 100],
            ..PagesConfig::default()
        };
        let labels: Vec<String> = config.cells().into_iter().map(|c| c.2).collect();
        assert_eq!(labels, ["lte-q10", "lte-q100"]);
        let run = |setting: &str, page: &str, cc: &str, net: f64| PageRun {
            setting: setting.into(),
            queue_ms: None,
            protocol: "h1".into(),
            ..page_run(page, cc, net)
        };
        // At 10 ms FLD is 20 % slower on both pages, at 100 ms 10 % and
        // 30 % faster.
        let runs = vec![
            run("lte-q10", "a", "cubic", 1.0),
            run("lte-q10", "a", FLD, 1.2),
            run("lte-q10", "b", "cubic", 2.0),
            run("lte-q10", "b", FLD, 2.4),
            run("lte-q100", "a", "cubic", 1.0),
            run("lte-q100", "a", FLD, 0.9),
            run("lte-q100", "b", "cubic", 2.0),
            run("lte-q100", "b", FLD, 1.4),
        ];
        let r = pages_report(&config, runs, Vec::new(), None);
        let sweep = &r
            .sections
            .iter()
            .find(|s| s.csv == "queue-sweep.csv")
            .expect("a sweep table")
            .table;
        let cells: Vec<(&str, &str, &str)> = sweep
            .rows
            .iter()
            .map(|r| (r[1].as_str(), r[4].as_str(), r[6].as_str()))
            .collect();
        assert_eq!(cells, [("10", "-20.0", "0/2"), ("100", "20.0", "2/2")]);
        let plot = r
            .plots
            .iter()
            .find(|p| p.file == "queue-sweep-lte.svg")
            .expect("a sweep plot");
        let points = &plot.series[0].points;
        assert_eq!(points.len(), 2);
        for (&(q, change), (want_q, want)) in points.iter().zip([(10.0, -20.0), (100.0, 20.0)]) {
            assert_eq!(q, want_q);
            assert!((change - want).abs() < 1e-9, "{change} at {q} ms");
        }
        // Fig. 6 has a row per queue.
        let fig6 = &r.sections[0].table;
        assert!(fig6.rows.iter().any(|r| r[0] == "lte-q100"));
    }

    #[test]
    fn the_bulk_report_compares_each_transport_with_its_own_cubic() {
        let config = BulkConfig {
            sizes: vec![500_000],
            ccs: vec!["cubic".into(), FLD.into()],
            quic_ccs: vec!["cubic".into(), "fld".into()],
            ..BulkConfig::default()
        };
        let run = |cc: &str, s: f64| BulkRun {
            bytes: 500_000,
            cc: cc.into(),
            run: 0,
            completion_s: s + 0.04,
            transfer_s: s,
            rounds: vec![10, 30],
            drops: 0,
        };
        let runs = vec![
            run("cubic", 0.4),
            run(FLD, 0.3),
            run("quic/cubic", 0.5),
            run("quic/fld", 0.4),
        ];
        let r = bulk_report(&config, runs, None);
        let t = &r.sections[0].table;
        let row = |cc: &str| t.rows.iter().find(|r| r[1] == cc).expect("a row");
        // Data time: 25 % below cubic over TCP, 20 % below quic/cubic.
        assert_eq!(row(FLD)[5], "25.0");
        assert_eq!(row("quic/fld")[5], "20.0");
        assert_eq!(row("cubic")[5], "-");
        assert_eq!(row("quic/cubic")[5], "-");
    }

    #[test]
    fn tcp_counters_are_read_by_name() {
        let snmp = "Ip: Forwarding\nIp: 1\nTcp: RtoAlgorithm RetransSegs InErrs\nTcp: 1 42 0\n";
        let netstat = "TcpExt: TW TCPLossProbes TCPTimeouts\nTcpExt: 9 3 5\nIpExt: A\nIpExt: 1\n";
        let c = TcpCounters::parse(snmp, netstat);
        assert_eq!(
            c,
            TcpCounters {
                retrans_segs: 42,
                timeouts: 5,
                loss_probes: 3
            }
        );
        assert_eq!(TcpCounters::parse("", "garbage"), TcpCounters::default());
        let later = TcpCounters {
            retrans_segs: 50,
            timeouts: 5,
            loss_probes: 4,
        };
        assert_eq!(
            later.since(c),
            TcpCounters {
                retrans_segs: 8,
                timeouts: 0,
                loss_probes: 1
            }
        );
    }

    proptest::proptest! {
        #[test]
        fn counters_parse_any_text_without_panicking(a in "\\PC{0,200}", b in "\\PC{0,200}") {
            let _ = TcpCounters::parse(&a, &b);
        }
    }
}
