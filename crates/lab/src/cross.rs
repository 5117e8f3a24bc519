//! Cross traffic: long-running flows that share the bottleneck with what an
//! experiment measures, as seed 002's iperf background flows bring a
//! 100 Mbit/s LTE link down to an effective 25 Mbit/s.
//!
//! The flows run between two hosts of their own, [`XSEND`] behind the
//! server's side of the emulated link and [`XRECV`] behind the client's
//! (each joined by a plain veth pair, so they add no delay of their own):
//! they cross the same emulated link and queue as the page's traffic, and
//! share no socket, port or TCP setting with the client or the origin.
//! A flow is TCP with a chosen congestion control or UDP at a constant rate.
//! The receiver counts each flow's bytes per interval: that count is the
//! experiment's log of what the cross traffic took ([`CrossLog`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mewa_link::runtime::Topology;
use mewa_origin::{bind_tcp, TcpOptions};
use serde::{Deserialize, Serialize};

/// The host that sends the cross traffic (beside the origin).
pub const XSEND: &str = "xsend";
/// The host that receives it (beside the client).
pub const XRECV: &str = "xrecv";
/// First port of the receiver; flow `i` uses `PORT + i`.
const PORT: u16 = 6001;
/// UDP datagram payload: one packet fits a 1500-byte link.
const DATAGRAM: usize = 1400;

/// One background flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// A TCP flow that always has data to send, with this congestion
    /// control at the sender.
    Tcp {
        /// `TCP_CONGESTION` of the sender.
        cc: String,
    },
    /// UDP datagrams at a constant rate, whatever the link does with them.
    Udp {
        /// Rate, bit/s.
        bps: u64,
    },
}

impl Flow {
    /// Parses `cubic` / `tcp:cubic` (a TCP flow with that congestion
    /// control) or `udp:75mbit` (constant-rate UDP; rates as the link
    /// takes them: `75mbit`, `500kbit`, bare bit/s).
    pub fn parse(s: &str) -> Result<Flow, String> {
        let s = s.trim();
        if let Some(rate) = s.strip_prefix("udp:") {
            let bps = mewa_link::core::parse_rate(rate).map_err(|e| format!("{s}: {e}"))?;
            if bps == 0 {
                return Err(format!("{s}: a UDP flow needs a rate above 0"));
            }
            return Ok(Flow::Udp { bps });
        }
        let cc = s.strip_prefix("tcp:").unwrap_or(s);
        let valid = !cc.is_empty()
            && cc.len() < 16
            && cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "{s}: give a TCP congestion control (cubic, tcp:reno) or udp:RATE (udp:75mbit)"
            ));
        }
        Ok(Flow::Tcp { cc: cc.to_string() })
    }

    /// A short label: `tcp/cubic`, `udp/75mbit`.
    pub fn label(&self) -> String {
        match self {
            Flow::Tcp { cc } => format!("tcp/{cc}"),
            Flow::Udp { bps } => format!("udp/{}kbit", bps / 1000),
        }
    }
}

