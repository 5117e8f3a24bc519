//! Opening one connection: TCP (+ TLS) + HTTP/1.1 or HTTP/2 handshake, or
//! QUIC + HTTP/3, with the instants the record keeps.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::record::Protocol;

/// Chrome's HTTP/2 receive windows (6 MB per stream, 15 MB per
/// connection): large enough that flow control never limits a page load,
/// so what the lab measures is the transport.
const H2_STREAM_WINDOW: u32 = 6 * 1024 * 1024;
const H2_CONN_WINDOW: u32 = 15 * 1024 * 1024;

/// Why the TLS or QUIC client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The CA file could not be read or holds no certificate.
    #[error("CA certificate {path}: {reason}")]
    Ca {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// rustls or quinn refused the configuration.
    #[error("TLS/QUIC client setup: {0}")]
    Setup(String),
}

/// TLS client configuration trusting only `ca` with the given ALPN.
pub(crate) fn tls_config(ca: &Path, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, ConnectError> {
    let ca_err = |reason: String| ConnectError::Ca {
        path: ca.display().to_string(),
        reason,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
        .map_err(|e| ca_err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| ca_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(ca_err("no certificate in the file".into()));
    }
    // The only refusal left is of a certificate in the file.
    mewa_origin::tls::client_config(certs, alpn).map_err(|e| ca_err(e.to_string()))
}

/// A QUIC client endpoint on an ephemeral port, trusting only `ca`.
pub(crate) fn quic_endpoint(ca: &Path) -> Result<quinn::Endpoint, ConnectError> {
    let tls = tls_config(ca, &[b"h3"])?;
    let qc = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| ConnectError::Setup(e.to_string()))?;
    let bind: SocketAddr = SocketAddr::from(([0, 0, 0, 0], 0));
    let mut ep = quinn::Endpoint::client(bind).map_err(|e| ConnectError::Setup(e.to_string()))?;
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(qc)));
    Ok(ep)
}

/// The request-sending half of an open connection.
pub(crate) enum Sender {
    /// HTTP/1.1: one request at a time.
    H1(http1::SendRequest<Empty<Bytes>>),
    /// HTTP/2: clone per request.
    H2(http2::SendRequest<Empty<Bytes>>),
    /// HTTP/3: clone per request; the QUIC connection beside it tells
    /// whether the connection has closed (h3's sender does not).
    H3(
        h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
        quinn::Connection,
    ),
}

impl Sender {
    /// Whether the connection is known to be gone: the server closed it,
    /// its idle timeout passed or its driver ended. A pooled connection
    /// found so is replaced before a request is lost on it.
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
            Sender::H3(_, quic) => quic.close_reason().is_some(),
        }
    }

    /// Another handle on a multiplexed connection, for one more request;
    /// `None` for HTTP/1.1, which carries one request at a time.
    pub(crate) fn share(&self) -> Option<Sender> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
            Sender::H3(s, quic) => Some(Sender::H3(s.clone(), quic.clone())),
        }
    }
}

/// An open connection and the task driving it.
pub(crate) struct Opened {
    pub sender: Sender,
    pub driver: JoinHandle<()>,
    /// µs-stamps: transport established, ready for requests.
    pub connected_us: u64,
    pub ready_us: u64,
    /// QUIC: the transport's smoothed RTT after the handshake. A QUIC
    /// handshake can take two round trips (the server may send only three
    /// times what it received before the client's address is validated,
    /// and a certificate chain can need more), so its duration is not the
    /// RTT; TCP's connect time is (SYN to SYN-ACK).
    pub rtt: Option<std::time::Duration>,
}

/// What an open needs from its caller.
pub(crate) struct Target<'a> {
    pub addr: SocketAddr,
    pub host: &'a str,
    pub protocol: Protocol,
    pub tls: Option<&'a Arc<rustls::ClientConfig>>,
    pub quic: Option<&'a quinn::Endpoint>,
}

