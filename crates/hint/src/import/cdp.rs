//! Chrome DevTools Protocol event log import (chrome-har perf logs,
//! Lighthouse `devtoolslog.json`).
//!
//! See [`import_cdp`] for the rules.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::har::discovery_of;
use super::util::{
    is_network_url, mime_essence, stack_url, str_of, type_name, Ctx, SizeBasis, Tally, UrlIndex,
};
use super::{parse_json, ImportError, ImportReport, MissingSize};
use crate::page::{host_of, strip_fragment, Discovery, ObjectMeta, PageMeta, Recorded};

/// Imports a DevTools event log (optionally gzip-compressed): a JSON array of
/// `{method, params}` events, or an object holding one under `log` or
/// `events`. Events are joined by `requestId`.
///
/// **Pages.** One page per top-level navigation: a
/// `Network.requestWillBeSent` of `type: "Document"` (not a redirect hop) in a
/// top frame. Top frames are those `Page.frameNavigated` reports without
/// `parentId` (frames attached with a parent, and their descendants, are
/// iframes); when the log has no frame events, the frame of the first
/// document request is the top frame. A log may hold several navigations,
/// even in several tabs (the www.wikipedia.org log holds two). Each other
/// request goes to the latest page of its frame's top frame, else to the
/// latest page; requests before any navigation form a page of their own
/// (named by their `documentURL`), so a log cut mid-page still imports. The
/// page URL is the first URL of the navigation, before redirects.
///
/// **Redirects.** Each `requestWillBeSent` carrying `redirectResponse` closes
/// the previous hop of that `requestId` (sized from the redirect response)
/// and opens a new object ([`Discovery::Other`], parent = previous hop).
///
/// **Sizes.** `Network.loadingFinished.encodedDataLength` is every byte of the
/// response on the wire, headers included (for a redirect hop:
/// `redirectResponse.encodedDataLength`). The body is that total minus the
/// header bytes, which the real logs give in one of three ways:
/// 1. the raw header text (`response.headersText`, or the matching
///    `Network.responseReceivedExtraInfo.headersText`), recorded for HTTP/1.x
///    by older Chrome and by ExtraInfo events: exact;
/// 2. `response.encodedDataLength`, the bytes received when the response
///    event was dispatched: the header block, *unless* body bytes had already
///    arrived — in the ryanair log it is 16384 for a 88272-byte stylesheet,
///    and in the wikipedia log it often equals the whole total. It is
///    therefore subtracted only when it is no larger than the uncompressed
///    header block (`name: value\r\n` over `response.headers`, plus the
///    status line), i.e. when it *can* be headers alone; with HTTP/2
///    compression that bounds the error by the header size;
/// 3. otherwise nothing is subtracted and the size includes the (usually
///    HPACK-compressed, a few hundred bytes) header block; noted.
///
/// Without `encodedDataLength` in `loadingFinished` (very old logs) the sum
/// of `Network.dataReceived.encodedDataLength` is used, noted. A request with
/// `Network.loadingFailed`, or without `loadingFinished` when the log ends,
/// keeps `size: None` and is listed in [`ImportReport::missing_sizes`] with
/// the reason. Responses served from the browser cache keep their recorded
/// (normally zero) transfer size, noted.
///
/// **Discovery.** The navigation's first request is [`Discovery::Document`];
/// otherwise `initiator.type` decides (`parser` → Parser, `script` → Script,
/// `preload`/`other`/anything else → Other) and the parent is the latest
/// earlier object whose URL is `initiator.url`, or for scripts the innermost
/// stack frame (walking `stack.parent`) that has a URL.
///
/// Content type from `response.mimeType`; `Last-Modified`/`ETag` from
/// `response.headers`, case-insensitively. Non-`http(s)` URLs are skipped and
/// counted.
pub fn import_cdp(bytes: &[u8], source: &str) -> Result<ImportReport, ImportError> {
    let value = parse_json(bytes, source)?;
    import_value(&value, source)
}

/// One request hop (a redirect chain has several, all with one `requestId`).
#[derive(Debug)]
struct Hop {
    page: usize,
    obj: usize,
    event_index: usize,
    request_id: String,
    /// Position in the redirect chain, to pick the matching ExtraInfo.
    hop_no: usize,
    resp_edl: Option<i64>,
    headers_text_len: Option<u64>,
    header_estimate: u64,
    /// Wire total: `loadingFinished` (or `redirectResponse`) encodedDataLength.
    total: Option<i64>,
    finished: bool,
    data_sum: Option<i64>,
    failed: Option<String>,
    from_cache: bool,
    is_redirect_hop_closed: bool,
}

/// A page being built.
#[derive(Debug)]
struct PageB {
    url: String,
    objects: Vec<ObjectMeta>,
    by_url: UrlIndex,
}

