//! The local forward proxy a browser uses (`--proxy-server=http://127.0.0.1:PORT`
//! for http:// pages), as seed 000 put an nghttpx proxy in front of Chrome.
//!
//! The browser speaks HTTP/1.1 to the proxy (absolute-form requests), or
//! HTTP/2 over TLS when the proxy serves TLS ([`Proxy::serve_tls`],
//! `--proxy-server=https://…`): seed 000's Chrome spoke HTTP/2 to its local
//! proxy, and over HTTP/1.1 a browser keeps at most six requests per host in
//! flight, which the proxy's connections cannot undo. On
//! the first request for a host — the page's document — the proxy asks the
//! edge for the host's address with the hint request, plans n with
//! [`crate::advice::plan`], and opens n cleartext HTTP/2 connections (h2c,
//! as in seed 000's testbed) to the origin. Every request then goes on the
//! connection the hint's size-balanced assignment chose; objects the hint
//! does not list go to the connection with the fewest requests in flight
//! ([`Dispatch::Push`], seed 000 as written). With [`Dispatch::PullRate`]
//! (as the lab's loader) leaves wait in the proxy and go to the connection
//! that would finish them first at the rate it delivered over the last RTT
//! ([`mewa_model::pull`]); [`Dispatch::Auto`], the default, pushes when
//! the page's objects are prefetched and pulls otherwise. When the hint
//! carries the page's object URLs the proxy requests them all as soon as
//! the document's request is out and answers the browser from those
//! responses ([`ProxyConfig::prefetch`]). A missing, stale or absurd hint
//! means one connection, with the reason logged.
//!
//! Not an open proxy: it serves only clients in `allow_from` (loopback by
//! default), only `http://` absolute-form requests, only to hosts the edge
//! resolves; `CONNECT` and origin-form requests are refused with a status
//! and a message saying why.
//!
//! [`Session`] is the part a program uses without the proxy: resolve with
//! the hint, plan, connect, and send requests on the planned connections.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mewa_model::pull::PULL_FLOOR_BYTES;
use mewa_model::sync::lock;
use tokio::net::{TcpListener, TcpStream};

use crate::advice::{plan, Plan, Radio};
use crate::dispatch::{Credit, Dispatcher};
use crate::resolve::{resolve, Resolved};

/// Bodies the proxy sends back: the origin's streamed, or a short error.
type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// When a request goes to its connection: the lab's and the loader's
/// setting. The proxy has no fixed-budget pull: [`Dispatch::Pull`] runs as
/// [`Dispatch::Push`].
pub use mewa_model::pull::Dispatch;

/// Whether a session with `dispatch` holds leaves for the rate-following
/// rule, when it prefetches the hint's URLs (`prefetching`) or not.
fn pulls(dispatch: Dispatch, prefetching: bool) -> bool {
    dispatch.resolve(prefetching) == Dispatch::PullRate
}

/// How the proxy works.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The edge's DNS server (UDP and TCP).
    pub edge: SocketAddr,
    /// Radio bandwidth the client plans with, bit/s.
    pub radio_bandwidth_bps: f64,
    /// Keep what can reveal other objects (HTML, CSS, scripts) on the
    /// connection that carried the document, whose window has grown; only
    /// the rest follows the size-balanced assignment. The extra connections
    /// are cold when the document's children are requested (docs/LAB.md).
    pub warm_first: bool,
    /// When requests go to their connection.
    pub dispatch: Dispatch,
    /// Follow hints; `false` makes every session one connection (the
    /// plain HTTP/2 baseline through the same proxy).
    pub use_hints: bool,
    /// When the hint carries the page's object URLs, request them from the
    /// origin as soon as the document's request has gone out, and answer
    /// the browser from those responses (seed 000 §II: the client "sends
    /// requests to all embedded URLs on parallel connections"). Objects on
    /// other hosts are fetched once the edge has resolved their host to the
    /// same origin address.
    pub prefetch: bool,
    /// Radio RTT to plan with instead of the DNS exchange's (for a proxy
    /// that is not behind the radio link itself, e.g. on loopback).
    pub radio_rtt: Option<Duration>,
    /// Origin port for h2c.
    pub origin_port: u16,
    /// Browser connections accepted only from these addresses (loopback
    /// when empty).
    pub allow_from: Vec<IpAddr>,
    /// A session (a host's planned connections) is replaced after this long
    /// without requests: the next document load plans again.
    pub session_idle: Duration,
    /// Limit for the edge's answer and for connecting to the origin.
    pub timeout: Duration,
}

