//! From a received hint to a plan, without I/O.
//!
//! A hint is advice from an unauthenticated channel (a DNS answer), so every
//! value is bounded before use, and anything missing, malformed, stale or
//! absurd makes the client fall back to plain behaviour (one connection per
//! origin, the browser's own order) with the reason, which the caller logs.
//!
//! The plan follows seed 000 §II: "the optimal number of parallel TCP
//! connections … is calculated according to the BDP", with the path RTT "the
//! concatenation of wired and wireless latency": radio RTT (measured by the
//! client from its DNS exchange with the edge) plus wired RTT (the hint's
//! edge→origin RTT of the page's main origin). Objects are then spread over
//! the n connections balanced by size (longest processing time first).

use mewa_hint::page::host_of;
use mewa_hint::wire::{Hint, Priority};
use mewa_model::balance::assign_lpt;
use mewa_model::http::{choose_connections, ConnectionChoice, SlowStartModel, TcpPath};
use serde::Serialize;
use std::collections::HashMap;

/// Most connections the client opens to one origin, whatever a hint implies
/// (browsers open at most 6 per host over HTTP/1.1; the issue caps n at 6).
pub const MAX_CONNECTIONS: u32 = 6;

/// Largest page a hint may describe (bytes) before it counts as absurd.
pub const MAX_PAGE_BYTES: u64 = 200_000_000;

/// Most objects a hint may describe.
pub const MAX_OBJECTS: u32 = 20_000;

/// Largest edge→origin RTT taken from a hint.
pub const MAX_WIRED_RTT_S: f64 = 5.0;

/// Longest TTL a hint may claim (one day).
pub const MAX_TTL_S: u32 = 86_400;

/// How far a hint's creation time may lie in the future (clock skew).
pub const MAX_SKEW_S: u64 = 300;

/// Why the client does not follow a hint.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
pub enum Fallback {
    /// The answer had no hint option (edge not hint-aware, or a resolver on
    /// the way stripped it).
    #[error("no hint in the answer")]
    Missing,
    /// The edge does not know the page.
    #[error("the edge does not know this page")]
    Unknown,
    /// The hint bytes did not decode.
    #[error("malformed hint: {0}")]
    Malformed(String),
    /// The hint is for another page.
    #[error("hint is for {got}, not for the page asked")]
    OtherPage {
        /// The page the hint names.
        got: String,
    },
    /// Older than its TTL, or made in the future.
    #[error("stale hint: made at {made}, ttl {ttl_s} s, now {now}")]
    Stale {
        /// Creation time, Unix seconds.
        made: u64,
        /// Its TTL.
        ttl_s: u32,
        /// The client's clock.
        now: u64,
    },
    /// A value outside sane bounds.
    #[error("absurd hint: {0}")]
    Absurd(String),
    /// The client was told not to use hints (a baseline run).
    #[error("hints disabled")]
    Disabled,
}

/// Checks a decoded hint for `page_url` at `now_unix_s`.
pub fn check(hint: &Hint, page_url: &str, now_unix_s: u64) -> Result<(), Fallback> {
    // The same page over http:// or https:// (a browser upgrades a page
    // by HSTS or a redirect; the edge keeps one hint for it).
    let strip = |u: &str| {
        let u = mewa_hint::page::strip_fragment(u);
        u.split_once("://").map_or(u, |(_, rest)| rest).to_string()
    };
    if strip(&hint.page_url) != strip(page_url) {
        return Err(Fallback::OtherPage {
            got: hint.page_url.chars().take(200).collect(),
        });
    }
    if hint.ttl_s > MAX_TTL_S {
        return Err(Fallback::Absurd(format!("ttl of {} s", hint.ttl_s)));
    }
    if hint.generated_at_unix_s > now_unix_s + MAX_SKEW_S
        || now_unix_s
            > hint
                .generated_at_unix_s
                .saturating_add(u64::from(hint.ttl_s))
    {
        return Err(Fallback::Stale {
            made: hint.generated_at_unix_s,
            ttl_s: hint.ttl_s,
            now: now_unix_s,
        });
    }
    if hint.total_bytes == 0 || hint.total_bytes > MAX_PAGE_BYTES {
        return Err(Fallback::Absurd(format!(
            "page of {} bytes",
            hint.total_bytes
        )));
    }
    if hint.object_count == 0 || hint.object_count > MAX_OBJECTS {
        return Err(Fallback::Absurd(format!("{} objects", hint.object_count)));
    }
    if let Some(o) = hint.origins.iter().find(|o| {
        o.rtt_s()
            .is_some_and(|r| !(r.is_finite() && r <= MAX_WIRED_RTT_S))
    }) {
        return Err(Fallback::Absurd(format!(
            "RTT to {} of {:?} s",
            o.host,
            o.rtt_s()
        )));
    }
    if hint.alpha() > 1000.0 {
        return Err(Fallback::Absurd(format!("alpha {}", hint.alpha())));
    }
    Ok(())
}

