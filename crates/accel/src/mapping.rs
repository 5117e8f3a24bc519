//! The folded path mapping: [`fold`] turns a resource URL found in a
//! document into a reference on the document's own host, [`unfold`] turns a
//! request path back into the URL to fetch.
//!
//! Seed 004 Fig. 3: page `http://a.com/`, resource `http://b.com/x.png` →
//! `http://a.com/b.com/x.png`; "the SPDY accelerator can easily identify the
//! original URLs by only removing the FQDN part of the main HTML file".
//!
//! `unfold` is the accelerator's security boundary: whatever a client sends,
//! it returns a [`Target`] only for a host on the site's allowlist, written
//! exactly as the allowlist writes it, with a path that cannot climb out of
//! that host's segment. Everything else is refused with a [`RefuseReason`] or,
//! in the seed's prefix form, handed to the site's own origin (whose host is
//! fixed by the configuration, so no request can steer a fetch elsewhere).
//! `fold` only emits paths `unfold` maps back to the same URL, which the
//! tests check as a round trip.

use std::sync::Arc;

use url::Url;

use crate::site::{is_local_name, Site};

/// Longest request target `unfold` accepts (bytes): 8 KiB is the smallest
/// request-line limit among common servers and what RFC 9112 §3 suggests
/// supporting at least.
pub const MAX_REQUEST_TARGET: usize = 8192;

/// How many rounds of percent-decoding the checks look through: enough for
/// double and triple encoding (`%252e`), bounded so input cannot make it loop.
const MAX_DECODE_ROUNDS: usize = 4;

/// The schemes that are folded. A resource is folded only into a document of
/// the same scheme (docs/ACCEL.md, "Mixed content"), so the scheme a folded
/// request arrives on is the scheme of the original URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `http`
    Http,
    /// `https`
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The scheme of `url`, if it is one that folds.
    pub fn of(url: &Url) -> Option<Scheme> {
        match url.scheme() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

/// Where a folded request goes: a host on the allowlist and the path and
/// query to ask it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The folded host, exactly as the allowlist holds it.
    pub host: String,
    /// Path (starting with `/`) and query (with its `?`), as sent by the
    /// client: percent-encoding is kept as it came, like a browser would have
    /// sent it to the host itself.
    pub path_and_query: String,
}

impl Target {
    /// The URL to fetch, on the scheme the folded request arrived on (the
    /// scheme of the original reference, since only same-scheme references
    /// are folded) and the scheme's default port.
    pub fn url(&self, scheme: Scheme) -> String {
        format!("{}://{}{}", scheme.as_str(), self.host, self.path_and_query)
    }
}

/// Why `unfold` refuses a request target. The server answers these with an
/// error and fetches nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RefuseReason {
    /// Longer than [`MAX_REQUEST_TARGET`].
    #[error("request target longer than 8192 bytes")]
    TooLong,
    /// Not a path starting with `/` (absolute-form, authority-form or `*`):
    /// the accelerator is not a forward proxy.
    #[error("request target is not a path (the accelerator is not a forward proxy)")]
    NotOriginForm,
    /// A byte outside visible ASCII (control, space, DEL, non-ASCII) or a
    /// `#`, none of which a client sends unencoded.
    #[error("request target has a control, space, non-ASCII or '#' byte")]
    BadByte,
    /// A backslash, which some servers read as `/`.
    #[error("request target has a backslash")]
    Backslash,
    /// A `.` or `..` segment, raw or percent-encoded (any depth): browsers
    /// remove them before sending, so only a traversal attempt has them.
    #[error("request path has a '.' or '..' segment (raw or percent-encoded)")]
    DotSegment,
    /// A path segment still decodes to something else after four rounds of
    /// percent-decoding: no client encodes that deep, so only an attempt to
    /// outlast the checks does.
    #[error("request path is percent-encoded more than four levels deep")]
    DeepEncoding,
    /// The path starts with `//`, which code that resolves it as a reference
    /// would read as a host.
    #[error("request path starts with '//'")]
    EmptyFirstSegment,
    /// The folded path names no host (`/_mewa/` in the prefixed form).
    #[error("folded path names no host")]
    MissingHost,
    /// The host segment is percent-encoded (`b%2ecom`, `b.com%2F..`).
    #[error("host segment is percent-encoded")]
    EncodedHost,
    /// The host segment carries userinfo (`user@b.com`).
    #[error("host segment has userinfo ('@')")]
    Userinfo,
    /// The host segment carries a port (`b.com:8080`); only default ports
    /// are folded.
    #[error("host segment has a port")]
    Port,
    /// The host segment is an IP address in any form the URL Standard reads
    /// (`127.0.0.1`, `[::1]`, `2130706433`, `0x7f.1`, `0177.1`).
    #[error("host segment is an IP address")]
    IpLiteral,
    /// The host segment is a local or special-use name (`localhost`,
    /// `*.local`, `*.internal`, a single label…).
    #[error("host segment is a local or single-label name")]
    LocalName,
    /// The host segment is no host at all under the URL Standard.
    #[error("host segment is not a valid host")]
    InvalidHost,
    /// The host segment is an allowed host written differently (case, a
    /// trailing dot, full-width letters): refused rather than mapped, so a
    /// cache and a log only ever see one name for one object.
    #[error("host segment is an allowed host in non-canonical form")]
    NonCanonicalHost,
    /// The host segment is a valid name that is not on the allowlist.
    #[error("host is not on the site's allowlist")]
    NotAllowed,
    /// The path after the host has an encoded backslash (`%5C`).
    #[error("folded path has an encoded backslash")]
    EncodedBackslash,
    /// The path after the host has an encoded control byte (`%00`, `%0A`).
    #[error("folded path has an encoded control byte")]
    EncodedControl,
}

