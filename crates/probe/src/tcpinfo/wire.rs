//! The kernel's bytes, typed: `struct tcp_info` and the NETLINK_SOCK_DIAG
//! messages that carry it (pure; no I/O, never panics on input).
//!
//! Layouts are the uapi headers' (`include/uapi/linux/tcp.h`,
//! `inet_diag.h`, `netlink.h`, `sock_diag.h`) with explicit offsets rather
//! than `repr(C)` structs: the kernel's `tcp_info` grows with its version
//! and a reader must take any length, which a transmute cannot. Integers are
//! in the host's byte order except the ports and addresses of
//! `inet_diag_sockid`, which are in network order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// `AF_INET` (`<sys/socket.h>`).
pub const AF_INET: u8 = 2;
/// `AF_INET6`.
pub const AF_INET6: u8 = 10;
/// `AF_NETLINK`.
pub const AF_NETLINK: i32 = 16;
/// `NETLINK_SOCK_DIAG` (`linux/netlink.h`): the netlink protocol of
/// socket dumps.
pub const NETLINK_SOCK_DIAG: i32 = 4;
/// `IPPROTO_TCP`.
const IPPROTO_TCP: u8 = 6;
/// `SOCK_DIAG_BY_FAMILY` (`linux/sock_diag.h`): the request and reply type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLM_F_REQUEST`.
const NLM_F_REQUEST: u16 = 0x01;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
const NLM_F_DUMP: u16 = 0x300;
/// `NLMSG_NOOP`.
const NLMSG_NOOP: u16 = 1;
/// `NLMSG_ERROR`: an `int` error (negative errno) and the request's header.
const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump; an `int`, negative if the dump failed.
const NLMSG_DONE: u16 = 3;
/// `NLMSG_OVERRUN`.
const NLMSG_OVERRUN: u16 = 4;
/// `INET_DIAG_INFO`: the attribute that holds `struct tcp_info`.
const INET_DIAG_INFO: u16 = 2;
/// `INET_DIAG_CONG`: the congestion control's name, NUL-terminated.
const INET_DIAG_CONG: u16 = 4;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct inet_diag_req_v2)`.
const REQ_V2_LEN: usize = 56;
/// `sizeof(struct inet_diag_msg)`.
const DIAG_MSG_LEN: usize = 72;
/// `sizeof(struct rtattr)`.
const RTA_HDRLEN: usize = 4;
/// Length of [`dump_request`]'s message.
pub const DUMP_REQUEST_LEN: usize = NLMSG_HDRLEN + REQ_V2_LEN;

/// `TCP_LISTEN` (`include/net/tcp_states.h`).
pub const TCP_LISTEN: u8 = 10;

/// Why bytes are not what the kernel sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A `tcp_info` shorter than the part every kernel since 2.6 fills
    /// (up to `tcpi_total_retrans`): not a `tcp_info` at all.
    #[error("tcp_info of {len} bytes; every kernel sends at least {min}")]
    ShortTcpInfo {
        /// Bytes given.
        len: usize,
        /// The minimum, [`TcpInfo::MIN_LEN`].
        min: usize,
    },
    /// A netlink message or attribute claims more bytes than there are, or
    /// fewer than its own header (a cut-off read, or not netlink).
    #[error("netlink {what} at byte {at}: length {len} with {left} bytes left")]
    BadLength {
        /// `message`, `attribute`, `inet_diag_msg` or `error`.
        what: &'static str,
        /// Offset in the buffer.
        at: usize,
        /// The length field's value (or the bytes needed).
        len: usize,
        /// Bytes from `at` to the end of its container.
        left: usize,
    },
    /// A reply to another request than ours.
    #[error("netlink reply with sequence number {got}, expected {want}")]
    Sequence {
        /// In the reply.
        got: u32,
        /// Of our request.
        want: u32,
    },
    /// The kernel refused the dump (`NLMSG_ERROR` or a failed
    /// `NLMSG_DONE`); the value is a positive errno.
    #[error("the kernel answered the socket dump with errno {0}")]
    Kernel(i32),
    /// `NLMSG_OVERRUN`: the kernel lost part of the dump.
    #[error("netlink overrun: the kernel dropped part of the dump")]
    Overrun,
    /// A message type a sock_diag dump does not send.
    #[error("unexpected netlink message type {0}")]
    UnexpectedType(u16),
    /// An address family other than AF_INET and AF_INET6.
    #[error("inet_diag_msg of address family {0}")]
    Family(u8),
    /// The congestion control name is not UTF-8.
    #[error("INET_DIAG_CONG is not UTF-8")]
    CongName,
}

/// Reads a little slice at a known offset; `None` past the end.
fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    field(b, at).map(u16::from_ne_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    field(b, at).map(u32::from_ne_bytes)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    field(b, at).map(u64::from_ne_bytes)
}

/// `struct tcp_info` as far as the kernel filled it.
///
/// The fields up to `total_retrans` (the first [`TcpInfo::MIN_LEN`] bytes)
/// exist in every kernel since 2.6 and are plain values; later fields are
/// `None` when the bytes end before them (an older kernel). Units are the
/// kernel's: times in microseconds unless the name says otherwise, windows
/// in segments (`snd_cwnd`, `snd_ssthresh`) or bytes (`snd_wnd`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// `tcpi_state`: TCP state (1 ESTABLISHED … 10 LISTEN, 12 NEW_SYN_RECV).
    pub state: u8,
    /// `tcpi_ca_state`: 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss.
    pub ca_state: u8,
    /// `tcpi_retransmits`: consecutive retransmissions of the head segment.
    pub retransmits: u8,
    /// `tcpi_probes`: unanswered zero-window or keepalive probes.
    pub probes: u8,
    /// `tcpi_backoff`: the RTO's exponential backoff.
    pub backoff: u8,
    /// `tcpi_options`: `TCPI_OPT_*` bits (1 timestamps, 2 SACK, 4 window
    /// scaling, 8 ECN …).
    pub options: u8,
    /// `tcpi_snd_wscale`.
    pub snd_wscale: u8,
    /// `tcpi_rcv_wscale`.
    pub rcv_wscale: u8,
    /// `tcpi_delivery_rate_app_limited`: the last delivery-rate sample was
    /// limited by the application, not the network.
    pub delivery_rate_app_limited: bool,
    /// `tcpi_rto`, µs.
    pub rto: u32,
    /// `tcpi_ato` (delayed-ACK timeout), µs.
    pub ato: u32,
    /// `tcpi_snd_mss`, bytes.
    pub snd_mss: u32,
    /// `tcpi_rcv_mss`, bytes.
    pub rcv_mss: u32,
    /// `tcpi_unacked`: segments in flight (packets_out).
    pub unacked: u32,
    /// `tcpi_sacked`: segments SACKed (or, listening, the accept backlog).
    pub sacked: u32,
    /// `tcpi_lost`: segments marked lost.
    pub lost: u32,
    /// `tcpi_retrans`: retransmitted segments still in flight.
    pub retrans: u32,
    /// `tcpi_last_data_sent`, ms ago.
    pub last_data_sent: u32,
    /// `tcpi_last_data_recv`, ms ago.
    pub last_data_recv: u32,
    /// `tcpi_last_ack_recv`, ms ago.
    pub last_ack_recv: u32,
    /// `tcpi_pmtu`, bytes.
    pub pmtu: u32,
    /// `tcpi_rcv_ssthresh`, bytes.
    pub rcv_ssthresh: u32,
    /// `tcpi_rtt`: smoothed RTT, µs.
    pub rtt: u32,
    /// `tcpi_rttvar`, µs.
    pub rttvar: u32,
    /// `tcpi_snd_ssthresh`, segments; `0x7fffffff` (TCP_INFINITE_SSTHRESH)
    /// until the first loss.
    pub snd_ssthresh: u32,
    /// `tcpi_snd_cwnd`, segments.
    pub snd_cwnd: u32,
    /// `tcpi_advmss`, bytes.
    pub advmss: u32,
    /// `tcpi_reordering`, segments.
    pub reordering: u32,
    /// `tcpi_rcv_rtt`: the receiver's RTT estimate, µs.
    pub rcv_rtt: u32,
    /// `tcpi_rcv_space`, bytes.
    pub rcv_space: u32,
    /// `tcpi_total_retrans`: segments retransmitted over the connection.
    pub total_retrans: u32,
    /// `tcpi_pacing_rate`, bytes/s (3.15).
    pub pacing_rate: Option<u64>,
    /// `tcpi_max_pacing_rate`, bytes/s (3.15).
    pub max_pacing_rate: Option<u64>,
    /// `tcpi_bytes_acked` (4.1; an active opener's counts its SYN, a
    /// passive one's not the SYN-ACK).
    pub bytes_acked: Option<u64>,
    /// `tcpi_bytes_received` (4.1).
    pub bytes_received: Option<u64>,
    /// `tcpi_segs_out` (4.2).
    pub segs_out: Option<u32>,
    /// `tcpi_segs_in` (4.2).
    pub segs_in: Option<u32>,
    /// `tcpi_notsent_bytes` (4.6).
    pub notsent_bytes: Option<u32>,
    /// `tcpi_min_rtt`, µs (4.6).
    pub min_rtt: Option<u32>,
    /// `tcpi_data_segs_in` (4.6).
    pub data_segs_in: Option<u32>,
    /// `tcpi_data_segs_out` (4.6).
    pub data_segs_out: Option<u32>,
    /// `tcpi_delivery_rate`, bytes/s (4.9).
    pub delivery_rate: Option<u64>,
    /// `tcpi_busy_time`: time with data in flight, µs (4.10).
    pub busy_time: Option<u64>,
    /// `tcpi_rwnd_limited`, µs (4.10).
    pub rwnd_limited: Option<u64>,
    /// `tcpi_sndbuf_limited`, µs (4.10).
    pub sndbuf_limited: Option<u64>,
    /// `tcpi_delivered`, segments (4.18).
    pub delivered: Option<u32>,
    /// `tcpi_delivered_ce`, segments (4.18).
    pub delivered_ce: Option<u32>,
    /// `tcpi_bytes_sent`, including retransmissions (4.19).
    pub bytes_sent: Option<u64>,
    /// `tcpi_bytes_retrans` (4.19).
    pub bytes_retrans: Option<u64>,
    /// `tcpi_dsack_dups` (4.19).
    pub dsack_dups: Option<u32>,
    /// `tcpi_reord_seen` (4.19).
    pub reord_seen: Option<u32>,
    /// `tcpi_rcv_ooopack` (5.4).
    pub rcv_ooopack: Option<u32>,
    /// `tcpi_snd_wnd`: the peer's window, bytes (5.4).
    pub snd_wnd: Option<u32>,
    /// `tcpi_rcv_wnd`: our advertised window, bytes (6.2).
    pub rcv_wnd: Option<u32>,
    /// `tcpi_rehash` (6.2).
    pub rehash: Option<u32>,
    /// `tcpi_total_rto`: RTO expirations, SYN and repeated ones included (6.7).
    pub total_rto: Option<u16>,
    /// `tcpi_total_rto_recoveries` (6.7).
    pub total_rto_recoveries: Option<u16>,
    /// `tcpi_total_rto_time`: time in RTO recovery, **ms** (6.7).
    pub total_rto_time: Option<u32>,
}

impl TcpInfo {
    /// Bytes up to and including `tcpi_total_retrans`: what every kernel
    /// since 2.6 sends; [`TcpInfo::parse`] refuses less.
    pub const MIN_LEN: usize = 104;
    /// Bytes of the 6.7 layout, the last one this parser knows
    /// (`tcpi_total_rto_time` ends here); newer kernels send more (6.18:
    /// 280, the AccECN counters), which is ignored.
    pub const KNOWN_LEN: usize = 248;

    /// Parses `struct tcp_info` as `getsockopt(TCP_INFO)` or
    /// `INET_DIAG_INFO` return it: any length from [`TcpInfo::MIN_LEN`] on;
    /// a field the bytes stop short of (or cut through) is `None`.
    pub fn parse(b: &[u8]) -> Result<TcpInfo, WireError> {
        if b.len() < Self::MIN_LEN {
            return Err(WireError::ShortTcpInfo {
                len: b.len(),
                min: Self::MIN_LEN,
            });
        }
        // The two bit-field bytes: `__u8 tcpi_snd_wscale : 4,
        // tcpi_rcv_wscale : 4;` and `__u8 tcpi_delivery_rate_app_limited:1,
        // tcpi_fastopen_client_fail:2;`. The ABI fills bit-fields from the
        // low bit on little-endian machines and from the high bit on
        // big-endian ones.
        let (wscale, flags) = (b[6], b[7]);
        let (snd_wscale, rcv_wscale, app_limited) = if cfg!(target_endian = "big") {
            (wscale >> 4, wscale & 0x0f, flags & 0x80 != 0)
        } else {
            (wscale & 0x0f, wscale >> 4, flags & 0x01 != 0)
        };
        // MIN_LEN was checked: the fixed part's reads below cannot fail.
        let u = |at| u32_at(b, at).unwrap_or(0);
        Ok(TcpInfo {
            state: b[0],
            ca_state: b[1],
            retransmits: b[2],
            probes: b[3],
            backoff: b[4],
            options: b[5],
            snd_wscale,
            rcv_wscale,
            delivery_rate_app_limited: app_limited,
            rto: u(8),
            ato: u(12),
            snd_mss: u(16),
            rcv_mss: u(20),
            unacked: u(24),
            sacked: u(28),
            lost: u(32),
            retrans: u(36),
            // 40: tcpi_fackets, unused since 4.15.
            last_data_sent: u(44),
            // 48: tcpi_last_ack_sent, never filled.
            last_data_recv: u(52),
            last_ack_recv: u(56),
            pmtu: u(60),
            rcv_ssthresh: u(64),
            rtt: u(68),
            rttvar: u(72),
            snd_ssthresh: u(76),
            snd_cwnd: u(80),
            advmss: u(84),
            reordering: u(88),
            rcv_rtt: u(92),
            rcv_space: u(96),
            total_retrans: u(100),
            pacing_rate: u64_at(b, 104),
            max_pacing_rate: u64_at(b, 112),
            bytes_acked: u64_at(b, 120),
            bytes_received: u64_at(b, 128),
            segs_out: u32_at(b, 136),
            segs_in: u32_at(b, 140),
            notsent_bytes: u32_at(b, 144),
            min_rtt: u32_at(b, 148),
            data_segs_in: u32_at(b, 152),
            data_segs_out: u32_at(b, 156),
            delivery_rate: u64_at(b, 160),
            busy_time: u64_at(b, 168),
            rwnd_limited: u64_at(b, 176),
            sndbuf_limited: u64_at(b, 184),
            delivered: u32_at(b, 192),
            delivered_ce: u32_at(b, 196),
            bytes_sent: u64_at(b, 200),
            bytes_retrans: u64_at(b, 208),
            dsack_dups: u32_at(b, 216),
            reord_seen: u32_at(b, 220),
            rcv_ooopack: u32_at(b, 224),
            snd_wnd: u32_at(b, 228),
            rcv_wnd: u32_at(b, 232),
            rehash: u32_at(b, 236),
            total_rto: u16_at(b, 240),
            total_rto_recoveries: u16_at(b, 242),
            total_rto_time: u32_at(b, 244),
        })
    }
}

