//! Concurrent misses for one URL, collapsed into one upstream fetch (what
//! nginx calls `proxy_cache_lock`).
//!
//! Without it, an object that many phones ask for at once while it is not
//! stored (after a purge, a restart, or when a popular page changes) costs
//! the origin one request per phone until the first response is stored:
//! the accelerator would multiply the load it exists to absorb. With it,
//! the first miss fetches (the *leader*); the others wait until the
//! leader's response is stored or given up, at most `[cache]
//! lock_timeout_ms`, then look in the cache again and go to the origin
//! themselves only if the object is still not there.
//!
//! The wait ends when the leader's [`FillGuard`] is dropped: after its
//! body has been stored, or as soon as it is known that it will not be
//! (not storable, an upstream error, the client gone with nothing to
//! store). Waiters are never chained behind one another: one that finds no
//! stored response after waiting fetches on its own, without leading.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

type Inflight = Arc<Mutex<HashMap<String, watch::Receiver<()>>>>;

/// The fetches in flight, by cache key.
#[derive(Debug, Default)]
pub(crate) struct Fills {
    inflight: Inflight,
}

/// What a miss does.
pub(crate) enum Fill {
    /// Nobody is fetching this key: fetch it, holding the guard until the
    /// response is stored or will not be.
    Lead(FillGuard),
    /// Another request is fetching it: wait for it ([`wait`]).
    Wait(watch::Receiver<()>),
}

/// Held by the request that fetches a key; dropping it wakes the waiters.
pub(crate) struct FillGuard {
    inflight: Inflight,
    key: String,
    /// Never sent on: its drop is the signal.
    _done: watch::Sender<()>,
}

impl std::fmt::Debug for FillGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FillGuard").field("key", &self.key).finish()
    }
}

fn lock(m: &Inflight) -> std::sync::MutexGuard<'_, HashMap<String, watch::Receiver<()>>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Fills {
    /// Leads the fetch of `key`, or joins the one in flight.
    pub(crate) fn enter(&self, key: &str) -> Fill {
        let mut map = lock(&self.inflight);
        if let Some(rx) = map.get(key) {
            return Fill::Wait(rx.clone());
        }
        let (tx, rx) = watch::channel(());
        map.insert(key.to_string(), rx);
        Fill::Lead(FillGuard {
            inflight: self.inflight.clone(),
            key: key.to_string(),
            _done: tx,
        })
    }

    /// Fetches in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.inflight).len()
    }
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        // Out of the map first, so a request that comes after the waiters
        // wake leads a fetch of its own rather than waiting on a fill that
        // is over; the sender goes right after this body and wakes them.
        lock(&self.inflight).remove(&self.key);
    }
}

/// Waits until the fetch `rx` belongs to is over, at most `limit`;
/// whether it ended in time.
pub(crate) async fn wait(mut rx: watch::Receiver<()>, limit: Duration) -> bool {
    // `changed` fails once the sender is gone, which is the only way the
    // fill signals.
    tokio::time::timeout(limit, async { while rx.changed().await.is_ok() {} })
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_miss_leads_the_others_wait_until_it_is_dropped() {
        let fills = Fills::default();
        let Fill::Lead(guard) = fills.enter("http://b.example/x.png") else {
            panic!("the first miss leads");
        };
        let Fill::Wait(rx) = fills.enter("http://b.example/x.png") else {
            panic!("the second waits");
        };
        // Another key is independent.
        let Fill::Lead(_other) = fills.enter("http://b.example/y.png") else {
            panic!("another key leads its own fetch");
        };
        assert_eq!(fills.len(), 2);
        let waiter = tokio::spawn(wait(rx, Duration::from_secs(5)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "it waits while the leader fetches");
        drop(guard);
        assert!(waiter.await.expect("join"), "the drop ends the wait");
        assert_eq!(fills.len(), 1);
        // Once the fill is over, the next miss leads again.
        assert!(matches!(
            fills.enter("http://b.example/x.png"),
            Fill::Lead(_)
        ));
    }

    #[tokio::test]
    async fn a_wait_is_bounded() {
        let fills = Fills::default();
        let Fill::Lead(_guard) = fills.enter("k") else {
            panic!("leads");
        };
        let Fill::Wait(rx) = fills.enter("k") else {
            panic!("waits");
        };
        assert!(!wait(rx, Duration::from_millis(30)).await);
    }
}
