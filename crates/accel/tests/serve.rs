//! The accelerator end to end on loopback: a small origin serving three
//! hosts (a.example's page, b.example's and c.example's resources), the
//! accelerator in front, and hyper clients (HTTP/1.1 in clear, HTTP/2 over
//! TLS). No root needed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mewa_accel::server::config::{Listen, TlsFiles};
use mewa_accel::server::{ServeConfig, Server};
use mewa_accel::site::SiteConfig;
use tokio::net::TcpListener;

/// What the origin saw: host, path, request headers.
type Seen = Arc<Mutex<Vec<(String, String, http::HeaderMap)>>>;

const PAGE: &str = r#"<!doctype html><html><head>
<link rel="stylesheet" href="http://b.example/s.css">
</head><body>
<img src="http://b.example/x.png"><img src="http://c.example/y.png">
<img src="http://other.example/z.png"><a href="http://b.example/page.html">b</a>
</body></html>"#;

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).expect("gzip");
    e.finish().expect("gzip")
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("gunzip");
    out
}

/// The origin's answers.
fn answer(host: &str, path: &str, req: &http::HeaderMap) -> http::Response<Full<Bytes>> {
    let b = http::Response::builder();
    let (b, body): (_, Vec<u8>) = match (host, path) {
        ("a.example", "/") => (
            b.header("content-type", "text/html; charset=utf-8")
                .header("cache-control", "max-age=60"),
            PAGE.into(),
        ),
        ("a.example", "/gz") => (
            b.header("content-type", "text/html")
                .header("content-encoding", "gzip")
                .header("cache-control", "max-age=60"),
            gzip(PAGE.as_bytes()),
        ),
        ("a.example", "/csp") => (
            b.header("content-type", "text/html")
                .header("content-security-policy", "img-src http://b.example"),
            PAGE.into(),
        ),
        ("a.example", "/csp-bad") => (
            b.header("content-type", "text/html").header(
                "content-security-policy",
                http::HeaderValue::from_bytes(b"img-src http://b.example/\xe9").expect("obs-text"),
            ),
            PAGE.into(),
        ),
        ("a.example", "/me") => (
            b.header("content-type", "text/plain")
                .header("set-cookie", "session=1"),
            b"private".to_vec(),
        ),
        ("b.example", "/s.css") => (
            b.header("content-type", "text/css")
                .header("cache-control", "max-age=60"),
            b"body{background:url(http://b.example/bg.png)}".to_vec(),
        ),
        ("b.example", "/slow.png") => (
            b.header("content-type", "image/png")
                .header("cache-control", "max-age=60"),
            vec![9u8; 20_000],
        ),
        ("b.example", "/x.png") => (
            b.header("content-type", "image/png")
                .header("cache-control", "max-age=60")
                .header("etag", "\"x1\""),
            vec![7u8; 5000],
        ),
        ("b.example", "/stale.png") => {
            if req.get("if-none-match").is_some_and(|v| v == "\"s1\"") {
                return b
                    .status(304)
                    .header("etag", "\"s1\"")
                    .header("cache-control", "max-age=0")
                    .body(Full::new(Bytes::new()))
                    .expect("304");
            }
            (
                b.header("content-type", "image/png")
                    .header("cache-control", "max-age=0")
                    .header("etag", "\"s1\""),
                vec![1u8; 100],
            )
        }
        // Stale a second after it was stored; the ETag makes a
        // revalidation a 304 (and `/sie.png`'s and `/err.png`'s a 503: the
        // origin is failing).
        ("b.example", "/gated-swr.png" | "/slow-reval.png" | "/sie.png" | "/err.png") => {
            let cc = match path {
                "/gated-swr.png" => "max-age=1, stale-while-revalidate=60",
                "/sie.png" => "max-age=1, stale-if-error=60",
                _ => "max-age=1",
            };
            if req.get("if-none-match").is_some_and(|v| v == "\"r1\"") {
                let failing = matches!(path, "/sie.png" | "/err.png");
                return b
                    .status(if failing { 503 } else { 304 })
                    .header("etag", "\"r1\"")
                    .header("cache-control", cc)
                    .body(Full::new(Bytes::new()))
                    .expect("304");
            }
            (
                b.header("content-type", "image/png")
                    .header("cache-control", cc)
                    .header("etag", "\"r1\""),
                vec![3u8; 300],
            )
        }
        ("c.example", "/y.png") => (
            b.header("content-type", "image/png")
                .header("set-cookie", "track=1; Domain=c.example"),
            vec![2u8; 100],
        ),
        _ => (b.status(404), b"no".to_vec()),
    };
    b.body(Full::new(Bytes::from(body))).expect("response")
}

