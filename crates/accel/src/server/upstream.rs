//! Reaching the origins: name resolution with the address check, TCP and
//! TLS, and a connection pool (one shared HTTP/2 connection per origin when
//! the origin speaks it, else a few idle HTTP/1.1 connections).
//!
//! The allowlist decides which *names* the accelerator may fetch from; this
//! module decides which *addresses*. A name on the list can still resolve
//! to loopback or an internal network (DNS rebinding, a stale zone), which
//! would let a page's visitors reach inside the accelerator's network, so
//! addresses from DNS must be globally reachable unless the operator says
//! otherwise (`allow_private`); addresses the operator pinned in
//! `[upstream.resolve]` are trusted as written.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use super::config::Upstream;
use crate::mapping::Scheme;

/// Body of a request sent upstream.
pub type UpBody = BoxBody<Bytes, hyper::Error>;

/// Why a request could not be sent upstream. Each becomes a 502 or 504 with
/// the reason in the log.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// DNS gave nothing.
    #[error("resolving {host}: {why}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        why: String,
    },
    /// Every address of the host is private (and `allow_private` is off).
    #[error("{host} resolves only to addresses that are not public ({addrs}); refused (set [upstream] allow_private or pin it in [upstream.resolve])")]
    PrivateAddress {
        /// The host.
        host: String,
        /// The addresses refused.
        addrs: String,
    },
    /// TCP connect failed or timed out.
    #[error("connecting to {host} ({addr}): {why}")]
    Connect {
        /// The host.
        host: String,
        /// The address tried last.
        addr: SocketAddr,
        /// Why.
        why: String,
    },
    /// The TLS handshake failed (certificate, ALPN, timeout).
    #[error("TLS with {host}: {why}")]
    Tls {
        /// The host.
        host: String,
        /// Why.
        why: String,
    },
    /// HTTP failed on the connection.
    #[error("HTTP with {host}: {error}")]
    Http {
        /// The host.
        host: String,
        /// hyper's error.
        error: hyper::Error,
    },
    /// The response head did not come in time.
    #[error("{host} did not answer within {0:?}", timeout)]
    Timeout {
        /// The host.
        host: String,
        /// The limit.
        timeout: Duration,
    },
}

impl UpstreamError {
    /// Short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            UpstreamError::Resolve { .. } => "resolve",
            UpstreamError::PrivateAddress { .. } => "private_address",
            UpstreamError::Connect { .. } => "connect",
            UpstreamError::Tls { .. } => "tls",
            UpstreamError::Http { .. } => "http",
            UpstreamError::Timeout { .. } => "timeout",
        }
    }
}

/// Whether `ip` is globally reachable: not loopback, private, shared
/// (CGNAT), link-local, unspecified, documentation, benchmarking, multicast
/// or reserved (IANA special-purpose registries), looking through IPv4
/// addresses carried in IPv6 (mapped, compatible, NAT64).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    // ::/96 (compatible, deprecated) and 64:ff9b::/96 (NAT64) carry IPv4.
    if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x2001 && s[1] < 0x0200)
        || s[0] == 0x0100)
}

#[derive(Default)]
struct HostPool {
    h2: Option<http2::SendRequest<UpBody>>,
    idle: Vec<http1::SendRequest<UpBody>>,
}

/// Counts of upstream connections, for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct PoolStats {
    /// Connections opened since start.
    pub opened: u64,
    /// Requests that reused a pooled connection.
    pub reused: u64,
}

/// The origins' client side.
pub struct Upstreams {
    cfg: Upstream,
    tls: Option<tokio_rustls::TlsConnector>,
    pools: Mutex<HashMap<(Scheme, String), HostPool>>,
    stats: Mutex<PoolStats>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").field("cfg", &self.cfg).finish()
    }
}

impl Upstreams {
    /// A client with `cfg`'s roots and policy. A missing or empty root file
    /// leaves HTTPS origins unreachable (each request says why) rather than
    /// refusing to start, so a plain-HTTP deployment needs no bundle.
    pub fn new(cfg: Upstream) -> Result<Upstreams, String> {
        let tls = match load_roots(&cfg.ca_file) {
            Ok(store) => {
                let mut c = rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS client: {e}"))?
                .with_root_certificates(store)
                .with_no_client_auth();
                c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                Some(tokio_rustls::TlsConnector::from(Arc::new(c)))
            }
            Err(why) => {
                tracing::warn!("accel: {why}; https origins cannot be reached");
                None
            }
        };
        Ok(Upstreams {
            cfg,
            tls,
            pools: Mutex::new(HashMap::new()),
            stats: Mutex::new(PoolStats::default()),
        })
    }

