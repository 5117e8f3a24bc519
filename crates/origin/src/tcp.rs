//! Listener sockets with a chosen TCP congestion control, buffers and a hook
//! on every accepted socket (Linux).
//!
//! Accepted sockets inherit the listener's `TCP_CONGESTION` and buffer sizes,
//! so setting them once on the listener sets them per connection. This is the
//! only way inside a network namespace, where the system default (bbr here)
//! cannot be changed. The hook is where the transport work sets a
//! per-connection initial window (e.g. switching the accepted socket to a BPF
//! congestion control, whose `init()` reads the IW from socket storage).

use std::net::SocketAddr;
use std::sync::Arc;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// Called with every accepted TCP socket, before any byte is read or written.
pub type AcceptHook = Arc<dyn Fn(&tokio::net::TcpStream) + Send + Sync>;

/// Where the kernel lists the congestion controls sockets may use (built-in
/// ones and BPF `struct_ops` ones once registered).
pub const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// Per-socket TCP settings of a listener.
#[derive(Clone, Default)]
pub struct TcpOptions {
    /// `TCP_CONGESTION` by name (reno, cubic, bbr or any registered one);
    /// `None` keeps the system default.
    pub congestion: Option<String>,
    /// `SO_SNDBUF` in bytes; `None` (the default) keeps kernel autotuning
    /// (`net.ipv4.tcp_wmem`), which setting it would switch off.
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` in bytes; `None` keeps autotuning (`net.ipv4.tcp_rmem`).
    /// Set before `listen`, so the window scale accounts for it.
    pub recv_buffer: Option<usize>,
    /// Called on every accepted socket.
    pub on_accept: Option<AcceptHook>,
}

impl std::fmt::Debug for TcpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpOptions")
            .field("congestion", &self.congestion)
            .field("send_buffer", &self.send_buffer)
            .field("recv_buffer", &self.recv_buffer)
            .field(
                "on_accept",
                &self.on_accept.as_ref().map(|_| "Fn(&TcpStream)"),
            )
            .finish()
    }
}

/// Why a TCP listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    /// The congestion control is not registered in this kernel (or network
    /// namespace); pick one of `available`, or load the module / register the
    /// BPF `struct_ops` first.
    #[error("TCP congestion control `{name}` is not available (available: {available}); mewa's own (mewa_fld) need `mewa cc load` first")]
    UnknownCongestion {
        /// The name asked for.
        name: String,
        /// The kernel's list.
        available: String,
    },
    /// A socket call failed (address in use, permission, …).
    #[error("{what} on {addr}: {error}")]
    Io {
        /// Which step failed.
        what: &'static str,
        /// The listener address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
}

/// The kernel's registered congestion controls (empty if the list cannot be
/// read, e.g. not Linux).
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string(AVAILABLE_CC)
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A non-blocking listener on `addr` with `opts` applied (backlog 1024,
/// `SO_REUSEADDR`).
pub fn bind_tcp(addr: SocketAddr, opts: &TcpOptions) -> Result<std::net::TcpListener, TcpError> {
    let io = |what| move |error| TcpError::Io { what, addr, error };
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(io("socket"))?;
    sock.set_reuse_address(true).map_err(io("SO_REUSEADDR"))?;
    if let Some(name) = &opts.congestion {
        let available = available_congestion_controls();
        if !available.is_empty() && !available.iter().any(|a| a == name) {
            return Err(TcpError::UnknownCongestion {
                name: name.clone(),
                available: available.join(" "),
            });
        }
        sock.set_tcp_congestion(name.as_bytes())
            .map_err(|e| match e.raw_os_error() {
                Some(2) => TcpError::UnknownCongestion {
                    name: name.clone(),
                    available: available.join(" "),
                },
                _ => TcpError::Io {
                    what: "TCP_CONGESTION",
                    addr,
                    error: e,
                },
            })?;
    }
    if let Some(n) = opts.send_buffer {
        sock.set_send_buffer_size(n).map_err(io("SO_SNDBUF"))?;
    }
    if let Some(n) = opts.recv_buffer {
        sock.set_recv_buffer_size(n).map_err(io("SO_RCVBUF"))?;
    }
    sock.set_nonblocking(true).map_err(io("O_NONBLOCK"))?;
    sock.bind(&addr.into()).map_err(io("bind"))?;
    sock.listen(1024).map_err(io("listen"))?;
    Ok(sock.into())
}

/// The congestion control a socket uses (for tests and logs).
pub fn congestion_of(stream: &tokio::net::TcpStream) -> std::io::Result<String> {
    let name = SockRef::from(stream).tcp_congestion()?;
    Ok(String::from_utf8_lossy(&name)
        .trim_end_matches('\0')
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_congestion_is_a_clear_error() {
        let opts = TcpOptions {
            congestion: Some("surely-not-a-cc".into()),
            ..TcpOptions::default()
        };
        let e = bind_tcp("127.0.0.1:0".parse().unwrap(), &opts).unwrap_err();
        assert!(matches!(e, TcpError::UnknownCongestion { .. }), "{e}");
        assert!(e.to_string().contains("surely-not-a-cc"));
    }

    #[tokio::test]
    async fn accepted_sockets_inherit_congestion_control() {
        let avail = available_congestion_controls();
        let Some(cc) = ["reno", "cubic"]
            .into_iter()
            .find(|c| avail.iter().any(|a| a == c))
        else {
            mewa_testkit::skip("neither reno nor cubic is available in this kernel");
            return;
        };
        let opts = TcpOptions {
            congestion: Some(cc.into()),
            ..TcpOptions::default()
        };
        let l = bind_tcp("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let l = tokio::net::TcpListener::from_std(l).unwrap();
        let addr = l.local_addr().unwrap();
        let _c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        assert_eq!(congestion_of(&s).unwrap(), cc);
    }
}
