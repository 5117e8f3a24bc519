//! Seed 000's experiment, end to end: a client behind an emulated radio
//! link asks the mobile edge's DNS for a page's host with the hint request,
//! plans the number of HTTP/2 connections from the hint (Algorithm 1 with
//! BDP = radio bandwidth × (radio RTT + wired RTT)) and spreads the objects
//! over them by size; the same page is loaded back to back without the hint
//! (one connection, as a browser does).
//!
//! Everything on the path is the real thing: the edge is `mewa-edge` with
//! its SQLite store, latency monitor (which measures the wired RTT the hint
//! carries) and DNS server in its own namespace; the client's resolver and
//! planner are `mewa-client`'s; the origin is `mewa-origin`; TCP is the
//! kernel's in three namespaces.
//!
//! Topology: `client ⇄ radio link ⇄ edge ⇄ wired link ⇄ origin`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mewa_client::advice::{plan, Plan, Radio};
use mewa_client::resolve::{resolve, Resolved};
use mewa_corpus::{Corpus, Object, Page};
use mewa_edge::app::{now_unix_s, Edge};
use mewa_edge::config::EdgeConfig;
use mewa_edge::store::Store;
use mewa_link::core::{DelaySpec, DirectionConfig, LinkConfig, QueueSpec, RateSpec};
use mewa_link::runtime::LinkOptions;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::bed::{Bed, BedError, OriginSettings, EDGE, PORT_PLAIN};
use crate::loader::{Assign, LeastOutstanding, LoadOptions, Resolver, WarmFirst};
use crate::metrics::{median, PageMetrics};
use crate::record::{LoadRecord, Protocol};

/// How the hint-aware client spreads objects over its n connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Seed 000 as written: the hint's size-balanced (LPT) assignment;
    /// objects the hint does not list go to the least-loaded connection.
    Hint,
    /// Objects that reveal others (HTML, CSS, scripts) stay on the
    /// connection that carried the document, whose window has grown; the
    /// leaves follow the hint's assignment (docs/LAB.md explains why).
    WarmFirst,
}

/// When the hint-aware client sends each leaf's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatch {
    /// As soon as the object is found, on the connection the policy
    /// chose (seed 000: a static split by size).
    Push,
    /// Leaves wait while every connection has a bandwidth-delay product
    /// of bytes outstanding and go to the first that drains (the policy's
    /// choice when it has room): a connection that turns out slow carries
    /// less ([`LoadOptions::pull_budget`]).
    Pull,
    /// Each leaf waits for the connection that would finish it first at
    /// its delivery rate over the last RTT and goes there once that one
    /// holds less than twice that rate's worth; leaves larger than two
    /// initial windows only go to a connection that has moved that much in
    /// an RTT ([`LoadOptions::pull_follow`]): a connection that cubic's
    /// HyStart leaves at a small window then carries little.
    PullRate,
    /// The default: [`Dispatch::Push`] when the client prefetches the
    /// page's objects from the hint's URLs (every connection then starts
    /// at once with its share known, the static split's own premise),
    /// [`Dispatch::PullRate`] otherwise.
    Auto,
}

impl Dispatch {
    /// What `Auto` means for a load that prefetches (`prefetching`) or not.
    pub fn resolve(self, prefetching: bool) -> Dispatch {
        match self {
            Dispatch::Auto if prefetching => Dispatch::Push,
            Dispatch::Auto => Dispatch::PullRate,
            d => d,
        }
    }
}

impl std::str::FromStr for Dispatch {
    type Err = String;
    fn from_str(s: &str) -> Result<Dispatch, String> {
        match s {
            "push" => Ok(Dispatch::Push),
            "pull" => Ok(Dispatch::Pull),
            "pull-rate" => Ok(Dispatch::PullRate),
            "auto" => Ok(Dispatch::Auto),
            _ => Err(format!(
                "unknown dispatch {s:?}: use auto, push, pull or pull-rate"
            )),
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "hint" => Ok(Policy::Hint),
            "warm-first" => Ok(Policy::WarmFirst),
            _ => Err(format!("unknown policy {s:?}: use hint or warm-first")),
        }
    }
}

