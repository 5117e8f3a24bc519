//! What one page's prefetch shares over every host it reaches
//! ([`PagePrefetch`]): the in-flight budget until the document arrives, the
//! hold that keeps images behind the more urgent objects, the cap on
//! prefetch streams, and the hint's sizes and priorities those count by.
//!
//! Apart from the prefetch itself because it belongs to the page, not to a
//! session: the sessions of the page's other hosts take room from the same
//! budget, so it is a value of its own with no connections, shared by
//! `Arc`, whose rules read without the sending around them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mewa_hint::wire::Priority;
use mewa_model::pull::PULL_FLOOR_BYTES;
use mewa_model::sync::lock;

use super::CountDown;
use crate::proxy::url_priority;

/// The urgency (RFC 9218) from which a prefetched object waits for the
/// more urgent ones ([`PagePrefetch::hold_leaves`]): images.
pub(super) const LEAF_URGENCY: u8 = 3;

/// Bytes of one connection's initial window ([`mewa_model::DEFAULT_IW`]
/// segments of 1460 bytes).
const INITIAL_WINDOW_BYTES: u64 = mewa_model::DEFAULT_IW as u64 * 1460;

/// One bandwidth-delay product, at least [`PULL_FLOOR_BYTES`]: the bytes of
/// more urgent objects in flight below which prefetched images start, and
/// the prefetch's budget while the document is on its way.
pub(super) fn bdp_bytes(bandwidth_bps: f64, rtt_s: f64) -> u64 {
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
pub(super) struct PagePrefetch {
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
    /// together ([`crate::proxy::ProxyConfig::max_prefetches`]).
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
    pub(super) fn new(
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
    pub(super) fn learn_priorities(&self, more: HashMap<String, Priority>) {
        lock(&self.priorities).extend(more);
    }

    /// The priority to ask `url` with: the hint's, else guessed from the
    /// URL.
    pub(super) fn priority_of(&self, url: &str) -> Priority {
        lock(&self.priorities)
            .get(url)
            .copied()
            .unwrap_or_else(|| url_priority(url))
    }

    /// The document has arrived: the budget lifts, and the prefetches
    /// waiting for room go.
    pub(super) fn document_done(&self) {
        if !self.open.swap(true, Ordering::Relaxed) {
            tracing::debug!("proxy: document done, budget lifts");
        }
        self.bytes.close();
    }

    /// The hint's size of `url`; for an object the hint does not size, two
    /// initial windows (a guess that still counts it).
    pub(super) fn size_of(&self, url: &str) -> u64 {
        let h = mewa_hint::wire::url_hash(url) & self.mask;
        self.sizes
            .get(&h)
            .copied()
            .unwrap_or(PULL_FLOOR_BYTES)
            .max(1)
    }

    /// Waits for room in the budget for `url` while the budget holds; the
    /// room is given back when the returned [`Room`] is dropped.
    pub(super) async fn room_for(&self, url: &str) -> Room {
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

    /// Waits for room for one more prefetch request in flight
    /// ([`crate::proxy::ProxyConfig::max_prefetches`]); the room comes back
    /// when the permit is dropped.
    pub(super) async fn stream_room(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        // Never closed: an error cannot happen, and would only lift the cap.
        self.streams.clone().acquire_owned().await.ok()
    }

    /// Waits until the urgent bytes on their way are within
    /// [`PagePrefetch::leaves_below`] (`elsewhere`: an image on another
    /// host's session, [`PagePrefetch::elsewhere_below`]).
    pub(super) async fn hold_leaves(&self, elsewhere: bool) {
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

    pub(super) fn urgent_started(&self, bytes: u64) {
        *lock(&self.urgent_left) += bytes;
    }

    pub(super) fn urgent_arrived(&self, bytes: u64) {
        let mut l = lock(&self.urgent_left);
        *l = l.saturating_sub(bytes);
        drop(l);
        self.urgent_fell.notify_waiters();
    }

    /// The budget as it stands, with `waiting_for_document` images of the
    /// page's session waiting for the document's response head.
    pub(super) fn report(&self, waiting_for_document: u64) -> PrefetchBudget {
        PrefetchBudget {
            before_document: u64::from(self.small),
            open: self.open.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            images_held: self.leaves_held.load(Ordering::Relaxed),
            waiting_for_document,
        }
    }
}

/// A prefetch's room in its page's budget ([`PagePrefetch::room_for`]).
pub(super) struct Room {
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    bytes: u64,
    in_flight: Arc<AtomicU64>,
}

impl Drop for Room {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A page's prefetch budget ([`super::Session::prefetch_budget`]), bytes.
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
