//! The Mobile Edge Hint on the wire: compact, versioned, compressed.
//!
//! Seed 000 §IV: "we use gzip to compact the data and only selected fields are
//! included in the packets, we observe that 89.8% of the edge hint are less
//! than 1KB". We keep only what the client's algorithms read (sizes, hosts,
//! discovery, RTTs, computation latency, α) and identify objects by a 32-bit
//! hash of their URL instead of the URL itself: the client hashes the URL the
//! browser asks for and looks it up. Raw DEFLATE (RFC 1951) replaces gzip (the
//! 18-byte gzip frame buys nothing inside a DNS option).
//!
//! ## Layout (version 1)
//!
//! ```text
//! byte 0   version = 1
//! byte 1   flags: bit 0 COMPRESSED (body is raw DEFLATE)
//!                 bit 1 PARTIAL    (degraded form: per-origin aggregates)
//!                 bit 2 PATHS      (listed objects carry their URL paths)
//!                 bit 3 PRIORITIES (listed objects carry their priority; only with PATHS)
//!                 bits 4–7 must be 0
//! body     (after inflating when COMPRESSED); integers are minimal LEB128
//!          varints unless a width is given; strings are varint length + UTF-8:
//!   generated_at_unix_s, ttl_s, alpha_milli (α·1000), computation_ms + 1 (0 = unknown),
//!   total_bytes (exact sum of known sizes, whole page), object_count (distinct URLs, whole page),
//!   page_url,
//!   hash_width (1 byte: 2, 3 or 4),
//!   origin_count, origin_count × {
//!       host, rtt_100us + 1 (0 = unknown; RTT in units of 100 µs), rtt_age_s,
//!       listed, listed × { url_hash (hash_width bytes, LE), size_code (1 byte) },
//!       if PATHS: listed × { shared (varint), suffix (string) },
//!       if PRIORITIES: listed × { priority (1 byte: 0 unknown, else 1 + urgency + 8·incremental) },
//!       if PARTIAL: unlisted_count, unlisted_bytes }
//! ```
//!
//! Per object the full form spends `hash_width + 1` bytes, usually 3:
//!
//! - Objects are grouped under their origin, so they need no origin index, and
//!   a URL hash only has to be unique among its origin's objects (the client
//!   knows the host of every request). The encoder takes the narrowest width
//!   (16, 24 or 32 bits of [`url_hash`]) with no collision inside any origin.
//! - Sizes travel as a one-byte logarithmic code ([`size_code`]): ±4.4 %, far
//!   finer than the balancing needs (LPT itself is only within 33 % of the
//!   optimum); the page total stays exact.
//! - How an object is discovered stays in the edge's store; the client's
//!   algorithms do not read it per object, so the hint leaves it out.
//!
//! **URLs (PATHS).** Seed 000's client "reads and rebuilds the meta-data
//! information of each embedded object … to determine the URLs … to be
//! requested" and then "sends requests to all embedded URLs on parallel
//! connections": with URLs it can ask for the page's objects before the
//! document reveals them, which removes the discovery idle time that §III
//! assumes away. A hash cannot be requested, so the preferred form also
//! carries each listed object's path (everything after `scheme://host`,
//! with the page URL's scheme; empty when the object's URL has another
//! scheme or a port). Paths are front-coded against the previous path of
//! the same origin (`shared` leading bytes kept, `suffix` appended), which
//! with DEFLATE on top costs a few bytes per object on typical sites. The
//! decoder checks every rebuilt URL against its listed hash.
//!
//! **Priorities (PRIORITIES).** A client that asks for objects before the
//! browser does must ask as the browser would: a server schedules by the
//! RFC 9218 `priority` header, and a prefetch without it gets urgency 3 for
//! everything, a page's late style sheet behind its large scripts. Real
//! URLs often do not say what they are (`/sites/content/css/2600014190904`,
//! `/se`), the edge's store does (the recorded content type), so the form
//! with URLs carries each object's priority ([`Priority::for_content_type`]):
//! one byte, a few in all after DEFLATE (a page has few distinct values).
//!
//! The **full form** lists every distinct object URL. When it would not fit
//! the caller's budget (1232 bytes, the usual EDNS UDP cap, for a DNS answer),
//! the **partial form** lists the largest objects that fit and carries, per
//! origin, the count and bytes of the objects it left out: the client still
//! knows the page size (for n) and every byte per origin, and balances the
//! unlisted objects by least load.

use serde::Serialize;
use std::collections::HashMap;
use std::io::{Read, Write};

use crate::page::{strip_fragment, PageContext};

/// Wire format version this module writes and reads.
pub const VERSION: u8 = 1;

/// Flag: the body is raw DEFLATE.
pub const FLAG_COMPRESSED: u8 = 0b01;

/// Flag: the body is the partial (degraded) form.
pub const FLAG_PARTIAL: u8 = 0b10;

/// Flag: listed objects carry their URL paths.
pub const FLAG_PATHS: u8 = 0b100;

/// Flag: listed objects carry their priority ([`Priority`]); only with
/// [`FLAG_PATHS`].
pub const FLAG_PRIORITIES: u8 = 0b1000;

/// An RFC 9218 priority, as a browser sends it for an object of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Priority {
    /// Urgency, 0 (most urgent) to 7.
    pub urgency: u8,
    /// Whether the response is useful in parts (images, documents).
    pub incremental: bool,
}

impl Priority {
    /// What Chromium asks with for an object of this content type:
    /// documents (`text/html`, an iframe's too) `u=0, i`; style sheets and
    /// fonts `u=0` (they block rendering); scripts `u=2`; images and media
    /// `i` (urgency 3, incremental); anything else (JSON, beacons: what
    /// scripts fetch) `u=1, i`. `None` without a content type.
    pub fn for_content_type(content_type: &str) -> Option<Priority> {
        let ct = crate::page::mime_essence(content_type);
        if ct.is_empty() {
            return None;
        }
        let p = |urgency, incremental| {
            Some(Priority {
                urgency,
                incremental,
            })
        };
        if ct == "text/html" || ct == "application/xhtml+xml" {
            p(0, true)
        } else if ct == "text/css" || ct.starts_with("font/") || ct.contains("font") {
            p(0, false)
        } else if ct.contains("javascript") || ct.contains("ecmascript") {
            p(2, false)
        } else if ct.starts_with("image/") || ct.starts_with("video/") || ct.starts_with("audio/") {
            p(3, true)
        } else {
            p(1, true)
        }
    }

    /// The `priority` header field value (RFC 9218 §4: defaults `u=3`
    /// and not incremental are left out).
    pub fn header(&self) -> String {
        match (self.urgency, self.incremental) {
            (3, false) => String::new(),
            (3, true) => "i".into(),
            (u, false) => format!("u={u}"),
            (u, true) => format!("u={u}, i"),
        }
    }

    /// The wire byte: 0 unknown, else 1 + urgency + 8 × incremental.
    fn code(p: Option<Priority>) -> u8 {
        p.map_or(0, |p| 1 + p.urgency.min(7) + 8 * u8::from(p.incremental))
    }

