//! The admin side: counters, their Prometheus text form, the status page,
//! and purge. Served on its own listener (`[listen] admin`), never on the
//! public ones.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use hyper::body::Incoming;

use super::body::{full, OutBody};
use super::Accel;
use crate::cache::Purge;

/// The accelerator's counters (monotonic since start).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests received on the public listeners.
    pub requests: AtomicU64,
    /// Served from the cache without asking the origin.
    pub hits: AtomicU64,
    /// Not in the cache (or not matching): fetched.
    pub misses: AtomicU64,
    /// Served from the cache after waiting for another request's fetch of
    /// the same URL (a miss that cost the origin nothing).
    pub collapsed: AtomicU64,
    /// Waits for another request's fetch that ran out (`lock_timeout_ms`).
    pub lock_timeouts: AtomicU64,
    /// Stale, served at once inside its `stale-while-revalidate` window
    /// (one background revalidation per URL refreshes it).
    pub stale_served: AtomicU64,
    /// Stale, served because its revalidation failed, inside its
    /// `stale-if-error` window.
    pub stale_if_error: AtomicU64,
    /// Stale, revalidated with the origin and still good (304).
    pub revalidated: AtomicU64,
    /// Stale, revalidated, and the origin sent a new body.
    pub revalidated_changed: AtomicU64,
    /// Not cacheable by request (cookies, authorization, method): passed.
    pub passed: AtomicU64,
    /// Responses stored.
    pub stored: AtomicU64,
    /// HTML documents rewritten.
    pub documents_rewritten: AtomicU64,
    /// Stylesheets rewritten.
    pub stylesheets_rewritten: AtomicU64,
    /// References folded onto the document's host.
    pub refs_folded: AtomicU64,
    /// References written absolute (stylesheets on folded paths).
    pub refs_absolutized: AtomicU64,
    /// Stylesheet references kept for Subresource Integrity.
    pub refs_kept_for_integrity: AtomicU64,
    /// Content-Security-Policy values adjusted for folded paths (headers
    /// and `<meta>`).
    pub csp_adjusted: AtomicU64,
    /// `<meta>` policies that could not be adjusted (folding stopped there).
    pub csp_unadjustable: AtomicU64,
    /// Body bytes sent to clients.
    pub bytes_out: AtomicU64,
    /// Body bytes received from origins.
    pub bytes_upstream: AtomicU64,
    /// `Set-Cookie` fields removed from folded responses.
    pub cookies_stripped: AtomicU64,
    /// Folded requests refused because they were navigations.
    pub navigations_refused: AtomicU64,
    /// Requests refused by the path mapping, by reason.
    pub refused: Mutex<BTreeMap<&'static str, u64>>,
    /// Requests whose origin could not be reached, by reason.
    pub upstream_errors: Mutex<BTreeMap<&'static str, u64>>,
    /// Documents and stylesheets served unrewritten, by reason.
    pub unrewritten: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    /// Adds one to a labelled counter.
    pub fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, label: &'static str) {
        *map.lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(label)
            .or_default() += 1;
    }

    /// Adds one.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n`.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP mewa_accel_{name} {help}");
    let _ = writeln!(out, "# TYPE mewa_accel_{name} counter");
    let _ = writeln!(out, "mewa_accel_{name} {value}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP mewa_accel_{name} {help}");
    let _ = writeln!(out, "# TYPE mewa_accel_{name} gauge");
    let _ = writeln!(out, "mewa_accel_{name} {value}");
}

fn labelled(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    map: &Mutex<BTreeMap<&'static str, u64>>,
) {
    let _ = writeln!(out, "# HELP mewa_accel_{name} {help}");
    let _ = writeln!(out, "# TYPE mewa_accel_{name} counter");
    for (k, v) in map.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let _ = writeln!(out, "mewa_accel_{name}{{{label}=\"{k}\"}} {v}");
    }
}

