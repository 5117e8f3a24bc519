//! The whole edge (`mewa edge serve`): the store, the DNS server, and the
//! periodic jobs around them — hint rebuilds, query-count flushes, the
//! latency monitor, the page tracer — plus the admin API.
//!
//! The store (SQLite) is used from blocking threads behind a mutex: the DNS
//! path never touches it (it reads the in-memory hint book and bumps
//! in-memory counters), so a slow disk cannot slow an answer.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::config::EdgeConfig;
use crate::dns::{Responder, Zone};
use crate::server::{self, EdgeDns};
use crate::store::{Store, StoreError};

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
    /// The admin API would listen beyond this machine without a token.
    #[error(
        "refusing to serve the admin API on {0} without a token: it shows what users browse. \
         Listen on 127.0.0.1 (the default), or set [admin] token in the config file"
    )]
    AdminWithoutToken(SocketAddr),
    /// No DNS cookie secret: `dns.cookie_secret` is not hex, or the system
    /// random number generator failed.
    #[error("dns.cookie_secret: {0}")]
    CookieSecret(crate::cookie::SecretError),
}

pub use crate::state::{now_unix_s, with_store, Edge, StoreJobError};

/// The bound sockets of an edge, ready to [`Edge::serve`].
#[derive(Debug)]
pub struct Bound {
    udp: Vec<std::net::UdpSocket>,
    tcp: TcpListener,
    admin: TcpListener,
    /// The tracer's egress filter, when the tracer is on.
    egress: Option<TcpListener>,
    /// Where DNS listens (UDP and TCP).
    pub dns_addr: SocketAddr,
    /// Where the admin API listens.
    pub admin_addr: SocketAddr,
}

impl Edge {
    /// Opens the store and binds every socket (inside a tokio runtime).
    pub async fn bind(config: EdgeConfig) -> Result<(Edge, Bound), EdgeError> {
        if !config.admin.listen.ip().is_loopback() && config.admin.token.is_none() {
            return Err(EdgeError::AdminWithoutToken(config.admin.listen));
        }
        let store = Store::open(&config.store.path)?;
        let zone = Zone::new(
            config.zone.iter().map(|(h, a)| (h.clone(), a.clone())),
            config.dns.answer_ttl_s,
        );
        let responder = Responder {
            zone: zone.clone(),
            max_udp_payload: config.dns.max_udp_payload,
            compact_payload: config.dns.compact_payload,
            upstream: config.dns.upstream.is_some(),
        };
        let cookies = config.cookie_secret().map_err(EdgeError::CookieSecret)?;
        let dns = Arc::new(
            EdgeDns::new(responder, config.forward_nets(), config.dns.upstream)
                .with_cookies(cookies),
        );
        dns.set_limits(server::Limits {
            max_counted: config.store.max_pages_per_flush,
            tcp_max_connections: config.dns.tcp_max_connections,
            tcp_timeout: Duration::from_secs(config.dns.tcp_timeout_s),
            tcp_max_lifetime: Duration::from_secs(config.dns.tcp_max_lifetime_s),
            max_forwarding: config.dns.max_forwarding,
            rrl: crate::rrl::RrlConfig {
                responses_per_s: config.dns.rrl_responses_per_s,
                slip: config.dns.rrl_slip,
                ..crate::rrl::RrlConfig::default()
            },
        });
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
        let egress_at = SocketAddr::from(([127, 0, 0, 1], 0));
        let egress = match config.tracer.enabled {
            true => Some(
                TcpListener::bind(egress_at)
                    .await
                    .map_err(|error| EdgeError::Bind {
                        what: "the tracer's egress filter",
                        addr: egress_at,
                        error,
                    })?,
            ),
            false => None,
        };
        let edge = Edge {
            config: Arc::new(config),
            store: Arc::new(Mutex::new(store)),
            dns,
            zone: Arc::new(zone),
            tracer_runs: Arc::default(),
            tracer_errors: Arc::default(),
            egress: Arc::default(),
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
                egress,
                dns_addr,
                admin_addr,
            },
        ))
    }

    /// The tracer's egress filter ([`crate::egress`]) to run, if the
    /// tracer is on and the filter is not taken yet: from then on
    /// [`Edge::trace_options`] sends the browser through it. [`Edge::serve`]
    /// runs it; a caller that traces without serving spawns it first.
    pub fn egress_filter(
        &self,
        bound: &mut Bound,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let l = bound.egress.take()?;
        let policy = Arc::new(crate::egress::EgressPolicy::new(
            self.zone.clone(),
            [bound.dns_addr.ip(), bound.admin_addr.ip()],
        ));
        let addr = l.local_addr().ok()?;
        self.egress.set((addr, policy.clone())).ok()?;
        Some(crate::egress::serve(l, policy))
    }

    /// Serves until `shutdown` completes, then flushes the query counts.
    pub async fn serve(self, mut bound: Bound, shutdown: impl std::future::Future<Output = ()>) {
        if let Err(e) = self.rebuild().await {
            tracing::warn!(error = %e, "edge: building hints failed");
        }
        let mut tasks = JoinSet::new();
        if let Some(filter) = self.egress_filter(&mut bound) {
            tasks.spawn(filter);
        }
        tasks.spawn(server::serve(self.dns.clone(), bound.udp, bound.tcp));
        tasks.spawn(crate::admin::serve(self.clone(), bound.admin));
        let e = self.clone();
        tasks.spawn(async move {
            let mut t = tokio::time::interval(Duration::from_secs(e.config.hint.rebuild_every_s));
            t.tick().await;
            loop {
                t.tick().await;
                if let Err(err) = e.rebuild().await {
                    tracing::warn!(error = %err, "edge: rebuilding hints failed");
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
                    tracing::warn!(error = %err, "edge: flushing query counts failed");
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
            tracing::warn!(error = %e, "edge: flushing query counts at exit failed");
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
