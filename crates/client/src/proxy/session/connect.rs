//! One HTTP/2 connection to the origin: TCP, TLS when the page is
//! `https://`, the HTTP/2 handshake, and the TCP handshake's round trip
//! the plan's budgets and seed 001's window use. Apart from the session's
//! opening because it knows nothing of hints or plans: it is the transport
//! every planned connection is made with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use crate::proxy::ProxyBody;

/// A connection's byte stream: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// One HTTP/2 connection to the origin: h2c, or over TLS naming `host`
/// (ALPN `h2`) when `tls` is given; with the time its TCP handshake took
/// (a round trip).
pub(super) async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<(Arc<rustls::ClientConfig>, String)>,
) -> Result<(http2::SendRequest<ProxyBody>, Duration), String> {
    let t0 = Instant::now();
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let rtt = t0.elapsed();
    let _ = tcp.set_nodelay(true);
    let builder = {
        let mut b = http2::Builder::new(TokioExecutor::new());
        b.initial_stream_window_size(8 << 20)
            .initial_connection_window_size(16 << 20);
        b
    };
    let io: Box<dyn Io> = match tls {
        None => Box::new(tcp),
        Some((cfg, host)) => {
            let name = rustls::pki_types::ServerName::try_from(host)
                .map_err(|e| format!("TLS name: {e}"))?;
            let s = tokio::time::timeout(
                timeout,
                tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
            )
            .await
            .map_err(|_| format!("no TLS handshake within {timeout:?}"))?
            .map_err(|e| format!("TLS: {e}"))?;
            Box::new(s)
        }
    };
    let (send, conn) = builder
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((send, rtt))
}
