//! Streaming HTML rewriting on `lol_html`: the references a page loads as
//! part of itself are folded; links the user follows and nested documents
//! are not.
//!
//! | folded | attribute |
//! |---|---|
//! | `<img>`, `<source>` | `src`, `srcset` |
//! | `<script>`, `<audio>`, `<track>`, `<input type=image>` | `src` |
//! | `<video>` | `src`, `poster` |
//! | `<link>` with `rel` stylesheet, icon (and Apple/mask icons), modulepreload, or preload/prefetch `as` script, style, image, font, audio, video, track | `href`, `imagesrcset` |
//! | any element | `style` (its CSS `url()`s) |
//! | `<style>` | its text (CSS) |
//!
//! Not folded: `<a href>`, `<area href>`, `<form action>`, `<button
//! formaction>` (the user goes there: the address bar must show the real
//! site); `<iframe>`, `<frame>`, `<embed>`, `<object>` (documents: folded,
//! b.com's document would run in a.com's origin, with its cookies and DOM);
//! `<link>` of other kinds (canonical, alternate, manifest, preconnect…);
//! a stylesheet `<link>` with `integrity` (the accelerator rewrites
//! stylesheets, which would break Subresource Integrity; scripts and images
//! with `integrity` fold, their bytes are not changed). The first
//! `<base href>` is applied from where it appears (HTML requires it before
//! any URL-bearing element) and is itself kept.
//!
//! A `<meta http-equiv="Content-Security-Policy">` has its `content`
//! adjusted ([`crate::csp::adjust_meta`]) so the folded paths of the hosts it
//! allows are allowed too. One that cannot be adjusted is left as it is and
//! nothing after it is folded: its policy would block the folded references.
//!
//! `lol_html` hands attribute values over raw (character references
//! included), so values are decoded here (numeric references and `&amp;`,
//! `&quot;`, `&apos;`, `&lt;`, `&gt;`; a value with any other reference is
//! left alone) and encoded again when written.
//!
//! On an error inside `lol_html` (a memory limit), the rewriter "bails out":
//! `lol_html` flushes what it holds unchanged and every later chunk passes
//! straight through, so the page is never cut short; the reason is kept for
//! the log.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard};

use lol_html::errors::RewritingError;
use lol_html::html_content::{ContentType, DocumentEnd, TextChunk, TextType};
use lol_html::send::SendHandlerTypes;
use lol_html::{
    AsciiCompatibleEncoding, DocumentContentHandlers, ElementContentHandlers, HandlerResult,
    MemorySettings, OutputSink, Selector, Settings,
};

use crate::csp;
use crate::mapping::FoldContext;
use crate::rewrite::css::CssRewriter;
use crate::rewrite::{srcset, Counts};

/// Default cap on `lol_html`'s buffers (a start tag split across chunks is
/// held whole): 8 MiB, room for inline `data:` images.
pub const DEFAULT_MAX_MEMORY: usize = 8 * 1024 * 1024;

/// The elements the handler looks at.
const SELECTOR: &str = "img, source, script[src], link, audio[src], video, track[src], \
                        input[src], base[href], meta[http-equiv], [style]";

const HTML_NS: &str = "http://www.w3.org/1999/xhtml";

type Element<'r, 't> = lol_html::send::Element<'r, 't>;

/// How to read the document.
#[derive(Debug, Clone)]
pub struct HtmlOptions {
    /// The `charset` of the response's `Content-Type`, if it has one. With
    /// none, the document is read as UTF-8 and a `<meta charset>` switches
    /// it. References with non-ASCII characters are folded only when this
    /// says UTF-8 (see [`FoldContext::set_ascii_only`]).
    pub charset: Option<String>,
    /// Cap on `lol_html`'s buffers, bytes; past it the rewriter bails out.
    pub max_memory: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            charset: None,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// Why a rewriter cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HtmlError {
    /// The charset is unknown, or not ASCII-compatible (UTF-16,
    /// ISO-2022-JP), which `lol_html` cannot rewrite: serve the document
    /// unrewritten.
    #[error("charset {0:?} is unknown or not ASCII-compatible; serve the document unrewritten")]
    UnsupportedCharset(String),
    /// The built-in selector did not parse (a bug).
    #[error("internal selector error: {0}")]
    Selector(String),
}

/// Why a rewriter stopped rewriting mid-document (the rest passed through
/// unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BailOut {
    /// `lol_html` needed more than [`HtmlOptions::max_memory`].
    #[error("HTML rewriter memory limit reached; the rest of the document passed unchanged")]
    MemoryLimit,
    /// Any other `lol_html` error.
    #[error("HTML rewriter failed ({0}); the rest of the document passed unchanged")]
    Failed(String),
}

/// What a finished rewrite reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HtmlReport {
    /// What was rewritten.
    pub counts: Counts,
    /// Set if the rewriter bailed out.
    pub bailed_out: Option<BailOut>,
}

/// State the handlers share.
struct Shared {
    ctx: FoldContext,
    base_seen: bool,
    /// Cleared by a `<meta>` policy that could not be adjusted: references
    /// after it are left as written, which its policy allows as before.
    folding: bool,
    /// The stylesheet of the `<style>` element being streamed.
    style: Option<CssRewriter>,
    counts: Counts,
}

/// `lol_html`'s output goes here; [`HtmlRewriter::write`] drains it.
struct Sink(Arc<Mutex<Vec<u8>>>);

impl OutputSink for Sink {
    fn handle_chunk(&mut self, chunk: &[u8]) {
        lock(&self.0).extend_from_slice(chunk);
    }
}

