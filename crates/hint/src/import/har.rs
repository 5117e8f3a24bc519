//! HAR 1.2 import (Chrome/chrome-har, WebPageTest, Firefox, Browsertime).
//!
//! See [`import_har`] for the rules.

use std::collections::HashMap;

use serde_json::Value;

use super::util::{
    is_html, is_network_url, mime_essence, resolve_url, stack_url, str_of, type_name, Ctx,
    SizeBasis, Tally, UrlIndex,
};
use super::{parse_json, ImportError, ImportReport, MissingSize};
use crate::page::{host_of, strip_fragment, Discovery, ObjectMeta, PageMeta, Recorded};

/// Imports a HAR 1.2 file (optionally gzip-compressed): one [`PageMeta`] per
/// HAR page.
///
/// **Pages.** Entries are grouped by `pageref`, in the order of `log.pages`
/// (then pagerefs not listed there, then one page for entries without
/// `pageref`). A page's URL is its `title` when that is a URL, else the URL of
/// its navigation entry: the first entry with `_resourceType: "document"` when
/// the HAR records resource types, else the first HTML or redirect (3xx)
/// entry, else the first entry. For a redirected navigation that is the URL
/// the user asked for (e.g. `https://www.assa.se/`, not the `/sv/site/assa/`
/// it redirects to).
///
/// **Sizes** (bytes of the body on the wire), first rule that applies:
/// 1. cache hit (`_fromCache`) with `_transferSize`: that size (what crossed
///    the wire, usually 0);
/// 2. `_transferSize` − `response.headersSize` when both are known and the
///    difference is ≥ 0 (Chrome; `_transferSize` counts headers too);
/// 3. `_bytesIn` − `headersSize` likewise (WebPageTest, whose `bodySize` is
///    always 0, which is why this comes before rule 4);
/// 4. `response.bodySize` when ≥ 0 (Firefox, Browsertime, chrome-har);
/// 5. `_transferSize` or `_bytesIn` whole when `headersSize` is unknown
///    (HTTP/2 exports write −1): an overestimate by the compressed header
///    bytes, noted in the report;
/// 6. `response.content.size` (the *decoded* size) as a last resort, noted;
/// 7. otherwise `None`, listed in [`ImportReport::missing_sizes`].
///
/// **Discovery.** The navigation entry is [`Discovery::Document`]; an entry
/// whose URL is the resolved `redirectURL` of an earlier 3xx entry is
/// [`Discovery::Other`] with that entry as parent; otherwise the initiator
/// decides: `_initiator_type` or `_initiator.type` `parser` → Parser,
/// `script` → Script, anything else → Other. A bare `_initiator` URL string
/// (older chrome-har, WebPageTest) gives a parent but not a type: the parser
/// and scripts both report the document URL, so the entry stays Other.
/// Parents resolve `_initiator.url`, the innermost script stack frame, or the
/// `_initiator` string to the latest earlier object of the page with that URL.
///
/// **Content type** from `response.content.mimeType` (else the
/// `Content-Type` header), without parameters; `Last-Modified` and `ETag` from
/// the response headers, matched case-insensitively. Non-`http(s)` URLs are
/// skipped and counted.
///
/// **Errors.** Not JSON, not a HAR, an entry without `request.url`, a field
/// of the wrong type, no entries, or a page left with no usable object.
pub fn import_har(bytes: &[u8], source: &str) -> Result<ImportReport, ImportError> {
    let value = parse_json(bytes, source)?;
    import_value(&value, source)
}

/// One HAR entry, reduced to what the model needs.
#[derive(Debug)]
struct Entry {
    index: usize,
    url: String,
    status: Option<i64>,
    redirect_url: Option<String>,
    size: Option<u64>,
    basis: Option<SizeBasis>,
    no_response: bool,
    content_type: Option<String>,
    last_modified: Option<String>,
    etag: Option<String>,
    resource_type: Option<String>,
    initiator_type: Option<String>,
    initiator_url: Option<String>,
    recorded: Recorded,
}

/// A group of entries sharing a `pageref`.
#[derive(Debug)]
struct Group {
    pageref: Option<String>,
    title: Option<String>,
    entries: Vec<Entry>,
    skipped: usize,
}