    /// Inverse of [`Priority::code`]; `Err` above 16.
    fn from_code(c: u8) -> Result<Option<Priority>, WireError> {
        match c {
            0 => Ok(None),
            1..=16 => Ok(Some(Priority {
                urgency: (c - 1) % 8,
                incremental: c > 8,
            })),
            _ => Err(WireError::Range {
                field: "object priority",
                value: u64::from(c),
            }),
        }
    }
}

/// The usual EDNS(0) UDP payload cap (DNS flag day 2020); a hint meant for one
/// UDP answer should fit well inside it.
pub const DNS_UDP_BUDGET: usize = 1232;

/// Largest inflated body the decoder accepts, bytes: a hint is advice for one
/// page, and this stops a small compressed packet from inflating into a large
/// allocation.
pub const MAX_BODY: usize = 64 * 1024;

/// Longest string (URL or host) the decoder accepts, bytes.
pub const MAX_STRING: usize = 4096;

/// Most origins a hint may name (bounds the client's per-origin work).
pub const MAX_ORIGINS: usize = 1024;

/// Most bytes of paths a hint's URL list may rebuild, all origins together.
/// Front coding lets each entry repeat up to [`MAX_STRING`] bytes of the
/// previous path for two bytes on the wire, so a [`MAX_BODY`] body could
/// otherwise expand to about 37 MB; a real page's list is tens of KB
/// (ferguson.com, 169 objects: 17 KB).
pub const MAX_PATH_BYTES: usize = 1024 * 1024;

/// Why bytes are not a valid hint, or a hint cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the header.
    #[error("hint too short: {0} bytes, need at least 2")]
    TooShort(usize),
    /// A version this decoder does not know.
    #[error("unsupported hint version {0} (this build reads version 1)")]
    Version(u8),
    /// Unknown flag bits are set.
    #[error("unknown hint flags 0x{0:02x}")]
    Flags(u8),
    /// The body ended inside a field.
    #[error("hint truncated while reading {0}")]
    Truncated(&'static str),
    /// A varint is longer than 10 bytes, overflows u64, or is not minimal.
    #[error("malformed varint in {0}")]
    Varint(&'static str),
    /// A number is outside the range its field allows.
    #[error("{field} out of range: {value}")]
    Range {
        /// The field.
        field: &'static str,
        /// The value read.
        value: u64,
    },
    /// A string is not UTF-8 or too long.
    #[error("bad string in {0}")]
    String(&'static str),
    /// The DEFLATE stream is corrupt or inflates beyond [`MAX_BODY`].
    #[error("bad compressed body: {0}")]
    Compression(String),
    /// Bytes left after the last field.
    #[error("{0} unexpected bytes after the hint")]
    Trailing(usize),
    /// Fields contradict each other (e.g. more listed objects than the page has).
    #[error("inconsistent hint: {0}")]
    Inconsistent(&'static str),
    /// Even the smallest partial form exceeds the budget.
    #[error("hint needs {needed} bytes even in partial form, budget is {budget}: shorten the page URL or use DNS over TCP")]
    TooLarge {
        /// Smallest encoding found.
        needed: usize,
        /// The budget asked for.
        budget: usize,
    },
}

/// One listed object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HintObject {
    /// [`url_hash`] of its URL, truncated to the hint's hash width.
    pub url_hash: u32,
    /// Size code ([`size_code`]); 0 = unknown.
    pub size_code: u8,
}

impl HintObject {
    /// Approximate size in bytes (±4.4 %), when known.
    pub fn size(&self) -> Option<u64> {
        size_from_code(self.size_code)
    }
}

/// One origin as the hint carries it, with its objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HintOrigin {
    /// Host name.
    pub host: String,
    /// Edge→origin RTT in units of 100 µs, when measured.
    pub rtt_100us: Option<u32>,
    /// Age of that RTT sample at `generated_at`, seconds.
    pub rtt_age_s: u32,
    /// Objects of this origin listed individually.
    pub objects: Vec<HintObject>,
    /// With [`FLAG_PATHS`]: each listed object's URL path (what follows
    /// `scheme://host`), in the order of [`HintOrigin::objects`]; an empty
    /// path is unknown. `None`: the hint names objects by hash only.
    pub paths: Option<Vec<String>>,
    /// With [`FLAG_PRIORITIES`]: each listed object's priority, in the
    /// order of [`HintOrigin::objects`] (`None` where the edge does not
    /// know its content type).
    pub priorities: Option<Vec<Option<Priority>>>,
    /// Partial form only: objects of this origin not listed, and their bytes
    /// (exact).
    pub unlisted: Option<(u32, u64)>,
}

impl HintOrigin {
    /// Edge→origin RTT in seconds, when measured.
    pub fn rtt_s(&self) -> Option<f64> {
        self.rtt_100us.map(|r| f64::from(r) * 1e-4)
    }
}

/// A decoded hint: exactly what the wire carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hint {
    /// When the edge made it, Unix seconds.
    pub generated_at_unix_s: u64,
    /// Validity, seconds from `generated_at`.
    pub ttl_s: u32,
    /// Policy α in thousandths (α = 1/3 travels as 333).
    pub alpha_milli: u32,
    /// Computation latency, ms, when known.
    pub computation_ms: Option<u32>,
    /// Exact sum of the known object sizes of the whole page, bytes.
    pub total_bytes: u64,
    /// Distinct object URLs of the whole page, listed or not.
    pub object_count: u32,
    /// The page URL the hint is for.
    pub page_url: String,
    /// Bytes of [`url_hash`] kept per object: 2, 3 or 4.
    pub hash_width: u8,
    /// Origins (hosts) the page uses, with their objects.
    pub origins: Vec<HintOrigin>,
    /// Whether this is the partial (degraded) form.
    pub partial: bool,
}

/// Which form an encoding ended up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// Every object listed with its URL (the client can request them
    /// before discovering them).
    WithUrls,
    /// Every object listed, by hash only.
    Full,
    /// The largest `listed` objects listed, the rest as per-origin aggregates.
    Partial {
        /// Objects listed individually.
        listed: usize,
    },
}

