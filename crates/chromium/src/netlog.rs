//! Reading a page's load out of a Chromium NetLog.

use std::collections::HashMap;

use mewa_corpus::Page;

/// Why a NetLog says nothing about a page's load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetlogError {
    /// The file is not JSON (Chromium was killed while writing it?).
    #[error("NetLog is not JSON: {0}")]
    NotJson(String),
    /// A constant or section the parser needs is absent.
    #[error("NetLog without {0}")]
    Missing(&'static str),
    /// No request for the page's URL (the page did not load at all).
    #[error("NetLog has no request for {0}")]
    NoRequest(String),
}

/// A NetLog read, with the two constants every question needs.
struct Parsed {
    json: serde_json::Value,
    /// Event type `URL_REQUEST_START_JOB` (one per job, redirects included).
    start: u64,
    /// Source type `URL_REQUEST`.
    url_request: u64,
}

impl Parsed {
    fn read(netlog: &[u8]) -> Result<Parsed, NetlogError> {
        let json: serde_json::Value =
            serde_json::from_slice(netlog).map_err(|e| NetlogError::NotJson(e.to_string()))?;
        let c = &json["constants"];
        let start = c["logEventTypes"]["URL_REQUEST_START_JOB"]
            .as_u64()
            .ok_or(NetlogError::Missing("URL_REQUEST_START_JOB"))?;
        let url_request = c["logSourceType"]["URL_REQUEST"]
            .as_u64()
            .ok_or(NetlogError::Missing("the URL_REQUEST source type"))?;
        Ok(Parsed {
            json,
            start,
            url_request,
        })
    }

    fn events(&self) -> Result<&Vec<serde_json::Value>, NetlogError> {
        self.json["events"]
            .as_array()
            .ok_or(NetlogError::Missing("events"))
    }
}

/// A page's load in a Chromium NetLog (seconds from the start of the
/// request for the page's URL).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetlogTimes {
    /// To the last event of any request for one of the page's objects.
    pub plt_s: f64,
    /// To the start of the last request for one of the page's objects.
    pub requested_s: f64,
}

/// A page's load in a Chromium NetLog: from the start of the request for
/// `page.main` to the last event of any request for one of the page's
/// objects, and to the start of the last such request.
///
/// Only the page's own requests count. Chromium makes requests of its own
/// at start-up (network time, account and update checks: 0.1–0.2 s before
/// the navigation in our runs, refused by the proxy) and asks for
/// `/favicon.ico` after the page; counting those added about 0.3 s to every
/// browser load, with or without the hint, and shrank the reduction.
pub fn netlog_times(netlog: &[u8], page: &Page) -> Result<NetlogTimes, NetlogError> {
    let v = Parsed::read(netlog)?;
    let (start, url_request, events) = (v.start, v.url_request, v.events()?);
    let mine: std::collections::HashSet<String> = page.objects.iter().map(|o| o.url("")).collect();
    let time = |e: &serde_json::Value| e["time"].as_str().and_then(|t| t.parse::<f64>().ok());
    // The URL of each request, from its start event (a request's first
    // events come before it, so this is a pass of its own).
    let mut url_of: HashMap<u64, &str> = HashMap::new();
    let (mut first, mut asked) = (f64::MAX, f64::MIN);
    for e in events {
        if e["source"]["type"].as_u64() != Some(url_request) || e["type"].as_u64() != Some(start) {
            continue;
        }
        let (Some(id), Some(url)) = (e["source"]["id"].as_u64(), e["params"]["url"].as_str())
        else {
            continue;
        };
        if !mine.contains(&without_scheme(url)) {
            continue;
        }
        url_of.entry(id).or_insert(url);
        if let Some(t) = time(e) {
            asked = asked.max(t);
            if without_scheme(url) == without_scheme(&page.main) {
                first = first.min(t);
            }
        }
    }
    if first == f64::MAX {
        return Err(NetlogError::NoRequest(page.main.clone()));
    }
    let last = events
        .iter()
        .filter(|e| e["source"]["type"].as_u64() == Some(url_request))
        .filter(|e| {
            e["source"]["id"]
                .as_u64()
                .is_some_and(|id| url_of.contains_key(&id))
        })
        .filter_map(time)
        .fold(first, f64::max);
    Ok(NetlogTimes {
        plt_s: (last - first) / 1000.0,
        requested_s: (asked.max(first) - first) / 1000.0,
    })
}

