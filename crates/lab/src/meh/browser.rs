//! Browser runs: headless Chromium loads the page through the local
//! proxy (`mewa_client::proxy`) in the client's namespace, with the hint
//! and without, and the NetLog says how long the page took.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use mewa_corpus::Page;
use serde::Serialize;

use super::pairs::prepare_load;
use super::{Dispatch, Policy, Setup};
use crate::bed::{Bed, BedError, NsServer, PORT_PLAIN};
use crate::experiment::Progress;
use mewa_chromium::{load_once, Arrival, LoadFiles};

/// Chromium's managed policy for the loads through the local proxy. Every
/// tunnel through a proxy is a socket of Chromium's per-proxy pool, 32 by
/// default (`MaxConnectionsPerProxy`), where Chromium on its own opens up
/// to 256 sockets, 6 per host: a page with more hosts than 32 (ryanair.com
/// 42, ferguson.com 41) queued its tunnels behind each other only because
/// the hint reaches the browser through a proxy. 99 is the policy's
/// largest value. Chromium alone (no proxy) is not affected by it.
const PROXY_POLICY: &str = "{\"MaxConnectionsPerProxy\": 99}\n";

/// Where Chromium on Linux reads its configuration, managed policies
/// under `policies/managed`.
const CHROMIUM_ETC: &str = "/etc/chromium";

/// Copies the files under `from` (at most a few levels deep, what
/// `/etc/chromium` holds) to `to` and adds [`PROXY_POLICY`] to
/// `to/policies/managed`: the machine's own configuration and policies
/// stay, and the lab's is one more.
fn policy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    fn copy(from: &std::path::Path, to: &std::path::Path, depth: u8) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            let kind = e.file_type()?;
            let dest = to.join(e.file_name());
            if kind.is_dir() && depth > 0 {
                copy(&e.path(), &dest, depth - 1)?;
            } else if kind.is_file() {
                std::fs::copy(e.path(), dest)?;
            }
        }
        Ok(())
    }
    if from.is_dir() {
        copy(from, to, 3)?;
    }
    let managed = to.join("policies").join("managed");
    std::fs::create_dir_all(&managed)?;
    std::fs::write(managed.join("mewa-lab-proxy.json"), PROXY_POLICY)
}

/// Chromium in the client namespace for a load through the proxy: in a
/// private mount namespace whose `/etc/chromium` is a copy of the
/// machine's with [`PROXY_POLICY`] added (the machine's own is not
/// touched). Without `/etc/chromium` (a Chromium packaged elsewhere) it
/// runs with its defaults, and says so once.
fn chromium_through_proxy(
    topo: &mewa_link::runtime::Topology,
    chromium: &std::path::Path,
    work_dir: &std::path::Path,
) -> Result<std::process::Command, BedError> {
    let etc = std::path::Path::new(CHROMIUM_ETC);
    let ours = work_dir.join("chromium-etc");
    if !etc.is_dir() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                "no {CHROMIUM_ETC}: Chromium through the proxy keeps its 32 sockets per proxy"
            )
        });
        return Ok(topo.command(crate::bed::CLIENT, chromium)?);
    }
    if !ours.join("policies").is_dir() {
        policy_dir(etc, &ours)
            .map_err(|e| BedError::Runtime(format!("writing {}: {e}", ours.display())))?;
    }
    crate::replay::with_bind_mount(topo, &ours, CHROMIUM_ETC, chromium)
}

/// A load that lost objects is not a page load: its arrival, or why not.
fn complete(a: Arrival) -> (Option<Arrival>, Option<String>) {
    match a.missing.first() {
        None => (Some(a), None),
        Some(first) => {
            let why = format!(
                "{} of {} objects missing, first {first}",
                a.missing.len(),
                a.objects
            );
            (None, Some(why))
        }
    }
}

