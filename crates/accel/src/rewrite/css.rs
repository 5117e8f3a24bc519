//! Streaming stylesheet rewriting: `url(…)` (quoted or not, with escapes),
//! `@import "…"`, and the strings of `image-set()` and `src()`.
//!
//! The tokenizer follows CSS Syntax Level 3 §4 as far as finding URLs needs:
//! comments, strings, escapes, idents and function names (so `u\72l(` is a
//! URL and `#url(`, `5url(` and `-url(` are not), at-keywords (`@import`
//! folds, `@namespace url(…)` names a namespace and is left alone), and
//! bracket nesting. Everything it does not rewrite is copied byte for byte.
//!
//! Streaming: input arrives in chunks cut anywhere. Text that cannot change
//! (comments, ordinary strings, whitespace, punctuation) is emitted at once;
//! an unfinished token that might (a name that may turn out to be `url`, a
//! URL value) is held until its end arrives. Holding is bounded: a name past
//! [`MAX_NAME`] bytes cannot be a keyword and a URL past [`MAX_TOKEN`] bytes
//! is not rewritten (in practice a `data:` URI), so both are then streamed
//! out unchanged — the same decision whether the token came in one chunk or
//! many, so the output never depends on where the input was cut (tested at
//! every split point).

use crate::mapping::FoldContext;
use crate::rewrite::Counts;

/// Longest URL (bytes, from the opening quote or the first byte of an
/// unquoted value) that is rewritten; longer ones pass unchanged.
pub const MAX_TOKEN: usize = 16 * 1024;

/// Longest name (bytes, escapes included) read as a possible keyword; the
/// longest keyword is `-webkit-image-set`, 17 characters, 136 bytes if every
/// one is written as an 8-byte escape.
pub const MAX_NAME: usize = 160;

/// Deepest bracket nesting tracked; deeper brackets are only counted.
const MAX_DEPTH: usize = 256;

/// Where the tokenizer is between calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Between tokens.
    Normal,
    /// Inside `/* … */`, its opening emitted.
    Comment,
    /// Inside a string that is not a URL, its opening quote emitted.
    Str(u8),
    /// After `url(` and its whitespace: a quote makes it a function with a
    /// string argument, anything else an unquoted URL token.
    UrlOpen,
    /// Inside an unquoted URL too long to rewrite, streaming to its `)`.
    UrlRemnant,
    /// Inside a name that has no meaning for us (a number's unit, a hash, a
    /// long ident), streaming to its end.
    Name,
}

/// An open bracket or function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `url(` with a quoted argument, or `src(`: strings are URLs.
    Url,
    /// `image-set(` / `-webkit-image-set(`: strings are URLs.
    ImageSet,
    /// Anything else.
    Other,
}

/// The at-rule whose prelude we are in, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prelude {
    None,
    /// `@import`: its first string or URL at `depth` is the stylesheet URL.
    Import {
        depth: usize,
        done: bool,
    },
    /// `@namespace`: its URL is a name, not a resource.
    Namespace,
    Other,
}

/// What one step did.
enum Step {
    /// Consumed up to here; go on.
    Advance(usize),
    /// Consumed up to here; the rest needs more input.
    Wait(usize),
}

/// A streaming stylesheet rewriter.
///
/// ```
/// # use std::sync::Arc;
/// # use mewa_accel::site::{Site, SiteConfig};
/// # use mewa_accel::mapping::FoldContext;
/// # use mewa_accel::rewrite::css::CssRewriter;
/// let site = Arc::new(Site::new(&SiteConfig {
///     hosts: vec!["a.com".into()],
///     fold: vec!["b.com".into()],
///     prefix: String::new(),
/// })?);
/// let ctx = FoldContext::document(site, url::Url::parse("https://a.com/s.css")?).ok_or("site")?;
/// let mut css = CssRewriter::new(ctx);
/// let mut out = Vec::new();
/// css.write(b"a{background:url(https://b.c", &mut out);
/// css.write(b"om/x.png)}", &mut out);
/// let counts = css.end(&mut out);
/// assert_eq!(out, b"a{background:url(/b.com/x.png)}");
/// assert_eq!(counts.folded, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CssRewriter {
    ctx: FoldContext,
    pending: Vec<u8>,
    mode: Mode,
    frames: Vec<Frame>,
    overflow: usize,
    prelude: Prelude,
    counts: Counts,
    max_token: usize,
    /// How far into the held token the last scan got without finding its
    /// end, so that a token arriving in many small chunks is scanned once,
    /// not once per chunk.
    resume: usize,
}

impl CssRewriter {
    /// A rewriter for one stylesheet (or one `<style>` element, or one
    /// `style` attribute) in `ctx`.
    pub fn new(ctx: FoldContext) -> CssRewriter {
        CssRewriter::with_max_token(ctx, MAX_TOKEN)
    }

    /// As [`new`](Self::new) with another URL length bound (tests use a
    /// small one to reach it at every split point).
    pub(crate) fn with_max_token(ctx: FoldContext, max_token: usize) -> CssRewriter {
        CssRewriter {
            ctx,
            pending: Vec::new(),
            mode: Mode::Normal,
            frames: Vec::new(),
            overflow: 0,
            prelude: Prelude::None,
            counts: Counts::default(),
            max_token,
            resume: 0,
        }
    }

    /// Rewrites a complete stylesheet.
    pub fn rewrite_str(ctx: FoldContext, css: &str) -> (String, Counts) {
        let mut r = CssRewriter::new(ctx);
        let mut out = Vec::with_capacity(css.len());
        r.write(css.as_bytes(), &mut out);
        let counts = r.end(&mut out);
        // Held-back points are token boundaries, which are character
        // boundaries, and replacements are strings: the output is UTF-8.
        let text = String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        (text, counts)
    }

