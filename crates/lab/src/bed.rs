//! A two-host testbed: a client and an origin in their own network
//! namespaces, joined by one emulated link (real kernel TCP on both ends).
//!
//! The origin runs on a thread inside the server's namespace with its own
//! tokio runtime; each load runs on a thread inside the client's namespace
//! with a fresh current-thread runtime, so every socket the loader opens is
//! a client-namespace socket that crosses the link.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use mewa_corpus::{Corpus, Page};
use mewa_link::core::{DelaySpec, DirectionConfig, LinkConfig, QueueSpec, RateSpec};
use mewa_link::runtime::{self, LinkOptions, Topology};
use mewa_origin::{AcceptHook, HttpOptions, Origin, OriginConfig, TcpOptions};
use tokio::sync::oneshot;

use mewa_loader::record::LoadRecord;
use mewa_loader::{load, LoadError, LoadOptions, Resolver};

/// The address groups a corpus is served with: one per
/// [`Corpus::connection_groups`] group for an imported corpus, none (every
/// host at the origin's one address) for a generated one.
pub fn replay_groups(corpus: &Corpus) -> Vec<Vec<String>> {
    match corpus.provenance {
        mewa_corpus::Provenance::Imported { .. } => corpus.connection_groups(),
        mewa_corpus::Provenance::Generated { .. } => Vec::new(),
    }
}

/// Namespace host names of the testbed.
pub const CLIENT: &str = "client";
/// The origin's host.
pub const SERVER: &str = "origin";
/// The mobile edge's host in [`Bed::start_with_edge`].
pub const EDGE: &str = "edge";

/// Why the testbed could not be built or used.
#[derive(Debug, thiserror::Error)]
pub enum BedError {
    /// Namespaces, TUN or a link could not be set up (not root?).
    #[error("testbed: {0}")]
    Link(#[from] runtime::Error),
    /// A server in a namespace (the origin, the edge, the proxy) did not
    /// start: port in use, unknown congestion control, a bad store…
    #[error("{what}: {message}")]
    Server {
        /// Which server.
        what: &'static str,
        /// Why it did not start.
        message: String,
    },
    /// The load could not start (see [`LoadError`]).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A thread or runtime could not be created.
    #[error("{0}")]
    Runtime(String),
}

/// Sets `host`'s TCP receive buffers (`net.ipv4.tcp_rmem`) to start at
/// `rmem` bytes (autotuning up to 32 MB). A receiver's first advertised
/// window follows this value: Linux's stock 128 KB advertises about 64 KB,
/// which caps a sender's first flights at about 45 segments, below what
/// seed 001 and seed 002 send (Android starts LTE sockets at 1 MB).
pub fn set_tcp_rmem(topo: &Topology, host: &str, rmem: usize) -> Result<(), BedError> {
    set_sysctl(
        topo,
        host,
        "net.ipv4.tcp_rmem",
        &format!("4096 {rmem} 33554432"),
    )
}

/// Sets the sysctl `key` (e.g. `net.ipv4.tcp_slow_start_after_idle`) of
/// `host`'s network namespace: `/proc/sys/net` follows the namespace of
/// the thread that opens it.
pub fn set_sysctl(
    topo: &Topology,
    host: &str,
    key: &'static str,
    value: &str,
) -> Result<(), BedError> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    topo.in_namespace(host, || std::fs::write(&path, value))?
        .map_err(|e| BedError::Server {
            what: key,
            message: format!("setting it to {value} in {host}: {e}"),
        })
}

/// A link with `rtt_ms` of round trip, half each way, `down` and `up`
/// rates, mahimahi's default unbounded drop-tail queue and no loss: every
/// link the experiments build is of this shape.
pub fn link_of(rtt_ms: u64, down: RateSpec, up: RateSpec) -> LinkConfig {
    let dir = |rate| DirectionConfig {
        delay: DelaySpec::Fixed(Duration::from_micros(rtt_ms.saturating_mul(500))),
        rate,
        queue: QueueSpec::default(),
        loss: 0.0,
    };
    LinkConfig {
        up: dir(up),
        down: dir(down),
        ..LinkConfig::default()
    }
}

