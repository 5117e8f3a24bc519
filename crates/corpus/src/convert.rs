//! Conversions between corpus pages and the edge's page metadata
//! ([`mewa_hint::PageMeta`]): corpus → metadata to build hints for the pages
//! the lab serves, and imported recordings → corpus to serve real page
//! structures.

use std::collections::{BTreeSet, HashMap, HashSet};

use mewa_hint::import::ImportReport;
use mewa_hint::{Discovery as MetaDiscovery, ObjectMeta, PageMeta};
use serde::{Deserialize, Serialize};

use crate::page::{
    carries_references, check_host, is_redirect, join_group, path_byte_ok, sorted_groups, Corpus,
    Discovery, Kind, Object, Page, Provenance, MAX_COMPUTE_MS, MAX_OBJECT_SIZE, MAX_THINK_MS,
};

/// Size given to an imported object whose recording has no size: 1000 bytes.
/// A request without a recorded size is usually aborted or failed; a small body
/// keeps it in the page (a browser did request it) without inventing much
/// weight. Every such object is listed in [`Imported::placeholder_sizes`].
pub const PLACEHOLDER_SIZE: u64 = 1000;

/// The edge's metadata for a corpus page, as the hint would carry it.
///
/// Objects keep the page's order with the root first; `html` and `css`
/// discovery become [`MetaDiscovery::Parser`], `script` stays script, the
/// root is [`MetaDiscovery::Document`]. `computation_ms` is the **total** of
/// the scripts' `compute_ms` (saturating): a browser runs scripts on one main
/// thread, so their computation adds up, and this matches what the importer
/// reads from a trace (main-thread task time), so imported and generated
/// pages carry the same quantity.
pub fn to_page_meta(page: &Page) -> PageMeta {
    let mut order: Vec<&Object> = page.objects.iter().collect();
    order.sort_by_key(|o| o.parent.is_some());
    let scheme = if page.main.starts_with("https:") {
        "https"
    } else {
        "http"
    };
    let index: HashMap<u32, usize> = order.iter().enumerate().map(|(i, o)| (o.id, i)).collect();
    let objects = order
        .iter()
        .map(|o| ObjectMeta {
            url: o.url(scheme),
            host: o.host.clone(),
            size: Some(o.size),
            content_type: Some(o.content_type.clone()),
            last_modified: None,
            etag: None,
            discovery: match (o.parent, o.discovery) {
                (None, _) => MetaDiscovery::Document,
                (_, Discovery::Script) => MetaDiscovery::Script,
                (_, Discovery::Redirect) => MetaDiscovery::Other,
                _ => MetaDiscovery::Parser,
            },
            parent: o.parent.and_then(|p| index.get(&p).copied()),
            recorded: Default::default(),
        })
        .collect();
    PageMeta {
        url: page.main.clone(),
        objects,
        computation_ms: Some(u32::try_from(page.total_compute_ms()).unwrap_or(u32::MAX)),
    }
}

/// An imported object that got [`PLACEHOLDER_SIZE`] because its recording
/// gave no size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaceholderSize {
    /// Corpus page name.
    pub page: String,
    /// Object id in the corpus page.
    pub object: u32,
    /// The object's URL as recorded.
    pub url: String,
}

/// What an import produced: the corpus and everything that was changed on the
/// way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// The corpus (validated).
    pub corpus: Corpus,
    /// Objects whose size is [`PLACEHOLDER_SIZE`], not a recorded size.
    pub placeholder_sizes: Vec<PlaceholderSize>,
    /// One line per adjustment (re-parented objects, dropped duplicates,
    /// guessed content types, computation not attributed, skipped pages),
    /// followed by the importer's own notes.
    pub notes: Vec<String>,
}