/// What the client knows of its radio link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Radio {
    /// Radio bandwidth, bit/s (configured, or measured by the client).
    pub bandwidth_bps: f64,
    /// Radio RTT, seconds (the DNS exchange with the edge).
    pub rtt_s: f64,
}

/// The plan for one page, with everything it was computed from (logged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Connections to open to the main origin.
    pub n: u32,
    /// Page bytes (the hint's exact total).
    pub page_bytes: u64,
    /// Radio RTT used, seconds.
    pub radio_rtt_s: f64,
    /// Wired RTT used (edge→main origin), seconds; 0 when the hint has none.
    pub wired_rtt_s: f64,
    /// Radio bandwidth used, bit/s.
    pub bandwidth_bps: f64,
    /// Algorithm 1's trace (gains, cost, modelled times).
    pub choice: ConnectionChoice,
    /// For each listed object of the main origin, (URL hash as listed,
    /// connection index), largest first: the size-balanced assignment.
    pub assignment: Vec<(u32, usize)>,
    /// The hint's size of each [`Plan::assignment`] entry, bytes (±4.4 %;
    /// 0 when the hint did not know it), for pull dispatch.
    pub sizes: Vec<u64>,
    /// Which bits of [`mewa_hint::wire::url_hash`] the listed hashes keep.
    pub hash_mask: u32,
    /// The URLs of the page's objects, when the hint carries them (every
    /// origin, in the hint's order, the page itself left out): what the
    /// client may request before the document reveals them (seed 000 §II:
    /// the client "sends requests to all embedded URLs on parallel
    /// connections"), with the priority a browser would ask each with
    /// where the hint carries it ([`mewa_hint::wire::FLAG_PRIORITIES`]).
    /// Empty for a hint by hash only.
    #[serde(flatten)]
    pub urls: UrlList,
}

impl Plan {
    /// The connection the size-balanced assignment chose for `url`, or
    /// `None` for an object the hint does not list (the caller then picks
    /// the least-loaded connection). Two URLs whose kept hash bits collide
    /// share a connection; that only costs balance, never correctness.
    pub fn connection_of(&self, url: &str) -> Option<usize> {
        let h = mewa_hint::wire::url_hash(url) & self.hash_mask;
        self.assignment
            .iter()
            .find(|&&(x, _)| x == h)
            .map(|&(_, c)| c)
    }

    /// [`Plan::connection_of`] for every listed hash at once, for lookups
    /// per request.
    pub fn assignment_map(&self) -> std::collections::HashMap<u32, usize> {
        // Largest first: on a hash collision the larger object's choice wins.
        let mut m = std::collections::HashMap::with_capacity(self.assignment.len());
        for &(h, c) in &self.assignment {
            m.entry(h).or_insert(c);
        }
        m
    }
}

