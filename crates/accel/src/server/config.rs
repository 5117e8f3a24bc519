//! The accelerator's configuration file (TOML).
//!
//! ```toml
//! [listen]
//! https = "0.0.0.0:443"        # HTTP/2 and HTTP/1.1 over TLS (ALPN)
//! http = "0.0.0.0:80"          # HTTP/1.1, and HTTP/2 by prior knowledge (h2c)
//! admin = "127.0.0.1:9180"     # metrics, status page, purge: keep it private
//!
//! [tls]
//! cert = "/etc/mewa/accel-chain.pem"   # leaf first, then intermediates
//! key = "/etc/mewa/accel-key.pem"
//!
//! [cache]
//! memory_mib = 256
//! max_object_mib = 16
//! # disk = "/var/cache/mewa-accel"
//! # disk_mib = 4096
//! lock_timeout_ms = 5000
//!
//! [upstream]
//! # ca_file = "/etc/ssl/certs/ca-certificates.crt"
//! # resolve = { "www.a.example" = "192.0.2.10" }
//! # allow_private = false
//!
//! [[site]]
//! hosts = ["www.a.example"]
//! fold = ["img.b.example"]
//! ```
//!
//! Unknown keys are errors, so a misspelt setting never silently falls back
//! to its default.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cache::CacheLimits;
use crate::site::{AccelConfig, SiteConfig, Sites};

/// A configuration file with every key, its default and what it does
/// (`mewa accel config` prints it).
pub const EXAMPLE: &str = r#"# mewa accel: seed 004's accelerator (docs/ACCEL.md).
# Point the site's hosts at this machine in DNS; the accelerator fetches
# from the origins named in [upstream.resolve] (or found in DNS).

[listen]
https = "0.0.0.0:443"        # HTTP/2 and HTTP/1.1 over TLS (ALPN); needs [tls]
# http = "0.0.0.0:80"        # HTTP/1.1, and HTTP/2 by prior knowledge (h2c)
admin = "127.0.0.1:9180"     # /metrics, status page, POST /purge: keep private

[tls]
cert = "/etc/mewa/accel-chain.pem"   # leaf first; must cover every site host
key = "/etc/mewa/accel-key.pem"

[cache]
memory_mib = 256             # stored responses in memory (LRU)
max_object_mib = 16          # larger responses pass through unstored
# disk = "/var/cache/mewa-accel"   # a disk copy that survives restarts
# disk_mib = 4096
lock_timeout_ms = 5000       # misses for a URL being fetched wait this long
                             # for that fetch (one origin request); 0: off

[upstream]
ca_file = "/etc/ssl/certs/ca-certificates.crt"   # roots for https origins
allow_private = false        # refuse DNS answers that are not public addresses
connect_timeout_ms = 5000
response_timeout_ms = 30000
idle_per_host = 16           # idle HTTP/1.1 connections kept per origin

[upstream.resolve]           # pins, trusted as written ("ip" or "ip:port")
"www.a.example" = "192.0.2.10"

[[site]]
hosts = ["www.a.example"]                      # documents served and rewritten
fold = ["img.b.example", "static.c.example"]   # the allowlist
# prefix = "/_mewa"          # default "": seed 004's /img.b.example/x.png
"#;

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Where to listen.
    #[serde(default)]
    pub listen: Listen,
    /// The certificate the HTTPS listener presents.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Cache bounds.
    #[serde(default)]
    pub cache: CacheSection,
    /// How origins are reached.
    #[serde(default)]
    pub upstream: Upstream,
    /// The sites (see [`SiteConfig`]).
    #[serde(default)]
    pub site: Vec<SiteConfig>,
}

/// `[listen]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    /// HTTP/2 and HTTP/1.1 over TLS; needs `[tls]`.
    #[serde(default)]
    pub https: Option<SocketAddr>,
    /// HTTP/1.1 and h2c (prior knowledge) in clear text.
    #[serde(default)]
    pub http: Option<SocketAddr>,
    /// Metrics (`/metrics`), status page (`/`) and purge (`POST /purge`).
    /// Nothing on it is authenticated: bind it to loopback or a management
    /// network.
    #[serde(default = "default_admin")]
    pub admin: Option<SocketAddr>,
}

fn default_admin() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 9180)))
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            https: None,
            http: None,
            admin: default_admin(),
        }
    }
}

