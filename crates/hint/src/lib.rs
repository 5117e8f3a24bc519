//! # mewa-hint
//!
//! The data the edge hands to a client, and how it travels:
//!
//! - [`page`]: the page metadata model (objects, sizes, discovery, computation
//!   latency) and the network context (edge→origin RTT, α, TTL).
//! - [`wire`]: the compact, versioned, compressed binary hint and its degraded
//!   form for pages whose full hint would not fit one UDP DNS answer.
//! - [`dns`]: the carriers: an EDNS(0) option (request and response) and a TXT
//!   record fallback.
//! - [`import`]: HAR 1.2 and Chrome DevTools Protocol recordings (plus Chrome
//!   traces for computation latency) into the metadata model.
//!
//! Everything here is pure: functions take bytes or values and return values.
//! Decoders never panic on arbitrary input (see the proptests and `fuzz/`).

pub mod dns;
pub mod import;
pub mod page;
pub mod wire;

pub use page::{Discovery, ObjectMeta, OriginRtt, PageContext, PageMeta, Recorded};

/// Seconds since the Unix epoch (0 if the clock is before it): the clock
/// hints are stamped and checked with, shared by the edge and the client.
pub fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
