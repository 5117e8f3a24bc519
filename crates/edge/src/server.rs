//! The DNS runtime: UDP and TCP sockets around [`crate::dns::Responder`],
//! forwarding, the hint book swapped in on every rebuild, query counting.
//!
//! Messages are hickory-proto's, the socket loops our own rather than
//! hickory-server's `ServerFuture`: the hint's room depends on the final
//! answer's size against the client's advertised payload, which the
//! responder computes on the serialised message itself, and a loop per
//! socket answers without a task per query (the edge benchmark compares
//! against a C authoritative server).
//!
//! - UDP: one OS thread per socket, blocked in `recvmmsg`, answering a
//!   batch of queries per system call pair (`recvmmsg`/`sendmmsg`); several
//!   sockets share the port with `SO_REUSEPORT`, so the kernel spreads
//!   clients over them (and over cores) without a lock on the receive path.
//!   Threads rather than tokio tasks: under load a task per socket spent a
//!   fifth of the CPU in epoll and futex wake-ups (perf), a blocked thread
//!   is woken by the socket itself. Forwarded queries go to the runtime.
//! - TCP (RFC 7766): length-prefixed messages, several per connection, idle
//!   connections closed after 10 s.
//! - Forwarded queries go to the upstream from a fresh UDP socket each
//!   (random source port, RFC 5452), with a 2 s limit, in their own task.
//! - Query counts (for the tracer's popularity) are kept in memory and
//!   flushed to the store by the caller ([`EdgeDns::take_counts`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;

use crate::cookie;
use crate::dns::{Answered, HintServed, Outcome, Responder, Transport};
use crate::hints::HintBook;
use crate::net::Net;
use crate::rrl::Verdict;

/// How long an upstream may take to answer a forwarded query.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

/// The limits of the DNS service ([`EdgeDns::set_limits`]; the edge
/// config's `[dns]` and `[store]` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most pages counted between two flushes.
    pub max_counted: usize,
    /// Most TCP connections at once.
    pub tcp_max_connections: usize,
    /// Longest wait for a TCP client's query, or for it to take an answer.
    pub tcp_timeout: Duration,
    /// Longest life of a TCP connection.
    pub tcp_max_lifetime: Duration,
    /// Most queries forwarded upstream at once.
    pub max_forwarding: usize,
    /// Response-rate limiting of UDP answers per source prefix.
    pub rrl: crate::rrl::RrlConfig,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_counted: DEFAULT_MAX_COUNTED,
            tcp_max_connections: 512,
            tcp_timeout: Duration::from_secs(10),
            tcp_max_lifetime: Duration::from_secs(120),
            max_forwarding: 256,
            rrl: crate::rrl::RrlConfig::default(),
        }
    }
}

/// Hint sizes counted in the `mewa_edge_hint_bytes` histogram.
pub const HINT_BUCKETS: [u64; 6] = [128, 256, 512, 1000, 1232, 4096];

/// Counters for the Prometheus endpoint and the benchmarks.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Queries over UDP.
    pub queries_udp: AtomicU64,
    /// Queries over TCP.
    pub queries_tcp: AtomicU64,
    /// Queries that asked for a hint (option or TXT).
    pub hint_requests: AtomicU64,
    /// Hints sent with every object's URL.
    pub hints_urls: AtomicU64,
    /// Hints sent in full form by hash (the URLs did not fit).
    pub hints_full: AtomicU64,
    /// Hints sent in partial form.
    pub hints_partial: AtomicU64,
    /// Hint requests for pages the edge does not know.
    pub hints_unknown: AtomicU64,
    /// Hints that did not fit UDP (client told to retry over TCP).
    pub hints_retry_tcp: AtomicU64,
    /// Compact hints over UDP whose URL form waits over TCP (also counted
    /// by their form).
    pub hints_compact: AtomicU64,
    /// Hint sizes: counts per bucket of [`HINT_BUCKETS`] (≤ bound), then
    /// the overflow bucket.
    pub hint_bytes: [AtomicU64; 7],
    /// Sum of hint bytes sent.
    pub hint_bytes_sum: AtomicU64,
    /// Queries forwarded upstream.
    pub forwarded: AtomicU64,
    /// Forwarded queries the upstream did not answer in time.
    pub upstream_failures: AtomicU64,
    /// Queries answered with an error code, or dropped.
    pub errors: AtomicU64,
    /// Hint book rebuilds.
    pub rebuilds: AtomicU64,
    /// Hint requests not counted towards popularity: past the limit of
    /// pages between two flushes ([`EdgeDns::limit_counted`]).
    pub counts_dropped: AtomicU64,
    /// Queries not forwarded: [`Limits::max_forwarding`] were under way.
    pub forward_refused: AtomicU64,
    /// TCP connections closed on accept: [`Limits::tcp_max_connections`]
    /// were open.
    pub tcp_refused: AtomicU64,
    /// UDP answers over the rate sent empty with TC=1 ([`crate::rrl`]).
    pub rrl_slipped: AtomicU64,
    /// UDP answers over the rate not sent.
    pub rrl_dropped: AtomicU64,
    /// Queries whose server cookie was ours, for their address, recent
    /// ([`crate::cookie`]); their UDP answers skip rate limiting.
    pub cookies_valid: AtomicU64,
    /// Queries with a server cookie that was not (forged, expired, another
    /// address or secret): answered with a new one, rate-limited.
    pub cookies_bad: AtomicU64,
}

