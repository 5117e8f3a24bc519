//! The prefetch: when the hint carries the page's object URLs, the session
//! requests them all as soon as the document's request is out (seed 000
//! §II: the client "sends requests to all embedded URLs on parallel
//! connections"), on its own connections for its host and hosts at the
//! same address, through the sessions of the page's other hosts for the
//! rest, and answers the browser from those responses.
//!
//! Apart from the opening and the forwarding because it is the one part
//! that acts on a hint's URL list, which is unauthenticated: which URLs it
//! follows ([`prefetch_host`]), how many hosts ([`MAX_PREFETCH_HOSTS`]),
//! and in what order are decided here; how fast is the page's budget
//! ([`super::prefetch_budget`]), what is kept is [`super::whole`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use mewa_hint::wire::Priority;
use mewa_model::sync::lock;

use super::document::redirects_elsewhere;
use super::prefetch_budget::{PagePrefetch, PrefetchBudget, LEAF_URGENCY};
use super::whole::{read_whole, Whole};
use super::Session;
use crate::advice::UrlList;
use crate::proxy::{path_reveals, prefetch_order, LookupLimit};
use crate::resolve::{resolve_address, Resolved};

/// Most other hosts one page's prefetch opens sessions to: a hint is
/// unauthenticated, and a hostile one must not make the proxy connect to
/// every host of a zone. Above the hosts of every shared recording (42):
/// at 32, ryanair.com's last ten hosts were left out, and they are its
/// redirect chain of tracking pixels (four hosts one after the other, each
/// a lookup and a handshake over the radio), which then ended its load.
pub const MAX_PREFETCH_HOSTS: usize = 64;

/// Opens or finds the session of `(scheme, host)`: what a session asks the
/// proxy for to prefetch objects on hosts at other addresses.
pub(in crate::proxy) struct Opener(pub(in crate::proxy) Box<OpenFn>);

