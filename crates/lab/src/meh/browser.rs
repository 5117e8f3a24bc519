//! Browser runs: headless Chromium loads the page through the local
//! proxy (`mewa_client::proxy`) in the client's namespace, with the hint
//! and without, and the NetLog says how long the page took.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use mewa_chromium::Measure;
use mewa_corpus::Page;
use mewa_loader::record::Protocol;
use mewa_origin::{Ca, Certs};

use super::before_load::prepare_load;
use super::config::{arms_in_order, Arm, Dispatch, Policy};
use super::planner::ProxyRtt;
use super::record::{BrowserRun, Record};
use super::setup::Setup;
use crate::bed::{Bed, BedError, NsServer, CLIENT, PORT_PLAIN, PORT_TLS};
use crate::experiment::ExperimentError;
use crate::measured;

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
fn policy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fn copy(from: &Path, to: &Path, depth: u8) -> std::io::Result<()> {
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
    chromium: &Path,
    work_dir: &Path,
) -> Result<std::process::Command, ExperimentError> {
    let etc = Path::new(CHROMIUM_ETC);
    let ours = work_dir.join("chromium-etc");
    if !etc.is_dir() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                "no {CHROMIUM_ETC}: Chromium through the proxy keeps its 32 sockets per proxy"
            )
        });
        return Ok(topo.command(CLIENT, chromium).map_err(BedError::from)?);
    }
    if !ours.join("policies").is_dir() {
        policy_dir(etc, &ours).map_err(ExperimentError::io("writing", &ours))?;
    }
    Ok(crate::replay::with_bind_mount(
        topo,
        &ours,
        CHROMIUM_ETC,
        chromium,
    )?)
}

/// What the proxy saw of one load with the hint.
#[derive(Debug, Default)]
struct ProxySaw {
    n: usize,
    answer_bytes: usize,
    urls_over_tcp: bool,
    urls_lead_ms: Option<f64>,
    prefetched: u64,
    /// The proxy's handshake round trip to the page's host.
    handshake: Option<Duration>,
}

/// What the proxies of one testbed's browser runs share: the test CA's
/// certificates for Chromium's side and for the origin's.
pub(crate) struct ProxyTls {
    /// The proxy's own certificate (Chromium pins its key).
    certs: Certs,
    /// The proxy's TLS towards Chromium.
    tls: Arc<rustls::ServerConfig>,
    /// The proxy's TLS towards the origin.
    upstream: Arc<rustls::ClientConfig>,
    /// A certificate per host for the `CONNECT` tunnels it terminates.
    intercept: mewa_client::proxy::Intercept,
}

impl ProxyTls {
    /// Certificates from the test CA in `ca_dir` (made there if missing).
    pub(crate) fn new(ca_dir: &Path) -> Result<ProxyTls, ExperimentError> {
        let tls_err = |what| move |source| ExperimentError::Tls { what, source };
        // Chromium speaks HTTP/2 to the proxy over TLS, as seed 000's
        // Chrome did to its local nghttpx: over HTTP/1.1 it keeps at most
        // six requests per host in flight, which n connections behind the
        // proxy cannot undo.
        let ca = Ca::load_or_create(ca_dir).map_err(tls_err("the test CA"))?;
        let certs = ca.issue(&[]).map_err(tls_err("the proxy's certificate"))?;
        let tls = Arc::new(certs.tcp_config().map_err(tls_err("the proxy's TLS"))?);
        // https:// pages: the proxy terminates the browser's CONNECT
        // tunnels with a certificate for each host (same key, so
        // Chromium's SPKI pin trusts it), and speaks TLS to the origin.
        let upstream = Arc::new(
            certs
                .client_config(&[b"h2"])
                .map_err(tls_err("TLS towards the origin"))?,
        );
        let ca = Arc::new(ca);
        let issued: Arc<std::sync::Mutex<HashMap<String, Arc<rustls::ServerConfig>>>> =
            Arc::default();
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
        Ok(ProxyTls {
            certs,
            tls,
            upstream,
            intercept,
        })
    }
}