/// The Prometheus text exposition of `accel`'s counters.
pub fn prometheus(accel: &Accel) -> String {
    let m = &accel.metrics;
    let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut o = String::new();
    counter(
        &mut o,
        "requests_total",
        "Requests received.",
        g(&m.requests),
    );
    counter(
        &mut o,
        "cache_hits_total",
        "Served from the cache.",
        g(&m.hits),
    );
    counter(
        &mut o,
        "cache_misses_total",
        "Fetched from the origin.",
        g(&m.misses),
    );
    counter(
        &mut o,
        "cache_collapsed_total",
        "Served from the cache after waiting for another request's fetch of the same URL.",
        g(&m.collapsed),
    );
    counter(
        &mut o,
        "cache_lock_timeouts_total",
        "Waits for another request's fetch of the same URL that ran out.",
        g(&m.lock_timeouts),
    );
    counter(
        &mut o,
        "cache_stale_served_total",
        "Stale responses served at once inside stale-while-revalidate, refreshed in the background.",
        g(&m.stale_served),
    );
    counter(
        &mut o,
        "cache_stale_if_error_total",
        "Stale responses served because revalidation failed, inside stale-if-error.",
        g(&m.stale_if_error),
    );
    counter(
        &mut o,
        "cache_revalidations_total",
        "Stale responses revalidated and still good (304).",
        g(&m.revalidated),
    );
    counter(
        &mut o,
        "cache_revalidations_changed_total",
        "Stale responses revalidated that came back new.",
        g(&m.revalidated_changed),
    );
    counter(
        &mut o,
        "cache_passes_total",
        "Requests not cacheable (cookies, authorization, method).",
        g(&m.passed),
    );
    counter(
        &mut o,
        "cache_stores_total",
        "Responses stored.",
        g(&m.stored),
    );
    counter(
        &mut o,
        "documents_rewritten_total",
        "HTML documents rewritten.",
        g(&m.documents_rewritten),
    );
    counter(
        &mut o,
        "stylesheets_rewritten_total",
        "Stylesheets rewritten.",
        g(&m.stylesheets_rewritten),
    );
    counter(
        &mut o,
        "references_folded_total",
        "References folded onto the document's host.",
        g(&m.refs_folded),
    );
    counter(
        &mut o,
        "references_absolutized_total",
        "References written absolute.",
        g(&m.refs_absolutized),
    );
    counter(
        &mut o,
        "references_kept_for_integrity_total",
        "Stylesheet references left for Subresource Integrity.",
        g(&m.refs_kept_for_integrity),
    );
    counter(
        &mut o,
        "csp_adjusted_total",
        "Content-Security-Policy values adjusted for folded paths.",
        g(&m.csp_adjusted),
    );
    counter(
        &mut o,
        "csp_unadjustable_total",
        "Meta Content-Security-Policy values that could not be adjusted.",
        g(&m.csp_unadjustable),
    );
    counter(
        &mut o,
        "response_bytes_total",
        "Body bytes sent to clients.",
        g(&m.bytes_out),
    );
    counter(
        &mut o,
        "upstream_bytes_total",
        "Body bytes received from origins.",
        g(&m.bytes_upstream),
    );
    counter(
        &mut o,
        "cookies_stripped_total",
        "Set-Cookie fields removed from folded responses.",
        g(&m.cookies_stripped),
    );
    counter(
        &mut o,
        "navigations_refused_total",
        "Navigations to folded paths refused.",
        g(&m.navigations_refused),
    );
    labelled(
        &mut o,
        "refused_total",
        "Requests refused by the path mapping.",
        "reason",
        &m.refused,
    );
    labelled(
        &mut o,
        "upstream_errors_total",
        "Origins not reached.",
        "reason",
        &m.upstream_errors,
    );
    labelled(
        &mut o,
        "unrewritten_total",
        "Documents or stylesheets served unrewritten.",
        "reason",
        &m.unrewritten,
    );
    let s = accel.cache.stats();
    gauge(&mut o, "cache_urls", "URLs held in memory.", s.urls);
    gauge(
        &mut o,
        "cache_responses",
        "Responses held in memory.",
        s.responses,
    );
    gauge(
        &mut o,
        "cache_memory_bytes",
        "Bytes held in memory.",
        s.memory_bytes,
    );
    gauge(&mut o, "cache_disk_urls", "URLs on disk.", s.disk_urls);
    gauge(&mut o, "cache_disk_bytes", "Bytes on disk.", s.disk_bytes);
    counter(
        &mut o,
        "cache_evictions_total",
        "Responses evicted for space.",
        s.evictions,
    );
    let p = accel.upstream.stats();
    counter(
        &mut o,
        "upstream_connections_total",
        "Connections opened to origins.",
        p.opened,
    );
    counter(
        &mut o,
        "upstream_reuses_total",
        "Requests sent on a pooled connection.",
        p.reused,
    );
    gauge(
        &mut o,
        "folding_disqualified_hosts",
        "Allowlisted hosts no longer folded because they set cookies.",
        accel.disqualified().len() as u64,
    );
    o
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The status page: sites, what is folded, the cache, the counters.
pub fn status_page(accel: &Accel) -> String {
    let mut o = String::from(
        "<!doctype html><meta charset=utf-8><title>mewa accel</title>\
         <style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}\
         pre{background:#f4f4f4;padding:1em}</style><h1>mewa accel</h1>",
    );
    let _ = write!(
        o,
        "<p>Up {:.0} s. Seed 004's accelerator: documents of these sites are served with \
         the listed hosts folded into the page's own host.</p><h2>Sites</h2>\
         <table><tr><th>hosts</th><th>folded</th><th>prefix</th></tr>",
        accel.started.elapsed().as_secs_f64()
    );
    let disq = accel.disqualified();
    for site in accel.sites.iter() {
        let hosts: Vec<&str> = site.hosts().collect();
        let folded: Vec<String> = site
            .folded_hosts()
            .map(|h| {
                if disq.contains(h) {
                    format!("<s>{}</s> (sets cookies: not folded)", esc(h))
                } else {
                    esc(h)
                }
            })
            .collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&hosts.join(", ")),
            folded.join(", "),
            esc(if site.prefix().is_empty() {
                "(seed 004 form)"
            } else {
                site.prefix()
            })
        );
    }
    let s = accel.cache.stats();
    let _ = write!(
        o,
        "</table><h2>Cache</h2><p>{} URLs, {} responses, {:.1} MiB of {:.0} MiB in memory; \
         {} URLs, {:.1} MiB on disk; {} evictions.</p><h2>Counters</h2><pre>{}</pre>\
         <p><a href=/metrics>/metrics</a> (Prometheus). Purge: <code>POST /purge?url=…</code>, \
         <code>?host=…</code> or <code>?all</code>, or <code>mewa accel purge</code>.</p>",
        s.urls,
        s.responses,
        s.memory_bytes as f64 / 1048576.0,
        accel.cache.limits().memory_bytes as f64 / 1048576.0,
        s.disk_urls,
        s.disk_bytes as f64 / 1048576.0,
        s.evictions,
        esc(&prometheus(accel)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n"))
    );
    o
}