/// Builds a corpus from imported recordings; `sources` names the recording
/// files for the provenance. See [`from_page_meta`] for the rules.
pub fn from_import_report(report: &ImportReport, name: &str, sources: Vec<String>) -> Imported {
    let mut pages = Vec::new();
    let mut placeholder_sizes = Vec::new();
    let mut notes = Vec::new();
    // Every URL already served by an earlier page: one origin serves the
    // whole corpus, one body per URL.
    let mut taken: HashSet<(String, String)> = HashSet::new();
    for (k, meta) in report.pages.iter().enumerate() {
        let page_name = format!("rec{:03}-{}", k + 1, short_name(&meta.url));
        match from_page_meta(meta, &page_name) {
            Ok((mut page, ph, mut n)) => {
                let label = format!("rec{:03}", k + 1);
                if page
                    .objects
                    .iter()
                    .any(|o| taken.contains(&(o.host.clone(), o.path.clone())))
                {
                    if let Err(why) = rename_hosts(&mut page, &label) {
                        notes.push(format!("{page_name}: skipped: {why}"));
                        continue;
                    }
                    n.push(format!(
                        "{page_name}: shares URLs with an earlier page (another recording of the \
                         site, or a common third party), so its hosts are served as \
                         `{label}.<host>` (each page keeps its own bodies)"
                    ));
                }
                taken.extend(
                    page.objects
                        .iter()
                        .map(|o| (o.host.clone(), o.path.clone())),
                );
                pages.push(page);
                placeholder_sizes.extend(ph);
                notes.append(&mut n);
            }
            Err(why) => notes.push(format!("{page_name}: skipped: {why}")),
        }
    }
    notes.extend(report.notes.iter().cloned());
    Imported {
        corpus: Corpus {
            name: name.to_string(),
            provenance: Provenance::Imported { sources },
            pages,
        },
        placeholder_sizes,
        notes,
    }
}

