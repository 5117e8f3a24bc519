//! `103 Early Hints` (RFC 8297) for a page's document, as a CDN sends them
//! from what it has seen of the page: `Link` fields that let the browser
//! open connections to the page's other hosts and fetch its render-blocking
//! objects while the origin still thinks about the document.
//!
//! - [`early_hints`]: the pure part, a [`Page`] → the document's
//!   [`EarlyHints`] (which links, in which order, within which caps).
//! - [`EarlyHintsTable`]: the hints of every document of a corpus, by host
//!   and path, with a shared on/off switch, for
//!   [`crate::OriginConfig::early_hints`].
//!
//! Where the origin sends them:
//!
//! - **HTTP/2** (TLS and h2c, our own server, [`crate::h2`]): yes, for a
//!   `GET` of a hinted document while the switch is on: one HEADERS frame
//!   with `:status: 103` and the `link` fields (no END_STREAM), at once when
//!   the request is decoded, before the think time; then the response as
//!   usual. A client that announced a `SETTINGS_MAX_HEADER_LIST_SIZE` below
//!   the 103's size gets no 103 (it is optional; a refused one could cost
//!   the response).
//! - **HTTP/1.1** (hyper): no. hyper 1 has no server API for a 1xx
//!   response, and Chromium ignores 103 over HTTP/1.1 anyway.
//! - **HTTP/3** (h3 0.0.8): no. The h3 server would write a second HEADERS
//!   frame, but h3's client, which mewa's loader uses, takes the first
//!   HEADERS of a stream as the final response: a 103 would become the
//!   loader's answer. Chromium would act on one; sending it waits for a
//!   loader that skips interim responses.
//!
//! Chromium acts only on the first 103 of a top-level navigation, over
//! HTTP/2 or HTTP/3, and only on `preload` and `preconnect`
//! (docs/early-hints.md in Chromium's tree); one 103 per document is sent.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::header::LINK;
use http::{HeaderMap, HeaderValue, Method, Request};
use mewa_corpus::page::carries_references;
use mewa_corpus::{Corpus, Discovery, Kind, Object, Page, Scheme};

use crate::store::normalize_host;

/// Most `rel=preload` links in one 103. The render-blocking set of a page
/// (its head's style sheets and scripts, its fonts) is rarely above a few
/// dozen; past it preloads take the first round trips' bandwidth from the
/// document and from what the browser finds first, which the preload spec
/// warns against. With URLs of ~120 bytes, 30 preloads are ~4 KB of field
/// values: one HEADERS frame, far below a 16 KiB frame.
pub const MAX_PRELOADS: usize = 30;

/// Most `rel=preconnect` links in one 103 (a host whose objects are fetched
/// both with and without credentials counts twice). Each costs the client
/// a DNS lookup and a TLS handshake; pages with more hosts than this have a
/// long tail of third parties that a preconnect does not pay for.
pub const MAX_PRECONNECTS: usize = 20;

/// Most bytes of `link` values in one 103, counted with `https` (the
/// longer scheme). Corpus paths may be 2000 characters long, so the counts
/// alone do not bound the head: 8 KiB keeps it inside the header buffers
/// HTTP/1.1 intermediaries commonly allot to a response head (nginx's
/// `proxy_buffer_size`, Apache's 8190-byte field limit), should a proxy
/// ever pass the table's hints on, and in one HTTP/2 frame. Links that do
/// not fit are dropped, later ones may still fit.
pub const MAX_LINK_BYTES: usize = 8 * 1024;

/// What a preload fetches, its `as` (the request destination, which the
/// later fetch must match for the preload to be used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Destination {
    /// `as=style`: a style sheet.
    Style,
    /// `as=script`: a classic script.
    Script,
    /// `as=font`: a web font, always fetched in CORS mode.
    Font,
}

impl Destination {
    /// The `as` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Destination::Style => "style",
            Destination::Script => "script",
            Destination::Font => "font",
        }
    }
}

/// One `Link` field value of a 103.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Link {
    /// `<scheme://host>; rel=preconnect[; crossorigin]`.
    Preconnect {
        /// The host to connect to.
        host: String,
        /// For fetches without credentials (CORS `anonymous`: fonts,
        /// `crossorigin` preloads). Browsers keep those on connections of
        /// their own, so a preconnect is used only by fetches of the same
        /// credentials mode (MDN, 103 Early Hints: "CORS-protected
        /// resources must be fetched over a completely separate
        /// connection").
        crossorigin: bool,
    },
    /// `<scheme://host/path>; rel=preload; as=…[; crossorigin]`.
    Preload {
        /// The object's host.
        host: String,
        /// The object's path (and query).
        path: String,
        /// Its destination.
        dest: Destination,
    },
}

