//! The admin API, status page and Prometheus metrics, over HTTP/1.1.
//!
//! Read-only (GET and HEAD): the edge is configured by its file and fed by
//! `mewa edge import`, so nothing here changes state. It listens on
//! 127.0.0.1:8053 by default; any other address needs `[admin] token`, and
//! with a token the paths that show what users browse (`/`, `/api/pages`,
//! `/api/hint`, `/api/queries`) need `Authorization: Bearer <token>`.
//!
//! | path | what |
//! |---|---|
//! | `/` | status page (HTML) |
//! | `/api/pages` | every page: objects, bytes, source, age, queries |
//! | `/api/hint?url=U` | the hint the edge would send for page U, decoded, with its size |
//! | `/api/latency` | smoothed RTT per origin, with the age of its newest sample |
//! | `/api/queries?window_s=3600&k=20` | most queried pages in the window |
//! | `/api/stats` | store and hint-book figures |
//! | `/metrics` | Prometheus text format |

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use mewa_hint::wire::Hint;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::server::HINT_BUCKETS;
use crate::state::{now_unix_s, with_store, Edge, StoreJobError};

/// Serves the admin API until dropped.
pub async fn serve(edge: Edge, listener: TcpListener) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    let edge = edge.clone();
                    conns.spawn(async move {
                        let svc = service_fn(move |req| {
                            let edge = edge.clone();
                            async move { Ok::<_, Infallible>(handle(&edge, req).await) }
                        });
                        let _ = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(std::time::Duration::from_secs(10))
                            .serve_connection(TokioIo::new(s), svc)
                            .await;
                    });
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

fn json(status: StatusCode, v: &serde_json::Value) -> Response<Full<Bytes>> {
    respond(
        status,
        "application/json",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".to_string()),
    )
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": message }))
}

/// Most pages `/api/queries?k=` lists.
pub const MAX_TOP_PAGES: usize = 10_000;

/// What an admin request asks for, read from its path and query string
/// alone ([`route`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/`: the status page.
    Status,
    /// `/api/pages`.
    Pages,
    /// `/api/hint?url=`: the hint of a page (`None`: no `url` given).
    Hint {
        /// The page URL, percent-decoded.
        url: Option<String>,
    },
    /// `/api/latency`.
    Latency,
    /// `/api/queries?window_s=&k=`: the `k` most asked pages (at most
    /// [`MAX_TOP_PAGES`], 20 by default) of the last `window_s` seconds
    /// (3600 by default); a value that is not a number takes the default.
    Queries {
        /// Seconds back from now.
        window_s: u64,
        /// Pages listed.
        k: usize,
    },
    /// `/api/stats`.
    Stats,
    /// `/metrics` (Prometheus).
    Metrics,
    /// Any other path.
    NotFound,
}

/// The route of a request for `path` with query string `query` (the URI's
/// parts, as sent). Pure, so that the `edge_admin` fuzz target can give
/// it any bytes: what a client puts in a URL reaches nothing else.
pub fn route(path: &str, query: Option<&str>) -> Route {
    match path {
        "/" => Route::Status,
        "/api/pages" => Route::Pages,
        "/api/hint" => Route::Hint {
            url: query_param(query, "url"),
        },
        "/api/latency" => Route::Latency,
        "/api/queries" => Route::Queries {
            window_s: query_param(query, "window_s")
                .and_then(|v| v.parse().ok())
                .unwrap_or(3600),
            k: query_param(query, "k")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(20)
                .min(MAX_TOP_PAGES),
        },
        "/api/stats" => Route::Stats,
        "/metrics" => Route::Metrics,
        _ => Route::NotFound,
    }
}

/// The first parameter `name` of a query string, percent-decoded (`+` is
/// a space, a broken escape stays as it is, bytes that are not UTF-8
/// become U+FFFD).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Paths that show what users browse (pages, their hints, query counts):
/// with a configured token, only for requests that carry it.
const REVEALING: [&str; 4] = ["/", "/api/pages", "/api/hint", "/api/queries"];

