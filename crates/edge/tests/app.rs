//! The whole edge on loopback: a store with a page, DNS with the hint, the
//! latency monitor measuring a real listener, query counts reaching the
//! store, and the admin API (JSON, status page, Prometheus) describing it.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use mewa_edge::app::{with_store, Edge};
use mewa_edge::config::EdgeConfig;
use mewa_hint::dns::{HintRequest, HintResponse, OPTION_CODE};
use mewa_hint::page::{synthetic_page, PageMeta};
use mewa_hint::wire::Hint;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

const PAGE: &str = "http://www.shop.example/";

fn page() -> PageMeta {
    PageMeta {
        computation_ms: Some(300),
        ..synthetic_page(PAGE, 20, 1, |i| 5_000 * (i as u64 + 1))
    }
}

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_get_headers(addr, path, "").await
}

/// A GET of `path` with extra header lines `headers` (each ending in CRLF).
async fn http_get_headers(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: edge\r\n{headers}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).await.unwrap();
    let status = r[9..12].parse().unwrap();
    let body = r
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_serves_hints_measures_origins_and_reports() {
    let dir = std::env::temp_dir().join(format!("mewa-edge-app-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The "origin": a listener the monitor can time.
    let origin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let oport = origin.local_addr().unwrap().port();
    tokio::spawn(async move { while origin.accept().await.is_ok() {} });

    let toml = format!(
        "[dns]\nlisten = \"127.0.0.1:0\"\nudp_sockets = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [store]\npath = \"{}\"\n[zone]\n\"www.shop.example\" = [\"127.0.0.1\"]\n\
         [monitor]\nport = {oport}\nevery_s = 3600\n",
        dir.join("edge.sqlite").display()
    );
    let cfg = EdgeConfig::parse(&toml, std::path::Path::new("test.toml")).unwrap();
    let (edge, bound) = Edge::bind(cfg).await.unwrap();
    with_store(&edge.store, |s| s.put_page(&page(), "test", 1))
        .await
        .unwrap();
    let (dns_addr, admin_addr) = (bound.dns_addr, bound.admin_addr);
    let e2: Edge = edge.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(e2.serve(bound, async {
        let _ = stop_rx.await;
    }));
    // serve() builds the book first; then the monitor probes at once.
    for _ in 0..50 {
        if edge.dns.book().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(edge.dns.book().len(), 1);
    let (probed, failed) = edge.probe_origins().await;
    assert_eq!((probed, failed), (1, 0));
    assert_eq!(edge.rebuild().await.unwrap(), 1);

    // DNS with the hint, which now carries the measured RTT.
    let mut q = Message::query();
    q.add_query(Query::query(
        Name::from_ascii("www.shop.example.").unwrap(),
        RecordType::A,
    ));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    e.options_mut().insert(EdnsOption::Unknown(
        OPTION_CODE,
        HintRequest {
            page_url: PAGE.into(),
        }
        .encode()
        .unwrap(),
    ));
    q.set_edns(e);
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&q.to_vec().unwrap(), dns_addr).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(3), sock.recv(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let r = Message::from_vec(&buf[..n]).unwrap();
    let opt = r
        .edns
        .as_ref()
        .unwrap()
        .option(EdnsCode::Unknown(OPTION_CODE));
    let Some(EdnsOption::Unknown(_, data)) = opt else {
        panic!("no hint option")
    };
    let HintResponse::Hint(bytes) = HintResponse::decode(data).unwrap() else {
        panic!("no hint")
    };
    let hint = Hint::from_bytes(&bytes).unwrap();
    assert_eq!(hint.object_count, 20);
    assert_eq!(hint.computation_ms, Some(300));
    assert!(
        hint.origins[0].rtt_100us.is_some(),
        "RTT measured and hinted"
    );

    // Counts reach the store.
    edge.flush_counts().await.unwrap();
    let top = with_store(&edge.store, |s| s.top_pages(0, 5))
        .await
        .unwrap();
    assert_eq!(top, vec![(PAGE.to_string(), 1)]);

    // Admin API.
    let (st, body) = http_get(admin_addr, "/api/pages").await;
    assert_eq!(st, 200);
    assert!(
        body.contains(PAGE) && body.contains("\"queries\": 1"),
        "{body}"
    );
    let (st, body) = http_get(admin_addr, "/api/hint?url=http%3A%2F%2Fwww.shop.example%2F").await;
    assert_eq!(st, 200);
    assert!(body.contains("\"object_count\": 20"), "{body}");
    let (st, _) = http_get(admin_addr, "/api/hint?url=http://nope.example/").await;
    assert_eq!(st, 404);
    let (st, body) = http_get(admin_addr, "/api/latency").await;
    assert_eq!(st, 200);
    assert!(body.contains("www.shop.example"), "{body}");
    let (st, body) = http_get(admin_addr, "/metrics").await;
    assert_eq!(st, 200);
    assert!(body.contains("mewa_edge_hints_urls_total 1"), "{body}");
    assert!(body.contains("mewa_edge_hint_bytes_count 1"), "{body}");
    let (st, body) = http_get(admin_addr, "/").await;
    assert_eq!(st, 200);
    assert!(body.contains("<table>") && body.contains("www.shop.example"));
    let (st, _) = http_get(admin_addr, "/nope").await;
    assert_eq!(st, 404);
    let mut s = TcpStream::connect(admin_addr).await.unwrap();
    s.write_all(
        b"POST /api/pages HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).await.unwrap();
    assert!(r.starts_with("HTTP/1.1 405"), "{r}");

    let _ = stop_tx.send(());
    serving.await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

async fn http_get_with(addr: SocketAddr, path: &str, auth: &str) -> u16 {
    http_get_headers(addr, path, auth).await.0
}

/// The admin API beyond loopback needs a token, and with a token the
/// paths that show what users browse need it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_beyond_loopback_needs_a_token() {
    let dir = std::env::temp_dir().join(format!("mewa-edge-admin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let toml = |admin: &str| {
        format!(
            "[dns]\nlisten = \"127.0.0.1:0\"\nudp_sockets = 1\n[admin]\n{admin}\n\
             [store]\npath = \"{}\"\n",
            dir.join("edge.sqlite").display()
        )
    };
    let parse = |t: &str| EdgeConfig::parse(t, std::path::Path::new("test.toml"));
    // Anywhere but loopback without a token: refused, saying why.
    let cfg = parse(&toml("listen = \"0.0.0.0:0\"")).unwrap();
    let e = Edge::bind(cfg).await.unwrap_err().to_string();
    assert!(
        e.contains("without a token") && e.contains("[admin] token"),
        "{e}"
    );
    // A token too short to be one.
    let e = parse(&toml("listen = \"0.0.0.0:0\"\ntoken = \"secret\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("admin.token"), "{e}");
    // With a token: served, the revealing paths only with it.
    let token = "0123456789abcdef-token";
    let cfg = parse(&toml(&format!(
        "listen = \"0.0.0.0:0\"\ntoken = \"{token}\""
    )))
    .unwrap();
    let (edge, bound) = Edge::bind(cfg).await.unwrap();
    let admin = SocketAddr::from(([127, 0, 0, 1], bound.admin_addr.port()));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(edge.serve(bound, async {
        let _ = stop_rx.await;
    }));
    let good = format!("Authorization: Bearer {token}\r\n");
    let wrong = format!("Authorization: Bearer {}x\r\n", &token[..token.len() - 1]);
    for path in [
        "/",
        "/api/pages",
        "/api/queries",
        "/api/hint?url=http://a.example/",
    ] {
        assert_eq!(http_get_with(admin, path, "").await, 401, "{path}");
        assert_eq!(http_get_with(admin, path, &wrong).await, 401, "{path}");
        assert_ne!(http_get_with(admin, path, &good).await, 401, "{path}");
    }
    // Aggregates stay open (Prometheus scrapes them).
    assert_eq!(http_get_with(admin, "/metrics", "").await, 200);
    assert_eq!(http_get_with(admin, "/api/stats", "").await, 200);
    let _ = stop_tx.send(());
    let _ = serving.await;
}