impl Link {
    /// The field value with URLs of `scheme`. A font preload carries
    /// `crossorigin` (anonymous), as the preload spec asks: fonts are
    /// fetched in CORS mode, and a preload of another mode is not matched
    /// (the font would be fetched twice). Style sheets and scripts are
    /// referenced without `crossorigin` in the corpus bodies
    /// (`mewa_corpus::body`), so their preloads have none either.
    pub fn value(&self, scheme: Scheme) -> String {
        let s = scheme.as_str();
        match self {
            Link::Preconnect { host, crossorigin } => {
                let co = if *crossorigin { "; crossorigin" } else { "" };
                format!("<{s}://{host}>; rel=preconnect{co}")
            }
            Link::Preload { host, path, dest } => {
                let co = if *dest == Destination::Font {
                    "; crossorigin"
                } else {
                    ""
                };
                format!(
                    "<{s}://{host}{path}>; rel=preload; as={}{co}",
                    dest.as_str()
                )
            }
        }
    }
}

/// The 103 of one document ([`early_hints`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EarlyHints {
    /// The document's host (empty for a page without one).
    pub host: String,
    /// The document's path (and query).
    pub path: String,
    /// The links in the order they are sent: preconnects, then preloads.
    pub links: Vec<Link>,
}

impl EarlyHints {
    /// Whether there is nothing to hint (then no 103 is sent).
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The `link` field values with URLs of `scheme`, in order.
    pub fn values(&self, scheme: Scheme) -> Vec<String> {
        self.links.iter().map(|l| l.value(scheme)).collect()
    }

    /// The 103's fields: one `link` field per link (values a header cannot
    /// hold, from an unvalidated page, are left out).
    pub fn header_map(&self, scheme: Scheme) -> HeaderMap {
        let mut h = HeaderMap::with_capacity(self.links.len());
        for v in self.values(scheme) {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.append(LINK, v);
            }
        }
        h
    }
}

/// The early hints a CDN would send for `page`'s document, from the page as
/// recorded:
///
/// - **preconnect** to each of the page's hosts other than the document's
///   (which the browser is already connected to), in order of their first
///   object: a plain one if the host serves anything fetched with
///   credentials, one with `crossorigin` if it serves anything fetched
///   without (fonts and the document's `crossorigin` preloads, see
///   `mewa_corpus::body`); both if both.
/// - **preload** of the render-blocking objects: the style sheets and
///   scripts the document references in its markup (parent = the document,
///   discovery `html`), and the fonts fetched as fonts by the document
///   (`html` or `css` discovery, the document being the nearest HTML
///   ancestor: an iframe's fonts would not use the document's preloads, and
///   a script's `fetch()` of a font is a no-cors fetch a font preload does
///   not match). Images are not preloaded. Objects the origin answers with
///   an error or no body (4xx, 5xx, 204, 205) are left out: a preload of
///   them only costs.
///
/// "The document" is [`Page::document`]: the root, or the end of the
/// root's redirect chain, which is the response a browser parses (the
/// hosts of the redirects before it are not preconnected). Order is the
/// page's object order (a recording's fetch order), capped at
/// [`MAX_PRECONNECTS`], [`MAX_PRELOADS`] and [`MAX_LINK_BYTES`]. Pure.
pub fn early_hints(page: &Page) -> EarlyHints {
    let Some(doc) = page.document() else {
        return EarlyHints::default();
    };
    // The redirects that lead to the document: not part of what it loads.
    let mut chain: HashSet<u32> = HashSet::new();
    if let Some(root) = page.root() {
        let mut cur = root;
        while cur.id != doc.id && chain.insert(cur.id) {
            match page.children(cur.id, Discovery::Redirect).next() {
                Some(next) => cur = next,
                None => break,
            }
        }
    }
    let mut budget = Budget::default();
    let mut links = Vec::new();
    // Preconnects: host order of first appearance, plain before crossorigin
    // within a host.
    let mut wants: Vec<(&str, bool, bool)> = Vec::new();
    for o in page.objects.iter().filter(|o| !chain.contains(&o.id)) {
        if o.id == doc.id || o.host == doc.host {
            continue;
        }
        let anonymous = fetched_anonymously(o);
        match wants.iter_mut().find(|w| w.0 == o.host) {
            Some(w) => {
                w.1 |= !anonymous;
                w.2 |= anonymous;
            }
            None => wants.push((o.host.as_str(), !anonymous, anonymous)),
        }
    }
    let mut preconnects = 0;
    for (host, plain, anonymous) in wants {
        for crossorigin in [false, true] {
            if (crossorigin && !anonymous) || (!crossorigin && !plain) {
                continue;
            }
            if preconnects == MAX_PRECONNECTS {
                break;
            }
            let l = Link::Preconnect {
                host: host.to_string(),
                crossorigin,
            };
            if budget.take(&l) {
                links.push(l);
                preconnects += 1;
            }
        }
    }
    let mut preloads = 0;
    for o in &page.objects {
        if preloads == MAX_PRELOADS {
            break;
        }
        let Some(dest) = preload_destination(page, doc, o) else {
            continue;
        };
        let l = Link::Preload {
            host: o.host.clone(),
            path: o.path.clone(),
            dest,
        };
        if budget.take(&l) {
            links.push(l);
            preloads += 1;
        }
    }
    EarlyHints {
        host: doc.host.clone(),
        path: doc.path.clone(),
        links,
    }
}