/// The address family of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Family {
    /// IPv4 (`AF_INET`).
    V4,
    /// IPv6 (`AF_INET6`), which includes v4-mapped sockets.
    V6,
}

impl Family {
    fn code(self) -> u8 {
        match self {
            Family::V4 => AF_INET,
            Family::V6 => AF_INET6,
        }
    }
}

/// One TCP socket of a dump: `struct inet_diag_msg` and the attributes
/// asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketInfo {
    /// `idiag_state`: TCP state, as [`TcpInfo::state`].
    pub state: u8,
    /// `idiag_timer`: the pending timer (1 retransmit, 2 keepalive, 3
    /// TIME_WAIT, 4 zero-window probe).
    pub timer: u8,
    /// `idiag_retrans`: retransmissions counted by that timer.
    pub retrans: u8,
    /// Local address and port.
    pub src: SocketAddr,
    /// Remote address and port (unspecified for a listener).
    pub dst: SocketAddr,
    /// `idiag_if`: the bound interface index, 0 if none.
    pub interface: u32,
    /// `idiag_cookie`: the kernel's socket cookie, unique in the namespace.
    pub cookie: u64,
    /// `idiag_expires`: ms until the timer fires.
    pub expires: u32,
    /// `idiag_rqueue`: bytes not yet read (listeners: the accept queue).
    pub rqueue: u32,
    /// `idiag_wqueue`: bytes not yet acknowledged (listeners: the backlog).
    pub wqueue: u32,
    /// `idiag_uid`.
    pub uid: u32,
    /// `idiag_inode`: the socket's inode, 0 once no file holds it
    /// (TIME_WAIT, request sockets, orphans).
    pub inode: u32,
    /// `INET_DIAG_INFO`; absent for TIME_WAIT and request sockets.
    pub info: Option<TcpInfo>,
    /// `INET_DIAG_CONG`: the congestion control's name (`cubic`, `bbr`…).
    pub cong: Option<String>,
}