/// 32-bit FNV-1a of the URL without its fragment: how hints name objects. A
/// hint keeps its low 16, 24 or 32 bits ([`Hint::hash_width`]).
pub fn url_hash(url: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in strip_fragment(url).as_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn hash_mask(width: u8) -> u32 {
    match width {
        4 => u32::MAX,
        w => (1u32 << (8 * u32::from(w))) - 1,
    }
}

/// One-byte logarithmic size code: 0 = unknown, else
/// `1 + round(8·log2(size + 1))`, saturating at 255 (≈ 3.6 GB). Adjacent codes
/// differ by a factor 2^(1/8) ≈ 1.09, so a decoded size is within ±4.4 % of the
/// true one (and exact for 0).
pub fn size_code(size: Option<u64>) -> u8 {
    match size {
        None => 0,
        Some(s) => {
            let c = 1.0 + (8.0 * ((s as f64) + 1.0).log2()).round();
            // c is in [1, ~513] for any u64; clamp to the byte.
            c.min(255.0) as u8
        }
    }
}

/// Inverse of [`size_code`] (the centre of the code's interval).
pub fn size_from_code(code: u8) -> Option<u64> {
    match code {
        0 => None,
        c => Some((2f64.powf(f64::from(c - 1) / 8.0) - 1.0).round() as u64),
    }
}

impl Hint {
    /// The full-form hint for a page context: every object by hash and size.
    pub fn full(ctx: &PageContext) -> Result<Hint, WireError> {
        Hint::build(ctx, false)
    }

    /// The full form with every listed object's URL path ([`FLAG_PATHS`]):
    /// what the client needs to request objects before it discovers them.
    pub fn with_urls(ctx: &PageContext) -> Result<Hint, WireError> {
        Hint::build(ctx, true)
    }

    fn build(ctx: &PageContext, urls: bool) -> Result<Hint, WireError> {
        let page = &ctx.page;
        if !(ctx.alpha.is_finite() && ctx.alpha >= 0.0) {
            return Err(WireError::Inconsistent(
                "alpha must be a finite number >= 0",
            ));
        }
        let hosts = page.hosts();
        if hosts.len() > MAX_ORIGINS {
            return Err(WireError::Range {
                field: "origin count",
                value: hosts.len() as u64,
            });
        }
        // Distinct URLs per origin; a URL loaded twice keeps its larger size.
        let mut per_origin: Vec<Vec<Listed>> = vec![Vec::new(); hosts.len()];
        // Index of each host and of each (host, URL): linear in the objects, so
        // a hostile recording with many objects cannot make this quadratic.
        let host_index: HashMap<&str, usize> =
            hosts.iter().enumerate().map(|(i, h)| (*h, i)).collect();
        let mut seen: HashMap<(usize, &str), usize> = HashMap::new();
        for o in &page.objects {
            let Some(&i) = host_index.get(o.host.as_str()) else {
                continue;
            };
            let url = strip_fragment(&o.url);
            match seen.get(&(i, url)) {
                Some(&j) => {
                    let e = &mut per_origin[i][j];
                    e.1 = match (e.1, o.size) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    e.3 = e.3.or(priority_of(o));
                }
                None => {
                    seen.insert((i, url), per_origin[i].len());
                    per_origin[i].push((url_hash(url), o.size, url, priority_of(o)));
                }
            }
        }
        let hash_width = [2u8, 3, 4]
            .into_iter()
            .find(|&w| {
                per_origin.iter().all(|objs| {
                    let mut hs: Vec<u32> = objs.iter().map(|o| o.0 & hash_mask(w)).collect();
                    hs.sort_unstable();
                    hs.windows(2).all(|p| p[0] != p[1])
                })
            })
            .unwrap_or(4);
        let mask = hash_mask(hash_width);
        let scheme = page.url.split_once("://").map(|(s, _)| s);
        let mut object_count = 0u64;
        // Priorities only when the edge knows some content type: a page
        // without any is better off with the URL guess and one byte less
        // per object.
        let priorities = urls && per_origin.iter().flatten().any(|o| o.3.is_some());
        let origins = hosts
            .iter()
            .zip(per_origin)
            .map(|(h, objs)| {
                let m = ctx.origins.iter().find(|o| o.host == *h);
                object_count += objs.len() as u64;
                HintOrigin {
                    host: (*h).to_string(),
                    rtt_100us: m.map(|o| o.rtt_us.div_ceil(100)),
                    rtt_age_s: m
                        .map(|o| {
                            clamp_u32(ctx.generated_at_unix_s.saturating_sub(o.measured_at_unix_s))
                        })
                        .unwrap_or(0),
                    paths: urls.then(|| {
                        objs.iter()
                            .map(|o| path_of(o.2, scheme, h).unwrap_or_default().to_string())
                            .collect()
                    }),
                    priorities: priorities.then(|| objs.iter().map(|o| o.3).collect()),
                    objects: objs
                        .iter()
                        .map(|&(hash, size, _, _)| HintObject {
                            url_hash: hash & mask,
                            size_code: size_code(size),
                        })
                        .collect(),
                    unlisted: None,
                }
            })
            .collect();
        Ok(Hint {
            generated_at_unix_s: ctx.generated_at_unix_s,
            ttl_s: ctx.ttl_s,
            alpha_milli: clamp_u32((ctx.alpha * 1000.0).round() as u64),
            computation_ms: page.computation_ms,
            total_bytes: page.total_bytes(),
            object_count: clamp_u32(object_count),
            page_url: page.url.clone(),
            hash_width,
            origins,
            partial: false,
        })
    }

    /// Listed objects over all origins.
    pub fn listed(&self) -> usize {
        self.origins.iter().map(|o| o.objects.len()).sum()
    }

    /// This hint in partial form, listing only the `keep` largest objects
    /// (ties: earlier origin, earlier object first) and aggregating the rest per
    /// origin. Aggregated bytes are the decoded (approximate) sizes.
    pub fn partial(&self, keep: usize) -> Hint {
        let mut all: Vec<(usize, usize, u8)> = Vec::new();
        for (i, o) in self.origins.iter().enumerate() {
            for (j, x) in o.objects.iter().enumerate() {
                all.push((i, j, x.size_code));
            }
        }
        all.sort_by_key(|e| std::cmp::Reverse(e.2));
        let mut kept = vec![Vec::new(); self.origins.len()];
        for &(i, j, _) in all.iter().take(keep) {
            kept[i].push(j);
        }
        let origins = self
            .origins
            .iter()
            .zip(kept)
            .map(|(o, mut keep)| {
                keep.sort_unstable();
                let (mut uc, mut ub) = o.unlisted.unwrap_or((0, 0));
                let mut objects = Vec::new();
                let mut paths = o.paths.as_ref().map(|_| Vec::new());
                let mut priorities = o.priorities.as_ref().map(|_| Vec::new());
                for (j, x) in o.objects.iter().enumerate() {
                    if keep.binary_search(&j).is_ok() {
                        objects.push(*x);
                        if let (Some(kept), Some(all)) = (&mut paths, &o.paths) {
                            kept.push(all.get(j).cloned().unwrap_or_default());
                        }
                        if let (Some(kept), Some(all)) = (&mut priorities, &o.priorities) {
                            kept.push(all.get(j).copied().flatten());
                        }
                    } else {
                        uc = uc.saturating_add(1);
                        ub = ub.saturating_add(x.size().unwrap_or(0));
                    }
                }
                HintOrigin {
                    objects,
                    paths,
                    priorities,
                    unlisted: Some((uc, ub)),
                    ..o.clone()
                }
            })
            .collect();
        Hint {
            origins,
            partial: true,
            ..self.clone()
        }
    }

    /// α as a number.
    pub fn alpha(&self) -> f64 {
        f64::from(self.alpha_milli) / 1000.0
    }

    /// The bits of [`url_hash`] this hint keeps per object (its
    /// [`Hint::hash_width`]): listed hashes are `url_hash(url) & mask`.
    pub fn hash_mask(&self) -> u32 {
        hash_mask(self.hash_width)
    }

    /// Whether listed objects carry their URL paths.
    pub fn has_paths(&self) -> bool {
        self.origins.iter().any(|o| o.paths.is_some())
    }

    /// This hint without URL paths (objects by hash only).
    pub fn without_paths(&self) -> Hint {
        let mut h = self.clone();
        for o in &mut h.origins {
            o.paths = None;
            o.priorities = None;
        }
        h
    }

    /// Whether listed objects carry their priorities (only with paths).
    pub fn has_priorities(&self) -> bool {
        self.has_paths() && self.origins.iter().any(|o| o.priorities.is_some())
    }

    /// The priority of origin `origin`'s listed object `j`, when the hint
    /// carries it.
    pub fn object_priority(&self, origin: usize, j: usize) -> Option<Priority> {
        *self.origins.get(origin)?.priorities.as_ref()?.get(j)?
    }

    /// The URL of origin `origin`'s listed object `j`, when the hint
    /// carries its path: the page URL's scheme, the origin's host, the path.
    pub fn object_url(&self, origin: usize, j: usize) -> Option<String> {
        let o = self.origins.get(origin)?;
        let path = o.paths.as_ref()?.get(j)?;
        if path.is_empty() {
            return None;
        }
        let (scheme, _) = self.page_url.split_once("://")?;
        Some(format!("{scheme}://{}{path}", o.host))
    }

    /// The listed object with this URL, when the hint lists it.
    pub fn lookup(&self, url: &str) -> Option<&HintObject> {
        let host = crate::page::host_of(url)?;
        let h = url_hash(url) & hash_mask(self.hash_width);
        self.origins
            .iter()
            .find(|o| o.host == host)?
            .objects
            .iter()
            .find(|o| o.url_hash == h)
    }

    /// Serialises the body (no header, uncompressed).
    fn body(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + 4 * self.listed() + 24 * self.origins.len());
        put_varint(&mut b, self.generated_at_unix_s);
        put_varint(&mut b, u64::from(self.ttl_s));
        put_varint(&mut b, u64::from(self.alpha_milli));
        put_varint(&mut b, self.computation_ms.map_or(0, |c| u64::from(c) + 1));
        put_varint(&mut b, self.total_bytes);
        put_varint(&mut b, u64::from(self.object_count));
        put_str(&mut b, &self.page_url);
        b.push(self.hash_width);
        put_varint(&mut b, self.origins.len() as u64);
        let w = usize::from(self.hash_width.clamp(2, 4));
        let paths = self.has_paths();
        let priorities = self.has_priorities();
        for o in &self.origins {
            put_str(&mut b, &o.host);
            put_varint(&mut b, o.rtt_100us.map_or(0, |r| u64::from(r) + 1));
            put_varint(&mut b, u64::from(o.rtt_age_s));
            put_varint(&mut b, o.objects.len() as u64);
            for x in &o.objects {
                b.extend_from_slice(&x.url_hash.to_le_bytes()[..w]);
                b.push(x.size_code);
            }
            if paths {
                let mut prev = "";
                for j in 0..o.objects.len() {
                    let p = o
                        .paths
                        .as_ref()
                        .and_then(|ps| ps.get(j))
                        .map_or("", String::as_str);
                    let shared = shared_prefix(prev, p);
                    put_varint(&mut b, shared as u64);
                    put_str(&mut b, &p[shared..]);
                    prev = p;
                }
                if priorities {
                    for j in 0..o.objects.len() {
                        let p = o
                            .priorities
                            .as_ref()
                            .and_then(|ps| ps.get(j).copied().flatten());
                        b.push(Priority::code(p));
                    }
                }
            }
            if self.partial {
                let (c, bytes) = o.unlisted.unwrap_or((0, 0));
                put_varint(&mut b, u64::from(c));
                put_varint(&mut b, bytes);
            }
        }
        b
    }

    /// Encodes with header, compressing when that is smaller.
    pub fn to_bytes(&self) -> Vec<u8> {
        let body = self.body();
        let flags = self.flags();
        if let Some(z) = deflate(&body) {
            if z.len() < body.len() {
                let mut out = vec![VERSION, flags | FLAG_COMPRESSED];
                out.extend_from_slice(&z);
                return out;
            }
        }
        let mut out = vec![VERSION, flags];
        out.extend_from_slice(&body);
        out
    }

    /// Encodes uncompressed (for tests and debugging: stable byte vectors).
    pub fn to_bytes_uncompressed(&self) -> Vec<u8> {
        let mut out = vec![VERSION, self.flags()];
        out.extend_from_slice(&self.body());
        out
    }

    /// Header flags for this hint's body (compression aside).
    fn flags(&self) -> u8 {
        let mut f = 0;
        if self.partial {
            f |= FLAG_PARTIAL;
        }
        if self.has_paths() {
            f |= FLAG_PATHS;
        }
        if self.has_priorities() {
            f |= FLAG_PRIORITIES;
        }
        f
    }

    /// Decodes and validates a hint. Never panics; every malformed input gives
    /// a [`WireError`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Hint, WireError> {
        if bytes.len() < 2 {
            return Err(WireError::TooShort(bytes.len()));
        }
        if bytes[0] != VERSION {
            return Err(WireError::Version(bytes[0]));
        }
        let flags = bytes[1];
        if flags & !(FLAG_COMPRESSED | FLAG_PARTIAL | FLAG_PATHS | FLAG_PRIORITIES) != 0
            || (flags & FLAG_PRIORITIES != 0 && flags & FLAG_PATHS == 0)
        {
            return Err(WireError::Flags(flags));
        }
        let inflated;
        let body: &[u8] = if flags & FLAG_COMPRESSED != 0 {
            inflated = inflate(&bytes[2..])?;
            &inflated
        } else {
            if bytes.len() - 2 > MAX_BODY {
                return Err(WireError::Range {
                    field: "body length",
                    value: (bytes.len() - 2) as u64,
                });
            }
            &bytes[2..]
        };
        let partial = flags & FLAG_PARTIAL != 0;
        let with_paths = flags & FLAG_PATHS != 0;
        let with_priorities = flags & FLAG_PRIORITIES != 0;
        let mut r = Reader {
            buf: body,
            pos: 0,
            path_bytes: 0,
        };
        let generated_at_unix_s = r.varint("generated_at")?;
        let ttl_s = r.u32("ttl")?;
        let alpha_milli = r.u32("alpha")?;
        let computation_ms = r.opt_u32("computation_ms")?;
        let total_bytes = r.varint("total_bytes")?;
        let object_count = r.u32("object_count")?;
        let page_url = r.string("page_url")?;
        let hash_width = r.byte("hash_width")?;
        if !(2..=4).contains(&hash_width) {
            return Err(WireError::Range {
                field: "hash_width",
                value: u64::from(hash_width),
            });
        }
        let w = usize::from(hash_width);
        let origin_count = r.count("origin_count", 4, MAX_ORIGINS)?;
        let mut origins = Vec::with_capacity(origin_count);
        let (mut listed, mut unlisted) = (0u64, 0u64);
        for _ in 0..origin_count {
            let host = r.string("origin host")?;
            let rtt_100us = r.opt_u32("origin rtt")?;
            let rtt_age_s = r.u32("origin rtt age")?;
            let n = r.count("listed objects", w + 1, usize::MAX)?;
            let mut objects = Vec::with_capacity(n);
            for _ in 0..n {
                let h = r.bytes(w, "object url hash")?;
                let mut le = [0u8; 4];
                le[..w].copy_from_slice(h);
                objects.push(HintObject {
                    url_hash: u32::from_le_bytes(le),
                    size_code: r.byte("object size")?,
                });
            }
            let paths = if with_paths {
                let scheme = page_url
                    .split_once("://")
                    .map(|(s, _)| s)
                    .ok_or(WireError::Inconsistent("paths without a page URL scheme"))?;
                Some(r.paths(&objects, scheme, &host, hash_mask(hash_width))?)
            } else {
                None
            };
            let priorities = if with_priorities {
                let b = r.bytes(objects.len(), "object priorities")?;
                Some(
                    b.iter()
                        .map(|&c| Priority::from_code(c))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            } else {
                None
            };
            listed += n as u64;
            let agg = if partial {
                let c = r.u32("unlisted count")?;
                unlisted += u64::from(c);
                Some((c, r.varint("unlisted bytes")?))
            } else {
                None
            };
            origins.push(HintOrigin {
                host,
                rtt_100us,
                rtt_age_s,
                objects,
                paths,
                priorities,
                unlisted: agg,
            });
        }
        if listed + unlisted != u64::from(object_count) {
            return Err(WireError::Inconsistent(
                "listed and unlisted objects differ from the page's object count",
            ));
        }
        if r.pos != body.len() {
            return Err(WireError::Trailing(body.len() - r.pos));
        }
        Ok(Hint {
            generated_at_unix_s,
            ttl_s,
            alpha_milli,
            computation_ms,
            total_bytes,
            object_count,
            page_url,
            hash_width,
            origins,
            partial,
        })
    }
}

