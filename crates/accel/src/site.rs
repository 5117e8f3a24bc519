//! Sites: the document hosts the accelerator serves, the other domains it may
//! fold into them, and the path form folded references take.
//!
//! Seed 004 §III: "the SPDY accelerator adds the FQDN of the main HTML file as
//! a prefix to the URLs of the page resources if the FQDNs of the page
//! resources are different from that of the main HTML file" (Fig. 3:
//! `http://b.com/x.png` in a page of `http://a.com/` becomes
//! `http://a.com/b.com/x.png`). Which FQDNs may be folded is a trust decision
//! the paper leaves implicit; here it is an explicit per-site allowlist, and
//! nothing off the list is ever rewritten or fetched (docs/ACCEL.md).
//!
//! [`SiteConfig`] is what a configuration file says (serde, unknown keys are
//! errors); [`Site`] is the validated, normalised form every other module
//! takes, so a host that does not validate can never reach the mapping.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Longest path prefix accepted (bytes).
pub const MAX_PREFIX_LEN: usize = 64;

/// Longest host name (RFC 1035 §2.3.4: 255 octets on the wire, 253 as text).
pub const MAX_HOST_LEN: usize = 253;

/// Special-use names that resolve inside the machine or the local network
/// (RFC 6761 `localhost`, RFC 6762 `local`, RFC 8375 `home.arpa`, ICANN's
/// `internal`, the reverse-lookup `arpa` zones, and the customary
/// `localdomain`). A site may not fold them, and a request naming one is
/// refused with its own reason.
const LOCAL_SUFFIXES: &[&str] = &["localhost", "local", "internal", "arpa", "localdomain"];

/// One site as written in the configuration file (`[[site]]` in TOML).
///
/// ```toml
/// [[site]]
/// hosts = ["a.example", "www.a.example"]
/// fold = ["b.example", "cdn.c.example"]
/// # prefix = "/_mewa"   # default "": seed 004's /b.example/x.png
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Hosts whose documents the accelerator serves and rewrites (the "main
    /// HTML file"'s FQDN in seed 004). Folded references point at these.
    pub hosts: Vec<String>,
    /// Other hosts whose resources may be folded into the site's hosts:
    /// the allowlist. Everything else is left as it is and never fetched.
    #[serde(default)]
    pub fold: Vec<String>,
    /// Path prefix of folded references: `""` (the default) gives seed 004's
    /// `/b.example/x.png`; `"/_mewa"` gives `/_mewa/b.example/x.png`.
    ///
    /// The default form shares the site's own path space: a site path whose
    /// first segment equals a folded host (`/b.example/…` on a.example) can no
    /// longer be reached. A reserved prefix avoids that collision and lets
    /// the accelerator refuse every malformed folded path outright.
    #[serde(default)]
    pub prefix: String,
}

/// A configuration with several sites (`[[site]]` tables).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccelConfig {
    /// The sites, each with its own hosts and allowlist.
    #[serde(default)]
    pub site: Vec<SiteConfig>,
}

/// Why a configuration does not validate. Every message names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A site lists no document host.
    #[error("a site needs at least one document host in `hosts`")]
    NoHosts,
    /// A host name is not a valid DNS name.
    #[error("invalid host {host:?}: {reason}")]
    InvalidHost {
        /// The host as written.
        host: String,
        /// What is wrong with it.
        reason: HostError,
    },
    /// A host appears twice in one list (after lowercasing and removing a
    /// trailing dot).
    #[error("host {host:?} is listed twice")]
    Duplicate {
        /// The normalised host.
        host: String,
    },
    /// A host is both a document host and a folded host of one site.
    #[error("host {host:?} is both in `hosts` and in `fold`; a site's own host is never folded")]
    ServedAndFolded {
        /// The normalised host.
        host: String,
    },
    /// Two sites claim the same document host, so a request could not pick
    /// its site.
    #[error("document host {host:?} belongs to two sites")]
    HostInTwoSites {
        /// The normalised host.
        host: String,
    },
    /// The prefix is not `""` or `/segment[/segment…]`.
    #[error("invalid prefix {prefix:?}: {reason}")]
    BadPrefix {
        /// The prefix as written.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// What is wrong with a host name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Empty, or only a dot.
    #[error("empty")]
    Empty,
    /// Longer than 253 characters.
    #[error("longer than 253 characters")]
    TooLong,
    /// An IP address (in any form the URL Standard accepts, such as
    /// `2130706433` or `0x7f.1`): the allowlist names hosts, not addresses.
    #[error("an IP address, not a name")]
    IpLiteral,
    /// A name that resolves to the machine or the local network.
    #[error("a local or special-use name")]
    LocalName,
    /// A single label (`intranet`): resolved through search domains, so it
    /// names something on the local network.
    #[error("a single label; write the fully qualified name")]
    SingleLabel,
    /// Not letters, digits and inner hyphens in labels of 1 to 63
    /// characters, or not accepted by the URL Standard's host parser
    /// (non-ASCII names are converted to their `xn--` form first).
    #[error("not a DNS name (labels of letters, digits and inner hyphens, 1 to 63 long)")]
    Syntax,
}

