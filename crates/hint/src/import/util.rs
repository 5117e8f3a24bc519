//! Small helpers shared by the importers: lenient JSON field access, URL
//! handling, and the tally of size rules that becomes report notes.

use serde_json::Value;

use std::collections::HashMap;

use super::ImportError;
use crate::page::strip_fragment;

/// The name of the input, carried around to build errors that name it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// Name of the input as given by the caller.
    pub input: &'a str,
}

impl Ctx<'_> {
    /// [`ImportError::MissingField`] for `field` of entry `entry`.
    pub fn missing(&self, entry: usize, field: impl Into<String>) -> ImportError {
        ImportError::MissingField {
            input: self.input.to_string(),
            entry,
            field: field.into(),
        }
    }

    /// [`ImportError::BadField`] for `field` of entry `entry`.
    pub fn bad(
        &self,
        entry: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ImportError {
        ImportError::BadField {
            input: self.input.to_string(),
            entry,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A number field read with [`num`], its type error turned into
    /// [`ImportError::BadField`] at `path`.
    pub fn num(
        &self,
        v: Option<&Value>,
        entry: usize,
        path: impl FnOnce() -> String,
    ) -> Result<Option<i64>, ImportError> {
        num(v).map_err(|m| self.bad(entry, path(), m))
    }
}

/// JSON type name for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads an integer leniently: JSON numbers (fractions rounded, as some
/// writers store byte counts as doubles) and numeric strings (WebPageTest has
/// written numbers as strings) are accepted; absent or `null` is `None`;
/// anything else is an error message for [`ImportError::BadField`].
pub(crate) fn num(v: Option<&Value>) -> Result<Option<i64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_i64().or_else(|| n.as_f64().map(f64_to_i64))),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() {
                return Ok(None);
            }
            t.parse::<i64>()
                .ok()
                .or_else(|| {
                    t.parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite())
                        .map(f64_to_i64)
                })
                .map(Some)
                .ok_or_else(|| format!("should be a number, found the string {s:?}"))
        }
        Some(other) => Err(format!("should be a number, found {}", type_name(other))),
    }
}

/// Float to integer, rounded; `as` saturates, so huge values cannot panic.
pub(crate) fn f64_to_i64(f: f64) -> i64 {
    f.round() as i64
}

/// A string field, `None` when absent or not a string.
pub(crate) fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// Whether a URL reaches the network: `http(s)://` with a host. Everything
/// else (`data:`, `blob:`, `about:`, `chrome-extension:`…) is skipped by the
/// importers and counted in [`super::ImportReport::skipped`].
pub(crate) fn is_network_url(url: &str) -> bool {
    let lower_prefix: String = url.chars().take(8).collect::<String>().to_ascii_lowercase();
    (lower_prefix.starts_with("http://") || lower_prefix.starts_with("https://"))
        && crate::page::host_of(url).is_some()
}

/// MIME type without parameters, lower-cased; `None` when empty.
pub(crate) fn mime_essence(s: &str) -> Option<String> {
    let essence = s.split(';').next().unwrap_or("").trim();
    if essence.is_empty() {
        None
    } else {
        Some(essence.to_ascii_lowercase())
    }
}

/// Whether a MIME type is an HTML document.
pub(crate) fn is_html(mime: Option<&str>) -> bool {
    matches!(mime, Some("text/html" | "application/xhtml+xml"))
}

/// The URL of the innermost frame of a DevTools stack trace that has one,
/// walking `parent` (async) stacks; bounded so a hostile input cannot loop.
pub(crate) fn stack_url(stack: &Value) -> Option<String> {
    let mut current = Some(stack);
    for _ in 0..64 {
        let s = current?;
        if let Some(frames) = s.get("callFrames").and_then(Value::as_array) {
            if let Some(url) = frames
                .iter()
                .filter_map(|f| str_of(f, "url"))
                .find(|u| !u.is_empty())
            {
                return Some(url.to_string());
            }
        }
        current = s.get("parent");
    }
    None
}

/// Latest object index per URL within one page, so that resolving an
/// initiator URL to a parent costs a map lookup, not a scan (recordings with
/// many thousands of requests stay linear).
#[derive(Debug, Default)]
pub(crate) struct UrlIndex {
    latest: HashMap<String, usize>,
}