    /// Feeds a chunk; appends what can be emitted to `out`.
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            let rest = self.run(input, false, out);
            self.pending.extend_from_slice(&input[rest..]);
        } else {
            let mut buf = std::mem::take(&mut self.pending);
            buf.extend_from_slice(input);
            let rest = self.run(&buf, false, out);
            buf.drain(..rest);
            self.pending = buf;
        }
    }

    /// Ends the stylesheet: emits everything held back. Returns the counts.
    pub fn end(mut self, out: &mut Vec<u8>) -> Counts {
        let buf = std::mem::take(&mut self.pending);
        let rest = self.run(&buf, true, out);
        // Every step finishes at the end of input; this is only a backstop.
        out.extend_from_slice(&buf[rest..]);
        self.counts
    }

    /// What has been counted so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Bytes held back, waiting for the end of a token.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// Gives up: the bytes held back, as they came in (for a caller that
    /// passes the rest of the input through unchanged).
    pub fn into_held(self) -> Vec<u8> {
        self.pending
    }

    /// Runs steps over `buf`; returns where the unconsumed rest starts.
    fn run(&mut self, buf: &[u8], eof: bool, out: &mut Vec<u8>) -> usize {
        // `resume` is set only by a Wait for a token at index 0, so it
        // applies to the first step here, on that same token; any step that
        // advances clears it.
        let mut i = 0;
        while i < buf.len() {
            let mode = self.mode;
            match self.step(buf, i, eof, out) {
                Step::Advance(p) => {
                    self.resume = 0;
                    if p == i && self.mode == mode {
                        // No progress and no change: cannot happen; copy
                        // one byte so it can never loop.
                        debug_assert!(false, "css tokenizer stalled at {i} in {mode:?}");
                        out.push(buf[i]);
                        i += 1;
                    } else {
                        i = p;
                    }
                }
                Step::Wait(p) => return p,
            }
        }
        i
    }

    fn step(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        match self.mode {
            Mode::Normal => self.step_normal(b, i, eof, out),
            Mode::Comment => self.step_comment(b, i, eof, out),
            Mode::Str(q) => self.step_plain_string(b, i, eof, out, q),
            Mode::UrlOpen => self.step_url_open(b, i, eof, out),
            Mode::UrlRemnant => self.step_url_remnant(b, i, eof, out),
            Mode::Name => self.step_name_tail(b, i, eof, out),
        }
    }

    fn depth(&self) -> usize {
        self.frames.len() + self.overflow
    }

    fn push(&mut self, f: Frame) {
        if self.frames.len() >= MAX_DEPTH || self.overflow > 0 {
            self.overflow += 1;
        } else {
            self.frames.push(f);
        }
    }

    fn pop(&mut self) {
        if self.overflow > 0 {
            self.overflow -= 1;
        } else {
            self.frames.pop();
        }
    }

    /// Whether a string starting here is a URL.
    fn url_string_context(&self) -> bool {
        if self.prelude == Prelude::Namespace {
            return false;
        }
        if self.overflow == 0 && matches!(self.frames.last(), Some(Frame::Url | Frame::ImageSet)) {
            return true;
        }
        matches!(self.prelude, Prelude::Import { depth, done: false } if depth == self.depth())
    }

    /// A URL token or URL string starts: an `@import` has its URL.
    fn url_seen(&mut self) {
        if let Prelude::Import { depth, .. } = self.prelude {
            self.prelude = Prelude::Import { depth, done: true };
        }
    }

    fn step_normal(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        let c = b[i];
        match c {
            b'/' => match b.get(i + 1) {
                Some(b'*') => {
                    out.extend_from_slice(b"/*");
                    self.mode = Mode::Comment;
                    Step::Advance(i + 2)
                }
                None if !eof => Step::Wait(i),
                _ => emit1(out, c, i),
            },
            b'"' | b'\'' => {
                if self.url_string_context() {
                    self.url_string(b, i, eof, out, c)
                } else {
                    out.push(c);
                    self.mode = Mode::Str(c);
                    Step::Advance(i + 1)
                }
            }
            b'@' => match starts_ident(b, i + 1, eof) {
                None => Step::Wait(i),
                Some(false) => emit1(out, c, i),
                Some(true) => match scan_name(b, i + 1, eof) {
                    NameScan::NeedMore => Step::Wait(i),
                    NameScan::Long { safe } => {
                        out.extend_from_slice(&b[i..safe]);
                        self.prelude = Prelude::Other;
                        self.mode = Mode::Name;
                        Step::Advance(safe)
                    }
                    NameScan::Done { end, name } => {
                        out.extend_from_slice(&b[i..end]);
                        self.prelude = match name.as_str() {
                            "import" => Prelude::Import {
                                depth: self.depth(),
                                done: false,
                            },
                            "namespace" => Prelude::Namespace,
                            _ => Prelude::Other,
                        };
                        Step::Advance(end)
                    }
                },
            },
            // A hash token: its name means nothing here, but must not be
            // read as an ident (`#url(` is no URL).
            b'#' => {
                out.push(c);
                self.mode = Mode::Name;
                Step::Advance(i + 1)
            }
            b'(' | b'[' | b'{' => {
                if c == b'{' {
                    self.prelude = Prelude::None;
                }
                self.push(Frame::Other);
                emit1(out, c, i)
            }
            b')' | b']' | b'}' => {
                if c == b'}' {
                    self.prelude = Prelude::None;
                }
                self.pop();
                emit1(out, c, i)
            }
            b';' => {
                self.prelude = Prelude::None;
                emit1(out, c, i)
            }
            _ => match starts_number(b, i, eof) {
                None => Step::Wait(i),
                // A number and its unit (`5url(` is a dimension, no URL).
                Some(true) => {
                    out.push(c);
                    self.mode = Mode::Name;
                    Step::Advance(i + 1)
                }
                Some(false) => match starts_ident(b, i, eof) {
                    None => Step::Wait(i),
                    Some(false) => emit1(out, c, i),
                    Some(true) => self.ident(b, i, eof, out),
                },
            },
        }
    }

    /// An ident or function name starting at `i`.
    fn ident(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        match scan_name(b, i, eof) {
            NameScan::NeedMore => Step::Wait(i),
            NameScan::Long { safe } => {
                out.extend_from_slice(&b[i..safe]);
                self.mode = Mode::Name;
                Step::Advance(safe)
            }
            NameScan::Done { end, name } => {
                if b.get(end) != Some(&b'(') {
                    out.extend_from_slice(&b[i..end]);
                    return Step::Advance(end);
                }
                out.extend_from_slice(&b[i..=end]);
                match name.as_str() {
                    "url" => self.mode = Mode::UrlOpen,
                    "src" => self.push(Frame::Url),
                    "image-set" | "-webkit-image-set" => self.push(Frame::ImageSet),
                    _ => self.push(Frame::Other),
                }
                Step::Advance(end + 1)
            }
        }
    }

    fn step_comment(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        if let Some(off) = find(&b[i..], b"*/") {
            out.extend_from_slice(&b[i..i + off + 2]);
            self.mode = Mode::Normal;
            return Step::Advance(i + off + 2);
        }
        if eof {
            out.extend_from_slice(&b[i..]);
            return Step::Advance(b.len());
        }
        // A trailing '*' may be the start of the closing "*/".
        let p = if b.last() == Some(&b'*') {
            b.len() - 1
        } else {
            b.len()
        };
        out.extend_from_slice(&b[i..p]);
        Step::Wait(p)
    }

    fn step_plain_string(
        &mut self,
        b: &[u8],
        i: usize,
        eof: bool,
        out: &mut Vec<u8>,
        quote: u8,
    ) -> Step {
        match scan_string(b, i, eof, quote) {
            StrEnd::Quote(k) => {
                out.extend_from_slice(&b[i..=k]);
                self.mode = Mode::Normal;
                Step::Advance(k + 1)
            }
            StrEnd::Newline(k) => {
                out.extend_from_slice(&b[i..k]);
                self.mode = Mode::Normal;
                Step::Advance(k)
            }
            StrEnd::Eof => {
                out.extend_from_slice(&b[i..]);
                self.mode = Mode::Normal;
                Step::Advance(b.len())
            }
            StrEnd::More(k) => {
                out.extend_from_slice(&b[i..k]);
                Step::Wait(k)
            }
        }
    }

    /// A string that is a URL, opening quote at `q`.
    fn url_string(&mut self, b: &[u8], q: usize, eof: bool, out: &mut Vec<u8>, quote: u8) -> Step {
        let from = if q == 0 { self.resume.max(1) } else { q + 1 };
        let (content_end, close) = match scan_string(b, from, eof, quote) {
            StrEnd::Quote(k) => (k, true),
            StrEnd::Eof => (b.len(), false),
            StrEnd::Newline(k) => {
                // A bad string: never a URL.
                self.url_seen();
                out.extend_from_slice(&b[q..k]);
                return Step::Advance(k);
            }
            StrEnd::More(k) => {
                if b.len() - q > self.max_token {
                    self.url_seen();
                    out.extend_from_slice(&b[q..k]);
                    self.mode = Mode::Str(quote);
                    return Step::Wait(k);
                }
                self.resume = if q == 0 { k } else { 0 };
                return Step::Wait(q);
            }
        };
        // Only now, when the string is dealt with: a retry after waiting
        // must find the same context.
        self.url_seen();
        let next = if close { content_end + 1 } else { content_end };
        let rewritten = if content_end - q > self.max_token {
            None
        } else {
            decode(&b[q + 1..content_end], true).and_then(|v| self.ctx.rewrite(&v))
        };
        match rewritten {
            Some(r) => {
                self.counts.record(&r);
                out.push(quote);
                escape_quoted(r.text(), quote, out);
                if close {
                    out.push(quote);
                }
            }
            None => out.extend_from_slice(&b[q..next]),
        }
        Step::Advance(next)
    }

    fn step_url_open(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        let mut k = i;
        while k < b.len() && is_ws(b[k]) {
            k += 1;
        }
        out.extend_from_slice(&b[i..k]);
        let Some(&c) = b.get(k) else {
            if eof {
                self.mode = Mode::Normal;
            }
            return Step::Advance(k);
        };
        if c == b'"' || c == b'\'' {
            self.push(Frame::Url);
            self.mode = Mode::Normal;
            return Step::Advance(k);
        }
        self.url_seen();
        self.unquoted_url(b, k, eof, out)
    }

    /// An unquoted URL token's value starting at `j` (after `url(` and
    /// whitespace).
    fn unquoted_url(&mut self, b: &[u8], j: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        let from = if j == 0 { self.resume } else { j };
        let (end, found) = match scan_url_end(b, from, eof) {
            UrlEnd::Paren(k) => (k, true),
            UrlEnd::Eof => (b.len(), false),
            UrlEnd::More(k) => {
                if b.len() - j > self.max_token {
                    out.extend_from_slice(&b[j..k]);
                    self.mode = Mode::UrlRemnant;
                    return Step::Wait(k);
                }
                self.resume = if j == 0 { k } else { 0 };
                return Step::Wait(j);
            }
        };
        self.mode = Mode::Normal;
        let next = if found { end + 1 } else { end };
        let value = &b[j..end];
        let (val, ws) = value.split_at(content_len(value));
        let rewritten = if value.len() > self.max_token
            || self.prelude == Prelude::Namespace
            || !valid_unquoted(val)
        {
            None
        } else {
            decode(val, false).and_then(|v| self.ctx.rewrite(&v))
        };
        match rewritten {
            Some(r) => {
                self.counts.record(&r);
                escape_unquoted(r.text(), out);
                out.extend_from_slice(ws);
                if found {
                    out.push(b')');
                }
            }
            None => out.extend_from_slice(&b[j..next]),
        }
        Step::Advance(next)
    }

    fn step_url_remnant(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        match scan_url_end(b, i, eof) {
            UrlEnd::Paren(k) => {
                out.extend_from_slice(&b[i..=k]);
                self.mode = Mode::Normal;
                Step::Advance(k + 1)
            }
            UrlEnd::Eof => {
                out.extend_from_slice(&b[i..]);
                self.mode = Mode::Normal;
                Step::Advance(b.len())
            }
            UrlEnd::More(k) => {
                out.extend_from_slice(&b[i..k]);
                Step::Wait(k)
            }
        }
    }

    fn step_name_tail(&mut self, b: &[u8], i: usize, eof: bool, out: &mut Vec<u8>) -> Step {
        let mut k = i;
        while k < b.len() {
            let c = b[k];
            if is_name(c) {
                k += 1;
            } else if c == b'\\' {
                match escape_len(b, k, eof) {
                    Esc::Valid(n) => k += n,
                    Esc::Invalid => break,
                    Esc::NeedMore => {
                        out.extend_from_slice(&b[i..k]);
                        return Step::Wait(k);
                    }
                }
            } else {
                break;
            }
        }
        out.extend_from_slice(&b[i..k]);
        if k < b.len() || eof {
            self.mode = Mode::Normal;
        }
        Step::Advance(k)
    }
}

