//! `mewa lab accel`: seed 004's evaluation of the accelerator.
//!
//! Seed 004 §IV: "The Web page includes 42 image files, which are stored in
//! seven different domains, a CSS file, and an HTML file; the total size of
//! this Web page is 320 Kbytes." "the upload bandwidth is set to 1024 kbps;
//! the download bandwidth is set to 128 kbps, 256 kbps, 512 kbps, 1024
//! kbps, 2048 kbps, and 4096 kbps; and the RTT is set to 150 ms." The
//! client loads the page over HTTP, HTTPS, SPDY directly from the origins,
//! and through the accelerator.
//!
//! Testbed: `client ⇄ link (the seed's RTT and rates) ⇄ edge ⇄ wired link
//! ⇄ origin`. Every host of the page is its own server (its own address
//! and certificate), as seed 004's seven VMs were, so a browser cannot
//! coalesce them onto one HTTP/2 connection. The accelerator (`mewa accel
//! serve`) runs on the edge, beside the origins as in seed 004 Fig. 4 (the
//! emulated link is between the client and everything else); the page's
//! main host resolves to it.
//!
//! Variants:
//! - `h1`: HTTP/1.1 in clear (six connections per host);
//! - `https`: HTTP/1.1 over TLS (Chromium with `--disable-http2`);
//! - `h2`: HTTP/2 over TLS to each domain (seed 004's "SPDY");
//! - `accel-cold`: HTTP/2 through the accelerator with its cache emptied
//!   before the load (it fetches everything from the origins);
//! - `accel-warm`: the same with the cache as the previous load left it.
//!
//! Chromium (headless, a fresh profile per load, its NetLog's span) gives
//! the headline figures; the built-in loader (`--tool loader`) a quick
//! sweep. Chromium looks names up with a DNS server on the edge, across
//! the link, as a phone asks its operator's resolver and as seed 004's
//! testbed had its DNS servers behind the emulated link: one page domain
//! costs one lookup, seven cost seven (in parallel). The loader resolves
//! from a table (no lookups).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mewa_accel::cache::Purge;
use mewa_accel::mapping::FoldContext;
use mewa_accel::rewrite::css::CssRewriter;
use mewa_accel::rewrite::html::{rewrite_html, HtmlOptions};
use mewa_accel::server::config::{Listen, TlsFiles};
use mewa_accel::server::{Accel, ServeConfig, Server};
use mewa_accel::site::{normalize_host, Site, SiteConfig};
use mewa_corpus::{generate, Corpus, Page, Preset};
use mewa_link::core::RateSpec;
use mewa_link::runtime::LinkOptions;
use serde::{Deserialize, Serialize};

use crate::bed::{link_of, Bed, NsServer, OriginSettings, EDGE};
use crate::experiment::{
    at_least_one, ca_dir_or_default, needs_root, CorpusChoice, ExperimentError, Progress,
};
use mewa_loader::record::Protocol;
use mewa_loader::LoadOptions;
use mewa_report::median;
use mewa_report::plot::{Mark, Series};
use mewa_report::ResultFolder;
use mewa_report::Table;
use mewa_report::{Plot, Section, SectionReport};

/// HTTP/1.1 in clear.
pub const H1: &str = "h1";
/// HTTP/1.1 over TLS.
pub const HTTPS: &str = "https";
/// HTTP/2 over TLS, each domain its own connection.
pub const H2: &str = "h2";
/// HTTP/2 through the accelerator, its cache emptied first.
pub const ACCEL_COLD: &str = "accel-cold";
/// HTTP/2 through the accelerator, its cache warm.
pub const ACCEL_WARM: &str = "accel-warm";
/// HTTP/2 through the warm accelerator with the Mobile Edge Hint client's
/// connection count (seed 000 Algorithm 1 on the page's size, the link's
/// rate and RTT, at most 6) and objects balanced by size over them: do the
/// two combine? The loader only.
pub const ACCEL_MEH: &str = "accel-meh";
/// Seed 004's variants, the default, in the order the report shows them.
pub const VARIANTS: [&str; 5] = [H1, HTTPS, H2, ACCEL_COLD, ACCEL_WARM];
/// Every variant (the default ones and [`ACCEL_MEH`]).
pub const ALL_VARIANTS: [&str; 6] = [H1, HTTPS, H2, ACCEL_COLD, ACCEL_WARM, ACCEL_MEH];

/// Headless Chromium.
pub const CHROMIUM: &str = "chromium";
/// The built-in loader.
pub const LOADER: &str = "loader";

/// The journal each load is appended to.
pub const JOURNAL: &str = "runs.jsonl";

/// `mewa lab accel`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccelLabConfig {
    /// Pages of your own (a corpus or recordings) instead of `accel7`.
    pub corpus: Option<CorpusChoice>,
    /// The local test CA (none: the default folder).
    pub ca_dir: Option<PathBuf>,
    /// Round trip of the emulated link, ms.
    pub rtt_ms: u64,
    /// Uplink rate, kbit/s.
    pub up_kbps: u64,
    /// Downlink rates, kbit/s.
    pub down_kbps: Vec<u64>,
    /// Variants (see [`VARIANTS`]).
    pub variants: Vec<String>,
    /// Tools: `chromium`, `loader`.
    pub tools: Vec<String>,
    /// Chromium binary.
    pub chromium: PathBuf,
    /// Loads per page, variant, tool and rate.
    pub runs: usize,
    /// The origins' `Cache-Control: max-age`, s: what lets the accelerator
    /// keep the page between loads (seed 004's is a cache; its origins'
    /// headers are not given).
    pub max_age_s: u32,
    /// Wired round trip between the edge (accelerator) and the origins, ms.
    pub wired_rtt_ms: u64,
    /// Chromium resolves names with a DNS server on the edge, across the
    /// link, as a phone asks its operator's resolver (seed 004's testbed
    /// has its DNS servers behind the emulated link too); off: Chromium's
    /// `--host-resolver-rules`, no lookups. The loader never looks up.
    pub dns: bool,
    /// Keep each Chromium load's NetLog in the result folder's `chromium/`
    /// (`RATE-VARIANT-RUN.netlog.json`, a few MB each), to see where a
    /// load's time went.
    pub keep_netlogs: bool,
    /// Parent of the result folder.
    pub out: PathBuf,
}

