//! The importers must return `Ok` or `Err` on any input, never panic: random
//! bytes, random JSON built from the formats' own vocabulary (so that the
//! generator reaches deep into the parsers), and truncated real-shaped files.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

/// Keys the three formats use.
const KEYS: &[&str] = &[
    "log",
    "pages",
    "entries",
    "id",
    "title",
    "pageref",
    "request",
    "response",
    "url",
    "status",
    "headersSize",
    "bodySize",
    "_transferSize",
    "_bytesIn",
    "content",
    "size",
    "mimeType",
    "headers",
    "name",
    "value",
    "redirectURL",
    "_initiator",
    "_initiator_type",
    "_resourceType",
    "_fromCache",
    "type",
    "stack",
    "callFrames",
    "parent",
    "method",
    "params",
    "requestId",
    "frameId",
    "frame",
    "parentId",
    "parentFrameId",
    "initiator",
    "redirectResponse",
    "encodedDataLength",
    "headersText",
    "errorText",
    "canceled",
    "documentURL",
    "events",
    "traceEvents",
    "ph",
    "ts",
    "dur",
    "pid",
    "tid",
    "args",
    "data",
    "frames",
    "documentLoaderURL",
    "isLoadingMainFrame",
    "processId",
];

/// String values with meaning in the formats.
const STRINGS: &[&str] = &[
    "https://a.example/",
    "https://a.example/x.js",
    "/relative",
    "data:,x",
    "blob:https://a.example/1",
    "Document",
    "parser",
    "script",
    "document",
    "page_1",
    "F",
    "1",
    "Network.requestWillBeSent",
    "Network.responseReceived",
    "Network.responseReceivedExtraInfo",
    "Network.dataReceived",
    "Network.loadingFinished",
    "Network.loadingFailed",
    "Network.requestServedFromCache",
    "Page.frameNavigated",
    "Page.frameAttached",
    "X",
    "M",
    "B",
    "E",
    "R",
    "RunTask",
    "navigationStart",
    "loadEventEnd",
    "MarkLoad",
    "thread_name",
    "CrRendererMain",
    "TracingStartedInBrowser",
    "TracingStartedInPage",
    "12",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1_000i64..100_000).prop_map(|n| json!(n)),
        (-1.0e18f64..1.0e18).prop_map(|f| json!(f)),
        prop::sample::select(STRINGS).prop_map(|s| json!(s)),
        ".{0,10}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..10).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// A HAR-shaped document with arbitrary parts.
fn har_like() -> impl Strategy<Value = Value> {
    (
        value(),
        prop::collection::vec(value(), 0..6),
        prop::collection::vec(value(), 0..6),
    )
        .prop_map(|(pages, entries, responses)| {
            let entries: Vec<Value> = entries
                .into_iter()
                .zip(responses.into_iter().chain(std::iter::repeat(Value::Null)))
                .map(|(e, r)| {
                    let mut e = if e.is_object() { e } else { json!({}) };
                    if let Some(m) = e.as_object_mut() {
                        m.entry("request")
                            .or_insert(json!({"url": "https://a.example/"}));
                        m.insert("response".into(), r);
                    }
                    e
                })
                .collect();
            json!({"log": {"pages": pages, "entries": entries}})
        })
}

/// A DevTools-log-shaped array with arbitrary params.
fn cdp_like() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop::sample::select(STRINGS),
            prop::sample::select(STRINGS),
            value(),
        ),
        0..16,
    )
    .prop_map(|events| {
        Value::Array(
            events
                .into_iter()
                .map(|(method, id, params)| {
                    let mut params = if params.is_object() {
                        params
                    } else {
                        json!({})
                    };
                    if let Some(m) = params.as_object_mut() {
                        m.entry("requestId").or_insert(json!(id));
                    }
                    json!({"method": method, "params": params})
                })
                .collect(),
        )
    })
}

/// A trace-shaped document with arbitrary events.
fn trace_like() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop::sample::select(&["X", "M", "B", "E", "R", "I"][..]),
            prop::sample::select(STRINGS),
            -10i64..1_000_000,
            -10i64..100_000,
            0i64..3,
            0i64..3,
            value(),
        ),
        0..24,
    )
    .prop_map(|events| {
        json!({"traceEvents": events
            .into_iter()
            .map(|(ph, name, ts, dur, pid, tid, args)| json!({"ph": ph, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}))
            .collect::<Vec<_>>()})
    })
}

