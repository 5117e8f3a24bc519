//! [`Origin`]: binds the listeners and serves a corpus until told to stop.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use mewa_corpus::{Corpus, Scheme};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::early_hints::EarlyHintsTable;
use crate::headguard::HeadGuard;
use crate::iw::{with_grant, ConnWindow, IwPolicy, Window};
use crate::respond::{respond, think_time, HttpOptions};
use crate::store::{Store, StoreError};
use crate::tcp::{bind_tcp, AcceptHook, TcpError, TcpOptions};
use crate::tls::{Ca, Certs, TlsError};

/// The factory [`OriginConfig::quic_congestion`] takes, named here too: it
/// lives with the QUIC controllers that make it.
pub use crate::quic_cc::QuicCongestion;

/// Largest request body read (and discarded): only GET and HEAD are served.
const MAX_REQUEST_BODY: usize = 64 * 1024;

/// What to serve and where.
#[derive(Clone)]
pub struct OriginConfig {
    /// Cleartext listener: HTTP/1.1 and h2c by prior knowledge.
    pub plain: Option<SocketAddr>,
    /// TLS listener: HTTP/1.1 or HTTP/2 by ALPN.
    pub tls: Option<SocketAddr>,
    /// QUIC listener (UDP): HTTP/3.
    pub h3: Option<SocketAddr>,
    /// Directory of the local test CA (created if missing); used only when
    /// `tls` or `h3` is set.
    pub ca_dir: PathBuf,
    /// Per-response behaviour and request limits.
    pub http: HttpOptions,
    /// TCP congestion control, buffers and accept hook of both TCP listeners.
    pub tcp: TcpOptions,
    /// The QUIC congestion controller; `None` keeps quinn's default (Cubic).
    pub quic_congestion: Option<QuicCongestion>,
    /// Groups of hosts that each get their own certificate (chosen by SNI),
    /// so a browser coalesces connections only within a group; empty: one
    /// certificate names every host. The lab gives each group of a recorded
    /// page its own address and certificate ([`mewa_corpus::Corpus::connection_groups`]).
    pub cert_groups: Vec<Vec<String>>,
    /// Grant the initial window clients ask for (`mewa-iw`, seed 001);
    /// `None` ignores the header. Over TCP this needs mewa's BPF controls
    /// registered (`mewa cc load`) and the privileges to reach their map.
    pub iw: Option<IwPolicy>,
    /// `103 Early Hints` for the documents of the table
    /// ([`EarlyHintsTable::from_corpus`]), sent over HTTP/2 only (not over
    /// HTTP/1.1 or HTTP/3: [`crate::early_hints`] says why) while the
    /// table's switch is on. The table starts off; the caller keeps a clone
    /// and turns it on and off between loads
    /// ([`EarlyHintsTable::set_enabled`]), without restarting the origin.
    /// `None`: never sent.
    pub early_hints: Option<EarlyHintsTable>,
}

impl std::fmt::Debug for OriginConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginConfig")
            .field("plain", &self.plain)
            .field("tls", &self.tls)
            .field("h3", &self.h3)
            .field("ca_dir", &self.ca_dir)
            .field("http", &self.http)
            .field("tcp", &self.tcp)
            .field(
                "quic_congestion",
                &self.quic_congestion.as_ref().map(|_| "ControllerFactory"),
            )
            .field("iw", &self.iw)
            .field(
                "early_hints",
                &self.early_hints.as_ref().map(|t| (t.len(), t.is_enabled())),
            )
            .finish()
    }
}

