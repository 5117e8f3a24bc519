//! The edge's configuration file (TOML). Every knob has a default, so an
//! empty file is a valid configuration; unknown keys are errors (a typo
//! should not silently keep a default). `mewa edge config` prints
//! [`EXAMPLE`], which documents every key.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::net::Net;

/// A commented configuration with every key at its default.
pub const EXAMPLE: &str = r#"# mewa edge configuration. Every key is optional; shown are the defaults.

[dns]
# UDP and TCP address of the DNS server.
listen = "0.0.0.0:53"
# Largest UDP answer we send (the client's advertised size caps it further).
# 1232 avoids IP fragmentation on common paths (DNS Flag Day 2020).
max_udp_payload = 1232
# Largest UDP answer when a page's hint with URLs does not fit one: the
# answer then carries the compact hint (sizes by URL hash) and the client
# fetches the URL list over TCP while it connects to the origin.
compact_payload = 1000
# TTL of the address answers, seconds.
answer_ttl_s = 30
# Resolver that names outside the zone are forwarded to; none = REFUSED.
# upstream = "192.0.2.53:53"
# Clients allowed to use the upstream (never an open resolver by default).
forward_from = ["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7"]
# UDP sockets (SO_REUSEPORT), one task each; 0 = number of CPUs.
udp_sockets = 0
# DNS over TCP: most connections at once (more are closed at once), the
# longest a client may take to send a query or read an answer, seconds,
# and the longest a connection lives, seconds.
tcp_max_connections = 512
tcp_timeout_s = 10
tcp_max_lifetime_s = 120
# Most queries forwarded to the upstream at once (more get no answer).
max_forwarding = 256
# Response-rate limiting of UDP answers per source /24 (IPv6 /56): a hint
# answer is 20 times its query, so forged sources must not make the edge an
# amplifier. Over the rate every rrl_slip-th answer goes out empty with TC=1
# (real clients retry over TCP), the rest are dropped; 0 turns it off.
rrl_responses_per_s = 200
rrl_slip = 2
# DNS cookies (RFC 7873, server cookies as RFC 9018): a query echoing a
# server cookie we gave its address less than an hour ago has proved that
# address, and its UDP answer is never rate-limited. Malformed COOKIE
# options get FORMERR. false = COOKIE options are ignored.
cookies = true
# The cookie secret, 32 hex digits (openssl rand -hex 16). Without one a
# random secret is drawn at start (cookies then die with the process); set
# the same one on every edge behind one address.
# cookie_secret = "..."

# Hosts answered authoritatively: name = [addresses]. In the lab: the corpus
# hosts pointing at the origin.
[zone]
# "www.example.com" = ["10.0.0.2"]

[hint]
# Seed 001's policy threshold alpha (used by the client's IW algorithm):
# 1/3, the value seed 001 evaluates. It travels in thousandths (333).
alpha = 0.3333333333333333
# How long a client may use a hint, seconds.
ttl_s = 300
# How often hints are rebuilt from the store (new pages, new RTTs), seconds.
rebuild_every_s = 5

[store]
# SQLite file (WAL mode: a -wal and a -shm file appear beside it).
path = "mewa-edge.sqlite"
# How often in-memory query counts are written to the store, seconds.
flush_every_s = 10
# Most distinct pages counted between two flushes (a flood of made-up URLs
# is answered but not counted past it). Counts older than tracer.window_s
# are deleted at each flush.
max_pages_per_flush = 10000

[admin]
# HTTP admin API, status page and Prometheus metrics. Keep it private.
listen = "127.0.0.1:8053"
# A bearer token (16 characters or more) for the pages that show what users
# browse; required to listen on anything but loopback.
# token = "..."

[monitor]
# Edge->origin RTT measurement (TCP connect time) every this many seconds.
every_s = 30
# EWMA weight of a new sample (RFC 6298 uses 1/8 for SRTT).
ewma_weight = 0.125
# TCP port probed on every origin.
port = 443
# A probe that takes longer than this fails, milliseconds.
timeout_ms = 2000

[tracer]
# Reload popular pages with headless Chromium to refresh their metadata.
enabled = false
# Run every this many seconds.
every_s = 600
# Trace the top_k most queried pages of the last window_s seconds.
top_k = 20
window_s = 3600
# Chromium binary (`apt-get install chromium`). When it is missing the edge
# says so once at start and runs without the tracer.
chromium = "/usr/bin/chromium"
# One page's trace (launch, load, settle) at most, seconds (1-3600).
timeout_s = 30
# When the edge runs as root, Chromium runs as this unprivileged user (it
# refuses to sandbox itself as root, and a page that breaks out of its
# renderer must not get root's rights); otherwise as the edge's user.
user = "nobody"
# Chromium's sandbox off. Only where it cannot start (no unprivileged user
# namespaces: the trace fails saying so); traced pages then run unconfined
# and the edge logs a warning at start.
no_sandbox = false
"#;