impl RefuseReason {
    /// A short stable name, for metrics labels and logs.
    pub fn label(self) -> &'static str {
        match self {
            RefuseReason::TooLong => "too_long",
            RefuseReason::NotOriginForm => "not_origin_form",
            RefuseReason::BadByte => "bad_byte",
            RefuseReason::Backslash => "backslash",
            RefuseReason::DotSegment => "dot_segment",
            RefuseReason::DeepEncoding => "deep_encoding",
            RefuseReason::EmptyFirstSegment => "empty_first_segment",
            RefuseReason::MissingHost => "missing_host",
            RefuseReason::EncodedHost => "encoded_host",
            RefuseReason::Userinfo => "userinfo",
            RefuseReason::Port => "port",
            RefuseReason::IpLiteral => "ip_literal",
            RefuseReason::LocalName => "local_name",
            RefuseReason::InvalidHost => "invalid_host",
            RefuseReason::NonCanonicalHost => "non_canonical_host",
            RefuseReason::NotAllowed => "not_allowed",
            RefuseReason::EncodedBackslash => "encoded_backslash",
            RefuseReason::EncodedControl => "encoded_control",
        }
    }
}

/// Maps a request target (path and query, as in an HTTP/1.1 request line or
/// HTTP/2 `:path`) of a request to `site` back to what it folds.
///
/// - `Ok(Some(target))`: a folded path; fetch `target`.
/// - `Ok(None)`: the site's own path; pass it to the site's origin as it is.
/// - `Err(reason)`: refuse the request.
///
/// With a reserved prefix (`/_mewa`), every path under it must name an
/// allowed host exactly, or is refused. With seed 004's form (no prefix), the
/// first segment is a folded host only when it is exactly one on the
/// allowlist; a first segment that *aims* at an allowed host without being it
/// (`/B.com/`, `/b.com./`, `/user@b.com/`, `/b.com:443/`, `/b%2ecom/`) is
/// refused, and any other path is the site's own: `/127.0.0.1/x` or
/// `/2024/x` then go to the site's origin as ordinary paths, which no client
/// can turn into a fetch elsewhere. Checks that apply to every path: length,
/// visible ASCII only, no backslash, no `//` start, no dot segments raw or
/// encoded.
pub fn unfold(site: &Site, path_and_query: &str) -> Result<Option<Target>, RefuseReason> {
    if path_and_query.len() > MAX_REQUEST_TARGET {
        return Err(RefuseReason::TooLong);
    }
    if !path_and_query.starts_with('/') {
        return Err(RefuseReason::NotOriginForm);
    }
    for b in path_and_query.bytes() {
        if b == b'\\' {
            return Err(RefuseReason::Backslash);
        }
        if !(0x21..=0x7e).contains(&b) || b == b'#' {
            return Err(RefuseReason::BadByte);
        }
    }
    let (path, query) = match path_and_query.find('?') {
        Some(i) => path_and_query.split_at(i),
        None => (path_and_query, ""),
    };
    if path.starts_with("//") {
        return Err(RefuseReason::EmptyFirstSegment);
    }
    if path.split('/').any(|seg| !decode_rounds(seg).1) {
        return Err(RefuseReason::DeepEncoding);
    }
    if path.split('/').any(is_dot_segment) {
        return Err(RefuseReason::DotSegment);
    }

    let reserved = !site.prefix().is_empty();
    let rest = if reserved {
        match path.strip_prefix(site.prefix()) {
            Some(r) if r.is_empty() || r.starts_with('/') => r,
            _ => return Ok(None),
        }
    } else {
        path
    };
    let after = rest.strip_prefix('/').unwrap_or(rest);
    let (segment, remainder) = match after.find('/') {
        Some(i) => after.split_at(i),
        None => (after, ""),
    };

    if !site.folds(segment) {
        if reserved || aims_at_folded(site, segment) {
            return Err(classify(site, segment));
        }
        return Ok(None);
    }
    check_remainder(remainder)?;
    let path = if remainder.is_empty() { "/" } else { remainder };
    Ok(Some(Target {
        host: segment.to_string(),
        path_and_query: format!("{path}{query}"),
    }))
}