/// Why cross traffic could not start.
#[derive(Debug, thiserror::Error)]
pub enum CrossError {
    /// A host is missing from the topology, or another runtime error.
    #[error(transparent)]
    Link(#[from] mewa_link::runtime::Error),
    /// A TCP listener could not be set up (an unknown congestion control).
    #[error(transparent)]
    Tcp(#[from] mewa_origin::TcpError),
    /// A socket failed.
    #[error("cross traffic {what}: {error}")]
    Io {
        /// Which step.
        what: String,
        /// The OS error.
        error: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CrossError {
    let what = what.into();
    move |error| CrossError::Io { what, error }
}

/// What the receiver counted, per flow and interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossLog {
    /// The flows, in order.
    pub flows: Vec<Flow>,
    /// Length of one interval, seconds.
    pub interval_s: f64,
    /// `bytes[i][k]`: bytes flow `i` delivered in interval `k`.
    pub bytes: Vec<Vec<u64>>,
}

impl CrossLog {
    /// Each flow's mean throughput, bit/s, over intervals `from..` (skip
    /// the first to leave out slow start).
    pub fn mean_bps(&self, from: usize) -> Vec<f64> {
        self.bytes
            .iter()
            .map(|b| {
                let tail = b.get(from..).unwrap_or(&[]);
                if tail.is_empty() {
                    0.0
                } else {
                    tail.iter().sum::<u64>() as f64 * 8.0 / (tail.len() as f64 * self.interval_s)
                }
            })
            .collect()
    }

    /// The log as CSV: `interval_end_s,<flow labels…>` in bit/s.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("interval_end_s");
        for (i, f) in self.flows.iter().enumerate() {
            s.push_str(&format!(",flow{i}_{}_bps", f.label().replace('/', "_")));
        }
        s.push('\n');
        let n = self.bytes.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..n {
            s.push_str(&format!("{:.3}", (k + 1) as f64 * self.interval_s));
            for b in &self.bytes {
                let v = b.get(k).copied().unwrap_or(0) as f64 * 8.0 / self.interval_s;
                s.push_str(&format!(",{v:.0}"));
            }
            s.push('\n');
        }
        s
    }
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one takes
/// everything (Jain, Chiu and Hawe 1984).
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

/// Running cross traffic; [`Cross::stop`] ends it and returns the log.
pub struct Cross {
    flows: Vec<Flow>,
    stop: Arc<AtomicBool>,
    counters: Vec<Arc<AtomicU64>>,
    threads: Vec<JoinHandle<()>>,
    sampler: Option<JoinHandle<Vec<Vec<u64>>>>,
    interval: Duration,
}

impl std::fmt::Debug for Cross {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cross").field("flows", &self.flows).finish()
    }
}

impl Cross {
    /// Starts `flows` from [`XSEND`] to [`XRECV`] in `topo`, counting every
    /// `interval`. Returns once every flow is connected.
    pub fn start(topo: &Topology, flows: &[Flow], interval: Duration) -> Result<Cross, CrossError> {
        let stop = Arc::new(AtomicBool::new(false));
        // Flows started before a later one fails stop with this guard.
        let mut guard = StopOnDrop(Some(stop.clone()));
        let recv_ip = topo.addr(XRECV)?;
        let mut counters = Vec::new();
        let mut threads = Vec::new();
        for (i, flow) in flows.iter().enumerate() {
            let port = PORT + i as u16;
            let addr = SocketAddr::from((recv_ip, port));
            let count = Arc::new(AtomicU64::new(0));
            counters.push(count.clone());
            match flow {
                Flow::Tcp { cc } => {
                    // The congestion control is the sender's; the receiver's
                    // listener keeps the namespace's default.
                    let listener = topo.in_namespace(XRECV, || {
                        bind_tcp(
                            SocketAddr::from(([0, 0, 0, 0], port)),
                            &TcpOptions::default(),
                        )
                    })??;
                    let opts = TcpOptions {
                        congestion: Some(cc.clone()),
                        ..TcpOptions::default()
                    };
                    // Checks the name before anything runs.
                    let probe = topo.in_namespace(XSEND, || {
                        bind_tcp(SocketAddr::from(([127, 0, 0, 1], 0)), &opts)
                    })?;
                    drop(probe?);
                    let st = stop.clone();
                    threads.push(std::thread::spawn(move || tcp_sink(listener, count, st)));
                    let st = stop.clone();
                    let cc = cc.clone();
                    let sender = topo.in_namespace(XSEND, move || tcp_connect(addr, &cc))?;
                    let sender = sender.map_err(io(format!("connecting flow {i} to {addr}")))?;
                    threads.push(std::thread::spawn(move || tcp_source(sender, st)));
                }
                Flow::Udp { bps } => {
                    let sink = topo
                        .in_namespace(XRECV, || {
                            UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], port)))
                        })?
                        .map_err(io(format!("binding UDP port {port}")))?;
                    let source = topo
                        .in_namespace(XSEND, || {
                            UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0)))
                        })?
                        .map_err(io("binding the UDP sender"))?;
                    let st = stop.clone();
                    threads.push(std::thread::spawn(move || udp_sink(sink, count, st)));
                    let st = stop.clone();
                    let bps = *bps;
                    threads.push(std::thread::spawn(move || {
                        udp_source(source, addr, bps, st)
                    }));
                }
            }
        }
        let (st, cs) = (stop.clone(), counters.clone());
        let sampler = std::thread::spawn(move || sample(&cs, interval, &st));
        guard.0 = None;
        Ok(Cross {
            flows: flows.to_vec(),
            stop,
            counters,
            threads,
            sampler: Some(sampler),
            interval,
        })
    }

    /// Bytes each flow has delivered so far.
    pub fn delivered(&self) -> Vec<u64> {
        self.counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Stops every flow and returns the log.
    pub fn stop(mut self) -> CrossLog {
        self.stop.store(true, Ordering::SeqCst);
        let bytes = self
            .sampler
            .take()
            .and_then(|s| s.join().ok())
            .unwrap_or_default();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        CrossLog {
            flows: self.flows.clone(),
            interval_s: self.interval.as_secs_f64(),
            bytes,
        }
    }
}