/// Holds the origin's answers to revalidations of `/gated…` paths until
/// the test adds permits.
type Gate = Arc<tokio::sync::Semaphore>;

async fn origin(tls: Option<Arc<rustls::ServerConfig>>) -> (SocketAddr, Seen, Gate) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let addr = l.local_addr().expect("addr");
    let seen: Seen = Arc::default();
    let gate: Gate = Arc::new(tokio::sync::Semaphore::new(0));
    let s = seen.clone();
    let g = gate.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else {
                return;
            };
            let s = s.clone();
            let g = g.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<Incoming>| {
                    let s = s.clone();
                    let g = g.clone();
                    async move {
                        let host = req
                            .headers()
                            .get("host")
                            .and_then(|h| h.to_str().ok())
                            .unwrap_or("")
                            .to_owned();
                        let path = req.uri().path().to_owned();
                        let r = answer(&host, &path, req.headers());
                        let slow = path.starts_with("/slow");
                        s.lock()
                            .expect("seen")
                            .push((host, path.clone(), req.headers().clone()));
                        // An origin that takes its time, so that misses
                        // for the same URL overlap.
                        if slow {
                            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                        }
                        if path.starts_with("/gated") && req.headers().contains_key("if-none-match")
                        {
                            let _open = g.acquire().await.expect("gate");
                        }
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let b = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    Some(a) => {
                        if let Ok(t) = a.accept(tcp).await {
                            let _ = b.serve_connection(TokioIo::new(t), svc).await;
                        }
                    }
                    None => {
                        let _ = b.serve_connection(TokioIo::new(tcp), svc).await;
                    }
                }
            });
        }
    });
    (addr, seen, gate)
}

fn config(origin: SocketAddr, tls: Option<TlsFiles>, prefix: &str) -> ServeConfig {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut c = ServeConfig {
        listen: Listen {
            https: tls.as_ref().map(|_| any),
            http: Some(any),
            admin: Some(any),
        },
        tls,
        site: vec![SiteConfig {
            hosts: vec!["a.example".into()],
            fold: vec!["b.example".into(), "c.example".into()],
            prefix: prefix.into(),
        }],
        ..ServeConfig::default()
    };
    for h in ["a.example", "b.example", "c.example"] {
        c.upstream.resolve.insert(h.into(), origin.to_string());
    }
    c
}

struct Running {
    server_http: SocketAddr,
    server_https: Option<SocketAddr>,
    admin: SocketAddr,
    accel: Arc<mewa_accel::server::Accel>,
    seen: Seen,
    gate: Gate,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(tls: Option<TlsFiles>, prefix: &str) -> Running {
    start_with(tls, prefix, |_| {}).await
}

/// [`start`] with the configuration changed by `adjust` first.
async fn start_with(
    tls: Option<TlsFiles>,
    prefix: &str,
    adjust: impl FnOnce(&mut ServeConfig),
) -> Running {
    // With TLS, the origin speaks it too, with the same certificate, which
    // the accelerator trusts.
    // The test origin speaks HTTP/1.1 only (the HTTP/2 upstream path is
    // covered by the lab, whose origins speak both).
    let origin_tls = tls.as_ref().map(|f| {
        let mut c = mewa_accel::server::tls_config(f).expect("origin TLS config");
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(c)
    });
    let (o, seen, gate) = origin(origin_tls).await;
    let mut cfg = config(o, tls.clone(), prefix);
    if let Some(f) = &tls {
        cfg.upstream.ca_file = f.cert.clone();
    }
    adjust(&mut cfg);
    let server = Server::bind(&cfg).await.expect("accel binds");
    let server_http = server.http_addr().expect("http");
    let server_https = server.https_addr();
    let admin = server.admin_addr().expect("admin");
    let accel = server.accel().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(async {
        let _ = rx.await;
    }));
    Running {
        server_http,
        server_https,
        admin,
        accel,
        seen,
        gate,
        _stop: tx,
    }
}

