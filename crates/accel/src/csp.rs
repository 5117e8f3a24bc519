//! Content-Security-Policy adjustment, so that a page whose policy allows
//! `https://b.example` keeps loading its folded resources from
//! `https://a.example/b.example/…`.
//!
//! A policy names the hosts a page may load from; folding moves a resource
//! of b.example onto the document's own origin, under a path the policy
//! never mentions, so the browser would block it. [`adjust`] appends, to
//! every fetch directive that governs a folded kind of subresource and
//! allows a folded host, a path source on the document's origin that allows
//! exactly the folded form of what was allowed (`https://b.example/img/` →
//! `https://a.example/b.example/img/`). Nothing is ever removed or changed:
//! the rest of the value is kept byte for byte, so the adjusted policy allows
//! what the original did, plus the folded image of it, and nothing else.
//!
//! Parsing follows CSP Level 3 (§2.2.1 "Parse a serialized CSP", §2.3.1
//! "Source Lists") and source matching its URL matching algorithms (§6.7.2),
//! quoted where they are implemented. A value that is not ASCII, or holds a
//! control character, is refused ([`CspError`]): the server then serves the
//! document unrewritten, under its original policy.

use std::borrow::Cow;
use std::collections::BTreeSet;

use url::Url;

use crate::mapping::{percent_decode_once, Scheme};
use crate::site::Site;

/// Longest policy value [`adjust`] reads (bytes). Real policies are a few
/// KiB; the bound keeps the work per directive (each addition checked against
/// each source) small whatever a response carries.
pub const MAX_POLICY_LEN: usize = 64 * 1024;

/// The fetch directives that govern a subresource the HTML and CSS rewriters
/// fold: images (`<img>`, `srcset`, `poster`, CSS `url()`, icons), scripts,
/// stylesheets, fonts and media. Others (`connect-src`, `frame-src`,
/// `child-src`, `worker-src`, `manifest-src`, `object-src`, `base-uri`,
/// `form-action`…) govern nothing that is folded and are never touched.
pub const FOLDED_DIRECTIVES: [&str; 8] = [
    "default-src",
    "img-src",
    "script-src",
    "script-src-elem",
    "style-src",
    "style-src-elem",
    "font-src",
    "media-src",
];

/// An adjusted policy value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CspAdjusted {
    /// The new value: the original with source expressions appended.
    pub value: String,
    /// How many source expressions were appended (0: `value` is the
    /// original).
    pub added: u32,
}

/// Why a policy cannot be adjusted. The document is then served unrewritten
/// (a `<meta>` policy is left as it is and nothing after it is folded), with
/// the reason logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum CspError {
    /// Longer than [`MAX_POLICY_LEN`].
    #[error("policy longer than {MAX_POLICY_LEN} bytes")]
    TooLong,
    /// A non-ASCII character. CSP3 §2.2.1 skips such a directive, so the
    /// browser's reading of the policy could only be guessed at.
    #[error("policy has a non-ASCII character at byte {at}")]
    NonAscii {
        /// Byte offset of the character.
        at: usize,
    },
    /// A control character other than ASCII whitespace (NUL, VT, DEL…):
    /// no valid policy holds one, and it must not be written back.
    #[error("policy has a control character at byte {at}")]
    Control {
        /// Byte offset of the character.
        at: usize,
    },
}

impl CspError {
    /// A short stable name, for metrics labels and logs.
    pub fn label(self) -> &'static str {
        match self {
            CspError::TooLong => "too_long",
            CspError::NonAscii { .. } => "non_ascii",
            CspError::Control { .. } => "control",
        }
    }
}

/// Adjusts one `Content-Security-Policy` (or `…-Report-Only`) header value
/// for a document of `site` served at `document`: for each policy in it
/// (policies are separated by `,`), each directive of [`FOLDED_DIRECTIVES`]
/// whose sources allow a folded host under the document's scheme gets a path
/// source on the document's origin allowing the folded form
/// (`/b.example/…`, or `/_mewa/b.example/…` with a prefix). Directives whose
/// sources already allow those paths (`*`, `https:` on an https document,
/// `'self'`) get nothing; neither does one that allows no folded host
/// (`'none'`, a scheme mismatch, a port other than the default).
///
/// A document that is not http(s) on one of the site's hosts folds nothing,
/// so its policy is returned unchanged.
///
/// ```
/// # use mewa_accel::site::{Site, SiteConfig};
/// # use mewa_accel::csp::adjust;
/// let site = Site::new(&SiteConfig {
///     hosts: vec!["a.example".into()],
///     fold: vec!["b.example".into()],
///     prefix: String::new(),
/// })?;
/// let doc = url::Url::parse("https://a.example/page")?;
/// let out = adjust("img-src 'self' https://b.example/img/; object-src 'none'", &site, &doc)?;
/// assert_eq!(
///     out.value,
///     "img-src 'self' https://b.example/img/; object-src 'none'"
/// ); // 'self' already allows every path of a.example
/// let out = adjust("img-src https://b.example/img/; object-src 'none'", &site, &doc)?;
/// assert_eq!(
///     out.value,
///     "img-src https://b.example/img/ https://a.example/b.example/img/; object-src 'none'"
/// );
/// assert_eq!(out.added, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn adjust(policy: &str, site: &Site, document: &Url) -> Result<CspAdjusted, CspError> {
    adjust_text(policy, site, document, Delivery::Header)
}