/// Where the browser runs load: the testbed, its edge, the proxies'
/// certificates and the folder for profiles and NetLogs.
pub(crate) struct Browsing<'a> {
    /// The testbed.
    pub(crate) bed: &'a Bed,
    /// The edge's DNS server, as the client reaches it.
    pub(crate) edge: SocketAddr,
    /// The settings; [`Setup::browser`] names Chromium and the run count.
    pub(crate) setup: &'a Setup,
    /// The proxies' certificates.
    pub(crate) tls: &'a ProxyTls,
    /// Profiles, NetLogs, the lab's copy of `/etc/chromium`.
    pub(crate) work_dir: &'a Path,
    /// The bandwidth the proxy plans with, bit/s (what the client's own
    /// loads delivered, or what it is told).
    pub(crate) bandwidth_bps: f64,
}

/// Chromium's loads of `page` in run `run`, the `pair`-th of the run's
/// sets: one per arm ([`arms_in_order`]: `cold` and the configured
/// others), back to back on the same stretch of the trace, the order
/// rotating from run to run so that no arm always goes first. The `meh`
/// arm's proxy starts from `proxy_rtt`, which takes in its handshake.
/// `within` hears of each load as it starts.
pub(crate) fn browser_set(
    b: &Browsing<'_>,
    page: &Page,
    run: usize,
    pair: usize,
    proxy_rtt: &mut ProxyRtt,
    within: &dyn Fn(usize, &str),
) -> Result<Vec<Record>, ExperimentError> {
    let Some((chromium, runs)) = &b.setup.browser else {
        return Ok(Vec::new());
    };
    let arms = arms_in_order(&b.setup.arms);
    let k = arms.len();
    let mut out = Vec::with_capacity(k);
    for i in 0..k {
        let arm = arms[(i + run) % k];
        within(
            i,
            &format!("Chromium run {}/{runs}, {} {arm}", run + 1, page.name),
        );
        let load = arm_load(b, chromium, page, run, pair, arm, proxy_rtt)?;
        proxy_rtt.observe(&load);
        out.push(Record::Chromium(Box::new(load)));
    }
    Ok(out)
}

