//! The edge's page-metadata store: one SQLite file.
//!
//! Schema (version [`SCHEMA_VERSION`], kept in `PRAGMA user_version`):
//!
//! | table | rows |
//! |---|---|
//! | `pages` | url (unique), url_hash + host (for the TXT fallback), computation_ms, source, updated |
//! | `objects` | (page_id, idx) → url, host, size, content_type, last_modified, etag, discovery, parent; deleted with their page |
//! | `origins` | host → smoothed RTT (µs) and when its newest sample was taken |
//! | `latency_samples` | host, at, rtt_us (newest [`SAMPLES_KEPT`] per host) |
//! | `queries` | (url, minute) → count |
//!
//! Why it is safe to kill: the file is in WAL mode and every multi-row change
//! (a page with its objects, a whole import) is one transaction, so a crash
//! at any moment leaves the last committed state; `synchronous=NORMAL` keeps
//! that guarantee against a process crash (a power cut may lose the last
//! commits, never consistency). Migrations are ordered SQL batches, each
//! applied in one transaction that also bumps the version; a file written by
//! a newer mewa is refused and left untouched.
//!
//! Other choices: WAL also lets the admin API read while the DNS server
//! flushes query counts. Sizes and times are `u64` in Rust but SQLite
//! integers are `i64`: a value that does not fit is an error, never a wrap.
//! Rows are validated when read (discovery code, non-negative sizes, parent
//! indexes inside the page), so a hand-edited or damaged file gives an error
//! naming the page, not a panic or a silently wrong hint. Query counts are
//! kept per minute so that "most queried in the last hour" is one indexed
//! range sum, at the price of minute granularity.

use std::path::{Path, PathBuf};

use mewa_hint::page::{host_of, strip_fragment, Discovery, ObjectMeta, OriginRtt, PageMeta};
use mewa_hint::wire::url_hash;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde::Serialize;

/// The schema version this program writes: the number of [`MIGRATIONS`].
pub const SCHEMA_VERSION: u32 = 1;

/// How long to wait for another process's lock (an import running while the
/// edge serves) before giving up with "database is locked".
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Raw latency samples kept per origin host.
pub const SAMPLES_KEPT: usize = 1000;

/// Ordered migrations: `MIGRATIONS[i]` takes the schema from version `i` to
/// `i + 1`. Append only: a released batch is never edited, since files out
/// there were built by it.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = ["
CREATE TABLE pages (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    url_hash INTEGER NOT NULL,
    host TEXT NOT NULL,
    computation_ms INTEGER,
    source TEXT NOT NULL,
    updated INTEGER NOT NULL
);
CREATE INDEX pages_by_hash ON pages (host, url_hash);
CREATE TABLE objects (
    page_id INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    url TEXT NOT NULL,
    host TEXT NOT NULL,
    size INTEGER,
    content_type TEXT,
    last_modified TEXT,
    etag TEXT,
    discovery INTEGER NOT NULL,
    parent INTEGER,
    PRIMARY KEY (page_id, idx)
) WITHOUT ROWID;
CREATE TABLE origins (
    host TEXT PRIMARY KEY,
    rtt_us INTEGER NOT NULL,
    measured_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE latency_samples (
    host TEXT NOT NULL,
    at INTEGER NOT NULL,
    rtt_us INTEGER NOT NULL
);
CREATE INDEX samples_by_host ON latency_samples (host, at);
CREATE TABLE queries (
    url TEXT NOT NULL,
    minute INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (url, minute)
) WITHOUT ROWID;
CREATE INDEX queries_by_minute ON queries (minute);
"];

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused (not a database, disk full, locked, …).
    #[error("store {path}: {error}")]
    Sqlite {
        /// The store file.
        path: PathBuf,
        /// SQLite's error.
        error: rusqlite::Error,
    },
    /// The file was written by a newer mewa.
    #[error("store {path}: schema version {found} is newer than this mewa knows ({SCHEMA_VERSION}); upgrade mewa (the file was not changed)")]
    Newer {
        /// The store file.
        path: PathBuf,
        /// The file's version.
        found: u32,
    },
    /// A row that cannot be what this program wrote (edited by hand or
    /// corrupt).
    #[error("store {path}: page {url}: {what}")]
    BadRow {
        /// The store file.
        path: PathBuf,
        /// The page.
        url: String,
        /// What is wrong.
        what: String,
    },
    /// A value in a non-page table that this program cannot have written
    /// (an origin's RTT, a latency sample, a query count), or a value to be
    /// written that does not fit SQLite's 64-bit signed integers.
    #[error("store {path}: {what}")]
    BadValue {
        /// The store file.
        path: PathBuf,
        /// Which value and what is wrong with it.
        what: String,
    },
    /// A page that cannot be stored as given.
    #[error("page {url}: {what}")]
    BadPage {
        /// The page.
        url: String,
        /// What is wrong.
        what: String,
    },
    /// `integrity_check` found problems.
    #[error("store {path} is damaged: {problems}")]
    Damaged {
        /// The store file.
        path: PathBuf,
        /// What SQLite reported.
        problems: String,
    },
}