/// Adjusts the `content` of a `<meta http-equiv="Content-Security-Policy">`
/// (character references already decoded) like [`adjust`], except that it is
/// one policy: HTML parses a meta's content as a single serialized CSP, so a
/// `,` there is part of a source expression, not a separator.
pub fn adjust_meta(content: &str, site: &Site, document: &Url) -> Result<CspAdjusted, CspError> {
    adjust_text(content, site, document, Delivery::Meta)
}

/// Where a policy came from, which decides whether `,` separates policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// An HTTP header: CSP3 §3.1, `Content-Security-Policy = 1#serialized-policy`.
    Header,
    /// A `<meta>` element: one serialized CSP.
    Meta,
}

fn adjust_text(
    text: &str,
    site: &Site,
    document: &Url,
    delivery: Delivery,
) -> Result<CspAdjusted, CspError> {
    check_chars(text)?;
    let unchanged = || CspAdjusted {
        value: text.to_string(),
        added: 0,
    };
    let Some(doc) = Doc::of(site, document) else {
        return Ok(unchanged());
    };
    let mut value = String::with_capacity(text.len() + 64);
    let mut added = 0u32;
    let mut copied = 0;
    for d in directives(text, delivery) {
        if !d.first || !FOLDED_DIRECTIVES.contains(&d.name.as_str()) {
            continue;
        }
        let sources: Vec<Source<'_>> = d.value.iter().map(|t| Source::parse(t)).collect();
        let additions = additions(&sources, site, &doc);
        if additions.is_empty() {
            continue;
        }
        value.push_str(&text[copied..d.end]);
        for a in &additions {
            value.push(' ');
            value.push_str(a);
        }
        copied = d.end;
        added = added.saturating_add(u32::try_from(additions.len()).unwrap_or(u32::MAX));
    }
    if added == 0 {
        return Ok(unchanged());
    }
    value.push_str(&text[copied..]);
    Ok(CspAdjusted { value, added })
}

/// Refuses what this module will not guess at or write back.
fn check_chars(text: &str) -> Result<(), CspError> {
    if text.len() > MAX_POLICY_LEN {
        return Err(CspError::TooLong);
    }
    for (at, b) in text.bytes().enumerate() {
        if !b.is_ascii() {
            return Err(CspError::NonAscii { at });
        }
        if b.is_ascii_control() && !b.is_ascii_whitespace() {
            return Err(CspError::Control { at });
        }
    }
    Ok(())
}

/// The document's origin, where folded resources live.
struct Doc {
    scheme: &'static str,
    host: String,
    /// The URL's port: `None` when it is the scheme's default.
    port: Option<u16>,
    /// `scheme://host[:port]`, the start of every addition.
    origin: String,
}

impl Doc {
    /// `None` when nothing folds into `document`: not http(s), or not on
    /// one of the site's hosts.
    fn of(site: &Site, document: &Url) -> Option<Doc> {
        let scheme = Scheme::of(document)?.as_str();
        let host = match document.host()? {
            url::Host::Domain(d) => d,
            _ => return None,
        };
        if !site.serves(host.strip_suffix('.').unwrap_or(host)) {
            return None;
        }
        Some(Doc {
            scheme,
            host: host.to_string(),
            port: document.port(),
            origin: document.origin().ascii_serialization(),
        })
    }

    /// The origin an addition is written on, given whether its source also
    /// allows the folded host over https; `None` when no origin allows
    /// exactly what it should.
    ///
    /// An `http://a.example/…` source also allows `https://a.example/…`
    /// (CSP3 §6.7.2.9: "http" scheme-part matches "https"), the scheme a
    /// browser upgrades to (`upgrade-insecure-requests`); the accelerator
    /// unfolds such a request to `https://b.example/…`. That is right for a
    /// source that allows `https://b.example` too (`b.example`,
    /// `http://b.example`), not for one that allows only http
    /// (`b.example:80`): there the document's default port is written out
    /// (`http://a.example:80/…`, which no https URL on the default port
    /// matches), and on another port nothing can exclude the upgrade, so
    /// nothing is added.
    fn addition_origin(&self, source_allows_https: bool) -> Option<Cow<'_, str>> {
        if self.scheme == "https" || source_allows_https {
            Some(Cow::Borrowed(&self.origin))
        } else if self.port.is_none() {
            Some(Cow::Owned(format!("{}:80", self.origin)))
        } else {
            None
        }
    }
}

/// One directive as the browser reads it.
#[derive(Debug)]
struct Directive<'a> {
    /// Its name, ASCII-lowercased.
    name: String,
    /// Its source expressions (the tokens after the name).
    value: Vec<&'a str>,
    /// Byte offset just past its last non-whitespace character: where
    /// additions go.
    end: usize,
    /// Whether it is the first of its name in its policy; later ones are
    /// ignored by the browser.
    first: bool,
}