/// [`import_har`] on already parsed JSON.
pub(crate) fn import_value(value: &Value, input: &str) -> Result<ImportReport, ImportError> {
    let ctx = Ctx { input };
    let not_har = |reason: &str| ImportError::NotHar {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let log = value
        .get("log")
        .filter(|l| l.is_object())
        .ok_or_else(|| not_har("no top-level `log` object"))?;
    let entries = log
        .get("entries")
        .and_then(Value::as_array)
        .ok_or_else(|| not_har("`log.entries` is missing or not an array"))?;
    if entries.is_empty() {
        return Err(ImportError::Empty {
            input: input.to_string(),
            reason: "`log.entries` is empty".to_string(),
        });
    }

    let mut groups: Vec<Group> = Vec::new();
    match log.get("pages") {
        None | Some(Value::Null) => {}
        Some(Value::Array(pages)) => {
            for (i, page) in pages.iter().enumerate() {
                let id = match page.get("id") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => {
                        return Err(ctx.bad(
                            i,
                            format!("log.pages[{i}].id"),
                            format!("should be a string, found {}", type_name(other)),
                        ))
                    }
                    None => return Err(ctx.missing(i, format!("log.pages[{i}].id"))),
                };
                if groups
                    .iter()
                    .all(|g| g.pageref.as_deref() != Some(id.as_str()))
                {
                    groups.push(Group {
                        pageref: Some(id),
                        title: str_of(page, "title").map(str::to_string),
                        entries: Vec::new(),
                        skipped: 0,
                    });
                }
            }
        }
        Some(other) => {
            return Err(ctx.bad(
                0,
                "log.pages",
                format!("should be an array, found {}", type_name(other)),
            ))
        }
    }

    let mut slots: HashMap<Option<String>, usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.pageref.clone(), i))
        .collect();
    let mut skipped = 0;
    for (i, raw) in entries.iter().enumerate() {
        let (pageref, entry) = parse_entry(&ctx, i, raw)?;
        let slot = match slots.get(&pageref) {
            Some(&s) => s,
            None => {
                groups.push(Group {
                    pageref: pageref.clone(),
                    title: None,
                    entries: Vec::new(),
                    skipped: 0,
                });
                slots.insert(pageref, groups.len() - 1);
                groups.len() - 1
            }
        };
        if let Some(group) = groups.get_mut(slot) {
            match entry {
                Some(e) => group.entries.push(e),
                None => {
                    group.skipped += 1;
                    skipped += 1;
                }
            }
        }
    }
    // Entries without pageref go last, after every listed page.
    if let Some(pos) = groups.iter().position(|g| g.pageref.is_none()) {
        let g = groups.remove(pos);
        groups.push(g);
    }

    let mut report = ImportReport {
        skipped,
        ..ImportReport::default()
    };
    for group in groups {
        build_page(input, group, &mut report)?;
    }
    Ok(report)
}

