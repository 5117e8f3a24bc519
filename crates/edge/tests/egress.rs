//! The tracer's SOCKS5 egress filter on real sockets: a zone host is
//! reached, an address inside the edge's network is refused whether it is
//! named by address or by a name that resolves to it.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mewa_edge::dns::Zone;
use mewa_edge::egress::{serve, EgressPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The filter for a zone of `hosts` (each at 127.0.0.1), on loopback.
async fn filter(hosts: &[&str]) -> (SocketAddr, Arc<EgressPolicy>) {
    let zone = Zone::new(
        hosts
            .iter()
            .map(|h| (h.to_string(), vec!["127.0.0.1".parse().unwrap()])),
        30,
    );
    let policy = Arc::new(EgressPolicy::new(Arc::new(zone), []));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(serve(l, policy.clone()));
    (addr, policy)
}

/// A SOCKS5 CONNECT to `target` (a name, or an IPv4 address) and port
/// through `proxy`: the reply code, and the stream.
async fn connect(proxy: SocketAddr, target: &str, port: u16) -> (u8, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.unwrap();
    assert_eq!(m, [5, 0]);
    let mut req = vec![5, 1, 0];
    match target.parse::<std::net::Ipv4Addr>() {
        Ok(a) => {
            req.push(1);
            req.extend_from_slice(&a.octets());
        }
        Err(_) => {
            req.push(3);
            req.push(target.len() as u8);
            req.extend_from_slice(target.as_bytes());
        }
    }
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).await.unwrap();
    (rep[1], s)
}

#[tokio::test]
async fn the_tracer_reaches_the_zone_and_nothing_inside() {
    // An "origin" on loopback that echoes.
    let origin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = origin.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = origin.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 5];
                if s.read_exact(&mut b).await.is_ok() {
                    let _ = s.write_all(&b).await;
                }
            });
        }
    });
    // A zone host at 127.0.0.1 is the operator's origin: reached.
    let (proxy, policy) = filter(&["www.a.example"]).await;
    let (code, mut s) = connect(proxy, "WWW.A.EXAMPLE", port).await;
    assert_eq!(code, 0);
    s.write_all(b"hello").await.unwrap();
    let mut b = [0u8; 5];
    s.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"hello");
    // Loopback by address, or by a name resolving to it, when it is not
    // the zone's: refused (2: not allowed by the rule set).
    let (proxy, policy2) = filter(&[]).await;
    assert_eq!(connect(proxy, "127.0.0.1", port).await.0, 2);
    assert_eq!(connect(proxy, "localhost", port).await.0, 2);
    assert_eq!(connect(proxy, "10.0.0.1", 80).await.0, 2);
    assert_eq!(policy2.refused.load(Ordering::Relaxed), 3);
    assert_eq!(policy.connected.load(Ordering::Relaxed), 1);
}
