//! `mewa lab iw`: seed 001's evaluation of the content-aware initial window.
//!
//! The `complat` pages (400, 1000 and 2400 KB, computation 0–95 % of the
//! load) over a radio link of 25 ms RTT at 60 Mbit/s plus a wired RTT of
//! 25, 75 or 125 ms, loaded back to back with three windows: the default
//! (IW 10, nothing asked), the content-aware one (the loader runs seed 001's
//! Algorithm 1 on the page's size, computation latency and α with the RTT it
//! measured on its handshake, and asks for it in its first request), and a
//! fixed large one for every page (what an operator would try instead). The
//! origin grants what is asked (BPF `mewa_iw` over TCP, the wrapped quinn
//! controller over QUIC; `mewa cc load` first).
//!
//! Per load: the completion time, the window asked and granted, the link's
//! queue drops and its queueing delay (what a flow sharing the bottleneck
//! would wait) while the load ran, and the origin's TCP retransmissions.
//! The report puts seed 001's figures beside ours: the optimal IW against
//! the computation share (Figs. 4–5), throughput compensation (Figs. 6–7),
//! estimated against measured computation share (Figs. 8–9) and completion
//! time (up to −25.1 %).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mewa_corpus::{generate, generate_with, Corpus, Page, Preset};
use mewa_link::core::EventKind;
use mewa_link::eventlog::EventLog;
use mewa_link::runtime::LinkOptions;
use mewa_model::iw::{optimal_iw, t_transfer, IwInputs};
use serde::{Deserialize, Serialize};

use crate::bed::{set_tcp_rmem, Bed, OriginSettings, CLIENT, SERVER};
use crate::bulk::fixed_link;
use crate::experiment::{
    at_least_one, ca_dir_or_default, needs_root, CorpusChoice, ExperimentError, Progress,
};
use crate::fld::{check_controls, queue_bytes, TcpCounters};
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{IwAsk, LoadOptions};
use mewa_report::median;
use mewa_report::plot::{Mark, Series};
use mewa_report::ResultFolder;
use mewa_report::Table;
use mewa_report::{quantile, Plot, Section, SectionReport};

/// The file each load is appended to as it ends (JSON lines, without the
/// link's figures, which are read once a bed is torn down).
pub const JOURNAL: &str = "runs.jsonl";

/// The arm that asks nothing: the default window.
pub const DEFAULT: &str = "default";
/// The arm that asks seed 001's window.
pub const AWARE: &str = "aware";
/// The arm that asks the same large window for every page.
pub const FIXED: &str = "fixed";