/// Handlers run one at a time inside `write`, so the locks are never
/// contended; a poisoned one (a panic in a handler) still holds valid data.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A streaming HTML rewriter for one document. It is `Send`, so a server
/// can keep it across `.await`s.
///
/// ```
/// # use std::sync::Arc;
/// # use mewa_accel::site::{Site, SiteConfig};
/// # use mewa_accel::mapping::FoldContext;
/// # use mewa_accel::rewrite::html::{HtmlRewriter, HtmlOptions};
/// let site = Arc::new(Site::new(&SiteConfig {
///     hosts: vec!["a.com".into()],
///     fold: vec!["b.com".into()],
///     prefix: String::new(),
/// })?);
/// let ctx = FoldContext::document(site, url::Url::parse("http://a.com/")?).ok_or("site")?;
/// let mut html = HtmlRewriter::new(ctx, &HtmlOptions::default())?;
/// let mut out = Vec::new();
/// html.write(b"<img src=\"http://b.com/x", &mut out);
/// html.write(b".png\"><a href=\"http://b.com/\">b</a>", &mut out);
/// let report = html.end(&mut out);
/// assert_eq!(out, b"<img src=\"/b.com/x.png\"><a href=\"http://b.com/\">b</a>");
/// assert_eq!(report.counts.folded, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HtmlRewriter {
    inner: Option<lol_html::send::HtmlRewriter<'static, Sink>>,
    shared: Arc<Mutex<Shared>>,
    buffer: Arc<Mutex<Vec<u8>>>,
    bailed_out: Option<BailOut>,
}

impl std::fmt::Debug for HtmlRewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HtmlRewriter")
            .field("counts", &self.counts())
            .field("bailed_out", &self.bailed_out)
            .finish_non_exhaustive()
    }
}

impl HtmlRewriter {
    /// A rewriter for the document `ctx` describes.
    pub fn new(mut ctx: FoldContext, options: &HtmlOptions) -> Result<HtmlRewriter, HtmlError> {
        let encoding = match &options.charset {
            None => None,
            Some(label) => Some(
                encoding_rs::Encoding::for_label_no_replacement(label.trim().as_bytes())
                    .and_then(AsciiCompatibleEncoding::new)
                    .ok_or_else(|| HtmlError::UnsupportedCharset(label.clone()))?,
            ),
        };
        let utf8 =
            encoding.is_some_and(|e| <&encoding_rs::Encoding>::from(e) == encoding_rs::UTF_8);
        ctx.set_ascii_only(!utf8);

        let shared = Arc::new(Mutex::new(Shared {
            ctx,
            base_seen: false,
            folding: true,
            style: None,
            counts: Counts::default(),
        }));
        let selector: Selector = SELECTOR
            .parse()
            .map_err(|e: lol_html::errors::SelectorError| HtmlError::Selector(e.to_string()))?;

        let on_element = Arc::clone(&shared);
        let on_text = Arc::clone(&shared);
        let handlers = ElementContentHandlers::<SendHandlerTypes>::default().element(
            move |el: &mut Element<'_, '_>| -> HandlerResult {
                on_element_start(el, &mut lock(&on_element))
            },
        );
        let style_handlers = ElementContentHandlers::<SendHandlerTypes>::default().text(
            move |t: &mut TextChunk<'_>| -> HandlerResult {
                on_style_text(t, &mut lock(&on_text));
                Ok(())
            },
        );
        let style_selector: Selector = "style"
            .parse()
            .map_err(|e: lol_html::errors::SelectorError| HtmlError::Selector(e.to_string()))?;
        let on_end = Arc::clone(&shared);
        let doc_handlers = DocumentContentHandlers::<SendHandlerTypes>::default().end(
            move |end: &mut DocumentEnd<'_>| -> HandlerResult {
                // A `<style>` left open at the end of the document.
                let mut sh = lock(&on_end);
                if let Some(css) = sh.style.take() {
                    let mut out = Vec::new();
                    let c = css.end(&mut out);
                    sh.counts += c;
                    end.append(&String::from_utf8_lossy(&out), ContentType::Html);
                }
                Ok(())
            },
        );
        let on_bail = Arc::clone(&shared);
        let settings = Settings::new_send()
            .append_element_content_handler((Cow::Owned(selector), handlers))
            .append_element_content_handler((Cow::Owned(style_selector), style_handlers))
            .append_document_content_handler(doc_handlers)
            .append_bail_out_handler(
                move |_: &RewritingError, b: &mut lol_html::html_content::BailOut<'_>| {
                    // Text of a `<style>` held back for a token's end goes
                    // out as it came, before lol_html's raw flush of the rest.
                    if let Some(css) = lock(&on_bail).style.take() {
                        b.append(
                            &String::from_utf8_lossy(&css.into_held()),
                            ContentType::Html,
                        );
                    }
                },
            )
            .with_strict(false)
            .with_adjust_charset_on_meta_tag(encoding.is_none())
            .with_graceful_bail_out_on_content_handler_error(true)
            .with_memory_settings(
                MemorySettings::new()
                    .with_max_allowed_memory_usage(options.max_memory)
                    .with_graceful_bail_out_on_memory_limit_exceeded(true),
            );
        let settings = match encoding {
            Some(e) => settings.with_encoding(e),
            None => settings,
        };
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let inner = lol_html::send::HtmlRewriter::new(settings, Sink(Arc::clone(&buffer)));
        Ok(HtmlRewriter {
            inner: Some(inner),
            shared,
            buffer,
            bailed_out: None,
        })
    }

    /// Feeds a chunk of the document; appends what is ready to `out`.
    pub fn write(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        match &mut self.inner {
            Some(r) => {
                if let Err(e) = r.write(chunk) {
                    self.bail(&e);
                }
            }
            None => out.extend_from_slice(chunk),
        }
        out.append(&mut lock(&self.buffer));
    }

    /// Ends the document; appends the rest to `out`.
    pub fn end(mut self, out: &mut Vec<u8>) -> HtmlReport {
        if let Some(r) = self.inner.take() {
            if let Err(e) = r.end() {
                self.bail(&e);
            }
        }
        out.append(&mut lock(&self.buffer));
        HtmlReport {
            counts: self.counts(),
            bailed_out: self.bailed_out,
        }
    }

    /// What has been rewritten so far.
    pub fn counts(&self) -> Counts {
        lock(&self.shared).counts
    }

    /// Set once the rewriter has bailed out.
    pub fn bailed_out(&self) -> Option<&BailOut> {
        self.bailed_out.as_ref()
    }

    fn bail(&mut self, e: &RewritingError) {
        // lol_html has flushed what it held (graceful bail-out); it must not
        // be used again.
        self.inner = None;
        self.bailed_out = Some(match e {
            RewritingError::MemoryLimitExceeded(_) => BailOut::MemoryLimit,
            other => BailOut::Failed(other.to_string()),
        });
    }
}

