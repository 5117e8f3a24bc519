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
//! Layout: `session` is the client side, a file per job (opening and
//! connecting, placement, forwarding and the counted body, the document
//! first, the prefetch, its page-wide budget, responses kept whole);
//! `front` is what the browser talks to (the HTTP/1.1, HTTP/2 and TLS
//! listener, the open-proxy refusals, forwarding to a session).

mod front;
mod session;

use mewa_hint::wire::Priority;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

pub use front::{Proxy, ProxyStats};
pub use session::{
    Placement, PrefetchBudget, Session, SessionError, Timeline, MAX_PREFETCH_HELD,
    MAX_PREFETCH_HOSTS, MAX_PREFETCH_OBJECT,
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
    /// With a hint that carries the page's computation latency, ask each
    /// origin connection for seed 001's initial window ([`crate::iw`]) in
    /// its first request (`mewa-iw`); a server that does not grant windows
    /// ignores the header.
    pub ask_initial_window: bool,
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
    /// The smallest TCP handshake round trip of the phone's recent loads
    /// ([`crate::rate::RecentRtt`]): without `radio_rtt`, the plan uses it
    /// when it is below the DNS exchange's, which includes the radio's
    /// promotion after an idle gap.
    pub recent_rtt: Option<Duration>,
    /// Keep the prefetch to one initial window per connection until the
    /// page's document has arrived (docs/CLIENT.md, "the document
    /// first"). Off by default: on the shared recordings over
    /// TMobile-LTE-short it did not pay, and on meh15 at 32 Mbit/s it cost
    /// the pipelining of a round trip (1412k page 0.88 → 1.03 s).
    pub first_flight_budget: bool,
    /// Prefetched images wait until the more urgent prefetched objects
    /// still on their way are within one bandwidth-delay product ("the
    /// hold"). Off by default: every prefetch starts at once in urgency
    /// order and the origin's HTTP/2 priorities order them on each
    /// connection. The hold kept the extra connections idle until the
    /// urgent objects were nearly in, so the images then started from an
    /// initial window on cold connections; in Chromium meh15's 3648k page
    /// took 2.17 s with it and 1.41 s without (1.57 s alone), and the large
    /// recordings over TMobile-LTE-short were 4 % faster without it.
    pub image_hold: bool,
    /// Prefetched images placed on the document's connection wait there
    /// until the document's response head has come (its connection's first
    /// flights carry the document, not images). On by default: an origin
    /// sends what it has ready, and a recorded page's document often takes
    /// the server longer than its images (run.sitespeed.io: 30 ms against
    /// 5 ms), so images asked right behind the document filled the
    /// connection's initial window and the document's first bytes came a
    /// round trip later than in Chromium alone. Images on the other
    /// connections, and every style sheet and script, go at once.
    pub images_after_document: bool,
    /// Prefetched images on the sessions of the page's other hosts wait
    /// until the page's more urgent prefetched objects still on their way
    /// are within one bandwidth-delay product: the hold of
    /// [`ProxyConfig::image_hold`] for the connections no origin orders
    /// behind the page's style sheets and scripts (as Chromium's resource
    /// scheduler keeps images back while render-blocking requests load).
    pub hold_other_hosts_images: bool,
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
    /// Limit for the edge's answer (its retransmissions included) and for
    /// each step of connecting to the origin (TCP, TLS). Browser-like by
    /// default (30 s): a browser alone waits minutes for a connection, and
    /// a cellular link's outages last seconds (TMobile-UMTS-driving has
    /// gaps of up to 5.8 s); at 5 s the proxy answered 502 where Chromium
    /// alone went on to load the page.
    pub timeout: Duration,
    /// Most prefetch requests in flight at once for one page, all its
    /// hosts together: a hint is unauthenticated, and its URL list must not
    /// start thousands of requests at once. The default is above the
    /// largest shared recording (169 objects), like a server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub max_prefetches: usize,
    /// Lookups at the edge at once, the browser's and the prefetch's
    /// together ([`LookupLimit`]).
    pub lookups: LookupLimit,
}

