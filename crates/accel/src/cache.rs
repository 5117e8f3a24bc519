//! The accelerator's HTTP cache: responses stored by RFC 9111's rules, in
//! memory with a byte bound (least recently used out first) and optionally
//! on disk.
//!
//! What may be stored, for how long, and when a stored response must be
//! revalidated is decided by `http-cache-semantics` (`CachePolicy`, a shared
//! cache: `private` is never stored, `s-maxage` counts, `Authorization`
//! requests are stored only when the response allows it). This module keeps
//! the responses: several variants per URL (`Vary`), a byte bound, and the
//! disk copy. Time comes in as an argument (`now`), so the tests run in
//! virtual time.
//!
//! The cache holds responses as the upstream sent them; rewriting happens
//! on the way out, so one stored stylesheet serves every site that folds it.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http_cache_semantics::{BeforeRequest, CachePolicy};
use serde::{Deserialize, Serialize};

/// Variants kept per URL (different `Vary`-selected request headers); the
/// oldest goes first. Bounds what a client can make the cache hold by
/// varying `Accept-Encoding` and friends.
pub const MAX_VARIANTS: usize = 8;

/// Size bounds of the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLimits {
    /// Bytes of bodies held in memory (headers are counted at a flat
    /// [`HEADER_COST`] per response).
    pub memory_bytes: u64,
    /// A response whose body is larger is passed through, never stored.
    pub max_object_bytes: u64,
    /// Directory of the disk copy, if any: responses survive a restart and
    /// the disk can hold more than memory.
    pub disk: Option<PathBuf>,
    /// Bytes on disk.
    pub disk_bytes: u64,
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            memory_bytes: 256 << 20,
            max_object_bytes: 16 << 20,
            disk: None,
            disk_bytes: 4 << 30,
        }
    }
}

/// What a stored response costs on top of its body, bytes: an estimate of
/// its headers and bookkeeping, so a flood of empty responses is bounded
/// too.
pub const HEADER_COST: u64 = 1024;

/// One stored response.
#[derive(Debug)]
pub struct Stored {
    /// The cache policy (the request and response headers it was stored
    /// with, and when).
    pub policy: CachePolicy,
    /// Status as received.
    pub status: StatusCode,
    /// Response headers as received (hop-by-hop fields already removed).
    pub headers: HeaderMap,
    /// The body as received (still content-encoded, if it was).
    pub body: Bytes,
    /// How long past its freshness it may still be served (RFC 5861).
    pub stale: StaleWindows,
}

impl Stored {
    /// A response stored (or revalidated) at `now`; its stale windows are
    /// fixed from its `Cache-Control` then.
    pub fn new(
        policy: CachePolicy,
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
        now: SystemTime,
    ) -> Stored {
        let stale = StaleWindows::of(&policy, &headers, now);
        Stored {
            policy,
            status,
            headers,
            body,
            stale,
        }
    }

    fn cost(&self) -> u64 {
        self.body.len() as u64 + HEADER_COST
    }

    /// The response to serve from this entry while it is stale (inside one
    /// of its [`StaleWindows`]): the stored headers with `Age` brought up
    /// to `now`, so the client sees how old it is.
    pub fn stale_response(&self, now: SystemTime) -> http::response::Parts {
        let (mut parts, ()) = http::Response::new(()).into_parts();
        parts.status = self.status;
        parts.headers = self.headers.clone();
        parts.headers.insert(
            http::header::AGE,
            HeaderValue::from(self.policy.age(now).as_secs()),
        );
        parts
    }
}

/// Longest stale window honoured, seconds: an origin's typo of a few extra
/// zeros must not keep an object served stale for years.
pub const MAX_STALE_SECS: u64 = 7 * 24 * 3600;

/// RFC 5861's extensions of `Cache-Control`, as the absolute times until
/// which a stale response may still be served. They are fixed when the
/// response is stored or revalidated, from its freshness lifetime then
/// (`http-cache-semantics` does not read these directives, and once a
/// response is stale its policy no longer says by how much).
///
/// Neither window exists for a response that says `must-revalidate` or
/// `proxy-revalidate` (RFC 9111 §5.2.2.2: once stale it must not be used
/// unvalidated), nor for one that was already stale when stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaleWindows {
    /// `stale-while-revalidate=N`: served at once while one background
    /// revalidation runs.
    pub while_revalidate: Option<SystemTime>,
    /// `stale-if-error=N`: served when a revalidation fails (no answer
    /// from the origin, or a 500, 502, 503 or 504).
    pub if_error: Option<SystemTime>,
}

impl StaleWindows {
    /// The windows of a response with `headers` and `policy`, at `now`.
    pub fn of(policy: &CachePolicy, headers: &HeaderMap, now: SystemTime) -> StaleWindows {
        let ttl = policy.time_to_live(now);
        let forbids = cache_control(headers).any(|(n, _)| {
            n.eq_ignore_ascii_case("must-revalidate") || n.eq_ignore_ascii_case("proxy-revalidate")
        });
        if ttl.is_zero() || forbids {
            return StaleWindows::default();
        }
        let until = |name: &str| {
            let secs = cache_control_seconds(headers, name)?;
            now.checked_add(ttl)?
                .checked_add(std::time::Duration::from_secs(secs.min(MAX_STALE_SECS)))
        };
        StaleWindows {
            while_revalidate: until("stale-while-revalidate"),
            if_error: until("stale-if-error"),
        }
    }
}

