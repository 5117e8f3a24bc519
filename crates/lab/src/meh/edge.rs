//! The mobile edge inside the testbed: `mewa-edge` with a fresh SQLite
//! store of the corpus, its latency monitor and its DNS server, in the
//! edge's namespace.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mewa_corpus::Corpus;
use mewa_edge::app::{now_unix_s, Edge};
use mewa_edge::config::EdgeConfig;
use mewa_edge::store::Store;

use crate::bed::{Bed, NsServer, EDGE, PORT_PLAIN};
use crate::experiment::ExperimentError;

/// Stores the corpus in a fresh edge store at `store` (an earlier one
/// there is removed), starts the edge in its namespace, measures the wired
/// RTT once and builds the hints before returning (so the first query
/// already gets a hint with the RTT). Returns the running edge and the
/// measured wired RTT to the first page's host (ms).
pub(crate) fn start_edge(
    bed: &Bed,
    corpus: &Corpus,
    store: &Path,
) -> Result<(NsServer, Option<f64>), ExperimentError> {
    let topo = bed.running()?;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = store.to_path_buf().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let pages: Vec<_> = corpus
        .pages
        .iter()
        .map(mewa_corpus::convert::to_page_meta)
        .collect();
    Store::open(store)
        .and_then(|mut s| s.put_pages(&pages, "corpus", now_unix_s()))
        .map_err(ExperimentError::EdgeStore)?;
    let mut config = EdgeConfig::default();
    config.dns.listen = SocketAddr::from(([0, 0, 0, 0], 53));
    config.dns.udp_sockets = 1;
    config.admin.listen = SocketAddr::from(([127, 0, 0, 1], 8053));
    config.store.path = store.to_path_buf();
    config.monitor.port = PORT_PLAIN;
    config.monitor.every_s = 5;
    config.hint.ttl_s = 3600;
    for p in &corpus.pages {
        for h in p.hosts() {
            config.zone.insert(h.to_string(), vec![bed.addr_of(h)]);
        }
    }
    let main_host = corpus
        .pages
        .first()
        .and_then(|p| mewa_hint::page::host_of(&p.main));
    let started = NsServer::start(
        topo,
        EDGE,
        1,
        "edge",
        Duration::from_secs(60),
        move |ready, stop| async move {
            let (edge, bound) = match Edge::bind(config).await {
                Ok(x) => x,
                Err(e) => return ready.fail(e),
            };
            // Hosts come from the hint book: build it, probe, rebuild with
            // the measured RTTs.
            let first = async {
                edge.rebuild().await.map_err(|e| e.to_string())?;
                let (probed, failed) = edge.probe_origins().await;
                if probed == 0 || failed > 0 {
                    return Err(format!(
                        "latency monitor: {failed} of {probed} origin probe(s) failed"
                    ));
                }
                edge.rebuild().await.map_err(|e| e.to_string())?;
                let rtt = match main_host {
                    Some(h) => mewa_edge::app::with_store(&edge.store, move |s| s.origin_rtt(&h))
                        .await
                        .map_err(|e| e.to_string())?
                        .map(|o| f64::from(o.rtt_us) / 1000.0),
                    None => None,
                };
                Ok::<_, String>(rtt)
            };
            match first.await {
                Ok(rtt) => ready.ok(rtt),
                Err(e) => return ready.fail(e),
            }
            edge.serve(bound, stop.wait()).await;
        },
    )?;
    Ok(started)
}