/// Every directive of `text`, in order.
fn directives(text: &str, delivery: Delivery) -> Vec<Directive<'_>> {
    let mut out = Vec::new();
    let policies: Vec<(usize, &str)> = match delivery {
        Delivery::Header => split_with_offsets(text, 0, ','),
        Delivery::Meta => vec![(0, text)],
    };
    for (start, body) in policies {
        let mut seen = BTreeSet::new();
        // CSP3 §2.2.1: "For each token returned by strictly splitting
        // serialized on the U+003B SEMICOLON character (;): 1. Strip leading
        // and trailing ASCII whitespace from token. 2. If token is an empty
        // string, or if token is not an ASCII string, continue. 3. Let
        // directive name be the result of collecting a sequence of code
        // points from token which are not ASCII whitespace. 4. Set directive
        // name to be the result of running ASCII lowercase on directive name.
        // 5. If policy's directive set contains a directive whose name is
        // directive name, continue. 6. Let directive value be the result of
        // splitting token on ASCII whitespace."
        for (at, token) in split_with_offsets(body, start, ';') {
            let lead = token.len() - token.trim_start_matches(is_ascii_ws).len();
            let trimmed = token.trim_matches(is_ascii_ws);
            if trimmed.is_empty() {
                continue;
            }
            let name_len = trimmed.find(is_ascii_ws).unwrap_or(trimmed.len());
            let name = trimmed[..name_len].to_ascii_lowercase();
            let first = seen.insert(name.clone());
            out.push(Directive {
                name,
                value: trimmed[name_len..].split_ascii_whitespace().collect(),
                end: at + lead + trimmed.len(),
                first,
            });
        }
    }
    out
}

/// `text` split on `sep`, each piece with its byte offset (plus `base`).
fn split_with_offsets(text: &str, base: usize, sep: char) -> Vec<(usize, &str)> {
    let mut at = base;
    text.split(sep)
        .map(|piece| {
            let here = at;
            at += piece.len() + sep.len_utf8();
            (here, piece)
        })
        .collect()
}

/// Infra's ASCII whitespace: TAB, LF, FF, CR, SPACE (`u8::is_ascii_whitespace`
/// is exactly this set).
fn is_ascii_ws(c: char) -> bool {
    c.is_ascii_whitespace()
}

/// A source expression, as far as matching URLs goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source<'a> {
    /// `*`
    Star,
    /// A `scheme-source`: its `scheme-part`.
    Scheme(&'a str),
    /// A `host-source`.
    Host(HostSource<'a>),
    /// `'self'`
    SelfOrigin,
    /// Anything that matches no URL here: other keywords, nonces, hashes
    /// and expressions outside the grammar.
    Other,
}

/// CSP3 §2.3.1: `host-source = [ scheme-part "://" ] host-part [ ":"
/// port-part ] [ path-part ]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HostSource<'a> {
    scheme: Option<&'a str>,
    host: &'a str,
    port: Option<&'a str>,
    /// The `path-part`, `""` when absent.
    path: &'a str,
}

impl<'a> Source<'a> {
    /// Reads one source expression by CSP3 §2.3.1's grammar; anything
    /// outside it is [`Source::Other`], which the matching algorithm never
    /// matches to a URL.
    fn parse(token: &'a str) -> Source<'a> {
        if token == "*" {
            return Source::Star;
        }
        if token.eq_ignore_ascii_case("'self'") {
            return Source::SelfOrigin;
        }
        if token.starts_with('\'') {
            return Source::Other;
        }
        // scheme-source = scheme-part ":"
        if let Some(scheme) = token.strip_suffix(':') {
            if is_scheme(scheme) {
                return Source::Scheme(scheme);
            }
        }
        let (scheme, rest) = match token.find("://") {
            Some(i) if is_scheme(&token[..i]) => (Some(&token[..i]), &token[i + 3..]),
            Some(_) => return Source::Other,
            None => (None, token),
        };
        let host_end = rest.find([':', '/']).unwrap_or(rest.len());
        let (host, mut rest) = rest.split_at(host_end);
        if !is_host_part(host) {
            return Source::Other;
        }
        let mut port = None;
        if let Some(after) = rest.strip_prefix(':') {
            let end = after.find('/').unwrap_or(after.len());
            let p = &after[..end];
            if p != "*" && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
                return Source::Other;
            }
            port = Some(p);
            rest = &after[end..];
        }
        if !rest.is_empty() && !is_path_part(rest) {
            return Source::Other;
        }
        Source::Host(HostSource {
            scheme,
            host,
            port,
            path: rest,
        })
    }
}

/// RFC 3986 §3.1: `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// CSP3 §2.3.1: `host-part = "*" / [ "*." ] 1*host-char *( "." 1*host-char )
/// [ "." ]`, `host-char = ALPHA / DIGIT / "-"`.
fn is_host_part(s: &str) -> bool {
    if s == "*" {
        return true;
    }
    let s = s.strip_prefix("*.").unwrap_or(s);
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// CSP3 §2.3.1: `path-part = path-absolute (but not including ";" or ",")`;
/// RFC 3986 §3.3: `path-absolute = "/" [ segment-nz *( "/" segment ) ]`,
/// segments of `pchar = unreserved / pct-encoded / sub-delims / ":" / "@"`.
fn is_path_part(s: &str) -> bool {
    if !s.starts_with('/') || s.starts_with("//") {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return false;
                }
                i += 3;
                continue;
            }
            c if c.is_ascii_alphanumeric() => {}
            b'/' | b'-' | b'.' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*'
            | b'+' | b'=' | b':' | b'@' => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

impl HostSource<'_> {
    /// Steps 3.2 to 3.5 of CSP3 §6.7.2.8 "Does url match expression in
    /// origin with redirect count?" for a URL of `scheme` on the domain
    /// `host` with port `port` (`None`: the scheme's default), in a document
    /// whose origin has scheme `self_scheme`; the path (step 3.6) is checked
    /// apart.
    fn matches_origin(
        &self,
        scheme: &str,
        host: &str,
        port: Option<u16>,
        self_scheme: &str,
    ) -> bool {
        // "1. If expression has a scheme-part, and it does not scheme-part
        // match url's scheme, return "Does Not Match"." (step 2.1)
        // "2. If expression does not have a scheme-part, and origin's scheme
        // does not scheme-part match url's scheme, return "Does Not Match"."
        let scheme_ok = scheme_part_matches(self.scheme.unwrap_or(self_scheme), scheme);
        // "3. If expression's host-part does not host-part match url's host,
        // return "Does Not Match"." "5. If port-part does not port-part match
        // url, return "Does Not Match"."
        scheme_ok
            && host_part_matches(self.host, host)
            && port_part_matches(self.port, port, scheme)
    }
}

