//! What one page load leaves behind.
//!
//! Every time is a number of microseconds since the load started (the moment
//! the loader began resolving the root document), measured with one monotonic
//! clock in the loader's process. Integer microseconds keep records exact and
//! comparable across runs; the metrics turn them into seconds.
//!
//! The record is the single source the metrics ([`crate::metrics`]) and the
//! HAR export ([`crate::har`]) read, so they can never disagree with each
//! other about what happened.

use serde::{Deserialize, Serialize};

/// The HTTP version a load used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1, up to 6 connections per host.
    H1,
    /// HTTP/2 (h2 over TLS, or h2c by prior knowledge without TLS).
    H2,
    /// HTTP/3 over QUIC.
    H3,
}

impl Protocol {
    /// The name HAR and Chrome use: `http/1.1`, `h2`, `h3`.
    pub fn alpn(self) -> &'static str {
        match self {
            Protocol::H1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        })
    }
}

/// A name on the command line or in a config file that is none of the
/// choices (a protocol, a policy, an assignment rule).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{got}`; choose {choices}")]
pub struct UnknownName {
    /// What kind of name.
    pub what: &'static str,
    /// What was given.
    pub got: String,
    /// The accepted names.
    pub choices: &'static str,
}

impl std::str::FromStr for Protocol {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Protocol, UnknownName> {
        match s.to_ascii_lowercase().as_str() {
            "h1" | "http1" | "http/1.1" => Ok(Protocol::H1),
            "h2" | "http2" | "h2c" => Ok(Protocol::H2),
            "h3" | "http3" | "quic" => Ok(Protocol::H3),
            other => Err(UnknownName {
                what: "protocol",
                got: other.to_string(),
                choices: "h1, h2 or h3",
            }),
        }
    }
}

/// A burst of body bytes handed to the loader at one instant (one HTTP/2 or
/// HTTP/3 DATA frame, or one read on HTTP/1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// When the bytes arrived, µs since the load started.
    pub t_us: u64,
    /// How many body bytes.
    pub bytes: u64,
}

/// One object of the page as the loader fetched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectTiming {
    /// The object's id in the corpus page.
    pub id: u32,
    /// Absolute URL requested.
    pub url: String,
    /// Host of the URL.
    pub host: String,
    /// MIME type the corpus gives the object.
    pub content_type: String,
    /// The connection ([`ConnectionTiming::id`]) that carried the request;
    /// `None` if the object failed before it got one.
    pub connection: Option<u32>,
    /// When the loader learned it needs the object (its parent finished, and
    /// for a script's children the script's computation ended).
    pub discovered_us: u64,
    /// When the request was handed to the connection (HTTP/2, HTTP/3: the
    /// stream was opened; HTTP/1.1: the request was written). The time
    /// between discovery and this is waiting for a connection.
    pub request_us: u64,
    /// When the response head arrived.
    pub first_byte_us: Option<u64>,
    /// When the last body byte arrived (the object is done).
    pub end_us: Option<u64>,
    /// HTTP status code; 0 when no response arrived.
    pub status: u16,
    /// The status the page model expects (a recorded page's 3xx, 204 or
    /// 404; 200 otherwise). An object is fine when it got this one.
    #[serde(default = "ok_status")]
    pub expected_status: u16,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Size of the response head as HTTP/1.1 writes it (status line and
    /// fields), computed from the received fields for every protocol: exact
    /// for HTTP/1.1 up to header spelling, an upper estimate for HTTP/2 and
    /// HTTP/3, which compress heads.
    pub header_bytes: u64,
    /// Body arrivals in time order; the sum of `bytes` is `body_bytes`.
    pub chunks: Vec<Chunk>,
    /// Why the object failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ObjectTiming {
    /// Whether the object arrived completely with the status the page
    /// model expects.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.end_us.is_some() && self.status == self.expected_status
    }
}

fn ok_status() -> u16 {
    200
}