/// Why a configuration file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// Not valid TOML, an unknown key or a value of the wrong type.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A value out of its range.
    #[error("config file {path}: {key}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key, e.g. `dns.forward_from`.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EdgeConfig {
    /// The DNS server.
    pub dns: DnsConfig,
    /// Host → addresses answered authoritatively.
    pub zone: BTreeMap<String, Vec<IpAddr>>,
    /// What hints say and how often they are rebuilt.
    pub hint: HintConfig,
    /// The SQLite store.
    pub store: StoreConfig,
    /// The admin API.
    pub admin: AdminConfig,
    /// The latency monitor.
    pub monitor: MonitorConfig,
    /// The page tracer.
    pub tracer: TracerConfig,
}

/// `[dns]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DnsConfig {
    /// UDP and TCP address.
    pub listen: SocketAddr,
    /// Largest UDP answer.
    pub max_udp_payload: u16,
    /// Largest UDP answer carrying a compact hint (URL list over TCP).
    pub compact_payload: u16,
    /// TTL of address answers, seconds.
    pub answer_ttl_s: u32,
    /// Upstream resolver for other names.
    pub upstream: Option<SocketAddr>,
    /// Networks allowed to use the upstream, as `addr/prefix`.
    pub forward_from: Vec<String>,
    /// UDP sockets; 0 = CPUs.
    pub udp_sockets: usize,
    /// Most DNS-over-TCP connections at once; more are closed on accept.
    pub tcp_max_connections: usize,
    /// Longest wait for a TCP client's next query or for it to read an
    /// answer, seconds (a client that stops reading holds no task).
    pub tcp_timeout_s: u64,
    /// Longest life of a TCP connection, seconds.
    pub tcp_max_lifetime_s: u64,
    /// Most queries forwarded upstream at once.
    pub max_forwarding: usize,
    /// UDP answers per second per source prefix; 0 = no limit.
    pub rrl_responses_per_s: u32,
    /// Every this many answers over the rate, one goes out truncated.
    pub rrl_slip: u32,
    /// DNS cookies on (answers to a valid cookie skip rate limiting).
    pub cookies: bool,
    /// The cookie secret, 32 hex digits; `None` = drawn at start.
    pub cookie_secret: Option<String>,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 53)),
            max_udp_payload: 1232,
            compact_payload: crate::dns::COMPACT_UDP_PAYLOAD,
            answer_ttl_s: 30,
            upstream: None,
            forward_from: [
                "127.0.0.0/8",
                "10.0.0.0/8",
                "172.16.0.0/12",
                "192.168.0.0/16",
                "::1/128",
                "fc00::/7",
            ]
            .map(String::from)
            .to_vec(),
            udp_sockets: 0,
            tcp_max_connections: 512,
            tcp_timeout_s: 10,
            tcp_max_lifetime_s: 120,
            max_forwarding: 256,
            rrl_responses_per_s: 200,
            rrl_slip: 2,
            cookies: true,
            cookie_secret: None,
        }
    }
}

/// `[hint]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HintConfig {
    /// Seed 001's α: the least QoE gain per unit of extra initial
    /// bandwidth for which the client still raises its window (default 1/3,
    /// seed 001's).
    pub alpha: f64,
    /// Hint TTL, seconds.
    pub ttl_s: u32,
    /// Rebuild period, seconds.
    pub rebuild_every_s: u64,
}

impl Default for HintConfig {
    fn default() -> Self {
        HintConfig {
            alpha: 1.0 / 3.0,
            ttl_s: 300,
            rebuild_every_s: 5,
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// SQLite file.
    pub path: PathBuf,
    /// Query-count flush period, seconds.
    pub flush_every_s: u64,
    /// Most distinct pages whose hint requests are counted between two
    /// flushes (one row each); requests for further pages are answered
    /// but not counted (`mewa_edge_query_counts_dropped_total`).
    pub max_pages_per_flush: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: PathBuf::from("mewa-edge.sqlite"),
            flush_every_s: 10,
            max_pages_per_flush: crate::server::DEFAULT_MAX_COUNTED,
        }
    }
}

