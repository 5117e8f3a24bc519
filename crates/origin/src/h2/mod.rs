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
//! - [`serve_connection`]: the tokio runtime around it
//!   ([`serve_connection_with_hints`] also sends `103 Early Hints`).

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
pub async fn serve_connection<IO, T, F>(io: IO, cfg: Config, think: T, answer: F)
where
    IO: AsyncRead + AsyncWrite + Unpin,
    T: FnMut(&Request<()>) -> Duration,
    F: FnMut(&Request<()>) -> Response<Bytes>,
{
    serve_connection_with_hints(io, cfg, think, |_| None, answer).await;
}

/// [`serve_connection`] with `103 Early Hints` (RFC 8297): `hints` is
/// asked once per request as soon as it is decoded, and fields it returns
/// go out at once as a `103` interim response ([`Connection::inform`]),
/// before the think time, as a CDN answers from its cache while the
/// origin works; the response follows when due.
pub async fn serve_connection_with_hints<IO, T, H, F>(
    io: IO,
    cfg: Config,
    mut think: T,
    mut hints: H,
    mut answer: F,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
    T: FnMut(&Request<()>) -> Duration,
    H: FnMut(&Request<()>) -> Option<http::HeaderMap>,
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
    // Since when the connection is idle (nothing to send, no answer
    // pending, no input), when output last moved (or started to wait),
    // since when a header block is open: the three deadlines.
    let (idle_timeout, write_timeout, block_timeout) = {
        let c = conn.config();
        (c.idle_timeout, c.write_timeout, c.header_block_timeout)
    };
    let mut idle_since: Option<Instant> = None;
    let mut last_write = Instant::now();
    let mut block_since: Option<Instant> = None;
    loop {
        // Answers delayed by think time for streams the client has reset
        // are dropped, not made and thrown away when due: with rapid
        // resets they would pile up.
        if conn.take_resets() {
            delayed.retain(|d| conn.is_waiting(d.1.stream));
        }
        while let Some(r) = conn.next_request() {
            if let Some(fields) = hints(&r.request) {
                conn.inform(r.stream, http::StatusCode::EARLY_HINTS, &fields);
            }
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
        let now = Instant::now();
        let since = |open: bool, t: Option<Instant>| if open { t.or(Some(now)) } else { None };
        block_since = since(conn.header_block_open(), block_since);
        // Idle: nothing to send and no answer pending, whether streams are
        // open or not (a client that never gives window back stalls its
        // streams as surely as one that stops reading).
        let idle = conn.started() && out.is_empty() && delayed.is_empty();
        idle_since = since(idle, idle_since);
        if out.is_empty() {
            last_write = now;
        }
        let mut deadline = None::<Instant>;
        let mut at = |t: Instant| deadline = Some(deadline.map_or(t, |d| d.min(t)));
        if let Some(t) = idle_since {
            at(t + idle_timeout);
        }
        if !out.is_empty() {
            at(last_write + write_timeout);
        }
        if let Some(t) = block_since {
            at(t + block_timeout);
        }
        tokio::select! {
            biased;
            r = pump(&mut wr, &out), if !out.is_empty() || dirty => match r {
                Ok(Some(0)) | Err(_) => break,
                Ok(Some(n)) => {
                    out.advance(n);
                    dirty = true;
                    last_write = Instant::now();
                }
                Ok(None) => dirty = false,
            },
            r = rd.read_buf(&mut rbuf), if can_read => match r {
                Ok(0) | Err(_) => conn.recv_eof(),
                Ok(_) => {
                    idle_since = None;
                    conn.recv(&mut rbuf);
                }
            },
            // Idle (nothing to send, or streams stalled on a window never
            // given back), output stuck (a client that stopped reading),
            // or a header block that never ends: let go.
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => break,
            () = tokio::time::sleep_until(preface_deadline), if !conn.started() => break,
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                while delayed.front().is_some_and(|d| d.0 <= now) {
                    if let Some((_, r)) = delayed.pop_front() {
                        if conn.is_waiting(r.stream) {
                            let resp = answer(&r.request);
                            conn.respond(r.stream, resp);
                        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use frame::{flag, kind};

    /// Serves one connection over an in-memory pipe of `pipe` bytes, every
    /// request answered with `size` bytes; the client end.
    fn start(
        cfg: Config,
        pipe: usize,
        size: usize,
    ) -> (tokio::io::DuplexStream, tokio::task::JoinHandle<()>) {
        let (client, server) = tokio::io::duplex(pipe);
        let task = tokio::spawn(serve_connection(
            server,
            cfg,
            |_| Duration::ZERO,
            move |_| Response::new(Bytes::from(vec![b'x'; size])),
        ));
        (client, task)
    }

    fn preface() -> BytesMut {
        let mut b = BytesMut::new();
        b.put_slice(frame::PREFACE);
        frame::put_settings(&mut b, &[]);
        b
    }

    /// A GET's header block (literals without indexing).
    fn get_block() -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in [
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "a"),
            (":path", "/"),
        ] {
            b.push(0);
            hpack::put_str(&mut b, n.as_bytes());
            hpack::put_str(&mut b, v.as_bytes());
        }
        b
    }

    /// Whether the server ends the connection within `limit` (far above
    /// the timeouts under test: a margin, not a measurement), reading what
    /// it sends only if `read`.
    async fn ends_within(
        mut client: tokio::io::DuplexStream,
        task: tokio::task::JoinHandle<()>,
        limit: Duration,
        read: bool,
    ) -> bool {
        let drain = async move {
            let mut sink = vec![0u8; 4096];
            loop {
                if read {
                    if matches!(client.read(&mut sink).await, Ok(0) | Err(_)) {
                        break;
                    }
                } else {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            }
            client
        };
        tokio::select! {
            _ = task => true,
            _ = drain => true,
            () = tokio::time::sleep(limit) => false,
        }
    }

    /// Reads one frame: its header and payload.
    async fn read_frame(c: &mut tokio::io::DuplexStream) -> (frame::Head, Vec<u8>) {
        let mut h = [0u8; frame::HEADER_LEN];
        c.read_exact(&mut h).await.unwrap();
        let head = frame::Head::parse(&h).unwrap();
        let mut p = vec![0u8; head.len];
        c.read_exact(&mut p).await.unwrap();
        (head, p)
    }

    /// The 103 goes out when the request is decoded; the response an hour
    /// of (virtual) think time later, on the same stream.
    #[tokio::test(start_paused = true)]
    async fn early_hints_go_out_before_the_think_time() {
        let (mut c, server) = tokio::io::duplex(1 << 16);
        let _task = tokio::spawn(serve_connection_with_hints(
            server,
            Config::default(),
            |_| Duration::from_secs(3600),
            |r| {
                (r.uri().path() == "/").then(|| {
                    let mut h = http::HeaderMap::new();
                    h.append(
                        http::header::LINK,
                        http::HeaderValue::from_static("</a.css>; rel=preload; as=style"),
                    );
                    h
                })
            },
            |_| Response::new(Bytes::from_static(b"doc")),
        ));
        let mut b = preface();
        let block = get_block();
        frame::put_head(
            &mut b,
            block.len(),
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
        );
        b.put_slice(&block);
        c.write_all(&b).await.unwrap();
        let start = Instant::now();
        let mut heads = Vec::new();
        loop {
            let (h, p) = read_frame(&mut c).await;
            if h.stream != 1 {
                continue;
            }
            if h.kind == kind::HEADERS {
                let f = hpack::Decoder::new(4096).decode(&p, 1 << 14).unwrap();
                heads.push((f.list, h.has(flag::END_STREAM), start.elapsed()));
            }
            if h.kind == kind::DATA && h.has(flag::END_STREAM) {
                break;
            }
        }
        assert_eq!(heads.len(), 2, "{heads:?}");
        let (hints, end, at) = &heads[0];
        assert_eq!(hints[0], (b":status".to_vec(), b"103".to_vec()));
        assert_eq!(
            hints[1],
            (
                b"link".to_vec(),
                b"</a.css>; rel=preload; as=style".to_vec()
            )
        );
        assert!(!end, "a 103 does not end the stream");
        assert!(*at < Duration::from_secs(1), "103 after {at:?}");
        let (fin, _, at) = &heads[1];
        assert_eq!(fin[0], (b":status".to_vec(), b"200".to_vec()));
        assert!(*at >= Duration::from_secs(3600), "response after {at:?}");
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed() {
        let cfg = Config {
            idle_timeout: Duration::from_millis(200),
            ..Config::default()
        };
        let (mut c, task) = start(cfg, 1 << 16, 10);
        c.write_all(&preface()).await.unwrap();
        assert!(ends_within(c, task, Duration::from_secs(10), true).await);
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_is_let_go() {
        let cfg = Config {
            write_timeout: Duration::from_millis(200),
            idle_timeout: Duration::from_secs(3600),
            ..Config::default()
        };
        // A 1 MB answer into a 4 KB pipe nobody reads.
        let (mut c, task) = start(cfg, 4096, 1 << 20);
        let mut b = preface();
        // Room for the whole answer on our side of flow control.
        frame::put_settings(&mut b, &[(frame::setting::INITIAL_WINDOW_SIZE, 1 << 24)]);
        frame::put_window_update(&mut b, 0, 1 << 24);
        let block = get_block();
        frame::put_head(
            &mut b,
            block.len(),
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
        );
        b.put_slice(&block);
        c.write_all(&b).await.unwrap();
        assert!(ends_within(c, task, Duration::from_secs(10), false).await);
    }

    #[tokio::test]
    async fn a_header_block_that_never_ends_closes_the_connection() {
        let cfg = Config {
            header_block_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_secs(3600),
            ..Config::default()
        };
        let (mut c, task) = start(cfg, 1 << 16, 10);
        let mut b = preface();
        let block = get_block();
        frame::put_head(&mut b, block.len(), kind::HEADERS, flag::END_STREAM, 1);
        b.put_slice(&block);
        c.write_all(&b).await.unwrap();
        // Empty CONTINUATIONs every 100 ms keep it busy, never ending it
        // (for at most 10 s).
        let keep = async {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let mut e = BytesMut::new();
                frame::put_head(&mut e, 0, kind::CONTINUATION, 0, 1);
                if c.write_all(&e).await.is_err() {
                    break;
                }
            }
        };
        let ended = tokio::select! {
            _ = task => true,
            () = keep => false,
        };
        assert!(ended);
    }
}