/// The netlink message that asks for every TCP socket of `family` in the
/// socket's namespace, in every state, with `INET_DIAG_INFO` and
/// `INET_DIAG_CONG`.
pub fn dump_request(family: Family, seq: u32) -> [u8; DUMP_REQUEST_LEN] {
    let mut m = [0u8; DUMP_REQUEST_LEN];
    // struct nlmsghdr: len, type, flags, seq, pid (0: the kernel).
    m[0..4].copy_from_slice(&(DUMP_REQUEST_LEN as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    // struct inet_diag_req_v2: family, protocol, ext, pad, states, id.
    let r = NLMSG_HDRLEN;
    m[r] = family.code();
    m[r + 1] = IPPROTO_TCP;
    // idiag_ext is a bit set of attribute types minus one.
    m[r + 2] = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1));
    m[r + 4..r + 8].copy_from_slice(&u32::MAX.to_ne_bytes());
    // The socket id stays zero: a dump matches on states only. Its cookie
    // would have to be INET_DIAG_NOCOOKIE only for a single-socket query.
    m
}

/// What one read of a dump's replies held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpChunk {
    /// The sockets, in the kernel's order.
    pub sockets: Vec<SocketInfo>,
    /// `NLMSG_DONE` was seen: the dump is complete.
    pub done: bool,
}

