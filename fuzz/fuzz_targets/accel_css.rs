//! The accelerator's CSS rewriter on arbitrary bytes cut into arbitrary
//! chunks, for a stylesheet on the site's own path and for one served from
//! a folded path: no panic; the same output however the input is cut; and
//! (own path) a stylesheet that cannot name an allowed host (no `q` in any
//! case, no `%` or `\`, ASCII) comes out byte for byte.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use mewa_accel::mapping::FoldContext;
use mewa_accel::rewrite::css::CssRewriter;
use mewa_accel::site::{Site, SiteConfig};

fn site() -> Arc<Site> {
    static SITE: OnceLock<Arc<Site>> = OnceLock::new();
    Arc::clone(SITE.get_or_init(|| {
        Arc::new(
            Site::new(&SiteConfig {
                hosts: vec!["a.example".into()],
                fold: vec!["q.example".into()],
                prefix: String::new(),
            })
            .expect("a valid site"),
        )
    }))
}

fn ctx(folded: bool) -> FoldContext {
    let url = |s: &str| url::Url::parse(s).expect("a URL");
    if folded {
        FoldContext::stylesheet(
            site(),
            url("https://a.example/q.example/css/s.css"),
            url("https://q.example/css/s.css"),
        )
        .expect("a site stylesheet")
    } else {
        FoldContext::document(site(), url("https://a.example/css/s.css")).expect("a site page")
    }
}

fn run(folded: bool, css: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut r = CssRewriter::new(ctx(folded));
    let mut out = Vec::new();
    let mut last = 0;
    for &c in cuts {
        r.write(&css[last..c], &mut out);
        last = c;
    }
    r.write(&css[last..], &mut out);
    r.end(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let folded = n & 0x80 != 0;
    let n = usize::from(n % 8) * 2;
    if rest.len() < n {
        return;
    }
    let (cut_bytes, css) = rest.split_at(n);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (css.len() + 1))
        .collect();
    cuts.sort_unstable();
    let whole = run(folded, css, &[]);
    assert_eq!(run(folded, css, &cuts), whole, "cut at {cuts:?}");
    let can_name_host = css
        .iter()
        .any(|b| matches!(b, b'q' | b'Q' | b'%' | b'\\') || !b.is_ascii());
    if !folded && !can_name_host {
        assert_eq!(whole, css);
    }
});
