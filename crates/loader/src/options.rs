//! How a page is loaded: the protocol, the connections, the names'
//! addresses, the hint's prefetch and dispatch, and the request priorities
//! Chromium gives each kind of object.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mewa_corpus::{Discovery, Kind, Page};

use crate::assign::{Assign, LeastOutstanding};
use crate::record::Protocol;

/// A URL list that arrives during a load ([`LoadOptions::prefetch_later`]).
pub type LateUrls = tokio::sync::watch::Receiver<Option<Arc<Vec<String>>>>;

/// Host name → address, like Chromium's `--host-resolver-rules`.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    /// Exact host names.
    pub hosts: HashMap<String, IpAddr>,
    /// Address for every other name; `None` makes them fail.
    pub default: Option<IpAddr>,
}

impl Resolver {
    /// Every name resolves to `addr`.
    pub fn all_to(addr: IpAddr) -> Resolver {
        Resolver {
            hosts: HashMap::new(),
            default: Some(addr),
        }
    }

    /// The address of `host`, if known.
    pub fn resolve(&self, host: &str) -> Option<IpAddr> {
        self.hosts.get(host).copied().or(self.default)
    }
}

/// How to load a page.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// HTTP version.
    pub protocol: Protocol,
    /// TLS for HTTP/1.1 and HTTP/2 (h2 by ALPN; without it h2c by prior
    /// knowledge). HTTP/3 always uses TLS.
    pub tls: bool,
    /// HTTP/1.1: the most connections per host (browsers: 6). HTTP/2 and
    /// HTTP/3: connections per origin group (browsers: 1; seed 000: n).
    pub connections: usize,
    /// Open all of the root group's connections when the load starts
    /// (seed 000's client knows n from the hint before the first request)
    /// instead of when an object first needs each.
    pub preconnect: bool,
    /// HTTP/2 and HTTP/3: hosts that resolve to the same address share
    /// connections (Chrome's coalescing).
    pub coalesce: bool,
    /// Which connection of a group carries each object.
    pub assign: Arc<dyn Assign>,
    /// HTTP/2 and HTTP/3 with several connections: at most this many bytes
    /// requested and not yet received per connection for leaf objects
    /// (images, fonts, media); further leaves wait, first come first
    /// served, for the first connection that drains below it. `None`: every object is
    /// requested as soon as it is discovered (a browser's behaviour).
    ///
    /// Why: a static split of a page's bytes assumes the connections move
    /// data at the same speed. A connection that joins a queue the first
    /// one has filled can leave slow start early (Cubic's HyStart reads the
    /// queue as congestion) and then carries its share at a fraction of the
    /// link while the other sits idle. Holding leaves back lets the faster
    /// connection take more (docs/LAB-RESULTS.md "Pull dispatch"). Objects that
    /// reveal others (HTML, CSS, scripts) are never held.
    pub pull_budget: Option<u64>,
    /// With [`LoadOptions::pull_budget`]: a connection's budget grows to
    /// twice the bytes it delivered over the last this-long (about one
    /// RTT), so it follows each connection's delivery rate and the budget
    /// becomes a floor. A connection whose window stays small then holds
    /// little and the others take the rest.
    pub pull_follow: Option<Duration>,
    /// URLs to request right after the document, before anything reveals
    /// them (seed 000's client knows the page's object URLs from the hint
    /// and "sends requests to all embedded URLs on parallel connections").
    /// Objects of the page with these URLs are requested once, in this
    /// order; a URL the page does not have is ignored.
    pub prefetch: Vec<String>,
    /// URLs to request as soon as they arrive during the load (the URL list
    /// the edge sends over TCP beside a compact UDP hint), like
    /// [`LoadOptions::prefetch`]; a sender dropped without a list leaves
    /// the page to its own discovery.
    pub prefetch_later: Option<LateUrls>,
    /// Names to addresses.
    pub resolver: Resolver,
    /// Port for cleartext HTTP (HTTP/1.1, h2c).
    pub port_plain: u16,
    /// Port for TLS over TCP.
    pub port_tls: u16,
    /// UDP port for HTTP/3.
    pub port_h3: u16,
    /// PEM file of the CA that signed the origin's certificate (the local
    /// test CA); required for TLS and HTTP/3.
    pub ca_cert: Option<PathBuf>,
    /// Give up on the load after this long.
    pub timeout: Duration,
    /// Discover an HTML document's references as its bytes arrive, as a
    /// browser's preload scanner does (else only once it has arrived
    /// whole). CSS and scripts reveal theirs when whole, as in a browser.
    pub streaming: bool,
    /// Send Chromium's `priority` request header ([`chromium_priorities`])
    /// so a server that schedules by RFC 9218 urgency treats the loader's
    /// requests as it treats Chromium's.
    pub priorities: bool,
    /// Seed 001: ask the server of every connection for an initial
    /// congestion window in the connection's first request (`mewa-iw`);
    /// `None` asks nothing (the default window).
    pub iw: Option<IwAsk>,
}