/// One recorded page as a corpus page, with the objects given a placeholder
/// size and notes on every adjustment; an error (in words) when nothing
/// servable is left.
///
/// Rules (docs/CORPUS.md): the first [`MetaDiscovery::Document`] object (else
/// the first object) is the root, forced to `text/html`; ids are positions
/// after dropping repeats of an already seen URL (a browser fetches a URL
/// once; references to a repeat go to the first copy) and objects whose host
/// is not a DNS name (e.g. an IPv6 literal); paths keep the query, drop the
/// fragment and percent-encode bytes a body could not quote; missing content
/// types are guessed from the extension; an object without a usable earlier
/// parent, or whose parent's type cannot reference it the recorded way, is
/// re-parented to the root with discovery `html`; `Parser`/`Other` become
/// `css` under a CSS parent and `html` otherwise. The page's
/// `computation_ms` is split evenly over the root's `html`-discovered
/// scripts (the main scripts), remainder to the first; without such scripts,
/// over all scripts; without scripts it is dropped with a note.
#[allow(clippy::type_complexity)]
pub fn from_page_meta(
    meta: &PageMeta,
    name: &str,
) -> Result<(Page, Vec<PlaceholderSize>, Vec<String>), String> {
    let mut notes = Vec::new();
    let mut placeholders = Vec::new();
    let root_ix = meta
        .objects
        .iter()
        .position(|o| o.discovery == MetaDiscovery::Document)
        .unwrap_or(0);
    let Some(root_meta) = meta.objects.get(root_ix) else {
        return Err("no objects".into());
    };
    if check_host(&root_meta.host).is_err() {
        return Err(format!(
            "main document host `{}` is not a DNS name",
            root_meta.host
        ));
    }
    // meta index -> corpus id; dropped objects map to their replacement.
    let mut map: HashMap<usize, u32> = HashMap::new();
    let mut seen: HashMap<(String, String), u32> = HashMap::new();
    let mut objects: Vec<Object> = Vec::new();
    // The recorded exchange of each corpus object (same index as `objects`).
    let mut recs: Vec<&mewa_hint::Recorded> = Vec::new();
    // Corpus ids of redirects whose target is already placed.
    let mut followed: HashSet<u32> = HashSet::new();
    let (mut dups, mut bad_hosts, mut reparented, mut guessed) = (0, 0, 0, 0);
    let mut not_modified = 0;
    let order = std::iter::once(root_ix).chain((0..meta.objects.len()).filter(|&i| i != root_ix));
    for i in order {
        let m = &meta.objects[i];
        // A URL is served as the browser last saw it: a redirect loop
        // (`/checkout` → login → `/checkout`) ends on the page itself.
        let resp = final_response(meta, i);
        let is_root = i == root_ix;
        if check_host(&m.host).is_err() {
            bad_hosts += 1;
            map.insert(i, 0);
            continue;
        }
        let path = path_of(&m.url);
        if let Some(&first) = seen.get(&(m.host.clone(), path.clone())) {
            dups += 1;
            map.insert(i, first);
            continue;
        }
        let id = objects.len() as u32;
        seen.insert((m.host.clone(), path.clone()), id);
        map.insert(i, id);
        let content_type = match (&resp.content_type, is_root) {
            (_, true) => "text/html".to_string(),
            (Some(ct), _) if !ct.trim().is_empty() => ct.trim().to_ascii_lowercase(),
            _ => {
                guessed += 1;
                guess_type(&path).to_string()
            }
        };
        let size = match resp.size {
            Some(s) => s.min(MAX_OBJECT_SIZE),
            None => {
                placeholders.push(PlaceholderSize {
                    page: name.to_string(),
                    object: id,
                    url: m.url.clone(),
                });
                PLACEHOLDER_SIZE
            }
        };
        let status = match resp.recorded.status {
            // Served whole: the recording browser had a cached copy, the
            // replaying one has none.
            Some(304) => {
                not_modified += 1;
                None
            }
            Some(st) if (201..600).contains(&st) => Some(st),
            _ => None,
        };
        let mut obj = Object {
            id,
            host: m.host.clone(),
            path,
            size,
            content_type,
            parent: None,
            discovery: Discovery::Html,
            compute_ms: 0,
            status,
            think_ms: 0,
            recorded_size: None,
        };
        if matches!(obj.status(), 204 | 205) && obj.size > 0 {
            obj.recorded_size = Some(obj.size);
            obj.size = 0;
        }
        // The target of a recorded redirect whose hop is already placed.
        let redirected_from = m
            .parent
            .and_then(|p| Some((meta.objects.get(p)?, map.get(&p).copied()?)))
            .filter(|(pm, pid)| {
                pm.recorded.location.as_deref() == Some(m.url.as_str())
                    && objects
                        .get(*pid as usize)
                        .is_some_and(|po| is_redirect(po.status()))
                    && !followed.contains(pid)
            })
            .map(|(_, pid)| pid);
        if let Some(pid) = redirected_from.filter(|_| !is_root) {
            followed.insert(pid);
            obj.parent = Some(pid);
            obj.discovery = Discovery::Redirect;
        } else if !is_root {
            // Only earlier objects can be parents: no cycles by construction.
            let parent = m
                .parent
                .filter(|&p| p < i || (p == root_ix && i != root_ix))
                .and_then(|p| map.get(&p).copied())
                .and_then(|p| objects.get(p as usize));
            let kind = obj.kind();
            let placed = parent.and_then(|p| {
                let how = match (m.discovery, p.kind()) {
                    (MetaDiscovery::Script, _) => Discovery::Script,
                    (_, Kind::Css) => Discovery::Css,
                    (_, Kind::Script) => Discovery::Script,
                    _ => Discovery::Html,
                };
                (carries_references(p.status()) && p.kind().can_reference(how, kind))
                    .then_some((p.id, how))
            });
            let (pid, how) = placed.unwrap_or_else(|| {
                if m.parent.is_some() || m.discovery == MetaDiscovery::Script {
                    reparented += 1;
                }
                (shown_document(&objects), Discovery::Html)
            });
            obj.parent = Some(pid);
            obj.discovery = how;
        }
        objects.push(obj);
        recs.push(&resp.recorded);
    }
    // A redirect whose target the recording does not have: served as a
    // plain response (a browser would have gone on to an unrecorded URL).
    let mut dangling = 0;
    for o in &mut objects {
        if is_redirect(o.status()) && !followed.contains(&o.id) {
            o.status = None;
            dangling += 1;
        }
    }
    let think = think_times(&recs);
    for (o, t) in objects.iter_mut().zip(&think) {
        o.think_ms = *t;
    }
    for (n, what) in [
        (dups, "repeated URLs merged into their first request"),
        (bad_hosts, "objects dropped: host is not a DNS name"),
        (reparented, "objects re-parented to the main document"),
        (guessed, "content types guessed from the path"),
        (
            not_modified,
            "304 responses served as 200 (the replay has no cached copy)",
        ),
        (
            dangling,
            "redirects to URLs not in the recording served as 200",
        ),
    ] {
        if n > 0 {
            notes.push(format!("{name}: {n} {what}"));
        }
    }
    if let Some(ms) = meta.computation_ms.filter(|&ms| ms > 0) {
        let ms = ms.min(MAX_COMPUTE_MS);
        let main: Vec<usize> = objects
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                o.kind() == Kind::Script && o.parent == Some(0) && o.discovery == Discovery::Html
            })
            .map(|(i, _)| i)
            .collect();
        let targets = if main.is_empty() {
            objects
                .iter()
                .enumerate()
                .filter(|(_, o)| o.kind() == Kind::Script)
                .map(|(i, _)| i)
                .collect()
        } else {
            main
        };
        if targets.is_empty() {
            notes.push(format!(
                "{name}: computation_ms {ms} dropped: the page has no script"
            ));
        } else {
            let n = targets.len() as u32;
            for (k, &i) in targets.iter().enumerate() {
                objects[i].compute_ms = ms / n + if k == 0 { ms % n } else { 0 };
            }
        }
    }
    let root = &objects[0];
    let scheme = if meta.url.starts_with("https:") {
        "https"
    } else {
        "http"
    };
    let shared = shared_connections(&objects, &recs);
    let mut page = Page {
        name: name.to_string(),
        main: root.url(scheme),
        objects,
        shared_connections: shared,
    };
    page.validate().map_err(|e| e.to_string())?;
    let grown = grow_to_fit(&mut page);
    if grown.0 > 0 {
        notes.push(format!(
            "{name}: {} bodies grown by {} bytes in all to carry their references ({:.2} % of the page's {} bytes)",
            grown.0,
            grown.1,
            100.0 * grown.1 as f64 / page.recorded_bytes().max(1) as f64,
            page.recorded_bytes()
        ));
    }
    page.validate().map_err(|e| e.to_string())?;
    Ok((page, placeholders, notes))
}