/// What a response (final or redirect) tells about a hop.
struct RespInfo {
    mime: Option<String>,
    last_modified: Option<String>,
    etag: Option<String>,
    edl: Option<i64>,
    headers_text_len: Option<u64>,
    estimate: u64,
    from_cache: bool,
    recorded: Recorded,
}

/// The events of a log: a bare array, or under `log`/`events`.
fn events_of<'v>(value: &'v Value, input: &str) -> Result<&'v [Value], ImportError> {
    let not = |reason: &str| ImportError::NotCdp {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let events = match value {
        Value::Array(a) => a.as_slice(),
        Value::Object(m) => ["log", "events"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_array))
            .map(Vec::as_slice)
            .ok_or_else(|| not("expected an array of {method, params} events (or an object with a `log`/`events` array)"))?,
        other => {
            return Err(not(&format!(
                "expected an array of {{method, params}} events, found {}",
                type_name(other)
            )))
        }
    };
    if events.is_empty() {
        return Err(ImportError::Empty {
            input: input.to_string(),
            reason: "the event log is empty".to_string(),
        });
    }
    if !events
        .iter()
        .any(|e| e.get("method").is_some_and(Value::is_string))
    {
        return Err(not("no event has a string `method`"));
    }
    Ok(events)
}

/// [`import_cdp`] on already parsed JSON: the frame tree first (it needs
/// events that come after the requests of the frames they describe), then
/// every network event in order, then the sizes.
pub(crate) fn import_value(value: &Value, input: &str) -> Result<ImportReport, ImportError> {
    let ctx = Ctx { input };
    let events = events_of(value, input)?;
    let frames = FrameTree::read(events);
    let mut log = RequestLog::default();
    for (i, ev) in events.iter().enumerate() {
        log.event(&ctx, &frames, i, ev)?;
    }
    log.into_report(input)
}

/// Which frame is inside which, from `Page.frameAttached` and
/// `Page.frameNavigated`, and the frame of the first document request: a
/// request belongs to the page of its top frame.
#[derive(Debug, Default)]
struct FrameTree {
    parent: HashMap<String, Option<String>>,
    first_doc_frame: Option<String>,
}