/// Encodes a page context into at most `budget` bytes: the full form with
/// URLs when it fits, else the full form by hash, else the partial form
/// listing as many of the largest objects as fit.
///
/// Why URLs go first and are dropped before any object is: with URLs the
/// client can request the page's objects before it discovers them; by hash
/// it can still balance every object it later discovers, which a partial
/// list would lose.
pub fn encode_within(ctx: &PageContext, budget: usize) -> Result<(Vec<u8>, Form), WireError> {
    let urls = Hint::with_urls(ctx)?;
    let bytes = urls.to_bytes();
    if bytes.len() <= budget {
        return Ok((bytes, Form::WithUrls));
    }
    let full = urls.without_paths();
    let bytes = full.to_bytes();
    if bytes.len() <= budget {
        return Ok((bytes, Form::Full));
    }
    // Size grows (almost) monotonically with the number listed: binary search
    // for the largest count that fits.
    let (mut lo, mut hi) = (0usize, full.listed());
    let mut best: Option<(Vec<u8>, usize)> = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let b = full.partial(mid).to_bytes();
        if b.len() <= budget {
            best = Some((b, mid));
            lo = mid + 1;
        } else if mid == 0 {
            break;
        } else {
            hi = mid - 1;
        }
    }
    match best {
        Some((b, listed)) => Ok((b, Form::Partial { listed })),
        None => Err(WireError::TooLarge {
            needed: full.partial(0).to_bytes().len(),
            budget,
        }),
    }
}

