//! The server half of seed 001's content-aware initial window: a client asks
//! for a window in its first request on a connection (`mewa-iw: 114`), and
//! the origin sets that connection's congestion window before the response's
//! first byte, bounded by its policy ([`IwPolicy::max_segments`]).
//!
//! Seed 001 §2: the optimal IW "will be embedded in the very first HTTP
//! message to be enforced by the remote web server".
//!
//! - **Linux TCP**: the window goes into the socket storage of mewa's BPF
//!   controls ([`mewa_cc_bpf::IwStore`]) and the socket is switched to
//!   [`IwPolicy::tcp_control`] (`mewa_iw`, cubic otherwise, or `mewa_fld`):
//!   the switch runs the control's `init()`, which sets the window, bounded
//!   again by the peer's receive window. A window chosen at connection setup
//!   (`TCP_BPF_IW`) would come too late for a decision made at the first
//!   request: over TLS the handshake has already sent data.
//! - **QUIC**: the connection's controller is wrapped in [`IwController`],
//!   which reads the granted window from a [`QuicSlot`] shared with the
//!   connection's request handler.
//!
//! Either way the grant happens once per connection, and the response that
//! carried it says what was granted (`mewa-iw-granted: 114`), so the client
//! can log what it got. Requests without the header, or with a malformed
//! one, leave the connection as it is.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, HeaderValue};
use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

pub use mewa_model::iw::{GRANTED_HEADER, HEADER};
/// The default [`IwPolicy::max_segments`]: seed 001's largest optimum is 171
/// segments (400 KB page at 150 ms RTT, Fig. 5).
pub const DEFAULT_MAX_SEGMENTS: u32 = 200;

/// What the origin grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IwPolicy {
    /// The largest window granted, segments (`--iw-max`); larger requests
    /// get this.
    pub max_segments: u32,
    /// The Linux TCP control a connection is switched to when granted:
    /// [`mewa_cc_bpf::IW`] (cubic) or [`mewa_cc_bpf::FLD`].
    pub tcp_control: String,
}

impl Default for IwPolicy {
    fn default() -> IwPolicy {
        IwPolicy {
            max_segments: DEFAULT_MAX_SEGMENTS,
            tcp_control: mewa_cc_bpf::IW.into(),
        }
    }
}

/// Why a request's `mewa-iw` was not honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Not 1–5 ASCII digits.
    #[error("`{HEADER}: {0}` is not a whole number of segments (1 to 65535)")]
    Malformed(String),
    /// Zero segments.
    #[error("`{HEADER}: 0`: a window of no segments")]
    Zero,
}

/// The window `headers` ask for: `Ok(None)` without the header.
pub fn parse_ask(headers: &HeaderMap) -> Result<Option<u32>, AskError> {
    let Some(v) = headers.get(HEADER) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(v.as_bytes());
    let t = text.trim();
    if t.is_empty() || t.len() > 5 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AskError::Malformed(text.chars().take(40).collect()));
    }
    let n: u32 = t.parse().map_err(|_| AskError::Malformed(t.into()))?;
    if n == 0 || n > 65_535 {
        return Err(if n == 0 {
            AskError::Zero
        } else {
            AskError::Malformed(t.into())
        });
    }
    Ok(Some(n))
}

/// One connection's grant: the first request that asks decides, once.
pub struct ConnWindow {
    policy: Arc<IwPolicy>,
    how: How,
    decided: AtomicBool,
}

enum How {
    /// A TCP socket (a duplicate of the connection's descriptor: the socket
    /// storage is keyed by any descriptor of the socket) and the store.
    Tcp {
        socket: socket2::Socket,
        store: Arc<mewa_cc_bpf::IwStore>,
    },
    /// A QUIC connection's controller slot.
    Quic(Arc<QuicSlot>),
}

impl std::fmt::Debug for ConnWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnWindow")
            .field("policy", &self.policy)
            .field(
                "transport",
                &match self.how {
                    How::Tcp { .. } => "tcp",
                    How::Quic(_) => "quic",
                },
            )
            .field("decided", &self.decided.load(Ordering::Relaxed))
            .finish()
    }
}

/// What a grant did, for the response header and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The window set, segments.
    Set(u32),
    /// Nothing set, and why.
    Refused(String),
}

impl Grant {
    /// The `mewa-iw-granted` value: the segments, or `0; reason`.
    pub fn header_value(&self) -> HeaderValue {
        let text = match self {
            Grant::Set(n) => n.to_string(),
            Grant::Refused(why) => {
                let clean: String = why
                    .chars()
                    .map(|c| {
                        if c.is_ascii_graphic() || c == ' ' {
                            c
                        } else {
                            '?'
                        }
                    })
                    .take(200)
                    .collect();
                format!("0; {clean}")
            }
        };
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("0"))
    }
}

