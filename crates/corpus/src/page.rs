//! The page model on disk: a [`Corpus`] of [`Page`]s, each a tree of
//! [`Object`]s, and its validation.
//!
//! The model keeps exactly what a loader needs to fetch a page the way a
//! browser does: where each object lives (host, path),
//! how big its body is, what it is (content type), who references it (parent)
//! and how the browser finds the reference (discovery), plus the computation a
//! script costs before what it discovers can be fetched (seed 001 §1:
//! computation latency "blocks the network transmission").

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Largest object body the model accepts: 100 MB. Far above any real web
/// object, low enough that a typo (an extra digit or three) is caught before an
/// origin server tries to allocate it.
pub const MAX_OBJECT_SIZE: u64 = 100_000_000;

/// Largest per-script computation time: 10 minutes. Longer than any page load
/// an experiment waits for.
pub const MAX_COMPUTE_MS: u32 = 600_000;

/// Largest server think time of one response: 60 s. A recorded wait longer
/// than that is a stalled server, not a trait of the page worth replaying.
pub const MAX_THINK_MS: u32 = 60_000;

/// How the browser learns that it needs an object, i.e. which kind of parent
/// references it and when the reference becomes visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Discovery {
    /// Referenced by the parent HTML document's markup (found by the HTML
    /// parser). The root document has this discovery and no parent.
    Html,
    /// Referenced by the parent CSS file (`url(...)` or `@import`).
    Css,
    /// Fetched by the parent script after it has run for its `compute_ms`.
    Script,
    /// The target of the parent's redirect: the parent's response is a 3xx
    /// whose `Location` is this object's URL (recorded pages).
    Redirect,
}

/// What an object is, derived from its content type. Decides which parents may
/// reference it and how its body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `text/html`, `application/xhtml+xml`.
    Html,
    /// `text/css`.
    Css,
    /// Any JavaScript MIME type.
    Script,
    /// `image/*`.
    Image,
    /// `font/*` and the legacy `application/font-*`, `application/x-font-*`.
    Font,
    /// Anything else (JSON, media, …).
    Other,
}

impl Kind {
    /// Kind of a MIME type (parameters and case ignored).
    pub fn of(content_type: &str) -> Kind {
        let ct = mewa_hint::page::mime_essence(content_type);
        match ct.as_str() {
            "text/html" | "application/xhtml+xml" => Kind::Html,
            "text/css" => Kind::Css,
            "text/javascript"
            | "application/javascript"
            | "application/x-javascript"
            | "application/ecmascript"
            | "text/ecmascript" => Kind::Script,
            _ if ct.starts_with("image/") => Kind::Image,
            _ if ct.starts_with("font/")
                || ct.starts_with("application/font-")
                || ct.starts_with("application/x-font-") =>
            {
                Kind::Font
            }
            _ => Kind::Other,
        }
    }

    /// Whether an object of this kind can reference a child of kind `child`
    /// with discovery `how`: HTML references anything, CSS references images,
    /// fonts and other CSS, scripts reference anything.
    pub fn can_reference(self, how: Discovery, child: Kind) -> bool {
        match how {
            Discovery::Html => self == Kind::Html,
            Discovery::Css => {
                self == Kind::Css && matches!(child, Kind::Image | Kind::Font | Kind::Css)
            }
            Discovery::Script => self == Kind::Script,
            // Any response can redirect; the parent's status is checked by
            // `Page::validate`.
            Discovery::Redirect => true,
        }
    }
}

/// One object of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// Identifier, unique within the page.
    pub id: u32,
    /// Host name serving the object (a DNS name, lower case).
    pub host: String,
    /// Path (and query), starting with `/`.
    pub path: String,
    /// Bytes of the response body.
    pub size: u64,
    /// MIME type of the body, e.g. `image/png`.
    pub content_type: String,
    /// Id of the object that references this one; `None` only for the root
    /// document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// How the parent references this object.
    pub discovery: Discovery,
    /// For scripts: computation time, in ms, the script costs before what it
    /// discovers can be fetched. 0 (and omitted on disk) otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compute_ms: u32,
    /// HTTP status the origin answers with; absent = 200. Recorded pages
    /// keep their redirects (3xx, with the object's `redirect` child as
    /// `Location`), 204s and 404s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Server think time, ms: how long the origin waits before answering
    /// (recorded pages: the recorded wait minus the connection's round
    /// trip). 0 and omitted otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub think_ms: u32,
    /// The size the recording gave, when the served `size` differs from it
    /// (a body grown to carry its references; see `convert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_size: Option<u64>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// Adds a group of hosts to `groups`, merging every group it overlaps:
/// coalescing is transitive for a browser (one address, one certificate).
pub(crate) fn join_group<'a>(groups: &mut Vec<BTreeSet<&'a str>>, mut merged: BTreeSet<&'a str>) {
    groups.retain(|g| {
        if g.is_disjoint(&merged) {
            true
        } else {
            merged.extend(g.iter().copied());
            false
        }
    });
    groups.push(merged);
}

/// Groups as owned, sorted lists (hosts within a group, groups by first
/// host): deterministic output for files and addresses.
pub(crate) fn sorted_groups(groups: Vec<BTreeSet<&str>>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = groups
        .into_iter()
        .map(|g| g.into_iter().map(str::to_string).collect())
        .collect();
    out.sort();
    out
}

/// Whether a status is a redirect that carries a `Location`.
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Whether a browser reads references from a response with this status:
/// only from a successful one with a body (not from a redirect, a 204 or an
/// error page's script or style sheet).
pub fn carries_references(status: u16) -> bool {
    (200..300).contains(&status) && !matches!(status, 204 | 205)
}

impl Object {
    /// The object's kind (from its content type).
    pub fn kind(&self) -> Kind {
        Kind::of(&self.content_type)
    }

    /// Absolute URL with the given scheme (`http` or `https`).
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}{}", self.host, self.path)
    }

    /// The status the origin answers with (200 unless recorded otherwise).
    pub fn status(&self) -> u16 {
        self.status.unwrap_or(200)
    }
}

/// A page: its name, the URL a user navigates to, and every object it loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Short unique name within the corpus, e.g. `meh15-03`.
    pub name: String,
    /// URL of the root document, `http://host/path` (the loader may switch
    /// the scheme; host and path must be the root object's).
    pub main: String,
    /// The objects, root document included, in any order.
    pub objects: Vec<Object>,
    /// Groups of hosts that one connection served in the recording (the
    /// recording browser coalesced them): the lab serves each group at one
    /// address with one certificate, every other host at its own, so a
    /// browser coalesces exactly what it could on the real page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_connections: Vec<Vec<String>>,
}

impl Page {
    /// The object with this id.
    pub fn object(&self, id: u32) -> Option<&Object> {
        self.objects.iter().find(|o| o.id == id)
    }

    /// The root document: the one object without a parent.
    pub fn root(&self) -> Option<&Object> {
        self.objects.iter().find(|o| o.parent.is_none())
    }

    /// The document the browser ends up showing: the root, or the end of
    /// the root's redirect chain (a recorded `http://site/` → `https://www.site/`).
    pub fn document(&self) -> Option<&Object> {
        let mut cur = self.root()?;
        for _ in 0..self.objects.len() {
            match self.children(cur.id, Discovery::Redirect).next() {
                Some(next) => cur = next,
                None => break,
            }
        }
        Some(cur)
    }

    /// Children of `id` with the given discovery, in object order.
    pub fn children(&self, id: u32, how: Discovery) -> impl Iterator<Item = &Object> {
        self.objects
            .iter()
            .filter(move |o| o.parent == Some(id) && o.discovery == how)
    }