/// Whether a stale response inside a window ending at `until` may answer a
/// request with `request` headers at `now`: not past the window, and not
/// for a request that asked for a fresh or validated answer (`no-cache`,
/// `max-age`, `min-fresh`, `Pragma: no-cache`).
pub fn stale_usable(until: Option<SystemTime>, request: &HeaderMap, now: SystemTime) -> bool {
    let wants_fresh = cache_control(request).any(|(n, _)| {
        ["no-cache", "max-age", "min-fresh"]
            .iter()
            .any(|d| n.eq_ignore_ascii_case(d))
    }) || request.get_all(http::header::PRAGMA).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.to_ascii_lowercase().contains("no-cache"))
    });
    until.is_some_and(|u| now < u) && !wants_fresh
}

/// The directives of every `Cache-Control` field: name and value (quotes
/// removed). Fields that are not text are skipped.
fn cache_control(headers: &HeaderMap) -> impl Iterator<Item = (&str, Option<&str>)> {
    headers
        .get_all(http::header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| match d.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (d, None),
        })
}

/// The seconds of directive `name`, if it appears exactly once with a
/// number: a repeated or malformed one counts as absent (RFC 9111 §4.2.1
/// leaves such a response to the cache, and absent is the safe reading).
fn cache_control_seconds(headers: &HeaderMap, name: &str) -> Option<u64> {
    let mut found = cache_control(headers).filter(|(n, _)| n.eq_ignore_ascii_case(name));
    let (_, value) = found.next()?;
    if found.next().is_some() {
        return None;
    }
    value?.parse().ok()
}

/// The answer of [`Cache::lookup`].
#[derive(Debug)]
pub enum Lookup {
    /// A stored response that may be served as it is, with the headers to
    /// serve (`Age` updated by the policy).
    Fresh(Arc<Stored>, http::response::Parts),
    /// A stored response past its freshness but inside its
    /// `stale-while-revalidate` window: serve it now with these headers,
    /// and revalidate it in the background with `request`.
    StaleWhileRevalidate(Arc<Stored>, http::response::Parts, http::request::Parts),
    /// A stored response that must be revalidated first: send `request`
    /// (conditional headers added), then [`Cache::revalidated`].
    Stale(Arc<Stored>, http::request::Parts),
    /// Nothing stored for this request.
    Miss,
}

/// What to purge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purge {
    /// Every stored response.
    All,
    /// Every response of one host.
    Host(String),
    /// One URL (every variant).
    Url(String),
}

/// Counts of the cache's contents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// URLs held in memory.
    pub urls: u64,
    /// Responses (variants) held in memory.
    pub responses: u64,
    /// Bytes held in memory ([`Stored`] bodies plus [`HEADER_COST`] each).
    pub memory_bytes: u64,
    /// URLs on disk.
    pub disk_urls: u64,
    /// Bytes on disk.
    pub disk_bytes: u64,
    /// Responses evicted for space since start.
    pub evictions: u64,
}

/// Why the disk copy failed (the memory cache goes on without it).
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// Reading or writing a file.
    #[error("cache file {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// A file is not a cache entry of this version.
    #[error("cache file {path} is not a mewa cache entry: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The cache: memory (bounded, least recently used out first), and disk if
/// configured. Safe to share between connections.
#[derive(Debug)]
pub struct Cache {
    limits: CacheLimits,
    mem: Mutex<Memory>,
    disk: Option<Mutex<Disk>>,
}

#[derive(Debug, Default)]
struct Memory {
    urls: HashMap<String, Slot>,
    /// Use tick → URL; the smallest tick is the least recently used.
    by_use: BTreeMap<u64, String>,
    tick: u64,
    bytes: u64,
    responses: u64,
    evictions: u64,
}

#[derive(Debug)]
struct Slot {
    variants: Vec<Arc<Stored>>,
    tick: u64,
}

impl Cache {
    /// A cache with `limits`. With a disk directory, the directory is
    /// created and indexed (entries that do not read back are removed and
    /// counted in the error list, so one bad file never stops a start).
    pub fn new(limits: CacheLimits) -> Result<(Cache, Vec<DiskError>), DiskError> {
        let (disk, errors) = match &limits.disk {
            Some(dir) => {
                let (d, e) = Disk::open(dir, limits.disk_bytes)?;
                (Some(Mutex::new(d)), e)
            }
            None => (None, Vec::new()),
        };
        Ok((
            Cache {
                limits,
                mem: Mutex::new(Memory::default()),
                disk,
            },
            errors,
        ))
    }

    /// The limits the cache was made with.
    pub fn limits(&self) -> &CacheLimits {
        &self.limits
    }

