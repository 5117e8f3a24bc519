//! The server side of one HTTP/2 connection, without I/O (RFC 9113).
//!
//! [`Connection::recv`] takes bytes as they arrive and turns complete
//! requests into [`Ready`] items; [`Connection::respond`] takes the
//! response; [`Connection::poll_output`] fills an [`Output`] with the frames
//! to send, DATA within both flow-control windows and scheduled by RFC 9218
//! priority. Protocol errors become RST_STREAM (stream errors) or GOAWAY
//! and the end of the connection (connection errors), as RFC 9113 §5.4
//! asks. Everything a peer sends is bounded: header blocks, decoded header
//! lists, request bodies (read and discarded), queued control frames.

use std::collections::{BTreeMap, VecDeque};
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri};

use super::frame::{self, flag, kind, setting, Head, Reason};
use super::hpack;

/// Limits and settings of a connection.
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we announce; more open streams are
    /// refused (REFUSED_STREAM, safe for the client to retry).
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE we announce; larger requests get 431.
    pub max_header_list_size: u32,
    /// Request body bytes read (and discarded) before answering 413.
    pub max_request_body: u64,
    /// How long the runtime waits for the client preface and first
    /// SETTINGS before closing (a client that never starts).
    pub preface_timeout: std::time::Duration,
    /// A connection with nothing to send and no answer pending (no stream
    /// open, or its streams stalled by a window the client never gives
    /// back) is closed after this long without input.
    pub idle_timeout: std::time::Duration,
    /// A connection whose output has not moved for this long (the client
    /// stopped reading: a zero window) is closed.
    pub write_timeout: std::time::Duration,
    /// A header block left open (HEADERS without END_HEADERS, then
    /// CONTINUATIONs, perhaps empty) for this long closes the connection.
    pub header_block_timeout: std::time::Duration,
    /// PING and SETTINGS frames the client may send beyond two per stream
    /// it opens before the connection ends with ENHANCE_YOUR_CALM: each
    /// makes us queue an acknowledgement, and a flood of them is work for
    /// nothing.
    pub max_control_frames: u32,
    /// Streams the client may reset beyond those we have answered before
    /// the connection ends with ENHANCE_YOUR_CALM: opening and resetting
    /// streams at once (CVE-2023-44487, "rapid reset") costs the server a
    /// request's work each while the concurrency limit never bites.
    pub max_peer_resets: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_concurrent_streams: 128,
            max_header_list_size: 16 * 1024,
            max_request_body: 64 * 1024,
            preface_timeout: std::time::Duration::from_secs(10),
            max_peer_resets: 100,
            max_control_frames: 100,
            idle_timeout: std::time::Duration::from_secs(75),
            write_timeout: std::time::Duration::from_secs(30),
            header_block_timeout: std::time::Duration::from_secs(10),
        }
    }
}

/// A complete request for the application to answer with
/// [`Connection::respond`].
#[derive(Debug)]
pub struct Ready {
    /// The stream to answer on.
    pub stream: u32,
    /// Method, URI (scheme, authority, path) and regular headers.
    pub request: Request<()>,
}

/// Frames waiting for the socket: control frames and headers copied into
/// buffers, large DATA payloads referenced without a copy.
#[derive(Debug, Default)]
pub struct Output {
    segs: VecDeque<Bytes>,
    len: usize,
}

impl Output {
    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The waiting bytes as slices for a vectored write; returns how many
    /// of `dst` were filled.
    pub fn slices<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (d, s) in dst.iter_mut().zip(&self.segs) {
            *d = IoSlice::new(s);
            n += 1;
        }
        n
    }

    /// Drops the first `n` bytes (written).
    pub fn advance(&mut self, mut n: usize) {
        self.len -= n.min(self.len);
        while n > 0 {
            let Some(front) = self.segs.front_mut() else {
                return;
            };
            if n < front.len() {
                front.advance(n);
                return;
            }
            n -= front.len();
            self.segs.pop_front();
        }
    }

    fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.segs.push_back(b);
        }
    }
}

/// Smallest cap on a header block ([`Connection::max_block`]).
const MIN_BLOCK: usize = 4 * 1024;

/// Control frames (SETTINGS/PING acks, resets, window updates) allowed to
/// pile up unsent; a peer that provokes more without reading is cut off.
const MAX_CONTROL_BACKLOG: usize = 256 * 1024;

/// DATA payloads up to this size are copied next to their frame header
/// rather than sent as a separate slice.
const COPY_BELOW: usize = 2048;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the 24-byte client preface.
    Preface,
    /// Preface read; the next frame must be SETTINGS.
    FirstSettings,
    /// Normal operation.
    Open,
    /// GOAWAY sent after a connection error, or the peer closed: nothing
    /// more is read.
    Closing,
}

#[derive(Debug)]
enum Send {
    /// Waiting for the application's response.
    Waiting,
    /// HEADERS sent; `body[pos..]` still to send.
    Body { body: Bytes, pos: usize },
}

#[derive(Debug)]
struct Stream {
    /// The peer may still send (no END_STREAM yet).
    remote_open: bool,
    /// The request, kept until its body has ended.
    request: Option<Request<()>>,
    content_length: Option<u64>,
    received: u64,
    send: Send,
    window: i64,
    /// What the peer may still send on the stream before our next
    /// WINDOW_UPDATE (it may not go below zero).
    recv_window: i64,
    /// Bytes received and not yet given back.
    recv_unacked: u32,
    /// RFC 9218 urgency (0 most urgent, 7 least; default 3).
    urgency: u8,
    /// RFC 9218 incremental: share bandwidth with its peers in turn.
    incremental: bool,
    /// Frames sent, for round-robin among incremental streams.
    turns: u64,
}

