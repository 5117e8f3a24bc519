//! The client side of the proxy: a [`Session`] per page host resolves the
//! host with the hint request, plans n, opens the n h2c connections,
//! prefetches the hint's URLs and places every request (push or
//! rate-following pull). Programs use it without the proxy's front end.
//!
//! This file holds the session's state and what reads it plainly; each job
//! on it has a file of its own:
//!
//! - `open`: resolve with the hint, plan, connect, and set up what the
//!   plan decides ([`Session::open`], [`SessionError`]);
//! - `connect`: one HTTP/2 connection to the origin (TCP, TLS, h2c);
//! - `placement`: which connection a request goes on, and the leaves held
//!   for the rate-following rule ([`Session::place`], [`Placement`]);
//! - `forward`: the one path a request takes to the origin and its
//!   response back ([`Session::forward`], [`Session::send`]);
//! - `counted`: the response body that credits its bytes off its
//!   connection and lifts the prefetch's budget at the document's end;
//! - `document`: the document first (images wait for its head, a
//!   redirect elsewhere lifts the budget);
//! - `prefetch`: the hint's URLs requested ahead, on this session or the
//!   sessions of the page's other hosts ([`MAX_PREFETCH_HOSTS`]);
//! - `prefetch_budget`: what one page's prefetch shares over its hosts
//!   (the budget, the image hold; [`PrefetchBudget`]);
//! - `whole`: prefetched responses kept whole within the session's limit
//!   ([`MAX_PREFETCH_HELD`], [`MAX_PREFETCH_OBJECT`]).

mod connect;
mod counted;
mod document;
mod forward;
mod open;
mod placement;
mod prefetch;
mod prefetch_budget;
mod whole;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::client::conn::http2;
use mewa_model::sync::lock;

use crate::advice::{Fallback, Plan};
use crate::dispatch::Dispatcher;
use crate::proxy::ProxyBody;
use prefetch::{PendingPrefetch, Prefetched};
use prefetch_budget::PagePrefetch;

pub(in crate::proxy) use open::lookup;
pub use open::SessionError;
pub use placement::Placement;
pub(in crate::proxy) use prefetch::Opener;
pub use prefetch::MAX_PREFETCH_HOSTS;
pub use prefetch_budget::PrefetchBudget;
pub use whole::{MAX_PREFETCH_HELD, MAX_PREFETCH_OBJECT};

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
    /// more than one connection and
    /// [`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate).
    pull: Option<Arc<Dispatcher>>,
    /// Requests that waited in the proxy for a connection.
    held: AtomicU64,
    /// Style sheets and scripts on the first connection
    /// ([`ProxyConfig::warm_first`](crate::proxy::ProxyConfig::warm_first)), for prefetched ones too.
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

/// Takes one off a counter when dropped: a wait counted while it lasts,
/// also when it is dropped.
struct CountDown<'a>(&'a AtomicU64);

impl Drop for CountDown<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Session {
    /// The quickest TCP handshake of the session's connections: a round
    /// trip after the radio's promotion, what the next load can plan with
    /// ([`ProxyConfig::recent_rtt`](crate::proxy::ProxyConfig::recent_rtt)).
    pub fn handshake_rtt(&self) -> Duration {
        self.handshake
    }

    /// When the connections and the URL list were ready.
    pub fn timeline(&self) -> Timeline {
        lock(&self.timeline).clone()
    }

    /// Requests sent on each connection so far.
    pub fn requests_per_connection(&self) -> Vec<u64> {
        self.sent
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect()
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    pub(in crate::proxy) fn idle_for(&self) -> Duration {
        self.last_used.lock().map_or(Duration::MAX, |t| t.elapsed())
    }

    pub(in crate::proxy) fn is_closed(&self) -> bool {
        self.conns.iter().all(|c| c.is_closed())
    }
}
