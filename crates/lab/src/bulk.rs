//! Bulk transfers across an emulated link with a chosen congestion control:
//! seed 002's flow-size comparison (how long a 500 kB or 2 MB object takes
//! under reno, cubic, bbr and FLD_TCP) and the check that the kernel's
//! FLD_TCP (`mewa_fld`, BPF) sends what the `mewa_cc` core says, round trip
//! by round trip.
//!
//! A transfer is plain TCP: the receiver connects, the sender writes the
//! bytes and closes; the time is from `connect()` to the last byte read, as
//! a page's object would see it (one handshake, then the data). The link's
//! event log gives the bytes the sender put on the link in each round trip
//! ([`rounds`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mewa_link::core::{DelaySpec, DirectionConfig, LinkConfig, QueueSpec, RateSpec};
use mewa_link::eventlog::{EventLog, LogEntry};
use mewa_link::runtime::{LinkOptions, Topology};
use mewa_origin::{bind_tcp, TcpOptions};

use crate::bed::{BedError, CLIENT, SERVER};

/// The port the sender listens on inside its namespace.
const PORT: u16 = 5001;
/// Packets at most this long carry no data (ACKs, SYN, FIN: 40–60 bytes of
/// headers); the log's data packets are the sender's segments.
const HEADER_ONLY: usize = 100;
/// IPv4 + TCP with timestamps: what a data packet carries besides payload.
pub const HEADER_BYTES: usize = 52;

/// One transfer's settings.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Round-trip time of the link, half each way.
    pub rtt: Duration,
    /// Bottleneck rate toward the receiver, bit/s.
    pub down_bps: u64,
    /// Rate toward the sender, bit/s (ACKs).
    pub up_bps: u64,
    /// Drop-tail queue at the bottleneck, bytes; `None`: unbounded
    /// (mahimahi's default).
    pub queue_bytes: Option<usize>,
    /// Bytes the sender writes.
    pub bytes: u64,
    /// The sender's `TCP_CONGESTION`.
    pub congestion: String,
    /// The receiver's `SO_RCVBUF`, bytes; `None`: the kernel's autotuning
    /// from `net.ipv4.tcp_rmem` (128 KB to start, as on a stock client).
    pub receive_buffer: Option<usize>,
}