/// Whether `req` carries `Authorization: Bearer <token>` (compared in time
/// independent of where the first difference is).
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    let Some(given) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

async fn handle(edge: &Edge, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if let Some(token) = &edge.config.admin.token {
        if REVEALING.contains(&req.uri().path()) && !authorized(&req, token) {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "this path shows what users browse: send Authorization: Bearer <[admin] token>",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"mewa edge\""),
            );
            return r;
        }
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the admin API is read-only: GET or HEAD",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let r = match route(req.uri().path(), req.uri().query()) {
        Route::Status => status_page(edge).await,
        Route::Pages => with_store(&edge.store, |s| s.pages())
            .await
            .map(|p| json(StatusCode::OK, &serde_json::json!(p))),
        Route::Hint { url } => Ok(hint_preview(edge, url)),
        Route::Latency => with_store(&edge.store, |s| s.origins()).await.map(|o| {
            let now = now_unix_s();
            let rows: Vec<_> = o
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "host": o.host,
                        "rtt_ms": f64::from(o.rtt_us) / 1000.0,
                        "age_s": now.saturating_sub(o.measured_at_unix_s),
                    })
                })
                .collect();
            json(StatusCode::OK, &serde_json::json!(rows))
        }),
        Route::Queries { window_s, k } => {
            let since = now_unix_s().saturating_sub(window_s);
            with_store(&edge.store, move |s| s.top_pages(since, k))
                .await
                .map(|t| {
                    let rows: Vec<_> = t
                        .iter()
                        .map(|(u, n)| serde_json::json!({ "url": u, "queries": n }))
                        .collect();
                    json(StatusCode::OK, &serde_json::json!(rows))
                })
        }
        Route::Stats => with_store(&edge.store, |s| s.stats()).await.map(|st| {
            json(
                StatusCode::OK,
                &serde_json::json!({ "store": st, "hint_book_pages": edge.dns.book().len() }),
            )
        }),
        Route::Metrics => Ok(respond(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics(edge),
        )),
        Route::NotFound => Ok(error(
            StatusCode::NOT_FOUND,
            "no such path; see / for the API",
        )),
    };
    r.unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))
}