/// Bytes of link values left ([`MAX_LINK_BYTES`]).
struct Budget(usize);

impl Default for Budget {
    fn default() -> Self {
        Budget(MAX_LINK_BYTES)
    }
}

impl Budget {
    /// Takes `l`'s size (with `https`, the longer scheme) if it fits.
    fn take(&mut self, l: &Link) -> bool {
        let n = l.value(Scheme::Https).len();
        if n > self.0 {
            return false;
        }
        self.0 -= n;
        true
    }
}

/// Whether the corpus bodies fetch `o` in CORS mode without credentials
/// for a cross-origin host (`mewa_corpus::body`: `@font-face`, `<link
/// rel=preload as=font crossorigin>`, `<link rel=preload as=fetch
/// crossorigin>`); everything else (`<img>`, `<script>`, style sheets,
/// iframes, a script's `fetch(…, {mode:"no-cors"})`) goes with
/// credentials.
fn fetched_anonymously(o: &Object) -> bool {
    matches!(
        (o.kind(), o.discovery),
        (Kind::Font, Discovery::Html | Discovery::Css) | (Kind::Other, Discovery::Html)
    )
}

/// What `o` is preloaded as, if it is among the document's render-blocking
/// objects ([`early_hints`]).
fn preload_destination(page: &Page, doc: &Object, o: &Object) -> Option<Destination> {
    if o.id == doc.id || !(carries_references(o.status()) || (300..400).contains(&o.status())) {
        return None;
    }
    let direct = o.parent == Some(doc.id) && o.discovery == Discovery::Html;
    match o.kind() {
        Kind::Css if direct => Some(Destination::Style),
        Kind::Script if direct => Some(Destination::Script),
        Kind::Font
            if matches!(o.discovery, Discovery::Html | Discovery::Css)
                && owner_document(page, o) == Some(doc.id) =>
        {
            Some(Destination::Font)
        }
        _ => None,
    }
}

/// The nearest HTML ancestor of `o`: the document (or frame) whose fetches
/// it is one of. Bounded by the page's size (a cycle, in an unvalidated
/// page, gives `None`).
fn owner_document(page: &Page, o: &Object) -> Option<u32> {
    let mut cur = o;
    for _ in 0..page.objects.len() {
        let p = page.object(cur.parent?)?;
        if p.kind() == Kind::Html {
            return Some(p.id);
        }
        cur = p;
    }
    None
}

