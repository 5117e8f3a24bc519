//! The page metadata model: what the edge knows about a page and the network
//! around it, before it is squeezed into a hint.
//!
//! Seed 000 §II: the edge caches "the meta-data of each embedded object, such as
//! object size, object URL, object type, last update time", and "the end-to-end
//! latency from the base station to web server". Seed 001 §2 adds "the computation
//! latency to be experienced by the mobile device" and "a policy control
//! parameter α".

use serde::{Deserialize, Serialize};

/// How the browser learns that it needs an object. The client cares because an
/// object found by a script cannot be requested before the script has run
/// (seed 001 §1: computation latency "blocks the network transmission").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Discovery {
    /// The page's main document itself.
    Document,
    /// Referenced from HTML or CSS markup, found by the parser.
    Parser,
    /// Requested by a script after it ran.
    Script,
    /// Anything else (preload, redirect, beacon, unknown initiator).
    Other,
}

impl Discovery {
    /// All variants, in wire-code order.
    pub const ALL: [Discovery; 4] = [
        Discovery::Document,
        Discovery::Parser,
        Discovery::Script,
        Discovery::Other,
    ];

    /// Two-bit code used by the wire format.
    pub fn code(self) -> u8 {
        match self {
            Discovery::Document => 0,
            Discovery::Parser => 1,
            Discovery::Script => 2,
            Discovery::Other => 3,
        }
    }

    /// Inverse of [`Discovery::code`]; only the low two bits are read.
    pub fn from_code(code: u8) -> Discovery {
        Discovery::ALL[usize::from(code & 3)]
    }
}

/// One object (sub-resource) of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// Absolute URL as requested (fragment removed).
    pub url: String,
    /// Host part of the URL, lower case, without port.
    pub host: String,
    /// Bytes on the wire for the response body (encoded, i.e. compressed size if
    /// content-encoded). `None` when the recording did not say: importers report
    /// such objects instead of pretending they were empty.
    pub size: Option<u64>,
    /// MIME type without parameters, when known.
    pub content_type: Option<String>,
    /// `Last-Modified` response header, verbatim, when known.
    pub last_modified: Option<String>,
    /// `ETag` response header, verbatim, when known.
    pub etag: Option<String>,
    /// How the object was discovered.
    pub discovery: Discovery,
    /// Index (into [`PageMeta::objects`]) of the object that caused this one to
    /// be requested, when known.
    pub parent: Option<usize>,
    /// What the recording says about the exchange beyond the body (status,
    /// redirect target, connection, timings), for replaying the page in the
    /// lab; empty for objects that do not come from a recording.
    #[serde(default, skip_serializing_if = "Recorded::is_empty")]
    pub recorded: Recorded,
}

/// The parts of a recorded exchange a replay needs and a hint does not: the
/// lab serves an imported page with the recorded status codes, redirects,
/// connection sharing and server think time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// HTTP status of the response (`None`: no response was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Absolute URL a 3xx response sent the browser to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The recording's id of the connection that carried the exchange
    /// (HAR `connection`/`_socket`, CDP `connectionId`). Hosts that share
    /// one were coalesced by the recording browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// Milliseconds from the request's last byte sent to the response's
    /// first byte (HAR `timings.wait`, CDP `receiveHeadersEnd − sendEnd`):
    /// one round trip plus the server's think time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u32>,
    /// Milliseconds of the TCP handshake when this exchange opened its
    /// connection (TLS excluded): one round trip to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<u32>,
}

impl Recorded {
    /// Nothing recorded (what serde leaves out).
    pub fn is_empty(&self) -> bool {
        *self == Recorded::default()
    }

    /// Milliseconds from a recorded timing, `None` when absent or negative
    /// (recorders write −1 for phases that did not happen).
    pub fn ms(v: Option<f64>) -> Option<u32> {
        v.filter(|x| x.is_finite() && *x >= 0.0)
            .map(|x| x.round().min(f64::from(u32::MAX)) as u32)
    }
}

/// A page and its objects. The first object is the main document when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageMeta {
    /// The page URL a user navigates to.
    pub url: String,
    /// Every object the page loads, in request order, the document included.
    pub objects: Vec<ObjectMeta>,
    /// Client-side computation latency (script evaluation, parsing, layout) that
    /// blocks further fetches, in milliseconds, when measured (seed 001).
    pub computation_ms: Option<u32>,
}