/// Rewrites a complete document.
pub fn rewrite_html(
    ctx: FoldContext,
    options: &HtmlOptions,
    html: &[u8],
) -> Result<(Vec<u8>, HtmlReport), HtmlError> {
    let mut r = HtmlRewriter::new(ctx, options)?;
    let mut out = Vec::with_capacity(html.len());
    r.write(html, &mut out);
    let report = r.end(&mut out);
    Ok((out, report))
}

fn on_element_start(el: &mut Element<'_, '_>, sh: &mut Shared) -> HandlerResult {
    let html = el.namespace_uri() == HTML_NS;
    if html {
        match el.tag_name().as_str() {
            "base" if !sh.base_seen => {
                sh.base_seen = true;
                if let Some(raw) = el.get_attribute("href") {
                    if let Some(href) = decode_attr(&raw) {
                        sh.ctx.set_base(&href);
                    }
                }
            }
            "meta" => meta_csp(el, sh)?,
            _ => {}
        }
    }
    if !sh.folding {
        return Ok(());
    }
    if html {
        match el.tag_name().as_str() {
            "img" | "source" => {
                url_attr(el, "src", sh)?;
                srcset_attr(el, "srcset", sh)?;
            }
            "script" | "audio" | "track" => url_attr(el, "src", sh)?,
            "input"
                if el
                    .get_attribute("type")
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("image")) =>
            {
                url_attr(el, "src", sh)?;
            }
            "video" => {
                url_attr(el, "src", sh)?;
                url_attr(el, "poster", sh)?;
            }
            "link" => link(el, sh)?,
            _ => {}
        }
    }
    if let Some(raw) = el.get_attribute("style") {
        if let Some(css) = decode_attr(&raw) {
            let (new, c) = CssRewriter::rewrite_str(sh.ctx.clone(), &css);
            if c.folded + c.absolutized > 0 {
                sh.counts += c;
                el.set_attribute("style", &encode_attr(&new))?;
            }
        }
    }
    Ok(())
}

/// `<meta http-equiv="Content-Security-Policy">`: its policy gets sources
/// for the folded paths. A meta outside `<head>` is ignored by browsers;
/// adjusting it too is harmless and spares guessing where an implied
/// `<head>` ends.
fn meta_csp(el: &mut Element<'_, '_>, sh: &mut Shared) -> HandlerResult {
    // CSP3 §3.3: "A Document may deliver a policy via one or more HTML meta
    // elements whose http-equiv attributes are an ASCII case-insensitive
    // match for the string "Content-Security-Policy"."
    let is_csp = el
        .get_attribute("http-equiv")
        .and_then(|raw| {
            decode_attr(&raw).map(|v| v.eq_ignore_ascii_case("content-security-policy"))
        })
        .unwrap_or(false);
    if !is_csp {
        return Ok(());
    }
    // HTML, "Content security policy state": "2. If the meta element has no
    // content attribute, or if that attribute's value is the empty string,
    // then return. 3. Let policy be the result of executing Content Security
    // Policy's parse a serialized Content Security Policy algorithm on the
    // meta element's content attribute's value, with a source of "meta", and
    // a disposition of "enforce"." (One policy: see `csp::adjust_meta`.)
    let Some(raw) = el.get_attribute("content") else {
        return Ok(());
    };
    if raw.is_empty() {
        return Ok(());
    }
    let adjusted = decode_attr(&raw)
        .and_then(|content| csp::adjust_meta(&content, sh.ctx.site(), sh.ctx.served()).ok());
    match adjusted {
        Some(a) if a.added > 0 => {
            sh.counts.csp_adjusted += 1;
            el.set_attribute("content", &encode_attr(&a.value))?;
        }
        Some(_) => {}
        None => {
            sh.counts.csp_unadjustable += 1;
            sh.folding = false;
        }
    }
    Ok(())
}

/// `<link>`: only kinds that load a subresource for this page.
fn link(el: &mut Element<'_, '_>, sh: &mut Shared) -> HandlerResult {
    let rel = el
        .get_attribute("rel")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let kind = el
        .get_attribute("as")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let kind = kind.trim();
    let has = |t: &str| rel.split_ascii_whitespace().any(|r| r == t);
    let subresource = [
        "stylesheet",
        "icon",
        "apple-touch-icon",
        "apple-touch-icon-precomposed",
        "mask-icon",
        "modulepreload",
    ]
    .iter()
    .any(|t| has(t))
        || ((has("preload") || has("prefetch"))
            && matches!(
                kind,
                "script" | "style" | "image" | "font" | "audio" | "video" | "track"
            ));
    if !subresource {
        return Ok(());
    }
    let stylesheet = has("stylesheet") || (has("preload") && kind == "style");
    if stylesheet && el.has_attribute("integrity") {
        sh.counts.kept_for_integrity += 1;
        return Ok(());
    }
    url_attr(el, "href", sh)?;
    srcset_attr(el, "imagesrcset", sh)
}

