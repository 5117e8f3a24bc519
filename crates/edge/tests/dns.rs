//! The edge's DNS server on real sockets (loopback): address answers with
//! hints over UDP and TCP, the TXT fallback, forwarding to an upstream and
//! its refusal for clients outside `forward_from`, garbage, and counting.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};
use mewa_edge::net::Net;
use mewa_edge::server::Limits;
use mewa_hint::dns::{decode_txt, txt_query_name, HintRequest, HintResponse, OPTION_CODE};
use mewa_hint::page::synthetic_page;
use mewa_hint::wire::Hint;
use mewa_testkit::{EdgeSpec, LoopbackEdge};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// The edge on loopback: two names in its zone with hints for both pages,
/// forwarding for `forward_from` to `upstream`, two UDP sockets.
async fn start(upstream: Option<SocketAddr>, forward_from: &[&str]) -> LoopbackEdge {
    start_with(upstream, forward_from, Limits::default()).await
}

/// [`start`] with `limits`.
async fn start_with(
    upstream: Option<SocketAddr>,
    forward_from: &[&str],
    limits: Limits,
) -> LoopbackEdge {
    let zone = vec![
        (
            "www.a.example".to_string(),
            vec!["10.0.0.2".parse().unwrap()],
        ),
        ("big.example".to_string(), vec!["10.0.0.3".parse().unwrap()]),
    ];
    let pages = vec![
        synthetic_page("http://www.a.example/", 30, 1, |i| 10_000 + i as u64 * 37),
        synthetic_page("http://big.example/", 600, 60, |i| 10_000 + i as u64 * 37),
    ];
    let mut spec = EdgeSpec::new(zone, pages);
    spec.forward_from = forward_from
        .iter()
        .map(|n| Net::parse(n).unwrap())
        .collect();
    spec.upstream = upstream;
    spec.now_unix_s = 1_700_000_000;
    spec.udp_sockets = 2;
    spec.limits = limits;
    LoopbackEdge::start(spec).await
}

fn query(name: &str, t: RecordType, payload: Option<u16>, page_url: Option<&str>) -> Vec<u8> {
    query_with(name, t, payload, page_url, None)
}

/// [`query`], its OPT record also carrying a COOKIE option (RFC 7873) with
/// `cookie` when given.
fn query_with(
    name: &str,
    t: RecordType,
    payload: Option<u16>,
    page_url: Option<&str>,
    cookie: Option<&[u8]>,
) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 777;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    if let Some(p) = payload {
        let mut e = Edns::new();
        e.set_max_payload(p);
        if let Some(u) = page_url {
            let data = HintRequest {
                page_url: u.to_string(),
            }
            .encode()
            .unwrap();
            e.options_mut()
                .insert(EdnsOption::Unknown(OPTION_CODE, data));
        }
        if let Some(c) = cookie {
            e.options_mut().insert(EdnsOption::Unknown(
                mewa_edge::cookie::OPTION_CODE,
                c.to_vec(),
            ));
        }
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

async fn udp(addr: SocketAddr, q: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    s.send_to(q, addr).await.unwrap();
    let mut buf = vec![0u8; 65_535];
    let n = tokio::time::timeout(Duration::from_secs(3), s.recv(&mut buf))
        .await
        .ok()?
        .ok()?;
    buf.truncate(n);
    Some(buf)
}

async fn tcp(addr: SocketAddr, q: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&(q.len() as u16).to_be_bytes()).await.unwrap();
    s.write_all(q).await.unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).await.unwrap();
    let mut r = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut r).await.unwrap();
    r
}

fn hint_of(m: &Message) -> Option<HintResponse> {
    match m.edns.as_ref()?.option(EdnsCode::Unknown(OPTION_CODE))? {
        EdnsOption::Unknown(_, d) => Some(HintResponse::decode(d).unwrap()),
        _ => None,
    }
}

