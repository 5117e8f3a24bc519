//! The whole edge (`mewa edge serve`): the store, the DNS server, and the
//! periodic jobs around them — hint rebuilds, query-count flushes, the
//! latency monitor, the page tracer — plus the admin API.
//!
//! The store (SQLite) is used from blocking threads behind a mutex: the DNS
//! path never touches it (it reads the in-memory hint book and bumps
//! in-memory counters), so a slow disk cannot slow an answer.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mewa_hint::page::{OriginRtt, PageMeta};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::config::EdgeConfig;
use crate::dns::{Responder, Zone};
use crate::hints::{HintBook, HintPolicy};
use crate::monitor;
use crate::server::{self, EdgeDns};
use crate::store::{Store, StoreError};
use crate::tracer::{self, TraceError, TraceOptions};

/// Why the edge could not start.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A socket could not be bound (address in use? port 53 needs root or
    /// CAP_NET_BIND_SERVICE).
    #[error("binding {what} on {addr}: {error}")]
    Bind {
        /// "DNS over UDP", "DNS over TCP", "admin API".
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// The tokio runtime or the Ctrl-C handler failed.
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
}

pub use mewa_hint::now_unix_s;

/// A running edge's shared parts.
#[derive(Debug, Clone)]
pub struct Edge {
    /// The configuration it runs with.
    pub config: Arc<EdgeConfig>,
    /// The store.
    pub store: Arc<Mutex<Store>>,
    /// The DNS service (hint book, counters).
    pub dns: Arc<EdgeDns>,
    /// The zone.
    pub zone: Arc<Zone>,
    /// Pages the tracer traced and stored, for the metrics.
    pub tracer_runs: Arc<std::sync::atomic::AtomicU64>,
    /// Page traces that failed, for the metrics.
    pub tracer_errors: Arc<std::sync::atomic::AtomicU64>,
    /// Latency probes that failed.
    pub probe_failures: Arc<std::sync::atomic::AtomicU64>,
    /// Hosts whose last probe failed: a failure is logged when a host enters
    /// this set and a recovery when it leaves, not on every probe.
    failing: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Pages whose last trace failed, likewise logged on entering and
    /// leaving.
    trace_failing: Arc<Mutex<std::collections::HashSet<String>>>,
}

/// The bound sockets of an edge, ready to [`Edge::serve`].
#[derive(Debug)]
pub struct Bound {
    udp: Vec<std::net::UdpSocket>,
    tcp: TcpListener,
    admin: TcpListener,
    /// Where DNS listens (UDP and TCP).
    pub dns_addr: SocketAddr,
    /// Where the admin API listens.
    pub admin_addr: SocketAddr,
}

/// Runs `f` with the store on a blocking thread.
pub async fn with_store<T: Send + 'static>(
    store: &Arc<Mutex<Store>>,
    f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, String> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        let mut s = store
            .lock()
            .map_err(|_| "store lock poisoned".to_string())?;
        f(&mut s).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("store task failed: {e}"))?
}