/// How the origin of a testbed serves.
#[derive(Debug, Clone)]
pub struct OriginSettings {
    /// TCP congestion control of the origin's sockets (the kernel default in
    /// a namespace is bbr and cannot be changed there).
    pub congestion: String,
    /// Where the local test CA lives (created if missing).
    pub ca_dir: PathBuf,
    /// Grant the initial windows clients ask for (seed 001); needs
    /// `mewa cc load` for TCP.
    pub iw: Option<mewa_origin::IwPolicy>,
}

/// A running testbed; dropping it stops the origin and removes the
/// namespaces.
pub struct Bed {
    topo: Option<Topology>,
    origin_ip: IpAddr,
    /// Recorded pages: each host's own address ([`Bed::addr_of`]).
    host_addrs: HashMap<String, IpAddr>,
    ca_cert: PathBuf,
    origin: Option<NsServer>,
    /// Whether the origin answers documents with `103 Early Hints` now
    /// (shared with it; off at start).
    early_hints: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Fixed ports of the origin inside its namespace.
pub const PORT_PLAIN: u16 = 80;
/// TLS over TCP.
pub const PORT_TLS: u16 = 443;
/// HTTP/3 over UDP.
pub const PORT_H3: u16 = 443;

impl Bed {
    /// Builds the namespaces and the link and starts an origin serving
    /// `corpus` on all three listeners.
    ///
    /// Hosts of an imported corpus (recorded pages) are served as the
    /// real page served them, like mahimahi's ReplayShell: each group of
    /// [`Corpus::connection_groups`] at an address of its own with a
    /// certificate of its own, so a browser coalesces only what the
    /// recording did. Generated corpora keep one address and one
    /// certificate for every host.
    pub fn start(
        corpus: &Corpus,
        link: LinkConfig,
        link_options: LinkOptions,
        origin: &OriginSettings,
    ) -> Result<Bed, BedError> {
        Bed::start_inner(corpus, link, link_options, origin, false, None)
    }

    /// As [`Bed::start`], with two more hosts for cross traffic
    /// ([`crate::cross`]): [`XSEND`](crate::cross::XSEND) beside the origin
    /// and [`XRECV`](crate::cross::XRECV) beside the client, each on a
    /// plain veth pair, so their flows cross the same emulated link.
    pub fn start_with_cross_hosts(
        corpus: &Corpus,
        link: LinkConfig,
        link_options: LinkOptions,
        origin: &OriginSettings,
    ) -> Result<Bed, BedError> {
        Bed::start_inner(corpus, link, link_options, origin, true, None)
    }

    /// As [`Bed::start_with_cross_hosts`], with `on_accept` called on every
    /// TCP connection the origin accepts (before any byte): how an
    /// experiment switches the server's congestion control load by load.
    pub fn start_with_cross_hosts_hooked(
        corpus: &Corpus,
        link: LinkConfig,
        link_options: LinkOptions,
        origin: &OriginSettings,
        on_accept: Option<AcceptHook>,
    ) -> Result<Bed, BedError> {
        Bed::start_inner(corpus, link, link_options, origin, true, on_accept)
    }

    fn start_inner(
        corpus: &Corpus,
        link: LinkConfig,
        link_options: LinkOptions,
        origin: &OriginSettings,
        cross_hosts: bool,
        on_accept: Option<AcceptHook>,
    ) -> Result<Bed, BedError> {
        let groups = replay_groups(corpus);
        // The emulated link comes first: a host's primary address is the
        // one on its first link.
        let mut b = Topology::builder().host(CLIENT).host(SERVER).link_with(
            CLIENT,
            SERVER,
            link,
            link_options,
        );
        if cross_hosts {
            b = b
                .host(crate::cross::XSEND)
                .host(crate::cross::XRECV)
                .veth(crate::cross::XSEND, SERVER)
                .veth(CLIENT, crate::cross::XRECV);
        }
        let topo = b.extra_addrs(SERVER, groups.len() as u32).build()?;
        Bed::with_origin(
            topo,
            corpus,
            origin,
            groups,
            on_accept,
            HttpOptions::default(),
        )
    }