/// Parses a purge query: `url=…`, `host=…` or `all`
/// (`application/x-www-form-urlencoded`, as a form or `curl -d` sends it).
pub fn parse_purge(query: Option<&str>) -> Result<Purge, String> {
    let mut found = None;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let p = match k.as_ref() {
            "all" => Purge::All,
            "host" if !v.is_empty() => Purge::Host(v.to_ascii_lowercase()),
            "url" if v.starts_with("http://") || v.starts_with("https://") => {
                Purge::Url(v.into_owned())
            }
            "url" => {
                return Err(format!(
                    "url {v:?}: give the absolute origin URL (https://host/path)"
                ))
            }
            _ => {
                return Err(format!(
                    "unknown purge parameter {k:?}; use url=, host= or all"
                ))
            }
        };
        if found.replace(p).is_some() {
            return Err("give one of url=, host= or all".into());
        }
    }
    found.ok_or_else(|| "nothing to purge: give url=, host= or all".into())
}

fn text(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<OutBody> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

/// Answers one admin request.
pub async fn handle(accel: Arc<Accel>, req: http::Request<Incoming>) -> Response<OutBody> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => text(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            prometheus(&accel),
        ),
        (&Method::GET, "/") => text(
            StatusCode::OK,
            "text/html; charset=utf-8",
            status_page(&accel),
        ),
        (&Method::POST, "/purge") => match parse_purge(req.uri().query()) {
            Ok(p) => {
                let n = accel.cache.purge(&p);
                tracing::info!("accel: purged {n} URLs ({p:?})");
                text(
                    StatusCode::OK,
                    "application/json",
                    format!("{{\"purged\":{n}}}\n"),
                )
            }
            Err(e) => text(
                StatusCode::BAD_REQUEST,
                "text/plain; charset=utf-8",
                format!("{e}\n"),
            ),
        },
        (_, "/purge") => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "purge with POST\n",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /, /metrics or POST /purge\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_queries() {
        assert_eq!(parse_purge(Some("all")), Ok(Purge::All));
        assert_eq!(
            parse_purge(Some("host=B.example")),
            Ok(Purge::Host("b.example".into()))
        );
        assert_eq!(
            parse_purge(Some("url=https%3A%2F%2Fb.example%2Fx.png")),
            Ok(Purge::Url("https://b.example/x.png".into()))
        );
        for bad in [
            None,
            Some(""),
            Some("url=/x"),
            Some("all&host=a"),
            Some("zap=1"),
        ] {
            assert!(parse_purge(bad).is_err(), "{bad:?}");
        }
    }
}
