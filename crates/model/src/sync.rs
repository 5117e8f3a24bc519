//! One poison-tolerant lock for every crate that shares books between
//! tasks or threads (the proxy's sessions, the loader's record, the
//! dispatch ledger, the link emulator's statistics, a progress sink).
//!
//! A `Mutex` is poisoned when a thread panics while holding it. Everything
//! these locks guard stays consistent between statements (counters,
//! records, queues updated in one step), so a panic in one request or one
//! load must not turn every later `lock()` into a second panic: the guard
//! is taken as it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, whether or not another thread panicked while holding it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = lock(&m2);
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