/// `[admin]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// HTTP address. Anything but loopback needs a `token`.
    pub listen: SocketAddr,
    /// A bearer token (at least [`MIN_ADMIN_TOKEN`] characters): when set,
    /// the paths that reveal what users browse (`/`, `/api/pages`,
    /// `/api/hint`, `/api/queries`) answer only requests with
    /// `Authorization: Bearer <token>`. Required to listen on anything but
    /// a loopback address.
    pub token: Option<String>,
}

/// Shortest admin token accepted.
pub const MIN_ADMIN_TOKEN: usize = 16;

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8053)),
            token: None,
        }
    }
}

/// `[monitor]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorConfig {
    /// Probe period, seconds.
    pub every_s: u64,
    /// EWMA weight of a new sample.
    pub ewma_weight: f64,
    /// TCP port probed.
    pub port: u16,
    /// Probe timeout, milliseconds.
    pub timeout_ms: u64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            every_s: 30,
            ewma_weight: 0.125,
            port: 443,
            timeout_ms: 2000,
        }
    }
}

/// `[tracer]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TracerConfig {
    /// Whether the tracer runs.
    pub enabled: bool,
    /// Period, seconds.
    pub every_s: u64,
    /// Pages traced per run.
    pub top_k: usize,
    /// Popularity window, seconds.
    pub window_s: u64,
    /// Chromium binary.
    pub chromium: PathBuf,
    /// One page's trace at most, seconds.
    pub timeout_s: u64,
    /// The account Chromium runs as when the edge is root.
    pub user: String,
    /// Chromium's sandbox off (where it cannot start).
    pub no_sandbox: bool,
}

impl Default for TracerConfig {
    fn default() -> Self {
        TracerConfig {
            enabled: false,
            every_s: 600,
            top_k: 20,
            window_s: 3600,
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            timeout_s: 30,
            user: crate::tracer::DEFAULT_USER.to_string(),
            no_sandbox: false,
        }
    }
}