/// Lowercases `host`, removes one trailing dot, converts an internationalised
/// name to its ASCII (`xn--`) form with the URL Standard's host parser, and
/// checks the result is an ordinary public DNS name.
pub fn normalize_host(host: &str) -> Result<String, HostError> {
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    if trimmed.is_empty() {
        return Err(HostError::Empty);
    }
    if trimmed.len() > MAX_HOST_LEN * 4 {
        return Err(HostError::TooLong);
    }
    if trimmed.starts_with('[') {
        return Err(HostError::IpLiteral);
    }
    // Characters the host parser would drop or read as delimiters are
    // refused here rather than silently changed.
    if trimmed
        .bytes()
        .any(|b| b <= b' ' || matches!(b, b'/' | b'\\' | b'?' | b'#' | b'@' | b':' | b'%'))
    {
        return Err(HostError::Syntax);
    }
    let name = match url::Host::parse(trimmed) {
        Ok(url::Host::Domain(d)) => d,
        Ok(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => return Err(HostError::IpLiteral),
        Err(_) => return Err(HostError::Syntax),
    };
    let name = name.strip_suffix('.').unwrap_or(&name).to_string();
    check_dns_name(&name)?;
    Ok(name)
}

/// Checks an ASCII, lowercase name: LDH labels, length, at least two labels,
/// not a local or special-use name.
fn check_dns_name(name: &str) -> Result<(), HostError> {
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong);
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        let ok = (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(HostError::Syntax);
        }
    }
    if is_local_name(name) {
        return Err(HostError::LocalName);
    }
    if labels.len() < 2 {
        return Err(HostError::SingleLabel);
    }
    Ok(())
}

/// Whether a lowercase name, without a trailing dot, is a local or
/// special-use name (see [`LOCAL_SUFFIXES`]).
pub(crate) fn is_local_name(name: &str) -> bool {
    LOCAL_SUFFIXES
        .iter()
        .any(|s| name == *s || name.strip_suffix(s).is_some_and(|head| head.ends_with('.')))
        || name == "ip6-localhost"
        || name == "ip6-loopback"
}

/// A validated site: normalised hosts, allowlist and prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    hosts: BTreeSet<String>,
    fold: BTreeSet<String>,
    prefix: String,
}

impl Site {
    /// Validates a configured site.
    pub fn new(config: &SiteConfig) -> Result<Site, ConfigError> {
        if config.hosts.is_empty() {
            return Err(ConfigError::NoHosts);
        }
        let hosts = normalize_list(&config.hosts)?;
        let fold = normalize_list(&config.fold)?;
        if let Some(h) = hosts.intersection(&fold).next() {
            return Err(ConfigError::ServedAndFolded { host: h.clone() });
        }
        let prefix = check_prefix(&config.prefix, &fold)?;
        Ok(Site {
            hosts,
            fold,
            prefix,
        })
    }

    /// The document hosts, normalised.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(String::as_str)
    }

    /// The folded hosts (the allowlist), normalised.
    pub fn folded_hosts(&self) -> impl Iterator<Item = &str> {
        self.fold.iter().map(String::as_str)
    }

    /// The path prefix of folded references (`""` for seed 004's form).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether `host` (already normalised) is one of the site's own hosts.
    pub fn serves(&self, host: &str) -> bool {
        self.hosts.contains(host)
    }

    /// Whether `host` (already normalised) is on the allowlist.
    pub fn folds(&self, host: &str) -> bool {
        self.fold.contains(host)
    }
}

