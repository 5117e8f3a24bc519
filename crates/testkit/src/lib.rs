//! `mewa-testkit`: fixtures the workspace's tests share, so that each test
//! says what it checks rather than how to stand up an origin or an edge.
//! A dev-dependency only: nothing here ships.
//!
//! - [`TempDir`]: a fresh directory, removed on drop.
//! - [`chromium`]: the Chromium binary, or `None` with the reason printed.
//! - [`h2spec`]: the h2spec binary, the same way; [`run_h2spec`] runs it.
//! - [`LoopbackOrigin`]: `mewa-origin` serving a corpus on 127.0.0.1.
//! - [`LoopbackEdge`]: `mewa-edge`'s DNS server with a hint book on
//!   127.0.0.1, built from an [`EdgeSpec`].
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mewa_corpus::Corpus;
use mewa_edge::dns::{Responder, Zone};
use mewa_edge::hints::{HintBook, HintPolicy};
use mewa_edge::net::Net;
use mewa_edge::server::{bind_dns, serve, EdgeDns, Limits};
use mewa_hint::page::{OriginRtt, PageMeta};
use mewa_origin::{HttpOptions, Origin, OriginConfig, TcpOptions};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A fresh directory under the system's temporary folder, named after the
/// test and the process, removed (with its contents) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// `mewa-<tag>-<pid>-<n>` (n counts this process's directories, so
    /// two tests with one tag do not share one), emptied if a crashed run
    /// left it behind.
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mewa-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.path.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Where Debian and Ubuntu install Chromium.
const CHROMIUM: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromium-browser"];

/// The Chromium binary, or `None` after printing why `test` skips.
pub fn chromium(test: &str) -> Option<PathBuf> {
    let found = CHROMIUM.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipping {test}: no Chromium at {CHROMIUM:?} (apt-get install chromium)");
    }
    found
}

/// The h2spec binary (HTTP/2 conformance), on PATH or in ~/go/bin where
/// `go install` puts it, or `None` after printing why `test` skips.
pub fn h2spec(test: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    let found = dirs
        .into_iter()
        .map(|d| d.join("h2spec"))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!(
            "skipping {test}: h2spec not found on PATH or in ~/go/bin \
             (go install github.com/summerwind/h2spec/cmd/h2spec@latest, or scripts/setup)"
        );
    }
    found
}

/// What an h2spec run against one port said.
#[derive(Debug)]
pub struct H2specRun {
    /// Its summary line (`145 tests, 145 passed, 0 skipped, 0 failed`).
    pub summary: String,
    /// The lines of failed cases, minus those `allowed` names.
    pub failures: Vec<String>,
    /// Everything it printed.
    pub output: String,
}

impl H2specRun {
    /// Prints the summary and fails the test unless h2spec ran and every
    /// case not allowed passed; `name` says which listener.
    pub fn assert_clean(&self, name: &str) {
        eprintln!("h2spec ({name}): {}", self.summary);
        assert!(
            self.summary.contains("passed"),
            "h2spec ({name}) did not run:\n{}",
            self.output
        );
        assert!(
            self.failures.is_empty(),
            "h2spec ({name}) failures:\n{}\n\n{}",
            self.failures.join("\n"),
            self.output
        );
    }
}

/// Runs h2spec against 127.0.0.1:`port` (over TLS with `tls`, trusting
/// any certificate), 5 s per case, its JUnit report in `report`. Failed
/// cases whose line contains one of `allowed` are not listed. Blocking:
/// call it from `spawn_blocking` in an async test.
pub fn run_h2spec(
    bin: &Path,
    port: u16,
    tls: bool,
    extra: &[&str],
    allowed: &[&str],
    report: &Path,
) -> H2specRun {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-o", "5", "-j"])
        .arg(report)
        .args(extra);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    let out = cmd.output().unwrap();
    let output = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = output
        .lines()
        .rev()
        .find(|l| l.contains("tests,"))
        .unwrap_or("")
        .to_string();
    let failures = output
        .lines()
        .filter(|l| l.contains('×'))
        .filter(|l| !allowed.iter().any(|a| l.contains(a)))
        .map(str::to_string)
        .collect();
    H2specRun {
        summary,
        failures,
        output,
    }
}

/// An origin's configuration for loopback tests: h2c and h1 on an
/// ephemeral port of 127.0.0.1, no TLS and no HTTP/3 (turn them on with
/// [`OriginConfig::tls`] and [`OriginConfig::h3`]), its CA in `ca_dir`.
pub fn origin_config(ca_dir: PathBuf) -> OriginConfig {
    OriginConfig {
        plain: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        tls: None,
        h3: None,
        ca_dir,
        http: HttpOptions::default(),
        tcp: TcpOptions::default(),
        quic_congestion: None,
        cert_groups: Vec::new(),
        iw: None,
    }
}