    /// Connection counts so far.
    pub fn stats(&self) -> PoolStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, reused: bool) {
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        if reused {
            s.reused += 1;
        } else {
            s.opened += 1;
        }
    }

    /// Sends `req` (whose URI is the absolute upstream URL) to `host` over
    /// `scheme`, on a pooled connection if one is free.
    pub async fn send(
        self: &Arc<Self>,
        scheme: Scheme,
        host: &str,
        req: http::Request<UpBody>,
    ) -> Result<http::Response<Incoming>, UpstreamError> {
        let key = (scheme, host.to_owned());
        let timeout = Duration::from_millis(self.cfg.response_timeout_ms);
        let timed = |host: &str| UpstreamError::Timeout {
            host: host.to_owned(),
            timeout,
        };
        let http_err = |error| UpstreamError::Http {
            host: host.to_owned(),
            error,
        };
        // A shared HTTP/2 connection first, then an idle HTTP/1.1 one.
        let pooled = {
            let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
            let pool = pools.entry(key.clone()).or_default();
            if pool.h2.as_ref().is_some_and(|s| s.is_closed()) {
                pool.h2 = None;
            }
            if let Some(h2) = &pool.h2 {
                Some(Conn::H2(h2.clone()))
            } else {
                let mut found = None;
                while let Some(s) = pool.idle.pop() {
                    if s.is_ready() {
                        found = Some(Conn::H1(s));
                        break;
                    }
                }
                found
            }
        };
        let conn = match pooled {
            Some(c) => {
                self.count(true);
                c
            }
            None => {
                let c = self.connect(scheme, host).await?;
                self.count(false);
                c
            }
        };
        match conn {
            Conn::H2(mut s) => {
                let req = absolute_form(req, scheme, host);
                tokio::time::timeout(timeout, s.send_request(req))
                    .await
                    .map_err(|_| timed(host))?
                    .map_err(http_err)
            }
            Conn::H1(mut s) => {
                let req = origin_form(req, host);
                let res = tokio::time::timeout(timeout, s.send_request(req))
                    .await
                    .map_err(|_| timed(host))?
                    .map_err(http_err)?;
                // Back to the pool once the response body has been read.
                let this = self.clone();
                tokio::spawn(async move {
                    if s.ready().await.is_ok() {
                        let mut pools = this.pools.lock().unwrap_or_else(|p| p.into_inner());
                        let pool = pools.entry(key).or_default();
                        if pool.idle.len() < this.cfg.idle_per_host {
                            pool.idle.push(s);
                        }
                    }
                });
                Ok(res)
            }
        }
    }

    /// The addresses to try for `host`.
    async fn addresses(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, UpstreamError> {
        if let Some(a) = self.cfg.pin(host, port) {
            return Ok(vec![a]);
        }
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| UpstreamError::Resolve {
                host: host.to_owned(),
                why: e.to_string(),
            })?
            .collect();
        if found.is_empty() {
            return Err(UpstreamError::Resolve {
                host: host.to_owned(),
                why: "no addresses".into(),
            });
        }
        if self.cfg.allow_private {
            return Ok(found);
        }
        let public: Vec<SocketAddr> = found
            .iter()
            .copied()
            .filter(|a| is_public(a.ip()))
            .collect();
        if public.is_empty() {
            let addrs: Vec<String> = found.iter().map(|a| a.ip().to_string()).collect();
            return Err(UpstreamError::PrivateAddress {
                host: host.to_owned(),
                addrs: addrs.join(", "),
            });
        }
        Ok(public)
    }

    async fn connect(&self, scheme: Scheme, host: &str) -> Result<Conn, UpstreamError> {
        let port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let limit = Duration::from_millis(self.cfg.connect_timeout_ms);
        let mut last = None;
        let mut tcp = None;
        for addr in self.addresses(host, port).await? {
            match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => {
                    tcp = Some(s);
                    break;
                }
                Ok(Err(e)) => last = Some((addr, e.to_string())),
                Err(_) => last = Some((addr, format!("timed out after {limit:?}"))),
            }
        }
        let tcp = match tcp {
            Some(t) => t,
            None => {
                let (addr, why) =
                    last.unwrap_or((SocketAddr::from(([0, 0, 0, 0], port)), "no address".into()));
                return Err(UpstreamError::Connect {
                    host: host.to_owned(),
                    addr,
                    why,
                });
            }
        };
        let _ = tcp.set_nodelay(true);
        let tls_err = |why: String| UpstreamError::Tls {
            host: host.to_owned(),
            why,
        };
        let http_err = |error| UpstreamError::Http {
            host: host.to_owned(),
            error,
        };
        match scheme {
            Scheme::Http => {
                let (send, conn) = http1::handshake(TokioIo::new(tcp))
                    .await
                    .map_err(http_err)?;
                tokio::spawn(conn);
                Ok(Conn::H1(send))
            }
            Scheme::Https => {
                let connector = self.tls.clone().ok_or_else(|| {
                    tls_err(format!("no trusted roots ({})", self.cfg.ca_file.display()))
                })?;
                let name =
                    ServerName::try_from(host.to_owned()).map_err(|e| tls_err(e.to_string()))?;
                let tls = tokio::time::timeout(limit, connector.connect(name, tcp))
                    .await
                    .map_err(|_| tls_err(format!("handshake timed out after {limit:?}")))?
                    .map_err(|e| tls_err(e.to_string()))?;
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                if h2 {
                    let (send, conn) = http2::Builder::new(TokioExecutor::new())
                        .handshake(TokioIo::new(tls))
                        .await
                        .map_err(http_err)?;
                    tokio::spawn(conn);
                    let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
                    pools.entry((scheme, host.to_owned())).or_default().h2 = Some(send.clone());
                    Ok(Conn::H2(send))
                } else {
                    let (send, conn) = http1::handshake(TokioIo::new(tls))
                        .await
                        .map_err(http_err)?;
                    tokio::spawn(conn);
                    Ok(Conn::H1(send))
                }
            }
        }
    }
}