impl Default for AccelLabConfig {
    fn default() -> Self {
        AccelLabConfig {
            corpus: None,
            ca_dir: None,
            rtt_ms: 150,
            up_kbps: 1024,
            down_kbps: vec![128, 256, 512, 1024, 2048, 4096],
            variants: VARIANTS.iter().map(|v| (*v).to_owned()).collect(),
            tools: vec![CHROMIUM.into()],
            chromium: PathBuf::from(mewa_chromium::DEFAULT_CHROMIUM),
            runs: 10,
            max_age_s: 3600,
            wired_rtt_ms: 2,
            dns: true,
            keep_netlogs: false,
            out: PathBuf::from("out/lab"),
        }
    }
}

/// One load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccelRun {
    /// Downlink rate, kbit/s.
    pub down_kbps: u64,
    /// The variant.
    pub variant: String,
    /// `chromium` or `loader`.
    pub tool: String,
    /// The page.
    pub page: String,
    /// Load index.
    pub run: usize,
    /// Page load time, s (Chromium: its NetLog's span for the page's
    /// objects; the loader: first connection to last byte); `None` if the
    /// load failed.
    pub plt_s: Option<f64>,
    /// Connections the loader opened (the loader only).
    pub connections: Option<usize>,
    /// What went wrong.
    pub error: Option<String>,
}

/// The page's site: its root's host and, when the root redirects
/// elsewhere, its document's host (the accelerator serves both, so the
/// redirect leads back to it), and every other host of the page that is a
/// DNS name the allowlist accepts as what may be folded.
fn site_of(page: &Page) -> Option<SiteConfig> {
    let root = normalize_host(&page.root()?.host).ok()?;
    let mut hosts = vec![root];
    if let Some(doc) = page.document().and_then(|d| normalize_host(&d.host).ok()) {
        if !hosts.contains(&doc) {
            hosts.push(doc);
        }
    }
    let mut fold: Vec<String> = page
        .objects
        .iter()
        .filter_map(|o| normalize_host(&o.host).ok())
        .filter(|h| !hosts.contains(h))
        .collect();
    fold.sort();
    fold.dedup();
    Some(SiteConfig {
        hosts,
        fold,
        prefix: String::new(),
    })
}

/// One site per group of pages sharing a served host (pages of one site
/// recorded several times), with the union of what they fold: a host may
/// be served by only one site.
fn merge_sites(configs: Vec<SiteConfig>) -> Vec<SiteConfig> {
    let mut out: Vec<SiteConfig> = Vec::new();
    for c in configs {
        match out
            .iter_mut()
            .find(|o| o.hosts.iter().any(|h| c.hosts.contains(h)))
        {
            Some(o) => {
                for h in c.hosts {
                    if !o.hosts.contains(&h) {
                        o.hosts.push(h);
                    }
                }
                o.fold.extend(c.fold);
            }
            None => out.push(c),
        }
    }
    for o in &mut out {
        let hosts = o.hosts.clone();
        o.fold.retain(|h| !hosts.contains(h));
        o.fold.sort();
        o.fold.dedup();
    }
    out
}