/// The early hints of every document of a corpus, by host and path, and a
/// switch shared by every clone: a lab keeps a clone (or
/// [`EarlyHintsTable::switch`]) and turns hints on and off between page
/// loads while the origin runs. Off when built.
///
/// Lookups follow the store's rules ([`crate::Store`]): a URL claimed by
/// two pages belongs to the first, and a query the corpus does not have is
/// tried without it.
#[derive(Debug, Clone, Default)]
pub struct EarlyHintsTable {
    /// Host (normalized) → path → the document's hints, with their fields
    /// for `http` and `https` made once.
    docs: Arc<HashMap<String, HashMap<String, Hinted>>>,
    on: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Hinted {
    hints: EarlyHints,
    http: HeaderMap,
    https: HeaderMap,
}

impl EarlyHintsTable {
    /// [`early_hints`] for every page of `corpus`; pages with nothing to
    /// hint are left out.
    pub fn from_corpus(corpus: &Corpus) -> EarlyHintsTable {
        // The store's first-wins order over every object: a document whose
        // URL an earlier page already serves is not this page's to hint.
        let mut claimed: HashSet<(String, &str)> = HashSet::new();
        let mut docs = Vec::new();
        for page in &corpus.pages {
            let doc = page.document().map(|d| d.id);
            for o in &page.objects {
                if claimed.insert((normalize_host(&o.host), o.path.as_str())) && Some(o.id) == doc {
                    docs.push(early_hints(page));
                }
            }
        }
        EarlyHintsTable::from_hints(docs)
    }

    /// A table of the given hints (the first of two for one URL is kept;
    /// empty ones are left out). Off.
    pub fn from_hints(hints: impl IntoIterator<Item = EarlyHints>) -> EarlyHintsTable {
        let mut docs: HashMap<String, HashMap<String, Hinted>> = HashMap::new();
        for h in hints {
            if h.is_empty() {
                continue;
            }
            let paths = docs.entry(normalize_host(&h.host)).or_default();
            if paths.contains_key(&h.path) {
                continue;
            }
            paths.insert(
                h.path.clone(),
                Hinted {
                    http: h.header_map(Scheme::Http),
                    https: h.header_map(Scheme::Https),
                    hints: h,
                },
            );
        }
        EarlyHintsTable {
            docs: Arc::new(docs),
            on: Arc::default(),
        }
    }

    /// Turns hints on or off for every request that arrives from now on,
    /// on every clone of this table.
    pub fn set_enabled(&self, on: bool) {
        // Nothing else is published through the flag: relaxed is enough.
        self.on.store(on, Ordering::Relaxed);
    }

    /// Whether hints are on.
    pub fn is_enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The switch itself, for a caller that keeps flags of its own.
    pub fn switch(&self) -> Arc<AtomicBool> {
        self.on.clone()
    }

    /// Documents with hints.
    pub fn len(&self) -> usize {
        self.docs.values().map(HashMap::len).sum()
    }

    /// Whether no document has hints.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hints of the document at `host` + `path` (whether on or off).
    pub fn get(&self, host: &str, path: &str) -> Option<&EarlyHints> {
        self.lookup(&normalize_host(host), path).map(|h| &h.hints)
    }

    /// The 103's fields for `req`, with URLs of `scheme` (the listener's,
    /// as in the bodies): `Some` only while on, for a `GET` of a hinted
    /// document. A `HEAD` gets none: nothing will be parsed.
    pub fn for_request<B>(&self, req: &Request<B>, scheme: Scheme) -> Option<HeaderMap> {
        if !self.is_enabled() || req.method() != Method::GET {
            return None;
        }
        let host = crate::respond::request_host(req)?;
        let path = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
        let h = self.lookup(&host, path)?;
        Some(match scheme {
            Scheme::Http => h.http.clone(),
            Scheme::Https => h.https.clone(),
        })
    }

