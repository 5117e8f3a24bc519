//! The local test CA and the origin's certificate.
//!
//! The CA is created once in a directory (`ca.cert.pem`, `ca.key.pem`) and
//! reused, so a browser or the lab trusts it once. The leaf key is kept there
//! too (`leaf.key.pem`), so the leaf's SPKI hash — what Chromium's
//! `--ignore-certificate-errors-spki-list` wants for QUIC — stays the same
//! from run to run; the leaf certificate itself is issued at every start with
//! a SAN for every corpus host (plus `localhost`, 127.0.0.1 and ::1).
//!
//! Only ring is used as the crypto provider, passed explicitly, so no
//! process-wide default has to be installed.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// File name of the CA certificate (PEM) in the CA directory.
pub const CA_CERT: &str = "ca.cert.pem";
/// File name of the CA private key (PEM, mode 0600).
pub const CA_KEY: &str = "ca.key.pem";
/// File name of the leaf private key (PEM, mode 0600).
pub const LEAF_KEY: &str = "leaf.key.pem";

/// Why certificates could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Reading or writing the CA directory failed; check the path and its
    /// permissions (`--ca-dir`).
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// A key or certificate could not be generated or parsed (e.g. a damaged
    /// PEM file in the CA directory; delete the directory to start afresh and
    /// trust the new CA).
    #[error("certificate: {0}")]
    Cert(rcgen::Error),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(rustls::Error),
    /// The QUIC crypto configuration could not be built (no TLS 1.3 suite).
    #[error("QUIC TLS configuration: {0}")]
    Quic(String),
}

// By hand rather than `#[from]`, which would also report the inner error as
// the source and print it twice in an error chain.
impl From<rcgen::Error> for TlsError {
    fn from(e: rcgen::Error) -> Self {
        TlsError::Cert(e)
    }
}

impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> Self {
        TlsError::Rustls(e)
    }
}

/// The local test CA.
#[derive(Debug)]
pub struct Ca {
    cert_path: PathBuf,
    dir: PathBuf,
    key: KeyPair,
    spki_sha256: String,
}

/// A certificate chain and key for the origin, with what clients need to
/// trust it.
#[derive(Debug)]
pub struct Certs {
    /// Leaf then CA certificate (DER).
    pub chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
    /// Path of the CA certificate PEM (to trust).
    pub ca_cert_path: PathBuf,
    /// base64(SHA-256(SPKI)) of the CA key.
    pub ca_spki_sha256: String,
    /// base64(SHA-256(SPKI)) of the leaf key: the value for Chromium's
    /// `--ignore-certificate-errors-spki-list`.
    pub leaf_spki_sha256: String,
    /// The names in the leaf's SAN.
    pub names: Vec<String>,
    /// Per-group leaves (same key as `chain`'s): a client naming one of a
    /// group's hosts (SNI) gets that group's certificate, which covers no
    /// other host, so a browser coalesces only within a group. Empty: every
    /// client gets `chain`.
    pub groups: Vec<(Vec<String>, Vec<CertificateDer<'static>>)>,
}

impl Ca {
    /// Loads the CA from `dir`, or creates it (and the directory) if it has
    /// none yet.
    pub fn load_or_create(dir: &Path) -> Result<Ca, TlsError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |error| TlsError::Io { path, error }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let cert_path = dir.join(CA_CERT);
        let key = load_or_create_key(&dir.join(CA_KEY))?;
        if !cert_path.exists() {
            let cert = ca_params().self_signed(&key)?;
            write_file(&cert_path, cert.pem().as_bytes(), 0o644)?;
        }
        Ok(Ca {
            spki_sha256: spki_sha256(&key),
            cert_path,
            dir: dir.to_owned(),
            key,
        })
    }

    /// Path of the CA certificate (PEM).
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// base64(SHA-256(SPKI)) of the CA key.
    pub fn spki_sha256(&self) -> &str {
        &self.spki_sha256
    }

    /// Issues a leaf certificate for `hosts` (valid from a day ago for a
    /// year, within what browsers accept) signed by this CA.
    pub fn issue(&self, hosts: &[&str]) -> Result<Certs, TlsError> {
        self.issue_grouped(hosts, &[])
    }