/// A stored page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredPage {
    /// The page and its objects.
    pub meta: PageMeta,
    /// Where it came from (`import:FILE`, `tracer`).
    pub source: String,
    /// When it was stored.
    pub updated_unix_s: u64,
}

/// One line of [`Store::pages`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageSummary {
    /// The page URL.
    pub url: String,
    /// Objects.
    pub objects: u64,
    /// Sum of the known sizes, bytes.
    pub known_bytes: u64,
    /// Objects without a size.
    pub unknown_sizes: u64,
    /// Measured computation latency.
    pub computation_ms: Option<u32>,
    /// Where it came from.
    pub source: String,
    /// When it was stored.
    pub updated_unix_s: u64,
    /// Hint requests counted for it, all time.
    pub queries: u64,
}

/// Figures of [`Store::stats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreStats {
    /// Pages.
    pub pages: u64,
    /// Objects.
    pub objects: u64,
    /// Origins with an RTT.
    pub origins: u64,
    /// Latency samples kept.
    pub latency_samples: u64,
    /// Hint requests counted, all time.
    pub queries: u64,
    /// Schema version.
    pub schema_version: u32,
    /// Bytes of the database file plus its WAL.
    pub file_bytes: u64,
}

/// The store (see the module docs).
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

fn i64_of(v: u64, url: &str, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::BadPage {
        url: url.to_string(),
        what: format!("{what} {v} is too large to store"),
    })
}