/// What one transfer measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    /// From the receiver's `connect()` to its last byte.
    pub completion: Duration,
    /// From the end of the handshake (`connect()` returned) to the last
    /// byte: the data's round trips alone.
    pub transfer: Duration,
    /// Bytes received (equals the setup's unless the transfer broke).
    pub received: u64,
    /// Data segments the sender put on the link in each round trip, from
    /// the first one (see [`rounds`]).
    pub rounds: Vec<u64>,
    /// Data packets the bottleneck queue dropped.
    pub drops: u64,
}

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    /// The testbed could not be built or torn down.
    #[error(transparent)]
    Bed(#[from] BedError),
    /// The link runtime failed.
    #[error(transparent)]
    Link(#[from] mewa_link::runtime::Error),
    /// The sender's listener could not be set up (an unknown congestion
    /// control names the ones the kernel has).
    #[error(transparent)]
    Tcp(#[from] mewa_origin::TcpError),
    /// A socket or file operation failed.
    #[error("{what}: {error}")]
    Io {
        /// Which step.
        what: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The link's event log could not be read.
    #[error("event log {path}: {message}")]
    Log {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BulkError {
    let what = what.into();
    move |error| BulkError::Io { what, error }
}

/// A drop-tail queue of `bytes` bytes (`None`: unbounded, mahimahi's
/// default).
pub fn drop_tail(bytes: Option<usize>) -> QueueSpec {
    match bytes {
        None => QueueSpec::default(),
        Some(b) => QueueSpec::DropTail(mewa_link::core::queue::Limit {
            packets: None,
            bytes: Some(b),
        }),
    }
}

/// A link of `one_way` delay each way at constant rates `down_bps` and
/// `up_bps`, each direction with a drop-tail queue of `queue_bytes`.
pub fn fixed_link(
    one_way: Duration,
    down_bps: u64,
    up_bps: u64,
    queue_bytes: Option<usize>,
) -> LinkConfig {
    let dir = |bps| DirectionConfig {
        delay: DelaySpec::Fixed(one_way),
        rate: RateSpec::Constant { bps },
        queue: drop_tail(queue_bytes),
        loss: 0.0,
    };
    LinkConfig {
        up: dir(up_bps),
        down: dir(down_bps),
        ..LinkConfig::default()
    }
}

/// The link of a transfer: `rtt` split evenly, the rates, the queue.
pub fn link(s: &Setup) -> LinkConfig {
    fixed_link(s.rtt / 2, s.down_bps, s.up_bps, s.queue_bytes)
}

/// Runs one transfer in a fresh pair of namespaces; the link's logs go to
/// `log_dir` (`bulk.up.log`, `bulk.down.log`).
pub fn run(s: &Setup, log_dir: &Path) -> Result<Transfer, BulkError> {
    on_link(s, log_dir, |topo| transfer(topo, s))
}

/// Builds the link of `s` in fresh namespaces with its logs in `log_dir`,
/// runs `measure` there, tears down, and reads the round trips back.
fn on_link(
    s: &Setup,
    log_dir: &Path,
    measure: impl FnOnce(&Topology) -> Result<(Duration, Duration, u64), BulkError>,
) -> Result<Transfer, BulkError> {
    std::fs::create_dir_all(log_dir).map_err(io(format!("creating {}", log_dir.display())))?;
    let options = LinkOptions {
        log_dir: Some(log_dir.to_path_buf()),
        file_prefix: Some("bulk.".into()),
        ..LinkOptions::default()
    };
    let topo = Topology::builder()
        .host(CLIENT)
        .host(SERVER)
        .link_with(CLIENT, SERVER, link(s), options)
        .build()?;
    let measured = measure(&topo);
    topo.shutdown()?;
    let (completion, transfer, received) = measured?;
    let (rounds, drops) = read_rounds(log_dir, s.rtt)?;
    Ok(Transfer {
        completion,
        transfer,
        received,
        rounds,
        drops,
    })
}

/// As [`run`], over QUIC: the sender's [`Setup::congestion`] names a quinn
/// controller (`cubic`, `newreno`, `bbr`, or mewa's `fld` and `reno`;
/// [`mewa_origin::quic_cc`]), the receiver opens the connection and reads
/// one unidirectional stream of [`Setup::bytes`] to its end. The origin's
/// test CA in `ca_dir` signs the sender's certificate.
pub fn run_quic(s: &Setup, ca_dir: &Path, log_dir: &Path) -> Result<Transfer, BulkError> {
    let factory = mewa_origin::quic_cc::factory(&s.congestion).map_err(|e| BulkError::Io {
        what: "--cc".into(),
        error: std::io::Error::other(e.to_string()),
    })?;
    let tls = |e: mewa_origin::TlsError| BulkError::Io {
        what: "the test CA".into(),
        error: std::io::Error::other(e.to_string()),
    };
    let certs = mewa_origin::Ca::load_or_create(ca_dir)
        .and_then(|ca| ca.issue(&["bulk.test"]))
        .map_err(tls)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(certs.quic_config().map_err(tls)?));
    let mut transport = quinn::TransportConfig::default();
    transport.congestion_controller_factory(factory);
    server.transport_config(Arc::new(transport));
    let client_tls = certs.client_config(&[b"h3"]).map_err(tls)?;
    let client_crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(client_tls).map_err(|e| {
            BulkError::Io {
                what: "QUIC client configuration".into(),
                error: std::io::Error::other(e.to_string()),
            }
        })?;
    let mut client = quinn::ClientConfig::new(Arc::new(client_crypto));
    let mut ct = quinn::TransportConfig::default();
    // The receiver never limits the sender (as a large receive buffer does
    // for TCP).
    ct.stream_receive_window(quinn::VarInt::from_u32(64 << 20));
    ct.receive_window(quinn::VarInt::from_u32(64 << 20));
    client.transport_config(Arc::new(ct));
    on_link(s, log_dir, |topo| {
        quic_transfer(topo, s.bytes, server, client)
    })
}

/// A failure inside the QUIC transfer, as text (it crosses threads).
fn quic_err(what: &str) -> impl FnOnce(String) -> BulkError + '_ {
    move |e| BulkError::Io {
        what: what.to_string(),
        error: std::io::Error::other(e),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

fn quic_transfer(
    topo: &Topology,
    bytes: u64,
    server: quinn::ServerConfig,
    client: quinn::ClientConfig,
) -> Result<(Duration, Duration, u64), BulkError> {
    let addr = SocketAddr::from((topo.addr(SERVER)?, PORT));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let sender = topo.spawn_in(SERVER, move || -> Result<(), String> {
        let rt = runtime()?;
        rt.block_on(async move {
            let ep = match quinn::Endpoint::server(server, SocketAddr::from(([0, 0, 0, 0], PORT))) {
                Ok(ep) => {
                    let _ = ready_tx.send(Ok(()));
                    ep
                }
                Err(e) => {
                    let e = format!("QUIC listener: {e}");
                    let _ = ready_tx.send(Err(e.clone()));
                    return Err(e);
                }
            };
            let incoming = ep.accept().await.ok_or("endpoint closed")?;
            let conn = incoming.await.map_err(|e| e.to_string())?;
            let mut st = conn.open_uni().await.map_err(|e| e.to_string())?;
            let chunk = vec![0x5a_u8; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                st.write_all(&chunk[..n]).await.map_err(|e| e.to_string())?;
                left -= n as u64;
            }
            st.finish().map_err(|e| e.to_string())?;
            // The receiver closes once it has every byte.
            let _ = conn.closed().await;
            ep.wait_idle().await;
            Ok(())
        })
    })?;
    ready_rx
        .recv()
        .map_err(|_| "exited before listening".to_string())
        .and_then(|r| r)
        .map_err(quic_err("QUIC sender"))?;
    let received = topo.in_namespace(
        CLIENT,
        move || -> Result<(Duration, Duration, u64), String> {
            let rt = runtime()?;
            rt.block_on(async move {
                let mut ep = quinn::Endpoint::client(SocketAddr::from(([0, 0, 0, 0], 0)))
                    .map_err(|e| e.to_string())?;
                ep.set_default_client_config(client);
                let t0 = Instant::now();
                let conn = ep
                    .connect(addr, "bulk.test")
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())?;
                let t1 = Instant::now();
                let mut st = conn.accept_uni().await.map_err(|e| e.to_string())?;
                let mut got = 0u64;
                let mut buf = vec![0u8; 256 * 1024];
                while let Some(n) = st.read(&mut buf).await.map_err(|e| e.to_string())? {
                    got += n as u64;
                }
                let (done, data) = (t0.elapsed(), t1.elapsed());
                conn.close(0u32.into(), b"done");
                ep.wait_idle().await;
                Ok((done, data, got))
            })
        },
    )?;
    let joined = sender
        .join()
        .map_err(|_| "panicked".to_string())
        .and_then(|r| r);
    let received = received.map_err(quic_err("receiving over QUIC"))?;
    joined.map_err(quic_err("QUIC sender"))?;
    Ok(received)
}

/// The down log's data packets per round trip and its queue drops.
fn read_rounds(log_dir: &Path, rtt: Duration) -> Result<(Vec<u64>, u64), BulkError> {
    let path = log_dir.join("bulk.down.log");
    let text = std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))?;
    let log = EventLog::parse(&text).map_err(|e| BulkError::Log {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let drops = log
        .events
        .iter()
        .filter(|e| e.kind == mewa_link::core::EventKind::DropQueue && e.bytes > HEADER_ONLY)
        .count() as u64;
    Ok((rounds(&log.events, rtt), drops))
}

/// The transfer itself, in a topology with [`CLIENT`] and [`SERVER`].
fn transfer(topo: &Topology, s: &Setup) -> Result<(Duration, Duration, u64), BulkError> {
    let server_ip = topo.addr(SERVER)?;
    let opts = TcpOptions {
        congestion: Some(s.congestion.clone()),
        ..TcpOptions::default()
    };
    let listener = topo.in_namespace(SERVER, || {
        bind_tcp(SocketAddr::from(([0, 0, 0, 0], PORT)), &opts)
    })??;
    let bytes = s.bytes;
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        listener.set_nonblocking(false)?;
        let (mut conn, _) = listener.accept()?;
        let chunk = vec![0x5a_u8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            conn.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        conn.shutdown(std::net::Shutdown::Write)?;
        // Wait for the receiver's close, so the last segments are not
        // reset by an early close.
        let mut sink = [0u8; 64];
        while conn.read(&mut sink)? > 0 {}
        Ok(())
    });
    let addr = SocketAddr::from((server_ip, PORT));
    let rcvbuf = s.receive_buffer;
    let received =
        topo.in_namespace(CLIENT, || -> std::io::Result<(Duration, Duration, u64)> {
            let sock = socket2::Socket::new(
                socket2::Domain::IPV4,
                socket2::Type::STREAM,
                Some(socket2::Protocol::TCP),
            )?;
            if let Some(n) = rcvbuf {
                sock.set_recv_buffer_size(n)?;
            }
            let t0 = Instant::now();
            sock.connect_timeout(&addr.into(), Duration::from_secs(10))?;
            let t1 = Instant::now();
            let mut conn: TcpStream = sock.into();
            conn.set_read_timeout(Some(Duration::from_secs(60)))?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0u64;
            loop {
                let n = conn.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                got += n as u64;
            }
            Ok((t0.elapsed(), t1.elapsed(), got))
        })?;
    let received = received.map_err(io(format!("receiving from {addr}")))?;
    sender
        .join()
        .map_err(|_| BulkError::Io {
            what: "sender thread".into(),
            error: std::io::Error::other("panicked"),
        })?
        .map_err(io(format!("sending on {addr}")))?;
    Ok(received)
}

/// Data segments arriving at the link in each round trip: round `k` is
/// `[t0 + k·rtt, t0 + (k+1)·rtt)` after the first data segment at `t0`.
/// The window's growth is read off these: while the window limits the
/// sender, round `k` carries the window of round `k`.
pub fn rounds(events: &[LogEntry], rtt: Duration) -> Vec<u64> {
    let data = events
        .iter()
        .filter(|e| e.kind == mewa_link::core::EventKind::Arrival && e.bytes > HEADER_ONLY);
    let mut t0 = None;
    let mut out: Vec<u64> = Vec::new();
    let rtt = rtt.as_secs_f64().max(1e-6);
    for e in data {
        let start = *t0.get_or_insert(e.at);
        let k = ((e.at - start).as_secs_f64() / rtt) as usize;
        if out.len() <= k {
            out.resize(k + 1, 0);
        }
        out[k] += 1;
    }
    out
}

/// The data segments a sender following `core` puts on the link in each
/// round trip to send `bytes` in segments of `mss`, when every segment is
/// acknowledged one round trip later and nothing is lost: the schedule a
/// measured [`Transfer::rounds`] is compared with.
pub fn schedule(mut core: impl mewa_cc::Controller, bytes: u64, mss: u64) -> Vec<u64> {
    let mss = mss.max(1);
    let t0 = Instant::now();
    let mut left = bytes.div_ceil(mss);
    let mut out = Vec::new();
    while left > 0 {
        let segments = (core.window() / mss).max(1).min(left);
        for _ in 0..segments {
            core.on_ack(
                t0 + Duration::from_millis(out.len() as u64 + 1),
                mewa_cc::Ack {
                    bytes: mss,
                    cwnd_limited: true,
                },
            );
        }
        left -= segments;
        out.push(segments);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_link::core::EventKind;

    fn arrival(ms: u64, bytes: usize) -> LogEntry {
        LogEntry {
            at: Duration::from_millis(ms),
            kind: EventKind::Arrival,
            bytes,
            delay: None,
        }
    }

    #[test]
    fn rounds_count_data_segments_per_round_trip_from_the_first() {
        let ev = vec![
            arrival(5, 60), // SYN-ACK: no data
            arrival(10, 1500),
            arrival(11, 1500),
            arrival(51, 1500),
            arrival(52, 52), // an ACK
            arrival(89, 1500),
            arrival(130, 1500),
        ];
        assert_eq!(rounds(&ev, Duration::from_millis(40)), vec![2, 2, 0, 1]);
        assert!(rounds(&[], Duration::from_millis(40)).is_empty());
    }

    #[test]
    fn the_schedule_of_500_kb_is_four_rounds_for_fld_and_six_for_reno() {
        let mss = 1448;
        let fld = schedule(mewa_cc::Window::fld(mss), 500_000, mss);
        assert_eq!(fld, vec![10, 30, 90, 216]);
        let reno = schedule(mewa_cc::Window::reno(mss), 500_000, mss);
        assert_eq!(reno, vec![10, 20, 40, 80, 160, 36]);
    }
}