/// `page` as the browser sees it through the accelerator, derived from
/// what the accelerator's rewriters write. Each HTML document and
/// stylesheet the accelerator serves (on a site host, 200) is rewritten
/// here as the server would rewrite the origin's body; an object it
/// references moves to the referencing document's host under its folded
/// path ([`mewa_accel::mapping::fold`]) when that path is in the rewritten
/// bytes, and keeps its URL otherwise (frames, `preload as=fetch`, a value
/// the rewriter leaves alone, objects fetched by scripts). Each document
/// and stylesheet gets the size of its rewritten body (the loader checks
/// sizes).
pub fn folded_page(page: &Page, site: &Arc<Site>, scheme: &str) -> Page {
    use mewa_corpus::{Discovery, Kind};
    let mut p = page.clone();
    let body_scheme = if scheme == "http" {
        mewa_corpus::Scheme::Http
    } else {
        mewa_corpus::Scheme::Https
    };
    // What the accelerator sends for each object it rewrites: the URL it
    // is served at and the rewritten bytes.
    let mut rewritten: std::collections::HashMap<u32, (url::Url, Vec<u8>)> =
        std::collections::HashMap::new();
    // Parents before children: ids in a corpus page grow from parent to
    // child, but a few passes make it independent of that.
    for _ in 0..4 {
        let mut changed = false;
        for i in 0..p.objects.len() {
            if rewritten.contains_key(&p.objects[i].id) {
                continue;
            }
            let orig = &page.objects[i];
            if let Some((parent_url, out)) = orig.parent.and_then(|id| rewritten.get(&id)) {
                let by_markup = orig.discovery == Discovery::Html;
                let by_css = orig.discovery == Discovery::Css;
                if (by_markup || by_css) && site.folds(&orig.host) {
                    if let Some(path) =
                        mewa_accel::mapping::fold(site, parent_url, &orig.url(scheme))
                    {
                        // As a whole quoted value (the bodies quote every
                        // URL), with `&` as `&amp;` in HTML attributes.
                        let written = |s: &str| {
                            let q = format!("\"{s}\"");
                            out.windows(q.len()).any(|w| w == q.as_bytes())
                        };
                        if path.starts_with('/')
                            && (written(&path) || written(&path.replace('&', "&amp;")))
                        {
                            let o = &mut p.objects[i];
                            o.host = parent_url.host_str().unwrap_or_default().to_owned();
                            o.path = path;
                        }
                    }
                }
            }
            let o = &p.objects[i];
            let kind = o.kind();
            if !(site.serves(&o.host)
                && o.status() == 200
                && matches!(kind, Kind::Html | Kind::Css))
            {
                continue;
            }
            let (Ok(served), Ok(original), Ok(body)) = (
                url::Url::parse(&o.url(scheme)),
                url::Url::parse(&orig.url(scheme)),
                mewa_corpus::body(page, orig.id, body_scheme),
            ) else {
                continue;
            };
            let out = match kind {
                // A document on a folded path is not rewritten (the
                // server rewrites the site's own documents only).
                Kind::Html if o.host == orig.host => {
                    FoldContext::document(site.clone(), served.clone()).and_then(|ctx| {
                        rewrite_html(ctx, &HtmlOptions::default(), &body)
                            .ok()
                            .map(|(b, _)| b)
                    })
                }
                Kind::Css => {
                    let ctx = if o.host == orig.host {
                        FoldContext::document(site.clone(), served.clone())
                    } else {
                        FoldContext::stylesheet(site.clone(), served.clone(), original)
                    };
                    ctx.map(|ctx| {
                        let mut out = Vec::new();
                        let mut r = CssRewriter::new(ctx);
                        r.write(&body, &mut out);
                        r.end(&mut out);
                        out
                    })
                }
                _ => None,
            };
            if let Some(out) = out {
                let id = o.id;
                p.objects[i].size = out.len() as u64;
                rewritten.insert(id, (served, out));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    p
}

fn check(config: &AccelLabConfig) -> Result<(), ExperimentError> {
    at_least_one("--runs", config.runs)?;
    at_least_one("--down", config.down_kbps.len())?;
    at_least_one("--variant", config.variants.len())?;
    at_least_one("--tool", config.tools.len())?;
    for v in &config.variants {
        if !ALL_VARIANTS.contains(&v.as_str()) {
            return Err(ExperimentError::Config {
                field: "--variant",
                message: format!("{v}: give h1, https, h2, accel-cold, accel-warm or accel-meh"),
            });
        }
    }
    if config.variants.iter().any(|v| v == ACCEL_MEH) && config.tools.iter().any(|t| t != LOADER) {
        return Err(ExperimentError::Config {
            field: "--variant",
            message: "accel-meh runs with --tool loader only (the hint-aware proxy in front of \
                      Chromium is not part of this experiment)"
                .into(),
        });
    }
    for t in &config.tools {
        if t != CHROMIUM && t != LOADER {
            return Err(ExperimentError::Config {
                field: "--tool",
                message: format!("{t}: give chromium or loader"),
            });
        }
    }
    for &r in config.down_kbps.iter().chain([&config.up_kbps]) {
        if !(8..=10_000_000).contains(&r) {
            return Err(ExperimentError::Config {
                field: "--down/--up",
                message: format!("{r} kbit/s: give 8 to 10000000"),
            });
        }
    }
    crate::experiment::rtt_in_range("--rtt", config.rtt_ms)?;
    if config.tools.iter().any(|t| t == CHROMIUM) && !config.chromium.exists() {
        return Err(ExperimentError::Config {
            field: "--chromium",
            message: format!(
                "{} not found: apt-get install chromium, or --tool loader",
                config.chromium.display()
            ),
        });
    }
    Ok(())
}

/// The address groups: each host its own server (generated pages), or as
/// the recording coalesced them.
fn groups_of(corpus: &Corpus) -> Vec<Vec<String>> {
    match corpus.provenance {
        mewa_corpus::Provenance::Imported { .. } => corpus.connection_groups(),
        mewa_corpus::Provenance::Generated { .. } => {
            let mut hosts: Vec<String> = corpus
                .pages
                .iter()
                .flat_map(|p| p.objects.iter().map(|o| o.host.clone()))
                .collect();
            hosts.sort();
            hosts.dedup();
            hosts.into_iter().map(|h| vec![h]).collect()
        }
    }
}

/// The accelerator running on the edge, and how to reach it.
struct Running {
    server: NsServer,
    accel: Arc<Accel>,
    addr: IpAddr,
    /// DNS on the edge for the direct variants (every host to its
    /// origin) and for the accelerated ones (the main host to the
    /// accelerator), each at its own address of the edge, port 53.
    dns: Option<(IpAddr, IpAddr, Vec<NsServer>)>,
    /// The accelerator's certificate. It has the lab's one leaf key, so
    /// its SPKI pin makes Chromium trust the origins' certificates too.
    certs: mewa_origin::Certs,
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

fn start_accel(
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
        .map_err(|e| ExperimentError::Config {
            field: "accelerator sites",
            message: e.to_string(),
        })?
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
fn start_both_dns(
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

/// Runs the experiment.
pub fn run(config: &AccelLabConfig, progress: &Progress) -> Result<SectionReport, ExperimentError> {
    check(config)?;
    let corpus = match &config.corpus {
        Some(c) => c.load()?,
        None => generate(Preset::Accel7, 1),
    };
    let ca_dir = ca_dir_or_default(&config.ca_dir)?;
    needs_root()?;
    let folder = ResultFolder::create(&config.out, "accel", "mewa lab accel", config)?;
    let work = folder.path().join("work");
    std::fs::create_dir_all(&work).map_err(ExperimentError::io("creating", &work))?;
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(folder.path().join(JOURNAL))
        .map_err(ExperimentError::io("opening", folder.path().join(JOURNAL)))?;
    let total = config.down_kbps.len()
        * config.runs
        * corpus.pages.len()
        * config.variants.len()
        * config.tools.len();
    let mut runs = Vec::new();
    let groups = groups_of(&corpus);
    for &down in &config.down_kbps {
        let radio = link_of(
            config.rtt_ms,
            RateSpec::Constant { bps: down * 1000 },
            RateSpec::Constant {
                bps: config.up_kbps * 1000,
            },
        );
        let wired = link_of(
            config.wired_rtt_ms,
            RateSpec::Unlimited,
            RateSpec::Unlimited,
        );
        let http = mewa_origin::HttpOptions {
            max_age: config.max_age_s,
            ..mewa_origin::HttpOptions::default()
        };
        let bed = Bed::start_with_edge_grouped(
            &corpus,
            radio,
            LinkOptions::default(),
            wired,
            &OriginSettings {
                congestion: "cubic".into(),
                ca_dir: ca_dir.clone(),
                iw: None,
            },
            groups.clone(),
            http,
        )?;
        let (mut accel, sites) = start_accel(&bed, &corpus, &ca_dir, &work)?;
        if config.dns && config.tools.iter().any(|t| t == CHROMIUM) {
            accel.dns = Some(start_both_dns(&bed, &corpus, accel.addr, &sites, &work)?);
        }
        for run in 0..config.runs {
            for page in &corpus.pages {
                // Rotate the variants' order from run to run, so a drift
                // favours none; accel-warm always follows accel-cold's
                // fetch of the page at least once (the cache is warm from
                // the first accelerated load on).
                let mut order = config.variants.clone();
                let k = run % order.len();
                order.rotate_left(k);
                for tool in &config.tools {
                    for variant in &order {
                        progress.step(
                            runs.len(),
                            total,
                            &format!("{down} kbit/s {} {variant} {tool}", page.name),
                        );
                        let keep = config.keep_netlogs.then(|| {
                            folder
                                .path()
                                .join("chromium")
                                .join(format!("{down}-{variant}-{}-{run}.netlog.json", page.name))
                        });
                        let r = load_one(
                            &bed,
                            &accel,
                            &sites,
                            config,
                            page,
                            (variant, tool, down),
                            &work,
                            keep.as_deref(),
                        )
                        .unwrap_or_else(|e| Err(e.to_string()));
                        let row = AccelRun {
                            down_kbps: down,
                            variant: variant.clone(),
                            tool: tool.clone(),
                            page: page.name.clone(),
                            run,
                            plt_s: r.as_ref().ok().map(|x| x.0),
                            connections: r.as_ref().ok().and_then(|x| x.1),
                            error: r.err(),
                        };
                        if let Some(e) = &row.error {
                            tracing::warn!("{down} kbit/s {variant} {tool} {}: {e}", page.name);
                        }
                        if let Ok(line) = serde_json::to_string(&row) {
                            use std::io::Write;
                            let _ = writeln!(journal, "{line}");
                        }
                        runs.push(row);
                        // Let connections close and queues drain.
                        std::thread::sleep(Duration::from_millis(config.rtt_ms * 2));
                    }
                }
            }
        }
        accel.server.stop();
        if let Some((_, _, servers)) = accel.dns.take() {
            for s in servers {
                s.stop();
            }
        }
        bed.shutdown()?;
    }
    let _ = std::fs::remove_dir_all(&work);
    progress.step(total, total, "done");
    Ok(report(config, runs, Some(folder)))
}

/// One load: (PLT s, connections) or why it failed.
#[allow(clippy::too_many_arguments)]
fn load_one(
    bed: &Bed,
    accel: &Running,
    sites: &[Arc<Site>],
    config: &AccelLabConfig,
    page: &Page,
    (variant, tool, down_kbps): (&str, &str, u64),
    work: &Path,
    keep_netlog: Option<&Path>,
) -> Result<Result<(f64, Option<usize>), String>, ExperimentError> {
    let through_accel = matches!(variant, ACCEL_COLD | ACCEL_WARM | ACCEL_MEH);
    if variant == ACCEL_COLD {
        accel.accel.cache().purge(&Purge::All);
    }
    let scheme = if variant == H1 { "http" } else { "https" };
    let main = page.root().map(|r| r.host.clone()).unwrap_or_default();
    let site = sites.iter().find(|s| s.serves(&main));
    let site_hosts: Vec<String> = site
        .map(|s| s.hosts().map(str::to_owned).collect())
        .unwrap_or_default();
    let page = match (through_accel, site) {
        (true, Some(site)) => folded_page(page, site, scheme),
        (true, None) => return Ok(Err(format!("{}: no site for {main}", page.name))),
        (false, _) => page.clone(),
    };
    let mut resolver = bed.resolver();
    if through_accel {
        for h in &site_hosts {
            resolver.hosts.insert(h.clone(), accel.addr);
        }
    }
    match tool {
        LOADER => {
            let (protocol, tls) = match variant {
                H1 => (Protocol::H1, false),
                HTTPS => (Protocol::H1, true),
                _ => (Protocol::H2, true),
            };
            let mut opts = bed.options(LoadOptions::browser(protocol, tls));
            opts.resolver = resolver;
            if variant == ACCEL_MEH {
                opts.connections = meh_connections(&page, config, down_kbps);
                opts.assign = Arc::new(mewa_loader::LeastOutstanding);
            }
            let record = bed.load(&page, &opts)?;
            let failed: Vec<_> = record.objects.iter().filter(|o| !o.ok()).collect();
            Ok(match record.done_us {
                Some(us) if failed.is_empty() && record.errors.is_empty() => {
                    Ok((us as f64 / 1e6, Some(record.connections.len())))
                }
                _ => Err(match failed.first() {
                    Some(o) => format!(
                        "{} objects failed, first {} ({})",
                        failed.len(),
                        o.url,
                        o.error.clone().unwrap_or_else(|| format!(
                            "status {}, {} body bytes",
                            o.status, o.body_bytes
                        ))
                    ),
                    None => record.errors.first().cloned().unwrap_or_default(),
                }),
            })
        }
        _ => {
            let dns = accel
                .dns
                .as_ref()
                .map(|(direct, through, _)| if through_accel { *through } else { *direct });
            Ok(chromium_load(
                bed,
                config,
                &page,
                (variant, scheme),
                &resolver,
                (dns, &accel.certs),
                work,
                keep_netlog,
            ))
        }
    }
}

/// The Mobile Edge Hint client's connection count for `page` on this
/// link: seed 000 Algorithm 1 (the client's printed model, at most its 6).
fn meh_connections(page: &Page, config: &AccelLabConfig, down_kbps: u64) -> usize {
    let path =
        mewa_model::http::TcpPath::new(down_kbps as f64 * 1000.0, config.rtt_ms as f64 / 1000.0);
    match path {
        Ok(path) => {
            mewa_model::http::choose_connections(
                page.total_bytes(),
                &path,
                mewa_client::advice::MAX_CONNECTIONS,
                mewa_model::http::SlowStartModel::Printed,
            )
            .n as usize
        }
        Err(_) => 1,
    }
}

/// One headless Chromium load; its NetLog's span for the page's objects.
/// With `dns`, Chromium asks that server (port 53, across the link) for
/// every name; without, `resolver`'s mapping is given as
/// `--host-resolver-rules`.
#[allow(clippy::too_many_arguments)]
fn chromium_load(
    bed: &Bed,
    config: &AccelLabConfig,
    page: &Page,
    (variant, scheme): (&str, &str),
    resolver: &mewa_loader::Resolver,
    (dns, certs): (Option<IpAddr>, &mewa_origin::Certs),
    work: &Path,
    keep_netlog: Option<&Path>,
) -> Result<(f64, Option<usize>), String> {
    let topo = bed.running().map_err(|e| e.to_string())?;
    let profile = work.join("profile");
    let netlog = work.join("load.netlog.json");
    let _ = std::fs::remove_dir_all(&profile);
    let mut rules: Vec<String> = resolver
        .hosts
        .iter()
        .map(|(h, a)| format!("MAP {h} {a}"))
        .collect();
    rules.sort();
    rules.push(match resolver.default {
        Some(a) => format!("MAP * {a}"),
        None => "MAP * ~NOTFOUND".into(),
    });
    let mut cmd = match dns {
        Some(server) => {
            // A private mount namespace puts a resolv.conf naming the
            // server over the machine's.
            let conf = work.join("resolv.conf");
            std::fs::write(
                &conf,
                format!("nameserver {server}\noptions timeout:2 attempts:2\n"),
            )
            .map_err(|e| format!("writing {}: {e}", conf.display()))?;
            crate::replay::with_bind_mount(topo, &conf, "/etc/resolv.conf", &config.chromium)
                .map_err(|e| e.to_string())?
        }
        None => {
            let mut c = topo
                .command(crate::bed::CLIENT, &config.chromium)
                .map_err(|e| e.to_string())?;
            c.arg(format!("--host-resolver-rules={}", rules.join(",")));
            c
        }
    };
    if variant == HTTPS {
        cmd.arg("--disable-http2");
    }
    let url = page
        .root()
        .map(|r| r.url(scheme))
        .ok_or_else(|| format!("{}: no root document", page.name))?;
    let files = mewa_chromium::LoadFiles {
        profile: &profile,
        netlog: &netlog,
        keep: keep_netlog,
    };
    let a = mewa_chromium::load_once(
        &mut cmd,
        &config.chromium,
        page,
        &url,
        files,
        &certs.leaf_spki_sha256,
    )?;
    if let Some(first) = a.missing.first() {
        return Err(format!(
            "{} of {} objects missing, first {first}",
            a.missing.len(),
            a.objects
        ));
    }
    a.plt_s
        .map(|p| (p, None))
        .ok_or_else(|| "no page load time in the NetLog".into())
}

/// The report: per tool, the median PLT per rate and variant, the
/// accelerator's reduction against HTTP/2 per domain beside seed 004's
/// "about a third", and the figure like seed 004 Fig. 6.
pub fn report(
    config: &AccelLabConfig,
    runs: Vec<AccelRun>,
    folder: Option<ResultFolder>,
) -> SectionReport {
    let mut sections = Vec::new();
    let mut plots = Vec::new();
    let tools: Vec<&str> = [CHROMIUM, LOADER]
        .into_iter()
        .filter(|t| runs.iter().any(|r| r.tool == *t))
        .collect();
    let variants: Vec<&str> = ALL_VARIANTS
        .into_iter()
        .filter(|v| runs.iter().any(|r| r.variant == *v))
        .collect();
    for tool in tools {
        // A page counts at a rate only if every variant loaded it at least
        // once there: the medians then compare the same pages (a page that
        // fails in one variant would otherwise leave only the others').
        let mut loaded: std::collections::BTreeSet<(&str, u64, &str)> = Default::default();
        for r in runs.iter().filter(|r| r.tool == tool && r.plt_s.is_some()) {
            loaded.insert((r.page.as_str(), r.down_kbps, r.variant.as_str()));
        }
        let complete =
            |page: &str, rate: u64| variants.iter().all(|v| loaded.contains(&(page, rate, *v)));
        // (rate, variant) → PLTs.
        let mut cells: BTreeMap<(u64, &str), Vec<f64>> = BTreeMap::new();
        let mut failed: BTreeMap<(u64, &str), usize> = BTreeMap::new();
        let mut left_out: BTreeMap<u64, std::collections::BTreeSet<&str>> = BTreeMap::new();
        for r in runs.iter().filter(|r| r.tool == tool) {
            let v = ALL_VARIANTS
                .into_iter()
                .find(|v| *v == r.variant)
                .unwrap_or(H1);
            match r.plt_s {
                Some(p) if complete(&r.page, r.down_kbps) => {
                    cells.entry((r.down_kbps, v)).or_default().push(p)
                }
                Some(_) => {
                    left_out.entry(r.down_kbps).or_default().insert(&r.page);
                }
                None => *failed.entry((r.down_kbps, v)).or_default() += 1,
            }
        }
        let mut rates: Vec<u64> = runs
            .iter()
            .filter(|r| r.tool == tool)
            .map(|r| r.down_kbps)
            .collect();
        rates.sort_unstable();
        rates.dedup();
        let mut header = vec!["downlink kbit/s".to_owned()];
        header.extend(variants.iter().map(|v| format!("{v} s")));
        header.push("warm vs h2".into());
        header.push("cold vs h2".into());
        header.push("loads (failed)".into());
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = Table::new(&header);
        let mut meets = 0;
        let mut compared = 0;
        for &rate in &rates {
            let med = |v: &str| cells.get(&(rate, v)).and_then(|x| median(x));
            let mut row = vec![rate.to_string()];
            for v in &variants {
                row.push(med(v).map_or("-".into(), |m| format!("{m:.2}")));
            }
            let vs = |v: &str| match (med(v), med(H2)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
                _ => None,
            };
            let warm = vs(ACCEL_WARM);
            if let Some(w) = warm {
                compared += 1;
                if w <= -1.0 / 3.0 {
                    meets += 1;
                }
            }
            let pct = |x: f64| format!("{:+.1} %", x * 100.0);
            row.push(warm.map_or("-".into(), pct));
            row.push(vs(ACCEL_COLD).map_or("-".into(), pct));
            let n: usize = variants
                .iter()
                .map(|v| cells.get(&(rate, *v)).map_or(0, Vec::len))
                .sum();
            let f: usize = variants
                .iter()
                .map(|v| failed.get(&(rate, *v)).copied().unwrap_or(0))
                .sum();
            row.push(format!("{n} ({f})"));
            t.push(row);
        }
        sections.push(Section {
            title: format!(
                "Page load time by downlink rate, median ({tool}; RTT {} ms, uplink {} kbit/s)",
                config.rtt_ms, config.up_kbps
            ),
            csv: if tool == CHROMIUM {
                "plt_chromium.csv"
            } else {
                "plt_loader.csv"
            },
            table: t,
            note: format!(
                "Seed 004 Fig. 6: the accelerator shortens the page load \"by about a third\" \
                 against SPDY. Target: accel-warm at least 33.3 % below h2 at every rate; \
                 met at {meets} of {compared} rates.{}",
                if left_out.is_empty() {
                    String::new()
                } else {
                    let n: usize = left_out.values().map(|p| p.len()).sum();
                    format!(
                        " Left out of the medians: {n} page-rate pairs that did not load in every \
                         variant (see the per-page table)."
                    )
                }
            ),
        });
        let series: Vec<Series> = variants
            .iter()
            .enumerate()
            .map(|(i, v)| Series {
                name: (*v).to_owned(),
                points: rates
                    .iter()
                    .filter_map(|&r| {
                        let m = cells.get(&(r, *v)).and_then(|x| median(x))?;
                        Some(((r as f64).log2(), m))
                    })
                    .collect(),
                mark: Mark::Line,
                colour: i,
            })
            .collect();
        let reduction = |v: &str, colour: usize| Series {
            name: format!("{v} vs h2"),
            points: rates
                .iter()
                .filter_map(|&r| {
                    let a = cells.get(&(r, v)).and_then(|x| median(x))?;
                    let b = cells.get(&(r, H2)).and_then(|x| median(x))?;
                    (b > 0.0).then(|| ((r as f64).log2(), (a / b - 1.0) * 100.0))
                })
                .collect(),
            mark: Mark::Line,
            colour,
        };
        let mut lines: Vec<Series> = [ACCEL_WARM, ACCEL_COLD, ACCEL_MEH]
            .into_iter()
            .enumerate()
            .filter(|(_, v)| variants.contains(v))
            .map(|(i, v)| reduction(v, i))
            .collect();
        lines.push(Series {
            name: "seed 004: about -33 %".into(),
            points: rates
                .iter()
                .map(|&r| ((r as f64).log2(), -100.0 / 3.0))
                .collect(),
            mark: Mark::Points,
            colour: 3,
        });
        plots.push(Plot {
            file: format!("reduction_{tool}.svg"),
            title: format!(
                "Page load time through the accelerator against HTTP/2 per domain ({tool})"
            ),
            x_label: "downlink, log2 kbit/s (7 = 128, 12 = 4096)".into(),
            y_label: "change of the median PLT, %".into(),
            series: lines,
        });
        plots.push(Plot {
            file: format!("plt_{tool}.svg"),
            title: format!("Page load time against downlink rate ({tool}), like seed 004 Fig. 6"),
            x_label: "downlink, log2 kbit/s (7 = 128, 12 = 4096)".into(),
            y_label: "page load time, s (median)".into(),
            series,
        });
        if let Some(section) = per_page(&runs, tool, &variants) {
            sections.push(section);
        }
    }
    SectionReport {
        name: "accel",
        sections,
        plots,
        json: serde_json::json!({ "runs": runs }),
        extra: Vec::new(),
        folder,
    }
}

/// With several pages (recordings), each page's median PLT per rate and
/// variant, and the warm accelerator against h2: which pages gain, and
/// which lose.
fn per_page(runs: &[AccelRun], tool: &str, variants: &[&str]) -> Option<Section> {
    let mut pages: Vec<&str> = runs
        .iter()
        .filter(|r| r.tool == tool)
        .map(|r| r.page.as_str())
        .collect();
    pages.sort_unstable();
    pages.dedup();
    if pages.len() < 2 {
        return None;
    }
    let mut cells: BTreeMap<(&str, u64, &str), Vec<f64>> = BTreeMap::new();
    let mut failed: BTreeMap<(&str, u64, &str), usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.tool == tool) {
        let key = (r.page.as_str(), r.down_kbps, r.variant.as_str());
        match r.plt_s {
            Some(p) => cells.entry(key).or_default().push(p),
            None => *failed.entry(key).or_default() += 1,
        }
    }
    let mut header = vec!["page".to_owned(), "downlink kbit/s".to_owned()];
    header.extend(variants.iter().map(|v| format!("{v} s")));
    header.push("warm vs h2".into());
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&header);
    let mut rates: Vec<u64> = runs.iter().map(|r| r.down_kbps).collect();
    rates.sort_unstable();
    rates.dedup();
    let (mut gained, mut compared) = (0, 0);
    for page in &pages {
        for &rate in &rates {
            let med = |v: &str| cells.get(&(*page, rate, v)).and_then(|x| median(x));
            let mut row = vec![(*page).to_owned(), rate.to_string()];
            for v in variants {
                row.push(match (med(v), failed.get(&(*page, rate, *v))) {
                    (Some(m), None) => format!("{m:.2}"),
                    (Some(m), Some(f)) => format!("{m:.2} ({f} failed)"),
                    (None, Some(f)) => format!("- ({f} failed)"),
                    (None, None) => "-".into(),
                });
            }
            let change = match (med(ACCEL_WARM), med(H2)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
                _ => None,
            };
            if let Some(c) = change {
                compared += 1;
                if c < 0.0 {
                    gained += 1;
                }
            }
            row.push(change.map_or("-".into(), |c| format!("{:+.1} %", c * 100.0)));
            t.push(row);
        }
    }
    Some(Section {
        title: format!("Per page, median ({tool})"),
        csv: if tool == CHROMIUM {
            "pages_chromium.csv"
        } else {
            "pages_loader.csv"
        },
        table: t,
        note: format!("The warm accelerator is faster than HTTP/2 per domain for {gained} of {compared} pages and rates."),
    })
}

/// The report of an earlier run, from its result folder (`runs.jsonl`).
pub fn report_again(dir: &Path) -> Result<SectionReport, ExperimentError> {
    let config: AccelLabConfig = mewa_report::read_config(&dir.join("config.json"))?;
    let runs = mewa_report::Journal::<AccelRun>::open(dir)?.into_records();
    let folder = ResultFolder::existing(dir)?;
    Ok(report(&config, runs, Some(folder)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mewa_corpus::{Discovery, Object};

    #[test]
    fn accel7_folds_its_seven_image_domains_into_the_main_host() {
        let corpus = generate(Preset::Accel7, 1);
        let page = &corpus.pages[0];
        let site = site_of(page).expect("site");
        assert_eq!(site.hosts, vec!["www.accel7.example".to_owned()]);
        assert_eq!(site.fold.len(), 7);
        let s = Arc::new(Site::new(&site).expect("valid"));
        let folded = folded_page(page, &s, "https");
        let hosts: std::collections::BTreeSet<&str> =
            folded.objects.iter().map(|o| o.host.as_str()).collect();
        assert_eq!(hosts.len(), 1, "{hosts:?}");
        let img = folded
            .objects
            .iter()
            .find(|o| o.path.ends_with("/images/01.jpg"))
            .expect("image 1");
        assert_eq!(img.path, "/img1.accel7.example/images/01.jpg");
        assert_eq!(folded.objects.len(), page.objects.len());
        // The document comes out shorter: 42 references lost their scheme
        // and host, each `https://` + host - "/" = 8 bytes + the host.
        let root = folded.root().expect("root");
        let before = page.root().expect("root").size;
        assert!(root.size < before, "{} vs {before}", root.size);
        // Every host its own server.
        assert_eq!(groups_of(&corpus).len(), 8);
    }

    fn obj(
        id: u32,
        host: &str,
        path: &str,
        ct: &str,
        parent: Option<u32>,
        how: Discovery,
    ) -> Object {
        Object {
            id,
            host: host.into(),
            path: path.into(),
            size: 2000,
            content_type: ct.into(),
            parent,
            discovery: how,
            compute_ms: 0,
            status: None,
            think_ms: 0,
            recorded_size: None,
        }
    }

    #[test]
    fn only_what_the_accelerator_rewrites_folds() {
        // a.example redirects to www.a.example, whose document has a
        // stylesheet and an image on b.example, a frame on c.example, and
        // a script on b.example that fetches an image from b.example.
        let mut root = obj(0, "a.example", "/", "text/html", None, Discovery::Html);
        root.status = Some(302);
        let page = Page {
            name: "p".into(),
            main: "https://a.example/".into(),
            objects: vec![
                root,
                obj(
                    1,
                    "www.a.example",
                    "/",
                    "text/html",
                    Some(0),
                    Discovery::Redirect,
                ),
                obj(
                    2,
                    "b.example",
                    "/s.css",
                    "text/css",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    3,
                    "b.example",
                    "/bg.png",
                    "image/png",
                    Some(2),
                    Discovery::Css,
                ),
                obj(
                    4,
                    "b.example",
                    "/x.png",
                    "image/png",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    5,
                    "c.example",
                    "/frame.html",
                    "text/html",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    6,
                    "b.example",
                    "/app.js",
                    "application/javascript",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    7,
                    "b.example",
                    "/late.png",
                    "image/png",
                    Some(6),
                    Discovery::Script,
                ),
                // `&udc=` is literal in an attribute and folds; the
                // rewriter leaves a value with a named reference it does
                // not decode (`&hellip;`) alone rather than guess at it.
                obj(
                    8,
                    "b.example",
                    "/q.gif?a=1&udc=2",
                    "image/gif",
                    Some(1),
                    Discovery::Html,
                ),
                obj(
                    9,
                    "b.example",
                    "/r.gif?t=&hellip;",
                    "image/gif",
                    Some(1),
                    Discovery::Html,
                ),
            ],
            shared_connections: Vec::new(),
        };
        let cfg = site_of(&page).expect("site");
        assert_eq!(
            cfg.hosts,
            vec!["a.example".to_owned(), "www.a.example".to_owned()]
        );
        assert_eq!(
            cfg.fold,
            vec!["b.example".to_owned(), "c.example".to_owned()]
        );
        let site = Arc::new(Site::new(&cfg).expect("valid"));
        let f = folded_page(&page, &site, "https");
        let at = |id: usize| (f.objects[id].host.as_str(), f.objects[id].path.as_str());
        assert_eq!(at(2), ("www.a.example", "/b.example/s.css"));
        assert_eq!(at(3), ("www.a.example", "/b.example/bg.png"));
        assert_eq!(at(4), ("www.a.example", "/b.example/x.png"));
        assert_eq!(at(5), ("c.example", "/frame.html"));
        assert_eq!(at(6), ("www.a.example", "/b.example/app.js"));
        assert_eq!(at(7), ("b.example", "/late.png"));
        assert_eq!(at(8), ("www.a.example", "/b.example/q.gif?a=1&udc=2"));
        assert_eq!(at(9), ("b.example", "/r.gif?t=&hellip;"));
    }

    #[test]
    fn pages_sharing_a_host_share_a_site() {
        let a = SiteConfig {
            hosts: vec!["a.example".into()],
            fold: vec!["b.example".into()],
            prefix: String::new(),
        };
        let b = SiteConfig {
            hosts: vec!["a.example".into(), "www.a.example".into()],
            fold: vec!["c.example".into(), "a.example".into()],
            prefix: String::new(),
        };
        let merged = merge_sites(vec![a, b]);
        assert_eq!(merged.len(), 1);
        assert_eq!(
            merged[0].hosts,
            vec!["a.example".to_owned(), "www.a.example".to_owned()]
        );
        assert_eq!(
            merged[0].fold,
            vec!["b.example".to_owned(), "c.example".to_owned()]
        );
        assert!(Site::new(&merged[0]).is_ok());
    }

    #[test]
    fn the_report_compares_warm_with_h2_against_a_third() {
        let mut runs = Vec::new();
        for (v, plt) in [(H2, 3.0), (ACCEL_WARM, 1.9), (ACCEL_COLD, 2.2), (H1, 4.0)] {
            for run in 0..3 {
                runs.push(AccelRun {
                    down_kbps: 512,
                    variant: v.into(),
                    tool: CHROMIUM.into(),
                    page: "accel7".into(),
                    run,
                    plt_s: Some(plt + run as f64 * 0.01),
                    connections: None,
                    error: None,
                });
            }
        }
        let r = report(&AccelLabConfig::default(), runs, None);
        let text = mewa_report::Report::text(&r);
        assert!(
            text.contains("-36.5 %") || text.contains("-36.6 %"),
            "{text}"
        );
        assert!(text.contains("met at 1 of 1 rates"), "{text}");
    }

    #[test]
    fn bad_settings_are_named() {
        let mut c = AccelLabConfig {
            tools: vec![LOADER.into()],
            ..AccelLabConfig::default()
        };
        c.variants = vec!["spdy".into()];
        assert!(check(&c).unwrap_err().to_string().contains("spdy"));
        c.variants = vec![H2.into()];
        c.tools = vec!["curl".into()];
        assert!(check(&c).unwrap_err().to_string().contains("curl"));
        c.tools = vec![LOADER.into()];
        c.down_kbps = vec![0];
        assert!(check(&c).is_err());
    }
}