    /// Sum of the body sizes, bytes.
    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }

    /// Sum of the sizes the recording gave (equal to [`Page::total_bytes`]
    /// unless bodies were grown to carry their references).
    pub fn recorded_bytes(&self) -> u64 {
        self.objects
            .iter()
            .map(|o| o.recorded_size.unwrap_or(o.size))
            .sum()
    }

    /// Distinct hosts in object order.
    pub fn hosts(&self) -> Vec<&str> {
        let mut seen = HashSet::new();
        self.objects
            .iter()
            .filter(|o| seen.insert(o.host.as_str()))
            .map(|o| o.host.as_str())
            .collect()
    }

    /// Sum of `compute_ms` over all scripts.
    pub fn total_compute_ms(&self) -> u64 {
        self.objects.iter().map(|o| u64::from(o.compute_ms)).sum()
    }

    /// Number of script objects.
    pub fn scripts(&self) -> usize {
        self.objects
            .iter()
            .filter(|o| o.kind() == Kind::Script)
            .count()
    }

    /// Checks every rule of the model (see [`PageError`]); the first broken
    /// rule is reported, naming the page and the object.
    pub fn validate(&self) -> Result<(), PageError> {
        let page = self.name.clone();
        let err = |object: Option<u32>, problem: String| PageError {
            page: page.clone(),
            object,
            problem,
        };
        if self.name.trim().is_empty() {
            return Err(err(None, "page name is empty".into()));
        }
        if self.objects.is_empty() {
            return Err(err(None, "page has no objects".into()));
        }
        let mut by_id: HashMap<u32, &Object> = HashMap::new();
        let mut urls: HashSet<(&str, &str)> = HashSet::new();
        for o in &self.objects {
            if by_id.insert(o.id, o).is_some() {
                return Err(err(Some(o.id), "duplicate object id".into()));
            }
            if let Err(why) = check_host(&o.host) {
                return Err(err(Some(o.id), format!("host `{}` {why}", o.host)));
            }
            if let Err(why) = check_path(&o.path) {
                return Err(err(Some(o.id), format!("path `{}` {why}", o.path)));
            }
            if !urls.insert((&o.host, &o.path)) {
                return Err(err(
                    Some(o.id),
                    format!("URL {} used by two objects", o.url("http")),
                ));
            }
            if o.size > MAX_OBJECT_SIZE {
                return Err(err(
                    Some(o.id),
                    format!("size {} exceeds the {MAX_OBJECT_SIZE} byte limit", o.size),
                ));
            }
            if o.content_type.trim().is_empty() {
                return Err(err(Some(o.id), "content_type is empty".into()));
            }
            if o.compute_ms > 0 && o.kind() != Kind::Script {
                return Err(err(
                    Some(o.id),
                    format!(
                        "compute_ms {} on a non-script ({})",
                        o.compute_ms, o.content_type
                    ),
                ));
            }
            if o.compute_ms > MAX_COMPUTE_MS {
                return Err(err(
                    Some(o.id),
                    format!("compute_ms {} exceeds {MAX_COMPUTE_MS}", o.compute_ms),
                ));
            }
            if o.think_ms > MAX_THINK_MS {
                return Err(err(
                    Some(o.id),
                    format!("think_ms {} exceeds {MAX_THINK_MS}", o.think_ms),
                ));
            }
            if let Some(st) = o.status {
                if !(200..=599).contains(&st) || st == 304 {
                    return Err(err(
                        Some(o.id),
                        format!("status {st} cannot be replayed (200-599, not 304)"),
                    ));
                }
                if matches!(st, 204 | 205) && o.size > 0 {
                    return Err(err(
                        Some(o.id),
                        format!("status {st} has no body but size is {}", o.size),
                    ));
                }
            }
        }
        for group in &self.shared_connections {
            for h in group {
                if !self.objects.iter().any(|o| &o.host == h) {
                    return Err(err(
                        None,
                        format!(
                            "shared_connections names `{h}`, which serves no object of the page"
                        ),
                    ));
                }
            }
        }
        let roots: Vec<&Object> = self.objects.iter().filter(|o| o.parent.is_none()).collect();
        let root = match roots.as_slice() {
            [r] => *r,
            [] => return Err(err(None, "no root document (object without parent)".into())),
            [_, second, ..] => {
                return Err(err(
                    Some(second.id),
                    "second object without parent: exactly one root document is allowed".into(),
                ))
            }
        };
        if root.discovery != Discovery::Html || root.kind() != Kind::Html {
            return Err(err(
                Some(root.id),
                "the root (object without parent) must be an HTML document with discovery `html`"
                    .into(),
            ));
        }
        if self.main != root.url("http") && self.main != root.url("https") {
            return Err(err(
                Some(root.id),
                format!(
                    "`main` is {} but the root document is {}",
                    self.main,
                    root.url("http")
                ),
            ));
        }
        for o in &self.objects {
            let Some(pid) = o.parent else { continue };
            let Some(p) = by_id.get(&pid) else {
                return Err(err(Some(o.id), format!("parent {pid} does not exist")));
            };
            // A browser follows a 3xx and reads nothing else from it.
            let redirect_parent = is_redirect(p.status());
            if (o.discovery == Discovery::Redirect) != redirect_parent {
                return Err(err(
                    Some(o.id),
                    if redirect_parent {
                        format!("parent {pid} is a redirect ({}): its only child must have discovery `redirect`", p.status())
                    } else {
                        format!(
                            "discovery `redirect` but parent {pid} answers {}, not a 3xx",
                            p.status()
                        )
                    },
                ));
            }
            if !redirect_parent && !carries_references(p.status()) {
                return Err(err(
                    Some(o.id),
                    format!("parent {pid} answers {}, whose body a browser does not read for references", p.status()),
                ));
            }
            if redirect_parent && self.children(pid, Discovery::Redirect).nth(1).is_some() {
                return Err(err(
                    Some(o.id),
                    format!("parent {pid} redirects to more than one object"),
                ));
            }
            if !p.kind().can_reference(o.discovery, o.kind()) {
                return Err(err(
                    Some(o.id),
                    format!(
                        "parent {pid} ({}) cannot reference a {} with discovery `{}`",
                        p.content_type,
                        o.content_type,
                        discovery_name(o.discovery)
                    ),
                ));
            }
        }
        // Every chain of parents must reach the root within |objects| steps;
        // otherwise it loops.
        for o in &self.objects {
            let mut cur = o;
            let mut steps = 0usize;
            while let Some(pid) = cur.parent {
                steps += 1;
                if steps > self.objects.len() {
                    return Err(err(Some(o.id), "parent chain forms a cycle".into()));
                }
                match by_id.get(&pid) {
                    Some(p) => cur = p,
                    None => break,
                }
            }
        }
        Ok(())
    }
}