impl UrlIndex {
    /// Records that object `index` has URL `url` (fragment-free).
    pub fn insert(&mut self, url: &str, index: usize) {
        self.latest.insert(url.to_string(), index);
    }

    /// Index of the latest object recorded with `url` (fragment ignored):
    /// the most recent fetch of that URL is the one that can have caused a
    /// later request.
    pub fn latest(&self, url: &str) -> Option<usize> {
        self.latest.get(strip_fragment(url)).copied()
    }
}

/// Resolves a possibly relative reference (a HAR `redirectURL` such as
/// `/sv/site/assa/`) against an absolute base URL, per RFC 3986 §5.2 in the
/// forms that occur in recordings.
pub(crate) fn resolve_url(base: &str, reference: &str) -> String {
    let reference = reference.trim();
    if has_scheme(reference) {
        return reference.to_string();
    }
    let base = strip_fragment(base);
    let Some((scheme, rest)) = base.split_once("://") else {
        return reference.to_string();
    };
    if let Some(net) = reference.strip_prefix("//") {
        return format!("{scheme}://{net}");
    }
    let (authority, path_query) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (base_path, _base_query) = match path_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_query, None),
    };
    if reference.is_empty() {
        return base.to_string();
    }
    if reference.starts_with('#') {
        return format!("{base}{reference}");
    }
    if reference.starts_with('?') {
        let path = if base_path.is_empty() { "/" } else { base_path };
        return format!("{scheme}://{authority}{path}{reference}");
    }
    let (ref_path, ref_tail) = match reference.find(['?', '#']) {
        Some(i) => (&reference[..i], &reference[i..]),
        None => (reference, ""),
    };
    let merged = if ref_path.starts_with('/') {
        ref_path.to_string()
    } else {
        let dir = match base_path.rfind('/') {
            Some(i) => &base_path[..=i],
            None => "/",
        };
        format!("{dir}{ref_path}")
    };
    format!(
        "{scheme}://{authority}{}{ref_tail}",
        remove_dot_segments(&merged)
    )
}

/// `scheme:` prefix check (RFC 3986 §3.1).
fn has_scheme(s: &str) -> bool {
    match s.split_once(':') {
        Some((scheme, _)) => {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// RFC 3986 §5.2.4 on a path that starts with `/`.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => trailing_slash = i == last,
            ".." => {
                out.pop();
                trailing_slash = i == last;
            }
            s => {
                out.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut joined = format!("/{}", out.join("/"));
    if trailing_slash && !joined.ends_with('/') {
        joined.push('/');
    }
    joined
}

/// Which rule produced an object's size; the inexact ones are tallied into
/// report notes so that a user knows how much of a page total is estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum SizeBasis {
    /// HAR `_transferSize` minus `headersSize`.
    TransferMinusHeaders,
    /// HAR (WebPageTest) `_bytesIn` minus `headersSize`.
    BytesInMinusHeaders,
    /// HAR `response.bodySize`.
    BodySize,
    /// HAR cache hit (`_fromCache`): the recorded transfer size.
    CacheHit,
    /// HAR `_transferSize`/`_bytesIn` whole, header size unknown.
    WireIncludingHeaders,
    /// HAR `response.content.size`: decoded size, no wire size recorded.
    DecodedContent,
    /// DevTools: `loadingFinished` minus the raw header text length.
    CdpMinusHeadersText,
    /// DevTools: `loadingFinished` minus `response.encodedDataLength`.
    CdpMinusResponseBytes,
    /// DevTools: total bytes including (compressed) header bytes.
    CdpIncludingHeaders,
    /// DevTools: no `encodedDataLength` in `loadingFinished`; the sum of
    /// `dataReceived.encodedDataLength` instead.
    CdpDataReceivedSum,
}

impl SizeBasis {
    /// Note text for inexact rules (what follows "N objects"); `None` for
    /// the exact ones.
    fn note(self) -> Option<&'static str> {
        match self {
            SizeBasis::TransferMinusHeaders
            | SizeBasis::BytesInMinusHeaders
            | SizeBasis::BodySize
            | SizeBasis::CdpMinusHeadersText
            | SizeBasis::CdpMinusResponseBytes => None,
            SizeBasis::CacheHit => Some("served from the browser cache, sized by their recorded transfer size"),
            SizeBasis::WireIncludingHeaders => {
                Some("sized from _transferSize/_bytesIn including response header bytes (headersSize unknown)")
            }
            SizeBasis::DecodedContent => {
                Some("sized from content.size (decoded size; no wire size recorded, may overstate compressed bodies)")
            }
            SizeBasis::CdpIncludingHeaders => Some(
                "sized from loadingFinished.encodedDataLength including (compressed) header bytes, header size not separable",
            ),
            SizeBasis::CdpDataReceivedSum => {
                Some("sized from the sum of dataReceived.encodedDataLength (loadingFinished has no size)")
            }
        }
    }
}

/// Per-page count of objects by inexact size rule.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    counts: std::collections::BTreeMap<SizeBasis, usize>,
}

