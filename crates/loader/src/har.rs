//! Load records as HAR 1.2 (pure), so that existing tools (Chrome DevTools,
//! HAR viewers, WebPageTest's analysers, and our own HAR importer,
//! `mewa_hint::import::import_har`) read them.
//!
//! One HAR page per [`LoadRecord`], entries linked to it by `pageref`. The
//! spec is <http://www.softwareishard.com/blog/har-12-spec/>; where it leaves
//! a choice we follow what Chrome writes:
//!
//! - `startedDateTime`: RFC 3339 UTC with milliseconds; a page starts at
//!   [`LoadRecord::started_unix_ms`], an entry when the loader discovered the
//!   object (Chrome's "request will be sent").
//! - `timings` in ms with µs precision: `blocked` = discovery → request minus
//!   the connection setup the entry paid for; `dns` −1 (the loader resolves
//!   once per load, before any entry); `connect` and `ssl` only on the entry
//!   that opened its connection (its first request), −1 elsewhere, and per
//!   the spec `connect` *includes* `ssl`; `send` 0 (the request is handed
//!   over in one go); `wait` = request → first byte; `receive` = first byte
//!   → last byte.
//! - `time` is the sum of the non-negative timings *except `ssl`*, which the
//!   spec counts inside `connect` already ("If this field is defined then the
//!   time is also included in the connect field").
//! - `connection` is the connection id as a string and `_transferSize` the
//!   head plus body bytes (Chrome's fields); `serverIPAddress` is the peer
//!   address without its port.

use mewa_report::time::rfc3339_ms;
use serde_json::{json, Value};

use crate::record::{ConnectionTiming, LoadRecord, ObjectTiming};

/// The HAR 1.2 document for `records`: one page per record, in order.
pub fn to_har(records: &[LoadRecord]) -> Value {
    let mut pages = Vec::with_capacity(records.len());
    let mut entries = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let page_id = format!("page_{}", i + 1);
        pages.push(json!({
            "startedDateTime": rfc3339_ms(record.started_unix_ms),
            "id": page_id,
            "title": record.url,
            "pageTimings": {
                "onContentLoad": -1,
                "onLoad": record.done_us.map_or(-1.0, ms),
            },
            "comment": format!("mewa page `{}` over {}", record.page, record.protocol),
        }));
        let mut objects: Vec<(usize, &ObjectTiming)> = record.objects.iter().enumerate().collect();
        objects.sort_by_key(|&(i, o)| (o.discovered_us, i));
        for (index, object) in objects {
            entries.push(entry(record, &page_id, index, object));
        }
    }
    json!({
        "log": {
            "version": "1.2",
            "creator": {"name": "mewa", "version": env!("CARGO_PKG_VERSION")},
            "pages": pages,
            "entries": entries,
        }
    })
}

/// µs → ms with µs precision.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// `b − a` in ms, or `None` when either is missing or `b < a`.
fn span(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b >= a => Some(ms(b - a)),
        _ => None,
    }
}

/// The HAR `timings` object of one entry, and its `time`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timings {
    /// Discovery → request minus the connection setup this entry paid for.
    pub blocked: f64,
    /// Always −1: name resolution is not per entry.
    pub dns: f64,
    /// Connection setup including TLS, on the opening entry; −1 elsewhere.
    pub connect: f64,
    /// TLS (for QUIC, the whole handshake), on the opening entry of a TLS
    /// connection; −1 elsewhere.
    pub ssl: f64,
    /// Always 0.
    pub send: f64,
    /// Request → first byte (0 without a response).
    pub wait: f64,
    /// First byte → last byte (0 without a response).
    pub receive: f64,
}

impl Timings {
    /// The entry's `time`: every non-negative timing except `ssl`, which
    /// `connect` includes.
    pub fn total(&self) -> f64 {
        [
            self.blocked,
            self.dns,
            self.connect,
            self.send,
            self.wait,
            self.receive,
        ]
        .iter()
        .filter(|t| **t >= 0.0)
        .sum()
    }
}

/// Whether `object` is the one that opened `conn`: its earliest request
/// (the earlier in the record on a tie).
fn opened(record: &LoadRecord, index: usize, object: &ObjectTiming) -> bool {
    let Some(c) = object.connection else {
        return false;
    };
    record
        .objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o.connection == Some(c))
        .min_by_key(|(i, o)| (o.request_us, *i))
        .is_some_and(|(i, _)| i == index)
}

