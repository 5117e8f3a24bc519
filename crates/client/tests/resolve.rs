//! The client's resolver against the real edge DNS server on loopback: the
//! hint over UDP, over TCP when it does not fit, the fallbacks, and a plan
//! made from what arrived.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use mewa_client::advice::{plan, Fallback, Radio};
use mewa_client::resolve::resolve;
use mewa_hint::page::{synthetic_page, PageMeta};
use mewa_testkit::{EdgeSpec, LoopbackEdge};
use tokio::net::UdpSocket;

fn page(host: &str, n: usize, origins: usize) -> PageMeta {
    synthetic_page(&format!("http://{host}/"), n, origins, |i| {
        20_000 + 311 * i as u64
    })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The edge on loopback with hints for a small and a big page; only the
/// small page's origin has a measured RTT.
async fn edge() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let zone = ["www.small.example", "www.big.example"]
        .map(|h| (h.to_string(), vec!["10.0.0.2".parse().unwrap()]))
        .to_vec();
    let pages = vec![
        page("www.small.example", 30, 1),
        page("www.big.example", 1500, 150),
    ];
    let mut spec = EdgeSpec::new(zone, pages);
    spec.now_unix_s = now();
    let e = LoopbackEdge::start(spec.with_rtt("www.small.example", 20_000)).await;
    (e.addr, e.task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_arrive_and_become_plans_or_fallbacks() {
    let (addr, task) = edge().await;
    let t = Duration::from_secs(3);

    let r = resolve(addr, "www.small.example", "http://www.small.example/", t)
        .await
        .unwrap();
    assert_eq!(
        r.addrs,
        vec!["10.0.0.2".parse::<std::net::IpAddr>().unwrap()]
    );
    assert!(!r.over_tcp);
    assert!(
        r.hint_bytes > 0 && r.hint_bytes <= 1000,
        "{} bytes",
        r.hint_bytes
    );
    assert!(r.rtt < Duration::from_secs(1));
    let hint = r.hint.unwrap();
    let p = plan(
        &hint,
        "http://www.small.example/",
        Radio {
            bandwidth_bps: 32e6,
            rtt_s: 0.045,
        },
        now(),
    )
    .unwrap();
    assert!((p.wired_rtt_s - 0.020).abs() < 1e-9);
    assert!(p.n >= 1 && p.n <= 6);
    assert_eq!(p.assignment.len(), 30);

    // 1500 objects on 150 origins: no room in UDP, fetched over TCP, full.
    let r = resolve(addr, "www.big.example", "http://www.big.example/", t)
        .await
        .unwrap();
    let hint = r.hint.unwrap();
    assert!(r.over_tcp || hint.partial, "neither TCP nor partial");
    assert_eq!(hint.object_count, 1500);

    // Unknown page; a host that is not in the zone.
    let r = resolve(
        addr,
        "www.small.example",
        "http://www.small.example/nope",
        t,
    )
    .await
    .unwrap();
    assert_eq!(r.hint.unwrap_err(), Fallback::Unknown);
    let e = resolve(addr, "elsewhere.example", "http://elsewhere.example/", t)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("Refused") || e.to_string().contains("response code"),
        "{e}"
    );
    task.abort();
}

#[tokio::test]
async fn a_silent_or_hintless_edge_is_handled() {
    // An "edge" that never answers.
    let mute = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let e = resolve(
        mute.local_addr().unwrap(),
        "a.example",
        "http://a.example/",
        Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("did not answer"), "{e}");

    // A resolver that strips options: answers without OPT.
    let addr = scripted(|q| {
        let mut r = response_to(q);
        r.add_queries(q.queries.clone());
        vec![r]
    })
    .await;
    let r = resolve_a_example(addr).await;
    assert_eq!(r.hint.unwrap_err(), Fallback::Missing);
}

/// A lost query is sent again: a relay in front of the edge drops the
/// first datagram and passes the second, and the answer still comes.
#[tokio::test]
async fn a_lost_query_is_retransmitted() {
    let (edge, _task) = edge().await;
    let relay = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    upstream.connect(edge).await.unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        let (_, _) = relay.recv_from(&mut buf).await.unwrap(); // lost
        let (n, client) = relay.recv_from(&mut buf).await.unwrap();
        upstream.send(&buf[..n]).await.unwrap();
        let n = upstream.recv(&mut buf).await.unwrap();
        relay.send_to(&buf[..n], client).await.unwrap();
    });
    let r = resolve(
        relay_addr,
        "www.small.example",
        "http://www.small.example/",
        Duration::from_secs(5),
    )
    .await
    .expect("answered after a retransmission");
    assert_eq!(r.addrs.len(), 1);
    assert!(r.hint.is_ok());
    // Timed from the retransmission, not from the lost query.
    assert!(
        r.rtt < mewa_client::resolve::FIRST_RETRANSMIT,
        "{:?}",
        r.rtt
    );
}