/// `[tls]`: PEM files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// Certificate chain, leaf first; it must cover every site's hosts.
    pub cert: PathBuf,
    /// The leaf's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// `[cache]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// Memory for stored responses, MiB.
    #[serde(default = "default_memory_mib")]
    pub memory_mib: u64,
    /// Largest response stored, MiB (larger ones pass through).
    #[serde(default = "default_max_object_mib")]
    pub max_object_mib: u64,
    /// Directory of the disk copy (none by default).
    #[serde(default)]
    pub disk: Option<PathBuf>,
    /// Disk space for the copy, MiB.
    #[serde(default = "default_disk_mib")]
    pub disk_mib: u64,
    /// How long a miss waits for another request's fetch of the same URL
    /// before fetching on its own, ms; 0 fetches at once (no collapsing).
    #[serde(default = "default_lock_timeout_ms")]
    pub lock_timeout_ms: u64,
}

fn default_memory_mib() -> u64 {
    256
}
fn default_max_object_mib() -> u64 {
    16
}
fn default_disk_mib() -> u64 {
    4096
}
/// nginx's `proxy_cache_lock_timeout` default.
fn default_lock_timeout_ms() -> u64 {
    5000
}

impl Default for CacheSection {
    fn default() -> Self {
        CacheSection {
            memory_mib: default_memory_mib(),
            max_object_mib: default_max_object_mib(),
            disk: None,
            disk_mib: default_disk_mib(),
            lock_timeout_ms: default_lock_timeout_ms(),
        }
    }
}

impl CacheSection {
    /// The limits in bytes.
    pub fn limits(&self) -> CacheLimits {
        CacheLimits {
            memory_bytes: self.memory_mib.saturating_mul(1 << 20),
            max_object_bytes: self.max_object_mib.saturating_mul(1 << 20),
            disk: self.disk.clone(),
            disk_bytes: self.disk_mib.saturating_mul(1 << 20),
        }
    }

    /// How long a miss waits for a fetch of its URL in flight; `None`:
    /// misses never wait.
    pub fn lock_timeout(&self) -> Option<Duration> {
        (self.lock_timeout_ms > 0).then(|| Duration::from_millis(self.lock_timeout_ms))
    }
}

/// `[upstream]`: how the accelerator reaches the origins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Trusted roots for `https` origins (PEM bundle). Default: Debian's
    /// bundle.
    #[serde(default = "default_ca_file")]
    pub ca_file: PathBuf,
    /// Host → address pins: an IP address (`"192.0.2.10"`, the scheme's
    /// port) or an address and port (`"192.0.2.10:8080"`, `"[2001:db8::1]:8443"`).
    /// A pinned address is trusted as the operator wrote it (private
    /// addresses included); every other host is looked up in DNS. The
    /// accelerator's own clients resolve the site's hosts to the
    /// accelerator, so the site's hosts are usually pinned here.
    #[serde(default)]
    pub resolve: BTreeMap<String, String>,
    /// Whether addresses from DNS may be loopback, private, link-local or
    /// otherwise not globally reachable. Off by default: an allowed name
    /// that resolves inside the network (a rebinding attack, a wrong zone)
    /// is refused.
    #[serde(default)]
    pub allow_private: bool,
    /// TCP connect and TLS handshake timeout, ms.
    #[serde(default = "default_connect_ms")]
    pub connect_timeout_ms: u64,
    /// How long a response head may take, ms.
    #[serde(default = "default_response_ms")]
    pub response_timeout_ms: u64,
    /// Idle HTTP/1.1 connections kept per origin.
    #[serde(default = "default_idle_per_host")]
    pub idle_per_host: usize,
}

fn default_ca_file() -> PathBuf {
    PathBuf::from("/etc/ssl/certs/ca-certificates.crt")
}
fn default_connect_ms() -> u64 {
    5_000
}
fn default_response_ms() -> u64 {
    30_000
}
fn default_idle_per_host() -> usize {
    16
}

impl Upstream {
    /// Where `host` is pinned, on `port` unless the pin names one.
    pub fn pin(&self, host: &str, port: u16) -> Option<SocketAddr> {
        parse_pin(self.resolve.get(host)?, port)
    }
}

/// `"ip"` or `"ip:port"` / `"[ip6]:port"`.
fn parse_pin(s: &str, port: u16) -> Option<SocketAddr> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, port)))
}

impl Default for Upstream {
    fn default() -> Self {
        Upstream {
            ca_file: default_ca_file(),
            resolve: BTreeMap::new(),
            allow_private: false,
            connect_timeout_ms: default_connect_ms(),
            response_timeout_ms: default_response_ms(),
            idle_per_host: default_idle_per_host(),
        }
    }
}

