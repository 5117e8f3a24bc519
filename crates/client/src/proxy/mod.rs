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
//!
//! Layout: `session` is the client side (resolve with the hint, plan,
//! connect, prefetch, dispatch); `front` is what the browser talks to (the
//! HTTP/1.1, HTTP/2 and TLS listener, the open-proxy refusals, forwarding
//! to a session).

mod front;
mod session;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

pub use front::{Proxy, ProxyStats};
pub use session::{
    Placement, Session, SessionError, Timeline, MAX_PREFETCH_HELD, MAX_PREFETCH_HOSTS,
    MAX_PREFETCH_OBJECT,
};

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
    /// are cold when the document's children are requested (docs/LAB-RESULTS.md).
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
    /// Most connections a session opens, whatever the plan's n (the lab's
    /// "URLs only" variant sets 1).
    pub max_connections: u32,
    /// Radio RTT to plan with instead of the DNS exchange's (for a proxy
    /// that is not behind the radio link itself, e.g. on loopback).
    pub radio_rtt: Option<Duration>,
    /// Origin port for h2c.
    pub origin_port: u16,
    /// Origin port for HTTP/2 over TLS (`https://` pages).
    pub origin_tls_port: u16,
    /// TLS towards origins, for `https://` pages (ALPN `h2`); without it
    /// such pages are refused.
    pub upstream_tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// Terminates a browser's `CONNECT` tunnels to `https://` pages with a
    /// certificate for the tunnel's host, so the proxy sees and plans the
    /// requests inside (a proxy on the phone, trusted by its browser, as
    /// seed 000's nghttpx was). `None`: `CONNECT` is refused.
    pub intercept: Option<Intercept>,
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
            max_connections: crate::advice::MAX_CONNECTIONS,
            warm_first: true,
            dispatch: Dispatch::Auto,
            origin_port: 80,
            origin_tls_port: 443,
            upstream_tls: None,
            intercept: None,
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

/// The TLS server configuration for a host's tunnel: a certificate the
/// browser trusts for that host.
pub type CertFor =
    dyn Fn(&str) -> Result<std::sync::Arc<rustls::ServerConfig>, String> + Send + Sync;

/// How the proxy terminates `CONNECT` tunnels ([`ProxyConfig::intercept`]).
#[derive(Clone)]
pub struct Intercept {
    /// The server configuration for a host (ALPN `h2` and `http/1.1`).
    pub certs: std::sync::Arc<CertFor>,
}

impl std::fmt::Debug for Intercept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Intercept")
    }
}

/// Whether a path names a style sheet or a script (by its extension).
pub(crate) fn path_reveals(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.ends_with(".css") || p.ends_with(".js") || p.ends_with(".mjs")
}
