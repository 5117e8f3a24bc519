//! DNS cookies (RFC 7873) with the interoperable server cookie of RFC 9018.
//!
//! Why: a query's source address is not proof of anything over UDP, so the
//! response-rate limiter ([`crate::rrl`]) has to treat every source as
//! possibly forged and slip or drop a real resolver's answers along with a
//! flood's. A cookie is that proof: the server cookie is a MAC over the
//! client's address, so a client that echoes one it was given has received
//! our answers at that address. Such a query is exempt from rate limiting.
//!
//! The server cookie is RFC 9018's, so that several edges (or another
//! implementation) sharing the secret accept each other's cookies:
//!
//! ```text
//! version (1) = 1 | reserved (3) | timestamp (4, Unix s, big endian)
//!   | hash (8) = SipHash-2-4(secret; client cookie | version | reserved
//!                                  | timestamp | client IP)
//! ```
//!
//! Pure: the secret, the client's address and the time are passed in.

use std::net::IpAddr;

/// The COOKIE option's code (RFC 7873 §4, IANA).
pub const OPTION_CODE: u16 = 10;

/// Length of a client cookie (RFC 7873 §4: "a fixed-size 8 bytes").
pub const CLIENT_LEN: usize = 8;

/// Length of the server cookies this module makes (RFC 9018 §4.2).
pub const SERVER_LEN: usize = 16;

//= https://www.rfc-editor.org/rfc/rfc9018#section-4.3
//# if the Server Cookie is more than 1 hour old or more than 5 minutes in
//# the future, it is considered invalid
/// Oldest server cookie accepted, seconds.
pub const MAX_AGE_S: i64 = 3600;
/// Furthest in the future a server cookie may be stamped (clock skew
/// between servers sharing the secret), seconds.
pub const MAX_AHEAD_S: i64 = 300;

/// The server secret: the SipHash-2-4 key (128 bits, RFC 9018 §4.2).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 16]);

impl std::fmt::Debug for Secret {
    /// Never prints the key: it would let anyone mint valid cookies.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A secret that could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// `dns.cookie_secret` is not 32 hexadecimal digits.
    #[error("must be 32 hexadecimal digits (16 bytes), e.g. from `openssl rand -hex 16`")]
    NotHex,
    /// The system's random number generator failed.
    #[error("the system random number generator failed")]
    Random,
}

impl Secret {
    /// A secret from its 16 bytes.
    pub fn new(bytes: [u8; 16]) -> Secret {
        Secret(bytes)
    }

    /// A fresh random secret (the system CSPRNG): what an edge without a
    /// configured secret uses; its cookies die with the process.
    pub fn generate() -> Result<Secret, SecretError> {
        use ring::rand::SecureRandom;
        let mut b = [0u8; 16];
        ring::rand::SystemRandom::new()
            .fill(&mut b)
            .map_err(|_| SecretError::Random)?;
        Ok(Secret(b))
    }

    /// A secret from 32 hexadecimal digits (`dns.cookie_secret`): the
    /// same on every edge of an anycast set, so that each accepts the
    /// others' cookies.
    pub fn from_hex(s: &str) -> Result<Secret, SecretError> {
        let s = s.trim();
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SecretError::NotHex);
        }
        let mut b = [0u8; 16];
        for (i, out) in b.iter_mut().enumerate() {
            let pair = s.get(2 * i..2 * i + 2).ok_or(SecretError::NotHex)?;
            *out = u8::from_str_radix(pair, 16).map_err(|_| SecretError::NotHex)?;
        }
        Ok(Secret(b))
    }
}

/// A COOKIE option as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    /// The client cookie.
    pub client: [u8; CLIENT_LEN],
    /// The server cookie the client echoes: empty, or 8 to 32 bytes.
    pub server: &'a [u8],
}

impl<'a> Received<'a> {
    /// Reads an option's data; `None` if its length is malformed, which
    /// the server answers with FORMERR.
    //= https://www.rfc-editor.org/rfc/rfc7873#section-5.2.2
    //# If the COOKIE option is too short to contain a Client Cookie, or is
    //# otherwise malformed
    /// That is: anything but 8 bytes (a client cookie alone) or 16 to 40
    /// (with a server cookie of 8 to 32 bytes, RFC 7873 §4).
    pub fn parse(data: &'a [u8]) -> Option<Received<'a>> {
        let (client, server) = data.split_first_chunk::<CLIENT_LEN>()?;
        if !(server.is_empty() || (8..=32).contains(&server.len())) {
            return None;
        }
        Some(Received {
            client: *client,
            server,
        })
    }
}

/// What a query's cookie proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Status {
    /// No COOKIE option (or cookies are off).
    #[default]
    Absent,
    /// A client cookie alone: the client's first query to us.
    ClientOnly,
    /// A server cookie that is not ours for this address and time (forged,
    /// expired, made with another secret, or for another address): answered
    /// normally with a new one (RFC 7873 §5.2.3), rate-limited as usual.
    Bad,
    /// Our server cookie for this client address, recent: the address is
    /// the client's, and its answers are exempt from rate limiting.
    Valid,
}