/// `mewa lab iw`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IwConfig {
    /// Pages of your own (a corpus or recordings) instead of `complat`;
    /// their computation latency is the sum of their scripts' compute time.
    pub corpus: Option<CorpusChoice>,
    /// `complat` computation shares (0 to 0.95); 0 is the 5 % page with its
    /// computation taken out.
    pub shares: Vec<f64>,
    /// Only pages whose name contains one of these (empty: every page).
    pub pages: Vec<String>,
    /// The local test CA (none: the default folder).
    pub ca_dir: Option<PathBuf>,
    /// The radio's round trip, ms.
    pub radio_rtt_ms: u64,
    /// The radio's rate both ways, bit/s.
    pub radio_bps: u64,
    /// Wired round trips added to the radio's, ms.
    pub wired_rtts_ms: Vec<u64>,
    /// Transports: `h3` (HTTP/3 over QUIC, seed 001's), `h2` (HTTP/2 over
    /// TLS over Linux TCP).
    pub protocols: Vec<String>,
    /// Arms: `default`, `aware`, `fixed`.
    pub arms: Vec<String>,
    /// The `fixed` arm's window, segments.
    pub fixed_iw: u32,
    /// Seed 001's α (the edge's policy).
    pub alpha: f64,
    /// The origin's largest grant (`--iw-max`).
    pub iw_max: u32,
    /// Back-to-back loads per page, arm, transport and RTT.
    pub runs: usize,
    /// The bottleneck queue, ms at the radio's rate.
    pub queue_ms: u64,
    /// The client's initial receive buffer (`tcp_rmem`): what a phone
    /// advertises bounds the window a server may use.
    pub client_rmem: usize,
    /// The origin's `net.ipv4.tcp_slow_start_after_idle` (`None`: the
    /// kernel's, on). On, a TCP connection idle for longer than its RTO
    /// (a page computing) starts again from the initial window of 10 however
    /// large the granted one was; QUIC (quinn) keeps its window.
    pub slow_start_after_idle: Option<bool>,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for IwConfig {
    fn default() -> IwConfig {
        let mut shares = vec![0.0];
        shares.extend((1..=19).map(|k| f64::from(k) * 0.05));
        IwConfig {
            corpus: None,
            shares,
            pages: Vec::new(),
            ca_dir: None,
            radio_rtt_ms: 25,
            radio_bps: 60_000_000,
            wired_rtts_ms: vec![25, 75, 125],
            protocols: vec!["h3".into(), "h2".into()],
            arms: vec![DEFAULT.into(), AWARE.into(), FIXED.into()],
            fixed_iw: 100,
            alpha: 1.0 / 3.0,
            iw_max: mewa_origin::iw::DEFAULT_MAX_SEGMENTS,
            runs: 30,
            queue_ms: 100,
            client_rmem: crate::fld::CLIENT_RMEM,
            slow_start_after_idle: None,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One load of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IwRun {
    /// Total RTT (radio + wired), ms.
    pub rtt_ms: u64,
    /// `h3` or `h2`.
    pub protocol: String,
    /// `default`, `aware` or `fixed`.
    pub arm: String,
    /// The page.
    pub page: String,
    /// Its bytes.
    pub page_bytes: u64,
    /// Its computation latency, ms.
    pub computation_ms: u64,
    /// Load index.
    pub run: usize,
    /// Completion time (the loader's: first connection to last byte), s;
    /// `None` if the load failed.
    pub completion_s: Option<f64>,
    /// The window the first connection asked for.
    pub asked: Option<u32>,
    /// What the origin granted it.
    pub granted: Option<u32>,
    /// The first connection's handshake RTT, ms.
    pub handshake_ms: Option<f64>,
    /// Packets the bottleneck queue dropped during the load (either way).
    pub drops: u64,
    /// Queueing delay of the downlink's packets during the load, ms: the
    /// 95th percentile and the largest (what a competing flow waited).
    pub queue_p95_ms: Option<f64>,
    /// See `queue_p95_ms`.
    pub queue_max_ms: Option<f64>,
    /// The origin's TCP repairs during the load (TCP only).
    pub server_tcp: Option<TcpCounters>,
}

/// The pages: `complat` at the configured shares, or the user's.
fn pages(config: &IwConfig) -> Result<Corpus, ExperimentError> {
    let mut corpus = match &config.corpus {
        Some(c) => c.load()?,
        None => {
            let mut corpus = generate(Preset::Complat, 1);
            corpus.pages.clear();
            for &s in &config.shares {
                if !(0.0..=0.95).contains(&s) {
                    return Err(ExperimentError::Config {
                        field: "--shares",
                        message: format!("{s}: give computation shares from 0 to 0.95"),
                    });
                }
                let opts = mewa_corpus::gen::Options {
                    share: Some(s.max(0.05)),
                    ..Default::default()
                };
                let c = generate_with(Preset::Complat, 1, &opts).map_err(|e| {
                    ExperimentError::Config {
                        field: "--shares",
                        message: e.to_string(),
                    }
                })?;
                for mut p in c.pages {
                    if s == 0.0 {
                        // The same page with nothing to compute.
                        for o in &mut p.objects {
                            o.compute_ms = 0;
                        }
                        p.name = p.name.replace("-s05", "-s00");
                    }
                    corpus.pages.push(p);
                }
            }
            corpus
        }
    };
    if !config.pages.is_empty() {
        corpus
            .pages
            .retain(|p| config.pages.iter().any(|w| p.name.contains(w.as_str())));
        if corpus.pages.is_empty() {
            return Err(ExperimentError::NoPage(config.pages.clone()));
        }
    }
    Ok(corpus)
}

fn protocol_of(name: &str) -> Option<Protocol> {
    match name {
        "h3" => Some(Protocol::H3),
        "h2" => Some(Protocol::H2),
        _ => None,
    }
}

/// What one load was given and where its bytes went on the link.
struct Pending {
    run: IwRun,
    /// Offsets from the bed's reference instant.
    start: Duration,
    end: Duration,
}

/// Runs the grid.
pub fn run(config: &IwConfig, progress: &Progress) -> Result<SectionReport, ExperimentError> {
    at_least_one("--runs", config.runs)?;
    at_least_one("--wired-rtt", config.wired_rtts_ms.len())?;
    at_least_one("--transport", config.protocols.len())?;
    at_least_one("--arm", config.arms.len())?;
    for p in &config.protocols {
        if protocol_of(p).is_none() {
            return Err(ExperimentError::Config {
                field: "--transport",
                message: format!("{p}: give h3 (HTTP/3 over QUIC) or h2 (HTTP/2 over TCP)"),
            });
        }
    }
    for a in &config.arms {
        if ![DEFAULT, AWARE, FIXED].contains(&a.as_str()) {
            return Err(ExperimentError::Config {
                field: "--arm",
                message: format!("{a}: give default, aware or fixed"),
            });
        }
    }
    if !(config.alpha.is_finite() && config.alpha >= 0.0) {
        return Err(ExperimentError::Config {
            field: "--alpha",
            message: format!("{}: give a number >= 0", config.alpha),
        });
    }
    let corpus = pages(config)?;
    let ca_dir = ca_dir_or_default(&config.ca_dir)?;
    needs_root()?;
    check_controls(&[mewa_origin::IwPolicy::default().tcp_control])?;
    let folder = ResultFolder::create(&config.out, "iw", "mewa lab iw", config)?;
    let total = config.wired_rtts_ms.len()
        * config.runs
        * corpus.pages.len()
        * config.protocols.len()
        * config.arms.len();
    let logs = std::env::temp_dir().join(format!("mewa-iw-{}", std::process::id()));
    // Each load is also appended to runs.jsonl as it ends, so a run that
    // stops half-way (Ctrl-C, a full disk) keeps what it measured:
    // `--report DIR` reads it when result.json is missing.
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(folder.path().join(JOURNAL))
        .map_err(ExperimentError::io("opening", folder.path().join(JOURNAL)))?;
    let mut runs = Vec::new();
    for &wired in &config.wired_rtts_ms {
        let rtt_ms = config.radio_rtt_ms + wired;
        let one_way = Duration::from_micros(rtt_ms * 500);
        std::fs::create_dir_all(&logs).map_err(ExperimentError::io("creating", &logs))?;
        let options = LinkOptions {
            log_dir: Some(logs.clone()),
            file_prefix: Some("iw.".into()),
            ..LinkOptions::default()
        };
        let bed = Bed::start(
            &corpus,
            fixed_link(
                one_way,
                config.radio_bps,
                config.radio_bps,
                Some(queue_bytes(config.radio_bps, config.queue_ms)),
            ),
            options,
            &OriginSettings {
                congestion: "cubic".into(),
                ca_dir: ca_dir.clone(),
                iw: Some(mewa_origin::IwPolicy {
                    max_segments: config.iw_max,
                    ..mewa_origin::IwPolicy::default()
                }),
            },
        )?;
        let topo = bed.running()?;
        set_tcp_rmem(topo, CLIENT, config.client_rmem)?;
        if let Some(on) = config.slow_start_after_idle {
            let v = if on { "1" } else { "0" };
            crate::bed::set_sysctl(topo, SERVER, "net.ipv4.tcp_slow_start_after_idle", v)?;
        }
        let t_ref = Instant::now();
        let mut pending = Vec::new();
        for run in 0..config.runs {
            for page in &corpus.pages {
                for proto in &config.protocols {
                    // Alternate the order of the arms, so a drift favours
                    // none.
                    let mut arms = config.arms.clone();
                    if run % 2 == 1 {
                        arms.reverse();
                    }
                    for arm in &arms {
                        progress.step(
                            runs.len() + pending.len(),
                            total,
                            &format!("{rtt_ms} ms {} {proto} {arm}", page.name),
                        );
                        let p = load_one(&bed, config, page, proto, arm, rtt_ms, run, t_ref)?;
                        if let Ok(line) = serde_json::to_string(&p.run) {
                            use std::io::Write;
                            let _ = writeln!(journal, "{line}");
                        }
                        pending.push(p);
                    }
                }
            }
        }
        bed.shutdown()?;
        let up = read_log(&logs.join("iw.up.log"));
        let down = read_log(&logs.join("iw.down.log"));
        runs.extend(attach_link(pending, &up, &down, one_way, config.radio_bps));
        let _ = std::fs::remove_dir_all(&logs);
    }
    progress.step(total, total, "done");
    Ok(report(config, runs, Some(folder)))
}

/// One load, with its place in time.
#[allow(clippy::too_many_arguments)]
fn load_one(
    bed: &Bed,
    config: &IwConfig,
    page: &Page,
    proto: &str,
    arm: &str,
    rtt_ms: u64,
    run: usize,
    t_ref: Instant,
) -> Result<Pending, ExperimentError> {
    let protocol = protocol_of(proto).unwrap_or(Protocol::H2);
    let mut opts = bed.options(LoadOptions::browser(protocol, true));
    opts.iw = match arm {
        AWARE => Some(IwAsk::Aware(facts(page, config.alpha))),
        FIXED => Some(IwAsk::Fixed(config.fixed_iw)),
        _ => None,
    };
    // The origin's namespace holds only the origin's sockets.
    let counters = || bed.running().ok().map(|t| TcpCounters::read(t, SERVER));
    let before = if protocol == Protocol::H3 {
        None
    } else {
        counters()
    };
    let start = t_ref.elapsed();
    let record = bed.load(page, &opts)?;
    let end = t_ref.elapsed();
    let server_tcp = before.zip(counters()).map(|(b, a)| a.since(b));
    // Let the queue drain and the connections close before the next load.
    std::thread::sleep(Duration::from_millis(rtt_ms * 2));
    Ok(Pending {
        run: run_of(&record, page, proto, arm, rtt_ms, run, server_tcp),
        start,
        end,
    })
}

/// The facts the edge's hint gives for `page`: its size, its computation
/// latency (the sum of its scripts' compute time) and α.
pub fn facts(page: &Page, alpha: f64) -> mewa_client::iw::PageFacts {
    mewa_client::iw::PageFacts {
        page_bytes: page.total_bytes(),
        computation_ms: Some(u32::try_from(page.total_compute_ms()).unwrap_or(u32::MAX)),
        alpha,
    }
}

fn run_of(
    record: &LoadRecord,
    page: &Page,
    proto: &str,
    arm: &str,
    rtt_ms: u64,
    run: usize,
    server_tcp: Option<TcpCounters>,
) -> IwRun {
    let first = record.connections.first();
    let iw = first.and_then(|c| c.iw.as_ref());
    IwRun {
        rtt_ms,
        protocol: proto.into(),
        arm: arm.into(),
        page: page.name.clone(),
        page_bytes: page.total_bytes(),
        computation_ms: page.total_compute_ms(),
        run,
        completion_s: record
            .ok()
            .then_some(record.done_us)
            .flatten()
            .map(|us| us as f64 / 1e6),
        asked: iw.and_then(|i| i.asked),
        granted: iw.and_then(|i| i.granted_segments()),
        handshake_ms: first.and_then(|c| {
            c.connected_us
                .map(|t| t.saturating_sub(c.open_us) as f64 / 1e3)
        }),
        drops: 0,
        queue_p95_ms: None,
        queue_max_ms: None,
        server_tcp,
    }
}

fn read_log(path: &std::path::Path) -> Option<EventLog> {
    let text = std::fs::read_to_string(path).ok()?;
    EventLog::parse(&text).ok()
}

/// Gives each load the link's drops and queueing delay during it. The
/// link's clock starts with the link; it is tied to the loads' clock by the
/// first packet of the first load (its SYN or QUIC Initial, sent as the
/// load starts).
fn attach_link(
    pending: Vec<Pending>,
    up: &Option<EventLog>,
    down: &Option<EventLog>,
    one_way: Duration,
    bps: u64,
) -> Vec<IwRun> {
    let (Some(up), Some(down)) = (up, down) else {
        return pending.into_iter().map(|p| p.run).collect();
    };
    let first_up = up
        .events
        .iter()
        .find(|e| e.kind == EventKind::Arrival)
        .map(|e| e.at);
    let first_load = pending.first().map(|p| p.start);
    let (Some(first_up), Some(first_load)) = (first_up, first_load) else {
        return pending.into_iter().map(|p| p.run).collect();
    };
    // link time = load time + shift
    let shift = first_up.as_secs_f64() - first_load.as_secs_f64();
    let at = |d: Duration| d.as_secs_f64() + shift;
    pending
        .into_iter()
        .map(|p| {
            let (s, e) = (at(p.start), at(p.end) + one_way.as_secs_f64());
            let within = |t: Duration| (s..=e).contains(&t.as_secs_f64());
            let mut run = p.run;
            run.drops = up
                .events
                .iter()
                .chain(&down.events)
                .filter(|ev| ev.kind == EventKind::DropQueue && within(ev.at))
                .count() as u64;
            let waits: Vec<f64> = down
                .events
                .iter()
                .filter(|ev| ev.kind == EventKind::Departure && within(ev.at))
                .filter_map(|ev| {
                    let serial = ev.bytes as f64 * 8.0 / bps.max(1) as f64;
                    ev.delay
                        .map(|d| (d.as_secs_f64() - one_way.as_secs_f64() - serial).max(0.0) * 1e3)
                })
                .collect();
            run.queue_p95_ms = quantile(&waits, 0.95);
            run.queue_max_ms = waits.iter().copied().reduce(f64::max);
            run
        })
        .collect()
}

// ------------------------------------------------------------------ report

/// One point of the grid: a page at an RTT over a transport.
type Point = (String, u64, String);

/// A fraction as a percentage with one decimal.
fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

/// The estimated computation share of seed 001 §4.1:
/// t_c / (t_c + t_principle) with t_principle from eq. 1 at the RTT.
pub fn estimated_share(page_bytes: u64, computation_ms: u64, rtt_ms: u64) -> f64 {
    let tc = computation_ms as f64 / 1e3;
    let tp = t_transfer(page_bytes, rtt_ms as f64 / 1e3, 10.0, 1500, 1.5);
    if tc + tp > 0.0 {
        tc / (tc + tp)
    } else {
        0.0
    }
}

/// Builds the report from the runs (also from a result folder's JSON).
pub fn report(config: &IwConfig, runs: Vec<IwRun>, folder: Option<ResultFolder>) -> SectionReport {
    // Per point and arm, the completion times.
    let mut times: BTreeMap<(Point, String), Vec<f64>> = BTreeMap::new();
    let mut facts: BTreeMap<Point, (u64, u64)> = BTreeMap::new();
    let mut asked: BTreeMap<Point, Vec<f64>> = BTreeMap::new();
    for r in &runs {
        let point = (r.page.clone(), r.rtt_ms, r.protocol.clone());
        facts.insert(point.clone(), (r.page_bytes, r.computation_ms));
        if let Some(t) = r.completion_s {
            times
                .entry((point.clone(), r.arm.clone()))
                .or_default()
                .push(t);
        }
        if r.arm == AWARE {
            asked
                .entry(point)
                .or_default()
                .push(f64::from(r.asked.unwrap_or(10)));
        }
    }
    let med = |p: &Point, arm: &str| {
        times
            .get(&(p.clone(), arm.to_string()))
            .and_then(|v| median(v))
    };
    let change = |p: &Point, arm: &str| -> Option<f64> {
        let d = med(p, DEFAULT)?;
        let a = med(p, arm)?;
        (d > 0.0).then(|| (d - a) / d)
    };

    let mut completion = Table::new(&[
        "transport",
        "RTT ms",
        "page",
        "KB",
        "share est.",
        "share meas.",
        "IW asked",
        "model IW",
        "default s",
        "aware s",
        "fixed s",
        "aware −%",
        "model −%",
        "fixed −%",
        "throughput +%",
    ]);
    let mut by_band: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
    let mut share_diff: Vec<f64> = Vec::new();
    let mut series_reduction: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut series_iw: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut series_model: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (point, &(bytes, comp)) in &facts {
        let (page, rtt, proto) = point;
        let est = estimated_share(bytes, comp, *rtt);
        let meas = med(point, DEFAULT).map(|t| (comp as f64 / 1e3) / t);
        if let Some(m) = meas {
            share_diff.push((est - m) * 100.0);
        }
        let choice = optimal_iw(&IwInputs {
            alpha: config.alpha,
            ..IwInputs::paper(bytes, *rtt as f64 / 1e3, comp as f64 / 1e3)
        })
        .ok();
        let model = choice.map(|c| c.segments());
        let asked_med = asked.get(point).and_then(|v| median(v));
        let aware = change(point, AWARE);
        // Throughput S/t: its gain is t_default/t_aware − 1.
        let gain = med(point, DEFAULT)
            .zip(med(point, AWARE))
            .filter(|&(_, a)| a > 0.0)
            .map(|(d, a)| d / a - 1.0);
        let band = match est {
            s if s < 0.01 => "0 %",
            s if (0.2..=0.5).contains(&s) => "20–50 %",
            s if s >= 0.85 => "≥ 85 %",
            _ => "other",
        };
        if let Some(a) = aware {
            by_band
                .entry((proto.clone(), band))
                .or_default()
                .push(a * 100.0);
        }
        let label = format!("{proto} {} KB {rtt} ms", bytes / 1000);
        if let Some(a) = aware {
            series_reduction
                .entry(label.clone())
                .or_default()
                .push((est * 100.0, a * 100.0));
        }
        if let Some(a) = asked_med {
            series_iw
                .entry(label.clone())
                .or_default()
                .push((est * 100.0, a));
        }
        if let Some(m) = model {
            series_model
                .entry(format!("model {} KB {rtt} ms", bytes / 1000))
                .or_default()
                .push((est * 100.0, f64::from(m)));
        }
        let f = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.3}"));
        completion.push(vec![
            proto.clone(),
            rtt.to_string(),
            page.clone(),
            (bytes / 1000).to_string(),
            pct(est),
            meas.map_or("–".into(), pct),
            asked_med.map_or("–".into(), |a| format!("{a:.0}")),
            model.map_or("–".into(), |m| m.to_string()),
            f(med(point, DEFAULT)),
            f(med(point, AWARE)),
            f(med(point, FIXED)),
            aware.map_or("–".into(), pct),
            choice.map_or("–".into(), |c| pct(c.reduction())),
            change(point, FIXED).map_or("–".into(), pct),
            gain.map_or("–".into(), pct),
        ]);
    }

    let mut targets = Table::new(&[
        "transport",
        "share band",
        "points",
        "aware −% min",
        "aware −% median",
        "aware −% max",
        "target",
    ]);
    for ((proto, band), v) in &by_band {
        if *band == "other" {
            continue;
        }
        let target = match *band {
            "20–50 %" => "≥ 25 % shorter (seed 001: up to 25.1 %)",
            _ => "never longer",
        };
        targets.push(vec![
            proto.clone(),
            band.to_string(),
            v.len().to_string(),
            quantile(v, 0.0).map_or("–".into(), |x| format!("{x:.1}")),
            median(v).map_or("–".into(), |x| format!("{x:.1}")),
            quantile(v, 1.0).map_or("–".into(), |x| format!("{x:.1}")),
            target.into(),
        ]);
    }

    let mut cost = Table::new(&[
        "transport",
        "arm",
        "loads",
        "drops/load",
        "retrans/load",
        "queue p95 ms (median)",
        "queue max ms (median)",
        "granted (median)",
    ]);
    let mut arms: BTreeMap<(String, String), Vec<&IwRun>> = BTreeMap::new();
    for r in &runs {
        arms.entry((r.protocol.clone(), r.arm.clone()))
            .or_default()
            .push(r);
    }
    for ((proto, arm), rs) in &arms {
        let n = rs.len() as f64;
        let drops = rs.iter().map(|r| r.drops as f64).sum::<f64>() / n;
        let retrans: Vec<f64> = rs
            .iter()
            .filter_map(|r| r.server_tcp.map(|c| c.retrans_segs as f64))
            .collect();
        let p95: Vec<f64> = rs.iter().filter_map(|r| r.queue_p95_ms).collect();
        let max: Vec<f64> = rs.iter().filter_map(|r| r.queue_max_ms).collect();
        let granted: Vec<f64> = rs.iter().filter_map(|r| r.granted.map(f64::from)).collect();
        cost.push(vec![
            proto.clone(),
            arm.clone(),
            rs.len().to_string(),
            format!("{drops:.1}"),
            if retrans.is_empty() {
                "–".into()
            } else {
                format!("{:.1}", retrans.iter().sum::<f64>() / retrans.len() as f64)
            },
            median(&p95).map_or("–".into(), |x| format!("{x:.1}")),
            median(&max).map_or("–".into(), |x| format!("{x:.1}")),
            median(&granted).map_or("10 (nothing asked)".into(), |x| format!("{x:.0}")),
        ]);
    }

    let mut shares = Table::new(&["points", "min", "median", "max", "seed 001"]);
    shares.push(vec![
        share_diff.len().to_string(),
        quantile(&share_diff, 0.0).map_or("–".into(), |x| format!("{x:.2}")),
        median(&share_diff).map_or("–".into(), |x| format!("{x:.2}")),
        quantile(&share_diff, 1.0).map_or("–".into(), |x| format!("{x:.2}")),
        "−0.84 to 5.30 points".into(),
    ]);

    let to_series = |m: BTreeMap<String, Vec<(f64, f64)>>, mark: Mark| -> Vec<Series> {
        m.into_iter()
            .enumerate()
            .map(|(i, (name, mut points))| {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name,
                    points,
                    mark,
                    colour: i,
                }
            })
            .collect()
    };
    let mut iw_series = to_series(series_iw, Mark::Points);
    iw_series.extend(to_series(series_model, Mark::Line));
    let plots = vec![
        Plot {
            file: "iw-vs-share.svg".into(),
            title: "Initial window asked against computation share (seed 001 Figs. 4–5)".into(),
            x_label: "estimated computation share, %".into(),
            y_label: "IW, segments".into(),
            series: iw_series,
        },
        Plot {
            file: "completion-reduction.svg".into(),
            title: "Completion time, content-aware IW against IW 10".into(),
            x_label: "estimated computation share, %".into(),
            y_label: "completion time reduction, %".into(),
            series: to_series(series_reduction, Mark::Line),
        },
    ];
    let sections = vec![
        Section {
            title: "Completion time per page (medians)".into(),
            csv: "completion.csv",
            table: completion,
            note: "share est.: t_c/(t_c + t_principle) with eq. 1 at the RTT (seed 001 §4.1); \
                   share meas.: t_c over the measured IW-10 completion time. model −%: \
                   Algorithm 1's predicted reduction (eq. 1 at the nominal RTT). Throughput +%: \
                   t_default/t_aware − 1, seed 001's throughput compensation (Figs. 6–7: up to \
                   33.2 % varying RTT, 34.5 % varying size). Seed 001's optimal IW at 100 ms: \
                   114 (400 KB, 35 %), 108 (1000 KB), 76 (2400 KB); 171 at 150 ms."
                .into(),
        },
        Section {
            title: "Targets: completion time change by computation share".into(),
            csv: "targets.csv",
            table: targets,
            note: "Target: ≥ 25 % shorter than IW 10 at 20–50 % computation share, never \
                   longer at 0 % or 90 %."
                .into(),
        },
        Section {
            title: "Cost: drops, retransmissions, queueing delay".into(),
            csv: "cost.csv",
            table: cost,
            note: "Queueing delay of the bottleneck's downlink packets during each load: what \
                   a flow sharing it would wait."
                .into(),
        },
        Section {
            title: "Estimated minus measured computation share, points (seed 001 Figs. 8–9)".into(),
            csv: "shares.csv",
            table: shares,
            note: String::new(),
        },
    ];
    SectionReport {
        name: "iw",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs }),
        extra: Vec::new(),
        folder,
    }
}