/// A DNS server on loopback that answers each query with `answers(query)`,
/// every message it returns sent in order.
async fn scripted(
    answers: impl Fn(&hickory_proto::op::Message) -> Vec<hickory_proto::op::Message> + Send + 'static,
) -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let q = hickory_proto::op::Message::from_vec(&buf[..n]).unwrap();
            for r in answers(&q) {
                let _ = sock.send_to(&r.to_vec().unwrap(), from).await;
            }
        }
    });
    addr
}

/// `a.example` and its page's hint from the server at `addr`.
async fn resolve_a_example(addr: SocketAddr) -> mewa_client::resolve::Resolved {
    resolve(
        addr,
        "a.example",
        "http://a.example/",
        Duration::from_secs(2),
    )
    .await
    .unwrap()
}

fn a_record(name: &str, ip: &str) -> hickory_proto::rr::Record {
    hickory_proto::rr::Record::from_rdata(
        hickory_proto::rr::Name::from_ascii(name).unwrap(),
        60,
        hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A(ip.parse().unwrap())),
    )
}

fn response_to(q: &hickory_proto::op::Message) -> hickory_proto::op::Message {
    hickory_proto::op::Message::response(q.metadata.id, q.metadata.op_code)
}

/// An answer with our ID for another question (a late answer to an earlier
/// query, or a forgery) is not taken; nor are addresses of other names.
#[tokio::test]
async fn only_the_answer_to_our_question_counts() {
    let addr = scripted(|q| {
        let mut wrong = response_to(q);
        wrong.add_query(hickory_proto::op::Query::query(
            hickory_proto::rr::Name::from_ascii("evil.example.").unwrap(),
            hickory_proto::rr::RecordType::A,
        ));
        wrong.add_answer(a_record("evil.example.", "6.6.6.6"));
        let mut right = response_to(q);
        right.add_queries(q.queries.clone());
        // Stuffed with an address for another name, and the real one in
        // the name's case changed (RFC 4343: the same name).
        right.add_answer(a_record("other.example.", "7.7.7.7"));
        right.add_answer(a_record("A.Example.", "10.0.0.9"));
        vec![wrong, right]
    })
    .await;
    let r = resolve_a_example(addr).await;
    assert_eq!(
        r.addrs,
        vec!["10.0.0.9".parse::<std::net::IpAddr>().unwrap()]
    );
}

/// A CNAME chain is followed to the addresses; a CNAME loop ends.
#[tokio::test]
async fn cname_chains_are_followed_and_loops_end() {
    let cname = |from: &str, to: &str| {
        hickory_proto::rr::Record::from_rdata(
            hickory_proto::rr::Name::from_ascii(from).unwrap(),
            60,
            hickory_proto::rr::RData::CNAME(hickory_proto::rr::rdata::CNAME(
                hickory_proto::rr::Name::from_ascii(to).unwrap(),
            )),
        )
    };
    let addr = scripted(move |q| {
        let mut r = response_to(q);
        r.add_queries(q.queries.clone());
        let asked = q.queries[0].name().to_ascii();
        if asked == "www.a.example." {
            r.add_answer(cname("www.a.example.", "cdn.b.example."));
            r.add_answer(a_record("cdn.b.example.", "10.0.0.5"));
        } else {
            r.add_answer(cname("loop.example.", "pool.example."));
            r.add_answer(cname("pool.example.", "loop.example."));
        }
        vec![r]
    })
    .await;
    let t = Duration::from_secs(2);
    let r = mewa_client::resolve::resolve_address(addr, "www.a.example", t)
        .await
        .unwrap();
    assert_eq!(
        r.addrs,
        vec!["10.0.0.5".parse::<std::net::IpAddr>().unwrap()]
    );
    let r = mewa_client::resolve::resolve_address(addr, "loop.example", t)
        .await
        .unwrap();
    assert!(r.addrs.is_empty());
}

