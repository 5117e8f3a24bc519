//! One request through the accelerator (docs/ACCEL.md §2):
//!
//! 1. The `Host` (or `:authority`) picks the site; a host that is not a
//!    site's document host gets 421: nothing else is ever proxied.
//! 2. The path is unfolded: a site path goes to the site's origin, a folded
//!    path to the allowlisted host it names, anything refused gets 400.
//! 3. Folded requests: only GET and HEAD, never navigations; the page's
//!    cookies and credentials are removed, the `Referer` cut to its origin.
//! 4. The cache answers if it can (fresh, or revalidated with a
//!    conditional request); else the origin is asked and a storable
//!    response is stored while it streams to the client.
//! 5. HTML and CSS are rewritten on the way out; folded responses lose
//!    their `Set-Cookie` (and their host stops being folded) and carry
//!    `Content-Security-Policy: sandbox`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use http_cache_semantics::{AfterResponse, CacheOptions, CachePolicy};
use hyper::body::Incoming;
use url::Url;

use super::admin::Metrics;
use super::body::{empty, full, ChanBody, OutBody, Rewrite, Transform};
use super::fill::{self, Fill, FillGuard};
use super::upstream::UpBody;
use super::{Accel, VIA};
use crate::cache::{self, Lookup, Purge, Stored};
use crate::mapping::{unfold, FoldContext, Scheme};
use crate::rewrite::css::CssRewriter;
use crate::rewrite::html::{HtmlOptions, HtmlRewriter};
use crate::rewrite::Counts;
use crate::site::{normalize_host, Site};

/// Hop-by-hop fields (RFC 9110 §7.6.1), removed in both directions along
/// with any field `Connection` names.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<String> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for n in named {
        if let Ok(n) = HeaderName::from_bytes(n.as_bytes()) {
            h.remove(n);
        }
    }
    for n in HOP_BY_HOP {
        h.remove(*n);
    }
}

fn plain(status: StatusCode, msg: impl Into<String>) -> Response<OutBody> {
    let mut r = Response::new(full(msg.into() + "\n"));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::VIA, HeaderValue::from_static(VIA));
    r
}

/// A refusal, boxed (it travels in a `Result`).
fn refuse(status: StatusCode, msg: impl Into<String>) -> Box<Response<OutBody>> {
    Box::new(plain(status, msg))
}

/// The request's host, from `:authority` (HTTP/2) or `Host` (HTTP/1.1),
/// with its port if it had one.
fn authority(req: &Request<Incoming>) -> Option<String> {
    if let Some(a) = req.uri().authority() {
        return Some(a.as_str().to_owned());
    }
    req.headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
}

/// Whether a folded request is a navigation (a document, a frame, an
/// embedded object): these are refused, because a folded path is another
/// domain's content under the site's origin (docs/ACCEL.md, "Navigations").
fn is_navigation(h: &HeaderMap) -> bool {
    let get = |n: &str| {
        h.get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    if get("sec-fetch-mode").as_deref() == Some("navigate") {
        return true;
    }
    if let Some(dest) = get("sec-fetch-dest") {
        return matches!(
            dest.as_str(),
            "document" | "iframe" | "frame" | "embed" | "object" | "fencedframe"
        );
    }
    // No fetch metadata (an old browser, a script): a request that prefers
    // HTML is treated as a navigation.
    get("accept").is_some_and(|a| a.starts_with("text/html"))
}

/// Whether the client takes gzip.
fn accepts_gzip(h: &HeaderMap) -> bool {
    h.get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|c| {
            let mut parts = c.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q0 = parts.any(|p| {
                let p = p.trim();
                p == "q=0" || p == "q=0.0" || p == "q=0.00" || p == "q=0.000"
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !q0
        })
}

/// What a response is, for the rewriters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Css,
    Other,
}

fn kind_of(h: &HeaderMap) -> (Kind, Option<String>) {
    let Some(ct) = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return (Kind::Other, None);
    };
    let mut parts = ct.split(';');
    let mime = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"').to_owned())
    });
    let kind = match mime.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "text/css" => Kind::Css,
        _ => Kind::Other,
    };
    (kind, charset)
}

/// How a request is routed, once its path has been unfolded.
#[derive(Clone)]
struct Route {
    site: Arc<Site>,
    scheme: Scheme,
    /// The host the request goes to (the site's own, or the folded one).
    upstream_host: String,
    /// The absolute upstream URL (also the cache key).
    upstream_url: String,
    /// The URL the browser sees (for rewriting).
    served_url: String,
    folded: bool,
}