/// The report of an earlier run, from its folder's `config.json` and
/// `result.json`, or, for a run that stopped half-way, the loads in its
/// `runs.jsonl` (without the link's drops and queueing delay).
pub fn report_again(dir: &std::path::Path) -> Result<SectionReport, ExperimentError> {
    let config: IwConfig = mewa_report::read_config(&dir.join("config.json"))?;
    let input = |path: &std::path::Path, message: String| ExperimentError::NoRecordings {
        path: path.to_path_buf(),
        why: message,
    };
    let path = dir.join("result.json");
    let runs = match std::fs::read_to_string(&path) {
        Ok(text) => {
            #[derive(Deserialize)]
            struct Stored {
                runs: Vec<IwRun>,
            }
            let stored: Stored =
                serde_json::from_str(&text).map_err(|e| input(&path, e.to_string()))?;
            stored.runs
        }
        Err(_) => {
            let path = dir.join(JOURNAL);
            let text = std::fs::read_to_string(&path).map_err(|e| input(&path, e.to_string()))?;
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .enumerate()
                .map(|(i, l)| {
                    serde_json::from_str(l)
                        .map_err(|e| input(&path, format!("line {}: {e}", i + 1)))
                })
                .collect::<Result<Vec<IwRun>, _>>()?
        }
    };
    Ok(report(&config, runs, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(arm: &str, page: &str, comp: u64, t: f64, asked: Option<u32>) -> IwRun {
        IwRun {
            rtt_ms: 100,
            protocol: "h3".into(),
            arm: arm.into(),
            page: page.into(),
            page_bytes: 400_000,
            computation_ms: comp,
            run: 0,
            completion_s: Some(t),
            asked,
            granted: asked,
            handshake_ms: Some(100.0),
            drops: 0,
            queue_p95_ms: Some(1.0),
            queue_max_ms: Some(2.0),
            server_tcp: None,
        }
    }

    #[test]
    fn complat_pages_cover_the_shares_with_a_zero_page() {
        let c = IwConfig {
            shares: vec![0.0, 0.35],
            ..IwConfig::default()
        };
        let corpus = pages(&c).unwrap();
        assert_eq!(corpus.pages.len(), 6);
        let zero: Vec<&Page> = corpus
            .pages
            .iter()
            .filter(|p| p.name.contains("-s00"))
            .collect();
        assert_eq!(zero.len(), 3);
        assert!(zero.iter().all(|p| p.total_compute_ms() == 0));
        assert!(corpus
            .pages
            .iter()
            .filter(|p| p.name.contains("-s35"))
            .all(|p| p.total_compute_ms() > 0));
        let bad = IwConfig {
            shares: vec![0.99],
            ..IwConfig::default()
        };
        assert!(pages(&bad).is_err());
    }

    #[test]
    fn report_compares_each_arm_with_the_default() {
        // 35 % share at 100 ms: 400 KB's t_principle is 0.9 s, so t_c is
        // about 485 ms.
        let runs = vec![
            run(DEFAULT, "p", 485, 1.40, None),
            run(AWARE, "p", 485, 1.00, Some(60)),
            run(FIXED, "p", 485, 1.12, Some(100)),
        ];
        let r = report(&IwConfig::default(), runs, None);
        let text = mewa_report::Report::text(&r);
        // (1.40 − 1.00)/1.40 = 28.6 %; throughput 1.40/1.00 − 1 = 40 %.
        assert!(text.contains("28.6"), "{text}");
        assert!(text.contains("40.0"), "{text}");
        assert!(text.contains("20–50 %"), "{text}");
    }

    #[test]
    fn estimated_share_follows_equation_one() {
        // 400 KB at 100 ms: 9 rounds, 0.9 s.
        let s = estimated_share(400_000, 900, 100);
        assert!((s - 0.5).abs() < 1e-9, "{s}");
        assert_eq!(estimated_share(400_000, 0, 100), 0.0);
    }
}