/// Parses entry `i`; `Ok((pageref, None))` for a skipped (non-network) URL.
fn parse_entry(
    ctx: &Ctx<'_>,
    i: usize,
    raw: &Value,
) -> Result<(Option<String>, Option<Entry>), ImportError> {
    let path = |f: &str| format!("log.entries[{i}]{f}");
    if !raw.is_object() {
        return Err(ctx.bad(
            i,
            path(""),
            format!("should be an object, found {}", type_name(raw)),
        ));
    }
    let pageref = match raw.get("pageref") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ctx.bad(
                i,
                path(".pageref"),
                format!("should be a string, found {}", type_name(other)),
            ))
        }
    };
    let request = match raw.get("request") {
        Some(r @ Value::Object(_)) => r,
        Some(other) => {
            return Err(ctx.bad(
                i,
                path(".request"),
                format!("should be an object, found {}", type_name(other)),
            ))
        }
        None => return Err(ctx.missing(i, path(".request"))),
    };
    let url = match request.get("url") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim(),
        Some(Value::String(_)) => return Err(ctx.bad(i, path(".request.url"), "is empty")),
        Some(other) => {
            return Err(ctx.bad(
                i,
                path(".request.url"),
                format!("should be a string, found {}", type_name(other)),
            ))
        }
        None => return Err(ctx.missing(i, path(".request.url"))),
    };
    let empty = Value::Null;
    let response = match raw.get("response") {
        None | Some(Value::Null) => None,
        Some(r @ Value::Object(_)) => Some(r),
        Some(other) => {
            return Err(ctx.bad(
                i,
                path(".response"),
                format!("should be an object, found {}", type_name(other)),
            ))
        }
    };
    let resp = response.unwrap_or(&empty);
    let content = match resp.get("content") {
        None | Some(Value::Null) => &empty,
        Some(c @ Value::Object(_)) => c,
        Some(other) => {
            return Err(ctx.bad(
                i,
                path(".response.content"),
                format!("should be an object, found {}", type_name(other)),
            ))
        }
    };

    // Numbers are validated even for skipped entries: a wrong type is a
    // broken file whatever the URL.
    let status = ctx.num(resp.get("status"), i, || path(".response.status"))?;
    let headers_size = ctx.num(resp.get("headersSize"), i, || path(".response.headersSize"))?;
    let body_size = ctx.num(resp.get("bodySize"), i, || path(".response.bodySize"))?;
    let content_size = ctx.num(content.get("size"), i, || path(".response.content.size"))?;
    let transfer = match ctx.num(resp.get("_transferSize"), i, || {
        path(".response._transferSize")
    })? {
        Some(t) => Some(t),
        None => ctx.num(raw.get("_transferSize"), i, || path("._transferSize"))?,
    };
    let bytes_in = ctx.num(raw.get("_bytesIn"), i, || path("._bytesIn"))?;

    if !is_network_url(url) {
        return Ok((pageref, None));
    }

    let from_cache = match raw.get("_fromCache").or_else(|| resp.get("_fromCache")) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        _ => false,
    };
    let (size, basis) = har_size(
        from_cache,
        transfer,
        bytes_in,
        headers_size,
        body_size,
        content_size,
    );

    let headers = resp.get("headers").and_then(Value::as_array);
    let header = |name: &str| -> Option<String> {
        headers?.iter().find_map(|h| {
            let n = str_of(h, "name")?;
            if n.eq_ignore_ascii_case(name) {
                str_of(h, "value").map(str::to_string)
            } else {
                None
            }
        })
    };
    let content_type = str_of(content, "mimeType")
        .and_then(mime_essence)
        .or_else(|| header("content-type").as_deref().and_then(mime_essence));
    let redirect_url = str_of(resp, "redirectURL")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| resolve_url(url, s))
        .or_else(|| {
            // Some writers leave redirectURL empty but keep the Location header.
            if status.is_some_and(|s| (300..400).contains(&s)) {
                header("location").map(|l| resolve_url(url, &l))
            } else {
                None
            }
        });

    let (mut initiator_type, mut initiator_url) = (None, None);
    match raw.get("_initiator") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            initiator_url = Some(s.trim().to_string())
        }
        Some(obj @ Value::Object(_)) => {
            initiator_type = str_of(obj, "type").map(str::to_string);
            initiator_url = str_of(obj, "url")
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .or_else(|| obj.get("stack").and_then(stack_url));
        }
        _ => {}
    }
    if let Some(t) = str_of(raw, "_initiator_type") {
        initiator_type = Some(t.to_string());
    }
    let recorded = har_recorded(raw, status, redirect_url.as_deref());

    Ok((
        pageref,
        Some(Entry {
            index: i,
            url: strip_fragment(url).to_string(),
            status,
            redirect_url,
            size,
            basis,
            no_response: response.is_none(),
            content_type,
            last_modified: header("last-modified"),
            etag: header("etag"),
            resource_type: str_of(raw, "_resourceType").map(str::to_ascii_lowercase),
            initiator_type,
            initiator_url,
            recorded,
        }),
    ))
}

/// The replay facts of an entry ([`Recorded`]). Read leniently: a timing
/// of the wrong type is left out rather than failing an import whose
/// sizes and tree are sound.
fn har_recorded(raw: &Value, status: Option<i64>, redirect_url: Option<&str>) -> Recorded {
    let timing = |k: &str| {
        raw.get("timings")
            .and_then(|t| t.get(k))
            .and_then(Value::as_f64)
    };
    let connection = match raw.get("connection").or_else(|| raw.get("_socket")) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    // HAR 1.2: `connect` includes `ssl`; the handshake round trip is the rest.
    let connect = timing("connect")
        .filter(|c| *c >= 0.0)
        .map(|c| match timing("ssl") {
            Some(tls) if tls >= 0.0 && tls <= c => c - tls,
            _ => c,
        });
    let status = status
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| *s > 0);
    Recorded {
        status,
        location: redirect_url
            .filter(|_| status.is_some_and(|s| (300..400).contains(&s)))
            .map(|u| strip_fragment(u).to_string()),
        connection,
        wait_ms: Recorded::ms(timing("wait")),
        connect_ms: Recorded::ms(connect).filter(|c| *c > 0),
    }
}