    fn mem(&self) -> MutexGuard<'_, Memory> {
        // A panic while holding the lock leaves consistent data (every
        // update is a few assignments), so a poisoned lock is used anyway.
        self.mem.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks `request` up under `key` (its absolute URL). `request` is the
    /// request as it would go upstream (absolute URI, the headers `Vary` may
    /// name).
    pub fn lookup(&self, key: &str, request: &http::request::Parts, now: SystemTime) -> Lookup {
        let variants = {
            let mut mem = self.mem();
            match mem.touch(key) {
                Some(v) => v,
                None => {
                    drop(mem);
                    match self.load_from_disk(key) {
                        Some(v) => v,
                        None => return Lookup::Miss,
                    }
                }
            }
        };
        let mut stale = None;
        for v in variants.iter().rev() {
            match v.policy.before_request(request, now) {
                BeforeRequest::Fresh(parts) => return Lookup::Fresh(v.clone(), parts),
                BeforeRequest::Stale {
                    request: r,
                    matches: true,
                } if stale.is_none() => stale = Some((v.clone(), r)),
                BeforeRequest::Stale { .. } => {}
            }
        }
        match stale {
            Some((v, r)) if stale_usable(v.stale.while_revalidate, &request.headers, now) => {
                let res = v.stale_response(now);
                Lookup::StaleWhileRevalidate(v, res, r)
            }
            Some((v, r)) => Lookup::Stale(v, r),
            None => Lookup::Miss,
        }
    }

    /// Reads `key` from disk into memory, if the disk has it.
    fn load_from_disk(&self, key: &str) -> Option<Vec<Arc<Stored>>> {
        let disk = self.disk.as_ref()?;
        let read = disk.lock().unwrap_or_else(|p| p.into_inner()).read(key);
        match read {
            Ok(Some(variants)) => {
                let variants: Vec<Arc<Stored>> = variants.into_iter().map(Arc::new).collect();
                let mut mem = self.mem();
                for v in &variants {
                    mem.insert(key, v.clone(), &self.limits, false);
                }
                Some(variants)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!("accel cache: {e}; dropping the disk entry");
                disk.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
                None
            }
        }
    }

    /// Whether a response of `len` body bytes may be stored at all.
    pub fn fits(&self, len: u64) -> bool {
        len <= self.limits.max_object_bytes && len + HEADER_COST <= self.limits.memory_bytes
    }

    /// Stores `stored` under `key` if its policy allows and it fits,
    /// replacing the variant the same request selects. Returns whether it
    /// was stored.
    pub fn store(&self, key: &str, request: &http::request::Parts, stored: Stored) -> bool {
        if !stored.policy.is_storable() || !self.fits(stored.body.len() as u64) {
            return false;
        }
        let stored = Arc::new(stored);
        {
            let mut mem = self.mem();
            mem.remove_matching(key, request);
            mem.insert(key, stored.clone(), &self.limits, true);
        }
        self.write_disk(key);
        true
    }

    /// After revalidating `old` with the upstream at `now`: `policy` and
    /// `headers` are what `CachePolicy::after_response` gave for a 304; the
    /// body stays.
    pub fn revalidated(
        &self,
        key: &str,
        old: &Arc<Stored>,
        policy: CachePolicy,
        headers: HeaderMap,
        now: SystemTime,
    ) -> Arc<Stored> {
        let fresh = Arc::new(Stored::new(
            policy,
            old.status,
            headers,
            old.body.clone(),
            now,
        ));
        {
            let mut mem = self.mem();
            mem.replace(key, old, fresh.clone());
        }
        self.write_disk(key);
        fresh
    }

    /// Writes the memory copy of `key` to disk (all its variants).
    fn write_disk(&self, key: &str) {
        let Some(disk) = &self.disk else { return };
        let variants = match self.mem().urls.get(key) {
            Some(s) => s.variants.clone(),
            None => return,
        };
        let mut d = disk.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = d.write(key, &variants) {
            tracing::warn!("accel cache: {e}; the response stays in memory only");
        }
    }

    /// Removes what `what` names from memory and disk; returns how many
    /// URLs were removed.
    pub fn purge(&self, what: &Purge) -> u64 {
        let hit = |url: &str| match what {
            Purge::All => true,
            Purge::Url(u) => url == u,
            Purge::Host(h) => host_of(url).is_some_and(|x| x.eq_ignore_ascii_case(h)),
        };
        let mut removed: Vec<String> = {
            let mut mem = self.mem();
            let keys: Vec<String> = mem.urls.keys().filter(|k| hit(k)).cloned().collect();
            for k in &keys {
                mem.remove(k);
            }
            keys
        };
        if let Some(disk) = &self.disk {
            let mut d = disk.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<String> = d.index.keys().filter(|k| hit(k)).cloned().collect();
            for k in keys {
                d.remove(&k);
                removed.push(k);
            }
        }
        removed.sort();
        removed.dedup();
        removed.len() as u64
    }