/// A connection error: GOAWAY with this code, then close.
#[derive(Debug)]
struct ConnError(Reason, &'static str);

/// One HTTP/2 server connection (see the module docs).
pub struct Connection {
    cfg: Config,
    phase: Phase,
    preface_seen: usize,
    decoder: hpack::Decoder,
    /// Frames ready to be handed to the output (control frames, HEADERS).
    ctrl: BytesMut,
    streams: BTreeMap<u32, Stream>,
    /// Highest stream id the client has opened.
    last_stream: u32,
    /// Header block being assembled: (stream, END_STREAM, self-dependent,
    /// fragments).
    block: Option<(u32, bool, bool, Vec<u8>)>,
    ready: VecDeque<Ready>,
    peer_window: i64,
    peer_max_frame: usize,
    /// The client's SETTINGS_MAX_HEADER_LIST_SIZE, if it announced one
    /// (heeded for interim responses, [`Connection::inform`]).
    peer_max_header_list: Option<u32>,
    conn_window: i64,
    peer_goaway: bool,
    /// Streams the client reset ([`Config::max_peer_resets`]).
    peer_resets: u32,
    /// PING and SETTINGS frames received ([`Config::max_control_frames`]).
    control_frames: u32,
    /// What the peer may still send on the connection before our next
    /// WINDOW_UPDATE.
    recv_window: i64,
    /// Connection-level bytes received and not yet given back.
    recv_unacked: u32,
    /// Responses sent whole.
    answered: u32,
    /// A stream was reset since [`Connection::take_resets`].
    reset_since: bool,
    /// Why the connection is closing (for logs and tests).
    error: Option<(Reason, &'static str)>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.phase)
            .field("streams", &self.streams.len())
            .field("last_stream", &self.last_stream)
            .field("error", &self.error)
            .finish()
    }
}

impl Connection {
    /// A connection that has sent nothing yet; our SETTINGS are queued.
    pub fn new(cfg: Config) -> Connection {
        let mut ctrl = BytesMut::with_capacity(4096);
        frame::put_settings(
            &mut ctrl,
            &[
                (setting::MAX_CONCURRENT_STREAMS, cfg.max_concurrent_streams),
                (setting::MAX_HEADER_LIST_SIZE, cfg.max_header_list_size),
                (setting::ENABLE_PUSH, 0),
            ],
        );
        Connection {
            cfg,
            phase: Phase::Preface,
            preface_seen: 0,
            decoder: hpack::Decoder::new(4096),
            ctrl,
            streams: BTreeMap::new(),
            last_stream: 0,
            block: None,
            ready: VecDeque::new(),
            peer_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME as usize,
            peer_max_header_list: None,
            conn_window: frame::DEFAULT_WINDOW,
            peer_goaway: false,
            peer_resets: 0,
            control_frames: 0,
            recv_window: frame::DEFAULT_WINDOW,
            recv_unacked: 0,
            answered: 0,
            reset_since: false,
            error: None,
        }
    }

    /// Whether a header block is open (HEADERS without END_HEADERS so far):
    /// the runtime gives it [`Config::header_block_timeout`] to end.
    pub fn header_block_open(&self) -> bool {
        self.block.is_some()
    }

    /// The connection's limits.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether `stream` still waits for its response: the runtime drops a
    /// delayed answer (server think time) for a stream the client reset.
    pub fn is_waiting(&self, stream: u32) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|s| matches!(s.send, Send::Waiting))
    }

    /// Whether the client reset a stream since the last call.
    pub fn take_resets(&mut self) -> bool {
        std::mem::take(&mut self.reset_since)
    }

    /// Consumes every complete frame in `buf` (a partial frame stays).
    pub fn recv(&mut self, buf: &mut BytesMut) {
        if let Err(ConnError(reason, why)) = self.recv_frames(buf) {
            self.fail(reason, why);
        }
        if self.phase == Phase::Closing {
            buf.clear();
        }
    }

    /// The peer closed its side: nothing more will arrive.
    pub fn recv_eof(&mut self) {
        if self.phase != Phase::Closing {
            self.phase = Phase::Closing;
        }
    }

    /// The next request to answer.
    pub fn next_request(&mut self) -> Option<Ready> {
        self.ready.pop_front()
    }

    /// Answers `stream` (ignored if the stream was reset meanwhile).
    pub fn respond(&mut self, stream: u32, response: Response<Bytes>) {
        let (parts, body) = response.into_parts();
        if !self.is_waiting(stream) {
            return;
        }
        let mut block = Vec::with_capacity(256);
        hpack::encode_response(parts.status, &parts.headers, &mut block);
        self.put_block(stream, &block, body.is_empty());
        if body.is_empty() {
            self.finish_stream(stream);
        } else if let Some(s) = self.streams.get_mut(&stream) {
            s.send = Send::Body { body, pos: 0 };
        }
    }

    /// Sends an interim response on `stream` (`103 Early Hints`, RFC 8297):
    /// a HEADERS frame without END_STREAM, after which the stream still
    /// waits for [`Connection::respond`]. RFC 9113 §8.1: a response is
    /// "zero or more HEADERS frames ... containing the message headers of
    /// informational (1xx) HTTP responses" before the final one; the
    /// stream's state does not change (it stays open, or half-closed
    /// (remote)). Returns whether it was queued: not for a status other
    /// than 1xx or for 101 (RFC 9113 §8.6: no Upgrade in HTTP/2), not once
    /// the response has started or the stream is gone, and not when its
    /// fields exceed the `SETTINGS_MAX_HEADER_LIST_SIZE` the client
    /// announced (an interim response is optional; one the client refuses
    /// could cost the stream).
    pub fn inform(&mut self, stream: u32, status: StatusCode, headers: &HeaderMap) -> bool {
        if !status.is_informational() || status == StatusCode::SWITCHING_PROTOCOLS {
            return false;
        }
        if !self.is_waiting(stream) {
            return false;
        }
        if let Some(max) = self.peer_max_header_list {
            // RFC 9113 §6.5.2: name + value + 32 per field, `:status` too.
            let size = headers.iter().fold(":status".len() + 3 + 32, |n, (k, v)| {
                n.saturating_add(k.as_str().len() + v.len() + 32)
            });
            if size > max as usize {
                return false;
            }
        }
        let mut block = Vec::with_capacity(256);
        hpack::encode_response(status, headers, &mut block);
        self.put_block(stream, &block, false);
        true
    }

    /// Queues a header block on `stream`: a HEADERS frame, continued in
    /// CONTINUATION frames when larger than the peer's frame size;
    /// END_STREAM on the HEADERS frame if `end`.
    fn put_block(&mut self, stream: u32, block: &[u8], end: bool) {
        let end = if end { flag::END_STREAM } else { 0 };
        let max = self.peer_max_frame;
        let mut chunks = block.chunks(max).peekable();
        let mut first = true;
        while let Some(c) = chunks.next() {
            let last = chunks.peek().is_none();
            let (k, f) = if first {
                (kind::HEADERS, end)
            } else {
                (kind::CONTINUATION, 0)
            };
            let f = if last { f | flag::END_HEADERS } else { f };
            frame::put_head(&mut self.ctrl, c.len(), k, f, stream);
            self.ctrl.put_slice(c);
            first = false;
        }
        if block.is_empty() {
            frame::put_head(
                &mut self.ctrl,
                0,
                kind::HEADERS,
                end | flag::END_HEADERS,
                stream,
            );
        }
    }

    /// Moves frames to `out` until it holds at least `budget` bytes or
    /// nothing more may be sent now (windows closed, no response ready).
    pub fn poll_output(&mut self, out: &mut Output, budget: usize) {
        while out.len() + self.ctrl.len() < budget && self.conn_window > 0 {
            let Some((&id, s)) = self
                .streams
                .iter_mut()
                .filter(|(_, s)| s.window > 0 && matches!(s.send, Send::Body { .. }))
                .min_by_key(|(id, s)| (s.urgency, if s.incremental { s.turns } else { 0 }, **id))
            else {
                break;
            };
            let Send::Body { body, pos } = &mut s.send else {
                break;
            };
            let left = body.len() - *pos;
            let window = usize::try_from(s.window.min(self.conn_window)).unwrap_or(0);
            let n = left.min(window).min(self.peer_max_frame);
            let last = n == left;
            frame::put_head(
                &mut self.ctrl,
                n,
                kind::DATA,
                if last { flag::END_STREAM } else { 0 },
                id,
            );
            let payload = body.slice(*pos..*pos + n);
            if n < COPY_BELOW {
                self.ctrl.put_slice(&payload);
            } else {
                out.push(self.ctrl.split().freeze());
                out.push(payload);
            }
            *pos += n;
            s.window -= n as i64;
            s.turns += 1;
            self.conn_window -= n as i64;
            if last {
                self.finish_stream(id);
            }
        }
        out.push(self.ctrl.split().freeze());
    }

    /// Nothing more will be read or sent beyond what is queued: after the
    /// output is written, the connection can be closed.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Closing || (self.peer_goaway && self.streams.is_empty())
    }

    /// The client preface and its first SETTINGS have arrived.
    pub fn started(&self) -> bool {
        matches!(self.phase, Phase::Open) || self.error.is_some()
    }

    /// Whether more input is wanted.
    pub fn wants_read(&self) -> bool {
        self.phase != Phase::Closing
    }

    /// The connection error that ended the connection, if any.
    pub fn error(&self) -> Option<(u32, &'static str)> {
        self.error.map(|(r, w)| (r as u32, w))
    }

    /// Streams open (including those waiting for a response).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    fn fail(&mut self, reason: Reason, why: &'static str) {
        if self.phase == Phase::Closing {
            return;
        }
        frame::put_goaway(&mut self.ctrl, self.last_stream, reason, why);
        self.error = Some((reason, why));
        self.phase = Phase::Closing;
        self.streams.clear();
        self.ready.clear();
    }

    /// Stream error: RST_STREAM and forget the stream.
    fn reset(&mut self, stream: u32, reason: Reason) {
        frame::put_rst(&mut self.ctrl, stream, reason);
        self.streams.remove(&stream);
        self.ready.retain(|r| r.stream != stream);
    }

    /// The response is complete: the stream closes, with RST_STREAM
    /// (NO_ERROR) if the request body is still arriving (RFC 9113 §8.1).
    /// One more PING or SETTINGS from the client: past
    /// [`Config::max_control_frames`] beyond two per stream it has opened,
    /// a connection error.
    fn count_control(&mut self) -> Result<(), ConnError> {
        self.control_frames = self.control_frames.saturating_add(1);
        // Client streams are odd: last_stream / 2 + 1 of them at most.
        let allowed = self.cfg.max_control_frames.saturating_add(self.last_stream);
        if self.control_frames > allowed {
            return Err(ConnError(
                Reason::EnhanceYourCalm,
                "too many PING or SETTINGS frames",
            ));
        }
        Ok(())
    }

    fn finish_stream(&mut self, stream: u32) {
        if let Some(s) = self.streams.remove(&stream) {
            self.answered = self.answered.saturating_add(1);
            if s.remote_open {
                frame::put_rst(&mut self.ctrl, stream, Reason::NoError);
            }
        }
    }

    fn recv_frames(&mut self, buf: &mut BytesMut) -> Result<(), ConnError> {
        if self.phase == Phase::Preface {
            let want = frame::PREFACE.len() - self.preface_seen;
            let n = want.min(buf.len());
            if buf[..n] != frame::PREFACE[self.preface_seen..self.preface_seen + n] {
                return Err(ConnError(Reason::Protocol, "invalid connection preface"));
            }
            buf.advance(n);
            self.preface_seen += n;
            if self.preface_seen < frame::PREFACE.len() {
                return Ok(());
            }
            self.phase = Phase::FirstSettings;
        }
        while self.phase != Phase::Closing {
            let Some(h) = Head::parse(buf) else {
                return Ok(());
            };
            if h.len > frame::DEFAULT_MAX_FRAME as usize {
                return Err(ConnError(
                    Reason::FrameSize,
                    "frame larger than SETTINGS_MAX_FRAME_SIZE",
                ));
            }
            if buf.len() < frame::HEADER_LEN + h.len {
                // Room for the rest of the frame (at most 16 KiB + header).
                buf.reserve(frame::HEADER_LEN + h.len - buf.len());
                return Ok(());
            }
            buf.advance(frame::HEADER_LEN);
            let payload = buf.split_to(h.len).freeze();
            self.frame(h, payload)?;
            if self.ctrl.len() > MAX_CONTROL_BACKLOG {
                return Err(ConnError(
                    Reason::EnhanceYourCalm,
                    "too many control frames queued unread",
                ));
            }
        }
        Ok(())
    }

    fn frame(&mut self, h: Head, p: Bytes) -> Result<(), ConnError> {
        if self.phase == Phase::FirstSettings {
            if h.kind != kind::SETTINGS || h.has(flag::ACK) {
                return Err(ConnError(
                    Reason::Protocol,
                    "the first frame after the preface must be SETTINGS",
                ));
            }
            self.phase = Phase::Open;
        }
        if let Some((s, ..)) = &self.block {
            if h.kind != kind::CONTINUATION || h.stream != *s {
                return Err(ConnError(
                    Reason::Protocol,
                    "expected CONTINUATION of the open header block",
                ));
            }
        }
        match h.kind {
            kind::DATA => self.data(h, p),
            kind::HEADERS => self.headers(h, p),
            kind::PRIORITY => self.priority(h, &p),
            kind::RST_STREAM => self.rst_stream(h),
            kind::SETTINGS => self.settings(h, &p),
            kind::PUSH_PROMISE => Err(ConnError(Reason::Protocol, "PUSH_PROMISE from a client")),
            kind::PING => {
                need_conn_stream(h)?;
                if !h.has(flag::ACK) {
                    self.count_control()?;
                }
                let data: &[u8; 8] = p
                    .as_ref()
                    .try_into()
                    .map_err(|_| ConnError(Reason::FrameSize, "PING payload is not 8 bytes"))?;
                if !h.has(flag::ACK) {
                    frame::put_ping_ack(&mut self.ctrl, data);
                }
                Ok(())
            }
            kind::GOAWAY => {
                need_conn_stream(h)?;
                if p.len() < 8 {
                    return Err(ConnError(Reason::FrameSize, "GOAWAY shorter than 8 bytes"));
                }
                self.peer_goaway = true;
                Ok(())
            }
            kind::WINDOW_UPDATE => self.window_update(h, &p),
            kind::CONTINUATION => self.continuation(h, p),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    /// A stream id the client never opened (RFC 9113 §5.1 "idle").
    fn is_idle(&self, stream: u32) -> bool {
        stream > self.last_stream
    }

    fn data(&mut self, h: Head, p: Bytes) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(Reason::Protocol, "DATA on stream 0"));
        }
        let body = unpad(h, p)?;
        if self.is_idle(h.stream) {
            return Err(ConnError(Reason::Protocol, "DATA on an idle stream"));
        }
        // The whole frame counts against flow control (RFC 9113 §6.9.1):
        // a peer that sends past the window we gave it breaks the protocol.
        // The body is discarded, so the window is given back once half of
        // it is used (sooner would be a WINDOW_UPDATE per frame, and would
        // hide an overrun).
        let len = u32::try_from(h.len).unwrap_or(u32::MAX);
        self.recv_window -= i64::from(len);
        if self.recv_window < 0 {
            return Err(ConnError(
                Reason::FlowControl,
                "DATA beyond the connection's receive window",
            ));
        }
        self.recv_unacked = self.recv_unacked.saturating_add(len);
        if i64::from(self.recv_unacked) >= frame::DEFAULT_WINDOW / 2 {
            frame::put_window_update(&mut self.ctrl, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
        }
        let max_body = self.cfg.max_request_body;
        let Some(s) = self.streams.get_mut(&h.stream) else {
            self.reset(h.stream, Reason::StreamClosed);
            return Ok(());
        };
        if !s.remote_open {
            self.reset(h.stream, Reason::StreamClosed);
            return Ok(());
        }
        s.recv_window -= i64::from(len);
        if s.recv_window < 0 {
            self.reset(h.stream, Reason::FlowControl);
            return Ok(());
        }
        s.received += body.len() as u64;
        let end = h.has(flag::END_STREAM);
        if s.content_length
            .is_some_and(|cl| s.received > cl || (end && s.received != cl))
        {
            self.reset(h.stream, Reason::Protocol);
            return Ok(());
        }
        // A body past the limit is not wanted (413): its stream gets no
        // more window, so a client that keeps sending overruns it.
        if !end && s.received <= max_body {
            s.recv_unacked = s.recv_unacked.saturating_add(len);
            if i64::from(s.recv_unacked) >= frame::DEFAULT_WINDOW / 2 {
                frame::put_window_update(&mut self.ctrl, h.stream, s.recv_unacked);
                s.recv_window += i64::from(s.recv_unacked);
                s.recv_unacked = 0;
            }
        }
        if end {
            s.remote_open = false;
            if let Some(request) = s.request.take() {
                self.ready.push_back(Ready {
                    stream: h.stream,
                    request,
                });
            }
        } else if s.received > max_body && s.request.take().is_some() {
            self.respond(
                h.stream,
                plain_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "413 Content Too Large: request bodies are not served\n",
                ),
            );
        }
        Ok(())
    }

    fn headers(&mut self, h: Head, p: Bytes) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(Reason::Protocol, "HEADERS on stream 0"));
        }
        if h.stream % 2 == 0 {
            return Err(ConnError(
                Reason::Protocol,
                "HEADERS on an even (server-initiated) stream id",
            ));
        }
        let mut frag = unpad(h, p)?;
        let mut self_dep = false;
        if h.has(flag::PRIORITY) {
            if frag.len() < 5 {
                return Err(ConnError(
                    Reason::FrameSize,
                    "HEADERS too short for its priority fields",
                ));
            }
            let dep = u32::from_be_bytes([frag[0], frag[1], frag[2], frag[3]]) & 0x7fff_ffff;
            self_dep = dep == h.stream;
            frag.advance(5);
        }
        self.block = Some((h.stream, h.has(flag::END_STREAM), self_dep, frag.to_vec()));
        if h.has(flag::END_HEADERS) {
            self.end_block()
        } else {
            Ok(())
        }
    }

    /// Largest header block (HEADERS + CONTINUATION) accepted before the
    /// connection is closed with ENHANCE_YOUR_CALM: twice the header list
    /// size we announce (HPACK makes a block smaller than its list, rarely
    /// by half), at least [`MIN_BLOCK`].
    fn max_block(&self) -> usize {
        (2 * self.cfg.max_header_list_size as usize).max(MIN_BLOCK)
    }

    fn continuation(&mut self, h: Head, p: Bytes) -> Result<(), ConnError> {
        let Some((_, _, _, buf)) = &mut self.block else {
            return Err(ConnError(
                Reason::Protocol,
                "CONTINUATION without a preceding HEADERS",
            ));
        };
        buf.extend_from_slice(&p);
        if buf.len() > self.max_block() {
            return Err(ConnError(Reason::EnhanceYourCalm, "header block too large"));
        }
        if h.has(flag::END_HEADERS) {
            self.end_block()
        } else {
            Ok(())
        }
    }

    fn end_block(&mut self) -> Result<(), ConnError> {
        let Some((id, end, self_dep, block)) = self.block.take() else {
            return Ok(());
        };
        let limit = self.cfg.max_header_list_size as usize;
        let fields = self
            .decoder
            .decode(&block, limit)
            .map_err(|_| ConnError(Reason::Compression, "undecodable header block (HPACK)"))?;
        if let Some(s) = self.streams.get_mut(&id) {
            // Trailers.
            if !s.remote_open {
                self.reset(id, Reason::StreamClosed);
                return Ok(());
            }
            if !end {
                self.reset(id, Reason::Protocol);
                return Ok(());
            }
            if fields.list.iter().any(|(n, _)| n.first() == Some(&b':')) {
                self.reset(id, Reason::Protocol);
                return Ok(());
            }
            if s.content_length.is_some_and(|cl| cl != s.received) {
                self.reset(id, Reason::Protocol);
                return Ok(());
            }
            s.remote_open = false;
            if let Some(request) = s.request.take() {
                self.ready.push_back(Ready {
                    stream: id,
                    request,
                });
            }
            return Ok(());
        }
        if !self.is_idle(id) {
            return Err(ConnError(
                Reason::StreamClosed,
                "HEADERS on a closed stream",
            ));
        }
        self.last_stream = id;
        if self.peer_goaway {
            return Ok(());
        }
        if self_dep {
            self.reset(id, Reason::Protocol);
            return Ok(());
        }
        if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
            self.reset(id, Reason::RefusedStream);
            return Ok(());
        }
        let (request, content_length, urgency, incremental) = if fields.too_large {
            (None, None, 3, false)
        } else {
            match parse_request(fields.list) {
                Ok(p) => (Some(p.request), p.content_length, p.urgency, p.incremental),
                Err(_) => {
                    // Malformed (RFC 9113 §8.1.1): a stream error. The id
                    // has been used, so the stream counts as closed.
                    self.reset(id, Reason::Protocol);
                    return Ok(());
                }
            }
        };
        if end && content_length.is_some_and(|cl| cl != 0) {
            self.reset(id, Reason::Protocol);
            return Ok(());
        }
        self.streams.insert(
            id,
            Stream {
                remote_open: !end,
                request: None,
                content_length,
                received: 0,
                send: Send::Waiting,
                window: self.peer_window,
                recv_window: frame::DEFAULT_WINDOW,
                recv_unacked: 0,
                urgency,
                incremental,
                turns: 0,
            },
        );
        match request {
            None => self.respond(
                id,
                plain_response(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "431 Request Header Fields Too Large\n",
                ),
            ),
            Some(request) if end => self.ready.push_back(Ready {
                stream: id,
                request,
            }),
            Some(request) => {
                if let Some(s) = self.streams.get_mut(&id) {
                    s.request = Some(request);
                }
            }
        }
        Ok(())
    }

    fn priority(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(Reason::Protocol, "PRIORITY on stream 0"));
        }
        if p.len() != 5 {
            self.reset(h.stream, Reason::FrameSize);
            return Ok(());
        }
        let dep = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
        if dep == h.stream {
            self.reset(h.stream, Reason::Protocol);
        }
        // RFC 7540 priorities are deprecated (RFC 9113 §5.3.2); RFC 9218's
        // `priority` header is used instead.
        Ok(())
    }

    fn rst_stream(&mut self, h: Head) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(Reason::Protocol, "RST_STREAM on stream 0"));
        }
        if h.len != 4 {
            return Err(ConnError(
                Reason::FrameSize,
                "RST_STREAM payload is not 4 bytes",
            ));
        }
        if self.is_idle(h.stream) {
            return Err(ConnError(Reason::Protocol, "RST_STREAM on an idle stream"));
        }
        if self.streams.remove(&h.stream).is_some() {
            self.peer_resets = self.peer_resets.saturating_add(1);
            self.reset_since = true;
            if self.peer_resets > self.answered.saturating_add(self.cfg.max_peer_resets) {
                return Err(ConnError(
                    Reason::EnhanceYourCalm,
                    "too many streams reset by the client (rapid reset)",
                ));
            }
        }
        self.ready.retain(|r| r.stream != h.stream);
        Ok(())
    }

    fn settings(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        need_conn_stream(h)?;
        if h.has(flag::ACK) {
            if !p.is_empty() {
                return Err(ConnError(Reason::FrameSize, "SETTINGS ACK with a payload"));
            }
            return Ok(());
        }
        if p.len() % 6 != 0 {
            return Err(ConnError(
                Reason::FrameSize,
                "SETTINGS length is not a multiple of 6",
            ));
        }
        self.count_control()?;
        // Every value is checked, the window applied once with its last
        // value: a frame repeating SETTINGS_INITIAL_WINDOW_SIZE thousands
        // of times must not walk every stream each time.
        let mut initial_window = None;
        for pair in p.chunks_exact(6) {
            let id = u16::from_be_bytes([pair[0], pair[1]]);
            let v = u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]);
            match id {
                setting::ENABLE_PUSH if v > 1 => {
                    return Err(ConnError(
                        Reason::Protocol,
                        "SETTINGS_ENABLE_PUSH not 0 or 1",
                    ));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    let v = i64::from(v);
                    if v > frame::MAX_WINDOW {
                        return Err(ConnError(
                            Reason::FlowControl,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    initial_window = Some(v);
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME..=frame::MAX_MAX_FRAME).contains(&v) {
                        return Err(ConnError(
                            Reason::Protocol,
                            "SETTINGS_MAX_FRAME_SIZE out of range",
                        ));
                    }
                    self.peer_max_frame = v as usize;
                }
                setting::MAX_HEADER_LIST_SIZE => self.peer_max_header_list = Some(v),
                // Our encoder keeps no dynamic table, so the peer's table
                // size does not matter; the other settings concern what we
                // would initiate (push, streams). Final response heads are
                // sent whatever the header list size: they are the
                // corpus's own, a few hundred bytes.
                _ => {}
            }
        }
        if let Some(v) = initial_window {
            let delta = v - self.peer_window;
            self.peer_window = v;
            for s in self.streams.values_mut() {
                s.window += delta;
                if s.window > frame::MAX_WINDOW {
                    return Err(ConnError(
                        Reason::FlowControl,
                        "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window",
                    ));
                }
            }
        }
        frame::put_settings_ack(&mut self.ctrl);
        Ok(())
    }

    fn window_update(&mut self, h: Head, p: &[u8]) -> Result<(), ConnError> {
        let b: &[u8; 4] = p
            .try_into()
            .map_err(|_| ConnError(Reason::FrameSize, "WINDOW_UPDATE payload is not 4 bytes"))?;
        let inc = i64::from(u32::from_be_bytes(*b) & 0x7fff_ffff);
        if h.stream == 0 {
            if inc == 0 {
                return Err(ConnError(Reason::Protocol, "WINDOW_UPDATE of 0"));
            }
            self.conn_window += inc;
            if self.conn_window > frame::MAX_WINDOW {
                return Err(ConnError(
                    Reason::FlowControl,
                    "connection window above 2^31-1",
                ));
            }
            return Ok(());
        }
        if self.is_idle(h.stream) {
            return Err(ConnError(
                Reason::Protocol,
                "WINDOW_UPDATE on an idle stream",
            ));
        }
        let Some(s) = self.streams.get_mut(&h.stream) else {
            // Closed streams may still get updates sent before the close.
            return Ok(());
        };
        if inc == 0 {
            self.reset(h.stream, Reason::Protocol);
            return Ok(());
        }
        s.window += inc;
        if s.window > frame::MAX_WINDOW {
            self.reset(h.stream, Reason::FlowControl);
        }
        Ok(())
    }
}