/// Why a connection could not be opened; the text goes into the load
/// record beside the connection and every object that waited for it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// TCP connect failed.
    #[error("connect {addr}: {source}")]
    Connect {
        /// The origin's address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The host is not a valid TLS server name.
    #[error("server name `{host}`: {message}")]
    ServerName {
        /// The host.
        host: String,
        /// rustls' reason.
        message: String,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake with {host} ({addr}): {source}")]
    Tls {
        /// The host.
        host: String,
        /// Its address.
        addr: SocketAddr,
        /// The handshake's error.
        source: std::io::Error,
    },
    /// The server chose another protocol than asked for.
    #[error("{addr} negotiated ALPN {got:?} instead of {want}")]
    Alpn {
        /// The server.
        addr: SocketAddr,
        /// What it chose, if anything.
        got: Option<String>,
        /// What the load asked for.
        want: String,
    },
    /// The HTTP/1.1 handshake failed.
    #[error("HTTP/1.1 handshake: {0}")]
    H1(hyper::Error),
    /// The HTTP/2 handshake failed.
    #[error("HTTP/2 handshake: {0}")]
    H2(hyper::Error),
    /// An HTTP/3 load without a QUIC endpoint (a setup error of the loader).
    #[error("HTTP/3 without a QUIC endpoint")]
    NoQuicEndpoint,
    /// QUIC could not start connecting, or its handshake failed.
    #[error("QUIC {stage} {host} ({addr}): {message}")]
    Quic {
        /// `connect` or `handshake with`.
        stage: &'static str,
        /// The host.
        host: String,
        /// Its address.
        addr: SocketAddr,
        /// quinn's reason.
        message: String,
    },
    /// HTTP/3 could not be set up on the QUIC connection.
    #[error("HTTP/3 setup with {addr}: {message}")]
    H3Setup {
        /// The server.
        addr: SocketAddr,
        /// h3's reason.
        message: String,
    },
}

/// Opens a connection; `now_us` reads the load's clock.
pub(crate) async fn open(t: Target<'_>, now_us: impl Fn() -> u64) -> Result<Opened, OpenError> {
    if t.protocol == Protocol::H3 {
        return open_h3(t, now_us).await;
    }
    let tcp = TcpStream::connect(t.addr)
        .await
        .map_err(|source| OpenError::Connect {
            addr: t.addr,
            source,
        })?;
    let connected_us = now_us();
    // Requests are small and latency matters more than packet count.
    let _ = tcp.set_nodelay(true);
    match t.tls {
        Some(cfg) => {
            let name =
                ServerName::try_from(t.host.to_string()).map_err(|e| OpenError::ServerName {
                    host: t.host.to_string(),
                    message: e.to_string(),
                })?;
            let tls = tokio_rustls::TlsConnector::from(Arc::clone(cfg))
                .connect(name, tcp)
                .await
                .map_err(|source| OpenError::Tls {
                    host: t.host.to_string(),
                    addr: t.addr,
                    source,
                })?;
            let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            let want: &[u8] = match t.protocol {
                Protocol::H2 => b"h2",
                _ => b"http/1.1",
            };
            if alpn.as_deref().is_some_and(|a| a != want)
                || (alpn.is_none() && t.protocol == Protocol::H2)
            {
                return Err(OpenError::Alpn {
                    addr: t.addr,
                    got: alpn.map(|a| String::from_utf8_lossy(&a).into_owned()),
                    want: String::from_utf8_lossy(want).into_owned(),
                });
            }
            handshake(TokioIo::new(tls), t.protocol, connected_us, now_us).await
        }
        None => handshake(TokioIo::new(tcp), t.protocol, connected_us, now_us).await,
    }
}

async fn handshake<I>(
    io: I,
    protocol: Protocol,
    connected_us: u64,
    now_us: impl Fn() -> u64,
) -> Result<Opened, OpenError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    match protocol {
        Protocol::H1 => {
            let (send, conn) = http1::handshake(io).await.map_err(OpenError::H1)?;
            let driver = tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Opened {
                sender: Sender::H1(send),
                driver,
                connected_us,
                ready_us: now_us(),
                rtt: None,
            })
        }
        _ => {
            let (send, conn) = http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(H2_STREAM_WINDOW)
                .initial_connection_window_size(H2_CONN_WINDOW)
                .handshake(io)
                .await
                .map_err(OpenError::H2)?;
            let driver = tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Opened {
                sender: Sender::H2(send),
                driver,
                connected_us,
                ready_us: now_us(),
                rtt: None,
            })
        }
    }
}

async fn open_h3(t: Target<'_>, now_us: impl Fn() -> u64) -> Result<Opened, OpenError> {
    let ep = t.quic.ok_or(OpenError::NoQuicEndpoint)?;
    let quic = |stage, e: &dyn std::fmt::Display| OpenError::Quic {
        stage,
        host: t.host.to_string(),
        addr: t.addr,
        message: e.to_string(),
    };
    let connecting = ep
        .connect(t.addr, t.host)
        .map_err(|e| quic("connect", &e))?;
    let conn = connecting.await.map_err(|e| quic("handshake with", &e))?;
    let connected_us = now_us();
    let rtt = conn.rtt();
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| OpenError::H3Setup {
            addr: t.addr,
            message: e.to_string(),
        })?;
    let driver = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok(Opened {
        sender: Sender::H3(send, conn),
        driver,
        connected_us,
        ready_us: now_us(),
        rtt: Some(rtt),
    })
}