impl ConnWindow {
    /// For a TCP connection: duplicates the descriptor (closed when this is
    /// dropped, with the connection's task).
    pub fn tcp(
        stream: &tokio::net::TcpStream,
        store: Arc<mewa_cc_bpf::IwStore>,
        policy: Arc<IwPolicy>,
    ) -> std::io::Result<ConnWindow> {
        let socket = socket2::SockRef::from(stream).try_clone()?;
        Ok(ConnWindow {
            policy,
            how: How::Tcp { socket, store },
            decided: AtomicBool::new(false),
        })
    }

    /// For a QUIC connection whose controller is an [`IwController`] on
    /// `slot`.
    pub fn quic(slot: Arc<QuicSlot>, policy: Arc<IwPolicy>) -> ConnWindow {
        ConnWindow {
            policy,
            how: How::Quic(slot),
            decided: AtomicBool::new(false),
        }
    }

    /// Honours the request's `mewa-iw` if it is the first on the connection
    /// to carry one; `None` when there is nothing to say in the response.
    pub fn on_request(&self, headers: &HeaderMap) -> Option<Grant> {
        let asked = match parse_ask(headers) {
            Ok(None) => return None,
            Ok(Some(n)) => n,
            Err(e) => return Some(Grant::Refused(e.to_string())),
        };
        if self.decided.swap(true, Ordering::AcqRel) {
            return Some(Grant::Refused(
                "granted once per connection, at its first request".into(),
            ));
        }
        let want = asked.min(self.policy.max_segments);
        Some(match &self.how {
            How::Tcp { socket, store } => match set_tcp(socket, store, want, &self.policy) {
                Ok(n) => Grant::Set(n),
                Err(e) => Grant::Refused(e),
            },
            How::Quic(slot) => Grant::Set(slot.grant(want)),
        })
    }
}

/// This connection's initial-window grant, if the origin grants them.
pub(crate) type Window = Option<Arc<ConnWindow>>;

/// `response` with the grant `window` made for `req`, if any, said in its
/// headers: how every HTTP version's server answers a request that asks.
pub(crate) fn with_grant<B, R>(
    window: &Window,
    req: &http::Request<B>,
    mut response: http::Response<R>,
) -> http::Response<R> {
    if let Some(g) = window.as_ref().and_then(|w| w.on_request(req.headers())) {
        response
            .headers_mut()
            .insert(GRANTED_HEADER, g.header_value());
    }
    response
}

/// Stores `segments` for the socket and switches its control so that
/// `init()` applies it; returns what the control set.
fn set_tcp(
    socket: &socket2::Socket,
    store: &mewa_cc_bpf::IwStore,
    segments: u32,
    policy: &IwPolicy,
) -> Result<u32, String> {
    use std::os::fd::AsFd;
    store
        .ask(socket.as_fd(), segments)
        .map_err(|e| e.to_string())?;
    // Setting the name a socket already has does not run init() again:
    // pass through reno (no init of its own) first.
    socket
        .set_tcp_congestion(b"reno")
        .map_err(|e| format!("TCP_CONGESTION reno: {e}"))?;
    socket
        .set_tcp_congestion(policy.tcp_control.as_bytes())
        .map_err(|e| format!("TCP_CONGESTION {}: {e}", policy.tcp_control))?;
    let granted = store
        .granted(socket.as_fd())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} did not apply the window", policy.tcp_control))?;
    make_room(socket, granted);
    Ok(granted)
}

/// The send buffer the kernel sized at the handshake holds about two
/// windows of ten segments: a larger first flight would wait on it, not on
/// the window. Raise it to the autotuning ceiling (`tcp_wmem`'s third value)
/// when it cannot hold two granted windows. Setting `SO_SNDBUF` ends
/// autotuning for this socket, which is why it goes to the ceiling
/// autotuning would have reached.
fn make_room(socket: &socket2::Socket, granted: u32) {
    // Payload plus the kernel's per-segment overhead, as tcp_sndbuf_expand
    // counts it (about 2.3 KB per 1448-byte segment).
    let needed = 2 * granted as usize * 2368;
    let Ok(now) = socket.send_buffer_size() else {
        return;
    };
    if now >= needed {
        return;
    }
    // The origin's sockets live in one namespace: read its ceiling once.
    static CEILING: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let ceiling = *CEILING.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
            .ok()
            .and_then(|s| s.split_whitespace().nth(2).and_then(|v| v.parse().ok()))
            .unwrap_or(4 << 20)
    });
    // The kernel doubles what it is given.
    let _ = socket.set_send_buffer_size((ceiling / 2).max(needed / 2));
}

// ------------------------------------------------------------------- QUIC

/// What a QUIC connection's handler and its controller share.
#[derive(Debug, Default)]
pub struct QuicSlot {
    /// Bytes added to the inner controller's window (0: none).
    lent: AtomicU64,
    /// The inner controller's window after its last event, bytes.
    window: AtomicU64,
    /// The datagram size the path uses now, bytes.
    mtu: AtomicU64,
}

