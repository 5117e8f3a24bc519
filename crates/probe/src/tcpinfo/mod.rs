//! What the kernel knows about a namespace's TCP: every socket's
//! `tcp_info` (congestion window, RTT, retransmissions, RTOs) and the
//! namespace's TCP counters, sampled over a page load (seed 003: what TCP
//! does over a cellular link).
//!
//! - [`wire`] (pure): `struct tcp_info` of any kernel version and the
//!   NETLINK_SOCK_DIAG messages that carry it.
//! - [`mod@counters`] (pure): `/proc/net/netstat` and `/proc/net/snmp`.
//! - [`series`] (pure): per-socket time series from repeated dumps,
//!   bounded in memory.
//! - This module (runtime): [`dump`] and [`counters()`] for the calling
//!   thread's namespace, and the [`Sampler`] that dumps every few
//!   milliseconds on a thread of its own inside a [`Topology`]'s host.
//!
//! Why sock_diag rather than `getsockopt(TCP_INFO)`: the sockets to watch
//! belong to other code (the origin, the loader, Chromium), and one dump
//! sees all of them, including those the application already closed but
//! the kernel still retransmits. Unprivileged processes may dump their own
//! namespace's sockets; the lab's namespaces need root anyway.
//!
//! Everything here works on the *calling thread's* network namespace: the
//! lab enters namespaces per thread, so the netlink socket is opened and
//! `/proc/thread-self/net` is read on that thread (`/proc/net` would be the
//! main thread's namespace).

pub mod counters;
pub mod series;
pub mod wire;

use std::io::{self, Read};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mewa_link::runtime::{self, Topology};
use socket2::{Domain, Protocol, Socket, Type};

pub use counters::{Counters, CountersError, RepairCounters};
pub use series::{Filter, Limits, Recorder, Sample, Samples, SocketKey, SocketSeries};
pub use wire::{Family, SocketInfo, TcpInfo, WireError};

/// Receive buffer for dump replies: the kernel fills at most 32 KiB per
/// datagram (`netlink_recvmsg` caps `max_recvmsg_len`), so twice that is
/// never cut short.
const RECV_BUF: usize = 64 * 1024;
/// How long a dump may wait for the kernel before it is given up.
const DUMP_TIMEOUT: Duration = Duration::from_secs(2);

/// A NETLINK_SOCK_DIAG socket of the namespace it was opened in, reused
/// for many dumps.
struct DiagSocket {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl DiagSocket {
    fn open() -> io::Result<DiagSocket> {
        // socket2 opens it with SOCK_CLOEXEC; the netlink socket belongs to
        // the calling thread's network namespace from here on.
        let sock = Socket::new(
            Domain::from(wire::AF_NETLINK),
            Type::DGRAM,
            Some(Protocol::from(wire::NETLINK_SOCK_DIAG)),
        )?;
        sock.set_read_timeout(Some(DUMP_TIMEOUT))?;
        Ok(DiagSocket {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF],
        })
    }

    fn dump(&mut self, family: Family) -> io::Result<Vec<SocketInfo>> {
        self.seq = self.seq.wrapping_add(1);
        // No address: an unconnected netlink socket sends to the kernel
        // (port 0) and is bound to a port of its own on first use.
        let req = wire::dump_request(family, self.seq);
        let sent = self.sock.send(&req)?;
        if sent != req.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("sock_diag request: sent {sent} of {} bytes", req.len()),
            ));
        }
        let mut sockets = Vec::new();
        loop {
            let n = (&self.sock).read(&mut self.buf)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "sock_diag: empty datagram before the end of the dump",
                ));
            }
            let chunk = wire::parse_dump(&self.buf[..n], self.seq).map_err(|e| match e {
                WireError::Kernel(errno) => io::Error::from_raw_os_error(errno),
                other => io::Error::new(io::ErrorKind::InvalidData, other),
            })?;
            sockets.extend(chunk.sockets);
            if chunk.done {
                return Ok(sockets);
            }
        }
    }
}

/// Every IPv4 TCP socket of the calling thread's network namespace, in
/// every state, with its `tcp_info` and congestion control.
pub fn dump() -> io::Result<Vec<SocketInfo>> {
    dump_family(Family::V4)
}

/// [`dump`] for either address family.
pub fn dump_family(family: Family) -> io::Result<Vec<SocketInfo>> {
    DiagSocket::open()?.dump(family)
}

