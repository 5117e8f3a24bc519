//! Loading: one cold page load, or a browsing session whose loads share
//! connections; the driver that discovers objects in the browser's order
//! and records them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mewa_corpus::{Discovery, Kind, Object, Page};
use tokio::task::JoinSet;

use crate::conn::ConnectError;
use crate::options::{chromium_priorities, LoadOptions};
use crate::pool;
use crate::record::{LoadRecord, ObjectTiming};

/// Why a load could not start at all (problems during the load are kept in
/// the record instead).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The page has no root document; validate the corpus first.
    #[error("page `{0}` has no root document")]
    NoRoot(String),
    /// TLS or HTTP/3 was asked for without the CA certificate.
    #[error("TLS and HTTP/3 need the CA certificate of the origin (the test CA's ca.pem)")]
    NoCa,
    /// The TLS client or QUIC endpoint could not be set up.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Zero connections were asked for.
    #[error("connections must be at least 1")]
    NoConnections,
}

/// What the driver waits for.
enum Step {
    /// An object finished (successfully or not).
    Fetched(Box<ObjectTiming>),
    /// A script's computation ended; its script-discovered children may go.
    Ran(u32),
}

/// Loads `page` and records it. Runs on the current tokio runtime; the
/// sockets it opens belong to the calling thread's network namespace (the
/// lab runs it on a thread inside the client's namespace).
///
/// Every load starts cold: its connections close when it ends. A
/// [`Session`] keeps them for the next load.
pub async fn load(page: &Page, opts: &LoadOptions) -> Result<LoadRecord, LoadError> {
    // A page without a root is refused before the options are looked at.
    page.root()
        .ok_or_else(|| LoadError::NoRoot(page.name.clone()))?;
    Session::new(opts.clone())?.run(page, true).await
}

/// A browser's connections over several page loads, one after another:
/// what one load opens, the next reuses — HTTP/1.1 keep-alive connections
/// idle per host (up to [`LoadOptions::connections`]), the HTTP/2 or
/// HTTP/3 connections of each origin group. Seed 003 studies what TCP
/// does to such a connection after the think time between page views
/// (slow start after idle, timeouts after the radio slept); a cold
/// [`load`] cannot show it.
///
/// A pooled connection found closed (the server's idle timeout, a restart)
/// is replaced before use; a request that fails before its response on a
/// connection an earlier load opened is sent again once on a fresh
/// connection, as browsers do, so the object does not fail.
///
/// Each load's record lists the connections it used: those it opened and
/// those it reused ([`crate::record::ConnectionTiming::reused`]); the ones
/// the session keeps open have no `close_us`. Loads on one session take
/// turns (a second one waits for the first to end), as pages in one tab.
/// Dropping the session, or [`Session::close`], closes every connection.
pub struct Session {
    pool: Arc<pool::Pool>,
    turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("opts", self.pool.opts())
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.pool.close();
    }
}

