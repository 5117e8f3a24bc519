//! The hint book: every known page's hint, encoded ahead of time so that a
//! DNS answer only looks it up.
//!
//! A hint carries the time it was made and a TTL (the client refuses stale
//! hints), and the edge→origin RTTs change as the monitor measures them, so
//! the runtime rebuilds the book periodically (well inside the TTL) and
//! swaps it in whole. Building is pure: pages, RTTs, policy and `now` in,
//! book out.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use mewa_hint::page::{host_of, strip_fragment, OriginRtt, PageContext, PageMeta};
use mewa_hint::wire::{encode_within, url_hash, Form, Hint, WireError};

/// What every hint says besides the page: seed 001's α and the TTL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HintPolicy {
    /// Policy threshold α (seed 001 Algorithm 1).
    pub alpha: f64,
    /// How long a client may use a hint, seconds.
    pub ttl_s: u32,
}

/// One page's hint.
#[derive(Debug)]
pub struct PageHint {
    /// The page URL (without fragment).
    pub url: String,
    /// Everything the hint is made from.
    pub ctx: PageContext,
    /// The full form with every object's URL, wire bytes (what most
    /// answers carry, encoded once).
    pub full: Vec<u8>,
}

impl PageHint {
    /// The hint in at most `budget` bytes: the full form with URLs when it
    /// fits, else without them, else the partial form (largest objects
    /// listed, the rest per origin), else `Err(TooLarge)` (the caller tells
    /// the client to retry over TCP).
    pub fn within(&self, budget: usize) -> Result<(Cow<'_, [u8]>, Form), WireError> {
        if self.full.len() <= budget {
            return Ok((Cow::Borrowed(&self.full), Form::WithUrls));
        }
        let (b, form) = encode_within(&self.ctx, budget)?;
        Ok((Cow::Owned(b), form))
    }
}

/// Every page's hint, by URL and by (document host, URL hash) for the TXT
/// fallback.
#[derive(Debug, Default)]
pub struct HintBook {
    by_url: HashMap<String, Arc<PageHint>>,
    by_hash: HashMap<(String, u32), Arc<PageHint>>,
}

impl HintBook {
    /// Builds the book. Pages whose hint cannot be encoded (e.g. a URL
    /// longer than the wire format allows) are left out and returned with
    /// the reason, so the caller can log them.
    pub fn build(
        pages: Vec<PageMeta>,
        rtts: &HashMap<String, OriginRtt>,
        policy: HintPolicy,
        now_unix_s: u64,
    ) -> (HintBook, Vec<(String, WireError)>) {
        let mut book = HintBook::default();
        let mut failed = Vec::new();
        for page in pages {
            let url = strip_fragment(&page.url).to_string();
            let origins = page
                .hosts()
                .into_iter()
                .filter_map(|h| rtts.get(h).cloned())
                .collect();
            let ctx = PageContext {
                page,
                origins,
                alpha: policy.alpha,
                ttl_s: policy.ttl_s,
                generated_at_unix_s: now_unix_s,
            };
            let full = match Hint::with_urls(&ctx) {
                Ok(h) => h.to_bytes(),
                Err(e) => {
                    failed.push((url, e));
                    continue;
                }
            };
            let hint = Arc::new(PageHint {
                url: url.clone(),
                ctx,
                full,
            });
            if let Some(host) = host_of(&url) {
                book.by_hash.insert((host, url_hash(&url)), hint.clone());
            }
            book.by_url.insert(url, hint);
        }
        (book, failed)
    }

    /// The hint for a page URL (its fragment ignored), or for the same
    /// page over the other scheme (`http://` ⇄ `https://`: a browser
    /// upgrades pages by HSTS or redirects, and one hint serves both).
    pub fn by_url(&self, url: &str) -> Option<&Arc<PageHint>> {
        let url = strip_fragment(url);
        self.by_url.get(url).or_else(|| {
            let other = if let Some(rest) = url.strip_prefix("http://") {
                format!("https://{rest}")
            } else {
                format!("http://{}", url.strip_prefix("https://")?)
            };
            self.by_url.get(&other)
        })
    }

    /// The hint for a TXT fallback query: document host and URL hash.
    pub fn by_hash(&self, host: &str, hash: u32) -> Option<&Arc<PageHint>> {
        self.by_hash.get(&(host.to_ascii_lowercase(), hash))
    }

    /// Every origin host of every page (what the latency monitor probes).
    pub fn hosts(&self) -> std::collections::BTreeSet<String> {
        self.by_url
            .values()
            .flat_map(|h| h.ctx.page.objects.iter().map(|o| o.host.clone()))
            .collect()
    }

    /// The hints, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PageHint>> {
        self.by_url.values()
    }

    /// Pages in the book.
    pub fn len(&self) -> usize {
        self.by_url.len()
    }

    /// No page in the book.
    pub fn is_empty(&self) -> bool {
        self.by_url.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A page of `n` objects of about `size` bytes on `hosts` hosts.
    pub(crate) fn page(url: &str, n: usize, size: u64, hosts: usize) -> PageMeta {
        PageMeta {
            computation_ms: Some(120),
            ..mewa_hint::page::synthetic_page(url, n, hosts, |i| size + i as u64)
        }
    }

    #[test]
    fn book_finds_pages_by_url_and_hash_with_their_rtts() {
        let mut rtts = HashMap::new();
        rtts.insert(
            "www.a.example".to_string(),
            OriginRtt {
                host: "www.a.example".into(),
                rtt_us: 23_000,
                measured_at_unix_s: 99,
            },
        );
        let policy = HintPolicy {
            alpha: 0.5,
            ttl_s: 300,
        };
        let (book, failed) = HintBook::build(
            vec![page("http://www.a.example/", 10, 5000, 1)],
            &rtts,
            policy,
            1000,
        );
        assert!(failed.is_empty());
        assert_eq!(book.len(), 1);
        let h = book.by_url("http://www.a.example/#top").expect("found");
        let decoded = Hint::from_bytes(&h.full).expect("valid hint");
        assert_eq!(decoded.generated_at_unix_s, 1000);
        assert_eq!(decoded.ttl_s, 300);
        assert_eq!(decoded.origins.len(), 1);
        assert_eq!(decoded.origins[0].rtt_s(), Some(0.023));
        let hash = url_hash("http://www.a.example/");
        assert!(book.by_hash("WWW.A.example", hash).is_some());
        assert!(book.by_hash("www.b.example", hash).is_none());
        assert!(book.by_url("http://www.a.example/other").is_none());
        // The same page over https:// (an upgraded load) finds it too.
        assert!(book.by_url("https://www.a.example/").is_some());
        assert!(book.by_url("ftp://www.a.example/").is_none());
    }

    #[test]
    fn within_degrades_then_refuses() {
        let (book, _) = HintBook::build(
            vec![page("http://big.example/", 400, 20_000, 40)],
            &HashMap::new(),
            HintPolicy {
                alpha: 0.5,
                ttl_s: 60,
            },
            0,
        );
        let h = book.by_url("http://big.example/").expect("found");
        let (b, form) = h.within(100_000).expect("fits");
        assert_eq!(form, Form::WithUrls);
        assert_eq!(b.len(), h.full.len());
        let budget = h.full.len() / 2;
        let (b, form) = h.within(budget).expect("partial fits");
        assert!(matches!(form, Form::Partial { .. }));
        assert!(b.len() <= budget);
        assert!(Hint::from_bytes(&b).expect("valid").partial);
        assert!(h.within(10).is_err());
    }
}
