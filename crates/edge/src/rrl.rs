//! Response-rate limiting for answers over UDP, as NSD, Knot and BIND do
//! (the "RRL" of Vixie and Schryver, 2012): a ~55-byte query with the hint
//! request returns up to 1232 bytes, so a forged source address would
//! make the edge a 20-fold amplifier against it.
//!
//! Answers are counted per source prefix (/24 for IPv4, /56 for IPv6: an
//! attacker forging addresses in one network is one victim) in a token
//! bucket of `responses_per_s` with one second of burst. Over the rate,
//! every `slip`-th answer goes out as an empty truncated one (TC=1): a
//! real client retries over TCP, which a forged source cannot; the others
//! are dropped. A slip of 1 truncates all of them, 0 drops all.
//!
//! Pure: time is passed in, so the tests run in virtual time.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// What to do with one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the rate: send it.
    Send,
    /// Over the rate, slipped: send it empty with TC=1.
    Truncate,
    /// Over the rate: send nothing.
    Drop,
}

/// The limiter's settings (`[dns] rrl_responses_per_s`, `rrl_slip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrlConfig {
    /// Answers per second per source prefix; 0 turns the limiter off.
    pub responses_per_s: u32,
    /// Every this many answers over the rate, one goes out truncated.
    pub slip: u32,
    /// Most prefixes tracked; past it, prefixes idle longest are forgotten
    /// (a forgotten prefix starts with a full bucket).
    pub max_prefixes: usize,
}

impl Default for RrlConfig {
    fn default() -> Self {
        RrlConfig {
            responses_per_s: 200,
            slip: 2,
            max_prefixes: 100_000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Duration,
    over: u32,
}

/// The limiter's state.
#[derive(Debug)]
pub struct Rrl {
    cfg: RrlConfig,
    buckets: HashMap<IpAddr, Bucket>,
}

/// The prefix an address is counted under.
fn prefix(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            IpAddr::from([o[0], o[1], o[2], 0])
        }
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[7..].fill(0);
            IpAddr::from(o)
        }
    }
}

impl Rrl {
    /// A limiter with `cfg`.
    pub fn new(cfg: RrlConfig) -> Rrl {
        Rrl {
            cfg,
            buckets: HashMap::new(),
        }
    }

    /// The verdict on one answer to `source` at `now` (any monotonic
    /// clock).
    pub fn check(&mut self, source: IpAddr, now: Duration) -> Verdict {
        let rate = f64::from(self.cfg.responses_per_s);
        if self.cfg.responses_per_s == 0 {
            return Verdict::Send;
        }
        let key = prefix(source);
        if !self.buckets.contains_key(&key) && self.buckets.len() >= self.cfg.max_prefixes {
            self.forget_idle(now);
        }
        let b = self.buckets.entry(key).or_insert(Bucket {
            tokens: rate,
            last: now,
            over: 0,
        });
        let elapsed = now.saturating_sub(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(rate);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            b.over = 0;
            return Verdict::Send;
        }
        b.over = b.over.wrapping_add(1);
        match self.cfg.slip {
            0 => Verdict::Drop,
            s if b.over % s == 0 => Verdict::Truncate,
            _ => Verdict::Drop,
        }
    }

    /// Forgets the half of the prefixes idle longest (those with full
    /// buckets first: forgetting them changes nothing).
    fn forget_idle(&mut self, now: Duration) {
        let rate = f64::from(self.cfg.responses_per_s);
        let full = |b: &Bucket| b.tokens + now.saturating_sub(b.last).as_secs_f64() * rate >= rate;
        self.buckets.retain(|_, b| !full(b));
        if self.buckets.len() >= self.cfg.max_prefixes {
            let mut lasts: Vec<Duration> = self.buckets.values().map(|b| b.last).collect();
            lasts.sort_unstable();
            let cut = lasts[lasts.len() / 2];
            self.buckets.retain(|_, b| b.last > cut);
        }
    }

    /// Prefixes tracked now.
    pub fn tracked(&self) -> usize {
        self.buckets.len()
    }
}

/// The empty truncated form of the answer `reply` (its header with TC=1,
/// its question, an OPT without options): what a slipped answer sends.
pub fn slipped(reply: &[u8]) -> Option<Vec<u8>> {
    let m = hickory_proto::op::Message::from_vec(reply).ok()?;
    let mut t = m.truncate();
    if let Some(e) = t.edns.as_mut() {
        let mut bare = hickory_proto::op::Edns::new();
        bare.set_max_payload(e.max_payload());
        *e = bare;
    }
    t.to_vec().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_burst_over_the_rate_slips_every_second_answer() {
        let mut r = Rrl::new(RrlConfig {
            responses_per_s: 10,
            slip: 2,
            max_prefixes: 100,
        });
        let v: Vec<Verdict> = (0..16)
            .map(|i| r.check("192.0.2.7".parse().unwrap(), ms(i)))
            .collect();
        assert!(v[..10].iter().all(|&x| x == Verdict::Send));
        assert_eq!(
            &v[10..],
            [
                Verdict::Drop,
                Verdict::Truncate,
                Verdict::Drop,
                Verdict::Truncate,
                Verdict::Drop,
                Verdict::Truncate
            ]
        );
        // The same /24 shares the bucket; another does not.
        assert_ne!(
            r.check("192.0.2.200".parse().unwrap(), ms(20)),
            Verdict::Send
        );
        assert_eq!(r.check("192.0.3.1".parse().unwrap(), ms(20)), Verdict::Send);
        // A second later the bucket is full again.
        assert_eq!(
            r.check("192.0.2.7".parse().unwrap(), ms(1100)),
            Verdict::Send
        );
    }

    #[test]
    fn a_steady_client_within_the_rate_is_never_limited() {
        let mut r = Rrl::new(RrlConfig {
            responses_per_s: 10,
            slip: 2,
            max_prefixes: 100,
        });
        for i in 0..1000 {
            assert_eq!(
                r.check("2001:db8::1".parse().unwrap(), ms(i * 101)),
                Verdict::Send
            );
        }
        // IPv6 sources in one /56 share a bucket.
        assert_eq!(
            prefix("2001:db8:0:ff::1".parse().unwrap()),
            prefix("2001:db8::9".parse().unwrap())
        );
        assert_ne!(
            prefix("2001:db8:0:100::1".parse().unwrap()),
            prefix("2001:db8::9".parse().unwrap())
        );
    }

    #[test]
    fn off_and_slip_zero() {
        let mut off = Rrl::new(RrlConfig {
            responses_per_s: 0,
            ..RrlConfig::default()
        });
        let mut drop_all = Rrl::new(RrlConfig {
            responses_per_s: 1,
            slip: 0,
            max_prefixes: 10,
        });
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        for i in 0..100 {
            assert_eq!(off.check(ip, ms(i)), Verdict::Send);
        }
        assert_eq!(drop_all.check(ip, ms(0)), Verdict::Send);
        assert!((1..50).all(|i| drop_all.check(ip, ms(i)) == Verdict::Drop));
    }

    #[test]
    fn the_table_stays_bounded_under_spoofed_sources() {
        let mut r = Rrl::new(RrlConfig {
            responses_per_s: 5,
            slip: 2,
            max_prefixes: 1000,
        });
        for i in 0..100_000u32 {
            let ip = IpAddr::from((i << 8).to_be_bytes());
            r.check(ip, ms(u64::from(i / 100)));
            assert!(r.tracked() <= 1000);
        }
    }
}
