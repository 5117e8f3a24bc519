//! The loopback servers (the `servers` feature): `mewa-origin` and
//! `mewa-edge`'s DNS server on 127.0.0.1, each from a tokio task.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
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
        early_hints: None,
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