/// CSP3 §6.7.2.9 "scheme-part matching": "1. If one of the following is
/// true, return "Matches": A is an ASCII case-insensitive match for B. A is
/// an ASCII case-insensitive match for "http", and B is an ASCII
/// case-insensitive match for "https". A is … "ws", and B is … "wss",
/// "http", or "https". A is … "wss", and B is … "https"."
fn scheme_part_matches(a: &str, b: &str) -> bool {
    let is = |s: &str, t: &str| s.eq_ignore_ascii_case(t);
    is(a, b)
        || (is(a, "http") && is(b, "https"))
        || (is(a, "ws") && (is(b, "wss") || is(b, "http") || is(b, "https")))
        || (is(a, "wss") && is(b, "https"))
}

/// CSP3 §6.7.2.10 "host-part matching" for a domain `host`: "2. If pattern
/// is "*", return "Matches". 3. If pattern starts with "*.": Let remaining be
/// pattern with the leading U+002A (*) removed and ASCII lowercased. If host
/// to ASCII lowercase ends with remaining, then return "Matches". Return
/// "Does Not Match". 4. If pattern is not an ASCII case-insensitive match for
/// host, return "Does Not Match"."
fn host_part_matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if let Some(remaining) = pattern.strip_prefix('*') {
        if remaining.starts_with('.') {
            let (h, r) = (host.to_ascii_lowercase(), remaining.to_ascii_lowercase());
            return h.ends_with(&r);
        }
    }
    pattern.eq_ignore_ascii_case(host)
}

/// CSP3 §6.7.2.11 "port-part matching": "2. If input is equal to "*",
/// return "Matches". 3. Let normalizedInput be null if input null; otherwise
/// input interpreted as decimal number. 4. If normalizedInput equals url's
/// port, return "Matches". 5. If url's port is null: Let defaultPort be the
/// default port for url's scheme. If normalizedInput equals defaultPort,
/// return "Matches"."
fn port_part_matches(input: Option<&str>, port: Option<u16>, scheme: &str) -> bool {
    let normalized = match input {
        Some("*") => return true,
        // Digits too long for a u32 name no port at all.
        Some(digits) => match digits.parse::<u32>() {
            Ok(n) => Some(n),
            Err(_) => return false,
        },
        None => None,
    };
    if normalized == port.map(u32::from) {
        return true;
    }
    if port.is_none() {
        let default = match scheme.to_ascii_lowercase().as_str() {
            "http" | "ws" => 80,
            "https" | "wss" => 443,
            _ => return false,
        };
        return normalized == Some(default);
    }
    false
}

/// CSP3 §6.7.2.12 "path-part matching" of `a` (a source's path-part)
/// against `b` (a URL's path).
fn path_part_matches(a: &str, b: &str) -> bool {
    // "1. If path A is the empty string, return "Matches". 2. If path A
    // consists of one character that is equal to the U+002F SOLIDUS
    // character (/) and path B is the empty string, return "Matches"."
    if a.is_empty() || (a == "/" && b.is_empty()) {
        return true;
    }
    // "3. Let exact match be false if the final character of path A is the
    // U+002F SOLIDUS character (/), and true otherwise."
    let exact = !a.ends_with('/');
    let mut list_a: Vec<&str> = a.split('/').collect();
    let list_b: Vec<&str> = b.split('/').collect();
    // "5. If path list A has more items than path list B, return "Does Not
    // Match". 6. If exact match is true, and path list A does not have the
    // same number of items as path list B, return "Does Not Match"."
    if list_a.len() > list_b.len() || (exact && list_a.len() != list_b.len()) {
        return false;
    }
    // "7. If exact match is false: … Remove the final item from path list A."
    if !exact {
        list_a.pop();
    }
    // "8. For each piece A of path list A: … If decoded piece A is not
    // decoded piece B, return "Does Not Match"."
    list_a
        .iter()
        .zip(&list_b)
        .all(|(pa, pb)| decoded(pa) == decoded(pb))
}

/// Percent-decodes one path piece.
fn decoded(piece: &str) -> Cow<'_, [u8]> {
    if piece.contains('%') {
        Cow::Owned(percent_decode_once(piece.as_bytes()))
    } else {
        Cow::Borrowed(piece.as_bytes())
    }
}

/// Whether the source path `source` allows every path the addition path
/// `path` allows: every path under it when it ends in `/`, else just it.
fn path_covers(source: &str, path: &str) -> bool {
    source.is_empty()
        || (path_part_matches(source, path) && (source.ends_with('/') || !path.ends_with('/')))
}