/// Serves one request.
pub async fn handle(
    accel: Arc<Accel>,
    req: Request<Incoming>,
    scheme: Scheme,
) -> Response<OutBody> {
    Metrics::inc(&accel.metrics.requests);
    match route(&accel, &req, scheme) {
        Ok(route) => serve(accel, req, route).await,
        Err(refusal) => {
            drain(req.into_body()).await;
            *refusal
        }
    }
}

/// Most request body read (and dropped) before a refusal goes out.
const DRAIN_BYTES: usize = 64 * 1024;

/// Reads a body nobody will use, up to [`DRAIN_BYTES`] or a second. For
/// a request that is refused, before the refusal is sent: the client is
/// not cut off mid-upload, and an HTTP/2 stream's frames are still
/// checked (a malformed trailer is a protocol error even on a refused
/// request; RFC 9113 §8.1). For an origin's error that a stale copy
/// replaces: its connection can then be reused.
async fn drain(mut body: Incoming) {
    let read = async {
        let mut n = 0;
        while let Some(Ok(f)) = body.frame().await {
            if let Some(d) = f.data_ref() {
                n += d.len();
                if n > DRAIN_BYTES {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), read).await;
}

/// Where a request goes, or the response that refuses it.
fn route(
    accel: &Accel,
    req: &Request<Incoming>,
    scheme: Scheme,
) -> Result<Route, Box<Response<OutBody>>> {
    let Some(auth) = authority(req) else {
        return Err(refuse(StatusCode::BAD_REQUEST, "no Host"));
    };
    let bare = match auth.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => auth.as_str(),
    };
    let host = match normalize_host(bare) {
        Ok(h) => h,
        Err(_) => {
            return Err(refuse(
                StatusCode::MISDIRECTED_REQUEST,
                format!("this accelerator does not serve {auth:?}"),
            ));
        }
    };
    let Some(site) = accel.sites.for_host(&host).cloned() else {
        return Err(refuse(
            StatusCode::MISDIRECTED_REQUEST,
            format!("this accelerator does not serve {host}"),
        ));
    };
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let target = match unfold(&site, &pq) {
        Ok(t) => t,
        Err(reason) => {
            Metrics::bump(&accel.metrics.refused, reason.label());
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!("refused: {reason} ({})", reason.label()),
            ));
        }
    };
    let served_url = format!("{}://{}{pq}", scheme.as_str(), auth.to_ascii_lowercase());
    let route = match target {
        Some(t) => Route {
            site,
            scheme,
            upstream_url: t.url(scheme),
            upstream_host: t.host,
            served_url,
            folded: true,
        },
        None => Route {
            site,
            scheme,
            upstream_url: format!("{}://{host}{pq}", scheme.as_str()),
            upstream_host: host,
            served_url,
            folded: false,
        },
    };
    if route.folded {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return Err(refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "folded paths are static resources: GET or HEAD only",
            ));
        }
        if is_navigation(req.headers()) {
            Metrics::inc(&accel.metrics.navigations_refused);
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "a folded path is not a page: open the resource on its own host",
            ));
        }
    }
    Ok(route)
}

