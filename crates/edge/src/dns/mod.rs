//! The edge's DNS answers, without I/O: query bytes in, what to do out.
//!
//! Seed 000 §II: "a meta-data query message is also sent along with this DNS
//! query message … the hint packets can be delivered along with the DNS
//! response message". Messages are parsed and written with hickory-proto;
//! this module decides the answer:
//!
//! - **Zone** (`A`/`AAAA` for the configured hosts, in the lab the corpus
//!   hosts → the origin's address): answered authoritatively. If the query's
//!   OPT record carries the hint request option (`mewa_hint::dns`), the
//!   answer's OPT carries the page's hint: the full form if it fits the
//!   client's advertised UDP payload, else the partial form in what room is
//!   left, else status "retry over TCP" (the address answer stays complete,
//!   so only a hint-aware client asks again). Over TCP the budget is 64 KiB.
//! - **TXT fallback**: `TXT <hash>._hint.<host>` (for clients behind resolvers
//!   that strip unknown options) is answered with `mewa1:` + base64 of the
//!   hint, or NXDOMAIN when no such page is known.
//! - **Other names**: forwarded to the upstream resolver as they came, but
//!   only for clients the configuration allows (an edge must not become an
//!   open resolver for amplification); others get REFUSED.
//!
//! Malformed queries get FORMERR when their header can be read and are
//! dropped otherwise; nothing a client sends can panic this code (fuzzed).
//!
//! Layout: this module holds the types both paths share (the zone, what an
//! answer is and how it went); [`general`] answers every query by the rules
//! above and hands the common shape to its child, the fast path, first.

mod general;

use std::collections::HashMap;
use std::net::IpAddr;

use mewa_hint::wire::Form;

/// The classic DNS limit over UDP without EDNS (RFC 1035 §4.2.1).
pub(crate) const PLAIN_UDP: usize = 512;

/// Default of [`Responder::compact_payload`], bytes.
pub const COMPACT_UDP_PAYLOAD: u16 = 1000;

/// Addresses of the hosts the edge answers for, and how long answers may be
/// cached.
#[derive(Debug, Clone, Default)]
pub struct Zone {
    hosts: HashMap<String, Vec<IpAddr>>,
    /// TTL of the answers, seconds.
    pub ttl_s: u32,
}

impl Zone {
    /// A zone from (host, addresses) pairs; host names are compared without
    /// case and without the trailing dot.
    pub fn new(entries: impl IntoIterator<Item = (String, Vec<IpAddr>)>, ttl_s: u32) -> Zone {
        Zone {
            hosts: entries
                .into_iter()
                .map(|(h, a)| (normalize(&h), a))
                .collect(),
            ttl_s,
        }
    }

    /// The addresses of a host, if it is in the zone.
    pub fn get(&self, host: &str) -> Option<&[IpAddr]> {
        self.hosts.get(&normalize(host)).map(Vec::as_slice)
    }

    /// Every address of every host.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.hosts.values().flatten().copied()
    }

    /// [`Zone::get`] for a name already in lower case without the trailing
    /// dot (the fast path builds it so, without allocating).
    pub(crate) fn get_normalized(&self, host: &str) -> Option<&[IpAddr]> {
        self.hosts.get(host).map(Vec::as_slice)
    }

    /// Hosts in the zone.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// No host.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

pub(crate) fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The page a hint request counts for in the popularity table (which pages
/// the tracer loads): only a page on the host that was queried, as a
/// client asks for its page's host with the page's hint. A request that
/// names some other page (or thousands of made-up ones) under any name
/// would otherwise raise what the edge traces; it still gets its answer.
/// The host is read textually here, on every hint request; a page entering
/// the table must also pass [`loaded_where_counted`].
pub fn counted(page_url: String, queried_host: &str) -> Option<String> {
    let host = mewa_hint::page::host_of(&page_url)?;
    (normalize(&host) == normalize(queried_host)).then_some(page_url)
}

/// Whether a browser loads `page_url` from the host [`counted`] read in
/// it. The browser parses by the WHATWG URL Standard (the `url` crate), as
/// the tracer's Chromium does: read textually, `http://b.example\@a.example/`
/// names a.example, while a browser (a backslash is a slash) loads
/// b.example — counted under one name, the edge would have traced another
/// (seen while writing the `tracer_url` fuzz target, which checks it now).
/// Checked once per page as it enters the table, not on every request.
pub fn loaded_where_counted(page_url: &str) -> bool {
    let Some(text) = mewa_hint::page::host_of(page_url) else {
        return false;
    };
    match url::Url::parse(page_url).map(|u| u.host().map(|h| h.to_owned())) {
        Ok(Some(url::Host::Domain(d))) => normalize(&d) == normalize(&text),
        _ => false,
    }
}

/// How the query arrived: it sets the size limit of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// UDP: the client's advertised payload size (512 without EDNS), capped
    /// by ours.
    Udp,
    /// TCP: up to 65535 bytes.
    Tcp,
}