/// One HTTP/1.1 request; returns status, headers and body.
async fn get(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, Vec<u8>) {
    request(addr, http::Method::GET, host, path, headers).await
}

async fn request(
    addr: SocketAddr,
    method: http::Method,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, http::HeaderMap, Vec<u8>) {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut b = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    let res = send
        .send_request(b.body(Empty::<Bytes>::new()).expect("request"))
        .await
        .expect("response");
    let status = res.status().as_u16();
    let h = res.headers().clone();
    let body = res
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    (status, h, body)
}

fn count(seen: &Seen, host: &str, path: &str) -> usize {
    seen.lock()
        .expect("seen")
        .iter()
        .filter(|(h, p, _)| h == host && p == path)
        .count()
}

fn metric(accel: &mewa_accel::server::Accel, name: &str) -> u64 {
    let text = mewa_accel::server::admin::prometheus(accel);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("mewa_accel_{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in\n{text}"))
}

#[tokio::test]
async fn a_page_is_folded_and_its_resources_come_from_the_cache() {
    let r = start(None, "").await;
    let (status, h, body) = get(r.server_http, "a.example", "/", &[]).await;
    assert_eq!(status, 200);
    let html = String::from_utf8(body).expect("utf-8");
    assert!(html.contains(r#"href="/b.example/s.css""#), "{html}");
    assert!(html.contains(r#"src="/b.example/x.png""#), "{html}");
    assert!(html.contains(r#"src="/c.example/y.png""#), "{html}");
    // Off the list, and followed links: untouched.
    assert!(
        html.contains(r#"src="http://other.example/z.png""#),
        "{html}"
    );
    assert!(
        html.contains(r#"href="http://b.example/page.html""#),
        "{html}"
    );
    assert!(h.get("content-length").is_none());
    assert_eq!(
        h.get("via").map(|v| v.as_bytes()),
        Some(&b"1.1 mewa-accel"[..])
    );

    // The folded resource, twice: fetched once from b.example.
    for _ in 0..2 {
        let (status, h, body) = get(
            r.server_http,
            "a.example",
            "/b.example/x.png",
            &[("sec-fetch-dest", "image")],
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(body, vec![7u8; 5000]);
        assert_eq!(
            h.get("content-security-policy").map(|v| v.as_bytes()),
            Some(&b"sandbox"[..])
        );
    }
    assert_eq!(count(&r.seen, "b.example", "/x.png"), 1);
    // The stylesheet of a folded host is rewritten too.
    let (_, _, css) = get(r.server_http, "a.example", "/b.example/s.css", &[]).await;
    assert_eq!(
        String::from_utf8(css).expect("css"),
        "body{background:url(/b.example/bg.png)}"
    );
    // A conditional request on a hit gets 304.
    let (status, _, body) = get(
        r.server_http,
        "a.example",
        "/b.example/x.png",
        &[("if-none-match", "\"x1\"")],
    )
    .await;
    assert_eq!((status, body.len()), (304, 0));
    assert_eq!(metric(&r.accel, "cache_hits_total"), 2);
    assert!(metric(&r.accel, "references_folded_total") >= 4);
    assert_eq!(metric(&r.accel, "documents_rewritten_total"), 1);
}

/// `n` concurrent GETs of the folded slow image; each got the whole body.
async fn concurrent_slow_gets(r: &Running, n: usize) {
    concurrent_gets(r, "/b.example/slow.png", n, 20_000).await;
}

/// `n` GETs of `path` at once, each answered 200 with `len` bytes; their
/// headers.
async fn concurrent_gets(r: &Running, path: &str, n: usize, len: usize) -> Vec<http::HeaderMap> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let addr = r.server_http;
            let path = path.to_owned();
            tokio::spawn(async move { get(addr, "a.example", &path, &[]).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        let (status, h, body) = t.await.expect("join");
        assert_eq!((status, body.len()), (200, len));
        out.push(h);
    }
    out
}

/// Waits (at most 10 s) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("gave up waiting until {what}");
}

/// Past `max-age=1`.
async fn let_it_go_stale() {
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
}

#[tokio::test]
async fn concurrent_misses_for_one_url_cost_the_origin_one_request() {
    let r = start(None, "").await;
    concurrent_slow_gets(&r, 8).await;
    assert_eq!(count(&r.seen, "b.example", "/slow.png"), 1);
    assert_eq!(metric(&r.accel, "cache_misses_total"), 1);
    assert_eq!(metric(&r.accel, "cache_collapsed_total"), 7);
    assert_eq!(metric(&r.accel, "cache_lock_timeouts_total"), 0);
    // Turned off, every miss goes to the origin.
    let r = start_with(None, "", |c| c.cache.lock_timeout_ms = 0).await;
    concurrent_slow_gets(&r, 4).await;
    assert_eq!(count(&r.seen, "b.example", "/slow.png"), 4);
    assert_eq!(metric(&r.accel, "cache_collapsed_total"), 0);
}

#[tokio::test]
async fn a_wait_for_another_fetch_runs_out_and_fetches_itself() {
    // The origin takes 300 ms; waiters give up after 50 and fetch on
    // their own, without leading a fetch of their own.
    let r = start_with(None, "", |c| c.cache.lock_timeout_ms = 50).await;
    concurrent_slow_gets(&r, 4).await;
    assert_eq!(count(&r.seen, "b.example", "/slow.png"), 4);
    assert_eq!(metric(&r.accel, "cache_lock_timeouts_total"), 3);
    assert_eq!(metric(&r.accel, "cache_collapsed_total"), 0);
}

#[tokio::test]
async fn nothing_off_the_list_is_fetched() {
    let r = start(None, "/_mewa").await;
    let (status, _, body) = get(r.server_http, "evil.example", "/", &[]).await;
    assert_eq!(status, 421, "{}", String::from_utf8_lossy(&body));
    for path in [
        "/_mewa/evil.example/x",
        "/_mewa/127.0.0.1/x",
        "/_mewa/localhost/x",
        "/_mewa/user@b.example/x",
        "/_mewa/b.example:8080/x",
        "/_mewa/b%2eexample/x",
        "/_mewa/b.example/..%2f..%2fetc",
        "/_mewa/",
    ] {
        let (status, _, body) = get(r.server_http, "a.example", path, &[]).await;
        assert_eq!(status, 400, "{path}: {}", String::from_utf8_lossy(&body));
    }
    // An absolute-form target naming another host is not a forward proxy
    // request: the site is picked by Host, and the path refused or local.
    let (status, _, _) = get(r.server_http, "a.example", "http://evil.example/x", &[]).await;
    assert!(status == 400 || status == 421 || status == 404, "{status}");
    let seen = r.seen.lock().expect("seen");
    assert!(
        seen.iter().all(|(h, _, _)| h == "a.example"),
        "{:?}",
        seen.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    drop(seen);
    assert!(metric(&r.accel, "requests_total") >= 9);
}

#[tokio::test]
async fn cookies_never_cross_between_the_site_and_folded_hosts() {
    let r = start(None, "").await;
    // The page's cookie does not reach b.example.
    let (status, _, _) = get(
        r.server_http,
        "a.example",
        "/b.example/x.png",
        &[
            ("cookie", "session=secret"),
            ("referer", "http://a.example/private/page?q=1"),
        ],
    )
    .await;
    assert_eq!(status, 200);
    {
        let seen = r.seen.lock().expect("seen");
        let (_, _, h) = seen
            .iter()
            .find(|(h, p, _)| h == "b.example" && p == "/x.png")
            .expect("fetched");
        assert!(h.get("cookie").is_none());
        assert_eq!(
            h.get("referer").map(|v| v.as_bytes()),
            Some(&b"http://a.example/"[..])
        );
    }
    // c.example's cookie does not reach the page's jar, and c.example is
    // no longer folded into new documents.
    let (status, h, _) = get(r.server_http, "a.example", "/c.example/y.png", &[]).await;
    assert_eq!(status, 200);
    assert!(h.get("set-cookie").is_none());
    let (_, _, body) = get(
        r.server_http,
        "a.example",
        "/",
        &[("cache-control", "no-cache")],
    )
    .await;
    let html = String::from_utf8(body).expect("utf-8");
    assert!(html.contains(r#"src="/b.example/x.png""#), "{html}");
    assert!(html.contains(r#"src="http://c.example/y.png""#), "{html}");
    assert_eq!(metric(&r.accel, "folding_disqualified_hosts"), 1);
    // The site's own cookies pass both ways, and such responses are not
    // stored.
    for _ in 0..2 {
        let (_, h, _) = get(
            r.server_http,
            "a.example",
            "/me",
            &[("cookie", "session=1")],
        )
        .await;
        assert_eq!(
            h.get("set-cookie").map(|v| v.as_bytes()),
            Some(&b"session=1"[..])
        );
    }
    assert_eq!(count(&r.seen, "a.example", "/me"), 2);
}

#[tokio::test]
async fn navigations_to_folded_paths_are_refused() {
    let r = start(None, "").await;
    for h in [
        [
            ("sec-fetch-dest", "document"),
            ("sec-fetch-mode", "navigate"),
        ],
        [("sec-fetch-dest", "iframe"), ("accept", "*/*")],
        [("accept", "text/html,*/*"), ("x-none", "1")],
    ] {
        let (status, _, _) = get(r.server_http, "a.example", "/b.example/x.png", &h).await;
        assert_eq!(status, 403);
    }
    let (status, _, _) = request(
        r.server_http,
        http::Method::POST,
        "a.example",
        "/b.example/x.png",
        &[],
    )
    .await;
    assert_eq!(status, 405);
    assert_eq!(count(&r.seen, "b.example", "/x.png"), 0);
}

#[tokio::test]
async fn stale_responses_are_revalidated() {
    let r = start(None, "").await;
    for _ in 0..3 {
        let (status, _, body) = get(r.server_http, "a.example", "/b.example/stale.png", &[]).await;
        assert_eq!((status, body.len()), (200, 100));
    }
    let seen = r.seen.lock().expect("seen");
    let asks: Vec<_> = seen.iter().filter(|(_, p, _)| p == "/stale.png").collect();
    assert_eq!(asks.len(), 3);
    assert!(asks[1..]
        .iter()
        .all(|(_, _, h)| h.get("if-none-match").is_some()));
    drop(seen);
    assert_eq!(metric(&r.accel, "cache_revalidations_total"), 2);
}

#[tokio::test]
async fn concurrent_requests_for_a_stale_url_revalidate_once() {
    let r = start(None, "").await;
    concurrent_gets(&r, "/b.example/slow-reval.png", 1, 300).await;
    let_it_go_stale().await;
    // The origin takes 300 ms to answer the revalidation: the other five
    // wait for it and are served what it refreshed.
    concurrent_gets(&r, "/b.example/slow-reval.png", 6, 300).await;
    assert_eq!(count(&r.seen, "b.example", "/slow-reval.png"), 2);
    assert_eq!(metric(&r.accel, "cache_revalidations_total"), 1);
    assert_eq!(metric(&r.accel, "cache_collapsed_total"), 5);
    assert_eq!(metric(&r.accel, "cache_stale_served_total"), 0);
}

#[tokio::test]
async fn stale_while_revalidate_answers_at_once_and_refreshes_once() {
    let r = start(None, "").await;
    let path = "/b.example/gated-swr.png";
    concurrent_gets(&r, path, 1, 300).await;
    let_it_go_stale().await;
    // The origin holds every revalidation of this path until the gate
    // opens: these five can only have been answered from the stale copy.
    for h in concurrent_gets(&r, path, 5, 300).await {
        let age: u64 = h
            .get("age")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("an Age header");
        assert!(age >= 1, "age {age}");
    }
    assert_eq!(metric(&r.accel, "cache_stale_served_total"), 5);
    // One refresh went to the origin, in the background.
    until("the refresh reaches the origin", || {
        count(&r.seen, "b.example", "/gated-swr.png") == 2
    })
    .await;
    r.gate.add_permits(100);
    until("the refresh is stored", || {
        metric(&r.accel, "cache_revalidations_total") == 1
    })
    .await;
    // Fresh again: a hit, and nothing more asked of the origin.
    let hits = metric(&r.accel, "cache_hits_total");
    concurrent_gets(&r, path, 1, 300).await;
    assert_eq!(metric(&r.accel, "cache_hits_total"), hits + 1);
    assert_eq!(count(&r.seen, "b.example", "/gated-swr.png"), 2);
    assert_eq!(metric(&r.accel, "cache_stale_served_total"), 5);
}

#[tokio::test]
async fn a_failing_origin_is_covered_by_stale_if_error_and_nothing_else() {
    let r = start(None, "").await;
    for p in ["/b.example/sie.png", "/b.example/err.png"] {
        concurrent_gets(&r, p, 1, 300).await;
    }
    let_it_go_stale().await;
    // Its revalidation gets a 503; stale-if-error allows the stored copy.
    concurrent_gets(&r, "/b.example/sie.png", 1, 300).await;
    assert_eq!(metric(&r.accel, "cache_stale_if_error_total"), 1);
    // Without it, the client sees the origin's error.
    let (status, _, _) = get(r.server_http, "a.example", "/b.example/err.png", &[]).await;
    assert_eq!(status, 503);
    // A client that asks for a validated answer gets the error too.
    let (status, _, _) = get(
        r.server_http,
        "a.example",
        "/b.example/sie.png",
        &[("cache-control", "no-cache")],
    )
    .await;
    assert_eq!(status, 503);
    assert_eq!(metric(&r.accel, "cache_stale_if_error_total"), 1);
}

#[tokio::test]
async fn gzip_documents_are_rewritten_and_sent_compressed() {
    let r = start(None, "").await;
    let (_, h, body) = get(
        r.server_http,
        "a.example",
        "/gz",
        &[("accept-encoding", "gzip, br")],
    )
    .await;
    assert_eq!(
        h.get("content-encoding").map(|v| v.as_bytes()),
        Some(&b"gzip"[..])
    );
    let html = String::from_utf8(gunzip(&body)).expect("utf-8");
    assert!(html.contains(r#"src="/b.example/x.png""#), "{html}");
    // A client without gzip gets it plain.
    let (_, h, body) = get(r.server_http, "a.example", "/gz", &[]).await;
    assert!(h.get("content-encoding").is_none());
    assert!(String::from_utf8(body)
        .expect("utf-8")
        .contains(r#"src="/b.example/x.png""#));
    // The origin asked with gzip, not br.
    let seen = r.seen.lock().expect("seen");
    let (_, _, first) = seen.iter().find(|(_, p, _)| p == "/gz").expect("asked");
    assert_eq!(
        first.get("accept-encoding").map(|v| v.as_bytes()),
        Some(&b"gzip"[..])
    );
}

#[tokio::test]
async fn a_content_security_policy_is_adjusted_for_the_folded_paths() {
    let r = start(None, "").await;
    let (_, h, body) = get(r.server_http, "a.example", "/csp", &[]).await;
    let html = String::from_utf8(body).expect("utf-8");
    assert!(html.contains(r#"src="/b.example/x.png""#), "{html}");
    let csp = h
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .expect("policy kept");
    assert!(csp.starts_with("img-src http://b.example "), "{csp}");
    assert!(
        csp.contains("a.example") && csp.contains("/b.example/"),
        "{csp}"
    );
    // Nothing for c.example, which the policy did not allow.
    assert!(!csp.contains("c.example"), "{csp}");
    assert_eq!(metric(&r.accel, "csp_adjusted_total"), 1);
    // A policy that cannot be read: the page goes out as it came.
    let (_, _, body) = get(r.server_http, "a.example", "/csp-bad", &[]).await;
    assert_eq!(String::from_utf8(body).expect("utf-8"), PAGE);
    let text = mewa_accel::server::admin::prometheus(&r.accel);
    assert!(
        text.contains("mewa_accel_unrewritten_total{reason=\"csp\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn the_admin_listener_purges_and_reports() {
    let r = start(None, "").await;
    get(r.server_http, "a.example", "/b.example/x.png", &[]).await;
    get(r.server_http, "a.example", "/b.example/x.png", &[]).await;
    assert_eq!(count(&r.seen, "b.example", "/x.png"), 1);
    let (status, _, body) = request(
        r.admin,
        http::Method::POST,
        "admin",
        "/purge?host=b.example",
        &[],
    )
    .await;
    assert_eq!(
        (status, String::from_utf8(body).expect("json")),
        (200, "{\"purged\":1}\n".into())
    );
    get(r.server_http, "a.example", "/b.example/x.png", &[]).await;
    assert_eq!(count(&r.seen, "b.example", "/x.png"), 2);
    let (status, h, page) = get(r.admin, "admin", "/", &[]).await;
    assert_eq!(status, 200);
    assert!(h
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html")));
    assert!(String::from_utf8(page).expect("html").contains("b.example"));
    let (status, _, metrics) = get(r.admin, "admin", "/metrics", &[]).await;
    assert_eq!(status, 200);
    assert!(String::from_utf8(metrics)
        .expect("text")
        .contains("mewa_accel_cache_hits_total 1"));
    let (status, _, _) = get(r.admin, "admin", "/purge?all", &[]).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn http2_over_tls_carries_the_page_and_its_folded_resources() {
    let dir = std::env::temp_dir().join(format!("mewa-accel-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let names = ["a.example", "b.example", "c.example"]
        .map(str::to_owned)
        .to_vec();
    let ck = rcgen::generate_simple_self_signed(names).expect("cert");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).expect("write");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("write");
    let r = start(Some(TlsFiles { cert, key }), "").await;
    let addr = r.server_https.expect("https");

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).expect("root");
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("a.example").expect("name");
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .expect("tls");
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2");
    tokio::spawn(conn);
    // Page, stylesheet and images concurrently on the one connection; the
    // accelerator fetches them from the origins over TLS.
    let mut tasks = Vec::new();
    for path in [
        "/",
        "/b.example/x.png",
        "/b.example/s.css",
        "/c.example/y.png",
    ] {
        let mut send = send.clone();
        tasks.push(tokio::spawn(async move {
            let req = http::Request::get(format!("https://a.example{path}"))
                .body(Empty::<Bytes>::new())
                .expect("request");
            let res = send.send_request(req).await.expect("response");
            let status = res.status().as_u16();
            let body = res.into_body().collect().await.expect("body").to_bytes();
            (status, body)
        }));
    }
    let mut got = HashMap::new();
    for (i, t) in tasks.into_iter().enumerate() {
        got.insert(i, t.await.expect("task"));
    }
    assert!(got.values().all(|(s, _)| *s == 200), "{got:?}");
    let html = String::from_utf8(got[&0].1.to_vec()).expect("utf-8");
    // Only same-scheme references fold: this https page's http references
    // stay as they are (docs/ACCEL.md, "Mixed content").
    assert!(html.contains(r#"src="http://b.example/x.png""#), "{html}");
    assert_eq!(got[&1].1.len(), 5000);
    assert_eq!(metric(&r.accel, "requests_total"), 4);
    assert!(metric(&r.accel, "upstream_connections_total") >= 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// h2spec (HTTP/2 conformance) against both listeners: h2c on the
/// clear-text one, h2 over TLS. Its requests carry `:authority` =
/// 127.0.0.1:port, which is no site, so the accelerator answers 421;
/// h2spec's cases test framing, not status codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_on_h2c_and_tls() {
    let Some(bin) = mewa_testkit::h2spec_or_skip() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("mewa-accel-h2spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let ck = rcgen::generate_simple_self_signed(vec!["a.example".to_owned()]).expect("cert");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).expect("write");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("write");
    let r = start(Some(TlsFiles { cert, key }), "").await;
    let https = r.server_https.expect("https");
    for (addr, tls) in [(r.server_http, false), (https, true)] {
        let (bin, report) = (bin.clone(), dir.join(format!("h2spec-{tls}.xml")));
        // As for the origin, one case fails on the clear-text port only,
        // by design: 3.5/2, an invalid preface. That port also speaks
        // HTTP/1.1, so bytes that are not the h2 preface are an HTTP/1.1
        // request (answered 400 and closed, where h2spec wants a bare close).
        let allowed: &[&str] = if tls {
            &[]
        } else {
            &["Sends invalid connection preface"]
        };
        let run = tokio::task::spawn_blocking(move || {
            mewa_testkit::run_h2spec(&bin, addr.port(), tls, &[], allowed, &report)
        })
        .await
        .expect("h2spec task");
        run.assert_clean(if tls { "TLS" } else { "h2c" });
    }
    let _ = std::fs::remove_dir_all(&dir);
}