/// An object's host is looked up without a hint request (which would count
/// towards a page's popularity at the edge); a page's carries one. Query
/// IDs vary.
#[tokio::test]
async fn address_lookups_carry_no_hint_request() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let addr = scripted(move |q| {
        let hint = q
            .edns
            .as_ref()
            .and_then(|e| {
                e.option(hickory_proto::rr::rdata::opt::EdnsCode::Unknown(
                    mewa_hint::dns::OPTION_CODE,
                ))
            })
            .is_some();
        let _ = tx.send((q.metadata.id, hint));
        let mut r = response_to(q);
        r.add_queries(q.queries.clone());
        vec![r]
    })
    .await;
    let t = Duration::from_secs(2);
    mewa_client::resolve::resolve_address(addr, "img.example", t)
        .await
        .unwrap();
    resolve(addr, "www.example", "http://www.example/", t)
        .await
        .unwrap();
    let (id1, hint1) = rx.recv().await.unwrap();
    let (id2, hint2) = rx.recv().await.unwrap();
    assert!(!hint1, "an address lookup asked for a hint");
    assert!(hint2, "a page's lookup did not ask for its hint");
    let mut ids = vec![id1, id2];
    for _ in 0..6 {
        mewa_client::resolve::resolve_address(addr, "img.example", t)
            .await
            .unwrap();
        ids.push(rx.recv().await.unwrap().0);
    }
    ids.sort_unstable();
    ids.dedup();
    assert!(ids.len() >= 7, "query IDs repeat: {ids:?}");
}

/// `read_answer`, the pure step the UDP exchange takes on each datagram:
/// another ID or question is not the answer, a CNAME chain is followed,
/// an error code is an error, garbage is ignored.
#[test]
fn read_answer_checks_the_question_and_follows_cnames() {
    use hickory_proto::op::{Message, Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};
    use mewa_client::resolve::read_answer;
    let edge: SocketAddr = "127.0.0.1:53".parse().unwrap();
    let answer = |id: u16, asked: &str, code: ResponseCode| {
        let mut m = Message::response(id, hickory_proto::op::OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii(asked).unwrap(),
            RecordType::A,
        ));
        m.metadata.response_code = code;
        m.add_answer(hickory_proto::rr::Record::from_rdata(
            Name::from_ascii(asked).unwrap(),
            60,
            hickory_proto::rr::RData::CNAME(hickory_proto::rr::rdata::CNAME(
                Name::from_ascii("cdn.b.example.").unwrap(),
            )),
        ));
        m.add_answer(a_record("cdn.b.example.", "10.0.0.5"));
        m.add_answer(a_record("evil.example.", "10.6.6.6"));
        m.to_vec().unwrap()
    };
    let ok = answer(7, "www.a.example.", ResponseCode::NoError);
    let r = read_answer(&ok, 7, None, "WWW.A.example", edge)
        .unwrap()
        .unwrap();
    assert_eq!(
        r.addrs,
        vec!["10.0.0.5".parse::<std::net::IpAddr>().unwrap()]
    );
    assert!(r.hint.is_err());
    assert!(read_answer(&ok, 8, None, "www.a.example", edge)
        .unwrap()
        .is_none());
    assert!(read_answer(&ok, 7, None, "www.b.example", edge)
        .unwrap()
        .is_none());
    assert!(read_answer(&ok[..20], 7, None, "www.a.example", edge)
        .unwrap()
        .is_none());
    let refused = answer(7, "www.a.example.", ResponseCode::Refused);
    assert!(read_answer(&refused, 7, None, "www.a.example", edge).is_err());
}

/// The data of `m`'s COOKIE option (RFC 7873), if any.
fn cookie_of(m: &hickory_proto::op::Message) -> Option<Vec<u8>> {
    use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
    match m.edns.as_ref()?.option(EdnsCode::Cookie)? {
        EdnsOption::Unknown(_, d) => Some(d.clone()),
        _ => None,
    }
}

