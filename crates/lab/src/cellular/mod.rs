//! `mewa lab cellular`: seed 003's study of HTTP/1.1 against HTTP/2 over a
//! cellular radio, with the TCP knobs it examined and the fix it proposes.
//!
//! Seed 003 loaded pages one after another on a phone, and found that the
//! radio's state machine and TCP interact: "because of the high variability
//! in latency when a cellular end device goes from idle to active,
//! retaining TCP's RTT estimate across this transition results in spurious
//! timeouts and a corresponding burst of retransmissions. This particularly
//! punishes SPDY which depends on the single TCP connection".
//!
//! Here a client loads pages in sequence with think time between them,
//! through the link with the 3G or LTE radio model
//! ([`mewa_link::core::radio`]), over fixed rates or a cellular trace, on
//! one browsing session per protocol, so the connections go idle with the
//! radio. The session's browser is the built-in loader, which keeps its
//! connections across loads ([`mewa_loader::Session`]) as a browser does
//! (the sweeps), or headless Chromium itself, one process and one profile
//! per session driven over DevTools ([`mewa_chromium::ChromiumSession`]; the headline
//! table). Each setting changes one knob from
//! the base (Linux's defaults: Cubic, slow start after idle on, the metrics
//! cache on):
//!
//! - `ssai-off`: `net.ipv4.tcp_slow_start_after_idle = 0` (both ends);
//! - `no-metrics`: `net.ipv4.tcp_no_metrics_save = 1` (seed 003 §6.2.4);
//! - `reno`, `bbr`: the server's congestion control (seed 003 §6.2.3);
//! - `rto-floor`: the fix, a retransmission timeout that covers the radio's
//!   promotion (see [`rto`] for how and why it is built this way);
//! - `frto-off`: `net.ipv4.tcp_frto = 0` (both ends), a sender without
//!   F-RTO (RFC 5682). Linux's F-RTO tells a spurious timeout from a real
//!   one by the first ACKs after it and, when spurious, sends new data
//!   instead of the whole flight again and undoes the window's cut;
//! - `ts-off`: `net.ipv4.tcp_timestamps = 0` (both ends), a peer without
//!   TCP timestamps (Windows' default). Linux also finds a spurious timeout
//!   by the timestamp an ACK echoes (Eifel detection, RFC 3522), F-RTO or
//!   not; with both knobs only DSACK is left to find it, a round trip
//!   later: the sender closest to seed 003's "corresponding burst of
//!   retransmissions".
//!
//! Knobs combine with `+` (`frto-off+ts-off+rto-floor`): the fix is then
//! measured against the same knobs without it.
//!
//! Per load: the page load time (the loader's last object done, or
//! Chromium's own onload time), the throughput the link delivered (average
//! and the best second), the server's congestion window (sampled from
//! `TCP_INFO` through sock_diag, [`mewa_probe::tcpinfo`]), both ends'
//! retransmissions and timeouts (the namespaces' TCP counters), and the
//! retransmissions the link saw, spurious or genuine ([`mewa_probe::retrans`]),
//! with the radio's state when the load began.

mod report;
pub mod rto;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mewa_corpus::Page;
use mewa_link::core::radio::RadioConfig;
use mewa_link::core::{DelaySpec, DirectionConfig, LinkConfig, QueueSpec, RateSpec};
use mewa_link::runtime::{LinkOptions, Topology};
use serde::{Deserialize, Serialize};

use crate::bed::{set_sysctl, Bed, BedError, OriginSettings, CLIENT, SERVER};
use crate::experiment::{
    at_least_one, needs_root, read_traces, CorpusChoice, ExperimentError, OriginChoice, Progress,
};
use mewa_chromium::{ChromiumSession, Profile};
use mewa_loader::record::Protocol;
use mewa_loader::{LoadOptions, Session};
use mewa_probe::retrans::{self, Counts, Retransmission};
use mewa_probe::tcpinfo::{self, Filter, RepairCounters, Sampler, SocketSeries};
use mewa_report::ResultFolder;

pub use report::{report, report_again};

/// One radio access technology as the experiment emulates it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RadioProfile {
    /// `3g` or `lte`.
    pub name: String,
    /// Round trip of the link without queueing, ms.
    pub rtt_ms: u64,
    /// Fixed downlink rate, bit/s.
    pub down_bps: u64,
    /// Fixed uplink rate, bit/s.
    pub up_bps: u64,
    /// The cellular trace of this technology in the shared traces.
    pub trace: String,
    /// The longest promotion the radio model makes a packet wait (3G:
    /// IDLE → CELL_DCH; LTE: RRC_IDLE → RRC_CONNECTED), ms: what the
    /// retransmission timeout must cover after idle.
    pub promotion_ms: u64,
}

impl RadioProfile {
    /// 3G (UMTS/HSPA): 2 Mbit/s down, 512 kbit/s up, 150 ms round trip,
    /// the T-Mobile UMTS drive trace; seed 003's "∼2 seconds" promotion.
    pub fn three_g() -> RadioProfile {
        RadioProfile {
            name: "3g".into(),
            rtt_ms: 150,
            down_bps: 2_000_000,
            up_bps: 512_000,
            trace: "TMobile-UMTS-driving".into(),
            promotion_ms: 2_000,
        }
    }

    /// LTE: 10 Mbit/s down, 5 Mbit/s up, 60 ms round trip, the T-Mobile
    /// LTE trace; seed 003's "about 400 msec" promotion.
    pub fn lte() -> RadioProfile {
        RadioProfile {
            name: "lte".into(),
            rtt_ms: 60,
            down_bps: 10_000_000,
            up_bps: 5_000_000,
            trace: "TMobile-LTE-short".into(),
            promotion_ms: 400,
        }
    }

    /// A profile by name.
    pub fn by_name(name: &str) -> Option<RadioProfile> {
        match name {
            "3g" | "umts" => Some(RadioProfile::three_g()),
            "lte" => Some(RadioProfile::lte()),
            _ => None,
        }
    }

    /// The radio model's parameters.
    fn radio(&self) -> RadioConfig {
        RadioConfig::preset(&self.name).unwrap_or_default()
    }
}