    /// Seed 000's three hosts: the client behind the radio link to the
    /// mobile edge ([`EDGE`]), which reaches the origin over a wired link.
    /// The origin is started; the caller runs its edge services in the
    /// [`EDGE`] namespace (see [`Bed::topology`]).
    pub fn start_with_edge(
        corpus: &Corpus,
        radio: LinkConfig,
        radio_options: LinkOptions,
        wired: LinkConfig,
        origin: &OriginSettings,
    ) -> Result<Bed, BedError> {
        let groups = replay_groups(corpus);
        Bed::start_with_edge_grouped(
            corpus,
            radio,
            radio_options,
            wired,
            origin,
            groups,
            HttpOptions::default(),
        )
    }

    /// As [`Bed::start_with_edge`], with the address groups given (each
    /// group of hosts at an address of its own with a certificate of its
    /// own, so a browser cannot coalesce across groups) and the origin's
    /// HTTP settings (its `Cache-Control: max-age`, say): seed 004's
    /// testbed, where each of the page's domains is its own server.
    pub fn start_with_edge_grouped(
        corpus: &Corpus,
        radio: LinkConfig,
        radio_options: LinkOptions,
        wired: LinkConfig,
        origin: &OriginSettings,
        groups: Vec<Vec<String>>,
        http: HttpOptions,
    ) -> Result<Bed, BedError> {
        let topo = Topology::builder()
            .host(CLIENT)
            .host(EDGE)
            .host(SERVER)
            .link_with(CLIENT, EDGE, radio, radio_options)
            .link(EDGE, SERVER, wired)
            .extra_addrs(SERVER, groups.len() as u32)
            .build()?;
        Bed::with_origin(topo, corpus, origin, groups, None, http)
    }

    fn with_origin(
        topo: Topology,
        corpus: &Corpus,
        origin: &OriginSettings,
        groups: Vec<Vec<String>>,
        on_accept: Option<AcceptHook>,
        http: HttpOptions,
    ) -> Result<Bed, BedError> {
        let ip = topo.addr(SERVER)?;
        let mut host_addrs = HashMap::new();
        for (g, addr) in groups.iter().zip(topo.extra_addrs(SERVER)?) {
            for h in g {
                host_addrs.insert(h.clone(), IpAddr::V4(*addr));
            }
        }
        // Off until a load asks for them (a CDN that sends them, or not).
        let hints = mewa_origin::EarlyHintsTable::from_corpus(corpus);
        let any = |port| Some(SocketAddr::from(([0, 0, 0, 0], port)));
        let cfg = OriginConfig {
            plain: any(PORT_PLAIN),
            tls: any(PORT_TLS),
            h3: any(PORT_H3),
            ca_dir: origin.ca_dir.clone(),
            http,
            tcp: TcpOptions {
                congestion: Some(origin.congestion.clone()),
                on_accept,
                ..TcpOptions::default()
            },
            quic_congestion: None,
            cert_groups: groups,
            iw: origin.iw.clone(),
            early_hints: Some(hints.clone()),
        };
        let ca_cert = origin.ca_dir.join(mewa_origin::tls::CA_CERT);
        let early_hints = hints.switch();
        let corpus = corpus.clone();
        let (server, ()) = NsServer::start(
            &topo,
            SERVER,
            2,
            "origin",
            Duration::from_secs(60),
            move |ready, stop| async move {
                let origin = match Origin::bind(&corpus, cfg) {
                    Ok(o) => o,
                    Err(e) => return ready.fail(e),
                };
                ready.ok(());
                let _ = origin.serve(stop.wait()).await;
            },
        )?;
        Ok(Bed {
            topo: Some(topo),
            origin_ip: IpAddr::V4(ip),
            host_addrs,
            ca_cert,
            origin: Some(server),
            early_hints,
        })
    }