/// The calling thread's namespace's TCP counters
/// (`/proc/thread-self/net/{netstat,snmp}`).
pub fn counters() -> io::Result<Counters> {
    let netstat = std::fs::read_to_string("/proc/thread-self/net/netstat")?;
    let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
    Counters::parse(&netstat, &snmp).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// `host`'s TCP counters in a running topology; empty if they cannot be
/// read (a load still counts, its counter columns read zero).
pub fn counters_in(topo: &Topology, host: &str) -> Counters {
    topo.in_namespace(host, counters)
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// How a [`Sampler`] samples.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Time between dumps ([`Sampler::DEFAULT_EVERY`]). A dump of a few
    /// dozen sockets costs tens of microseconds.
    pub every: Duration,
    /// Which sockets to follow.
    pub filter: Filter,
    /// Memory bounds.
    pub limits: Limits,
    /// The address family dumped.
    pub family: Family,
}

impl Default for SamplerConfig {
    fn default() -> SamplerConfig {
        SamplerConfig {
            every: Sampler::DEFAULT_EVERY,
            filter: Filter::All,
            limits: Limits::default(),
            family: Family::V4,
        }
    }
}

/// Why a sampler did not start or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// The host is unknown or its namespace could not be entered.
    #[error("tcpinfo sampler: {0}")]
    Topology(#[from] runtime::Error),
    /// The netlink socket could not be opened in the namespace, or the
    /// first dump failed (a kernel without `inet_diag`/`tcp_diag`?).
    #[error("tcpinfo sampler: sock_diag: {0}")]
    Socket(io::Error),
    /// The sampling thread could not start or panicked.
    #[error("tcpinfo sampler: {0}")]
    Thread(String),
}

/// Dumps a namespace's TCP sockets at a fixed interval on a thread of its
/// own, until [`Sampler::stop`].
///
/// ```no_run
/// # use std::time::Duration;
/// # use mewa_probe::tcpinfo::{Filter, Sampler};
/// # fn f(topo: &mewa_link::runtime::Topology) -> Result<(), Box<dyn std::error::Error>> {
/// let sampler = Sampler::start(topo, "origin", Duration::from_millis(20), Filter::Port(443))?;
/// // … the page load …
/// let samples = sampler.stop()?;
/// for s in &samples.sockets {
///     println!("{} → {}: {} samples", s.key.src, s.key.dst, s.samples.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Samples>,
    started: Instant,
}

impl Sampler {
    /// 20 ms: finer than any cellular RTT, so every round trip's window is
    /// seen.
    pub const DEFAULT_EVERY: Duration = Duration::from_millis(20);

    /// Starts sampling `host`'s namespace every `every`.
    pub fn start(
        topo: &Topology,
        host: &str,
        every: Duration,
        filter: Filter,
    ) -> Result<Sampler, SamplerError> {
        let config = SamplerConfig {
            every,
            filter,
            ..SamplerConfig::default()
        };
        Sampler::start_with(topo, host, config)
    }

    /// [`Sampler::start`] with every setting.
    pub fn start_with(
        topo: &Topology,
        host: &str,
        config: SamplerConfig,
    ) -> Result<Sampler, SamplerError> {
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (stop, stop_rx) = mpsc::channel();
        let handle = topo.spawn_in(host, move || run(config, ready_tx, stop_rx))?;
        Sampler::started(handle, ready_rx, stop)
    }