fn netlink_align(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// Parses one datagram of replies to [`dump_request`] with sequence
/// number `seq`: any number of `nlmsghdr`-framed messages.
pub fn parse_dump(buf: &[u8], seq: u32) -> Result<DumpChunk, WireError> {
    let mut chunk = DumpChunk::default();
    let mut at = 0;
    while at < buf.len() {
        let left = buf.len() - at;
        let bad = |len| WireError::BadLength {
            what: "message",
            at,
            len,
            left,
        };
        let len = u32_at(buf, at).ok_or(bad(NLMSG_HDRLEN))? as usize;
        if len < NLMSG_HDRLEN || len > left {
            return Err(bad(len));
        }
        let ty = u16_at(buf, at + 4).unwrap_or(0);
        let got = u32_at(buf, at + 8).unwrap_or(0);
        if got != seq {
            return Err(WireError::Sequence { got, want: seq });
        }
        let payload = &buf[at + NLMSG_HDRLEN..at + len];
        match ty {
            NLMSG_NOOP => {}
            NLMSG_DONE => {
                // The payload is an int; a negative one says the dump
                // failed part way. Old kernels may leave it out.
                if let Some(e) = u32_at(payload, 0).map(|v| v as i32) {
                    if e < 0 {
                        return Err(WireError::Kernel(e.saturating_neg()));
                    }
                }
                chunk.done = true;
                return Ok(chunk);
            }
            NLMSG_ERROR => {
                let e = u32_at(payload, 0).ok_or(WireError::BadLength {
                    what: "error",
                    at: at + NLMSG_HDRLEN,
                    len: 4,
                    left: payload.len(),
                })? as i32;
                // Error 0 is an acknowledgement, which a dump without
                // NLM_F_ACK does not ask for; harmless.
                if e != 0 {
                    return Err(WireError::Kernel(e.saturating_neg()));
                }
            }
            NLMSG_OVERRUN => return Err(WireError::Overrun),
            SOCK_DIAG_BY_FAMILY => {
                chunk
                    .sockets
                    .push(parse_socket(payload, at + NLMSG_HDRLEN)?);
            }
            other => return Err(WireError::UnexpectedType(other)),
        }
        // The last message's padding may be missing.
        at = at.saturating_add(netlink_align(len)).min(buf.len());
    }
    Ok(chunk)
}

/// `struct inet_diag_msg` and its attributes; `base` is the payload's
/// offset in the datagram, for error messages.
fn parse_socket(p: &[u8], base: usize) -> Result<SocketInfo, WireError> {
    if p.len() < DIAG_MSG_LEN {
        return Err(WireError::BadLength {
            what: "inet_diag_msg",
            at: base,
            len: DIAG_MSG_LEN,
            left: p.len(),
        });
    }
    let (family, state, timer, retrans) = (p[0], p[1], p[2], p[3]);
    // inet_diag_sockid at 4: sport, dport (network order), src[16],
    // dst[16], if, cookie[2].
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let dport = u16::from_be_bytes([p[6], p[7]]);
    let addr = |at: usize| -> Result<IpAddr, WireError> {
        match family {
            AF_INET => Ok(IpAddr::V4(Ipv4Addr::from(
                field::<4>(p, at).unwrap_or_default(),
            ))),
            AF_INET6 => Ok(IpAddr::V6(Ipv6Addr::from(
                field::<16>(p, at).unwrap_or_default(),
            ))),
            other => Err(WireError::Family(other)),
        }
    };
    let src = SocketAddr::new(addr(8)?, sport);
    let dst = SocketAddr::new(addr(24)?, dport);
    let u = |at| u32_at(p, at).unwrap_or(0);
    let cookie = u64::from(u(44)) | (u64::from(u(48)) << 32);
    let mut s = SocketInfo {
        state,
        timer,
        retrans,
        src,
        dst,
        interface: u(40),
        cookie,
        expires: u(52),
        rqueue: u(56),
        wqueue: u(60),
        uid: u(64),
        inode: u(68),
        info: None,
        cong: None,
    };
    let mut at = DIAG_MSG_LEN;
    while at < p.len() {
        let left = p.len() - at;
        let bad = |len| WireError::BadLength {
            what: "attribute",
            at: base + at,
            len,
            left,
        };
        let len = usize::from(u16_at(p, at).ok_or(bad(RTA_HDRLEN))?);
        if len < RTA_HDRLEN || len > left {
            return Err(bad(len));
        }
        let ty = u16_at(p, at + 2).unwrap_or(0);
        let value = &p[at + RTA_HDRLEN..at + len];
        match ty {
            INET_DIAG_INFO => s.info = Some(TcpInfo::parse(value)?),
            INET_DIAG_CONG => {
                let name = value.split(|&c| c == 0).next().unwrap_or_default();
                s.cong = Some(
                    std::str::from_utf8(name)
                        .map_err(|_| WireError::CongName)?
                        .to_string(),
                );
            }
            // INET_DIAG_SHUTDOWN, _SOCKOPT, _CGROUP_ID… come unasked.
            _ => {}
        }
        at = at.saturating_add(netlink_align(len)).min(p.len());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `tcp_info` of `len` bytes whose every field holds a value derived
    /// from its offset, so that a wrong offset reads a wrong value.
    fn info_bytes(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..8].copy_from_slice(&[1, 4, 3, 2, 5, 7, 0x97, 0x01]);
        let mut put = |at: usize, v: &[u8]| {
            if at + v.len() <= len {
                b[at..at + v.len()].copy_from_slice(v);
            }
        };
        for at in (8..104).step_by(4) {
            put(at, &(1000 + at as u32).to_ne_bytes());
        }
        for at in [104, 112, 120, 128, 160, 168, 176, 184, 200, 208] {
            put(at, &(1 << 40 | at as u64).to_ne_bytes());
        }
        for at in [
            136, 140, 144, 148, 152, 156, 192, 196, 216, 220, 224, 228, 232, 236, 244,
        ] {
            put(at, &(2000 + at as u32).to_ne_bytes());
        }
        put(240, &7u16.to_ne_bytes());
        put(242, &3u16.to_ne_bytes());
        b
    }

    #[test]
    fn tcp_info_of_a_6_7_kernel_reads_every_field_at_its_offset() {
        let i = TcpInfo::parse(&info_bytes(TcpInfo::KNOWN_LEN)).expect("parse");
        assert_eq!(
            (i.state, i.ca_state, i.retransmits, i.probes, i.backoff),
            (1, 4, 3, 2, 5)
        );
        assert_eq!(i.options, 7);
        if cfg!(target_endian = "little") {
            assert_eq!((i.snd_wscale, i.rcv_wscale), (7, 9));
        }
        assert!(i.delivery_rate_app_limited);
        assert_eq!(i.rto, 1008);
        assert_eq!(i.ato, 1012);
        assert_eq!(i.snd_mss, 1016);
        assert_eq!(i.rcv_mss, 1020);
        assert_eq!(i.unacked, 1024);
        assert_eq!(i.retrans, 1036);
        assert_eq!(i.last_data_sent, 1044);
        assert_eq!(i.last_ack_recv, 1056);
        assert_eq!(i.pmtu, 1060);
        assert_eq!(i.rtt, 1068);
        assert_eq!(i.rttvar, 1072);
        assert_eq!(i.snd_ssthresh, 1076);
        assert_eq!(i.snd_cwnd, 1080);
        assert_eq!(i.advmss, 1084);
        assert_eq!(i.rcv_space, 1096);
        assert_eq!(i.total_retrans, 1100);
        assert_eq!(i.pacing_rate, Some(1 << 40 | 104));
        assert_eq!(i.bytes_acked, Some(1 << 40 | 120));
        assert_eq!(i.bytes_received, Some(1 << 40 | 128));
        assert_eq!(i.segs_out, Some(2136));
        assert_eq!(i.min_rtt, Some(2148));
        assert_eq!(i.data_segs_out, Some(2156));
        assert_eq!(i.delivery_rate, Some(1 << 40 | 160));
        assert_eq!(i.busy_time, Some(1 << 40 | 168));
        assert_eq!(i.sndbuf_limited, Some(1 << 40 | 184));
        assert_eq!(i.delivered, Some(2192));
        assert_eq!(i.bytes_sent, Some(1 << 40 | 200));
        assert_eq!(i.bytes_retrans, Some(1 << 40 | 208));
        assert_eq!(i.dsack_dups, Some(2216));
        assert_eq!(i.reord_seen, Some(2220));
        assert_eq!(i.rcv_ooopack, Some(2224));
        assert_eq!(i.snd_wnd, Some(2228));
        assert_eq!(i.rcv_wnd, Some(2232));
        assert_eq!(i.rehash, Some(2236));
        assert_eq!(i.total_rto, Some(7));
        assert_eq!(i.total_rto_recoveries, Some(3));
        assert_eq!(i.total_rto_time, Some(2244));
    }

    #[test]
    fn tcp_info_of_older_kernels_stops_where_their_struct_did() {
        // 3.10: up to tcpi_total_retrans.
        let old = TcpInfo::parse(&info_bytes(104)).expect("3.10");
        assert_eq!(old.snd_cwnd, 1080);
        assert_eq!(old.pacing_rate, None);
        assert_eq!(old.bytes_acked, None);
        // 6.1 (this machine's headers): up to tcpi_snd_wnd, 232 bytes.
        let v61 = TcpInfo::parse(&info_bytes(232)).expect("6.1");
        assert_eq!(v61.snd_wnd, Some(2228));
        assert_eq!(v61.rcv_wnd, None);
        assert_eq!(v61.total_rto, None);
        assert_eq!(v61.total_rto_time, None);
        // 6.2–6.6: up to tcpi_rehash.
        let v62 = TcpInfo::parse(&info_bytes(240)).expect("6.2");
        assert_eq!(v62.rehash, Some(2236));
        assert_eq!(v62.total_rto, None);
        // Cut through a field: that field is absent, not half read.
        let cut = TcpInfo::parse(&info_bytes(124)).expect("cut");
        assert_eq!(cut.max_pacing_rate, Some(1 << 40 | 112));
        assert_eq!(cut.bytes_acked, None);
        // 6.18 appends AccECN counters: ignored, the rest unchanged.
        let v618 = TcpInfo::parse(&info_bytes(280)).expect("6.18");
        assert_eq!(v618.total_rto_time, Some(2244));
    }

    #[test]
    fn tcp_info_shorter_than_any_kernels_is_refused() {
        assert_eq!(
            TcpInfo::parse(&info_bytes(103)),
            Err(WireError::ShortTcpInfo { len: 103, min: 104 })
        );
        assert!(TcpInfo::parse(&[]).is_err());
    }

    #[test]
    fn dump_request_matches_the_uapi_layout() {
        let m = dump_request(Family::V4, 0x0102_0304);
        assert_eq!(m.len(), 72);
        assert_eq!(u32_at(&m, 0), Some(72));
        assert_eq!(u16_at(&m, 4), Some(20));
        assert_eq!(u16_at(&m, 6), Some(0x301));
        assert_eq!(u32_at(&m, 8), Some(0x0102_0304));
        assert_eq!(u32_at(&m, 12), Some(0));
        assert_eq!(&m[16..20], &[2, 6, 0x0a, 0]);
        assert_eq!(u32_at(&m, 20), Some(u32::MAX));
        assert!(m[24..].iter().all(|&b| b == 0));
        assert_eq!(dump_request(Family::V6, 1)[16], 10);
    }

    fn nlmsg(ty: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&4242u32.to_ne_bytes());
        m.extend_from_slice(payload);
        m.resize(netlink_align(m.len()), 0);
        m
    }

    fn rta(ty: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((RTA_HDRLEN + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(netlink_align(a.len()), 0);
        a
    }

    /// An `inet_diag_msg` for 10.0.0.1:443 → 10.0.0.2:50000.
    fn diag_msg(inode: u32) -> Vec<u8> {
        let mut p = vec![0u8; DIAG_MSG_LEN];
        p[..4].copy_from_slice(&[AF_INET, 1, 1, 0]);
        p[4..6].copy_from_slice(&443u16.to_be_bytes());
        p[6..8].copy_from_slice(&50000u16.to_be_bytes());
        p[8..12].copy_from_slice(&[10, 0, 0, 1]);
        p[24..28].copy_from_slice(&[10, 0, 0, 2]);
        p[40..44].copy_from_slice(&3u32.to_ne_bytes());
        p[44..48].copy_from_slice(&0x10u32.to_ne_bytes());
        p[48..52].copy_from_slice(&0x1u32.to_ne_bytes());
        p[52..56].copy_from_slice(&200u32.to_ne_bytes());
        p[56..60].copy_from_slice(&5u32.to_ne_bytes());
        p[60..64].copy_from_slice(&9000u32.to_ne_bytes());
        p[64..68].copy_from_slice(&1000u32.to_ne_bytes());
        p[68..72].copy_from_slice(&inode.to_ne_bytes());
        p
    }

    fn socket_with_attrs(inode: u32) -> Vec<u8> {
        let mut p = diag_msg(inode);
        p.extend(rta(8, &[0])); // INET_DIAG_SHUTDOWN: skipped
        p.extend(rta(INET_DIAG_INFO, &info_bytes(232)));
        p.extend(rta(INET_DIAG_CONG, b"cubic\0"));
        p
    }

    #[test]
    fn a_dump_of_two_sockets_and_done_parses() {
        let mut buf = nlmsg(SOCK_DIAG_BY_FAMILY, 7, &socket_with_attrs(77));
        buf.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 7, &diag_msg(0)));
        buf.extend(nlmsg(NLMSG_DONE, 7, &0i32.to_ne_bytes()));
        let c = parse_dump(&buf, 7).expect("parse");
        assert!(c.done);
        assert_eq!(c.sockets.len(), 2);
        let s = &c.sockets[0];
        assert_eq!(s.src, "10.0.0.1:443".parse().expect("addr"));
        assert_eq!(s.dst, "10.0.0.2:50000".parse().expect("addr"));
        assert_eq!((s.state, s.timer, s.interface), (1, 1, 3));
        assert_eq!(s.cookie, 0x1_0000_0010);
        assert_eq!((s.expires, s.rqueue, s.wqueue, s.uid), (200, 5, 9000, 1000));
        assert_eq!(s.inode, 77);
        assert_eq!(s.cong.as_deref(), Some("cubic"));
        let info = s.info.expect("info");
        assert_eq!(info.snd_cwnd, 1080);
        assert_eq!(info.snd_wnd, Some(2228));
        // TIME_WAIT and request sockets come without attributes.
        assert_eq!((c.sockets[1].info, &c.sockets[1].cong), (None, &None));
    }

    #[test]
    fn a_chunk_without_done_asks_for_more() {
        let buf = nlmsg(SOCK_DIAG_BY_FAMILY, 1, &socket_with_attrs(1));
        let c = parse_dump(&buf, 1).expect("parse");
        assert!(!c.done);
        assert_eq!(c.sockets.len(), 1);
        assert_eq!(parse_dump(&[], 1), Ok(DumpChunk::default()));
    }

    #[test]
    fn ipv6_sockets_carry_16_byte_addresses() {
        let mut p = diag_msg(5);
        p[0] = AF_INET6;
        p[8..24].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        p[24..40].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        let c = parse_dump(&nlmsg(SOCK_DIAG_BY_FAMILY, 1, &p), 1).expect("parse");
        assert_eq!(c.sockets[0].src, "[::1]:443".parse().expect("addr"));
    }

    #[test]
    fn kernel_errors_become_errnos() {
        // NLMSG_ERROR: -EPERM (1) followed by our request's header.
        let mut e = (-1i32).to_ne_bytes().to_vec();
        e.extend_from_slice(&dump_request(Family::V4, 3)[..NLMSG_HDRLEN]);
        assert_eq!(
            parse_dump(&nlmsg(NLMSG_ERROR, 3, &e), 3),
            Err(WireError::Kernel(1))
        );
        // An acknowledgement (error 0) is no error.
        let ack = nlmsg(NLMSG_ERROR, 3, &0i32.to_ne_bytes());
        assert_eq!(parse_dump(&ack, 3), Ok(DumpChunk::default()));
        // A dump that failed part way ends in a negative NLMSG_DONE.
        let done = nlmsg(NLMSG_DONE, 3, &(-4i32).to_ne_bytes());
        assert_eq!(parse_dump(&done, 3), Err(WireError::Kernel(4)));
        assert_eq!(
            parse_dump(&nlmsg(NLMSG_OVERRUN, 3, &[]), 3),
            Err(WireError::Overrun)
        );
        assert_eq!(
            parse_dump(&nlmsg(NLMSG_ERROR, 3, &[1, 2]), 3),
            Err(WireError::BadLength {
                what: "error",
                at: 16,
                len: 4,
                left: 2
            })
        );
    }

    #[test]
    fn malformed_netlink_is_an_error_not_a_panic() {
        let good = nlmsg(SOCK_DIAG_BY_FAMILY, 9, &socket_with_attrs(1));
        // Every truncation of a valid message fails cleanly (or, cut at
        // a message boundary, parses what is whole).
        for n in 1..good.len() {
            assert!(parse_dump(&good[..n], 9).is_err(), "cut at {n}");
        }
        // A length below the header's own.
        let mut short = good.clone();
        short[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert!(matches!(
            parse_dump(&short, 9),
            Err(WireError::BadLength {
                what: "message",
                len: 8,
                ..
            })
        ));
        // A message longer than the datagram.
        let mut long = good.clone();
        long[..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse_dump(&long, 9).is_err());
        // An attribute longer than its message.
        let mut attr = good.clone();
        let a = NLMSG_HDRLEN + DIAG_MSG_LEN;
        attr[a..a + 2].copy_from_slice(&4000u16.to_ne_bytes());
        assert!(matches!(
            parse_dump(&attr, 9),
            Err(WireError::BadLength {
                what: "attribute",
                len: 4000,
                ..
            })
        ));
        // A zero-length attribute (would loop forever if accepted).
        let mut zero = good.clone();
        zero[a..a + 2].copy_from_slice(&0u16.to_ne_bytes());
        assert!(parse_dump(&zero, 9).is_err());
        // A tcp_info attribute too short to be one.
        let mut p = diag_msg(1);
        p.extend(rta(INET_DIAG_INFO, &[0; 40]));
        assert_eq!(
            parse_dump(&nlmsg(SOCK_DIAG_BY_FAMILY, 9, &p), 9),
            Err(WireError::ShortTcpInfo { len: 40, min: 104 })
        );
        // A congestion control name that is not UTF-8.
        let mut p = diag_msg(1);
        p.extend(rta(INET_DIAG_CONG, &[0xff, 0xfe, 0]));
        assert_eq!(
            parse_dump(&nlmsg(SOCK_DIAG_BY_FAMILY, 9, &p), 9),
            Err(WireError::CongName)
        );
        // Unknown family, message type and sequence number.
        let mut p = diag_msg(1);
        p[0] = 99;
        assert_eq!(
            parse_dump(&nlmsg(SOCK_DIAG_BY_FAMILY, 9, &p), 9),
            Err(WireError::Family(99))
        );
        assert_eq!(
            parse_dump(&nlmsg(77, 9, &[]), 9),
            Err(WireError::UnexpectedType(77))
        );
        assert_eq!(
            parse_dump(&good, 8),
            Err(WireError::Sequence { got: 9, want: 8 })
        );
    }
}
