//! The client side of the proxy: a [`Session`] per page host resolves the
//! host with the hint request, plans n, opens the n h2c connections,
//! prefetches the hint's URLs and places every request (push or
//! rate-following pull). Programs use it without the proxy's front end.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mewa_model::pull::PULL_FLOOR_BYTES;
use mewa_model::sync::lock;
use tokio::net::TcpStream;

use crate::advice::{plan, Fallback, Plan, Radio};
use crate::dispatch::{Credit, Dispatcher};
use crate::resolve::{fetch_url_list, resolve, Resolved};

use super::{path_reveals, pulls, ProxyBody, ProxyConfig};

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
    /// The page the session was planned for.
    pub page_url: String,
    /// `http` (h2c to the origin) or `https` (HTTP/2 over TLS).
    pub scheme: &'static str,
    /// The origin address the edge gave.
    pub addr: SocketAddr,
    /// The plan, or why the client fell back to one connection.
    pub plan: Result<Plan, Fallback>,
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
    /// When the connections and the URL list were ready.
    timeline: Mutex<Timeline>,
    /// Opens (or finds) the session of another host, for prefetching the
    /// hint's objects there (set by the proxy).
    opener: Mutex<Option<Arc<Opener>>>,
}

/// Opens or finds the session of `(scheme, host)`: what a session asks the
/// proxy for to prefetch objects on hosts at other addresses.
pub(super) struct Opener(pub(super) Box<OpenFn>);