/// The request as it goes upstream: client fields minus hop-by-hop ones,
/// minus the page's credentials for folded hosts, `Accept-Encoding`
/// reduced to gzip or nothing (the rewriters read gzip and plain text; one
/// encoding also keeps the variants per URL few).
fn upstream_headers(client: &HeaderMap, route: &Route) -> HeaderMap {
    let mut h = client.clone();
    strip_hop_by_hop(&mut h);
    h.remove(header::HOST);
    let gzip = accepts_gzip(&h);
    h.remove(header::ACCEPT_ENCODING);
    if gzip {
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if route.folded {
        // Same-origin requests carry the page's cookies; they belong to the
        // site, never to the folded host.
        h.remove(header::COOKIE);
        h.remove(header::AUTHORIZATION);
        // The browser would have sent only the page's origin to another
        // site (strict-origin-when-cross-origin); do the same.
        if let Some(r) = h.get(header::REFERER).and_then(|v| v.to_str().ok()) {
            let origin = Url::parse(r)
                .ok()
                .map(|u| u.origin().ascii_serialization() + "/");
            match origin.and_then(|o| HeaderValue::from_str(&o).ok()) {
                Some(v) => {
                    h.insert(header::REFERER, v);
                }
                None => {
                    h.remove(header::REFERER);
                }
            }
        }
    }
    h.append(header::VIA, HeaderValue::from_static(VIA));
    h
}

fn request_parts(method: Method, url: &str, headers: HeaderMap) -> Option<http::request::Parts> {
    let mut r = Request::builder().method(method).uri(url).body(()).ok()?;
    *r.headers_mut() = headers;
    Some(r.into_parts().0)
}

async fn serve(accel: Arc<Accel>, req: Request<Incoming>, route: Route) -> Response<OutBody> {
    let (parts, body) = req.into_parts();
    let head_only = parts.method == Method::HEAD;
    let client_gzip = accepts_gzip(&parts.headers);
    let up_headers = upstream_headers(&parts.headers, &route);
    let cacheable = (parts.method == Method::GET || parts.method == Method::HEAD)
        && (route.folded
            || !(parts.headers.contains_key(header::COOKIE)
                || parts.headers.contains_key(header::AUTHORIZATION)));
    let Some(lookup_req) = request_parts(Method::GET, &route.upstream_url, up_headers.clone())
    else {
        return plain(
            StatusCode::BAD_REQUEST,
            "request target does not make a URL",
        );
    };
    // Held while this request fetches (or revalidates) what other requests
    // for the URL wait for.
    let mut fill = None;
    // Whether this request has waited for another's fetch already.
    let mut waited = false;
    // Answers from the cache where it can. A miss, or a stale entry that
    // must be revalidated, that finds another request fetching the same URL
    // waits for it and looks again (docs/ACCEL.md "Concurrent misses").
    // What comes out: the new response a revalidation brought, or nothing
    // (go to the origin).
    let revalidated = loop {
        if !cacheable {
            Metrics::inc(&accel.metrics.passed);
            break None;
        }
        let found = accel
            .cache
            .lookup(&route.upstream_url, &lookup_req, SystemTime::now());
        // A miss, or a stale copy that must be revalidated, goes to the
        // origin once for all who want it at the same time.
        let lock = accel
            .lock_timeout
            .filter(|_| !waited && parts.method == Method::GET);
        if let (Lookup::Stale(..) | Lookup::Miss, Some(limit)) = (&found, lock) {
            match take_turn(&accel, &route.upstream_url, limit).await {
                Some(guard) => fill = Some(guard),
                None => {
                    waited = true;
                    continue;
                }
            }
        }
        let serve_stored = |stored, res| {
            respond_stored(
                &accel,
                &route,
                &parts.headers,
                stored,
                res,
                head_only,
                client_gzip,
            )
        };
        match found {
            Lookup::Fresh(stored, res) => {
                Metrics::inc(&accel.metrics.hits);
                if waited {
                    Metrics::inc(&accel.metrics.collapsed);
                }
                return serve_stored(stored, res);
            }
            Lookup::StaleWhileRevalidate(stored, res, conditional) => {
                Metrics::inc(&accel.metrics.stale_served);
                // One refresh per URL at a time: a request that finds one
                // running (or a fetch) serves the stale copy and goes.
                if let Fill::Lead(guard) = accel.fills.enter(&route.upstream_url) {
                    tokio::spawn(refresh(
                        accel.clone(),
                        route.clone(),
                        lookup_req.clone(),
                        stored.clone(),
                        conditional,
                        guard,
                    ));
                }
                return serve_stored(stored, res);
            }
            Lookup::Stale(stored, conditional) => {
                let upstream = match revalidate(&accel, &route, &stored, &conditional).await {
                    Revalidation::NotModified(s, fresh) => return serve_stored(s, fresh),
                    Revalidation::Modified(rp, rb) => Ok((rp, rb)),
                    Revalidation::Failed(e) => Err(e),
                };
                // A failing origin: a stale copy the origin allowed for this
                // (`stale-if-error`) beats its error.
                let failing = upstream
                    .as_ref()
                    .map_or(true, |(rp, _)| is_server_error(rp.status));
                let now = SystemTime::now();
                if failing && cache::stale_usable(stored.stale.if_error, &parts.headers, now) {
                    Metrics::inc(&accel.metrics.stale_if_error);
                    if let Ok((_, rb)) = upstream {
                        tokio::spawn(drain(rb));
                    }
                    let res = stored.stale_response(now);
                    return serve_stored(stored, res);
                }
                match upstream {
                    Ok(new) => {
                        Metrics::inc(&accel.metrics.revalidated_changed);
                        break Some(new);
                    }
                    Err(e) => return upstream_failed(&accel, &route, e),
                }
            }
            Lookup::Miss => {
                Metrics::inc(&accel.metrics.misses);
                break None;
            }
        }
    };
    let (rp, rb, store) = match revalidated {
        // A stale copy's replacement, stored like a miss's response.
        Some((rp, rb)) => (rp, rb, true),
        None => {
            // To the origin. GET and HEAD go without a body; other methods
            // (only on the site's own paths) carry the client's.
            let up_body: UpBody = if parts.method == Method::GET || parts.method == Method::HEAD {
                empty_up()
            } else {
                body.boxed()
            };
            let Some(up_parts) =
                request_parts(parts.method.clone(), &route.upstream_url, up_headers)
            else {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "request target does not make a URL",
                );
            };
            match accel
                .upstream
                .send(
                    route.scheme,
                    &route.upstream_host,
                    Request::from_parts(up_parts, up_body),
                )
                .await
            {
                Ok(res) => {
                    let (rp, rb) = res.into_parts();
                    (rp, rb, cacheable && parts.method == Method::GET)
                }
                Err(e) => return upstream_failed(&accel, &route, e),
            }
        }
    };
    respond_upstream(
        &accel,
        &route,
        &lookup_req,
        rp,
        rb,
        head_only,
        client_gzip,
        store,
        fill,
    )
}