/// The radio link.
#[derive(Debug, Clone)]
pub enum RadioLink {
    /// A constant rate both ways (seed 000 §IV: 32 Mbit/s).
    Fixed {
        /// Bit/s.
        rate_bps: u64,
    },
    /// Mahimahi delivery traces (downlink, uplink).
    Trace {
        /// Label for reports (the trace file's name).
        name: String,
        /// Network → client.
        down: mewa_link::core::trace::DeliveryTrace,
        /// Client → network.
        up: mewa_link::core::trace::DeliveryTrace,
    },
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct MehConfig {
    /// Rate of the radio link.
    pub radio: RadioLink,
    /// Round trip over the radio link (client ⇄ edge).
    pub radio_rtt_ms: u64,
    /// Round trip over the wired part (edge ⇄ origin); the edge measures it.
    pub wired_rtt_ms: u64,
    /// Loads per page and variant.
    pub runs: usize,
    /// The radio bandwidth the client plans with, bit/s (seed 000: known
    /// to the client; here the link's rate, or a trace's mean).
    pub planned_bandwidth_bps: f64,
    /// How objects are spread over the connections.
    pub policy: Policy,
    /// When leaves are requested.
    pub dispatch: Dispatch,
    /// With the hint, request every object whose URL the hint carries
    /// right after the document (seed 000 §II: the client "sends requests
    /// to all embedded URLs on parallel connections"); off, objects are
    /// requested as the page reveals them and the hint only sets n and
    /// the assignment.
    pub prefetch: bool,
    /// TCP congestion control of the origin.
    pub congestion: String,
    /// The test CA's folder.
    pub ca_dir: PathBuf,
    /// Where the edge keeps its SQLite store (a fresh file per run).
    pub store_path: PathBuf,
    /// Per-load limit.
    pub timeout: Duration,
    /// Also load seed 000's Fig. 8 pages in headless Chromium through the
    /// local proxy: (Chromium binary, runs per page and variant).
    pub browser: Option<(PathBuf, usize)>,
    /// Keep each browser load's Chromium NetLog in the result folder's
    /// `chromium/` (they are a few MB each), for reading the load's phases
    /// in Chromium's netlog viewer or with [`netlog_times`]'s parser.
    pub keep_netlogs: bool,
}

impl MehConfig {
    /// Seed 000 §IV: average RTT 65 ms, 32 Mbit/s; 45 ms of the RTT over
    /// the radio and 20 ms wired, 30 runs per page and variant.
    pub fn seed000(ca_dir: PathBuf, store_path: PathBuf) -> MehConfig {
        MehConfig {
            radio: RadioLink::Fixed {
                rate_bps: 32_000_000,
            },
            radio_rtt_ms: 45,
            wired_rtt_ms: 20,
            runs: 30,
            planned_bandwidth_bps: 32e6,
            policy: Policy::WarmFirst,
            dispatch: Dispatch::Auto,
            prefetch: true,
            congestion: "cubic".into(),
            ca_dir,
            store_path,
            timeout: Duration::from_secs(120),
            browser: None,
            keep_netlogs: false,
        }
    }

    fn radio_link(&self) -> LinkConfig {
        let one_way = DelaySpec::Fixed(Duration::from_micros(self.radio_rtt_ms * 500));
        let dir = |rate| DirectionConfig {
            delay: one_way.clone(),
            rate,
            queue: QueueSpec::default(),
            loss: 0.0,
        };
        let (down, up) = match &self.radio {
            RadioLink::Fixed { rate_bps } => (
                RateSpec::Constant { bps: *rate_bps },
                RateSpec::Constant { bps: *rate_bps },
            ),
            RadioLink::Trace { down, up, .. } => {
                (RateSpec::Trace(down.clone()), RateSpec::Trace(up.clone()))
            }
        };
        LinkConfig {
            up: dir(up),
            down: dir(down),
            ..LinkConfig::default()
        }
    }

    fn wired_link(&self) -> LinkConfig {
        let dir = DirectionConfig {
            delay: DelaySpec::Fixed(Duration::from_micros(self.wired_rtt_ms * 500)),
            rate: RateSpec::Unlimited,
            queue: QueueSpec::default(),
            loss: 0.0,
        };
        LinkConfig {
            up: dir.clone(),
            down: dir,
            ..LinkConfig::default()
        }
    }
}

/// One load.
#[derive(Debug, Clone, Serialize)]
pub struct MehRun {
    /// Page name.
    pub page: String,
    /// Page bytes.
    pub page_bytes: u64,
    /// Objects.
    pub objects: usize,
    /// Run index.
    pub run: usize,
    /// With the hint (planned n) or without (one connection).
    pub with_hint: bool,
    /// Whether every object arrived.
    pub ok: bool,
    /// First SYN to last data byte (seed 000's definition), seconds.
    pub plt_s: Option<f64>,
    /// Connections the plan chose (1 without the hint or on fallback).
    pub n: u32,
    /// Connections actually opened.
    pub connections: usize,
    /// The DNS exchange with the edge (radio RTT estimate), ms.
    pub dns_ms: f64,
    /// Size of the hint received, bytes (0 without).
    pub hint_bytes: usize,
    /// Whether the hint came over TCP.
    pub hint_over_tcp: bool,
    /// Why the client did not follow the hint, if it did not.
    pub fallback: Option<String>,
    /// Idle share of the load (seed 002's idle time / PLT).
    pub idle_share: Option<f64>,
    /// The first error, when not ok.
    pub error: Option<String>,
}

/// Per page, over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct MehPage {
    /// Page name.
    pub page: String,
    /// Page bytes.
    pub page_bytes: u64,
    /// Objects.
    pub objects: usize,
    /// Connections the plan chose (the most frequent choice).
    pub n: u32,
    /// Hint size as received over DNS, bytes (the partial form when the
    /// full one did not fit the answer; 0 when no hint came).
    pub hint_bytes: usize,
    /// Size of the full hint (every object listed with its URL), bytes:
    /// what "hints of at most 1 KB" is measured on.
    pub full_hint_bytes: Option<usize>,
    /// Median PLT without the hint, seconds.
    pub median_without_s: Option<f64>,
    /// Median PLT with the hint, seconds.
    pub median_with_s: Option<f64>,
    /// 1 − with/without, percent (positive = faster with the hint).
    pub reduction_pct: Option<f64>,
    /// Loads that did not complete (both variants).
    pub failed: usize,
}