/// The NetLog of one navigation of a browser that made several (a
/// returning visitor's warm-up visits, then the measured one): the events
/// from `epoch_ms` (the navigation's start, `performance.timeOrigin`) on,
/// less `slack_ms` for the two clocks' rounding. The NetLog's
/// `timeTickOffset` places its event times on the wall clock.
pub fn netlog_after(netlog: &[u8], epoch_ms: f64, slack_ms: f64) -> Result<Vec<u8>, NetlogError> {
    let mut v: serde_json::Value =
        serde_json::from_slice(netlog).map_err(|e| NetlogError::NotJson(e.to_string()))?;
    let offset = match &v["constants"]["timeTickOffset"] {
        serde_json::Value::String(s) => s.parse::<f64>().ok(),
        n => n.as_f64(),
    }
    .ok_or(NetlogError::Missing("timeTickOffset"))?;
    let from = epoch_ms - offset - slack_ms;
    let events = v["events"]
        .as_array_mut()
        .ok_or(NetlogError::Missing("events"))?;
    events.retain(|e| {
        e["time"]
            .as_str()
            .and_then(|t| t.parse::<f64>().ok())
            .is_some_and(|t| t >= from)
    });
    serde_json::to_vec(&v).map_err(|e| NetlogError::NotJson(e.to_string()))
}

/// What Chromium did for a page before the document's response arrived:
/// what it can only have learned elsewhere (its loading predictor, a 103
/// Early Hints response), since the page's HTML was not there yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EarlyActions {
    /// Hosts of the page other than the document's that Chromium
    /// preconnected to (`HTTP_STREAM_JOB_CONTROLLER` with `is_preconnect`)
    /// before the document's final response headers, sorted.
    pub preconnected: Vec<String>,
    /// The page's objects whose request started before the document's
    /// final response headers (preloads), as `://host/path`, sorted.
    pub requested: Vec<String>,
    /// Informational (1xx) responses to the document, e.g. 103 Early Hints.
    pub informational: usize,
}

/// [`EarlyActions`] of the page's load in `netlog` (one navigation: cut it
/// with [`netlog_after`] first when the browser made others).
pub fn early_actions(netlog: &[u8], page: &Page) -> Result<EarlyActions, NetlogError> {
    let v = Parsed::read(netlog)?;
    let (start, url_request, events) = (v.start, v.url_request, v.events()?);
    let types = &v.json["constants"]["logEventTypes"];
    let headers_read = types["HTTP_TRANSACTION_READ_RESPONSE_HEADERS"].as_u64();
    let early_hints = types["HTTP_TRANSACTION_READ_EARLY_HINTS_RESPONSE_HEADERS"].as_u64();
    let controller = types["HTTP_STREAM_JOB_CONTROLLER"].as_u64();
    let time = |e: &serde_json::Value| e["time"].as_str().and_then(|t| t.parse::<f64>().ok());
    let main = without_scheme(&page.main);
    let doc_host = mewa_hint::page::host_of(&page.main).unwrap_or_default();
    // The document's request: its source, then when its final response
    // headers came.
    let doc = events
        .iter()
        .find(|e| {
            e["type"].as_u64() == Some(start)
                && e["params"]["url"]
                    .as_str()
                    .is_some_and(|u| without_scheme(u) == main)
        })
        .and_then(|e| e["source"]["id"].as_u64())
        .ok_or_else(|| NetlogError::NoRequest(page.main.clone()))?;
    let mut informational = 0;
    let mut answered = f64::MAX;
    for e in events {
        if e["source"]["id"].as_u64() != Some(doc) {
            continue;
        }
        let ty = e["type"].as_u64();
        if early_hints.is_some() && ty == early_hints {
            informational += 1;
        } else if headers_read.is_some() && ty == headers_read {
            let status = e["params"]["headers"]
                .as_array()
                .and_then(|h| h.first())
                .and_then(serde_json::Value::as_str)
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|code| code.parse::<u16>().ok());
            match status {
                Some(s) if s < 200 => informational += 1,
                _ => {
                    if let Some(t) = time(e) {
                        answered = answered.min(t);
                    }
                }
            }
        }
    }
    let hosts: std::collections::HashSet<&str> = page.hosts().into_iter().collect();
    let mine: std::collections::HashSet<String> = page.objects.iter().map(|o| o.url("")).collect();
    let mut preconnected = std::collections::BTreeSet::new();
    let mut requested = std::collections::BTreeSet::new();
    for e in events {
        if !time(e).is_some_and(|t| t < answered) {
            continue;
        }
        let ty = e["type"].as_u64();
        let url = e["params"]["url"].as_str().unwrap_or("");
        if controller.is_some()
            && ty == controller
            && e["params"]["is_preconnect"].as_bool() == Some(true)
        {
            if let Some(h) = mewa_hint::page::host_of(url) {
                if h != doc_host && hosts.contains(h.as_str()) {
                    preconnected.insert(h);
                }
            }
        } else if ty == Some(start)
            && e["source"]["type"].as_u64() == Some(url_request)
            && e["source"]["id"].as_u64() != Some(doc)
        {
            let u = without_scheme(url);
            if mine.contains(&u) {
                requested.insert(u);
            }
        }
    }
    Ok(EarlyActions {
        preconnected: preconnected.into_iter().collect(),
        requested: requested.into_iter().collect(),
        informational,
    })
}