/// Leads the fetch of `key` (the guard, held until the cache has the
/// outcome), or waits for the one in flight, at most `limit` (`None`: look
/// in the cache again).
async fn take_turn(accel: &Accel, key: &str, limit: Duration) -> Option<FillGuard> {
    match accel.fills.enter(key) {
        Fill::Lead(guard) => Some(guard),
        Fill::Wait(rx) => {
            if !fill::wait(rx, limit).await {
                Metrics::inc(&accel.metrics.lock_timeouts);
            }
            None
        }
    }
}

/// What a conditional request for a stale entry brought back.
enum Revalidation {
    /// Still good (304): the entry, refreshed in the cache, and the headers
    /// to serve it with.
    NotModified(Arc<Stored>, http::response::Parts),
    /// Another response: a new body, or an error status.
    Modified(http::response::Parts, Incoming),
    /// No answer from the origin.
    Failed(super::upstream::UpstreamError),
}

/// Sends `conditional` for the stale entry `stored` and, on a 304,
/// refreshes the entry in the cache.
async fn revalidate(
    accel: &Accel,
    route: &Route,
    stored: &Arc<Stored>,
    conditional: &http::request::Parts,
) -> Revalidation {
    let up = Request::from_parts(conditional.clone(), empty_up());
    let res = match accel
        .upstream
        .send(route.scheme, &route.upstream_host, up)
        .await
    {
        Ok(res) => res,
        Err(e) => return Revalidation::Failed(e),
    };
    let (rp, rb) = res.into_parts();
    let mut rp_h = rp.clone();
    strip_hop_by_hop(&mut rp_h.headers);
    let now = SystemTime::now();
    match stored.policy.after_response(conditional, &rp_h, now) {
        AfterResponse::NotModified(policy, fresh) => {
            Metrics::inc(&accel.metrics.revalidated);
            // Drain the (empty) 304 body so the connection can be reused.
            let _ = rb.collect().await;
            let mut headers = fresh.headers.clone();
            headers.remove(header::AGE);
            let s = accel
                .cache
                .revalidated(&route.upstream_url, stored, policy, headers, now);
            Revalidation::NotModified(s, fresh)
        }
        AfterResponse::Modified(..) => Revalidation::Modified(rp, rb),
    }
}

