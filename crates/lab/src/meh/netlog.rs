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
    let v: serde_json::Value =
        serde_json::from_slice(netlog).map_err(|e| NetlogError::NotJson(e.to_string()))?;
    let c = &v["constants"];
    let start = c["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .ok_or(NetlogError::Missing("URL_REQUEST_START_JOB"))?;
    let url_request = c["logSourceType"]["URL_REQUEST"]
        .as_u64()
        .ok_or(NetlogError::Missing("the URL_REQUEST source type"))?;
    let events = v["events"]
        .as_array()
        .ok_or(NetlogError::Missing("events"))?;
    let scheme = page.main.split("://").next().unwrap_or("http");
    let mine: std::collections::HashSet<String> =
        page.objects.iter().map(|o| o.url(scheme)).collect();
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
        if !mine.contains(url) {
            continue;
        }
        url_of.entry(id).or_insert(url);
        if let Some(t) = time(e) {
            asked = asked.max(t);
            if url == page.main {
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
        };
        Page {
            name: "p".into(),
            main: "http://www.p.example/".into(),
            objects: vec![o(0, "/", None), o(1, "/a.png", Some(0))],
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
}
