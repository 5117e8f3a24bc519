//! The edge's admin API reads a request's path and query string
//! (`mewa_edge::admin::route`, `query_param`): any bytes must route
//! without panicking, `k` stays capped, and a parameter percent-encoded
//! byte by byte decodes back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_edge::admin::{query_param, route, Route, MAX_TOP_PAGES};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, query) = match text.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (text, None),
    };
    match route(path, query) {
        Route::Queries { k, .. } => assert!(k <= MAX_TOP_PAGES),
        Route::Hint { url } => assert_eq!(url, query_param(query, "url")),
        Route::NotFound => assert!(!["/", "/api/pages", "/metrics"].contains(&path)),
        _ => {}
    }
    // Every byte escaped: the value comes back exactly.
    let encoded: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
    let q = format!("x=1&url={encoded}&url=2");
    assert_eq!(query_param(Some(&q), "url").as_deref(), Some(text));
});
