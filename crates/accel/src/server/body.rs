//! Response bodies on the way out: a channel body fed by a pump task, and
//! the transform that rewrites HTML and CSS while the bytes stream through
//! (gzip decoded before the rewriter and encoded again after it).

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::write::{GzDecoder, GzEncoder};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use tokio::sync::mpsc;

use crate::rewrite::css::CssRewriter;
use crate::rewrite::html::HtmlRewriter;
use crate::rewrite::Counts;

/// Body of every response the accelerator sends.
pub type OutBody = BoxBody<Bytes, std::io::Error>;

/// A complete body.
pub fn full(bytes: impl Into<Bytes>) -> OutBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> OutBody {
    full(Bytes::new())
}

/// A body fed through a channel; an `Err` item aborts the response (the
/// client sees a reset stream or a cut connection, never a short body
/// presented as complete).
#[derive(Debug)]
pub struct ChanBody {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl ChanBody {
    /// A body and the sender that feeds it (bounded: a slow client slows
    /// the pump, so nothing buffers a whole response on its account).
    pub fn channel() -> (mpsc::Sender<Result<Bytes, std::io::Error>>, OutBody) {
        let (tx, rx) = mpsc::channel(16);
        (tx, ChanBody { rx }.boxed())
    }
}

impl Body for ChanBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Which rewriter a body goes through.
pub enum Rewrite {
    /// An HTML document.
    Html(Box<HtmlRewriter>),
    /// A stylesheet.
    Css(Box<CssRewriter>),
}

/// Rewriting a body chunk by chunk, with gzip undone before and redone
/// after when the body came compressed.
pub struct Transform {
    rewrite: Rewrite,
    gunzip: Option<GzDecoder<Vec<u8>>>,
    gzip: Option<GzEncoder<Vec<u8>>>,
    out: Vec<u8>,
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transform")
            .field("gunzip", &self.gunzip.is_some())
            .field("gzip", &self.gzip.is_some())
            .finish()
    }
}

impl Transform {
    /// `gunzip`: the input is gzip; `gzip`: encode the output with gzip.
    pub fn new(rewrite: Rewrite, gunzip: bool, gzip: bool) -> Transform {
        Transform {
            rewrite,
            gunzip: gunzip.then(|| GzDecoder::new(Vec::new())),
            gzip: gzip.then(|| GzEncoder::new(Vec::new(), flate2::Compression::new(6))),
            out: Vec::new(),
        }
    }

    /// Takes one input chunk; returns what can be sent now.
    pub fn push(&mut self, chunk: &[u8]) -> std::io::Result<Bytes> {
        let plain = match &mut self.gunzip {
            Some(d) => {
                d.write_all(chunk)?;
                std::mem::take(d.get_mut())
            }
            None => chunk.to_vec(),
        };
        self.out.clear();
        match &mut self.rewrite {
            Rewrite::Html(r) => r.write(&plain, &mut self.out),
            Rewrite::Css(r) => r.write(&plain, &mut self.out),
        }
        self.encode()
    }

    /// Ends the body; returns the last bytes and what was rewritten.
    pub fn finish(mut self) -> std::io::Result<(Bytes, Counts, Option<String>)> {
        self.out.clear();
        if let Some(d) = self.gunzip.take() {
            let rest = d.finish()?;
            match &mut self.rewrite {
                Rewrite::Html(r) => r.write(&rest, &mut self.out),
                Rewrite::Css(r) => r.write(&rest, &mut self.out),
            }
        }
        let mut out = std::mem::take(&mut self.out);
        let (counts, bailed) = match self.rewrite {
            Rewrite::Html(r) => {
                let report = r.end(&mut out);
                (report.counts, report.bailed_out.map(|b| b.to_string()))
            }
            Rewrite::Css(r) => (r.end(&mut out), None),
        };
        let bytes = match self.gzip.take() {
            Some(mut e) => {
                e.write_all(&out)?;
                Bytes::from(e.finish()?)
            }
            None => Bytes::from(out),
        };
        Ok((bytes, counts, bailed))
    }

    fn encode(&mut self) -> std::io::Result<Bytes> {
        match &mut self.gzip {
            Some(e) => {
                if !self.out.is_empty() {
                    e.write_all(&self.out)?;
                    // A sync flush: what the rewriter let go reaches the
                    // client now, not when the encoder's block fills.
                    e.flush()?;
                }
                Ok(Bytes::from(std::mem::take(e.get_mut())))
            }
            None => Ok(Bytes::from(std::mem::take(&mut self.out))),
        }
    }
}
