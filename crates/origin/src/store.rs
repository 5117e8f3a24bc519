//! Every body of a corpus, generated once at start and kept in memory, with
//! the validators the responses carry.
//!
//! Bodies quote absolute URLs, so each object has two bodies: one with
//! `http://` links (cleartext listener) and one with `https://` links (TLS and
//! QUIC listeners). Where both are equal (images, fonts) they share memory.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use mewa_corpus::{body, BodyError, Corpus, Discovery, Scheme};

/// `Last-Modified` of every object unless configured: 2024-01-01T00:00:00Z.
/// A fixed instant keeps responses byte-identical from run to run, so that
/// experiments are repeatable.
pub const DEFAULT_LAST_MODIFIED: Duration = Duration::from_secs(1_704_067_200);

/// Why a corpus could not be loaded into a [`Store`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A body could not be generated (an invalid corpus); validate the corpus
    /// (`mewa corpus show`) and fix the object named.
    #[error("cannot generate a body: {0}")]
    Body(BodyError),
    /// The corpus has no objects, so there is nothing to serve.
    #[error("the corpus has no objects to serve")]
    Empty,
}

// By hand rather than `#[from]`, so an error chain prints the cause once.
impl From<BodyError> for StoreError {
    fn from(e: BodyError) -> Self {
        StoreError::Body(e)
    }
}

/// One servable object.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Name of the page the object belongs to.
    pub page: String,
    /// Object id within the page.
    pub id: u32,
    /// `Content-Type`.
    pub content_type: String,
    /// Body with `http://` links.
    pub body_http: Bytes,
    /// Body with `https://` links.
    pub body_https: Bytes,
    /// Strong `ETag` (quoted) for the `http` body.
    pub etag_http: String,
    /// Strong `ETag` (quoted) for the `https` body.
    pub etag_https: String,
    /// `Last-Modified`.
    pub last_modified: SystemTime,
    /// Status of the response (a recorded page's 3xx, 204, 404…; else 200).
    pub status: u16,
    /// For a redirect: `host` + `path` of its target, written as the
    /// `Location` with the listener's scheme.
    pub location: Option<String>,
    /// Server think time before this response (recorded pages).
    pub think: Duration,
}

impl Entry {
    /// The body and its `ETag` for a scheme.
    pub fn for_scheme(&self, scheme: Scheme) -> (&Bytes, &str) {
        match scheme {
            Scheme::Http => (&self.body_http, &self.etag_http),
            Scheme::Https => (&self.body_https, &self.etag_https),
        }
    }
}

/// All objects of a corpus by host, then by path (with query, as in the
/// corpus).
#[derive(Debug, Default)]
pub struct Store {
    hosts: HashMap<String, HashMap<String, Entry>>,
    /// Objects skipped because an earlier page already had the same host and
    /// path (the first one wins).
    pub duplicates: usize,
    /// Total bytes held (both schemes, shared bodies counted once).
    pub bytes: u64,
    /// Requests for a URL the corpus does not have (answered 404 at once):
    /// a replayed page asking for something its recording never fetched.
    pub misses: std::sync::atomic::AtomicU64,
}

impl Store {
    /// Generates every body of `corpus` (the cost of a 2–4 MB page corpus is a
    /// few milliseconds and a few MB of RAM).
    pub fn new(corpus: &Corpus) -> Result<Store, StoreError> {
        Store::with_last_modified(corpus, UNIX_EPOCH + DEFAULT_LAST_MODIFIED)
    }