/// One page load by headless Chromium: through the local proxy with the
/// hint, on its own without.
#[derive(Debug, Clone, Serialize)]
pub struct BrowserRun {
    /// Page name.
    pub page: String,
    /// Run index.
    pub run: usize,
    /// With the hint (through the local proxy); without, Chromium loads the
    /// page on its own, a browser's own behaviour and the strongest
    /// baseline.
    pub with_hint: bool,
    /// The page's own load in Chromium's NetLog, seconds: from the request
    /// for the page's URL to the last event of a request for one of its
    /// objects ([`netlog_times`]).
    pub plt_s: Option<f64>,
    /// From the same start to the start of the page's last request: how
    /// long Chromium took to ask for everything. What follows it is the
    /// only part of the load more connections can shorten.
    pub requested_s: Option<f64>,
    /// Connections the proxy opened for the page's host (0 without the
    /// hint: Chromium's own).
    pub n: usize,
    /// The proxy's UDP answer from the edge, bytes (0 without the hint).
    pub answer_bytes: usize,
    /// The URL list came over TCP beside a compact UDP hint.
    pub urls_over_tcp: bool,
    /// How long before the proxy's connections to the page's host were
    /// ready it had the URL list, ms (negative: after; none: never).
    pub urls_lead_ms: Option<f64>,
    /// Objects the proxy prefetched for the page (every host).
    pub prefetched: u64,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

/// What the proxy saw of one load with the hint.
#[derive(Debug, Default)]
struct ProxySaw {
    n: usize,
    answer_bytes: usize,
    urls_over_tcp: bool,
    urls_lead_ms: Option<f64>,
    prefetched: u64,
    /// The quickest TCP handshake of the page host's connections, s.
    handshake_s: Option<f64>,
}

/// Loads each page in headless Chromium with the Chromium binary and run
/// count of [`Setup::browser`] (nothing when it is `None`), back to back:
/// with the hint through the local proxy ([`mewa_client::proxy`], planning
/// with `bandwidth_bps`) in the client's namespace, and without it on its
/// own ([`crate::replay::with_chromium`]: its own connections and
/// priorities, names as the testbed serves them).
pub fn browser_runs(
    bed: &Bed,
    edge: SocketAddr,
    pages: &[&Page],
    cfg: &Setup,
    bandwidth_bps: f64,
    work_dir: &std::path::Path,
    progress: &Progress,
) -> Result<Vec<BrowserRun>, BedError> {
    let Some((chromium, runs)) = &cfg.browser else {
        return Ok(Vec::new());
    };
    let (chromium, runs) = (chromium.as_path(), *runs);
    let topo = bed.running()?;
    // Chromium speaks HTTP/2 to the proxy over TLS, as seed 000's Chrome
    // did to its local nghttpx: over HTTP/1.1 it keeps at most six requests
    // per host in flight, which n connections behind the proxy cannot undo.
    let certs = mewa_origin::Ca::load_or_create(&cfg.ca_dir)
        .and_then(|ca| ca.issue(&[]))
        .map_err(|e| BedError::Runtime(format!("the proxy's certificate: {e}")))?;
    let tls = Arc::new(
        certs
            .tcp_config()
            .map_err(|e| BedError::Runtime(format!("the proxy's TLS: {e}")))?,
    );
    // https:// pages: the proxy terminates the browser's CONNECT tunnels
    // with a certificate for each host (same key, so Chromium's SPKI pin
    // trusts it), and speaks TLS to the origin.
    let ca = Arc::new(
        mewa_origin::Ca::load_or_create(&cfg.ca_dir)
            .map_err(|e| BedError::Runtime(format!("the test CA: {e}")))?,
    );
    let upstream = Arc::new(
        certs
            .client_config(&[b"h2"])
            .map_err(|e| BedError::Runtime(format!("TLS towards the origin: {e}")))?,
    );
    let issued: Arc<std::sync::Mutex<HashMap<String, Arc<rustls::ServerConfig>>>> = Arc::default();
    let intercept = mewa_client::proxy::Intercept {
        certs: Arc::new(move |host: &str| {
            let mut m = mewa_model::sync::lock(&issued);
            if let Some(c) = m.get(host) {
                return Ok(c.clone());
            }
            let c = ca
                .issue(&[host])
                .and_then(|c| c.tcp_config())
                .map_err(|e| e.to_string())?;
            let c = Arc::new(c);
            m.insert(host.to_string(), c.clone());
            Ok(c)
        }),
    };
    let total = pages.len() * runs * 2;
    let mut out = Vec::with_capacity(total);
    // The round trip the proxy's earlier loads saw after the radio's
    // promotion, as the phone's memory ([`mewa_client::rate::RecentRtt`]).
    let mut recent = mewa_client::rate::RecentRtt::new();
    for r in 0..runs {
        for (i, page) in pages.iter().enumerate() {
            let pair = r * pages.len() + i;
            for with_hint in [r % 2 == 1, r % 2 == 0] {
                prepare_load(topo, cfg, pair)?;
                progress.step(
                    out.len(),
                    total,
                    &format!("Chromium run {}/{runs}, {}", r + 1, page.name),
                );
                let (arrival, error, saw) = if !with_hint {
                    let (arrival, error) = match crate::replay::with_chromium(
                        bed,
                        page,
                        &crate::replay::Browser::plain(chromium),
                        &cfg.ca_dir,
                        work_dir,
                        // Names through the edge over the radio, as the
                        // proxy of the hint variant resolves them.
                        Some(edge),
                        cfg.keep_netlogs
                            .then(|| work_dir.join(format!("{}-{r}-false.netlog.json", page.name)))
                            .as_deref(),
                    ) {
                        Ok(a) => complete(a),
                        Err(e) => (None, Some(e.to_string())),
                    };
                    (arrival, error, ProxySaw::default())
                } else {
                    let mut pc = mewa_client::proxy::ProxyConfig::new(edge, bandwidth_bps);
                    pc.origin_tls_port = crate::bed::PORT_TLS;
                    pc.upstream_tls = Some(upstream.clone());
                    pc.intercept = Some(intercept.clone());
                    pc.origin_port = PORT_PLAIN;
                    pc.use_hints = with_hint;
                    pc.recent_rtt = recent
                        .estimate_s()
                        .and_then(|s| Duration::try_from_secs_f64(s).ok());
                    pc.prefetch = cfg.prefetch;
                    pc.first_flight_budget = cfg.first_flight_budget;
                    pc.image_hold = cfg.image_hold;
                    pc.images_after_document = !cfg.images_with_document;
                    pc.hold_other_hosts_images = cfg.hold_other_hosts_images;
                    if cfg.one_connection {
                        pc.max_connections = 1;
                    }
                    pc.warm_first = cfg.policy == Policy::WarmFirst;
                    // The proxy pulls at the rate as the loader does; it has no
                    // fixed-budget pull, so `Pull` runs it as seed 000 pushes.
                    pc.dispatch = match cfg.dispatch {
                        Dispatch::Pull => Dispatch::Push,
                        d => d,
                    };
                    let (n_tx, n_rx) = mpsc::channel::<ProxySaw>();
                    let host = mewa_hint::page::host_of(&page.main).unwrap_or_default();
                    let tls = tls.clone();
                    let (proxy, port) = NsServer::start(
                        topo,
                        crate::bed::CLIENT,
                        0,
                        "proxy",
                        Duration::from_secs(10),
                        move |ready, stop| async move {
                            let l = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                                Ok(l) => l,
                                Err(e) => return ready.fail(e),
                            };
                            match l.local_addr() {
                                Ok(a) => ready.ok(a.port()),
                                Err(e) => return ready.fail(e),
                            }
                            let proxy = mewa_client::proxy::Proxy::new(pc);
                            let serving = tokio::spawn(proxy.clone().serve_tls(l, tls));
                            stop.wait().await;
                            serving.abort();
                            let saw = match proxy.session_of(&host).await {
                                Some(s) => {
                                    let t = s.timeline();
                                    ProxySaw {
                                        n: s.connections(),
                                        answer_bytes: t.answer_bytes,
                                        urls_over_tcp: t.urls_over_tcp,
                                        urls_lead_ms: t.connected.zip(t.urls).map(|(c, u)| {
                                            (c.as_secs_f64() - u.as_secs_f64()) * 1000.0
                                        }),
                                        prefetched: s.prefetch_counts().0,
                                        handshake_s: Some(s.handshake_rtt().as_secs_f64()),
                                    }
                                }
                                None => ProxySaw::default(),
                            };
                            let st = &proxy.stats;
                            tracing::info!(
                            "proxy: browser connections h2 {}, HTTP/1.1 {}; {} requests forwarded",
                            st.browser_h2.load(std::sync::atomic::Ordering::Relaxed),
                            st.browser_h1.load(std::sync::atomic::Ordering::Relaxed),
                            st.forwarded.load(std::sync::atomic::Ordering::Relaxed)
                        );
                            let _ = n_tx.send(saw);
                        },
                    )?;
                    let profile = work_dir.join(format!("profile-{}-{r}-{with_hint}", page.name));
                    let netlog =
                        work_dir.join(format!("{}-{r}-{with_hint}.netlog.json", page.name));
                    let mut cmd = chromium_through_proxy(topo, chromium, work_dir)?;
                    cmd.arg("--disable-http-cache")
                        .arg(format!("--proxy-server=https://127.0.0.1:{port}"));
                    let files = LoadFiles {
                        profile: &profile,
                        netlog: &netlog,
                        keep: cfg.keep_netlogs.then_some(netlog.as_path()),
                    };
                    let url = crate::replay::browser_url(bed, page);
                    let result = load_once(
                        &mut cmd,
                        chromium,
                        page,
                        &url,
                        files,
                        &certs.leaf_spki_sha256,
                    );
                    proxy.stop();
                    let saw = n_rx.try_recv().unwrap_or_default();
                    if let Some(h) = saw.handshake_s {
                        recent.observe(h);
                    }
                    let (arrival, error) = match result {
                        Ok(a) => complete(a),
                        Err(e) => (None, Some(e)),
                    };
                    (arrival, error, saw)
                };
                out.push(BrowserRun {
                    page: page.name.clone(),
                    run: r,
                    with_hint,
                    plt_s: arrival.as_ref().and_then(|a| a.plt_s),
                    requested_s: arrival.as_ref().and_then(|a| a.requested_s),
                    n: saw.n,
                    answer_bytes: saw.answer_bytes,
                    urls_over_tcp: saw.urls_over_tcp,
                    urls_lead_ms: saw.urls_lead_ms,
                    prefetched: saw.prefetched,
                    error,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's copy of `/etc/chromium` keeps the machine's files and
    /// policies and adds the per-proxy socket policy beside them.
    #[test]
    fn the_policy_copy_keeps_the_machines_files() {
        let base = std::env::temp_dir().join(format!("mewa-policy-{}", std::process::id()));
        let from = base.join("etc");
        let to = base.join("ours");
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(from.join("policies/managed")).unwrap();
        std::fs::write(from.join("master_preferences"), "{}").unwrap();
        std::fs::write(from.join("policies/managed/site.json"), "{\"A\": 1}").unwrap();
        policy_dir(&from, &to).unwrap();
        let read = |p: &str| std::fs::read_to_string(to.join(p)).unwrap();
        assert_eq!(read("master_preferences"), "{}");
        assert_eq!(read("policies/managed/site.json"), "{\"A\": 1}");
        let ours: serde_json::Value =
            serde_json::from_str(&read("policies/managed/mewa-lab-proxy.json")).unwrap();
        assert_eq!(ours["MaxConnectionsPerProxy"], 99);
        // The machine's folder is untouched.
        assert!(!from.join("policies/managed/mewa-lab-proxy.json").exists());
        // No /etc/chromium at all: the policy alone.
        let bare = base.join("bare");
        policy_dir(&base.join("missing"), &bare).unwrap();
        assert!(bare.join("policies/managed/mewa-lab-proxy.json").is_file());
        let _ = std::fs::remove_dir_all(&base);
    }
}