impl Edge {
    /// Opens the store and binds every socket (inside a tokio runtime).
    pub async fn bind(config: EdgeConfig) -> Result<(Edge, Bound), EdgeError> {
        let store = Store::open(&config.store.path)?;
        let zone = Zone::new(
            config.zone.iter().map(|(h, a)| (h.clone(), a.clone())),
            config.dns.answer_ttl_s,
        );
        let responder = Responder {
            zone: zone.clone(),
            max_udp_payload: config.dns.max_udp_payload,
            upstream: config.dns.upstream.is_some(),
        };
        let dns = Arc::new(EdgeDns::new(
            responder,
            config.forward_nets(),
            config.dns.upstream,
        ));
        let sockets = match config.dns.udp_sockets {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let (udp, tcp) = server::bind_dns(config.dns.listen, sockets)
            .await
            .map_err(|e| EdgeError::Bind {
                what: if e.what == "UDP" {
                    "DNS over UDP"
                } else {
                    "DNS over TCP"
                },
                addr: e.addr,
                error: e.error,
            })?;
        let dns_addr = tcp.local_addr().unwrap_or(config.dns.listen);
        let admin = TcpListener::bind(config.admin.listen)
            .await
            .map_err(|error| EdgeError::Bind {
                what: "admin API",
                addr: config.admin.listen,
                error,
            })?;
        let admin_addr = admin.local_addr().unwrap_or(config.admin.listen);
        let edge = Edge {
            config: Arc::new(config),
            store: Arc::new(Mutex::new(store)),
            dns,
            zone: Arc::new(zone),
            tracer_runs: Arc::default(),
            tracer_errors: Arc::default(),
            probe_failures: Arc::default(),
            failing: Arc::default(),
            trace_failing: Arc::default(),
        };
        Ok((
            edge,
            Bound {
                udp,
                tcp,
                admin,
                dns_addr,
                admin_addr,
            },
        ))
    }

    /// Builds the hint book from the store and swaps it in; returns the
    /// number of pages, and logs pages that could not be encoded.
    pub async fn rebuild(&self) -> Result<usize, String> {
        let (pages, origins) = with_store(&self.store, |s| {
            let mut pages: Vec<PageMeta> = Vec::new();
            for p in s.pages()? {
                if let Some(sp) = s.page(&p.url)? {
                    pages.push(sp.meta);
                }
            }
            Ok((pages, s.origins()?))
        })
        .await?;
        let rtts: HashMap<String, OriginRtt> =
            origins.into_iter().map(|o| (o.host.clone(), o)).collect();
        let policy = HintPolicy {
            alpha: self.config.hint.alpha,
            ttl_s: self.config.hint.ttl_s,
        };
        let (book, failed) = HintBook::build(pages, &rtts, policy, now_unix_s());
        for (url, e) in failed {
            eprintln!("edge: no hint for {url}: {e}");
        }
        let n = book.len();
        self.dns.set_book(book);
        Ok(n)
    }

    /// Writes the in-memory query counts to the store.
    pub async fn flush_counts(&self) -> Result<(), String> {
        let counts = self.dns.take_counts();
        if counts.is_empty() {
            return Ok(());
        }
        with_store(&self.store, move |s| s.add_queries(&counts, now_unix_s())).await
    }

    /// Probes every origin host of the known pages once and stores the
    /// samples and the smoothed RTTs. Returns (probed, failed).
    pub async fn probe_origins(&self) -> (usize, usize) {
        let hosts = self.dns.book().hosts();
        let m = &self.config.monitor;
        let timeout = Duration::from_millis(m.timeout_ms);
        let mut probes = JoinSet::new();
        for host in hosts {
            let (zone, port) = (self.zone.clone(), m.port);
            probes.spawn(async move {
                let r = match monitor::resolve(&host, port, &zone).await {
                    Ok(addr) => monitor::probe(addr, timeout).await,
                    Err(e) => Err(e),
                };
                (host, r)
            });
        }
        let (mut n, mut failed) = (0, 0);
        let weight = m.ewma_weight;
        while let Some(Ok((host, r))) = probes.join_next().await {
            n += 1;
            let newly = |ok: bool| {
                self.failing.lock().is_ok_and(|mut f| {
                    if ok {
                        f.remove(&host)
                    } else {
                        f.insert(host.clone())
                    }
                })
            };
            let rtt = match r {
                Ok(d) => {
                    if newly(true) {
                        eprintln!("edge: latency probe: {host} answers again");
                    }
                    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
                }
                Err(e) => {
                    failed += 1;
                    self.probe_failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if newly(false) {
                        eprintln!("edge: latency probe: {e} (logged once until it answers)");
                    }
                    continue;
                }
            };
            let at = now_unix_s();
            let stored = with_store(&self.store, move |s| {
                let prev = s.origin_rtt(&host)?.map(|o| o.rtt_us);
                s.add_latency_sample(&host, rtt, at)?;
                s.set_origin_rtt(&OriginRtt {
                    rtt_us: monitor::ewma(prev, rtt, weight),
                    host,
                    measured_at_unix_s: at,
                })
            })
            .await;
            if let Err(e) = stored {
                eprintln!("edge: storing a latency sample: {e}");
            }
        }
        (n, failed)
    }

    /// The tracer's options on this edge: `tracer.timeout_s`, and the zone
    /// as Chromium's host resolver rules — the edge answers those names
    /// itself, and the machine's own resolver need not know them (in the
    /// lab it does not).
    pub fn trace_options(&self) -> TraceOptions {
        let rules = tracer::host_resolver_rules(
            self.config
                .zone
                .iter()
                .map(|(h, a)| (h.trim_end_matches('.'), a.as_slice())),
        );
        TraceOptions {
            timeout: Duration::from_secs(self.config.tracer.timeout_s),
            extra_args: rules.into_iter().collect(),
            ..TraceOptions::default()
        }
    }

    /// One tracer pass: the `tracer.top_k` most queried pages of the last
    /// `tracer.window_s`, traced one after another (one browser at a time on
    /// a small edge) and each stored in its own transaction with source
    /// `tracer`; the next hint rebuild picks them up. A failure counts in
    /// `tracer_errors` and is logged once per page until that page traces
    /// again; the pass goes on. Returns (stored, failed); `Err` only when
    /// Chromium is missing, which no later pass would fix.
    pub async fn trace_popular(&self) -> Result<(usize, usize), TraceError> {
        let t = &self.config.tracer;
        let (since, k) = (now_unix_s().saturating_sub(t.window_s), t.top_k);
        let urls = match with_store(&self.store, move |s| s.top_pages(since, k)).await {
            Ok(u) => u,
            Err(e) => {
                eprintln!("edge: tracer: reading the popular pages: {e}");
                return Ok((0, 0));
            }
        };
        let opts = self.trace_options();
        let (mut stored, mut failed) = (0, 0);
        for (url, _) in urls {
            let result = match tracer::popular_url_refusal(&url) {
                Some(why) => Err(format!("{url}: not traced: {why}")),
                None => match tracer::trace_page(&t.chromium, &url, &opts).await {
                    Ok(traced) => {
                        let page = traced.page;
                        with_store(&self.store, move |s| {
                            s.put_page(&page, "tracer", now_unix_s())
                        })
                        .await
                        .map_err(|e| format!("storing the trace of {url}: {e}"))
                    }
                    Err(e @ TraceError::NoChromium { .. }) => return Err(e),
                    Err(e) => Err(e.to_string()),
                },
            };
            let newly = |ok: bool| {
                self.trace_failing.lock().is_ok_and(|mut f| {
                    if ok {
                        f.remove(&url)
                    } else {
                        f.insert(url.clone())
                    }
                })
            };
            match result {
                Ok(()) => {
                    stored += 1;
                    self.tracer_runs
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if newly(true) {
                        eprintln!("edge: tracer: {url} traced again");
                    }
                }
                Err(e) => {
                    failed += 1;
                    self.tracer_errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if newly(false) {
                        eprintln!("edge: tracer: {e} (logged once until it traces)");
                    }
                }
            }
        }
        Ok((stored, failed))
    }

    /// The tracer's periodic job: a pass every `tracer.every_s`, the first
    /// one period after start (a restarting edge does not launch a browser
    /// each time). Without Chromium it says so once and ends, and the edge
    /// runs on without it.
    async fn run_tracer(self) {
        let t = &self.config.tracer;
        if !t.chromium.is_file() {
            let e = TraceError::NoChromium {
                path: t.chromium.clone(),
            };
            eprintln!("edge: tracer disabled: {e}");
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_secs(t.every_s));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Err(e) = self.trace_popular().await {
                eprintln!("edge: tracer disabled: {e}");
                return;
            }
        }
    }