impl ProxyConfig {
    /// Defaults for a proxy in front of a browser on this machine.
    pub fn new(edge: SocketAddr, radio_bandwidth_bps: f64) -> ProxyConfig {
        ProxyConfig {
            edge,
            radio_bandwidth_bps,
            radio_rtt: None,
            use_hints: true,
            prefetch: true,
            warm_first: true,
            dispatch: Dispatch::Auto,
            origin_port: 80,
            allow_from: Vec::new(),
            session_idle: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
        }
    }

    fn allowed(&self, peer: IpAddr) -> bool {
        if self.allow_from.is_empty() {
            peer.is_loopback()
        } else {
            self.allow_from.contains(&peer)
        }
    }
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The edge could not be asked, or had no address for the host.
    #[error("resolving {host}: {why}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        why: String,
    },
    /// No connection to the origin could be opened.
    #[error("connecting to {addr}: {why}")]
    Connect {
        /// The origin.
        addr: SocketAddr,
        /// Why.
        why: String,
    },
}

/// One host's planned connections.
#[derive(Debug)]
pub struct Session {
    /// The host.
    pub host: String,
    /// The origin address the edge gave.
    pub addr: SocketAddr,
    /// The plan, or why the client fell back to one connection.
    pub plan: Result<Plan, String>,
    conns: Vec<http2::SendRequest<ProxyBody>>,
    /// Requests sent on each connection whose response head has not come.
    in_flight: Vec<AtomicU64>,
    /// Requests sent on each connection.
    sent: Vec<AtomicU64>,
    /// Listed URL hash → (connection, the hint's size).
    map: HashMap<u32, (usize, u64)>,
    mask: u32,
    last_used: Mutex<Instant>,
    /// Rate-following dispatch's books (rates over one planned RTT), with
    /// more than one connection and [`Dispatch::PullRate`].
    pull: Option<Arc<Dispatcher>>,
    /// Requests that waited in the proxy for a connection.
    held: AtomicU64,
    /// Style sheets and scripts on the first connection
    /// ([`ProxyConfig::warm_first`]), for prefetched ones too.
    warm_first: bool,
    /// What to prefetch once the document's request is out (taken then).
    pending: Mutex<Option<PendingPrefetch>>,
    /// Prefetched objects by URL, until the browser asks for them.
    prefetched: Mutex<HashMap<String, Arc<PrefetchCell>>>,
    /// Body bytes held for the browser now (bounded by
    /// [`MAX_PREFETCH_HELD`]).
    held_bytes: Arc<AtomicU64>,
    /// Objects prefetched.
    prefetch_started: AtomicU64,
    /// Prefetched objects the browser then asked for.
    prefetch_taken: AtomicU64,
}

/// Most body bytes one session keeps of prefetched objects the browser has
/// not asked for yet: a hint is unauthenticated, and a hostile one must not
/// make the proxy buffer a huge page. Objects past it are not kept (the
/// browser's request then goes to the origin as usual).
pub const MAX_PREFETCH_HELD: u64 = 64 << 20;

/// Largest single object the proxy prefetches whole.
pub const MAX_PREFETCH_OBJECT: usize = 16 << 20;

/// The response of a prefetched object, once whole (or why not).
type PrefetchCell = tokio::sync::OnceCell<Result<Arc<Whole>, String>>;

/// A whole response, kept for the browser.
#[derive(Debug)]
struct Whole {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
    /// Counted in the session's held bytes until dropped.
    held: Arc<AtomicU64>,
}