    /// Starts sampling the calling thread's namespace (a new thread
    /// inherits its creator's): outside a topology, and in tests.
    pub fn start_here(config: SamplerConfig) -> Result<Sampler, SamplerError> {
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (stop, stop_rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("mewa-tcpinfo".into())
            .spawn(move || run(config, ready_tx, stop_rx))
            .map_err(|e| SamplerError::Thread(format!("starting the thread: {e}")))?;
        Sampler::started(handle, ready_rx, stop)
    }

    /// Waits for the thread's first dump.
    fn started(
        handle: JoinHandle<Samples>,
        ready: mpsc::Receiver<io::Result<Instant>>,
        stop: mpsc::Sender<()>,
    ) -> Result<Sampler, SamplerError> {
        match ready.recv() {
            Ok(Ok(started)) => Ok(Sampler {
                stop,
                handle,
                started,
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(SamplerError::Socket(e))
            }
            Err(_) => {
                let _ = handle.join();
                Err(SamplerError::Thread(
                    "the sampler ended before its first dump".into(),
                ))
            }
        }
    }

    /// The instant [`Sample::t_us`] counts from (the first dump's), to line
    /// samples up with a load record or the link's clock.
    pub fn started_at(&self) -> Instant {
        self.started
    }

    /// Takes a last dump (the state at the end) and returns everything
    /// recorded.
    pub fn stop(self) -> Result<Samples, SamplerError> {
        // A send error means the thread is gone already; join says why.
        let _ = self.stop.send(());
        self.handle
            .join()
            .map_err(|_| SamplerError::Thread("the sampler panicked".into()))
    }
}

/// The sampling thread: opens the socket, reports the first dump's
/// outcome, then dumps on a fixed schedule until told to stop (or the
/// [`Sampler`] is dropped).
fn run(
    config: SamplerConfig,
    ready: mpsc::SyncSender<io::Result<Instant>>,
    stop: mpsc::Receiver<()>,
) -> Samples {
    let mut rec = Recorder::new(config.filter, config.limits);
    let first = DiagSocket::open().and_then(|mut s| s.dump(config.family).map(|d| (s, d)));
    let (mut sock, first) = match first {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return rec.finish();
        }
    };
    let t0 = Instant::now();
    rec.observe(0, &first);
    if ready.send(Ok(t0)).is_err() {
        return rec.finish();
    }
    let every = config.every.max(Duration::from_millis(1));
    let mut next = t0 + every;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        let last = match stop.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
        };
        let now = Instant::now();
        let t_us = u64::try_from(now.duration_since(t0).as_micros()).unwrap_or(u64::MAX);
        match sock.dump(config.family) {
            Ok(d) => rec.observe(t_us, &d),
            Err(e) => {
                rec.failed(e.to_string());
                // The rest of a failed dump may still be queued and would
                // fail the next one too (its sequence number is old): start
                // over on a fresh socket, or keep the old one if none opens.
                if let Ok(fresh) = DiagSocket::open() {
                    sock = fresh;
                }
            }
        }
        if last {
            return rec.finish();
        }
        // A fixed schedule; ticks missed while the machine was busy are
        // skipped, not caught up in a burst.
        next += every;
        let now = Instant::now();
        if next <= now {
            let behind = now.duration_since(next).as_nanos() / every.as_nanos().max(1);
            next += every * u32::try_from(behind + 1).unwrap_or(u32::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{SocketAddr, TcpListener, TcpStream};

    const BYTES: usize = 2_000_000;

    /// A loopback connection that has carried `BYTES` from the client to
    /// the server (everything read), both ends still open.
    fn transfer() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut server, _) = l.accept().expect("accept");
        let reader = std::thread::spawn(move || {
            let mut got = 0;
            let mut buf = vec![0u8; 65536];
            while got < BYTES {
                match server.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            (server, got)
        });
        (&client).write_all(&vec![7u8; BYTES]).expect("write");
        let (server, got) = reader.join().expect("reader");
        assert_eq!(got, BYTES);
        (client, server)
    }

    /// Dumps until `pick` finds a socket that satisfies `done` (the peer's
    /// ACKs may still be in flight when the reader is done), or 2 s pass.
    /// `None` after skipping the test if sock_diag is not allowed here.
    fn dump_until(
        pick: impl Fn(&SocketInfo) -> bool,
        done: impl Fn(&SocketInfo) -> bool,
    ) -> Option<SocketInfo> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let sockets = match dump() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    mewa_testkit::skip(format!(
                        "sock_diag refused here ({e}); needs a kernel with tcp_diag"
                    ));
                    return None;
                }
                Err(e) => panic!("dump failed: {e}"),
            };
            let found = sockets.into_iter().find(&pick);
            match found {
                Some(s) if done(&s) || Instant::now() > deadline => return Some(s),
                None if Instant::now() > deadline => panic!("the socket is not in the dump"),
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn between(a: SocketAddr, b: SocketAddr) -> impl Fn(&SocketInfo) -> bool {
        move |s| s.src == a && s.dst == b
    }

    #[test]
    fn dump_finds_a_loopback_connection_with_plausible_tcp_info() {
        let (client, server) = transfer();
        let (c, s) = (
            client.local_addr().expect("addr"),
            server.local_addr().expect("addr"),
        );
        let acked = |x: &SocketInfo| {
            x.info
                .and_then(|i| i.bytes_acked)
                .is_some_and(|b| b > BYTES as u64)
        };
        let Some(sender) = dump_until(between(c, s), acked) else {
            return;
        };
        assert_eq!(sender.state, 1, "ESTABLISHED");
        assert_ne!(sender.inode, 0, "an open socket has an inode");
        assert!(sender.cong.as_deref().is_some_and(|c| !c.is_empty()));
        let info = sender.info.expect("INET_DIAG_INFO asked for");
        assert_eq!(info.state, 1);
        assert!(info.snd_cwnd >= 1, "cwnd {}", info.snd_cwnd);
        assert!(info.snd_mss >= 536, "mss {}", info.snd_mss);
        assert!(info.rto >= 200_000, "rto {} µs", info.rto);
        // An active opener's bytes_acked counts its SYN: every payload
        // byte plus one.
        assert_eq!(info.bytes_acked, Some(BYTES as u64 + 1));
        assert!(info.bytes_sent.is_some_and(|b| b >= BYTES as u64));
        assert!(info.segs_out.is_some_and(|n| n > 1));
        // This kernel (6.18) has the 6.7 fields.
        assert!(info.total_rto.is_some(), "total_rto on a 6.7+ kernel");
        let receiver = dump_until(between(s, c), |_| true).expect("dumped once");
        let info = receiver.info.expect("info");
        assert_eq!(info.bytes_received, Some(BYTES as u64));
        // Nothing sent; a passive opener's SYN-ACK is not counted.
        assert_eq!(info.bytes_acked, Some(0));
        drop((client, server));
    }

    #[test]
    fn counters_of_this_namespace_have_the_tcp_sections() {
        let before = counters().expect("read /proc/thread-self/net");
        assert!(before.tcp.contains_key("OutSegs"), "{:?}", before.tcp);
        assert!(before.tcp.contains_key("RetransSegs"));
        assert!(before.tcp_ext.contains_key("TCPTimeouts"));
        assert!(before.tcp_ext.contains_key("TCPLossProbes"));
        let conn = transfer();
        let d = counters().expect("read again").since(&before);
        // The transfer alone sent hundreds of segments.
        assert!(d.repair().out_segs >= 10, "{:?}", d.repair());
        drop(conn);
    }

    #[test]
    fn a_sampler_follows_a_transfer() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let config = SamplerConfig {
            every: Duration::from_millis(5),
            filter: Filter::Port(port),
            ..SamplerConfig::default()
        };
        let sampler = match Sampler::start_here(config) {
            Ok(s) => s,
            Err(SamplerError::Socket(e)) if e.kind() == io::ErrorKind::PermissionDenied => {
                mewa_testkit::skip(format!(
                    "sock_diag refused here ({e}); needs a kernel with tcp_diag"
                ));
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let client = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut server, _) = l.accept().expect("accept");
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = server.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
        });
        for _ in 0..10 {
            (&client).write_all(&[1u8; 100_000]).expect("write");
            std::thread::sleep(Duration::from_millis(10));
        }
        let c = client.local_addr().expect("addr");
        let s = l.local_addr().expect("addr");
        std::thread::sleep(Duration::from_millis(20));
        let samples = sampler.stop().expect("stop");
        drop(client);
        reader.join().expect("reader");
        assert_eq!(samples.failed_dumps, 0, "{:?}", samples.last_error);
        assert!(samples.dumps >= 10, "{} dumps", samples.dumps);
        let sent = samples.find(c, s).expect("the client's socket");
        assert!(samples.find(s, c).is_some(), "the server's socket");
        // The listener is passed over: only the connection's two ends.
        assert_eq!(samples.sockets.len(), 2, "{:?}", samples.sockets);
        assert!(!sent.samples.is_empty());
        assert!(sent.samples.len() as u64 <= samples.dumps);
        assert!(sent.samples.windows(2).all(|w| w[0].t_us < w[1].t_us));
        assert!(sent
            .samples
            .windows(2)
            .all(|w| w[0].bytes_acked <= w[1].bytes_acked));
        assert!(sent.samples.iter().all(|x| x.cwnd >= 1));
        // The last dump came after the last write was acknowledged.
        assert_eq!(sent.last.bytes_acked, Some(1_000_001));
        assert!(
            sent.samples.len() >= 2,
            "the window moved: {:?}",
            sent.samples
        );
    }
}