/// Which requests a Chromium NetLog shows, against a page's objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetlogRequests {
    /// Page URLs requested whose requests ended without a network error,
    /// with the HTTP status of their response when the NetLog has it.
    /// Keyed `://host/path` (as `Object::url("")` writes it), whatever the
    /// scheme Chromium used (it upgrades HSTS-preloaded pages).
    pub arrived: std::collections::BTreeMap<String, Option<u16>>,
    /// Page URLs whose request failed, with Chromium's `net_error`.
    pub failed: Vec<(String, i64)>,
    /// Requests on the page's hosts for URLs the page does not have (a
    /// recording's gaps, or Chromium's own `/favicon.ico`).
    pub unrecorded: Vec<String>,
}

/// `://host/path` of a URL: pages are matched whatever the scheme, as
/// Chromium upgrades `http://` to `https://` for HSTS-preloaded sites
/// (`www.wikipedia.org` and its subdomains) before any request.
fn without_scheme(url: &str) -> String {
    match url.split_once("://") {
        Some((_, rest)) => format!("://{rest}"),
        None => url.to_string(),
    }
}

/// One URL_REQUEST source of a NetLog.
#[derive(Default)]
struct Job {
    urls: Vec<String>,
    statuses: Vec<Option<u16>>,
    error: Option<i64>,
}