    /// [`Ca::issue`], plus one leaf per group of hosts in `groups` (chosen
    /// by SNI; see [`Certs::groups`]). All leaves share the leaf key, so
    /// one SPKI hash trusts them all.
    pub fn issue_grouped(&self, hosts: &[&str], groups: &[Vec<String>]) -> Result<Certs, TlsError> {
        let leaf_key = load_or_create_key(&self.dir.join(LEAF_KEY))?;
        let mut names: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        names.push("localhost".into());
        names.sort();
        names.dedup();
        // The CA certificate as stored (the one clients trust).
        let ca_pem = std::fs::read(&self.cert_path).map_err(|error| TlsError::Io {
            path: self.cert_path.clone(),
            error,
        })?;
        let ca_der = CertificateDer::from(
            pem_to_der(&ca_pem)
                .ok_or_else(|| TlsError::Cert(rcgen::Error::CouldNotParseCertificate))?,
        );
        let leaf = self.leaf(&names, &leaf_key)?;
        let mut group_chains = Vec::with_capacity(groups.len());
        for g in groups {
            let der = self.leaf(g, &leaf_key)?;
            group_chains.push((g.clone(), vec![der, ca_der.clone()]));
        }
        Ok(Certs {
            chain: vec![leaf, ca_der],
            key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
            ca_cert_path: self.cert_path.clone(),
            ca_spki_sha256: self.spki_sha256.clone(),
            leaf_spki_sha256: spki_sha256(&leaf_key),
            names,
            groups: group_chains,
        })
    }

    /// One leaf for `names` (plus the loopback addresses) signed by the CA.
    fn leaf(
        &self,
        names: &[String],
        leaf_key: &KeyPair,
    ) -> Result<CertificateDer<'static>, TlsError> {
        let mut params = CertificateParams::new(names.to_vec())?;
        for ip in ["127.0.0.1", "::1"] {
            if let Ok(ip) = ip.parse::<IpAddr>() {
                params.subject_alt_names.push(SanType::IpAddress(ip));
            }
        }
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "mewa origin");
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let now = SystemTime::now();
        let (y, m, d) = ymd(now - Duration::from_secs(86_400));
        params.not_before = rcgen::date_time_ymd(y, m, d);
        let (y, m, d) = ymd(now + Duration::from_secs(365 * 86_400));
        params.not_after = rcgen::date_time_ymd(y, m, d);
        let issuer = Issuer::new(ca_params(), &self.key);
        Ok(params.signed_by(leaf_key, &issuer)?.der().clone())
    }
}

/// Picks a leaf by SNI: the group naming the host, else the all-hosts leaf.
#[derive(Debug)]
struct BySni {
    all: Arc<rustls::sign::CertifiedKey>,
    by_host: std::collections::HashMap<String, Arc<rustls::sign::CertifiedKey>>,
}

impl rustls::server::ResolvesServerCert for BySni {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let named = hello
            .server_name()
            .and_then(|n| self.by_host.get(&n.to_ascii_lowercase()));
        Some(named.unwrap_or(&self.all).clone())
    }
}

/// A rustls client configuration that trusts only `roots` and offers
/// `alpn`, with the same explicit ring provider as the servers: how the
/// lab's loader and the tests reach an origin or proxy holding [`Certs`]
/// from the test CA (and, with ALPN `h3`, what quinn's client wraps).
pub fn client_config(
    roots: impl IntoIterator<Item = CertificateDer<'static>>,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    for c in roots {
        store.add(c)?;
    }
    let mut c = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(store)
    .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Ok(c)
}