fn hint_preview(edge: &Edge, url: Option<String>) -> Response<Full<Bytes>> {
    let Some(url) = url.filter(|u| !u.is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the page as ?url=<absolute URL>",
        );
    };
    let book = edge.dns.book();
    let Some(h) = book.by_url(&url) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no hint for `{url}`: page unknown"),
        );
    };
    match Hint::from_bytes(&h.full) {
        Ok(hint) => json(
            StatusCode::OK,
            &serde_json::json!({ "url": h.url, "bytes": h.full.len(), "hint": hint }),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn metrics(edge: &Edge) -> String {
    let m = &edge.dns.metrics;
    let mut s = String::new();
    let mut counter = |name: &str, help: &str, v: u64| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    };
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    counter(
        "mewa_edge_dns_queries_udp_total",
        "DNS queries over UDP.",
        get(&m.queries_udp),
    );
    counter(
        "mewa_edge_dns_queries_tcp_total",
        "DNS queries over TCP.",
        get(&m.queries_tcp),
    );
    counter(
        "mewa_edge_hint_requests_total",
        "Queries asking for a hint (EDNS option or TXT).",
        get(&m.hint_requests),
    );
    counter(
        "mewa_edge_hints_urls_total",
        "Hints sent with every object's URL.",
        get(&m.hints_urls),
    );
    counter(
        "mewa_edge_hints_full_total",
        "Hints sent in full form by URL hash (the URLs did not fit).",
        get(&m.hints_full),
    );
    counter(
        "mewa_edge_hints_partial_total",
        "Hints sent in partial (degraded) form.",
        get(&m.hints_partial),
    );
    counter(
        "mewa_edge_hints_unknown_total",
        "Hint requests for unknown pages.",
        get(&m.hints_unknown),
    );
    counter(
        "mewa_edge_forward_refused_total",
        "Queries not forwarded: dns.max_forwarding were under way.",
        get(&m.forward_refused),
    );
    counter(
        "mewa_edge_tcp_refused_total",
        "DNS-over-TCP connections closed on accept: dns.tcp_max_connections were open.",
        get(&m.tcp_refused),
    );
    counter(
        "mewa_edge_rrl_slipped_total",
        "UDP answers over the rate limit sent empty with TC=1.",
        get(&m.rrl_slipped),
    );
    counter(
        "mewa_edge_rrl_dropped_total",
        "UDP answers over the rate limit not sent.",
        get(&m.rrl_dropped),
    );
    counter(
        "mewa_edge_cookies_valid_total",
        "Queries with a valid DNS server cookie (their UDP answers skip rate limiting).",
        get(&m.cookies_valid),
    );
    counter(
        "mewa_edge_cookies_bad_total",
        "Queries with a DNS server cookie that was not ours, expired or for another address.",
        get(&m.cookies_bad),
    );
    counter(
        "mewa_edge_query_counts_dropped_total",
        "Hint requests not counted for popularity (too many pages between two flushes).",
        get(&m.counts_dropped),
    );
    counter(
        "mewa_edge_hints_retry_tcp_total",
        "Hints that did not fit UDP (retry over TCP).",
        get(&m.hints_retry_tcp),
    );
    counter(
        "mewa_edge_hints_compact_total",
        "Compact hints over UDP whose URL list waits over TCP.",
        get(&m.hints_compact),
    );
    counter(
        "mewa_edge_dns_forwarded_total",
        "Queries forwarded upstream.",
        get(&m.forwarded),
    );
    counter(
        "mewa_edge_dns_upstream_failures_total",
        "Forwarded queries without an upstream answer.",
        get(&m.upstream_failures),
    );
    counter(
        "mewa_edge_dns_errors_total",
        "Queries answered with an error code or dropped.",
        get(&m.errors),
    );
    counter(
        "mewa_edge_hint_rebuilds_total",
        "Hint book rebuilds.",
        get(&m.rebuilds),
    );
    counter(
        "mewa_edge_tracer_runs_total",
        "Pages the tracer traced and stored.",
        edge.tracer_runs.load(Ordering::Relaxed),
    );
    counter(
        "mewa_edge_tracer_errors_total",
        "Page traces that failed (not loaded, or not stored).",
        edge.tracer_errors.load(Ordering::Relaxed),
    );
    counter(
        "mewa_edge_latency_probe_failures_total",
        "Latency probes that failed.",
        edge.probe_failures.load(Ordering::Relaxed),
    );
    let _ = writeln!(
        s,
        "# HELP mewa_edge_hint_bytes Size of the hints sent, bytes.\n# TYPE mewa_edge_hint_bytes histogram"
    );
    let mut cum = 0;
    for (i, bound) in HINT_BUCKETS.iter().enumerate() {
        cum += get(&m.hint_bytes[i]);
        let _ = writeln!(s, "mewa_edge_hint_bytes_bucket{{le=\"{bound}\"}} {cum}");
    }
    cum += get(&m.hint_bytes[HINT_BUCKETS.len()]);
    let _ = writeln!(s, "mewa_edge_hint_bytes_bucket{{le=\"+Inf\"}} {cum}");
    let _ = writeln!(s, "mewa_edge_hint_bytes_sum {}", get(&m.hint_bytes_sum));
    let _ = writeln!(s, "mewa_edge_hint_bytes_count {cum}");
    let _ = writeln!(
        s,
        "# HELP mewa_edge_hint_book_pages Pages with a hint ready.\n# TYPE mewa_edge_hint_book_pages gauge\nmewa_edge_hint_book_pages {}",
        edge.dns.book().len()
    );
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn status_page(edge: &Edge) -> Result<Response<Full<Bytes>>, StoreJobError> {
    let (pages, origins, stats) =
        with_store(&edge.store, |s| Ok((s.pages()?, s.origins()?, s.stats()?))).await?;
    let m = &edge.dns.metrics;
    let now = now_unix_s();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mewa edge</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:first-child{{text-align:left}}</style>\
         </head><body><h1>mewa edge</h1><p>DNS queries: {} UDP, {} TCP; hints sent: {} with URLs, {} full, {} partial, \
         {} unknown page, {} retry over TCP; forwarded: {}; errors: {}. Hint book: {} pages. \
         Store: <code>{}</code>.</p>",
        m.queries_udp.load(Ordering::Relaxed),
        m.queries_tcp.load(Ordering::Relaxed),
        m.hints_urls.load(Ordering::Relaxed),
        m.hints_full.load(Ordering::Relaxed),
        m.hints_partial.load(Ordering::Relaxed),
        m.hints_unknown.load(Ordering::Relaxed),
        m.hints_retry_tcp.load(Ordering::Relaxed),
        m.forwarded.load(Ordering::Relaxed),
        m.errors.load(Ordering::Relaxed),
        edge.dns.book().len(),
        esc(&format!("{stats:?}")),
    );
    h.push_str("<h2>Pages</h2><table><tr><th>page</th><th>objects</th><th>KB</th><th>queries</th><th>hint</th></tr>");
    for p in &pages {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td><a href=\"/api/hint?url={}\">preview</a></td></tr>",
            esc(&p.url),
            p.objects,
            p.known_bytes as f64 / 1000.0,
            p.queries,
            esc(&p.url.replace('%', "%25").replace('&', "%26").replace('#', "%23")),
        );
    }
    h.push_str("</table><h2>Edge → origin RTT</h2><table><tr><th>origin</th><th>RTT ms</th><th>age s</th></tr>");
    for o in &origins {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
            esc(&o.host),
            f64::from(o.rtt_us) / 1000.0,
            now.saturating_sub(o.measured_at_unix_s)
        );
    }
    h.push_str("</table><p>API: /api/pages, /api/hint?url=, /api/latency, /api/queries, /api/stats, /metrics</p></body></html>");
    Ok(respond(StatusCode::OK, "text/html; charset=utf-8", h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_parameters_come_from_the_path_and_query() {
        assert_eq!(route("/", None), Route::Status);
        assert_eq!(route("/metrics", Some("x=1")), Route::Metrics);
        assert_eq!(route("/api/pages/", None), Route::NotFound);
        assert_eq!(
            route(
                "/api/hint",
                Some("a=1&url=http%3A%2F%2Fwww.a.example%2F%3Fq%3Da+b")
            ),
            Route::Hint {
                url: Some("http://www.a.example/?q=a b".into())
            }
        );
        assert_eq!(route("/api/hint", None), Route::Hint { url: None });
        // Defaults for what is missing or not a number; k is capped.
        assert_eq!(
            route(
                "/api/queries",
                Some("window_s=-5&k=99999999999999999999999")
            ),
            Route::Queries {
                window_s: 3600,
                k: 20
            }
        );
        assert_eq!(
            route("/api/queries", Some("window_s=60&k=50000")),
            Route::Queries {
                window_s: 60,
                k: MAX_TOP_PAGES
            }
        );
        // Broken escapes stay, bytes that are not UTF-8 are replaced, the
        // first of two parameters counts.
        assert_eq!(query_param(Some("u=%zz%4"), "u").as_deref(), Some("%zz%4"));
        assert_eq!(query_param(Some("u=%ff"), "u").as_deref(), Some("\u{fffd}"));
        assert_eq!(query_param(Some("u=1&u=2"), "u").as_deref(), Some("1"));
        assert_eq!(query_param(Some("u"), "u").as_deref(), Some(""));
        assert_eq!(query_param(Some("uu=1"), "u"), None);
    }
}
