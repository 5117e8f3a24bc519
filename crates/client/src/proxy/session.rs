//! The client side of the proxy: a [`Session`] per page host resolves the
//! host with the hint request, plans n, opens the n h2c connections,
//! prefetches the hint's URLs and places every request (push or
//! rate-following pull). Programs use it without the proxy's front end.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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

use crate::advice::{plan, Fallback, Plan, Radio, UrlList};
use crate::dispatch::{Credit, Dispatcher};
use crate::resolve::{fetch_url_list, resolve, resolve_address, Resolved};
use mewa_hint::wire::Priority;

use super::{
    asks_for_document, path_reveals, prefetch_order, pulls, url_priority, ProxyBody, ProxyConfig,
};

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
    /// The initial window each connection's first request asks for
    /// (seed 001), taken by that request; 0: nothing to ask.
    iw_ask: Vec<AtomicU32>,
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
    prefetched: Mutex<HashMap<String, Prefetched>>,
    /// Body bytes held for the browser now (bounded by
    /// [`MAX_PREFETCH_HELD`]).
    held_bytes: Arc<AtomicU64>,
    /// Objects prefetched.
    prefetch_started: AtomicU64,
    /// What the prefetch of this session's page shares over every host it
    /// reaches.
    page: Arc<PagePrefetch>,
    /// When the session started opening (after the UDP answer).
    opened: Instant,
    /// The quickest TCP handshake of its connections.
    handshake: Duration,
    /// Prefetched objects the browser then asked for.
    prefetch_taken: AtomicU64,
    /// When the connections and the URL list were ready.
    timeline: Mutex<Timeline>,
    /// Whether the first connection may carry prefetched images: `false`
    /// from the session's opening until its document's response head
    /// ([`crate::proxy::ProxyConfig::images_after_document`]).
    document_head: tokio::sync::watch::Sender<bool>,
    /// When the document's request went out: images wait for its head at
    /// most one handshake round trip after that.
    document_sent: std::sync::OnceLock<Instant>,
    /// Prefetched images waiting on [`Session::document_head`] now.
    waiting_for_document: AtomicU64,
    /// Opens (or finds) the session of another host, for prefetching the
    /// hint's objects there (set by the proxy).
    opener: Mutex<Option<Arc<Opener>>>,
}

/// Opens or finds the session of `(scheme, host)`: what a session asks the
/// proxy for to prefetch objects on hosts at other addresses.
pub(super) struct Opener(pub(super) Box<OpenFn>);