/// The whole experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MehResult {
    /// Every load.
    pub runs: Vec<MehRun>,
    /// Per page.
    pub pages: Vec<MehPage>,
    /// Median of all loads without the hint (seed 000 Fig. 7's CDF), s.
    pub median_without_s: Option<f64>,
    /// Median of all loads with the hint, s.
    pub median_with_s: Option<f64>,
    /// 1 − median with / median without, percent (seed 000: 20.5).
    pub median_reduction_pct: Option<f64>,
    /// The largest per-page median reduction, percent (seed 000: 34.5).
    pub best_reduction_pct: Option<f64>,
    /// The smallest per-page median reduction, percent (negative = a page
    /// got slower; the target is no worse than −3).
    pub worst_reduction_pct: Option<f64>,
    /// Share of the pages' hints of at most 1 KB.
    pub hints_within_1k: f64,
    /// Wired RTT the edge measured for the origin, ms.
    pub measured_wired_rtt_ms: Option<f64>,
    /// Chromium loads through the proxy (empty unless asked for).
    pub browser: Vec<BrowserRun>,
}

/// The corpus pages closest in size to seed 000 Fig. 8's three (622 KB,
/// 1412 KB, 3648 KB), without repeats.
pub fn fig8_pages(corpus: &Corpus) -> Vec<&Page> {
    let mut out: Vec<&Page> = Vec::new();
    for kb in [622u64, 1412, 3648] {
        let near = corpus
            .pages
            .iter()
            .filter(|p| !out.iter().any(|o| o.name == p.name))
            .min_by_key(|p| p.total_bytes().abs_diff(kb * 1000));
        if let Some(p) = near {
            out.push(p);
        }
    }
    out
}

/// Progress of a running experiment.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    /// Loads finished.
    pub done: usize,
    /// Loads in all.
    pub total: usize,
    /// What runs now.
    pub what: &'a str,
}

/// The hint's plan as a loader [`Assign`] policy.
#[derive(Debug)]
pub struct PlanAssign {
    map: HashMap<u32, usize>,
    mask: u32,
    scheme: &'static str,
    warm_first: bool,
}

impl PlanAssign {
    /// Follows `plan` for objects of a page served over `scheme`.
    pub fn new(plan: &Plan, scheme: &'static str, policy: Policy) -> PlanAssign {
        PlanAssign {
            map: plan.assignment_map(),
            mask: plan.hash_mask,
            scheme,
            warm_first: policy == Policy::WarmFirst,
        }
    }
}

impl Assign for PlanAssign {
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize {
        // The document opens the load on the first connection.
        if object.parent.is_none() || (self.warm_first && WarmFirst::reveals(object)) {
            return 0;
        }
        let h = mewa_hint::wire::url_hash(&object.url(self.scheme)) & self.mask;
        match self.map.get(&h) {
            Some(&c) => c,
            None => LeastOutstanding.pick(object, outstanding),
        }
    }
}

/// The edge running in its namespace; stops when dropped.
struct EdgeRunner {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for EdgeRunner {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Stores the corpus in a fresh edge store, starts the edge in its
/// namespace, measures the wired RTT once and builds the hints before
/// returning (so the first query already gets a hint with the RTT).
/// Returns the runner and the measured wired RTT (ms).
fn start_edge(
    bed: &Bed,
    corpus: &Corpus,
    cfg: &MehConfig,
) -> Result<(EdgeRunner, Option<f64>), BedError> {
    let topo = bed
        .topology()
        .ok_or_else(|| BedError::Runtime("testbed already shut down".into()))?;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = cfg.store_path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let pages: Vec<_> = corpus
        .pages
        .iter()
        .map(mewa_corpus::convert::to_page_meta)
        .collect();
    Store::open(&cfg.store_path)
        .and_then(|mut s| s.put_pages(&pages, "corpus", now_unix_s()))
        .map_err(|e| BedError::Runtime(format!("edge store: {e}")))?;
    let mut config = EdgeConfig::default();
    config.dns.listen = SocketAddr::from(([0, 0, 0, 0], 53));
    config.dns.udp_sockets = 1;
    config.admin.listen = SocketAddr::from(([127, 0, 0, 1], 8053));
    config.store.path = cfg.store_path.clone();
    config.monitor.port = PORT_PLAIN;
    config.monitor.every_s = 5;
    config.hint.ttl_s = 3600;
    let origin = bed.origin_ip();
    for p in &corpus.pages {
        for h in p.hosts() {
            config.zone.insert(h.to_string(), vec![origin]);
        }
    }
    let (ready_tx, ready_rx) = mpsc::channel::<Result<Option<f64>, String>>();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let main_host = corpus
        .pages
        .first()
        .and_then(|p| mewa_hint::page::host_of(&p.main));
    let thread = topo.spawn_in(EDGE, move || {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(format!("runtime: {e}")));
                return;
            }
        };
        rt.block_on(async move {
            let (edge, bound) = match Edge::bind(config).await {
                Ok(x) => x,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            // Hosts come from the hint book: build it, probe, rebuild with
            // the measured RTTs.
            let first = async {
                edge.rebuild().await?;
                let (probed, failed) = edge.probe_origins().await;
                if probed == 0 || failed > 0 {
                    return Err(format!(
                        "latency monitor: {failed} of {probed} origin probe(s) failed"
                    ));
                }
                edge.rebuild().await?;
                let rtt = match main_host {
                    Some(h) => mewa_edge::app::with_store(&edge.store, move |s| s.origin_rtt(&h))
                        .await?
                        .map(|o| f64::from(o.rtt_us) / 1000.0),
                    None => None,
                };
                Ok::<_, String>(rtt)
            };
            match first.await {
                Ok(rtt) => {
                    let _ = ready_tx.send(Ok(rtt));
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            }
            edge.serve(bound, async {
                let _ = stop_rx.await;
            })
            .await;
        });
    })?;
    let runner = EdgeRunner {
        stop: Some(stop_tx),
        thread: Some(thread),
    };
    match ready_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(rtt)) => Ok((runner, rtt)),
        Ok(Err(e)) => Err(BedError::Runtime(format!("edge: {e}"))),
        Err(_) => Err(BedError::Runtime("edge: did not start within 60 s".into())),
    }
}

