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
//!
//! Every query carries a DNS cookie ([`crate::cookie`]): our client cookie
//! for the edge and the server cookie its last answer gave, so that the
//! edge's response-rate limiter exempts us; an answer with another client
//! cookie is ignored like a forgery.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use mewa_hint::dns::{HintRequest, HintResponse, OPTION_CODE};
use mewa_hint::wire::Hint;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use crate::advice::Fallback;
use crate::cookie::{self, ClientCookie, Jar, Verdict};

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

/// A query ID from the system's random source (RFC 5452 §9.2): with the
/// ephemeral port, what an off-path forger must guess.
fn query_id() -> Result<u16, ResolveError> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 2];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| ResolveError::Query {
            what: "a query ID".into(),
            why: "the system's random source failed".into(),
        })?;
    Ok(u16::from_be_bytes(b))
}

/// The name asked for `host` (fully qualified).
fn query_name(host: &str) -> Result<Name, ResolveError> {
    Name::from_ascii(format!("{}.", host.trim_end_matches('.'))).map_err(|e| ResolveError::Query {
        what: host.to_string(),
        why: e.to_string(),
    })
}

/// The query the client sends: `A host` with the hint request for
/// `page_url` in its OPT record (advertising 1232 bytes), and its ID.
/// Without a COOKIE option: its size is the hint request's, what the
/// edge's answer budget is computed against.
pub fn hint_query(host: &str, page_url: &str) -> Result<(u16, Vec<u8>), ResolveError> {
    query(host, Some(page_url), None).map(|(asked, bytes)| (asked.id, bytes))
}

/// What a query asked, to tell its answer from anything else that
/// arrives: its ID, the name, and the client cookie it sent (if any).
struct Asked {
    id: u16,
    name: Name,
    cookie: Option<ClientCookie>,
}

/// `A host`, with the hint request for `page_url` when there is one and
/// a COOKIE option with `cookie` (client cookie, server cookie) when
/// given: what it asked, and its bytes.
fn query(
    host: &str,
    page_url: Option<&str>,
    cookie: Option<(ClientCookie, &[u8])>,
) -> Result<(Asked, Vec<u8>), ResolveError> {
    let bad = |what: &str, why: String| ResolveError::Query {
        what: what.to_string(),
        why,
    };
    let name = query_name(host)?;
    let mut m = Message::query();
    let id = query_id()?;
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name.clone(), RecordType::A));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    if let Some(page_url) = page_url {
        let req = HintRequest {
            page_url: page_url.to_string(),
        }
        .encode()
        .map_err(|e| bad(page_url, e.to_string()))?;
        e.options_mut()
            .insert(EdnsOption::Unknown(OPTION_CODE, req));
    }
    if let Some((client, server)) = cookie {
        e.options_mut().insert(EdnsOption::Unknown(
            cookie::OPTION_CODE,
            cookie::option_data(&client, server),
        ));
    }
    m.set_edns(e);
    let bytes = m.to_vec().map_err(|e| bad(host, e.to_string()))?;
    Ok((
        Asked {
            id,
            name,
            cookie: cookie.map(|(c, _)| c),
        },
        bytes,
    ))
}

/// The data of `m`'s COOKIE option, if it has one.
fn cookie_option(m: &Message) -> Option<&[u8]> {
    match m
        .edns
        .as_ref()?
        .option(EdnsCode::from(cookie::OPTION_CODE))?
    {
        EdnsOption::Unknown(_, d) => Some(d),
        _ => None,
    }
}

/// What `m`'s COOKIE option says, after a query that sent `asked.cookie`
/// ([`cookie::check`]); a query without a cookie learns nothing and
/// refuses nothing by it.
fn cookie_verdict<'m>(m: &'m Message, asked: &Asked) -> Verdict<'m> {
    match &asked.cookie {
        Some(sent) => cookie::check(cookie_option(m), sent),
        None => Verdict::Absent,
    }
}

/// Whether `m` answers our query `asked`: same ID, a response, the one
/// question we asked (`A`, names compare without case, RFC 4343), and
/// no COOKIE option with another client cookie than we sent. Anything
/// else on the socket (a late answer to an earlier query, a forgery) is
/// not the answer.
fn answers(m: &Message, asked: &Asked) -> bool {
    m.metadata.id == asked.id
        && m.metadata.message_type == MessageType::Response
        && m.queries.len() == 1
        && m.queries[0].query_type() == RecordType::A
        && m.queries[0].query_class() == DNSClass::IN
        && names_equal(m.queries[0].name(), &asked.name)
        && cookie_verdict(m, asked) != Verdict::Foreign
}

/// `bytes` parsed, if they are the answer to our query `asked`
/// ([`answers`]); `None` for anything else a socket may deliver.
fn answer_to(bytes: &[u8], asked: &Asked) -> Option<Message> {
    Message::from_vec(bytes).ok().filter(|m| answers(m, asked))
}

/// Keeps the server cookie of an accepted answer `m` from `edge`, to be
/// echoed on the next query (each answer's replaces the last: the edge
/// hands out a fresh one every time, and a fresh one lasts longest).
fn learn_cookie(m: &Message, asked: &Asked, edge: SocketAddr) {
    if let (Some(client), Verdict::Ours { server }) = (&asked.cookie, cookie_verdict(m, asked)) {
        Jar::global().learn(edge, client, server);
    }
}