/// Several validated sites, looked up by the request's host.
#[derive(Debug, Clone, Default)]
pub struct Sites {
    sites: Vec<Arc<Site>>,
}

impl Sites {
    /// Validates every site and checks no document host has two sites.
    pub fn new(config: &AccelConfig) -> Result<Sites, ConfigError> {
        let mut seen = BTreeSet::new();
        let mut sites = Vec::with_capacity(config.site.len());
        for c in &config.site {
            let site = Site::new(c)?;
            for h in site.hosts() {
                if !seen.insert(h.to_string()) {
                    return Err(ConfigError::HostInTwoSites {
                        host: h.to_string(),
                    });
                }
            }
            sites.push(Arc::new(site));
        }
        Ok(Sites { sites })
    }

    /// The site serving `host` (as in a `Host` header or `:authority`,
    /// without its port; matched case-insensitively, a trailing dot ignored).
    pub fn for_host(&self, host: &str) -> Option<&Arc<Site>> {
        let h = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        self.sites.iter().find(|s| s.serves(&h))
    }

    /// All sites, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Site>> {
        self.sites.iter()
    }
}

fn normalize_list(list: &[String]) -> Result<BTreeSet<String>, ConfigError> {
    let mut out = BTreeSet::new();
    for raw in list {
        let host = normalize_host(raw).map_err(|reason| ConfigError::InvalidHost {
            host: raw.clone(),
            reason,
        })?;
        if !out.insert(host.clone()) {
            return Err(ConfigError::Duplicate { host });
        }
    }
    Ok(out)
}