    /// Serves until `shutdown` completes, then flushes the query counts.
    pub async fn serve(self, bound: Bound, shutdown: impl std::future::Future<Output = ()>) {
        if let Err(e) = self.rebuild().await {
            eprintln!("edge: building hints: {e}");
        }
        let mut tasks = JoinSet::new();
        tasks.spawn(server::serve(self.dns.clone(), bound.udp, bound.tcp));
        tasks.spawn(crate::admin::serve(self.clone(), bound.admin));
        let e = self.clone();
        tasks.spawn(async move {
            let mut t = tokio::time::interval(Duration::from_secs(e.config.hint.rebuild_every_s));
            t.tick().await;
            loop {
                t.tick().await;
                if let Err(err) = e.rebuild().await {
                    eprintln!("edge: rebuilding hints: {err}");
                }
            }
        });
        let e = self.clone();
        tasks.spawn(async move {
            let mut t = tokio::time::interval(Duration::from_secs(e.config.store.flush_every_s));
            t.tick().await;
            loop {
                t.tick().await;
                if let Err(err) = e.flush_counts().await {
                    eprintln!("edge: flushing query counts: {err}");
                }
            }
        });
        let e = self.clone();
        tasks.spawn(async move {
            let mut t = tokio::time::interval(Duration::from_secs(e.config.monitor.every_s));
            loop {
                t.tick().await;
                e.probe_origins().await;
            }
        });
        if self.config.tracer.enabled {
            tasks.spawn(self.clone().run_tracer());
        }
        shutdown.await;
        tasks.shutdown().await;
        if let Err(e) = self.flush_counts().await {
            eprintln!("edge: flushing query counts at exit: {e}");
        }
    }
}

/// For a command line: builds a multi-threaded runtime, binds, calls
/// `ready` (to print the addresses), and serves until Ctrl-C.
pub fn run_until_ctrl_c(
    config: EdgeConfig,
    ready: impl FnOnce(&Edge, &Bound),
) -> Result<(), EdgeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(EdgeError::Runtime)?;
    rt.block_on(async {
        let (edge, bound) = Edge::bind(config).await?;
        ready(&edge, &bound);
        let mut failed = None;
        edge.serve(bound, async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                failed = Some(e);
            }
        })
        .await;
        failed.map_or(Ok(()), |e| Err(EdgeError::Runtime(e)))
    })
}
