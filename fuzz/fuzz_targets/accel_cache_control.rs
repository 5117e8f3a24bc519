//! The accelerator's reading of RFC 5861's `Cache-Control` extensions on
//! any header values (the origin's response, the client's request): no
//! panic; a stale window, when there is one, starts at the end of the
//! response's freshness and lasts at most `MAX_STALE_SECS`; none exists
//! for a response that says `must-revalidate`; and a request asking for
//! `no-cache` is never given a stale copy.
#![no_main]

use std::time::{Duration, SystemTime};

use http_cache_semantics::{CacheOptions, CachePolicy};
use libfuzzer_sys::fuzz_target;
use mewa_accel::cache::{stale_usable, StaleWindows, MAX_STALE_SECS};

/// Header map of `name` fields, one per line of `text` that is a valid
/// field value.
fn fields(name: http::HeaderName, text: &[u8]) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    for line in text.split(|&b| b == b'\n') {
        if let Ok(v) = http::HeaderValue::from_bytes(line) {
            h.append(name.clone(), v);
        }
    }
    h
}

fuzz_target!(|data: &[u8]| {
    // Response fields, then (after a NUL) the request's.
    let (res, req) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let headers = fields(http::header::CACHE_CONTROL, res);
    let request = http::Request::get("https://b.example/x.png")
        .body(())
        .expect("request")
        .into_parts()
        .0;
    let mut response = http::Response::new(()).into_parts().0;
    response.headers = headers.clone();
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let policy = CachePolicy::new_options(&request, &response, now, CacheOptions::default());
    let ttl = policy.time_to_live(now);
    let w = StaleWindows::of(&policy, &headers, now);
    let Some(stale_from) = now.checked_add(ttl) else {
        // Freshness past the end of time: never stale, no window.
        assert_eq!(w, StaleWindows::default(), "{headers:?}");
        return;
    };
    for t in [w.while_revalidate, w.if_error].into_iter().flatten() {
        assert!(t >= stale_from, "{headers:?}");
        assert!(
            t <= stale_from + Duration::from_secs(MAX_STALE_SECS),
            "{headers:?}"
        );
    }
    // Where every line is a field of plain ASCII, the directives named in
    // it were read.
    let read_whole = |text: &[u8], fields: &http::HeaderMap| {
        text.is_ascii() && fields.len() == text.split(|&b| b == b'\n').count()
    };
    let names = |text: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(text)
            .split(['\n', ','])
            .filter_map(|d| d.trim().split('=').next().map(str::to_ascii_lowercase))
            .collect()
    };
    if read_whole(res, &headers) && names(res).iter().any(|n| n == "must-revalidate") {
        assert_eq!(w, StaleWindows::default(), "{headers:?}");
    }
    let asks = fields(http::header::CACHE_CONTROL, req);
    let no_cache = read_whole(req, &asks) && names(req).iter().any(|n| n == "no-cache");
    let Some(later) = stale_from.checked_add(Duration::from_secs(1)) else {
        return;
    };
    for until in [w.while_revalidate, w.if_error] {
        let usable = stale_usable(until, &asks, later);
        if until.is_none() || no_cache {
            assert!(!usable, "{headers:?} {asks:?}");
        }
    }
});