/// The HAR size rule documented on [`import_har`].
fn har_size(
    from_cache: bool,
    transfer: Option<i64>,
    bytes_in: Option<i64>,
    headers_size: Option<i64>,
    body_size: Option<i64>,
    content_size: Option<i64>,
) -> (Option<u64>, Option<SizeBasis>) {
    let nonneg = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let (transfer, bytes_in, headers) = (nonneg(transfer), nonneg(bytes_in), nonneg(headers_size));
    if from_cache {
        if let Some(t) = transfer {
            return (Some(t), Some(SizeBasis::CacheHit));
        }
    }
    let minus_headers = |total: Option<u64>| total.zip(headers).and_then(|(t, h)| t.checked_sub(h));
    if let Some(s) = minus_headers(transfer) {
        return (Some(s), Some(SizeBasis::TransferMinusHeaders));
    }
    if let Some(s) = minus_headers(bytes_in) {
        return (Some(s), Some(SizeBasis::BytesInMinusHeaders));
    }
    if let Some(s) = nonneg(body_size) {
        return (Some(s), Some(SizeBasis::BodySize));
    }
    if let Some(s) = transfer.or(bytes_in) {
        return (Some(s), Some(SizeBasis::WireIncludingHeaders));
    }
    if let Some(s) = nonneg(content_size) {
        return (Some(s), Some(SizeBasis::DecodedContent));
    }
    (None, None)
}

/// Whether a string is usable as a page URL (titles often are not).
fn looks_like_url(s: &str) -> bool {
    !s.chars().any(char::is_whitespace) && is_network_url(s)
}

/// Maps a recorded initiator type to the model.
pub(crate) fn discovery_of(initiator_type: Option<&str>) -> Discovery {
    match initiator_type {
        Some(t) if t.eq_ignore_ascii_case("parser") => Discovery::Parser,
        Some(t) if t.eq_ignore_ascii_case("script") => Discovery::Script,
        _ => Discovery::Other,
    }
}