/// What an [`Opener`] calls.
pub(super) type OpenFn = dyn Fn(
        &'static str,
        String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Arc<Session>>> + Send>>
    + Send
    + Sync;

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

/// Most other hosts one page's prefetch opens sessions to: a hint is
/// unauthenticated, and a hostile one must not make the proxy connect to
/// every host of a zone.
pub const MAX_PREFETCH_HOSTS: usize = 32;

/// When a session had what (from the start of its opening: after the UDP
/// answer, before connecting), for the lab's report of whether the URL list
/// arrived before the origin connection was ready.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// The planned connections were all ready (TCP, TLS, HTTP/2).
    pub connected: Option<Duration>,
    /// The object URLs were known: at the start when the UDP answer
    /// carried them, else when the edge's TCP answer came.
    pub urls: Option<Duration>,
    /// Size of the edge's UDP answer, bytes.
    pub answer_bytes: usize,
    /// The URL list came over TCP apart from the compact UDP hint.
    pub urls_over_tcp: bool,
    /// Why the URL list did not come, if it was asked for and did not.
    pub urls_error: Option<String>,
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
pub(super) struct Whole {
    pub(super) status: StatusCode,
    pub(super) headers: http::HeaderMap,
    pub(super) body: Bytes,
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
    urls: Urls,
    edge: SocketAddr,
    timeout: Duration,
}

/// The URL list: in hand, or on its way over TCP from the edge.
#[derive(Debug)]
enum Urls {
    Ready(Vec<String>),
    /// The edge's TCP answer, and when it came (since the session's t0).
    Later(tokio::task::JoinHandle<(Result<Vec<String>, String>, Duration)>),
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
        let t0 = Instant::now();
        let ip = r
            .addrs
            .first()
            .copied()
            .ok_or_else(|| SessionError::Resolve {
                host: host.to_string(),
                why: "the edge gave no address".into(),
            })?;
        let https = page_url.starts_with("https://");
        let (scheme, port) = if https {
            ("https", cfg.origin_tls_port)
        } else {
            ("http", cfg.origin_port)
        };
        let addr = SocketAddr::new(ip, port);
        let tls = match (https, &cfg.upstream_tls) {
            (false, _) => None,
            (true, Some(t)) => Some((t.clone(), host.to_string())),
            (true, None) => {
                return Err(SessionError::Connect {
                    addr,
                    why: "an https:// page needs TLS towards the origin (upstream_tls)".into(),
                })
            }
        };
        let plan = match &r.hint {
            _ if !cfg.use_hints => Err(Fallback::Disabled),
            Ok(h) => plan(
                h,
                page_url,
                Radio {
                    bandwidth_bps: cfg.radio_bandwidth_bps,
                    rtt_s: cfg.radio_rtt.unwrap_or(r.rtt).as_secs_f64(),
                },
                mewa_hint::now_unix_s(),
            ),
            Err(f) => Err(f.clone()),
        };
        let n = plan
            .as_ref()
            .map_or(1, |p| p.n.min(cfg.max_connections).max(1) as usize);
        // The URL list the compact UDP answer left out, asked of the edge
        // over TCP while the connections to the origin open.
        let late = match &plan {
            Ok(_) if cfg.prefetch && r.urls_over_tcp => {
                let (edge, host, page, t) = (
                    cfg.edge,
                    host.to_string(),
                    page_url.to_string(),
                    cfg.timeout,
                );
                Some(tokio::spawn(async move {
                    let r = fetch_url_list(edge, &host, &page, t).await;
                    (r, t0.elapsed())
                }))
            }
            _ => None,
        };
        let mut opening = tokio::task::JoinSet::new();
        for _ in 0..n {
            opening.spawn(connect(addr, cfg.timeout, tls.clone()));
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
        let connected = t0.elapsed();
        if conns.is_empty() {
            if let Some(l) = &late {
                l.abort();
            }
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
        let prefetching =
            matches!(&plan, Ok(p) if cfg.prefetch && (!p.urls.is_empty() || late.is_some()));
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
            page_url: page_url.to_string(),
            scheme,
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
            timeline: Mutex::new(Timeline {
                connected: Some(connected),
                urls: match &plan {
                    Ok(p) if !p.urls.is_empty() => Some(Duration::ZERO),
                    _ => None,
                },
                answer_bytes: r.answer_bytes,
                urls_over_tcp: late.is_some(),
                urls_error: None,
            }),
            opener: Mutex::new(None),
            pending: Mutex::new(match (&plan, late) {
                (Ok(_), Some(l)) if prefetching => Some(PendingPrefetch {
                    urls: Urls::Later(l),
                    edge: cfg.edge,
                    timeout: cfg.timeout,
                }),
                (Ok(p), _) if prefetching => Some(PendingPrefetch {
                    urls: Urls::Ready(p.urls.clone()),
                    edge: cfg.edge,
                    timeout: cfg.timeout,
                }),
                (_, Some(l)) => {
                    l.abort();
                    None
                }
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

    /// Starts the prefetch, once, when the document's request is out: at
    /// once with the URLs in hand, else when the edge's TCP answer brings
    /// them (if it does not, the browser's own requests go as usual).
    fn kick_prefetch(self: &Arc<Self>) {
        let Some(p) = lock(&self.pending).take() else {
            return;
        };
        match p.urls {
            Urls::Ready(urls) => self.start_prefetch(urls, p.edge, p.timeout),
            Urls::Later(handle) => {
                let me = self.clone();
                tokio::spawn(async move {
                    let urls = match handle.await {
                        Ok((r, at)) => r.map(|u| (u, at)),
                        Err(e) => Err(format!("URL list task: {e}")),
                    };
                    match urls {
                        Ok((urls, at)) => {
                            lock(&me.timeline).urls = Some(at);
                            me.start_prefetch(urls, p.edge, p.timeout);
                        }
                        Err(why) => {
                            tracing::info!("proxy: {}: no URL list ({why})", me.page_url);
                            lock(&me.timeline).urls_error = Some(why);
                        }
                    }
                });
            }
        }
    }

    /// The prefetch of `urls`: every URL of this host (and of hosts the
    /// edge resolves to this session's address) is registered at once (so
    /// a browser request that comes first fetches it, once) and fetched on
    /// this session's connections; URLs of hosts at other addresses go to
    /// those hosts' sessions, which the proxy opens as the browser would
    /// ([`MAX_PREFETCH_HOSTS`] at most); without an opener they are left to
    /// the browser.
    fn start_prefetch(self: &Arc<Self>, urls: Vec<String>, edge: SocketAddr, timeout: Duration) {
        let mut by_host: HashMap<String, Vec<String>> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        for u in urls {
            let host = match http::Uri::try_from(u.as_str()) {
                Ok(uri) if uri.scheme_str() == Some(self.scheme) && uri.port().is_none() => {
                    uri.host().map(str::to_ascii_lowercase)
                }
                _ => None,
            };
            let Some(host) = host else { continue };
            if !by_host.contains_key(&host) {
                let others = order.iter().filter(|h| **h != self.host).count();
                if host != self.host && others >= MAX_PREFETCH_HOSTS {
                    continue;
                }
                order.push(host.clone());
            }
            by_host.entry(host).or_default().push(u);
        }
        let opener = lock(&self.opener).clone();
        for host in order {
            let Some(urls) = by_host.remove(&host) else {
                continue;
            };
            if host == self.host {
                self.prefetch_here(urls);
                continue;
            }
            let me = self.clone();
            let opener = opener.clone();
            tokio::spawn(async move {
                let page = format!("{}://{host}/", me.scheme);
                let same = matches!(
                    resolve(edge, &host, &page, timeout).await,
                    Ok(r) if r.addrs.first() == Some(&me.addr.ip())
                );
                if same {
                    me.prefetch_here(urls);
                } else if let Some(open) = opener {
                    if let Some(there) = (open.0)(me.scheme, host).await {
                        let n = there.prefetch_here(urls);
                        me.prefetch_started.fetch_add(n, Ordering::Relaxed);
                    }
                }
            });
        }
    }

    /// Registers and fetches `urls` on this session, skipping those already
    /// registered; returns how many it started.
    fn prefetch_here(self: &Arc<Self>, urls: Vec<String>) -> u64 {
        let mut started = Vec::new();
        {
            let mut m = lock(&self.prefetched);
            for u in urls {
                if m.contains_key(&u) {
                    continue;
                }
                let c = Arc::new(PrefetchCell::new());
                m.insert(u.clone(), c.clone());
                started.push((u, c));
            }
        }
        let n = started.len() as u64;
        self.prefetch_started.fetch_add(n, Ordering::Relaxed);
        for (url, cell) in started {
            let me = self.clone();
            tokio::spawn(async move {
                let _ = cell.get_or_init(|| me.fetch_whole(url)).await;
            });
        }
        n
    }

    /// When the connections and the URL list were ready.
    pub fn timeline(&self) -> Timeline {
        lock(&self.timeline).clone()
    }

    /// Lets this session open other hosts' sessions for its prefetch.
    pub(super) fn set_opener(&self, opener: Arc<Opener>) {
        *lock(&self.opener) = Some(opener);
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
    pub(super) async fn take_prefetched(self: &Arc<Self>, url: &str) -> Option<Arc<Whole>> {
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

    /// Whether this session holds leaves for the rate-following rule
    /// ([`Dispatch::PullRate`](super::Dispatch::PullRate)).
    pub fn pulls(&self) -> bool {
        self.pull.is_some()
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

    pub(super) fn idle_for(&self) -> Duration {
        self.last_used.lock().map_or(Duration::MAX, |t| t.elapsed())
    }

    pub(super) fn is_closed(&self) -> bool {
        self.conns.iter().all(|c| c.is_closed())
    }
}

/// The edge's answer for `host` with the hint request for `page_url`.
pub(super) async fn lookup(
    cfg: &ProxyConfig,
    host: &str,
    page_url: &str,
) -> Result<Resolved, SessionError> {
    resolve(cfg.edge, host, page_url, cfg.timeout)
        .await
        .map_err(|e| SessionError::Resolve {
            host: host.to_string(),
            why: e.to_string(),
        })
}

/// A connection's byte stream: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// One HTTP/2 connection to the origin: h2c, or over TLS naming `host`
/// (ALPN `h2`) when `tls` is given.
async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<(Arc<rustls::ClientConfig>, String)>,
) -> Result<http2::SendRequest<ProxyBody>, String> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let builder = {
        let mut b = http2::Builder::new(TokioExecutor::new());
        b.initial_stream_window_size(8 << 20)
            .initial_connection_window_size(16 << 20);
        b
    };
    let io: Box<dyn Io> = match tls {
        None => Box::new(tcp),
        Some((cfg, host)) => {
            let name = rustls::pki_types::ServerName::try_from(host)
                .map_err(|e| format!("TLS name: {e}"))?;
            let s = tokio::time::timeout(
                timeout,
                tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
            )
            .await
            .map_err(|_| format!("no TLS handshake within {timeout:?}"))?
            .map_err(|e| format!("TLS: {e}"))?;
            Box::new(s)
        }
    };
    let (send, conn) = builder
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}