    /// [`Store::new`] with a chosen `Last-Modified` for every object.
    pub fn with_last_modified(
        corpus: &Corpus,
        last_modified: SystemTime,
    ) -> Result<Store, StoreError> {
        let mut store = Store::default();
        for page in &corpus.pages {
            for o in &page.objects {
                let host = normalize_host(&o.host);
                let paths = store.hosts.entry(host).or_default();
                if paths.contains_key(&o.path) {
                    store.duplicates += 1;
                    continue;
                }
                let http = Bytes::from(body(page, o.id, Scheme::Http)?);
                let https_vec = body(page, o.id, Scheme::Https)?;
                let https = if https_vec == http.as_ref() {
                    http.clone()
                } else {
                    store.bytes += https_vec.len() as u64;
                    Bytes::from(https_vec)
                };
                store.bytes += http.len() as u64;
                paths.insert(
                    o.path.clone(),
                    Entry {
                        page: page.name.clone(),
                        id: o.id,
                        content_type: o.content_type.clone(),
                        etag_http: etag(&page.name, o.id, o.size, &http),
                        etag_https: etag(&page.name, o.id, o.size, &https),
                        body_http: http,
                        body_https: https,
                        last_modified,
                        status: o.status(),
                        location: page
                            .children(o.id, Discovery::Redirect)
                            .next()
                            .map(|t| format!("{}{}", t.host, t.path)),
                        think: Duration::from_millis(u64::from(o.think_ms)),
                    },
                );
            }
        }
        if store.hosts.values().all(HashMap::is_empty) {
            return Err(StoreError::Empty);
        }
        Ok(store)
    }

    /// Every hostname served, sorted.
    pub fn hosts(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.hosts.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// Whether `host` (already normalized) is served.
    pub fn has_host(&self, host: &str) -> bool {
        self.hosts.contains_key(host)
    }

    /// The object at `host` + `path`; `path` is tried with its query first,
    /// then without it (a cache-busting query on a corpus path still finds it).
    pub fn get(&self, host: &str, path: &str) -> Option<&Entry> {
        let paths = self.hosts.get(host)?;
        paths
            .get(path)
            .or_else(|| paths.get(path.split_once('?')?.0))
    }

    /// The object at exactly `host` + `path` (query included).
    pub fn get_exact(&self, host: &str, path: &str) -> Option<&Entry> {
        self.hosts.get(host)?.get(path)
    }

    /// Number of objects served.
    pub fn len(&self) -> usize {
        self.hosts.values().map(HashMap::len).sum()
    }

    /// Whether nothing is served (never true for a store built by
    /// [`Store::new`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lower case, without a trailing dot, so that `Example.COM.` finds
/// `example.com`.
pub fn normalize_host(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// A strong validator: the first 128 bits of SHA-256 over page, id, size and
/// the body itself, so it changes exactly when the representation does (the
/// `http` and `https` bodies differ, and so do their tags).
fn etag(page: &str, id: u32, size: u64, body: &[u8]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(page.as_bytes());
    ctx.update(&[0]);
    ctx.update(&id.to_be_bytes());
    ctx.update(&size.to_be_bytes());
    ctx.update(body);
    let d = ctx.finish();
    let mut s = String::with_capacity(34);
    s.push('"');
    for b in d.as_ref().iter().take(16) {
        s.push_str(&format!("{b:02x}"));
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::{generate, Preset};

    #[test]
    fn holds_every_object_with_exact_bytes() {
        let corpus = generate(Preset::Accel7, 1);
        let store = Store::new(&corpus).unwrap();
        let page = &corpus.pages[0];
        assert_eq!(store.len(), page.objects.len());
        for o in &page.objects {
            let e = store.get(&o.host, &o.path).unwrap();
            assert_eq!(
                e.body_https.as_ref(),
                body(page, o.id, Scheme::Https).unwrap()
            );
            assert_eq!(e.body_http.len() as u64, o.size);
            assert!(e.etag_http.starts_with('"') && e.etag_http.len() == 34);
        }
        assert_eq!(store.hosts().len(), page.hosts().len());
    }

    #[test]
    fn etags_are_deterministic_and_differ_by_body() {
        assert_eq!(etag("p", 1, 3, b"abc"), etag("p", 1, 3, b"abc"));
        assert_ne!(etag("p", 1, 3, b"abc"), etag("p", 2, 3, b"abc"));
        assert_ne!(etag("p", 1, 3, b"abc"), etag("p", 1, 3, b"abd"));
    }

    #[test]
    fn normalizes_hosts() {
        assert_eq!(normalize_host("Example.COM."), "example.com");
    }
}
