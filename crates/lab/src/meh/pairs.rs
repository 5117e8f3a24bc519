//! Paired loads by the built-in loader: each page with the hint and
//! without, back to back, on the same stretch of a trace. With the hint
//! the client asks the edge, plans n from the hint (Algorithm 1) and
//! spreads the objects over the n connections; without it, one
//! connection.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mewa_client::advice::{plan, Fallback, Plan, Radio};
use mewa_client::resolve::{fetch_url_list, resolve, Resolved};
use mewa_corpus::{Object, Page};
use mewa_edge::app::now_unix_s;
use mewa_loader::metrics::PageMetrics;
use mewa_loader::record::{LoadRecord, Protocol};
use mewa_loader::{Assign, LeastOutstanding, LoadOptions, WarmFirst};

use super::before_load::prepare_load;
use super::config::{Dispatch, Policy};
use super::planner::{Observation, Planner};
use super::record::{MehRun, Record};
use super::setup::Setup;
use crate::bed::{Bed, BedError};
use crate::experiment::ExperimentError;

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
struct Lookup {
    /// The edge's answer.
    resolved: Resolved,
    /// The plan made from its hint, or why there is none.
    plan: Result<Plan, Fallback>,
    /// When the client had the object URLs, from the start of the load
    /// (zero when the UDP answer carried them; `None` when it never did).
    urls_at: Option<Duration>,
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
) -> Result<(LoadRecord, Lookup), ExperimentError> {
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
            .map_err(|source| ExperimentError::Resolve {
                host: host.clone(),
                source,
            })?;
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
        let rec = mewa_loader::load(page, &opts)
            .await
            .map_err(BedError::from)?;
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

/// Where the loads of the pairs go.
pub(crate) struct Client<'a> {
    /// The testbed.
    pub(crate) bed: &'a Bed,
    /// The edge's DNS server, as the client reaches it.
    pub(crate) edge: SocketAddr,
    /// The settings.
    pub(crate) setup: &'a Setup,
}

/// The pair of loads of `page` in run `run`, the `pair`-th of the run's
/// pairs (its stretch of the trace): with and without the hint, back to
/// back, the order alternating between runs so neither variant always
/// goes first. Each load is planned from `planner`, which then takes it
/// in. `within` hears of each load as it starts (loads of the pair done,
/// what).
pub(crate) fn load_pair(
    client: &Client<'_>,
    page: &Page,
    run: usize,
    pair: usize,
    planner: &mut Planner,
    within: &dyn Fn(usize, &str),
) -> Result<Vec<Record>, ExperimentError> {
    let cfg = client.setup;
    let order = if run % 2 == 0 {
        [false, true]
    } else {
        [true, false]
    };
    let mut out = Vec::with_capacity(2);
    for (k, with_hint) in order.into_iter().enumerate() {
        within(
            k,
            &format!(
                "run {}/{}, {} {}",
                run + 1,
                cfg.runs,
                page.name,
                if with_hint { "with hint" } else { "without" }
            ),
        );
        prepare_load(client.bed.running()?, cfg, pair)?;
        let (rec, lookup) = one_load(
            client.bed,
            client.edge,
            page,
            with_hint,
            cfg,
            planner.bandwidth_bps(),
            planner.recent_rtt_s(),
        )?;
        let seen = planner.observation(&rec);
        planner.observe(seen);
        out.push(Record::Load(Box::new(to_run(
            page, run, with_hint, &rec, &lookup, seen,
        ))));
    }
    Ok(out)
}

/// A load's row: its figures, what the edge said and what the client
/// took from it.
fn to_run(
    page: &Page,
    run: usize,
    with_hint: bool,
    rec: &LoadRecord,
    l: &Lookup,
    seen: Observation,
) -> MehRun {
    let m = PageMetrics::from_record(rec);
    let ok = rec.ok();
    let fallback = match (&l.resolved.hint, &l.plan) {
        (Err(f), _) => Some(f.to_string()),
        (Ok(_), Err(e)) => Some(e.to_string()),
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
        answer_bytes: l.resolved.answer_bytes,
        urls_over_tcp: l.resolved.urls_over_tcp,
        urls_ms: with_hint
            .then_some(l.urls_at)
            .flatten()
            .map(|d| d.as_secs_f64() * 1000.0),
        ready_ms: rec
            .connections
            .iter()
            .filter_map(|c| c.ready_us)
            .min()
            .map(|us| us as f64 / 1000.0),
        fallback,
        idle_share: m.idle_share,
        error: (!ok).then(|| rec.first_error().unwrap_or_else(|| "incomplete".into())),
        peak_window_bytes: seen.peak_window_bytes,
        handshake_us: seen.handshake_us,
    }
}