/// Why a configuration cannot be used. Every message names the setting.
#[derive(Debug, thiserror::Error)]
pub enum ServeConfigError {
    /// The file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// Not TOML, or not this schema.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (line and column included).
        message: String,
    },
    /// The sites do not validate.
    #[error("[[site]]: {0}")]
    Site(#[from] crate::site::ConfigError),
    /// A setting is missing or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

impl ServeConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<ServeConfig, ServeConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ServeConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        let c: ServeConfig = toml::from_str(&text).map_err(|e| ServeConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        c.check()?;
        Ok(c)
    }

    /// The validated sites.
    pub fn sites(&self) -> Result<Sites, ServeConfigError> {
        Ok(Sites::new(&AccelConfig {
            site: self.site.clone(),
        })?)
    }

    /// Checks what [`ServeConfig::load`] checks (for configurations built in
    /// code).
    pub fn check(&self) -> Result<(), ServeConfigError> {
        let sites = self.sites()?;
        if sites.iter().next().is_none() {
            return Err(ServeConfigError::Invalid(
                "no [[site]]: the accelerator serves only the sites it is given".into(),
            ));
        }
        if self.listen.https.is_none() && self.listen.http.is_none() {
            return Err(ServeConfigError::Invalid(
                "[listen] needs `https` or `http` (or both)".into(),
            ));
        }
        if self.listen.https.is_some() && self.tls.is_none() {
            return Err(ServeConfigError::Invalid(
                "[listen] https needs a [tls] section with `cert` and `key`".into(),
            ));
        }
        if self.cache.memory_mib == 0 {
            return Err(ServeConfigError::Invalid(
                "[cache] memory_mib must be at least 1".into(),
            ));
        }
        for (host, to) in &self.upstream.resolve {
            let normal = crate::site::normalize_host(host).map_err(|reason| {
                ServeConfigError::Invalid(format!("[upstream.resolve] {host:?}: {reason}"))
            })?;
            if normal != *host {
                return Err(ServeConfigError::Invalid(format!(
                    "[upstream.resolve] write {host:?} as {normal:?}"
                )));
            }
            if parse_pin(to, 0).is_none() {
                return Err(ServeConfigError::Invalid(format!(
                    "[upstream.resolve] {host:?} = {to:?}: not an IP address or address:port"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServeConfig, String> {
        let c: ServeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.check().map_err(|e| e.to_string())?;
        Ok(c)
    }

    const SITE: &str = "[[site]]\nhosts = [\"a.example\"]\nfold = [\"b.example\"]\n";

    #[test]
    fn the_example_file_is_valid() {
        let c = parse(EXAMPLE).expect("EXAMPLE parses");
        assert_eq!(c.site[0].fold.len(), 2);
        assert!(c.tls.is_some());
    }

    #[test]
    fn a_minimal_file_takes_the_defaults() {
        let c = parse(&format!("[listen]\nhttp = \"127.0.0.1:8080\"\n{SITE}")).expect("valid");
        assert_eq!(c.listen.admin, default_admin());
        assert_eq!(c.cache.limits().memory_bytes, 256 << 20);
        assert!(!c.upstream.allow_private);
    }

    #[test]
    fn pins_take_an_address_with_or_without_a_port() {
        let mut u = Upstream::default();
        u.resolve.insert("a.example".into(), "10.0.0.1".into());
        u.resolve.insert("b.example".into(), "10.0.0.2:8080".into());
        u.resolve.insert("c.example".into(), "[::1]:8443".into());
        assert_eq!(
            u.pin("a.example", 443),
            Some(SocketAddr::from(([10, 0, 0, 1], 443)))
        );
        assert_eq!(
            u.pin("b.example", 80),
            Some(SocketAddr::from(([10, 0, 0, 2], 8080)))
        );
        assert_eq!(u.pin("c.example", 80).map(|a| a.port()), Some(8443));
        assert_eq!(u.pin("d.example", 80), None);
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            (format!("[listen]\nhttp = \"127.0.0.1:1\"\nmemory = 3\n{SITE}"), "memory"),
            ("[listen]\nhttp = \"127.0.0.1:1\"\n".to_owned(), "no [[site]]"),
            (SITE.to_owned(), "`https` or `http`"),
            (format!("[listen]\nhttps = \"127.0.0.1:1\"\n{SITE}"), "[tls]"),
            (
                format!("[listen]\nhttp = \"127.0.0.1:1\"\n[upstream.resolve]\n\"a b\" = \"10.0.0.1\"\n{SITE}"),
                "[upstream.resolve]",
            ),
            (
                format!("[listen]\nhttp = \"127.0.0.1:1\"\n[upstream.resolve]\n\"b.example\" = \"b\"\n{SITE}"),
                "not an IP address",
            ),
            (
                "[listen]\nhttp = \"127.0.0.1:1\"\n[[site]]\nhosts = [\"localhost\"]\n".to_owned(),
                "localhost",
            ),
        ];
        for (text, want) in cases {
            let err = parse(&text).expect_err(&text);
            assert!(err.contains(want), "{err:?} should name {want:?}");
        }
    }
}