fn emit1(out: &mut Vec<u8>, c: u8, i: usize) -> Step {
    out.push(c);
    Step::Advance(i + 1)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// CSS newlines (after the preprocessing that maps CR, CRLF and FF to LF).
fn is_nl(c: u8) -> bool {
    matches!(c, b'\n' | b'\r' | b'\x0c')
}

fn is_ws(c: u8) -> bool {
    c == b' ' || c == b'\t' || is_nl(c)
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

fn is_name(c: u8) -> bool {
    is_name_start(c) || c.is_ascii_digit() || c == b'-'
}

/// Bytes of the UTF-8 sequence a lead byte starts (1 for anything else).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

enum Esc {
    /// A valid escape of this many bytes.
    Valid(usize),
    /// `\` before a newline: not an escape.
    Invalid,
    NeedMore,
}

/// The escape starting with the `\` at `k` (CSS Syntax §4.3.7).
fn escape_len(b: &[u8], k: usize, eof: bool) -> Esc {
    let Some(&n) = b.get(k + 1) else {
        return if eof { Esc::Valid(1) } else { Esc::NeedMore };
    };
    if is_nl(n) {
        return Esc::Invalid;
    }
    if n.is_ascii_hexdigit() {
        let mut j = k + 1;
        while j < b.len() && j < k + 7 && b[j].is_ascii_hexdigit() {
            j += 1;
        }
        // More hex digits or the one whitespace that ends the escape may
        // still come.
        let Some(&w) = b.get(j) else {
            return if eof {
                Esc::Valid(j - k)
            } else {
                Esc::NeedMore
            };
        };
        if w == b'\r' {
            match b.get(j + 1) {
                Some(b'\n') => j += 2,
                None if !eof => return Esc::NeedMore,
                _ => j += 1,
            }
        } else if is_ws(w) {
            j += 1;
        }
        return Esc::Valid(j - k);
    }
    let w = utf8_width(n);
    if k + 1 + w > b.len() {
        return if eof {
            Esc::Valid(b.len() - k)
        } else {
            Esc::NeedMore
        };
    }
    Esc::Valid(1 + w)
}

/// Whether the bytes at `j` start an identifier (CSS Syntax §4.3.9);
/// `None` when more input is needed to tell.
fn starts_ident(b: &[u8], j: usize, eof: bool) -> Option<bool> {
    // `\` at the very end of the stylesheet is a valid escape (U+FFFD).
    let valid_escape = |k: usize| match b.get(k + 1) {
        None if eof => Some(true),
        None => None,
        Some(n) => Some(!is_nl(*n)),
    };
    let Some(&c) = b.get(j) else {
        return if eof { Some(false) } else { None };
    };
    if c == b'-' {
        match b.get(j + 1) {
            None if eof => Some(false),
            None => None,
            Some(&n) if is_name_start(n) || n == b'-' => Some(true),
            Some(b'\\') => valid_escape(j + 1),
            Some(_) => Some(false),
        }
    } else if is_name_start(c) {
        Some(true)
    } else if c == b'\\' {
        valid_escape(j)
    } else {
        Some(false)
    }
}

/// Whether the bytes at `j` start a number (CSS Syntax §4.3.10).
fn starts_number(b: &[u8], j: usize, eof: bool) -> Option<bool> {
    let at = |k: usize| -> Option<Option<u8>> {
        match b.get(k) {
            Some(c) => Some(Some(*c)),
            None if eof => Some(None),
            None => None,
        }
    };
    let digit = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_digit());
    let c = b[j];
    if c.is_ascii_digit() {
        return Some(true);
    }
    match c {
        b'.' => Some(digit(at(j + 1)?)),
        b'+' | b'-' => {
            let n = at(j + 1)?;
            if digit(n) {
                Some(true)
            } else if n == Some(b'.') {
                Some(digit(at(j + 2)?))
            } else {
                Some(false)
            }
        }
        _ => Some(false),
    }
}

enum NameScan {
    /// A name ending before `end`, decoded and lowercased.
    Done {
        end: usize,
        name: String,
    },
    /// Longer than [`MAX_NAME`]: emit up to `safe` and stream the rest.
    Long {
        safe: usize,
    },
    NeedMore,
}

/// Reads the name starting at `j`.
fn scan_name(b: &[u8], j: usize, eof: bool) -> NameScan {
    let mut k = j;
    while k < b.len() {
        if k - j > MAX_NAME {
            return NameScan::Long { safe: k };
        }
        let c = b[k];
        if is_name(c) {
            k += 1;
        } else if c == b'\\' {
            match escape_len(b, k, eof) {
                Esc::Valid(n) => k += n,
                Esc::Invalid => break,
                Esc::NeedMore => return NameScan::NeedMore,
            }
        } else {
            break;
        }
    }
    if k - j > MAX_NAME {
        return NameScan::Long { safe: k };
    }
    if k >= b.len() && !eof {
        // The byte after the name decides what it is.
        return NameScan::NeedMore;
    }
    let mut name = decode(&b[j..k], false).unwrap_or_default();
    name.make_ascii_lowercase();
    NameScan::Done { end: k, name }
}

enum StrEnd {
    /// Closing quote at this index.
    Quote(usize),
    /// Unescaped newline at this index: a bad string, ending before it.
    Newline(usize),
    /// Input ended (and it is the end of the stylesheet).
    Eof,
    /// Input ended; consumable up to here.
    More(usize),
}

/// Scans string content from `k` for its end.
fn scan_string(b: &[u8], mut k: usize, eof: bool, quote: u8) -> StrEnd {
    while k < b.len() {
        let c = b[k];
        if c == quote {
            return StrEnd::Quote(k);
        }
        if is_nl(c) {
            return StrEnd::Newline(k);
        }
        if c == b'\\' {
            match (b.get(k + 1), b.get(k + 2)) {
                (None, _) if !eof => return StrEnd::More(k),
                (None, _) => k += 1,
                (Some(b'\r'), Some(b'\n')) => k += 3,
                (Some(b'\r'), None) if !eof => return StrEnd::More(k),
                (Some(_), _) => k += 2,
            }
        } else {
            k += 1;
        }
    }
    if eof {
        StrEnd::Eof
    } else {
        StrEnd::More(b.len())
    }
}

enum UrlEnd {
    /// Closing `)` at this index.
    Paren(usize),
    Eof,
    /// Input ended; consumable up to here.
    More(usize),
}

/// Scans an unquoted URL (or a bad URL's remnants) for its `)`: every
/// escape is skipped, so `\)` does not end it.
fn scan_url_end(b: &[u8], mut k: usize, eof: bool) -> UrlEnd {
    while k < b.len() {
        match b[k] {
            b')' => return UrlEnd::Paren(k),
            b'\\' if k + 1 < b.len() => k += 2,
            b'\\' if !eof => return UrlEnd::More(k),
            _ => k += 1,
        }
    }
    if eof {
        UrlEnd::Eof
    } else {
        UrlEnd::More(b.len())
    }
}

/// Length of an unquoted URL value without its trailing whitespace (a
/// whitespace that ends an escape, as in `a\\20 ` or `a\\ `, belongs to it).
fn content_len(v: &[u8]) -> usize {
    let mut k = 0;
    let mut end = 0;
    while k < v.len() {
        if v[k] == b'\\' {
            k += match escape_len(v, k, true) {
                Esc::Valid(n) => n,
                Esc::Invalid | Esc::NeedMore => 1,
            };
            end = k;
        } else {
            if !is_ws(v[k]) {
                end = k + 1;
            }
            k += 1;
        }
    }
    end
}

/// Whether an unquoted URL value (trailing whitespace removed) is a good
/// URL token: no quotes, `(`, whitespace, non-printables or invalid escapes
/// (else the browser reads a bad URL, which we leave alone).
fn valid_unquoted(v: &[u8]) -> bool {
    let mut k = 0;
    while k < v.len() {
        let c = v[k];
        if matches!(c, b'"' | b'\'' | b'(')
            || is_ws(c)
            || c <= 0x08
            || c == 0x0b
            || (0x0e..=0x1f).contains(&c)
            || c == 0x7f
        {
            return false;
        }
        if c == b'\\' {
            // An escape (whose one trailing whitespace is part of it).
            match escape_len(v, k, true) {
                Esc::Valid(n) => k += n,
                Esc::Invalid | Esc::NeedMore => return false,
            }
        } else {
            k += 1;
        }
    }
    true
}

/// Decodes escapes in a complete name, unquoted URL or string content.
/// `None` if the result is not UTF-8.
fn decode(v: &[u8], string: bool) -> Option<String> {
    let mut out = Vec::with_capacity(v.len());
    let mut k = 0;
    while k < v.len() {
        let c = v[k];
        if c != b'\\' {
            out.push(c);
            k += 1;
            continue;
        }
        match v.get(k + 1) {
            None => {
                if !string {
                    out.extend_from_slice("\u{fffd}".as_bytes());
                }
                k += 1;
            }
            Some(&n) if is_nl(n) => {
                // A line continuation inside a string.
                k += if n == b'\r' && v.get(k + 2) == Some(&b'\n') {
                    3
                } else {
                    2
                };
            }
            Some(&n) if n.is_ascii_hexdigit() => {
                let mut j = k + 1;
                let mut cp: u32 = 0;
                while j < v.len() && j < k + 7 && v[j].is_ascii_hexdigit() {
                    cp = cp * 16 + char::from(v[j]).to_digit(16).unwrap_or(0);
                    j += 1;
                }
                if j < v.len() && is_ws(v[j]) {
                    j += if v[j] == b'\r' && v.get(j + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                }
                let ch = match char::from_u32(cp) {
                    Some(ch) if cp != 0 => ch,
                    _ => '\u{fffd}',
                };
                let mut tmp = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                k = j;
            }
            Some(&n) => {
                let w = utf8_width(n);
                let end = (k + 1 + w).min(v.len());
                out.extend_from_slice(&v[k + 1..end]);
                k = end;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Writes `s` as an unquoted URL value.
fn escape_unquoted(s: &str, out: &mut Vec<u8>) {
    for ch in s.chars() {
        match ch {
            '(' | ')' | '\'' | '"' | '\\' => {
                out.push(b'\\');
                out.push(ch as u8);
            }
            c if c <= ' ' || c == '\x7f' => {
                out.extend_from_slice(format!("\\{:x} ", c as u32).as_bytes())
            }
            c => {
                let mut tmp = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
        }
    }
}

/// Writes `s` as string content between `quote`s.
fn escape_quoted(s: &str, quote: u8, out: &mut Vec<u8>) {
    for ch in s.chars() {
        match ch {
            '\\' => out.extend_from_slice(b"\\\\"),
            c if c as u32 == u32::from(quote) => {
                out.push(b'\\');
                out.push(quote);
            }
            c if c < ' ' || c == '\x7f' => {
                out.extend_from_slice(format!("\\{:x} ", c as u32).as_bytes())
            }
            c => {
                let mut tmp = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::site::{Site, SiteConfig};
    use proptest::prelude::*;
    use std::sync::Arc;
    use url::Url;

    fn site() -> Arc<Site> {
        Arc::new(
            Site::new(&SiteConfig {
                hosts: vec!["a.com".into()],
                fold: vec!["b.com".into(), "cdn.c.net".into()],
                prefix: String::new(),
            })
            .unwrap(),
        )
    }

    fn doc_ctx() -> FoldContext {
        FoldContext::document(site(), Url::parse("https://a.com/css/main.css").unwrap()).unwrap()
    }

    fn folded_ctx() -> FoldContext {
        FoldContext::stylesheet(
            site(),
            Url::parse("https://a.com/b.com/css/s.css").unwrap(),
            Url::parse("https://b.com/css/s.css").unwrap(),
        )
        .unwrap()
    }

    fn rw(css: &str) -> String {
        CssRewriter::rewrite_str(doc_ctx(), css).0
    }

    /// Output when the input is cut into the given chunks.
    fn chunked(ctx: FoldContext, max: usize, input: &[u8], cuts: &[usize]) -> (Vec<u8>, Counts) {
        let mut r = CssRewriter::with_max_token(ctx, max);
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts {
            r.write(&input[last..c], &mut out);
            last = c;
        }
        r.write(&input[last..], &mut out);
        let counts = r.end(&mut out);
        (out, counts)
    }

    #[test]
    fn url_forms() {
        let cases: &[(&str, &str)] = &[
            ("a{b:url(https://b.com/x.png)}", "a{b:url(/b.com/x.png)}"),
            ("a{b:url(//b.com/x.png)}", "a{b:url(/b.com/x.png)}"),
            ("a{b:url( //b.com/x.png \t)}", "a{b:url( /b.com/x.png \t)}"),
            ("a{b:url(\"//b.com/x.png\")}", "a{b:url(\"/b.com/x.png\")}"),
            ("a{b:url( '//b.com/x.png' )}", "a{b:url( '/b.com/x.png' )}"),
            ("a{b:URL(//b.com/x.png)}", "a{b:URL(/b.com/x.png)}"),
            ("a{b:u\\72l(//b.com/x.png)}", "a{b:u\\72l(/b.com/x.png)}"),
            ("a{b:\\75 rl(//b.com/x.png)}", "a{b:\\75 rl(/b.com/x.png)}"),
            ("a{b:url(//b.com/a\\)b.png)}", "a{b:url(/b.com/a\\)b.png)}"),
            ("a{b:url(//b.com/\\e9 .png)}", "a{b:url(/b.com/%C3%A9.png)}"),
            // the escaped space is the URL's, and the URL parser strips it
            ("a{b:url(//b.com/a\\  )}", "a{b:url(/b.com/a )}"),
            ("a{b:url(//b.com/a\\ b)}", "a{b:url(/b.com/a%20b)}"),
            ("a{b:url(//b.com/\\e9  )}", "a{b:url(/b.com/%C3%A9 )}"),
            ("a{b:url(//b.c\\6fm/x)}", "a{b:url(/b.com/x)}"),
            (
                "a{b:url(\"//b.com/it's.png\")}",
                "a{b:url(\"/b.com/it's.png\")}",
            ),
            (
                "a{b:url('//b.com/it\\'s.png')}",
                "a{b:url('/b.com/it\\'s.png')}",
            ),
            ("a{b:url(//b.com/x?q=1#f)}", "a{b:url(/b.com/x?q=1#f)}"),
            ("a{b:url(//b.com/x", "a{b:url(/b.com/x"),
            ("a{b:url('//b.com/x", "a{b:url('/b.com/x"),
            ("a{b:+url(//b.com/x)}", "a{b:+url(/b.com/x)}"),
            // two on a line, one of them not allowed
            (
                "a{b:url(//d.com/x),url(//cdn.c.net/y)}",
                "a{b:url(//d.com/x),url(/cdn.c.net/y)}",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(rw(input), *want, "{input:?}");
        }
    }

    #[test]
    fn escapes_in_output() {
        // A decoded '(' or ')' is escaped again in an unquoted URL.
        assert_eq!(
            rw("a{b:url(//b.com/a\\(b\\).png)}"),
            "a{b:url(/b.com/a\\(b\\).png)}"
        );
        let mut out = Vec::new();
        escape_unquoted("a b\"'\\\n\x7f", &mut out);
        assert_eq!(out, b"a\\20 b\\\"\\'\\\\\\a \\7f ");
        let mut out = Vec::new();
        escape_quoted("a\"b'c\\\n", b'"', &mut out);
        assert_eq!(out, b"a\\\"b'c\\\\\\a ");
    }

    #[test]
    fn imports() {
        let cases: &[(&str, &str)] = &[
            ("@import \"//b.com/s.css\";", "@import \"/b.com/s.css\";"),
            (
                "@import '//b.com/s.css' screen;",
                "@import '/b.com/s.css' screen;",
            ),
            ("@import url(//b.com/s.css);", "@import url(/b.com/s.css);"),
            (
                "@import url(\"//b.com/s.css\");",
                "@import url(\"/b.com/s.css\");",
            ),
            ("@IMPORT \"//b.com/s.css\";", "@IMPORT \"/b.com/s.css\";"),
            (
                "@import \"//b.com/s.css\" layer(x) supports(content: \"//b.com/y\");",
                "@import \"/b.com/s.css\" layer(x) supports(content: \"//b.com/y\");",
            ),
            // the second string of an import is no URL
            (
                "@import \"//b.com/a\" \"//b.com/b\";",
                "@import \"/b.com/a\" \"//b.com/b\";",
            ),
            // after the import's ';' strings are ordinary again
            (
                "@import \"//b.com/a\";a{content:\"//b.com/b\"}",
                "@import \"/b.com/a\";a{content:\"//b.com/b\"}",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(rw(input), *want, "{input:?}");
        }
    }

    #[test]
    fn left_alone() {
        for input in [
            "@namespace svg url(//b.com/ns);",
            "@namespace \"//b.com/ns\";",
            "@namespace url(\"//b.com/ns\");",
            "a{content:\"url(//b.com/x)\"}",
            "a{content:'//b.com/x'}",
            "/* url(//b.com/x) */",
            "/* unterminated url(//b.com/x)",
            "a{b:#url(//b.com/x)}",
            "a{b:5url(//b.com/x)}",
            "a{b:1.5url(//b.com/x)}",
            "a{b:-url(//b.com/x)}",
            "a{b:--url(//b.com/x)}",
            "a{b:foourl(//b.com/x)}",
            "a{b:url(//b.com/x y)}",
            "a{b:url(//b.com/x\"y)}",
            "a{b:url(//b.com/x(y)}",
            "a{b:url(//b.com/x\\\ny)}",
            "a{b:url(data:image/png;base64,iVBORw0KGgo=)}",
            "a{b:url(#filter)}",
            "a{b:url()}",
            "a{b:url(x.png)}",
            "a{b:url(//d.com/x.png)}",
            "a{b:url(http://b.com/x.png)}",
            "a{b:url(https://b.com:8443/x.png)}",
            "a{b:\"//b.com/x\n}",
            "@font-face{src:local(\"//b.com/f\")}",
            "a{b:c}d{e:f(g)}",
            "",
            "\\",
            "@",
            "-",
            "a{b:url(",
        ] {
            assert_eq!(rw(input), input, "{input:?}");
        }
    }

    #[test]
    fn image_set_and_src() {
        let cases: &[(&str, &str)] = &[
            (
                "a{b:image-set(\"//b.com/1.png\" 1x, url(//b.com/2.png) 2x)}",
                "a{b:image-set(\"/b.com/1.png\" 1x, url(/b.com/2.png) 2x)}",
            ),
            (
                "a{b:-webkit-image-set('//b.com/1.png' 1x)}",
                "a{b:-webkit-image-set('/b.com/1.png' 1x)}",
            ),
            (
                "a{b:image-set(\"//b.com/1.png\" type(\"image/avif\"))}",
                "a{b:image-set(\"/b.com/1.png\" type(\"image/avif\"))}",
            ),
            ("a{b:src(\"//b.com/1.png\")}", "a{b:src(\"/b.com/1.png\")}"),
            (
                "@font-face{src:url(//b.com/f.woff2) format(\"woff2\"),local(\"F\")}",
                "@font-face{src:url(/b.com/f.woff2) format(\"woff2\"),local(\"F\")}",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(rw(input), *want, "{input:?}");
        }
    }

    #[test]
    fn counts() {
        let (out, c) = CssRewriter::rewrite_str(
            doc_ctx(),
            "@import '//b.com/a.css';a{b:url(//b.com/x),url(//d.com/y)}",
        );
        assert_eq!(
            out,
            "@import '/b.com/a.css';a{b:url(/b.com/x),url(//d.com/y)}"
        );
        assert_eq!(c.folded, 2);
        assert_eq!(c.absolutized, 0);
    }

    #[test]
    fn folded_stylesheet_context() {
        let css = "a{b:url(img/x.png)}c{d:url(/img/y.png)}e{f:url(../../../z.png)}g{h:url(/a%5Cb)}";
        let (out, c) = CssRewriter::rewrite_str(folded_ctx(), css);
        assert_eq!(
            out,
            "a{b:url(img/x.png)}c{d:url(/b.com/img/y.png)}e{f:url(/b.com/z.png)}g{h:url(https://b.com/a%5Cb)}"
        );
        assert_eq!(c.folded, 2);
        assert_eq!(c.absolutized, 1);
    }

    #[test]
    fn long_tokens_pass_unchanged() {
        let big = format!("a{{b:url(https://b.com/{})}}", "x".repeat(MAX_TOKEN));
        assert_eq!(rw(&big), big);
        let big = format!("a{{b:url(\"https://b.com/{}\")}}", "x".repeat(MAX_TOKEN));
        assert_eq!(rw(&big), big);
        let ok = format!("a{{b:url(https://b.com/{})}}", "x".repeat(100));
        assert_ne!(rw(&ok), ok);
        let long_name = format!("a{{b:{}(//b.com/x)}}", "u".repeat(MAX_NAME + 5));
        assert_eq!(rw(&long_name), long_name);
        let long_at = format!("@{} \"//b.com/x\";", "i".repeat(MAX_NAME + 5));
        assert_eq!(rw(&long_at), long_at);
    }

    #[test]
    fn long_url_in_tiny_chunks() {
        // One byte at a time: each scan of the held URL resumes where the
        // last stopped (rather than rescanning, quadratic in its length);
        // the output must still equal the unsplit one.
        for css in [
            format!("a{{b:url(//b.com/{})}}", "x".repeat(MAX_TOKEN - 20)),
            format!("a{{b:url(\"//b.com/{}\")}}", "x".repeat(MAX_TOKEN - 20)),
            format!("a{{b:url(//b.com/{})}}", "x".repeat(MAX_TOKEN + 20)),
        ] {
            let input = css.as_bytes();
            let mut r = CssRewriter::new(doc_ctx());
            let mut out = Vec::new();
            for byte in input {
                r.write(std::slice::from_ref(byte), &mut out);
            }
            r.end(&mut out);
            assert_eq!(out, rw(&css).into_bytes());
        }
    }

    #[test]
    fn held_back_is_bounded() {
        let mut r = CssRewriter::new(doc_ctx());
        let mut out = Vec::new();
        r.write(b"a{b:url(https://b.com/", &mut out);
        assert!(r.held() > 0);
        for _ in 0..100 {
            r.write(&[b'x'; 1000], &mut out);
            assert!(r.held() <= MAX_TOKEN + 1000, "{}", r.held());
        }
        r.write(b")}", &mut out);
        assert_eq!(r.held(), 0);
        // A long comment is streamed, not held.
        let mut r = CssRewriter::new(doc_ctx());
        r.write(b"/*", &mut out);
        for _ in 0..100 {
            r.write(&[b'x'; 1000], &mut out);
            assert_eq!(r.held(), 0);
        }
        r.write(b"*", &mut out);
        assert_eq!(r.held(), 1);
    }

    /// Samples that exercise every state, including the length bounds
    /// (run with a bound of 12 bytes).
    const SAMPLES: &[&str] = &[
        "a{background:url(https://b.com/x.png) no-repeat}",
        "@import \"//b.com/s.css\" screen;@import url( '//cdn.c.net/t.css' );",
        "@namespace url(//b.com/ns);a{b:u\\72l(//b.com/x) c:\\75 rl(//b.com/y)}",
        "/* url(//b.com/c) */a{content:\"//b.com/s\\\"q\"}/**/b{}",
        "a{b:image-set(\"//b.com/1.png\" 1x,'//b.com/2.png' 2x)}#url(//b.com/h)",
        "a{b:5url(//b.com/n) c:-url(//b.com/m) d:+url(//b.com/p) e:.5url(//b.com/q)}",
        "a{b:url(//b.com/a\\)b\\e9 .png)}c{d:url(//b.com/x y)}e{f:\"x\r\ny\"}",
        "a{b:url(data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk) ; c:url('//b.com/aaaaaaaaaaaaaaaaaa')}",
        "@import'//b.com/x'",
        "a{b:url('//b.com/\\\r\nx')}",
        "@\\69mport \"//b.com/z\";@-x \"//b.com/y\";",
        "a{b:src(\"//b.com/1\") c:url(",
    ];

    #[test]
    fn every_split_point_gives_the_same_output() {
        for max in [MAX_TOKEN, 12] {
            for ctx in [doc_ctx(), folded_ctx()] {
                for s in SAMPLES {
                    let input = s.as_bytes();
                    let whole = chunked(ctx.clone(), max, input, &[]);
                    for cut in 0..=input.len() {
                        assert_eq!(
                            chunked(ctx.clone(), max, input, &[cut]),
                            whole,
                            "{s:?} cut at {cut}, bound {max}"
                        );
                    }
                    // Byte by byte: every position is a cut.
                    let all: Vec<usize> = (1..input.len()).collect();
                    assert_eq!(
                        chunked(ctx.clone(), max, input, &all),
                        whole,
                        "{s:?} bytewise"
                    );
                }
            }
        }
    }

    #[test]
    fn samples_are_rewritten_as_expected() {
        // Guards that the split test above checks something: the samples do
        // fold (with the full bound) and keep long tokens (with 12).
        let c = |s: &str, max| chunked(doc_ctx(), max, s.as_bytes(), &[]).1.folded;
        assert_eq!(c(SAMPLES[0], MAX_TOKEN), 1);
        assert_eq!(c(SAMPLES[1], MAX_TOKEN), 2);
        assert_eq!(c(SAMPLES[2], MAX_TOKEN), 2);
        assert_eq!(c(SAMPLES[7], MAX_TOKEN), 1);
        assert_eq!(c(SAMPLES[7], 12), 0);
        assert_eq!(c(SAMPLES[10], MAX_TOKEN), 1);
    }

    fn css_soup() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop::sample::select(vec![
                "url(",
                "URL(",
                "u\\72l(",
                ")",
                "(",
                "\"",
                "'",
                "\\",
                "/*",
                "*/",
                "@import ",
                "@namespace ",
                "image-set(",
                "src(",
                "//b.com/x",
                "https://cdn.c.net/y.png",
                "//d.com/z",
                "data:,x",
                " ",
                "\n",
                "\r\n",
                ";",
                "{",
                "}",
                "#",
                "5",
                "-",
                "+",
                ".",
                "a",
                "é",
                "\\e9 ",
                "/",
                "x.png",
                "?q",
                "\\)",
                "*",
            ]),
            0..40,
        )
        .prop_map(|v| v.concat())
    }

    proptest! {
        /// Any input cut anywhere gives the unsplit output.
        #[test]
        fn chunking_never_matters(s in css_soup(), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6), small in any::<bool>(), folded in any::<bool>()) {
            let input = s.as_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            cuts.sort_unstable();
            let max = if small { 12 } else { MAX_TOKEN };
            let ctx = if folded { folded_ctx() } else { doc_ctx() };
            let whole = chunked(ctx.clone(), max, input, &[]);
            prop_assert_eq!(chunked(ctx, max, input, &cuts), whole);
        }

        /// Without an allowed host in it, a stylesheet comes out byte for byte.
        #[test]
        fn no_allowed_host_no_change(s in "[ -ac-~\n\r\t]{0,80}", cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4)) {
            let input = s.as_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            cuts.sort_unstable();
            if !s.contains('\\') && !s.contains('%') && !s.to_ascii_lowercase().contains('b') {
                let (out, counts) = chunked(doc_ctx(), MAX_TOKEN, input, &cuts);
                prop_assert_eq!(out, input.to_vec());
                prop_assert_eq!(counts, Counts::default());
            }
        }

        /// Arbitrary bytes: no panic, and chunking does not matter.
        #[test]
        fn arbitrary_bytes(input in proptest::collection::vec(any::<u8>(), 0..64), cut in any::<prop::sample::Index>()) {
            let cut = cut.index(input.len() + 1);
            let whole = chunked(doc_ctx(), 12, &input, &[]);
            prop_assert_eq!(chunked(doc_ctx(), 12, &input, &[cut]), whole);
        }
    }
}
