//! The client side of DNS cookies (RFC 7873, with RFC 9018's advice on
//! client cookies): what the resolver sends to an edge in the COOKIE
//! option, what it learns from the answers, and which answers it refuses.
//!
//! Why: an edge rate-limits UDP answers per source prefix (its
//! response-rate limiter slips them to TC=1 or drops them), because over
//! UDP it cannot tell a real client from a forged source. A query that
//! echoes the server cookie the edge gave our address proves the address
//! and is exempt, so a page's burst of lookups is never slipped into TCP
//! retries or dropped into retransmissions. And the client cookie, which
//! an off-path forger has never seen, is 64 more bits it must guess
//! besides the query ID and the port (RFC 7873 §3.2).
//!
//! The jar ([`Jar`]) holds, per edge address, a random client cookie
//! drawn on first contact and kept for the process's lifetime (RFC 9018
//! §3: random per server; we never change address mid-process in a way
//! the edge would see, and a new process draws new ones), and the last
//! server cookie that edge returned. It is bounded ([`MAX_EDGES`]): a
//! client talks to one edge or a few, and a table that any name it is
//! told to query could grow is not kept.

use std::net::SocketAddr;
use std::sync::Mutex;

/// The COOKIE option's code (RFC 7873 §4, IANA).
pub const OPTION_CODE: u16 = 10;

/// Length of a client cookie (RFC 7873 §4: "a fixed-size 8 bytes").
pub const CLIENT_LEN: usize = 8;

/// Edges the jar remembers; past that, the one used longest ago is
/// forgotten (its next query starts again with a client cookie alone).
pub const MAX_EDGES: usize = 64;

/// A client cookie.
pub type ClientCookie = [u8; CLIENT_LEN];

/// What an answer's COOKIE option says about the answer, given the client
/// cookie we sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// No COOKIE option: an edge with cookies off (or a server that does
    /// not know them). Accepted as before (RFC 7873 §5.3 lets a client
    /// take it); nothing learned.
    Absent,
    /// Our client cookie and a well-formed server cookie (8 to 32 bytes),
    /// to be echoed from now on.
    Ours {
        /// The server cookie.
        server: &'a [u8],
    },
    /// Another client cookie, or a malformed option: not an answer to our
    /// query, ignored like a spoofed one.
    //= https://www.rfc-editor.org/rfc/rfc7873#section-5.3
    //# If the COOKIE option is too short to contain a Server Cookie (OPTION-
    //# LENGTH < 16) or is otherwise malformed, then the reply MUST be
    //# discarded.
    //# [...] If a reply contains a COOKIE option and the Client Cookie
    //# portion of that option does not match the Client Cookie sent, the
    //# reply MUST be discarded.
    Foreign,
}

/// The verdict on an answer whose COOKIE option's data is `option`
/// (`None` without one), after a query that sent `sent`. Pure; the
/// comparison takes the same time however many bytes match.
pub fn check<'a>(option: Option<&'a [u8]>, sent: &ClientCookie) -> Verdict<'a> {
    let Some(data) = option else {
        return Verdict::Absent;
    };
    let Some((client, server)) = data.split_first_chunk::<CLIENT_LEN>() else {
        return Verdict::Foreign;
    };
    if !(8..=32).contains(&server.len()) {
        return Verdict::Foreign;
    }
    let diff = client.iter().zip(sent).fold(0u8, |d, (a, b)| d | (a ^ b));
    if diff == 0 {
        Verdict::Ours { server }
    } else {
        Verdict::Foreign
    }
}

/// The COOKIE option's data for a query: the client cookie, then the
/// server cookie when there is one (8 to 40 bytes, RFC 7873 §4).
pub fn option_data(client: &ClientCookie, server: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CLIENT_LEN + server.len());
    out.extend_from_slice(client);
    out.extend_from_slice(server);
    out
}

/// The system random source failed: no client cookie can be drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the system's random source failed to give a DNS client cookie")]
pub struct RandomError;

struct Entry {
    edge: SocketAddr,
    client: ClientCookie,
    /// Empty until the edge has given one.
    server: Vec<u8>,
    /// When it was last used, in the jar's own count of uses (for
    /// forgetting the least recently used edge).
    used: u64,
}

struct Edges {
    entries: Vec<Entry>,
    uses: u64,
}

/// The cookies of the edges a client talks to, shared by every lookup of
/// the process ([`Jar::global`]) behind one lock, held only to copy a
/// few bytes in or out.
pub struct Jar {
    edges: Mutex<Edges>,
}

impl std::fmt::Debug for Jar {
    /// Counts the edges; never prints cookies (a server cookie is the
    /// client's proof of its address).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jar")
            .field("edges", &self.lock().entries.len())
            .finish()
    }
}

impl Default for Jar {
    fn default() -> Self {
        Jar::new()
    }
}

static GLOBAL: Jar = Jar::new();

impl Jar {
    /// An empty jar.
    pub const fn new() -> Jar {
        Jar {
            edges: Mutex::new(Edges {
                entries: Vec::new(),
                uses: 0,
            }),
        }
    }