/// The response object `i`'s URL is served with: its own, unless it is a
/// redirect and the page requests the same URL again later and gets a
/// final answer (a redirect loop through a login or cookie step).
fn final_response(meta: &PageMeta, i: usize) -> &ObjectMeta {
    let m = &meta.objects[i];
    if !m.recorded.status.is_some_and(is_redirect) {
        return m;
    }
    meta.objects[i + 1..]
        .iter()
        .rev()
        .find(|o| o.url == m.url && !o.recorded.status.is_some_and(is_redirect))
        .unwrap_or(m)
}

/// Prefixes every host of `page` with `label.` (main URL, objects and
/// connection groups alike), grows bodies the longer URLs no longer fit, and
/// checks the result.
fn rename_hosts(page: &mut Page, label: &str) -> Result<(), String> {
    let renamed = |h: &str| format!("{label}.{h}");
    if let Some((scheme, rest)) = page.main.split_once("://") {
        page.main = format!("{scheme}://{}", renamed(rest));
    }
    for o in &mut page.objects {
        o.host = renamed(&o.host);
    }
    for g in &mut page.shared_connections {
        for h in g.iter_mut() {
            *h = renamed(h);
        }
    }
    grow_to_fit(page);
    page.validate().map_err(|e| e.to_string())
}

/// The document a page shows so far: the root, or the end of its redirect
/// chain when the targets are already placed. Orphans go there, where a
/// browser would find them.
fn shown_document(objects: &[Object]) -> u32 {
    let mut cur = 0u32;
    for _ in 0..objects.len() {
        match objects
            .iter()
            .find(|o| o.parent == Some(cur) && o.discovery == Discovery::Redirect)
        {
            Some(next) => cur = next.id,
            None => break,
        }
    }
    match objects.get(cur as usize) {
        Some(o) if o.kind() == Kind::Html && carries_references(o.status()) => cur,
        _ => 0,
    }
}

/// The rule for bodies too small for their references (recorded parents are
/// often smaller than the URLs of what they revealed, or have no size):
/// **the body grows** to the smallest size that carries them, and keeps its
/// recorded size in `recorded_size`. Growing keeps the recorded tree (which
/// object revealed which, hence when it is found) at the price of a few
/// bytes; moving the references elsewhere would change discovery times,
/// which matter more to a page load. Written with `https://` URLs, the
/// longer scheme, so both schemes fit. Returns (bodies grown, bytes added).
pub fn grow_to_fit(page: &mut Page) -> (usize, u64) {
    let needs: Vec<(usize, u64)> = page
        .objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let need = crate::body::min_body_size(page, o.id, crate::Scheme::Https).ok()?;
            (need > o.size).then_some((i, need))
        })
        .collect();
    let mut added = 0;
    for &(i, need) in &needs {
        let o = &mut page.objects[i];
        added += need - o.size;
        o.recorded_size = Some(o.recorded_size.unwrap_or(o.size));
        o.size = need;
    }
    (needs.len(), added)
}