impl Drop for Whole {
    fn drop(&mut self) {
        self.held
            .fetch_sub(self.body.len() as u64, Ordering::Relaxed);
    }
}

/// The URLs to prefetch and how to resolve their hosts.
#[derive(Debug)]
struct PendingPrefetch {
    urls: Vec<String>,
    edge: SocketAddr,
    timeout: Duration,
}

/// A request's connection, chosen by [`Session::place`]. Its bytes count as
/// outstanding there until it is dropped.
pub struct Placement {
    slot: usize,
    /// Its bytes on the books, under [`Dispatch::PullRate`].
    credit: Option<Credit>,
}

impl Placement {
    /// The connection (index into the session's connections).
    pub fn connection(&self) -> usize {
        self.slot
    }
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("connection", &self.slot)
            .field("bytes", &self.credit.as_ref().map_or(0, Credit::left))
            .finish()
    }
}

/// The origin's response body, counted off its connection as it passes.
struct Counted {
    inner: Incoming,
    credit: Option<Credit>,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r {
            if let Some(d) = f.data_ref() {
                let n = d.len() as u64;
                if let Some(c) = &mut self.credit {
                    c.take(n);
                }
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Session {
    /// Asks the edge for `host` and the hint of `page_url`, plans, and opens
    /// the planned number of h2c connections (at least one).
    pub async fn open(
        cfg: &ProxyConfig,
        host: &str,
        page_url: &str,
    ) -> Result<Session, SessionError> {
        let r = lookup(cfg, host, page_url).await?;
        Session::open_resolved(cfg, host, page_url, &r).await
    }

    /// [`Session::open`] with the edge's answer already in hand.
    pub async fn open_resolved(
        cfg: &ProxyConfig,
        host: &str,
        page_url: &str,
        r: &Resolved,
    ) -> Result<Session, SessionError> {
        let ip = r
            .addrs
            .first()
            .copied()
            .ok_or_else(|| SessionError::Resolve {
                host: host.to_string(),
                why: "the edge gave no address".into(),
            })?;
        let addr = SocketAddr::new(ip, cfg.origin_port);
        let plan = match &r.hint {
            _ if !cfg.use_hints => Err("hints disabled".to_string()),
            Ok(h) => plan(
                h,
                page_url,
                Radio {
                    bandwidth_bps: cfg.radio_bandwidth_bps,
                    rtt_s: cfg.radio_rtt.unwrap_or(r.rtt).as_secs_f64(),
                },
                mewa_hint::now_unix_s(),
            )
            .map_err(|f| f.to_string()),
            Err(f) => Err(f.to_string()),
        };
        let n = plan.as_ref().map_or(1, |p| p.n as usize);
        let mut opening = tokio::task::JoinSet::new();
        for _ in 0..n {
            opening.spawn(connect(addr, cfg.timeout));
        }
        let mut conns = Vec::with_capacity(n);
        let mut last_err = None;
        while let Some(c) = opening.join_next().await {
            match c {
                Ok(Ok(c)) => conns.push(c),
                Ok(Err(e)) => last_err = Some(e),
                Err(e) => last_err = Some(format!("connecting task: {e}")),
            }
        }
        if conns.is_empty() {
            return Err(SessionError::Connect {
                addr,
                why: last_err.unwrap_or_else(|| "no connection".into()),
            });
        }
        let (map, mask) = match &plan {
            Ok(p) => {
                // Largest first: on a hash collision the larger object wins.
                let mut m = HashMap::with_capacity(p.assignment.len());
                for (&(h, c), &size) in p.assignment.iter().zip(&p.sizes) {
                    m.entry(h).or_insert((c, size));
                }
                (m, p.hash_mask)
            }
            Err(_) => (HashMap::new(), 0),
        };
        let prefetching = matches!(&plan, Ok(p) if cfg.prefetch && !p.urls.is_empty());
        let pull = match &plan {
            Ok(p) if pulls(cfg.dispatch, prefetching) && conns.len() > 1 => {
                let rtt = Duration::try_from_secs_f64(p.radio_rtt_s + p.wired_rtt_s)
                    .unwrap_or(Duration::from_millis(100))
                    .max(Duration::from_millis(1));
                Some(Arc::new(Dispatcher::new(conns.len(), Some(rtt))))
            }
            _ => None,
        };
        Ok(Session {
            host: host.to_string(),
            addr,
            in_flight: conns.iter().map(|_| AtomicU64::new(0)).collect(),
            sent: conns.iter().map(|_| AtomicU64::new(0)).collect(),
            conns,
            map,
            mask,
            last_used: Mutex::new(Instant::now()),
            pull,
            held: AtomicU64::new(0),
            warm_first: cfg.warm_first,
            pending: Mutex::new(match &plan {
                Ok(p) if prefetching => Some(PendingPrefetch {
                    urls: p.urls.clone(),
                    edge: cfg.edge,
                    timeout: cfg.timeout,
                }),
                _ => None,
            }),
            prefetched: Mutex::new(HashMap::new()),
            held_bytes: Arc::new(AtomicU64::new(0)),
            prefetch_started: AtomicU64::new(0),
            prefetch_taken: AtomicU64::new(0),
            plan,
        })
    }

    /// Objects prefetched so far, and how many of them the browser asked
    /// for ([`ProxyConfig::prefetch`]).
    pub fn prefetch_counts(&self) -> (u64, u64) {
        (
            self.prefetch_started.load(Ordering::Relaxed),
            self.prefetch_taken.load(Ordering::Relaxed),
        )
    }

    /// Starts the prefetch, once: every URL is registered at once (so a
    /// browser request that comes first fetches it, once), those on this
    /// session's host are fetched at once, those on other hosts after the
    /// edge resolves the host to this session's address (otherwise they
    /// are dropped and left to the browser).
    fn kick_prefetch(self: &Arc<Self>) {
        let Some(p) = lock(&self.pending).take() else {
            return;
        };
        let mut by_host: HashMap<String, Vec<(String, Arc<PrefetchCell>)>> = HashMap::new();
        {
            let mut m = lock(&self.prefetched);
            for u in p.urls {
                let host = match http::Uri::try_from(u.as_str()) {
                    Ok(uri) if uri.scheme_str() == Some("http") && uri.port().is_none() => {
                        uri.host().map(str::to_ascii_lowercase)
                    }
                    _ => None,
                };
                let Some(host) = host else { continue };
                if m.contains_key(&u) {
                    continue;
                }
                let c = Arc::new(PrefetchCell::new());
                m.insert(u.clone(), c.clone());
                by_host.entry(host).or_default().push((u, c));
            }
        }
        for (host, cells) in by_host {
            let me = self.clone();
            let (edge, timeout) = (p.edge, p.timeout);
            tokio::spawn(async move {
                if host != me.host {
                    let page = format!("http://{host}/");
                    let same = matches!(
                        resolve(edge, &host, &page, timeout).await,
                        Ok(r) if r.addrs.first() == Some(&me.addr.ip())
                    );
                    if !same {
                        let mut m = lock(&me.prefetched);
                        for (u, _) in &cells {
                            m.remove(u);
                        }
                        return;
                    }
                }
                for (url, cell) in cells {
                    me.prefetch_started.fetch_add(1, Ordering::Relaxed);
                    let me = me.clone();
                    tokio::spawn(async move {
                        let _ = cell.get_or_init(|| me.fetch_whole(url)).await;
                    });
                }
            });
        }
    }

    /// Fetches `url` whole, placed as a browser request for it would be.
    async fn fetch_whole(self: &Arc<Self>, url: String) -> Result<Arc<Whole>, String> {
        let uri = http::Uri::try_from(url.as_str()).map_err(|e| e.to_string())?;
        let reveals = path_reveals(uri.path());
        let req = Request::get(uri)
            .header(http::header::ACCEPT, "*/*")
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .map_err(|e| e.to_string())?;
        let resp = self
            .forward(&url, self.warm_first && reveals, !reveals, req)
            .await?;
        let (parts, body) = resp.into_parts();
        let body = Limited::new(body, MAX_PREFETCH_OBJECT)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let n = body.len() as u64;
        if self.held_bytes.fetch_add(n, Ordering::Relaxed) + n > MAX_PREFETCH_HELD {
            self.held_bytes.fetch_sub(n, Ordering::Relaxed);
            return Err("prefetch budget spent".into());
        }
        Ok(Arc::new(Whole {
            status: parts.status,
            headers: parts.headers,
            body,
            held: self.held_bytes.clone(),
        }))
    }

    /// The prefetched response of `url`, waiting for it if it is still on
    /// its way; `None` when it was not prefetched or failed (the caller
    /// then forwards the browser's request).
    async fn take_prefetched(self: &Arc<Self>, url: &str) -> Option<Arc<Whole>> {
        let cell = lock(&self.prefetched).remove(url)?;
        let r = cell.get_or_init(|| self.fetch_whole(url.to_string())).await;
        match r {
            Ok(w) => {
                self.prefetch_taken.fetch_add(1, Ordering::Relaxed);
                Some(w.clone())
            }
            Err(_) => None,
        }
    }

    /// Requests sent on each connection so far.
    pub fn requests_per_connection(&self) -> Vec<u64> {
        self.sent
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect()
    }

    /// Requests that waited in the proxy for a connection
    /// ([`Dispatch::PullRate`]).
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Bytes asked of each connection and not yet passed on
    /// ([`Dispatch::PullRate`]; empty otherwise). All zero once every
    /// response has ended or been dropped.
    pub fn outstanding(&self) -> Vec<u64> {
        self.pull
            .as_ref()
            .map(|p| p.outstanding())
            .unwrap_or_default()
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The connection for `url`: `on_first` (the document, and with
    /// warm-first what can reveal others) on the first,
    /// a listed object where the plan put it, the rest on the least loaded.
    pub fn pick(&self, url: &str, on_first: bool) -> usize {
        let n = self.conns.len().max(1);
        if on_first {
            return 0;
        }
        if let Some((c, _)) = self.listed(url) {
            return c % n;
        }
        self.in_flight
            .iter()
            .enumerate()
            .min_by_key(|&(i, b)| (b.load(Ordering::Relaxed), i))
            .map_or(0, |(i, _)| i)
    }

    /// The hint's (connection, size) of `url`, when it lists it.
    fn listed(&self, url: &str) -> Option<(usize, u64)> {
        if self.map.is_empty() {
            return None;
        }
        let h = mewa_hint::wire::url_hash(url) & self.mask;
        self.map.get(&h).copied()
    }

    /// Places a request for `url` on a connection and counts the hint's
    /// size of it outstanding there until the returned [`Placement`] (or
    /// the response body it becomes) is dropped. `on_first`: the document
    /// (and with warm-first what can reveal others) goes on the first
    /// connection. `held`: a leaf, which under [`Dispatch::PullRate`] waits
    /// until [`earliest_completion`] gives it a connection; everything else
    /// goes where [`Session::pick`] says at once.
    pub async fn place(&self, url: &str, on_first: bool, held: bool) -> Placement {
        let Some(p) = &self.pull else {
            return Placement {
                slot: self.pick(url, on_first),
                credit: None,
            };
        };
        let size = self.listed(url).map_or(0, |(_, s)| s);
        let slot = if !held || on_first {
            p.place_now(size, |_| self.pick(url, on_first))
        } else {
            p.place_when(
                size,
                |books, now| books.earliest(size, PULL_FLOOR_BYTES, now),
                || {
                    self.held.fetch_add(1, Ordering::Relaxed);
                },
            )
            .await
        };
        Placement {
            slot,
            credit: Some(p.credit(slot, size)),
        }
    }

    /// Places `req` ([`Session::place`]), sends it, and returns the
    /// response with its body counted off the connection as it passes.
    pub async fn forward(
        self: &Arc<Self>,
        url: &str,
        on_first: bool,
        held: bool,
        req: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, String> {
        let Placement { slot, mut credit } = self.place(url, on_first, held).await;
        // The session's first request is its document: the prefetch
        // starts once that is on its way, so the document goes first.
        let resp = self.send_then(slot, req, || self.kick_prefetch()).await?;
        let len = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let (Some(len), Some(c)) = (len, &mut credit) {
            c.resize(len);
        }
        let (parts, body) = resp.into_parts();
        Ok(Response::from_parts(
            parts,
            Counted {
                inner: body,
                credit,
            }
            .boxed(),
        ))
    }

    /// Sends `req` (absolute URI: HTTP/2 takes the authority from it) on
    /// connection `i`. The connection counts the request as outstanding
    /// until its response head arrives: what "least loaded" compares for
    /// objects the hint does not list.
    pub async fn send(
        &self,
        i: usize,
        req: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, String> {
        self.send_then(i, req, || {}).await
    }

    /// [`Session::send`], calling `sent` once the request has been handed
    /// to the connection (before its response comes).
    async fn send_then(
        &self,
        i: usize,
        req: Request<ProxyBody>,
        sent: impl FnOnce(),
    ) -> Result<Response<Incoming>, String> {
        if let Ok(mut t) = self.last_used.lock() {
            *t = Instant::now();
        }
        let Some(conn) = self.conns.get(i) else {
            return Err(format!("no connection {i}"));
        };
        let mut conn = conn.clone();
        if let Some(o) = self.in_flight.get(i) {
            o.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(o) = self.sent.get(i) {
            o.fetch_add(1, Ordering::Relaxed);
        }
        let r = async {
            conn.ready().await.map_err(|e| e.to_string())?;
            let response = conn.send_request(req);
            sent();
            response.await.map_err(|e| e.to_string())
        }
        .await;
        if let Some(o) = self.in_flight.get(i) {
            o.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    fn idle_for(&self) -> Duration {
        self.last_used.lock().map_or(Duration::MAX, |t| t.elapsed())
    }

    fn is_closed(&self) -> bool {
        self.conns.iter().all(|c| c.is_closed())
    }
}

/// The edge's answer for `host` with the hint request for `page_url`.
async fn lookup(cfg: &ProxyConfig, host: &str, page_url: &str) -> Result<Resolved, SessionError> {
    resolve(cfg.edge, host, page_url, cfg.timeout)
        .await
        .map_err(|e| SessionError::Resolve {
            host: host.to_string(),
            why: e.to_string(),
        })
}

async fn connect(
    addr: SocketAddr,
    timeout: Duration,
) -> Result<http2::SendRequest<ProxyBody>, String> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let (send, conn) = http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(8 << 20)
        .initial_connection_window_size(16 << 20)
        .handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

/// Counters of a running proxy.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Requests forwarded.
    pub forwarded: AtomicU64,
    /// Requests refused (CONNECT, origin-form, other schemes, clients not
    /// allowed).
    pub refused: AtomicU64,
    /// Sessions opened.
    pub sessions: AtomicU64,
    /// Sessions that fell back to one connection.
    pub fallbacks: AtomicU64,
    /// Requests that failed upstream (502).
    pub upstream_errors: AtomicU64,
    /// Browser connections served over HTTP/2 (TLS with ALPN `h2`).
    pub browser_h2: AtomicU64,
    /// Browser connections served over HTTP/1.1.
    pub browser_h1: AtomicU64,
    /// Browser requests answered from a prefetched response.
    pub prefetch_hits: AtomicU64,
}

/// The proxy.
#[derive(Debug)]
pub struct Proxy {
    cfg: ProxyConfig,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
    /// Counters.
    pub stats: ProxyStats,
}

/// Headers that belong to one hop only (RFC 9110 §7.6.1) plus the proxy's
/// own; never forwarded.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Whether a request is for something that can reveal other objects: the
/// browser asks for style sheets and documents with their types first in
/// `Accept`; scripts are asked for with `*/*`, so their path decides.
fn reveals<B>(req: &Request<B>, path: &str) -> bool {
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept.starts_with("text/html") || accept.starts_with("text/css") || path_reveals(path)
}

/// Whether a path names a style sheet or a script (by its extension).
fn path_reveals(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.ends_with(".css") || p.ends_with(".js") || p.ends_with(".mjs")
}

fn error(status: StatusCode, why: &str) -> Response<ProxyBody> {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("mewa proxy: {why}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

impl Proxy {
    /// A proxy with `cfg`.
    pub fn new(cfg: ProxyConfig) -> Arc<Proxy> {
        Arc::new(Proxy {
            cfg,
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            stats: ProxyStats::default(),
        })
    }

    /// The current session of `host`, if any (for logs and tests).
    pub async fn session_of(&self, host: &str) -> Option<Arc<Session>> {
        self.sessions.lock().await.get(host).cloned()
    }

    /// Serves browser connections from `listener` (cleartext HTTP/1.1)
    /// until the task is dropped.
    pub async fn serve(self: Arc<Proxy>, listener: TcpListener) {
        self.accept(listener, None).await;
    }

    /// Serves browser connections from `listener` over TLS with `tls`,
    /// HTTP/2 when the browser offers `h2` by ALPN (put it in
    /// `tls.alpn_protocols`), else HTTP/1.1, until the task is dropped.
    pub async fn serve_tls(
        self: Arc<Proxy>,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
    ) {
        self.accept(listener, Some(tokio_rustls::TlsAcceptor::from(tls)))
            .await;
    }

    async fn accept(
        self: Arc<Proxy>,
        listener: TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) {
        loop {
            let Ok((tcp, peer)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            if !self.cfg.allowed(peer.ip()) {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                drop(tcp);
                continue;
            }
            let _ = tcp.set_nodelay(true);
            let me = self.clone();
            let me2 = self.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let me = me.clone();
                    async move { Ok::<_, std::convert::Infallible>(me.handle(req).await) }
                });
                let Some(acc) = tls else {
                    me2.stats.browser_h1.fetch_add(1, Ordering::Relaxed);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                    return;
                };
                // A client that never finishes its handshake must not hold
                // the task forever.
                let Ok(Ok(s)) =
                    tokio::time::timeout(Duration::from_secs(10), acc.accept(tcp)).await
                else {
                    return;
                };
                if s.get_ref().1.alpn_protocol() == Some(b"h2") {
                    me2.stats.browser_h2.fetch_add(1, Ordering::Relaxed);
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .initial_stream_window_size(8 << 20)
                        .initial_connection_window_size(16 << 20)
                        .max_concurrent_streams(256)
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                } else {
                    me2.stats.browser_h1.fetch_add(1, Ordering::Relaxed);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                }
            });
        }
    }

    /// The session for `host`. A document request opens a new one planned
    /// from its URL's hint unless the host has a fresh one; a sub-resource
    /// on another host that resolves to the address of a fresh session
    /// shares it (as Chrome coalesces HTTP/2 connections), else gets a
    /// session of its own.
    async fn session(
        &self,
        host: &str,
        url: &str,
        is_document: bool,
    ) -> Result<Arc<Session>, SessionError> {
        // Held across the lookups: concurrent first requests for a host
        // wait for one session instead of each planning their own.
        let mut map = self.sessions.lock().await;
        let fresh = |s: &Session| s.idle_for() < self.cfg.session_idle && !s.is_closed();
        if let Some(s) = map.get(host) {
            if fresh(s) {
                return Ok(s.clone());
            }
        }
        let r = lookup(&self.cfg, host, url).await?;
        if !is_document {
            let same = r.addrs.first().and_then(|ip| {
                map.values()
                    .find(|s| s.addr.ip() == *ip && fresh(s))
                    .cloned()
            });
            if let Some(s) = same {
                map.insert(host.to_string(), s.clone());
                return Ok(s);
            }
        }
        let s = Arc::new(Session::open_resolved(&self.cfg, host, url, &r).await?);
        self.stats.sessions.fetch_add(1, Ordering::Relaxed);
        match &s.plan {
            Ok(p) => eprintln!(
                "proxy: {url}: n = {} (page {} B, radio RTT {:.1} ms, wired {:.1} ms, {:.1} Mbit/s), {}",
                p.n,
                p.page_bytes,
                p.radio_rtt_s * 1e3,
                p.wired_rtt_s * 1e3,
                p.bandwidth_bps / 1e6,
                if s.pull.is_some() { "pull-rate dispatch" } else { "push dispatch" }
            ),
            Err(why) => {
                self.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
                eprintln!("proxy: {url}: one connection ({why})");
            }
        }
        map.insert(host.to_string(), s.clone());
        Ok(s)
    }

    /// Handles one browser request.
    pub async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        let refuse = |status, why: &str| {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            error(status, why)
        };
        if req.method() == http::Method::CONNECT {
            return refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "CONNECT is not supported: this proxy carries http:// pages only",
            );
        }
        let uri = req.uri().clone();
        if uri.scheme_str() != Some("http") {
            return refuse(
                StatusCode::BAD_REQUEST,
                "expected an absolute http:// URL (use me as an HTTP proxy)",
            );
        }
        let Some(host) = uri.host().map(str::to_ascii_lowercase) else {
            return refuse(StatusCode::BAD_REQUEST, "the URL has no host");
        };
        if uri.port_u16().is_some_and(|p| p != self.cfg.origin_port) {
            return refuse(
                StatusCode::FORBIDDEN,
                "only the origin port the proxy was configured for",
            );
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let url = format!("http://{host}{path}");
        let is_document = req
            .headers()
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.starts_with("text/html"));
        let session = match self.session(&host, &url, is_document).await {
            Ok(s) => s,
            Err(e) => {
                self.stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
                return error(StatusCode::BAD_GATEWAY, &e.to_string());
            }
        };
        if !is_document && req.method() == http::Method::GET {
            if let Some(w) = session.take_prefetched(&url).await {
                self.stats.forwarded.fetch_add(1, Ordering::Relaxed);
                self.stats.prefetch_hits.fetch_add(1, Ordering::Relaxed);
                let mut resp = Response::new(
                    Full::new(w.body.clone())
                        .map_err(|never| match never {})
                        .boxed(),
                );
                *resp.status_mut() = w.status;
                for (k, v) in &w.headers {
                    if !HOP_BY_HOP.contains(&k.as_str()) {
                        resp.headers_mut().append(k, v.clone());
                    }
                }
                return resp;
            }
        }
        let reveals = reveals(&req, uri.path());
        let on_first = is_document || (self.cfg.warm_first && reveals);
        let held = !is_document && !reveals;
        let (parts, body) = req.into_parts();
        let mut up = Request::builder().method(parts.method).uri(path.as_str());
        for (k, v) in &parts.headers {
            if !HOP_BY_HOP.contains(&k.as_str()) && k != http::header::HOST {
                up = up.header(k, v);
            }
        }
        let up = match up.body(body.boxed()) {
            Ok(r) => r,
            Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        // HTTP/2 takes the authority from the URI.
        let (mut p, b) = up.into_parts();
        p.uri = match http::Uri::builder()
            .scheme("http")
            .authority(host.as_str())
            .path_and_query(path.as_str())
            .build()
        {
            Ok(u) => u,
            Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        match session
            .forward(&url, on_first, held, Request::from_parts(p, b))
            .await
        {
            Ok(mut resp) => {
                self.stats.forwarded.fetch_add(1, Ordering::Relaxed);
                for h in HOP_BY_HOP {
                    resp.headers_mut().remove(h);
                }
                resp
            }
            Err(e) => {
                self.stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
                error(StatusCode::BAD_GATEWAY, &format!("{url}: {e}"))
            }
        }
    }
}