/// The timings of the record's `index`-th object.
pub fn timings(record: &LoadRecord, index: usize) -> Option<Timings> {
    let object = record.objects.get(index)?;
    let conn = connection_of(record, object);
    let (connect, ssl) = match conn {
        Some(c) if opened(record, index, object) => {
            let connect = span(Some(c.open_us), c.ready_us.or(c.connected_us));
            let ssl = if c.tls {
                match c.protocol {
                    // QUIC: the crypto handshake is the transport handshake.
                    crate::record::Protocol::H3 => span(Some(c.open_us), c.connected_us),
                    _ => span(c.connected_us, c.ready_us),
                }
            } else {
                None
            };
            let connect = connect.unwrap_or(-1.0);
            // ssl is part of connect, so never larger.
            let ssl = ssl.map_or(-1.0, |s| if connect >= 0.0 { s.min(connect) } else { s });
            (connect, ssl)
        }
        _ => (-1.0, -1.0),
    };
    let waited = ms(object.request_us.saturating_sub(object.discovered_us));
    let blocked = (waited - connect.max(0.0)).max(0.0);
    let last = object
        .end_us
        .or_else(|| object.chunks.iter().map(|c| c.t_us).max());
    let wait = span(Some(object.request_us), object.first_byte_us).unwrap_or(0.0);
    let receive = span(object.first_byte_us, last).unwrap_or(0.0);
    Some(Timings {
        blocked,
        dns: -1.0,
        connect,
        ssl,
        send: 0.0,
        wait,
        receive,
    })
}

/// The connection that carried `object`, if it is in the record.
fn connection_of<'r>(
    record: &'r LoadRecord,
    object: &ObjectTiming,
) -> Option<&'r ConnectionTiming> {
    let id = object.connection?;
    record.connections.iter().find(|c| c.id == id)
}

/// The peer address without its port: `10.0.0.2:443` → `10.0.0.2`,
/// `[::1]:443` → `::1`; anything else verbatim.
pub fn ip_of(addr: &str) -> String {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(sa) => sa.ip().to_string(),
        Err(_) => addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    }
}

