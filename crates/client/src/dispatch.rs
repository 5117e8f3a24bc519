//! The runtime half of dispatching requests over n connections: the pure
//! books ([`mewa_model::pull::Ledger`]) behind a lock, a clock, and a wake-up
//! for requests that wait for a connection.
//!
//! The proxy ([`crate::proxy::Session`]) and the lab's page loader both
//! place requests this way; they differ only in how they choose a
//! connection (the `choose` of [`Dispatcher::place_when`]) and in where the
//! delivered bytes come from. One copy of the wait loop keeps the subtle
//! part — a wake-up between the check and the wait must not be lost — in
//! one place.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mewa_model::pull::Ledger;
use tokio::sync::Notify;

/// The books of one group of connections, shared by the requests on it.
#[derive(Debug)]
pub struct Dispatcher {
    start: Instant,
    ledger: Mutex<Ledger>,
    /// Woken when a connection delivers, a request ends or one is placed.
    room: Notify,
}

impl Dispatcher {
    /// Books for `n` connections; `window`: measure each connection's
    /// delivery rate over this long (about one RTT), `None` for no rates.
    pub fn new(n: usize, window: Option<Duration>) -> Dispatcher {
        let window_us = window.map(|w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX));
        Dispatcher {
            start: Instant::now(),
            ledger: Mutex::new(Ledger::new(n, window_us)),
            room: Notify::new(),
        }
    }

    /// Microseconds since the books were opened.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        // A panic in another request must not stop every later one.
        mewa_model::sync::lock(&self.ledger)
    }

    /// Bytes asked of each connection and not yet delivered.
    pub fn outstanding(&self) -> Vec<u64> {
        self.lock().outstanding().to_vec()
    }

    /// Places a request of `bytes` at once on the connection `choose` picks
    /// from the outstanding bytes, and counts them there.
    pub fn place_now(&self, bytes: u64, choose: impl FnOnce(&[u64]) -> usize) -> usize {
        let mut l = self.lock();
        let i = choose(l.outstanding());
        l.ask(i, bytes);
        i
    }

    /// Places a request of `bytes` on the connection `choose` gives, asking
    /// again after every delivery, ended request or placement until it
    /// gives one; counts the bytes there and wakes the other waiters (the
    /// next may fit too). `choose` runs under the books' lock, with the
    /// time. `waiting` runs once, the first time the request has to wait.
    pub async fn place_when(
        &self,
        bytes: u64,
        mut choose: impl FnMut(&mut Ledger, u64) -> Option<usize>,
        waiting: impl FnOnce(),
    ) -> usize {
        let mut waiting = Some(waiting);
        loop {
            // Registered before the check: `notify_waiters` reaches every
            // `Notified` that exists, so a wake between the check and the
            // await is not lost.
            let notified = self.room.notified();
            {
                let mut l = self.lock();
                let now = self.now_us();
                if let Some(i) = choose(&mut l, now) {
                    l.ask(i, bytes);
                    drop(l);
                    self.room.notify_waiters();
                    return i;
                }
            }
            if let Some(w) = waiting.take() {
                w();
            }
            notified.await;
        }
    }

    /// The running count of a request of `bytes` placed on `slot`.
    pub fn credit(self: &Arc<Self>, slot: usize, bytes: u64) -> Credit {
        Credit {
            books: self.clone(),
            slot,
            left: bytes,
        }
    }
}

/// A placed request's bytes still counted as outstanding on its
/// connection: counted off as they arrive, the rest when it ends or is
/// dropped (a failed or cancelled request must not hold its connection's
/// count up).
#[derive(Debug)]
pub struct Credit {
    books: Arc<Dispatcher>,
    slot: usize,
    left: u64,
}

impl Credit {
    /// The connection the request is on.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Bytes still counted.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// The request is `len` bytes after all (a response's Content-Length
    /// against the hint's estimate): count that instead.
    pub fn resize(&mut self, len: u64) {
        let mut l = self.books.lock();
        l.count_off(self.slot, self.left);
        l.ask(self.slot, len);
        self.left = len;
    }

    /// `bytes` arrived: counted off (up to what is left) and logged for the
    /// connection's rate (all of them: they crossed the link).
    pub fn take(&mut self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let b = bytes.min(self.left);
        self.left -= b;
        {
            let now = self.books.now_us();
            let mut l = self.books.lock();
            l.count_off(self.slot, b);
            l.log_delivery(self.slot, now, bytes);
        }
        self.books.room.notify_waiters();
    }
}

impl Drop for Credit {
    fn drop(&mut self) {
        if self.left > 0 {
            self.books.lock().count_off(self.slot, self.left);
            self.left = 0;
            self.books.room.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mewa_model::pull::PULL_FLOOR_BYTES as F;

    #[tokio::test]
    async fn a_waiting_request_goes_when_a_delivery_makes_room() {
        let d = Arc::new(Dispatcher::new(2, Some(Duration::from_secs(60))));
        let first = d.place_now(100_000, |_| 0);
        assert_eq!(first, 0);
        let mut on_first = d.credit(0, 100_000);
        // A large object: nothing proven, something in flight: it waits.
        let waited = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let w = waited.clone();
        let d2 = d.clone();
        let task = tokio::spawn(async move {
            d2.place_when(
                90_000,
                |l, now| l.earliest(90_000, F, now),
                move || {
                    w.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                },
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!task.is_finished());
        assert_eq!(waited.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Connection 0 delivers 60 KB: proven, and it holds less than twice
        // its rate, so the large object goes there.
        on_first.take(60_000);
        let slot = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(slot, 0);
        assert_eq!(d.outstanding(), vec![130_000, 0]);
        assert_eq!(waited.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Dropping the credit counts off what never came.
        drop(on_first);
        assert_eq!(d.outstanding(), vec![90_000, 0]);
    }

    #[test]
    fn a_credit_counts_off_what_arrives_and_follows_a_resize() {
        let d = Arc::new(Dispatcher::new(2, None));
        let i = d.place_now(5_000, |out| out.len() - 1);
        let mut c = d.credit(i, 5_000);
        assert_eq!(d.outstanding(), vec![0, 5_000]);
        c.resize(8_000);
        assert_eq!(d.outstanding(), vec![0, 8_000]);
        c.take(3_000);
        assert_eq!((c.left(), d.outstanding()), (5_000, vec![0, 5_000]));
        // A body longer than announced never counts below zero.
        c.take(9_000);
        assert_eq!((c.left(), d.outstanding()), (0, vec![0, 0]));
        drop(c);
        assert_eq!(d.outstanding(), vec![0, 0]);
    }
}