#[tokio::test]
async fn address_answers_carry_hints_over_udp_and_tcp() {
    let e = start(None, &[]).await;
    let q = query(
        "www.a.example.",
        RecordType::A,
        Some(1232),
        Some("http://www.a.example/"),
    );
    let r = Message::from_vec(&udp(e.addr, &q).await.expect("an answer")).unwrap();
    assert_eq!(r.metadata.id, 777);
    assert_eq!(r.answers.len(), 1);
    let Some(HintResponse::Hint(h)) = hint_of(&r) else {
        panic!("no hint: {r:?}")
    };
    let hint = Hint::from_bytes(&h).unwrap();
    assert_eq!(hint.object_count, 30);
    assert_eq!(hint.ttl_s, 300);

    // The 600-object page does not fit 512 bytes: partial or retry over UDP,
    // and the full hint over TCP.
    let q = query(
        "big.example.",
        RecordType::A,
        Some(512),
        Some("http://big.example/"),
    );
    let raw = udp(e.addr, &q).await.expect("an answer");
    assert!(raw.len() <= 512);
    let r = Message::from_vec(&raw).unwrap();
    assert_eq!(r.answers.len(), 1, "the address answer stays complete");
    match hint_of(&r) {
        Some(HintResponse::Compact(h)) => assert!(Hint::from_bytes(&h).unwrap().partial),
        Some(HintResponse::RetryTcp) => {}
        other => panic!("{other:?}"),
    }
    let r = Message::from_vec(&tcp(e.addr, &q).await).unwrap();
    let Some(HintResponse::Hint(h)) = hint_of(&r) else {
        panic!("no hint over TCP")
    };
    let full = Hint::from_bytes(&h).unwrap();
    assert!(!full.partial);
    assert_eq!(full.object_count, 600);

    // TXT fallback.
    let name = txt_query_name("http://www.a.example/").unwrap();
    let r = Message::from_vec(
        &udp(e.addr, &query(&name, RecordType::TXT, None, None))
            .await
            .unwrap(),
    )
    .unwrap();
    let RData::TXT(txt) = &r.answers[0].data else {
        panic!("{r:?}")
    };
    let mut rdata = Vec::new();
    for s in txt.txt_data.iter() {
        rdata.push(s.len() as u8);
        rdata.extend_from_slice(s);
    }
    assert_eq!(
        Hint::from_bytes(&decode_txt(&rdata).unwrap())
            .unwrap()
            .object_count,
        30
    );

    // Garbage is survived; the server still answers afterwards.
    assert!(udp(e.addr, b"\x00").await.is_none());
    let q = query("www.a.example.", RecordType::A, None, None);
    assert!(udp(e.addr, &q).await.is_some());

    // Counted: two hint requests for the small page (option, TXT), two for
    // the big page (UDP, TCP).
    let counts: HashMap<String, u64> = e.dns.take_counts().into_iter().collect();
    assert_eq!(counts.get("http://www.a.example/"), Some(&2));
    assert_eq!(counts.get("http://big.example/"), Some(&2));
    e.task.abort();
}

#[tokio::test]
async fn other_names_are_forwarded_only_for_allowed_clients() {
    // A stand-in upstream that answers every query with its id and NXDOMAIN.
    let up = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        while let Ok((n, from)) = up.recv_from(&mut buf).await {
            if let Ok(q) = Message::from_vec(&buf[..n]) {
                let mut r =
                    Message::error_msg(q.metadata.id, q.metadata.op_code, ResponseCode::NXDomain);
                r.add_queries(q.queries.clone());
                let _ = up.send_to(&r.to_vec().unwrap(), from).await;
            }
        }
    });
    let q = query("elsewhere.example.", RecordType::A, None, None);
    let e = start(Some(up_addr), &["127.0.0.0/8"]).await;
    let r = Message::from_vec(&udp(e.addr, &q).await.expect("relayed")).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(r.metadata.id, 777);
    let r = Message::from_vec(&tcp(e.addr, &q).await).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    e.task.abort();

    // Loopback not allowed: REFUSED, the upstream is never asked.
    let e = start(Some(up_addr), &["10.0.0.0/8"]).await;
    let r = Message::from_vec(&udp(e.addr, &q).await.expect("refused")).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    assert_eq!(
        e.dns
            .metrics
            .forwarded
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    e.task.abort();
}