/// One Chromium load of `page` in `arm` on pair `pair`'s stretch of the
/// trace ([`crate::measured`]): the returning visitor's earlier visit for
/// `predictor`, the radio link made ready ([`prepare_load`]), the measured
/// load with screenshots and the configured CPU slowdown, and what its
/// NetLog says. A load that did not reach its load event is a record with
/// an error; an `Err` is a testbed that failed.
fn arm_load(
    b: &Browsing<'_>,
    chromium: &Path,
    page: &Page,
    run: usize,
    pair: usize,
    arm: Arm,
    proxy_rtt: &ProxyRtt,
) -> Result<BrowserRun, ExperimentError> {
    let topo = b.bed.running()?;
    let tag = format!("{}-{run}-{arm}", page.name);
    let proxy = match arm {
        Arm::Meh => Some(ProxyRun::start(b, page, proxy_rtt)?),
        _ => None,
    };
    let mut cmd = match &proxy {
        Some(p) => {
            let mut c = chromium_through_proxy(topo, chromium, b.work_dir)?;
            c.arg("--disable-http-cache")
                .arg(format!("--proxy-server=https://127.0.0.1:{}", p.port));
            c
        }
        // Names through the edge over the radio, as the proxy of the hint
        // arm resolves them.
        None => crate::replay::chromium_with_dns(b.bed, chromium, b.work_dir, &tag, b.edge)?,
    };
    if arm == Arm::H3 {
        cmd.args(crate::browser::protocol_flags(Protocol::H3));
    }
    let setup = b.setup;
    let load = measured::Load {
        bed: b.bed,
        chromium,
        cmd,
        spki: &b.tls.certs.leaf_spki_sha256,
        work_dir: b.work_dir,
        tag: &tag,
        page,
        url: crate::replay::browser_url(b.bed, page),
        measure: Measure {
            cpu_slowdown: setup.cpu_slowdown,
            screenshots: true,
            settle: measured::SETTLE,
        },
        revisit: arm == Arm::Predictor,
        // Kept (`keep_netlogs`) in the result folder's chromium/, named by
        // page, run and arm.
        keep_netlog: setup.keep_netlogs,
        timeout: setup.timeout,
    };
    let early_hints = arm == Arm::EarlyHints;
    if early_hints {
        b.bed.set_early_hints(true);
    }
    let got = measured::measure(load, || prepare_load(topo, setup, pair));
    if early_hints {
        b.bed.set_early_hints(false);
    }
    let saw = proxy.map(ProxyRun::stop).unwrap_or_default();
    let got = got?;
    let _ = std::fs::remove_file(b.work_dir.join(format!("resolv-{tag}.conf")));
    Ok(BrowserRun {
        page: page.name.clone(),
        run,
        with_hint: arm == Arm::Meh,
        plt_s: got.plt_s,
        requested_s: got.requested_s,
        n: saw.n,
        answer_bytes: saw.answer_bytes,
        urls_over_tcp: saw.urls_over_tcp,
        urls_lead_ms: saw.urls_lead_ms,
        prefetched: saw.prefetched,
        error: got.error,
        handshake_ns: saw
            .handshake
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        arm: Some(arm),
        cpu_slowdown: Some(setup.cpu_slowdown),
        metrics: got.metrics,
        early: got.early,
        predicted: got.predicted,
        protocol: got.protocol,
        floor_s: super::floor::floor_s(
            &setup.radio,
            &super::floor::FloorInput {
                promotion: setup.rrc.promotion(),
                radio_rtt_ms: setup.radio_rtt_ms,
                wired_rtt_ms: setup.wired_rtt_ms,
                trace_at_ms: (pair as u64).saturating_mul(super::before_load::TRACE_STRIDE_MS),
                bytes: page.total_bytes(),
            },
        ),
    })
}

/// The local proxy of one `meh` load, serving in the client namespace.
struct ProxyRun {
    server: NsServer,
    port: u16,
    saw: mpsc::Receiver<ProxySaw>,
}

impl ProxyRun {
    /// A fresh proxy that asks the edge for the hint, its round-trip
    /// memory starting from `proxy_rtt`.
    fn start(
        b: &Browsing<'_>,
        page: &Page,
        proxy_rtt: &ProxyRtt,
    ) -> Result<ProxyRun, ExperimentError> {
        let cfg = b.setup;
        let topo = b.bed.running()?;
        let mut pc = mewa_client::proxy::ProxyConfig::new(b.edge, b.bandwidth_bps);
        pc.origin_tls_port = PORT_TLS;
        pc.upstream_tls = Some(b.tls.upstream.clone());
        pc.intercept = Some(b.tls.intercept.clone());
        pc.origin_port = PORT_PLAIN;
        pc.use_hints = true;
        pc.recent_rtt = proxy_rtt.estimate();
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
        let tls = b.tls.tls.clone();
        let (server, port) = NsServer::start(
            topo,
            CLIENT,
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
                            urls_lead_ms: t
                                .connected
                                .zip(t.urls)
                                .map(|(c, u)| (c.as_secs_f64() - u.as_secs_f64()) * 1000.0),
                            prefetched: s.prefetch_counts().0,
                            handshake: Some(s.handshake_rtt()),
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
        Ok(ProxyRun {
            server,
            port,
            saw: n_rx,
        })
    }

    /// Stops the proxy; what it saw of the load.
    fn stop(self) -> ProxySaw {
        self.server.stop();
        self.saw.try_recv().unwrap_or_default()
    }
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
