//! The accelerator's HTML rewriter on arbitrary bytes cut into arbitrary
//! chunks: no panic; the same output however the input is cut; and a UTF-8
//! document that cannot name an allowed host (no `q` in any case, and no
//! `&`, `%` or `\` through which one could be spelled) comes out byte for
//! byte. (Invalid UTF-8 in a `<style>` may be replaced, as the document is
//! read as UTF-8.)
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use mewa_accel::mapping::FoldContext;
use mewa_accel::rewrite::html::{HtmlOptions, HtmlRewriter};
use mewa_accel::site::{Site, SiteConfig};

fn ctx() -> FoldContext {
    static SITE: OnceLock<Arc<Site>> = OnceLock::new();
    let site = SITE.get_or_init(|| {
        Arc::new(
            Site::new(&SiteConfig {
                hosts: vec!["a.example".into()],
                fold: vec!["q.example".into()],
                prefix: String::new(),
            })
            .expect("a valid site"),
        )
    });
    let page = url::Url::parse("https://a.example/dir/").expect("page URL");
    FoldContext::document(Arc::clone(site), page).expect("a site page")
}

/// The output when `html` is fed in pieces cut at `cuts`.
fn run(html: &[u8], cuts: &[usize]) -> Vec<u8> {
    let options = HtmlOptions {
        charset: Some("utf-8".into()),
        ..HtmlOptions::default()
    };
    let mut r = HtmlRewriter::new(ctx(), &options).expect("a rewriter");
    let mut out = Vec::new();
    let mut last = 0;
    for &c in cuts {
        r.write(&html[last..c], &mut out);
        last = c;
    }
    r.write(&html[last..], &mut out);
    r.end(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8) * 2;
    if rest.len() < n {
        return;
    }
    let (cut_bytes, html) = rest.split_at(n);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (html.len() + 1))
        .collect();
    cuts.sort_unstable();
    let whole = run(html, &[]);
    assert_eq!(run(html, &cuts), whole, "cut at {cuts:?}");
    let can_name_host = html
        .iter()
        .any(|b| matches!(b, b'q' | b'Q' | b'&' | b'%' | b'\\') || !b.is_ascii());
    if !can_name_host {
        assert_eq!(whole, html);
    }
});