impl Session {
    /// A session whose loads follow `opts`; sets up the TLS client and
    /// QUIC endpoint once. Refuses zero connections, and TLS or HTTP/3
    /// without a CA, before any I/O.
    pub fn new(opts: LoadOptions) -> Result<Session, LoadError> {
        if opts.connections == 0 {
            return Err(LoadError::NoConnections);
        }
        let scheme = if opts.uses_tls() { "https" } else { "http" };
        Ok(Session {
            pool: Arc::new(pool::Pool::new(opts, scheme)?),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// The options every load of the session follows.
    pub fn options(&self) -> &LoadOptions {
        self.pool.opts()
    }

    /// Loads `page` as [`load`] does (same discovery, times from this
    /// load's start) over the session's connections, and leaves them open
    /// for the next load. Runs on the current tokio runtime, which must be
    /// the one of the session's earlier loads (their connections' tasks
    /// run there).
    pub async fn load(&self, page: &Page) -> Result<LoadRecord, LoadError> {
        self.run(page, false).await
    }

    /// Closes every connection of the session.
    pub fn close(self) {
        self.pool.close();
    }

    async fn run(&self, page: &Page, closing: bool) -> Result<LoadRecord, LoadError> {
        let _turn = self.turn.lock().await;
        load_on(&self.pool, page, closing).await
    }
}

/// One load over `pool`'s connections; `closing`: the pool closes with the
/// load, so every connection is recorded closed at the load's end (a cold
/// [`load`]).
async fn load_on(
    pool: &Arc<pool::Pool>,
    page: &Page,
    closing: bool,
) -> Result<LoadRecord, LoadError> {
    let root = page
        .root()
        .ok_or_else(|| LoadError::NoRoot(page.name.clone()))?
        .clone();
    let opts = pool.opts();
    let scheme = pool.scheme();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<(u32, u64)>();
    let body_scheme = if scheme == "https" {
        mewa_corpus::Scheme::Https
    } else {
        mewa_corpus::Scheme::Http
    };
    // Where each HTML body's references end, for discovery as it streams.
    let ends: HashMap<u32, Vec<(u32, u64)>> = if opts.streaming {
        page.objects
            .iter()
            .filter(|o| o.kind() == Kind::Html)
            .map(|o| {
                let e = mewa_corpus::reference_ends(page, o.id, body_scheme).unwrap_or_default();
                (o.id, e)
            })
            .collect()
    } else {
        HashMap::new()
    };
    let mut revealed: HashMap<u32, usize> = HashMap::new();
    let priority = if opts.priorities {
        chromium_priorities(page)
    } else {
        HashMap::new()
    };
    let shared = Arc::new(pool::Load::new(
        Arc::clone(pool),
        opts.streaming.then_some(progress_tx),
        priority,
    ));

    let mut record = LoadRecord {
        page: page.name.clone(),
        url: root.url(scheme),
        protocol: opts.protocol,
        tls: opts.uses_tls(),
        started_unix_ms,
        done_us: None,
        objects: Vec::new(),
        connections: Vec::new(),
        errors: Vec::new(),
    };

    if opts.preconnect {
        shared.preconnect(&root).await;
    }

    let mut tasks: JoinSet<Step> = JoinSet::new();
    // Objects requested and not yet finished, for the timeout report.
    let mut pending: HashMap<u32, (Object, u64)> = HashMap::new();
    let mut main_free_us = 0u64;
    let deadline = tokio::time::Instant::now() + opts.timeout;

    // Objects already requested (prefetched ones are not requested again
    // when their parent reveals them).
    let mut requested: HashSet<u32> = HashSet::new();
    let mut spawn_fetch =
        |tasks: &mut JoinSet<Step>, pending: &mut HashMap<u32, (Object, u64)>, object: Object| {
            if !requested.insert(object.id) {
                return;
            }
            let discovered = shared.now_us();
            pending.insert(object.id, (object.clone(), discovered));
            let s = Arc::clone(&shared);
            tasks.spawn(async move { Step::Fetched(Box::new(s.fetch(object, discovered).await)) });
        };
    spawn_fetch(&mut tasks, &mut pending, root);
    let by_url: HashMap<String, &Object> =
        if opts.prefetch.is_empty() && opts.prefetch_later.is_none() {
            HashMap::new()
        } else {
            page.objects.iter().map(|o| (o.url(scheme), o)).collect()
        };
    for url in &opts.prefetch {
        if let Some(&o) = by_url.get(url.as_str()) {
            spawn_fetch(&mut tasks, &mut pending, o.clone());
        }
    }
    let mut late_waiting = opts.prefetch_later.is_some();
    let late = {
        let rx = opts.prefetch_later.clone();
        async move {
            let mut rx = rx?;
            let v = rx.wait_for(Option::is_some).await.ok()?.clone();
            v
        }
    };
    tokio::pin!(late);

    loop {
        let next = tokio::select! {
            biased;
            Some((id, bytes)) = progress_rx.recv() => {
                // The document streams in: request what its bytes so far
                // reference.
                if let Some(list) = ends.get(&id) {
                    let at = revealed.entry(id).or_insert(0);
                    while let Some(&(child, end)) = list.get(*at) {
                        if end > bytes {
                            break;
                        }
                        *at += 1;
                        if let Some(c) = page.object(child) {
                            spawn_fetch(&mut tasks, &mut pending, c.clone());
                        }
                    }
                }
                continue;
            }
            urls = &mut late, if late_waiting => {
                late_waiting = false;
                for url in urls.iter().flat_map(|u| u.iter()) {
                    if let Some(&o) = by_url.get(url.as_str()) {
                        spawn_fetch(&mut tasks, &mut pending, o.clone());
                    }
                }
                continue;
            }
            next = tokio::time::timeout_at(deadline, tasks.join_next()) => next,
        };
        let step = match next {
            Err(_) => {
                record.errors.push(format!(
                    "timed out after {:.1} s with {} objects unfinished",
                    opts.timeout.as_secs_f64(),
                    pending.len()
                ));
                tasks.abort_all();
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                record.errors.push(format!("loader task failed: {e}"));
                continue;
            }
            Ok(Some(Ok(step))) => step,
        };
        match step {
            Step::Fetched(timing) => {
                pending.remove(&timing.id);
                let ok = timing.ok();
                let id = timing.id;
                record.objects.push(*timing);
                if !ok {
                    continue;
                }
                let Some(obj) = page.object(id) else { continue };
                for child in page.children(id, Discovery::Redirect) {
                    spawn_fetch(&mut tasks, &mut pending, child.clone());
                }
                if !mewa_corpus::page::carries_references(obj.status()) {
                    continue;
                }
                match obj.kind() {
                    kind @ (Kind::Html | Kind::Css) => {
                        let how = if kind == Kind::Html {
                            Discovery::Html
                        } else {
                            Discovery::Css
                        };
                        for child in page.children(id, how) {
                            spawn_fetch(&mut tasks, &mut pending, child.clone());
                        }
                    }
                    Kind::Script => {
                        // The main thread runs one script at a time.
                        let now = shared.now_us();
                        let start = main_free_us.max(now);
                        main_free_us = start + u64::from(obj.compute_ms) * 1000;
                        let wait = Duration::from_micros(main_free_us - now);
                        tasks.spawn(async move {
                            tokio::time::sleep(wait).await;
                            Step::Ran(id)
                        });
                    }
                    _ => {}
                }
            }
            Step::Ran(id) => {
                for child in page.children(id, Discovery::Script) {
                    spawn_fetch(&mut tasks, &mut pending, child.clone());
                }
            }
        }
    }

    let end = shared.now_us();
    for (_, (object, discovered)) in pending {
        let mut t = pool::unstarted(&object, scheme, discovered);
        t.error = Some("unfinished when the load gave up".into());
        record.objects.push(t);
    }
    if record.errors.is_empty() {
        record.done_us = record.objects.iter().filter_map(|o| o.end_us).max();
    }
    if closing {
        pool.close();
    }
    record.connections = shared.finish(closing.then_some(end));
    record
        .objects
        .sort_by_key(|o| (o.discovered_us, o.request_us, o.id));
    Ok(record)
}
