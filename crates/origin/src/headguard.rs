//! An HTTP/1.1 connection's two waits, told apart: the idle wait for a
//! next request (keep-alive) and the wait for a request that has started.
//!
//! hyper times both with one timer (`header_read_timeout`), which starts
//! when the connection begins waiting for a request head, so an idle
//! keep-alive connection and a slowloris client get the same limit. A
//! short limit protects the server but closes the connections a browser
//! keeps between page loads, and on a cellular link the server's FIN then
//! wakes the radio during the user's think time (seed 003's setting). A
//! long limit keeps them but lets a client drip a head for as long.
//!
//! [`HeadGuard`] wraps the stream: hyper's timer is set to the keep-alive
//! limit, and the guard fails the read side once a request has been
//! arriving for longer than the header limit. A request "has been
//! arriving" from the first byte read after the server last wrote (or
//! since the connection began) until the service says it has the whole
//! request ([`Received::mark`]: the origin marks it once it has read the
//! (small, bounded) body, so the limit covers head and body) or the server
//! writes again. The service's mark matters because hyper keeps reading
//! while it answers (to see the client close): without it, a response held
//! back longer than the limit (emulated server think time) would be cut.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner` with a limit on how long a request may take to arrive; see the
/// module's documentation.
pub struct HeadGuard<S> {
    inner: S,
    limit: Duration,
    /// Running while a request is arriving: from the first byte read after
    /// the last write or the last [`Received::mark`].
    deadline: Option<Pin<Box<Sleep>>>,
    received: Received,
}

/// The service's side of a [`HeadGuard`]: says that the request it is
/// answering has arrived whole, which stops the request's timer.
#[derive(Clone, Debug, Default)]
pub struct Received(Arc<AtomicBool>);

impl Received {
    /// The request being answered has arrived whole.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl<S> HeadGuard<S> {
    /// `inner`, whose requests must arrive within `limit` of their first
    /// byte.
    pub fn new(inner: S, limit: Duration) -> Self {
        HeadGuard {
            inner,
            limit,
            deadline: None,
            received: Received::default(),
        }
    }

    /// The handle the service marks each whole request with.
    pub fn received(&self) -> Received {
        self.received.clone()
    }

    /// True while a request is arriving (its timer runs).
    pub fn request_arriving(&self) -> bool {
        self.deadline.is_some()
    }

    /// After a write: bytes out mean the server answers, so the request it
    /// answers has arrived.
    fn wrote(&mut self, polled: &Poll<io::Result<usize>>) {
        if matches!(polled, Poll::Ready(Ok(n)) if *n > 0) {
            self.deadline = None;
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.received.0.swap(false, Ordering::AcqRel) {
            this.deadline = None;
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        let got = buf.filled().len() > before;
        if got && this.deadline.is_none() {
            this.deadline = Some(Box::pin(tokio::time::sleep(this.limit)));
        }
        // Polled on every read, so a client that drips a byte at a time is
        // cut off as surely as one that stops: the timer also wakes the
        // reader when it fires.
        if let Some(d) = this.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "request not received within {:?} of its first byte",
                        this.limit
                    ),
                )));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadGuard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        self.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LIMIT: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_not_timed() {
        let (client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, LIMIT);
        let read = tokio::spawn(async move {
            let mut b = [0u8; 16];
            let n = g.read(&mut b).await;
            (n.map_err(|e| e.kind()), g.request_arriving())
        });
        // Silent for six limits, then a request: the read gets it.
        tokio::time::sleep(LIMIT * 6).await;
        let mut client = client;
        client.write_all(b"GET").await.unwrap();
        let (n, arriving) = read.await.unwrap();
        assert_eq!(n, Ok(3));
        assert!(arriving, "the first byte starts the request's timer");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dripped_request_is_cut_off_at_the_limit() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, LIMIT);
        let drip = tokio::spawn(async move {
            for _ in 0..30 {
                if client.write_all(b"X").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let start = tokio::time::Instant::now();
        let mut b = [0u8; 16];
        let err = loop {
            match g.read(&mut b).await {
                Ok(0) => panic!("the client closed before the limit"),
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let took = start.elapsed();
        assert!(
            took >= LIMIT && took < LIMIT + Duration::from_secs(2),
            "cut off after {took:?}"
        );
        drip.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_ends_the_requests_timer() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, LIMIT);
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut b = [0u8; 64];
        assert!(g.read(&mut b).await.unwrap() > 0);
        assert!(g.request_arriving());
        g.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        assert!(!g.request_arriving(), "answered: the timer stops");
        // Idle past the limit, then the next request is read whole.
        tokio::time::sleep(LIMIT * 3).await;
        client.write_all(b"GET /2").await.unwrap();
        assert_eq!(g.read(&mut b).await.unwrap(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_marked_request_may_be_answered_after_the_limit() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut g = HeadGuard::new(server, LIMIT);
        let received = g.received();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut b = [0u8; 64];
        assert!(g.read(&mut b).await.unwrap() > 0);
        received.mark();
        // The server thinks for three limits while the connection is read
        // (as hyper does, to see a close): the read waits, it does not fail.
        let waited = tokio::time::timeout(LIMIT * 3, g.read(&mut b)).await;
        assert!(waited.is_err(), "the read ended: {waited:?}");
        assert!(!g.request_arriving());
        // Without the mark, the same wait fails at the limit.
        client.write_all(b"GET /2").await.unwrap();
        assert_eq!(g.read(&mut b).await.unwrap(), 6);
        let failed = tokio::time::timeout(LIMIT * 3, g.read(&mut b)).await;
        assert!(
            matches!(&failed, Ok(Err(e)) if e.kind() == io::ErrorKind::TimedOut),
            "{failed:?}"
        );
    }
}