impl Store {
    /// Opens the store at `path`, creating the file if missing (not its
    /// directory), and migrates it to [`SCHEMA_VERSION`]. The version is read
    /// before anything is written, so a file that is not SQLite, or that a
    /// newer mewa wrote, is refused and left as it was. Then: WAL journal
    /// (readers do not block the writer, a crash leaves the last commit),
    /// `synchronous=NORMAL` (durable against a process crash, may lose the
    /// last commits on power loss, and saves an fsync per commit),
    /// `foreign_keys=ON` (objects go with their page) and a busy timeout.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let sq = |error| StoreError::Sqlite {
            path: path.to_path_buf(),
            error,
        };
        let conn = Connection::open(path).map_err(sq)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sq)?;
        // Reading the version first also tells a non-database file apart
        // before anything is written to it.
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sq)?;
        let found = u32::try_from(found).map_err(|_| StoreError::BadValue {
            path: path.to_path_buf(),
            what: format!("schema version {found} was not written by mewa"),
        })?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::Newer {
                path: path.to_path_buf(),
                found,
            });
        }
        set_wal(&conn, path)?;
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(sq)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        for (v, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            // IMMEDIATE takes the write lock before the version is read
            // again, so two processes opening a fresh file at once cannot
            // both run the same migration (the second sees it done).
            let tx = store
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sq)?;
            let now: u32 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(sq)?;
            if now as usize > v {
                continue;
            }
            tx.execute_batch(sql).map_err(sq)?;
            tx.execute_batch(&format!("PRAGMA user_version = {}", v + 1))
                .map_err(sq)?;
            tx.commit().map_err(sq)?;
        }
        Ok(store)
    }

    fn sq(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |error| StoreError::Sqlite {
            path: self.path.clone(),
            error,
        }
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's schema version.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(self.sq())
    }

    /// Stores one page and its objects (replacing what was stored for the
    /// URL), atomically.
    pub fn put_page(
        &mut self,
        page: &PageMeta,
        source: &str,
        updated_unix_s: u64,
    ) -> Result<(), StoreError> {
        self.put_pages(std::slice::from_ref(page), source, updated_unix_s)
            .map(|_| ())
    }

    /// Stores many pages in one transaction: all of them or none (a bulk
    /// import must not leave half a file's pages behind). A page is refused,
    /// and with it the whole batch, when its URL has no host, a parent index
    /// points outside its objects, or a size or time does not fit SQLite's
    /// signed 64-bit integers. The same URL twice in one batch is allowed:
    /// the later page wins, as if the pages had been put one by one.
    /// Returns the number of pages written.
    pub fn put_pages(
        &mut self,
        pages: &[PageMeta],
        source: &str,
        updated_unix_s: u64,
    ) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let sq = |error| StoreError::Sqlite {
            path: path.clone(),
            error,
        };
        let tx = self.conn.transaction().map_err(sq)?;
        for p in pages {
            put_one(&tx, p, source, updated_unix_s).map_err(|e| match e {
                PutError::Sqlite(error) => sq(error),
                PutError::Store(e) => e,
            })?;
        }
        tx.commit().map_err(sq)?;
        Ok(pages.len())
    }

    /// The page stored for `url` (fragment ignored).
    pub fn page(&self, url: &str) -> Result<Option<StoredPage>, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT id, url, computation_ms, source, updated FROM pages WHERE url = ?1",
                [strip_fragment(url)],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                },
            )
            .optional()
            .map_err(self.sq())?;
        row.map(|r| self.load(r)).transpose()
    }

    /// The page whose URL hashes to `hash` and whose document is on `host`
    /// (the TXT fallback's question). Two URLs of one host with the same
    /// 32-bit hash are possible; then the first by URL answers, so the
    /// answer is at least stable.
    pub fn page_by_hash(&self, host: &str, hash: u32) -> Result<Option<StoredPage>, StoreError> {
        let url: Option<String> = self
            .conn
            .query_row(
                "SELECT url FROM pages WHERE host = ?1 AND url_hash = ?2 ORDER BY url LIMIT 1",
                params![host.to_ascii_lowercase(), i64::from(hash)],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.sq())?;
        match url {
            Some(u) => self.page(&u),
            None => Ok(None),
        }
    }

    fn load(
        &self,
        (id, url, computation_ms, source, updated): (i64, String, Option<i64>, String, i64),
    ) -> Result<StoredPage, StoreError> {
        let bad = |what: String| StoreError::BadRow {
            path: self.path.clone(),
            url: url.clone(),
            what,
        };
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT idx, url, host, size, content_type, last_modified, etag, discovery, parent \
                 FROM objects WHERE page_id = ?1 ORDER BY idx",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, Option<i64>>(8)?,
                ))
            })
            .map_err(self.sq())?;
        let mut objects = Vec::new();
        for row in rows {
            let (idx, ourl, host, size, content_type, last_modified, etag, disc, parent) =
                row.map_err(self.sq())?;
            if usize::try_from(idx).ok() != Some(objects.len()) {
                return Err(bad(format!("object index {idx} out of sequence")));
            }
            let size = size
                .map(u64::try_from)
                .transpose()
                .map_err(|_| bad(format!("negative size for object {idx}")))?;
            let discovery = u8::try_from(disc)
                .ok()
                .filter(|&d| d < 4)
                .map(Discovery::from_code)
                .ok_or_else(|| bad(format!("unknown discovery code {disc}")))?;
            let parent = parent
                .map(usize::try_from)
                .transpose()
                .map_err(|_| bad(format!("negative parent for object {idx}")))?;
            objects.push(ObjectMeta {
                url: ourl,
                host,
                size,
                content_type,
                last_modified,
                etag,
                discovery,
                parent,
                recorded: Default::default(),
            });
        }
        if objects
            .iter()
            .any(|o| o.parent.is_some_and(|p| p >= objects.len()))
        {
            return Err(bad("a parent index points past the objects".into()));
        }
        let computation_ms = computation_ms
            .map(u32::try_from)
            .transpose()
            .map_err(|_| bad("computation_ms out of range".into()))?;
        let updated_unix_s =
            u64::try_from(updated).map_err(|_| bad("negative update time".into()))?;
        Ok(StoredPage {
            meta: PageMeta {
                url: url.clone(),
                objects,
                computation_ms,
            },
            source,
            updated_unix_s,
        })
    }

    /// Every page, with its figures, by URL.
    pub fn pages(&self) -> Result<Vec<PageSummary>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT p.url, \
                   (SELECT count(*) FROM objects o WHERE o.page_id = p.id), \
                   (SELECT coalesce(sum(size), 0) FROM objects o WHERE o.page_id = p.id), \
                   (SELECT count(*) FROM objects o WHERE o.page_id = p.id AND o.size IS NULL), \
                   p.computation_ms, p.source, p.updated, \
                   (SELECT coalesce(sum(count), 0) FROM queries q WHERE q.url = p.url) \
                 FROM pages p ORDER BY p.url",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    [r.get::<_, i64>(1)?, r.get(2)?, r.get(3)?],
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .map_err(self.sq())?;
        let mut out = Vec::new();
        for row in rows {
            let (url, [objects, known_bytes, unknown_sizes], computation_ms, source, updated, q) =
                row.map_err(self.sq())?;
            let bad = |what: &str, v: i64| StoreError::BadRow {
                path: self.path.clone(),
                url: url.clone(),
                what: format!("{what} {v} out of range"),
            };
            let u = |what: &str, v: i64| u64::try_from(v).map_err(|_| bad(what, v));
            out.push(PageSummary {
                objects: u("object count", objects)?,
                known_bytes: u("size sum (a negative size?)", known_bytes)?,
                unknown_sizes: u("unknown-size count", unknown_sizes)?,
                computation_ms: computation_ms
                    .map(|v| u32::try_from(v).map_err(|_| bad("computation_ms", v)))
                    .transpose()?,
                updated_unix_s: u("update time", updated)?,
                queries: u("query count", q)?,
                url,
                source,
            });
        }
        Ok(out)
    }

    /// Removes a page; whether it was there.
    pub fn delete_page(&mut self, url: &str) -> Result<bool, StoreError> {
        let n = self
            .conn
            .execute("DELETE FROM pages WHERE url = ?1", [strip_fragment(url)])
            .map_err(self.sq())?;
        Ok(n > 0)
    }

    /// Adds hint-request counts (page URL, count) to the minute of
    /// `at_unix_s`, in one transaction. The DNS server keeps counts in
    /// memory and flushes them in batches, so a busy edge does not pay one
    /// write per query. Counts are kept for URLs without a stored page too
    /// (what clients ask for that the edge does not know yet).
    pub fn add_queries(
        &mut self,
        counts: &[(String, u64)],
        at_unix_s: u64,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sq = |error| StoreError::Sqlite {
            path: path.clone(),
            error,
        };
        let minute = self.to_i64(at_unix_s / 60, "query minute")?;
        let counts = counts
            .iter()
            .map(|(url, n)| Ok((url, self.to_i64(*n, "query count")?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let tx = self.conn.transaction().map_err(sq)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO queries (url, minute, count) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (url, minute) DO UPDATE SET count = count + excluded.count",
                )
                .map_err(sq)?;
            for (url, n) in counts {
                stmt.execute(params![url, minute, n]).map_err(sq)?;
            }
        }
        tx.commit().map_err(sq)
    }

    /// Deletes the counts of minutes wholly before `before_unix_s`; the
    /// number of rows deleted.
    pub fn prune_queries(&mut self, before_unix_s: u64) -> Result<usize, StoreError> {
        let minute = self.to_i64(before_unix_s / 60, "prune minute")?;
        self.conn
            .execute("DELETE FROM queries WHERE minute < ?1", params![minute])
            .map_err(self.sq())
    }

    /// The `k` most requested pages since `since_unix_s` (most first, ties
    /// by URL). Counts are kept per minute, so the window starts at the
    /// beginning of the minute containing `since_unix_s`.
    pub fn top_pages(&self, since_unix_s: u64, k: usize) -> Result<Vec<(String, u64)>, StoreError> {
        let since = self.to_i64(since_unix_s / 60, "window start")?;
        let k = i64::try_from(k).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT url, sum(count) AS n FROM queries WHERE minute >= ?1 \
                 GROUP BY url ORDER BY n DESC, url LIMIT ?2",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map(params![since, k], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(self.sq())?;
        let mut out = Vec::new();
        for row in rows {
            let (url, n) = row.map_err(self.sq())?;
            let n = u64::try_from(n)
                .map_err(|_| self.bad_value(format!("query count {n} of {url} is negative")))?;
            out.push((url, n));
        }
        Ok(out)
    }

    /// Records a raw latency sample; the oldest beyond [`SAMPLES_KEPT`] per
    /// host are dropped in the same transaction, so the table stays bounded
    /// however long the monitor runs.
    pub fn add_latency_sample(
        &mut self,
        host: &str,
        rtt_us: u32,
        at_unix_s: u64,
    ) -> Result<(), StoreError> {
        let at = self.to_i64(at_unix_s, "sample time")?;
        let path = self.path.clone();
        let sq = |error| StoreError::Sqlite {
            path: path.clone(),
            error,
        };
        let tx = self.conn.transaction().map_err(sq)?;
        tx.execute(
            "INSERT INTO latency_samples (host, at, rtt_us) VALUES (?1, ?2, ?3)",
            params![host, at, i64::from(rtt_us)],
        )
        .map_err(sq)?;
        tx.execute(
            "DELETE FROM latency_samples WHERE host = ?1 AND rowid NOT IN \
             (SELECT rowid FROM latency_samples WHERE host = ?1 ORDER BY at DESC, rowid DESC LIMIT ?2)",
            params![host, SAMPLES_KEPT as i64],
        )
        .map_err(sq)?;
        tx.commit().map_err(sq)
    }

    /// The newest raw samples of a host, (at, rtt_us), newest first.
    pub fn latency_samples(&self, host: &str, limit: usize) -> Result<Vec<(u64, u32)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT at, rtt_us FROM latency_samples WHERE host = ?1 \
                 ORDER BY at DESC, rowid DESC LIMIT ?2",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map(
                params![host, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )
            .map_err(self.sq())?;
        let mut out = Vec::new();
        for row in rows {
            let (at, rtt) = row.map_err(self.sq())?;
            match (u64::try_from(at), u32::try_from(rtt)) {
                (Ok(at), Ok(rtt)) => out.push((at, rtt)),
                _ => {
                    return Err(self.bad_value(format!(
                        "latency sample of {host} (at {at}, rtt_us {rtt}) out of range"
                    )))
                }
            }
        }
        Ok(out)
    }

    /// Sets (inserts or replaces) the smoothed RTT of an origin; the monitor
    /// computes the smoothing, the store only keeps the latest value.
    pub fn set_origin_rtt(&mut self, rtt: &OriginRtt) -> Result<(), StoreError> {
        let at = self.to_i64(rtt.measured_at_unix_s, "measurement time")?;
        self.conn
            .execute(
                "INSERT INTO origins (host, rtt_us, measured_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (host) DO UPDATE SET rtt_us = excluded.rtt_us, measured_at = excluded.measured_at",
                params![rtt.host, i64::from(rtt.rtt_us), at],
            )
            .map(|_| ())
            .map_err(self.sq())
    }

    /// The smoothed RTT of one origin.
    pub fn origin_rtt(&self, host: &str) -> Result<Option<OriginRtt>, StoreError> {
        self.conn
            .query_row(
                "SELECT host, rtt_us, measured_at FROM origins WHERE host = ?1",
                [host],
                origin_row,
            )
            .optional()
            .map_err(self.sq())?
            .map(|raw| self.origin_of(raw))
            .transpose()
    }

    /// Every origin's smoothed RTT, by host.
    pub fn origins(&self) -> Result<Vec<OriginRtt>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT host, rtt_us, measured_at FROM origins ORDER BY host")
            .map_err(self.sq())?;
        let rows = stmt.query_map([], origin_row).map_err(self.sq())?;
        let mut out = Vec::new();
        for row in rows {
            out.push(self.origin_of(row.map_err(self.sq())?)?);
        }
        Ok(out)
    }

    fn origin_of(&self, (host, rtt, at): (String, i64, i64)) -> Result<OriginRtt, StoreError> {
        match (u32::try_from(rtt), u64::try_from(at)) {
            (Ok(rtt_us), Ok(measured_at_unix_s)) => Ok(OriginRtt {
                host,
                rtt_us,
                measured_at_unix_s,
            }),
            _ => Err(self.bad_value(format!(
                "origin {host}: rtt_us {rtt} or measured_at {at} out of range"
            ))),
        }
    }

    fn bad_value(&self, what: String) -> StoreError {
        StoreError::BadValue {
            path: self.path.clone(),
            what,
        }
    }

    /// A value to be written, as SQLite's signed integer; too large is an
    /// error rather than a silent wrap or clamp.
    fn to_i64(&self, v: u64, what: &str) -> Result<i64, StoreError> {
        i64::try_from(v).map_err(|_| self.bad_value(format!("{what} {v} is too large to store")))
    }

    /// Counts and sizes.
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let count = |sql: &str| -> Result<u64, StoreError> {
            let v = self
                .conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map_err(self.sq())?;
            u64::try_from(v).map_err(|_| self.bad_value(format!("negative total {v} from `{sql}`")))
        };
        let file_bytes = [self.path.clone(), wal_path(&self.path)]
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        Ok(StoreStats {
            pages: count("SELECT count(*) FROM pages")?,
            objects: count("SELECT count(*) FROM objects")?,
            origins: count("SELECT count(*) FROM origins")?,
            latency_samples: count("SELECT count(*) FROM latency_samples")?,
            queries: count("SELECT coalesce(sum(count), 0) FROM queries")?,
            schema_version: self.schema_version()?,
            file_bytes,
        })
    }

    /// SQLite's own checks: `integrity_check` and `foreign_key_check`.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(self.sq())?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(self.sq())?
            .collect::<Result<_, _>>()
            .map_err(self.sq())?;
        let mut problems: Vec<String> = lines.into_iter().filter(|l| l != "ok").collect();
        let mut fk = self
            .conn
            .prepare("PRAGMA foreign_key_check")
            .map_err(self.sq())?;
        let orphans = fk
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(self.sq())?
            .count();
        if orphans > 0 {
            problems.push(format!("{orphans} row(s) referencing missing pages"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Damaged {
                path: self.path.clone(),
                problems: problems.join("; "),
            })
        }
    }
}

