//! Conversions between corpus pages and the edge's page metadata
//! ([`mewa_hint::PageMeta`]): corpus → metadata to build hints for the pages
//! the lab serves, and imported recordings → corpus to serve real page
//! structures.

use std::collections::HashMap;

use mewa_hint::import::ImportReport;
use mewa_hint::{Discovery as MetaDiscovery, ObjectMeta, PageMeta};
use serde::{Deserialize, Serialize};

use crate::page::{
    check_host, path_byte_ok, Corpus, Discovery, Kind, Object, Page, Provenance, MAX_COMPUTE_MS,
    MAX_OBJECT_SIZE,
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
                _ => MetaDiscovery::Parser,
            },
            parent: o.parent.and_then(|p| index.get(&p).copied()),
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
    for (k, meta) in report.pages.iter().enumerate() {
        let page_name = format!("rec{:03}-{}", k + 1, short_name(&meta.url));
        match from_page_meta(meta, &page_name) {
            Ok((page, ph, mut n)) => {
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
    let (mut dups, mut bad_hosts, mut reparented, mut guessed) = (0, 0, 0, 0);
    let order = std::iter::once(root_ix).chain((0..meta.objects.len()).filter(|&i| i != root_ix));
    for i in order {
        let m = &meta.objects[i];
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
        let content_type = match (&m.content_type, is_root) {
            (_, true) => "text/html".to_string(),
            (Some(ct), _) if !ct.trim().is_empty() => ct.trim().to_ascii_lowercase(),
            _ => {
                guessed += 1;
                guess_type(&path).to_string()
            }
        };
        let size = match m.size {
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
        let mut obj = Object {
            id,
            host: m.host.clone(),
            path,
            size,
            content_type,
            parent: None,
            discovery: Discovery::Html,
            compute_ms: 0,
        };
        if !is_root {
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
                p.kind().can_reference(how, kind).then_some((p.id, how))
            });
            let (pid, how) = placed.unwrap_or_else(|| {
                if m.parent.is_some() || m.discovery == MetaDiscovery::Script {
                    reparented += 1;
                }
                (0, Discovery::Html)
            });
            obj.parent = Some(pid);
            obj.discovery = how;
        }
        objects.push(obj);
    }
    for (n, what) in [
        (dups, "repeated URLs merged into their first request"),
        (bad_hosts, "objects dropped: host is not a DNS name"),
        (reparented, "objects re-parented to the main document"),
        (guessed, "content types guessed from the path"),
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
    let page = Page {
        name: name.to_string(),
        main: root.url(scheme),
        objects,
    };
    page.validate().map_err(|e| e.to_string())?;
    Ok((page, placeholders, notes))
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
