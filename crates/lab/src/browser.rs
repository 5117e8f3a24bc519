//! Chromium in the testbed: the flags that make it speak a protocol to the
//! testbed's origin, the command of a browsing session in the client's
//! namespace, and the check that the binary is there before a run starts.
//! Driving the browser is `mewa_chromium`'s.

use std::path::Path;

use mewa_loader::record::Protocol;

use crate::bed::{Bed, BedError, CLIENT};
use crate::experiment::ExperimentError;

/// Refuses a Chromium binary that is not there, naming the path and how to
/// get one, or what the experiment can do `instead` (`, or use --browser
/// loader`; empty for nothing), before any testbed starts.
pub fn check_binary(chromium: &Path, instead: &'static str) -> Result<(), ExperimentError> {
    mewa_chromium::check_binary(chromium)
        .map_err(|source| ExperimentError::NoChromium { source, instead })
}

/// Refuses, for the option `field`, a Chromium that does not act on
/// `103 Early Hints` (they are acted on from version 103 on) or whose
/// version cannot be read, naming the binary and its version: an
/// early-hints arm on it would measure a browser that ignores them.
pub fn check_early_hints(chromium: &Path, field: &'static str) -> Result<(), ExperimentError> {
    match mewa_chromium::major_version(chromium) {
        Some(v) if v >= 103 => Ok(()),
        found => Err(ExperimentError::Config {
            field,
            message: format!(
                "early-hints needs a Chromium that acts on 103 Early Hints (103 or newer); \
                 {} is {}",
                chromium.display(),
                found.map_or("of an unknown version".into(), |v| format!("version {v}"))
            ),
        }),
    }
}

/// The flags that make Chromium speak `protocol` to the testbed's origin,
/// as the loader's cell of that protocol does
/// (`LoadOptions::browser(protocol, true)`: everything over TLS on 443):
/// HTTP/2 is Chromium's default over TLS (ALPN h2); HTTP/1.1 is the same
/// TLS with HTTP/2 turned off (`--disable-http2`, ALPN http/1.1, six
/// connections per host); HTTP/3 is QUIC forced on for every origin
/// (`--origin-to-force-quic-on=*`; the SPKI pin covers QUIC's certificate
/// too).
pub fn protocol_flags(protocol: Protocol) -> &'static [&'static str] {
    match protocol {
        Protocol::H1 => &["--disable-http2"],
        Protocol::H2 => &[],
        Protocol::H3 => &["--enable-quic", "--origin-to-force-quic-on=*"],
    }
}

/// The SHA-256 SPKI hash (base64) of the key every certificate of the
/// test CA in `ca_dir` is issued for: what Chromium is told to trust.
pub fn trusted_spki(ca_dir: &Path) -> Result<String, BedError> {
    mewa_origin::Ca::load_or_create(ca_dir)
        .and_then(|ca| ca.issue(&[]))
        .map(|certs| certs.leaf_spki_sha256)
        .map_err(|e| BedError::Runtime(format!("the origin's certificate: {e}")))
}

/// The command that starts `chromium` in the client's namespace for a
/// session of `pages` over `protocol` with its profile in `profile` (a
/// directory that must not exist yet or be empty): headless, the pages'
/// names as the testbed serves them and no other
/// ([`Bed::chromium_resolver_rules_for`]: the browser's own background
/// requests stay off the link), the lab's certificates trusted, DevTools
/// on a port of Chromium's choosing on the namespace's 127.0.0.1.
pub fn session_command(
    bed: &Bed,
    pages: &[mewa_corpus::Page],
    chromium: &Path,
    profile: &Path,
    ca_dir: &Path,
    protocol: Protocol,
) -> Result<std::process::Command, BedError> {
    let spki = trusted_spki(ca_dir)?;
    let mut cmd = bed.running()?.command(CLIENT, chromium)?;
    mewa_chromium::headless(&mut cmd, profile, &spki)
        .arg(format!(
            "--host-resolver-rules={}",
            bed.chromium_resolver_rules_for(pages)
        ))
        .arg("--remote-debugging-port=0")
        .args(protocol_flags(protocol))
        .arg("about:blank");
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_has_the_flags_of_the_loaders_cell() {
        assert_eq!(protocol_flags(Protocol::H1), ["--disable-http2"]);
        assert!(protocol_flags(Protocol::H2).is_empty());
        assert!(protocol_flags(Protocol::H3)
            .iter()
            .any(|f| f.starts_with("--origin-to-force-quic-on=")));
        assert_eq!(Protocol::H1.alpn(), "http/1.1");
    }

    #[test]
    fn a_missing_binary_names_the_path_and_the_package() {
        let e = check_binary(
            Path::new("/nonexistent/chromium"),
            ", or use --browser loader",
        )
        .unwrap_err();
        // The message and its sources, as the CLI prints them.
        let mut m = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            m = format!("{m}: {s}");
            source = s.source();
        }
        assert!(
            m.contains("/nonexistent/chromium") && m.contains("apt-get install chromium"),
            "{m}"
        );
        assert!(m.contains("or use --browser loader"), "{m}");
    }
}