/// One transport connection the load used: one it opened, or (in a
/// [`crate::Session`]) one an earlier load opened and left open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionTiming {
    /// Identifier within the load, counted from 0 in the order the load
    /// opened connections or first reused them.
    pub id: u32,
    /// The host the connection was opened for (with coalescing, the first
    /// host that needed it).
    pub host: String,
    /// Peer address, `ip:port`.
    pub addr: String,
    /// HTTP version spoken on it.
    pub protocol: Protocol,
    /// Whether TLS (or QUIC's TLS) protects it.
    pub tls: bool,
    /// When the loader started connecting: the SYN for TCP, the Initial for
    /// QUIC. A reused connection was open before the load started: 0, so
    /// that "first SYN to last byte" windows start with the load.
    pub open_us: u64,
    /// TCP: when the connection was established. QUIC: when the handshake
    /// completed (the transport and crypto handshakes are one). `None` for
    /// a reused connection: this load saw no handshake, so nothing reads a
    /// handshake RTT off it.
    pub connected_us: Option<u64>,
    /// When the connection was ready for requests: after the TLS handshake
    /// (and for HTTP/2 the client preface); equal to `connected_us` for
    /// cleartext HTTP/1.1. `None` for a reused connection (HAR then writes
    /// `connect: -1`, its mark of a reused connection).
    pub ready_us: Option<u64>,
    /// When the loader closed it or saw it close (or, in a session, stopped
    /// using it after a request on it failed). `None` for a connection a
    /// [`crate::Session`] keeps open for its next load.
    pub close_us: Option<u64>,
    /// Why the connection failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The initial window asked of the server and what it granted (seed
    /// 001), when the load asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iw: Option<IwRecord>,
    /// Opened by an earlier load of the same [`crate::Session`]
    /// and reused by this one (a browser's keep-alive connection between
    /// page views). Its first request in this load meets whatever the
    /// idle time did to its congestion window (seed 003: slow start after
    /// idle).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// One connection's initial-window exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IwRecord {
    /// Segments asked for in the first request (none: the choice was the
    /// default window, so nothing was asked).
    pub asked: Option<u32>,
    /// The RTT the choice used, µs: TCP's connect time, QUIC's estimate
    /// after its handshake.
    pub rtt_us: u64,
    /// Why the default window was kept, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// What the server said it granted (`mewa-iw-granted`): segments, or 0
    /// with its reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<String>,
}

impl IwRecord {
    /// The granted segments, when the server granted a window.
    pub fn granted_segments(&self) -> Option<u32> {
        let g = self.granted.as_deref()?;
        let n: u32 = g.split(';').next()?.trim().parse().ok()?;
        (n > 0).then_some(n)
    }
}

/// Everything one page load recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRecord {
    /// The corpus page's name.
    pub page: String,
    /// URL of the root document as loaded (scheme chosen by the loader).
    pub url: String,
    /// HTTP version of the load.
    pub protocol: Protocol,
    /// Whether the load used TLS.
    pub tls: bool,
    /// Wall-clock start, ms since the Unix epoch (for HAR's
    /// `startedDateTime`; durations never use it).
    pub started_unix_ms: u64,
    /// When the last object finished, µs since the start: the loader's "all
    /// objects done" time. `None` if the load did not complete.
    pub done_us: Option<u64>,
    /// Every object of the page, root first, in discovery order.
    pub objects: Vec<ObjectTiming>,
    /// Every connection the load used, in the order it opened them or (in
    /// a [`crate::Session`]) first reused them.
    pub connections: Vec<ConnectionTiming>,
    /// Load-level errors (timeout, no route, …); object and connection
    /// errors are kept on those.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl LoadRecord {
    /// Whether every object arrived with its expected status and nothing
    /// failed.
    pub fn ok(&self) -> bool {
        self.errors.is_empty() && self.done_us.is_some() && self.objects.iter().all(|o| o.ok())
    }

    /// The first thing that went wrong: a load-level error, else the first
    /// failed object's or connection's error.
    pub fn first_error(&self) -> Option<String> {
        self.errors
            .iter()
            .chain(self.objects.iter().filter_map(|o| o.error.as_ref()))
            .chain(self.connections.iter().filter_map(|c| c.error.as_ref()))
            .next()
            .cloned()
    }

    /// Sum of the body bytes received.
    pub fn body_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.body_bytes).sum()
    }

    /// The record as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a record from JSON, naming what is wrong.
    pub fn from_json(text: &str) -> Result<LoadRecord, serde_json::Error> {
        serde_json::from_str(text)
    }
}