/// Server think time of each object, ms: the recorded wait (request sent →
/// first response byte) minus one round trip to that server. The round trip
/// is the TCP handshake of the object's connection, else the median
/// handshake of the page; without either, or without a wait, 0 (the wait
/// cannot be split, and replaying it whole would add a round trip the link
/// already adds). Capped at [`MAX_THINK_MS`].
fn think_times(recs: &[&mewa_hint::Recorded]) -> Vec<u32> {
    let mut by_conn: HashMap<&str, u32> = HashMap::new();
    let mut all: Vec<u32> = Vec::new();
    for r in recs {
        if let Some(c) = r.connect_ms {
            all.push(c);
            if let Some(id) = &r.connection {
                by_conn.entry(id.as_str()).or_insert(c);
            }
        }
    }
    all.sort_unstable();
    let median = all.get(all.len() / 2).copied();
    recs.iter()
        .map(|r| {
            let rtt = r
                .connection
                .as_deref()
                .and_then(|c| by_conn.get(c).copied())
                .or(median);
            match (r.wait_ms, rtt) {
                (Some(w), Some(rtt)) => w.saturating_sub(rtt).min(MAX_THINK_MS),
                _ => 0,
            }
        })
        .collect()
}

/// Groups of hosts that shared a recorded connection (each group sorted,
/// groups sorted; overlapping groups merged, as coalescing is transitive
/// for a browser: one address, one certificate).
fn shared_connections(objects: &[Object], recs: &[&mewa_hint::Recorded]) -> Vec<Vec<String>> {
    let mut by_conn: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (o, r) in objects.iter().zip(recs) {
        if let Some(c) = &r.connection {
            by_conn
                .entry(c.as_str())
                .or_default()
                .insert(o.host.as_str());
        }
    }
    let mut groups = Vec::new();
    for hosts in by_conn.into_values().filter(|h| h.len() > 1) {
        join_group(&mut groups, hosts);
    }
    sorted_groups(groups)
}

/// Path (and query) of an absolute URL, fragment removed, with every byte a
/// body could not quote percent-encoded and `..` segments neutralised.
fn path_of(url: &str) -> String {
    let url = mewa_hint::page::strip_fragment(url);
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let raw = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => rest[i..].to_string(),
        Some(i) => format!("/{}", &rest[i..]),
        None => "/".to_string(),
    };
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if path_byte_ok(b) {
            out.push(char::from(b));
        } else {
            out += &format!("%{b:02X}");
        }
    }
    let (p, q) = match out.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (out.clone(), None),
    };
    let p: Vec<&str> = p
        .split('/')
        .map(|seg| if seg == ".." { "%2E%2E" } else { seg })
        .collect();
    let mut p = p.join("/");
    if p.len() > 1900 {
        p.truncate(1900);
        while p.ends_with('%') || p.as_bytes().get(p.len().wrapping_sub(2)) == Some(&b'%') {
            p.pop();
        }
    }
    match q {
        Some(q) if p.len() + q.len() < 1999 => format!("{p}?{q}"),
        _ => p,
    }
}

fn guess_type(path: &str) -> &'static str {
    let p = path.split('?').next().unwrap_or(path).to_ascii_lowercase();
    let ext = p.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
}

/// A page name from a URL: its host, at most 40 characters.
fn short_name(url: &str) -> String {
    let host = mewa_hint::page::host_of(url).unwrap_or_else(|| "page".into());
    host.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(path_of("http://a.b"), "/");
        assert_eq!(path_of("http://a.b?x=1"), "/?x=1");
        assert_eq!(path_of("https://a.b/x y/../z#f"), "/x%20y/%2E%2E/z");
        assert_eq!(path_of("https://a.b/q?u=\"1\""), "/q?u=%221%22");
        assert!(crate::page::check_path(&path_of("https://a.b/(x)/'<>\\")).is_ok());
    }
}
