//! The accelerator's Content-Security-Policy adjustment on any text, as a
//! header value and as a `<meta>` content, for both path forms and both
//! schemes: no panic; an adjusted value keeps every directive and source
//! expression in order and only appends sources on the document's origin,
//! as many as it counts; and adjusting it again adds nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mewa_accel::csp::{adjust, adjust_meta, CspAdjusted, CspError};
use mewa_accel::site::Site;

#[path = "../common/accel_sites.rs"]
mod accel_sites;
use accel_sites::sites;

type Adjust = fn(&str, &Site, &url::Url) -> Result<CspAdjusted, CspError>;

/// The source expressions of each directive, split as CSP3 §2.2.1 does
/// (policies on `,` when `commas`, directives on `;`, tokens on ASCII
/// whitespace; the name is the first token).
fn tokens(text: &str, commas: bool) -> Vec<Vec<&str>> {
    let policies: Vec<&str> = if commas {
        text.split(',').collect()
    } else {
        vec![text]
    };
    policies
        .into_iter()
        .flat_map(|p| p.split(';'))
        .map(|d| d.split_ascii_whitespace().collect::<Vec<_>>())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(policy) = std::str::from_utf8(rest) else {
        return;
    };
    let site = &sites()[usize::from(which & 1)];
    let origin = [
        "https://a.example",
        "http://a.example",
        "http://a.example:8080",
    ][usize::from((which >> 1) & 3) % 3];
    let doc = url::Url::parse(&format!("{origin}/dir/page")).expect("document URL");
    let meta = which & 0x80 != 0;
    let f: Adjust = if meta { adjust_meta } else { adjust };
    let Ok(out) = f(policy, site, &doc) else {
        return;
    };
    let before = tokens(policy, !meta);
    let after = tokens(&out.value, !meta);
    assert_eq!(before.len(), after.len(), "{policy:?}");
    let mut added = 0;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(&a[..b.len()], &b[..], "{policy:?}");
        for extra in &a[b.len()..] {
            assert!(extra.starts_with(origin), "{policy:?}: {extra}");
            added += 1;
        }
    }
    assert_eq!(added, out.added as usize, "{policy:?}");
    match f(&out.value, site, &doc) {
        Ok(again) => assert_eq!(again.added, 0, "{policy:?} -> {}", out.value),
        // The additions took it over the length limit.
        Err(CspError::TooLong) => {}
        Err(e) => panic!("{policy:?} -> {}: {e}", out.value),
    }
});
