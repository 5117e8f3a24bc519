//! Rewriting references while the bytes stream through: HTML documents
//! ([`html`], on `lol_html`), stylesheets ([`css`], our own tokenizer) and
//! `srcset` lists ([`srcset`]). Each rewriter takes input chunks and appends
//! output to a caller's buffer as soon as it can, holding back at most a
//! small, bounded tail (an unfinished token); nothing buffers a whole
//! document. What is and is not rewritten, and why: docs/ACCEL.md.

use std::ops::AddAssign;

use crate::mapping::Rewritten;

pub mod css;
pub mod html;
pub mod srcset;

/// What a rewriter did, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// References folded onto the document's host.
    pub folded: u64,
    /// References left unfolded but written out absolute, because the
    /// browser would resolve them against another base than their author
    /// (relative references in a stylesheet served from a folded path).
    pub absolutized: u64,
    /// Stylesheet references left alone because they carry an `integrity`
    /// attribute: the accelerator rewrites stylesheets, which would break
    /// Subresource Integrity.
    pub kept_for_integrity: u64,
    /// `<meta http-equiv="Content-Security-Policy">` policies given sources
    /// for the folded paths ([`crate::csp::adjust_meta`]).
    pub csp_adjusted: u64,
    /// `<meta>` policies that could not be adjusted (too long, non-ASCII,
    /// control characters, an unknown character reference): left as they
    /// are, and nothing after them is folded, since the policy would block
    /// it.
    pub csp_unadjustable: u64,
}

impl Counts {
    /// Counts one rewritten reference.
    pub(crate) fn record(&mut self, r: &Rewritten) {
        match r {
            Rewritten::Folded(_) => self.folded += 1,
            Rewritten::Absolutized(_) => self.absolutized += 1,
        }
    }
}

impl AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.folded += other.folded;
        self.absolutized += other.absolutized;
        self.kept_for_integrity += other.kept_for_integrity;
        self.csp_adjusted += other.csp_adjusted;
        self.csp_unadjustable += other.csp_unadjustable;
    }
}