/// Sets the stop flag when dropped (an early return of [`Cross::start`]).
/// `None` once the start succeeded.
struct StopOnDrop(Option<Arc<AtomicBool>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(stop) = &self.0 {
            stop.store(true, Ordering::SeqCst);
        }
    }
}

impl Drop for Cross {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads the counters every `interval` until `stop`; returns the bytes of
/// each interval per flow.
fn sample(counters: &[Arc<AtomicU64>], interval: Duration, stop: &AtomicBool) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); counters.len()];
    let mut last = vec![0u64; counters.len()];
    let t0 = Instant::now();
    let mut k = 1u32;
    while !stop.load(Ordering::SeqCst) {
        let due = t0 + interval * k;
        let now = Instant::now();
        if due > now {
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
            continue;
        }
        for (i, c) in counters.iter().enumerate() {
            let v = c.load(Ordering::Relaxed);
            out[i].push(v - last[i]);
            last[i] = v;
        }
        k += 1;
    }
    out
}

fn tcp_connect(addr: SocketAddr, cc: &str) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    sock.set_tcp_congestion(cc.as_bytes())?;
    sock.connect_timeout(&addr.into(), Duration::from_secs(10))?;
    Ok(sock.into())
}

/// Whether `e` is a socket timeout (the loops then check `stop` and go on).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn tcp_source(mut conn: TcpStream, stop: Arc<AtomicBool>) {
    let buf = vec![0xa5_u8; 64 * 1024];
    // A timeout so a full send buffer does not keep the thread past stop.
    let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
    while !stop.load(Ordering::Relaxed) {
        match conn.write(&buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if timed_out(&e) => {}
            Err(_) => break,
        }
    }
}

fn tcp_sink(listener: std::net::TcpListener, count: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    // Polled, so a sender that never connects does not hold the thread.
    let _ = listener.set_nonblocking(true);
    let mut conn = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(e) if timed_out(&e) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return,
        }
    };
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 256 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                count.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if timed_out(&e) => {}
            Err(_) => break,
        }
    }
}

fn udp_source(sock: UdpSocket, to: SocketAddr, bps: u64, stop: Arc<AtomicBool>) {
    let buf = [0x3c_u8; DATAGRAM];
    // Paced in 1 ms steps: the datagrams due by now go out together.
    let per_s = bps as f64 / (8.0 * DATAGRAM as f64);
    let t0 = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (t0.elapsed().as_secs_f64() * per_s) as u64;
        while sent < due {
            // A full socket buffer drops the datagram, as a constant-rate
            // source would.
            let _ = sock.send_to(&buf, to);
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn udp_sink(sock: UdpSocket, count: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_a_hog() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        let hog = jain(&[10.0, 0.0, 0.0, 0.0]).unwrap_or(0.0);
        assert!((hog - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    #[test]
    fn flows_parse_from_their_short_forms() {
        assert_eq!(Flow::parse("cubic"), Ok(Flow::Tcp { cc: "cubic".into() }));
        assert_eq!(Flow::parse("tcp:reno"), Ok(Flow::Tcp { cc: "reno".into() }));
        assert_eq!(Flow::parse("udp:75mbit"), Ok(Flow::Udp { bps: 75_000_000 }));
        for bad in [
            "",
            "udp:",
            "udp:0",
            "tcp:",
            "cu bic",
            "a/b",
            "x_very_long_name_here",
        ] {
            assert!(Flow::parse(bad).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(s in "\\PC{0,40}") {
            if let Ok(f) = Flow::parse(&s) {
                // What parses has a label that names it.
                let label = f.label();
                proptest::prop_assert!(label.starts_with("tcp/") || label.starts_with("udp/"));
            }
        }
    }

    #[test]
    fn the_log_reports_rates_per_interval() {
        let log = CrossLog {
            flows: vec![
                Flow::Tcp { cc: "cubic".into() },
                Flow::Udp { bps: 1_000_000 },
            ],
            interval_s: 0.5,
            bytes: vec![vec![1000, 2000, 3000], vec![500, 500]],
        };
        assert_eq!(log.mean_bps(1), vec![40_000.0, 8_000.0]);
        let csv = log.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "interval_end_s,flow0_tcp_cubic_bps,flow1_udp_1000kbit_bps"
        );
        assert_eq!(lines[1], "0.500,16000,8000");
        assert_eq!(lines[3], "1.500,48000,0");
    }
}