fn url_attr(el: &mut Element<'_, '_>, name: &str, sh: &mut Shared) -> HandlerResult {
    let Some(raw) = el.get_attribute(name) else {
        return Ok(());
    };
    let Some(value) = decode_attr(&raw) else {
        return Ok(());
    };
    if let Some(r) = sh.ctx.rewrite(&value) {
        sh.counts.record(&r);
        el.set_attribute(name, &encode_attr(r.text()))?;
    }
    Ok(())
}

fn srcset_attr(el: &mut Element<'_, '_>, name: &str, sh: &mut Shared) -> HandlerResult {
    let Some(raw) = el.get_attribute(name) else {
        return Ok(());
    };
    let Some(value) = decode_attr(&raw) else {
        return Ok(());
    };
    if let Some(new) = srcset::rewrite(&sh.ctx, &value, &mut sh.counts) {
        el.set_attribute(name, &encode_attr(&new))?;
    }
    Ok(())
}

/// A chunk of a `<style>` element's text, streamed through the CSS
/// rewriter; the chunk is replaced only when its output differs.
fn on_style_text(t: &mut TextChunk<'_>, sh: &mut Shared) {
    if t.text_type() != TextType::RawText || !sh.folding {
        return;
    }
    let ctx = sh.ctx.clone();
    let css = sh.style.get_or_insert_with(|| CssRewriter::new(ctx));
    let mut out = Vec::new();
    css.write(t.as_str().as_bytes(), &mut out);
    if t.last_in_text_node() {
        if let Some(css) = sh.style.take() {
            let c = css.end(&mut out);
            sh.counts += c;
        }
    }
    if out != t.as_str().as_bytes() {
        let text = String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        t.set_str(text);
    }
}

/// Decodes the character references of a raw attribute value, or `None` if
/// it has one this decoder does not know (the attribute is then left alone).
/// Follows HTML's rules for attributes: `&name=` is literal, a numeric
/// reference needs no `;`.
fn decode_attr(raw: &str) -> Option<Cow<'_, str>> {
    if !raw.contains('&') {
        return Some(Cow::Borrowed(raw));
    }
    let mut out = String::with_capacity(raw.len());
    let mut last = 0;
    let mut i = 0;
    while let Some(off) = raw[i..].find('&') {
        let amp = i + off;
        out.push_str(&raw[last..amp]);
        let rest = &raw[amp + 1..];
        if let Some(num) = rest.strip_prefix('#') {
            let hex = num.starts_with(['x', 'X']);
            let digits = if hex { &num[1..] } else { num };
            let n = digits
                .bytes()
                .take_while(|c| {
                    if hex {
                        c.is_ascii_hexdigit()
                    } else {
                        c.is_ascii_digit()
                    }
                })
                .count();
            if n == 0 || n > 8 {
                return None;
            }
            let cp = u32::from_str_radix(&digits[..n], if hex { 16 } else { 10 }).ok()?;
            if cp == 0 || (0x80..=0x9f).contains(&cp) {
                return None;
            }
            out.push(char::from_u32(cp)?);
            let mut end = amp + 2 + usize::from(hex) + n;
            if raw[end..].starts_with(';') {
                end += 1;
            }
            i = end;
            last = end;
            continue;
        }
        let name_len = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
        match rest.as_bytes().get(name_len) {
            // A lone '&', or "&name=" (literal in attributes).
            _ if name_len == 0 => {
                i = amp + 1;
                last = amp;
            }
            Some(b'=') => {
                i = amp + 1;
                last = amp;
            }
            Some(b';') => {
                let ch = match &rest[..name_len] {
                    "amp" => '&',
                    "quot" => '"',
                    "apos" => '\'',
                    "lt" => '<',
                    "gt" => '>',
                    _ => return None,
                };
                out.push(ch);
                i = amp + 1 + name_len + 1;
                last = i;
            }
            // No ';': only the legacy names are references without one
            // (HTML §13.2.5.73: the longest name in the table that
            // prefixes the input). When none prefixes the name, the '&'
            // is literal (`?a=1&f_v=2`, `&pg.n=x`: query strings); when
            // one does (`&copy.`), it would decode, which is not ours to
            // guess: the value is left alone.
            _ if !LEGACY_REFERENCES
                .iter()
                .any(|l| rest[..name_len].starts_with(l)) =>
            {
                i = amp + 1;
                last = amp;
            }
            _ => return None,
        }
    }
    out.push_str(&raw[last..]);
    Some(Cow::Owned(out))
}

/// The named character references HTML also recognises without a ';'
/// (the "legacy" entries of the WHATWG named character references table).
const LEGACY_REFERENCES: [&str; 106] = [
    "AElig", "AMP", "Aacute", "Acirc", "Agrave", "Aring", "Atilde", "Auml", "COPY", "Ccedil",
    "ETH", "Eacute", "Ecirc", "Egrave", "Euml", "GT", "Iacute", "Icirc", "Igrave", "Iuml", "LT",
    "Ntilde", "Oacute", "Ocirc", "Ograve", "Oslash", "Otilde", "Ouml", "QUOT", "REG", "THORN",
    "Uacute", "Ucirc", "Ugrave", "Uuml", "Yacute", "aacute", "acirc", "acute", "aelig", "agrave",
    "amp", "aring", "atilde", "auml", "brvbar", "ccedil", "cedil", "cent", "copy", "curren", "deg",
    "divide", "eacute", "ecirc", "egrave", "eth", "euml", "frac12", "frac14", "frac34", "gt",
    "iacute", "icirc", "iexcl", "igrave", "iquest", "iuml", "laquo", "lt", "macr", "micro",
    "middot", "nbsp", "not", "ntilde", "oacute", "ocirc", "ograve", "ordf", "ordm", "oslash",
    "otilde", "ouml", "para", "plusmn", "pound", "quot", "raquo", "reg", "sect", "shy", "sup1",
    "sup2", "sup3", "szlig", "thorn", "times", "uacute", "ucirc", "ugrave", "uml", "uuml",
    "yacute", "yen", "yuml",
];