    /// What the cache holds.
    pub fn stats(&self) -> CacheStats {
        let mem = self.mem();
        let mut s = CacheStats {
            urls: mem.urls.len() as u64,
            responses: mem.responses,
            memory_bytes: mem.bytes,
            evictions: mem.evictions,
            ..CacheStats::default()
        };
        drop(mem);
        if let Some(disk) = &self.disk {
            let d = disk.lock().unwrap_or_else(|p| p.into_inner());
            s.disk_urls = d.index.len() as u64;
            s.disk_bytes = d.bytes;
        }
        s
    }
}

/// The host of an absolute URL key (`https://b.example/x` → `b.example`).
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', '?', ':']).unwrap_or(rest.len());
    Some(&rest[..end])
}

impl Memory {
    fn touch(&mut self, key: &str) -> Option<Vec<Arc<Stored>>> {
        self.tick += 1;
        let tick = self.tick;
        let slot = self.urls.get_mut(key)?;
        self.by_use.remove(&slot.tick);
        slot.tick = tick;
        self.by_use.insert(tick, key.to_owned());
        Some(slot.variants.clone())
    }

    fn insert(&mut self, key: &str, v: Arc<Stored>, limits: &CacheLimits, newest: bool) {
        let cost = v.cost();
        // Make room first, never evicting the URL being written.
        while self.bytes + cost > limits.memory_bytes {
            let Some((&t, victim)) = self.by_use.iter().next() else {
                break;
            };
            if victim == key {
                // Only this URL is left: drop its oldest variants.
                let victim = victim.clone();
                if !self.drop_oldest_variant(&victim) {
                    break;
                }
                continue;
            }
            let victim = victim.clone();
            self.by_use.remove(&t);
            self.remove(&victim);
            self.evictions += 1;
        }
        self.tick += 1;
        let tick = self.tick;
        let slot = match self.urls.get_mut(key) {
            Some(s) => {
                self.by_use.remove(&s.tick);
                s.tick = tick;
                s
            }
            None => self.urls.entry(key.to_owned()).or_insert(Slot {
                variants: Vec::new(),
                tick,
            }),
        };
        self.by_use.insert(tick, key.to_owned());
        if newest {
            slot.variants.push(v);
        } else {
            slot.variants.insert(0, v);
        }
        self.bytes += cost;
        self.responses += 1;
        if slot.variants.len() > MAX_VARIANTS {
            let gone = slot.variants.remove(0);
            self.bytes -= gone.cost();
            self.responses -= 1;
        }
    }

    fn drop_oldest_variant(&mut self, key: &str) -> bool {
        let Some(slot) = self.urls.get_mut(key) else {
            return false;
        };
        if slot.variants.is_empty() {
            return false;
        }
        let gone = slot.variants.remove(0);
        self.bytes -= gone.cost();
        self.responses -= 1;
        self.evictions += 1;
        true
    }

    fn remove(&mut self, key: &str) {
        if let Some(slot) = self.urls.remove(key) {
            self.by_use.remove(&slot.tick);
            for v in &slot.variants {
                self.bytes -= v.cost();
                self.responses -= 1;
            }
        }
    }

    /// Removes the variants `request` selects (they are being replaced).
    fn remove_matching(&mut self, key: &str, request: &http::request::Parts) {
        let Some(slot) = self.urls.get_mut(key) else {
            return;
        };
        let now = SystemTime::now();
        let mut kept = Vec::with_capacity(slot.variants.len());
        for v in slot.variants.drain(..) {
            let selected = match v.policy.before_request(request, now) {
                BeforeRequest::Fresh(_) => true,
                BeforeRequest::Stale { matches, .. } => matches,
            };
            if selected {
                self.bytes -= v.cost();
                self.responses -= 1;
            } else {
                kept.push(v);
            }
        }
        slot.variants = kept;
    }

    fn replace(&mut self, key: &str, old: &Arc<Stored>, new: Arc<Stored>) {
        let Some(slot) = self.urls.get_mut(key) else {
            return;
        };
        if let Some(v) = slot.variants.iter_mut().find(|v| Arc::ptr_eq(v, old)) {
            // Same body, so the same cost.
            *v = new;
        }
    }
}

// ---------------------------------------------------------------------------
// Disk

/// First bytes of every entry file; a file without them is not read.
const MAGIC: &[u8; 8] = b"MEWAAC01";

/// The disk copy: one file per URL (all its variants), named by the SHA-256
/// of the URL, written to a temporary name and renamed so a crash never
/// leaves half an entry. The index (URL → size, use order) lives in memory
/// and is rebuilt from the files at start.
#[derive(Debug)]
struct Disk {
    dir: PathBuf,
    max_bytes: u64,
    index: HashMap<String, (u64, u64)>,
    by_use: BTreeMap<u64, String>,
    tick: u64,
    bytes: u64,
}

/// An entry's metadata as written to disk.
#[derive(Serialize, Deserialize)]
struct DiskEntry {
    url: String,
    variants: Vec<DiskVariant>,
}

