//! The origin's response body on its way to the browser ([`Counted`]):
//! each data frame is credited off its connection's books for the
//! rate-following dispatch as it passes, and the end of the page's
//! document lifts the prefetch's budget.
//!
//! Apart from the forwarding that wraps it because it is a `Body`
//! implementation, polled by hyper long after the forwarding has returned;
//! what it does on each frame and at its end is all there is to it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::prefetch_budget::PagePrefetch;
use crate::dispatch::Credit;

/// The origin's response body, counted off its connection as it passes.
pub(super) struct Counted {
    inner: Incoming,
    credit: Option<Credit>,
    /// The session's document: its end opens the prefetch's budget.
    document: Option<Arc<PagePrefetch>>,
}

impl Counted {
    /// `inner` credited to `credit` as it passes; with `document`, its end
    /// (or its drop) lifts that page's budget.
    pub(super) fn new(
        inner: Incoming,
        credit: Option<Credit>,
        document: Option<Arc<PagePrefetch>>,
    ) -> Counted {
        Counted {
            inner,
            credit,
            document,
        }
    }

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