enum Conn {
    H1(http1::SendRequest<UpBody>),
    H2(http2::SendRequest<UpBody>),
}

/// HTTP/2 wants scheme and authority in the URI (`:scheme`, `:authority`).
fn absolute_form(
    mut req: http::Request<UpBody>,
    scheme: Scheme,
    host: &str,
) -> http::Request<UpBody> {
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if let Ok(uri) = format!("{}://{host}{pq}", scheme.as_str()).parse() {
        *req.uri_mut() = uri;
    }
    req.headers_mut().remove(http::header::HOST);
    req
}

/// HTTP/1.1 wants origin-form and a `Host` field.
fn origin_form(mut req: http::Request<UpBody>, host: &str) -> http::Request<UpBody> {
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if let Ok(uri) = pq.parse() {
        *req.uri_mut() = uri;
    }
    if let Ok(h) = http::HeaderValue::from_str(host) {
        req.headers_mut().insert(http::header::HOST, h);
    }
    req
}

/// Reads a PEM bundle of trusted roots.
fn load_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut store = rustls::RootCertStore::empty();
    let iter = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("[upstream] ca_file {}: {e}", path.display()))?;
    for c in iter {
        let c = c.map_err(|e| format!("[upstream] ca_file {}: {e}", path.display()))?;
        // A bundle may hold certificates webpki cannot use; skip them.
        let _ = store.add(c);
    }
    if store.is_empty() {
        return Err(format!(
            "[upstream] ca_file {}: no usable certificate",
            path.display()
        ));
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for a in [
            "0.0.0.0",
            "10.1.2.3",
            "127.0.0.1",
            "100.64.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "::127.0.0.1",
            "100::1",
        ] {
            let ip: IpAddr = a.parse().expect(a);
            assert!(!is_public(ip), "{a} must not be public");
        }
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            let ip: IpAddr = a.parse().expect(a);
            assert!(is_public(ip), "{a} is public");
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_unless_allowed() {
        let up = Upstreams::new(Upstream::default()).expect("upstreams");
        match up.addresses("localhost", 80).await {
            Err(UpstreamError::PrivateAddress { host, .. }) => assert_eq!(host, "localhost"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let up = Upstreams::new(Upstream {
            allow_private: true,
            ..Upstream::default()
        })
        .expect("upstreams");
        assert!(up.addresses("localhost", 80).await.is_ok());
        let mut pinned = Upstream::default();
        pinned.resolve.insert("b.example".into(), "10.0.0.9".into());
        let up = Upstreams::new(pinned).expect("upstreams");
        let a = up.addresses("b.example", 443).await.expect("pinned");
        assert_eq!(a, vec![SocketAddr::from(([10, 0, 0, 9], 443))]);
    }
}
