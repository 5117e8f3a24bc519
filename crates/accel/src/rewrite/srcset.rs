//! `srcset` and `imagesrcset` values: image candidate strings, each a URL
//! and optional descriptors (`1.5x`, `640w`), separated by commas.
//!
//! Parsed as HTML's "parse a srcset attribute" splits them (a URL is a run
//! of non-whitespace, so `data:` URLs keep their commas; trailing commas end
//! a candidate; commas inside parentheses in descriptors do not), and only
//! the URL spans are replaced: descriptors, separators and whitespace are
//! kept exactly as written.

use std::ops::Range;

use crate::mapping::FoldContext;
use crate::rewrite::Counts;

/// HTML's ASCII whitespace.
fn is_ws(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// The byte ranges of the candidates' URLs in `value`.
pub fn url_spans(value: &str) -> Vec<Range<usize>> {
    let b = value.as_bytes();
    let mut spans = Vec::new();
    let mut p = 0;
    loop {
        while p < b.len() && (is_ws(b[p]) || b[p] == b',') {
            p += 1;
        }
        if p >= b.len() {
            return spans;
        }
        let start = p;
        while p < b.len() && !is_ws(b[p]) {
            p += 1;
        }
        if b[p - 1] == b',' {
            // "a.png," : the commas end the candidate, without descriptors.
            let mut end = p;
            while end > start && b[end - 1] == b',' {
                end -= 1;
            }
            spans.push(start..end);
            continue;
        }
        spans.push(start..p);
        // Descriptors up to a comma outside parentheses.
        let mut in_parens = false;
        while p < b.len() {
            let c = b[p];
            p += 1;
            if in_parens {
                in_parens = c != b')';
            } else if c == b'(' {
                in_parens = true;
            } else if c == b',' {
                break;
            }
        }
    }
}

/// `value` with every foldable candidate URL rewritten, or `None` when
/// nothing changed.
pub fn rewrite(ctx: &FoldContext, value: &str, counts: &mut Counts) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    let mut last = 0;
    let mut changed = false;
    for span in url_spans(value) {
        if let Some(r) = ctx.rewrite(&value[span.clone()]) {
            counts.record(&r);
            out.push_str(&value[last..span.start]);
            out.push_str(r.text());
            last = span.end;
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    out.push_str(&value[last..]);
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::site::{Site, SiteConfig};
    use proptest::prelude::*;
    use std::sync::Arc;

    fn ctx() -> FoldContext {
        let site = Site::new(&SiteConfig {
            hosts: vec!["a.com".into()],
            fold: vec!["b.com".into()],
            prefix: String::new(),
        })
        .unwrap();
        FoldContext::document(Arc::new(site), url::Url::parse("https://a.com/").unwrap()).unwrap()
    }

    fn urls(v: &str) -> Vec<&str> {
        url_spans(v).into_iter().map(|r| &v[r]).collect()
    }

    #[test]
    fn splits_like_html() {
        assert_eq!(urls("a.png"), ["a.png"]);
        assert_eq!(urls(" a.png 1x , b.png 2x "), ["a.png", "b.png"]);
        assert_eq!(urls("a.png, b.png 2x"), ["a.png", "b.png"]);
        // A URL is a run of non-whitespace: without a space after it, the
        // comma is part of it (HTML's parser agrees).
        assert_eq!(urls("a.png,b.png 2x"), ["a.png,b.png"]);
        assert_eq!(urls("a.png,,, b.png"), ["a.png", "b.png"]);
        assert_eq!(urls(",,a.png"), ["a.png"]);
        assert_eq!(urls("a.png 100w (x, y), b.png"), ["a.png", "b.png"]);
        assert_eq!(
            urls("data:image/png;base64,AA== 1x, b.png 2x"),
            ["data:image/png;base64,AA==", "b.png"]
        );
        assert_eq!(urls("a.png\n1x,\tb.png\t2x"), ["a.png", "b.png"]);
        assert!(urls("").is_empty());
        assert!(urls(" , ").is_empty());
    }

    #[test]
    fn rewrites_urls_keeps_descriptors() {
        let mut c = Counts::default();
        assert_eq!(
            rewrite(
                &ctx(),
                "//b.com/a.png 1x,  https://b.com/b.png  2x ,x.png 3x",
                &mut c
            )
            .as_deref(),
            Some("/b.com/a.png 1x,  /b.com/b.png  2x ,x.png 3x")
        );
        assert_eq!(c.folded, 2);
        assert_eq!(
            rewrite(&ctx(), "//b.com/a.png,\n//b.com/b.png 640w", &mut c).as_deref(),
            Some("/b.com/a.png,\n/b.com/b.png 640w")
        );
        assert_eq!(rewrite(&ctx(), "x.png 1x, //d.com/y.png 2x", &mut c), None);
        assert_eq!(c.folded, 4);
    }

    proptest! {
        /// Spans are ordered, non-empty, inside the value, and never start
        /// or end with a comma.
        #[test]
        fn spans_are_ordered_and_inside(v in "[a-c ,()/.:x0-9\t]{0,40}") {
            let spans = url_spans(&v);
            let mut last = 0;
            for s in &spans {
                prop_assert!(s.start >= last && s.start < s.end && s.end <= v.len());
                prop_assert!(!v[s.clone()].starts_with(','));
                prop_assert!(!v[s.clone()].ends_with(','));
                last = s.end;
            }
        }
    }
}