/// What to do with a query.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send these bytes back.
    Reply(Vec<u8>),
    /// Relay the query to the upstream resolver unchanged.
    Forward,
    /// Say nothing (the bytes were not a DNS query we could answer).
    Drop,
}

/// What a hint-bearing answer carried, for metrics and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HintServed {
    /// A hint of this many bytes, in this form.
    Hint {
        /// Wire bytes of the hint.
        bytes: usize,
        /// Full or partial.
        form: Form,
        /// The compact form over UDP, the URL form waiting over TCP.
        compact: bool,
    },
    /// The page is not known.
    Unknown,
    /// The hint did not fit; the client was told to retry over TCP.
    RetryTcp,
}

/// The answer to one query, with what the runtime needs to count.
#[derive(Debug)]
pub struct Answered {
    /// What to do.
    pub outcome: Outcome,
    /// The page a hint was asked for (EDNS option or TXT), for popularity.
    pub page: Option<String>,
    /// Whether and how a hint went out.
    pub hint: Option<HintServed>,
    /// Why a query got an error code, for the error counter.
    pub error: Option<&'static str>,
    /// What the query's DNS cookie proved ([`crate::cookie`]): a valid one
    /// exempts the answer from rate limiting.
    pub cookie: crate::cookie::Status,
}

impl Answered {
    fn reply(bytes: Vec<u8>) -> Answered {
        Answered {
            outcome: Outcome::Reply(bytes),
            page: None,
            hint: None,
            error: None,
            cookie: crate::cookie::Status::Absent,
        }
    }
}

/// The answering rules (see the module docs).
#[derive(Debug, Clone)]
pub struct Responder {
    /// Hosts answered authoritatively.
    pub zone: Zone,
    /// Our largest UDP answer (1232 by default: no IP fragmentation on
    /// common paths, DNS Flag Day 2020).
    pub max_udp_payload: u16,
    /// Largest UDP answer when the hint's URL form does not fit one: the
    /// answer then carries the compact form (by hash, or partial) within
    /// this and says the URL form waits over TCP
    /// ([`mewa_hint::dns::HintResponse::Compact`]). Below
    /// [`Responder::max_udp_payload`] (1000 by default) because the URL
    /// list no longer rides in it anyway: a smaller answer is less to lose
    /// on the radio and less to amplify.
    pub compact_payload: u16,
    /// Whether names outside the zone may be forwarded for this client
    /// (the runtime decides per source address and passes it in).
    pub upstream: bool,
}

#[cfg(test)]
mod tests {
    use super::{counted, loaded_where_counted};

    #[test]
    fn a_page_counts_only_under_the_host_a_browser_would_load() {
        let c =
            |u: &str, q: &str| counted(u.to_string(), q).is_some_and(|p| loaded_where_counted(&p));
        assert!(c("http://www.a.example/x", "www.a.example"));
        assert!(c("https://WWW.A.example./x", "www.a.example."));
        assert!(!c("http://www.b.example/", "www.a.example"));
        // Textually a.example; a browser loads b.example (a backslash is a
        // slash), so it counts under neither.
        assert!(!c("http://b.example\\@a.example/", "a.example"));
        assert!(!c("http://b.example\\@a.example/", "b.example"));
        // Userinfo: the host after it is the one loaded.
        assert!(c("http://user@a.example/", "a.example"));
        // Not a name a browser would load as a domain.
        assert!(!c("http://127.0.0.1/", "127.0.0.1"));
    }
}