/// What initial window a load asks each connection's server for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IwAsk {
    /// The same window on every connection (what an operator would set
    /// for every page instead).
    Fixed(u32),
    /// Seed 001's Algorithm 1 ([`mewa_client::iw::choose`]) with the
    /// page's facts (as the edge's hint gives them) and the RTT measured on
    /// the connection's handshake.
    Aware(mewa_client::iw::PageFacts),
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            protocol: Protocol::H2,
            tls: false,
            connections: 1,
            preconnect: false,
            coalesce: true,
            assign: Arc::new(LeastOutstanding),
            pull_budget: None,
            pull_follow: None,
            prefetch: Vec::new(),
            prefetch_later: None,
            resolver: Resolver::default(),
            port_plain: 80,
            port_tls: 443,
            port_h3: 443,
            ca_cert: None,
            timeout: Duration::from_secs(120),
            streaming: true,
            priorities: true,
            iw: None,
        }
    }
}

/// The RFC 9218 `priority` header Chromium sends for each object of a page,
/// as read from its NetLog (`HTTP2_SESSION_SEND_HEADERS`, Chromium 13x,
/// loading meh15 pages from our origin): documents `u=0, i`; style sheets
/// and fonts `u=0`; scripts `u=2` (late in the body, where our bodies put
/// them); the first five images of the document `u=2, i` (Chromium boosts
/// the first images it sees), other images `i` (urgency 3); script
/// `fetch`es and other types `u=1, i`.
pub fn chromium_priorities(page: &Page) -> HashMap<u32, &'static str> {
    let boosted: HashSet<u32> = page
        .document()
        .map(|d| {
            page.children(d.id, Discovery::Html)
                .filter(|c| c.kind() == Kind::Image)
                .take(5)
                .map(|c| c.id)
                .collect()
        })
        .unwrap_or_default();
    page.objects
        .iter()
        .map(|o| {
            let p = match o.kind() {
                Kind::Html => "u=0, i",
                Kind::Css | Kind::Font => "u=0",
                Kind::Script => "u=2",
                Kind::Image if boosted.contains(&o.id) => "u=2, i",
                Kind::Image => "i",
                Kind::Other => "u=1, i",
            };
            (o.id, p)
        })
        .collect()
}

impl LoadOptions {
    /// The browser default for a protocol: 6 connections per host for
    /// HTTP/1.1, 1 coalesced connection for HTTP/2 and HTTP/3.
    pub fn browser(protocol: Protocol, tls: bool) -> LoadOptions {
        LoadOptions {
            protocol,
            tls: tls || protocol == Protocol::H3,
            connections: if protocol == Protocol::H1 { 6 } else { 1 },
            ..LoadOptions::default()
        }
    }

    /// Whether the load runs over TLS (HTTP/3 always does).
    pub(crate) fn uses_tls(&self) -> bool {
        self.tls || self.protocol == Protocol::H3
    }
}