    /// Turns the origin's `103 Early Hints` on or off, for the loads that
    /// follow (a CDN that sends them, or not).
    pub fn set_early_hints(&self, on: bool) {
        self.early_hints
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// The origin's address as the client reaches it (across the link).
    pub fn origin_ip(&self) -> IpAddr {
        self.origin_ip
    }

    /// PEM file of the CA that signed the origin's certificate.
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    /// Every address the origin serves on: its own and, for recorded
    /// pages, each connection group's.
    pub fn server_addrs(&self) -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = std::iter::once(self.origin_ip)
            .chain(self.host_addrs.values().copied())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Where the client reaches `host`: its own address for a recorded
    /// page's host, else the origin's address.
    pub fn addr_of(&self, host: &str) -> IpAddr {
        self.host_addrs.get(host).copied().unwrap_or(self.origin_ip)
    }

    /// Whether hosts have addresses of their own (an imported corpus).
    pub fn per_host(&self) -> bool {
        !self.host_addrs.is_empty()
    }

    /// The names the client can resolve: each recorded host to its own
    /// address and nothing else (a replayed page asking for a host its
    /// recording never saw fails at once); for a generated corpus, every
    /// name to the origin.
    pub fn resolver(&self) -> Resolver {
        if self.per_host() {
            Resolver {
                hosts: self.host_addrs.clone(),
                default: None,
            }
        } else {
            Resolver::all_to(self.origin_ip)
        }
    }

    /// Chromium's `--host-resolver-rules` with the same mapping as
    /// [`Bed::resolver`].
    pub fn chromium_resolver_rules(&self) -> String {
        if self.per_host() {
            let mut rules: Vec<String> = self
                .host_addrs
                .iter()
                .map(|(h, a)| format!("MAP {h} {a}"))
                .collect();
            rules.sort();
            rules.push("MAP * ~NOTFOUND".into());
            rules.join(",")
        } else {
            format!("MAP * {}", self.origin_ip)
        }
    }

    /// Chromium's `--host-resolver-rules` for loads of `pages` only: each
    /// of their hosts to where the testbed serves it, and every other name
    /// not found. A browser kept open for a session makes requests of its
    /// own that `--disable-background-networking` does not stop (Chromium
    /// 156: network time from clients2.google.com, component updates,
    /// accounts.google.com, optimization-guide models); under `MAP *` they
    /// reached the origin across the link, woke the radio before a load
    /// and during think time, and opened connections of their own. Failing
    /// their lookups keeps them off the link.
    pub fn chromium_resolver_rules_for(&self, pages: &[Page]) -> String {
        let mut rules: Vec<String> = pages
            .iter()
            .flat_map(|p| p.hosts())
            .map(|h| format!("MAP {h} {}", self.addr_of(h)))
            .collect();
        rules.sort();
        rules.dedup();
        rules.push("MAP * ~NOTFOUND".into());
        rules.join(",")
    }

    /// `opts` with the testbed's names ([`Bed::resolver`]), ports and CA.
    pub fn options(&self, opts: LoadOptions) -> LoadOptions {
        LoadOptions {
            resolver: self.resolver(),
            port_plain: PORT_PLAIN,
            port_tls: PORT_TLS,
            port_h3: PORT_H3,
            ca_cert: Some(self.ca_cert.clone()),
            ..opts
        }
    }

    /// The topology (for link statistics and extra processes).
    pub fn topology(&self) -> Option<&Topology> {
        self.topo.as_ref()
    }

    /// The topology, or an error once the testbed has been shut down or
    /// one of its links has stopped forwarding: what every caller that
    /// starts a process, a server or a load in it needs.
    pub fn running(&self) -> Result<&Topology, BedError> {
        let topo = self
            .topo
            .as_ref()
            .ok_or_else(|| BedError::Runtime("testbed already shut down".into()))?;
        topo.health()?;
        Ok(topo)
    }

    /// Loads `page` from the client's namespace with `opts` (pass them
    /// through [`Bed::options`] to aim at this testbed's origin).
    pub fn load(&self, page: &Page, opts: &LoadOptions) -> Result<LoadRecord, BedError> {
        self.in_client(|| async { load(page, opts).await.map_err(BedError::from) })?
    }

    /// Runs the future `f` makes on a fresh current-thread runtime inside
    /// the client's namespace (a resolver query and then a load, say), so
    /// every socket it opens crosses the link.
    pub fn in_client<F, Fut, R>(&self, f: F) -> Result<R, BedError>
    where
        F: FnOnce() -> Fut + Send,
        Fut: std::future::Future<Output = R>,
        R: Send,
    {
        self.running()?.in_namespace(CLIENT, || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| BedError::Runtime(format!("runtime: {e}")))?;
            Ok(rt.block_on(f()))
        })?
    }