/// A prefix is `""` or `/seg[/seg…]` with unreserved characters (RFC 3986
/// §2.3) so that it needs no percent-encoding and means the same to every
/// client and server on the way.
fn check_prefix(prefix: &str, fold: &BTreeSet<String>) -> Result<String, ConfigError> {
    let bad = |reason| ConfigError::BadPrefix {
        prefix: prefix.to_string(),
        reason,
    };
    if prefix.is_empty() {
        return Ok(String::new());
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(bad("longer than 64 characters"));
    }
    let Some(rest) = prefix.strip_prefix('/') else {
        return Err(bad("must start with '/'"));
    };
    for seg in rest.split('/') {
        if seg.is_empty() {
            return Err(bad("empty segment or trailing '/'"));
        }
        if seg == "." || seg == ".." {
            return Err(bad("'.' and '..' segments are not allowed"));
        }
        if !seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
        {
            return Err(bad(
                "only letters, digits, '-', '.', '_' and '~' between slashes",
            ));
        }
    }
    let first = rest.split('/').next().unwrap_or_default();
    if fold.contains(&first.to_ascii_lowercase()) {
        return Err(bad("its first segment is a folded host"));
    }
    Ok(prefix.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(hosts: &[&str], fold: &[&str], prefix: &str) -> SiteConfig {
        SiteConfig {
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            fold: fold.iter().map(|s| s.to_string()).collect(),
            prefix: prefix.to_string(),
        }
    }

    #[test]
    fn normalises_case_trailing_dot_and_idna() {
        assert_eq!(normalize_host("B.Example.").unwrap(), "b.example");
        assert_eq!(
            normalize_host("bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            normalize_host("xn--bcher-kva.example").unwrap(),
            "xn--bcher-kva.example"
        );
    }

    #[test]
    fn refuses_bad_hosts() {
        let cases: &[(&str, HostError)] = &[
            ("", HostError::Empty),
            (".", HostError::Empty),
            ("127.0.0.1", HostError::IpLiteral),
            ("2130706433", HostError::IpLiteral),
            ("0x7f.1", HostError::IpLiteral),
            ("[::1]", HostError::IpLiteral),
            ("localhost", HostError::LocalName),
            ("a.localhost", HostError::LocalName),
            ("printer.local", HostError::LocalName),
            ("metadata.google.internal", HostError::LocalName),
            ("router.home.arpa", HostError::LocalName),
            ("1.0.0.127.in-addr.arpa", HostError::LocalName),
            ("intranet", HostError::SingleLabel),
            ("a b.example", HostError::Syntax),
            ("user@b.example", HostError::Syntax),
            ("b.example:8080", HostError::Syntax),
            ("b%2eexample", HostError::Syntax),
            ("-b.example", HostError::Syntax),
            ("b-.example", HostError::Syntax),
            ("b_c.example", HostError::Syntax),
            ("a..example", HostError::Syntax),
        ];
        for (host, want) in cases {
            assert_eq!(normalize_host(host), Err(*want), "{host:?}");
        }
        let long = format!("{}.example", "a.".repeat(130));
        assert_eq!(normalize_host(&long), Err(HostError::TooLong));
        let label = format!("{}.example", "a".repeat(64));
        assert_eq!(normalize_host(&label), Err(HostError::Syntax));
    }

    #[test]
    fn site_validation() {
        let s = Site::new(&cfg(&["A.example"], &["b.example", "CDN.c.example."], "")).unwrap();
        assert!(s.serves("a.example"));
        assert!(s.folds("cdn.c.example"));
        assert!(!s.folds("a.example"));
        assert_eq!(s.prefix(), "");

        assert_eq!(Site::new(&cfg(&[], &[], "")), Err(ConfigError::NoHosts));
        assert_eq!(
            Site::new(&cfg(&["a.example"], &["b.example", "B.example."], "")),
            Err(ConfigError::Duplicate {
                host: "b.example".into()
            })
        );
        assert_eq!(
            Site::new(&cfg(&["a.example"], &["A.example"], "")),
            Err(ConfigError::ServedAndFolded {
                host: "a.example".into()
            })
        );
        assert!(matches!(
            Site::new(&cfg(&["a.example"], &["10.0.0.1"], "")),
            Err(ConfigError::InvalidHost {
                reason: HostError::IpLiteral,
                ..
            })
        ));
    }

    #[test]
    fn prefix_validation() {
        let ok = |p: &str| Site::new(&cfg(&["a.example"], &["b.example"], p)).map(|s| s.prefix);
        assert_eq!(ok("/_mewa").unwrap(), "/_mewa");
        assert_eq!(ok("/x/y-1.z~").unwrap(), "/x/y-1.z~");
        for bad in [
            "_mewa",
            "/",
            "/_mewa/",
            "//x",
            "/a/../b",
            "/.",
            "/a b",
            "/a%2f",
            "/b.example",
            "/B.example/x",
        ] {
            assert!(
                matches!(ok(bad), Err(ConfigError::BadPrefix { .. })),
                "{bad:?}"
            );
        }
        assert!(ok(&format!("/{}", "a".repeat(64))).is_err());
    }

    #[test]
    fn sites_lookup_and_conflicts() {
        let conf = AccelConfig {
            site: vec![
                cfg(&["a.example"], &["b.example"], ""),
                cfg(&["d.example"], &["b.example"], "/_mewa"),
            ],
        };
        let sites = Sites::new(&conf).unwrap();
        assert!(sites.for_host("A.EXAMPLE.").unwrap().folds("b.example"));
        assert_eq!(sites.for_host("d.example").unwrap().prefix(), "/_mewa");
        assert!(sites.for_host("b.example").is_none());
        assert_eq!(sites.iter().count(), 2);

        let conf = AccelConfig {
            site: vec![cfg(&["a.example"], &[], ""), cfg(&["A.example"], &[], "")],
        };
        assert_eq!(
            Sites::new(&conf).unwrap_err(),
            ConfigError::HostInTwoSites {
                host: "a.example".into()
            }
        );
    }

    #[test]
    fn toml_form_and_unknown_keys() {
        let text = r#"
            [[site]]
            hosts = ["a.example"]
            fold = ["b.example"]

            [[site]]
            hosts = ["d.example"]
            fold = ["b.example"]
            prefix = "/_mewa"
        "#;
        let conf: AccelConfig = toml::from_str(text).unwrap();
        assert_eq!(conf.site.len(), 2);
        assert_eq!(conf.site[0].prefix, "");
        assert_eq!(conf.site[1].prefix, "/_mewa");
        Sites::new(&conf).unwrap();

        let typo = "[[site]]\nhosts = [\"a.example\"]\nfolds = [\"b.example\"]\n";
        let err = toml::from_str::<AccelConfig>(typo).unwrap_err().to_string();
        assert!(err.contains("unknown field"), "{err}");
        assert!(toml::from_str::<AccelConfig>("[other]\n").is_err());
    }
}