/// Turns one group into a page, appending to the report.
fn build_page(input: &str, group: Group, report: &mut ImportReport) -> Result<(), ImportError> {
    let page_name = group
        .title
        .clone()
        .or_else(|| group.pageref.clone())
        .unwrap_or_else(|| "(entries without pageref)".to_string());
    if group.entries.is_empty() {
        return Err(ImportError::EmptyPage {
            input: input.to_string(),
            page: page_name,
        });
    }
    let entries = group.entries;
    let has_types = entries.iter().any(|e| e.resource_type.is_some());
    let nav = if has_types {
        entries
            .iter()
            .position(|e| e.resource_type.as_deref() == Some("document"))
    } else {
        entries.iter().position(|e| {
            is_html(e.content_type.as_deref()) || e.status.is_some_and(|s| (300..400).contains(&s))
        })
    }
    .unwrap_or(0);

    let page_url = match group.title.as_deref().map(str::trim) {
        Some(t) if looks_like_url(t) => strip_fragment(t).to_string(),
        _ => entries.get(nav).map(|e| e.url.clone()).unwrap_or_default(),
    };

    let mut objects: Vec<ObjectMeta> = Vec::with_capacity(entries.len());
    // Resolved redirect target → redirecting objects not yet followed.
    let mut pending: HashMap<String, Vec<usize>> = HashMap::new();
    let mut by_url = UrlIndex::default();
    let mut tally = Tally::default();
    for (j, e) in entries.into_iter().enumerate() {
        let (discovery, parent) = if j == nav {
            (Discovery::Document, None)
        } else if let Some(from) = pending.get_mut(&e.url).and_then(Vec::pop) {
            (Discovery::Other, Some(from))
        } else {
            let parent = e.initiator_url.as_deref().and_then(|u| by_url.latest(u));
            (discovery_of(e.initiator_type.as_deref()), parent)
        };
        if let (Some(target), true) = (
            &e.redirect_url,
            e.status.is_some_and(|s| (300..400).contains(&s)),
        ) {
            pending
                .entry(strip_fragment(target).to_string())
                .or_default()
                .push(j);
        }
        match (e.size, e.basis) {
            (Some(_), Some(b)) => tally.add(b),
            _ => report.missing_sizes.push(MissingSize {
                page_url: page_url.clone(),
                object_url: e.url.clone(),
                entry_index: e.index,
                reason: if e.no_response {
                    "entry has no response".to_string()
                } else {
                    "no size recorded (_transferSize, _bytesIn, bodySize and content.size absent or negative)"
                        .to_string()
                },
            }),
        }
        let host = host_of(&e.url).unwrap_or_default();
        by_url.insert(&e.url, j);
        objects.push(ObjectMeta {
            url: e.url,
            host,
            size: e.size,
            content_type: e.content_type,
            last_modified: e.last_modified,
            etag: e.etag,
            discovery,
            parent,
            recorded: e.recorded,
        });
    }
    let label = format!("page {} ({page_url})", report.pages.len() + 1);
    report.notes.extend(tally.notes(&label));
    if group.skipped > 0 {
        report.notes.push(format!(
            "{label}: {} non-network request{} (data:, blob:, …) skipped",
            group.skipped,
            if group.skipped == 1 { "" } else { "s" }
        ));
    }
    report.pages.push(PageMeta {
        url: page_url,
        objects,
        computation_ms: None,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn har(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    /// A three-entry Chrome (chrome-har) HAR: document, parser CSS, script
    /// image; HTTP/2 image with unknown header size.
    fn chrome_har() -> Value {
        json!({"log": {
        "version": "1.2",
        "creator": {"name": "chrome-har", "version": "0.12.0"},
        "pages": [{"id": "page_1", "title": "https://shop.example/ run 1", "startedDateTime": "2024-01-01T00:00:00Z"}],
        "entries": [
            {"pageref": "page_1", "_resourceType": "document", "_initiator_type": "other",
             "request": {"method": "GET", "url": "https://shop.example/"},
             "response": {"status": 200, "headersSize": 300, "bodySize": 9700, "_transferSize": 10000,
               "headers": [{"name": "ETag", "value": "\"abc\""}, {"name": "last-modified", "value": "Mon, 01 Jan 2024 00:00:00 GMT"}],
               "content": {"size": 40000, "mimeType": "text/html; charset=utf-8"}}},
            {"pageref": "page_1", "_resourceType": "stylesheet", "_initiator": "https://shop.example/", "_initiator_type": "parser",
             "request": {"url": "https://cdn.example/site.css#x"},
             "response": {"status": 200, "headersSize": 200, "bodySize": 4800, "_transferSize": 5000,
               "headers": [], "content": {"size": 20000, "mimeType": "text/css"}}},
            {"pageref": "page_1", "_resourceType": "image",
             "_initiator": {"type": "script", "stack": {"callFrames": [{"url": "https://cdn.example/site.css"}]}},
             "request": {"url": "https://img.example/a.png"},
             "response": {"status": 200, "headersSize": -1, "bodySize": -1, "_transferSize": 2345,
               "headers": [], "content": {"size": 2000, "mimeType": "image/png"}}}
        ]}})
    }

    #[test]
    fn chrome_har_sizes_discovery_parents() {
        let r = import_har(&har(chrome_har()), "chrome.har").unwrap();
        assert_eq!(r.pages.len(), 1);
        let p = &r.pages[0];
        // Title "https://shop.example/ run 1" is not a URL: the document's URL.
        assert_eq!(p.url, "https://shop.example/");
        let o = &p.objects;
        assert_eq!(o.len(), 3);
        assert_eq!(o[0].size, Some(9700));
        assert_eq!(o[0].discovery, Discovery::Document);
        assert_eq!(o[0].content_type.as_deref(), Some("text/html"));
        assert_eq!(o[0].etag.as_deref(), Some("\"abc\""));
        assert_eq!(
            o[0].last_modified.as_deref(),
            Some("Mon, 01 Jan 2024 00:00:00 GMT")
        );
        assert_eq!(o[1].url, "https://cdn.example/site.css");
        assert_eq!(o[1].host, "cdn.example");
        assert_eq!(o[1].size, Some(4800));
        assert_eq!((o[1].discovery, o[1].parent), (Discovery::Parser, Some(0)));
        // headersSize unknown: whole transfer size, noted.
        assert_eq!(o[2].size, Some(2345));
        assert_eq!((o[2].discovery, o[2].parent), (Discovery::Script, Some(1)));
        assert!(r.missing_sizes.is_empty());
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("1 object sized from _transferSize"));
    }

    /// A two-entry WebPageTest HAR: bodySize 0 everywhere, `_bytesIn` real.
    fn wpt_har() -> Value {
        json!({"log": {
        "creator": {"name": "WebPagetest"},
        "pages": [{"id": "page_1_0", "title": "Run 1, First View for https://wiki.example/Main", "_URL": "https://wiki.example/Main"}],
        "entries": [
            {"pageref": "page_1_0", "_bytesIn": 17283, "_socket": 241,
             "request": {"url": "https://wiki.example/Main"},
             "response": {"status": 200, "headersSize": 857, "bodySize": 0, "content": {"size": 0, "mimeType": "text/html"}}},
            {"pageref": "page_1_0", "_bytesIn": "668", "_initiator": "https://wiki.example/Main",
             "request": {"url": "https://upload.example/x.jpg"},
             "response": {"status": 304, "headersSize": 666, "bodySize": 0, "content": {"size": 0, "mimeType": "image/jpeg"}}}
        ]}})
    }

    #[test]
    fn wpt_har_uses_bytes_in() {
        let r = import_har(&har(wpt_har()), "wpt.har").unwrap();
        let p = &r.pages[0];
        assert_eq!(p.url, "https://wiki.example/Main");
        assert_eq!(p.objects[0].size, Some(17283 - 857));
        assert_eq!(p.objects[0].discovery, Discovery::Document);
        // 304 revalidation: kept, with its recorded body bytes.
        assert_eq!(p.objects[1].size, Some(2));
        assert_eq!(
            (p.objects[1].discovery, p.objects[1].parent),
            (Discovery::Other, Some(0))
        );
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn pages_split_by_pageref_and_redirects_chain() {
        let v = json!({"log": {
        "pages": [{"id": "a", "title": "A"}, {"id": "b", "title": "https://b.example/"}],
        "entries": [
            {"pageref": "a", "request": {"url": "https://a.example/"},
             "response": {"status": 301, "redirectURL": "/home", "headersSize": 100, "bodySize": 0, "content": {"size": 0, "mimeType": "text/html"}}},
            {"pageref": "b", "request": {"url": "https://b.example/"},
             "response": {"status": 200, "headersSize": 10, "bodySize": 5, "content": {"mimeType": "text/html"}}},
            {"pageref": "a", "request": {"url": "https://a.example/home"},
             "response": {"status": 200, "headersSize": 10, "bodySize": 50, "content": {"mimeType": "text/html"}}},
            {"pageref": "a", "request": {"url": "data:image/png;base64,AAAA"}, "response": {"status": 200}},
            {"pageref": "a", "request": {"url": "https://a.example/x.js"}, "response": {"status": 0, "headersSize": -1, "bodySize": -1}},
            {"request": {"url": "https://loose.example/"}, "response": {"bodySize": 1}}
        ]}});
        let r = import_har(&har(v), "multi.har").unwrap();
        assert_eq!(r.pages.len(), 3);
        let a = &r.pages[0];
        assert_eq!(a.url, "https://a.example/");
        assert_eq!(a.objects.len(), 3);
        assert_eq!(a.objects[0].discovery, Discovery::Document);
        assert_eq!(
            (a.objects[1].discovery, a.objects[1].parent),
            (Discovery::Other, Some(0))
        );
        assert_eq!(a.objects[2].size, None);
        assert_eq!(r.pages[1].url, "https://b.example/");
        assert_eq!(r.pages[2].url, "https://loose.example/");
        assert_eq!(r.skipped, 1);
        assert_eq!(r.missing_sizes.len(), 1);
        assert_eq!(r.missing_sizes[0].entry_index, 4);
        assert_eq!(r.missing_sizes[0].object_url, "https://a.example/x.js");
        assert_eq!(r.missing_sizes[0].page_url, "https://a.example/");
    }

    #[test]
    fn content_size_is_a_noted_fallback() {
        let v = json!({"log": {"entries": [
            {"request": {"url": "https://a.example/"}, "response": {"status": 200, "headersSize": -1, "bodySize": -1, "content": {"size": 123}}}
        ]}});
        let r = import_har(&har(v), "x").unwrap();
        assert_eq!(r.pages[0].objects[0].size, Some(123));
        assert!(r.notes.iter().any(|n| n.contains("content.size")));
    }

    #[test]
    fn cache_hit_keeps_transfer_size() {
        let v = json!({"log": {"entries": [
            {"_fromCache": "memory", "request": {"url": "https://a.example/"},
             "response": {"status": 200, "headersSize": -1, "bodySize": 0, "_transferSize": 0, "content": {"size": 500}}}
        ]}});
        let r = import_har(&har(v), "x").unwrap();
        assert_eq!(r.pages[0].objects[0].size, Some(0));
        assert!(r.notes.iter().any(|n| n.contains("browser cache")));
    }

    #[test]
    fn errors() {
        let e = import_har(b"{\"log\": {\"entries\": [", "t.har").unwrap_err();
        assert!(matches!(e, ImportError::Json { .. }), "{e:?}");

        let e = import_har(br#"{"foo": 1}"#, "t.har").unwrap_err();
        assert!(matches!(e, ImportError::NotHar { .. }), "{e:?}");
        let e = import_har(br#"{"log": {"entries": {}}}"#, "t.har").unwrap_err();
        assert!(matches!(e, ImportError::NotHar { .. }), "{e:?}");

        let e = import_har(br#"{"log": {"entries": []}}"#, "t.har").unwrap_err();
        assert!(matches!(e, ImportError::Empty { .. }), "{e:?}");

        let e = import_har(br#"{"log": {"entries": [{"request": {"url": "https://a/"}}, {"request": {"method": "GET"}}]}}"#, "t.har")
            .unwrap_err();
        assert_eq!(
            e,
            ImportError::MissingField {
                input: "t.har".into(),
                entry: 1,
                field: "log.entries[1].request.url".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "t.har: entry 1: required field `log.entries[1].request.url` is missing"
        );

        let e = import_har(
            br#"{"log": {"entries": [{"request": {"url": 7}}]}}"#,
            "t.har",
        )
        .unwrap_err();
        assert!(
            matches!(e, ImportError::BadField { ref field, .. } if field == "log.entries[0].request.url"),
            "{e:?}"
        );

        let e = import_har(
            br#"{"log": {"entries": [{"request": {"url": "https://a/"}, "response": {"bodySize": [1]}}]}}"#,
            "t.har",
        )
        .unwrap_err();
        assert!(
            matches!(e, ImportError::BadField { ref field, .. } if field == "log.entries[0].response.bodySize"),
            "{e:?}"
        );

        let e = import_har(
            br#"{"log": {"entries": [{"request": {"url": "data:,x"}}]}}"#,
            "t.har",
        )
        .unwrap_err();
        assert!(matches!(e, ImportError::EmptyPage { .. }), "{e:?}");

        let e = import_har(
            br#"{"log": {"pages": [{"id": "p", "title": "t"}, {"id": "q", "title": "u"}], "entries": [{"pageref": "p", "request": {"url": "https://a/"}}]}}"#,
            "t.har",
        )
        .unwrap_err();
        assert_eq!(
            e,
            ImportError::EmptyPage {
                input: "t.har".into(),
                page: "u".into()
            }
        );

        let e = import_har(br#"{"log": {"entries": [3]}}"#, "t.har").unwrap_err();
        assert!(matches!(e, ImportError::BadField { .. }), "{e:?}");
    }

    #[test]
    fn size_rule_order() {
        // Chrome HTTP/1.1: transfer minus headers.
        assert_eq!(
            har_size(false, Some(1000), None, Some(200), Some(800), Some(5000)).0,
            Some(800)
        );
        // Headers larger than transfer: not sensible, fall to bodySize.
        assert_eq!(
            har_size(false, Some(100), None, Some(200), Some(7), None).0,
            Some(7)
        );
        // WPT: bytesIn before the bogus bodySize 0.
        assert_eq!(
            har_size(false, None, Some(900), Some(100), Some(0), Some(0)).0,
            Some(800)
        );
        assert_eq!(har_size(false, None, None, None, None, None), (None, None));
        assert_eq!(
            har_size(false, Some(-1), Some(-1), Some(-1), Some(-1), Some(-1)),
            (None, None)
        );
    }
}