/// One distinct object URL of an origin as [`Hint::build`] collects it:
/// hash, size, URL, priority.
type Listed<'a> = (u32, Option<u64>, &'a str, Option<Priority>);

/// The priority a browser asks `o` with, from its recorded content type.
fn priority_of(o: &crate::page::ObjectMeta) -> Option<Priority> {
    Priority::for_content_type(o.content_type.as_deref()?)
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The path of `url` on `host` under the page's `scheme`: what follows
/// `scheme://host`, when that is how the URL starts and a path follows
/// (`None` for another scheme, a port or user info).
fn path_of<'u>(url: &'u str, scheme: Option<&str>, host: &str) -> Option<&'u str> {
    // Exact prefixes only: the client rebuilds `scheme://host` + path, and
    // the result must hash as the URL did (a URL spelling its host in
    // capitals keeps no path).
    let path = url
        .strip_prefix(scheme?)?
        .strip_prefix("://")?
        .strip_prefix(host)?;
    path.starts_with('/').then_some(path)
}

/// Bytes `a` and `b` share at their start, on a character boundary of both.
fn shared_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !(a.is_char_boundary(n) && b.is_char_boundary(n)) {
        n -= 1;
    }
    n
}

fn deflate(body: &[u8]) -> Option<Vec<u8>> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(body).ok()?;
    e.finish().ok()
}

fn inflate(z: &[u8]) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::new();
    let mut d = flate2::read::DeflateDecoder::new(z).take(MAX_BODY as u64 + 1);
    d.read_to_end(&mut out)
        .map_err(|e| WireError::Compression(e.to_string()))?;
    if out.len() > MAX_BODY {
        return Err(WireError::Compression(format!(
            "inflates beyond {MAX_BODY} bytes"
        )));
    }
    Ok(out)
}

/// Appends `v` as a minimal LEB128 varint.
fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            b.push(byte);
            return;
        }
        b.push(byte | 0x80);
    }
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put_varint(b, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
}

/// A bounds-checked cursor over a body.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Bytes of paths rebuilt so far ([`MAX_PATH_BYTES`]).
    path_bytes: usize,
}

