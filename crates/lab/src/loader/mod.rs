//! The built-in browser stand-in: loads one corpus page the way a browser
//! does and records every object and connection ([`crate::record`]).
//!
//! Discovery follows the browser's order:
//! - the root document first;
//! - an HTML document's references (`discovery: html`) are requested as its
//!   bytes arrive, each once the bytes holding its URL are in (a browser's
//!   preload scanner; [`LoadOptions::streaming`], on by default);
//! - when a CSS file has arrived completely, the objects its rules
//!   reference (`discovery: css`) are requested at once, in page order;
//! - a redirect's target when the redirect has arrived (recorded pages);
//! - when a script has arrived, it runs on the page's single main thread for
//!   its `compute_ms` (scripts queue behind each other, as on a browser's
//!   main thread), and only then are the objects it fetches
//!   (`discovery: script`) requested.
//!
//! - with [`LoadOptions::prefetch`] (a client that knows the page's object
//!   URLs from a hint), those objects are requested right after the
//!   document, and discovery later finds them already requested.
//!
//! Requests carry Chromium's RFC 9218 `priority` header
//! ([`chromium_priorities`]), which the origin's HTTP/2 server schedules
//! by, so the no-hint baseline is served as Chromium would be.
//!
//! Connections:
//! - **HTTP/1.1**: one request at a time per connection, up to
//!   [`LoadOptions::connections`] (default 6, Chrome's limit) per host; a
//!   request waits for a free connection when all are busy.
//! - **HTTP/2 and HTTP/3**: [`LoadOptions::connections`] multiplexed
//!   connections per origin group (1 = a browser's behaviour); an [`Assign`]
//!   policy decides which connection carries each object. With
//!   [`LoadOptions::coalesce`], hosts that resolve to the same address share
//!   the group, as Chrome coalesces HTTP/2 connections when the certificate
//!   covers every name.
//! - **Across loads**: [`load`] starts cold and closes its connections
//!   when it ends; a [`Session`] keeps them open for its next load (a
//!   browser's page views with think time between, seed 003), replacing
//!   those that died meanwhile.

mod conn;
mod pool;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mewa_corpus::{Discovery, Kind, Object, Page};
use tokio::task::JoinSet;

use crate::record::{LoadRecord, ObjectTiming, Protocol};

pub use conn::ConnectError;

/// Which of a group's connections carries an object (HTTP/2 and HTTP/3 with
/// more than one connection). Seed 000's client balances by size; a plain
/// browser has one connection and never asks.
pub trait Assign: Send + Sync + std::fmt::Debug {
    /// Index in `0..outstanding.len()` of the connection for `object`;
    /// `outstanding[i]` is the number of body bytes (the corpus sizes)
    /// requested on connection `i` and not yet received (with
    /// [`LoadOptions::pull_budget`], counted down as the bytes arrive;
    /// otherwise when each object completes). An index out of
    /// range is taken modulo the number of connections.
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize;
}

/// Objects go to the connections in turn.
#[derive(Debug, Default)]
pub struct RoundRobin(AtomicUsize);

impl Assign for RoundRobin {
    fn pick(&self, _object: &Object, outstanding: &[u64]) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed) % outstanding.len().max(1)
    }
}

/// Each object goes to the connection with the fewest outstanding bytes
/// (ties to the lowest index): greedy balancing by size as objects are
/// discovered.
#[derive(Debug, Default, Clone, Copy)]
pub struct LeastOutstanding;

impl Assign for LeastOutstanding {
    fn pick(&self, _object: &Object, outstanding: &[u64]) -> usize {
        outstanding
            .iter()
            .enumerate()
            .min_by_key(|&(i, &b)| (b, i))
            .map_or(0, |(i, _)| i)
    }
}

/// Objects that reveal others (HTML, CSS, scripts) go to connection 0 —
/// the one that carried the document, whose window has grown — and the
/// rest (images, fonts: leaves) to the connection with the fewest
/// outstanding bytes. Why: preconnected extra connections sit idle while
/// the document loads and are still at their initial window when its
/// children are requested; a CSS file placed on one finishes late and
/// delays everything it reveals (docs/LAB-RESULTS.md).
#[derive(Debug, Default, Clone, Copy)]
pub struct WarmFirst;