/// Runs every importer on the bytes; the point is that this returns.
fn run_all(bytes: &[u8]) {
    let _ = import_har(bytes, "p");
    let _ = import_cdp(bytes, "p");
    let _ = computation_ms_from_trace(bytes, "p");
    let _ = import_lighthouse(bytes, bytes, "p");
}

const FIXTURE_HAR: &str = r#"{"log": {"pages": [{"id": "p", "title": "https://a.example/"}], "entries": [
 {"pageref": "p", "_resourceType": "document", "request": {"url": "https://a.example/"}, "response": {"status": 301, "redirectURL": "/b", "headersSize": 100, "_transferSize": 100, "bodySize": 0, "content": {"size": 0, "mimeType": "text/html"}, "headers": [{"name": "ETag", "value": "x"}]}},
 {"pageref": "p", "_initiator": {"type": "script", "stack": {"callFrames": [{"url": "https://a.example/"}]}}, "request": {"url": "https://a.example/b"}, "response": {"status": 200, "headersSize": -1, "bodySize": -1, "content": {"size": 5}}}]}}"#;

const FIXTURE_CDP: &str = r#"[{"method": "Page.frameNavigated", "params": {"frame": {"id": "F"}}},
 {"method": "Network.requestWillBeSent", "params": {"requestId": "1", "frameId": "F", "type": "Document", "initiator": {"type": "other"}, "request": {"url": "http://a.example/"}}},
 {"method": "Network.requestWillBeSent", "params": {"requestId": "1", "frameId": "F", "type": "Document", "initiator": {"type": "other"}, "request": {"url": "https://a.example/"}, "redirectResponse": {"encodedDataLength": 10, "headers": {}}}},
 {"method": "Network.responseReceived", "params": {"requestId": "1", "response": {"mimeType": "text/html", "encodedDataLength": 5, "headers": {"a": "b"}}}},
 {"method": "Network.loadingFinished", "params": {"requestId": "1", "encodedDataLength": 100}}]"#;

const FIXTURE_TRACE: &str = r#"{"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "CrRendererMain"}},
 {"ph": "R", "name": "navigationStart", "pid": 1, "tid": 1, "ts": 10, "args": {"frame": "F", "data": {"documentLoaderURL": "https://a.example/"}}},
 {"ph": "X", "name": "RunTask", "pid": 1, "tid": 1, "ts": 20, "dur": 3000},
 {"ph": "R", "name": "loadEventEnd", "pid": 1, "tid": 1, "ts": 9000, "args": {"frame": "F"}}]}"#;

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        run_all(&bytes);
    }

    #[test]
    fn gzip_magic_with_garbage_never_panics(tail in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = vec![0x1f, 0x8b];
        bytes.extend(tail);
        run_all(&bytes);
    }

    #[test]
    fn arbitrary_json_never_panics(v in value()) {
        run_all(&serde_json::to_vec(&v).unwrap());
    }

    #[test]
    fn har_shaped_json_never_panics(v in har_like()) {
        let _ = import_har(&serde_json::to_vec(&v).unwrap(), "p");
    }

    #[test]
    fn cdp_shaped_json_never_panics(v in cdp_like()) {
        let _ = import_cdp(&serde_json::to_vec(&v).unwrap(), "p");
    }

    #[test]
    fn trace_shaped_json_never_panics(v in trace_like()) {
        let _ = computation_ms_from_trace(&serde_json::to_vec(&v).unwrap(), "p");
    }

    #[test]
    fn jsonish_strings_never_panic(s in "[\\[\\]{}\",:0-9a-z .\\-]{0,200}") {
        run_all(s.as_bytes());
    }

    #[test]
    fn truncated_and_mutated_fixtures_never_panic(cut in 0usize..2000, at in 0usize..2000, byte in any::<u8>()) {
        for fixture in [FIXTURE_HAR, FIXTURE_CDP, FIXTURE_TRACE] {
            let mut bytes = fixture.as_bytes().to_vec();
            if let Some(b) = bytes.get_mut(at % fixture.len()) {
                *b = byte;
            }
            run_all(&bytes);
            run_all(&fixture.as_bytes()[..cut % (fixture.len() + 1)]);
        }
    }
}

#[test]
fn proptest_fixtures_are_valid() {
    assert_eq!(
        import_har(FIXTURE_HAR.as_bytes(), "h").unwrap().pages[0]
            .objects
            .len(),
        2
    );
    assert_eq!(
        import_cdp(FIXTURE_CDP.as_bytes(), "c").unwrap().pages[0]
            .objects
            .len(),
        2
    );
    assert_eq!(
        computation_ms_from_trace(FIXTURE_TRACE.as_bytes(), "t").unwrap(),
        3
    );
}
