//! The page tracer's only way out: a SOCKS5 proxy (RFC 1928: CONNECT, no
//! authentication) on loopback that the tracer's Chromium must use for
//! every request, and which refuses to connect to addresses inside the
//! edge's network.
//!
//! The pages the tracer loads come from client queries, so a client could
//! name a page whose redirect, sub-resource or DNS name leads to the edge
//! itself, its metadata service or its private network (request forgery),
//! and read the sizes back in a hint. A check of the page URL alone cannot
//! see those; this proxy sees every connection the browser makes, after
//! the name is resolved, and connects to exactly the address it checked
//! (no second lookup for a rebinding name to change).
//!
//! Refused: loopback, unspecified, private (RFC 1918), shared (RFC 6598),
//! link-local, unique-local (fc00::/7), multicast and broadcast addresses,
//! IPv4-mapped forms of them, and the edge's own listening addresses —
//! unless the address belongs to a host of the edge's zone (the origins
//! the operator configured: in the lab those are private addresses on
//! purpose). Names of the zone resolve to their zone addresses; other
//! names through the system resolver. Chromium sends SOCKS5 requests by
//! name, so `--host-resolver-rules` does not apply to proxied requests
//! and the proxy is the resolver.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::dns::Zone;

/// How long a client may take over the SOCKS handshake, and a connection
/// to the chosen address.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// What the tracer's browser may reach.
#[derive(Debug)]
pub struct EgressPolicy {
    zone: Arc<Zone>,
    /// Addresses of the zone's hosts: allowed even when private.
    zone_addrs: HashSet<IpAddr>,
    /// The edge's own listening addresses: never.
    own: HashSet<IpAddr>,
    /// Connections refused.
    pub refused: AtomicU64,
    /// Connections made.
    pub connected: AtomicU64,
}

impl EgressPolicy {
    /// A policy for an edge answering `zone` and listening on `own`.
    pub fn new(zone: Arc<Zone>, own: impl IntoIterator<Item = IpAddr>) -> EgressPolicy {
        let zone_addrs = zone.addresses().collect();
        EgressPolicy {
            zone,
            zone_addrs,
            own: own.into_iter().filter(|a| !a.is_unspecified()).collect(),
            refused: AtomicU64::new(0),
            connected: AtomicU64::new(0),
        }
    }