#[derive(Serialize, Deserialize)]
struct DiskVariant {
    policy: CachePolicy,
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body_len: u64,
    /// [`StaleWindows`] as seconds since the Unix epoch (absent in entries
    /// written before they existed: no stale serving for those).
    #[serde(default)]
    stale_while_revalidate: Option<u64>,
    #[serde(default)]
    stale_if_error: Option<u64>,
}

impl Disk {
    fn open(dir: &Path, max_bytes: u64) -> Result<(Disk, Vec<DiskError>), DiskError> {
        let io = |error| DiskError::Io {
            path: dir.to_owned(),
            error,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut d = Disk {
            dir: dir.to_owned(),
            max_bytes,
            index: HashMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
            bytes: 0,
        };
        let mut errors = Vec::new();
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io)? {
            let Ok(e) = e else { continue };
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                // A write that never finished.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(".entry") {
                continue;
            }
            match read_entry(&path, true) {
                Ok((url, _)) => {
                    let meta = e.metadata().ok();
                    let size = meta.as_ref().map_or(0, |m| m.len());
                    let mtime = meta
                        .and_then(|m| m.modified().ok())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    found.push((mtime, url, size));
                }
                Err(err) => {
                    let _ = std::fs::remove_file(&path);
                    errors.push(err);
                }
            }
        }
        // Oldest first, so use order follows the files' ages.
        found.sort();
        for (_, url, size) in found {
            d.note(&url, size);
        }
        Ok((d, errors))
    }

    fn path(&self, url: &str) -> PathBuf {
        let digest = ring::digest::digest(&ring::digest::SHA256, url.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.entry"))
    }

    fn note(&mut self, url: &str, size: u64) {
        self.tick += 1;
        if let Some((old, t)) = self.index.insert(url.to_owned(), (size, self.tick)) {
            self.bytes -= old;
            self.by_use.remove(&t);
        }
        self.by_use.insert(self.tick, url.to_owned());
        self.bytes += size;
    }

    fn remove(&mut self, url: &str) {
        if let Some((size, t)) = self.index.remove(url) {
            self.bytes -= size;
            self.by_use.remove(&t);
        }
        let _ = std::fs::remove_file(self.path(url));
    }

    fn read(&mut self, url: &str) -> Result<Option<Vec<Stored>>, DiskError> {
        if !self.index.contains_key(url) {
            return Ok(None);
        }
        let path = self.path(url);
        let (found, variants) = read_entry(&path, false)?;
        if found != url {
            return Err(DiskError::Corrupt {
                path,
                why: format!("holds {found}, not {url}"),
            });
        }
        let size = self.index.get(url).map_or(0, |e| e.0);
        self.note(url, size);
        Ok(Some(variants))
    }

    fn write(&mut self, url: &str, variants: &[Arc<Stored>]) -> Result<(), DiskError> {
        let path = self.path(url);
        let tmp = path.with_extension("tmp");
        let io = |error| DiskError::Io {
            path: tmp.clone(),
            error,
        };
        let entry = DiskEntry {
            url: url.to_owned(),
            variants: variants
                .iter()
                .map(|v| DiskVariant {
                    policy: v.policy.clone(),
                    status: v.status.as_u16(),
                    headers: v
                        .headers
                        .iter()
                        .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
                        .collect(),
                    body_len: v.body.len() as u64,
                    stale_while_revalidate: v.stale.while_revalidate.map(unix_secs),
                    stale_if_error: v.stale.if_error.map(unix_secs),
                })
                .collect(),
        };
        let meta = serde_json::to_vec(&entry).map_err(|e| DiskError::Corrupt {
            path: path.clone(),
            why: e.to_string(),
        })?;
        let size = (MAGIC.len() + 8 + meta.len()) as u64
            + variants.iter().map(|v| v.body.len() as u64).sum::<u64>();
        if size > self.max_bytes {
            return Ok(());
        }
        while self.bytes + size > self.max_bytes {
            let Some(victim) = self.by_use.values().next().cloned() else {
                break;
            };
            self.remove(&victim);
        }
        {
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(MAGIC).map_err(io)?;
            f.write_all(&(meta.len() as u64).to_le_bytes())
                .map_err(io)?;
            f.write_all(&meta).map_err(io)?;
            for v in variants {
                f.write_all(&v.body).map_err(io)?;
            }
        }
        std::fs::rename(&tmp, &path).map_err(|error| DiskError::Io {
            path: path.clone(),
            error,
        })?;
        self.note(url, size);
        Ok(())
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Reads an entry file: its URL and (unless `head_only`) its variants.
fn read_entry(path: &Path, head_only: bool) -> Result<(String, Vec<Stored>), DiskError> {
    let corrupt = |why: &str| DiskError::Corrupt {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    let io = |error| DiskError::Io {
        path: path.to_owned(),
        error,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 16];
    f.read_exact(&mut head)
        .map_err(|_| corrupt("shorter than its header"))?;
    if &head[..8] != MAGIC {
        return Err(corrupt("wrong magic bytes"));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&head[8..]);
    let meta_len = u64::from_le_bytes(len);
    if meta_len > 16 << 20 {
        return Err(corrupt("metadata over 16 MiB"));
    }
    let mut meta = vec![0u8; meta_len as usize];
    f.read_exact(&mut meta)
        .map_err(|_| corrupt("metadata cut short"))?;
    let entry: DiskEntry =
        serde_json::from_slice(&meta).map_err(|e| corrupt(&format!("metadata: {e}")))?;
    if head_only {
        return Ok((entry.url, Vec::new()));
    }
    let mut out = Vec::with_capacity(entry.variants.len());
    for v in entry.variants {
        if v.body_len > 1 << 32 {
            return Err(corrupt("body length over 4 GiB"));
        }
        let mut body = vec![0u8; v.body_len as usize];
        f.read_exact(&mut body)
            .map_err(|_| corrupt("body cut short"))?;
        let status = StatusCode::from_u16(v.status).map_err(|_| corrupt("bad status"))?;
        let mut headers = HeaderMap::new();
        for (n, val) in v.headers {
            let n = HeaderName::from_bytes(n.as_bytes()).map_err(|_| corrupt("bad header name"))?;
            let val = HeaderValue::from_bytes(&val).map_err(|_| corrupt("bad header value"))?;
            headers.append(n, val);
        }
        let from_unix =
            |s: u64| SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(s));
        out.push(Stored {
            policy: v.policy,
            status,
            headers,
            body: Bytes::from(body),
            stale: StaleWindows {
                while_revalidate: v.stale_while_revalidate.and_then(from_unix),
                if_error: v.stale_if_error.and_then(from_unix),
            },
        });
    }
    Ok((entry.url, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_cache_semantics::CacheOptions;
    use std::time::Duration;

    fn req(url: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::get(url);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        b.body(()).expect("request").into_parts().0
    }

    fn stored(
        r: &http::request::Parts,
        headers: &[(&str, &str)],
        body: &[u8],
        at: SystemTime,
    ) -> Stored {
        let mut b = http::Response::builder().status(200);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        let res = b.body(()).expect("response").into_parts().0;
        Stored::new(
            CachePolicy::new_options(r, &res, at, CacheOptions::default()),
            res.status,
            res.headers,
            Bytes::copy_from_slice(body),
            at,
        )
    }

    fn mem_cache(bytes: u64) -> Cache {
        Cache::new(CacheLimits {
            memory_bytes: bytes,
            max_object_bytes: bytes,
            disk: None,
            disk_bytes: 0,
        })
        .expect("cache")
        .0
    }

    const URL: &str = "https://b.example/x.png";

    #[test]
    fn a_fresh_response_is_served_then_goes_stale_and_is_revalidated() {
        let c = mem_cache(1 << 20);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let r = req(URL, &[]);
        let s = stored(
            &r,
            &[("cache-control", "max-age=60"), ("etag", "\"v1\"")],
            b"img",
            t0,
        );
        assert!(c.store(URL, &r, s));
        match c.lookup(URL, &r, t0 + Duration::from_secs(30)) {
            Lookup::Fresh(s, parts) => {
                assert_eq!(&s.body[..], b"img");
                assert_eq!(
                    parts.headers.get("age").map(|v| v.as_bytes()),
                    Some(&b"30"[..])
                );
            }
            other => panic!("expected fresh, got {other:?}"),
        }
        match c.lookup(URL, &r, t0 + Duration::from_secs(61)) {
            Lookup::Stale(_, conditional) => {
                assert_eq!(
                    conditional
                        .headers
                        .get("if-none-match")
                        .map(|v| v.as_bytes()),
                    Some(&b"\"v1\""[..])
                );
            }
            other => panic!("expected stale, got {other:?}"),
        }
    }

    #[test]
    fn private_and_no_store_responses_are_not_stored() {
        let c = mem_cache(1 << 20);
        let now = SystemTime::now();
        let r = req(URL, &[]);
        for cc in ["private, max-age=60", "no-store"] {
            assert!(!c.store(URL, &r, stored(&r, &[("cache-control", cc)], b"x", now)));
        }
        assert!(matches!(c.lookup(URL, &r, now), Lookup::Miss));
    }

    #[test]
    fn vary_keeps_one_variant_per_selecting_header() {
        let c = mem_cache(1 << 20);
        let now = SystemTime::now();
        let gz = req(URL, &[("accept-encoding", "gzip")]);
        let id = req(URL, &[("accept-encoding", "identity")]);
        let h = [("cache-control", "max-age=60"), ("vary", "accept-encoding")];
        assert!(c.store(URL, &gz, stored(&gz, &h, b"gzipped", now)));
        assert!(c.store(URL, &id, stored(&id, &h, b"plain", now)));
        // Storing the gzip variant again replaces it, not adds.
        assert!(c.store(URL, &gz, stored(&gz, &h, b"gzipped2", now)));
        assert_eq!(c.stats().responses, 2);
        match c.lookup(URL, &gz, now) {
            Lookup::Fresh(s, _) => assert_eq!(&s.body[..], b"gzipped2"),
            other => panic!("{other:?}"),
        }
        match c.lookup(URL, &id, now) {
            Lookup::Fresh(s, _) => assert_eq!(&s.body[..], b"plain"),
            other => panic!("{other:?}"),
        }
        let br = req(URL, &[("accept-encoding", "br")]);
        assert!(matches!(c.lookup(URL, &br, now), Lookup::Miss));
    }

    #[test]
    fn the_least_recently_used_url_is_evicted_first() {
        let c = mem_cache(3 * (HEADER_COST + 100));
        let now = SystemTime::now();
        let h = [("cache-control", "max-age=60")];
        let urls = [
            "https://b.example/1",
            "https://b.example/2",
            "https://b.example/3",
        ];
        for u in urls {
            let r = req(u, &[]);
            assert!(c.store(u, &r, stored(&r, &h, &[0; 100], now)));
        }
        // Use 1, so 2 is the least recently used.
        assert!(matches!(
            c.lookup(urls[0], &req(urls[0], &[]), now),
            Lookup::Fresh(..)
        ));
        let u4 = "https://b.example/4";
        let r4 = req(u4, &[]);
        assert!(c.store(u4, &r4, stored(&r4, &h, &[0; 100], now)));
        assert!(matches!(
            c.lookup(urls[1], &req(urls[1], &[]), now),
            Lookup::Miss
        ));
        assert!(matches!(
            c.lookup(urls[0], &req(urls[0], &[]), now),
            Lookup::Fresh(..)
        ));
        let s = c.stats();
        assert_eq!((s.urls, s.evictions), (3, 1));
        assert!(s.memory_bytes <= 3 * (HEADER_COST + 100));
    }

    #[test]
    fn an_object_over_the_bound_is_not_stored() {
        let c = Cache::new(CacheLimits {
            memory_bytes: 1 << 20,
            max_object_bytes: 10,
            disk: None,
            disk_bytes: 0,
        })
        .expect("cache")
        .0;
        let r = req(URL, &[]);
        let s = stored(
            &r,
            &[("cache-control", "max-age=60")],
            &[0; 11],
            SystemTime::now(),
        );
        assert!(!c.store(URL, &r, s));
    }

    #[test]
    fn purge_by_url_host_and_all() {
        let c = mem_cache(1 << 20);
        let now = SystemTime::now();
        let h = [("cache-control", "max-age=60")];
        for u in [
            "https://b.example/1",
            "https://b.example/2",
            "https://c.example/1",
        ] {
            let r = req(u, &[]);
            c.store(u, &r, stored(&r, &h, b"x", now));
        }
        assert_eq!(c.purge(&Purge::Url("https://b.example/1".into())), 1);
        assert_eq!(c.purge(&Purge::Host("B.example".into())), 1);
        assert_eq!(c.stats().urls, 1);
        assert_eq!(c.purge(&Purge::All), 1);
        assert_eq!(c.stats(), CacheStats::default());
    }

    #[test]
    fn a_revalidated_response_keeps_its_body_with_new_headers() {
        let c = mem_cache(1 << 20);
        let t0 = SystemTime::now();
        let r = req(URL, &[]);
        let h = [("cache-control", "max-age=1"), ("etag", "\"v1\"")];
        c.store(URL, &r, stored(&r, &h, b"body", t0));
        let later = t0 + Duration::from_secs(5);
        let Lookup::Stale(old, cond) = c.lookup(URL, &r, later) else {
            panic!("expected stale");
        };
        let not_modified = http::Response::builder()
            .status(304)
            .header("cache-control", "max-age=100")
            .header("etag", "\"v1\"")
            .body(())
            .expect("304")
            .into_parts()
            .0;
        let http_cache_semantics::AfterResponse::NotModified(policy, parts) =
            old.policy.after_response(&cond, &not_modified, later)
        else {
            panic!("expected not modified");
        };
        let fresh = c.revalidated(URL, &old, policy, parts.headers, later);
        assert_eq!(&fresh.body[..], b"body");
        assert!(matches!(
            c.lookup(URL, &r, later + Duration::from_secs(50)),
            Lookup::Fresh(..)
        ));
        assert_eq!(c.stats().responses, 1);
    }

    #[test]
    fn the_disk_copy_survives_a_restart_and_bad_files_are_dropped() {
        let dir = std::env::temp_dir().join(format!("mewa-accel-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let limits = CacheLimits {
            memory_bytes: 1 << 20,
            max_object_bytes: 1 << 20,
            disk: Some(dir.clone()),
            disk_bytes: 1 << 20,
        };
        let now = SystemTime::now();
        let r = req(URL, &[]);
        {
            let (c, errors) = Cache::new(limits.clone()).expect("cache");
            assert!(errors.is_empty());
            let s = stored(
                &r,
                &[
                    ("cache-control", "max-age=600, stale-while-revalidate=30"),
                    ("cache-control", "stale-if-error=90"),
                    ("x-a", "1"),
                ],
                b"abc",
                now,
            );
            assert!(c.store(URL, &r, s));
        }
        std::fs::write(dir.join("junk.entry"), b"not an entry").expect("write");
        std::fs::write(dir.join("half.tmp"), b"half").expect("write");
        let (c, errors) = Cache::new(limits).expect("cache");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(!dir.join("junk.entry").exists() && !dir.join("half.tmp").exists());
        assert_eq!(c.stats().disk_urls, 1);
        match c.lookup(URL, &r, now) {
            Lookup::Fresh(s, parts) => {
                assert_eq!(&s.body[..], b"abc");
                assert_eq!(
                    parts.headers.get("x-a").map(|v| v.as_bytes()),
                    Some(&b"1"[..])
                );
                // The stale windows come back, to the second.
                let at = |secs| Some(unix_secs(now + Duration::from_secs(secs)));
                assert_eq!(s.stale.while_revalidate.map(unix_secs), at(630));
                assert_eq!(s.stale.if_error.map(unix_secs), at(690));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.purge(&Purge::All), 1);
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stale_response_is_served_inside_its_windows_only() {
        let c = mem_cache(1 << 20);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |secs| t0 + Duration::from_secs(secs);
        let r = req(URL, &[]);
        let cc = "max-age=10, stale-while-revalidate=20, stale-if-error=100";
        let h = [("cache-control", cc), ("etag", "\"v1\"")];
        assert!(c.store(URL, &r, stored(&r, &h, b"img", t0)));
        assert!(matches!(c.lookup(URL, &r, at(5)), Lookup::Fresh(..)));
        // Stale by 5 s, inside stale-while-revalidate: served now, with its
        // age, and a conditional request to refresh it with.
        match c.lookup(URL, &r, at(15)) {
            Lookup::StaleWhileRevalidate(s, res, cond) => {
                assert_eq!(&s.body[..], b"img");
                assert_eq!(
                    res.headers.get("age").map(|v| v.as_bytes()),
                    Some(&b"15"[..])
                );
                assert_eq!(
                    cond.headers.get("if-none-match").map(|v| v.as_bytes()),
                    Some(&b"\"v1\""[..])
                );
            }
            other => panic!("expected stale-while-revalidate, got {other:?}"),
        }
        // Past it: revalidate first, but an error may still be covered.
        let Lookup::Stale(s, _) = c.lookup(URL, &r, at(31)) else {
            panic!("expected stale");
        };
        let none = HeaderMap::new();
        assert!(stale_usable(s.stale.if_error, &none, at(109)));
        assert!(!stale_usable(s.stale.if_error, &none, at(110)));
        // A request that asks for a fresh answer never gets a stale one.
        for asks in [
            ("cache-control", "no-cache"),
            ("cache-control", "max-age=0"),
            ("cache-control", "min-fresh=5"),
            ("pragma", "no-cache"),
        ] {
            let fresh_only = req(URL, &[asks]);
            assert!(
                matches!(c.lookup(URL, &fresh_only, at(15)), Lookup::Stale(..)),
                "{asks:?}"
            );
            assert!(!stale_usable(s.stale.if_error, &fresh_only.headers, at(31)));
        }
    }

    #[test]
    fn stale_windows_are_refused_where_the_response_or_its_values_forbid() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let r = req(URL, &[]);
        let windows = |h: &[(&str, &str)]| stored(&r, h, b"x", t0).stale;
        let after = |secs| Some(t0 + Duration::from_secs(secs));
        let swr = |h: &[(&str, &str)]| windows(h).while_revalidate;
        assert_eq!(
            swr(&[("cache-control", "max-age=10, stale-while-revalidate=20")]),
            after(30)
        );
        // Directive names in any case, values quoted, over two fields.
        assert_eq!(
            swr(&[
                ("cache-control", "max-age=10"),
                ("cache-control", "Stale-While-Revalidate=\"20\"")
            ]),
            after(30)
        );
        for cc in [
            "max-age=10, must-revalidate, stale-while-revalidate=20, stale-if-error=20",
            "max-age=10, proxy-revalidate, stale-while-revalidate=20, stale-if-error=20",
            "max-age=0, stale-while-revalidate=20, stale-if-error=20",
            "no-cache, stale-while-revalidate=20, stale-if-error=20",
            "max-age=10, stale-while-revalidate=abc, stale-if-error=-1",
            "max-age=10, stale-while-revalidate, stale-if-error=",
            "max-age=10, stale-while-revalidate=5, stale-while-revalidate=6, stale-if-error=1, stale-if-error=1",
        ] {
            assert_eq!(windows(&[("cache-control", cc)]), StaleWindows::default(), "{cc}");
        }
        // Huge values are cut to a week.
        assert_eq!(
            swr(&[(
                "cache-control",
                "max-age=10, stale-while-revalidate=999999999999"
            )]),
            after(10 + MAX_STALE_SECS)
        );
        // A response that arrived stale (its Age past max-age) gets none.
        assert_eq!(
            windows(&[
                ("cache-control", "max-age=10, stale-while-revalidate=20"),
                ("age", "11")
            ]),
            StaleWindows::default()
        );
    }
}