/// The statuses RFC 5861 §4 lets `stale-if-error` cover.
fn is_server_error(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

/// Revalidates, with no client waiting, a stale entry that was just served
/// inside its `stale-while-revalidate` window. `_guard` keeps other
/// requests from starting another refresh until the cache holds the
/// outcome. An error leaves the stale entry as it is (its windows still
/// bound how long it is served).
async fn refresh(
    accel: Arc<Accel>,
    route: Route,
    lookup_req: http::request::Parts,
    stored: Arc<Stored>,
    conditional: http::request::Parts,
    guard: FillGuard,
) {
    let url = &route.upstream_url;
    match revalidate(&accel, &route, &stored, &conditional).await {
        Revalidation::NotModified(..) => {}
        Revalidation::Modified(rp, rb) if is_server_error(rp.status) => {
            tracing::warn!("accel: {url}: background revalidation: {}", rp.status);
            tokio::spawn(drain(rb));
        }
        Revalidation::Modified(rp, rb) => {
            Metrics::inc(&accel.metrics.revalidated_changed);
            match split_for_cache(&accel, &route, &lookup_req, &rp, true).1 {
                Some(tee) => {
                    let key = url.clone();
                    pump(
                        accel.clone(),
                        key,
                        lookup_req,
                        rb,
                        None,
                        Some(tee),
                        None,
                        Some(guard),
                    )
                    .await;
                }
                // The new response may not be kept: neither may the old one
                // be served any more.
                None => {
                    accel.cache.purge(&Purge::Url(url.clone()));
                }
            }
        }
        Revalidation::Failed(e) => {
            tracing::warn!("accel: {url}: background revalidation: {e}");
        }
    }
}

fn empty_up() -> UpBody {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

fn upstream_failed(
    accel: &Accel,
    route: &Route,
    e: super::upstream::UpstreamError,
) -> Response<OutBody> {
    Metrics::bump(&accel.metrics.upstream_errors, e.label());
    tracing::warn!("accel: {}: {e}", route.upstream_url);
    let status = match e {
        super::upstream::UpstreamError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    };
    plain(
        status,
        format!(
            "the origin for {} could not be reached ({})",
            route.upstream_host,
            e.label()
        ),
    )
}

/// Headers common to every response the accelerator passes on: folded
/// responses lose cookies and are sandboxed if opened as a document.
/// Returns whether a `Set-Cookie` was removed.
fn outgoing_headers(accel: &Accel, route: &Route, h: &mut HeaderMap) -> bool {
    strip_hop_by_hop(h);
    h.append(header::VIA, HeaderValue::from_static(VIA));
    if !route.folded {
        return false;
    }
    let cookies = h.get_all(header::SET_COOKIE).iter().count() as u64;
    if cookies > 0 {
        h.remove(header::SET_COOKIE);
        Metrics::add(&accel.metrics.cookies_stripped, cookies);
        accel.disqualify(&route.upstream_host);
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    cookies > 0
}

/// Decides whether (and how) a body with headers `h` is rewritten for
/// `route`; adjusts `h` for the rewritten body. `None`: sent as it is.
fn transform_for(
    accel: &Accel,
    route: &Route,
    status: StatusCode,
    h: &mut HeaderMap,
    client_gzip: bool,
) -> Option<Transform> {
    if status != StatusCode::OK {
        return None;
    }
    let (kind, charset) = kind_of(h);
    if kind == Kind::Other || (kind == Kind::Html && route.folded) {
        return None;
    }
    let fold_site = accel.fold_site(&route.site);
    // Nothing to fold (every host disqualified): nothing to rewrite.
    fold_site.folded_hosts().next()?;
    let unrewritten = |why: &'static str| {
        Metrics::bump(&accel.metrics.unrewritten, why);
        tracing::info!("accel: {} served unrewritten: {why}", route.served_url);
        None
    };
    let gunzip = match h
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
    {
        None => false,
        Some(e) if e.is_empty() || e == "identity" => false,
        Some(e) if e == "gzip" || e == "x-gzip" => true,
        Some(_) => return unrewritten("content_encoding"),
    };
    let served = Url::parse(&route.served_url).ok()?;
    if kind == Kind::Html {
        // The folded references now come from the page's own origin: each
        // policy gets the folded forms of the hosts it allows
        // (docs/ACCEL.md, "Content-Security-Policy"), or the page is served
        // as it is.
        match adjust_csp(h, &fold_site, &served) {
            Ok(n) => Metrics::add(&accel.metrics.csp_adjusted, n),
            Err(e) => {
                tracing::info!("accel: {}: policy not adjustable: {e}", route.served_url);
                return unrewritten("csp");
            }
        }
    }
    let rewrite = match kind {
        Kind::Html => {
            let ctx = FoldContext::document(fold_site, served)?;
            let options = HtmlOptions {
                charset,
                ..HtmlOptions::default()
            };
            match HtmlRewriter::new(ctx, &options) {
                Ok(r) => Rewrite::Html(Box::new(r)),
                Err(_) => return unrewritten("charset"),
            }
        }
        Kind::Css => {
            let ctx = if route.folded {
                let original = Url::parse(&route.upstream_url).ok()?;
                FoldContext::stylesheet(fold_site, served, original)?
            } else {
                FoldContext::document(fold_site, served)?
            };
            Rewrite::Css(Box::new(CssRewriter::new(ctx)))
        }
        Kind::Other => return None,
    };
    // The body changes: its length, validators and ranges no longer hold.
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::ACCEPT_RANGES);
    h.remove("content-md5");
    h.remove("digest");
    if let Some(etag) = h.get(header::ETAG).and_then(|v| v.to_str().ok()) {
        if !etag.starts_with("W/") {
            if let Ok(v) = HeaderValue::from_str(&format!("W/{etag}")) {
                h.insert(header::ETAG, v);
            }
        }
    }
    let gzip_out = gunzip && client_gzip;
    if gunzip && !gzip_out {
        h.remove(header::CONTENT_ENCODING);
    }
    if !gunzip && client_gzip {
        // Compress what was sent plain: HTML and CSS shrink several times.
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    let vary_ae = h
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("accept-encoding"));
    if !vary_ae {
        h.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    let counter = match kind {
        Kind::Html => &accel.metrics.documents_rewritten,
        _ => &accel.metrics.stylesheets_rewritten,
    };
    Metrics::inc(counter);
    Some(Transform::new(rewrite, gunzip, client_gzip))
}

/// Adjusts every `Content-Security-Policy` and `…-Report-Only` value of
/// `h` for `site`'s folded paths; returns how many values changed. On an
/// error nothing is changed.
fn adjust_csp(h: &mut HeaderMap, site: &Site, served: &Url) -> Result<u64, crate::csp::CspError> {
    let mut changed = 0;
    let mut out: Vec<(HeaderName, HeaderValue)> = Vec::new();
    for name in [
        header::CONTENT_SECURITY_POLICY,
        header::CONTENT_SECURITY_POLICY_REPORT_ONLY,
    ] {
        for v in h.get_all(&name) {
            let text = v
                .to_str()
                .map_err(|_| crate::csp::CspError::NonAscii { at: 0 })?;
            let a = crate::csp::adjust(text, site, served)?;
            if a.added > 0 {
                changed += 1;
            }
            let v = HeaderValue::from_str(&a.value)
                .map_err(|_| crate::csp::CspError::Control { at: 0 })?;
            out.push((name.clone(), v));
        }
    }
    if changed > 0 {
        h.remove(header::CONTENT_SECURITY_POLICY);
        h.remove(header::CONTENT_SECURITY_POLICY_REPORT_ONLY);
        for (n, v) in out {
            h.append(n, v);
        }
    }
    Ok(changed)
}

fn record_counts(accel: &Accel, c: Counts) {
    Metrics::add(&accel.metrics.refs_folded, c.folded);
    Metrics::add(&accel.metrics.refs_absolutized, c.absolutized);
    Metrics::add(&accel.metrics.refs_kept_for_integrity, c.kept_for_integrity);
    Metrics::add(&accel.metrics.csp_adjusted, c.csp_adjusted);
    Metrics::add(&accel.metrics.csp_unadjustable, c.csp_unadjustable);
}

/// Whether `If-None-Match` names `etag` (weak comparison, RFC 9110 §13.1.2).
fn none_match(req: &HeaderMap, etag: Option<&HeaderValue>) -> bool {
    let Some(etag) = etag.and_then(|e| e.to_str().ok()) else {
        return false;
    };
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_owned();
    req.get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == "*" || bare(t) == bare(etag))
}

fn respond_stored(
    accel: &Arc<Accel>,
    route: &Route,
    client: &HeaderMap,
    stored: Arc<Stored>,
    res: http::response::Parts,
    head_only: bool,
    client_gzip: bool,
) -> Response<OutBody> {
    let mut h = res.headers;
    outgoing_headers(accel, route, &mut h);
    let status = stored.status;
    let transform = transform_for(accel, route, status, &mut h, client_gzip);
    if status == StatusCode::OK && none_match(client, h.get(header::ETAG)) {
        let mut r = Response::new(empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        for n in [
            header::ETAG,
            header::CACHE_CONTROL,
            header::EXPIRES,
            header::VARY,
            header::VIA,
            header::AGE,
        ] {
            for v in h.get_all(&n) {
                r.headers_mut().append(n.clone(), v.clone());
            }
        }
        return r;
    }
    let body = if head_only {
        empty()
    } else {
        match transform {
            None => {
                Metrics::add(&accel.metrics.bytes_out, stored.body.len() as u64);
                full(stored.body.clone())
            }
            Some(t) => {
                let (tx, body) = ChanBody::channel();
                let accel = accel.clone();
                let bytes = stored.body.clone();
                tokio::spawn(async move {
                    let mut t = t;
                    let first = t.push(&bytes);
                    let result = match first {
                        Ok(b) => t.finish().map(|(last, c, bail)| (b, last, c, bail)),
                        Err(e) => Err(e),
                    };
                    match result {
                        Ok((a, b, counts, bail)) => {
                            record_counts(&accel, counts);
                            if let Some(why) = bail {
                                tracing::info!("accel: {why}");
                            }
                            Metrics::add(&accel.metrics.bytes_out, (a.len() + b.len()) as u64);
                            let _ = tx.send(Ok(a)).await;
                            let _ = tx.send(Ok(b)).await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e)).await;
                        }
                    }
                });
                body
            }
        }
    };
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = h;
    r
}

