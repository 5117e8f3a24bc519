//! The request → response function shared by HTTP/1.1, HTTP/2 and HTTP/3.
//!
//! Pure (no I/O, no clock): the listeners call it with the parsed request and
//! send what it returns, after the optional think time. Order of checks: host
//! (400 missing / 421 unknown), path (400 traversal or malformed), method (405),
//! object (404), then conditional requests (304) and the object itself.

use std::time::Duration;

use bytes::Bytes;
use http::header::{
    ACCESS_CONTROL_ALLOW_ORIGIN, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HOST,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LOCATION,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use mewa_corpus::Scheme;

use crate::store::{normalize_host, Entry, Store};

/// Per-response behaviour and per-connection limits of the HTTP listeners.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// `Cache-Control: max-age=N` on every object. Default 0: experiments
    /// measure cold loads and a revisit must revalidate (and get a 304).
    pub max_age: u32,
    /// Server think time before each response (emulates an origin's
    /// processing time; seed 001's computation latency lives in the pages).
    pub think: Duration,
    /// A request must arrive whole (HTTP/1.1 head and body) within this
    /// time of its first byte, or the connection is closed (slowloris,
    /// [`crate::headguard`]). Also the TLS handshake limit.
    pub header_read_timeout: Duration,
    /// How long a connection may wait idle for its next request: an
    /// HTTP/1.1 connection between requests, a fresh connection before its
    /// first byte, an HTTP/2 one before its preface. Separate from
    /// `header_read_timeout` so that a browser's kept connections outlive
    /// its user's think time (nginx's `keepalive_timeout` is 75 s too),
    /// while a request that has started still gets the short limit.
    pub keep_alive_timeout: Duration,
    /// Largest request head accepted: HTTP/1.1 buffer (431 or close beyond
    /// it) and HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub max_header_bytes: usize,
    /// Most TCP connections at once (HTTP/1.1, h2c and TLS together);
    /// more are closed on accept.
    pub max_connections: usize,
    /// Most TCP connections at once from one source address: one client
    /// must not take every slot.
    pub max_connections_per_source: usize,
    /// HTTP/2: a connection with nothing to send and no answer pending is
    /// closed after this long without input ([`crate::h2::Config::idle_timeout`]).
    pub h2_idle_timeout: Duration,
    /// HTTP/2: a connection whose output has not moved for this long (a
    /// zero window) is closed ([`crate::h2::Config::write_timeout`]).
    pub h2_write_timeout: Duration,
    /// HTTP/2: a header block left open this long closes the connection
    /// ([`crate::h2::Config::header_block_timeout`]).
    pub h2_header_block_timeout: Duration,
    /// HTTP/2: resets past those answered before ENHANCE_YOUR_CALM
    /// ([`crate::h2::Config::max_peer_resets`], rapid reset).
    pub h2_max_peer_resets: u32,
    /// HTTP/2: PING and SETTINGS frames beyond two per stream before
    /// ENHANCE_YOUR_CALM ([`crate::h2::Config::max_control_frames`]).
    pub h2_max_control_frames: u32,
}

impl Default for HttpOptions {
    fn default() -> Self {
        let h2 = crate::h2::Config::default();
        HttpOptions {
            max_age: 0,
            think: Duration::ZERO,
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(75),
            max_header_bytes: 16 * 1024,
            max_connections: 16_384,
            max_connections_per_source: 1024,
            // One definition of the HTTP/2 defaults: the connection's own.
            h2_idle_timeout: h2.idle_timeout,
            h2_write_timeout: h2.write_timeout,
            h2_header_block_timeout: h2.header_block_timeout,
            h2_max_peer_resets: h2.max_peer_resets,
            h2_max_control_frames: h2.max_control_frames,
        }
    }
}

/// The response to `req` on a listener whose bodies link with `scheme`.
/// Bodies of `HEAD` responses are empty, with the `Content-Length` of `GET`.
pub fn respond<B>(
    store: &Store,
    scheme: Scheme,
    req: &Request<B>,
    opts: &HttpOptions,
) -> Response<Bytes> {
    let Some(host) = request_host(req) else {
        return error(StatusCode::BAD_REQUEST, "missing Host header or :authority");
    };
    if !store.has_host(&host) {
        return error(
            StatusCode::MISDIRECTED_REQUEST,
            &format!("no virtual host `{host}` in this corpus"),
        );
    }
    let path = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    // A path the corpus holds verbatim is served as recorded, even when it
    // has what the checks refuse in general (recorded URLs carry `%2F`).
    let known = store.get_exact(&host, path).is_some();
    if let (false, Err(why)) = (known, check_request_path(path)) {
        return error(StatusCode::BAD_REQUEST, why);
    }
    let head = match *req.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => {
            let mut r = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET and HEAD are served",
            );
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
    };
    let Some(entry) = store.get(&host, path) else {
        store
            .misses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return error(
            StatusCode::NOT_FOUND,
            &format!("no object `{path}` on `{host}`"),
        );
    };
    object(entry, scheme, req.headers(), head, opts)
}