impl PageMeta {
    /// Sum of the known object sizes, in bytes (seed 000: "size of pending page
    /// (obtained by adding up the size of each object)").
    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().filter_map(|o| o.size).sum()
    }

    /// Number of objects whose size is unknown.
    pub fn unknown_sizes(&self) -> usize {
        self.objects.iter().filter(|o| o.size.is_none()).count()
    }

    /// Distinct hosts in first-seen order.
    pub fn hosts(&self) -> Vec<&str> {
        let mut set = std::collections::HashSet::new();
        let mut seen: Vec<&str> = Vec::new();
        for o in &self.objects {
            if set.insert(o.host.as_str()) {
                seen.push(&o.host);
            }
        }
        seen
    }
}

/// Edge→origin round-trip time for one origin host (seed 000: the "network
/// measurement service").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginRtt {
    /// Origin host name.
    pub host: String,
    /// Smoothed RTT from the edge to this origin, in microseconds.
    pub rtt_us: u32,
    /// When the newest sample was taken, in seconds since the Unix epoch.
    pub measured_at_unix_s: u64,
}

/// Everything the edge hints about one page: metadata, network context and
/// policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageContext {
    /// The page.
    pub page: PageMeta,
    /// Edge→origin RTT per origin, for the origins the page uses.
    pub origins: Vec<OriginRtt>,
    /// Policy threshold α of seed 001 Algorithm 1 (ΔQoE/ΔCost must reach it).
    pub alpha: f64,
    /// How long the client may use the hint, in seconds.
    pub ttl_s: u32,
    /// When the edge produced the hint, in seconds since the Unix epoch.
    pub generated_at_unix_s: u64,
}

/// A made-up page for tests, benchmarks and examples: object 0 is the
/// document at `url`; objects `1..n` are images whose host cycles through
/// the document's host and `o1.<host>` … `o<origins-1>.<host>`, found by the
/// parser in the document, `size(i)` bytes each (the document included).
/// Deterministic.
pub fn synthetic_page(
    url: &str,
    n: usize,
    origins: usize,
    size: impl Fn(usize) -> u64,
) -> PageMeta {
    let host = host_of(url).unwrap_or_default();
    let objects = (0..n)
        .map(|i| {
            let h = match i % origins.max(1) {
                0 => host.clone(),
                k => format!("o{k}.{host}"),
            };
            let document = i == 0;
            ObjectMeta {
                url: if document {
                    url.to_string()
                } else {
                    format!("http://{h}/img/{i}.jpg")
                },
                host: if document { host.clone() } else { h },
                size: Some(size(i)),
                content_type: Some(if document { "text/html" } else { "image/jpeg" }.into()),
                last_modified: None,
                etag: None,
                discovery: if document {
                    Discovery::Document
                } else {
                    Discovery::Parser
                },
                parent: (!document).then_some(0),
                recorded: Recorded::default(),
            }
        })
        .collect();
    PageMeta {
        url: url.to_string(),
        objects,
        computation_ms: None,
    }
}

/// Host part of an absolute http(s) URL, lower-cased, without userinfo or port.
/// Returns `None` for anything that is not `scheme://host…`.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split_once(']')?.0
    } else {
        authority.split(':').next()?
    };
    if host.is_empty() {
        None
    } else {
        Some(host.to_ascii_lowercase())
    }
}

/// The MIME type's essence: before any parameter, trimmed, lower case
/// (`Text/HTML; charset=utf-8` → `text/html`).
pub fn mime_essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// URL with its `#fragment` removed (fragments never reach the server).
pub fn strip_fragment(url: &str) -> &str {
    url.split('#').next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parsing() {
        assert_eq!(
            host_of("https://A.example.com/x").as_deref(),
            Some("a.example.com")
        );
        assert_eq!(host_of("http://u:p@h.org:8080/").as_deref(), Some("h.org"));
        assert_eq!(host_of("https://[::1]:443/a").as_deref(), Some("::1"));
        assert_eq!(host_of("https://h.org?q").as_deref(), Some("h.org"));
        assert_eq!(host_of("data:,"), None);
        assert_eq!(host_of("https:///x"), None);
    }

    #[test]
    fn discovery_codes_round_trip() {
        for d in Discovery::ALL {
            assert_eq!(Discovery::from_code(d.code()), d);
        }
    }
}