/// The origin's response to the client, and into the cache if `store` and
/// it is storable. `fill`, the guard of the fetch other misses wait for
/// when this request leads one, is released once the response is stored
/// or known not to be.
#[allow(clippy::too_many_arguments)]
fn respond_upstream(
    accel: &Arc<Accel>,
    route: &Route,
    lookup_req: &http::request::Parts,
    rp: http::response::Parts,
    rb: Incoming,
    head_only: bool,
    client_gzip: bool,
    store: bool,
    fill: Option<FillGuard>,
) -> Response<OutBody> {
    let (mut h, tee) = split_for_cache(accel, route, lookup_req, &rp, store && !head_only);
    let status = rp.status;
    let transform = transform_for(accel, route, status, &mut h, client_gzip);
    let (tx, body) = if head_only {
        (None, empty())
    } else {
        let (tx, body) = ChanBody::channel();
        (Some(tx), body)
    };
    let accel2 = accel.clone();
    let key = route.upstream_url.clone();
    let lookup_req = lookup_req.clone();
    // Nothing will be stored: the waiters need not wait for the body.
    let fill = fill.filter(|_| tee.is_some());
    tokio::spawn(pump(accel2, key, lookup_req, rb, transform, tee, tx, fill));
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = h;
    r
}

/// Splits upstream response `rp` into the headers for the client and the
/// copy the cache keeps, if it may keep one (`store`: a cacheable GET whose
/// body will be read; and never a response with the site's cookies in it).
fn split_for_cache(
    accel: &Accel,
    route: &Route,
    lookup_req: &http::request::Parts,
    rp: &http::response::Parts,
    store: bool,
) -> (HeaderMap, Option<Tee>) {
    let mut stored_headers = rp.headers.clone();
    strip_hop_by_hop(&mut stored_headers);
    let had_cookie = !route.folded && stored_headers.contains_key(header::SET_COOKIE);
    let mut h = rp.headers.clone();
    let stripped = outgoing_headers(accel, route, &mut h);
    if stripped {
        stored_headers.remove(header::SET_COOKIE);
    }
    let status = rp.status;
    let tee = if store && !had_cookie {
        response_parts(status, &stored_headers).and_then(|res| {
            let policy = CachePolicy::new_options(
                lookup_req,
                &res,
                SystemTime::now(),
                CacheOptions::default(),
            );
            let declared = h
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            (policy.is_storable() && declared.is_none_or(|n| accel.cache.fits(n))).then_some(Tee {
                policy,
                status,
                headers: stored_headers,
                buf: BytesMut::new(),
                ok: true,
            })
        })
    } else {
        None
    };
    (h, tee)
}

