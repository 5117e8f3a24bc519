//! The proxy's front end: the listener a browser talks to (HTTP/1.1, or
//! HTTP/2 over TLS), the refusals that keep it from being an open proxy,
//! and the forwarding of each request to its host's [`Session`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use super::session::{lookup, Opener, Session, SessionError};
use super::{accept, asks_for_document, path_reveals};
use super::{ProxyBody, ProxyConfig};
use crate::resolve::Resolved;

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
    /// One gate per `scheme://host` being opened: concurrent first requests
    /// for a host wait for one session instead of each planning their
    /// own, while other hosts resolve and connect in parallel.
    opening: tokio::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
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
    asks_for_document(req.headers())
        || accept(req.headers()).starts_with("text/css")
        || path_reveals(path)
}

/// Serves one browser connection (or tunnel) over HTTP/2 or HTTP/1.1 until
/// it ends. HTTP/1.1 with upgrades: a `CONNECT` tunnel outlives its
/// request.
async fn serve_browser<I, S>(io: I, h2: bool, svc: S)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
            Request<Incoming>,
            Response = Response<ProxyBody>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    if h2 {
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(16 << 20)
            .max_concurrent_streams(256)
            .serve_connection(TokioIo::new(io), svc)
            .await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(io), svc)
            .with_upgrades()
            .await;
    }
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
            opening: tokio::sync::Mutex::new(HashMap::new()),
            stats: ProxyStats::default(),
        })
    }

    /// The current session of `host`, if any (for logs and tests): its
    /// `http://` one, else its `https://` one.
    pub async fn session_of(&self, host: &str) -> Option<Arc<Session>> {
        let m = self.sessions.lock().await;
        m.get(&format!("http://{host}"))
            .or_else(|| m.get(&format!("https://{host}")))
            .cloned()
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
                    serve_browser(tcp, false, svc).await;
                    return;
                };
                // A client that never finishes its handshake must not hold
                // the task forever.
                let Ok(Ok(s)) =
                    tokio::time::timeout(Duration::from_secs(10), acc.accept(tcp)).await
                else {
                    return;
                };
                let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
                let counter = if h2 {
                    &me2.stats.browser_h2
                } else {
                    &me2.stats.browser_h1
                };
                counter.fetch_add(1, Ordering::Relaxed);
                serve_browser(s, h2, svc).await;
            });
        }
    }

    /// The session for `host`. A document request opens a new one planned
    /// from its URL's hint unless the host has a fresh one; a sub-resource
    /// on another host that resolves to the address of a fresh session
    /// shares it (as Chrome coalesces HTTP/2 connections), else gets a
    /// session of its own.
    async fn session(
        self: &Arc<Self>,
        scheme: &'static str,
        host: &str,
        url: &str,
        is_document: bool,
        known: Option<Resolved>,
    ) -> Result<Arc<Session>, SessionError> {
        let key = format!("{scheme}://{host}");
        let fresh = |s: &Session| s.idle_for() < self.cfg.session_idle && !s.is_closed();
        let current =
            |map: &HashMap<String, Arc<Session>>| map.get(&key).filter(|s| fresh(s)).cloned();
        if let Some(s) = current(&*self.sessions.lock().await) {
            return Ok(s);
        }
        // This host's gate, held across its lookup and connections (a
        // radio round trip and more): the map itself is locked only
        // briefly, so other hosts do not wait behind this one.
        let gate = self
            .opening
            .lock()
            .await
            .entry(key.clone())
            .or_default()
            .clone();
        let _opening = gate.lock().await;
        if let Some(s) = current(&*self.sessions.lock().await) {
            return Ok(s);
        }
        // A sub-resource's host the prefetch has just resolved is not
        // asked again; a document always is (its answer carries the hint).
        let r = match known.filter(|_| !is_document) {
            Some(r) => r,
            None => {
                tracing::debug!("proxy: {url}: resolving (document: {is_document})");
                let room = self.cfg.lookups.room().await;
                let r = lookup(&self.cfg, host, url, is_document).await?;
                drop(room);
                tracing::debug!("proxy: {url}: resolved in {:?}", r.rtt);
                r
            }
        };
        if !is_document {
            let mut map = self.sessions.lock().await;
            let same = r.addrs.first().and_then(|ip| {
                map.values()
                    .find(|s| s.addr.ip() == *ip && s.scheme == scheme && fresh(s))
                    .cloned()
            });
            if let Some(s) = same {
                map.insert(key, s.clone());
                return Ok(s);
            }
        }
        let s = Arc::new(Session::open_resolved(&self.cfg, host, url, &r).await?);
        // Its prefetch may need sessions of the page's other hosts.
        s.set_opener(self.opener());
        self.stats.sessions.fetch_add(1, Ordering::Relaxed);
        match &s.plan {
            Ok(p) => tracing::info!(
                "proxy: {url}: n = {} (page {} B, radio RTT {:.1} ms, wired {:.1} ms, {:.1} Mbit/s), {}",
                p.n,
                p.page_bytes,
                p.radio_rtt_s * 1e3,
                p.wired_rtt_s * 1e3,
                p.bandwidth_bps / 1e6,
                if s.pulls() { "pull-rate dispatch" } else { "push dispatch" }
            ),
            Err(why) => {
                self.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
                tracing::info!("proxy: {url}: one connection ({why})");
            }
        }
        self.sessions.lock().await.insert(key, s.clone());
        Ok(s)
    }

    /// How a session's prefetch opens the sessions of other hosts: as the
    /// browser's first request for them would (a sync fn, so that the
    /// boxed future's `Send` does not depend on [`Proxy::session`]'s own).
    fn opener(self: &Arc<Self>) -> Arc<Opener> {
        let weak = Arc::downgrade(self);
        Arc::new(Opener(Box::new(move |scheme, host, known| {
            let weak = weak.clone();
            Box::pin(async move {
                let proxy = weak.upgrade()?;
                let url = format!("{scheme}://{host}/");
                proxy.session(scheme, &host, &url, false, known).await.ok()
            })
        })))
    }

    fn refuse(&self, status: StatusCode, why: &str) -> Response<ProxyBody> {
        self.stats.refused.fetch_add(1, Ordering::Relaxed);
        error(status, why)
    }

    /// A browser's `CONNECT host:443`: with [`ProxyConfig::intercept`],
    /// answers 200 and serves the tunnel itself (TLS with a certificate for
    /// `host`, then HTTP/2 or HTTP/1.1), every request inside planned and
    /// forwarded like a `http://` one; refused otherwise, and for any other
    /// port.
    fn tunnel(self: &Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        let Some(intercept) = self.cfg.intercept.clone() else {
            return self.refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "CONNECT is not supported: this proxy carries http:// pages only",
            );
        };
        let Some(auth) = req.uri().authority().cloned() else {
            return self.refuse(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        if auth.port_u16() != Some(self.cfg.origin_tls_port) {
            return self.refuse(
                StatusCode::FORBIDDEN,
                "only the origin TLS port the proxy was configured for",
            );
        }
        let host = auth.host().to_ascii_lowercase();
        let tls = match (intercept.certs)(&host) {
            Ok(t) => t,
            Err(e) => return self.refuse(StatusCode::BAD_GATEWAY, &format!("no certificate: {e}")),
        };
        let me = self.clone();
        tokio::spawn(async move {
            let Ok(up) = hyper::upgrade::on(req).await else {
                return;
            };
            let acc = tokio_rustls::TlsAcceptor::from(tls);
            let Ok(Ok(s)) =
                tokio::time::timeout(Duration::from_secs(10), acc.accept(TokioIo::new(up))).await
            else {
                return;
            };
            let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
            let svc = hyper::service::service_fn(move |r| {
                let (me, host) = (me.clone(), host.clone());
                async move { Ok::<_, std::convert::Infallible>(me.in_tunnel(r, &host).await) }
            });
            serve_browser(s, h2, svc).await;
        });
        Response::new(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed(),
        )
    }

    /// A request inside the tunnel to `host`: only for that host (a tunnel
    /// is not a way to other hosts), forwarded as `https://host/path`.
    async fn in_tunnel(
        self: &Arc<Self>,
        req: Request<Incoming>,
        host: &str,
    ) -> Response<ProxyBody> {
        let named = req
            .uri()
            .host()
            .map(str::to_string)
            .or_else(|| {
                let h = req.headers().get(http::header::HOST)?.to_str().ok()?;
                let a: http::uri::Authority = h.parse().ok()?;
                Some(a.host().to_string())
            })
            .map(|h| h.to_ascii_lowercase());
        if named.as_deref() != Some(host) {
            return self.refuse(
                StatusCode::MISDIRECTED_REQUEST,
                &format!("this tunnel is for {host} only"),
            );
        }
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        self.forward_to(req, "https", host.to_string(), path).await
    }

    /// Handles one browser request.
    pub async fn handle(self: &Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        let refuse = |status, why: &str| self.refuse(status, why);
        if req.method() == http::Method::CONNECT {
            return self.tunnel(req);
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
        self.forward_to(req, "http", host, path).await
    }

    /// Plans (per host and scheme) and forwards a request for
    /// `scheme://host/path`, or answers it from a prefetched response.
    async fn forward_to(
        self: &Arc<Self>,
        req: Request<Incoming>,
        scheme: &'static str,
        host: String,
        path: String,
    ) -> Response<ProxyBody> {
        let url = format!("{scheme}://{host}{path}");
        let uri = req.uri().clone();
        let is_document = asks_for_document(req.headers());
        let session = match self.session(scheme, &host, &url, is_document, None).await {
            Ok(s) => s,
            Err(e) => {
                self.stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
                return error(StatusCode::BAD_GATEWAY, &e.to_string());
            }
        };
        // A document the hint listed (the target of the page's redirect,
        // an iframe) is served from the prefetch too, unless the browser
        // sends cookies with it: the prefetch went without them, and a
        // page for a signed-in user must come from the origin.
        let credentials = req.headers().contains_key(http::header::COOKIE);
        if req.method() == http::Method::GET && !(is_document && credentials) {
            if let Some(w) = session.take_prefetched(&url, is_document).await {
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
            .scheme(scheme)
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
