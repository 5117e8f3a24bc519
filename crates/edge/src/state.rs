//! The edge's shared state and its periodic jobs: the store, the DNS
//! service with its hint book, the zone, the counters; rebuilding hints,
//! flushing query counts, probing origins, tracing popular pages. The admin
//! API reads this state; [`crate::app`] only binds sockets and starts the
//! servers and jobs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mewa_hint::page::{OriginRtt, PageMeta};
use tokio::task::JoinSet;

use crate::config::EdgeConfig;
use crate::dns::Zone;
use crate::hints::{HintBook, HintPolicy};
use crate::monitor;
use crate::server::EdgeDns;
use crate::store::{Store, StoreError};
use crate::tracer::{self, TraceError, TraceOptions};

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
    pub(crate) failing: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Pages whose last trace failed, likewise logged on entering and
    /// leaving.
    pub(crate) trace_failing: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The tracer's SOCKS5 egress filter ([`crate::egress`]), once serving.
    pub egress: Arc<std::sync::OnceLock<(std::net::SocketAddr, Arc<crate::egress::EgressPolicy>)>>,
}

/// Why a store job (a read or write on the blocking pool) failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreJobError {
    /// The store refused the operation.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A thread panicked while holding the store; the edge keeps serving
    /// hints from memory but cannot read or write the store any more.
    #[error("the store's lock is poisoned (a store job panicked); restart the edge")]
    Poisoned,
    /// The blocking task itself failed: it panicked (a bug; the report is
    /// in the message) or the runtime cancelled it while shutting down.
    /// Kept as tokio's own error so that a caller can tell which with
    /// `is_panic` / `is_cancelled`.
    #[error("store task failed: {0}; the edge serves hints from memory meanwhile, restart it if this repeats")]
    Task(#[from] tokio::task::JoinError),
}

/// Runs `f` with the store on a blocking thread.
pub async fn with_store<T: Send + 'static>(
    store: &Arc<Mutex<Store>>,
    f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreJobError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        let mut s = store.lock().map_err(|_| StoreJobError::Poisoned)?;
        Ok(f(&mut s)?)
    })
    .await?
}

impl Edge {
    /// Builds the hint book from the store and swaps it in; returns the
    /// number of pages, and logs pages that could not be encoded.
    pub async fn rebuild(&self) -> Result<usize, StoreJobError> {
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
            tracing::warn!(%url, error = %e, "edge: no hint for a page");
        }
        let n = book.len();
        self.dns.set_book(book);
        Ok(n)
    }

    /// Writes the in-memory query counts to the store (put back in memory
    /// if the write fails, for the next flush), then deletes the counts
    /// older than the tracer's window: the table holds what popularity
    /// needs, not every URL ever asked for.
    pub async fn flush_counts(&self) -> Result<(), StoreJobError> {
        let counts = self.dns.take_counts();
        let window = self.config.tracer.window_s;
        if !counts.is_empty() {
            let now = now_unix_s();
            let written = with_store(&self.store, {
                let counts = counts.clone();
                move |s| s.add_queries(&counts, now)
            })
            .await;
            if let Err(e) = written {
                self.dns.put_back_counts(counts);
                return Err(e);
            }
        }
        let before = now_unix_s().saturating_sub(window);
        with_store(&self.store, move |s| s.prune_queries(before).map(|_| ())).await
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
                        tracing::info!(%host, "edge: latency probe: the host answers again");
                    }
                    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
                }
                Err(e) => {
                    failed += 1;
                    self.probe_failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if newly(false) {
                        tracing::warn!(
                            %host,
                            error = %e,
                            "edge: latency probe failed (logged once until it answers)"
                        );
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
                tracing::warn!(error = %e, "edge: storing a latency sample failed");
            }
        }
        (n, failed)
    }

    /// The tracer's options on this edge: `tracer.timeout_s`,
    /// `tracer.user` and `tracer.no_sandbox`, and the zone
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
        let mut extra_args: Vec<String> = rules.into_iter().collect();
        // Every request of the browser through the egress filter, loopback
        // included (Chromium bypasses proxies for it by default).
        if let Some((addr, _)) = self.egress.get() {
            extra_args.push(format!("proxy-server=socks5://{addr}"));
            extra_args.push("proxy-bypass-list=<-loopback>".into());
        }
        TraceOptions {
            timeout: Duration::from_secs(self.config.tracer.timeout_s),
            extra_args,
            user: self.config.tracer.user.clone(),
            no_sandbox: self.config.tracer.no_sandbox,
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
                tracing::warn!(error = %e, "edge: tracer: reading the popular pages failed");
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
                        tracing::info!(%url, "edge: tracer: the page traced again");
                    }
                }
                Err(e) => {
                    failed += 1;
                    self.tracer_errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if newly(false) {
                        tracing::warn!(
                            %url,
                            error = %e,
                            "edge: tracer: page not traced (logged once until it traces)"
                        );
                    }
                }
            }
        }
        Ok((stored, failed))
    }

    /// The tracer's periodic job: a pass every `tracer.every_s`, the first
    /// one period after start (a restarting edge does not launch a browser
    /// each time). Without Chromium, or as root without a usable
    /// `tracer.user`, it says so once and ends, and the edge runs on
    /// without it. With `tracer.no_sandbox` it warns once: traced pages,
    /// which clients name, then run unconfined.
    pub(crate) async fn run_tracer(self) {
        let t = &self.config.tracer;
        if !t.chromium.is_file() {
            let e = TraceError::NoChromium {
                path: t.chromium.clone(),
            };
            tracing::warn!(error = %e, "edge: tracer disabled");
            return;
        }
        let euid = nix::unistd::geteuid().as_raw();
        match mewa_chromium::run_as(euid, &t.user, mewa_chromium::lookup_user) {
            Err(e) => {
                let e = TraceError::from(e);
                tracing::warn!(error = %e, "edge: tracer disabled");
                return;
            }
            Ok(Some(a)) => {
                tracing::info!(user = %t.user, uid = a.uid, "edge: tracer: Chromium runs as an unprivileged user");
            }
            Ok(None) => {}
        }
        if t.no_sandbox {
            tracing::warn!(
                "edge: tracer.no_sandbox is set: Chromium runs without its sandbox, and a \
                 traced page that exploits the renderer gets the rights of its user"
            );
        }
        let mut tick = tokio::time::interval(Duration::from_secs(t.every_s));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Err(e) = self.trace_popular().await {
                tracing::warn!(error = %e, "edge: tracer disabled");
                return;
            }
        }
    }
}