/// Popularity counts only hint requests for a page on the name queried,
/// at most `limit_counted` pages between two flushes; counts put back
/// after a failed write are not lost.
#[tokio::test]
async fn popularity_counts_are_bounded_and_kept() {
    let e = start(None, &[]).await;
    e.dns.limit_counted(3);
    // A page of another host asked under www.a.example: answered, not
    // counted (anyone could raise any page's popularity).
    let q = query(
        "www.a.example.",
        RecordType::A,
        Some(1232),
        Some("http://big.example/"),
    );
    assert!(udp(e.addr, &q).await.is_some());
    // Made-up pages of the queried host: three counted, the rest dropped.
    for i in 0..6 {
        let u = format!("http://www.a.example/made-up-{i}");
        let q = query("www.a.example.", RecordType::A, Some(1232), Some(&u));
        assert!(udp(e.addr, &q).await.is_some());
    }
    let taken = e.dns.take_counts();
    assert_eq!(taken.len(), 3, "{taken:?}");
    assert!(taken
        .iter()
        .all(|(u, _)| u.starts_with("http://www.a.example/")));
    assert_eq!(
        e.dns
            .metrics
            .counts_dropped
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    // The write failed: put back, and counted once more on top.
    e.dns.put_back_counts(taken.clone());
    let q = query(
        "www.a.example.",
        RecordType::A,
        Some(1232),
        Some(&taken[0].0),
    );
    assert!(udp(e.addr, &q).await.is_some());
    let again: HashMap<String, u64> = e.dns.take_counts().into_iter().collect();
    assert_eq!(again.len(), 3);
    assert_eq!(again[&taken[0].0], taken[0].1 + 1);
    e.task.abort();
}

/// DNS over TCP is bounded: connections past the cap are closed at once, a
/// silent client is let go after the timeout, and no connection outlives
/// its lifetime even while it keeps asking.
#[tokio::test]
async fn tcp_connections_are_capped_and_do_not_linger() {
    let limits = Limits {
        tcp_max_connections: 2,
        tcp_timeout: Duration::from_millis(300),
        tcp_max_lifetime: Duration::from_millis(1500),
        ..Limits::default()
    };
    let e = start_with(None, &[], limits).await;
    let closed_within = |mut s: TcpStream, limit: Duration| async move {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(limit, s.read(&mut b)).await,
            Ok(Ok(0) | Err(_))
        )
    };
    // Two held open; the third is closed on accept.
    let a = TcpStream::connect(e.addr).await.unwrap();
    let b = TcpStream::connect(e.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let c = TcpStream::connect(e.addr).await.unwrap();
    assert!(closed_within(c, Duration::from_millis(200)).await);
    assert_eq!(
        e.dns
            .metrics
            .tcp_refused
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // Silent ones go after the timeout.
    assert!(closed_within(a, Duration::from_secs(2)).await);
    assert!(closed_within(b, Duration::from_secs(2)).await);
    // A client asking every 200 ms is answered until the lifetime ends.
    let mut s = TcpStream::connect(e.addr).await.unwrap();
    let q = query("www.a.example.", RecordType::A, None, None);
    let t0 = std::time::Instant::now();
    let mut answered = 0;
    while t0.elapsed() < Duration::from_secs(4) {
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        if s.write_all(&framed).await.is_err() {
            break;
        }
        let mut len = [0u8; 2];
        if s.read_exact(&mut len).await.is_err() {
            break;
        }
        let mut r = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut r).await.unwrap();
        answered += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let lived = t0.elapsed();
    assert!(answered >= 3, "{answered} answers");
    assert!(lived < Duration::from_millis(2500), "lived {lived:?}");
    e.task.abort();
}

/// At most `max_forwarding` queries wait on the upstream at once; the rest
/// get no answer (and are counted).
#[tokio::test]
async fn forwarding_is_capped() {
    // An upstream that never answers.
    let mute = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let limits = Limits {
        max_forwarding: 1,
        ..Limits::default()
    };
    let e = start_with(Some(mute.local_addr().unwrap()), &["127.0.0.0/8"], limits).await;
    let q = query("elsewhere.example.", RecordType::A, None, None);
    let (a, b) = tokio::join!(udp(e.addr, &q), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        udp(e.addr, &q).await
    });
    assert!(a.is_none() && b.is_none());
    let m = &e.dns.metrics;
    assert_eq!(m.forwarded.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(
        m.forward_refused.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    drop(mute);
    e.task.abort();
}

/// The default limits with response-rate limiting at `rate` answers per
/// second, slip 2.
fn rrl_at(rate: u32) -> Limits {
    Limits {
        rrl: mewa_edge::rrl::RrlConfig {
            responses_per_s: rate,
            slip: 2,
            max_prefixes: 1000,
        },
        ..Limits::default()
    }
}

/// Response-rate limiting over a real socket: past the rate, every second
/// answer comes back empty with TC=1 (a real client retries over TCP) and
/// the others not at all.
#[tokio::test]
async fn udp_answers_over_the_rate_slip_or_drop() {
    let e = start_with(None, &[], rrl_at(10)).await;
    let q = cookie_query(None);
    let (full, truncated) = burst(e.addr, &q, 14, |m| {
        if m.metadata.truncation {
            assert!(m.answers.is_empty() && hint_of(m).is_none(), "{m:?}");
        }
    })
    .await;
    assert_eq!((full, truncated), (10, 2));
    let m = &e.dns.metrics;
    assert_eq!(m.rrl_slipped.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(m.rrl_dropped.load(std::sync::atomic::Ordering::Relaxed), 2);
    // Over TCP the client is answered in full.
    let r = Message::from_vec(&tcp(e.addr, &q).await).unwrap();
    assert!(hint_of(&r).is_some());
    e.task.abort();
}

/// A query for `www.a.example` with the hint request, and a COOKIE option
/// carrying `cookie` when given.
fn cookie_query(cookie: Option<&[u8]>) -> Vec<u8> {
    query_with(
        "www.a.example.",
        RecordType::A,
        Some(1232),
        Some("http://www.a.example/"),
        cookie,
    )
}

fn cookie_of(m: &Message) -> Option<Vec<u8>> {
    match m.edns.as_ref()?.option(EdnsCode::Cookie)? {
        EdnsOption::Unknown(_, d) => Some(d.clone()),
        _ => None,
    }
}

/// Sends `n` copies of `q` over one UDP socket and counts the answers that
/// come back full (with the hint) and empty with TC=1; every answer is
/// handed to `check`.
async fn burst(addr: SocketAddr, q: &[u8], n: usize, check: impl Fn(&Message)) -> (usize, usize) {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for _ in 0..n {
        s.send_to(q, addr).await.unwrap();
    }
    let (mut full, mut truncated) = (0, 0);
    let mut buf = vec![0u8; 65_535];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(500), s.recv(&mut buf)).await {
        let m = Message::from_vec(&buf[..n]).unwrap();
        check(&m);
        if m.metadata.truncation {
            truncated += 1;
        } else {
            assert!(hint_of(&m).is_some(), "{m:?}");
            full += 1;
        }
    }
    (full, truncated)
}

/// DNS cookies over real sockets: an answer carries the client cookie and
/// an RFC 9018 server cookie; echoing it proves the client's address, so
/// its UDP answers are never rate-limited, while a source without a cookie
/// at the same rate is slipped and one with a forged cookie is limited as
/// usual; malformed lengths get FORMERR.
#[tokio::test]
async fn a_client_echoing_its_cookie_is_never_rate_limited() {
    use std::sync::atomic::Ordering::Relaxed;
    let e = start_with(None, &[], rrl_at(5)).await;
    // No cookie asked, none given.
    let m = Message::from_vec(&tcp(e.addr, &cookie_query(None)).await).unwrap();
    assert!(hint_of(&m).is_some() && cookie_of(&m).is_none());
    // A client cookie alone (over TCP, which the limiter does not count):
    // the answer carries it and a server cookie: version 1, three reserved
    // zero bytes, a timestamp of now, an 8-byte hash.
    let client = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];
    let m = Message::from_vec(&tcp(e.addr, &cookie_query(Some(&client))).await).unwrap();
    assert!(hint_of(&m).is_some());
    let cookie = cookie_of(&m).unwrap();
    assert_eq!(cookie.len(), 24);
    assert_eq!(cookie[..8], client);
    assert_eq!(cookie[8..12], [1, 0, 0, 0]);
    let stamp = u32::from_be_bytes([cookie[12], cookie[13], cookie[14], cookie[15]]);
    let now = mewa_hint::now_unix_s() as u32;
    assert!(now.abs_diff(stamp) <= 2, "timestamp {stamp}, now {now}");

    // Twenty queries at once without a cookie: past five, slipped or
    // dropped.
    let (full, truncated) = burst(e.addr, &cookie_query(None), 20, |_| {}).await;
    assert!(full <= 6 && truncated >= 5, "{full} full, {truncated} TC");
    // Twenty at once from the same address echoing the cookie, the bucket
    // still empty: every one answered in full, with a fresh cookie.
    let limited = e.dns.metrics.rrl_slipped.load(Relaxed) + e.dns.metrics.rrl_dropped.load(Relaxed);
    let (full, truncated) = burst(e.addr, &cookie_query(Some(&cookie)), 20, |m| {
        assert_eq!(cookie_of(m).map(|c| c[..8].to_vec()), Some(client.to_vec()));
    })
    .await;
    assert_eq!((full, truncated), (20, 0));
    assert_eq!(e.dns.metrics.cookies_valid.load(Relaxed), 20);
    assert_eq!(
        e.dns.metrics.rrl_slipped.load(Relaxed) + e.dns.metrics.rrl_dropped.load(Relaxed),
        limited
    );
    // A forged server cookie (right format, wrong hash) proves nothing: the
    // same burst is limited as if it had none.
    let mut forged = cookie.clone();
    forged[23] ^= 0x55;
    let (full, _) = burst(e.addr, &cookie_query(Some(&forged)), 20, |_| {}).await;
    assert!(full <= 6, "{full} answered in full with a forged cookie");
    assert_eq!(e.dns.metrics.cookies_bad.load(Relaxed), 20);
    // Over TCP the forged cookie gets its answer and a new server cookie
    // (RFC 7873 §5.2.3) that does verify.
    let m = Message::from_vec(&tcp(e.addr, &cookie_query(Some(&forged))).await).unwrap();
    assert!(hint_of(&m).is_some());
    let renewed = cookie_of(&m).unwrap();
    assert_ne!(renewed, forged);
    tcp(e.addr, &cookie_query(Some(&renewed))).await;
    assert_eq!(e.dns.metrics.cookies_valid.load(Relaxed), 21);

    // Malformed lengths: FORMERR and no answer (over TCP: the UDP bucket
    // is empty by now).
    for n in [0, 7, 9, 15, 41] {
        let m = Message::from_vec(&tcp(e.addr, &cookie_query(Some(&vec![1; n]))).await).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::FormErr, "{n} bytes");
        assert!(m.answers.is_empty());
    }
    e.task.abort();
}