/// One HAR entry.
fn entry(record: &LoadRecord, page_id: &str, index: usize, o: &ObjectTiming) -> Value {
    let conn = connection_of(record, o);
    let http_version = conn.map_or(record.protocol, |c| c.protocol).alpn();
    let t = timings(record, index).unwrap_or(Timings {
        blocked: -1.0,
        dns: -1.0,
        connect: -1.0,
        ssl: -1.0,
        send: 0.0,
        wait: 0.0,
        receive: 0.0,
    });
    let responded = o.first_byte_us.is_some() && o.status != 0;
    let status_text = http::StatusCode::from_u16(o.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    // Chrome writes 0 for a request that never got a response.
    let transfer = if responded {
        o.header_bytes.saturating_add(o.body_bytes)
    } else {
        0
    };
    let mut e = json!({
        "pageref": page_id,
        "startedDateTime": rfc3339_ms(record.started_unix_ms.saturating_add(o.discovered_us / 1000)),
        "time": t.total(),
        "request": {
            "method": "GET",
            "url": o.url,
            "httpVersion": http_version,
            "cookies": [],
            "headers": [],
            "queryString": [],
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": {
            "status": o.status,
            "statusText": status_text,
            "httpVersion": http_version,
            "cookies": [],
            "headers": [{"name": "content-type", "value": o.content_type}],
            "content": {"size": o.body_bytes, "mimeType": o.content_type},
            "redirectURL": "",
            "headersSize": if responded { o.header_bytes as i64 } else { -1 },
            "bodySize": if responded { o.body_bytes as i64 } else { -1 },
            "_transferSize": transfer,
        },
        "cache": {},
        "timings": {
            "blocked": t.blocked,
            "dns": t.dns,
            "connect": t.connect,
            "ssl": t.ssl,
            "send": t.send,
            "wait": t.wait,
            "receive": t.receive,
        },
        "_transferSize": transfer,
    });
    if let (Some(map), Some(c)) = (e.as_object_mut(), conn) {
        map.insert("connection".into(), Value::String(c.id.to_string()));
        map.insert("serverIPAddress".into(), Value::String(ip_of(&c.addr)));
    }
    if let (Some(map), Some(err)) = (e.as_object_mut(), &o.error) {
        map.insert("_error".into(), Value::String(err.clone()));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{arb_record, conn, obj, record};
    use proptest::prelude::*;

    #[test]
    fn ips() {
        assert_eq!(ip_of("10.0.0.2:443"), "10.0.0.2");
        assert_eq!(ip_of("[::1]:8443"), "::1");
        assert_eq!(ip_of("10.0.0.2"), "10.0.0.2");
    }

    fn sample() -> LoadRecord {
        let mut r = record(
            vec![
                obj(
                    0,
                    Some(0),
                    1_000,
                    Some(60_000),
                    Some(80_000),
                    &[(70_000, 5_000), (80_000, 3_000)],
                ),
                obj(
                    1,
                    Some(0),
                    90_000,
                    Some(120_000),
                    Some(130_000),
                    &[(130_000, 700)],
                ),
                obj(
                    2,
                    Some(1),
                    95_000,
                    Some(150_000),
                    Some(160_000),
                    &[(160_000, 1_234)],
                ),
                obj(3, None, 95_000, None, None, &[]),
            ],
            vec![conn(0, 0, Some(200_000)), conn(1, 90_000, None)],
        );
        r.objects[0].discovered_us = 0;
        r.objects[2].discovered_us = 80_000;
        r.objects[3].status = 0;
        r.objects[3].error = Some("refused".into());
        r.connections[1].addr = "[fd00::2]:443".into();
        r
    }

    #[test]
    fn shape_and_timings() {
        let r = sample();
        let har = to_har(std::slice::from_ref(&r));
        let log = &har["log"];
        assert_eq!(log["version"], "1.2");
        assert_eq!(log["creator"]["name"], "mewa");
        assert_eq!(log["pages"][0]["id"], "page_1");
        assert_eq!(log["pages"][0]["pageTimings"]["onLoad"], 160.0);
        let e = log["entries"].as_array().unwrap();
        assert_eq!(e.len(), 4);
        // Entry 0 opened conn 0: connect 10 µs incl. ssl 5 µs; blocked 1 ms − 0.01.
        let t0 = &e[0]["timings"];
        assert_eq!(t0["connect"], 0.01);
        assert_eq!(t0["ssl"], 0.005);
        assert!((t0["blocked"].as_f64().unwrap() - 0.99).abs() < 1e-9);
        assert_eq!(t0["wait"], 59.0);
        assert_eq!(t0["receive"], 20.0);
        assert_eq!(e[0]["connection"], "0");
        assert_eq!(e[0]["serverIPAddress"], "10.0.0.2");
        assert_eq!(e[0]["response"]["_transferSize"], 8_100);
        assert_eq!(e[0]["response"]["statusText"], "OK");
        // Entries are in discovery order: object 2 (which opened conn 1)
        // before object 1 (which reused conn 0).
        assert_eq!(e[1]["request"]["url"], "https://a.example/2");
        assert_eq!(e[1]["serverIPAddress"], "fd00::2");
        assert_eq!(e[1]["timings"]["connect"], 0.01);
        assert_eq!(e[2]["request"]["url"], "https://a.example/1");
        assert_eq!(e[2]["timings"]["connect"], -1.0);
        assert_eq!(e[2]["timings"]["ssl"], -1.0);
        // The failed entry has no connection and no response sizes.
        assert!(e[3].get("connection").is_none());
        assert_eq!(e[3]["response"]["bodySize"], -1);
        assert_eq!(e[3]["_error"], "refused");
        assert_eq!(e[0]["pageref"], "page_1");
    }

    /// Checks the HAR rules on every entry: timings non-negative or −1
    /// (send, wait, receive never −1), `time` = sum without `ssl`, `ssl` ≤
    /// `connect`.
    fn check_entries(har: &Value) -> Result<(), TestCaseError> {
        for e in har["log"]["entries"].as_array().unwrap() {
            let t = &e["timings"];
            let get = |k: &str| t[k].as_f64().unwrap();
            let mut sum = 0.0;
            for k in [
                "blocked", "dns", "connect", "ssl", "send", "wait", "receive",
            ] {
                let v = get(k);
                prop_assert!(v >= 0.0 || v == -1.0, "{k} = {v}");
                if k != "ssl" && v >= 0.0 {
                    sum += v;
                }
            }
            for k in ["send", "wait", "receive"] {
                prop_assert!(get(k) >= 0.0);
            }
            if get("ssl") >= 0.0 {
                prop_assert!(get("connect") >= get("ssl"));
            }
            prop_assert!((e["time"].as_f64().unwrap() - sum).abs() < 1e-6);
            prop_assert!(e["startedDateTime"].as_str().unwrap().ends_with('Z'));
        }
        Ok(())
    }

    #[test]
    fn sample_entries_follow_rules() {
        check_entries(&to_har(&[sample()])).unwrap();
    }

    /// The export reads back through the project's own HAR importer: one
    /// page per record, URLs and body sizes intact.
    #[test]
    fn round_trips_through_hint_importer() {
        let mut second = sample();
        second.url = "https://b.example/".into();
        for (i, o) in second.objects.iter_mut().enumerate() {
            o.url = format!("https://b.example/{i}.js");
        }
        let records = [sample(), second];
        let bytes = serde_json::to_vec(&to_har(&records)).unwrap();
        let report = mewa_hint::import::import_har(&bytes, "mewa-export").unwrap();
        assert_eq!(report.pages.len(), 2);
        for (page, record) in report.pages.iter().zip(&records) {
            assert_eq!(page.url, record.url);
            assert_eq!(page.objects.len(), record.objects.len());
            for o in &record.objects {
                let m = page.objects.iter().find(|m| m.url == o.url).unwrap();
                if o.first_byte_us.is_some() {
                    assert_eq!(m.size, Some(o.body_bytes));
                    assert_eq!(m.content_type.as_deref(), Some(o.content_type.as_str()));
                } else {
                    // No response: Chrome-style `_transferSize` 0.
                    assert_eq!(m.size.unwrap_or(0), 0);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn random_records_follow_har_rules(r in arb_record(), started in 0u64..4_102_444_800_000) {
            let mut r = r;
            r.started_unix_ms = started;
            let har = to_har(&[r.clone(), r]);
            check_entries(&har)?;
            prop_assert_eq!(har["log"]["pages"].as_array().unwrap().len(), 2);
        }

    }
}