/// The page's requests in a NetLog: which of its objects arrived, which
/// failed, and what was asked for beyond them. A redirect's hops each
/// start a job of their own, so every hop counts.
pub fn netlog_requests(netlog: &[u8], page: &Page) -> Result<NetlogRequests, NetlogError> {
    let v = Parsed::read(netlog)?;
    let (start, url_request, events) = (v.start, v.url_request, v.events()?);
    let headers_read =
        v.json["constants"]["logEventTypes"]["HTTP_TRANSACTION_READ_RESPONSE_HEADERS"].as_u64();
    let mine: std::collections::HashSet<String> = page.objects.iter().map(|o| o.url("")).collect();
    // Per source: the URLs its jobs started, the statuses of the responses
    // it read (one per hop), and its network error.
    let mut jobs: HashMap<u64, Job> = HashMap::new();
    for e in events {
        if e["source"]["type"].as_u64() != Some(url_request) {
            continue;
        }
        let Some(id) = e["source"]["id"].as_u64() else {
            continue;
        };
        let entry = jobs.entry(id).or_default();
        if e["type"].as_u64() == Some(start) {
            if let Some(url) = e["params"]["url"].as_str() {
                entry.urls.push(url.to_string());
            }
        }
        if headers_read.is_some() && e["type"].as_u64() == headers_read {
            // `["HTTP/1.1 302", "location: …", …]` (Chromium writes a
            // status line for HTTP/2 and HTTP/3 too).
            let status = e["params"]["headers"]
                .as_array()
                .and_then(|h| h.first())
                .and_then(serde_json::Value::as_str)
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|code| code.parse::<u16>().ok());
            entry.statuses.push(status);
        }
        if let Some(err) = e["params"]["net_error"].as_i64().filter(|e| *e < 0) {
            entry.error = Some(err);
        }
    }
    let hosts: std::collections::HashSet<&str> = page.hosts().into_iter().collect();
    let mut out = NetlogRequests::default();
    for job in jobs.into_values() {
        let Job {
            urls,
            statuses,
            error: err,
        } = job;
        let last = urls.len().saturating_sub(1);
        for (i, url) in urls.into_iter().enumerate() {
            let status = statuses.get(i).copied().flatten();
            if !mine.contains(&without_scheme(&url)) {
                // Only the page's own hosts: Chromium's background checks
                // (update, time, accounts) go elsewhere and are not the page's.
                if mewa_hint::page::host_of(&url).is_some_and(|h| hosts.contains(h.as_str())) {
                    out.unrecorded.push(url);
                }
                continue;
            }
            // Only the last hop of a source can have failed.
            match err.filter(|_| i == last) {
                Some(code) => out.failed.push((url, code)),
                None => {
                    out.arrived.insert(without_scheme(&url), status);
                }
            }
        }
    }
    out.unrecorded.sort();
    out.failed.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::Object;

    /// A NetLog with the two constants the parser reads and URL-request
    /// events `(source id, event type, time ms, url)`; type 1 is the start.
    fn netlog(events: &[(u64, u64, f64, Option<&str>)]) -> Vec<u8> {
        let events: Vec<serde_json::Value> = events
            .iter()
            .map(|&(id, ty, t, url)| {
                let mut e = serde_json::json!({
                    "source": {"id": id, "type": 7},
                    "type": ty,
                    "time": format!("{t}"),
                });
                if let Some(u) = url {
                    e["params"] = serde_json::json!({ "url": u });
                }
                e
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "constants": {
                "logEventTypes": {"URL_REQUEST_START_JOB": 1, "OTHER": 2},
                "logSourceType": {"URL_REQUEST": 7},
            },
            "events": events,
        }))
        .unwrap_or_default()
    }

    fn page() -> Page {
        let o = |id, path: &str, parent| Object {
            id,
            host: "www.p.example".into(),
            path: path.into(),
            size: 1000,
            content_type: "text/html".into(),
            parent,
            discovery: mewa_corpus::Discovery::Html,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        };
        Page {
            name: "p".into(),
            main: "http://www.p.example/".into(),
            objects: vec![o(0, "/", None), o(1, "/a.png", Some(0))],
            shared_connections: Vec::new(),
        }
    }

    #[test]
    fn browser_plt_counts_the_page_own_requests_only() {
        let log = netlog(&[
            // Chromium's own start-up request, before the navigation.
            (1, 0, 900.0, None),
            (
                1,
                1,
                1000.0,
                Some("http://clients2.google.com/time/1/current"),
            ),
            (1, 2, 1100.0, None),
            // The page: its events before its start event count too.
            (2, 0, 1190.0, None),
            (2, 1, 1200.0, Some("http://www.p.example/")),
            (2, 2, 1450.0, None),
            (3, 1, 1460.0, Some("http://www.p.example/a.png")),
            (3, 2, 1700.0, None),
            // After the page: the favicon.
            (4, 1, 1800.0, Some("http://www.p.example/favicon.ico")),
            (4, 2, 1900.0, None),
        ]);
        let t = netlog_times(&log, &page()).map_err(|e| e.to_string());
        assert_eq!(
            t,
            Ok(NetlogTimes {
                plt_s: 0.5,
                requested_s: 0.26
            })
        );
        // Without the page's URL there is no load to time.
        let none = netlog(&[(1, 1, 1000.0, Some("http://www.p.example/a.png"))]);
        assert_eq!(
            netlog_times(&none, &page()).unwrap_err(),
            NetlogError::NoRequest("http://www.p.example/".into())
        );
        assert!(netlog_times(b"{", &page()).is_err());
    }

    /// A NetLog with typed events: `(source, type name, time, params)`.
    fn typed(events: &[(u64, &str, f64, serde_json::Value)]) -> Vec<u8> {
        let names = [
            "URL_REQUEST_START_JOB",
            "HTTP_TRANSACTION_READ_RESPONSE_HEADERS",
            "HTTP_STREAM_JOB_CONTROLLER",
        ];
        let id = |n: &str| {
            names
                .iter()
                .position(|x| *x == n)
                .map_or(99, |i| i as u64 + 1)
        };
        let events: Vec<serde_json::Value> = events
            .iter()
            .map(|(src, ty, t, p)| {
                serde_json::json!({
                    "source": {"id": src, "type": if *ty == "HTTP_STREAM_JOB_CONTROLLER" { 9 } else { 7 }},
                    "type": id(ty), "time": format!("{t}"), "params": p,
                })
            })
            .collect();
        let types: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .map(|n| (n.to_string(), serde_json::json!(id(n))))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "constants": {"logEventTypes": types, "logSourceType": {"URL_REQUEST": 7},
                          "timeTickOffset": "1000000"},
            "events": events,
        }))
        .unwrap_or_default()
    }

    #[test]
    fn early_actions_are_what_came_before_the_document() {
        let mut p = page();
        p.objects[1].host = "cdn.example".into();
        let log = typed(&[
            // A warm-up visit long before: cut away by netlog_after.
            (
                1,
                "HTTP_STREAM_JOB_CONTROLLER",
                100.0,
                serde_json::json!({"is_preconnect": true, "url": "https://cdn.example/x"}),
            ),
            (
                2,
                "HTTP_STREAM_JOB_CONTROLLER",
                5000.0,
                serde_json::json!({"is_preconnect": true, "url": "https://cdn.example/"}),
            ),
            (
                2,
                "HTTP_STREAM_JOB_CONTROLLER",
                5000.0,
                serde_json::json!({"is_preconnect": true, "url": "https://www.p.example/"}),
            ),
            (
                3,
                "URL_REQUEST_START_JOB",
                5001.0,
                serde_json::json!({"url": "http://www.p.example/"}),
            ),
            (
                3,
                "HTTP_TRANSACTION_READ_RESPONSE_HEADERS",
                5050.0,
                serde_json::json!({"headers": ["HTTP/1.1 103", "link: <https://cdn.example/a.png>"]}),
            ),
            (
                4,
                "URL_REQUEST_START_JOB",
                5060.0,
                serde_json::json!({"url": "https://cdn.example/a.png"}),
            ),
            (
                3,
                "HTTP_TRANSACTION_READ_RESPONSE_HEADERS",
                5100.0,
                serde_json::json!({"headers": ["HTTP/1.1 200"]}),
            ),
            // After the document: the page's own doing.
            (
                5,
                "HTTP_STREAM_JOB_CONTROLLER",
                5200.0,
                serde_json::json!({"is_preconnect": true, "url": "https://other.example/"}),
            ),
        ]);
        let cut = netlog_after(&log, 1_000_000.0 + 4990.0, 5.0).expect("cut");
        let a = early_actions(&cut, &p).expect("actions");
        assert_eq!(a.preconnected, ["cdn.example"]);
        assert_eq!(a.requested, ["://cdn.example/a.png"]);
        assert_eq!(a.informational, 1);
        // The whole log still has the warm-up's preconnect, before 4990.
        let whole = early_actions(&log, &p).expect("actions");
        assert_eq!(whole.preconnected, ["cdn.example"]);
        assert!(netlog_after(b"{}", 0.0, 0.0).is_err());
        assert!(early_actions(&typed(&[]), &p).is_err());
    }
}
