//! The origin's own HTTP/2 server (RFC 9113), used for h2 over TLS and h2c.
//!
//! Why not hyper's: the origin serves whole objects from memory, and
//! hyper/h2's general machinery (a task per request, per-stream locks, one
//! `writev` per DATA frame) cost it about three times nghttpd's CPU per
//! small response (docs/ORIGIN.md, "Benchmark"). Here one task owns a
//! connection, answers requests as soon as they are decoded, and writes
//! every frame that is ready in one vectored write. It also schedules
//! responses by RFC 9218 priority (`priority: u=N, i`), as browsers ask,
//! where hyper's server sends in arrival order only.
//!
//! - [`frame`]: frame layout and writers.
//! - [`hpack`]: response header encoding; bounded request decoding.
//! - [`conn`]: the connection state machine, without I/O.
//! - [`serve_connection`]: the tokio runtime around it.

pub mod conn;
pub mod frame;
pub mod hpack;

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

pub use conn::{Config, Connection, Output, Ready};

/// Bytes of frames prepared ahead of the socket; also the point above which
/// no more input is read until the peer has taken some (backpressure).
const WRITE_BUDGET: usize = 256 * 1024;

/// Free space kept in the read buffer before each read.
const READ_CHUNK: usize = 32 * 1024;

/// Serves one HTTP/2 connection (`io` starts with the client preface) until
/// the peer closes it, a connection error ends it, or the preface does not
/// arrive within [`Config::preface_timeout`]. `answer` makes each
/// response; `think` says how long after its request arrived each answer
/// is made (emulated server processing time; zero answers at once).
pub async fn serve_connection<IO, T, F>(io: IO, cfg: Config, mut think: T, mut answer: F)
where
    IO: AsyncRead + AsyncWrite + Unpin,
    T: FnMut(&Request<()>) -> Duration,
    F: FnMut(&Request<()>) -> Response<Bytes>,
{
    let (mut rd, mut wr) = tokio::io::split(io);
    let preface_deadline = Instant::now() + cfg.preface_timeout;
    let mut conn = Connection::new(cfg);
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = Output::default();
    let mut delayed: VecDeque<(Instant, Ready)> = VecDeque::new();
    // Written since the last flush: TLS may hold bytes back until flushed.
    let mut dirty = false;
    loop {
        while let Some(r) = conn.next_request() {
            let wait = think(&r.request);
            if wait.is_zero() {
                let resp = answer(&r.request);
                conn.respond(r.stream, resp);
            } else {
                // Kept in due order; equal times keep arrival order.
                let due = Instant::now() + wait;
                let at = delayed.partition_point(|d| d.0 <= due);
                delayed.insert(at, (due, r));
            }
        }
        if out.len() < WRITE_BUDGET {
            conn.poll_output(&mut out, WRITE_BUDGET);
        }
        if out.is_empty() && conn.is_done() {
            break;
        }
        let can_read = conn.wants_read() && out.len() < WRITE_BUDGET;
        if can_read && rbuf.capacity() - rbuf.len() < READ_CHUNK / 2 {
            rbuf.reserve(READ_CHUNK);
        }
        let due = delayed.front().map(|d| d.0);
        tokio::select! {
            biased;
            r = pump(&mut wr, &out), if !out.is_empty() || dirty => match r {
                Ok(Some(0)) | Err(_) => break,
                Ok(Some(n)) => {
                    out.advance(n);
                    dirty = true;
                }
                Ok(None) => dirty = false,
            },
            r = rd.read_buf(&mut rbuf), if can_read => match r {
                Ok(0) | Err(_) => conn.recv_eof(),
                Ok(_) => conn.recv(&mut rbuf),
            },
            () = tokio::time::sleep_until(preface_deadline), if !conn.started() => break,
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                while delayed.front().is_some_and(|d| d.0 <= now) {
                    if let Some((_, r)) = delayed.pop_front() {
                        let resp = answer(&r.request);
                        conn.respond(r.stream, resp);
                    }
                }
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), wr.shutdown()).await;
}

/// One vectored write of what is waiting (`Some(bytes written)`), or, when
/// nothing is, a flush (`None`).
async fn pump<W: AsyncWrite + Unpin>(w: &mut W, out: &Output) -> std::io::Result<Option<usize>> {
    if out.is_empty() {
        w.flush().await?;
        return Ok(None);
    }
    let mut slices = [IoSlice::new(&[]); 64];
    let n = out.slices(&mut slices);
    w.write_vectored(&slices[..n]).await.map(Some)
}