impl FrameTree {
    /// Pass 1 over the events.
    fn read(events: &[Value]) -> FrameTree {
        let mut frame_parent: HashMap<String, Option<String>> = HashMap::new();
        for ev in events {
            let params = ev.get("params");
            match ev.get("method").and_then(Value::as_str) {
                Some("Page.frameAttached") => {
                    if let (Some(f), Some(p)) = (
                        params.and_then(|p| str_of(p, "frameId")),
                        params.and_then(|p| str_of(p, "parentFrameId")),
                    ) {
                        frame_parent.insert(f.to_string(), Some(p.to_string()));
                    }
                }
                Some("Page.frameNavigated") => {
                    if let Some(frame) = params.and_then(|p| p.get("frame")) {
                        if let Some(id) = str_of(frame, "id") {
                            match str_of(frame, "parentId") {
                                Some(p) => {
                                    frame_parent.insert(id.to_string(), Some(p.to_string()));
                                }
                                None => {
                                    frame_parent.entry(id.to_string()).or_insert(None);
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let first_doc_frame: Option<String> = events.iter().find_map(|ev| {
            let p = ev.get("params")?;
            if ev.get("method").and_then(Value::as_str) == Some("Network.requestWillBeSent")
                && str_of(p, "type") == Some("Document")
            {
                str_of(p, "frameId").map(str::to_string)
            } else {
                None
            }
        });
        FrameTree {
            parent: frame_parent,
            first_doc_frame,
        }
    }

    /// The top frame above `frame` (at most 64 levels up: a cycle in a
    /// hostile log must not loop).
    fn top_of(&self, frame: &str) -> String {
        let mut f = frame;
        for _ in 0..64 {
            match self.parent.get(f) {
                Some(Some(p)) => f = p,
                _ => break,
            }
        }
        f.to_string()
    }

    /// Whether `frame` is a top frame (no frame id: only when no document
    /// request names one).
    fn is_top(&self, frame: Option<&str>) -> bool {
        match frame {
            None => self.first_doc_frame.is_none(),
            Some(f) => match self.parent.get(f) {
                Some(None) => true,
                Some(Some(_)) => false,
                None => self.first_doc_frame.as_deref() == Some(f),
            },
        }
    }
}

/// Pass 2's state: the pages and request hops built so far, by request id.
#[derive(Debug, Default)]
struct RequestLog {
    pages: Vec<PageB>,
    /// Latest page of each top frame.
    page_of_top: HashMap<String, usize>,
    hops: Vec<Hop>,
    /// The open hop of each request id.
    current: HashMap<String, usize>,
    /// Request ids of skipped (non-network) requests.
    skipped_ids: HashSet<String>,
    /// `headersText` lengths of `responseReceivedExtraInfo`, per request id,
    /// in arrival order (matched to hops by position in the chain).
    extra: HashMap<String, Vec<Option<u64>>>,
    skipped: usize,
    orphan_events: usize,
}

impl RequestLog {
    /// One event of the log, in order.
    fn event(
        &mut self,
        ctx: &Ctx<'_>,
        frames: &FrameTree,
        i: usize,
        ev: &Value,
    ) -> Result<(), ImportError> {
        if !ev.is_object() {
            return Err(ctx.bad(
                i,
                format!("[{i}]"),
                format!("should be an object, found {}", type_name(ev)),
            ));
        }
        let method = match ev.get("method") {
            Some(Value::String(m)) => m.as_str(),
            Some(other) => {
                return Err(ctx.bad(
                    i,
                    format!("[{i}].method"),
                    format!("should be a string, found {}", type_name(other)),
                ))
            }
            None => return Err(ctx.missing(i, format!("[{i}].method"))),
        };
        let wanted = matches!(
            method,
            "Network.requestWillBeSent"
                | "Network.responseReceived"
                | "Network.responseReceivedExtraInfo"
                | "Network.dataReceived"
                | "Network.loadingFinished"
                | "Network.loadingFailed"
                | "Network.requestServedFromCache"
        );
        if !wanted {
            return Ok(());
        }
        let params = match ev.get("params") {
            Some(p @ Value::Object(_)) => p,
            Some(other) => {
                return Err(ctx.bad(
                    i,
                    format!("[{i}].params"),
                    format!("should be an object, found {}", type_name(other)),
                ))
            }
            None => return Err(ctx.missing(i, format!("[{i}].params"))),
        };
        let rid = match params.get("requestId") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => {
                return Err(ctx.bad(
                    i,
                    format!("[{i}].params.requestId"),
                    format!("should be a string, found {}", type_name(other)),
                ))
            }
            None => return Err(ctx.missing(i, format!("[{i}].params.requestId"))),
        };

        if method == "Network.requestWillBeSent" {
            return self.request_will_be_sent(ctx, frames, i, params, rid);
        }

        if method == "Network.responseReceivedExtraInfo" {
            // May come before or after responseReceived; matched by position
            // in the chain when sizes are computed.
            let len = str_of(params, "headersText").map(|t| t.len() as u64);
            self.extra.entry(rid).or_default().push(len);
            return Ok(());
        }

        let Some(&h) = self.current.get(&rid) else {
            if !self.skipped_ids.contains(&rid) {
                self.orphan_events += 1;
            }
            return Ok(());
        };
        let Some(hop) = self.hops.get_mut(h) else {
            return Ok(());
        };
        match method {
            "Network.responseReceived" => {
                let response = match params.get("response") {
                    Some(r @ Value::Object(_)) => r,
                    Some(other) => {
                        return Err(ctx.bad(
                            i,
                            format!("[{i}].params.response"),
                            format!("should be an object, found {}", type_name(other)),
                        ))
                    }
                    None => return Err(ctx.missing(i, format!("[{i}].params.response"))),
                };
                let info = resp_info(ctx, i, "response", response)?;
                hop.resp_edl = info.edl;
                hop.headers_text_len = info.headers_text_len;
                hop.header_estimate = info.estimate;
                hop.from_cache |= info.from_cache;
                if let Some(o) = self
                    .pages
                    .get_mut(hop.page)
                    .and_then(|p| p.objects.get_mut(hop.obj))
                {
                    o.content_type = info.mime;
                    o.last_modified = info.last_modified;
                    o.etag = info.etag;
                    o.recorded = info.recorded;
                }
            }
            "Network.dataReceived" => {
                let n = ctx.num(params.get("encodedDataLength"), i, || {
                    format!("[{i}].params.encodedDataLength")
                })?;
                if let Some(n) = n.filter(|n| *n >= 0) {
                    hop.data_sum = Some(hop.data_sum.unwrap_or(0).saturating_add(n));
                }
            }
            "Network.loadingFinished" => {
                hop.finished = true;
                hop.total = ctx.num(params.get("encodedDataLength"), i, || {
                    format!("[{i}].params.encodedDataLength")
                })?;
            }
            "Network.loadingFailed" => {
                let text = str_of(params, "errorText")
                    .filter(|t| !t.is_empty())
                    .unwrap_or("unknown error");
                let mut reason = format!("loadingFailed: {text}");
                if params.get("canceled").and_then(Value::as_bool) == Some(true) {
                    reason.push_str(" (canceled)");
                }
                if let Some(b) = str_of(params, "blockedReason") {
                    reason.push_str(&format!(" (blocked: {b})"));
                }
                hop.failed = Some(reason);
            }
            "Network.requestServedFromCache" => hop.from_cache = true,
            _ => {}
        }
        Ok(())
    }

    /// A request (or the next hop of a redirect chain): which page it
    /// belongs to, how it was discovered and by which object.
    fn request_will_be_sent(
        &mut self,
        ctx: &Ctx<'_>,
        frames: &FrameTree,
        i: usize,
        params: &Value,
        rid: String,
    ) -> Result<(), ImportError> {
        let request = match params.get("request") {
            Some(r @ Value::Object(_)) => r,
            Some(other) => {
                return Err(ctx.bad(
                    i,
                    format!("[{i}].params.request"),
                    format!("should be an object, found {}", type_name(other)),
                ))
            }
            None => return Err(ctx.missing(i, format!("[{i}].params.request"))),
        };
        let url = match request.get("url") {
            Some(Value::String(s)) if !s.trim().is_empty() => strip_fragment(s.trim()).to_string(),
            Some(Value::String(_)) => {
                return Err(ctx.bad(i, format!("[{i}].params.request.url"), "is empty"))
            }
            Some(other) => {
                return Err(ctx.bad(
                    i,
                    format!("[{i}].params.request.url"),
                    format!("should be a string, found {}", type_name(other)),
                ))
            }
            None => return Err(ctx.missing(i, format!("[{i}].params.request.url"))),
        };
        let redirect = match params.get("redirectResponse") {
            None | Some(Value::Null) => None,
            Some(r @ Value::Object(_)) => Some(resp_info(ctx, i, "redirectResponse", r)?),
            Some(other) => {
                return Err(ctx.bad(
                    i,
                    format!("[{i}].params.redirectResponse"),
                    format!("should be an object, found {}", type_name(other)),
                ))
            }
        };
        // Close the previous hop of a redirect chain.
        let mut prev: Option<usize> = None;
        if let Some(info) = &redirect {
            if let Some(&h) = self.current.get(&rid) {
                if let Some(hop) = self.hops.get_mut(h) {
                    hop.total = info.edl;
                    hop.finished = true;
                    hop.is_redirect_hop_closed = true;
                    hop.resp_edl = info.edl;
                    hop.headers_text_len = info.headers_text_len;
                    hop.header_estimate = info.estimate;
                    hop.from_cache |= info.from_cache;
                    if let Some(o) = self
                        .pages
                        .get_mut(hop.page)
                        .and_then(|p| p.objects.get_mut(hop.obj))
                    {
                        o.content_type = info.mime.clone();
                        o.last_modified = info.last_modified.clone();
                        o.etag = info.etag.clone();
                        o.recorded = Recorded {
                            location: Some(url.clone()),
                            ..info.recorded.clone()
                        };
                    }
                }
                prev = Some(h);
            }
        }
        if !is_network_url(&url) {
            self.skipped += 1;
            self.skipped_ids.insert(rid.clone());
            self.current.remove(&rid);
            return Ok(());
        }
        self.skipped_ids.remove(&rid);
        let frame = str_of(params, "frameId");
        let is_nav = prev.is_none()
            && redirect.is_none()
            && str_of(params, "type") == Some("Document")
            && frames.is_top(frame);

        let (page_idx, discovery, parent) = if is_nav {
            let top = frame.map(|f| frames.top_of(f));
            if let Some(t) = &top {
                self.page_of_top.insert(t.clone(), self.pages.len());
            }
            self.pages.push(PageB {
                url: url.clone(),
                objects: Vec::new(),
                by_url: UrlIndex::default(),
            });
            (self.pages.len() - 1, Discovery::Document, None)
        } else if let Some(prev_hop) = prev.and_then(|h| self.hops.get(h)) {
            (prev_hop.page, Discovery::Other, Some(prev_hop.obj))
        } else {
            let top = frame.map(|f| frames.top_of(f));
            let page_idx = match top.as_ref().and_then(|t| self.page_of_top.get(t)) {
                Some(&p) => p,
                None if !self.pages.is_empty() => self.pages.len() - 1,
                None => {
                    let doc_url = str_of(params, "documentURL")
                        .map(|d| strip_fragment(d).to_string())
                        .filter(|d| is_network_url(d))
                        .unwrap_or_else(|| url.clone());
                    if let Some(t) = &top {
                        self.page_of_top.insert(t.clone(), self.pages.len());
                    }
                    self.pages.push(PageB {
                        url: doc_url,
                        objects: Vec::new(),
                        by_url: UrlIndex::default(),
                    });
                    self.pages.len() - 1
                }
            };
            let initiator = params.get("initiator");
            let init_type = initiator.and_then(|x| str_of(x, "type"));
            let init_url = initiator.and_then(|x| {
                str_of(x, "url")
                    .filter(|u| !u.is_empty())
                    .map(str::to_string)
                    .or_else(|| x.get("stack").and_then(stack_url))
            });
            let parent = match (init_url, self.pages.get(page_idx)) {
                (Some(u), Some(p)) => p.by_url.latest(&u),
                _ => None,
            };
            (page_idx, discovery_of(init_type), parent)
        };
        let Some(page) = self.pages.get_mut(page_idx) else {
            return Ok(());
        };
        let host = host_of(&url).unwrap_or_default();
        page.by_url.insert(&url, page.objects.len());
        page.objects.push(ObjectMeta {
            url,
            host,
            size: None,
            content_type: None,
            last_modified: None,
            etag: None,
            discovery,
            parent,
            recorded: Recorded::default(),
        });
        let hop_no = prev
            .and_then(|h| self.hops.get(h))
            .map_or(0, |h| h.hop_no + 1);
        self.hops.push(Hop {
            page: page_idx,
            obj: page.objects.len() - 1,
            event_index: i,
            request_id: rid.clone(),
            hop_no,
            resp_edl: None,
            headers_text_len: None,
            header_estimate: 0,
            total: None,
            finished: false,
            data_sum: None,
            failed: None,
            from_cache: false,
            is_redirect_hop_closed: false,
        });
        self.current.insert(rid, self.hops.len() - 1);
        Ok(())
    }

    /// Pass 3: every hop's body size by the rule of [`import_cdp`], the
    /// pages, and the notes.
    fn into_report(mut self, input: &str) -> Result<ImportReport, ImportError> {
        if self.pages.is_empty() {
            return Err(ImportError::Empty {
                input: input.to_string(),
                reason: "no Network.requestWillBeSent for an http(s) URL".to_string(),
            });
        }
        let mut report = ImportReport {
            skipped: self.skipped,
            ..ImportReport::default()
        };
        let mut tallies: Vec<Tally> = self.pages.iter().map(|_| Tally::default()).collect();
        for hop in &self.hops {
            let headers_text = hop.headers_text_len.filter(|l| *l > 0).or_else(|| {
                self.extra
                    .get(&hop.request_id)
                    .and_then(|v| v.get(hop.hop_no))
                    .copied()
                    .flatten()
                    .filter(|l| *l > 0)
            });
            let outcome: Result<(u64, SizeBasis), String> = if let Some(reason) = &hop.failed {
                Err(reason.clone())
            } else if !hop.finished {
                Err("no Network.loadingFinished (unfinished when the log ended)".to_string())
            } else {
                match hop.total {
                    Some(total) => {
                        body_size(total, hop.resp_edl, headers_text, hop.header_estimate)
                            .ok_or_else(|| format!("negative encodedDataLength {total}"))
                    }
                    None => match hop.data_sum {
                        Some(sum) if !hop.is_redirect_hop_closed => {
                            Ok((sum.max(0) as u64, SizeBasis::CdpDataReceivedSum))
                        }
                        _ => Err("no encodedDataLength recorded".to_string()),
                    },
                }
            };
            let Some(page) = self.pages.get_mut(hop.page) else {
                continue;
            };
            let page_url = page.url.clone();
            let Some(obj) = page.objects.get_mut(hop.obj) else {
                continue;
            };
            match outcome {
                Ok((size, basis)) => {
                    obj.size = Some(size);
                    if let Some(t) = tallies.get_mut(hop.page) {
                        t.add(if hop.from_cache {
                            SizeBasis::CacheHit
                        } else {
                            basis
                        });
                    }
                }
                Err(reason) => report.missing_sizes.push(MissingSize {
                    page_url,
                    object_url: obj.url.clone(),
                    entry_index: hop.event_index,
                    reason,
                }),
            }
        }
        for (n, (page, tally)) in self.pages.into_iter().zip(tallies).enumerate() {
            report
                .notes
                .extend(tally.notes(&format!("page {} ({})", n + 1, page.url)));
            if page.objects.is_empty() {
                return Err(ImportError::EmptyPage {
                    input: input.to_string(),
                    page: page.url,
                });
            }
            report.pages.push(PageMeta {
                url: page.url,
                objects: page.objects,
                computation_ms: None,
            });
        }
        if self.skipped > 0 {
            report.notes.push(format!(
                "{input}: {} non-network request{} (data:, blob:, …) skipped",
                self.skipped,
                if self.skipped == 1 { "" } else { "s" }
            ));
        }
        if self.orphan_events > 0 {
            report.notes.push(format!(
                "{input}: {} network event{} for requests without Network.requestWillBeSent ignored",
                self.orphan_events,
                if self.orphan_events == 1 { "" } else { "s" }
            ));
        }
        Ok(report)
    }
}

/// The body-size rule documented on [`import_cdp`].
fn body_size(
    total: i64,
    resp_edl: Option<i64>,
    headers_text: Option<u64>,
    estimate: u64,
) -> Option<(u64, SizeBasis)> {
    let total = u64::try_from(total).ok()?;
    if let Some(h) = headers_text.filter(|h| *h <= total) {
        return Some((total - h, SizeBasis::CdpMinusHeadersText));
    }
    if let Some(r) = resp_edl
        .and_then(|r| u64::try_from(r).ok())
        .filter(|r| *r <= total && *r <= estimate)
    {
        return Some((total - r, SizeBasis::CdpMinusResponseBytes));
    }
    Some((total, SizeBasis::CdpIncludingHeaders))
}

/// Reads a `Network.Response` object.
fn resp_info(ctx: &Ctx<'_>, i: usize, name: &str, r: &Value) -> Result<RespInfo, ImportError> {
    let edl = ctx.num(r.get("encodedDataLength"), i, || {
        format!("[{i}].params.{name}.encodedDataLength")
    })?;
    let headers: Option<&Map<String, Value>> = r.get("headers").and_then(Value::as_object);
    let header = |want: &str| -> Option<String> {
        headers?.iter().find_map(|(k, v)| {
            if k.eq_ignore_ascii_case(want) {
                v.as_str().map(str::to_string)
            } else {
                None
            }
        })
    };
    let value_len = |v: &Value| v.as_str().map_or_else(|| v.to_string().len(), str::len);
    let status_line = "HTTP/1.1 200 \r\n".len() + str_of(r, "statusText").map_or(0, str::len);
    let estimate = headers.map_or(0, |h| {
        h.iter()
            .map(|(k, v)| k.len() + 2 + value_len(v) + 2)
            .sum::<usize>()
    }) + status_line
        + 2;
    let from_cache = ["fromDiskCache", "fromPrefetchCache"]
        .iter()
        .any(|k| r.get(*k).and_then(Value::as_bool) == Some(true));
    Ok(RespInfo {
        mime: str_of(r, "mimeType")
            .and_then(mime_essence)
            .or_else(|| header("content-type").as_deref().and_then(mime_essence)),
        last_modified: header("last-modified"),
        etag: header("etag"),
        edl,
        headers_text_len: str_of(r, "headersText")
            .map(|t| t.len() as u64)
            .filter(|l| *l > 0),
        estimate: estimate as u64,
        from_cache,
        recorded: cdp_recorded(r),
    })
}

/// The replay facts of a response ([`Recorded`]; the redirect target is
/// filled in by the next hop). Read leniently, like the HAR importer.
fn cdp_recorded(r: &Value) -> Recorded {
    let timing = |k: &str| {
        r.get("timing")
            .and_then(|t| t.get(k))
            .and_then(Value::as_f64)
            .filter(|v| *v >= 0.0)
    };
    let connection = match r.get("connectionId") {
        Some(Value::Number(n)) if n.as_f64() != Some(0.0) => Some(n.to_string()),
        Some(Value::String(s)) if !s.is_empty() && s != "0" => Some(s.clone()),
        _ => None,
    };
    let span = |a: &str, b: &str| Some(timing(b)? - timing(a)?).filter(|d| *d >= 0.0);
    let tls = span("sslStart", "sslEnd").unwrap_or(0.0);
    Recorded {
        status: r
            .get("status")
            .and_then(Value::as_f64)
            .filter(|s| (100.0..1000.0).contains(s))
            .map(|s| s as u16),
        location: None,
        connection,
        wait_ms: Recorded::ms(span("sendEnd", "receiveHeadersEnd")),
        connect_ms: Recorded::ms(span("connectStart", "connectEnd").map(|c| (c - tls).max(0.0)))
            .filter(|c| *c > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn rws(id: &str, url: &str, ty: &str, frame: &str, initiator: Value) -> Value {
        json!({"method": "Network.requestWillBeSent", "params": {
            "requestId": id, "frameId": frame, "loaderId": "L1", "documentURL": "https://site.example/",
            "type": ty, "initiator": initiator, "request": {"url": url, "method": "GET"}}})
    }

    fn response(id: &str, mime: &str, edl: i64, headers: Value) -> Value {
        json!({"method": "Network.responseReceived", "params": {"requestId": id, "type": "Other",
            "response": {"url": "x", "status": 200, "mimeType": mime, "encodedDataLength": edl,
                         "protocol": "h2", "connectionId": 7, "headers": headers}}})
    }

    fn finished(id: &str, edl: i64) -> Value {
        json!({"method": "Network.loadingFinished", "params": {"requestId": id, "encodedDataLength": edl}})
    }

    /// A log with a redirected navigation, a parser-found script, a script-found
    /// image, a failed request and a data: URL.
    fn log() -> Value {
        json!([
            {"method": "Page.frameNavigated", "params": {"frame": {"id": "F", "loaderId": "L1", "url": "https://site.example/"}}},
            rws("1", "http://site.example/", "Document", "F", json!({"type": "other"})),
            {"method": "Network.requestWillBeSent", "params": {
                "requestId": "1", "frameId": "F", "type": "Document", "initiator": {"type": "other"},
                "request": {"url": "https://site.example/"},
                "redirectResponse": {"status": 307, "encodedDataLength": 0, "headers": {"Location": "https://site.example/"}, "mimeType": ""}}},
            response("1", "text/html", 150, json!({"ETag": "\"e1\"", "content-type": "text/html", "x-long-header": "a".repeat(200)})),
            {"method": "Network.dataReceived", "params": {"requestId": "1", "dataLength": 5000, "encodedDataLength": 2000}},
            finished("1", 2150),
            rws("2", "https://cdn.example/app.js", "Script", "F", json!({"type": "parser", "url": "https://site.example/", "lineNumber": 3})),
            response("2", "application/javascript", 16384, json!({"Last-Modified": "yesterday"})),
            finished("2", 40000),
            rws("3", "https://img.example/p.png#frag", "Image", "F",
                json!({"type": "script", "stack": {"callFrames": [], "parent": {"callFrames": [{"url": "https://cdn.example/app.js"}]}}})),
            response("3", "image/png", 100, json!({"server": "s".repeat(120)})),
            finished("3", 900),
            rws("4", "https://ads.example/x", "XHR", "F", json!({"type": "script", "url": "https://nowhere.example/"})),
            {"method": "Network.loadingFailed", "params": {"requestId": "4", "errorText": "net::ERR_ABORTED", "canceled": true}},
            rws("5", "data:image/png;base64,AAA", "Image", "F", json!({"type": "parser"})),
            finished("5", 0),
            rws("6", "https://late.example/never", "Fetch", "F", json!({"type": "preload"}))
        ])
    }

    #[test]
    fn sizes_discovery_parents_missing() {
        let r = import_cdp(&bytes(log()), "log.json").unwrap();
        assert_eq!(r.pages.len(), 1);
        let p = &r.pages[0];
        assert_eq!(p.url, "http://site.example/");
        let o = &p.objects;
        assert_eq!(o.len(), 6, "{o:#?}");
        // Redirect hop: internal 307 with 0 bytes.
        assert_eq!((o[0].discovery, o[0].size), (Discovery::Document, Some(0)));
        assert_eq!((o[1].discovery, o[1].parent), (Discovery::Other, Some(0)));
        // 150 response bytes fit the header block: subtracted.
        assert_eq!(o[1].size, Some(2000));
        assert_eq!(o[1].etag.as_deref(), Some("\"e1\""));
        assert_eq!(o[1].content_type.as_deref(), Some("text/html"));
        // 16384 bytes at response time include body bytes: nothing subtracted.
        assert_eq!(
            (o[2].discovery, o[2].parent, o[2].size),
            (Discovery::Parser, Some(1), Some(40000))
        );
        assert_eq!(o[2].last_modified.as_deref(), Some("yesterday"));
        assert_eq!(o[3].url, "https://img.example/p.png");
        assert_eq!(
            (o[3].discovery, o[3].parent, o[3].size),
            (Discovery::Script, Some(2), Some(800))
        );
        assert_eq!(
            (o[4].discovery, o[4].parent, o[4].size),
            (Discovery::Script, None, None)
        );
        assert_eq!((o[5].discovery, o[5].size), (Discovery::Other, None));
        assert_eq!(r.skipped, 1);
        assert_eq!(r.missing_sizes.len(), 2);
        assert_eq!(r.missing_sizes[0].object_url, "https://ads.example/x");
        assert_eq!(
            r.missing_sizes[0].reason,
            "loadingFailed: net::ERR_ABORTED (canceled)"
        );
        assert_eq!(r.missing_sizes[0].entry_index, 12);
        assert!(r.missing_sizes[1].reason.contains("unfinished"));
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("1 object sized from loadingFinished")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn headers_text_is_exact() {
        let v = json!([
            rws("1", "https://a.example/", "Document", "F", json!({"type": "other"})),
            {"method": "Network.responseReceived", "params": {"requestId": "1",
                "response": {"status": 200, "mimeType": "text/html", "encodedDataLength": -1, "headersText": "HTTP/1.1 200 OK\r\nA: b\r\n\r\n", "headers": {"A": "b"}}}},
            finished("1", 1000)
        ]);
        let r = import_cdp(&bytes(v), "x").unwrap();
        assert_eq!(r.pages[0].objects[0].size, Some(1000 - 25));
    }

    #[test]
    fn two_navigations_two_pages() {
        let v = json!([
            {"method": "Page.frameNavigated", "params": {"frame": {"id": "A"}}},
            {"method": "Page.frameNavigated", "params": {"frame": {"id": "B"}}},
            {"method": "Page.frameAttached", "params": {"frameId": "C", "parentFrameId": "A"}},
            rws("1", "https://one.example/", "Document", "A", json!({"type": "other"})),
            finished("1", 10),
            rws("2", "https://one.example/a.css", "Stylesheet", "A", json!({"type": "parser", "url": "https://one.example/"})),
            finished("2", 20),
            rws("3", "https://two.example/", "Document", "B", json!({"type": "other"})),
            finished("3", 30),
            rws("4", "https://frame.example/", "Document", "C", json!({"type": "parser", "url": "https://one.example/"})),
            finished("4", 40),
            rws("5", "https://two.example/b.js", "Script", "B", json!({"type": "parser", "url": "https://two.example/"})),
            finished("5", 50)
        ]);
        let r = import_cdp(&bytes(v), "x").unwrap();
        assert_eq!(r.pages.len(), 2);
        assert_eq!(r.pages[0].url, "https://one.example/");
        // The iframe document of frame C belongs to the page of its top frame A.
        let urls: Vec<&str> = r.pages[0].objects.iter().map(|o| o.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://one.example/",
                "https://one.example/a.css",
                "https://frame.example/"
            ]
        );
        assert_eq!(r.pages[0].objects[2].discovery, Discovery::Parser);
        assert_eq!(r.pages[1].objects.len(), 2);
        assert_eq!(r.pages[1].objects[1].parent, Some(0));
        assert_eq!(r.pages[1].total_bytes(), 80);
    }

    #[test]
    fn log_without_navigation_is_one_page() {
        let v = json!({"events": [
            rws("1", "https://a.example/x.js", "Script", "F", json!({"type": "parser", "url": "https://a.example/"})),
            finished("1", 10)
        ]});
        let r = import_cdp(&bytes(v), "x").unwrap();
        assert_eq!(r.pages.len(), 1);
        assert_eq!(r.pages[0].url, "https://site.example/");
        assert_eq!(r.pages[0].objects[0].discovery, Discovery::Parser);
    }

    #[test]
    fn errors() {
        let e = import_cdp(b"[{\"method\": \"Network.requestWillBeSent\", ", "t.json").unwrap_err();
        assert!(matches!(e, ImportError::Json { .. }), "{e:?}");
        let e = import_cdp(b"{\"a\": 1}", "t.json").unwrap_err();
        assert!(matches!(e, ImportError::NotCdp { .. }), "{e:?}");
        let e = import_cdp(b"[1, 2]", "t.json").unwrap_err();
        assert!(matches!(e, ImportError::NotCdp { .. }), "{e:?}");
        let e = import_cdp(b"[]", "t.json").unwrap_err();
        assert!(matches!(e, ImportError::Empty { .. }), "{e:?}");
        let e = import_cdp(
            br#"[{"method": "Page.loadEventFired", "params": {}}]"#,
            "t.json",
        )
        .unwrap_err();
        assert!(matches!(e, ImportError::Empty { .. }), "{e:?}");

        let e = import_cdp(
            br#"[{"method": "Network.requestWillBeSent", "params": {"requestId": "1", "request": {"method": "GET"}}}]"#,
            "t.json",
        )
        .unwrap_err();
        assert_eq!(
            e,
            ImportError::MissingField {
                input: "t.json".into(),
                entry: 0,
                field: "[0].params.request.url".into()
            }
        );
        let e = import_cdp(
            br#"[{"method": "Network.requestWillBeSent", "params": {"requestId": "1", "request": {"url": "https://a/"}}},
                 {"method": "Network.loadingFinished", "params": {"requestId": "1", "encodedDataLength": "lots"}}]"#,
            "t.json",
        )
        .unwrap_err();
        assert!(
            matches!(e, ImportError::BadField { entry: 1, ref field, .. } if field == "[1].params.encodedDataLength"),
            "{e:?}"
        );
        let e = import_cdp(
            br#"[{"method": "Network.loadingFinished", "params": {"encodedDataLength": 1}}]"#,
            "t.json",
        )
        .unwrap_err();
        assert!(matches!(e, ImportError::MissingField { .. }), "{e:?}");
        let e = import_cdp(
            br#"[{"method": "Network.loadingFinished", "params": 5}]"#,
            "t.json",
        )
        .unwrap_err();
        assert!(matches!(e, ImportError::BadField { .. }), "{e:?}");
        let e = import_cdp(br#"[{"method": "Network.dataReceived"}, 3]"#, "t.json").unwrap_err();
        assert!(matches!(e, ImportError::MissingField { .. }), "{e:?}");
    }

    #[test]
    fn body_size_rule() {
        assert_eq!(
            body_size(1000, Some(300), None, 500),
            Some((700, SizeBasis::CdpMinusResponseBytes))
        );
        assert_eq!(
            body_size(1000, Some(600), None, 500),
            Some((1000, SizeBasis::CdpIncludingHeaders))
        );
        assert_eq!(
            body_size(1000, Some(-1), Some(250), 0),
            Some((750, SizeBasis::CdpMinusHeadersText))
        );
        assert_eq!(
            body_size(100, None, Some(250), 0),
            Some((100, SizeBasis::CdpIncludingHeaders))
        );
        assert_eq!(body_size(-1, None, None, 0), None);
    }
}