/// Why the origin could not start.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// The corpus could not be turned into bodies.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A TCP listener could not be set up.
    #[error(transparent)]
    Tcp(#[from] TcpError),
    /// Certificates could not be made or loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The QUIC endpoint could not bind its UDP socket (address in use?).
    #[error("QUIC endpoint on {addr}: {error}")]
    Quic {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// The tokio runtime or the Ctrl-C handler could not be set up
    /// ([`run_until_ctrl_c`]).
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
    /// Initial windows over TCP need mewa's BPF controls.
    #[error("granting initial windows over TCP (--iw-max): {0}")]
    Iw(mewa_cc_bpf::CcError),
    /// No listener address was given; set at least one of plain, tls, h3.
    #[error("no listener: give at least one of the plain, TLS and HTTP/3 addresses")]
    NoListener,
}

/// What every connection task shares.
struct Ctx {
    store: Arc<Store>,
    http: HttpOptions,
    hook: Option<AcceptHook>,
    /// HTTP/1.1 (hyper).
    h1: http1::Builder,
    /// HTTP/2 (ours, [`crate::h2`]).
    h2: crate::h2::Config,
    /// The initial-window policy and, for TCP, the BPF storage.
    iw: Option<(Arc<IwPolicy>, Option<Arc<mewa_cc_bpf::IwStore>>)>,
    /// Early hints for HTTP/2 ([`OriginConfig::early_hints`]).
    early_hints: Option<EarlyHintsTable>,
}

/// A bound origin; [`Origin::serve`] runs it.
pub struct Origin {
    ctx: Arc<Ctx>,
    plain: Option<TcpListener>,
    tls: Option<(TcpListener, TlsAcceptor)>,
    h3: Option<quinn::Endpoint>,
    /// What each QUIC connection needs for its own controller when initial
    /// windows are granted.
    quic_iw: Option<crate::h3srv::QuicIw>,
    certs: Option<Certs>,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("plain", &self.plain_addr())
            .field("tls", &self.tls_addr())
            .field("h3", &self.h3_addr())
            .finish()
    }
}

impl Origin {
    /// Generates the bodies, makes the certificates and binds every listener
    /// asked for (port 0 picks a free one; see the `*_addr` methods). Must be
    /// called inside a tokio runtime.
    pub fn bind(corpus: &Corpus, config: OriginConfig) -> Result<Origin, OriginError> {
        if config.plain.is_none() && config.tls.is_none() && config.h3.is_none() {
            return Err(OriginError::NoListener);
        }
        let store = Arc::new(Store::new(corpus)?);
        let iw = match &config.iw {
            None => None,
            Some(p) => {
                let tcp = config.plain.is_some() || config.tls.is_some();
                let bpf = if tcp {
                    Some(Arc::new(
                        mewa_cc_bpf::IwStore::open().map_err(OriginError::Iw)?,
                    ))
                } else {
                    None
                };
                Some((Arc::new(p.clone()), bpf))
            }
        };
        let certs = if config.tls.is_some() || config.h3.is_some() {
            let ca = Ca::load_or_create(&config.ca_dir)?;
            Some(ca.issue_grouped(&store.hosts(), &config.cert_groups)?)
        } else {
            None
        };
        let tcp = |addr| -> Result<TcpListener, OriginError> {
            let l = bind_tcp(addr, &config.tcp)?;
            TcpListener::from_std(l).map_err(|source| {
                OriginError::Tcp(TcpError::Io {
                    what: "register with tokio",
                    addr,
                    error: source,
                })
            })
        };
        let plain = config.plain.map(tcp).transpose()?;
        let tls = match (config.tls, &certs) {
            (Some(addr), Some(c)) => {
                Some((tcp(addr)?, TlsAcceptor::from(Arc::new(c.tcp_config()?))))
            }
            _ => None,
        };
        let mut quic_iw = None;
        let h3 = match (config.h3, &certs) {
            (Some(addr), Some(c)) => {
                let mut sc = quinn::ServerConfig::with_crypto(Arc::new(c.quic_config()?));
                let mut tc = quinn::TransportConfig::default();
                if let Some(f) = &config.quic_congestion {
                    tc.congestion_controller_factory(f.clone());
                }
                sc.transport_config(Arc::new(tc));
                if let Some((policy, _)) = &iw {
                    quic_iw = Some(crate::h3srv::QuicIw {
                        base: sc.clone(),
                        inner: config
                            .quic_congestion
                            .clone()
                            .unwrap_or_else(|| Arc::new(quinn::congestion::CubicConfig::default())),
                        policy: policy.clone(),
                    });
                }
                Some(
                    quinn::Endpoint::server(sc, addr)
                        .map_err(|error| OriginError::Quic { addr, error })?,
                )
            }
            _ => None,
        };
        let mut h1 = http1::Builder::new();
        h1.timer(TokioTimer::new())
            // hyper's one timer runs from the end of the previous response:
            // it is the keep-alive limit, and the HeadGuard around each
            // connection's stream keeps a started request to the header
            // limit (crate::headguard).
            .header_read_timeout(
                config
                    .http
                    .keep_alive_timeout
                    .max(config.http.header_read_timeout),
            )
            // hyper's floor is 8 KiB; a head above the limit gets 431.
            .max_buf_size(config.http.max_header_bytes.max(8192));
        let h2 = crate::h2::Config {
            max_header_list_size: u32::try_from(config.http.max_header_bytes).unwrap_or(u32::MAX),
            max_request_body: MAX_REQUEST_BODY as u64,
            // Nothing has been asked yet: an idle wait, as between requests.
            preface_timeout: config.http.keep_alive_timeout,
            idle_timeout: config.http.h2_idle_timeout,
            write_timeout: config.http.h2_write_timeout,
            header_block_timeout: config.http.h2_header_block_timeout,
            max_peer_resets: config.http.h2_max_peer_resets,
            max_control_frames: config.http.h2_max_control_frames,
            ..crate::h2::Config::default()
        };
        Ok(Origin {
            ctx: Arc::new(Ctx {
                store,
                http: config.http,
                hook: config.tcp.on_accept,
                h1,
                h2,
                iw,
                early_hints: config.early_hints,
            }),
            plain,
            tls,
            h3,
            quic_iw,
            certs,
        })
    }

