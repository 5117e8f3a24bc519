//! Which connection a request goes on ([`Session::pick`],
//! [`Session::place`]): the document (and with warm-first what can reveal
//! other objects) on the first, a listed object where the hint's
//! size-balanced assignment put it, the rest on the least loaded, or,
//! under [`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate), a leaf
//! held in the proxy until the connection that would finish it first has
//! room.
//!
//! Apart from the sending because the choice is seed 000's part of the
//! proxy (and the rate-following rule the lab's), while the sending is the
//! same for every choice.

use std::sync::atomic::Ordering;

use mewa_model::pull::PULL_FLOOR_BYTES;

use super::Session;
use crate::dispatch::Credit;

/// A request's connection, chosen by [`Session::place`]. Its bytes count as
/// outstanding there until it is dropped.
pub struct Placement {
    pub(super) slot: usize,
    /// Its bytes on the books, under
    /// [`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate).
    pub(super) credit: Option<Credit>,
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

impl Session {
    /// Requests that waited in the proxy for a connection
    /// ([`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate)).
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Bytes asked of each connection and not yet passed on
    /// ([`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate); empty
    /// otherwise). All zero once every response has ended or been dropped.
    pub fn outstanding(&self) -> Vec<u64> {
        self.pull
            .as_ref()
            .map(|p| p.outstanding())
            .unwrap_or_default()
    }

    /// Whether this session holds leaves for the rate-following rule
    /// ([`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate)).
    pub fn pulls(&self) -> bool {
        self.pull.is_some()
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
    /// connection. `held`: a leaf, which under
    /// [`Dispatch::PullRate`](crate::proxy::Dispatch::PullRate) waits until
    /// [`earliest_completion`](mewa_model::pull::earliest_completion) gives
    /// it a connection; everything else goes where [`Session::pick`] says
    /// at once.
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
}