/// How long the server thinks before answering `req`: the listener-wide
/// [`HttpOptions::think`] plus the object's own (recorded) think time.
pub fn think_time<B>(store: &Store, req: &Request<B>, opts: &HttpOptions) -> Duration {
    let own = request_host(req)
        .and_then(|h| {
            let path = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
            store.get(&h, path).map(|e| e.think)
        })
        .unwrap_or(Duration::ZERO);
    opts.think + own
}

/// The host the request names: `:authority` (HTTP/2, HTTP/3, absolute-form
/// HTTP/1.1) or else `Host`, without port, normalized.
pub(crate) fn request_host<B>(req: &Request<B>) -> Option<String> {
    let raw = match req.uri().authority() {
        Some(a) => a.host().to_owned(),
        None => {
            let h = req.headers().get(HOST)?.to_str().ok()?;
            let auth: http::uri::Authority = h.parse().ok()?;
            auth.host().to_owned()
        }
    };
    if raw.is_empty() {
        return None;
    }
    Some(normalize_host(&raw))
}

/// Rejects what could escape the corpus or is not a path: not starting with
/// `/`, a `.` or `..` segment before or after percent-decoding (`%2e%2e`),
/// an encoded `/` or `\`, a backslash, NUL, or a broken escape.
fn check_request_path(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("request target is not an absolute path");
    }
    let before_query = path.split('?').next().unwrap_or(path);
    let decoded = percent_decode(before_query).ok_or("broken percent-escape in path")?;
    if decoded.contains(&b'\\') || decoded.contains(&0) {
        return Err("backslash or NUL in path");
    }
    if before_query.to_ascii_lowercase().contains("%2f") {
        return Err("encoded '/' in path");
    }
    if decoded
        .split(|&b| b == b'/')
        .any(|seg| seg == b".." || seg == b".")
    {
        return Err("path traversal ('.' or '..' segment) is not allowed");
    }
    Ok(())
}

/// `%XX` decoding; `None` on a broken escape.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The object, or 304 when the client's copy is current (RFC 9110 §13.2.2:
/// `If-None-Match` first; `If-Modified-Since` only without it).
fn object(
    entry: &Entry,
    scheme: Scheme,
    headers: &HeaderMap,
    head: bool,
    opts: &HttpOptions,
) -> Response<Bytes> {
    let (body, etag) = entry.for_scheme(scheme);
    let not_modified = if let Some(inm) = headers.get(IF_NONE_MATCH) {
        none_match_hits(inm, etag)
    } else if let Some(ims) = headers.get(IF_MODIFIED_SINCE) {
        // An unparsable date is ignored (RFC 9110 §13.1.3).
        ims.to_str()
            .ok()
            .and_then(|s| httpdate::parse_http_date(s).ok())
            .is_some_and(|since| since >= truncate_secs(entry.last_modified))
    } else {
        false
    };
    let mut b = Response::builder()
        .header(ETAG, etag)
        .header(LAST_MODIFIED, httpdate::fmt_http_date(entry.last_modified))
        .header(CACHE_CONTROL, format!("max-age={}", opts.max_age))
        // A page's fonts and `crossorigin` fetches live on its other hosts;
        // a browser drops them without this header, and then loads less
        // than the corpus models. Public static objects, no credentials:
        // `*` is safe.
        .header(ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    let recorded = StatusCode::from_u16(entry.status).unwrap_or(StatusCode::OK);
    if let Some(target) = &entry.location {
        b = b.header(LOCATION, format!("{}://{target}", scheme.as_str()));
    }
    let (status, payload) = if not_modified && recorded == StatusCode::OK {
        (StatusCode::NOT_MODIFIED, Bytes::new())
    } else if matches!(entry.status, 204 | 205) {
        (recorded, Bytes::new())
    } else {
        b = b
            .header(CONTENT_TYPE, entry.content_type.as_str())
            .header(CONTENT_LENGTH, body.len());
        (recorded, if head { Bytes::new() } else { body.clone() })
    };
    b.status(status)
        .body(payload)
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "bad object headers"))
}