    /// Where the cleartext listener listens.
    pub fn plain_addr(&self) -> Option<SocketAddr> {
        self.plain.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Where the TLS listener listens.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// Where the QUIC endpoint listens.
    pub fn h3_addr(&self) -> Option<SocketAddr> {
        self.h3.as_ref().and_then(|e| e.local_addr().ok())
    }

    /// The certificates (when a TLS or QUIC listener is bound).
    pub fn certs(&self) -> Option<&Certs> {
        self.certs.as_ref()
    }

    /// The objects served.
    pub fn store(&self) -> &Store {
        &self.ctx.store
    }

    /// Serves until `shutdown` completes; then stops accepting and drops every
    /// open connection.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), OriginError> {
        let mut loops = JoinSet::new();
        if let Some(l) = self.plain {
            loops.spawn(accept_tcp(l, None, self.ctx.clone()));
        }
        if let Some((l, acc)) = self.tls {
            loops.spawn(accept_tcp(l, Some(acc), self.ctx.clone()));
        }
        let endpoint = self.h3.clone();
        if let Some(e) = self.h3 {
            loops.spawn(crate::h3srv::accept_quic(
                e,
                self.ctx.store.clone(),
                self.ctx.http.clone(),
                self.quic_iw,
            ));
        }
        shutdown.await;
        if let Some(e) = endpoint {
            e.close(0u32.into(), b"shutdown");
        }
        loops.shutdown().await;
        Ok(())
    }
}

/// [`Origin::bind`] then [`Origin::serve`].
pub async fn serve(
    corpus: &Corpus,
    config: OriginConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), OriginError> {
    Origin::bind(corpus, config)?.serve(shutdown).await
}

/// For a command line: builds a multi-threaded tokio runtime, binds, calls
/// `ready` (to print addresses and certificates), and serves until Ctrl-C
/// (SIGINT).
pub fn run_until_ctrl_c(
    corpus: &Corpus,
    config: OriginConfig,
    ready: impl FnOnce(&Origin),
) -> Result<(), OriginError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(OriginError::Runtime)?;
    rt.block_on(async {
        let origin = Origin::bind(corpus, config)?;
        ready(&origin);
        let mut failed = None;
        origin
            .serve(async {
                if let Err(e) = tokio::signal::ctrl_c().await {
                    failed = Some(e);
                }
            })
            .await?;
        failed.map_or(Ok(()), |e| Err(OriginError::Runtime(e)))
    })
}

/// Accepts TCP connections; each runs in a task owned by this loop, so that
/// stopping the loop closes them.
async fn accept_tcp(listener: TcpListener, tls: Option<TlsAcceptor>, ctx: Arc<Ctx>) {
    let mut conns = JoinSet::new();
    let per_source: Counts = Arc::default();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, from)) => {
                    // Over a cap the connection is closed at once.
                    let Some(slot) = SourceSlot::take(
                        &per_source,
                        from.ip(),
                        ctx.http.max_connections_per_source,
                    ) else {
                        continue;
                    };
                    if conns.len() >= ctx.http.max_connections {
                        continue;
                    }
                    if let Some(hook) = &ctx.hook {
                        hook(&stream);
                    }
                    // Objects are written whole; Nagle would only delay the
                    // last segment of each response.
                    let _ = stream.set_nodelay(true);
                    let window = match &ctx.iw {
                        Some((policy, Some(store))) => {
                            ConnWindow::tcp(&stream, store.clone(), policy.clone()).ok().map(Arc::new)
                        }
                        _ => None,
                    };
                    let (tls, ctx) = (tls.clone(), ctx.clone());
                    conns.spawn(async move {
                        serve_tcp(stream, tls, ctx, window).await;
                        drop(slot);
                    });
                }
                // Out of file descriptors and the like: back off, keep serving.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Open connections per source address.