    /// Why the browser must not connect to `ip`, or `None` when it may.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = canonical(ip);
        if self.own.contains(&ip) {
            return Some("the edge's own address");
        }
        if self.zone_addrs.contains(&ip) {
            return None;
        }
        inside(ip)
    }

    /// The addresses of `name`: the zone's, else the system resolver's.
    async fn resolve(&self, name: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
        if let Some(a) = self.zone.get(name) {
            return Ok(a.to_vec());
        }
        Ok(tokio::net::lookup_host((name, port))
            .await?
            .map(|s| s.ip())
            .collect())
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Why `ip` is inside some network the edge must not reach from its
/// tracer, or `None` for a public address.
pub fn inside(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() || v4.is_unspecified() || o[0] == 0 {
                Some("a loopback or unspecified address")
            } else if v4.is_private() {
                Some("a private address")
            } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
                Some("a shared (carrier-grade NAT) address")
            } else if v4.is_link_local() {
                Some("a link-local address (cloud metadata lives there)")
            } else if v4.is_multicast() || v4.is_broadcast() || o[0] >= 240 {
                Some("a multicast, broadcast or reserved address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_loopback() || v6.is_unspecified() {
                Some("a loopback or unspecified address")
            } else if (s[0] & 0xfe00) == 0xfc00 {
                Some("a unique-local address")
            } else if (s[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// Serves SOCKS5 clients from `listener` (bind it on loopback) until the
/// task is dropped.
pub async fn serve(listener: TcpListener, policy: Arc<EgressPolicy>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, peer)) if peer.ip().is_loopback() => {
                    conns.spawn(client(s, policy.clone()));
                }
                // Only the edge's own browser, on this machine.
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// SOCKS5 reply codes (RFC 1928 §6).
mod reply {
    pub const OK: u8 = 0;
    pub const FAILURE: u8 = 1;
    pub const NOT_ALLOWED: u8 = 2;
    pub const HOST_UNREACHABLE: u8 = 4;
    pub const COMMAND: u8 = 7;
    pub const ADDRESS_TYPE: u8 = 8;
}

async fn client(mut s: TcpStream, policy: Arc<EgressPolicy>) {
    let Ok(Ok(Some(up))) = tokio::time::timeout(HANDSHAKE, handshake(&mut s, &policy)).await else {
        return;
    };
    let mut up = up;
    let _ = tokio::io::copy_bidirectional(&mut s, &mut up).await;
}

/// The SOCKS5 exchange: `Some` upstream connection once the reply has
/// gone, `None` when the request was refused (the reply says why).
async fn handshake(s: &mut TcpStream, policy: &EgressPolicy) -> std::io::Result<Option<TcpStream>> {
    let mut head = [0u8; 2];
    s.read_exact(&mut head).await?;
    let mut methods = vec![0u8; usize::from(head[1])];
    s.read_exact(&mut methods).await?;
    if head[0] != 5 || !methods.contains(&0) {
        s.write_all(&[5, 0xff]).await?;
        return Ok(None);
    }
    s.write_all(&[5, 0]).await?;
    let mut req = [0u8; 4];
    s.read_exact(&mut req).await?;
    let fail = |code: u8| [5, code, 0, 1, 0, 0, 0, 0, 0, 0];
    if req[0] != 5 {
        return Ok(None);
    }
    let target = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            s.read_exact(&mut a).await?;
            Target::Addr(IpAddr::from(a))
        }
        4 => {
            let mut a = [0u8; 16];
            s.read_exact(&mut a).await?;
            Target::Addr(IpAddr::from(a))
        }
        3 => {
            let mut len = [0u8; 1];
            s.read_exact(&mut len).await?;
            let mut name = vec![0u8; usize::from(len[0])];
            s.read_exact(&mut name).await?;
            Target::Name(String::from_utf8_lossy(&name).into_owned())
        }
        _ => {
            s.write_all(&fail(reply::ADDRESS_TYPE)).await?;
            return Ok(None);
        }
    };
    let mut port = [0u8; 2];
    s.read_exact(&mut port).await?;
    let port = u16::from_be_bytes(port);
    if req[1] != 1 {
        s.write_all(&fail(reply::COMMAND)).await?;
        return Ok(None);
    }
    let addrs = match &target {
        Target::Addr(a) => vec![*a],
        Target::Name(n) => match policy.resolve(n, port).await {
            Ok(a) if !a.is_empty() => a,
            _ => {
                s.write_all(&fail(reply::HOST_UNREACHABLE)).await?;
                return Ok(None);
            }
        },
    };
    // Every address of the name must be outside: a name with one public and
    // one private address must not be a way in.
    if let Some(why) = addrs.iter().find_map(|a| policy.refusal(*a)) {
        policy.refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!(target = %target, %why, "edge: tracer egress refused");
        s.write_all(&fail(reply::NOT_ALLOWED)).await?;
        return Ok(None);
    }
    for a in addrs {
        let connected =
            tokio::time::timeout(HANDSHAKE, TcpStream::connect(SocketAddr::new(a, port))).await;
        if let Ok(Ok(up)) = connected {
            policy.connected.fetch_add(1, Ordering::Relaxed);
            s.write_all(&[5, reply::OK, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
            return Ok(Some(up));
        }
    }
    s.write_all(&fail(reply::FAILURE)).await?;
    Ok(None)
}

/// What a SOCKS request names.
#[derive(Debug)]
enum Target {
    Addr(IpAddr),
    Name(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Addr(a) => write!(f, "{a}"),
            Target::Name(n) => f.write_str(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_addresses_are_refused_and_public_ones_allowed() {
        for bad in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "ff02::1",
        ] {
            assert!(inside(bad.parse().unwrap()).is_some(), "{bad}");
        }
        for ok in [
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(inside(ok.parse().unwrap()), None, "{ok}");
        }
    }

    #[test]
    fn the_zone_s_own_addresses_are_allowed_and_the_edge_s_are_not() {
        let zone = Arc::new(Zone::new(
            [(
                "www.a.example".to_string(),
                vec!["10.0.0.2".parse().unwrap()],
            )],
            30,
        ));
        let p = EgressPolicy::new(zone, ["192.0.2.53".parse().unwrap()]);
        assert_eq!(p.refusal("10.0.0.2".parse().unwrap()), None);
        assert!(p.refusal("10.0.0.3".parse().unwrap()).is_some());
        assert!(p.refusal("192.0.2.53".parse().unwrap()).is_some());
        assert_eq!(p.refusal("192.0.2.54".parse().unwrap()), None);
    }
}