impl EdgeConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<EdgeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        EdgeConfig::parse(&text, path)
    }

    /// Parses and checks configuration text (`path` only names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<EdgeConfig, ConfigError> {
        let c: EdgeConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        c.check(path)?;
        Ok(c)
    }

    /// The DNS cookie secret: `None` with `dns.cookies = false`, the
    /// configured one, or a fresh random one.
    pub fn cookie_secret(
        &self,
    ) -> Result<Option<crate::cookie::Secret>, crate::cookie::SecretError> {
        if !self.dns.cookies {
            return Ok(None);
        }
        match &self.dns.cookie_secret {
            Some(hex) => crate::cookie::Secret::from_hex(hex).map(Some),
            None => crate::cookie::Secret::generate().map(Some),
        }
    }

    /// The `forward_from` networks, parsed.
    pub fn forward_nets(&self) -> Vec<Net> {
        self.dns
            .forward_from
            .iter()
            .filter_map(|s| Net::parse(s).ok())
            .collect()
    }

    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key: &str, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            key: key.to_string(),
            message,
        };
        if self.dns.max_udp_payload < 512 {
            return Err(bad(
                "dns.max_udp_payload",
                format!("{} is below 512, the DNS minimum", self.dns.max_udp_payload),
            ));
        }
        if self.dns.compact_payload < 512 || self.dns.compact_payload > self.dns.max_udp_payload {
            return Err(bad(
                "dns.compact_payload",
                format!(
                    "{} must lie between 512 and dns.max_udp_payload ({})",
                    self.dns.compact_payload, self.dns.max_udp_payload
                ),
            ));
        }
        if let Some(secret) = &self.dns.cookie_secret {
            crate::cookie::Secret::from_hex(secret)
                .map_err(|e| bad("dns.cookie_secret", e.to_string()))?;
        }
        for n in &self.dns.forward_from {
            Net::parse(n).map_err(|m| bad("dns.forward_from", m.to_string()))?;
        }
        for (host, addrs) in &self.zone {
            let h = host.trim_end_matches('.');
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                });
            if !ok {
                return Err(bad("zone", format!("`{host}` is not a valid host name")));
            }
            if addrs.is_empty() {
                return Err(bad(&format!("zone.{host}"), "no address given".into()));
            }
        }
        if !(self.hint.alpha.is_finite() && self.hint.alpha >= 0.0) {
            return Err(bad("hint.alpha", "must be a finite number >= 0".into()));
        }
        if self.hint.ttl_s == 0 {
            return Err(bad("hint.ttl_s", "must be at least 1".into()));
        }
        if self.hint.rebuild_every_s == 0 || self.hint.rebuild_every_s >= u64::from(self.hint.ttl_s)
        {
            return Err(bad(
                "hint.rebuild_every_s",
                format!(
                    "must be at least 1 and below hint.ttl_s ({}), or clients would get stale hints",
                    self.hint.ttl_s
                ),
            ));
        }
        if let Some(t) = &self.admin.token {
            if t.chars().count() < MIN_ADMIN_TOKEN || t.chars().any(|c| c.is_whitespace()) {
                return Err(bad(
                    "admin.token",
                    format!("must be at least {MIN_ADMIN_TOKEN} characters, without spaces"),
                ));
            }
        }
        for (key, v) in [
            (
                "dns.tcp_max_connections",
                self.dns.tcp_max_connections as u64,
            ),
            ("dns.tcp_timeout_s", self.dns.tcp_timeout_s),
            ("dns.tcp_max_lifetime_s", self.dns.tcp_max_lifetime_s),
            ("dns.max_forwarding", self.dns.max_forwarding as u64),
        ] {
            if v == 0 {
                return Err(bad(key, "must be at least 1".into()));
            }
        }
        if self.tracer.timeout_s > 3600 {
            return Err(bad(
                "tracer.timeout_s",
                "at most 3600 (one page's trace; a page that needs longer is not loading)".into(),
            ));
        }
        if !(self.monitor.ewma_weight > 0.0 && self.monitor.ewma_weight <= 1.0) {
            return Err(bad("monitor.ewma_weight", "must be in (0, 1]".into()));
        }
        for (key, v) in [
            ("store.flush_every_s", self.store.flush_every_s),
            ("monitor.every_s", self.monitor.every_s),
            ("monitor.timeout_ms", self.monitor.timeout_ms),
            ("tracer.every_s", self.tracer.every_s),
            ("tracer.window_s", self.tracer.window_s),
            ("tracer.timeout_s", self.tracer.timeout_s),
        ] {
            if v == 0 {
                return Err(bad(key, "must be at least 1".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_parses_to_the_defaults() {
        let c = EdgeConfig::parse(EXAMPLE, Path::new("example.toml")).unwrap();
        assert_eq!(c, EdgeConfig::default());
        assert_eq!(EdgeConfig::parse("", Path::new("e")).unwrap(), c);
    }

    #[test]
    fn zone_and_overrides() {
        let c = EdgeConfig::parse(
            "[dns]\nlisten = \"127.0.0.1:5353\"\nupstream = \"10.0.0.1:53\"\n[zone]\n\"www.a.example\" = [\"10.0.0.2\", \"fd00::2\"]\n",
            Path::new("e"),
        )
        .unwrap();
        assert_eq!(c.dns.listen.port(), 5353);
        assert_eq!(c.zone["www.a.example"].len(), 2);
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("[dns]\nlistne = \"1.2.3.4:53\"\n", "listne"),
            ("[dns]\nmax_udp_payload = 100\n", "dns.max_udp_payload"),
            (
                "[dns]\nforward_from = [\"10.0.0.0/33\"]\n",
                "dns.forward_from",
            ),
            ("[zone]\n\"bad host!\" = [\"10.0.0.2\"]\n", "zone"),
            ("[zone]\n\"a.example\" = []\n", "zone.a.example"),
            ("[hint]\nrebuild_every_s = 400\n", "hint.rebuild_every_s"),
            ("[monitor]\newma_weight = 0\n", "monitor.ewma_weight"),
            ("[tracer]\ntimeout_s = 0\n", "tracer.timeout_s"),
            ("[tracer]\ntimeout_s = 86400\n", "tracer.timeout_s"),
            ("[dns]\ncookie_secret = \"0123\"\n", "dns.cookie_secret"),
        ] {
            let e = EdgeConfig::parse(text, Path::new("edge.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains("edge.toml"), "{text}: {e}");
        }
    }

    #[test]
    fn the_cookie_secret_is_configured_drawn_or_none() {
        let hex = "e5e973e5a6b2a43f48e7dc849e37bfcf";
        let c = EdgeConfig::parse(
            &format!("[dns]\ncookie_secret = \"{hex}\"\n"),
            Path::new("e"),
        )
        .unwrap();
        assert_eq!(
            c.cookie_secret().unwrap(),
            Some(crate::cookie::Secret::from_hex(hex).unwrap())
        );
        let drawn = EdgeConfig::default().cookie_secret().unwrap();
        assert!(drawn.is_some());
        assert_ne!(drawn, EdgeConfig::default().cookie_secret().unwrap());
        let off = EdgeConfig::parse("[dns]\ncookies = false\n", Path::new("e")).unwrap();
        assert_eq!(off.cookie_secret().unwrap(), None);
    }
}