/// Checks and makes cookies for one query: the secret, the client's
/// address and the time.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The server secret.
    pub secret: &'a Secret,
    /// The query's source address (an IPv4-mapped IPv6 address counts as
    /// the IPv4 one, as a dual-stack socket reports it).
    pub client: IpAddr,
    /// Now, Unix seconds (RFC 9018's timestamp, modulo 2^32).
    pub now_unix_s: u32,
}

impl Context<'_> {
    /// The verdict on a received cookie.
    pub fn verify(&self, r: &Received<'_>) -> Status {
        if r.server.is_empty() {
            return Status::ClientOnly;
        }
        // Ours are 16 bytes of version 1; any other is not ours.
        let Some((head, hash)) = r.server.split_first_chunk::<8>() else {
            return Status::Bad;
        };
        if hash.len() != 8 || head[0] != 1 {
            return Status::Bad;
        }
        let stamp = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        // Serial number arithmetic (RFC 1982), as RFC 9018 §4.3 asks: the
        // timestamp wraps in 2106.
        let age = i64::from(self.now_unix_s.wrapping_sub(stamp) as i32);
        if !(-MAX_AHEAD_S..=MAX_AGE_S).contains(&age) {
            return Status::Bad;
        }
        // The reserved bytes are hashed as received (RFC 9018 §4.2: they
        // are ignored on receipt but part of the hash).
        let want = self.hash(&r.client, head).to_le_bytes();
        // Constant time: no timing hint of how many bytes of a guess match.
        let diff = want.iter().zip(hash).fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff == 0 {
            Status::Valid
        } else {
            Status::Bad
        }
    }

    /// A fresh server cookie for `client`, stamped now.
    pub fn server_cookie(&self, client: &[u8; CLIENT_LEN]) -> [u8; SERVER_LEN] {
        let mut out = [0u8; SERVER_LEN];
        out[0] = 1;
        out[4..8].copy_from_slice(&self.now_unix_s.to_be_bytes());
        let mut head = [0u8; 8];
        head.copy_from_slice(&out[..8]);
        out[8..].copy_from_slice(&self.hash(client, &head).to_le_bytes());
        out
    }

    /// The COOKIE option's data for the answer: the client cookie and a
    /// fresh server cookie (24 bytes). Always fresh, rather than echoing a
    /// valid one: RFC 9018 §4.3 allows it, and a client never holds a
    /// cookie close to expiry.
    pub fn reply(&self, r: &Received<'_>) -> Vec<u8> {
        let mut out = Vec::with_capacity(CLIENT_LEN + SERVER_LEN);
        out.extend_from_slice(&r.client);
        out.extend_from_slice(&self.server_cookie(&r.client));
        out
    }

    /// SipHash-2-4 over client cookie | version | reserved | timestamp |
    /// client IP (4 or 16 bytes).
    fn hash(&self, client: &[u8; CLIENT_LEN], head: &[u8; 8]) -> u64 {
        let mut msg = [0u8; CLIENT_LEN + 8 + 16];
        msg[..8].copy_from_slice(client);
        msg[8..16].copy_from_slice(head);
        let n = match self.client.to_canonical() {
            IpAddr::V4(v4) => {
                msg[16..20].copy_from_slice(&v4.octets());
                20
            }
            IpAddr::V6(v6) => {
                msg[16..32].copy_from_slice(&v6.octets());
                32
            }
        };
        siphash24(&self.secret.0, &msg[..n])
    }
}

