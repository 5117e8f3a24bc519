//! Paired loads: each page with the hint and without, back to back, on
//! the same stretch of a trace.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mewa_client::advice::{plan, Fallback, Plan, Radio};
use mewa_client::rate::DeliveryRate;
use mewa_client::resolve::{fetch_url_list, resolve, Resolved};
use mewa_corpus::{Corpus, Object, Page};
use mewa_edge::app::now_unix_s;
use mewa_link::runtime::LinkOptions;

use super::browser::browser_runs;
use super::config::{BrowserPages, PlanRate};
use super::edge::start_edge;
use super::summary::{fig8_pages, summarise, to_run, MehResult};
use super::{Dispatch, Policy, RadioLink, Setup};
use crate::bed::{Bed, BedError, OriginSettings, EDGE};
use crate::experiment::Progress;
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{Assign, LeastOutstanding, LoadOptions, WarmFirst};

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

/// What one load needs from the edge.
pub(crate) struct Lookup {
    pub(crate) resolved: Resolved,
    pub(crate) plan: Result<Plan, Fallback>,
    /// When the client had the object URLs, from the start of the load
    /// (zero when the UDP answer carried them; `None` when it never did).
    pub(crate) urls_at: Option<Duration>,
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
    cfg: &Setup,
    bw: f64,
    recent_rtt_s: Option<f64>,
) -> Result<(LoadRecord, Lookup), BedError> {
    let host = mewa_hint::page::host_of(&page.main).unwrap_or_default();
    let policy = cfg.policy;
    let dispatch = cfg.dispatch;
    let prefetch = cfg.prefetch;
    let one_connection = cfg.one_connection;
    let timeout = cfg.timeout;
    let scheme = scheme_of(page);
    // The page's other hosts resolve as the testbed serves them.
    let mut resolver = bed.resolver();
    let per_host = bed.per_host();
    let tls_opts = bed.options(LoadOptions::browser(Protocol::H2, scheme == "https"));
    bed.in_client(|| async move {
        // Retransmitted after 1, 2 and 4 s: a 3G promotion and a driving
        // trace's outage can swallow the first query.
        let resolved = resolve(edge, &host, &page.main, Duration::from_secs(10))
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
                    rtt_s: mewa_client::rate::plan_rtt_s(recent_rtt_s, resolved.rtt.as_secs_f64()),
                },
                now_unix_s(),
            ),
            Err(f) => Err(f.clone()),
        };
        resolver.hosts.insert(host.clone(), addr);
        if !per_host {
            resolver.default = Some(addr);
        }
        // https:// pages (recordings) over TLS, as a browser loads them:
        // the origin connection is ready after two round trips, not one.
        let mut opts = LoadOptions {
            resolver,
            timeout,
            ..tls_opts
        };
        let mut late = None;
        if let (true, Ok(p)) = (with_hint, &plan) {
            if !one_connection {
                opts.connections = p.n as usize;
                opts.preconnect = p.n > 1;
                opts.assign = Arc::new(PlanAssign::new(p, scheme, policy));
            }
            if prefetch {
                opts.prefetch = p.urls.urls.clone();
                if resolved.urls_over_tcp {
                    // The URL list over TCP from the edge, while the load
                    // connects to the origin.
                    let (tx, rx) = tokio::sync::watch::channel(None);
                    opts.prefetch_later = Some(rx);
                    let (host, url) = (host.clone(), page.main.clone());
                    let t0 = std::time::Instant::now();
                    late = Some(tokio::spawn(async move {
                        let urls = fetch_url_list(edge, &host, &url, timeout).await.ok()?.urls;
                        let at = t0.elapsed();
                        // Sent too late when the load has ended.
                        let _ = tx.send(Some(Arc::new(urls)));
                        Some(at)
                    }));
                }
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
        let rec = mewa_loader::load(page, &opts).await?;
        let urls_at = match late {
            Some(t) => t.await.ok().flatten(),
            None => match &plan {
                Ok(p) if !p.urls.is_empty() => Some(Duration::ZERO),
                _ => None,
            },
        };
        Ok((
            rec,
            Lookup {
                resolved,
                plan,
                urls_at,
            },
        ))
    })?
}

/// Offset between the trace stretches two successive pairs of loads replay
/// on a trace link, ms (a prime, so pairs do not fall into step with a
/// trace's period).
pub const TRACE_STRIDE_MS: u64 = 9_973;

/// Before each load of pair `pair`: on a trace radio link, restarts the
/// traces at the pair's stretch (pairs spread over the trace by
/// [`TRACE_STRIDE_MS`]) from the load's first packet on, so that both
/// loads of a pair replay the same stretch and their difference is the
/// hint's, not the trace's nor the browser's start-up time; with an
/// RRC model, puts the radio to sleep, the idle gap a phone has between
/// two pages, so every load pays the promotion.
pub(crate) fn prepare_load(
    topo: &mewa_link::runtime::Topology,
    cfg: &Setup,
    pair: usize,
) -> Result<(), BedError> {
    // The last load's connections close after it ends (FINs, the origin's
    // last ACKs): let them cross first, or they would wake the radio and
    // start the trace's stretch before this load begins.
    let stray = wait_for_quiet_link(topo)?;
    if stray > 0 {
        tracing::debug!("lab: {stray} packets of the last load crossed the radio after it");
    }
    if matches!(cfg.radio, RadioLink::Trace { .. }) {
        let at_ms = (pair as u64).saturating_mul(TRACE_STRIDE_MS);
        topo.rewind_traces_at_next_packet(crate::bed::CLIENT, EDGE, at_ms)?;
    }
    if cfg.rrc != super::config::Rrc::Off {
        topo.radio_idle(crate::bed::CLIENT, EDGE)?;
    }
    Ok(())
}