/// Switches the file to WAL. The switch from a rollback journal needs an
/// exclusive lock and SQLite answers "database is locked" at once, without
/// its busy handler, when another connection is opening the same fresh file;
/// so it is retried here for up to [`BUSY_TIMEOUT`]. A file system that
/// cannot do WAL (no shared memory) is an error: without WAL the crash
/// guarantee in the module docs would not hold.
fn set_wal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(StoreError::BadValue {
                    path: path.to_path_buf(),
                    what: format!(
                        "journal mode stays {mode:?}; the store needs WAL (is the file on a network or in-memory file system?)"
                    ),
                })
            }
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(error) => {
                return Err(StoreError::Sqlite {
                    path: path.to_path_buf(),
                    error,
                })
            }
        }
    }
}

fn wal_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

fn origin_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, i64, i64)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

enum PutError {
    Sqlite(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for PutError {
    fn from(e: rusqlite::Error) -> Self {
        PutError::Sqlite(e)
    }
}

fn put_one(tx: &Transaction<'_>, p: &PageMeta, source: &str, updated: u64) -> Result<(), PutError> {
    let url = strip_fragment(&p.url);
    let bad = |what: String| {
        PutError::Store(StoreError::BadPage {
            url: url.to_string(),
            what,
        })
    };
    let host = host_of(url).ok_or_else(|| bad("not an absolute http(s) URL".into()))?;
    if let Some((i, _)) = p
        .objects
        .iter()
        .enumerate()
        .find(|(_, o)| o.parent.is_some_and(|q| q >= p.objects.len()))
    {
        return Err(bad(format!("object {i}: parent index past the objects")));
    }
    let updated = i64_of(updated, url, "update time").map_err(PutError::Store)?;
    tx.execute("DELETE FROM pages WHERE url = ?1", [url])?;
    tx.execute(
        "INSERT INTO pages (url, url_hash, host, computation_ms, source, updated) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            url,
            i64::from(url_hash(url)),
            host,
            p.computation_ms.map(i64::from),
            source,
            updated
        ],
    )?;
    let id = tx.last_insert_rowid();
    let mut stmt = tx.prepare_cached(
        "INSERT INTO objects (page_id, idx, url, host, size, content_type, last_modified, etag, discovery, parent) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (i, o) in p.objects.iter().enumerate() {
        let size = o
            .size
            .map(|s| i64_of(s, url, "size"))
            .transpose()
            .map_err(PutError::Store)?;
        stmt.execute(params![
            id,
            i as i64,
            o.url,
            o.host,
            size,
            o.content_type,
            o.last_modified,
            o.etag,
            i64::from(o.discovery.code()),
            o.parent.map(|q| q as i64),
        ])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use mewa_testkit::TempDir;

    fn page(url: &str, n: usize) -> PageMeta {
        let host = host_of(url).unwrap();
        PageMeta {
            url: url.to_string(),
            objects: (0..n)
                .map(|i| ObjectMeta {
                    url: format!("{url}o{i}"),
                    host: if i % 2 == 0 {
                        host.clone()
                    } else {
                        "cdn.example".into()
                    },
                    size: if i % 5 == 4 {
                        None
                    } else {
                        Some(1000 + i as u64)
                    },
                    content_type: (i % 3 == 0).then(|| "image/png".to_string()),
                    last_modified: (i % 4 == 0).then(|| "Mon, 01 Jan 2024 00:00:00 GMT".into()),
                    etag: (i % 2 == 1).then(|| format!("\"e{i}\"")),
                    discovery: Discovery::ALL[i % 4],
                    parent: (i > 0).then_some(i / 2),
                    recorded: Default::default(),
                })
                .collect(),
            computation_ms: Some(77),
        }
    }

    #[test]
    fn pages_round_trip_and_replace() {
        let d = TempDir::new("rt");
        let mut s = Store::open(&d.join("s.db")).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let p = page("http://www.a.example/", 11);
        s.put_page(&p, "test", 5).unwrap();
        let got = s.page("http://www.a.example/#x").unwrap().unwrap();
        assert_eq!(got.meta, p);
        assert_eq!((got.source.as_str(), got.updated_unix_s), ("test", 5));
        let h = url_hash("http://www.a.example/");
        assert_eq!(s.page_by_hash("www.a.example", h).unwrap().unwrap().meta, p);
        assert!(s.page_by_hash("other.example", h).unwrap().is_none());
        s.put_page(&page("http://www.a.example/", 3), "again", 6)
            .unwrap();
        assert_eq!(
            s.page("http://www.a.example/")
                .unwrap()
                .unwrap()
                .meta
                .objects
                .len(),
            3
        );
        assert_eq!(s.stats().unwrap().objects, 3);
        let sum = &s.pages().unwrap()[0];
        assert_eq!(
            (sum.objects, sum.known_bytes, sum.unknown_sizes),
            (3, 3003, 0)
        );
        assert!(s.delete_page("http://www.a.example/").unwrap());
        assert_eq!(s.stats().unwrap().objects, 0, "objects go with their page");
        s.integrity_check().unwrap();
    }

    #[test]
    fn a_batch_is_all_or_nothing() {
        let d = TempDir::new("batch");
        let mut s = Store::open(&d.join("s.db")).unwrap();
        let mut bad = page("http://c.example/", 4);
        bad.objects[3].parent = Some(99);
        let batch = [
            page("http://a.example/", 4),
            page("http://b.example/", 4),
            bad,
        ];
        let e = s.put_pages(&batch, "t", 1).unwrap_err();
        assert!(e.to_string().contains("http://c.example/"), "{e}");
        assert!(s.pages().unwrap().is_empty());
        assert_eq!(s.stats().unwrap().objects, 0);
        // A batch that fails half-way leaves the earlier state as it was.
        s.put_page(&page("http://a.example/", 2), "before", 1)
            .unwrap();
        let no_host = PageMeta {
            url: "data:,".into(),
            objects: vec![],
            computation_ms: None,
        };
        let batch = [
            page("http://a.example/", 7),
            page("http://b.example/", 4),
            no_host,
        ];
        assert!(s.put_pages(&batch, "t", 2).is_err());
        let a = s.page("http://a.example/").unwrap().unwrap();
        assert_eq!((a.meta.objects.len(), a.source.as_str()), (2, "before"));
        assert!(s.page("http://b.example/").unwrap().is_none());
        // The same URL twice in one batch: the later one wins.
        let batch = [page("http://e.example/", 5), page("http://e.example/", 3)];
        assert_eq!(s.put_pages(&batch, "t", 3).unwrap(), 2);
        let e = s.page("http://e.example/").unwrap().unwrap();
        assert_eq!(e.meta, batch[1]);
        let mut huge = page("http://d.example/", 2);
        huge.objects[0].size = Some(u64::MAX);
        assert!(s.put_page(&huge, "t", 1).is_err());
    }

    #[test]
    fn old_query_counts_are_pruned() {
        let d = TempDir::new("prune");
        let mut s = Store::open(&d.join("s.db")).unwrap();
        s.add_queries(&[("old".into(), 3)], 600).unwrap();
        s.add_queries(&[("new".into(), 2)], 6000).unwrap();
        assert_eq!(s.prune_queries(6000 - 60).unwrap(), 1);
        assert_eq!(s.top_pages(0, 10).unwrap(), vec![("new".to_string(), 2)]);
        assert_eq!(s.prune_queries(6000 - 60).unwrap(), 0);
    }

    #[test]
    fn queries_latency_and_origins() {
        let d = TempDir::new("q");
        let mut s = Store::open(&d.join("s.db")).unwrap();
        s.add_queries(&[("u1".into(), 3), ("u2".into(), 5)], 600)
            .unwrap();
        s.add_queries(&[("u1".into(), 4)], 630).unwrap();
        s.add_queries(&[("u3".into(), 1)], 6000).unwrap();
        assert_eq!(
            s.top_pages(0, 10).unwrap(),
            vec![("u1".into(), 7), ("u2".into(), 5), ("u3".into(), 1)]
        );
        assert_eq!(s.top_pages(6000, 10).unwrap(), vec![("u3".into(), 1)]);
        assert_eq!(
            s.top_pages(6059, 10).unwrap(),
            vec![("u3".into(), 1)],
            "the window starts at its minute"
        );
        assert!(s.top_pages(6060, 10).unwrap().is_empty());
        assert_eq!(s.top_pages(0, 1).unwrap(), vec![("u1".into(), 7)]);
        assert!(s.top_pages(0, 0).unwrap().is_empty());
        // Ties by URL.
        s.add_queries(&[("u0".into(), 1), ("u4".into(), 1)], 6000)
            .unwrap();
        assert_eq!(
            s.top_pages(6000, 2).unwrap(),
            vec![("u0".into(), 1), ("u3".into(), 1)]
        );
        assert_eq!(s.stats().unwrap().queries, 15);
        for i in 0..(SAMPLES_KEPT as u64 + 20) {
            s.add_latency_sample("o.example", 1000 + i as u32, i)
                .unwrap();
        }
        let samples = s.latency_samples("o.example", 5000).unwrap();
        assert_eq!(samples.len(), SAMPLES_KEPT);
        assert_eq!(samples[0].0, SAMPLES_KEPT as u64 + 19);
        assert_eq!(samples[SAMPLES_KEPT - 1].0, 20, "the oldest went");
        assert_eq!(s.latency_samples("o.example", 3).unwrap().len(), 3);
        s.add_latency_sample("p.example", 5, 1).unwrap();
        assert_eq!(s.latency_samples("p.example", 10).unwrap(), vec![(1, 5)]);
        assert_eq!(s.stats().unwrap().latency_samples, SAMPLES_KEPT as u64 + 1);
        let o = OriginRtt {
            host: "o.example".into(),
            rtt_us: 20_000,
            measured_at_unix_s: 9,
        };
        s.set_origin_rtt(&o).unwrap();
        s.set_origin_rtt(&OriginRtt {
            rtt_us: 21_000,
            ..o.clone()
        })
        .unwrap();
        assert_eq!(s.origins().unwrap().len(), 1);
        assert_eq!(s.origin_rtt("o.example").unwrap().unwrap().rtt_us, 21_000);
        assert!(s.origin_rtt("nope.example").unwrap().is_none());
        let far = OriginRtt {
            measured_at_unix_s: u64::MAX,
            ..o.clone()
        };
        assert!(s.set_origin_rtt(&far).is_err(), "too large, not clamped");
    }

    #[test]
    fn reopen_newer_schema_and_garbage() {
        let d = TempDir::new("open");
        let f = d.join("s.db");
        {
            let mut s = Store::open(&f).unwrap();
            s.put_page(&page("http://a.example/", 2), "t", 1).unwrap();
        }
        assert_eq!(Store::open(&f).unwrap().stats().unwrap().pages, 1);
        {
            let c = Connection::open(&f).unwrap();
            c.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
                .unwrap();
        }
        let before = std::fs::read(&f).unwrap();
        let e = Store::open(&f).unwrap_err().to_string();
        assert!(e.contains("newer") && e.contains("upgrade"), "{e}");
        assert!(e.contains("s.db"), "names the file: {e}");
        assert_eq!(std::fs::read(&f).unwrap(), before, "left untouched");
        {
            let c = Connection::open(&f).unwrap();
            c.execute_batch("PRAGMA user_version = -1").unwrap();
        }
        let e = Store::open(&f).unwrap_err().to_string();
        assert!(e.contains("schema version -1"), "{e}");
        let junk = d.join("junk.db");
        std::fs::write(&junk, vec![0x5a; 8192]).unwrap();
        let e = Store::open(&junk).unwrap_err().to_string();
        assert!(e.contains("junk.db") && e.contains("not a database"), "{e}");
        assert_eq!(
            std::fs::read(&junk).unwrap(),
            vec![0x5a; 8192],
            "left untouched"
        );
    }

    #[test]
    fn concurrent_first_opens_migrate_once() {
        let d = TempDir::new("race");
        let f = d.join("s.db");
        let opened: Vec<Result<u32, String>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    sc.spawn(|| {
                        Store::open(&f)
                            .and_then(|s| s.schema_version())
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            opened.iter().all(|r| r == &Ok(SCHEMA_VERSION)),
            "{opened:?}"
        );
    }

    #[test]
    fn hand_edited_rows_are_errors_not_panics() {
        let d = TempDir::new("bad");
        let f = d.join("s.db");
        let mut s = Store::open(&f).unwrap();
        s.put_page(&page("http://a.example/", 3), "t", 1).unwrap();
        s.conn
            .execute("UPDATE objects SET discovery = 9 WHERE idx = 1", [])
            .unwrap();
        let e = s.page("http://a.example/").unwrap_err().to_string();
        assert!(
            e.contains("discovery") && e.contains("http://a.example/"),
            "{e}"
        );
        s.conn
            .execute(
                "UPDATE objects SET discovery = 1, size = -5 WHERE idx = 1",
                [],
            )
            .unwrap();
        let e = s.page("http://a.example/").unwrap_err().to_string();
        assert!(
            e.contains("negative size") && e.contains("http://a.example/"),
            "{e}"
        );
        s.conn
            .execute("UPDATE objects SET size = -5000 WHERE idx = 1", [])
            .unwrap();
        let e = s.pages().unwrap_err().to_string();
        assert!(e.contains("http://a.example/"), "{e}");
        s.conn
            .execute("UPDATE objects SET size = 1, parent = 7 WHERE idx = 1", [])
            .unwrap();
        let e = s.page("http://a.example/").unwrap_err().to_string();
        assert!(e.contains("parent"), "{e}");
        s.set_origin_rtt(&OriginRtt {
            host: "o.example".into(),
            rtt_us: 1,
            measured_at_unix_s: 1,
        })
        .unwrap();
        s.conn
            .execute("UPDATE origins SET rtt_us = -1", [])
            .unwrap();
        let e = s.origins().unwrap_err().to_string();
        assert!(e.contains("o.example") && e.contains("s.db"), "{e}");
        assert!(s.origin_rtt("o.example").is_err());
    }
}