impl Certs {
    /// Writes the chain (leaf, then CA) and the leaf's key as PEM files,
    /// replacing them if present (the key with mode 0600): how another
    /// server (the accelerator, nginx) presents a certificate of the test
    /// CA.
    pub fn write_pem(&self, cert: &Path, key: &Path) -> Result<(), TlsError> {
        use base64::Engine as _;
        let pem = |label: &str, der: &[u8]| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            let mut s = format!("-----BEGIN {label}-----\n");
            for line in b64.as_bytes().chunks(64) {
                s.push_str(&String::from_utf8_lossy(line));
                s.push('\n');
            }
            s.push_str(&format!("-----END {label}-----\n"));
            s
        };
        let chain: String = self.chain.iter().map(|c| pem("CERTIFICATE", c)).collect();
        for p in [cert, key] {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(TlsError::Io {
                        path: p.to_owned(),
                        error,
                    })
                }
            }
        }
        write_file(cert, chain.as_bytes(), 0o644)?;
        write_file(
            key,
            pem("PRIVATE KEY", self.key.secret_pkcs8_der()).as_bytes(),
            0o600,
        )
    }

    /// A client configuration trusting this chain's CA (see
    /// [`client_config`]).
    pub fn client_config(&self, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
        client_config(self.chain.last().cloned(), alpn)
    }

    /// rustls configuration for TCP: TLS 1.2/1.3 with ALPN `h2`, `http/1.1`.
    pub fn tcp_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let mut c = self.builder(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
        c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(c)
    }

    /// quinn crypto configuration for QUIC: TLS 1.3 with ALPN `h3`.
    pub fn quic_config(&self) -> Result<quinn::crypto::rustls::QuicServerConfig, TlsError> {
        let mut c = self.builder(&[&rustls::version::TLS13])?;
        c.alpn_protocols = vec![b"h3".to_vec()];
        quinn::crypto::rustls::QuicServerConfig::try_from(c)
            .map_err(|e| TlsError::Quic(e.to_string()))
    }

    fn builder(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)?
            .with_no_client_auth();
        if self.groups.is_empty() {
            return Ok(b.with_single_cert(
                self.chain.clone(),
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )?);
        }
        let signer = provider
            .key_provider
            .load_private_key(PrivateKeyDer::Pkcs8(self.key.clone_key()))?;
        let certified = |chain: &[CertificateDer<'static>]| {
            Arc::new(rustls::sign::CertifiedKey::new(
                chain.to_vec(),
                signer.clone(),
            ))
        };
        let mut by_host = std::collections::HashMap::new();
        for (hosts, chain) in &self.groups {
            let ck = certified(chain);
            for h in hosts {
                by_host.insert(h.to_ascii_lowercase(), ck.clone());
            }
        }
        Ok(b.with_cert_resolver(Arc::new(BySni {
            all: certified(&self.chain),
            by_host,
        })))
    }
}

/// The CA's parameters; the same every time, so a CA loaded from its key
/// issues certificates whose issuer matches the stored CA certificate.
fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "mewa local test CA");
    dn.push(
        DnType::OrganizationName,
        "mewa lab (do not trust outside tests)",
    );
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p
}

fn load_or_create_key(path: &Path) -> Result<KeyPair, TlsError> {
    match std::fs::read_to_string(path) {
        Ok(pem) => Ok(KeyPair::from_pem(&pem)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = KeyPair::generate()?;
            write_file(path, key.serialize_pem().as_bytes(), 0o600)?;
            Ok(key)
        }
        Err(error) => Err(TlsError::Io {
            path: path.to_owned(),
            error,
        }),
    }
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|error| TlsError::Io {
            path: path.to_owned(),
            error,
        })?;
    f.write_all(bytes).map_err(|error| TlsError::Io {
        path: path.to_owned(),
        error,
    })
}

/// base64(SHA-256(SubjectPublicKeyInfo DER)), as Chromium and HPKP spell it.
fn spki_sha256(key: &KeyPair) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, &key.subject_public_key_info());
    base64::engine::general_purpose::STANDARD.encode(d.as_ref())
}

/// The first PEM block's DER.
fn pem_to_der(pem: &[u8]) -> Option<Vec<u8>> {
    let s = std::str::from_utf8(pem).ok()?;
    let start = s.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = s[start..].find("-----END CERTIFICATE-----")? + start;
    let b64: String = s[start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// Calendar date (UTC) of an instant, for certificate validity (Howard
/// Hinnant's `civil_from_days`).
fn ymd(t: SystemTime) -> (i32, u8, u8) {
    let days = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        i32::try_from(y).unwrap_or(2024),
        u8::try_from(m).unwrap_or(1),
        u8::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(ymd(UNIX_EPOCH), (1970, 1, 1));
        assert_eq!(
            ymd(UNIX_EPOCH + Duration::from_secs(1_704_067_200)),
            (2024, 1, 1)
        );
        assert_eq!(
            ymd(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            (2000, 2, 29)
        );
    }

    #[test]
    fn ca_is_created_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("mewa-origin-ca-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = Ca::load_or_create(&dir).unwrap();
        let pem = std::fs::read(a.cert_path()).unwrap();
        let certs = a.issue(&["a.example", "b.example"]).unwrap();
        let b = Ca::load_or_create(&dir).unwrap();
        assert_eq!(a.spki_sha256(), b.spki_sha256());
        assert_eq!(std::fs::read(b.cert_path()).unwrap(), pem);
        let again = b.issue(&["a.example"]).unwrap();
        assert_eq!(certs.leaf_spki_sha256, again.leaf_spki_sha256);
        assert_eq!(certs.leaf_spki_sha256.len(), 44);
        assert!(certs.names.contains(&"b.example".to_owned()));
        certs.tcp_config().unwrap();
        certs.quic_config().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