/// What an [`Opener`] calls: scheme, host, and the edge's answer for the
/// host when the caller has it already (a second DNS exchange would cost
/// the prefetch another radio round trip).
pub(super) type OpenFn = dyn Fn(
        &'static str,
        String,
        Option<Resolved>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Arc<Session>>> + Send>>
    + Send
    + Sync;

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

/// The urgency (RFC 9218) from which a prefetched object waits for the
/// more urgent ones ([`PagePrefetch::hold_leaves`]): images.
const LEAF_URGENCY: u8 = 3;

/// One bandwidth-delay product, at least [`PULL_FLOOR_BYTES`]: the bytes of
/// more urgent objects in flight below which prefetched images start, and
/// the prefetch's budget while the document is on its way.
fn bdp_bytes(bandwidth_bps: f64, rtt_s: f64) -> u64 {
    let bdp = bandwidth_bps / 8.0 * rtt_s;
    if bdp.is_finite() && bdp > 0.0 {
        (bdp as u64).max(PULL_FLOOR_BYTES)
    } else {
        PULL_FLOOR_BYTES
    }
}

/// What one page's prefetch shares over every host it reaches: the
/// in-flight budget, the urgent bytes images wait for, and the hint's
/// sizes.
///
/// The budget: bytes the prefetch has asked for and not received, until
/// the page's document has arrived: one initial window per connection of
/// the page (what those connections send in their first round trip
/// anyway; at most one bandwidth-delay product). Unbounded, the prefetch
/// of a large page fills the radio link's queue in the first round trips
/// (every connection in slow start at once, on every host), and the
/// document the browser is waiting for queues behind it: on a cellular
/// trace with a deep buffer a page's redirect and then its 12 KB document
/// took 1.5 s instead of 0.5 s. The client's bandwidth is a peak estimate,
/// often twice the mean on a cellular trace, so the budget does not lean
/// on it. Once the document is here the budget lifts: a budget of two
/// bandwidth-delay products after it cost ferguson.com (41 hosts) 0.6 s
/// on TMobile-LTE-short, its bytes held by requests waiting on servers'
/// think time while the link had room. Without a plan (no bandwidth to
/// size it by), or with no document to wait for, there is none.
///
/// The hold ([`crate::proxy::ProxyConfig::image_hold`], off by default):
/// a browser's connection serves style sheets, fonts and scripts before
/// images by their urgency; the hint's n connections share the radio link
/// equally instead, so an image sent on another connection at once takes
/// bandwidth from the objects that hold up rendering and scripts. With
/// the hold, prefetched images wait until those still on their way are
/// within one bandwidth-delay product. Measured, the wait cost more (the
/// extra connections then start their images cold) than the share saved.
#[derive(Debug)]
struct PagePrefetch {
    /// The budget's bytes; closed when the document has arrived.
    bytes: Arc<tokio::sync::Semaphore>,
    /// Bytes of the budget while the document is on its way; the most one
    /// object takes.
    small: u32,
    /// The budget has lifted (the document arrived, or there is none).
    open: AtomicBool,
    /// Bytes asked for and not received (at most `small` an object).
    in_flight: Arc<AtomicU64>,
    /// The hint's bytes of prefetched objects below [`LEAF_URGENCY`] not
    /// yet arrived whole.
    urgent_left: Mutex<u64>,
    /// Woken when [`PagePrefetch::urgent_left`] falls.
    urgent_fell: tokio::sync::Notify,
    /// Images start once [`PagePrefetch::urgent_left`] is at most this.
    leaves_below: u64,
    /// The same for images on the sessions of the page's other hosts
    /// ([`crate::proxy::ProxyConfig::hold_other_hosts_images`]).
    elsewhere_below: u64,
    /// Images waiting in [`PagePrefetch::hold_leaves`] now.
    leaves_held: AtomicU64,
    /// The hint's size of each object of every host, by masked URL hash.
    sizes: HashMap<u32, u64>,
    mask: u32,
    /// The hint's priority of each URL it gives one
    /// ([`mewa_hint::wire::FLAG_PRIORITIES`]); the rest are guessed
    /// ([`url_priority`]).
    priorities: Mutex<HashMap<String, Priority>>,
    /// Prefetch requests in flight at once, every host of the page
    /// together ([`ProxyConfig::max_prefetches`]).
    streams: Arc<tokio::sync::Semaphore>,
}

impl PagePrefetch {
    /// `bdp`: the plan's bandwidth-delay product (`None`: unbounded);
    /// `hold`: the urgent bytes on their way below which images start
    /// (`None`: they start at once); `hold_elsewhere`: the same for images
    /// on other hosts' sessions; `connections`: the page session's;
    /// `has_document`: the budget is small until the document arrives;
    /// `(sizes, mask)`: the hint's sizes by masked URL hash;
    /// `max_streams`: prefetch requests in flight.
    fn new(
        bdp: Option<u64>,
        hold: Option<u64>,
        hold_elsewhere: Option<u64>,
        connections: usize,
        has_document: bool,
        (sizes, mask): (HashMap<u32, u64>, u32),
        max_streams: usize,
    ) -> Arc<PagePrefetch> {
        let cap = |b: f64| -> u32 {
            let max = tokio::sync::Semaphore::MAX_PERMITS.min(u32::MAX as usize) as f64;
            b.clamp(1.0, max) as u32
        };
        let first_flights = connections.max(1) as f64 * INITIAL_WINDOW_BYTES as f64;
        let small = bdp.map_or(u32::MAX >> 1, |b| cap((b as f64).min(first_flights)));
        Arc::new(PagePrefetch {
            bytes: Arc::new(tokio::sync::Semaphore::new(small as usize)),
            small,
            open: AtomicBool::new(!has_document || bdp.is_none()),
            in_flight: Arc::new(AtomicU64::new(0)),
            urgent_left: Mutex::new(0),
            urgent_fell: tokio::sync::Notify::new(),
            leaves_below: hold.unwrap_or(u64::MAX),
            elsewhere_below: hold
                .unwrap_or(u64::MAX)
                .min(hold_elsewhere.unwrap_or(u64::MAX)),
            leaves_held: AtomicU64::new(0),
            sizes,
            mask,
            priorities: Mutex::new(HashMap::new()),
            streams: Arc::new(tokio::sync::Semaphore::new(max_streams.max(1))),
        })
    }

    /// Adds the priorities a URL list carries.
    fn learn_priorities(&self, more: HashMap<String, Priority>) {
        lock(&self.priorities).extend(more);
    }

    /// The priority to ask `url` with: the hint's, else guessed from the
    /// URL.
    fn priority_of(&self, url: &str) -> Priority {
        lock(&self.priorities)
            .get(url)
            .copied()
            .unwrap_or_else(|| url_priority(url))
    }

    /// The document has arrived: the budget lifts, and the prefetches
    /// waiting for room go.
    fn document_done(&self) {
        if !self.open.swap(true, Ordering::Relaxed) {
            tracing::debug!("proxy: document done, budget lifts");
        }
        self.bytes.close();
    }

    /// The hint's size of `url`; for an object the hint does not size, two
    /// initial windows (a guess that still counts it).
    fn size_of(&self, url: &str) -> u64 {
        let h = mewa_hint::wire::url_hash(url) & self.mask;
        self.sizes
            .get(&h)
            .copied()
            .unwrap_or(PULL_FLOOR_BYTES)
            .max(1)
    }

    /// Waits for room in the budget for `url` while the budget holds; the
    /// room is given back when the returned [`Room`] is dropped.
    async fn room_for(&self, url: &str) -> Room {
        let bytes = self.size_of(url).min(u64::from(self.small));
        let permit = if self.open.load(Ordering::Relaxed) {
            None
        } else {
            let want = u32::try_from(bytes).unwrap_or(u32::MAX);
            // Err once the budget has lifted (closed): go unbudgeted.
            self.bytes.clone().acquire_many_owned(want).await.ok()
        };
        self.in_flight.fetch_add(bytes, Ordering::Relaxed);
        Room {
            _permit: permit,
            bytes,
            in_flight: self.in_flight.clone(),
        }
    }

    /// Waits until the urgent bytes on their way are within
    /// [`PagePrefetch::leaves_below`] (`elsewhere`: an image on another
    /// host's session, [`PagePrefetch::elsewhere_below`]).
    async fn hold_leaves(&self, elsewhere: bool) {
        let below = if elsewhere {
            self.elsewhere_below
        } else {
            self.leaves_below
        };
        // Counts the image in `leaves_held` while it waits (also when the
        // wait is dropped).
        let mut held = None;
        loop {
            // Registered before the check, so a wake-up in between is not
            // lost.
            let woken = self.urgent_fell.notified();
            if *lock(&self.urgent_left) <= below {
                return;
            }
            if held.is_none() {
                self.leaves_held.fetch_add(1, Ordering::Relaxed);
                held = Some(CountDown(&self.leaves_held));
            }
            woken.await;
        }
    }

    fn urgent_started(&self, bytes: u64) {
        *lock(&self.urgent_left) += bytes;
    }

    fn urgent_arrived(&self, bytes: u64) {
        let mut l = lock(&self.urgent_left);
        *l = l.saturating_sub(bytes);
        drop(l);
        self.urgent_fell.notify_waiters();
    }
}

/// A prefetch's room in its page's budget ([`PagePrefetch::room_for`]).
struct Room {
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    bytes: u64,
    in_flight: Arc<AtomicU64>,
}

impl Drop for Room {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Bytes of one connection's initial window ([`mewa_model::DEFAULT_IW`]
/// segments of 1460 bytes).
const INITIAL_WINDOW_BYTES: u64 = mewa_model::DEFAULT_IW as u64 * 1460;

/// A page's prefetch budget ([`Session::prefetch_budget`]), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchBudget {
    /// The budget until the document has arrived.
    pub before_document: u64,
    /// Whether the budget has lifted (the document has arrived).
    pub open: bool,
    /// Bytes the prefetch has asked for and not received (counted at the
    /// hint's size, at most [`PrefetchBudget::before_document`] an
    /// object).
    pub in_flight: u64,
    /// Prefetched images waiting for the more urgent objects
    /// ([`crate::proxy::ProxyConfig::image_hold`]).
    pub images_held: u64,
    /// Prefetched images on the document's connection waiting for its
    /// response head ([`crate::proxy::ProxyConfig::images_after_document`]).
    pub waiting_for_document: u64,
}

/// Most other hosts one page's prefetch opens sessions to: a hint is
/// unauthenticated, and a hostile one must not make the proxy connect to
/// every host of a zone. Above the hosts of every shared recording (42):
/// at 32, ryanair.com's last ten hosts were left out, and they are its
/// redirect chain of tracking pixels (four hosts one after the other, each
/// a lookup and a handshake over the radio), which then ended its load.
pub const MAX_PREFETCH_HOSTS: usize = 64;

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

/// A prefetch on its way or done, with the page whose budget it holds.
type Prefetched = (Arc<PrefetchCell>, Arc<PagePrefetch>);

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

/// A prefetch body's bytes in a session's held bytes while it is read:
/// reserved from its `Content-Length`, then as its bytes arrive; given
/// back if the prefetch fails, handed over to the [`Whole`] if it does not.
struct Charge {
    held: Arc<AtomicU64>,
    bytes: u64,
}

impl Charge {
    fn new(held: Arc<AtomicU64>) -> Charge {
        Charge { held, bytes: 0 }
    }

    /// Makes the charge at least `n` bytes; `Err` when the session's
    /// [`MAX_PREFETCH_HELD`] would be passed.
    fn at_least(&mut self, n: u64) -> Result<(), String> {
        let more = n.saturating_sub(self.bytes);
        if more == 0 {
            return Ok(());
        }
        let before = self.held.fetch_add(more, Ordering::Relaxed);
        self.bytes += more;
        if before + more > MAX_PREFETCH_HELD {
            return Err("prefetch budget spent".into());
        }
        Ok(())
    }

    /// The body is whole at `len` bytes: the [`Whole`] holding it counts
    /// exactly that from now on.
    fn settle(mut self, len: u64) {
        self.held
            .fetch_sub(self.bytes.saturating_sub(len), Ordering::Relaxed);
        self.held
            .fetch_add(len.saturating_sub(self.bytes), Ordering::Relaxed);
        self.bytes = 0;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The host a listed URL may be prefetched from, lower-cased: only a URL
/// of the page's scheme on the origin's port (none written), without
/// userinfo, whose host is a name. A hint is unauthenticated: its list
/// must not send the proxy to another port, or, by an address literal, to
/// any address at all (names go through the edge like the browser's).
fn prefetch_host(url: &str, scheme: &str) -> Option<String> {
    let uri = http::Uri::try_from(url).ok()?;
    let auth = uri.authority()?;
    if uri.scheme_str() != Some(scheme) || auth.port().is_some() || auth.as_str().contains('@') {
        return None;
    }
    let host = auth.host();
    if host.starts_with('[') || host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

/// Whether a response to the browser's document request sends it to
/// another host: a redirect whose `Location` names a host other than
/// `host` (or that cannot be read). The browser's document then comes
/// through that host's session, where this page's prefetch budget never
/// sees it arrive; the budget must lift at the redirect, or the rest of
/// the page creeps through it (bing.com → cn.bing.com with
/// `first_flight_budget`: 6.1 s against 4.0 s for Chromium alone).
fn redirects_elsewhere(status: StatusCode, headers: &http::HeaderMap, host: &str) -> bool {
    if !status.is_redirection() {
        return false;
    }
    let Some(loc) = headers.get(http::header::LOCATION) else {
        return false;
    };
    let Ok(loc) = loc.to_str() else {
        return true;
    };
    let absolute = if loc.starts_with("//") {
        format!("http:{loc}")
    } else if loc.starts_with('/') || !loc.contains("://") {
        // A relative reference stays on this host.
        return false;
    } else {
        loc.to_string()
    };
    match http::Uri::try_from(absolute) {
        Ok(uri) => uri
            .authority()
            .is_none_or(|auth| !auth.host().eq_ignore_ascii_case(host)),
        Err(_) => true,
    }
}

/// The URLs to prefetch and how to resolve their hosts.
#[derive(Debug)]
struct PendingPrefetch {
    urls: Urls,
    edge: SocketAddr,
    timeout: Duration,
    lookups: super::LookupLimit,
}

/// The URL list: in hand, or on its way over TCP from the edge.
#[derive(Debug)]
enum Urls {
    Ready(UrlList),
    /// The edge's TCP answer, and when it came (since the session's t0).
    Later(tokio::task::JoinHandle<(Result<UrlList, String>, Duration)>),
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

/// Waits until `came` turns true or `deadline` passes, whichever is first;
/// returns whether the head came. A dropped sender (the session is gone)
/// ends the wait too.
async fn head_or_deadline(
    mut came: tokio::sync::watch::Receiver<bool>,
    deadline: tokio::time::Instant,
) -> bool {
    matches!(
        tokio::time::timeout_at(deadline, came.wait_for(|&c| c)).await,
        Ok(Ok(_))
    )
}

/// Lifts a session's [`Session::document_head`] when dropped.
struct LiftOnDrop<'a>(&'a tokio::sync::watch::Sender<bool>);

impl Drop for LiftOnDrop<'_> {
    fn drop(&mut self) {
        self.0
            .send_if_modified(|came| !std::mem::replace(came, true));
    }
}

/// Takes one off a counter when dropped: a wait counted while it lasts,
/// also when it is dropped.
struct CountDown<'a>(&'a AtomicU64);

impl Drop for CountDown<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The origin's response body, counted off its connection as it passes.
struct Counted {
    inner: Incoming,
    credit: Option<Credit>,
    /// The session's document: its end opens the prefetch's budget.
    document: Option<Arc<PagePrefetch>>,
}

impl Counted {
    fn ended(&mut self) {
        if let Some(b) = self.document.take() {
            b.document_done();
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.ended();
    }
}

impl Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    let n = d.len() as u64;
                    if let Some(c) = &mut self.credit {
                        c.take(n);
                    }
                }
            }
            Poll::Ready(_) => self.ended(),
            Poll::Pending => {}
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
        let r = lookup(cfg, host, page_url, true).await?;
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
                    rtt_s: cfg.radio_rtt.map_or_else(
                        || {
                            crate::rate::plan_rtt_s(
                                cfg.recent_rtt.map(|d| d.as_secs_f64()),
                                r.rtt.as_secs_f64(),
                            )
                        },
                        |d| d.as_secs_f64(),
                    ),
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
        let mut rtts = Vec::with_capacity(n);
        let mut last_err = None;
        let mut handshake = Duration::MAX;
        while let Some(c) = opening.join_next().await {
            match c {
                Ok(Ok((c, rtt))) => {
                    conns.push(c);
                    rtts.push(rtt);
                    handshake = handshake.min(rtt);
                }
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
        // The round trip for the prefetch's budgets: the TCP handshake's,
        // not the DNS exchange's, which pays the radio's promotion when
        // the phone was idle (400 ms on LTE, 2 s on 3G).
        let rtt_s = handshake.as_secs_f64();
        let bdp = match &plan {
            Ok(p) => Some(bdp_bytes(p.bandwidth_bps, rtt_s)),
            Err(_) => None,
        };
        let has_document = prefetching && cfg.first_flight_budget;
        let hold = bdp.filter(|_| cfg.image_hold);
        let hold_elsewhere = bdp.filter(|_| cfg.hold_other_hosts_images);
        let sizes: HashMap<u32, u64> = match &r.hint {
            Ok(h) if plan.is_ok() => h
                .origins
                .iter()
                .flat_map(|o| o.objects.iter())
                .filter_map(|x| x.size().map(|s| (x.url_hash, s)))
                .collect(),
            _ => HashMap::new(),
        };
        let page = PagePrefetch::new(
            bdp,
            hold,
            hold_elsewhere,
            conns.len(),
            has_document,
            (sizes, mask),
            cfg.max_prefetches,
        );
        tracing::debug!(
            "proxy: {page_url}: {} connections after {:?}, handshake RTT {:?}, BDP {:?} B",
            conns.len(),
            t0.elapsed(),
            handshake,
            bdp
        );
        let pull = match &plan {
            Ok(p) if pulls(cfg.dispatch, prefetching) && conns.len() > 1 => {
                let rtt = Duration::try_from_secs_f64(p.radio_rtt_s + p.wired_rtt_s)
                    .unwrap_or(Duration::from_millis(100))
                    .max(Duration::from_millis(1));
                Some(Arc::new(Dispatcher::new(conns.len(), Some(rtt))))
            }
            _ => None,
        };
        // Seed 001: each connection's window from the hint's page size,
        // computation latency and α and the connection's own handshake.
        let iw_ask = rtts
            .iter()
            .map(|&rtt| {
                let segments = match &r.hint {
                    Ok(h) if cfg.use_hints && cfg.ask_initial_window => {
                        let c = crate::iw::choose(crate::iw::PageFacts::of_hint(h), rtt);
                        tracing::info!(
                            page = page_url,
                            bytes = c.facts.page_bytes,
                            computation_ms = ?c.facts.computation_ms,
                            alpha = c.facts.alpha,
                            rtt_ms = c.rtt_ms,
                            iw = c.segments,
                            fallback = ?c.fallback,
                            "proxy: initial window"
                        );
                        if c.worth_asking() {
                            c.segments
                        } else {
                            0
                        }
                    }
                    _ => 0,
                };
                AtomicU32::new(segments)
            })
            .collect();
        Ok(Session {
            host: host.to_string(),
            page_url: page_url.to_string(),
            scheme,
            addr,
            iw_ask,
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
                    lookups: cfg.lookups.clone(),
                }),
                (Ok(p), _) if prefetching => Some(PendingPrefetch {
                    urls: Urls::Ready(p.urls.clone()),
                    edge: cfg.edge,
                    timeout: cfg.timeout,
                    lookups: cfg.lookups.clone(),
                }),
                (_, Some(l)) => {
                    l.abort();
                    None
                }
                _ => None,
            }),
            prefetched: Mutex::new(HashMap::new()),
            document_head: tokio::sync::watch::channel(!(prefetching && cfg.images_after_document))
                .0,
            waiting_for_document: AtomicU64::new(0),
            document_sent: std::sync::OnceLock::new(),
            held_bytes: Arc::new(AtomicU64::new(0)),
            prefetch_started: AtomicU64::new(0),
            prefetch_taken: AtomicU64::new(0),
            page,
            opened: t0,
            handshake,
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
            Urls::Ready(urls) => self.start_prefetch(urls, p.edge, p.timeout, p.lookups),
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
                            me.start_prefetch(urls, p.edge, p.timeout, p.lookups);
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
    fn start_prefetch(
        self: &Arc<Self>,
        list: UrlList,
        edge: SocketAddr,
        timeout: Duration,
        lookups: super::LookupLimit,
    ) {
        self.page.learn_priorities(list.priorities);
        let mut by_host: HashMap<String, Vec<String>> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        for u in list.urls {
            let Some(host) = prefetch_host(&u, self.scheme) else {
                continue;
            };
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
                self.prefetch_here(urls, &self.page);
                continue;
            }
            let me = self.clone();
            let opener = opener.clone();
            let lookups = lookups.clone();
            tokio::spawn(async move {
                let room = lookups.room().await;
                let resolved = resolve_address(edge, &host, timeout).await;
                drop(room);
                let same = matches!(
                    &resolved,
                    Ok(r) if r.addrs.first() == Some(&me.addr.ip())
                );
                if same {
                    me.prefetch_here(urls, &me.page);
                } else if let Some(open) = opener {
                    if let Some(there) = (open.0)(me.scheme, host, resolved.ok()).await {
                        let n = there.prefetch_here(urls, &me.page);
                        me.prefetch_started.fetch_add(n, Ordering::Relaxed);
                    }
                }
            });
        }
    }

    /// Registers and fetches `urls` on this session for the page whose
    /// prefetch is `page`, skipping those already registered; returns how
    /// many it started. They are asked most urgent first
    /// ([`PagePrefetch::priority_of`], the page's order within an urgency), as a
    /// browser's connection would serve them, within the page's budget,
    /// images after the more urgent objects ([`PagePrefetch`]).
    fn prefetch_here(self: &Arc<Self>, mut urls: Vec<String>, page: &Arc<PagePrefetch>) -> u64 {
        let urgency = |u: &str| page.priority_of(u).urgency;
        prefetch_order(&mut urls, |u| page.priority_of(u));
        let mut started = Vec::new();
        {
            let mut m = lock(&self.prefetched);
            for u in urls {
                if m.contains_key(&u) {
                    continue;
                }
                let c = Arc::new(PrefetchCell::new());
                m.insert(u.clone(), (c.clone(), page.clone()));
                started.push((u, c));
            }
        }
        let n = started.len() as u64;
        self.prefetch_started.fetch_add(n, Ordering::Relaxed);
        // Counted before any starts, so that no image goes ahead of a
        // style sheet about to be asked for.
        let urgent: Vec<Option<u64>> = started
            .iter()
            .map(|(u, _)| (urgency(u) < LEAF_URGENCY).then(|| page.size_of(u)))
            .collect();
        page.urgent_started(urgent.iter().flatten().sum());
        for ((url, cell), urgent) in started.into_iter().zip(urgent) {
            let me = self.clone();
            let page = page.clone();
            tokio::spawn(async move {
                let _ = cell
                    .get_or_init(|| me.fetch_prefetch(url, &page, urgent.is_none()))
                    .await;
                if let Some(bytes) = urgent {
                    page.urgent_arrived(bytes);
                }
            });
        }
        n
    }

    /// A prefetch: an image waits for the urgent objects, then every
    /// object for room in the page's budget ([`PagePrefetch`]).
    async fn fetch_prefetch(
        self: &Arc<Self>,
        url: String,
        page: &PagePrefetch,
        leaf: bool,
    ) -> Result<Arc<Whole>, String> {
        if leaf {
            // Another host's session: its connection is not the page's,
            // and no origin orders this image behind the page's scripts.
            page.hold_leaves(!std::ptr::eq(Arc::as_ptr(&self.page), page))
                .await;
        }
        let _room = page.room_for(&url).await;
        let streams = page.streams.clone();
        // Never closed: an error cannot happen, and would only lift the cap.
        let _stream = streams.acquire_owned().await.ok();
        tracing::debug!("proxy: prefetch sends {url}");
        let r = self
            .fetch_whole(url.clone(), page.priority_of(&url), leaf)
            .await;
        tracing::debug!("proxy: prefetch got {url}");
        r
    }

    /// The quickest TCP handshake of the session's connections: a round
    /// trip after the radio's promotion, what the next load can plan with
    /// ([`ProxyConfig::recent_rtt`]).
    pub fn handshake_rtt(&self) -> Duration {
        self.handshake
    }

    /// The prefetch's in-flight budget of this session's page, bytes.
    pub fn prefetch_budget(&self) -> PrefetchBudget {
        let p = &self.page;
        PrefetchBudget {
            before_document: u64::from(p.small),
            open: p.open.load(Ordering::Relaxed),
            in_flight: p.in_flight.load(Ordering::Relaxed),
            images_held: p.leaves_held.load(Ordering::Relaxed),
            waiting_for_document: self.waiting_for_document.load(Ordering::Relaxed),
        }
    }

    /// When the connections and the URL list were ready.
    pub fn timeline(&self) -> Timeline {
        lock(&self.timeline).clone()
    }

    /// Lets this session open other hosts' sessions for its prefetch.
    pub(super) fn set_opener(&self, opener: Arc<Opener>) {
        *lock(&self.opener) = Some(opener);
    }

    /// Fetches `url` whole, placed as a browser request for it would be;
    /// a `leaf` (an image) placed on the document's connection goes once
    /// the document's response head has come ([`Session::document_head`]).
    async fn fetch_whole(
        self: &Arc<Self>,
        url: String,
        priority: Priority,
        leaf: bool,
    ) -> Result<Arc<Whole>, String> {
        let uri = http::Uri::try_from(url.as_str()).map_err(|e| e.to_string())?;
        let reveals = path_reveals(uri.path());
        let mut req = Request::get(uri).header(http::header::ACCEPT, "*/*");
        let priority = priority.header();
        if !priority.is_empty() {
            req = req.header("priority", priority);
        }
        let req = req
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .map_err(|e| e.to_string())?;
        let resp = self
            .forward_as(&url, self.warm_first && reveals, !reveals, leaf, req)
            .await?;
        let (parts, body) = resp.into_parts();
        let mut charge = Charge::new(self.held_bytes.clone());
        // What the response says it will bring is reserved before a byte
        // is read: many prefetches reading at once must not each buffer up
        // to the object limit before the session's limit is checked.
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(len) = declared {
            if len > MAX_PREFETCH_OBJECT as u64 {
                return Err(format!("{len} bytes is larger than a prefetch keeps"));
            }
            charge.at_least(len)?;
        }
        let mut body = Limited::new(body, MAX_PREFETCH_OBJECT);
        let mut whole = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.map_err(|e| e.to_string())?.into_data() {
                whole.extend_from_slice(&data);
                charge.at_least(whole.len() as u64)?;
            }
        }
        let body = whole.freeze();
        charge.settle(body.len() as u64);
        Ok(Arc::new(Whole {
            status: parts.status,
            headers: parts.headers,
            body,
            held: self.held_bytes.clone(),
        }))
    }

    /// The prefetched response of `url`, waiting for it if it is still on
    /// its way; `None` when it was not prefetched or failed (the caller
    /// then forwards the browser's request). With `document` (the browser
    /// asked for a document), a response that is not a redirect is the
    /// page's document: the browser has it, and the prefetch's budget
    /// opens, as when the document comes from the origin ([`Counted`]).
    /// The browser's request says what a document is; a URL does not
    /// (`/se`, `/pagead/…/`).
    pub(super) async fn take_prefetched(
        self: &Arc<Self>,
        url: &str,
        document: bool,
    ) -> Option<Arc<Whole>> {
        let (cell, page) = lock(&self.prefetched).remove(url)?;
        // Asked for before its prefetch started: it waits as the prefetch
        // would (the browser sent an image at low urgency).
        let leaf = page.priority_of(url).urgency >= LEAF_URGENCY;
        let r = cell
            .get_or_init(|| self.fetch_prefetch(url.to_string(), &page, leaf))
            .await;
        match r {
            Ok(w) => {
                self.prefetch_taken.fetch_add(1, Ordering::Relaxed);
                if document
                    && (!w.status.is_redirection()
                        || redirects_elsewhere(w.status, &w.headers, &self.host))
                {
                    page.document_done();
                }
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
        self.forward_as(url, on_first, held, false, req).await
    }

    /// [`Session::forward`]; `after_document`: placed on the first
    /// connection, the request waits for the document's response head.
    async fn forward_as(
        self: &Arc<Self>,
        url: &str,
        on_first: bool,
        held: bool,
        after_document: bool,
        req: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, String> {
        let Placement { slot, mut credit } = self.place(url, on_first, held).await;
        if after_document && slot == 0 {
            self.wait_for_document_head().await;
        }
        // The session's first request is its document: the prefetch
        // starts once that is on its way, so the document goes first.
        // A document (what a browser asks for with `Accept: text/html`)
        // that is not a redirect: its end opens the prefetch's budget. The
        // first request of a page is often a redirect; the document then
        // comes a round trip later, and the prefetch must not fill the link
        // before it.
        let asks_document = asks_for_document(req.headers());
        // Lifted when the head comes, and as well when the request fails
        // or the browser gives it up (dropped): images never wait for a
        // document that will not come.
        let _head = asks_document.then(|| LiftOnDrop(&self.document_head));
        let resp = self
            .send_then(slot, req, || {
                if asks_document {
                    let _ = self.document_sent.set(Instant::now());
                }
                self.kick_prefetch()
            })
            .await?;
        let document = asks_document && !resp.status().is_redirection();
        if asks_document && redirects_elsewhere(resp.status(), resp.headers(), &self.host) {
            tracing::debug!(
                "proxy: {}: the document moves to another host; the prefetch's budget lifts",
                self.page_url
            );
            self.page.document_done();
        }
        if document {
            tracing::debug!(
                "proxy: {}: document's response head after {:?} (since the session opened)",
                self.page_url,
                self.opened.elapsed()
            );
        }
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
                document: document.then(|| self.page.clone()),
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
        mut req: Request<ProxyBody>,
        sent: impl FnOnce(),
    ) -> Result<Response<Incoming>, String> {
        // The connection's first request carries its initial window.
        let ask = self
            .iw_ask
            .get(i)
            .map_or(0, |a| a.swap(0, Ordering::Relaxed));
        if ask > 0 {
            req.headers_mut()
                .insert(crate::iw::HEADER, http::HeaderValue::from(ask));
        }
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

    /// Until the document's response head has come on this session, and
    /// at most one round trip (the handshake's) after the document's
    /// request went out; at once when the session has no document to
    /// wait for. An image asked a round trip after the document reaches
    /// the origin a round trip after it: if the origin has the document
    /// ready within that, the document's bytes leave first; if the origin
    /// thinks longer over it (elsoberano.org: 1.1 s), the images use the
    /// link the document leaves idle, as before.
    async fn wait_for_document_head(&self) {
        let mut came = self.document_head.subscribe();
        if *came.borrow_and_update() {
            return;
        }
        let sent = self
            .document_sent
            .get()
            .copied()
            .unwrap_or_else(Instant::now);
        let Some(deadline) = sent.checked_add(self.handshake) else {
            return;
        };
        self.waiting_for_document.fetch_add(1, Ordering::Relaxed);
        let _counted = CountDown(&self.waiting_for_document);
        head_or_deadline(came, deadline.into()).await;
    }

    pub(super) fn idle_for(&self) -> Duration {
        self.last_used.lock().map_or(Duration::MAX, |t| t.elapsed())
    }

    pub(super) fn is_closed(&self) -> bool {
        self.conns.iter().all(|c| c.is_closed())
    }
}

/// The edge's answer for `host`: with the hint request for `page_url`
/// when the browser asked for a `document`, else the address alone.
pub(super) async fn lookup(
    cfg: &ProxyConfig,
    host: &str,
    page_url: &str,
    document: bool,
) -> Result<Resolved, SessionError> {
    let r = if document {
        resolve(cfg.edge, host, page_url, cfg.timeout).await
    } else {
        // Not a page: no hint request ([`resolve_address`]).
        resolve_address(cfg.edge, host, cfg.timeout).await
    };
    r.map_err(|e| SessionError::Resolve {
        host: host.to_string(),
        why: e.to_string(),
    })
}

/// A connection's byte stream: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// One HTTP/2 connection to the origin: h2c, or over TLS naming `host`
/// (ALPN `h2`) when `tls` is given; with the time its TCP handshake took
/// (a round trip).
async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<(Arc<rustls::ClientConfig>, String)>,
) -> Result<(http2::SendRequest<ProxyBody>, Duration), String> {
    let t0 = Instant::now();
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let rtt = t0.elapsed();
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
    Ok((send, rtt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_elsewhere_is_told_from_one_that_stays() {
        let moved = |status: u16, loc: Option<&[u8]>| {
            let mut h = http::HeaderMap::new();
            if let Some(l) = loc {
                h.insert(
                    http::header::LOCATION,
                    http::HeaderValue::from_bytes(l).unwrap(),
                );
            }
            redirects_elsewhere(StatusCode::from_u16(status).unwrap(), &h, "bing.com")
        };
        assert!(moved(301, Some(b"https://cn.bing.com/")));
        assert!(moved(302, Some(b"//cn.bing.com/x")));
        assert!(moved(302, Some(b"https://user@evil.example:8443/")));
        // Unreadable: the document may come anywhere.
        assert!(moved(302, Some(b"https://bad host/")));
        assert!(moved(302, Some(&[0xff, b'/'][..])));
        // Staying on the host.
        assert!(!moved(301, Some(b"https://BING.com/se")));
        assert!(!moved(302, Some(b"/se")));
        assert!(!moved(302, Some(b"se?q=1")));
        assert!(!moved(302, None));
        assert!(!moved(200, Some(b"https://cn.bing.com/")));
    }

    /// Images on the document's connection go when its head comes, or a
    /// round trip after its request if the origin is slower than that,
    /// or when the session is gone; never later.
    #[tokio::test]
    async fn images_wait_for_the_head_or_the_deadline() {
        let later = |ms| tokio::time::Instant::now() + Duration::from_millis(ms);
        let bounded = |f| tokio::time::timeout(Duration::from_secs(10), f);
        // The head comes first.
        let (tx, rx) = tokio::sync::watch::channel(false);
        let head = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.send_replace(true);
            tx
        });
        assert_eq!(bounded(head_or_deadline(rx, later(5_000))).await, Ok(true));
        let tx = head.await.unwrap();
        // Already come: at once, even past the deadline.
        assert_eq!(
            bounded(head_or_deadline(tx.subscribe(), later(0))).await,
            Ok(true)
        );
        // The origin is slower than the round trip: the deadline ends it.
        let (tx, rx) = tokio::sync::watch::channel(false);
        assert_eq!(bounded(head_or_deadline(rx, later(30))).await, Ok(false));
        // The session is gone.
        let rx = tx.subscribe();
        drop(tx);
        assert_eq!(
            bounded(head_or_deadline(rx, later(60_000))).await,
            Ok(false)
        );
    }

    #[test]
    fn the_prefetch_goes_only_to_named_hosts_of_the_page_scheme_and_port() {
        let ok = |u: &str| prefetch_host(u, "https");
        assert_eq!(
            ok("https://CDN.example/a.js").as_deref(),
            Some("cdn.example")
        );
        for refused in [
            "http://cdn.example/a.js",
            "https://cdn.example:8443/a.js",
            "https://cdn.example:443/a.js",
            "https://user@cdn.example/a.js",
            "https://cdn.example@127.0.0.1/a.js",
            "https://127.0.0.1/a.js",
            "https://[::1]/a.js",
            "/relative.js",
            "javascript:alert(1)",
            "",
        ] {
            assert_eq!(ok(refused), None, "{refused}");
        }
    }

    #[test]
    fn a_prefetch_body_is_charged_before_and_while_it_is_read() {
        let held = Arc::new(AtomicU64::new(MAX_PREFETCH_HELD - 1000));
        // A declared length past the session's limit fails before a byte
        // is read, and gives its reservation back.
        let mut c = Charge::new(held.clone());
        assert!(c.at_least(2000).is_err());
        drop(c);
        assert_eq!(held.load(Ordering::Relaxed), MAX_PREFETCH_HELD - 1000);
        // Without a length: charged as bytes arrive, refused at the limit.
        let mut c = Charge::new(held.clone());
        assert!(c.at_least(600).is_ok());
        assert!(c.at_least(900).is_ok());
        assert_eq!(held.load(Ordering::Relaxed), MAX_PREFETCH_HELD - 100);
        assert!(c.at_least(1200).is_err());
        drop(c);
        assert_eq!(held.load(Ordering::Relaxed), MAX_PREFETCH_HELD - 1000);
        // A body shorter than it declared: the whole counts what it is.
        let mut c = Charge::new(held.clone());
        assert!(c.at_least(800).is_ok());
        c.settle(300);
        assert_eq!(held.load(Ordering::Relaxed), MAX_PREFETCH_HELD - 700);
    }
}