/// A UDP relay in front of `edge` that hands every query it passes on and
/// the answer it passes back to the test, parsed.
async fn recording_relay(
    edge: SocketAddr,
) -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<(hickory_proto::op::Message, hickory_proto::op::Message)>,
) {
    let relay = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = relay.local_addr().unwrap();
    let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    upstream.connect(edge).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, client)) = relay.recv_from(&mut buf).await {
            let q = hickory_proto::op::Message::from_vec(&buf[..n]).unwrap();
            upstream.send(&buf[..n]).await.unwrap();
            let n = upstream.recv(&mut buf).await.unwrap();
            let a = hickory_proto::op::Message::from_vec(&buf[..n]).unwrap();
            relay.send_to(&buf[..n], client).await.unwrap();
            let _ = tx.send((q, a));
        }
    });
    (addr, rx)
}

/// DNS cookies against the real edge: the first query carries a client
/// cookie alone, the edge answers with it and a server cookie, and the
/// next query echoes both, which the edge counts as a valid cookie.
#[tokio::test]
async fn the_second_query_echoes_the_edges_server_cookie() {
    use std::sync::atomic::Ordering::Relaxed;
    let zone = vec![("img.example".to_string(), vec!["10.0.0.3".parse().unwrap()])];
    let e = LoopbackEdge::start(EdgeSpec::new(zone, vec![])).await;
    let (relay, mut seen) = recording_relay(e.addr).await;
    let t = Duration::from_secs(3);
    let lookup = || mewa_client::resolve::resolve_address(relay, "img.example", t);
    assert_eq!(lookup().await.unwrap().addrs.len(), 1);
    let (q1, a1) = seen.recv().await.unwrap();
    let client = cookie_of(&q1).expect("the first query carries no cookie");
    assert_eq!(client.len(), 8, "more than a client cookie the first time");
    let given = cookie_of(&a1).expect("the edge gave no cookie");
    assert_eq!(given.len(), 24);
    assert_eq!(given[..8], client[..]);
    assert_eq!(e.dns.metrics.cookies_valid.load(Relaxed), 0);

    lookup().await.unwrap();
    let (q2, a2) = seen.recv().await.unwrap();
    assert_eq!(
        cookie_of(&q2),
        Some(given),
        "the server cookie is not echoed"
    );
    assert_eq!(e.dns.metrics.cookies_valid.load(Relaxed), 1);
    // The jar keeps the server cookie of the latest answer.
    let latest = cookie_of(&a2).unwrap();
    assert_eq!(
        mewa_client::cookie::Jar::global().server_cookie(relay),
        Some(latest[8..].to_vec())
    );
    e.task.abort();
}

/// With the edge's response-rate limit at 5 answers a second (slip 2), a
/// page's burst of 30 lookups at once from the client resolver is answered
/// in full over UDP, none slipped to TC (no TCP retries) or dropped (no
/// retransmissions): after its first answer every query echoes the
/// server cookie. Without cookies the same burst is slipped and dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_lookups_echoing_cookies_is_never_rate_limited() {
    use std::sync::atomic::Ordering::Relaxed;
    let zone = vec![(
        "www.small.example".to_string(),
        vec!["10.0.0.2".parse().unwrap()],
    )];
    let mut spec = EdgeSpec::new(zone, vec![page("www.small.example", 30, 1)]);
    spec.limits.rrl = mewa_edge::rrl::RrlConfig {
        responses_per_s: 5,
        slip: 2,
        max_prefixes: 1000,
    };
    let e = LoopbackEdge::start(spec).await;
    let t = Duration::from_secs(5);
    // The page's own lookup, with its hint: the first contact.
    let r = resolve(e.addr, "www.small.example", "http://www.small.example/", t)
        .await
        .unwrap();
    assert!(r.hint.is_ok() && !r.over_tcp);
    let mut burst = tokio::task::JoinSet::new();
    for _ in 0..30 {
        let edge = e.addr;
        burst.spawn(async move {
            mewa_client::resolve::resolve_address(edge, "www.small.example", t).await
        });
    }
    while let Some(r) = burst.join_next().await {
        let r = r.unwrap().unwrap();
        assert_eq!(r.addrs.len(), 1);
        assert!(!r.over_tcp, "slipped: retried over TCP");
    }
    let m = &e.dns.metrics;
    assert_eq!(m.rrl_slipped.load(Relaxed), 0, "answers slipped");
    assert_eq!(m.rrl_dropped.load(Relaxed), 0, "answers dropped");
    assert_eq!(m.cookies_valid.load(Relaxed), 30);
    e.task.abort();
}