fn discovery_name(d: Discovery) -> &'static str {
    match d {
        Discovery::Html => "html",
        Discovery::Css => "css",
        Discovery::Script => "script",
        Discovery::Redirect => "redirect",
    }
}

/// A DNS name: 1–253 characters, dot-separated labels of 1–63 letters, digits
/// and hyphens, not starting or ending with a hyphen.
pub fn check_host(host: &str) -> Result<(), &'static str> {
    let h = host.strip_suffix('.').unwrap_or(host);
    if h.is_empty() || h.len() > 253 {
        return Err("is not 1-253 characters long");
    }
    if h.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err("must be lower case");
    }
    for label in h.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("has a label that is empty or longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err("has characters other than letters, digits, '-' and '.'");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("has a label starting or ending with '-'");
        }
    }
    Ok(())
}

/// A path the origin can serve and a body can quote: starts with `/`, no `..`
/// segment, printable ASCII without space, quotes, `\`, `<`, `>`, `(`, `)`,
/// `#` (so it sits unescaped in HTML attributes, CSS `url("…")` and JS strings),
/// at most 2000 characters.
pub fn check_path(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("does not start with '/'");
    }
    if path.len() > 2000 {
        return Err("is longer than 2000 characters");
    }
    let before_query = path.split('?').next().unwrap_or(path);
    if before_query.split('/').any(|seg| seg == "..") {
        return Err("has a '..' segment");
    }
    if !path.bytes().all(path_byte_ok) {
        return Err("has a character outside printable ASCII or one of space \" ' \\ < > ( ) #");
    }
    Ok(())
}

/// Whether a byte may appear unescaped in a corpus path.
pub(crate) fn path_byte_ok(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\' | b'<' | b'>' | b'(' | b')' | b'#')
}

/// Where a corpus came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// Made by [`crate::generate`].
    Generated {
        /// Preset name (`meh15`, `accel7`, `complat`, `general`).
        preset: String,
        /// PRNG seed.
        seed: u64,
        /// Options that changed the preset's defaults, as given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<usize>,
        /// complat only: the single computation share used, if one was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        share: Option<f64>,
    },
    /// Imported from real recordings.
    Imported {
        /// The recording files, as given.
        sources: Vec<String>,
    },
}

/// A named list of pages and where they came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Corpus {
    /// Corpus name, e.g. `meh15`.
    pub name: String,
    /// Where the pages came from.
    pub provenance: Provenance,
    /// The pages.
    pub pages: Vec<Page>,
}

impl Corpus {
    /// The corpus's hosts grouped as a replay serves them: hosts that a
    /// recording saw on one connection ([`Page::shared_connections`], merged
    /// over pages) form one group, every other host a group of its own.
    /// Each group gets one address and one certificate, so a browser
    /// coalesces exactly the hosts its recording did. Deterministic: hosts
    /// sorted within a group, groups by their first host.
    pub fn connection_groups(&self) -> Vec<Vec<String>> {
        let mut groups = Vec::new();
        for p in &self.pages {
            for g in &p.shared_connections {
                join_group(&mut groups, g.iter().map(String::as_str).collect());
            }
            for o in &p.objects {
                join_group(&mut groups, std::iter::once(o.host.as_str()).collect());
            }
        }
        sorted_groups(groups)
    }

    /// Validates every page and checks that page names are unique.
    pub fn validate(&self) -> Result<(), PageError> {
        let mut names = HashSet::new();
        for p in &self.pages {
            p.validate()?;
            if !names.insert(p.name.as_str()) {
                return Err(PageError {
                    page: p.name.clone(),
                    object: None,
                    problem: "two pages have this name".into(),
                });
            }
        }
        Ok(())
    }