impl WarmFirst {
    /// Whether an object can reveal others (by content type).
    pub fn reveals(object: &Object) -> bool {
        let t = object.content_type.as_str();
        t.starts_with("text/html") || t.starts_with("text/css") || t.contains("javascript")
    }
}

impl Assign for WarmFirst {
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize {
        if WarmFirst::reveals(object) {
            0
        } else {
            LeastOutstanding.pick(object, outstanding)
        }
    }
}

/// A precomputed object → connection map (e.g. seed 000's size-balanced
/// assignment from a hint), keyed by URL; objects it does not name go to
/// the least-loaded connection.
#[derive(Debug, Default, Clone)]
pub struct Fixed {
    /// `scheme-less URL` (`host` + `path`) → connection index.
    pub map: HashMap<String, usize>,
}

impl Fixed {
    /// The key [`Fixed::map`] uses for an object.
    pub fn key(object: &Object) -> String {
        format!("{}{}", object.host, object.path)
    }
}

impl Assign for Fixed {
    fn pick(&self, object: &Object, outstanding: &[u64]) -> usize {
        match self.map.get(&Fixed::key(object)) {
            Some(&i) => i,
            None => LeastOutstanding.pick(object, outstanding),
        }
    }
}

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

    fn uses_tls(&self) -> bool {
        self.tls || self.protocol == Protocol::H3
    }
}

/// Why a load could not start at all (problems during the load are kept in
/// the record instead).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The page has no root document; validate the corpus first.
    #[error("page `{0}` has no root document")]
    NoRoot(String),
    /// TLS or HTTP/3 was asked for without the CA certificate.
    #[error("TLS and HTTP/3 need the CA certificate of the origin (the test CA's ca.pem)")]
    NoCa,
    /// The TLS client or QUIC endpoint could not be set up.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Zero connections were asked for.
    #[error("connections must be at least 1")]
    NoConnections,
}

/// A URL list that arrives during a load ([`LoadOptions::prefetch_later`]).
pub type LateUrls = tokio::sync::watch::Receiver<Option<Arc<Vec<String>>>>;

/// What the driver waits for.
enum Step {
    /// An object finished (successfully or not).
    Fetched(Box<ObjectTiming>),
    /// A script's computation ended; its script-discovered children may go.
    Ran(u32),
}

/// Loads `page` and records it. Runs on the current tokio runtime; the
/// sockets it opens belong to the calling thread's network namespace (the
/// lab runs it on a thread inside the client's namespace).
///
/// Every load starts cold: its connections close when it ends. A
/// [`Session`] keeps them for the next load.
pub async fn load(page: &Page, opts: &LoadOptions) -> Result<LoadRecord, LoadError> {
    // A page without a root is refused before the options are looked at.
    page.root()
        .ok_or_else(|| LoadError::NoRoot(page.name.clone()))?;
    Session::new(opts.clone())?.run(page, true).await
}

/// A browser's connections over several page loads, one after another:
/// what one load opens, the next reuses — HTTP/1.1 keep-alive connections
/// idle per host (up to [`LoadOptions::connections`]), the HTTP/2 or
/// HTTP/3 connections of each origin group. Seed 003 studies what TCP
/// does to such a connection after the think time between page views
/// (slow start after idle, timeouts after the radio slept); a cold
/// [`load`] cannot show it.
///
/// A pooled connection found closed (the server's idle timeout, a restart)
/// is replaced before use; a request that fails before its response on a
/// connection an earlier load opened is sent again once on a fresh
/// connection, as browsers do, so the object does not fail.
///
/// Each load's record lists the connections it used: those it opened and
/// those it reused ([`crate::record::ConnectionTiming::reused`]); the ones
/// the session keeps open have no `close_us`. Loads on one session take
/// turns (a second one waits for the first to end), as pages in one tab.
/// Dropping the session, or [`Session::close`], closes every connection.
pub struct Session {
    pool: Arc<pool::Pool>,
    turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("opts", self.pool.opts())
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.pool.close();
    }
}

