//! The servers the accelerated variants need on the edge: the accelerator
//! itself (`mewa accel serve`, one site per group of pages) and two DNS
//! servers (every host to its origin; the page's main hosts to the
//! accelerator), each in the edge's namespace.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mewa_accel::server::config::{Listen, TlsFiles};
use mewa_accel::server::{Accel, ServeConfig, Server};
use mewa_accel::site::{normalize_host, Site};
use mewa_corpus::Corpus;

use super::sites::{merge_sites, site_of};
use crate::bed::{Bed, NsServer, EDGE};
use crate::experiment::ExperimentError;

/// The accelerator running on the edge, and how to reach it.
pub(super) struct Running {
    pub(super) server: NsServer,
    pub(super) accel: Arc<Accel>,
    pub(super) addr: IpAddr,
    /// DNS on the edge for the direct variants (every host to its
    /// origin) and for the accelerated ones (the main host to the
    /// accelerator), each at its own address of the edge, port 53.
    pub(super) dns: Option<(IpAddr, IpAddr, Vec<NsServer>)>,
    /// The accelerator's certificate. It has the lab's one leaf key, so
    /// its SPKI pin makes Chromium trust the origins' certificates too.
    pub(super) certs: mewa_origin::Certs,
}

/// A DNS server on the edge answering `zone` (mewa-edge with an empty page
/// store: plain A records, no hints), listening on `ip`:53.
fn start_dns(
    bed: &Bed,
    zone: BTreeMap<String, Vec<IpAddr>>,
    ip: IpAddr,
    admin_port: u16,
    work: &Path,
) -> Result<NsServer, ExperimentError> {
    let topo = bed.running()?;
    let mut config = mewa_edge::config::EdgeConfig::default();
    config.dns.listen = std::net::SocketAddr::new(ip, 53);
    config.dns.udp_sockets = 1;
    config.admin.listen = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    config.store.path = work.join(format!("dns-{admin_port}.sqlite"));
    for suffix in ["", "-wal", "-shm"] {
        let mut p = config.store.path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    config.zone = zone;
    let (server, ()) = NsServer::start(
        topo,
        EDGE,
        1,
        "DNS",
        Duration::from_secs(20),
        move |ready, stop| async move {
            let (edge, bound) = match mewa_edge::app::Edge::bind(config).await {
                Ok(x) => x,
                Err(e) => return ready.fail(e),
            };
            ready.ok(());
            edge.serve(bound, stop.wait()).await;
        },
    )?;
    Ok(server)
}

pub(super) fn start_accel(
    bed: &Bed,
    corpus: &Corpus,
    ca_dir: &Path,
    work: &Path,
) -> Result<(Running, Vec<Arc<Site>>), ExperimentError> {
    let topo = bed.running()?;
    let sites = merge_sites(corpus.pages.iter().filter_map(site_of).collect());
    let hosts: Vec<String> = sites.iter().flat_map(|s| s.hosts.iter().cloned()).collect();
    let cert_err = |e: String| ExperimentError::Config {
        field: "accelerator certificate",
        message: e,
    };
    let ca = mewa_origin::Ca::load_or_create(ca_dir).map_err(|e| cert_err(e.to_string()))?;
    let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let certs = ca.issue(&names).map_err(|e| cert_err(e.to_string()))?;
    let tls = TlsFiles {
        cert: work.join("accel-cert.pem"),
        key: work.join("accel-key.pem"),
    };
    certs
        .write_pem(&tls.cert, &tls.key)
        .map_err(|e| cert_err(e.to_string()))?;
    let mut cfg = ServeConfig {
        listen: Listen {
            https: Some(std::net::SocketAddr::from(([0, 0, 0, 0], 443))),
            http: None,
            admin: None,
        },
        tls: Some(tls),
        site: sites,
        ..ServeConfig::default()
    };
    cfg.upstream.ca_file = bed.ca_cert().to_path_buf();
    for p in &corpus.pages {
        for o in &p.objects {
            if let Ok(h) = normalize_host(&o.host) {
                cfg.upstream
                    .resolve
                    .insert(h, bed.addr_of(&o.host).to_string());
            }
        }
    }
    let site_list = cfg
        .sites()
        .map_err(ExperimentError::AccelConfig)?
        .iter()
        .cloned()
        .collect();
    let (server, accel) = NsServer::start(
        topo,
        EDGE,
        2,
        "accelerator",
        Duration::from_secs(20),
        move |ready, stop| async move {
            let server = match Server::bind(&cfg).await {
                Ok(s) => s,
                Err(e) => return ready.fail(e),
            };
            ready.ok(server.accel().clone());
            server.serve(stop.wait()).await;
        },
    )?;
    let addr = IpAddr::V4(
        topo.addr(EDGE)
            .map_err(|e| ExperimentError::Bed(e.into()))?,
    );
    Ok((
        Running {
            server,
            accel,
            addr,
            dns: None,
            certs,
        },
        site_list,
    ))
}

/// The two DNS servers (direct and accelerated zones) on the edge.
pub(super) fn start_both_dns(
    bed: &Bed,
    corpus: &Corpus,
    accel_addr: IpAddr,
    sites: &[Arc<Site>],
    work: &Path,
) -> Result<(IpAddr, IpAddr, Vec<NsServer>), ExperimentError> {
    let topo = bed.running()?;
    let bed_err = |e: mewa_link::runtime::Error| ExperimentError::Bed(e.into());
    let direct_ip = IpAddr::V4(topo.addr(EDGE).map_err(bed_err)?);
    let accel_ip = IpAddr::V4(
        topo.addr_towards(EDGE, crate::bed::SERVER)
            .map_err(bed_err)?,
    );
    let mut direct = BTreeMap::new();
    for p in &corpus.pages {
        for o in &p.objects {
            if normalize_host(&o.host).is_ok() {
                direct.insert(o.host.clone(), vec![bed.addr_of(&o.host)]);
            }
        }
    }
    let mut through = direct.clone();
    for s in sites {
        for h in s.hosts() {
            through.insert(h.to_owned(), vec![accel_addr]);
        }
    }
    let a = start_dns(bed, direct, direct_ip, 8053, work)?;
    let b = start_dns(bed, through, accel_ip, 8054, work)?;
    Ok((direct_ip, accel_ip, vec![a, b]))
}