/// Percent-decodes `input` once; malformed escapes stay as they are (as the
/// URL Standard's percent-decode does).
pub(crate) fn percent_decode_once(input: &[u8]) -> Vec<u8> {
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' && i + 2 < input.len() {
            if let (Some(h), Some(l)) = (hex(input[i + 1]), hex(input[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

/// Decodes up to [`MAX_DECODE_ROUNDS`] times, or until nothing changes.
fn percent_decode_deep(input: &str) -> Vec<u8> {
    decode_rounds(input).0
}

/// Decodes like [`percent_decode_deep`] and says whether the result is
/// settled (one more round would change nothing).
fn decode_rounds(input: &str) -> (Vec<u8>, bool) {
    let mut cur = input.as_bytes().to_vec();
    for _ in 0..MAX_DECODE_ROUNDS {
        if !cur.contains(&b'%') {
            return (cur, true);
        }
        let next = percent_decode_once(&cur);
        if next == cur {
            return (cur, true);
        }
        cur = next;
    }
    let settled = percent_decode_once(&cur) == cur;
    (cur, settled)
}

/// Whether a path segment is, or decodes to something containing, a `.` or
/// `..` segment (pieces split at decoded `/` and `\` count too).
fn is_dot_segment(segment: &str) -> bool {
    let decoded = percent_decode_deep(segment);
    decoded
        .split(|b| *b == b'/' || *b == b'\\')
        .any(|piece| piece == b"." || piece == b"..")
}

/// The path after a folded host: no encoded backslash, no encoded control
/// byte, at any decoding depth. (Encoded `/` is allowed: it is part of some
/// real resource names, and it cannot leave the host, which is fixed.)
fn check_remainder(remainder: &str) -> Result<(), RefuseReason> {
    for segment in remainder.split('/') {
        if !segment.contains('%') {
            continue;
        }
        let decoded = percent_decode_deep(segment);
        if decoded.contains(&b'\\') {
            return Err(RefuseReason::EncodedBackslash);
        }
        if decoded.iter().any(|b| *b < 0x20 || *b == 0x7f) {
            return Err(RefuseReason::EncodedControl);
        }
    }
    Ok(())
}

/// Whether a first segment that is not exactly an allowed host still names
/// one once decoded, lowercased, stripped of userinfo, port and trailing
/// dots, or mapped by the URL Standard's host parser (IDNA, full-width
/// letters).
fn aims_at_folded(site: &Site, segment: &str) -> bool {
    let mut bytes = percent_decode_deep(segment);
    bytes.make_ascii_lowercase();
    let end = bytes
        .iter()
        .position(|b| matches!(b, b'/' | b'\\' | b'?' | b'#') || *b <= b' ')
        .unwrap_or(bytes.len());
    bytes.truncate(end);
    let host_part = match bytes.iter().rposition(|b| *b == b'@') {
        Some(i) => &bytes[i + 1..],
        None => &bytes[..],
    };
    let host_part = match host_part.iter().position(|b| *b == b':') {
        Some(i) if !host_part.starts_with(b"[") => &host_part[..i],
        _ => host_part,
    };
    let Ok(text) = std::str::from_utf8(host_part) else {
        return false;
    };
    let text = text.trim_end_matches('.');
    if site.folds(text) {
        return true;
    }
    match url::Host::parse(text) {
        Ok(url::Host::Domain(d)) => site.folds(d.trim_end_matches('.')),
        _ => false,
    }
}

/// The reason a host segment that is not exactly an allowed host is refused.
fn classify(site: &Site, segment: &str) -> RefuseReason {
    if segment.is_empty() {
        return RefuseReason::MissingHost;
    }
    if segment.contains('%') {
        return RefuseReason::EncodedHost;
    }
    if segment.contains('@') {
        return RefuseReason::Userinfo;
    }
    if segment.starts_with('[') {
        return RefuseReason::IpLiteral;
    }
    if segment.contains(':') {
        return RefuseReason::Port;
    }
    match url::Host::parse(segment) {
        Err(_) => RefuseReason::InvalidHost,
        Ok(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => RefuseReason::IpLiteral,
        Ok(url::Host::Domain(d)) => {
            let name = d.trim_end_matches('.');
            if site.folds(name) {
                RefuseReason::NonCanonicalHost
            } else if is_local_name(name) || !name.contains('.') {
                RefuseReason::LocalName
            } else {
                RefuseReason::NotAllowed
            }
        }
    }
}

/// Whether `url` is a document of `site`: http or https on one of its hosts.
fn is_site_document(site: &Site, url: &Url) -> bool {
    Scheme::of(url).is_some()
        && match url.host() {
            Some(url::Host::Domain(d)) => site.serves(d.strip_suffix('.').unwrap_or(d)),
            _ => false,
        }
}

/// The folded, path-absolute reference (`/b.com/x.png?q#f`) for the absolute
/// resource URL `resource` in a document served at `served`, or `None` when
/// it does not fold: not http(s), another scheme than the document's (no
/// mixed content either way), userinfo, a port other than the default, a
/// host not on the allowlist, or a path `unfold` would refuse.
fn fold_resolved(site: &Site, served: &Url, resource: &Url) -> Option<String> {
    Scheme::of(resource)?;
    if resource.scheme() != served.scheme()
        || !resource.username().is_empty()
        || resource.password().is_some()
        || resource.port().is_some()
    {
        return None;
    }
    let host = match resource.host()? {
        url::Host::Domain(d) => d.strip_suffix('.').unwrap_or(d),
        _ => return None,
    };
    if !site.folds(host) {
        return None;
    }
    let mut path_and_query = resource.path().to_string();
    if let Some(q) = resource.query() {
        path_and_query.push('?');
        path_and_query.push_str(q);
    }
    let mut folded = format!("{}/{}{}", site.prefix(), host, path_and_query);
    match unfold(site, &folded) {
        Ok(Some(t)) if t.host == host && t.path_and_query == path_and_query => {}
        _ => return None,
    }
    if let Some(f) = resource.fragment() {
        folded.push('#');
        folded.push_str(f);
    }
    Some(folded)
}

/// HTML's ASCII whitespace, stripped from URL attribute values before they
/// are parsed.
fn trim_html_ws(s: &str) -> &str {
    s.trim_matches(|c| matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' '))
}

/// The folded reference for `resource` (absolute, protocol-relative or
/// relative) found in a document served at `document_url` without a
/// `<base>`: a path-absolute reference on the document's host, or `None` when
/// the resource does not fold (see [`FoldContext::rewrite`]).
///
/// ```
/// # use mewa_accel::site::{Site, SiteConfig};
/// # use mewa_accel::mapping::fold;
/// let site = Site::new(&SiteConfig {
///     hosts: vec!["a.com".into()],
///     fold: vec!["b.com".into()],
///     prefix: String::new(),
/// })?;
/// let page = url::Url::parse("http://a.com/")?;
/// assert_eq!(fold(&site, &page, "http://b.com/x.png").as_deref(), Some("/b.com/x.png"));
/// assert_eq!(fold(&site, &page, "//b.com/x.png").as_deref(), Some("/b.com/x.png"));
/// assert_eq!(fold(&site, &page, "https://b.com/x.png"), None); // other scheme
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn fold(site: &Site, document_url: &Url, resource: &str) -> Option<String> {
    if !is_site_document(site, document_url) {
        return None;
    }
    let abs = document_url.join(trim_html_ws(resource)).ok()?;
    fold_resolved(site, document_url, &abs)
}

/// What [`FoldContext::rewrite`] did to a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewritten {
    /// Folded onto the document's host; the new reference.
    Folded(String),
    /// Not folded, but written out absolute because the browser will resolve
    /// it against another base than its author did (a relative reference in
    /// a stylesheet served from a folded path); the absolute URL.
    Absolutized(String),
}

impl Rewritten {
    /// The new reference text.
    pub fn text(&self) -> &str {
        match self {
            Rewritten::Folded(s) | Rewritten::Absolutized(s) => s,
        }
    }
}

/// Everything needed to rewrite the references of one document or
/// stylesheet: the site, where the browser loaded it from, what its author's
/// relative references resolve against, and what the browser will resolve
/// the rewritten ones against.
#[derive(Debug, Clone)]
pub struct FoldContext {
    site: Arc<Site>,
    served: Url,
    author_base: Url,
    browser_base: Url,
    ascii_only: bool,
}

impl FoldContext {
    /// For an HTML document (or a stylesheet on the site's own path) served
    /// at `url`; `None` if `url` is not http(s) on one of the site's hosts.
    pub fn document(site: Arc<Site>, url: Url) -> Option<FoldContext> {
        if !is_site_document(&site, &url) {
            return None;
        }
        Some(FoldContext {
            site,
            author_base: url.clone(),
            browser_base: url.clone(),
            served: url,
            ascii_only: false,
        })
    }

    /// For a stylesheet fetched from `original` (a folded target) and served
    /// to the browser at `served` (its folded URL on a site host). Relative
    /// references are resolved against `original`, as their author meant;
    /// the browser resolves against `served`, so references that would land
    /// elsewhere (`/img/x.png`, or `../` past the folded host) are folded or
    /// made absolute.
    pub fn stylesheet(site: Arc<Site>, served: Url, original: Url) -> Option<FoldContext> {
        if !is_site_document(&site, &served) || Scheme::of(&original).is_none() {
            return None;
        }
        Some(FoldContext {
            site,
            author_base: original,
            browser_base: served.clone(),
            served,
            ascii_only: false,
        })
    }

    /// Applies a document's first `<base href>`: resolved against the
    /// document URL; ignored if it does not parse or is `data:` or
    /// `javascript:` (HTML's "set the frozen base URL"). The `<base>` element
    /// itself is kept, so the browser resolves against it too.
    pub fn set_base(&mut self, href: &str) {
        if let Ok(base) = self.served.join(trim_html_ws(href)) {
            if base.scheme() != "data" && base.scheme() != "javascript" {
                self.author_base = base.clone();
                self.browser_base = base;
            }
        }
    }

    /// Leaves references with non-ASCII characters alone. For documents
    /// that are not (or may not be) UTF-8: a browser percent-encodes a
    /// non-ASCII query in the document's encoding, the URL parser here in
    /// UTF-8, so the folded URL could name another resource.
    pub fn set_ascii_only(&mut self, on: bool) {
        self.ascii_only = on;
    }

    /// The site.
    pub fn site(&self) -> &Site {
        &self.site
    }

    /// The URL the browser loaded this document or stylesheet from.
    pub fn served(&self) -> &Url {
        &self.served
    }

    /// The new text for `reference`, or `None` to leave it as written.
    ///
    /// A reference folds when, resolved against the author's base, it is
    /// http(s) on the document's scheme, on an allowlisted host, without
    /// userinfo or a port (see [`fold`]). The folded form is path-absolute
    /// (`/b.com/x.png`) when the browser's base is on the document's origin,
    /// else absolute on it (`https://a.com/b.com/x.png`, when a `<base>`
    /// points elsewhere). Empty and fragment-only references (`#id`, also
    /// CSS's `url(#filter)`) are never touched.
    pub fn rewrite(&self, reference: &str) -> Option<Rewritten> {
        let r = trim_html_ws(reference);
        if r.is_empty() || r.starts_with('#') || (self.ascii_only && !r.is_ascii()) {
            return None;
        }
        let abs = self.author_base.join(r).ok()?;
        // What the browser makes of the reference as written.
        let seen = if self.author_base == self.browser_base {
            Some(abs.clone())
        } else {
            self.browser_base.join(r).ok()
        };
        if let Some(path) = fold_resolved(&self.site, &self.served, &abs) {
            // Already right: a path-relative reference in a folded
            // stylesheet that lands on the folded URL anyway.
            if seen.is_some() && seen.as_ref() == self.served.join(&path).ok().as_ref() {
                return None;
            }
            let text = if self.browser_base.origin() == self.served.origin() {
                path
            } else {
                format!("{}{}", self.served.origin().ascii_serialization(), path)
            };
            return Some(Rewritten::Folded(text));
        }
        if seen.as_ref() == Some(&abs) {
            None
        } else {
            Some(Rewritten::Absolutized(abs.into()))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::site::SiteConfig;
    use proptest::prelude::*;

    fn site(prefix: &str) -> Site {
        Site::new(&SiteConfig {
            hosts: vec!["a.com".into(), "www.a.com".into()],
            fold: vec!["b.com".into(), "cdn.c.net".into()],
            prefix: prefix.into(),
        })
        .unwrap()
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn target(host: &str, pq: &str) -> Option<Target> {
        Some(Target {
            host: host.into(),
            path_and_query: pq.into(),
        })
    }

    #[test]
    fn seed_004_figure_3() {
        let s = site("");
        let page = url("http://a.com/");
        assert_eq!(
            fold(&s, &page, "http://b.com/x.png").as_deref(),
            Some("/b.com/x.png")
        );
        let t = unfold(&s, "/b.com/x.png").unwrap().unwrap();
        assert_eq!(t.url(Scheme::Http), "http://b.com/x.png");
    }

    #[test]
    fn fold_reference_forms() {
        let s = site("");
        let page = url("https://a.com/dir/page.html");
        let cases: &[(&str, Option<&str>)] = &[
            ("https://b.com/x.png", Some("/b.com/x.png")),
            ("//b.com/x.png", Some("/b.com/x.png")),
            ("  https://b.com/x.png\n", Some("/b.com/x.png")),
            ("HTTPS://B.COM/x.png", Some("/b.com/x.png")),
            ("https://b.com./x.png", Some("/b.com/x.png")),
            ("https://b.com:443/x.png", Some("/b.com/x.png")),
            ("https://b.com", Some("/b.com/")),
            (
                "https://b.com/a/../x.png?q=1&r=%20#frag",
                Some("/b.com/x.png?q=1&r=%20#frag"),
            ),
            ("https://b.com/x?", Some("/b.com/x?")),
            (
                "https://cdn.c.net/é.png?é",
                Some("/cdn.c.net/%C3%A9.png?%C3%A9"),
            ),
            ("https://xn--bcher-kva.example/x", None),
            // not folded
            ("x.png", None),
            ("/x.png", None),
            ("https://a.com/x.png", None),
            ("https://d.com/x.png", None),
            ("https://sub.b.com/x.png", None),
            ("http://b.com/x.png", None),
            ("https://b.com:8443/x.png", None),
            ("https://user@b.com/x.png", None),
            ("https://user:pw@b.com/x.png", None),
            ("data:image/png;base64,AAAA", None),
            ("javascript:alert(1)", None),
            ("https://b.com/a%5Cb", None),
            ("https://b.com/a%00b", None),
            ("https://b.com/%252e%252e/x", None),
            ("", None),
            ("#top", None),
        ];
        for (r, want) in cases {
            assert_eq!(fold(&s, &page, r).as_deref(), *want, "{r:?}");
        }
        // IDNA: the allowlist and references meet in the xn-- form.
        let idn = Site::new(&SiteConfig {
            hosts: vec!["a.com".into()],
            fold: vec!["bücher.example".into()],
            prefix: String::new(),
        })
        .unwrap();
        assert_eq!(
            fold(&idn, &page, "https://BÜCHER.example/x").as_deref(),
            Some("/xn--bcher-kva.example/x")
        );
    }

    #[test]
    fn fold_needs_a_site_document() {
        let s = site("");
        for page in [
            "https://d.com/",
            "https://127.0.0.1/",
            "file:///a.com/x",
            "https://b.com/",
        ] {
            assert_eq!(fold(&s, &url(page), "https://b.com/x"), None, "{page}");
        }
        assert_eq!(
            fold(&s, &url("https://WWW.a.com./"), "https://b.com/x").as_deref(),
            Some("/b.com/x")
        );
        assert!(FoldContext::document(Arc::new(site("")), url("https://d.com/")).is_none());
    }

    #[test]
    fn fold_with_prefix() {
        let s = site("/_mewa");
        let page = url("https://a.com/");
        assert_eq!(
            fold(&s, &page, "https://b.com/x.png?q").as_deref(),
            Some("/_mewa/b.com/x.png?q")
        );
        assert_eq!(
            unfold(&s, "/_mewa/b.com/x.png?q"),
            Ok(target("b.com", "/x.png?q"))
        );
    }

    #[test]
    fn unfold_basics() {
        let s = site("");
        assert_eq!(
            unfold(&s, "/b.com/x.png?q=1"),
            Ok(target("b.com", "/x.png?q=1"))
        );
        assert_eq!(
            unfold(&s, "/b.com/x.png?q=1")
                .unwrap()
                .unwrap()
                .url(Scheme::Https),
            "https://b.com/x.png?q=1"
        );
        assert_eq!(unfold(&s, "/b.com"), Ok(target("b.com", "/")));
        assert_eq!(unfold(&s, "/b.com?x"), Ok(target("b.com", "/?x")));
        assert_eq!(unfold(&s, "/b.com//x"), Ok(target("b.com", "//x")));
        assert_eq!(unfold(&s, "/b.com/a%2Fb"), Ok(target("b.com", "/a%2Fb")));
        assert_eq!(unfold(&s, "/cdn.c.net/"), Ok(target("cdn.c.net", "/")));
        // The query is not a path: dots and slashes there are data.
        assert_eq!(
            unfold(&s, "/b.com/x?next=/../..&a=%2e%2e"),
            Ok(target("b.com", "/x?next=/../..&a=%2e%2e"))
        );
        // The site's own paths.
        for own in [
            "/",
            "/index.html",
            "/favicon.ico",
            "/a.com/x",
            "/d.com/x",
            "/2024/post",
            "/127.0.0.1/x",
            "/b.com.evil.com/x",
            "/b.com@evil.com/x",
            "/sub.b.com/x",
            "/.well-known/x",
            "/?q=/b.com/",
        ] {
            assert_eq!(unfold(&s, own), Ok(None), "{own}");
        }
        // Prefixed: outside the prefix is the site's own.
        let p = site("/_mewa");
        for own in [
            "/",
            "/b.com/x",
            "/_mewax/b.com/x",
            "/_MEWA/b.com/x",
            "/x/_mewa/b.com",
        ] {
            assert_eq!(unfold(&p, own), Ok(None), "{own}");
        }
    }

    /// SSRF: every trick, in the reserved-prefix form where everything under
    /// the prefix must be exactly an allowed host.
    #[test]
    fn ssrf_refusals_with_prefix() {
        use RefuseReason::*;
        let s = site("/_mewa");
        let long = format!("/_mewa/b.com/{}", "a".repeat(MAX_REQUEST_TARGET));
        let cases: &[(&str, RefuseReason)] = &[
            (&long, TooLong),
            ("http://b.com/x", NotOriginForm),
            ("b.com/x", NotOriginForm),
            ("*", NotOriginForm),
            ("", NotOriginForm),
            ("/_mewa", MissingHost),
            ("/_mewa/", MissingHost),
            ("/_mewa//x", MissingHost),
            ("//b.com/x", EmptyFirstSegment),
            // not on the list
            ("/_mewa/evil.com/x", NotAllowed),
            ("/_mewa/sub.b.com/x", NotAllowed),
            ("/_mewa/b.com.evil.com/x", NotAllowed),
            ("/_mewa/a.com/x", NotAllowed),
            // IP literals in every form the URL Standard reads
            ("/_mewa/127.0.0.1/x", IpLiteral),
            ("/_mewa/2130706433/x", IpLiteral),
            ("/_mewa/0x7f.1/x", IpLiteral),
            ("/_mewa/0x7f000001/x", IpLiteral),
            ("/_mewa/0177.0.0.1/x", IpLiteral),
            ("/_mewa/017700000001/x", IpLiteral),
            ("/_mewa/127.1/x", IpLiteral),
            ("/_mewa/10.0.0.1/x", IpLiteral),
            ("/_mewa/192.168.1.1/x", IpLiteral),
            ("/_mewa/169.254.169.254/latest/meta-data", IpLiteral),
            ("/_mewa/0.0.0.0/x", IpLiteral),
            ("/_mewa/0/x", IpLiteral),
            ("/_mewa/[::1]/x", IpLiteral),
            ("/_mewa/[::]/x", IpLiteral),
            ("/_mewa/[fe80::1]/x", IpLiteral),
            ("/_mewa/[::ffff:127.0.0.1]/x", IpLiteral),
            // local names
            ("/_mewa/localhost/x", LocalName),
            ("/_mewa/LOCALHOST/x", LocalName),
            ("/_mewa/x.localhost/x", LocalName),
            ("/_mewa/printer.local/x", LocalName),
            ("/_mewa/metadata.google.internal/x", LocalName),
            ("/_mewa/intranet/x", LocalName),
            ("/_mewa/router.home.arpa/x", LocalName),
            // userinfo, ports
            ("/_mewa/user@b.com/x", Userinfo),
            ("/_mewa/b.com@evil.com/x", Userinfo),
            ("/_mewa/b.com:443/x", Port),
            ("/_mewa/b.com:8080/x", Port),
            ("/_mewa/b.com:/x", Port),
            // case and trailing-dot variants of allowed hosts
            ("/_mewa/B.com/x", NonCanonicalHost),
            ("/_mewa/B.COM/x", NonCanonicalHost),
            ("/_mewa/b.com./x", NonCanonicalHost),
            ("/_mewa/CDN.c.net./x", NonCanonicalHost),
            // percent-encoding in the host segment
            ("/_mewa/b%2ecom/x", EncodedHost),
            ("/_mewa/b.com%2F..%2Fevil.com/x", DotSegment),
            ("/_mewa/b.com%2Fx", EncodedHost),
            ("/_mewa/b.com%2fx", EncodedHost),
            ("/_mewa/%62.com/x", EncodedHost),
            ("/_mewa/b.com%252F/x", EncodedHost),
            ("/_mewa/b.com%00/x", EncodedHost),
            ("/_mewa/%31%32%37.0.0.1/x", EncodedHost),
            // traversal, raw and encoded at any depth
            ("/_mewa/b.com/../evil.com/x", DotSegment),
            ("/_mewa/b.com/../../x", DotSegment),
            ("/_mewa/b.com/./x", DotSegment),
            ("/_mewa/b.com/%2e%2e/x", DotSegment),
            ("/_mewa/b.com/%2E%2e/x", DotSegment),
            ("/_mewa/b.com/.%2e/x", DotSegment),
            ("/_mewa/b.com/%252e%252e/x", DotSegment),
            ("/_mewa/b.com/%25252e%25252e/x", DotSegment),
            ("/_mewa/b.com/%2525252e%2525252e/x", DotSegment),
            ("/_mewa/b.com/%252525252e%252525252e/x", DeepEncoding),
            ("/_mewa/%252525252e/x", DeepEncoding),
            ("/_mewa/b.com/x/..", DotSegment),
            ("/_mewa/b.com/..%2F..%2Fx", DotSegment),
            ("/_mewa/b.com/a%2F..%2F..%2Fx", DotSegment),
            ("/_mewa/b.com/..%5Cx", DotSegment),
            ("/_mewa/../x", DotSegment),
            ("/../_mewa/b.com/x", DotSegment),
            // backslashes, raw and encoded
            ("/_mewa/b.com\\evil.com/x", Backslash),
            ("/_mewa/b.com/x\\y", Backslash),
            ("/_mewa/b.com/%5Cevil.com", EncodedBackslash),
            ("/_mewa/b.com/%255Cx", EncodedBackslash),
            // control bytes, raw and encoded; spaces; non-ASCII; fragments
            ("/_mewa/b.com/x\0", BadByte),
            ("/_mewa/b.com/x\r\nHost: evil.com", BadByte),
            ("/_mewa/b.com/x y", BadByte),
            ("/_mewa/b.com/x\t", BadByte),
            ("/_mewa/b.com/x\x7f", BadByte),
            ("/_mewa/b.com/é", BadByte),
            ("/_mewa/ｂ.com/x", BadByte),
            ("/_mewa/b.com/x#f", BadByte),
            ("/_mewa/b.com/%00", EncodedControl),
            ("/_mewa/b.com/x%0d%0aHost:%20evil", EncodedControl),
            ("/_mewa/b.com/x%250a", EncodedControl),
            // syntax the URL Standard refuses
            ("/_mewa/b.com!<>/x", InvalidHost),
        ];
        for (path, want) in cases {
            assert_eq!(unfold(&s, path), Err(*want), "{path:?}");
        }
    }

    /// SSRF in seed 004's form: a variant aiming at an allowed host is
    /// refused; anything else is the site's own path and never a target.
    #[test]
    fn ssrf_refusals_seed_form() {
        use RefuseReason::*;
        let s = site("");
        let cases: &[(&str, Result<Option<Target>, RefuseReason>)] = &[
            ("/B.com/x", Err(NonCanonicalHost)),
            ("/b.com./x", Err(NonCanonicalHost)),
            ("/B.COM../x", Err(NonCanonicalHost)),
            ("/%EF%BD%82.com/x", Err(EncodedHost)),
            ("/b%2ecom/x", Err(EncodedHost)),
            ("/b.com%2F..%2Fevil.com/x", Err(DotSegment)),
            ("/b.com%2F@evil.com/x", Err(EncodedHost)),
            ("/b.com%252F/x", Err(EncodedHost)),
            ("/user@b.com/x", Err(Userinfo)),
            ("/evil.com@B.com/x", Err(Userinfo)),
            ("/b.com:443/x", Err(Port)),
            ("/b.com:8080/x", Err(Port)),
            ("/b.com/../evil.com/x", Err(DotSegment)),
            ("/b.com/%2e%2e/%2e%2e/x", Err(DotSegment)),
            ("/b.com/%5C/x", Err(EncodedBackslash)),
            ("/b.com/x%00", Err(EncodedControl)),
            ("/b.com\\evil.com/x", Err(Backslash)),
            ("//evil.com/x", Err(EmptyFirstSegment)),
            ("/x/../../etc/passwd", Err(DotSegment)),
            ("http://evil.com/", Err(NotOriginForm)),
            // not aiming at an allowed host: the site's own path
            ("/127.0.0.1/x", Ok(None)),
            ("/[::1]/x", Ok(None)),
            ("/2130706433/x", Ok(None)),
            ("/localhost/x", Ok(None)),
            ("/evil.com/x", Ok(None)),
            ("/b.com@evil.com/x", Ok(None)),
        ];
        for (path, want) in cases {
            assert_eq!(&unfold(&s, path), want, "{path:?}");
        }
    }

    #[test]
    fn refuse_reason_labels_are_distinct() {
        use RefuseReason::*;
        let all = [
            TooLong,
            NotOriginForm,
            BadByte,
            Backslash,
            DotSegment,
            DeepEncoding,
            EmptyFirstSegment,
            MissingHost,
            EncodedHost,
            Userinfo,
            Port,
            IpLiteral,
            LocalName,
            InvalidHost,
            NonCanonicalHost,
            NotAllowed,
            EncodedBackslash,
            EncodedControl,
        ];
        let labels: std::collections::BTreeSet<_> = all.iter().map(|r| r.label()).collect();
        assert_eq!(labels.len(), all.len());
        assert!(all.iter().all(|r| !r.to_string().is_empty()));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode_once(b"%41%4a%zz%4"), b"AJ%zz%4");
        assert_eq!(percent_decode_once(b"%"), b"%");
        assert_eq!(percent_decode_once(b"%2"), b"%2");
        assert_eq!(percent_decode_deep("%25252e"), b".");
        assert_eq!(percent_decode_deep("%2525252e"), b".");
        assert_eq!(percent_decode_deep("%252525252e"), b"%2e");
        assert!(is_dot_segment("%2e%2E"));
        assert!(!is_dot_segment("%2e%2e%2e"));
        assert!(!is_dot_segment(".well-known"));
    }

    #[test]
    fn context_with_foreign_base() {
        let s = Arc::new(site(""));
        let mut ctx = FoldContext::document(s, url("https://a.com/dir/")).unwrap();
        ctx.set_base("https://b.com/assets/");
        // Relative references resolve against the base (on b.com) and fold
        // to absolute URLs on the document's origin.
        assert_eq!(
            ctx.rewrite("x.png"),
            Some(Rewritten::Folded("https://a.com/b.com/assets/x.png".into()))
        );
        assert_eq!(ctx.rewrite("https://d.com/y.png"), None);
        assert_eq!(ctx.rewrite("#top"), None);

        let mut ctx = FoldContext::document(Arc::new(site("")), url("https://a.com/dir/")).unwrap();
        ctx.set_base("/other/");
        assert_eq!(
            ctx.rewrite("//b.com/x.png"),
            Some(Rewritten::Folded("/b.com/x.png".into()))
        );
        assert_eq!(ctx.rewrite("x.png"), None);
        // Unusable bases are ignored.
        let mut ctx = FoldContext::document(Arc::new(site("")), url("https://a.com/")).unwrap();
        ctx.set_base("javascript:alert(1)");
        ctx.set_base("data:text/html,x");
        ctx.set_base("http://[::1");
        assert_eq!(
            ctx.rewrite("//b.com/x.png"),
            Some(Rewritten::Folded("/b.com/x.png".into()))
        );
        assert_eq!(
            ctx.rewrite("//b.com/é.png"),
            Some(Rewritten::Folded("/b.com/%C3%A9.png".into()))
        );
        ctx.set_ascii_only(true);
        assert_eq!(ctx.rewrite("//b.com/é.png"), None);
        assert_eq!(
            ctx.rewrite("//b.com/%C3%A9.png"),
            Some(Rewritten::Folded("/b.com/%C3%A9.png".into()))
        );
    }

    #[test]
    fn context_for_folded_stylesheet() {
        let s = Arc::new(site(""));
        let ctx = FoldContext::stylesheet(
            s,
            url("https://a.com/b.com/css/s.css"),
            url("https://b.com/css/s.css"),
        )
        .unwrap();
        let cases: &[(&str, Option<Rewritten>)] = &[
            // same result either way: left alone
            ("img/x.png", None),
            ("../img/x.png", None),
            ("data:image/png;base64,AA", None),
            ("https://d.com/x.png", None),
            ("#filter", None),
            // would land on a.com's own paths: folded back onto b.com
            (
                "/img/x.png",
                Some(Rewritten::Folded("/b.com/img/x.png".into())),
            ),
            (
                "../../../x.png",
                Some(Rewritten::Folded("/b.com/x.png".into())),
            ),
            (
                "//cdn.c.net/f.woff2",
                Some(Rewritten::Folded("/cdn.c.net/f.woff2".into())),
            ),
        ];
        for (r, want) in cases {
            assert_eq!(&ctx.rewrite(r), want, "{r:?}");
        }
        // Relative references that land on the folded URL stay as written.
        let ctx = FoldContext::stylesheet(
            Arc::new(site("")),
            url("https://a.com/b.com/s.css"),
            url("https://b.com/s.css"),
        )
        .unwrap();
        assert_eq!(ctx.served().as_str(), "https://a.com/b.com/s.css");
        assert_eq!(ctx.site().prefix(), "");
        assert_eq!(ctx.rewrite("x.png"), None);
        // A reference that does not fold (an encoded backslash) but would
        // land on a.com's own path is written out absolute.
        assert_eq!(
            ctx.rewrite("/a%5Cb.png"),
            Some(Rewritten::Absolutized("https://b.com/a%5Cb.png".into()))
        );
        let ctx = FoldContext::stylesheet(
            Arc::new(site("/_mewa")),
            url("https://a.com/_mewa/b.com/s.css"),
            url("https://b.com/s.css"),
        )
        .unwrap();
        assert_eq!(
            ctx.rewrite("/x.png"),
            Some(Rewritten::Folded("/_mewa/b.com/x.png".into()))
        );
        let ctx = FoldContext::stylesheet(
            Arc::new(site("")),
            url("https://a.com/b.com/s.css"),
            url("https://b.com/s.css"),
        )
        .unwrap();
        // A reference on http from an https stylesheet does not fold; it is
        // absolute already, so it is kept.
        assert_eq!(ctx.rewrite("http://b.com/x.png"), None);
        assert!(FoldContext::stylesheet(
            Arc::new(site("")),
            url("https://evil.com/b.com/s.css"),
            url("https://b.com/s.css"),
        )
        .is_none());
    }

    fn path_char() -> impl Strategy<Value = char> {
        prop_oneof![
            8 => proptest::char::range('a', 'z'),
            2 => proptest::char::range('0', '9'),
            3 => prop::sample::select(vec![
                '-', '_', '.', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=',
                ':', '@', '%', ' ', '"', '<', '>', '`', '{', '}', '|', '^', 'é', '😀', '/'
            ]),
        ]
    }

    proptest! {
        /// unfold(fold(x)) == x: every folded reference maps back to the URL
        /// it came from (without its fragment, which is never sent).
        #[test]
        fn round_trip(
            host in prop::sample::select(vec!["b.com", "cdn.c.net"]),
            https in any::<bool>(),
            prefix in prop::sample::select(vec!["", "/_mewa", "/x/y"]),
            path in proptest::collection::vec(path_char(), 0..40),
            query in proptest::option::of(proptest::collection::vec(path_char(), 0..20)),
            frag in proptest::option::of("[a-z0-9#?/]{0,8}"),
        ) {
            let s = site(prefix);
            let scheme = if https { Scheme::Https } else { Scheme::Http };
            let path: String = path.into_iter().collect();
            let mut raw = format!("{}://{}/{}", scheme.as_str(), host, path);
            if let Some(q) = query {
                raw.push('?');
                raw.extend(q);
            }
            if let Some(f) = &frag {
                raw.push('#');
                raw.push_str(f);
            }
            let page = url(&format!("{}://a.com/p/", scheme.as_str()));
            let Ok(resource) = Url::parse(&raw) else { return Ok(()) };
            let folded = fold(&s, &page, &raw);
            // Only paths that decode to a backslash, a control byte or a dot
            // segment may stay unfolded.
            let odd = raw.contains('%') || raw.contains("..") || raw.contains("/.");
            prop_assert!(folded.is_some() || odd, "{raw} did not fold");
            if let Some(folded) = folded {
                let head = format!("{}/{}/", prefix, host);
                prop_assert!(folded.starts_with(&head), "{} from {}", folded, raw);
                let sent = folded.split('#').next().unwrap_or_default();
                let t = unfold(&s, sent).unwrap().unwrap();
                let mut want = resource.clone();
                want.set_fragment(None);
                prop_assert_eq!(t.url(scheme), want.as_str());
            }
        }

        /// Whatever the bytes, unfold never returns a target off the list
        /// and never panics.
        #[test]
        fn unfold_never_leaves_the_allowlist(path in "/[ -~]{0,60}", prefix in prop::sample::select(vec!["", "/_mewa"])) {
            let s = site(prefix);
            if let Ok(Some(t)) = unfold(&s, &path) {
                prop_assert!(s.folds(&t.host));
                prop_assert!(t.path_and_query.starts_with('/'));
                let u = Url::parse(&t.url(Scheme::Https)).unwrap();
                prop_assert_eq!(u.host_str(), Some(t.host.as_str()));
                prop_assert_eq!(u.port(), None);
            }
        }

        /// Paths built from allowed-host fragments and tricks: the same.
        #[test]
        fn unfold_tricks_never_escape(parts in proptest::collection::vec(prop::sample::select(vec![
            "/", "b.com", "B.COM", ".", "..", "%2e", "%2F", "%5c", "%25", "@", ":", "evil.com",
            "127.0.0.1", "x", "?", "#", "\\", "_mewa", "%00", "[::1]", "//",
        ]), 0..12)) {
            let path = parts.concat();
            for prefix in ["", "/_mewa"] {
                let s = site(prefix);
                if let Ok(Some(t)) = unfold(&s, &path) {
                    prop_assert!(s.folds(&t.host), "{path}");
                    let u = Url::parse(&t.url(Scheme::Https)).unwrap();
                    prop_assert_eq!(u.host_str(), Some(t.host.as_str()), "{}", path);
                }
            }
        }
    }
}