/// `mewa-origin` serving a corpus on loopback from a tokio task; stopped
/// by [`LoopbackOrigin::stop`] or when dropped, or left running with
/// [`LoopbackOrigin::keep_running`].
#[derive(Debug)]
pub struct LoopbackOrigin {
    /// h1 + h2c.
    pub plain: Option<SocketAddr>,
    /// TLS (h2, http/1.1), when configured.
    pub tls: Option<SocketAddr>,
    /// HTTP/3, when configured.
    pub h3: Option<SocketAddr>,
    /// The PEM file of the CA that signed the origin's certificate.
    pub ca_cert: PathBuf,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl LoopbackOrigin {
    /// Binds `cfg` for `corpus` and serves it; needs a tokio runtime.
    pub fn start(corpus: &Corpus, cfg: OriginConfig) -> LoopbackOrigin {
        let ca_cert = cfg.ca_dir.join(mewa_origin::tls::CA_CERT);
        let origin = Origin::bind(corpus, cfg).unwrap();
        let (plain, tls, h3) = (origin.plain_addr(), origin.tls_addr(), origin.h3_addr());
        let (stop, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            origin
                .serve(async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        LoopbackOrigin {
            plain,
            tls,
            h3,
            ca_cert,
            stop,
            task,
        }
    }

    /// The h1/h2c address (panics if the configuration had none).
    pub fn plain_addr(&self) -> SocketAddr {
        self.plain.unwrap()
    }

    /// Leaves the origin serving until the test's runtime ends (dropping a
    /// [`LoopbackOrigin`] stops it).
    pub fn keep_running(self) {
        std::mem::forget(self.stop);
    }

    /// Stops the origin and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// What a [`LoopbackEdge`] knows: its zone, the pages it has hints for,
/// the origin RTTs it measured, and whom it forwards for.
#[derive(Debug, Clone)]
pub struct EdgeSpec {
    /// Names the edge answers, with their addresses.
    pub zone: Vec<(String, Vec<IpAddr>)>,
    /// Pages in the hint book.
    pub pages: Vec<PageMeta>,
    /// Measured edge → origin RTTs by host.
    pub rtts: HashMap<String, OriginRtt>,
    /// Networks whose other queries are forwarded upstream.
    pub forward_from: Vec<Net>,
    /// Where they are forwarded.
    pub upstream: Option<SocketAddr>,
    /// The clock the hints are stamped with, Unix seconds.
    pub now_unix_s: u64,
    /// UDP sockets (SO_REUSEPORT) the server binds.
    pub udp_sockets: usize,
    /// The edge's largest UDP answer, and its largest compact one (the
    /// hint by hash, the URL list over TCP): 1232 and 1000 by default.
    pub udp_payload: (u16, u16),
    /// The server's limits (the edge config's defaults, response-rate
    /// limiting off).
    pub limits: Limits,
}

impl EdgeSpec {
    /// An edge for `pages` answering `zone`, no RTTs, no forwarding, one
    /// UDP socket, stamped now.
    pub fn new(zone: Vec<(String, Vec<IpAddr>)>, pages: Vec<PageMeta>) -> EdgeSpec {
        EdgeSpec {
            zone,
            pages,
            rtts: HashMap::new(),
            forward_from: Vec::new(),
            upstream: None,
            now_unix_s: mewa_hint::now_unix_s(),
            udp_sockets: 1,
            udp_payload: (1232, mewa_edge::dns::COMPACT_UDP_PAYLOAD),
            // Tests send many queries from one address; the limiter's own
            // test turns it on.
            limits: Limits {
                rrl: mewa_edge::rrl::RrlConfig {
                    responses_per_s: 0,
                    ..mewa_edge::rrl::RrlConfig::default()
                },
                ..Limits::default()
            },
        }
    }

    /// An edge for every page of `corpus`: every host resolves to
    /// 127.0.0.1 and has a measured RTT of `rtt_us`.
    pub fn for_corpus(corpus: &Corpus, rtt_us: u32) -> EdgeSpec {
        let hosts: Vec<String> = corpus
            .pages
            .iter()
            .flat_map(|p| p.hosts().into_iter().map(str::to_string))
            .collect();
        let loopback: IpAddr = [127, 0, 0, 1].into();
        let pages = corpus
            .pages
            .iter()
            .map(mewa_corpus::convert::to_page_meta)
            .collect();
        let mut spec = EdgeSpec::new(
            hosts.iter().map(|h| (h.clone(), vec![loopback])).collect(),
            pages,
        );
        for h in hosts {
            spec = spec.with_rtt(&h, rtt_us);
        }
        spec
    }

    /// `host`'s origin measured at `rtt_us`, now.
    pub fn with_rtt(mut self, host: &str, rtt_us: u32) -> EdgeSpec {
        self.rtts.insert(
            host.to_string(),
            OriginRtt {
                host: host.to_string(),
                rtt_us,
                measured_at_unix_s: self.now_unix_s,
            },
        );
        self
    }
}

/// The edge's DNS server with a hint book, on an ephemeral port of
/// 127.0.0.1 (UDP and TCP), served from a tokio task.
pub struct LoopbackEdge {
    /// The server's state (hint book, counters).
    pub dns: Arc<EdgeDns>,
    /// Its address, UDP and TCP.
    pub addr: SocketAddr,
    /// The serving task.
    pub task: JoinHandle<()>,
}

impl LoopbackEdge {
    /// Builds the hint book of `spec` (every page must encode), binds and
    /// serves; needs a tokio runtime.
    pub async fn start(spec: EdgeSpec) -> LoopbackEdge {
        let responder = Responder {
            zone: Zone::new(spec.zone, 30),
            max_udp_payload: spec.udp_payload.0,
            compact_payload: spec.udp_payload.1,
            upstream: false,
        };
        let dns = Arc::new(EdgeDns::new(responder, spec.forward_from, spec.upstream));
        let (book, failed) = HintBook::build(
            spec.pages,
            &spec.rtts,
            HintPolicy {
                alpha: 0.5,
                ttl_s: 300,
            },
            spec.now_unix_s,
        );
        assert!(failed.is_empty(), "pages without a hint: {failed:?}");
        dns.set_book(book);
        dns.set_limits(spec.limits);
        let (udp, tcp) = bind_dns(SocketAddr::from(([127, 0, 0, 1], 0)), spec.udp_sockets)
            .await
            .unwrap();
        let addr = udp[0].local_addr().unwrap();
        let task = tokio::spawn(serve(dns.clone(), udp, tcp));
        LoopbackEdge { dns, addr, task }
    }
}