/// What one load needs from the edge.
struct Lookup {
    resolved: Resolved,
    plan: Result<Plan, String>,
}

/// The least budget of [`Dispatch::PullRate`] (the proxy uses the same).
pub use mewa_model::pull::PULL_FLOOR_BYTES;

/// The bandwidth-delay product the plan assumed (radio bandwidth × radio
/// and wired RTT), bytes: the pull budget per connection.
pub fn plan_bdp_bytes(p: &Plan) -> u64 {
    let b = p.bandwidth_bps / 8.0 * (p.radio_rtt_s + p.wired_rtt_s);
    if b.is_finite() && b >= 1.0 {
        b as u64
    } else {
        1
    }
}

fn scheme_of(page: &Page) -> &'static str {
    if page.main.starts_with("https:") {
        "https"
    } else {
        "http"
    }
}

/// One load: ask the edge, plan (with the hint) or not, load.
fn one_load(
    bed: &Bed,
    edge: SocketAddr,
    page: &Page,
    with_hint: bool,
    cfg: &MehConfig,
) -> Result<(LoadRecord, Lookup), BedError> {
    let host = mewa_hint::page::host_of(&page.main).unwrap_or_default();
    let bw = cfg.planned_bandwidth_bps;
    let policy = cfg.policy;
    let dispatch = cfg.dispatch;
    let prefetch = cfg.prefetch;
    let timeout = cfg.timeout;
    let scheme = scheme_of(page);
    bed.in_client(|| async move {
        let resolved = resolve(edge, &host, &page.main, Duration::from_secs(3))
            .await
            .map_err(|e| BedError::Runtime(format!("DNS: {e}")))?;
        let addr: IpAddr = resolved.addrs.first().copied().ok_or_else(|| {
            BedError::Runtime(format!("DNS: the edge gave no address for {host}"))
        })?;
        let plan = match &resolved.hint {
            Ok(h) => plan(
                h,
                &page.main,
                Radio {
                    bandwidth_bps: bw,
                    rtt_s: resolved.rtt.as_secs_f64(),
                },
                now_unix_s(),
            )
            .map_err(|f| f.to_string()),
            Err(f) => Err(f.to_string()),
        };
        let mut opts = LoadOptions {
            resolver: Resolver::all_to(addr),
            port_plain: PORT_PLAIN,
            timeout,
            ..LoadOptions::browser(Protocol::H2, false)
        };
        if let (true, Ok(p)) = (with_hint, &plan) {
            opts.connections = p.n as usize;
            opts.preconnect = p.n > 1;
            opts.assign = Arc::new(PlanAssign::new(p, scheme, policy));
            if prefetch {
                opts.prefetch = p.urls.clone();
            }
            match dispatch.resolve(!opts.prefetch.is_empty()) {
                Dispatch::Push | Dispatch::Auto => {}
                Dispatch::Pull => opts.pull_budget = Some(plan_bdp_bytes(p)),
                Dispatch::PullRate => {
                    opts.pull_budget = Some(PULL_FLOOR_BYTES);
                    // The plan's RTTs are bounded by the hint's validation; a
                    // value no Duration holds keeps the floor as a fixed budget.
                    opts.pull_follow =
                        Duration::try_from_secs_f64(p.radio_rtt_s + p.wired_rtt_s).ok();
                }
            }
        }
        let rec = crate::loader::load(page, &opts).await?;
        Ok((rec, Lookup { resolved, plan }))
    })?
}

/// Offset between the trace stretches two successive pairs of loads replay
/// on a trace link, ms (a prime, so pairs do not fall into step with a
/// trace's period).
pub const TRACE_STRIDE_MS: u64 = 9_973;

/// On a trace radio link, restarts the traces at pair `pair`'s stretch
/// (pairs spread over the trace by [`TRACE_STRIDE_MS`]), so that both loads
/// of a pair replay the same stretch and their difference is the hint's,
/// not the trace's. Nothing on a fixed-rate link.
fn replay_pair_stretch(
    topo: &mewa_link::runtime::Topology,
    cfg: &MehConfig,
    pair: usize,
) -> Result<(), BedError> {
    if matches!(cfg.radio, RadioLink::Trace { .. }) {
        let at_ms = (pair as u64).saturating_mul(TRACE_STRIDE_MS);
        topo.rewind_traces(crate::bed::CLIENT, EDGE, at_ms)?;
    }
    Ok(())
}

