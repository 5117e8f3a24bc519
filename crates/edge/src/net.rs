//! A network `addr/prefix` ([`Net`]): which clients the edge forwards
//! queries for (the config's `dns.forward_from`, checked by the DNS
//! runtime on every forwarded query).
//!
//! A module of its own because the configuration that parses it and the
//! DNS runtime that matches addresses against it both use it, and the
//! configuration takes its defaults from the runtime: kept in either, the
//! two would depend on each other.

use std::net::IpAddr;

/// Why a network is not `addr/prefix`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// The part before `/` is not an IP address.
    #[error("`{0}` is not an address or addr/prefix")]
    Address(String),
    /// The prefix is not a number within the address family's width.
    #[error("`{given}`: prefix must be 0..={max}")]
    Prefix {
        /// What was given.
        given: String,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
}

/// A network `addr/prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// Parses `addr/prefix` (a bare address is a /32 or /128).
    pub fn parse(s: &str) -> Result<Net, NetError> {
        let (a, p) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| NetError::Address(s.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if p.is_empty() {
            max
        } else {
            p.trim()
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| NetError::Prefix {
                    given: s.to_string(),
                    max,
                })?
        };
        Ok(Net { addr, prefix })
    }

    /// Whether `ip` is in this network (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        let n = Net::parse("10.0.0.0/8").unwrap();
        assert!(n.contains("10.9.8.7".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(Net::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Net::parse("fc00::/7")
            .unwrap()
            .contains("fd12::1".parse().unwrap()));
        assert!(Net::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert!(Net::parse("nope").is_err());
    }
}