/// Weak comparison of `If-None-Match` against our tag (RFC 9110 §13.1.2).
fn none_match_hits(inm: &HeaderValue, etag: &str) -> bool {
    let Ok(s) = inm.to_str() else { return false };
    s.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

/// HTTP dates have whole seconds.
fn truncate_secs(t: std::time::SystemTime) -> std::time::SystemTime {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => std::time::UNIX_EPOCH + Duration::from_secs(d.as_secs()),
        Err(_) => t,
    }
}

/// A plain-text error with a body that says what was wrong.
fn error(status: StatusCode, why: &str) -> Response<Bytes> {
    let text = format!(
        "{} {}: {why}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let len = text.len();
    let mut r = Response::new(Bytes::from(text));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::{generate, Preset};

    fn store() -> (Store, mewa_corpus::Corpus) {
        let c = generate(Preset::Accel7, 1);
        (Store::new(&c).unwrap(), c)
    }

    fn get(host: &str, path: &str) -> Request<()> {
        Request::get(path).header(HOST, host).body(()).unwrap()
    }

    #[test]
    fn serves_object_with_headers() {
        let (s, c) = store();
        let o = &c.pages[0].objects[1];
        let r = respond(
            &s,
            Scheme::Https,
            &get(&format!("{}:443", o.host), &o.path),
            &HttpOptions::default(),
        );
        assert_eq!(r.status(), 200);
        assert_eq!(r.body().len() as u64, o.size);
        assert_eq!(r.headers()[CONTENT_TYPE], o.content_type.as_str());
        assert_eq!(r.headers()[CACHE_CONTROL], "max-age=0");
        assert_eq!(r.headers()[LAST_MODIFIED], "Mon, 01 Jan 2024 00:00:00 GMT");
        assert_eq!(r.headers()[ACCESS_CONTROL_ALLOW_ORIGIN], "*");
    }

    #[test]
    fn conditional_requests() {
        let (s, c) = store();
        let o = &c.pages[0].objects[0];
        let opts = HttpOptions::default();
        let r = respond(&s, Scheme::Http, &get(&o.host, &o.path), &opts);
        let etag = r.headers()[ETAG].clone();
        let mut q = get(&o.host, &o.path);
        q.headers_mut().insert(IF_NONE_MATCH, etag.clone());
        assert_eq!(respond(&s, Scheme::Http, &q, &opts).status(), 304);
        // The https body differs (its links), so its tag does too.
        assert_eq!(respond(&s, Scheme::Https, &q, &opts).status(), 200);
        let mut q = get(&o.host, &o.path);
        q.headers_mut().insert(
            IF_MODIFIED_SINCE,
            HeaderValue::from_static("Mon, 01 Jan 2024 00:00:00 GMT"),
        );
        assert_eq!(respond(&s, Scheme::Http, &q, &opts).status(), 304);
        q.headers_mut().insert(
            IF_MODIFIED_SINCE,
            HeaderValue::from_static("Sun, 31 Dec 2023 23:59:59 GMT"),
        );
        assert_eq!(respond(&s, Scheme::Http, &q, &opts).status(), 200);
        // If-None-Match wins over If-Modified-Since.
        q.headers_mut()
            .insert(IF_NONE_MATCH, HeaderValue::from_static("\"nope\""));
        q.headers_mut().insert(
            IF_MODIFIED_SINCE,
            HeaderValue::from_static("Mon, 01 Jan 2024 00:00:00 GMT"),
        );
        assert_eq!(respond(&s, Scheme::Http, &q, &opts).status(), 200);
    }

    #[test]
    fn rejects_what_it_must() {
        let (s, c) = store();
        let host = c.pages[0].objects[0].host.clone();
        let opts = HttpOptions::default();
        let st = |r: Request<()>| respond(&s, Scheme::Http, &r, &opts).status();
        assert_eq!(st(get("nowhere.example", "/")), 421);
        assert_eq!(st(Request::get("/").body(()).unwrap()), 400);
        assert_eq!(st(get(&host, "/no/such/object")), 404);
        for p in [
            "/../etc/passwd",
            "/a/%2e%2e/%2E%2E/etc/passwd",
            "/a/./b",
            "/a%2fb",
            "/%zz",
            "/a%5c..%5cb",
        ] {
            assert_eq!(st(get(&host, p)), 400, "{p}");
        }
        let post = Request::post("/").header(HOST, &host).body(()).unwrap();
        let r = respond(&s, Scheme::Http, &post, &opts);
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
    }

    #[test]
    fn head_has_length_but_no_body() {
        let (s, c) = store();
        let o = &c.pages[0].objects[0];
        let q = Request::head(o.path.as_str())
            .header(HOST, &o.host)
            .body(())
            .unwrap();
        let r = respond(&s, Scheme::Http, &q, &HttpOptions::default());
        assert_eq!(r.status(), 200);
        assert!(r.body().is_empty());
        assert_eq!(r.headers()[CONTENT_LENGTH], o.size.to_string().as_str());
    }

    /// A recorded page's exchanges: a redirect to the document, a 204
    /// beacon, a 404, think time, and a recorded path with `%2F`.
    #[test]
    fn replays_recorded_statuses_redirects_and_think_time() {
        let mut c = generate(Preset::Accel7, 1);
        let p = &mut c.pages[0];
        let host = p.objects[0].host.clone();
        let doc = p.objects[0].clone();
        // `/` now redirects to `/home`, the old document.
        for o in &mut p.objects {
            o.id += 10;
            if o.parent.is_some() {
                o.parent = o.parent.map(|x| x + 10);
            }
        }
        p.objects[0].path = "/home".into();
        p.objects[0].parent = Some(0);
        p.objects[0].discovery = mewa_corpus::Discovery::Redirect;
        p.objects[0].think_ms = 40;
        p.objects.push(mewa_corpus::Object {
            id: 0,
            size: 20,
            parent: None,
            status: Some(301),
            ..doc.clone()
        });
        let doc_id = p.objects[0].id;
        let mut extra = |id: u32, path: &str, status: u16, size: u64| {
            p.objects.push(mewa_corpus::Object {
                id,
                path: path.into(),
                size,
                parent: Some(doc_id),
                status: Some(status),
                content_type: "text/plain".into(),
                ..doc.clone()
            })
        };
        extra(1, "/beacon", 204, 0);
        extra(2, "/gone", 404, 50);
        extra(3, "/a%2Fb", 200, 7);
        c.validate().unwrap();
        let s = Store::new(&c).unwrap();
        let opts = HttpOptions::default();
        let r = respond(&s, Scheme::Https, &get(&host, "/"), &opts);
        assert_eq!(r.status(), 301);
        assert_eq!(
            r.headers()[LOCATION],
            format!("https://{host}/home").as_str()
        );
        assert_eq!(r.body().len(), 20);
        let r = respond(&s, Scheme::Http, &get(&host, "/"), &opts);
        assert_eq!(
            r.headers()[LOCATION],
            format!("http://{host}/home").as_str()
        );
        assert_eq!(
            respond(&s, Scheme::Https, &get(&host, "/home"), &opts).status(),
            200
        );
        let r = respond(&s, Scheme::Https, &get(&host, "/beacon"), &opts);
        assert_eq!((r.status().as_u16(), r.body().len()), (204, 0));
        assert!(r.headers().get(CONTENT_LENGTH).is_none());
        let r = respond(&s, Scheme::Https, &get(&host, "/gone"), &opts);
        assert_eq!((r.status().as_u16(), r.body().len()), (404, 50));
        // Recorded verbatim, so served; an unrecorded `%2F` path is refused.
        assert_eq!(
            respond(&s, Scheme::Https, &get(&host, "/a%2Fb"), &opts).status(),
            200
        );
        assert_eq!(
            respond(&s, Scheme::Https, &get(&host, "/x%2Fy"), &opts).status(),
            400
        );
        // Unrecorded URLs: a fast 404, counted.
        let before = s.misses.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            respond(&s, Scheme::Https, &get(&host, "/nope"), &opts).status(),
            404
        );
        assert_eq!(
            s.misses.load(std::sync::atomic::Ordering::Relaxed),
            before + 1
        );
        // Think time: the object's own plus the listener's.
        let think = HttpOptions {
            think: Duration::from_millis(5),
            ..HttpOptions::default()
        };
        assert_eq!(
            think_time(&s, &get(&host, "/home"), &think),
            Duration::from_millis(45)
        );
        assert_eq!(
            think_time(&s, &get(&host, "/"), &think),
            Duration::from_millis(5)
        );
    }
}