/// Runs every page `cfg.runs` times with and without the hint, back to
/// back (the order alternates between runs so neither variant always goes
/// first). On a trace link both loads of a pair start at the same moment
/// of the trace.
pub fn run(
    corpus: &Corpus,
    cfg: &MehConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<MehResult, BedError> {
    let origin = OriginSettings {
        congestion: cfg.congestion.clone(),
        ca_dir: cfg.ca_dir.clone(),
    };
    let bed = Bed::start_with_edge(
        corpus,
        cfg.radio_link(),
        LinkOptions::default(),
        cfg.wired_link(),
        &origin,
    )?;
    let (edge, wired_ms) = start_edge(&bed, corpus, cfg)?;
    let edge_ip = bed
        .topology()
        .ok_or_else(|| BedError::Runtime("testbed already shut down".into()))?
        .addr_towards(EDGE, crate::bed::CLIENT)?;
    let edge_addr = SocketAddr::from((edge_ip, 53));
    let total = cfg.runs * corpus.pages.len() * 2;
    let mut done = 0;
    let mut runs = Vec::with_capacity(total);
    let topo = bed
        .topology()
        .ok_or_else(|| BedError::Runtime("testbed already shut down".into()))?;
    for r in 0..cfg.runs {
        for (i, page) in corpus.pages.iter().enumerate() {
            let pair = r * corpus.pages.len() + i;
            let order = if r % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for with_hint in order {
                let what = format!(
                    "run {}/{}, {} {}",
                    r + 1,
                    cfg.runs,
                    page.name,
                    if with_hint { "with hint" } else { "without" }
                );
                progress(Progress {
                    done,
                    total,
                    what: &what,
                });
                replay_pair_stretch(topo, cfg, pair)?;
                let (rec, lookup) = one_load(&bed, edge_addr, page, with_hint, cfg)?;
                runs.push(to_run(page, r, with_hint, &rec, &lookup));
                done += 1;
            }
        }
    }
    let browser = match &cfg.browser {
        Some(_) => {
            let dir = cfg
                .store_path
                .parent()
                .map_or_else(std::env::temp_dir, PathBuf::from)
                .join("chromium");
            std::fs::create_dir_all(&dir)
                .map_err(|e| BedError::Runtime(format!("creating {}: {e}", dir.display())))?;
            browser_runs(&bed, edge_addr, &fig8_pages(corpus), cfg, &dir, progress)?
        }
        None => Vec::new(),
    };
    progress(Progress {
        done,
        total,
        what: "done",
    });
    drop(edge);
    bed.shutdown()?;
    let mut res = summarise(corpus, runs, wired_ms);
    res.browser = browser;
    Ok(res)
}

fn to_run(page: &Page, run: usize, with_hint: bool, rec: &LoadRecord, l: &Lookup) -> MehRun {
    let m = PageMetrics::from_record(rec);
    let ok = rec.ok();
    let fallback = match (&l.resolved.hint, &l.plan) {
        (Err(f), _) => Some(f.to_string()),
        (Ok(_), Err(e)) => Some(e.clone()),
        _ => None,
    };
    MehRun {
        page: page.name.clone(),
        page_bytes: page.total_bytes(),
        objects: page.objects.len(),
        run,
        with_hint,
        ok,
        plt_s: m.plt_wire_s,
        n: match (&l.plan, with_hint) {
            (Ok(p), true) => p.n,
            _ => 1,
        },
        connections: m.connections,
        dns_ms: l.resolved.rtt.as_secs_f64() * 1000.0,
        hint_bytes: l.resolved.hint_bytes,
        hint_over_tcp: l.resolved.over_tcp,
        fallback,
        idle_share: m.idle_share,
        error: (!ok).then(|| rec.first_error().unwrap_or_else(|| "incomplete".into())),
    }
}

/// The full hint of `page` as the edge encodes it (every host with the
/// wired RTT, every object with its URL), bytes.
pub fn full_hint_bytes(page: &Page, wired_ms: Option<f64>) -> Option<usize> {
    let meta = mewa_corpus::convert::to_page_meta(page);
    let now = now_unix_s();
    let origins = meta
        .hosts()
        .into_iter()
        .map(|h| mewa_hint::page::OriginRtt {
            host: h.to_string(),
            rtt_us: wired_ms.map_or(0, |ms| (ms * 1000.0) as u32),
            measured_at_unix_s: now,
        })
        .collect();
    let ctx = mewa_hint::page::PageContext {
        page: meta,
        origins,
        alpha: 0.5,
        ttl_s: 3600,
        generated_at_unix_s: now,
    };
    mewa_hint::wire::Hint::with_urls(&ctx)
        .ok()
        .map(|h| h.to_bytes().len())
}

/// Per-page and overall figures from the loads.
pub fn summarise(corpus: &Corpus, runs: Vec<MehRun>, wired_ms: Option<f64>) -> MehResult {
    let plts = |pick: &dyn Fn(&MehRun) -> bool| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.ok && pick(r))
            .filter_map(|r| r.plt_s)
            .collect()
    };
    let reduction = |without: Option<f64>, with: Option<f64>| match (without, with) {
        (Some(a), Some(b)) if a > 0.0 => Some((1.0 - b / a) * 100.0),
        _ => None,
    };
    let mut pages = Vec::new();
    for p in &corpus.pages {
        let mine = |r: &MehRun| r.page == p.name;
        let without = median(&plts(&|r| mine(r) && !r.with_hint));
        let with = median(&plts(&|r| mine(r) && r.with_hint));
        let mut ns: HashMap<u32, usize> = HashMap::new();
        for r in runs.iter().filter(|r| mine(r) && r.with_hint) {
            *ns.entry(r.n).or_default() += 1;
        }
        let n = ns
            .iter()
            .max_by_key(|&(n, c)| (*c, *n))
            .map_or(1, |(&n, _)| n);
        let hint_bytes = runs
            .iter()
            .filter(|r| mine(r))
            .map(|r| r.hint_bytes)
            .max()
            .unwrap_or(0);
        pages.push(MehPage {
            page: p.name.clone(),
            page_bytes: p.total_bytes(),
            objects: p.objects.len(),
            n,
            hint_bytes,
            full_hint_bytes: full_hint_bytes(p, wired_ms),
            median_without_s: without,
            median_with_s: with,
            reduction_pct: reduction(without, with),
            failed: runs.iter().filter(|r| mine(r) && !r.ok).count(),
        });
    }
    let without = median(&plts(&|r| !r.with_hint));
    let with = median(&plts(&|r| r.with_hint));
    let reds: Vec<f64> = pages.iter().filter_map(|p| p.reduction_pct).collect();
    let sized: Vec<usize> = pages.iter().filter_map(|p| p.full_hint_bytes).collect();
    MehResult {
        median_reduction_pct: reduction(without, with),
        median_without_s: without,
        median_with_s: with,
        best_reduction_pct: reds.iter().copied().reduce(f64::max),
        worst_reduction_pct: reds.iter().copied().reduce(f64::min),
        hints_within_1k: if sized.is_empty() {
            0.0
        } else {
            sized.iter().filter(|&&b| b <= 1024).count() as f64 / sized.len() as f64
        },
        measured_wired_rtt_ms: wired_ms,
        browser: Vec::new(),
        pages,
        runs,
    }
}