    /// Parses and validates a corpus from JSON.
    pub fn from_json(bytes: &[u8]) -> Result<Corpus, CorpusError> {
        let c: Corpus = serde_json::from_slice(bytes).map_err(|e| CorpusError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        c.validate()?;
        Ok(c)
    }

    /// Pretty JSON, newline-terminated.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain structs of strings and numbers cannot fail.
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

/// A broken model rule, naming the page and (when one is to blame) the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("page `{page}`{}: {problem}", object.map(|o| format!(", object {o}")).unwrap_or_default())]
pub struct PageError {
    /// Name of the page.
    pub page: String,
    /// Id of the object at fault, when the problem is one object's.
    pub object: Option<u32>,
    /// What is wrong, in words a user can act on.
    pub problem: String,
}

/// Why a corpus could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorpusError {
    /// Not JSON of the corpus shape (see docs/CORPUS.md).
    #[error("not a corpus file (line {line}, column {column}): {message}")]
    Json {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser found wrong.
        message: String,
    },
    /// Well-formed, but a page breaks a rule of the model.
    #[error(transparent)]
    Invalid(#[from] PageError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(id: u32, path: &str, ct: &str, parent: Option<u32>, d: Discovery) -> Object {
        Object {
            id,
            host: "www.a.example".into(),
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

    fn page() -> Page {
        Page {
            name: "p".into(),
            main: "http://www.a.example/".into(),
            objects: vec![
                obj(0, "/", "text/html", None, Discovery::Html),
                obj(1, "/a.css", "text/css", Some(0), Discovery::Html),
                obj(2, "/a.js", "text/javascript", Some(0), Discovery::Html),
                obj(3, "/i.png", "image/png", Some(1), Discovery::Css),
                obj(4, "/j.png", "image/png", Some(2), Discovery::Script),
            ],
            shared_connections: Vec::new(),
        }
    }

    #[test]
    fn valid_page_passes() {
        assert_eq!(page().validate(), Ok(()));
    }

    #[test]
    fn rules_are_enforced() {
        let bad = |f: &dyn Fn(&mut Page), want: &str| {
            let mut p = page();
            f(&mut p);
            let e = p.validate().expect_err(want);
            assert!(e.to_string().contains(want), "{e} !~ {want}");
        };
        bad(&|p| p.objects[1].id = 0, "duplicate object id");
        bad(&|p| p.objects[1].parent = None, "exactly one root");
        bad(
            &|p| p.objects[1].parent = Some(9),
            "parent 9 does not exist",
        );
        bad(&|p| p.objects[3].parent = Some(2), "cannot reference");
        bad(
            &|p| {
                p.objects[2].parent = Some(1);
                p.objects[2].discovery = Discovery::Css;
            },
            "cannot reference",
        );
        bad(&|p| p.objects[1].host = "a..b".into(), "label");
        bad(&|p| p.objects[1].host = "A.b".into(), "lower case");
        bad(&|p| p.objects[1].path = "/x/../y".into(), "'..'");
        bad(&|p| p.objects[1].path = "x".into(), "start with '/'");
        bad(&|p| p.objects[1].size = MAX_OBJECT_SIZE + 1, "limit");
        bad(&|p| p.objects[3].compute_ms = 5, "non-script");
        bad(&|p| p.main = "http://x.example/".into(), "`main`");
        bad(&|p| p.objects[4].path = "/a.js".into(), "two objects");
        bad(
            &|p| {
                // 1 and 2 reference each other: no root reaches them.
                p.objects[1].content_type = "text/javascript".into();
                p.objects[1].parent = Some(2);
                p.objects[1].discovery = Discovery::Script;
                p.objects[3].parent = Some(0);
                p.objects[3].discovery = Discovery::Html;
                p.objects[2].parent = Some(1);
                p.objects[2].discovery = Discovery::Script;
            },
            "cycle",
        );
    }

    #[test]
    fn error_names_page_and_object() {
        let mut p = page();
        p.objects[2].path = "nope".into();
        let e = p.validate().expect_err("bad path");
        assert!(e.to_string().starts_with("page `p`, object 2: path `nope`"));
    }

    #[test]
    fn kinds() {
        assert_eq!(Kind::of("text/html; charset=utf-8"), Kind::Html);
        assert_eq!(Kind::of("application/javascript"), Kind::Script);
        assert_eq!(Kind::of("image/webp"), Kind::Image);
        assert_eq!(Kind::of("font/woff2"), Kind::Font);
        assert_eq!(Kind::of("application/json"), Kind::Other);
    }
}