fn need_conn_stream(h: Head) -> Result<(), ConnError> {
    if h.stream != 0 {
        return Err(ConnError(
            Reason::Protocol,
            "connection-level frame on a stream",
        ));
    }
    Ok(())
}

/// Strips the padding of a DATA or HEADERS frame (RFC 9113 §6.1).
fn unpad(h: Head, mut p: Bytes) -> Result<Bytes, ConnError> {
    if !h.has(flag::PADDED) {
        return Ok(p);
    }
    let Some(&pad) = p.first() else {
        return Err(ConnError(
            Reason::FrameSize,
            "padded frame without pad length",
        ));
    };
    p.advance(1);
    let pad = usize::from(pad);
    if pad > p.len() {
        return Err(ConnError(
            Reason::Protocol,
            "padding longer than the frame payload",
        ));
    }
    p.truncate(p.len() - pad);
    Ok(p)
}

/// A small text response made by the connection itself (413, 431).
fn plain_response(status: StatusCode, text: &'static str) -> Response<Bytes> {
    let mut r = Response::new(Bytes::from_static(text.as_bytes()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    r
}

/// What [`parse_request`] takes from a header block.
struct Parsed {
    request: Request<()>,
    content_length: Option<u64>,
    urgency: u8,
    incremental: bool,
}

/// A request from its decoded fields, checked as RFC 9113 §8.2–8.3 ask:
/// lowercase names, pseudo-headers first, once each and only the request
/// ones, no connection-specific fields, `te` only `trailers`. Also returns
/// `content-length` and the RFC 9218 priority.
fn parse_request(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Parsed, &'static str> {
    let (mut method, mut scheme, mut path, mut authority) = (None, None, None, None);
    let mut headers = HeaderMap::with_capacity(fields.len());
    let mut regular = false;
    let mut content_length = None;
    let (mut urgency, mut incremental) = (3u8, false);
    for (n, v) in fields {
        if let Some(pseudo) = n.strip_prefix(b":") {
            if regular {
                return Err("pseudo-header after a regular field");
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"path" => &mut path,
                b"authority" => &mut authority,
                _ => return Err("unknown or response pseudo-header"),
            };
            if slot.replace(v).is_some() {
                return Err("repeated pseudo-header");
            }
            continue;
        }
        regular = true;
        if n.iter().any(u8::is_ascii_uppercase) {
            return Err("uppercase field name");
        }
        match n.as_slice() {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return Err("connection-specific field"),
            b"te" if v != b"trailers" => return Err("te other than trailers"),
            b"content-length" => {
                let cl = std::str::from_utf8(&v)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or("invalid content-length")?;
                if content_length.is_some_and(|c| c != cl) {
                    return Err("conflicting content-length");
                }
                content_length = Some(cl);
            }
            b"priority" => (urgency, incremental) = parse_priority(&v),
            _ => {}
        }
        let name = HeaderName::from_bytes(&n).map_err(|_| "invalid field name")?;
        let value = HeaderValue::from_bytes(&v).map_err(|_| "invalid field value")?;
        headers.append(name, value);
    }
    let method =
        Method::from_bytes(&method.ok_or("missing :method")?).map_err(|_| "invalid :method")?;
    let mut uri = Uri::builder();
    if method == Method::CONNECT {
        // RFC 9113 §8.5: only :authority. Answered 405 by the application.
        if scheme.is_some() || path.is_some() {
            return Err(":scheme or :path in CONNECT");
        }
        let a = authority.ok_or("CONNECT without :authority")?;
        uri = uri.authority(a);
    } else {
        let scheme = scheme.ok_or("missing :scheme")?;
        let path = path.ok_or("missing :path")?;
        if path.is_empty() {
            return Err("empty :path");
        }
        uri = uri.scheme(scheme.as_slice()).path_and_query(path);
        if let Some(a) = authority {
            uri = uri.authority(a);
        }
    }
    let uri = uri
        .build()
        .map_err(|_| "malformed :scheme, :authority or :path")?;
    let mut req = Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(Parsed {
        request: req,
        content_length,
        urgency,
        incremental,
    })
}

/// RFC 9218 §4: `u=N` (0–7) and `i` in a structured-field dictionary;
/// anything unparsable keeps the defaults (u=3, not incremental).
fn parse_priority(v: &[u8]) -> (u8, bool) {
    let (mut u, mut i) = (3u8, false);
    let Ok(s) = std::str::from_utf8(v) else {
        return (u, i);
    };
    for item in s.split(',') {
        let item = item.split(';').next().unwrap_or("").trim();
        match item.split_once('=') {
            Some(("u", n)) => {
                if let Ok(n @ 0..=7) = n.trim().parse::<u8>() {
                    u = n;
                }
            }
            Some(("i", b)) => i = b.trim() == "?1",
            None if item == "i" => i = true,
            _ => {}
        }
    }
    (u, i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A client's side of the test: frames in, frames out.
    struct Peer {
        conn: Connection,
        inbuf: BytesMut,
    }

    /// A frame the server sent.
    #[derive(Debug)]
    struct Got {
        head: Head,
        payload: Vec<u8>,
    }

    fn literal_block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            b.push(0); // literal without indexing, new name
            hpack::put_str(&mut b, n.as_bytes());
            hpack::put_str(&mut b, v.as_bytes());
        }
        b
    }

    impl Peer {
        fn new(cfg: Config, settings: &[(u16, u32)]) -> Peer {
            let mut p = Peer {
                conn: Connection::new(cfg),
                inbuf: BytesMut::new(),
            };
            p.inbuf.put_slice(frame::PREFACE);
            frame::put_settings(&mut p.inbuf, settings);
            p.flush();
            p
        }

        /// The output ends the connection with GOAWAY(`reason`).
        fn assert_goaway(&mut self, reason: Reason) {
            assert_eq!(goaway(&self.output(1 << 20)), Some(reason as u32));
        }

        /// A POST's HEADERS on `stream`, its body to follow (not flushed).
        fn post_head(&mut self, stream: u32) {
            let block = literal_block(&[
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", "a"),
                (":path", "/"),
            ]);
            frame::put_head(
                &mut self.inbuf,
                block.len(),
                kind::HEADERS,
                flag::END_HEADERS,
                stream,
            );
            self.inbuf.put_slice(&block);
        }

        fn flush(&mut self) {
            let mut b = std::mem::take(&mut self.inbuf);
            self.conn.recv(&mut b);
            assert!(b.is_empty() || self.conn.is_done(), "partial frame left");
        }

        fn get(&mut self, path: &str, stream: u32, extra: &[(&str, &str)]) {
            let mut f = vec![
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "a.example"),
                (":path", path),
            ];
            f.extend_from_slice(extra);
            let block = literal_block(&f);
            frame::put_head(
                &mut self.inbuf,
                block.len(),
                kind::HEADERS,
                flag::END_HEADERS | flag::END_STREAM,
                stream,
            );
            self.inbuf.put_slice(&block);
            self.flush();
        }

        /// Answers every ready request with `size` bytes.
        fn answer_all(&mut self, size: usize) -> Vec<u32> {
            let mut ids = Vec::new();
            while let Some(r) = self.conn.next_request() {
                ids.push(r.stream);
                self.conn
                    .respond(r.stream, Response::new(Bytes::from(vec![b'x'; size])));
            }
            ids
        }

        fn output(&mut self, budget: usize) -> Vec<Got> {
            let mut out = Output::default();
            self.conn.poll_output(&mut out, budget);
            let mut raw = Vec::new();
            for s in &out.segs {
                raw.extend_from_slice(s);
            }
            let mut frames = Vec::new();
            let mut b = &raw[..];
            while let Some(head) = Head::parse(b) {
                let end = HEADER_LEN + head.len;
                frames.push(Got {
                    head,
                    payload: b[HEADER_LEN..end].to_vec(),
                });
                b = &b[end..];
            }
            assert!(b.is_empty(), "output ends inside a frame");
            frames
        }
    }

    use frame::HEADER_LEN;

    fn data_of(frames: &[Got]) -> Vec<(u32, usize, bool)> {
        frames
            .iter()
            .filter(|g| g.head.kind == kind::DATA)
            .map(|g| (g.head.stream, g.payload.len(), g.head.has(flag::END_STREAM)))
            .collect()
    }

    /// The `:status` of the first HEADERS frame.
    fn status_of(frames: &[Got]) -> String {
        let h = frames.iter().find(|g| g.head.kind == kind::HEADERS);
        let f = hpack::Decoder::new(4096).decode(&h.expect("HEADERS").payload, 1 << 14);
        String::from_utf8_lossy(&f.expect("valid block").list[0].1).into_owned()
    }

    fn goaway(frames: &[Got]) -> Option<u32> {
        frames
            .iter()
            .find(|g| g.head.kind == kind::GOAWAY)
            .map(|g| u32::from_be_bytes([g.payload[4], g.payload[5], g.payload[6], g.payload[7]]))
    }

    #[test]
    fn request_becomes_ready_and_response_is_framed() {
        let mut p = Peer::new(Config::default(), &[]);
        p.get("/a.css?v=1", 1, &[("accept", "*/*")]);
        let r = p.conn.next_request().expect("a request");
        assert_eq!(r.stream, 1);
        assert_eq!(r.request.method(), Method::GET);
        assert_eq!(r.request.uri().to_string(), "http://a.example/a.css?v=1");
        assert_eq!(r.request.headers()["accept"], "*/*");
        p.conn
            .respond(1, Response::new(Bytes::from(vec![7u8; 40_000])));
        let frames = p.output(1 << 20);
        // Our SETTINGS, the ack of theirs, HEADERS, then 16384 + 16384 + 7232.
        assert_eq!(frames[0].head.kind, kind::SETTINGS);
        assert!(frames
            .iter()
            .any(|g| g.head.kind == kind::SETTINGS && g.head.has(flag::ACK)));
        let h = frames
            .iter()
            .find(|g| g.head.kind == kind::HEADERS)
            .unwrap();
        assert!(h.head.has(flag::END_HEADERS) && !h.head.has(flag::END_STREAM));
        // Only 65535 may be sent before a WINDOW_UPDATE: all 40000 fit.
        assert_eq!(
            data_of(&frames),
            vec![(1, 16384, false), (1, 16384, false), (1, 7232, true)]
        );
        assert_eq!(p.conn.open_streams(), 0);
    }

    fn links(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                http::header::LINK,
                HeaderValue::from_str(v).expect("a field value"),
            );
        }
        h
    }

    /// The fields of a header block sent whole in HEADERS + CONTINUATIONs.
    fn fields_of(frames: &[&Got]) -> Vec<(String, String)> {
        let block: Vec<u8> = frames.iter().flat_map(|g| g.payload.clone()).collect();
        let f = hpack::Decoder::new(4096)
            .decode(&block, 1 << 20)
            .expect("valid block");
        f.list
            .into_iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn an_early_hints_head_precedes_the_response_and_keeps_the_stream_open() {
        let mut p = Peer::new(Config::default(), &[]);
        p.get("/", 1, &[]);
        let r = p.conn.next_request().expect("a request");
        let hints = links(&[
            "<https://cdn.example>; rel=preconnect",
            "<https://a.example/a.css>; rel=preload; as=style",
        ]);
        assert!(p.conn.inform(r.stream, StatusCode::EARLY_HINTS, &hints));
        // The stream still waits for its response.
        assert!(p.conn.is_waiting(1));
        let frames = p.output(1 << 20);
        let heads: Vec<&Got> = frames
            .iter()
            .filter(|g| g.head.kind == kind::HEADERS)
            .collect();
        assert_eq!(heads.len(), 1);
        assert_eq!(heads[0].head.stream, 1);
        assert!(heads[0].head.has(flag::END_HEADERS));
        assert!(!heads[0].head.has(flag::END_STREAM));
        assert_eq!(
            fields_of(&heads),
            vec![
                (":status".into(), "103".into()),
                (
                    "link".into(),
                    "<https://cdn.example>; rel=preconnect".into()
                ),
                (
                    "link".into(),
                    "<https://a.example/a.css>; rel=preload; as=style".into()
                ),
            ]
        );
        p.conn
            .respond(1, Response::new(Bytes::from(vec![7u8; 100])));
        let frames = p.output(1 << 20);
        let h = frames
            .iter()
            .find(|g| g.head.kind == kind::HEADERS)
            .expect("the response");
        assert_eq!(fields_of(&[h])[0], (":status".into(), "200".into()));
        assert_eq!(data_of(&frames), vec![(1, 100, true)]);
        assert_eq!(p.conn.open_streams(), 0);
        // An empty final response ends the stream on its HEADERS.
        p.get("/", 3, &[]);
        assert!(p.conn.inform(3, StatusCode::EARLY_HINTS, &hints));
        p.conn.respond(3, Response::new(Bytes::new()));
        let frames = p.output(1 << 20);
        let ends: Vec<bool> = frames
            .iter()
            .filter(|g| g.head.kind == kind::HEADERS)
            .map(|g| g.head.has(flag::END_STREAM))
            .collect();
        assert_eq!(ends, vec![false, true]);
        assert!(!p.conn.is_done());
    }

    #[test]
    fn interim_heads_are_refused_when_they_cannot_be_sent() {
        let hints = links(&["</a.css>; rel=preload; as=style"]);
        let mut p = Peer::new(Config::default(), &[]);
        p.get("/", 1, &[]);
        // Not informational, or 101 (no Upgrade in HTTP/2).
        assert!(!p.conn.inform(1, StatusCode::OK, &hints));
        assert!(!p.conn.inform(1, StatusCode::SWITCHING_PROTOCOLS, &hints));
        // Never opened, or already answered.
        assert!(!p.conn.inform(7, StatusCode::EARLY_HINTS, &hints));
        p.answer_all(10);
        assert!(!p.conn.inform(1, StatusCode::EARLY_HINTS, &hints));
        // Reset by the client meanwhile.
        p.get("/", 3, &[]);
        frame::put_rst(&mut p.inbuf, 3, Reason::Cancel);
        p.flush();
        assert!(!p.conn.inform(3, StatusCode::EARLY_HINTS, &hints));
        let frames = p.output(1 << 20);
        let statuses: Vec<String> = frames
            .iter()
            .filter(|g| g.head.kind == kind::HEADERS)
            .map(|g| fields_of(&[g])[0].1.clone())
            .collect();
        assert_eq!(statuses, vec!["200"]);
        // Above the client's SETTINGS_MAX_HEADER_LIST_SIZE: not sent, and
        // the response still is.
        let mut p = Peer::new(Config::default(), &[(setting::MAX_HEADER_LIST_SIZE, 100)]);
        p.get("/", 1, &[]);
        assert!(!p.conn.inform(1, StatusCode::EARLY_HINTS, &hints));
        assert_eq!(p.answer_all(10), vec![1]);
        assert_eq!(status_of(&p.output(1 << 20)), "200");
    }

    #[test]
    fn a_large_early_hints_head_continues_in_continuation_frames() {
        let mut p = Peer::new(Config::default(), &[]);
        p.get("/", 1, &[]);
        let long: Vec<String> = (0..30)
            .map(|i| {
                format!(
                    "<https://a.example/{i}/{}>; rel=preload; as=script",
                    "x".repeat(900)
                )
            })
            .collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        assert!(p.conn.inform(1, StatusCode::EARLY_HINTS, &links(&refs)));
        p.answer_all(10);
        let frames = p.output(1 << 20);
        let block: Vec<&Got> = frames
            .iter()
            .filter(|g| matches!(g.head.kind, kind::HEADERS | kind::CONTINUATION))
            .collect();
        // 103: HEADERS (no END_HEADERS, no END_STREAM) + CONTINUATION,
        // then the 200's HEADERS.
        assert_eq!(
            block.len(),
            3,
            "{:?}",
            block.iter().map(|g| g.head).collect::<Vec<_>>()
        );
        assert_eq!(block[0].head.kind, kind::HEADERS);
        assert!(!block[0].head.has(flag::END_HEADERS) && !block[0].head.has(flag::END_STREAM));
        assert_eq!(block[1].head.kind, kind::CONTINUATION);
        assert!(block[1].head.has(flag::END_HEADERS));
        let hints = fields_of(&block[..2]);
        assert_eq!(hints.len(), 31);
        assert_eq!(hints[0].1, "103");
        assert_eq!(hints[30].1, long[29]);
        assert_eq!(block[2].head.kind, kind::HEADERS);
        assert_eq!(fields_of(&block[2..])[0].1, "200");
    }

    #[test]
    fn data_waits_for_both_flow_control_windows() {
        let mut p = Peer::new(Config::default(), &[(setting::INITIAL_WINDOW_SIZE, 1000)]);
        p.get("/big", 1, &[]);
        p.answer_all(5000);
        assert_eq!(data_of(&p.output(1 << 20)), vec![(1, 1000, false)]);
        assert!(data_of(&p.output(1 << 20)).is_empty());
        frame::put_window_update(&mut p.inbuf, 1, 10_000);
        p.flush();
        assert_eq!(data_of(&p.output(1 << 20)), vec![(1, 4000, true)]);
        // The connection window (65535) holds back a second stream.
        let mut p = Peer::new(
            Config::default(),
            &[(setting::INITIAL_WINDOW_SIZE, 1 << 20)],
        );
        p.get("/big", 1, &[]);
        p.answer_all(100_000);
        let sent: usize = data_of(&p.output(1 << 20)).iter().map(|d| d.1).sum();
        assert_eq!(sent, 65_535);
        frame::put_window_update(&mut p.inbuf, 0, 40_000);
        p.flush();
        let sent: usize = data_of(&p.output(1 << 20)).iter().map(|d| d.1).sum();
        assert_eq!(sent, 100_000 - 65_535);
    }

    #[test]
    fn urgent_streams_go_first_and_incremental_ones_take_turns() {
        let mut p = Peer::new(
            Config::default(),
            &[(setting::INITIAL_WINDOW_SIZE, 1 << 20)],
        );
        frame::put_window_update(&mut p.inbuf, 0, 1 << 20);
        p.get("/img.jpg", 1, &[("priority", "u=5")]);
        p.get("/style.css", 3, &[("priority", "u=0")]);
        p.get("/doc", 5, &[]);
        p.answer_all(20_000);
        let order: Vec<u32> = data_of(&p.output(1 << 20)).iter().map(|d| d.0).collect();
        assert_eq!(order, vec![3, 3, 5, 5, 1, 1]);

        let mut p = Peer::new(
            Config::default(),
            &[(setting::INITIAL_WINDOW_SIZE, 1 << 20)],
        );
        frame::put_window_update(&mut p.inbuf, 0, 1 << 20);
        p.get("/a.jpg", 1, &[("priority", "u=3, i")]);
        p.get("/b.jpg", 3, &[("priority", "i")]);
        p.answer_all(40_000);
        let order: Vec<u32> = data_of(&p.output(1 << 20)).iter().map(|d| d.0).collect();
        assert_eq!(order, vec![1, 3, 1, 3, 1, 3]);
    }

    #[test]
    fn connection_errors_send_goaway_and_end() {
        for bad in [
            // DATA on stream 0.
            {
                let mut b = BytesMut::new();
                frame::put_head(&mut b, 1, kind::DATA, 0, 0);
                b.put_u8(0);
                b
            },
            // PING of 7 bytes.
            {
                let mut b = BytesMut::new();
                frame::put_head(&mut b, 7, kind::PING, 0, 0);
                b.put_slice(&[0; 7]);
                b
            },
            // HEADERS on an even stream.
            {
                let mut b = BytesMut::new();
                frame::put_head(&mut b, 1, kind::HEADERS, flag::END_HEADERS, 2);
                b.put_u8(0x82);
                b
            },
        ] {
            let mut p = Peer::new(Config::default(), &[]);
            p.inbuf = bad;
            p.flush();
            assert!(p.conn.is_done());
            assert!(!p.conn.wants_read());
            let frames = p.output(1 << 20);
            assert!(goaway(&frames).is_some_and(|c| c != 0), "{frames:?}");
        }
        // A bad preface ends the connection too.
        let mut c = Connection::new(Config::default());
        let mut b = BytesMut::from(&b"GET / HTTP/1.1\r\n\r\n"[..]);
        c.recv(&mut b);
        assert!(c.is_done());
        assert_eq!(c.error().map(|e| e.0), Some(Reason::Protocol as u32));
    }

    #[test]
    fn limits_refuse_streams_and_answer_413_and_431() {
        let cfg = Config {
            max_concurrent_streams: 2,
            max_header_list_size: 300,
            max_request_body: 10,
            ..Config::default()
        };
        let mut p = Peer::new(cfg, &[]);
        p.get("/1", 1, &[]);
        p.get("/2", 3, &[]);
        p.get("/3", 5, &[]);
        let frames = p.output(1 << 20);
        let rst: Vec<(u32, u32)> = frames
            .iter()
            .filter(|g| g.head.kind == kind::RST_STREAM)
            .map(|g| {
                (
                    g.head.stream,
                    u32::from_be_bytes(g.payload[..4].try_into().unwrap()),
                )
            })
            .collect();
        assert_eq!(rst, vec![(5, Reason::RefusedStream as u32)]);
        assert_eq!(p.answer_all(1), vec![1, 3]);
        p.output(1 << 20);
        // 431: a header list above 300 bytes is answered, not decoded.
        let long = "v".repeat(250);
        p.get("/4", 7, &[("x-long", &long)]);
        assert!(p.conn.next_request().is_none());
        assert_eq!(status_of(&p.output(1 << 20)), "431");
        // 413: a body above 10 bytes is answered before it ends.
        p.post_head(9);
        frame::put_head(&mut p.inbuf, 20, kind::DATA, 0, 9);
        p.inbuf.put_slice(&[0; 20]);
        p.flush();
        let frames = p.output(1 << 20);
        assert_eq!(status_of(&frames), "413");
        // The stream is then closed with RST_STREAM(NO_ERROR).
        assert!(frames
            .iter()
            .any(|g| g.head.kind == kind::RST_STREAM && g.head.stream == 9));
    }

    #[test]
    fn a_body_past_its_window_is_a_flow_control_error() {
        let cfg = Config {
            max_request_body: 10,
            ..Config::default()
        };
        let mut p = Peer::new(cfg, &[]);
        p.post_head(1);
        // The body passes 10 bytes in the first frame (413), so the stream
        // gets no more window: the fourth 16 KB frame overruns 65 535.
        for _ in 0..4 {
            frame::put_head(&mut p.inbuf, 16_384, kind::DATA, 0, 1);
            p.inbuf.put_slice(&[0u8; 16_384]);
        }
        p.flush();
        let frames = p.output(1 << 20);
        assert_eq!(status_of(&frames), "413");
        let rst: Vec<(u32, u32)> = frames
            .iter()
            .filter(|g| g.head.kind == kind::RST_STREAM)
            .map(|g| {
                (
                    g.head.stream,
                    u32::from_be_bytes(g.payload[..4].try_into().unwrap()),
                )
            })
            .collect();
        assert!(rst.contains(&(1, Reason::FlowControl as u32)), "{rst:?}");
        // The connection's window was given back as the frames came.
        let updates = frames
            .iter()
            .filter(|g| g.head.kind == kind::WINDOW_UPDATE && g.head.stream == 0)
            .count();
        assert!(updates >= 1);
    }

    #[test]
    fn settings_and_ping_floods_end_the_connection() {
        let cfg = Config {
            max_control_frames: 20,
            ..Config::default()
        };
        let mut p = Peer::new(cfg, &[]);
        // One SETTINGS repeating the window 1000 times is one frame, its
        // last value applied.
        let mut payload = Vec::new();
        for v in 0..1000u32 {
            payload.extend_from_slice(&setting::INITIAL_WINDOW_SIZE.to_be_bytes());
            payload.extend_from_slice(&(1000 + v).to_be_bytes());
        }
        frame::put_head(&mut p.inbuf, payload.len(), kind::SETTINGS, 0, 0);
        p.inbuf.put_slice(&payload);
        for _ in 0..18 {
            frame::put_head(&mut p.inbuf, 8, kind::PING, 0, 0);
            p.inbuf.put_slice(&[7u8; 8]);
        }
        p.flush();
        assert_eq!(goaway(&p.output(1 << 20)), None);
        assert_eq!(p.conn.peer_window, 1999);
        frame::put_head(&mut p.inbuf, 8, kind::PING, 0, 0);
        p.inbuf.put_slice(&[7u8; 8]);
        p.flush();
        p.assert_goaway(Reason::EnhanceYourCalm);
    }

    #[test]
    fn rapid_resets_end_the_connection() {
        let cfg = Config {
            max_peer_resets: 10,
            ..Config::default()
        };
        let mut p = Peer::new(cfg, &[]);
        // Answered streams raise the allowance: 5 answered, 15 reset is the
        // most.
        for i in 0..5 {
            p.get("/a", 1 + 2 * i, &[]);
        }
        assert_eq!(p.answer_all(1).len(), 5);
        p.output(1 << 20);
        let reset = |p: &mut Peer, id: u32| {
            p.get("/b", id, &[]);
            frame::put_rst(&mut p.inbuf, id, Reason::Cancel);
            p.flush();
        };
        for i in 0..15 {
            reset(&mut p, 11 + 2 * i);
        }
        assert!(p.conn.take_resets());
        assert!(!p.conn.take_resets());
        assert_eq!(goaway(&p.output(1 << 20)), None);
        reset(&mut p, 41);
        p.assert_goaway(Reason::EnhanceYourCalm);
    }

    #[test]
    fn header_blocks_are_capped_at_twice_the_list_size() {
        let cfg = Config {
            max_header_list_size: 4096,
            ..Config::default()
        };
        // 8 KB (twice the list size) in CONTINUATIONs is the most.
        let mut p = Peer::new(cfg, &[]);
        let block = literal_block(&[("x", &"v".repeat(9000))]);
        frame::put_head(&mut p.inbuf, 4000, kind::HEADERS, 0, 1);
        p.inbuf.put_slice(&block[..4000]);
        frame::put_head(&mut p.inbuf, 4000, kind::CONTINUATION, 0, 1);
        p.inbuf.put_slice(&block[4000..8000]);
        frame::put_head(&mut p.inbuf, 1000, kind::CONTINUATION, 0, 1);
        p.inbuf.put_slice(&block[8000..9000]);
        p.flush();
        p.assert_goaway(Reason::EnhanceYourCalm);
    }

    #[test]
    fn an_oversized_block_that_indexes_ends_the_connection_after_431() {
        let cfg = Config {
            max_header_list_size: 300,
            ..Config::default()
        };
        let mut p = Peer::new(cfg, &[]);
        // A request whose fields pass 300 bytes and then ask to be added
        // to the table: 431, and the table is no longer the client's.
        let mut block = literal_block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "a.example"),
            (":path", "/"),
            ("x-long", &"v".repeat(300)),
        ]);
        block.push(0x40); // literal with incremental indexing, new name
        hpack::put_str(&mut block, b"x-more");
        hpack::put_str(&mut block, b"1");
        frame::put_head(
            &mut p.inbuf,
            block.len(),
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
        );
        p.inbuf.put_slice(&block);
        p.flush();
        assert_eq!(status_of(&p.output(1 << 20)), "431");
        // The next request cannot be decoded: COMPRESSION_ERROR.
        p.get("/", 3, &[]);
        assert_eq!(goaway(&p.output(1 << 20)), Some(Reason::Compression as u32));
    }

    #[test]
    fn malformed_requests_are_stream_errors_only() {
        let mut p = Peer::new(Config::default(), &[]);
        for (i, extra) in [
            vec![("Upper", "x")],
            vec![("connection", "close")],
            vec![("te", "gzip")],
            vec![(":status", "200")],
        ]
        .into_iter()
        .enumerate()
        {
            let id = 1 + 2 * i as u32;
            p.get("/", id, &extra);
            let frames = p.output(1 << 20);
            assert!(
                frames
                    .iter()
                    .any(|g| g.head.kind == kind::RST_STREAM && g.head.stream == id),
                "{extra:?}"
            );
        }
        assert!(!p.conn.is_done());
        p.get("/ok", 9, &[]);
        assert_eq!(p.answer_all(3), vec![9]);
    }

    proptest! {
        /// Arbitrary bytes after a valid preface never panic, and never
        /// make the output grow beyond the control backlog limit.
        #[test]
        fn arbitrary_frames_do_not_panic(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..40)
        ) {
            let mut p = Peer::new(Config::default(), &[]);
            for c in chunks {
                let mut b = BytesMut::from(&c[..]);
                p.conn.recv(&mut b);
                p.answer_all(100);
                let mut out = Output::default();
                p.conn.poll_output(&mut out, 1 << 16);
                prop_assert!(out.len() < MAX_CONTROL_BACKLOG + (1 << 17));
            }
        }
    }
}