/// Flags for headless Chromium in a lab namespace (GUIDE §3): without the
/// background-networking ones it floods the closed network with lookups.
/// Add a fresh `--user-data-dir` per load.
pub const HEADLESS_FLAGS: [&str; 7] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// One page load by headless Chromium through the local proxy.
#[derive(Debug, Clone, Serialize)]
pub struct BrowserRun {
    /// Page name.
    pub page: String,
    /// Run index.
    pub run: usize,
    /// Whether the proxy followed the hint (else one connection).
    pub with_hint: bool,
    /// The page's own load in Chromium's NetLog, seconds: from the request
    /// for the page's URL to the last event of a request for one of its
    /// objects ([`netlog_times`]).
    pub plt_s: Option<f64>,
    /// From the same start to the start of the page's last request: how
    /// long Chromium took to ask for everything. What follows it is the
    /// only part of the load more connections can shorten.
    pub requested_s: Option<f64>,
    /// Connections the proxy opened for the page's host.
    pub n: usize,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

/// A page's load in a Chromium NetLog (seconds from the start of the
/// request for the page's URL).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetlogTimes {
    /// To the last event of any request for one of the page's objects.
    pub plt_s: f64,
    /// To the start of the last request for one of the page's objects.
    pub requested_s: f64,
}

/// A page's load in a Chromium NetLog: from the start of the request for
/// `page.main` to the last event of any request for one of the page's
/// objects, and to the start of the last such request.
///
/// Only the page's own requests count. Chromium makes requests of its own
/// at start-up (network time, account and update checks: 0.1–0.2 s before
/// the navigation in our runs, refused by the proxy) and asks for
/// `/favicon.ico` after the page; counting those added about 0.3 s to every
/// browser load, with or without the hint, and shrank the reduction.
pub fn netlog_times(netlog: &[u8], page: &Page) -> Result<NetlogTimes, String> {
    let v: serde_json::Value =
        serde_json::from_slice(netlog).map_err(|e| format!("NetLog is not JSON: {e}"))?;
    let c = &v["constants"];
    let start = c["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .ok_or("NetLog without URL_REQUEST_START_JOB")?;
    let url_request = c["logSourceType"]["URL_REQUEST"]
        .as_u64()
        .ok_or("NetLog without the URL_REQUEST source type")?;
    let events = v["events"].as_array().ok_or("NetLog without events")?;
    let scheme = page.main.split("://").next().unwrap_or("http");
    let mine: std::collections::HashSet<String> =
        page.objects.iter().map(|o| o.url(scheme)).collect();
    let time = |e: &serde_json::Value| e["time"].as_str().and_then(|t| t.parse::<f64>().ok());
    // The URL of each request, from its start event (a request's first
    // events come before it, so this is a pass of its own).
    let mut url_of: HashMap<u64, &str> = HashMap::new();
    let (mut first, mut asked) = (f64::MAX, f64::MIN);
    for e in events {
        if e["source"]["type"].as_u64() != Some(url_request) || e["type"].as_u64() != Some(start) {
            continue;
        }
        let (Some(id), Some(url)) = (e["source"]["id"].as_u64(), e["params"]["url"].as_str())
        else {
            continue;
        };
        if !mine.contains(url) {
            continue;
        }
        url_of.entry(id).or_insert(url);
        if let Some(t) = time(e) {
            asked = asked.max(t);
            if url == page.main {
                first = first.min(t);
            }
        }
    }
    if first == f64::MAX {
        return Err(format!("NetLog has no request for {}", page.main));
    }
    let last = events
        .iter()
        .filter(|e| e["source"]["type"].as_u64() == Some(url_request))
        .filter(|e| {
            e["source"]["id"]
                .as_u64()
                .is_some_and(|id| url_of.contains_key(&id))
        })
        .filter_map(time)
        .fold(first, f64::max);
    Ok(NetlogTimes {
        plt_s: (last - first) / 1000.0,
        requested_s: (asked.max(first) - first) / 1000.0,
    })
}

/// Loads each page in headless Chromium through the local proxy
/// ([`mewa_client::proxy`]) running in the client's namespace with the
/// Chromium binary and run count of [`MehConfig::browser`] (nothing when it
/// is `None`), with the hint and without (the proxy then opens one connection),
/// back to back.
pub fn browser_runs(
    bed: &Bed,
    edge: SocketAddr,
    pages: &[&Page],
    cfg: &MehConfig,
    work_dir: &std::path::Path,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Vec<BrowserRun>, BedError> {
    let Some((chromium, runs)) = &cfg.browser else {
        return Ok(Vec::new());
    };
    let (chromium, runs) = (chromium.as_path(), *runs);
    let topo = bed
        .topology()
        .ok_or_else(|| BedError::Runtime("testbed already shut down".into()))?;
    // Chromium speaks HTTP/2 to the proxy over TLS, as seed 000's Chrome
    // did to its local nghttpx: over HTTP/1.1 it keeps at most six requests
    // per host in flight, which n connections behind the proxy cannot undo.
    let certs = mewa_origin::Ca::load_or_create(&cfg.ca_dir)
        .and_then(|ca| ca.issue(&[]))
        .map_err(|e| BedError::Runtime(format!("the proxy's certificate: {e}")))?;
    let tls = Arc::new(
        certs
            .tcp_config()
            .map_err(|e| BedError::Runtime(format!("the proxy's TLS: {e}")))?,
    );
    let total = pages.len() * runs * 2;
    let mut out = Vec::with_capacity(total);
    for r in 0..runs {
        for (i, page) in pages.iter().enumerate() {
            let pair = r * pages.len() + i;
            for with_hint in [r % 2 == 1, r % 2 == 0] {
                replay_pair_stretch(topo, cfg, pair)?;
                progress(Progress {
                    done: out.len(),
                    total,
                    what: &format!("Chromium run {}/{runs}, {}", r + 1, page.name),
                });
                let mut pc = mewa_client::proxy::ProxyConfig::new(edge, cfg.planned_bandwidth_bps);
                pc.origin_port = PORT_PLAIN;
                pc.use_hints = with_hint;
                pc.prefetch = cfg.prefetch;
                pc.warm_first = cfg.policy == Policy::WarmFirst;
                // The proxy pulls at the rate as the loader does; it has no
                // fixed-budget pull, so `Pull` runs it as seed 000 pushes.
                pc.dispatch = match cfg.dispatch {
                    Dispatch::PullRate => mewa_client::proxy::Dispatch::PullRate,
                    Dispatch::Auto => mewa_client::proxy::Dispatch::Auto,
                    Dispatch::Push | Dispatch::Pull => mewa_client::proxy::Dispatch::Push,
                };
                let (port_tx, port_rx) = mpsc::channel::<Result<u16, String>>();
                let (stop_tx, stop_rx) = oneshot::channel::<()>();
                let (n_tx, n_rx) = mpsc::channel::<usize>();
                let host = mewa_hint::page::host_of(&page.main).unwrap_or_default();
                let tls = tls.clone();
                let proxy_thread = topo.spawn_in(crate::bed::CLIENT, move || {
                    let rt = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = port_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    rt.block_on(async move {
                        let l = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                            Ok(l) => l,
                            Err(e) => {
                                let _ = port_tx.send(Err(e.to_string()));
                                return;
                            }
                        };
                        let _ = port_tx
                            .send(l.local_addr().map(|a| a.port()).map_err(|e| e.to_string()));
                        let proxy = mewa_client::proxy::Proxy::new(pc);
                        let serving = tokio::spawn(proxy.clone().serve_tls(l, tls));
                        let _ = stop_rx.await;
                        serving.abort();
                        let n = proxy.session_of(&host).await.map_or(0, |s| s.connections());
                        let st = &proxy.stats;
                        eprintln!(
                            "proxy: browser connections h2 {}, HTTP/1.1 {}; {} requests forwarded",
                            st.browser_h2.load(std::sync::atomic::Ordering::Relaxed),
                            st.browser_h1.load(std::sync::atomic::Ordering::Relaxed),
                            st.forwarded.load(std::sync::atomic::Ordering::Relaxed)
                        );
                        let _ = n_tx.send(n);
                    });
                })?;
                let port = port_rx
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|_| BedError::Runtime("proxy did not start".into()))?
                    .map_err(|e| BedError::Runtime(format!("proxy: {e}")))?;
                let profile = work_dir.join(format!("profile-{}-{r}-{with_hint}", page.name));
                let netlog = work_dir.join(format!("{}-{r}-{with_hint}.netlog.json", page.name));
                let result = topo
                    .command(crate::bed::CLIENT, chromium)?
                    .args(HEADLESS_FLAGS)
                    .arg("--disable-http-cache")
                    .arg(format!("--user-data-dir={}", profile.display()))
                    .arg(format!("--proxy-server=https://127.0.0.1:{port}"))
                    .arg(format!(
                        "--ignore-certificate-errors-spki-list={}",
                        certs.leaf_spki_sha256
                    ))
                    .arg(format!("--log-net-log={}", netlog.display()))
                    .arg("--virtual-time-budget=30000")
                    .arg("--dump-dom")
                    .arg(&page.main)
                    .output();
                let _ = stop_tx.send(());
                let n = n_rx.recv_timeout(Duration::from_secs(10)).unwrap_or(0);
                let _ = proxy_thread.join();
                let (times, error) = match result {
                    Ok(o) if o.status.success() => match std::fs::read(&netlog)
                        .map_err(|e| format!("reading {}: {e}", netlog.display()))
                        .and_then(|b| netlog_times(&b, page))
                    {
                        Ok(t) => (Some(t), None),
                        Err(e) => (None, Some(e)),
                    },
                    Ok(o) => (
                        None,
                        Some(format!(
                            "chromium exited with {}: {}",
                            o.status,
                            String::from_utf8_lossy(&o.stderr)
                                .lines()
                                .last()
                                .unwrap_or("")
                        )),
                    ),
                    Err(e) => (None, Some(format!("starting {}: {e}", chromium.display()))),
                };
                let _ = std::fs::remove_dir_all(&profile);
                if !cfg.keep_netlogs {
                    let _ = std::fs::remove_file(&netlog);
                }
                out.push(BrowserRun {
                    page: page.name.clone(),
                    run: r,
                    with_hint,
                    plt_s: times.map(|t| t.plt_s),
                    requested_s: times.map(|t| t.requested_s),
                    n,
                    error,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NetLog with the two constants the parser reads and URL-request
    /// events `(source id, event type, time ms, url)`; type 1 is the start.
    fn netlog(events: &[(u64, u64, f64, Option<&str>)]) -> Vec<u8> {
        let events: Vec<serde_json::Value> = events
            .iter()
            .map(|&(id, ty, t, url)| {
                let mut e = serde_json::json!({
                    "source": {"id": id, "type": 7},
                    "type": ty,
                    "time": format!("{t}"),
                });
                if let Some(u) = url {
                    e["params"] = serde_json::json!({ "url": u });
                }
                e
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "constants": {
                "logEventTypes": {"URL_REQUEST_START_JOB": 1, "OTHER": 2},
                "logSourceType": {"URL_REQUEST": 7},
            },
            "events": events,
        }))
        .unwrap_or_default()
    }

    fn page() -> Page {
        let o = |id, path: &str, parent| Object {
            id,
            host: "www.p.example".into(),
            path: path.into(),
            size: 1000,
            content_type: "text/html".into(),
            parent,
            discovery: mewa_corpus::Discovery::Html,
            compute_ms: 0,
        };
        Page {
            name: "p".into(),
            main: "http://www.p.example/".into(),
            objects: vec![o(0, "/", None), o(1, "/a.png", Some(0))],
        }
    }

    #[test]
    fn browser_plt_counts_the_page_own_requests_only() {
        let log = netlog(&[
            // Chromium's own start-up request, before the navigation.
            (1, 0, 900.0, None),
            (
                1,
                1,
                1000.0,
                Some("http://clients2.google.com/time/1/current"),
            ),
            (1, 2, 1100.0, None),
            // The page: its events before its start event count too.
            (2, 0, 1190.0, None),
            (2, 1, 1200.0, Some("http://www.p.example/")),
            (2, 2, 1450.0, None),
            (3, 1, 1460.0, Some("http://www.p.example/a.png")),
            (3, 2, 1700.0, None),
            // After the page: the favicon.
            (4, 1, 1800.0, Some("http://www.p.example/favicon.ico")),
            (4, 2, 1900.0, None),
        ]);
        let t = netlog_times(&log, &page()).map_err(|e| e.to_string());
        assert_eq!(
            t,
            Ok(NetlogTimes {
                plt_s: 0.5,
                requested_s: 0.26
            })
        );
        // Without the page's URL there is no load to time.
        let none = netlog(&[(1, 1, 1000.0, Some("http://www.p.example/a.png"))]);
        assert!(netlog_times(&none, &page())
            .unwrap_err()
            .contains("http://www.p.example/"));
        assert!(netlog_times(b"{", &page()).is_err());
    }
}