/// The sources to append to one directive's list: for each host-source that
/// matches a folded host under the document's scheme (on its default port,
/// the only one that folds), the document's origin with the folded path of
/// that source, unless the list already allows all of it.
fn additions(sources: &[Source<'_>], site: &Site, doc: &Doc) -> Vec<String> {
    // Sources that allow the document's origin. `*`, a scheme-source of its
    // scheme and 'self' allow every path on it: nothing to add.
    let mut on_doc = Vec::new();
    for s in sources {
        match s {
            // CSP3 §6.7.2.8: "1. If expression is the string "*", return
            // "Matches" if … url's scheme is an HTTP(S) scheme." "2.2. If
            // expression matches the scheme-source grammar, return
            // "Matches"." (after step 2.1's scheme check) "4. If expression is
            // an ASCII case-insensitive match for "'self'", return "Matches"
            // if … origin is the same as url's origin".
            Source::Star | Source::SelfOrigin => return Vec::new(),
            Source::Scheme(scheme) if scheme_part_matches(scheme, doc.scheme) => {
                return Vec::new();
            }
            Source::Host(h) if h.matches_origin(doc.scheme, &doc.host, doc.port, doc.scheme) => {
                on_doc.push(h.path);
            }
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in sources {
        let Source::Host(h) = s else { continue };
        for folded in site.folded_hosts() {
            // A folded reference has the document's scheme and the default
            // port (docs/ACCEL.md, "fold").
            if !h.matches_origin(doc.scheme, folded, None, doc.scheme) {
                continue;
            }
            let Some(origin) =
                doc.addition_origin(h.matches_origin("https", folded, None, doc.scheme))
            else {
                continue;
            };
            // The folded path of every path the source allows: an absent
            // path-part allows all of the host, so `/b.example/` (a prefix);
            // otherwise the path-part keeps its form, a prefix when it ends
            // in `/` and one exact path when not.
            let rest = if h.path.is_empty() { "/" } else { h.path };
            let path = format!("{}/{}{}", site.prefix(), folded, rest);
            if on_doc.iter().any(|p| path_covers(p, &path)) {
                continue;
            }
            let addition = format!("{origin}{path}");
            if seen.insert(addition.clone()) {
                out.push(addition);
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::mapping::unfold;
    use crate::site::SiteConfig;
    use proptest::prelude::*;

    fn site(prefix: &str) -> Site {
        Site::new(&SiteConfig {
            hosts: vec!["a.example".into(), "www.a.example".into()],
            fold: vec!["b.example".into(), "cdn.c.example".into()],
            prefix: prefix.into(),
        })
        .unwrap()
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    const HTTPS: &str = "https://a.example/dir/page.html";
    const HTTP: &str = "http://a.example/";

    #[test]
    fn table() {
        // (policy, document, prefix, expected)
        let changed: &[(&str, &str, &str, &str)] = &[
            (
                "default-src https://b.example",
                HTTPS,
                "",
                "default-src https://b.example https://a.example/b.example/",
            ),
            (
                "default-src b.example",
                HTTP,
                "",
                "default-src b.example http://a.example/b.example/",
            ),
            // A wildcard matching a folded host but not the document's.
            (
                "img-src https://*.c.example data:",
                HTTPS,
                "",
                "img-src https://*.c.example data: https://a.example/cdn.c.example/",
            ),
            // https: on an http document allows no http URL.
            (
                "img-src https: b.example",
                HTTP,
                "",
                "img-src https: b.example http://a.example/b.example/",
            ),
            // http upgrades to https (CSP3 scheme-part matching).
            (
                "img-src http://b.example",
                HTTPS,
                "",
                "img-src http://b.example https://a.example/b.example/",
            ),
            // On an http document, a source allowing only http b.example
            // gets an addition no https upgrade matches.
            (
                "img-src b.example:80 http://b.example",
                HTTP,
                "",
                "img-src b.example:80 http://b.example http://a.example:80/b.example/ \
                 http://a.example/b.example/",
            ),
            (
                "img-src b.example",
                "http://a.example:8080/",
                "",
                "img-src b.example http://a.example:8080/b.example/",
            ),
            // Ports: the default, explicit or `*`, matches.
            (
                "img-src https://b.example:443 b.example:*",
                HTTPS,
                "",
                "img-src https://b.example:443 b.example:* https://a.example/b.example/",
            ),
            // Path sources keep their form: prefix with `/`, exact without.
            (
                "img-src https://b.example/img/",
                HTTPS,
                "",
                "img-src https://b.example/img/ https://a.example/b.example/img/",
            ),
            (
                "script-src https://b.example/js/app.js",
                HTTPS,
                "",
                "script-src https://b.example/js/app.js https://a.example/b.example/js/app.js",
            ),
            (
                "img-src https://b.example/",
                HTTPS,
                "",
                "img-src https://b.example/ https://a.example/b.example/",
            ),
            // Several policies.
            (
                "img-src b.example, script-src cdn.c.example; img-src 'none'",
                HTTPS,
                "",
                "img-src b.example https://a.example/b.example/, \
                 script-src cdn.c.example https://a.example/cdn.c.example/; img-src 'none'",
            ),
            // Every folded directive; case, spacing and order kept; a
            // repeated directive is ignored by the browser and here.
            (
                " IMG-SRC  B.Example\t;font-src b.example ;media-src b.example;\
                 style-src-elem b.example;img-src b.example;",
                HTTPS,
                "",
                " IMG-SRC  B.Example https://a.example/b.example/\t;\
                 font-src b.example https://a.example/b.example/ ;\
                 media-src b.example https://a.example/b.example/;\
                 style-src-elem b.example https://a.example/b.example/;img-src b.example;",
            ),
            (
                "style-src b.example cdn.c.example; script-src-elem 'nonce-abc' https://b.example",
                HTTPS,
                "",
                "style-src b.example cdn.c.example https://a.example/b.example/ \
                 https://a.example/cdn.c.example/; \
                 script-src-elem 'nonce-abc' https://b.example https://a.example/b.example/",
            ),
            // Prefix form, and a document on another port.
            (
                "img-src https://b.example/img/",
                HTTPS,
                "/_mewa",
                "img-src https://b.example/img/ https://a.example/_mewa/b.example/img/",
            ),
            (
                "default-src b.example",
                "https://a.example:8443/",
                "",
                "default-src b.example https://a.example:8443/b.example/",
            ),
            // A source allowing only part of the folded paths already.
            (
                "img-src b.example/x/ a.example/b.example/x/y/",
                HTTPS,
                "",
                "img-src b.example/x/ a.example/b.example/x/y/ https://a.example/b.example/x/",
            ),
        ];
        for (policy, doc, prefix, want) in changed {
            let got = adjust(policy, &site(prefix), &url(doc)).unwrap();
            assert_eq!(got.value, *want, "{policy:?} in {doc} {prefix:?}");
            assert!(got.added > 0, "{policy:?}");
        }

        // (policy, document): kept byte for byte, in both path forms.
        let unchanged: &[(&str, &str)] = &[
            // 'self', `*`, a scheme-source of the document's scheme, a
            // wildcard matching a.example too: every path of a.example is
            // allowed already.
            ("script-src 'self' https://b.example", HTTPS),
            ("img-src * b.example", HTTPS),
            ("img-src https: b.example", HTTPS),
            ("img-src http: b.example", HTTPS),
            ("img-src *.example", HTTPS),
            ("img-src https://*.c.example 'self'", HTTPS),
            ("img-src b.example https://a.example/", HTTPS),
            // Scheme mismatch: an https source does not allow http
            // b.example, which is all an http document folds.
            ("img-src https://b.example", HTTP),
            // Another port; only-http on a non-default http port, where no
            // source could exclude the https upgrade.
            ("img-src https://b.example:8443", HTTPS),
            ("img-src b.example:80", HTTPS),
            ("img-src b.example:80", "http://a.example:8080/"),
            // 'none', empty, hosts not folded, subdomains of a folded host.
            ("img-src 'none'", HTTPS),
            ("img-src; script-src", HTTPS),
            (
                "img-src *.b.example evil.example sub.b.example b.example.",
                HTTPS,
            ),
            // Unknown and untouched directives: connect-src etc. govern
            // nothing folded.
            (
                "connect-src b.example; frame-src b.example; worker-src b.example; \
                 manifest-src b.example; object-src b.example; x-made-up b.example",
                HTTPS,
            ),
            // Outside the grammar: matches nothing.
            (
                "img-src https://b.example//x b.example/x?y b.example:8x b.example/a%zz",
                HTTPS,
            ),
            // A document not of the site: nothing folds.
            ("img-src b.example", "https://d.example/"),
            ("", HTTPS),
        ];
        for (policy, doc) in unchanged {
            for prefix in ["", "/_mewa"] {
                let got = adjust(policy, &site(prefix), &url(doc)).unwrap();
                assert_eq!(
                    got,
                    CspAdjusted {
                        value: policy.to_string(),
                        added: 0
                    },
                    "{policy:?} in {doc} {prefix:?}"
                );
            }
        }
    }

    #[test]
    fn counts_and_meta_commas() {
        let s = site("");
        let out = adjust(
            "img-src b.example cdn.c.example, font-src b.example",
            &s,
            &url(HTTPS),
        )
        .unwrap();
        assert_eq!(out.added, 3);
        let out = adjust("img-src 'self'", &s, &url(HTTPS)).unwrap();
        assert_eq!(
            out,
            CspAdjusted {
                value: "img-src 'self'".into(),
                added: 0
            }
        );
        // In a <meta> a comma separates nothing: `b.example,` is no host.
        let out = adjust_meta("img-src b.example, script-src b.example", &s, &url(HTTPS)).unwrap();
        assert_eq!(
            out.value,
            "img-src b.example, script-src b.example https://a.example/b.example/"
        );
        assert_eq!(out.added, 1);
    }

    #[test]
    fn refusals() {
        let s = site("");
        let doc = url(HTTPS);
        assert_eq!(
            adjust("img-src bü.example", &s, &doc),
            Err(CspError::NonAscii { at: 9 })
        );
        assert_eq!(
            adjust("img-src b.example\0", &s, &doc),
            Err(CspError::Control { at: 17 })
        );
        assert_eq!(
            adjust("img-src\x0bb.example", &s, &doc),
            Err(CspError::Control { at: 7 })
        );
        assert_eq!(
            adjust("img-src\x7f", &s, &doc),
            Err(CspError::Control { at: 7 })
        );
        let long = format!("img-src {}", "b.example ".repeat(MAX_POLICY_LEN / 10));
        assert_eq!(adjust(&long, &s, &doc), Err(CspError::TooLong));
        // ASCII whitespace is fine, newlines included (pretty-printed metas).
        assert_eq!(
            adjust("img-src\r\n\tb.example\x0c", &s, &doc)
                .unwrap()
                .value,
            "img-src\r\n\tb.example https://a.example/b.example/\x0c"
        );
        let all = [
            CspError::TooLong,
            CspError::NonAscii { at: 0 },
            CspError::Control { at: 0 },
        ];
        let labels: BTreeSet<_> = all.iter().map(|e| e.label()).collect();
        assert_eq!(labels.len(), all.len());
    }

    #[test]
    fn path_matching() {
        // (source path, URL path, path-part matches)
        let matches = [
            ("", "/x", true),
            ("/", "", true),
            ("/", "/a/b", true),
            ("/a/", "/a/b", true),
            ("/a/", "/a/", true),
            ("/a/", "/a", false),
            ("/a", "/a", true),
            ("/a", "/a/", false),
            ("/a", "/a/b", false),
            ("/%61/", "/a/b", true),
            ("/a/", "/a%2Fb", false),
        ];
        for (a, b, want) in matches {
            assert_eq!(path_part_matches(a, b), want, "{a:?} {b:?}");
        }
        // (source path, addition path, every path of the addition allowed)
        let covers = [
            ("", "/b.example/", true),
            ("/", "/b.example/", true),
            ("/b.example/", "/b.example/x/", true),
            ("/b.example/", "/b.example/x", true),
            ("/b.example/x", "/b.example/x/", false),
            ("/b.example/x", "/b.example/x", true),
            ("/b.example//", "/b.example/", false),
            ("/b.example/x/", "/b.example/", false),
        ];
        for (source, path, want) in covers {
            assert_eq!(path_covers(source, path), want, "{source:?} {path:?}");
        }
    }

    #[test]
    fn source_grammar() {
        let host = |scheme, host, port, path| {
            Source::Host(HostSource {
                scheme,
                host,
                port,
                path,
            })
        };
        let cases: &[(&str, Source<'_>)] = &[
            ("*", Source::Star),
            ("'SELF'", Source::SelfOrigin),
            ("'none'", Source::Other),
            ("'nonce-abc'", Source::Other),
            ("https:", Source::Scheme("https")),
            ("b.example:", Source::Scheme("b.example")),
            ("b.example", host(None, "b.example", None, "")),
            (
                "HTTPS://*.b.example:*/a/b/",
                host(Some("HTTPS"), "*.b.example", Some("*"), "/a/b/"),
            ),
            ("https://*", host(Some("https"), "*", None, "")),
            ("b.example.:443", host(None, "b.example.", Some("443"), "")),
            ("b.example/a%20b", host(None, "b.example", None, "/a%20b")),
            ("b.example/a%2", Source::Other),
            ("b.example/a,b", Source::Other),
            ("b.example:x", Source::Other),
            ("b..example", Source::Other),
            ("*b.example", Source::Other),
            ("b.*.example", Source::Other),
            ("1http://b.example", Source::Other),
            ("https://", Source::Other),
            ("[::1]", Source::Other),
        ];
        for (token, want) in cases {
            assert_eq!(Source::parse(token), *want, "{token:?}");
        }
        assert!(port_part_matches(Some("0443"), None, "https"));
        assert!(!port_part_matches(Some("99999999999"), None, "https"));
        assert!(!port_part_matches(None, Some(8443), "https"));
        assert!(port_part_matches(Some("8443"), Some(8443), "https"));
    }

    /// CSP3 §6.7.2.7 "Does url match source list in origin with redirect
    /// count?" (redirect count 0), on this module's source parsing: the
    /// oracle of the widening property.
    fn list_allows(list: &[&str], target: &Url, doc: &Url) -> bool {
        if list.len() == 1 && list[0].eq_ignore_ascii_case("'none'") {
            return false;
        }
        let http = matches!(target.scheme(), "http" | "https");
        list.iter().any(|t| match Source::parse(t) {
            Source::Star => http || target.scheme() == doc.scheme(),
            Source::Scheme(s) => scheme_part_matches(s, target.scheme()),
            Source::SelfOrigin => target.origin() == doc.origin(),
            Source::Host(h) => target.host_str().is_some_and(|host| {
                h.matches_origin(target.scheme(), host, target.port(), doc.scheme())
                    && (h.path.is_empty() || path_part_matches(h.path, target.path()))
            }),
            Source::Other => false,
        })
    }

    fn token() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "b.example",
            "B.EXAMPLE",
            "https://b.example",
            "http://b.example",
            "b.example:443",
            "b.example:*",
            "b.example:8443",
            "b.example:80",
            "http://b.example:80/img/",
            "http://a.example:80/b.example/",
            "*.example",
            "*.c.example",
            "https://*",
            "https://b.example/img/",
            "https://b.example/img/x.png",
            "b.example/img",
            "cdn.c.example/js/",
            "https://a.example/b.example/img/",
            "a.example/other/",
            "evil.example",
            "'self'",
            "'none'",
            "*",
            "https:",
            "http:",
            "data:",
            "'nonce-x'",
            "'strict-dynamic'",
        ])
    }

    fn directive_name() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "default-src",
            "img-src",
            "script-src",
            "style-src-elem",
            "font-src",
            "media-src",
            "connect-src",
            "frame-src",
            "x-unknown",
        ])
    }

    fn policy() -> impl Strategy<Value = String> {
        let directive = (directive_name(), prop::collection::vec(token(), 0..5))
            .prop_map(|(name, tokens)| format!("{name} {}", tokens.join(" ")));
        let one = prop::collection::vec(directive, 1..5).prop_map(|d| d.join("; "));
        prop::collection::vec(one, 1..3).prop_map(|p| p.join(", "))
    }

    /// Paths a browser may ask the document's origin for, folded and not,
    /// and URLs elsewhere.
    const PROBES: &[&str] = &[
        "/b.example/x.png",
        "/b.example/img/x.png",
        "/b.example/img",
        "/b.example/img/",
        "/b.example/imgx",
        "/b.example/",
        "/b.example",
        "/cdn.c.example/js/app.js",
        "/cdn.c.example/x.js",
        "/_mewa/b.example/img/x.png",
        "/_mewa/b.example/x.png",
        "/_mewa/cdn.c.example/js/a.js",
        "/_mewa/x.png",
        "/other/x.png",
        "/x.png",
        "/evil.example/x.png",
        "/b.example.evil/x.png",
        "/B.example/x.png",
        "/%62.example/x.png",
        "/b.example/%69mg/x.png",
    ];

    /// The policies the test compares, directive by directive, for each
    /// folded directive as the browser reads it.
    fn lists(text: &str) -> Vec<(String, Vec<&str>)> {
        directives(text, Delivery::Header)
            .into_iter()
            .filter(|d| d.first && FOLDED_DIRECTIVES.contains(&d.name.as_str()))
            .map(|d| (d.name, d.value))
            .collect()
    }

    proptest! {
        /// Never wider than the folded form of what was allowed: whatever
        /// the adjusted policy allows that the original did not is a path
        /// on the document's origin that is either folded, with a target
        /// the original allowed, or refused by `unfold`.
        #[test]
        fn never_widens(
            p in policy(),
            doc in prop::sample::select(vec![HTTPS, HTTP, "https://a.example:8443/", "http://www.a.example/x"]),
            prefix in prop::sample::select(vec!["", "/_mewa"]),
        ) {
            let s = site(prefix);
            let doc = url(doc);
            let out = adjust(&p, &s, &doc).unwrap();
            let before = lists(&p);
            let after = lists(&out.value);
            prop_assert_eq!(before.len(), after.len());
            let mut targets = Vec::new();
            for scheme in ["http", "https"] {
                let mut origin = doc.clone();
                origin.set_scheme(scheme).unwrap();
                origin.set_port(doc.port()).unwrap();
                for path in PROBES {
                    targets.push(origin.join(path).unwrap());
                }
            }
            for other in ["https://b.example/img/x.png", "http://b.example/x", "https://a.example/b.example/x", "https://evil.example/b.example/x"] {
                targets.push(url(other));
            }
            for ((name, old), (_, new)) in before.iter().zip(&after) {
                for t in &targets {
                    if !list_allows(new, t, &doc) || list_allows(old, t, &doc) {
                        continue;
                    }
                    prop_assert_eq!(t.host_str(), doc.host_str(), "{} {} widened to {}", name, p, t);
                    match unfold(&s, t.path()) {
                        // Refused: the accelerator answers with an error
                        // (`/%62.example/x` matches `/b.example/` once the
                        // browser percent-decodes it).
                        Err(_) => {}
                        Ok(None) => prop_assert!(false, "{} {}: {} is a site path", name, p, t),
                        Ok(Some(f)) => {
                            // Unfolded on the scheme the request came in on.
                            let original = url(&f.url(Scheme::of(t).unwrap()));
                            prop_assert!(list_allows(old, &original, &doc), "{} {}: {} from {}", name, p, t, original);
                        }
                    }
                }
            }
            // And adjusting twice adds nothing more.
            let again = adjust(&out.value, &s, &doc).unwrap();
            prop_assert_eq!(again.added, 0);
            prop_assert_eq!(&again.value, &out.value);
        }

        /// Any string: no panic; an adjusted value keeps every policy,
        /// directive and source expression, in order, adding only after
        /// them.
        #[test]
        fn keeps_every_source(p in prop_oneof![
            any::<String>(),
            "[a-z:/*'.; ,\t-]{0,80}",
            "[bB.example:/* ;,'a-z0-9%-]{0,80}",
        ], prefix in prop::sample::select(vec!["", "/_mewa"])) {
            let s = site(prefix);
            for (f, delivery) in [(adjust as fn(&str, &Site, &Url) -> Result<CspAdjusted, CspError>, Delivery::Header), (adjust_meta, Delivery::Meta)] {
                let Ok(out) = f(&p, &s, &url(HTTPS)) else { continue };
                let before = directives(&p, delivery);
                let after = directives(&out.value, delivery);
                prop_assert_eq!(before.len(), after.len());
                prop_assert_eq!(p.split(',').count(), out.value.split(',').count());
                let mut extra = 0;
                for (b, a) in before.iter().zip(&after) {
                    prop_assert_eq!(&b.name, &a.name);
                    prop_assert_eq!(&a.value[..b.value.len()], &b.value[..]);
                    extra += a.value.len() - b.value.len();
                }
                prop_assert_eq!(extra, out.added as usize);
            }
        }
    }
}