impl Session {
    /// A session whose loads follow `opts`; sets up the TLS client and
    /// QUIC endpoint once. Refuses zero connections, and TLS or HTTP/3
    /// without a CA, before any I/O.
    pub fn new(opts: LoadOptions) -> Result<Session, LoadError> {
        if opts.connections == 0 {
            return Err(LoadError::NoConnections);
        }
        let scheme = if opts.uses_tls() { "https" } else { "http" };
        Ok(Session {
            pool: Arc::new(pool::Pool::new(opts, scheme)?),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// The options every load of the session follows.
    pub fn options(&self) -> &LoadOptions {
        self.pool.opts()
    }

    /// Loads `page` as [`load`] does (same discovery, times from this
    /// load's start) over the session's connections, and leaves them open
    /// for the next load. Runs on the current tokio runtime, which must be
    /// the one of the session's earlier loads (their connections' tasks
    /// run there).
    pub async fn load(&self, page: &Page) -> Result<LoadRecord, LoadError> {
        self.run(page, false).await
    }

    /// Closes every connection of the session.
    pub fn close(self) {
        self.pool.close();
    }

    async fn run(&self, page: &Page, closing: bool) -> Result<LoadRecord, LoadError> {
        let _turn = self.turn.lock().await;
        load_on(&self.pool, page, closing).await
    }
}

/// One load over `pool`'s connections; `closing`: the pool closes with the
/// load, so every connection is recorded closed at the load's end (a cold
/// [`load`]).
async fn load_on(
    pool: &Arc<pool::Pool>,
    page: &Page,
    closing: bool,
) -> Result<LoadRecord, LoadError> {
    let root = page
        .root()
        .ok_or_else(|| LoadError::NoRoot(page.name.clone()))?
        .clone();
    let opts = pool.opts();
    let scheme = pool.scheme();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<(u32, u64)>();
    let body_scheme = if scheme == "https" {
        mewa_corpus::Scheme::Https
    } else {
        mewa_corpus::Scheme::Http
    };
    // Where each HTML body's references end, for discovery as it streams.
    let ends: HashMap<u32, Vec<(u32, u64)>> = if opts.streaming {
        page.objects
            .iter()
            .filter(|o| o.kind() == Kind::Html)
            .map(|o| {
                let e = mewa_corpus::reference_ends(page, o.id, body_scheme).unwrap_or_default();
                (o.id, e)
            })
            .collect()
    } else {
        HashMap::new()
    };
    let mut revealed: HashMap<u32, usize> = HashMap::new();
    let priority = if opts.priorities {
        chromium_priorities(page)
    } else {
        HashMap::new()
    };
    let shared = Arc::new(pool::Load::new(
        Arc::clone(pool),
        opts.streaming.then_some(progress_tx),
        priority,
    ));

    let mut record = LoadRecord {
        page: page.name.clone(),
        url: root.url(scheme),
        protocol: opts.protocol,
        tls: opts.uses_tls(),
        started_unix_ms,
        done_us: None,
        objects: Vec::new(),
        connections: Vec::new(),
        errors: Vec::new(),
    };

    if opts.preconnect {
        shared.preconnect(&root).await;
    }

    let mut tasks: JoinSet<Step> = JoinSet::new();
    // Objects requested and not yet finished, for the timeout report.
    let mut pending: HashMap<u32, (Object, u64)> = HashMap::new();
    let mut main_free_us = 0u64;
    let deadline = tokio::time::Instant::now() + opts.timeout;

    // Objects already requested (prefetched ones are not requested again
    // when their parent reveals them).
    let mut requested: HashSet<u32> = HashSet::new();
    let mut spawn_fetch =
        |tasks: &mut JoinSet<Step>, pending: &mut HashMap<u32, (Object, u64)>, object: Object| {
            if !requested.insert(object.id) {
                return;
            }
            let discovered = shared.now_us();
            pending.insert(object.id, (object.clone(), discovered));
            let s = Arc::clone(&shared);
            tasks.spawn(async move { Step::Fetched(Box::new(s.fetch(object, discovered).await)) });
        };
    spawn_fetch(&mut tasks, &mut pending, root);
    let by_url: HashMap<String, &Object> =
        if opts.prefetch.is_empty() && opts.prefetch_later.is_none() {
            HashMap::new()
        } else {
            page.objects.iter().map(|o| (o.url(scheme), o)).collect()
        };
    for url in &opts.prefetch {
        if let Some(&o) = by_url.get(url.as_str()) {
            spawn_fetch(&mut tasks, &mut pending, o.clone());
        }
    }
    let mut late_waiting = opts.prefetch_later.is_some();
    let late = {
        let rx = opts.prefetch_later.clone();
        async move {
            let mut rx = rx?;
            let v = rx.wait_for(Option::is_some).await.ok()?.clone();
            v
        }
    };
    tokio::pin!(late);

    loop {
        let next = tokio::select! {
            biased;
            Some((id, bytes)) = progress_rx.recv() => {
                // The document streams in: request what its bytes so far
                // reference.
                if let Some(list) = ends.get(&id) {
                    let at = revealed.entry(id).or_insert(0);
                    while let Some(&(child, end)) = list.get(*at) {
                        if end > bytes {
                            break;
                        }
                        *at += 1;
                        if let Some(c) = page.object(child) {
                            spawn_fetch(&mut tasks, &mut pending, c.clone());
                        }
                    }
                }
                continue;
            }
            urls = &mut late, if late_waiting => {
                late_waiting = false;
                for url in urls.iter().flat_map(|u| u.iter()) {
                    if let Some(&o) = by_url.get(url.as_str()) {
                        spawn_fetch(&mut tasks, &mut pending, o.clone());
                    }
                }
                continue;
            }
            next = tokio::time::timeout_at(deadline, tasks.join_next()) => next,
        };
        let step = match next {
            Err(_) => {
                record.errors.push(format!(
                    "timed out after {:.1} s with {} objects unfinished",
                    opts.timeout.as_secs_f64(),
                    pending.len()
                ));
                tasks.abort_all();
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                record.errors.push(format!("loader task failed: {e}"));
                continue;
            }
            Ok(Some(Ok(step))) => step,
        };
        match step {
            Step::Fetched(timing) => {
                pending.remove(&timing.id);
                let ok = timing.ok();
                let id = timing.id;
                record.objects.push(*timing);
                if !ok {
                    continue;
                }
                let Some(obj) = page.object(id) else { continue };
                for child in page.children(id, Discovery::Redirect) {
                    spawn_fetch(&mut tasks, &mut pending, child.clone());
                }
                if !mewa_corpus::page::carries_references(obj.status()) {
                    continue;
                }
                match obj.kind() {
                    kind @ (Kind::Html | Kind::Css) => {
                        let how = if kind == Kind::Html {
                            Discovery::Html
                        } else {
                            Discovery::Css
                        };
                        for child in page.children(id, how) {
                            spawn_fetch(&mut tasks, &mut pending, child.clone());
                        }
                    }
                    Kind::Script => {
                        // The main thread runs one script at a time.
                        let now = shared.now_us();
                        let start = main_free_us.max(now);
                        main_free_us = start + u64::from(obj.compute_ms) * 1000;
                        let wait = Duration::from_micros(main_free_us - now);
                        tasks.spawn(async move {
                            tokio::time::sleep(wait).await;
                            Step::Ran(id)
                        });
                    }
                    _ => {}
                }
            }
            Step::Ran(id) => {
                for child in page.children(id, Discovery::Script) {
                    spawn_fetch(&mut tasks, &mut pending, child.clone());
                }
            }
        }
    }

    let end = shared.now_us();
    for (_, (object, discovered)) in pending {
        let mut t = pool::unstarted(&object, scheme, discovered);
        t.error = Some("unfinished when the load gave up".into());
        record.objects.push(t);
    }
    if record.errors.is_empty() {
        record.done_us = record.objects.iter().filter_map(|o| o.end_us).max();
    }
    if closing {
        pool.close();
    }
    record.connections = shared.finish(closing.then_some(end));
    record
        .objects
        .sort_by_key(|o| (o.discovered_us, o.request_us, o.id));
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::Discovery;

    fn obj(content_type: &str) -> Object {
        Object {
            id: 1,
            host: "a.example".into(),
            path: "/x".into(),
            size: 1000,
            content_type: content_type.into(),
            parent: Some(0),
            discovery: Discovery::Html,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    #[test]
    fn warm_first_keeps_revealing_objects_on_the_document_connection() {
        let loads = [50_000, 0, 10];
        for t in [
            "text/html",
            "text/css",
            "application/javascript",
            "text/javascript",
        ] {
            assert_eq!(WarmFirst.pick(&obj(t), &loads), 0, "{t}");
        }
        for t in ["image/jpeg", "font/woff2"] {
            assert_eq!(WarmFirst.pick(&obj(t), &loads), 1, "{t}");
        }
    }
}