    /// The process's jar, which [`crate::resolve`] uses: cookies live as
    /// long as the process, so every lookup of a page load (and the next
    /// page's) echoes the server cookie the first one earned.
    pub fn global() -> &'static Jar {
        &GLOBAL
    }

    /// A poisoned lock only means another thread panicked while copying
    /// bytes; the table is still whole, so it is used.
    fn lock(&self) -> std::sync::MutexGuard<'_, Edges> {
        self.edges.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client cookie for `edge` (drawn now if the edge is new, which
    /// may forget the least recently used edge) and the server cookie it
    /// last gave (empty if none yet).
    pub fn for_edge(&self, edge: SocketAddr) -> Result<(ClientCookie, Vec<u8>), RandomError> {
        let mut t = self.lock();
        t.uses += 1;
        let now = t.uses;
        if let Some(e) = t.entries.iter_mut().find(|e| e.edge == edge) {
            e.used = now;
            return Ok((e.client, e.server.clone()));
        }
        let client = random_cookie()?;
        if t.entries.len() >= MAX_EDGES {
            if let Some(oldest) = (0..t.entries.len()).min_by_key(|&i| t.entries[i].used) {
                t.entries.swap_remove(oldest);
            }
        }
        t.entries.push(Entry {
            edge,
            client,
            server: Vec::new(),
            used: now,
        });
        Ok((client, Vec::new()))
    }

    /// Keeps `server`, which `edge` returned with our client cookie
    /// `client`, to be echoed next time, in place of any older one. Not
    /// kept if the edge's client cookie changed meanwhile (it was
    /// forgotten and drawn again): the server cookie is bound to the
    /// client cookie it was made for.
    pub fn learn(&self, edge: SocketAddr, client: &ClientCookie, server: &[u8]) {
        let mut t = self.lock();
        if let Some(e) = t
            .entries
            .iter_mut()
            .find(|e| e.edge == edge && e.client == *client)
        {
            e.server.clear();
            e.server.extend_from_slice(server);
        }
    }

    /// The server cookie kept for `edge`, if any.
    pub fn server_cookie(&self, edge: SocketAddr) -> Option<Vec<u8>> {
        self.lock()
            .entries
            .iter()
            .find(|e| e.edge == edge && !e.server.is_empty())
            .map(|e| e.server.clone())
    }
}

/// Eight bytes from the system's random source (RFC 9018 §3: "the Client
/// Cookie SHOULD be a pseudorandom function of the Server IP Address and
/// a secret" or simply random per server; random is the simplest that
/// keeps one server from tracking the client across servers).
fn random_cookie() -> Result<ClientCookie, RandomError> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; CLIENT_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| RandomError)?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn edge(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    #[test]
    fn answers_are_judged_by_their_client_cookie() {
        let sent = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(check(None, &sent), Verdict::Absent);
        let mut ours = sent.to_vec();
        ours.extend_from_slice(&[9; 16]);
        assert_eq!(
            check(Some(&ours), &sent),
            Verdict::Ours { server: &[9; 16] }
        );
        // One bit of the client cookie off: another query's (or a forger's).
        let mut other = ours.clone();
        other[0] ^= 1;
        assert_eq!(check(Some(&other), &sent), Verdict::Foreign);
        // Malformed: a client cookie alone, too short, too long.
        for n in [0, 7, 8, 15, 41, 60] {
            let mut d = sent.to_vec();
            d.resize(n, 9);
            assert_eq!(check(Some(&d), &sent), Verdict::Foreign, "{n} bytes");
        }
        for n in [16, 24, 40] {
            let mut d = sent.to_vec();
            d.resize(n, 9);
            assert!(matches!(check(Some(&d), &sent), Verdict::Ours { .. }));
        }
    }

    #[test]
    fn the_jar_keeps_one_client_cookie_per_edge_and_the_last_server_cookie() {
        let jar = Jar::new();
        let (c1, s1) = jar.for_edge(edge(53)).unwrap();
        assert!(s1.is_empty());
        let (c2, _) = jar.for_edge(edge(5353)).unwrap();
        assert_ne!(c1, c2, "one client cookie for two edges");
        assert_eq!(jar.for_edge(edge(53)).unwrap().0, c1);
        jar.learn(edge(53), &c1, &[7; 16]);
        assert_eq!(jar.for_edge(edge(53)).unwrap(), (c1, vec![7; 16]));
        jar.learn(edge(53), &c1, &[8; 16]);
        assert_eq!(jar.server_cookie(edge(53)), Some(vec![8; 16]));
        // A server cookie for another client cookie is not kept.
        jar.learn(edge(5353), &c1, &[6; 16]);
        assert_eq!(jar.server_cookie(edge(5353)), None);
        assert_eq!(option_data(&c1, &[8; 16]).len(), 24);
    }

    #[test]
    fn the_jar_forgets_the_least_recently_used_edge_past_its_bound() {
        let jar = Jar::new();
        let (first, _) = jar.for_edge(edge(1)).unwrap();
        jar.learn(edge(1), &first, &[1; 8]);
        for p in 2..=MAX_EDGES as u16 {
            jar.for_edge(edge(p)).unwrap();
        }
        // Edge 1 used again: edge 2 is now the oldest.
        jar.for_edge(edge(1)).unwrap();
        jar.for_edge(edge(9999)).unwrap();
        assert_eq!(jar.lock().entries.len(), MAX_EDGES);
        assert_eq!(jar.server_cookie(edge(1)), Some(vec![1; 8]));
        assert!(!jar.lock().entries.iter().any(|e| e.edge == edge(2)));
        assert_eq!(format!("{jar:?}"), format!("Jar {{ edges: {MAX_EDGES} }}"));
    }
}