/// Checks the hint, then plans. `Err` says why the client falls back.
pub fn plan(hint: &Hint, page_url: &str, radio: Radio, now_unix_s: u64) -> Result<Plan, Fallback> {
    check(hint, page_url, now_unix_s)?;
    let sane = radio.bandwidth_bps.is_finite()
        && radio.bandwidth_bps > 0.0
        && radio.rtt_s.is_finite()
        && radio.rtt_s >= 0.0;
    if !sane {
        return Err(Fallback::Absurd(
            "radio bandwidth or RTT not positive".into(),
        ));
    }
    let main = host_of(page_url).unwrap_or_default();
    let origin = hint.origins.iter().find(|o| o.host == main);
    let wired = origin.and_then(|o| o.rtt_s()).unwrap_or(0.0);
    let rtt = (radio.rtt_s + wired).max(1e-4);
    let path = TcpPath::new(radio.bandwidth_bps, rtt)
        .map_err(|e| Fallback::Absurd(format!("path: {e}")))?;
    let choice = choose_connections(
        hint.total_bytes,
        &path,
        MAX_CONNECTIONS,
        SlowStartModel::Printed,
    );
    let n = choice.n.clamp(1, MAX_CONNECTIONS);
    let listed: Vec<(u32, u64)> = origin
        .map(|o| {
            o.objects
                .iter()
                .map(|x| (x.url_hash, x.size().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    let sizes: Vec<u64> = listed.iter().map(|l| l.1).collect();
    let a = assign_lpt(&sizes, n as usize);
    let mut assignment: Vec<(u32, usize, u64)> = listed
        .iter()
        .zip(&a.connection)
        .map(|(&(h, s), &c)| (h, c, s))
        .collect();
    assignment.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(&y.0)));
    Ok(Plan {
        n,
        page_bytes: hint.total_bytes,
        radio_rtt_s: radio.rtt_s,
        wired_rtt_s: wired,
        bandwidth_bps: radio.bandwidth_bps,
        choice,
        sizes: assignment.iter().map(|&(_, _, s)| s).collect(),
        assignment: assignment.into_iter().map(|(h, c, _)| (h, c)).collect(),
        hash_mask: hint.hash_mask(),
        urls: url_list(hint, page_url),
    })
}

/// Object URLs a hint carries, with the priority a browser would ask each
/// with where the hint says (by URL; the rest the client guesses).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UrlList {
    /// In the hint's order, the page itself left out.
    pub urls: Vec<String>,
    /// Priorities of those of [`UrlList::urls`] the hint gives one.
    pub priorities: HashMap<String, Priority>,
}

impl UrlList {
    /// No URLs (a hint by hash only).
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }
}

/// The object URLs a hint carries for `page_url` (checked as [`plan`]
/// checks it): what a client prefetches when the URL list came apart from
/// the compact hint it planned with ([`crate::resolve::fetch_over_tcp`]).
pub fn urls_of(hint: &Hint, page_url: &str, now_unix_s: u64) -> Result<UrlList, Fallback> {
    check(hint, page_url, now_unix_s)?;
    Ok(url_list(hint, page_url))
}

/// [`object_urls`] with the scheme `page_url` was asked with, and their
/// priorities.
fn url_list(hint: &Hint, page_url: &str) -> UrlList {
    let (urls, priority): (Vec<String>, Vec<Option<Priority>>) =
        object_urls(hint).into_iter().unzip();
    let urls = with_scheme_of(page_url, urls);
    let priorities = urls
        .iter()
        .zip(priority)
        .filter_map(|(u, p)| Some((u.clone(), p?)))
        .collect();
    UrlList { urls, priorities }
}

/// `urls` with the scheme `page_url` was asked with, where they have the
/// hint's page scheme (a hint kept for `http://` used for the `https://`
/// page).
fn with_scheme_of(page_url: &str, urls: Vec<String>) -> Vec<String> {
    let Some((want, _)) = page_url.split_once("://") else {
        return urls;
    };
    urls.into_iter()
        .map(|u| match u.split_once("://") {
            Some((s, rest)) if s != want && matches!(s, "http" | "https") => {
                format!("{want}://{rest}")
            }
            _ => u,
        })
        .collect()
}

