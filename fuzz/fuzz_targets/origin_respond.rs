//! The origin's mapping of a request's `:authority`/`Host` and path to a
//! corpus object (`mewa_origin::respond`, shared by HTTP/1.1, /2 and /3)
//! must take any request target without panicking, never fail inside
//! (500), and serve nothing whose path climbs out with a `.`/`..` segment,
//! a backslash or NUL, before or after percent-decoding.
#![no_main]

use std::sync::OnceLock;

use http::{Method, Request};
use libfuzzer_sys::fuzz_target;
use mewa_corpus::gen::{generate, Preset};
use mewa_corpus::Scheme;
use mewa_origin::{respond, HttpOptions, Store};

fn store() -> &'static Store {
    static S: OnceLock<Store> = OnceLock::new();
    S.get_or_init(|| match Store::new(&generate(Preset::Accel7, 1)) {
        Ok(s) => s,
        Err(e) => panic!("the accel7 corpus must load: {e}"),
    })
}

/// `%XX` decoding that leaves a broken escape as it is.
fn decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    // The rest is "authority\npath": the authority goes in the URI
    // (HTTP/2's :authority) or in a Host header (HTTP/1.1).
    let text = String::from_utf8_lossy(rest);
    let (authority, path) = text.split_once('\n').unwrap_or(("", &text));
    let method = [Method::GET, Method::HEAD, Method::POST][usize::from(flags % 3)].clone();
    let b = Request::builder().method(method);
    let req = if flags & 4 != 0 {
        b.uri(format!("https://{authority}{path}"))
    } else {
        b.uri(path).header(http::header::HOST, authority)
    };
    let Ok(req) = req.body(()) else {
        return;
    };
    let scheme = if flags & 8 != 0 {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let r = respond(store(), scheme, &req, &HttpOptions::default());
    assert_ne!(r.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
    if r.status().is_success() || r.status().is_redirection() {
        let served = req.uri().path();
        let decoded = decode(served);
        for p in [served.as_bytes(), &decoded[..]] {
            assert!(
                !p.split(|&c| c == b'/').any(|s| s == b".." || s == b"."),
                "served a dot segment: {served}"
            );
            assert!(!p.contains(&b'\\') && !p.contains(&0), "served {served:?}");
        }
    }
});