/// Encodes a value for a double-quoted attribute.
fn encode_attr(value: &str) -> String {
    value.replace('&', "&amp;").replace('"', "&quot;")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::site::{Site, SiteConfig};
    use proptest::prelude::*;
    use url::Url;

    fn site(prefix: &str) -> Arc<Site> {
        Arc::new(
            Site::new(&SiteConfig {
                hosts: vec!["a.com".into()],
                fold: vec!["b.com".into(), "cdn.c.net".into()],
                prefix: prefix.into(),
            })
            .unwrap(),
        )
    }

    fn ctx_at(page: &str) -> FoldContext {
        FoldContext::document(site(""), Url::parse(page).unwrap()).unwrap()
    }

    fn utf8() -> HtmlOptions {
        HtmlOptions {
            charset: Some("utf-8".into()),
            ..HtmlOptions::default()
        }
    }

    fn rw_at(page: &str, html: &str) -> (String, HtmlReport) {
        let (out, report) = rewrite_html(ctx_at(page), &utf8(), html.as_bytes()).unwrap();
        (String::from_utf8(out).unwrap(), report)
    }

    fn rw(html: &str) -> String {
        rw_at("https://a.com/", html).0
    }

    fn chunked(html: &[u8], cuts: &[usize]) -> (Vec<u8>, HtmlReport) {
        let mut r = HtmlRewriter::new(ctx_at("https://a.com/"), &utf8()).unwrap();
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts {
            r.write(&html[last..c], &mut out);
            last = c;
        }
        r.write(&html[last..], &mut out);
        let report = r.end(&mut out);
        (out, report)
    }

    #[test]
    fn is_send() {
        fn send<T: Send>() {}
        send::<HtmlRewriter>();
    }

    #[test]
    fn folds_every_subresource_attribute() {
        let cases: &[(&str, &str)] = &[
            (
                r#"<img src="https://b.com/x.png">"#,
                r#"<img src="/b.com/x.png">"#,
            ),
            (
                r#"<img src=//b.com/x.png alt=x>"#,
                r#"<img src="/b.com/x.png" alt=x>"#,
            ),
            (
                r#"<img src='https://b.com/x.png'>"#,
                r#"<img src="/b.com/x.png">"#,
            ),
            (
                r#"<img srcset="//b.com/a.png 1x, //b.com/b.png 2x">"#,
                r#"<img srcset="/b.com/a.png 1x, /b.com/b.png 2x">"#,
            ),
            (
                r#"<picture><source srcset="//b.com/a.avif" type="image/avif"><source src="//b.com/v.mp4"></picture>"#,
                r#"<picture><source srcset="/b.com/a.avif" type="image/avif"><source src="/b.com/v.mp4"></picture>"#,
            ),
            (
                r#"<script src="https://cdn.c.net/app.js"></script>"#,
                r#"<script src="/cdn.c.net/app.js"></script>"#,
            ),
            (
                r#"<script type="module" src="//b.com/m.js"></script>"#,
                r#"<script type="module" src="/b.com/m.js"></script>"#,
            ),
            (
                r#"<video src="//b.com/v.mp4" poster="//b.com/p.jpg"></video>"#,
                r#"<video src="/b.com/v.mp4" poster="/b.com/p.jpg"></video>"#,
            ),
            (
                r#"<audio src="//b.com/a.mp3"></audio>"#,
                r#"<audio src="/b.com/a.mp3"></audio>"#,
            ),
            (
                r#"<track src="//b.com/t.vtt">"#,
                r#"<track src="/b.com/t.vtt">"#,
            ),
            (
                r#"<input type="image" src="//b.com/i.png">"#,
                r#"<input type="image" src="/b.com/i.png">"#,
            ),
            (
                r#"<link rel="stylesheet" href="//b.com/s.css">"#,
                r#"<link rel="stylesheet" href="/b.com/s.css">"#,
            ),
            (
                r#"<link rel="alternate stylesheet" href="//b.com/s.css">"#,
                r#"<link rel="alternate stylesheet" href="/b.com/s.css">"#,
            ),
            (
                r#"<link rel="preload" as="image" href="//b.com/h.jpg" imagesrcset="//b.com/h1.jpg 1x, //b.com/h2.jpg 2x">"#,
                r#"<link rel="preload" as="image" href="/b.com/h.jpg" imagesrcset="/b.com/h1.jpg 1x, /b.com/h2.jpg 2x">"#,
            ),
            (
                r#"<link rel=preload as=font crossorigin href="//b.com/f.woff2">"#,
                r#"<link rel=preload as=font crossorigin href="/b.com/f.woff2">"#,
            ),
            (
                r#"<link rel="shortcut icon" href="//b.com/favicon.ico">"#,
                r#"<link rel="shortcut icon" href="/b.com/favicon.ico">"#,
            ),
            (
                r#"<link rel="apple-touch-icon" href="//b.com/t.png">"#,
                r#"<link rel="apple-touch-icon" href="/b.com/t.png">"#,
            ),
            (
                r#"<link rel="modulepreload" href="//b.com/m.js">"#,
                r#"<link rel="modulepreload" href="/b.com/m.js">"#,
            ),
            (
                r#"<div style="background:url(//b.com/bg.png)">x</div>"#,
                r#"<div style="background:url(/b.com/bg.png)">x</div>"#,
            ),
            (
                r#"<a style="background:url(&quot;//b.com/bg.png&quot;)" href="//b.com/">x</a>"#,
                r#"<a style="background:url(&quot;/b.com/bg.png&quot;)" href="//b.com/">x</a>"#,
            ),
            (
                "<style>a{background:url(//b.com/x.png)}@import '//b.com/s.css';</style>",
                "<style>a{background:url(/b.com/x.png)}@import '/b.com/s.css';</style>",
            ),
            // integrity on a script: bytes unchanged by us, so it folds
            (
                r#"<script src="//b.com/a.js" integrity="sha384-x" crossorigin="anonymous"></script>"#,
                r#"<script src="/b.com/a.js" integrity="sha384-x" crossorigin="anonymous"></script>"#,
            ),
            // query with entities, fragment kept
            (
                r#"<img src="//b.com/x.png?a=1&amp;b=2#f">"#,
                r#"<img src="/b.com/x.png?a=1&amp;b=2#f">"#,
            ),
            (
                r#"<img src="//b.com/x.png?a=1&b=2">"#,
                r#"<img src="/b.com/x.png?a=1&amp;b=2">"#,
            ),
            (
                r#"<img src="&#47;&#x2F;b.com/x.png">"#,
                r#"<img src="/b.com/x.png">"#,
            ),
            (
                r#"<IMG SRC="HTTPS://B.COM/X.png">"#,
                r#"<IMG SRC="/b.com/X.png">"#,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(rw(input), *want, "{input}");
        }
    }

    #[test]
    fn leaves_links_documents_and_others_alone() {
        for input in [
            r#"<a href="//b.com/page">b</a>"#,
            r#"<area href="//b.com/page">"#,
            r#"<form action="//b.com/post"><button formaction="//b.com/x">go</button></form>"#,
            r#"<iframe src="//b.com/frame.html"></iframe>"#,
            r#"<frame src="//b.com/f.html">"#,
            r#"<embed src="//b.com/e.swf">"#,
            r#"<object data="//b.com/o.pdf"></object>"#,
            r#"<link rel="canonical" href="//b.com/">"#,
            r#"<link rel="alternate" href="//b.com/feed">"#,
            r#"<link rel="manifest" href="//b.com/m.json">"#,
            r#"<link rel="preconnect" href="//b.com">"#,
            r#"<link rel="dns-prefetch" href="//b.com">"#,
            r#"<link rel="prefetch" href="//b.com/next.html">"#,
            r#"<link rel="preload" as="document" href="//b.com/d.html">"#,
            r#"<link rel="preload" as="fetch" href="//b.com/d.json">"#,
            r#"<input type="text" src="//b.com/i.png">"#,
            r#"<img data-src="//b.com/lazy.png">"#,
            r#"<svg><image href="//b.com/i.png"/><script src="//b.com/s.js"></script></svg>"#,
            r#"<img src="//d.com/x.png"><img src="x.png"><img src="/b.com/x.png">"#,
            r#"<img src="http://b.com/x.png">"#,
            r#"<img src="https://b.com:8443/x.png">"#,
            r#"<img src="//b.com/x.png?a&copy">"#,
            r#"<img src="//b.com/x.png?a&unknown;">"#,
            r#"<script>var u = "//b.com/x.png";</script>"#,
            r#"<p>//b.com/x.png url(//b.com/y.png)</p>"#,
            r#"<!-- <img src="//b.com/x.png"> -->"#,
            r#"<textarea><img src="//b.com/x.png"></textarea>"#,
            r#"<noscript><img src="//b.com/x.png"></noscript>"#,
        ] {
            assert_eq!(rw(input), input, "{input}");
        }
    }

    #[test]
    fn stylesheet_with_integrity_is_kept() {
        let input =
            r#"<link rel="stylesheet" href="//b.com/s.css" integrity="sha384-x" crossorigin>"#;
        let (out, report) = rw_at("https://a.com/", input);
        assert_eq!(out, input);
        assert_eq!(report.counts.kept_for_integrity, 1);
        assert_eq!(report.counts.folded, 0);
        let input = r#"<link rel="preload" as="style" href="//b.com/s.css" integrity="sha384-x">"#;
        assert_eq!(rw(input), input);
    }

    #[test]
    fn mixed_content_is_never_folded() {
        // https page: http resources stay (the browser decides, as without
        // us); http page: https resources stay (no downgrade).
        let html = r#"<img src="http://b.com/x.png"><img src="https://b.com/y.png">"#;
        assert_eq!(
            rw_at("https://a.com/", html).0,
            r#"<img src="http://b.com/x.png"><img src="/b.com/y.png">"#
        );
        assert_eq!(
            rw_at("http://a.com/", html).0,
            r#"<img src="/b.com/x.png"><img src="https://b.com/y.png">"#
        );
    }

    #[test]
    fn base_href() {
        // A foreign base: relative references are b.com's and fold to
        // absolute URLs on the document's origin; <a> stays relative.
        let (out, _) = rw_at(
            "https://a.com/dir/page.html",
            r#"<base href="https://b.com/assets/"><img src="x.png"><a href="y.html">y</a><img src="/z.png">"#,
        );
        assert_eq!(
            out,
            r#"<base href="https://b.com/assets/"><img src="https://a.com/b.com/assets/x.png"><a href="y.html">y</a><img src="https://a.com/b.com/z.png">"#
        );
        // Only the first base counts; a same-origin base keeps path form.
        let (out, _) = rw_at(
            "https://a.com/",
            r#"<base href="/sub/"><base href="https://b.com/"><img src="x.png"><img src="//b.com/y.png">"#,
        );
        assert_eq!(
            out,
            r#"<base href="/sub/"><base href="https://b.com/"><img src="x.png"><img src="/b.com/y.png">"#
        );
        // A base without href does not count.
        let (out, _) = rw_at(
            "https://a.com/",
            r#"<base target="_blank"><base href="//b.com/"><img src="x.png">"#,
        );
        assert_eq!(
            out,
            r#"<base target="_blank"><base href="//b.com/"><img src="https://a.com/b.com/x.png">"#
        );
    }

    #[test]
    fn prefix_form() {
        let ctx =
            FoldContext::document(site("/_mewa"), Url::parse("https://a.com/").unwrap()).unwrap();
        let (out, _) = rewrite_html(ctx, &utf8(), br#"<img src="https://b.com/x.png">"#).unwrap();
        assert_eq!(out, br#"<img src="/_mewa/b.com/x.png">"#);
    }

    #[test]
    fn counts_every_fold_once() {
        let (_, report) = rw_at(
            "https://a.com/",
            r#"<img src="//b.com/1" srcset="//b.com/2 1x, //b.com/3 2x" style="background:url(//b.com/4)">
               <style>a{b:url(//b.com/5)}</style><a href="//b.com/6">x</a><img src="//d.com/7">"#,
        );
        assert_eq!(report.counts.folded, 5);
        assert_eq!(report.bailed_out, None);
    }

    #[test]
    fn charsets() {
        // Non-ASCII references fold only in a document known to be UTF-8.
        let html = "<img src=\"//b.com/é.png\"><img src=\"//b.com/x.png\">";
        let (out, _) = rw_at("https://a.com/", html);
        assert_eq!(
            out,
            "<img src=\"/b.com/%C3%A9.png\"><img src=\"/b.com/x.png\">"
        );
        let (out, _) = rewrite_html(
            ctx_at("https://a.com/"),
            &HtmlOptions::default(),
            html.as_bytes(),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "<img src=\"//b.com/é.png\"><img src=\"/b.com/x.png\">"
        );
        // windows-1252: bytes outside ASCII survive a rewritten <style>.
        let latin = HtmlOptions {
            charset: Some("windows-1252".into()),
            ..HtmlOptions::default()
        };
        let input = b"<style>a{content:\"\xe9\";b:url(//b.com/x)}</style>";
        let (out, report) = rewrite_html(ctx_at("https://a.com/"), &latin, input).unwrap();
        assert_eq!(report.counts.folded, 1);
        let want = b"<style>a{content:\"\xe9\";b:url(/b.com/x)}</style>".to_vec();
        assert_eq!(out, want);
        assert!(matches!(
            HtmlRewriter::new(
                ctx_at("https://a.com/"),
                &HtmlOptions {
                    charset: Some("utf-16le".into()),
                    ..HtmlOptions::default()
                }
            ),
            Err(HtmlError::UnsupportedCharset(_))
        ));
        assert!(HtmlRewriter::new(
            ctx_at("https://a.com/"),
            &HtmlOptions {
                charset: Some("no-such-charset".into()),
                ..HtmlOptions::default()
            }
        )
        .is_err());
    }

    #[test]
    fn memory_limit_bails_out_without_losing_bytes() {
        let opts = HtmlOptions {
            charset: Some("utf-8".into()),
            max_memory: 4096,
        };
        let mut r = HtmlRewriter::new(ctx_at("https://a.com/"), &opts).unwrap();
        let mut out = Vec::new();
        let mut input = Vec::new();
        let head = br#"<img src="//b.com/x.png"><img alt=""#;
        let tag_body = vec![b'x'; 10_000];
        let tail = br#"" src="//b.com/y.png"><img src="//b.com/z.png">"#;
        for part in [&head[..], &tag_body[..5000], &tag_body[5000..], &tail[..]] {
            r.write(part, &mut out);
            input.extend_from_slice(part);
        }
        let report = r.end(&mut out);
        assert_eq!(report.bailed_out, Some(BailOut::MemoryLimit));
        assert_eq!(report.counts.folded, 1);
        let mut want = br#"<img src="/b.com/x.png"><img alt=""#.to_vec();
        want.extend_from_slice(&input[head.len()..]);
        assert_eq!(out, want);
    }

    #[test]
    fn unclosed_style_is_flushed() {
        let (out, report) = rw_at("https://a.com/", "<style>a{b:url(//b.com/x");
        assert_eq!(out, "<style>a{b:url(/b.com/x");
        assert_eq!(report.counts.folded, 1);
    }

    #[test]
    fn attribute_references() {
        assert_eq!(decode_attr("a&amp;b").as_deref(), Some("a&b"));
        assert_eq!(decode_attr("&#47;&#x2f;&#X2F").as_deref(), Some("///"));
        assert_eq!(decode_attr("?a=1&b=2").as_deref(), Some("?a=1&b=2"));
        assert_eq!(decode_attr("a & b &").as_deref(), Some("a & b &"));
        assert_eq!(
            decode_attr("&quot;&apos;&lt;&gt;").as_deref(),
            Some("\"'<>")
        );
        // Query separators before a name no legacy reference prefixes are
        // literal, as browsers read them.
        let q = "?p_v=2&f_v=v3&pg.n=w&d.imd=false&rf=&x-y=1&a";
        assert_eq!(decode_attr(q).as_deref(), Some(q));
        // A legacy name without ';' would decode: left alone.
        assert_eq!(decode_attr("a&copy.b"), None);
        assert_eq!(decode_attr("a&amp_b"), None);
        assert_eq!(decode_attr("&copy"), None);
        assert_eq!(decode_attr("&copy;"), None);
        assert_eq!(decode_attr("&#0;"), None);
        assert_eq!(decode_attr("&#x80;"), None);
        assert_eq!(decode_attr("&#xD800;"), None);
        assert_eq!(decode_attr("&#;"), None);
        assert_eq!(decode_attr("&#123456789;"), None);
        assert_eq!(encode_attr("a&b\"c'"), "a&amp;b&quot;c'");
    }

    #[test]
    fn meta_csp_is_adjusted() {
        let (out, report) = rw_at(
            "https://a.com/",
            r#"<head><meta http-equiv="Content-Security-Policy" content="img-src 'none'; script-src https://b.com; connect-src b.com"><script src="https://b.com/a.js"></script>"#,
        );
        assert_eq!(
            out,
            r#"<head><meta http-equiv="Content-Security-Policy" content="img-src 'none'; script-src https://b.com https://a.com/b.com/; connect-src b.com"><script src="/b.com/a.js"></script>"#
        );
        assert_eq!(report.counts.csp_adjusted, 1);
        assert_eq!(report.counts.folded, 1);

        // http-equiv is matched case-insensitively; references are decoded
        // and encoded again; a comma separates nothing in a meta.
        let (out, report) = rw_at(
            "https://a.com/",
            r#"<META HTTP-EQUIV="content-security-POLICY" CONTENT="img-src https://b.com/a&amp;b/, cdn.c.net">"#,
        );
        assert_eq!(
            out,
            r#"<META HTTP-EQUIV="content-security-POLICY" CONTENT="img-src https://b.com/a&amp;b/, cdn.c.net https://a.com/cdn.c.net/">"#
        );
        assert_eq!(report.counts.csp_adjusted, 1);

        // The prefix form.
        let ctx =
            FoldContext::document(site("/_mewa"), Url::parse("https://a.com/").unwrap()).unwrap();
        let (out, _) = rewrite_html(
            ctx,
            &utf8(),
            br#"<meta http-equiv="Content-Security-Policy" content="default-src b.com">"#,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"<meta http-equiv="Content-Security-Policy" content="default-src b.com https://a.com/_mewa/b.com/">"#
        );
    }

    #[test]
    fn meta_csp_left_alone() {
        for input in [
            // Allowed already ('self'), nothing allowed, another directive.
            r#"<meta http-equiv="Content-Security-Policy" content="script-src &apos;self&apos; https://b.com">"#,
            r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'">"#,
            r#"<meta http-equiv="Content-Security-Policy" content="frame-src b.com">"#,
            r#"<meta http-equiv="Content-Security-Policy" content="">"#,
            r#"<meta http-equiv="Content-Security-Policy">"#,
            // Not a policy a meta delivers.
            r#"<meta http-equiv="Content-Security-Policy-Report-Only" content="img-src b.com">"#,
            r#"<meta http-equiv=" Content-Security-Policy" content="img-src b.com">"#,
            r#"<meta name="Content-Security-Policy" content="img-src b.com">"#,
        ] {
            let (out, report) = rw_at("https://a.com/", input);
            assert_eq!(out, input);
            assert_eq!(report.counts, Counts::default(), "{input}");
        }
    }

    #[test]
    fn unadjustable_meta_csp_stops_folding() {
        for content in [
            "img-src b.com bé.example",
            "img-src b.com&copy;",
            "img-src\u{b}b.com",
        ] {
            let input = format!(
                r#"<img src="//b.com/1.png"><meta http-equiv="Content-Security-Policy" content="{content}"><img src="//b.com/2.png" style="background:url(//b.com/3.png)"><style>a{{b:url(//b.com/4.png)}}</style>"#
            );
            let (out, report) = rw_at("https://a.com/", &input);
            assert_eq!(out, input.replacen("//b.com/1.png", "/b.com/1.png", 1));
            assert_eq!(report.counts.csp_unadjustable, 1, "{content}");
            assert_eq!(report.counts.folded, 1);
        }
    }

    const PAGE: &str = r#"<!doctype html><html><head><base href="/"><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'self' https://b.com; img-src https://cdn.c.net">
<link rel="stylesheet" href="https://b.com/s.css"><link rel="preload" as="image" imagesrcset="//b.com/1.png 1x, //b.com/2.png 2x">
<style>body{background:url( "//cdn.c.net/bg.png" )} /* url(//b.com/no) */ @import url(//b.com/i.css);</style>
<script src="//b.com/app.js"></script><script>var x = "<img src=//b.com/no>";</script></head>
<body style="background-image:url(//b.com/body.png)"><a href="//b.com/">b</a><img src="//b.com/a.png?x=1&amp;y=2" srcset="//b.com/a.png 1x,//b.com/a2.png 2x">
<iframe src="//b.com/f.html"></iframe><video poster="//b.com/p.jpg"><source src="//b.com/v.webm"></video></body></html>"#;

    #[test]
    fn every_split_point_gives_the_same_output() {
        let input = PAGE.as_bytes();
        let whole = chunked(input, &[]);
        assert_eq!(whole.1.counts.folded, 12);
        assert_eq!(whole.1.counts.csp_adjusted, 1);
        for cut in 0..=input.len() {
            assert_eq!(chunked(input, &[cut]), whole, "cut at {cut}");
        }
        let all: Vec<usize> = (1..input.len()).collect();
        assert_eq!(chunked(input, &all), whole, "byte by byte");
    }

    proptest! {
        /// Any chunking of the page gives the unsplit output.
        #[test]
        fn chunking_never_matters(cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8)) {
            let input = PAGE.as_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            cuts.sort_unstable();
            prop_assert_eq!(chunked(input, &cuts), chunked(input, &[]));
        }

        /// HTML-ish text without an allowed host comes out byte for byte.
        #[test]
        fn no_allowed_host_no_change(s in "[<>/=\"' a-ac-z!\\-\n{}():;.#?&]{0,120}", cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4)) {
            let input = s.as_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            cuts.sort_unstable();
            let (out, report) = chunked(input, &cuts);
            prop_assert_eq!(out, input.to_vec());
            prop_assert_eq!(report.counts, Counts::default());
        }
    }
}
