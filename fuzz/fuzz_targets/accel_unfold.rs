//! The accelerator's path mapping is its security boundary (never an open
//! proxy): for any request target `unfold` must not panic, and a target it
//! returns must be a host on the allowlist, exactly, that the `url` crate
//! (the WHATWG URL Standard, as a fetcher parses it) reads as that host on
//! the default port without userinfo. Folding that URL again must map back
//! to the same URL.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_accel::mapping::{fold, unfold, Scheme};

#[path = "../common/accel_sites.rs"]
mod accel_sites;
use accel_sites::sites;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(path) = std::str::from_utf8(rest) else {
        return;
    };
    let site = &sites()[usize::from(which & 1)];
    let Ok(Some(target)) = unfold(site, path) else {
        return;
    };
    assert!(site.folds(&target.host), "{path:?} -> {target:?}");
    let to_fetch = target.url(Scheme::Https);
    let u = url::Url::parse(&to_fetch).expect("targets parse");
    assert_eq!(u.host_str(), Some(target.host.as_str()), "{path:?}");
    assert_eq!(u.port(), None, "{path:?}");
    assert!(
        u.username().is_empty() && u.password().is_none(),
        "{path:?}"
    );
    let page = url::Url::parse("https://a.example/").expect("page URL");
    if let Some(again) = fold(site, &page, &to_fetch) {
        let sent = again.split('#').next().unwrap_or_default();
        let back = unfold(site, sent)
            .expect("folded paths unfold")
            .expect("a target");
        let mut want = u.clone();
        want.set_fragment(None);
        assert_eq!(back.url(Scheme::Https), want.as_str(), "{path:?}");
    }
});