/// One combination of the TCP knobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knobs {
    /// The setting's name.
    pub name: String,
    /// The server's congestion control.
    pub cc: String,
    /// `net.ipv4.tcp_slow_start_after_idle` at both ends.
    pub slow_start_after_idle: bool,
    /// Linux's TCP metrics cache (`net.ipv4.tcp_no_metrics_save = 0`).
    pub metrics_save: bool,
    /// The retransmission-timeout floor over the radio ([`rto`]).
    pub rto_floor: bool,
    /// F-RTO (`net.ipv4.tcp_frto`, on by default) at both ends.
    #[serde(default = "yes")]
    pub frto: bool,
    /// TCP timestamps (`net.ipv4.tcp_timestamps`, on by default) at both
    /// ends.
    #[serde(default = "yes")]
    pub timestamps: bool,
}

/// Serde's default for knobs that older result folders did not record.
fn yes() -> bool {
    true
}

impl Knobs {
    /// Linux's defaults, as on seed 003's phone and server.
    pub fn base() -> Knobs {
        Knobs {
            name: "base".into(),
            cc: "cubic".into(),
            slow_start_after_idle: true,
            metrics_save: true,
            rto_floor: false,
            frto: true,
            timestamps: true,
        }
    }

    /// A setting by name: `base`, the base with one knob changed, or knobs
    /// joined by `+` (`frto-off+rto-floor`). `None` for an unknown knob,
    /// one given twice, or two controls.
    pub fn by_name(name: &str) -> Option<Knobs> {
        let mut k = Knobs::base();
        if name == "base" {
            return Some(k);
        }
        let mut seen: Vec<&str> = Vec::new();
        for part in name.split('+') {
            if seen.contains(&part) {
                return None;
            }
            seen.push(part);
            match part {
                "ssai-off" => k.slow_start_after_idle = false,
                "no-metrics" => k.metrics_save = false,
                "reno" | "bbr" if k.cc == "cubic" => k.cc = part.into(),
                "rto-floor" => k.rto_floor = true,
                "frto-off" => k.frto = false,
                "ts-off" => k.timestamps = false,
                _ => return None,
            }
        }
        k.name = name.into();
        Some(k)
    }

    /// Whether `self` is `with` without the fix: every knob the same but
    /// the RTO floor, whatever the order the names give them in (`base`
    /// for `rto-floor`, `ts-off+frto-off` for `frto-off+ts-off+rto-floor`).
    pub fn is_without_fix_of(&self, with: &Knobs) -> bool {
        let unnamed = |k: &Knobs| Knobs {
            name: String::new(),
            rto_floor: true,
            ..k.clone()
        };
        !self.rto_floor && with.rto_floor && unnamed(self) == unnamed(with)
    }

    /// Every single knob's setting name.
    pub const NAMES: [&'static str; 8] = [
        "base",
        "ssai-off",
        "no-metrics",
        "reno",
        "bbr",
        "rto-floor",
        "frto-off",
        "ts-off",
    ];
}