/// SipHash-2-4 (Aumasson and Bernstein, 2012) of `data` under `key`, the
/// MAC RFC 9018 names. Written out here (about thirty lines) rather than
/// taken from a crate: the standard library's `SipHasher` is deprecated,
/// and the RFC's test vectors check this one.
pub fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes([
        key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
    ]);
    let k1 = u64::from_le_bytes([
        key[8], key[9], key[10], key[11], key[12], key[13], key[14], key[15],
    ]);
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let m = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    // The last block: the remaining bytes, and the length's low byte on top.
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    round(&mut v);
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn siphash_matches_the_reference_vectors() {
        // The SipHash paper's Appendix A: key 00..0f, message 00..0e
        // (15 bytes), and the reference implementation's first vector
        // (empty message).
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key, &msg), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash24(&key, &[]), 0x726f_db47_dd0e_0e31);
    }

    /// RFC 9018 Appendix A: the server cookies its examples hand out.
    #[test]
    fn server_cookies_match_rfc_9018_appendix_a() {
        for (secret, client, ip, now, want) in [
            // A.1, a new server cookie.
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "2464c4abcf10c957",
                "198.51.100.100",
                1_559_731_985,
                "010000005cf79f111f8130c3eee29480",
            ),
            // A.2, the same client, renewed.
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "2464c4abcf10c957",
                "198.51.100.100",
                1_559_734_385,
                "010000005cf7a871d4a564a1442aca77",
            ),
            // A.3, another client.
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "fc93fc62807ddb86",
                "203.0.113.203",
                1_559_734_700,
                "010000005cf7a9acf73a7810aca2381e",
            ),
            // A.4, an IPv6 client, after a secret rollover.
            (
                "445536bcd2513298075a5d379663c962",
                "22681ab97d52c298",
                "2001:db8:220:1:59de:d0f4:8769:82b8",
                1_559_741_961,
                "010000005cf7c609a6bb79d16625507a",
            ),
        ] {
            let secret = Secret::from_hex(secret).unwrap();
            let ctx = Context {
                secret: &secret,
                client: ip.parse().unwrap(),
                now_unix_s: now,
            };
            let client: [u8; 8] = hex(client).try_into().unwrap();
            assert_eq!(ctx.server_cookie(&client).to_vec(), hex(want), "{ip}");
        }
    }

    #[test]
    fn verification_checks_address_secret_age_and_format() {
        let secret = Secret::from_hex("e5e973e5a6b2a43f48e7dc849e37bfcf").unwrap();
        let at = |ip: &str, now: u32| Context {
            secret: &secret,
            client: ip.parse().unwrap(),
            now_unix_s: now,
        };
        // RFC 9018 A.3: the client sent reserved bytes 0xabcdef; they are
        // hashed as received, so the cookie holds.
        let opt = hex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let r = Received::parse(&opt).unwrap();
        let stamp = 0x5cf7_8f71;
        assert_eq!(at("203.0.113.203", stamp).verify(&r), Status::Valid);
        // Another address, the same cookie: not ours.
        assert_eq!(at("203.0.113.204", stamp).verify(&r), Status::Bad);
        // An IPv4-mapped IPv6 source is the IPv4 one.
        assert_eq!(at("::ffff:203.0.113.203", stamp).verify(&r), Status::Valid);
        // An hour old holds, a second more does not; five minutes ahead
        // holds, a second more does not.
        assert_eq!(at("203.0.113.203", stamp + 3600).verify(&r), Status::Valid);
        assert_eq!(at("203.0.113.203", stamp + 3601).verify(&r), Status::Bad);
        assert_eq!(at("203.0.113.203", stamp - 300).verify(&r), Status::Valid);
        assert_eq!(at("203.0.113.203", stamp - 301).verify(&r), Status::Bad);
        // Another secret.
        let other = Secret::from_hex("445536bcd2513298075a5d379663c962").unwrap();
        let c = Context {
            secret: &other,
            ..at("203.0.113.203", stamp)
        };
        assert_eq!(c.verify(&r), Status::Bad);
        // One flipped bit of the hash, another version, another length.
        let mut forged = opt.clone();
        forged[23] ^= 1;
        let f = Received::parse(&forged).unwrap();
        assert_eq!(at("203.0.113.203", stamp).verify(&f), Status::Bad);
        let mut v2 = opt.clone();
        v2[8] = 2;
        let f = Received::parse(&v2).unwrap();
        assert_eq!(at("203.0.113.203", stamp).verify(&f), Status::Bad);
        let f = Received::parse(&opt[..20]).unwrap();
        assert_eq!(at("203.0.113.203", stamp).verify(&f), Status::Bad);
        // The cookie a reply carries verifies, for that client only.
        let c = at("192.0.2.1", 1_700_000_000);
        let reply = c.reply(&Received::parse(&opt[..8]).unwrap());
        assert_eq!(reply.len(), 24);
        let back = Received::parse(&reply).unwrap();
        assert_eq!(c.verify(&back), Status::Valid);
        assert_eq!(at("192.0.2.2", 1_700_000_000).verify(&back), Status::Bad);
        assert_eq!(
            c.verify(&Received::parse(&opt[..8]).unwrap()),
            Status::ClientOnly
        );
    }

    #[test]
    fn malformed_lengths_are_refused() {
        for n in 0..64 {
            let ok = n == 8 || (16..=40).contains(&n);
            assert_eq!(Received::parse(&vec![7; n]).is_some(), ok, "{n} bytes");
        }
    }

    #[test]
    fn the_timestamp_wraps_as_a_serial_number() {
        let secret = Secret::new([9; 16]);
        let then = Context {
            secret: &secret,
            client: "192.0.2.1".parse().unwrap(),
            now_unix_s: u32::MAX - 100,
        };
        let opt = then.reply(&Received::parse(&[1; 8]).unwrap());
        let later = Context {
            now_unix_s: 1000,
            ..then
        };
        // 1101 seconds later, across the wrap.
        assert_eq!(later.verify(&Received::parse(&opt).unwrap()), Status::Valid);
    }

    #[test]
    fn secrets_parse_from_hex_only() {
        assert!(Secret::from_hex("e5e973e5a6b2a43f48e7dc849e37bfcf").is_ok());
        for bad in [
            "",
            "e5e973",
            "zz e973e5a6b2a43f48e7dc849e37bfcf",
            "é5e973e5a6b2a43f48e7dc849e37bfc",
        ] {
            assert_eq!(Secret::from_hex(bad), Err(SecretError::NotHex), "{bad}");
        }
        assert_ne!(Secret::generate().unwrap(), Secret::generate().unwrap());
        assert_eq!(format!("{:?}", Secret::new([1; 16])), "Secret(..)");
    }
}