type Counts = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// One connection's place in its source address's count; given back when
/// dropped.
struct SourceSlot {
    counts: Counts,
    ip: std::net::IpAddr,
}

impl SourceSlot {
    /// A place for `ip` if it has fewer than `max` connections.
    fn take(counts: &Counts, ip: std::net::IpAddr, max: usize) -> Option<SourceSlot> {
        let mut m = counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut m = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

async fn serve_tcp(stream: TcpStream, tls: Option<TlsAcceptor>, ctx: Arc<Ctx>, window: Window) {
    let limit = ctx.http.header_read_timeout;
    let idle = ctx.http.keep_alive_timeout;
    match tls {
        None => match tokio::time::timeout(idle, starts_with_h2_preface(&stream)).await {
            Ok(Some(true)) => serve_h2(stream, Scheme::Http, &ctx, window).await,
            Ok(Some(false)) => {
                serve_h1(HeadGuard::new(stream, limit), Scheme::Http, ctx, window).await
            }
            // Closed or silent: nothing to serve.
            Ok(None) | Err(_) => {}
        },
        Some(acc) => {
            let Ok(Ok(s)) = tokio::time::timeout(limit, acc.accept(stream)).await else {
                return;
            };
            if s.get_ref().1.alpn_protocol() == Some(b"h2") {
                serve_h2(s, Scheme::Https, &ctx, window).await;
            } else {
                serve_h1(HeadGuard::new(s, limit), Scheme::Https, ctx, window).await;
            }
        }
    }
}

/// Whether a cleartext connection speaks h2c by prior knowledge: its first
/// bytes are the HTTP/2 preface (`PRI * HTTP/2.0`), which no HTTP/1.1
/// request starts with. Waits (peeking) until the bytes decide; `None` if
/// the peer closes first.
async fn starts_with_h2_preface(stream: &TcpStream) -> Option<bool> {
    let preface = crate::h2::frame::PREFACE;
    let mut buf = [0u8; 4];
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        if buf[..n] != preface[..n] {
            return Some(false);
        }
        if n == buf.len() {
            return Some(true);
        }
        // A prefix of "PRI " so far: wait for more.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn serve_h2<I>(io: I, scheme: Scheme, ctx: &Ctx, window: Window)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    crate::h2::serve_connection_with_hints(
        io,
        ctx.h2.clone(),
        |req| think_time(&ctx.store, req, &ctx.http),
        // Asked when the request is decoded: the 103 goes before the think
        // time.
        |req| {
            ctx.early_hints
                .as_ref()
                .and_then(|t| t.for_request(req, scheme))
        },
        // Called when the answer is due, before any of its bytes.
        |req| with_grant(&window, req, respond(&ctx.store, scheme, req, &ctx.http)),
    )
    .await;
}

async fn serve_h1<S>(io: HeadGuard<S>, scheme: Scheme, ctx: Arc<Ctx>, window: Window)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let c = ctx.clone();
    let received = io.received();
    let svc = service_fn(move |req: hyper::Request<Incoming>| {
        let c = c.clone();
        let window = window.clone();
        let received = received.clone();
        async move {
            // Requests with a body are read (up to a limit) before answering,
            // so that a broken body ends the request instead of being
            // answered.
            let (parts, body) = req.into_parts();
            if !body.is_end_stream() {
                match Limited::new(body, MAX_REQUEST_BODY).collect().await {
                    Ok(_) => {}
                    Err(_) => {
                        let mut r = hyper::Response::new(Full::new(Bytes::from_static(
                            b"413 Content Too Large: request bodies are not served\n",
                        )));
                        *r.status_mut() = http::StatusCode::PAYLOAD_TOO_LARGE;
                        return Ok(r);
                    }
                }
            }
            // Whole: the request timeout stops here, before any think time.
            received.mark();
            let req = hyper::Request::from_parts(parts, ());
            let wait = think_time(&c.store, &req, &c.http);
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let r = with_grant(&window, &req, respond(&c.store, scheme, &req, &c.http));
            Ok::<_, Infallible>(r.map(Full::new))
        }
    });
    // Malformed requests end just this connection; hyper has already
    // answered 400/431 where HTTP/1.1 allows it.
    let _ = ctx.h1.serve_connection(TokioIo::new(io), svc).await;
}