    fn stop_origin(&mut self) {
        if let Some(o) = self.origin.take() {
            o.stop();
        }
    }

    /// Stops the origin and removes the namespaces, reporting a failed
    /// teardown.
    pub fn shutdown(mut self) -> Result<(), BedError> {
        self.stop_origin();
        match self.topo.take() {
            Some(t) => t.shutdown().map_err(BedError::from),
            None => Ok(()),
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.stop_origin();
    }
}

/// A server running on its own tokio runtime on a thread inside a
/// namespace (the origin, the edge, the browser runs' proxy): every socket
/// it opens belongs to that namespace. Stopped and joined by
/// [`NsServer::stop`] or on drop.
#[derive(Debug)]
pub struct NsServer {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// How a server started by [`NsServer::start`] says it is ready (with a
/// value, such as a bound port or a measured RTT) or why it cannot start.
#[derive(Debug)]
pub struct Ready<T>(mpsc::Sender<Result<T, String>>);

impl<T> Ready<T> {
    /// The server is up; `value` goes back to the caller of
    /// [`NsServer::start`].
    pub fn ok(self, value: T) {
        let _ = self.0.send(Ok(value));
    }

    /// The server cannot start: [`NsServer::start`] returns this reason.
    pub fn fail(self, why: impl std::fmt::Display) {
        let _ = self.0.send(Err(why.to_string()));
    }
}

/// Resolves when the server should stop.
#[derive(Debug)]
pub struct Stop(oneshot::Receiver<()>);

impl Stop {
    /// Waits for [`NsServer::stop`] (or the [`NsServer`] being dropped).
    pub async fn wait(self) {
        let _ = self.0.await;
    }
}

impl NsServer {
    /// Runs the future `serve` makes on a fresh runtime (`workers` threads;
    /// 0 for a current-thread runtime) in `host`'s namespace and waits up
    /// to `patience` for it to call [`Ready::ok`], whose value is returned.
    /// `what` names the server in errors.
    pub fn start<T, F, Fut>(
        topo: &Topology,
        host: &str,
        workers: usize,
        what: &'static str,
        patience: Duration,
        serve: F,
    ) -> Result<(NsServer, T), BedError>
    where
        T: Send + 'static,
        F: FnOnce(Ready<T>, Stop) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<T, String>>();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = topo.spawn_in(host, move || {
            let rt = if workers == 0 {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
            } else {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .enable_all()
                    .build()
            };
            match rt {
                Ok(rt) => rt.block_on(serve(Ready(ready_tx), Stop(stop_rx))),
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("runtime: {e}")));
                }
            }
        })?;
        let server = NsServer {
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        let fail = |message: String| BedError::Server { what, message };
        match ready_rx.recv_timeout(patience) {
            Ok(Ok(v)) => Ok((server, v)),
            Ok(Err(e)) => Err(fail(e)),
            Err(_) => Err(fail(format!(
                "did not start within {} s",
                patience.as_secs()
            ))),
        }
    }

    /// Tells the server to stop and waits for its thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for NsServer {
    fn drop(&mut self) {
        self.halt();
    }
}