/// What the resolver makes of one datagram `bytes` from the edge at `edge`
/// after sending query `id` for `A host`, with the client cookie `cookie`
/// if it sent one: `Ok(None)` if it is not the answer to that query
/// (another ID, not a response, another question, a COOKIE option with
/// another client cookie or malformed: the resolver keeps waiting), else
/// the answer read as [`resolve`] reads it: the addresses of `host` and of
/// the names its CNAME chain leads to (records for other names ignored),
/// and the hint or why there is none; an error response code is an error.
/// Pure (the RTT reads zero, no cookie is kept), the same steps as the UDP
/// exchange, for the `client_answer` fuzz target.
pub fn read_answer(
    bytes: &[u8],
    id: u16,
    cookie: Option<ClientCookie>,
    host: &str,
    edge: SocketAddr,
) -> Result<Option<Resolved>, ResolveError> {
    let asked = Asked {
        id,
        name: query_name(host)?,
        cookie,
    };
    match answer_to(bytes, &asked) {
        None => Ok(None),
        Some(m) => read(&m, &asked.name, edge, Duration::ZERO).map(Some),
    }
}

/// The COOKIE option to send to `edge`: our client cookie for it and the
/// server cookie it last gave ([`Jar::global`]).
fn cookie_for(edge: SocketAddr) -> Result<(ClientCookie, Vec<u8>), ResolveError> {
    Jar::global()
        .for_edge(edge)
        .map_err(|e| ResolveError::Query {
            what: "a DNS client cookie".into(),
            why: e.to_string(),
        })
}

fn names_equal(a: &Name, b: &Name) -> bool {
    a.to_ascii().eq_ignore_ascii_case(&b.to_ascii())
}

/// Asks the edge at `edge` for `host`'s address and the hint of `page_url`.
pub async fn resolve(
    edge: SocketAddr,
    host: &str,
    page_url: &str,
    timeout: Duration,
) -> Result<Resolved, ResolveError> {
    exchange(edge, host, Some(page_url), timeout).await
}

/// Asks the edge at `edge` for `host`'s address alone, without a hint
/// request: for the hosts of a page's objects, which are not pages. A
/// hint request names a page, and the edge counts it towards that page's
/// popularity (which pages it traces); the objects' hosts must not.
pub async fn resolve_address(
    edge: SocketAddr,
    host: &str,
    timeout: Duration,
) -> Result<Resolved, ResolveError> {
    exchange(edge, host, None, timeout).await
}

async fn exchange(
    edge: SocketAddr,
    host: &str,
    page_url: Option<&str>,
    timeout: Duration,
) -> Result<Resolved, ResolveError> {
    let (client, server) = cookie_for(edge)?;
    let (asked, q) = query(host, page_url, Some((client, &server)))?;
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
                    if let Some(m) = answer_to(&buf[..n], &asked) {
                        return Ok::<_, std::io::Error>((m, n));
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
    learn_cookie(&answer, &asked, edge);
    let mut r = read(&answer, &asked.name, edge, rtt)?;
    r.answer_bytes = answer_len;
    let retry = answer.metadata.truncation
        || matches!(hint_option(&answer), Some(Ok(HintResponse::RetryTcp)));
    if retry {
        let m = tcp_exchange(edge, &q, &asked, timeout).await?;
        let again = read(&m, &asked.name, edge, rtt)?;
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
    let (client, server) = cookie_for(edge)?;
    let (asked, q) = query(host, Some(page_url), Some((client, &server)))?;
    let t0 = Instant::now();
    let m = tcp_exchange(edge, &q, &asked, timeout).await?;
    let mut r = read(&m, &asked.name, edge, t0.elapsed())?;
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

/// One query over TCP (RFC 7766 framing), within `timeout`; the server
/// cookie of its answer is kept.
async fn tcp_exchange(
    edge: SocketAddr,
    q: &[u8],
    asked: &Asked,
    timeout: Duration,
) -> Result<Message, ResolveError> {
    tokio::time::timeout(timeout, tcp_exchange_once(edge, q, asked))
        .await
        .map_err(|_| ResolveError::Timeout { edge, timeout })?
}

async fn tcp_exchange_once(
    edge: SocketAddr,
    q: &[u8],
    asked: &Asked,
) -> Result<Message, ResolveError> {
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
    if !answers(&m, asked) {
        return Err(ResolveError::Answer {
            edge,
            why: "answer over TCP for another query (or another client cookie)".into(),
        });
    }
    learn_cookie(&m, asked, edge);
    Ok(m)
}

fn hint_option(m: &Message) -> Option<Result<HintResponse, mewa_hint::dns::DnsError>> {
    match m.edns.as_ref()?.option(EdnsCode::Unknown(OPTION_CODE))? {
        EdnsOption::Unknown(_, d) => Some(HintResponse::decode(d)),
        _ => None,
    }
}

/// The addresses of `name` in `m`'s answer section: `A` records of the
/// name or of the names its `CNAME` records lead to, in order. Records
/// for any other name (an answer stuffed with addresses of unrelated
/// hosts) are ignored.
fn addresses_of(m: &Message, name: &Name) -> Vec<IpAddr> {
    let mut names = vec![name.clone()];
    // Each pass follows one more link of the chain; a chain longer than
    // the answer is a loop.
    for _ in 0..m.answers.len() {
        let before = names.len();
        for r in &m.answers {
            if let RData::CNAME(c) = &r.data {
                let known = |n: &Name| names.iter().any(|k| names_equal(k, n));
                if known(&r.name) && !known(&c.0) {
                    names.push(c.0.clone());
                }
            }
        }
        if names.len() == before {
            break;
        }
    }
    m.answers
        .iter()
        .filter(|r| names.iter().any(|n| names_equal(n, &r.name)))
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect()
}

fn read(
    m: &Message,
    name: &Name,
    edge: SocketAddr,
    rtt: Duration,
) -> Result<Resolved, ResolveError> {
    if m.metadata.response_code != ResponseCode::NoError {
        return Err(ResolveError::Answer {
            edge,
            why: format!("response code {}", m.metadata.response_code),
        });
    }
    let addrs = addresses_of(m, name);
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