/// What an [`Opener`] calls: scheme, host, and the edge's answer for the
/// host when the caller has it already (a second DNS exchange would cost
/// the prefetch another radio round trip).
pub(in crate::proxy) type OpenFn = dyn Fn(
        &'static str,
        String,
        Option<Resolved>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Arc<Session>>> + Send>>
    + Send
    + Sync;

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

/// A prefetch on its way or done, with the page whose budget it holds.
pub(super) type Prefetched = (Arc<PrefetchCell>, Arc<PagePrefetch>);

/// The response of a prefetched object, once whole (or why not).
type PrefetchCell = tokio::sync::OnceCell<Result<Arc<Whole>, String>>;

/// The URLs to prefetch and how to resolve their hosts.
#[derive(Debug)]
pub(super) struct PendingPrefetch {
    pub(super) urls: Urls,
    pub(super) edge: SocketAddr,
    pub(super) timeout: Duration,
    pub(super) lookups: LookupLimit,
}

/// The URL list: in hand, or on its way over TCP from the edge.
#[derive(Debug)]
pub(super) enum Urls {
    Ready(UrlList),
    /// The edge's TCP answer, and when it came (since the session's t0).
    Later(tokio::task::JoinHandle<(Result<UrlList, String>, Duration)>),
}

/// The host a listed URL may be prefetched from, lower-cased: only a URL
/// of the page's scheme on the origin's port (none written), without
/// userinfo, whose host is a name. A hint is unauthenticated: its list
/// must not send the proxy to another port, or, by an address literal, to
/// any address at all (names go through the edge like the browser's).
fn prefetch_host(url: &str, scheme: &str) -> Option<String> {
    let uri = http::Uri::try_from(url).ok()?;
    let auth = uri.authority()?;
    if uri.scheme_str() != Some(scheme) || auth.port().is_some() || auth.as_str().contains('@') {
        return None;
    }
    let host = auth.host();
    if host.starts_with('[') || host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

impl Session {
    /// Objects prefetched so far, and how many of them the browser asked
    /// for ([`ProxyConfig::prefetch`](crate::proxy::ProxyConfig::prefetch)).
    pub fn prefetch_counts(&self) -> (u64, u64) {
        (
            self.prefetch_started.load(Ordering::Relaxed),
            self.prefetch_taken.load(Ordering::Relaxed),
        )
    }

    /// The prefetch's in-flight budget of this session's page, bytes.
    pub fn prefetch_budget(&self) -> PrefetchBudget {
        self.page
            .report(self.waiting_for_document.load(Ordering::Relaxed))
    }

    /// Lets this session open other hosts' sessions for its prefetch.
    pub(in crate::proxy) fn set_opener(&self, opener: Arc<Opener>) {
        *lock(&self.opener) = Some(opener);
    }

    /// Starts the prefetch, once, when the document's request is out: at
    /// once with the URLs in hand, else when the edge's TCP answer brings
    /// them (if it does not, the browser's own requests go as usual).
    pub(super) fn kick_prefetch(self: &Arc<Self>) {
        let Some(p) = lock(&self.pending).take() else {
            return;
        };
        match p.urls {
            Urls::Ready(urls) => self.start_prefetch(urls, p.edge, p.timeout, p.lookups),
            Urls::Later(handle) => {
                let me = self.clone();
                tokio::spawn(async move {
                    let urls = match handle.await {
                        Ok((r, at)) => r.map(|u| (u, at)),
                        Err(e) => Err(format!("URL list task: {e}")),
                    };
                    match urls {
                        Ok((urls, at)) => {
                            lock(&me.timeline).urls = Some(at);
                            me.start_prefetch(urls, p.edge, p.timeout, p.lookups);
                        }
                        Err(why) => {
                            tracing::info!("proxy: {}: no URL list ({why})", me.page_url);
                            lock(&me.timeline).urls_error = Some(why);
                        }
                    }
                });
            }
        }
    }

    /// The prefetch of `urls`: every URL of this host (and of hosts the
    /// edge resolves to this session's address) is registered at once (so
    /// a browser request that comes first fetches it, once) and fetched on
    /// this session's connections; URLs of hosts at other addresses go to
    /// those hosts' sessions, which the proxy opens as the browser would
    /// ([`MAX_PREFETCH_HOSTS`] at most); without an opener they are left to
    /// the browser.
    fn start_prefetch(
        self: &Arc<Self>,
        list: UrlList,
        edge: SocketAddr,
        timeout: Duration,
        lookups: LookupLimit,
    ) {
        self.page.learn_priorities(list.priorities);
        let mut by_host: HashMap<String, Vec<String>> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        for u in list.urls {
            let Some(host) = prefetch_host(&u, self.scheme) else {
                continue;
            };
            if !by_host.contains_key(&host) {
                let others = order.iter().filter(|h| **h != self.host).count();
                if host != self.host && others >= MAX_PREFETCH_HOSTS {
                    continue;
                }
                order.push(host.clone());
            }
            by_host.entry(host).or_default().push(u);
        }
        let opener = lock(&self.opener).clone();
        for host in order {
            let Some(urls) = by_host.remove(&host) else {
                continue;
            };
            if host == self.host {
                self.prefetch_here(urls, &self.page);
                continue;
            }
            let me = self.clone();
            let opener = opener.clone();
            let lookups = lookups.clone();
            tokio::spawn(async move {
                let room = lookups.room().await;
                let resolved = resolve_address(edge, &host, timeout).await;
                drop(room);
                let same = matches!(
                    &resolved,
                    Ok(r) if r.addrs.first() == Some(&me.addr.ip())
                );
                if same {
                    me.prefetch_here(urls, &me.page);
                } else if let Some(open) = opener {
                    if let Some(there) = (open.0)(me.scheme, host, resolved.ok()).await {
                        let n = there.prefetch_here(urls, &me.page);
                        me.prefetch_started.fetch_add(n, Ordering::Relaxed);
                    }
                }
            });
        }
    }

    /// Registers and fetches `urls` on this session for the page whose
    /// prefetch is `page`, skipping those already registered; returns how
    /// many it started. They are asked most urgent first
    /// ([`PagePrefetch::priority_of`], the page's order within an urgency), as a
    /// browser's connection would serve them, within the page's budget,
    /// images after the more urgent objects ([`PagePrefetch`]).
    fn prefetch_here(self: &Arc<Self>, mut urls: Vec<String>, page: &Arc<PagePrefetch>) -> u64 {
        let urgency = |u: &str| page.priority_of(u).urgency;
        prefetch_order(&mut urls, |u| page.priority_of(u));
        let mut started = Vec::new();
        {
            let mut m = lock(&self.prefetched);
            for u in urls {
                if m.contains_key(&u) {
                    continue;
                }
                let c = Arc::new(PrefetchCell::new());
                m.insert(u.clone(), (c.clone(), page.clone()));
                started.push((u, c));
            }
        }
        let n = started.len() as u64;
        self.prefetch_started.fetch_add(n, Ordering::Relaxed);
        // Counted before any starts, so that no image goes ahead of a
        // style sheet about to be asked for.
        let urgent: Vec<Option<u64>> = started
            .iter()
            .map(|(u, _)| (urgency(u) < LEAF_URGENCY).then(|| page.size_of(u)))
            .collect();
        page.urgent_started(urgent.iter().flatten().sum());
        for ((url, cell), urgent) in started.into_iter().zip(urgent) {
            let me = self.clone();
            let page = page.clone();
            tokio::spawn(async move {
                let _ = cell
                    .get_or_init(|| me.fetch_prefetch(url, &page, urgent.is_none()))
                    .await;
                if let Some(bytes) = urgent {
                    page.urgent_arrived(bytes);
                }
            });
        }
        n
    }

    /// A prefetch: an image waits for the urgent objects, then every
    /// object for room in the page's budget ([`PagePrefetch`]).
    async fn fetch_prefetch(
        self: &Arc<Self>,
        url: String,
        page: &PagePrefetch,
        leaf: bool,
    ) -> Result<Arc<Whole>, String> {
        if leaf {
            // Another host's session: its connection is not the page's,
            // and no origin orders this image behind the page's scripts.
            page.hold_leaves(!std::ptr::eq(Arc::as_ptr(&self.page), page))
                .await;
        }
        let _room = page.room_for(&url).await;
        let _stream = page.stream_room().await;
        tracing::debug!("proxy: prefetch sends {url}");
        let r = self
            .fetch_whole(url.clone(), page.priority_of(&url), leaf)
            .await;
        tracing::debug!("proxy: prefetch got {url}");
        r
    }

    /// Fetches `url` whole, placed as a browser request for it would be;
    /// a `leaf` (an image) placed on the document's connection goes once
    /// the document's response head has come ([`Session::document_head`]).
    async fn fetch_whole(
        self: &Arc<Self>,
        url: String,
        priority: Priority,
        leaf: bool,
    ) -> Result<Arc<Whole>, String> {
        let uri = http::Uri::try_from(url.as_str()).map_err(|e| e.to_string())?;
        let reveals = path_reveals(uri.path());
        let mut req = Request::get(uri).header(http::header::ACCEPT, "*/*");
        let priority = priority.header();
        if !priority.is_empty() {
            req = req.header("priority", priority);
        }
        let req = req
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .map_err(|e| e.to_string())?;
        let resp = self
            .forward_as(&url, self.warm_first && reveals, !reveals, leaf, req)
            .await?;
        read_whole(resp, &self.held_bytes).await
    }

    /// The prefetched response of `url`, waiting for it if it is still on
    /// its way; `None` when it was not prefetched or failed (the caller
    /// then forwards the browser's request). With `document` (the browser
    /// asked for a document), a response that is not a redirect is the
    /// page's document: the browser has it, and the prefetch's budget
    /// opens, as when the document comes from the origin
    /// ([`Counted`](super::counted::Counted)). The browser's request says
    /// what a document is; a URL does not (`/se`, `/pagead/…/`).
    pub(in crate::proxy) async fn take_prefetched(
        self: &Arc<Self>,
        url: &str,
        document: bool,
    ) -> Option<Arc<Whole>> {
        let (cell, page) = lock(&self.prefetched).remove(url)?;
        // Asked for before its prefetch started: it waits as the prefetch
        // would (the browser sent an image at low urgency).
        let leaf = page.priority_of(url).urgency >= LEAF_URGENCY;
        let r = cell
            .get_or_init(|| self.fetch_prefetch(url.to_string(), &page, leaf))
            .await;
        match r {
            Ok(w) => {
                self.prefetch_taken.fetch_add(1, Ordering::Relaxed);
                if document
                    && (!w.status.is_redirection()
                        || redirects_elsewhere(w.status, &w.headers, &self.host))
                {
                    page.document_done();
                }
                Some(w.clone())
            }
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefetch_goes_only_to_named_hosts_of_the_page_scheme_and_port() {
        let ok = |u: &str| prefetch_host(u, "https");
        assert_eq!(
            ok("https://CDN.example/a.js").as_deref(),
            Some("cdn.example")
        );
        for refused in [
            "http://cdn.example/a.js",
            "https://cdn.example:8443/a.js",
            "https://cdn.example:443/a.js",
            "https://user@cdn.example/a.js",
            "https://cdn.example@127.0.0.1/a.js",
            "https://127.0.0.1/a.js",
            "https://[::1]/a.js",
            "/relative.js",
            "javascript:alert(1)",
            "",
        ] {
            assert_eq!(ok(refused), None, "{refused}");
        }
    }
}
