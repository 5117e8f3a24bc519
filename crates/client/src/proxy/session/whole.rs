//! Responses read whole and kept for the browser ([`Whole`]), and what
//! they count against the session's limit on held bytes while they are
//! read and after ([`Charge`]).
//!
//! Apart from the prefetch that asks for them because this is the part a
//! hostile hint aims at: a hint is unauthenticated, and its URL list must
//! not make the proxy buffer a huge page. The bounds and their accounting
//! read, and are tested, on their own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Limited};

use crate::proxy::ProxyBody;

/// Most body bytes one session keeps of prefetched objects the browser has
/// not asked for yet: a hint is unauthenticated, and a hostile one must not
/// make the proxy buffer a huge page. Objects past it are not kept (the
/// browser's request then goes to the origin as usual).
pub const MAX_PREFETCH_HELD: u64 = 64 << 20;

/// Largest single object the proxy prefetches whole.
pub const MAX_PREFETCH_OBJECT: usize = 16 << 20;

/// A whole response, kept for the browser.
#[derive(Debug)]
pub(in crate::proxy) struct Whole {
    pub(in crate::proxy) status: StatusCode,
    pub(in crate::proxy) headers: http::HeaderMap,
    pub(in crate::proxy) body: Bytes,
    /// Counted in the session's held bytes until dropped.
    held: Arc<AtomicU64>,
}

impl Drop for Whole {
    fn drop(&mut self) {
        self.held
            .fetch_sub(self.body.len() as u64, Ordering::Relaxed);
    }
}

/// Reads `resp` whole, counting its body in the session's `held` bytes:
/// refused past [`MAX_PREFETCH_OBJECT`] for the object, or past
/// [`MAX_PREFETCH_HELD`] for the session.
pub(super) async fn read_whole(
    resp: Response<ProxyBody>,
    held: &Arc<AtomicU64>,
) -> Result<Arc<Whole>, String> {
    let (parts, body) = resp.into_parts();
    let mut charge = Charge::new(held.clone());
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
        held: held.clone(),
    }))
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

#[cfg(test)]
mod tests {
    use super::*;

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