/// Every object URL the hint carries, in its order, without the page's own
/// URL or repeats, with its priority when the hint carries it.
fn object_urls(hint: &Hint) -> Vec<(String, Option<Priority>)> {
    let page = mewa_hint::page::strip_fragment(&hint.page_url);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (i, o) in hint.origins.iter().enumerate() {
        for j in 0..o.objects.len() {
            if let Some(u) = hint.object_url(i, j) {
                if u != page && seen.insert(u.clone()) {
                    out.push((u, hint.object_priority(i, j)));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_hint::page::{synthetic_page, OriginRtt, PageContext};

    fn hint(bytes_each: u64, n: usize, wired_us: Option<u32>, made: u64) -> Hint {
        Hint::full(&context(bytes_each, n, wired_us, made)).unwrap()
    }

    fn context(bytes_each: u64, n: usize, wired_us: Option<u32>, made: u64) -> PageContext {
        let page = synthetic_page("http://www.a.example/", n, 1, |i| bytes_each + i as u64);
        PageContext {
            page,
            origins: wired_us
                .map(|r| OriginRtt {
                    host: "www.a.example".into(),
                    rtt_us: r,
                    measured_at_unix_s: made,
                })
                .into_iter()
                .collect(),
            alpha: 0.5,
            ttl_s: 300,
            generated_at_unix_s: made,
        }
    }

    #[test]
    fn plan_lists_the_object_urls_a_hint_carries() {
        let page = "http://www.a.example/";
        let by_hash = hint(10_000, 5, Some(20_000), 1000);
        assert!(plan(&by_hash, page, RADIO, 1000).unwrap().urls.is_empty());
        let bytes = Hint::with_urls(&context(10_000, 5, Some(20_000), 1000))
            .unwrap()
            .to_bytes();
        let with = Hint::from_bytes(&bytes).unwrap();
        let p = plan(&with, page, RADIO, 1000).unwrap();
        // Every object but the page itself, in the hint's order.
        let want: Vec<String> = (1..5)
            .map(|i| format!("http://www.a.example/img/{i}.jpg"))
            .collect();
        assert_eq!(p.urls.urls, want);
        // A path that is unknown (empty) gives no URL.
        let mut gap = with.clone();
        if let Some(ps) = gap.origins[0].paths.as_mut() {
            ps[2].clear();
        }
        let p = plan(&gap, page, RADIO, 1000).unwrap();
        assert_eq!(p.urls.urls.len(), 3);
        assert!(!p.urls.urls.contains(&want[1]));
        // The same page asked over https://: the hint applies, its URLs
        // take the scheme asked for; another page's hint does not.
        let p = plan(&with, "https://www.a.example/", RADIO, 1000).unwrap();
        assert_eq!(p.urls.urls[0], "https://www.a.example/img/1.jpg");
        assert!(matches!(
            plan(&with, "https://www.b.example/", RADIO, 1000),
            Err(Fallback::OtherPage { .. })
        ));
    }

    const RADIO: Radio = Radio {
        bandwidth_bps: 32e6,
        rtt_s: 0.045,
    };

    #[test]
    fn bounds_reject_what_a_hint_must_not_say() {
        let h = hint(10_000, 30, Some(20_000), 1000);
        assert!(check(&h, "http://www.a.example/#top", 1000).is_ok());
        assert!(matches!(
            check(&h, "http://other.example/", 1000),
            Err(Fallback::OtherPage { .. })
        ));
        assert!(matches!(
            check(&h, "http://www.a.example/", 1301),
            Err(Fallback::Stale { .. })
        ));
        assert!(matches!(
            check(&h, "http://www.a.example/", 1000 - MAX_SKEW_S - 1),
            Err(Fallback::Stale { .. })
        ));
        let mut bad = h.clone();
        bad.ttl_s = MAX_TTL_S + 1;
        assert!(matches!(
            check(&bad, "http://www.a.example/", 1000),
            Err(Fallback::Absurd(_))
        ));
        let mut bad = h.clone();
        bad.total_bytes = MAX_PAGE_BYTES + 1;
        assert!(matches!(
            check(&bad, "http://www.a.example/", 1000),
            Err(Fallback::Absurd(_))
        ));
        let mut bad = h.clone();
        bad.origins[0].rtt_100us = Some(60_000);
        assert!(matches!(
            check(&bad, "http://www.a.example/", 1000),
            Err(Fallback::Absurd(_))
        ));
        let bad_radio = Radio {
            bandwidth_bps: 0.0,
            rtt_s: 0.05,
        };
        assert!(plan(&h, "http://www.a.example/", bad_radio, 1000).is_err());
    }

    #[test]
    fn plan_uses_radio_plus_wired_rtt_and_balances_by_size() {
        // ≈ 1.2 MB page, LTE-like radio (seed 000 §IV: 32 Mbit/s, 65 ms).
        let h = hint(40_000, 30, Some(20_000), 1000);
        let p = plan(&h, "http://www.a.example/", RADIO, 1000).unwrap();
        assert!((p.wired_rtt_s - 0.020).abs() < 1e-9);
        assert!(p.n >= 2 && p.n <= MAX_CONNECTIONS, "n = {}", p.n);
        assert_eq!(p.assignment.len(), 30);
        // Each entry carries the hint's size, largest first, within the
        // size code's 4.4 % of the real 40 000 + i bytes.
        assert_eq!(p.sizes.len(), 30);
        assert!(p.sizes.windows(2).all(|w| w[0] >= w[1]), "{:?}", p.sizes);
        assert!(
            p.sizes
                .iter()
                .all(|&s| s.abs_diff(40_015) <= 40_015 * 45 / 1000),
            "{:?}",
            p.sizes
        );
        // Balanced: per-connection loads differ by at most one object.
        let mut loads = vec![0usize; p.n as usize];
        for (_, c) in &p.assignment {
            loads[*c] += 1;
        }
        let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        assert!(hi - lo <= 1, "{loads:?}");
        // Every listed URL finds its connection; an unlisted one does not.
        for i in 1..30 {
            let c = p.connection_of(&format!("http://www.a.example/img/{i}.jpg"));
            assert!(c.is_some_and(|c| c < p.n as usize), "object {i}: {c:?}");
        }
        assert_eq!(p.connection_of("http://www.a.example/not-listed.js"), None);
        // A tiny page needs one connection.
        let small = hint(1_000, 3, Some(20_000), 1000);
        assert_eq!(
            plan(&small, "http://www.a.example/", RADIO, 1000)
                .unwrap()
                .n,
            1
        );
        // No wired RTT in the hint: radio only, and still a plan.
        let no_rtt = hint(40_000, 30, None, 1000);
        assert_eq!(
            plan(&no_rtt, "http://www.a.example/", RADIO, 1000)
                .unwrap()
                .wired_rtt_s,
            0.0
        );
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever a decoded hint says, checking and planning never panic,
        /// and an accepted plan stays within its bounds.
        #[test]
        fn any_hint_gives_a_bounded_plan_or_a_reason(
            total in 0u64..300_000_000,
            count in 0u32..30_000,
            ttl in 0u32..100_000,
            made in 0u64..2_000_000_000,
            rtt in proptest::option::of(0u32..100_000),
            alpha in 0u32..2_000_000,
            sizes in proptest::collection::vec(0u8..=255, 0..200),
            bw in -1e6f64..1e10,
            radio_rtt in -1.0f64..100.0,
        ) {
            let mut h = hint(1000, 2, None, made);
            h.total_bytes = total;
            h.object_count = count;
            h.ttl_s = ttl;
            h.alpha_milli = alpha;
            h.origins[0].rtt_100us = rtt;
            h.origins[0].objects = sizes
                .iter()
                .enumerate()
                .map(|(i, &c)| mewa_hint::wire::HintObject { url_hash: i as u32, size_code: c })
                .collect();
            let radio = Radio { bandwidth_bps: bw, rtt_s: radio_rtt };
            if let Ok(p) = plan(&h, "http://www.a.example/", radio, made + 1) {
                prop_assert!((1..=MAX_CONNECTIONS).contains(&p.n));
                prop_assert!(p.assignment.iter().all(|&(_, c)| c < p.n as usize));
                prop_assert!(p.wired_rtt_s <= MAX_WIRED_RTT_S);
            }
        }
    }
}