impl Metrics {
    fn count(&self, a: &Answered) {
        if a.error.is_some() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        match a.cookie {
            cookie::Status::Valid => {
                self.cookies_valid.fetch_add(1, Ordering::Relaxed);
            }
            cookie::Status::Bad => {
                self.cookies_bad.fetch_add(1, Ordering::Relaxed);
            }
            cookie::Status::Absent | cookie::Status::ClientOnly => {}
        }
        let Some(h) = &a.hint else { return };
        self.hint_requests.fetch_add(1, Ordering::Relaxed);
        match h {
            HintServed::Hint {
                bytes,
                form,
                compact,
            } => {
                if *compact {
                    self.hints_compact.fetch_add(1, Ordering::Relaxed);
                }
                let c = match form {
                    mewa_hint::wire::Form::WithUrls => &self.hints_urls,
                    mewa_hint::wire::Form::Full => &self.hints_full,
                    mewa_hint::wire::Form::Partial { .. } => &self.hints_partial,
                };
                c.fetch_add(1, Ordering::Relaxed);
                let b = *bytes as u64;
                let i = HINT_BUCKETS
                    .iter()
                    .position(|&bound| b <= bound)
                    .unwrap_or(HINT_BUCKETS.len());
                self.hint_bytes[i].fetch_add(1, Ordering::Relaxed);
                self.hint_bytes_sum.fetch_add(b, Ordering::Relaxed);
            }
            HintServed::Unknown => {
                self.hints_unknown.fetch_add(1, Ordering::Relaxed);
            }
            HintServed::RetryTcp => {
                self.hints_retry_tcp.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// What every socket task shares.
#[derive(Debug)]
pub struct EdgeDns {
    responder: Responder,
    book: RwLock<Arc<HintBook>>,
    forward_from: Vec<Net>,
    upstream: Option<SocketAddr>,
    counts: Mutex<HashMap<String, u64>>,
    /// [`Limits::max_counted`], read on every counted query without the
    /// lock ([`EdgeDns::limit_counted`] keeps both in step).
    max_counted: std::sync::atomic::AtomicUsize,
    limits: RwLock<Limits>,
    /// UDP answers per source prefix ([`Limits::rrl`]).
    rrl: Mutex<crate::rrl::Rrl>,
    /// The clock of [`EdgeDns::rrl`].
    started: std::time::Instant,
    /// Room for queries forwarded at once ([`Limits::max_forwarding`]).
    forwarding: RwLock<Arc<tokio::sync::Semaphore>>,
    /// The DNS cookie secret; `None` with cookies off
    /// ([`EdgeDns::with_cookies`]).
    cookies: Option<cookie::Secret>,
    /// The counters.
    pub metrics: Metrics,
}

/// [`EdgeDns::limit_counted`]'s default: the store's `max_pages_per_flush`.
pub const DEFAULT_MAX_COUNTED: usize = 10_000;

impl EdgeDns {
    /// A DNS service with an empty hint book, doing DNS cookies with a
    /// secret of its own (or without them if the system's random number
    /// generator fails, logged).
    pub fn new(responder: Responder, forward_from: Vec<Net>, upstream: Option<SocketAddr>) -> Self {
        EdgeDns {
            responder: Responder {
                upstream: upstream.is_some(),
                ..responder
            },
            book: RwLock::new(Arc::new(HintBook::default())),
            forward_from,
            upstream,
            counts: Mutex::new(HashMap::new()),
            max_counted: std::sync::atomic::AtomicUsize::new(DEFAULT_MAX_COUNTED),
            limits: RwLock::new(Limits::default()),
            rrl: Mutex::new(crate::rrl::Rrl::new(crate::rrl::RrlConfig::default())),
            started: std::time::Instant::now(),
            forwarding: RwLock::new(Arc::new(tokio::sync::Semaphore::new(
                Limits::default().max_forwarding,
            ))),
            metrics: Metrics::default(),
            cookies: match cookie::Secret::generate() {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "edge: no DNS cookie secret, cookies off");
                    None
                }
            },
        }
    }

    /// DNS cookies with `secret` (`dns.cookie_secret`, or one drawn at
    /// start), or none (`dns.cookies = false`): COOKIE options are then
    /// ignored, as by a server that does not implement them (RFC 7873
    /// §5.2.1), and every UDP answer is rate-limited.
    pub fn with_cookies(mut self, secret: Option<cookie::Secret>) -> Self {
        self.cookies = secret;
        self
    }

    /// Sets every limit (before serving: connections and forwards already
    /// under way keep the old ones).
    pub fn set_limits(&self, l: Limits) {
        self.max_counted.store(l.max_counted, Ordering::Relaxed);
        if let Ok(mut f) = self.forwarding.write() {
            *f = Arc::new(tokio::sync::Semaphore::new(l.max_forwarding.max(1)));
        }
        if let Ok(mut r) = self.rrl.lock() {
            *r = crate::rrl::Rrl::new(l.rrl);
        }
        if let Ok(mut m) = self.limits.write() {
            *m = l;
        }
    }

    /// What goes back over UDP to `from` for the answer `reply`: itself,
    /// its empty truncated form, or nothing ([`crate::rrl`]). An answer to
    /// a query with a valid server cookie (`cookie`) is always sent and
    /// not counted: the cookie proves `from` is the client's own address,
    /// so the answer amplifies nothing, and a resolver that echoes cookies
    /// is never limited (nor does it use up its prefix's rate).
    pub fn udp_reply(
        &self,
        reply: Vec<u8>,
        from: IpAddr,
        cookie: cookie::Status,
    ) -> Option<Vec<u8>> {
        if cookie == cookie::Status::Valid {
            return Some(reply);
        }
        let verdict = match self.rrl.lock() {
            Ok(mut r) => r.check(from, self.started.elapsed()),
            Err(_) => Verdict::Send,
        };
        match verdict {
            Verdict::Send => Some(reply),
            Verdict::Truncate => {
                self.metrics.rrl_slipped.fetch_add(1, Ordering::Relaxed);
                crate::rrl::slipped(&reply)
            }
            Verdict::Drop => {
                self.metrics.rrl_dropped.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits.read().map_or_else(|p| *p.into_inner(), |l| *l)
    }

    /// Counts at most `n` distinct pages between two flushes (one store
    /// row each): a flood of made-up URLs cannot grow memory or the store
    /// without limit. Pages already counted keep counting.
    pub fn limit_counted(&self, n: usize) {
        self.max_counted.store(n, Ordering::Relaxed);
        if let Ok(mut l) = self.limits.write() {
            l.max_counted = n;
        }
    }

    /// Puts counts taken by [`EdgeDns::take_counts`] back, when writing them
    /// failed: they go out with the next flush instead of being lost (past
    /// the limit, the new ones are dropped and counted as such).
    pub fn put_back_counts(&self, taken: Vec<(String, u64)>) {
        let max = self.max_counted.load(Ordering::Relaxed);
        if let Ok(mut counts) = self.counts.lock() {
            for (page, n) in taken {
                if counts.len() < max || counts.contains_key(&page) {
                    *counts.entry(page).or_insert(0) += n;
                } else {
                    self.metrics.counts_dropped.fetch_add(n, Ordering::Relaxed);
                }
            }
        }
    }

    /// Swaps in a rebuilt hint book.
    pub fn set_book(&self, book: HintBook) {
        if let Ok(mut b) = self.book.write() {
            *b = Arc::new(book);
        }
        self.metrics.rebuilds.fetch_add(1, Ordering::Relaxed);
    }

    /// The current hint book.
    pub fn book(&self) -> Arc<HintBook> {
        self.book
            .read()
            .map(|b| b.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Query counts per page since the last call (for the store).
    pub fn take_counts(&self) -> Vec<(String, u64)> {
        match self.counts.lock() {
            Ok(mut c) => c.drain().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Answers one query from `from` and counts it.
    pub fn answer(&self, query: &[u8], transport: Transport, from: SocketAddr) -> Answered {
        let may_forward = self.forward_from.iter().any(|n| n.contains(from.ip()));
        let book = self.book();
        let ctx = self.cookies.as_ref().map(|secret| cookie::Context {
            secret,
            client: from.ip(),
            now_unix_s: unix_now_u32(),
        });
        let a = self
            .responder
            .answer(&book, query, transport, may_forward, ctx.as_ref());
        let c = match transport {
            Transport::Udp => &self.metrics.queries_udp,
            Transport::Tcp => &self.metrics.queries_tcp,
        };
        c.fetch_add(1, Ordering::Relaxed);
        self.metrics.count(&a);
        if let Some(page) = &a.page {
            if let Ok(mut counts) = self.counts.lock() {
                // Bounded: a flood of made-up URLs cannot grow it without
                // limit between two flushes.
                if let Some(n) = counts.get_mut(page) {
                    *n += 1;
                } else if counts.len() >= self.max_counted.load(Ordering::Relaxed) {
                    self.metrics.counts_dropped.fetch_add(1, Ordering::Relaxed);
                } else if crate::dns::loaded_where_counted(page) {
                    // The URL parse once per page, not per request.
                    counts.insert(page.clone(), 1);
                }
            }
        }
        a
    }

    async fn forward(&self, query: &[u8]) -> Option<Vec<u8>> {
        let up = self.upstream?;
        let room = self
            .forwarding
            .read()
            .map_or_else(|p| p.into_inner().clone(), |f| f.clone());
        // Past the cap the query gets no answer (the client retries):
        // forwarding must not become a way to hold unbounded sockets.
        let Ok(_slot) = room.try_acquire_owned() else {
            self.metrics.forward_refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        self.metrics.forwarded.fetch_add(1, Ordering::Relaxed);
        let bind: SocketAddr = if up.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let r = tokio::time::timeout(UPSTREAM_TIMEOUT, async {
            let s = UdpSocket::bind(bind).await.ok()?;
            s.connect(up).await.ok()?;
            s.send(query).await.ok()?;
            let mut buf = vec![0u8; 65_535];
            loop {
                let n = s.recv(&mut buf).await.ok()?;
                // Only the answer to this query (same id) is relayed.
                if n >= 12 && buf[..2] == query[..2] {
                    buf.truncate(n);
                    return Some(buf);
                }
            }
        })
        .await
        .ok()
        .flatten();
        if r.is_none() {
            self.metrics
                .upstream_failures
                .fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

/// Now as RFC 9018's cookie timestamp: Unix seconds modulo 2^32 (serial
/// number arithmetic copes with the wrap). A clock before 1970 reads 0.
fn unix_now_u32() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

/// Binds `n` UDP sockets on `addr` with `SO_REUSEPORT` (the first picks the
/// port when `addr` has port 0; the others join it). Blocking sockets with
/// a short read timeout, so that their threads notice when to stop.
pub fn bind_udp(addr: SocketAddr, n: usize) -> std::io::Result<Vec<std::net::UdpSocket>> {
    let mut out = Vec::with_capacity(n.max(1));
    let mut at = addr;
    for _ in 0..n.max(1) {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(at),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        s.set_reuse_port(true)?;
        // Room for bursts while the thread is preempted (2 cores shared
        // with the clients under load): with the 208 KiB default the
        // kernel dropped a few queries per 200 000, and every lost query
        // makes a client wait its full timeout. NSD asks for the same.
        // Best effort: the kernel caps it at net.core.rmem_max.
        let _ = s.set_recv_buffer_size(UDP_BUFFER);
        let _ = s.set_send_buffer_size(UDP_BUFFER);
        s.bind(&at.into())?;
        s.set_read_timeout(Some(STOP_CHECK))?;
        let std: std::net::UdpSocket = s.into();
        at = std.local_addr()?;
        out.push(std);
    }
    Ok(out)
}

/// A DNS socket that could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("binding DNS over {what} on {addr}: {error}")]
pub struct BindError {
    /// "UDP" or "TCP".
    pub what: &'static str,
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why.
    #[source]
    pub error: std::io::Error,
}

/// Binds DNS on `addr` over UDP (`n` sockets, [`bind_udp`]) and TCP on the
/// same port. With port 0 the port the kernel picks for UDP may already be
/// taken over TCP (by anything else on the machine); then another port is
/// picked, a few times over, instead of failing.
pub async fn bind_dns(
    addr: SocketAddr,
    n: usize,
) -> Result<(Vec<std::net::UdpSocket>, tokio::net::TcpListener), BindError> {
    let tries = if addr.port() == 0 { 20 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let udp = bind_udp(addr, n).map_err(|error| BindError {
            what: "UDP",
            addr,
            error,
        })?;
        let at = udp
            .first()
            .and_then(|s| s.local_addr().ok())
            .unwrap_or(addr);
        match tokio::net::TcpListener::bind(at).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(error) => {
                let taken = error.kind() == std::io::ErrorKind::AddrInUse;
                last = Some(BindError {
                    what: "TCP",
                    addr: at,
                    error,
                });
                if !taken {
                    break;
                }
            }
        }
    }
    Err(last.unwrap_or(BindError {
        what: "TCP",
        addr,
        error: std::io::Error::other("no port free over both UDP and TCP"),
    }))
}

/// Receive and send buffer asked for each UDP socket, bytes.
const UDP_BUFFER: usize = 1 << 20;

/// How often a UDP thread checks whether it should stop.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// Tells the UDP threads to stop when the serving future is dropped.
struct StopOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Serves the UDP sockets (one thread each) and the TCP listener until the
/// future is dropped; the threads stop within [`STOP_CHECK`] after.
pub async fn serve(dns: Arc<EdgeDns>, udp: Vec<std::net::UdpSocket>, tcp: TcpListener) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _guard = StopOnDrop(stop.clone());
    let rt = tokio::runtime::Handle::current();
    for (i, s) in udp.into_iter().enumerate() {
        let (dns, stop, rt) = (dns.clone(), stop.clone(), rt.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("edge-udp-{i}"))
            .spawn(move || serve_udp(&dns, &s, &stop, &rt));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "edge: cannot start a UDP thread");
        }
    }
    serve_tcp(dns, tcp).await;
}

/// Datagrams read, and answers written, per system call.
const BATCH: usize = 32;

/// Largest UDP payload (IPv4: 65535 − 20 − 8); a buffer this size never
/// truncates a datagram.
const MAX_DATAGRAM: usize = 65_507;

/// One UDP socket's loop: `recvmmsg` blocks until at least one query is
/// queued and takes up to [`BATCH`] that are; their answers leave in one
/// `sendmmsg`. NSD does the same: after each reply sent on its own, the
/// woken client preempted the edge thread (perf: a third of the edge's CPU
/// went to that wake-up and the switch back), while a batch of replies
/// costs one switch.
fn serve_udp(
    dns: &Arc<EdgeDns>,
    sock: &std::net::UdpSocket,
    stop: &std::sync::atomic::AtomicBool,
    rt: &tokio::runtime::Handle,
) {
    use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};
    use std::io::IoSliceMut;
    use std::os::fd::AsRawFd;

    let fd = sock.as_raw_fd();
    // Zeroed memory the kernel maps lazily: only pages that datagrams
    // reach are ever touched.
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM]).collect();
    let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut got: Vec<(usize, Option<SocketAddr>)> = Vec::with_capacity(BATCH);
    let mut replies: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    let mut to: Vec<Option<SockaddrStorage>> = Vec::with_capacity(BATCH);
    while !stop.load(Ordering::Relaxed) {
        got.clear();
        {
            let mut iovs: Vec<[IoSliceMut<'_>; 1]> = bufs
                .iter_mut()
                .map(|b| [IoSliceMut::new(b.as_mut_slice())])
                .collect();
            let Ok(msgs) = recvmmsg(
                fd,
                &mut recv_headers,
                iovs.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) else {
                // Timeout (time to check `stop`), or an ICMP error: go on.
                continue;
            };
            for m in msgs {
                let from = m.address.as_ref().and_then(std_addr);
                got.push((m.bytes, from));
            }
        }
        replies.clear();
        to.clear();
        for (buf, &(n, from)) in bufs.iter().zip(&got) {
            let (Some(from), Some(query)) = (from, buf.get(..n)) else {
                continue;
            };
            let a = dns.answer(query, Transport::Udp, from);
            match a.outcome {
                Outcome::Reply(bytes) => {
                    if let Some(bytes) = dns.udp_reply(bytes, from.ip(), a.cookie) {
                        replies.push(bytes);
                        to.push(Some(SockaddrStorage::from(from)));
                    }
                }
                Outcome::Forward => {
                    let Ok(reply_sock) = sock.try_clone() else {
                        continue;
                    };
                    let (dns, q, c) = (dns.clone(), query.to_vec(), a.cookie);
                    rt.spawn(async move {
                        let r = dns.forward(&q).await;
                        if let Some(r) = r.and_then(|r| dns.udp_reply(r, from.ip(), c)) {
                            let _ = reply_sock.send_to(&r, from);
                        }
                    });
                }
                Outcome::Drop => {}
            }
        }
        // `sendmmsg` stops at the first datagram the kernel refuses (and
        // reports an error only if that is the first): skip that one, as
        // a failed `send_to` would be, and send the rest.
        let mut done = 0;
        while done < replies.len() {
            let iovs: Vec<[std::io::IoSlice<'_>; 1]> = replies[done..]
                .iter()
                .map(|r| [std::io::IoSlice::new(r)])
                .collect();
            let sent = sendmmsg(
                fd,
                &mut send_headers,
                iovs.iter(),
                &to[done..],
                [],
                MsgFlags::empty(),
            )
            .map_or(0, Iterator::count);
            done += sent.max(1);
        }
    }
}

/// A socket address from the kernel as the standard library's type.
fn std_addr(a: &nix::sys::socket::SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

async fn serve_tcp(dns: Arc<EdgeDns>, listener: TcpListener) {
    let mut conns = JoinSet::new();
    let limits = dns.limits();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) if conns.len() >= limits.tcp_max_connections => {
                    // Closed at once: the client falls back or retries.
                    drop(s);
                    dns.metrics.tcp_refused.fetch_add(1, Ordering::Relaxed);
                }
                Ok((s, from)) => {
                    conns.spawn(tcp_conn(dns.clone(), s, from, limits));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// One DNS-over-TCP connection (RFC 7766): queries answered in turn until
/// the client goes quiet for [`Limits::tcp_timeout`], stops reading an
/// answer for as long, or the connection has lived
/// [`Limits::tcp_max_lifetime`].
async fn tcp_conn(dns: Arc<EdgeDns>, s: TcpStream, from: SocketAddr, limits: Limits) {
    // The whole life under one deadline: a client trickling valid queries
    // cannot keep a task forever.
    let _ = tokio::time::timeout(limits.tcp_max_lifetime, tcp_queries(&dns, s, from, limits)).await;
}

async fn tcp_queries(dns: &EdgeDns, mut s: TcpStream, from: SocketAddr, limits: Limits) {
    let _ = s.set_nodelay(true);
    let wait = limits.tcp_timeout;
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(wait, s.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
        match tokio::time::timeout(wait, s.read_exact(&mut q)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let a = dns.answer(&q, Transport::Tcp, from);
        let reply = match a.outcome {
            Outcome::Reply(b) => b,
            Outcome::Forward => match dns.forward(&q).await {
                Some(b) => b,
                None => return,
            },
            Outcome::Drop => return,
        };
        let Ok(n) = u16::try_from(reply.len()) else {
            return;
        };
        let mut out = Vec::with_capacity(2 + reply.len());
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(&reply);
        // A client that does not read its answer (a zero window) is let go.
        match tokio::time::timeout(wait, s.write_all(&out)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}