/// How long the radio link must carry nothing before a load is prepared.
const QUIET: Duration = Duration::from_millis(300);
/// The longest wait for [`QUIET`]: a link that never goes quiet (some
/// other traffic) must not stop the experiment.
const QUIET_AT_MOST: Duration = Duration::from_secs(3);

/// Waits until the radio link has been without packets for [`QUIET`] (at
/// most [`QUIET_AT_MOST`]); the packets that crossed meanwhile.
fn wait_for_quiet_link(topo: &mewa_link::runtime::Topology) -> Result<u64, BedError> {
    let count = || -> Result<(u64, bool), BedError> {
        let s = topo.link_stats(crate::bed::CLIENT, EDGE)?;
        let empty = s.up_queued_bytes == 0 && s.down_queued_bytes == 0;
        Ok((s.up.arrivals + s.down.arrivals, empty))
    };
    let start = std::time::Instant::now();
    let (first, _) = count()?;
    let (mut last, mut since) = (first, start);
    while start.elapsed() < QUIET_AT_MOST {
        std::thread::sleep(Duration::from_millis(50));
        let (now, empty) = count()?;
        if now != last || !empty {
            (last, since) = (now, std::time::Instant::now());
        } else if since.elapsed() >= QUIET {
            break;
        }
    }
    Ok(last - first)
}

/// The client's planning bandwidth now: told, or what its recent loads
/// delivered (the prior before any).
pub(crate) fn plan_bandwidth(cfg: &Setup, seen: &DeliveryRate) -> f64 {
    match cfg.plan_rate {
        PlanRate::Fixed(b) => b,
        PlanRate::Observed { prior_bps } => seen.estimate_bps().unwrap_or(prior_bps),
    }
}

/// The quickest TCP handshake of a load's connections, seconds.
fn quickest_handshake_s(rec: &LoadRecord) -> Option<f64> {
    rec.connections
        .iter()
        .filter_map(|c| c.connected_us.map(|t| t.saturating_sub(c.open_us)))
        .filter(|&us| us > 0)
        .min()
        .map(|us| us as f64 / 1e6)
}

/// A load's body arrivals `(µs, bytes)` in time order.
fn arrivals(rec: &LoadRecord) -> Vec<(u64, u64)> {
    let mut a: Vec<(u64, u64)> = rec
        .objects
        .iter()
        .flat_map(|o| o.chunks.iter().map(|c| (c.t_us, c.bytes)))
        .collect();
    a.sort_unstable();
    a
}

/// Runs every page `cfg.runs` times with and without the hint, back to
/// back (the order alternates between runs so neither variant always goes
/// first). On a trace link both loads of a pair start at the same moment
/// of the trace.
///
/// Browser runs (when [`Setup::browser`] asks for them) work in
/// `work_dir/chromium`.
pub fn run_setup(
    corpus: &Corpus,
    cfg: &Setup,
    work_dir: &std::path::Path,
    progress: &Progress,
) -> Result<MehResult, BedError> {
    let origin = OriginSettings {
        congestion: cfg.congestion.clone(),
        ca_dir: cfg.ca_dir.clone(),
        iw: None,
    };
    let bed = Bed::start_with_edge(
        corpus,
        cfg.radio_link(),
        LinkOptions::default(),
        cfg.wired_link(),
        &origin,
    )?;
    let (edge, wired_ms) = start_edge(&bed, corpus, cfg)?;
    let topo = bed.running()?;
    let edge_ip = topo.addr_towards(EDGE, crate::bed::CLIENT)?;
    let edge_addr = SocketAddr::from((edge_ip, 53));
    let total = cfg.runs * corpus.pages.len() * 2;
    let mut done = 0;
    // What the phone has seen its loads deliver, over windows of one
    // end-to-end round trip.
    let mut seen = DeliveryRate::new((cfg.radio_rtt_ms + cfg.wired_rtt_ms) * 1000);
    // And the round trips its handshakes took after the radio's promotion.
    let mut recent = mewa_client::rate::RecentRtt::new();
    let mut runs = Vec::with_capacity(total);
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
                progress.step(done, total, &what);
                prepare_load(topo, cfg, pair)?;
                let bw = plan_bandwidth(cfg, &seen);
                let (rec, lookup) = one_load(
                    &bed,
                    edge_addr,
                    page,
                    with_hint,
                    cfg,
                    bw,
                    recent.estimate_s(),
                )?;
                seen.observe(&arrivals(&rec));
                if let Some(h) = quickest_handshake_s(&rec) {
                    recent.observe(h);
                }
                runs.push(to_run(page, r, with_hint, &rec, &lookup));
                done += 1;
            }
        }
    }
    let browser = match &cfg.browser {
        Some(_) => {
            let dir = work_dir.join("chromium");
            std::fs::create_dir_all(&dir)
                .map_err(|e| BedError::Runtime(format!("creating {}: {e}", dir.display())))?;
            let pages: Vec<&Page> = match (cfg.browser_pages, bed.per_host()) {
                (BrowserPages::All, _) | (BrowserPages::Auto, true) => {
                    corpus.pages.iter().collect()
                }
                _ => fig8_pages(corpus),
            };
            let bw = plan_bandwidth(cfg, &seen);
            browser_runs(&bed, edge_addr, &pages, cfg, bw, &dir, progress)?
        }
        None => Vec::new(),
    };
    progress.step(done, total, "done");
    drop(edge);
    bed.shutdown()?;
    let mut res = summarise(corpus, runs, wired_ms);
    res.browser = browser;
    Ok(res)
}