impl Tally {
    /// Counts one object sized by `basis`.
    pub fn add(&mut self, basis: SizeBasis) {
        *self.counts.entry(basis).or_insert(0) += 1;
    }

    /// One note line per inexact rule used on the page; `label` names the
    /// page (e.g. `page 2 (https://…)`).
    pub fn notes(&self, label: &str) -> Vec<String> {
        self.counts
            .iter()
            .filter_map(|(basis, n)| {
                basis.note().map(|text| {
                    format!(
                        "{label}: {n} object{} {text}",
                        if *n == 1 { "" } else { "s" }
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_numbers() {
        assert_eq!(num(None), Ok(None));
        assert_eq!(num(Some(&json!(null))), Ok(None));
        assert_eq!(num(Some(&json!(12))), Ok(Some(12)));
        assert_eq!(num(Some(&json!(-1))), Ok(Some(-1)));
        assert_eq!(num(Some(&json!(12.6))), Ok(Some(13)));
        assert_eq!(num(Some(&json!("17283"))), Ok(Some(17283)));
        assert_eq!(num(Some(&json!(1e300))), Ok(Some(i64::MAX)));
        assert!(num(Some(&json!("abc"))).is_err());
        assert!(num(Some(&json!([1]))).is_err());
    }

    #[test]
    fn url_resolution() {
        assert_eq!(
            resolve_url("https://www.assa.se/", "/sv/site/assa/"),
            "https://www.assa.se/sv/site/assa/"
        );
        assert_eq!(
            resolve_url("https://a.org/x/y?q=1", "z"),
            "https://a.org/x/z"
        );
        assert_eq!(
            resolve_url("https://a.org/x/y", "../z?k#f"),
            "https://a.org/z?k#f"
        );
        assert_eq!(resolve_url("https://a.org/x/y", "./"), "https://a.org/x/");
        assert_eq!(
            resolve_url("https://a.org/x", "//b.org/p"),
            "https://b.org/p"
        );
        assert_eq!(
            resolve_url("https://a.org/x", "http://c.org/"),
            "http://c.org/"
        );
        assert_eq!(resolve_url("https://a.org", "?q"), "https://a.org/?q");
        assert_eq!(resolve_url("https://a.org/p?x#y", ""), "https://a.org/p?x");
        assert_eq!(resolve_url("not a url", "/p"), "/p");
    }

    #[test]
    fn network_urls() {
        assert!(is_network_url("https://a.org/"));
        assert!(is_network_url("HTTP://a.org"));
        assert!(!is_network_url("data:,x"));
        assert!(!is_network_url("blob:https://a.org/uuid"));
        assert!(!is_network_url("https:///nohost"));
        assert!(!is_network_url("ftp://a.org/"));
        assert!(!is_network_url("ht"));
    }

    #[test]
    fn stack_walk() {
        let stack = json!({"callFrames": [], "parent": {"callFrames": [{"url": ""}, {"url": "https://a/s.js"}]}});
        assert_eq!(stack_url(&stack).as_deref(), Some("https://a/s.js"));
        assert_eq!(stack_url(&json!({"callFrames": []})), None);
    }

    #[test]
    fn mime() {
        assert_eq!(
            mime_essence("Text/HTML; charset=utf-8").as_deref(),
            Some("text/html")
        );
        assert_eq!(mime_essence(" ; x"), None);
    }
}