impl Reader<'_> {
    fn varint(&mut self, field: &'static str) -> Result<u64, WireError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let byte = self.byte(field)?;
            let part = u64::from(byte & 0x7f);
            if i == 9 && part > 1 {
                return Err(WireError::Varint(field));
            }
            v |= part << (7 * i);
            if byte & 0x80 == 0 {
                if i > 0 && byte == 0 {
                    return Err(WireError::Varint(field));
                }
                return Ok(v);
            }
        }
        Err(WireError::Varint(field))
    }

    fn byte(&mut self, field: &'static str) -> Result<u8, WireError> {
        let b = *self.buf.get(self.pos).ok_or(WireError::Truncated(field))?;
        self.pos += 1;
        Ok(b)
    }

    fn bytes(&mut self, n: usize, field: &'static str) -> Result<&[u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated(field))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(WireError::Truncated(field))?;
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        let v = self.varint(field)?;
        u32::try_from(v).map_err(|_| WireError::Range { field, value: v })
    }

    fn opt_u32(&mut self, field: &'static str) -> Result<Option<u32>, WireError> {
        match self.varint(field)? {
            0 => Ok(None),
            v => u32::try_from(v - 1)
                .map(Some)
                .map_err(|_| WireError::Range { field, value: v }),
        }
    }

    /// A count whose entries take at least `min_entry` bytes each: rejects
    /// counts the remaining bytes cannot hold before allocating for them.
    fn count(
        &mut self,
        field: &'static str,
        min_entry: usize,
        max: usize,
    ) -> Result<usize, WireError> {
        let v = self.varint(field)?;
        let left = (self.buf.len() - self.pos) as u64;
        if v > max as u64 || v.saturating_mul(min_entry as u64) > left {
            return Err(WireError::Range { field, value: v });
        }
        Ok(v as usize)
    }

    fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        let len = self.varint(field)?;
        if len > MAX_STRING as u64 {
            return Err(WireError::String(field));
        }
        let s = self.bytes(len as usize, field)?;
        String::from_utf8(s.to_vec()).map_err(|_| WireError::String(field))
    }

    /// The front-coded paths of one origin's listed `objects`, each checked
    /// against its listed hash (`mask` of [`url_hash`] of the URL rebuilt
    /// with `scheme` and `host`).
    fn paths(
        &mut self,
        objects: &[HintObject],
        scheme: &str,
        host: &str,
        mask: u32,
    ) -> Result<Vec<String>, WireError> {
        let mut out: Vec<String> = Vec::with_capacity(objects.len());
        for x in objects {
            let prev = out.last().map_or("", String::as_str);
            let shared = self.varint("path shared prefix")?;
            let shared = usize::try_from(shared)
                .ok()
                .filter(|&n| n <= prev.len() && prev.is_char_boundary(n))
                .ok_or(WireError::Range {
                    field: "path shared prefix",
                    value: shared,
                })?;
            let suffix = self.string("path")?;
            if shared + suffix.len() > MAX_STRING {
                return Err(WireError::String("path"));
            }
            self.path_bytes += shared + suffix.len();
            if self.path_bytes > MAX_PATH_BYTES {
                return Err(WireError::Range {
                    field: "bytes of all paths",
                    value: self.path_bytes as u64,
                });
            }
            let path = format!("{}{suffix}", &prev[..shared]);
            if !path.is_empty() {
                if !path.starts_with('/') {
                    return Err(WireError::String("path"));
                }
                let url = format!("{scheme}://{host}{path}");
                if url_hash(&url) & mask != x.url_hash {
                    return Err(WireError::Inconsistent(
                        "a listed path does not match its URL hash",
                    ));
                }
            }
            out.push(path);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{Discovery, ObjectMeta, OriginRtt, PageMeta};
    use proptest::prelude::*;

    fn obj(url: &str, size: Option<u64>) -> ObjectMeta {
        ObjectMeta {
            url: url.into(),
            host: crate::page::host_of(url).unwrap(),
            size,
            content_type: None,
            last_modified: None,
            etag: None,
            discovery: Discovery::Parser,
            parent: None,
            recorded: Default::default(),
        }
    }

    fn ctx() -> PageContext {
        PageContext {
            page: PageMeta {
                url: "http://a.io/".into(),
                objects: vec![
                    obj("http://a.io/", Some(1000)),
                    obj("http://b.io/x.js", Some(300)),
                    obj("http://a.io/y.png", None),
                    obj("http://a.io/#again", Some(900)),
                ],
                computation_ms: Some(250),
            },
            origins: vec![OriginRtt {
                host: "a.io".into(),
                rtt_us: 20_000,
                measured_at_unix_s: 990,
            }],
            alpha: 1.0 / 3.0,
            ttl_s: 300,
            generated_at_unix_s: 1000,
        }
    }

    #[test]
    fn fnv_vectors() {
        // FNV-1a 32 reference values.
        assert_eq!(url_hash(""), 0x811c_9dc5);
        assert_eq!(url_hash("a"), 0xe40c_292c);
        assert_eq!(url_hash("foobar"), 0xbf9c_f968);
        assert_eq!(url_hash("foobar#frag"), url_hash("foobar"));
    }

    #[test]
    fn size_codes() {
        assert_eq!(size_code(None), 0);
        assert_eq!(size_code(Some(0)), 1);
        assert_eq!(size_from_code(1), Some(0));
        assert_eq!(size_from_code(0), None);
        assert_eq!(size_code(Some(u64::MAX)), 255);
        for s in [100u64, 1460, 15_000, 123_456, 3_000_000, 90_000_000] {
            let back = size_from_code(size_code(Some(s))).unwrap() as f64;
            assert!((back - s as f64).abs() / s as f64 <= 0.045, "{s} -> {back}");
        }
        let mut prev = 0;
        for c in 1..=255u8 {
            let v = size_from_code(c).unwrap();
            assert!(v >= prev);
            prev = v;
        }
    }

    #[test]
    fn byte_vector_full_form() {
        let h = Hint::full(&ctx()).unwrap();
        assert_eq!(h.object_count, 3, "the repeated document URL counts once");
        assert_eq!(h.hash_width, 2);
        let b = h.to_bytes_uncompressed();
        let mut expect = vec![1u8, 0];
        expect.extend_from_slice(&[0xe8, 0x07]); // generated_at 1000
        expect.extend_from_slice(&[0xac, 0x02]); // ttl 300
        expect.extend_from_slice(&[0xcd, 0x02]); // alpha 333
        expect.extend_from_slice(&[0xfb, 0x01]); // computation 250 + 1
        expect.extend_from_slice(&[0x98, 0x11]); // total 2200
        expect.push(3); // distinct objects
        expect.push(12);
        expect.extend_from_slice(b"http://a.io/");
        expect.push(2); // hash width
        expect.push(2); // origins
        expect.push(4);
        expect.extend_from_slice(b"a.io");
        expect.extend_from_slice(&[0xc9, 0x01]); // 200 × 100 µs, + 1
        expect.push(10); // age
        expect.push(2); // listed
        expect.extend_from_slice(&url_hash("http://a.io/").to_le_bytes()[..2]);
        expect.push(size_code(Some(1000))); // the larger of the two loads
        expect.extend_from_slice(&url_hash("http://a.io/y.png").to_le_bytes()[..2]);
        expect.push(0);
        expect.push(4);
        expect.extend_from_slice(b"b.io");
        expect.push(0); // rtt unknown
        expect.push(0);
        expect.push(1);
        expect.extend_from_slice(&url_hash("http://b.io/x.js").to_le_bytes()[..2]);
        expect.push(size_code(Some(300)));
        assert_eq!(b, expect);
        assert_eq!(Hint::from_bytes(&b).unwrap(), h);
    }

    #[test]
    fn byte_vector_with_priorities() {
        let mut c = ctx();
        c.page.objects[1].content_type = Some("application/javascript; charset=utf-8".into());
        c.page.objects[0].content_type = Some("text/html".into());
        let h = Hint::with_urls(&c).unwrap();
        let b = h.to_bytes_uncompressed();
        assert_eq!(b[1], FLAG_PATHS | FLAG_PRIORITIES);
        // After each origin's paths, a byte per object: a.io's document
        // (u=0, i: 1 + 0 + 8) and its image of unknown type (0); b.io's
        // script (u=2: 1 + 2).
        let mut expect = Hint::with_urls(&ctx()).unwrap().to_bytes_uncompressed();
        expect[1] = FLAG_PATHS | FLAG_PRIORITIES;
        let a_end = expect.len() - 11 - 7;
        expect.splice(a_end..a_end, [9u8, 0]);
        expect.push(3);
        assert_eq!(b, expect);
        let d = Hint::from_bytes(&b).unwrap();
        assert_eq!(d, h);
        let p = |u, i| {
            Some(Priority {
                urgency: u,
                incremental: i,
            })
        };
        assert_eq!(d.object_priority(0, 0), p(0, true));
        assert_eq!(d.object_priority(0, 1), None);
        assert_eq!(d.object_priority(1, 0), p(2, false));
        // By hash only, the priorities go with the paths.
        assert_eq!(d.without_paths().to_bytes_uncompressed()[1], 0);
        // A code above 16, or priorities without paths, is refused.
        let mut bad = b.clone();
        *bad.last_mut().unwrap() = 17;
        assert!(Hint::from_bytes(&bad).is_err());
        let mut bad = Hint::full(&c).unwrap().to_bytes_uncompressed();
        bad[1] = FLAG_PRIORITIES;
        assert_eq!(
            Hint::from_bytes(&bad),
            Err(WireError::Flags(FLAG_PRIORITIES))
        );
    }

    #[test]
    fn browser_priorities_by_content_type() {
        for (ct, header) in [
            ("text/html; charset=utf-8", "u=0, i"),
            ("text/css", "u=0"),
            ("font/woff2", "u=0"),
            ("application/font-woff", "u=0"),
            ("application/x-javascript", "u=2"),
            ("text/javascript", "u=2"),
            ("image/webp", "i"),
            ("video/mp4", "i"),
            ("application/json", "u=1, i"),
        ] {
            let p = Priority::for_content_type(ct).unwrap();
            assert_eq!(p.header(), header, "{ct}");
            assert_eq!(Priority::from_code(Priority::code(Some(p))), Ok(Some(p)));
        }
        assert_eq!(Priority::for_content_type(" "), None);
        assert_eq!(Priority::code(None), 0);
    }

    #[test]
    fn byte_vector_with_urls() {
        let h = Hint::with_urls(&ctx()).unwrap();
        let b = h.to_bytes_uncompressed();
        assert_eq!(b[1], FLAG_PATHS);
        let mut expect = Hint::full(&ctx()).unwrap().to_bytes_uncompressed();
        expect[1] = FLAG_PATHS;
        // After a.io's two objects (b.io's 11 bytes follow them): "/", then
        // "/y.png" sharing one byte with it.
        let a_end = expect.len() - 11;
        let mut a_paths = vec![0u8, 1, b'/', 1, 5];
        a_paths.extend_from_slice(b"y.png");
        expect.splice(a_end..a_end, a_paths);
        // After b.io's one object, at the very end: "/x.js".
        expect.extend_from_slice(&[0, 5]);
        expect.extend_from_slice(b"/x.js");
        assert_eq!(b, expect);
        let d = Hint::from_bytes(&b).unwrap();
        assert_eq!(d, h);
        assert_eq!(d.object_url(0, 0).as_deref(), Some("http://a.io/"));
        assert_eq!(d.object_url(0, 1).as_deref(), Some("http://a.io/y.png"));
        assert_eq!(d.object_url(1, 0).as_deref(), Some("http://b.io/x.js"));
        assert_eq!(d.object_url(1, 1), None);
        assert_eq!(Hint::from_bytes(&h.to_bytes()).unwrap(), h);
        assert_eq!(d.without_paths(), Hint::full(&ctx()).unwrap());
    }

    #[test]
    fn paths_that_do_not_rebuild_the_url_are_left_empty() {
        let mut c = ctx();
        c.page
            .objects
            .push(obj("https://a.io/other-scheme.js", Some(5)));
        c.page
            .objects
            .push(obj("http://a.io:8080/port.js", Some(5)));
        let h = Hint::with_urls(&c).unwrap();
        let paths = h.origins[0].paths.as_ref().unwrap();
        assert_eq!(paths, &["/", "/y.png", "", ""]);
        let d = Hint::from_bytes(&h.to_bytes()).unwrap();
        assert_eq!(d.object_url(0, 2), None);
        assert_eq!(d, h);
    }

    #[test]
    fn a_url_list_that_expands_too_far_is_refused() {
        // 300 paths of 4000 bytes that differ in their last byte: a few kB
        // on the wire, 1.2 MB rebuilt.
        let stem = "a".repeat(3990);
        let mut c = ctx();
        c.page.objects = (0..300)
            .map(|i| obj(&format!("http://a.io/{stem}{i:05}.js"), Some(100)))
            .collect();
        let h = Hint::with_urls(&c).unwrap();
        let bytes = h.to_bytes();
        assert!(bytes.len() < MAX_BODY, "{} bytes", bytes.len());
        assert!(matches!(
            Hint::from_bytes(&bytes),
            Err(WireError::Range {
                field: "bytes of all paths",
                ..
            })
        ));
        // 200 of them (800 kB) are within the limit.
        c.page.objects.truncate(200);
        let h = Hint::with_urls(&c).unwrap();
        assert_eq!(Hint::from_bytes(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn rejects_paths_that_contradict_their_hash_or_prefix() {
        let good = Hint::with_urls(&ctx()).unwrap().to_bytes_uncompressed();
        // "/y.png" → "/z.png": no longer the listed hash.
        let at = good.windows(5).position(|w| w == b"y.png").unwrap();
        let mut bad = good.clone();
        bad[at] = b'z';
        assert_eq!(
            Hint::from_bytes(&bad),
            Err(WireError::Inconsistent(
                "a listed path does not match its URL hash"
            ))
        );
        // Sharing 2 bytes with the 1-byte previous path.
        let mut bad = good.clone();
        bad[at - 2] = 2;
        assert!(matches!(
            Hint::from_bytes(&bad),
            Err(WireError::Range {
                field: "path shared prefix",
                ..
            })
        ));
        // A path that does not start with '/'.
        let at = good.windows(5).position(|w| w == b"/x.js").unwrap();
        let mut bad = good.clone();
        bad[at] = b'x';
        assert_eq!(Hint::from_bytes(&bad), Err(WireError::String("path")));
        for cut in 2..good.len() {
            assert!(Hint::from_bytes(&good[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn encode_within_drops_urls_before_objects() {
        let mut c = ctx();
        for i in 0..40u64 {
            c.page.objects.push(obj(
                &format!("http://a.io/assets/{i}-{}.js", i * 7_919_993),
                Some(1000 + i),
            ));
        }
        let with = Hint::with_urls(&c).unwrap().to_bytes().len();
        let without = Hint::full(&c).unwrap().to_bytes().len();
        assert!(without < with);
        let (b, form) = encode_within(&c, with).unwrap();
        assert_eq!((b.len(), form), (with, Form::WithUrls));
        let (b, form) = encode_within(&c, with - 1).unwrap();
        assert_eq!((b.len(), form), (without, Form::Full));
        assert!(!Hint::from_bytes(&b).unwrap().has_paths());
    }

    #[test]
    fn compressed_round_trip_and_lookup() {
        let h = Hint::full(&ctx()).unwrap();
        let d = Hint::from_bytes(&h.to_bytes()).unwrap();
        assert_eq!(d, h);
        let js = d.lookup("http://b.io/x.js#top").unwrap().size().unwrap();
        assert!((js as f64 - 300.0).abs() <= 300.0 * 0.045);
        assert_eq!(d.lookup("http://a.io/y.png").unwrap().size(), None);
        assert!(d.lookup("http://c.io/x.js").is_none());
        assert!((d.alpha() - 0.333).abs() < 1e-9);
        assert!((d.origins[0].rtt_s().unwrap() - 0.02).abs() < 1e-9);
    }

    #[test]
    fn hash_width_grows_on_collision() {
        // Find two URLs on one host whose FNV-1a hashes share the low 16 bits.
        let mut by_low = std::collections::HashMap::new();
        let mut pair = None;
        for i in 0..100_000u32 {
            let u = format!("http://h.io/{i}");
            if let Some(prev) = by_low.insert(url_hash(&u) & 0xffff, u.clone()) {
                pair = Some((prev, u));
                break;
            }
        }
        let (a, b) = pair.unwrap();
        let mut c = ctx();
        c.page.objects = vec![obj(&a, Some(10)), obj(&b, Some(20_000))];
        let h = Hint::full(&c).unwrap();
        assert_eq!(h.hash_width, 3);
        let d = Hint::from_bytes(&h.to_bytes()).unwrap();
        assert_eq!(d.lookup(&a).unwrap().size_code, size_code(Some(10)));
        assert_eq!(d.lookup(&b).unwrap().size_code, size_code(Some(20_000)));
    }

    #[test]
    fn partial_form_aggregates() {
        let h = Hint::full(&ctx()).unwrap().partial(1);
        let d = Hint::from_bytes(&h.to_bytes_uncompressed()).unwrap();
        assert!(d.partial);
        assert_eq!(d.listed(), 1);
        assert_eq!(d.origins[0].objects[0].size_code, size_code(Some(1000)));
        assert_eq!(d.origins[0].unlisted, Some((1, 0)));
        let (c, b) = d.origins[1].unlisted.unwrap();
        assert_eq!(c, 1);
        assert!((b as f64 - 300.0).abs() <= 300.0 * 0.045);
    }

    #[test]
    fn encode_within_degrades() {
        let mut c = ctx();
        for i in 0..400u64 {
            c.page.objects.push(obj(
                &format!("http://c{}.io/{i}", i % 7),
                Some(1000 + i * 5000),
            ));
        }
        let (b, form) = encode_within(&c, DNS_UDP_BUDGET).unwrap();
        assert!(b.len() <= DNS_UDP_BUDGET);
        let Form::Partial { listed } = form else {
            panic!("expected partial, got {form:?}")
        };
        assert!(listed > 0 && listed < 403);
        let d = Hint::from_bytes(&b).unwrap();
        assert_eq!(d.total_bytes, c.page.total_bytes());
        assert_eq!(d.listed(), listed);
        // The listed ones are the largest: the smallest listed code is the
        // listed-th largest code of the page.
        let mut all: Vec<u8> = Hint::full(&c)
            .unwrap()
            .origins
            .iter()
            .flat_map(|o| o.objects.iter().map(|x| x.size_code))
            .collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        let smallest = d
            .origins
            .iter()
            .flat_map(|o| o.objects.iter().map(|x| x.size_code))
            .min()
            .unwrap();
        assert_eq!(smallest, all[listed - 1]);
        assert!(matches!(
            encode_within(&c, 20),
            Err(WireError::TooLarge { .. })
        ));
    }

    #[test]
    fn rejects_malformed() {
        let good = Hint::full(&ctx()).unwrap().to_bytes_uncompressed();
        assert_eq!(Hint::from_bytes(&[1]), Err(WireError::TooShort(1)));
        assert_eq!(Hint::from_bytes(&[2, 0]), Err(WireError::Version(2)));
        assert_eq!(Hint::from_bytes(&[1, 8]), Err(WireError::Flags(8)));
        for cut in 2..good.len() {
            assert!(Hint::from_bytes(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = good.clone();
        extra.push(0);
        assert_eq!(Hint::from_bytes(&extra), Err(WireError::Trailing(1)));
        // Non-minimal varint for generated_at: 0xe8 0x87 0x00.
        let mut nm = good.clone();
        nm.splice(2..4, [0xe8, 0x87, 0x00]);
        assert!(matches!(Hint::from_bytes(&nm), Err(WireError::Varint(_))));
        // Object count that does not match the listed objects.
        let mut oc = good.clone();
        oc[12] = 4;
        assert!(matches!(
            Hint::from_bytes(&oc),
            Err(WireError::Inconsistent(_))
        ));
        // Hash width 5.
        let mut hw = good.clone();
        hw[26] = 5;
        assert!(matches!(
            Hint::from_bytes(&hw),
            Err(WireError::Range {
                field: "hash_width",
                ..
            })
        ));
        // A zip bomb: 1 MB of zeros deflates to ~1 KB.
        let z = deflate(&vec![0u8; 1 << 20]).unwrap();
        let mut bomb = vec![1, FLAG_COMPRESSED];
        bomb.extend_from_slice(&z);
        assert!(matches!(
            Hint::from_bytes(&bomb),
            Err(WireError::Compression(_))
        ));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = Hint::from_bytes(&b);
        }

        #[test]
        fn header_then_random_body_never_panics(flags in 0u8..8, b in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let mut v = vec![VERSION, flags];
            v.extend_from_slice(&b);
            let _ = Hint::from_bytes(&v);
        }

        #[test]
        fn round_trip(sizes in proptest::collection::vec(proptest::option::of(0u64..u64::MAX / 1024), 1..120),
                      hosts in 1usize..9, comp in proptest::option::of(0u32..100_000), ttl in any::<u32>(), keep in 0usize..130) {
            let mut c = ctx();
            c.ttl_s = ttl;
            c.page.computation_ms = comp;
            c.page.objects = sizes.iter().enumerate().map(|(i, s)| obj(&format!("https://h{}.example/{i}", i % hosts), *s)).collect();
            let h = Hint::full(&c).unwrap();
            prop_assert_eq!(h.listed(), sizes.len());
            let d = Hint::from_bytes(&h.to_bytes()).unwrap();
            prop_assert_eq!(&d, &h);
            prop_assert_eq!(d.to_bytes(), h.to_bytes());
            for (i, s) in sizes.iter().enumerate() {
                let o = d.lookup(&format!("https://h{}.example/{i}", i % hosts)).unwrap();
                prop_assert_eq!(o.size_code, size_code(*s));
            }
            let p = h.partial(keep);
            prop_assert_eq!(p.listed(), keep.min(sizes.len()));
            prop_assert_eq!(Hint::from_bytes(&p.to_bytes()).unwrap(), p);
            // With URLs, in full and in partial form.
            c.page.url = "https://h0.example/".into();
            let u = Hint::with_urls(&c).unwrap();
            let d = Hint::from_bytes(&u.to_bytes()).unwrap();
            prop_assert_eq!(&d, &u);
            for (j, i) in (0..sizes.len()).filter(|i| i % hosts == 0).enumerate() {
                prop_assert_eq!(d.object_url(0, j), Some(format!("https://h0.example/{i}")));
            }
            let p = u.partial(keep);
            prop_assert_eq!(Hint::from_bytes(&p.to_bytes()).unwrap(), p);
        }
    }
}