/// Most lookups at the edge a proxy has under way at once: a hint's URL
/// list (up to [`MAX_PREFETCH_HOSTS`] hosts a page) or a page with many
/// hosts must not turn into an unbounded fan-out of DNS queries over the
/// radio. Shared by the clones of one [`ProxyConfig`].
#[derive(Debug, Clone)]
pub struct LookupLimit(std::sync::Arc<tokio::sync::Semaphore>);

/// [`LookupLimit`]'s default: above any page's hosts in the shared
/// recordings (42).
pub const DEFAULT_MAX_LOOKUPS: usize = 64;

impl LookupLimit {
    /// At most `n` lookups at once (at least one).
    pub fn new(n: usize) -> LookupLimit {
        LookupLimit(std::sync::Arc::new(tokio::sync::Semaphore::new(n.max(1))))
    }

    /// Waits for room for one lookup; the room comes back when the permit
    /// is dropped.
    pub async fn room(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.0.clone().acquire_owned().await.ok()
    }

    /// Lookups that may start now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

impl Default for LookupLimit {
    fn default() -> Self {
        LookupLimit::new(DEFAULT_MAX_LOOKUPS)
    }
}

/// [`ProxyConfig::max_prefetches`]'s default.
pub const DEFAULT_MAX_PREFETCHES: usize = 256;

impl ProxyConfig {
    /// Defaults for a proxy in front of a browser on this machine.
    pub fn new(edge: SocketAddr, radio_bandwidth_bps: f64) -> ProxyConfig {
        ProxyConfig {
            edge,
            radio_bandwidth_bps,
            radio_rtt: None,
            recent_rtt: None,
            first_flight_budget: false,
            image_hold: false,
            images_after_document: true,
            hold_other_hosts_images: false,
            use_hints: true,
            ask_initial_window: true,
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
            timeout: Duration::from_secs(30),
            max_prefetches: DEFAULT_MAX_PREFETCHES,
            lookups: LookupLimit::default(),
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

/// The request's `Accept` header, or "" without one.
pub(crate) fn accept(headers: &http::HeaderMap) -> &str {
    headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Whether a browser asks for a document (a page or an iframe): it puts
/// `text/html` first in `Accept`, whatever the URL looks like.
pub(crate) fn asks_for_document(headers: &http::HeaderMap) -> bool {
    accept(headers).starts_with("text/html")
}

/// Whether a path names a style sheet or a script (by its extension).
pub(crate) fn path_reveals(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.ends_with(".css") || p.ends_with(".js") || p.ends_with(".mjs")
}

/// The RFC 9218 priority Chromium would ask the object at `path` with,
/// guessed from its extension, for a URL whose priority the hint does not
/// carry ([`mewa_hint::wire::FLAG_PRIORITIES`]; the edge knows the content
/// type, a URL often does not say it): documents (`.html`, or a path
/// ending in `/`) `u=0, i`, style sheets and fonts `u=0`, scripts `u=2`,
/// images `i` (urgency 3, incremental), anything else `u=1, i` (what
/// Chromium sends for script `fetch`es), as
/// [`Priority::for_content_type`] gives them. A prefetch sent without a
/// priority would get the default urgency 3 for everything: a server that
/// schedules by urgency would then send a page's late style sheets after
/// its large scripts, and the browser could run no script until they came
/// (seed 000's client did not say; a browser does, and the prefetch must
/// not do worse).
pub(crate) fn prefetch_priority(path: &str) -> Priority {
    let p = path.to_ascii_lowercase();
    let name = p.rsplit('/').next().unwrap_or("");
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    let content_type = if p.ends_with('/') {
        // A document (a redirect's target, an iframe): what the browser
        // waits for before anything else.
        "text/html"
    } else {
        match ext {
            "html" | "htm" => "text/html",
            "css" => "text/css",
            "woff2" | "woff" | "ttf" | "otf" | "eot" => "font/woff2",
            "js" | "mjs" => "text/javascript",
            "png" | "jpg" | "jpeg" | "gif" | "webp" | "avif" | "svg" | "ico" | "bmp" => "image/png",
            _ => "application/octet-stream",
        }
    };
    Priority::for_content_type(content_type).unwrap_or(LEAF_PRIORITY)
}

/// What a prefetch asks an image with (and a URL that does not parse).
const LEAF_PRIORITY: Priority = Priority {
    urgency: 3,
    incremental: true,
};

/// [`prefetch_priority`] of a URL (images' when it does not parse).
pub(crate) fn url_priority(url: &str) -> Priority {
    http::Uri::try_from(url).map_or(LEAF_PRIORITY, |u| prefetch_priority(u.path()))
}

/// Puts `urls` in the order a prefetch asks for them: by urgency
/// (`priority`), documents (urgency 0, incremental) first among the most
/// urgent (the browser can do nothing before its document), the page's
/// order within each.
pub(crate) fn prefetch_order(urls: &mut [String], priority: impl Fn(&str) -> Priority) {
    urls.sort_by_key(|u| {
        let p = priority(u);
        (p.urgency, !(p.urgency == 0 && p.incremental))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefetch_asks_with_chromiums_priorities() {
        for (path, want) in [
            ("/", (0, "u=0, i")),
            ("/sv/site/", (0, "u=0, i")),
            ("/Index.HTML", (0, "u=0, i")),
            ("/a/site.css", (0, "u=0")),
            ("/f/font.woff2", (0, "u=0")),
            ("/j/app.min.js", (2, "u=2")),
            ("/i/photo.JPG", (3, "i")),
            ("/i/map.svg", (3, "i")),
            ("/gtag/js", (1, "u=1, i")),
            ("/collect", (1, "u=1, i")),
            // A dot in a directory is not an extension.
            ("/v1.2/data", (1, "u=1, i")),
        ] {
            let p = prefetch_priority(path);
            assert_eq!((p.urgency, p.header().as_str()), want, "{path}");
        }
    }

    /// `urls` put in prefetch order by `priority`.
    fn ordered(urls: &[&str], priority: impl Fn(&str) -> Priority) -> Vec<String> {
        let mut v: Vec<String> = urls.iter().map(|s| s.to_string()).collect();
        prefetch_order(&mut v, priority);
        v
    }

    #[test]
    fn documents_then_style_then_scripts_then_images_in_page_order() {
        let page = [
            "https://a.example/big.js",
            "https://a.example/hero.jpg",
            "https://a.example/late.css",
            "https://a.example/sv/site/",
            "https://a.example/early.css",
            "https://a.example/beacon",
            "not a url",
        ];
        assert_eq!(
            ordered(&page, url_priority),
            [
                "https://a.example/sv/site/",
                "https://a.example/late.css",
                "https://a.example/early.css",
                "https://a.example/beacon",
                "https://a.example/big.js",
                "https://a.example/hero.jpg",
                "not a url",
            ]
        );
        // What the hint says beats the guess: an extension-less image and
        // style sheet (ferguson.com's `/sites/content/…`).
        let hint = |u: &str| match u {
            "https://a.example/c/image/1" => Priority::for_content_type("image/jpeg").unwrap(),
            "https://a.example/c/css/2" => Priority::for_content_type("text/css").unwrap(),
            u => url_priority(u),
        };
        let page = [
            "https://a.example/c/image/1",
            "https://a.example/app.js",
            "https://a.example/c/css/2",
        ];
        assert_eq!(
            ordered(&page, hint),
            [
                "https://a.example/c/css/2",
                "https://a.example/app.js",
                "https://a.example/c/image/1",
            ]
        );
    }
}
