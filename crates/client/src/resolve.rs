//! The DNS exchange with the edge: an `A` query for the page's host that
//! carries the hint request option, timed as the radio RTT (the edge sits at
//! the base station, so one DNS round trip to it is one trip across the
//! radio link plus the edge's answering time).
//!
//! Over UDP first; when the edge says the hint did not fit ("retry over
//! TCP") or truncates the answer, the query is repeated over TCP (RFC 7766
//! framing) for the hint. When the answer carries the compact hint and says
//! the URL list waits over TCP ([`Resolved::urls_over_tcp`]), the caller
//! asks for it with [`fetch_over_tcp`] while it connects to the origin:
//! the edge is one radio round trip away, the origin's TCP and TLS
//! handshakes take two end-to-end round trips. The hint is decoded here but
//! not judged: bounds and freshness are [`crate::advice::check`]'s job.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};
use mewa_hint::dns::{HintRequest, HintResponse, OPTION_CODE};
use mewa_hint::wire::Hint;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use crate::advice::Fallback;

/// Why the edge could not be asked at all (distinct from a missing or bad
/// hint, which is a [`Fallback`] inside a successful answer).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The name or URL cannot be put in a query.
    #[error("cannot ask for {what}: {why}")]
    Query {
        /// The host or URL.
        what: String,
        /// Why.
        why: String,
    },
    /// A socket error talking to the edge.
    #[error("talking to the edge at {edge}: {error}")]
    Io {
        /// The edge.
        edge: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// No answer in time.
    #[error("the edge at {edge} did not answer within {timeout:?}")]
    Timeout {
        /// The edge.
        edge: SocketAddr,
        /// The limit.
        timeout: Duration,
    },
    /// An answer that is not a DNS answer to our query, or an error code.
    #[error("bad answer from the edge at {edge}: {why}")]
    Answer {
        /// The edge.
        edge: SocketAddr,
        /// What was wrong.
        why: String,
    },
}

/// What the edge said.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The host's IPv4 addresses.
    pub addrs: Vec<IpAddr>,
    /// The hint, decoded, or why there is none.
    pub hint: Result<Hint, Fallback>,
    /// Wire size of the hint received, bytes (0 without one).
    pub hint_bytes: usize,
    /// Duration of the UDP exchange: the radio RTT estimate.
    pub rtt: Duration,
    /// Whether the hint had to be fetched over TCP.
    pub over_tcp: bool,
    /// The UDP answer carried the compact hint; the form with every
    /// object's URL is the edge's answer over TCP ([`fetch_over_tcp`]).
    pub urls_over_tcp: bool,
    /// Size of the UDP answer, bytes (the whole DNS message).
    pub answer_bytes: usize,
}

/// When an unanswered UDP query is first sent again; each further
/// retransmission waits twice as long.
pub const FIRST_RETRANSMIT: Duration = Duration::from_secs(1);

fn query_id() -> u16 {
    // Not a secret: the socket is connected to the edge, so a forged answer
    // must also hit our ephemeral port. Varies per query all the same.
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (n ^ (n >> 16)) as u16
}

/// The query the client sends: `A host` with the hint request for
/// `page_url` in its OPT record (advertising 1232 bytes), and its ID.
pub fn hint_query(host: &str, page_url: &str) -> Result<(u16, Vec<u8>), ResolveError> {
    let bad = |what: &str, why: String| ResolveError::Query {
        what: what.to_string(),
        why,
    };
    let name = Name::from_ascii(format!("{}.", host.trim_end_matches('.')))
        .map_err(|e| bad(host, e.to_string()))?;
    let req = HintRequest {
        page_url: page_url.to_string(),
    }
    .encode()
    .map_err(|e| bad(page_url, e.to_string()))?;
    let mut m = Message::query();
    let id = query_id();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name, RecordType::A));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    e.options_mut()
        .insert(EdnsOption::Unknown(OPTION_CODE, req));
    m.set_edns(e);
    let bytes = m.to_vec().map_err(|e| bad(host, e.to_string()))?;
    Ok((id, bytes))
}

/// Asks the edge at `edge` for `host`'s address and the hint of `page_url`.
pub async fn resolve(
    edge: SocketAddr,
    host: &str,
    page_url: &str,
    timeout: Duration,
) -> Result<Resolved, ResolveError> {
    let (id, q) = hint_query(host, page_url)?;
    let io = |error| ResolveError::Io { edge, error };
    let bind: SocketAddr = if edge.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(bind).await.map_err(io)?;
    sock.connect(edge).await.map_err(io)?;
    // A stub resolver's retransmission (RFC 1536 §1): the first query
    // can be lost, or wait behind a radio's promotion and a trace's
    // outage. The RTT is timed from the last send (Karn: an answer after
    // a retransmission does not say which query it answers).
    let mut sent = Instant::now();
    sock.send(&q).await.map_err(io)?;
    let mut buf = vec![0u8; 4096];
    let answer = tokio::time::timeout(timeout, async {
        let mut wait = FIRST_RETRANSMIT;
        let mut next = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                n = sock.recv(&mut buf) => {
                    let n = n?;
                    // Ignore anything that is not the answer to this query.
                    if let Ok(m) = Message::from_vec(&buf[..n]) {
                        if m.metadata.id == id && m.metadata.message_type == MessageType::Response {
                            return Ok::<_, std::io::Error>((m, n));
                        }
                    }
                }
                () = tokio::time::sleep_until(next) => {
                    sock.send(&q).await?;
                    sent = Instant::now();
                    wait *= 2;
                    next = tokio::time::Instant::now() + wait;
                }
            }
        }
    })
    .await
    .map_err(|_| ResolveError::Timeout { edge, timeout })?
    .map_err(io)?;
    let (answer, answer_len) = answer;
    let rtt = sent.elapsed();
    let mut r = read(&answer, edge, rtt)?;
    r.answer_bytes = answer_len;
    let retry = answer.metadata.truncation
        || matches!(hint_option(&answer), Some(Ok(HintResponse::RetryTcp)));
    if retry {
        let m = tcp_exchange(edge, &q, id, timeout).await?;
        let again = read(&m, edge, rtt)?;
        r = Resolved {
            over_tcp: true,
            answer_bytes: answer_len,
            addrs: if again.addrs.is_empty() {
                r.addrs
            } else {
                again.addrs
            },
            ..again
        };
    }
    Ok(r)
}

