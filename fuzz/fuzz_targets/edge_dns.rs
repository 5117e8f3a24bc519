//! The edge's DNS answering must take any bytes as a query without
//! panicking, never answer a response (no reflection loops), and keep UDP
//! answers within the advertised limit; and its fast path for the common
//! query shape must answer exactly as the general (hickory-proto) path,
//! with DNS cookies on or off.
#![no_main]

use std::collections::HashMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mewa_edge::dns::{Outcome, Responder, Transport, Zone};
use mewa_edge::hints::{HintBook, HintPolicy};
use mewa_hint::page::{Discovery, ObjectMeta, PageMeta};

fn book() -> &'static HintBook {
    static B: OnceLock<HintBook> = OnceLock::new();
    B.get_or_init(|| {
        let objects = (0..300)
            .map(|i| ObjectMeta {
                url: format!("http://a.example/{i}"),
                host: format!("h{}.a.example", i % 30),
                size: Some(1000 + i),
                content_type: None,
                last_modified: None,
                etag: None,
                discovery: Discovery::Parser,
                parent: None,
                recorded: Default::default(),
            })
            .collect();
        let page = PageMeta {
            url: "http://a.example/".into(),
            objects,
            computation_ms: None,
        };
        let policy = HintPolicy {
            alpha: 0.5,
            ttl_s: 60,
        };
        HintBook::build(vec![page], &HashMap::new(), policy, 0).0
    })
}

fuzz_target!(|data: &[u8]| {
    let r = Responder {
        zone: Zone::new(
            [("a.example".to_string(), vec!["10.0.0.2".parse().unwrap()])],
            30,
        ),
        max_udp_payload: 1232,
        compact_payload: mewa_edge::dns::COMPACT_UDP_PAYLOAD,
        upstream: true,
    };
    let secret = mewa_edge::cookie::Secret::new([7; 16]);
    let ctx = mewa_edge::cookie::Context {
        secret: &secret,
        client: "192.0.2.1".parse().unwrap(),
        now_unix_s: 1_700_000_000,
    };
    for (t, cookies) in [
        (Transport::Udp, None),
        (Transport::Tcp, None),
        (Transport::Udp, Some(&ctx)),
    ] {
        let a = r.answer(book(), data, t, true, cookies);
        let general = r.answer_general(book(), data, t, true, cookies);
        assert_eq!(a.outcome, general.outcome, "fast and general paths differ");
        assert_eq!(
            (&a.page, &a.hint, a.error, a.cookie),
            (&general.page, &general.hint, general.error, general.cookie)
        );
        if let (Outcome::Reply(b), Transport::Udp) = (a.outcome, t) {
            assert!(b.len() <= 1232);
            assert!(
                data.len() >= 12 && data[2] & 0x80 == 0,
                "answered a non-query"
            );
        }
    }
});