/// An answer whose COOKIE option carries another client cookie than the
/// one sent, or is malformed, is ignored like a forgery (RFC 7873 §5.3):
/// the resolver waits for the real one. An answer without any COOKIE
/// option (an edge with cookies off) is taken.
#[tokio::test]
async fn answers_with_another_client_cookie_are_ignored() {
    use hickory_proto::op::Edns;
    use hickory_proto::rr::rdata::opt::EdnsOption;
    let with_cookie = |q: &hickory_proto::op::Message, cookie: Vec<u8>, ip: &str| {
        let mut r = response_to(q);
        r.add_queries(q.queries.clone());
        r.add_answer(a_record("a.example.", ip));
        let mut e = Edns::new();
        e.options_mut().insert(EdnsOption::Unknown(10, cookie));
        r.set_edns(e);
        r
    };
    let addr = scripted(move |q| {
        let sent = cookie_of(q).unwrap();
        let mut other = sent[..8].to_vec();
        other[0] ^= 1;
        other.extend_from_slice(&[5; 16]);
        let mut ours = sent[..8].to_vec();
        ours.extend_from_slice(&[7; 16]);
        vec![
            // Another client cookie: a forger's guess, or another query's.
            with_cookie(q, other, "6.6.6.6"),
            // Ours, but no server cookie: malformed in an answer.
            with_cookie(q, sent[..8].to_vec(), "6.6.6.7"),
            with_cookie(q, ours, "10.0.0.9"),
        ]
    })
    .await;
    let r = resolve_a_example(addr).await;
    assert_eq!(
        r.addrs,
        vec!["10.0.0.9".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(
        mewa_client::cookie::Jar::global().server_cookie(addr),
        Some(vec![7; 16])
    );
    // The next query echoes it; an answer without a cookie is taken.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let plain = scripted(move |q| {
        let _ = tx.send(cookie_of(q));
        let mut r = response_to(q);
        r.add_queries(q.queries.clone());
        r.add_answer(a_record("a.example.", "10.0.0.8"));
        vec![r]
    })
    .await;
    let r = resolve_a_example(plain).await;
    assert_eq!(r.addrs.len(), 1);
    assert_eq!(rx.recv().await.unwrap().map(|c| c.len()), Some(8));
}

/// `read_answer` with a client cookie sent: an answer with another one is
/// not the answer; with ours or none it is.
#[test]
fn read_answer_refuses_another_client_cookie() {
    use hickory_proto::op::{Edns, Message, Query};
    use hickory_proto::rr::rdata::opt::EdnsOption;
    use hickory_proto::rr::{Name, RecordType};
    use mewa_client::resolve::read_answer;
    let edge: SocketAddr = "127.0.0.1:53".parse().unwrap();
    let sent = *b"cookie01";
    let answer = |cookie: Option<&[u8]>| {
        let mut m = Message::response(7, hickory_proto::op::OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii("a.example.").unwrap(),
            RecordType::A,
        ));
        m.add_answer(a_record("a.example.", "10.0.0.5"));
        if let Some(c) = cookie {
            let mut e = Edns::new();
            e.options_mut().insert(EdnsOption::Unknown(10, c.to_vec()));
            m.set_edns(e);
        }
        m.to_vec().unwrap()
    };
    let taken = |bytes: &[u8]| {
        read_answer(bytes, 7, Some(sent), "a.example", edge)
            .unwrap()
            .is_some()
    };
    assert!(taken(&answer(None)));
    assert!(taken(&answer(Some(&[*b"cookie01", [3; 8]].concat()))));
    assert!(!taken(&answer(Some(&[*b"cookie02", [3; 8]].concat()))));
    assert!(!taken(&answer(Some(b"cookie01"))));
    // Without a cookie sent, the COOKIE option is not looked at.
    let other = answer(Some(&[*b"cookie02", [3; 8]].concat()));
    assert!(read_answer(&other, 7, None, "a.example", edge)
        .unwrap()
        .is_some());
}