    fn lookup(&self, host: &str, path: &str) -> Option<&Hinted> {
        let paths = self.docs.get(host)?;
        paths
            .get(path)
            .or_else(|| paths.get(path.split_once('?')?.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::{generate, Preset};

    fn obj(id: u32, host: &str, path: &str, ct: &str, parent: Option<u32>, d: Discovery) -> Object {
        Object {
            id,
            host: host.into(),
            path: path.into(),
            size: 100,
            content_type: ct.into(),
            parent,
            discovery: d,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    const DOC: &str = "www.a.example";
    const CDN: &str = "cdn.b.example";
    const FONTS: &str = "fonts.c.example";
    const IMG: &str = "img.d.example";

    /// A document with a style sheet and a script of its own host, a
    /// script and a style sheet on a CDN, a font from a style sheet on a
    /// font host, images, a script-discovered script, an iframe with a
    /// style sheet and font of its own, and a 404 style sheet.
    fn page() -> Page {
        use Discovery::*;
        let objects = vec![
            obj(0, DOC, "/", "text/html", None, Html),
            obj(1, DOC, "/a.css", "text/css", Some(0), Html),
            obj(2, CDN, "/lib.js", "application/javascript", Some(0), Html),
            obj(3, IMG, "/hero.jpg", "image/jpeg", Some(0), Html),
            obj(4, CDN, "/b.css", "text/css", Some(0), Html),
            obj(5, FONTS, "/f.woff2", "font/woff2", Some(4), Css),
            obj(6, IMG, "/bg.png", "image/png", Some(1), Css),
            obj(7, CDN, "/late.js", "text/javascript", Some(2), Script),
            obj(8, DOC, "/app.js", "text/javascript", Some(0), Html),
            obj(9, IMG, "/frame.html", "text/html", Some(0), Html),
            obj(10, IMG, "/frame.css", "text/css", Some(9), Html),
            obj(11, IMG, "/frame.woff2", "font/woff2", Some(10), Css),
            Object {
                status: Some(404),
                ..obj(12, DOC, "/gone.css", "text/css", Some(0), Html)
            },
            obj(13, CDN, "/s.woff", "font/woff", Some(2), Script),
        ];
        let p = Page {
            name: "p".into(),
            main: format!("https://{DOC}/"),
            objects,
            shared_connections: Vec::new(),
        };
        p.validate().expect("a valid page");
        p
    }

    fn preloads(h: &EarlyHints) -> Vec<(&str, &str, Destination)> {
        h.links
            .iter()
            .filter_map(|l| match l {
                Link::Preload { host, path, dest } => Some((host.as_str(), path.as_str(), *dest)),
                Link::Preconnect { .. } => None,
            })
            .collect()
    }

    fn preconnects(h: &EarlyHints) -> Vec<(&str, bool)> {
        h.links
            .iter()
            .filter_map(|l| match l {
                Link::Preconnect { host, crossorigin } => Some((host.as_str(), *crossorigin)),
                Link::Preload { .. } => None,
            })
            .collect()
    }

    #[test]
    fn preconnects_the_other_hosts_in_order_with_crossorigin_for_fonts() {
        let h = early_hints(&page());
        assert_eq!((h.host.as_str(), h.path.as_str()), (DOC, "/"));
        // CDN: scripts (credentials) and a script's no-cors font fetch;
        // images host: images and the iframe's CSS font; fonts host: a CSS
        // font only; the document's host: never.
        assert_eq!(
            preconnects(&h),
            vec![(CDN, false), (IMG, false), (IMG, true), (FONTS, true)]
        );
    }

    #[test]
    fn preloads_the_documents_css_and_js_and_its_fonts_not_images() {
        let h = early_hints(&page());
        use Destination::*;
        assert_eq!(
            preloads(&h),
            vec![
                (DOC, "/a.css", Style),
                (CDN, "/lib.js", Script),
                (CDN, "/b.css", Style),
                (FONTS, "/f.woff2", Font),
                (DOC, "/app.js", Script),
            ]
        );
        // Preconnects come first: connections take the longest.
        let first_preload = h
            .links
            .iter()
            .position(|l| matches!(l, Link::Preload { .. }));
        assert_eq!(first_preload, Some(4));
    }

    #[test]
    fn values_use_the_scheme_asked_for() {
        let h = early_hints(&page());
        let v = h.values(Scheme::Https);
        assert_eq!(v[0], format!("<https://{CDN}>; rel=preconnect"));
        assert_eq!(
            v[3],
            format!("<https://{FONTS}>; rel=preconnect; crossorigin")
        );
        assert!(v.contains(&format!("<https://{DOC}/a.css>; rel=preload; as=style")));
        assert!(v.contains(&format!("<https://{CDN}/lib.js>; rel=preload; as=script")));
        assert!(v.contains(&format!(
            "<https://{FONTS}/f.woff2>; rel=preload; as=font; crossorigin"
        )));
        let plain = h.values(Scheme::Http);
        assert_eq!(plain[0], format!("<http://{CDN}>; rel=preconnect"));
        let map = h.header_map(Scheme::Https);
        assert_eq!(map.get_all(LINK).iter().count(), h.links.len());
    }

    #[test]
    fn the_document_after_a_redirect_is_hinted_and_the_redirect_host_is_not() {
        use Discovery::*;
        let mut p = page();
        // http://a.example/ → https://www.a.example/ (object 0 becomes the target).
        for o in &mut p.objects {
            o.id += 100;
            o.parent = o.parent.map(|x| x + 100);
        }
        p.objects[0].parent = Some(99);
        p.objects[0].discovery = Redirect;
        p.objects.insert(
            0,
            Object {
                status: Some(301),
                ..obj(99, "a.example", "/", "text/html", None, Html)
            },
        );
        p.main = "http://a.example/".into();
        p.validate().expect("a valid page");
        let h = early_hints(&p);
        assert_eq!((h.host.as_str(), h.path.as_str()), (DOC, "/"));
        assert!(preconnects(&h).iter().all(|(host, _)| *host != "a.example"));
        assert_eq!(preloads(&h).len(), 5);
    }

    #[test]
    fn caps_keep_the_first_links() {
        use Discovery::*;
        let mut objects = vec![obj(0, DOC, "/", "text/html", None, Html)];
        for i in 1..=60u32 {
            objects.push(obj(
                i,
                &format!("h{i}.example"),
                &format!("/s{i}.js"),
                "text/javascript",
                Some(0),
                Html,
            ));
        }
        let p = Page {
            name: "many".into(),
            main: format!("http://{DOC}/"),
            objects,
            shared_connections: Vec::new(),
        };
        p.validate().expect("a valid page");
        let h = early_hints(&p);
        let pc = preconnects(&h);
        assert_eq!(pc.len(), MAX_PRECONNECTS);
        assert_eq!(pc[0].0, "h1.example");
        assert_eq!(pc[MAX_PRECONNECTS - 1].0, "h20.example");
        let pl = preloads(&h);
        assert_eq!(pl.len(), MAX_PRELOADS);
        assert_eq!(pl[0].1, "/s1.js");
        assert_eq!(pl[MAX_PRELOADS - 1].1, "/s30.js");
    }

    #[test]
    fn long_urls_are_held_to_the_byte_budget() {
        use Discovery::*;
        let mut objects = vec![obj(0, DOC, "/", "text/html", None, Html)];
        for i in 1..=10u32 {
            let path = format!("/{i}/{}", "x".repeat(1900));
            objects.push(obj(i, DOC, &path, "text/css", Some(0), Html));
        }
        let p = Page {
            name: "long".into(),
            main: format!("http://{DOC}/"),
            objects,
            shared_connections: Vec::new(),
        };
        p.validate().expect("a valid page");
        let h = early_hints(&p);
        let bytes: usize = h.values(Scheme::Https).iter().map(String::len).sum();
        assert!(bytes <= MAX_LINK_BYTES, "{bytes}");
        assert_eq!(preloads(&h).len(), MAX_LINK_BYTES / 1950);
        assert_eq!(preloads(&h)[0].1, p.objects[1].path);
    }

    #[test]
    fn a_page_without_document_has_no_hints() {
        let mut p = page();
        p.objects.retain(|o| o.parent.is_some());
        assert!(early_hints(&p).is_empty());
    }

    fn get(host: &str, path: &str) -> Request<()> {
        Request::get(format!("https://{host}{path}"))
            .body(())
            .expect("a request")
    }

    #[test]
    fn table_answers_only_while_on_and_only_gets_of_documents() {
        let corpus = generate(Preset::Accel7, 1);
        let t = EarlyHintsTable::from_corpus(&corpus);
        assert!(!t.is_empty());
        let doc = corpus.pages[0].document().expect("a document");
        let req = get(&doc.host, &doc.path);
        assert!(
            t.for_request(&req, Scheme::Https).is_none(),
            "off when built"
        );
        let lab = t.clone();
        lab.set_enabled(true);
        let fields = t.for_request(&req, Scheme::Https).expect("on");
        let want = early_hints(&corpus.pages[0]).values(Scheme::Https);
        let got: Vec<&str> = fields
            .get_all(LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(got, want);
        // A cache-busting query still finds the document; HEAD and other
        // objects get nothing.
        let q = get(&doc.host, &format!("{}?v=2", doc.path));
        assert!(t.for_request(&q, Scheme::Https).is_some());
        let head = Request::head(format!("https://{}{}", doc.host, doc.path))
            .body(())
            .expect("a request");
        assert!(t.for_request(&head, Scheme::Https).is_none());
        let other = corpus.pages[0]
            .objects
            .iter()
            .find(|o| o.id != doc.id)
            .expect("more than the document");
        assert!(t
            .for_request(&get(&other.host, &other.path), Scheme::Https)
            .is_none());
        t.switch().store(false, Ordering::Relaxed);
        assert!(!lab.is_enabled());
        assert!(t.for_request(&req, Scheme::Https).is_none());
    }
}