/// The edge's answer over TCP for `host` and the hint of `page_url`: the
/// form with every object's URL when the UDP answer said it waits there
/// ([`Resolved::urls_over_tcp`]). Its `rtt` is the whole exchange's
/// (handshake included), not the radio RTT.
pub async fn fetch_over_tcp(
    edge: SocketAddr,
    host: &str,
    page_url: &str,
    timeout: Duration,
) -> Result<Resolved, ResolveError> {
    let (id, q) = hint_query(host, page_url)?;
    let t0 = Instant::now();
    let m = tcp_exchange(edge, &q, id, timeout).await?;
    let mut r = read(&m, edge, t0.elapsed())?;
    r.over_tcp = true;
    Ok(r)
}

/// The object URLs of `page_url` from the edge's TCP answer
/// ([`fetch_over_tcp`]), checked as a plan checks its hint
/// ([`crate::advice::urls_of`]); `Err` says why there are none.
pub async fn fetch_url_list(
    edge: SocketAddr,
    host: &str,
    page_url: &str,
    timeout: Duration,
) -> Result<crate::advice::UrlList, String> {
    let r = fetch_over_tcp(edge, host, page_url, timeout)
        .await
        .map_err(|e| e.to_string())?;
    let hint = r.hint.map_err(|f| f.to_string())?;
    crate::advice::urls_of(&hint, page_url, mewa_hint::now_unix_s()).map_err(|f| f.to_string())
}

/// One query over TCP (RFC 7766 framing), within `timeout`.
async fn tcp_exchange(
    edge: SocketAddr,
    q: &[u8],
    id: u16,
    timeout: Duration,
) -> Result<Message, ResolveError> {
    tokio::time::timeout(timeout, tcp_exchange_once(edge, q, id))
        .await
        .map_err(|_| ResolveError::Timeout { edge, timeout })?
}

async fn tcp_exchange_once(edge: SocketAddr, q: &[u8], id: u16) -> Result<Message, ResolveError> {
    let io = |error| ResolveError::Io { edge, error };
    let mut s = TcpStream::connect(edge).await.map_err(io)?;
    let len = u16::try_from(q.len()).map_err(|_| ResolveError::Answer {
        edge,
        why: "query too long".into(),
    })?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(q);
    s.write_all(&out).await.map_err(io)?;
    let mut l = [0u8; 2];
    s.read_exact(&mut l).await.map_err(io)?;
    let mut b = vec![0u8; usize::from(u16::from_be_bytes(l))];
    s.read_exact(&mut b).await.map_err(io)?;
    let m = Message::from_vec(&b).map_err(|e| ResolveError::Answer {
        edge,
        why: e.to_string(),
    })?;
    if m.metadata.id != id {
        return Err(ResolveError::Answer {
            edge,
            why: "answer over TCP for another query".into(),
        });
    }
    Ok(m)
}

fn hint_option(m: &Message) -> Option<Result<HintResponse, mewa_hint::dns::DnsError>> {
    match m.edns.as_ref()?.option(EdnsCode::Unknown(OPTION_CODE))? {
        EdnsOption::Unknown(_, d) => Some(HintResponse::decode(d)),
        _ => None,
    }
}

fn read(m: &Message, edge: SocketAddr, rtt: Duration) -> Result<Resolved, ResolveError> {
    if m.metadata.response_code != ResponseCode::NoError {
        return Err(ResolveError::Answer {
            edge,
            why: format!("response code {}", m.metadata.response_code),
        });
    }
    let addrs = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect();
    let (hint, hint_bytes) = match hint_option(m) {
        None => (Err(Fallback::Missing), 0),
        Some(Err(e)) => (Err(Fallback::Malformed(e.to_string())), 0),
        Some(Ok(HintResponse::Unknown)) => (Err(Fallback::Unknown), 0),
        Some(Ok(HintResponse::RetryTcp)) => (Err(Fallback::Missing), 0),
        Some(Ok(HintResponse::Hint(b) | HintResponse::Compact(b))) => (
            Hint::from_bytes(&b).map_err(|e| Fallback::Malformed(e.to_string())),
            b.len(),
        ),
    };
    let urls_over_tcp = matches!(hint_option(m), Some(Ok(HintResponse::Compact(_))));
    Ok(Resolved {
        addrs,
        hint,
        hint_bytes,
        rtt,
        over_tcp: false,
        urls_over_tcp,
        answer_bytes: 0,
    })
}
