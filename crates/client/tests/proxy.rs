//! The local proxy end to end on loopback: a real edge (DNS with hints), a
//! real origin serving a corpus page over h2c, and an HTTP/1.1 client
//! speaking to the proxy as a browser does. Checks that every object
//! arrives whole, that a hinted page gets the planned connections, and that
//! the proxy refuses what would make it an open proxy.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use mewa_client::proxy::{Proxy, ProxyConfig};
use mewa_corpus::{generate, Corpus, Preset};
use mewa_edge::dns::{Responder, Zone};
use mewa_edge::hints::{HintBook, HintPolicy};
use mewa_edge::server::{bind_udp, serve, EdgeDns};
use mewa_hint::page::OriginRtt;
use mewa_origin::{HttpOptions, Origin, OriginConfig, TcpOptions};
use tokio::net::{TcpListener, TcpStream};

async fn edge(corpus: &Corpus) -> SocketAddr {
    let hosts: Vec<String> = corpus
        .pages
        .iter()
        .flat_map(|p| p.hosts().into_iter().map(str::to_string))
        .collect();
    let zone = Zone::new(
        hosts
            .iter()
            .map(|h| (h.clone(), vec!["127.0.0.1".parse().unwrap()])),
        30,
    );
    let dns = Arc::new(EdgeDns::new(
        Responder {
            zone,
            max_udp_payload: 1232,
            upstream: false,
        },
        Vec::new(),
        None,
    ));
    let now = mewa_hint::now_unix_s();
    let rtts: HashMap<String, OriginRtt> = hosts
        .iter()
        .map(|h| {
            (
                h.clone(),
                OriginRtt {
                    host: h.clone(),
                    rtt_us: 20_000,
                    measured_at_unix_s: now,
                },
            )
        })
        .collect();
    let pages = corpus
        .pages
        .iter()
        .map(mewa_corpus::convert::to_page_meta)
        .collect();
    let (book, failed) = HintBook::build(
        pages,
        &rtts,
        HintPolicy {
            alpha: 0.5,
            ttl_s: 300,
        },
        now,
    );
    assert!(failed.is_empty());
    dns.set_book(book);
    let udp = bind_udp("127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let addr = udp[0].local_addr().unwrap();
    let tcp = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(serve(dns, udp, tcp));
    addr
}

async fn get(
    proxy: SocketAddr,
    uri: &str,
    method: &str,
    accept: &str,
) -> (http::StatusCode, Bytes) {
    let tcp = TcpStream::connect(proxy).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", accept)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_follows_the_plan_and_is_not_open() {
    let meh = generate(Preset::Meh15, 1);
    // A mid-size page: Algorithm 1 asks for several connections.
    let page = meh
        .pages
        .iter()
        .find(|p| p.name.contains("1412k"))
        .unwrap()
        .clone();
    let corpus = Corpus {
        name: "proxy".into(),
        provenance: meh.provenance.clone(),
        pages: vec![page.clone()],
    };
    let dir = std::env::temp_dir().join(format!("mewa-proxy-{}", std::process::id()));
    let origin = Origin::bind(
        &corpus,
        OriginConfig {
            plain: Some("127.0.0.1:0".parse().unwrap()),
            tls: None,
            h3: None,
            ca_dir: dir.join("ca"),
            http: HttpOptions::default(),
            tcp: TcpOptions::default(),
            quic_congestion: None,
        },
    )
    .unwrap();
    let origin_addr = origin.plain_addr().unwrap();
    tokio::spawn(origin.serve(std::future::pending::<()>()));
    let edge = edge(&corpus).await;

    let mut cfg = ProxyConfig::new(edge, 32e6);
    // Plan as if behind seed 000's radio link (loopback measures ~0 ms).
    cfg.radio_rtt = Some(std::time::Duration::from_millis(45));
    cfg.origin_port = origin_addr.port();
    let proxy = Proxy::new(cfg);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let paddr = listener.local_addr().unwrap();
    tokio::spawn(proxy.clone().serve(listener));
    let port = origin_addr.port();

    // The document first (it plans), then every object, concurrently.
    let root = page.root().unwrap();
    let url = |o: &mewa_corpus::Object| format!("http://{}:{port}{}", o.host, o.path);
    let (st, body) = get(paddr, &url(root), "GET", "text/html").await;
    assert_eq!(st, 200);
    assert_eq!(body.len() as u64, root.size);
    let mut tasks = Vec::new();
    for o in page.objects.iter().filter(|o| o.parent.is_some()) {
        let (u, size) = (url(o), o.size);
        tasks.push(tokio::spawn(async move {
            let (st, body) = get(paddr, &u, "GET", "*/*").await;
            (u, st, body.len() as u64, size)
        }));
    }
    for t in tasks {
        let (u, st, got, want) = t.await.unwrap();
        assert_eq!(st, 200, "{u}");
        assert_eq!(got, want, "{u}");
    }
    let s = &proxy.stats;
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(s.forwarded.load(Relaxed), page.objects.len() as u64);
    assert_eq!(s.sessions.load(Relaxed), 1, "one session per page load");
    assert_eq!(s.fallbacks.load(Relaxed), 0, "the hint was followed");
    let session = proxy.session_of(&root.host).await.unwrap();
    let n = session.plan.as_ref().unwrap().n as usize;
    assert!(
        n > 1,
        "a 1.4 MB page at 32 Mbit/s, 65 ms plans several connections"
    );
    assert_eq!(session.connections(), n);

    // Not an open proxy.
    let (st, _) = get(paddr, "example.com:443", "CONNECT", "*/*").await;
    assert_eq!(st, 405);
    let (st, _) = get(paddr, "/relative", "GET", "*/*").await;
    assert_eq!(st, 400);
    let (st, _) = get(paddr, "http://www.example.com:8080/", "GET", "*/*").await;
    assert_eq!(st, 403);
    // A host the edge does not know: 502, no connection anywhere.
    let (st, body) = get(
        paddr,
        &format!("http://elsewhere.invalid:{port}/"),
        "GET",
        "text/html",
    )
    .await;
    assert_eq!(st, 502, "{}", String::from_utf8_lossy(&body));
    assert!(s.refused.load(Relaxed) >= 3);
}