impl QuicSlot {
    /// Grants a window of `segments` datagrams: lends the inner controller
    /// what it lacks. Returns the window in segments.
    fn grant(&self, segments: u32) -> u32 {
        let mtu = self.mtu.load(Ordering::Acquire).max(1200);
        let want = u64::from(segments) * mtu;
        let have = self.window.load(Ordering::Acquire);
        self.lent
            .store(want.saturating_sub(have), Ordering::Release);
        (want.max(have) / mtu) as u32
    }
}

/// A quinn [`ControllerFactory`] that wraps another's controllers in
/// [`IwController`] on one [`QuicSlot`]: one factory per connection.
pub struct IwFactory {
    /// The controller every connection would otherwise get.
    pub inner: Arc<dyn ControllerFactory + Send + Sync>,
    /// This connection's slot.
    pub slot: Arc<QuicSlot>,
}

impl ControllerFactory for IwFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        self.slot
            .mtu
            .store(u64::from(current_mtu), Ordering::Release);
        let inner = self.inner.clone().build(now, current_mtu);
        self.slot.window.store(inner.window(), Ordering::Release);
        Box::new(IwController {
            inner,
            slot: self.slot.clone(),
        })
    }
}

/// A QUIC controller whose window starts larger when the client asked: the
/// inner controller's window plus what the grant lent it.
///
/// The lent bytes stay constant while the inner controller grows, so slow
/// start doubles the whole window each round trip (the inner one grows by
/// every byte acknowledged, which the larger window makes more of); the
/// first congestion event takes them back, and from there the inner
/// controller alone decides (a reduction from its own window, which is
/// smaller than a reduction of the whole: the conservative side).
pub struct IwController {
    inner: Box<dyn Controller>,
    slot: Arc<QuicSlot>,
}

impl IwController {
    fn publish(&self) {
        self.slot
            .window
            .store(self.inner.window(), Ordering::Release);
    }
}

impl Controller for IwController {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.inner.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.inner.on_ack(now, sent, bytes, app_limited, rtt);
        self.publish();
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
        self.slot.lent.store(0, Ordering::Release);
        self.publish();
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu);
        self.slot.mtu.store(u64::from(new_mtu), Ordering::Release);
    }

    fn window(&self) -> u64 {
        self.inner.window() + self.slot.lent.load(Ordering::Acquire)
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(IwController {
            inner: self.inner.clone_box(),
            slot: self.slot.clone(),
        })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn::congestion::CubicConfig;

    fn headers(v: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HEADER, HeaderValue::from_bytes(v).unwrap());
        h
    }

    #[test]
    fn asks_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_ask(&HeaderMap::new()), Ok(None));
        assert_eq!(parse_ask(&headers(b"114")), Ok(Some(114)));
        assert_eq!(parse_ask(&headers(b" 20 ")), Ok(Some(20)));
        assert_eq!(parse_ask(&headers(b"0")), Err(AskError::Zero));
        for bad in [
            &b"-3"[..],
            b"1e3",
            b"99999",
            b"123456",
            b"",
            b"0x10",
            b"12;q=1",
        ] {
            assert!(parse_ask(&headers(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quic_grant_is_bounded_and_once() {
        let slot = Arc::new(QuicSlot::default());
        let f = Arc::new(IwFactory {
            inner: Arc::new(CubicConfig::default()),
            slot: slot.clone(),
        });
        let c = f.build(Instant::now(), 1200);
        let before = c.window();
        let w = ConnWindow::quic(
            slot,
            Arc::new(IwPolicy {
                max_segments: 50,
                ..IwPolicy::default()
            }),
        );
        assert_eq!(w.on_request(&HeaderMap::new()), None);
        assert_eq!(w.on_request(&headers(b"500")), Some(Grant::Set(50)));
        assert_eq!(c.window(), 50 * 1200);
        assert!(c.window() > before);
        assert!(matches!(
            w.on_request(&headers(b"20")),
            Some(Grant::Refused(_))
        ));
        assert_eq!(c.window(), 50 * 1200, "the second ask changes nothing");
    }

    #[test]
    fn quic_congestion_returns_the_lent_window() {
        let slot = Arc::new(QuicSlot::default());
        let f = Arc::new(IwFactory {
            inner: Arc::new(CubicConfig::default()),
            slot: slot.clone(),
        });
        let now = Instant::now();
        let mut c = f.build(now, 1200);
        slot.grant(100);
        assert_eq!(c.window(), 100 * 1200);
        c.on_congestion_event(now, now, false, 1200);
        assert!(c.window() < 100 * 1200 / 2, "{}", c.window());
    }

    #[test]
    fn refusals_make_printable_headers() {
        let g = Grant::Refused("bad\r\nthing é".into());
        let v = g.header_value();
        assert!(v.to_str().unwrap().starts_with("0; bad??thing"));
    }
}