fn response_parts(status: StatusCode, h: &HeaderMap) -> Option<http::response::Parts> {
    let mut r = Response::builder().status(status).body(()).ok()?;
    *r.headers_mut() = h.clone();
    Some(r.into_parts().0)
}

/// A response on its way into the cache.
struct Tee {
    policy: CachePolicy,
    status: StatusCode,
    headers: HeaderMap,
    buf: BytesMut,
    ok: bool,
}

/// Reads the upstream body, feeding the client (through the rewriter if
/// any) and the cache; stores the response once it has all come. `_fill`
/// is released when this ends, stored or not.
#[allow(clippy::too_many_arguments)]
async fn pump(
    accel: Arc<Accel>,
    key: String,
    lookup_req: http::request::Parts,
    mut rb: Incoming,
    mut transform: Option<Transform>,
    mut tee: Option<Tee>,
    tx: Option<tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>>,
    _fill: Option<FillGuard>,
) {
    let mut client_gone = tx.is_none();
    while let Some(frame) = rb.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("accel: {key}: upstream body: {e}");
                if let Some(tx) = &tx {
                    let _ = tx.send(Err(std::io::Error::other(e))).await;
                }
                return;
            }
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        Metrics::add(&accel.metrics.bytes_upstream, data.len() as u64);
        if let Some(t) = &mut tee {
            if t.ok {
                if accel.cache.fits((t.buf.len() + data.len()) as u64) {
                    t.buf.extend_from_slice(&data);
                } else {
                    t.ok = false;
                    t.buf = BytesMut::new();
                }
            }
        }
        if client_gone {
            if tee.as_ref().is_none_or(|t| !t.ok) {
                // Nobody left to read it.
                return;
            }
            continue;
        }
        let out = match &mut transform {
            Some(t) => match t.push(&data) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("accel: {key}: rewriting: {e}");
                    if let Some(tx) = &tx {
                        let _ = tx.send(Err(e)).await;
                    }
                    return;
                }
            },
            None => data,
        };
        if !out.is_empty() {
            Metrics::add(&accel.metrics.bytes_out, out.len() as u64);
            if let Some(tx) = &tx {
                if tx.send(Ok(out)).await.is_err() {
                    client_gone = true;
                }
            }
        }
    }
    if let (Some(t), false) = (transform, client_gone) {
        match t.finish() {
            Ok((last, counts, bail)) => {
                record_counts(&accel, counts);
                if let Some(why) = bail {
                    tracing::info!("accel: {key}: {why}");
                }
                if !last.is_empty() {
                    Metrics::add(&accel.metrics.bytes_out, last.len() as u64);
                    if let Some(tx) = &tx {
                        let _ = tx.send(Ok(last)).await;
                    }
                }
            }
            Err(e) => {
                if let Some(tx) = &tx {
                    let _ = tx.send(Err(e)).await;
                }
                return;
            }
        }
    }
    if let Some(t) = tee {
        if t.ok {
            let stored = Stored::new(
                t.policy,
                t.status,
                t.headers,
                t.buf.freeze(),
                SystemTime::now(),
            );
            if accel.cache.store(&key, &lookup_req, stored) {
                Metrics::inc(&accel.metrics.stored);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    #[test]
    fn navigations_are_told_from_subresources() {
        assert!(is_navigation(&headers(&[("sec-fetch-dest", "document")])));
        assert!(is_navigation(&headers(&[("sec-fetch-dest", "iframe")])));
        assert!(is_navigation(&headers(&[
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "empty")
        ])));
        assert!(is_navigation(&headers(&[(
            "accept",
            "text/html,application/xhtml+xml"
        )])));
        assert!(!is_navigation(&headers(&[
            ("sec-fetch-dest", "image"),
            ("accept", "text/html")
        ])));
        assert!(!is_navigation(&headers(&[(
            "accept",
            "image/avif,image/webp,*/*"
        )])));
        assert!(!is_navigation(&headers(&[])));
    }

    #[test]
    fn gzip_acceptance_follows_q_values() {
        assert!(accepts_gzip(&headers(&[(
            "accept-encoding",
            "gzip, deflate, br"
        )])));
        assert!(accepts_gzip(&headers(&[(
            "accept-encoding",
            "br;q=1, GZIP;q=0.5"
        )])));
        assert!(!accepts_gzip(&headers(&[(
            "accept-encoding",
            "gzip;q=0, br"
        )])));
        assert!(!accepts_gzip(&headers(&[("accept-encoding", "br")])));
        assert!(!accepts_gzip(&headers(&[])));
    }

    #[test]
    fn hop_by_hop_fields_and_the_ones_connection_names_go() {
        let mut h = headers(&[
            ("connection", "close, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "5"),
            ("transfer-encoding", "chunked"),
            ("x-kept", "1"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn if_none_match_compares_weakly() {
        let e = HeaderValue::from_static("W/\"abc\"");
        assert!(none_match(
            &headers(&[("if-none-match", "\"abc\"")]),
            Some(&e)
        ));
        assert!(none_match(
            &headers(&[("if-none-match", "\"x\", W/\"abc\"")]),
            Some(&e)
        ));
        assert!(none_match(&headers(&[("if-none-match", "*")]), Some(&e)));
        assert!(!none_match(
            &headers(&[("if-none-match", "\"abd\"")]),
            Some(&e)
        ));
        assert!(!none_match(&headers(&[("if-none-match", "\"abc\"")]), None));
    }

    #[test]
    fn content_types_pick_the_rewriter() {
        assert_eq!(
            kind_of(&headers(&[(
                "content-type",
                "text/html; charset=ISO-8859-1"
            )])),
            (Kind::Html, Some("ISO-8859-1".into()))
        );
        assert_eq!(
            kind_of(&headers(&[("content-type", "TEXT/CSS")])).0,
            Kind::Css
        );
        assert_eq!(
            kind_of(&headers(&[("content-type", "image/png")])).0,
            Kind::Other
        );
        assert_eq!(kind_of(&headers(&[])).0, Kind::Other);
    }
}