/// `mewa lab cellular`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CellularConfig {
    /// The pages.
    pub corpus: CorpusChoice,
    /// The CA.
    pub origin: OriginChoice,
    /// Radios: `3g`, `lte`.
    pub radios: Vec<String>,
    /// Networks: `fixed` (the profile's rates) and `trace` (its trace).
    pub networks: Vec<String>,
    /// Knob settings ([`Knobs::NAMES`]).
    pub settings: Vec<String>,
    /// Protocols: `h1` (HTTP/1.1 over TLS, 6 connections per host), `h2`
    /// (HTTP/2 over TLS, one per origin), `h3`.
    pub protocols: Vec<String>,
    /// The browser of every session: [`LOADER`] (the built-in loader, for
    /// sweeps) or [`CHROMIUM`] (headless Chromium, for the headline table).
    pub browser: String,
    /// The Chromium binary, with [`CHROMIUM`].
    pub chromium: PathBuf,
    /// Times each page is loaded in a session.
    pub loads: usize,
    /// Think time before each load, s (3G demotes to CELL_FACH after 5 s
    /// and to IDLE 12 s later; LTE to RRC_IDLE after 11.5 s).
    pub think_s: f64,
    /// `TCP_INFO` sampling period, ms.
    pub sample_ms: u64,
    /// A drop-tail queue of this many ms at the profile's fixed rate in
    /// each direction (so a full queue drops and losses set `ssthresh`,
    /// which the metrics cache then hands on); `None`: unbounded.
    pub queue_ms: Option<u64>,
    /// Give up on a load after this long, s.
    pub timeout_s: u64,
    /// Keep the link's pcaps in the result folder.
    pub keep_pcaps: bool,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for CellularConfig {
    fn default() -> CellularConfig {
        CellularConfig {
            corpus: CorpusChoice::default(),
            origin: OriginChoice::default(),
            radios: vec!["3g".into(), "lte".into()],
            networks: vec!["fixed".into()],
            settings: Knobs::NAMES.iter().map(|s| s.to_string()).collect(),
            protocols: vec!["h1".into(), "h2".into()],
            browser: LOADER.into(),
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            loads: 2,
            think_s: 8.0,
            sample_ms: 20,
            queue_ms: None,
            timeout_s: 60,
            keep_pcaps: false,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// [`CellularConfig::browser`]: the built-in loader.
pub const LOADER: &str = "loader";
/// [`CellularConfig::browser`]: headless Chromium.
pub const CHROMIUM: &str = "chromium";

/// The browser of loads written before there was a choice.
fn loader_name() -> String {
    LOADER.into()
}

/// How a browser is named in the tables.
pub fn browser_label(browser: &str) -> &str {
    match browser {
        LOADER => "loader",
        CHROMIUM => "Chromium",
        other => other,
    }
}

/// The loader's protocol for a name.
fn protocol_of(name: &str) -> Option<Protocol> {
    match name {
        "h1" => Some(Protocol::H1),
        "h2" => Some(Protocol::H2),
        "h3" => Some(Protocol::H3),
        _ => None,
    }
}

/// Whether `protocol` is loaded under `knobs`: every knob is a Linux TCP
/// setting, which QUIC (HTTP/3, quinn's own congestion control and timers
/// in user space) does not read, so HTTP/3 runs under the base only.
fn runs_with(protocol: &str, knobs: &Knobs) -> bool {
    protocol != "h3" || knobs.name == "base"
}

/// One page load of the study.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellRun {
    /// The browser that loaded it ([`LOADER`], [`CHROMIUM`]).
    #[serde(default = "loader_name")]
    pub browser: String,
    /// Radio (`3g`, `lte`).
    pub radio: String,
    /// Network (`fixed`, `trace`).
    pub network: String,
    /// Knob setting.
    pub setting: String,
    /// Protocol.
    pub protocol: String,
    /// The page.
    pub page: String,
    /// Position in the session (0: the first load, on new connections).
    pub seq: usize,
    /// The radio's state when the load began (`idle`, `fach`, `dch`,
    /// `continuous`, `short_drx`, `long_drx`).
    pub radio_state: String,
    /// Radio promotions during the load.
    pub promotions: u64,
    /// Page load time, s; `None` if it failed. The loader's: from its first
    /// request to the last object done; Chromium's: its own onload time
    /// (Navigation Timing `loadEventEnd − startTime`).
    pub plt_s: Option<f64>,
    /// Objects that failed (Chromium: requests that failed, cancellations
    /// not counted).
    pub failed: usize,
    /// Connections the load opened, and those it reused from earlier loads
    /// (Chromium: connections that carried a response in this load, by
    /// whether an earlier load had one on them; see [`mewa_chromium::ChromiumSession`]).
    pub new_connections: usize,
    /// See [`CellRun::new_connections`].
    pub reused_connections: usize,
    /// TCP handshakes the client began during the load as the link saw
    /// them (distinct connections whose SYN crossed upstream, from the
    /// load's start to the next load's): whatever the browser reports, a
    /// load on kept connections has none.
    #[serde(default)]
    pub handshakes: u32,
    /// Load start, µs since the Unix epoch (to match the pcaps).
    pub start_unix_us: u64,
    /// Bytes the link delivered downstream during the load (IP).
    pub down_bytes: u64,
    /// Average downlink throughput over the load, KB/s.
    pub avg_kbps: Option<f64>,
    /// The best one-second downlink throughput of the load, KB/s.
    pub max_kbps: Option<f64>,
    /// The server's congestion window, segments: time-weighted mean over
    /// the load of each socket that sent, averaged over those sockets.
    pub cwnd_avg: Option<f64>,
    /// The largest congestion window of any server socket during the load.
    pub cwnd_max: Option<u32>,
    /// The server namespace's TCP counters over the load (differences of
    /// `/proc/net/snmp` and `/proc/net/netstat`).
    pub server: RepairCounters,
    /// The client namespace's.
    pub client: RepairCounters,
    /// The server's retransmissions as the link delivered them.
    pub wire_down: Counts,
    /// The client's.
    pub wire_up: Counts,
}

/// A few seconds of one load around its start, for the figure of the
/// congestion window and retransmissions around a promotion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadTrace {
    /// Which load ([`CellRun`] fields).
    #[serde(default = "loader_name")]
    pub browser: String,
    /// Radio.
    pub radio: String,
    /// Network.
    pub network: String,
    /// Setting.
    pub setting: String,
    /// Protocol.
    pub protocol: String,
    /// Position in its session.
    pub seq: usize,
    /// The radio's state at the start.
    pub radio_state: String,
    /// Each server socket's congestion window: (s since the load's start,
    /// segments).
    pub cwnd: Vec<Vec<(f64, u32)>>,
    /// Each server socket's retransmission timeout: (s, ms).
    #[serde(default)]
    pub rto: Vec<Vec<(f64, u32)>>,
    /// The server's retransmissions on the wire: (s, spurious).
    pub retransmissions: Vec<(f64, bool)>,
}

/// What one session measured before the pcaps are read.
struct Pending {
    run: CellRun,
    end_unix_us: u64,
}

/// Now, µs since the Unix epoch.
fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The link of `profile` over `network`.
fn link_for(
    profile: &RadioProfile,
    network: &str,
    queue_ms: Option<u64>,
) -> Result<LinkConfig, ExperimentError> {
    let delay = DelaySpec::Fixed(Duration::from_micros(profile.rtt_ms.saturating_mul(500)));
    let (down, up) = match network {
        "fixed" => (
            RateSpec::Constant {
                bps: profile.down_bps,
            },
            RateSpec::Constant {
                bps: profile.up_bps,
            },
        ),
        "trace" => {
            let (_, d, u) = read_traces(Path::new(&profile.trace), None)?;
            (RateSpec::Trace(d), RateSpec::Trace(u))
        }
        other => {
            return Err(ExperimentError::Config {
                field: "--network",
                message: format!("{other}: give fixed or trace"),
            })
        }
    };
    let dir = |rate, bps: u64| DirectionConfig {
        delay: delay.clone(),
        rate,
        queue: queue_ms.map_or_else(QueueSpec::default, |ms| {
            crate::bulk::drop_tail(Some(crate::fld::queue_bytes(bps, ms)))
        }),
        loss: 0.0,
    };
    Ok(LinkConfig {
        up: dir(up, profile.up_bps),
        down: dir(down, profile.down_bps),
        radio: profile.radio(),
        ..LinkConfig::default()
    })
}

/// Applies `knobs` to both ends of a running bed.
fn apply_knobs(
    bed: &Bed,
    topo: &Topology,
    knobs: &Knobs,
    profile: &RadioProfile,
) -> Result<(), ExperimentError> {
    let flag = |on: bool| if on { "1" } else { "0" };
    let sysctls = [
        (
            "net.ipv4.tcp_slow_start_after_idle",
            flag(knobs.slow_start_after_idle),
        ),
        ("net.ipv4.tcp_no_metrics_save", flag(!knobs.metrics_save)),
        // 2 is Linux's default: F-RTO with SACK enhancements.
        ("net.ipv4.tcp_frto", if knobs.frto { "2" } else { "0" }),
        ("net.ipv4.tcp_timestamps", flag(knobs.timestamps)),
    ];
    for host in [CLIENT, SERVER] {
        for (key, value) in sysctls {
            set_sysctl(topo, host, key, value)?;
        }
    }
    if knobs.rto_floor {
        let floor = rto::floor_for(Duration::from_millis(profile.promotion_ms));
        let client = topo
            .addr(CLIENT)
            .map_err(|e| ExperimentError::Bed(e.into()))?;
        rto::apply_floor(topo, SERVER, &[std::net::IpAddr::V4(client)], floor)?;
        rto::apply_floor(topo, CLIENT, &bed.server_addrs(), floor)?;
    }
    Ok(())
}

/// Waits (up to 15 s) until neither end has a TCP connection still open
/// or closing; TIME_WAIT and listeners do not count.
fn drain(topo: &Topology) {
    // ESTABLISHED, SYN_SENT, SYN_RECV, FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT,
    // LAST_ACK, CLOSING (include/net/tcp_states.h).
    const OPEN: [u8; 8] = [1, 2, 3, 4, 5, 8, 9, 11];
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        let open: usize = [CLIENT, SERVER]
            .iter()
            .map(|h| {
                topo.in_namespace(h, tcpinfo::dump)
                    .ok()
                    .and_then(Result::ok)
                    .map_or(0, |v| v.iter().filter(|s| OPEN.contains(&s.state)).count())
            })
            .sum();
        if open == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::warn!("connections of the previous session still open after 15 s");
}

/// Empties both ends' TCP metrics caches, so a session does not start from
/// what the previous one left (the knob under study is whether a session
/// *within* itself reuses them).
fn flush_metrics(topo: &Topology) {
    for host in [CLIENT, SERVER] {
        if let Ok(Some(ns)) = topo.netns_name(host) {
            let _ = std::process::Command::new("ip")
                .args(["-n", ns, "tcp_metrics", "flush", "all"])
                .output();
        }
    }
}

/// Runs the study.
pub fn run(
    config: &CellularConfig,
    progress: &Progress,
) -> Result<mewa_report::SectionReport, ExperimentError> {
    at_least_one("--loads", config.loads)?;
    at_least_one("--radio", config.radios.len())?;
    at_least_one("--network", config.networks.len())?;
    at_least_one("--setting", config.settings.len())?;
    at_least_one("--protocol", config.protocols.len())?;
    if !(0.0..=600.0).contains(&config.think_s) {
        return Err(ExperimentError::Config {
            field: "--think",
            message: format!("{} s: give 0 to 600 seconds", config.think_s),
        });
    }
    let profiles = config
        .radios
        .iter()
        .map(|r| {
            RadioProfile::by_name(r).ok_or_else(|| ExperimentError::Config {
                field: "--radio",
                message: format!("{r}: give 3g or lte"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let knobs = config
        .settings
        .iter()
        .map(|s| {
            Knobs::by_name(s).ok_or_else(|| ExperimentError::Config {
                field: "--setting",
                message: format!(
                    "{s}: give one of {}, or knobs joined by + (frto-off+rto-floor)",
                    Knobs::NAMES.join(", ")
                ),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for p in &config.protocols {
        if protocol_of(p).is_none() {
            return Err(ExperimentError::Config {
                field: "--protocol",
                message: format!("{p}: give h1, h2 or h3"),
            });
        }
    }
    match config.browser.as_str() {
        LOADER => {}
        CHROMIUM => crate::browser::check_binary(&config.chromium)?,
        other => {
            return Err(ExperimentError::Config {
                field: "--browser",
                message: format!("{other}: give {LOADER} or {CHROMIUM}"),
            })
        }
    }
    for n in &config.networks {
        for p in &profiles {
            link_for(p, n, config.queue_ms)?;
        }
    }
    let corpus = config.corpus.load()?;
    let origin = config.origin.settings()?;
    needs_root()?;
    // The handshake half of the fix is a sock_ops program on a cgroup of
    // the lab's own; the process moves there before any bed makes a socket.
    let cgroup = if knobs.iter().any(|k| k.rto_floor) {
        Some(rto::LabCgroup::enter()?)
    } else {
        None
    };
    let folder = ResultFolder::create(&config.out, "cellular", "mewa lab cellular", config)?;
    let mut journal = mewa_report::Journal::<CellRun>::open(folder.path())?;
    let pcaps = folder.path().join("pcap");
    // Chromium's profiles, one per session, removed after it.
    let work = folder.path().join("work");
    let sessions: usize = knobs
        .iter()
        .map(|k| config.protocols.iter().filter(|p| runs_with(p, k)).count())
        .sum();
    let total =
        profiles.len() * config.networks.len() * sessions * config.loads * corpus.pages.len();
    let mut runs: Vec<CellRun> = Vec::new();
    let mut traces: Vec<LoadTrace> = Vec::new();
    for profile in &profiles {
        for network in &config.networks {
            for k in &knobs {
                let tag = format!("{}-{network}-{}", profile.name, k.name);
                let dir = pcaps.join(&tag);
                std::fs::create_dir_all(&dir).map_err(ExperimentError::io("creating", &dir))?;
                let settings = OriginSettings {
                    congestion: k.cc.clone(),
                    ..origin.clone()
                };
                let bed = Bed::start(
                    &corpus,
                    link_for(profile, network, config.queue_ms)?,
                    LinkOptions {
                        pcap_dir: Some(dir.clone()),
                        file_prefix: Some(String::new()),
                        ..LinkOptions::default()
                    },
                    &settings,
                )?;
                let topo = bed.running()?;
                apply_knobs(&bed, topo, k, profile)?;
                let syn_rto = match (&cgroup, k.rto_floor) {
                    (Some(cg), true) => {
                        let client = topo
                            .addr(CLIENT)
                            .map_err(|e| ExperimentError::Bed(e.into()))?;
                        let mut peers = bed.server_addrs();
                        peers.push(std::net::IpAddr::V4(client));
                        Some(rto::attach_syn_rto(
                            cg.path(),
                            &peers,
                            rto::syn_rto_for(Duration::from_millis(profile.promotion_ms)),
                        )?)
                    }
                    _ => None,
                };
                let mut pending: Vec<Pending> = Vec::new();
                let mut series: Vec<(String, Vec<SocketSeries>, u64)> = Vec::new();
                for proto in config.protocols.iter().filter(|p| runs_with(p, k)) {
                    let protocol = protocol_of(proto).unwrap_or(Protocol::H2);
                    // The previous session's connections finish closing
                    // first: their last retransmissions and timeouts would
                    // count against this session's first load.
                    drain(topo);
                    flush_metrics(topo);
                    let _ = topo.radio_idle(CLIENT, SERVER);
                    // The emulator takes the order at its next wake-up.
                    std::thread::sleep(Duration::from_millis(300));
                    let sampler_start = unix_us();
                    let sampler = Sampler::start(
                        topo,
                        SERVER,
                        Duration::from_millis(config.sample_ms.max(1)),
                        Filter::All,
                    )
                    .map_err(ExperimentError::Sampler)?;
                    let timeout = Duration::from_secs(config.timeout_s.max(1));
                    let mut user_data = None;
                    let browser = if config.browser == CHROMIUM {
                        let p = Profile::in_dir(&work, &format!("{tag}-{proto}"))
                            .map_err(|e| BedError::Runtime(e.to_string()))?;
                        let cmd = crate::browser::session_command(
                            &bed,
                            &corpus.pages,
                            &config.chromium,
                            p.path(),
                            &settings.ca_dir,
                            protocol,
                        )?;
                        user_data = Some(p);
                        SessionBrowser::Chromium {
                            cmd,
                            path: config.chromium.clone(),
                            protocol,
                            timeout,
                        }
                    } else {
                        let mut opts = bed.options(LoadOptions::browser(protocol, true));
                        opts.timeout = timeout;
                        SessionBrowser::Loader(opts)
                    };
                    let label =
                        |seq: usize, page: &Page| format!("{tag} {proto} {} #{seq}", page.name);
                    let done_before = runs.len() + pending.len();
                    let session =
                        session(&bed, topo, browser, &corpus.pages, config, |seq, page| {
                            progress.step(done_before + seq, total, &label(seq, page))
                        });
                    drop(user_data);
                    let session = session?;
                    // A sampler that failed leaves the cwnd columns empty;
                    // the loads still count.
                    let samples = match sampler.stop() {
                        Ok(s) => s.sockets,
                        Err(e) => {
                            tracing::warn!("TCP_INFO sampling in {SERVER} failed: {e}");
                            Vec::new()
                        }
                    };
                    for (seq, s) in session.into_iter().enumerate() {
                        let (page, loaded, at_start) = s;
                        pending.push(Pending {
                            end_unix_us: at_start.start_unix_us
                                + loaded
                                    .plt_s
                                    .map_or(config.timeout_s * 1_000_000, |s| (s * 1e6) as u64),
                            run: CellRun {
                                browser: config.browser.clone(),
                                radio: profile.name.clone(),
                                network: network.clone(),
                                setting: k.name.clone(),
                                protocol: proto.clone(),
                                page: page.clone(),
                                seq,
                                radio_state: at_start.radio_state.clone(),
                                promotions: at_start.promotions,
                                plt_s: loaded.plt_s,
                                failed: loaded.failed,
                                new_connections: loaded.new_connections,
                                reused_connections: loaded.reused_connections,
                                handshakes: 0,
                                start_unix_us: at_start.start_unix_us,
                                down_bytes: 0,
                                avg_kbps: None,
                                max_kbps: None,
                                cwnd_avg: None,
                                cwnd_max: None,
                                server: at_start.server,
                                client: at_start.client,
                                wire_down: Counts::default(),
                                wire_up: Counts::default(),
                            },
                        });
                    }
                    // HTTP/3 has no TCP socket of its own to follow.
                    let samples = if protocol == Protocol::H3 {
                        Vec::new()
                    } else {
                        samples
                    };
                    series.push((proto.clone(), samples, sampler_start));
                }
                if let Some(s) = syn_rto {
                    tracing::info!(
                        "{tag}: mewa_rto lengthened {} handshake timeouts",
                        s.applied()
                    );
                }
                bed.shutdown()?;
                let wire = read_wire(&dir)?;
                finish_runs(&mut pending, &wire, &series, &mut traces);
                // Each testbed's loads go to runs.jsonl as soon as they are
                // complete: a run stopped half-way keeps them.
                journal.append(&tag, pending.iter().map(|p| p.run.clone()).collect())?;
                runs.extend(pending.into_iter().map(|p| p.run));
                if !config.keep_pcaps {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
    }
    if !config.keep_pcaps {
        let _ = std::fs::remove_dir(&pcaps);
    }
    let _ = std::fs::remove_dir_all(&work);
    drop(cgroup);
    progress.step(total, total, "done");
    Ok(report(config, runs, traces, Some(folder)))
}

/// The radio and counters when a load began, and the counters' change
/// over it.
struct AtStart {
    start_unix_us: u64,
    radio_state: String,
    promotions: u64,
    server: RepairCounters,
    client: RepairCounters,
}

/// The browser of one session, before it starts.
enum SessionBrowser {
    /// The built-in loader with these options.
    Loader(LoadOptions),
    /// Headless Chromium started with `cmd`
    /// ([`crate::chromium::session_command`]; `path` names it in errors),
    /// over `protocol`, each load within `timeout`.
    Chromium {
        cmd: std::process::Command,
        path: PathBuf,
        protocol: Protocol,
        timeout: Duration,
    },
}

/// A session's browser, running.
enum Driver {
    Loader(Session),
    Chromium(Box<ChromiumSession>, Protocol),
}

/// What one load of a session gave, whichever browser loaded it.
struct Loaded {
    plt_s: Option<f64>,
    failed: usize,
    new_connections: usize,
    reused_connections: usize,
}

/// A browser that can no longer be driven, as the testbed's error.
fn chromium_failed(e: mewa_chromium::DevtoolsError) -> BedError {
    BedError::Runtime(format!("Chromium: {e}"))
}

impl Driver {
    /// Starts the session's browser (on the calling runtime).
    async fn start(browser: SessionBrowser) -> Result<Driver, BedError> {
        Ok(match browser {
            SessionBrowser::Loader(opts) => Driver::Loader(Session::new(opts)?),
            SessionBrowser::Chromium {
                cmd,
                path,
                protocol,
                timeout,
            } => Driver::Chromium(
                Box::new(
                    ChromiumSession::start(cmd, &path, timeout)
                        .await
                        .map_err(chromium_failed)?,
                ),
                protocol,
            ),
        })
    }

    /// Loads `page` (Chromium navigates to `url`) on the session's
    /// connections.
    async fn load(&mut self, page: &Page, url: &str) -> Result<Loaded, BedError> {
        match self {
            Driver::Loader(session) => {
                let record = session.load(page).await?;
                Ok(Loaded {
                    plt_s: record.done_us.map(|us| us as f64 / 1e6),
                    failed: record.objects.iter().filter(|o| !o.ok()).count(),
                    new_connections: record.connections.iter().filter(|c| !c.reused).count(),
                    reused_connections: record.connections.iter().filter(|c| c.reused).count(),
                })
            }
            Driver::Chromium(session, protocol) => {
                let load = session.load(url).await.map_err(chromium_failed)?;
                if let Some(e) = &load.error {
                    tracing::warn!("Chromium, {}: {e}", page.name);
                }
                if let Some(f) = &load.first_failure {
                    tracing::warn!(
                        "Chromium, {}: {} requests failed, first {f}",
                        page.name,
                        load.failed
                    );
                }
                let want = protocol.alpn();
                if let Some(got) = load.document_protocol.as_deref().filter(|p| *p != want) {
                    tracing::warn!("Chromium loaded {} over {got}, not {want}", page.name);
                }
                Ok(Loaded {
                    plt_s: load.plt_s,
                    failed: load.failed,
                    new_connections: load.new_connections,
                    reused_connections: load.reused_connections,
                })
            }
        }
    }

    /// Ends the session: the loader's connections close, Chromium exits.
    async fn close(self) {
        match self {
            Driver::Loader(session) => session.close(),
            Driver::Chromium(session, _) => session.close().await,
        }
    }
}

/// One browsing session: every page `config.loads` times, in order, with
/// the think time before each load, on one browser (its connections kept
/// from load to load) in the client's namespace.
fn session(
    bed: &Bed,
    topo: &Topology,
    browser: SessionBrowser,
    pages: &[Page],
    config: &CellularConfig,
    step: impl Fn(usize, &Page) + Sync,
) -> Result<Vec<(String, Loaded, AtStart)>, ExperimentError> {
    let think = Duration::from_secs_f64(config.think_s);
    let urls: Vec<String> = pages
        .iter()
        .map(|p| crate::replay::browser_url(bed, p))
        .collect();
    let out = bed.in_client(|| async {
        let mut driver = Driver::start(browser).await?;
        let mut out = Vec::new();
        let mut seq = 0;
        for _ in 0..config.loads {
            for (page, url) in pages.iter().zip(&urls) {
                step(seq, page);
                if seq > 0 {
                    tokio::time::sleep(think).await;
                }
                // A session holds one browser for all its loads, so this is
                // where a link that died during the last load is noticed.
                topo.health()?;
                let stats = topo.link_stats(CLIENT, SERVER).ok();
                let before = (
                    tcpinfo::counters_in(topo, SERVER),
                    tcpinfo::counters_in(topo, CLIENT),
                );
                let start_unix_us = unix_us();
                let loaded = driver.load(page, url).await?;
                let after_stats = topo.link_stats(CLIENT, SERVER).ok();
                let after = (
                    tcpinfo::counters_in(topo, SERVER),
                    tcpinfo::counters_in(topo, CLIENT),
                );
                out.push((
                    page.name.clone(),
                    loaded,
                    AtStart {
                        start_unix_us,
                        radio_state: stats
                            .as_ref()
                            .map(|s| radio_name(&s.radio))
                            .unwrap_or_default(),
                        promotions: match (&stats, &after_stats) {
                            (Some(a), Some(b)) => {
                                b.radio_promotions.saturating_sub(a.radio_promotions)
                            }
                            _ => 0,
                        },
                        server: after.0.since(&before.0).repair(),
                        client: after.1.since(&before.1).repair(),
                    },
                ));
                seq += 1;
            }
        }
        driver.close().await;
        Ok::<_, BedError>(out)
    })?;
    Ok(out?)
}

/// The radio state's name as the report prints it.
fn radio_name(s: &mewa_link::core::radio::RadioState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{s:?}").to_lowercase())
}

/// What the link delivered, both directions: the downlink's packets
/// (time, IP bytes) and each direction's retransmissions.
struct Wire {
    down_packets: Vec<(u64, u32)>,
    down: Vec<Retransmission>,
    up: Vec<Retransmission>,
    /// When each connection's first SYN crossed upstream (the client's
    /// handshakes).
    up_syns: Vec<u64>,
}

/// One direction's delivered packets (time, IP bytes), retransmissions,
/// and the time of each flow's first SYN.
type OneWay = (Vec<(u64, u32)>, Vec<Retransmission>, Vec<u64>);

/// Reads `down.pcap` and `up.pcap` in `dir`.
fn read_wire(dir: &Path) -> Result<Wire, ExperimentError> {
    let read = |name: &str| -> Result<OneWay, ExperimentError> {
        let path = dir.join(name);
        let bytes = std::fs::read(&path)
            .map_err(ExperimentError::io("reading the link's capture", &path))?;
        let (records, _cut) =
            mewa_link::pcap::read_pcap_lossy(&bytes).map_err(|source| ExperimentError::Pcap {
                path: path.clone(),
                source,
            })?;
        let packets = records.iter().map(|r| (r.at_us, r.orig_len)).collect();
        let segments: Vec<retrans::Segment> = records
            .iter()
            .filter_map(|r| retrans::segment(r.at_us, r.data).ok().flatten())
            .collect();
        let mut flows = std::collections::HashSet::new();
        let syns = segments
            .iter()
            .filter(|g| g.syn && flows.insert(g.flow))
            .map(|g| g.at_us)
            .collect();
        Ok((packets, retrans::retransmissions(segments), syns))
    };
    let (down_packets, down, _) = read("down.pcap")?;
    let (_, up, up_syns) = read("up.pcap")?;
    Ok(Wire {
        down_packets,
        down,
        up,
        up_syns,
    })
}

/// Fills in what the pcaps and the `TCP_INFO` samples say about each load:
/// throughput, congestion window, retransmissions on the wire. A load's
/// window runs from its start to the next load's start (a late duplicate
/// still belongs to the load that caused it).
fn finish_runs(
    pending: &mut [Pending],
    wire: &Wire,
    series: &[(String, Vec<SocketSeries>, u64)],
    traces: &mut Vec<LoadTrace>,
) {
    let n = pending.len();
    for i in 0..n {
        let start = pending[i].run.start_unix_us;
        let next = if i + 1 < n && pending[i + 1].run.protocol == pending[i].run.protocol {
            pending[i + 1].run.start_unix_us
        } else {
            pending[i].end_unix_us + 2_000_000
        };
        let end = pending[i].end_unix_us.max(start + 1);
        let run = &mut pending[i].run;
        let in_load = |t: u64| t >= start && t < end;
        let bytes: u64 = wire
            .down_packets
            .iter()
            .filter(|(t, _)| in_load(*t))
            .map(|&(_, b)| u64::from(b))
            .sum();
        run.down_bytes = bytes;
        if let Some(plt) = run.plt_s.filter(|&p| p > 0.0) {
            run.avg_kbps = Some(bytes as f64 / 1000.0 / plt);
            let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
            for &(t, b) in wire.down_packets.iter().filter(|(t, _)| in_load(*t)) {
                *bins.entry((t - start) / 1_000_000).or_default() += u64::from(b);
            }
            // A last partial second is scaled to a full one only if it
            // lasted at least half a second.
            let whole = ((end - start) / 1_000_000).max(1);
            run.max_kbps = bins
                .iter()
                .filter(|(k, _)| **k < whole)
                .map(|(_, b)| *b as f64 / 1000.0)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        }
        let in_window = |r: &&Retransmission| r.at_us >= start && r.at_us < next;
        run.wire_down = Counts::of(wire.down.iter().filter(in_window));
        run.wire_up = Counts::of(wire.up.iter().filter(in_window));
        run.handshakes = wire
            .up_syns
            .iter()
            .filter(|&&t| t >= start && t < next)
            .count() as u32;
        let Some((_, sockets, t0)) = series.iter().find(|(p, _, _)| *p == run.protocol) else {
            continue;
        };
        let (avg, max) = cwnd_over(sockets, *t0, start, end);
        run.cwnd_avg = avg;
        run.cwnd_max = max;
        // The figure: loads that began with the radio asleep, after the
        // session's first, and a few seconds of them.
        if run.seq > 0 && run.promotions > 0 {
            let until = start + 8_000_000;
            traces.push(LoadTrace {
                browser: run.browser.clone(),
                radio: run.radio.clone(),
                network: run.network.clone(),
                setting: run.setting.clone(),
                protocol: run.protocol.clone(),
                seq: run.seq,
                radio_state: run.radio_state.clone(),
                cwnd: window_series(sockets, *t0, start, until, |x| x.cwnd),
                rto: window_series(sockets, *t0, start, until, |x| x.rto_us / 1000),
                retransmissions: wire
                    .down
                    .iter()
                    .filter(|r| r.at_us >= start && r.at_us < until && !r.syn)
                    .map(|r| {
                        (
                            (r.at_us - start) as f64 / 1e6,
                            r.verdict == retrans::Verdict::Spurious,
                        )
                    })
                    .collect(),
            });
        }
    }
}

/// One field of each socket's samples within `[start, until)`, as (s since
/// `start`, value); sockets without a sample there are left out.
fn window_series(
    sockets: &[SocketSeries],
    t0: u64,
    start: u64,
    until: u64,
    f: impl Fn(&tcpinfo::Sample) -> u32,
) -> Vec<Vec<(f64, u32)>> {
    sockets
        .iter()
        .map(|s| {
            // Samples are kept when something changed: the value in force
            // when the window opens is the last one before it.
            let carried = s
                .samples
                .iter()
                .take_while(|x| t0 + x.t_us < start)
                .last()
                .map(|x| (0.0, f(x)));
            let inside = s.samples.iter().filter_map(|x| {
                let t = t0 + x.t_us;
                (t >= start && t < until).then(|| ((t - start) as f64 / 1e6, f(x)))
            });
            let v: Vec<(f64, u32)> = carried.into_iter().chain(inside).collect();
            // A socket with nothing inside the window did not take part.
            if v.len() > usize::from(carried.is_some()) {
                v
            } else {
                Vec::new()
            }
        })
        .filter(|v| !v.is_empty())
        .collect()
}

/// The server's congestion window over `[start, end)` (µs since the
/// epoch; the samples count from `t0`): the time-weighted mean of each
/// socket that sent data in the window, averaged over those sockets, and
/// the largest value any of them had (a socket that sent nothing keeps a
/// window it is not using).
fn cwnd_over(
    sockets: &[SocketSeries],
    t0: u64,
    start: u64,
    end: u64,
) -> (Option<f64>, Option<u32>) {
    let mut means = Vec::new();
    let mut max: Option<u32> = None;
    for s in sockets {
        // The value in force at each instant: the last sample at or before
        // it (samples are kept when something changed).
        let mut prev: Option<(u64, u32, u64)> = None;
        let mut weighted = 0f64;
        let mut span = 0u64;
        let mut sent_from: Option<u64> = None;
        let mut sent_to = 0u64;
        let mut most: Option<u32> = None;
        for x in &s.samples {
            let t = t0 + x.t_us;
            if t >= end {
                break;
            }
            let sent_now = x.bytes_sent.or(x.bytes_acked).unwrap_or(0);
            if t >= start {
                sent_from.get_or_insert(sent_now);
                sent_to = sent_now;
                most = Some(most.map_or(x.cwnd, |m| m.max(x.cwnd)));
                if let Some((pt, pc, _)) = prev {
                    let from = pt.max(start);
                    weighted += f64::from(pc) * (t - from) as f64;
                    span += t - from;
                }
            } else {
                sent_from = Some(sent_now);
            }
            prev = Some((t, x.cwnd, sent_now));
        }
        if let Some((pt, pc, _)) = prev {
            let from = pt.max(start);
            if end > from {
                weighted += f64::from(pc) * (end - from) as f64;
                span += end - from;
            }
        }
        // A closing socket of an earlier session sends a few bytes (a TLS
        // close_notify); one that took part sent at least a segment.
        let sent = sent_from.is_some_and(|f| sent_to >= f + 1448);
        if sent && span > 0 {
            means.push(weighted / span as f64);
            // The value in force when the window opened counts too.
            let carried = s
                .samples
                .iter()
                .take_while(|x| t0 + x.t_us < start)
                .last()
                .map(|x| x.cwnd);
            for c in most.into_iter().chain(carried) {
                max = Some(max.map_or(c, |m| m.max(c)));
            }
        }
    }
    (mewa_report::mean(&means), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_probe::tcpinfo::{Sample, SocketKey};

    fn sample(t_us: u64, cwnd: u32, sent: u64) -> Sample {
        Sample {
            t_us,
            state: 1,
            ca_state: 0,
            cwnd,
            ssthresh: u32::MAX,
            rtt_us: 150_000,
            rttvar_us: 50_000,
            rto_us: 400_000,
            total_retrans: 0,
            total_rto: None,
            bytes_acked: Some(sent),
            bytes_sent: Some(sent),
            bytes_retrans: None,
            delivery_rate: None,
        }
    }

    fn socket(port: u16, samples: Vec<Sample>) -> SocketSeries {
        let last = *samples.last().unwrap();
        SocketSeries {
            key: SocketKey {
                src: "10.0.0.2:443".parse().unwrap(),
                dst: format!("10.0.0.1:{port}").parse().unwrap(),
                cookie: u64::from(port),
            },
            inode: 1,
            cong: Some("cubic".into()),
            first_us: samples[0].t_us,
            last_us: last.t_us,
            samples,
            dropped: 0,
            last,
        }
    }

    #[test]
    fn the_window_is_time_weighted_over_the_load_and_idle_sockets_do_not_count() {
        // t0 = 1_000: a socket at 10 segments until 1 s into the window,
        // then 30 for the remaining 3 s (mean 25); it sent during the load.
        let busy = socket(
            40000,
            vec![
                sample(0, 10, 0),
                sample(1_000_000, 30, 50_000),
                sample(2_000_000, 30, 90_000),
            ],
        );
        // Another that sent nothing in the window: its large window is not
        // in use.
        let idle = socket(40001, vec![sample(0, 99, 7)]);
        let (avg, max) = cwnd_over(&[busy.clone(), idle], 1_000, 1_000, 4_001_000);
        assert!((avg.unwrap() - 25.0).abs() < 1e-9, "{avg:?}");
        assert_eq!(max, Some(30));
        // A window before any sample: nothing sent, no mean.
        let (avg, _) = cwnd_over(&[busy], 1_000, 5_000_000, 6_000_000);
        assert_eq!(avg, None);
    }

    #[test]
    fn every_setting_changes_one_knob_from_the_base() {
        let base = Knobs::base();
        for name in Knobs::NAMES {
            let k = Knobs::by_name(name).unwrap();
            let changed = [
                k.cc != base.cc,
                k.slow_start_after_idle != base.slow_start_after_idle,
                k.metrics_save != base.metrics_save,
                k.rto_floor != base.rto_floor,
                k.frto != base.frto,
                k.timestamps != base.timestamps,
            ]
            .iter()
            .filter(|c| **c)
            .count();
            assert_eq!(changed, usize::from(name != "base"), "{name}");
        }
        assert!(Knobs::by_name("cubic-fast").is_none());
    }

    #[test]
    fn knobs_combine_and_the_fix_is_compared_without_itself() {
        let k = |name: &str| Knobs::by_name(name).unwrap();
        let with = k("frto-off+ts-off+rto-floor");
        assert!(!with.frto && !with.timestamps && with.rto_floor && with.slow_start_after_idle);
        assert!(k("frto-off+ts-off").is_without_fix_of(&with));
        assert!(
            k("ts-off+frto-off").is_without_fix_of(&with),
            "in any order"
        );
        assert!(!k("frto-off").is_without_fix_of(&with));
        assert!(!with.is_without_fix_of(&with));
        let reno = k("ssai-off+rto-floor+reno");
        assert_eq!(
            (reno.cc.as_str(), reno.slow_start_after_idle),
            ("reno", false)
        );
        assert!(k("reno+ssai-off").is_without_fix_of(&reno));
        assert!(!k("ssai-off").is_without_fix_of(&reno));
        assert!(k("base").is_without_fix_of(&k("rto-floor")));
        assert!(!k("rto-floor").is_without_fix_of(&k("base")));
        for bad in [
            "reno+bbr",
            "frto-off+frto-off",
            "base+rto-floor",
            "frto-off+",
            "",
        ] {
            assert!(Knobs::by_name(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn both_radios_have_links_over_fixed_rates_and_their_trace() {
        for r in ["3g", "lte"] {
            let p = RadioProfile::by_name(r).unwrap();
            let l = link_for(&p, "fixed", None).unwrap();
            assert_ne!(l.radio, RadioConfig::Off);
            assert_eq!(l.down.queue, QueueSpec::default());
            // 300 ms at 2 Mbit/s is 75 kB.
            let q = link_for(&p, "fixed", Some(300)).unwrap();
            let want = crate::fld::queue_bytes(p.down_bps, 300);
            assert_eq!(q.down.queue, crate::bulk::drop_tail(Some(want)));
            assert!(link_for(&p, "wired", None).is_err());
            if std::path::Path::new(crate::experiment::SHARED_TRACES).exists() {
                assert!(link_for(&p, "trace", None).is_ok(), "{r}");
            }
        }
    }
}
